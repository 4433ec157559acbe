// queue_link: where a worker stands with its queue, and what each turn of
// the connection (joined, asked to stop, let go, lost) asks of it next.
// No actors: the worker actor does the steps this returns.
#pragma once

#include <cstdint>

namespace ergon::actors {

/// Where a worker stands with its queue.
enum class worker_phase : uint8_t {
  joining,       ///< its registration is on its way
  running,       ///< registered: takes jobs
  lost,          ///< remote: the connection dropped and it is not registered again
                 ///< yet; the queue fails what it handed out as "worker lost",
                 ///< unless it keeps it for the worker (hold_ms)
  stop_joining,  ///< asked to stop before its registration was answered
  leaving,       ///< asked to stop: its unregistration is on its way
  left,          ///< the queue confirmed (or is gone): no more jobs come; outcomes still go
  left_offline,  ///< asked to stop with no connection: outcomes can't go
};

/// What the worker does after a turn, in the order of the fields.
struct link_steps {
  /// Stopping: claims that have not started go back with the next report.
  bool give_back_waiting = false;
  /// The connection dropped: unacknowledged outcomes are answered as such,
  /// claims that have not started are dropped, running code is told to
  /// stop, and the credit starts over.
  bool forget_connection = false;
  /// The connection dropped, and the queue keeps the worker's attempts for
  /// it for hold_ms: they run on, unacknowledged outcomes wait to be sent
  /// again, and the next registration lists them all. Forgotten only if
  /// no registration comes within the hold (hold_expired).
  bool hold_connection = false;
  /// Watch the dispatcher: on a remote worker its loss is the connection's.
  bool watch_queue = false;
  /// Send a report (outcomes, claims given back, room); offline, answer
  /// the outcomes' callers instead.
  bool report = false;
  /// Ask the dispatcher to let the worker go.
  bool unregister = false;
  /// Ask the connection for the queue again, and register once it answers.
  bool rejoin = false;
  /// The queue can't take the worker: answer every stop and quit.
  bool give_up = false;
  /// Stop now if the worker is done: let go, and nothing held or in flight.
  bool stop_if_idle = false;
};

/// A worker's standing with its queue. A remote worker (one that can
/// rejoin) outlives its connection; a local one gives up when the queue does.
class queue_link {
 public:
  explicit queue_link(bool remote) : remote_(remote) {}

  worker_phase phase() const { return phase_; }
  /// The id the dispatcher gave at the last registration (0: none yet).
  uint64_t worker_id() const { return worker_id_; }

  /// Registered: reports go to the dispatcher.
  bool registered() const;
  /// Asked to stop, in any phase.
  bool stopping() const;
  /// No more jobs come: the queue let it go, or it stopped offline.
  bool unregistered() const;

  /// How long the queue keeps a remote worker's attempts for it (ms, from
  /// the last registration); 0: it does not.
  int64_t hold_ms() const { return hold_ms_; }
  /// Whether the connection dropped and attempts are kept for the next
  /// registration.
  bool holding() const { return holding_; }

  /// The dispatcher answered the registration with `id`, and says how long
  /// it keeps a remote worker's attempts (`hold_ms`; 0: not at all).
  link_steps joined(uint64_t id, int64_t hold_ms = 0);
  /// Asked to stop (again: only stop_if_idle).
  link_steps stop();
  /// The dispatcher confirmed the unregistration, or is gone.
  link_steps left();
  /// The registration failed: a remote worker rejoins, a local one gives up.
  link_steps join_failed();
  /// The watched dispatcher went down. Once per drop: a worker that is not
  /// registered has no connection to lose.
  link_steps queue_down();
  /// The hold that began when the connection dropped ended before the
  /// worker registered again: forget what it kept.
  link_steps hold_expired();

 private:
  link_steps lost_connection();

  bool remote_;
  worker_phase phase_ = worker_phase::joining;
  uint64_t worker_id_ = 0;
  int64_t hold_ms_ = 0;
  bool holding_ = false;
};

}  // namespace ergon::actors
