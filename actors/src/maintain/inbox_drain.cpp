#include "ergon/actors/inbox_drain.hpp"

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "ergon/storage/pg_notices.hpp"
#include "ergon/storage/times.hpp"
#include "clock_ticks.hpp"

namespace ergon::actors {
namespace {

// Sent by the listening thread: entries may wait.
using inbox_atom = caf::atom_constant<caf::atom("inbox")>;

// The channel that ergon.submit() notifies, with the schema as payload
// (pg_schema.cpp, version 5).
constexpr const char* channel = "ergon_inbox";

// LISTENs on a session of its own, on a thread of its own, and tells the
// drain of each notification for its schema and of each new session.
class inbox_listener {
 public:
  inbox_listener(storage::pg_options opts, caf::actor_addr drain)
      : opts_(std::move(opts)), drain_(std::move(drain)) {
    // A stop waits for a connect under way: keep it short.
    opts_.connect_timeout = std::min<std::chrono::milliseconds>(opts_.connect_timeout,
                                                                std::chrono::seconds(2));
    thread_ = std::thread([this] { run(); });
  }

  ~inbox_listener() {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      stopping_ = true;
      if (session_)
        session_->interrupt();
    }
    wake_.notify_all();
    thread_.join();
  }

  inbox_listener(const inbox_listener&) = delete;
  inbox_listener& operator=(const inbox_listener&) = delete;

 private:
  void ring() {
    if (auto hdl = caf::actor_cast<caf::actor>(drain_))
      caf::anon_send(hdl, inbox_atom::value);
  }

  void run() {
    auto backoff = min_backoff;
    for (;;) {
      auto opened = storage::pg_notices::open(opts_, channel);
      std::unique_lock<std::mutex> lock{mtx_};
      if (stopping_)
        return;
      if (!opened) {
        // The queue's own sessions report the server's troubles; the sweep
        // drains meanwhile.
        wake_.wait_for(lock, backoff, [this] { return stopping_; });
        backoff = std::min(backoff * 2, max_backoff);
        continue;
      }
      session_ = std::move(*opened);
      auto* session = session_.get();
      lock.unlock();
      backoff = min_backoff;
      ring();  // entries committed while nobody listened
      for (;;) {
        auto got = session->wait(std::chrono::seconds(60));
        if (!got)
          break;
        if (std::any_of(got->begin(), got->end(),
                        [this](const std::string& schema) { return schema == opts_.schema; }))
          ring();
        std::lock_guard<std::mutex> guard{mtx_};
        if (stopping_)
          break;
      }
      lock.lock();
      session_.reset();
      if (stopping_)
        return;
    }
  }

  static constexpr std::chrono::milliseconds min_backoff{100};
  static constexpr std::chrono::milliseconds max_backoff{5'000};
  storage::pg_options opts_;
  caf::actor_addr drain_;
  std::mutex mtx_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::unique_ptr<storage::pg_notices> session_;
  std::thread thread_;
};

struct drain_state {
  inbox_drain_config cfg;
  bool in_flight = false;
  bool again = false;        // asked for while one was under way
  bool forget_next = false;  // the sweep's drain also forgets old entries
  int64_t next_sweep_at = 0;
  bool timer_armed = false;

  static inline const char* name = "ergon.inbox";
};

using drain_ptr = caf::stateful_actor<drain_state>*;

void publish(drain_state& st, const std::vector<storage::inbox_refusal>& refused) {
  if (refused.empty() || !st.cfg.subs || !st.cfg.subs->any() || !st.cfg.events)
    return;
  event_batch batch;
  for (auto& r : refused) {
    event e;
    e.kind = event_kind::inbox_refused;
    e.at_ms = st.cfg.clock->now_ms();
    e.type = r.type;
    e.message = r.why.to_string();
    e.inbox_entry = r.entry;
    batch.events.push_back(std::move(e));
  }
  caf::anon_send(st.cfg.events, std::move(batch));
}

void drain(drain_ptr self) {
  auto& st = self->state;
  if (st.in_flight) {
    st.again = true;
    return;
  }
  st.in_flight = true;
  st.again = false;
  drain_step step{st.cfg.batch, st.forget_next};
  st.forget_next = false;
  self->request(st.cfg.writer, caf::infinite, step)
    .then(
      [self](drain_reply& r) {
        auto& st = self->state;
        st.in_flight = false;
        publish(st, r.refused);
        // A failed drain waits for the next notification or sweep.
        if ((r.outcome && r.more) || st.again)
          drain(self);
      },
      [self](caf::error&) {
        // The writer is gone: the queue is closing.
        self->state.in_flight = false;
      });
}

void arm_timer(drain_ptr self) {
  auto& st = self->state;
  if (st.timer_armed || !st.cfg.clock->follows_real_time())
    return;  // a manual clock ticks on every advance
  st.timer_armed = true;
  auto wait = std::max<int64_t>(0, st.next_sweep_at - st.cfg.clock->now_ms());
  self->delayed_send(self, storage::timer_delay(wait), tick_atom::value);
}

void on_tick(drain_ptr self) {
  auto& st = self->state;
  auto now = st.cfg.clock->now_ms();
  if (now >= st.next_sweep_at) {
    st.next_sweep_at = storage::add_ms(now, st.cfg.sweep_every.count());
    st.forget_next = true;
    drain(self);
  }
  arm_timer(self);
}

}  // namespace

caf::actor spawn_inbox_drain(caf::actor_system& sys, inbox_drain_config cfg) {
  // Passed as a spawn argument, not captured (retention_sweeper.cpp says why).
  return sys.spawn(
    [](drain_ptr self, inbox_drain_config cfg) -> caf::behavior {
      auto& st = self->state;
      st.cfg = std::move(cfg);
      if (!st.cfg.clock->follows_real_time())
        tick_on_advance(self, st.cfg.clock);
      // Its thread is joined when the drain ends.
      self->attach_functor(
        [listener = std::make_shared<inbox_listener>(st.cfg.pg, self->address())]() mutable {
          listener.reset();
        });
      on_tick(self);
      return {
        [self](tick_atom) {
          self->state.timer_armed = false;
          on_tick(self);
        },
        [self](inbox_atom) { drain(self); },
      };
    },
    std::move(cfg));
}

}  // namespace ergon::actors
