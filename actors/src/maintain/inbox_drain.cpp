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

}  // namespace

// LISTENs on a session of its own, on a thread of its own, and tells the
// drain of each notification for its schema and of each new session.
class inbox_drain::listener {
 public:
  listener(storage::pg_options opts, caf::actor_addr drain)
      : opts_(std::move(opts)), drain_(std::move(drain)) {
    // A stop waits for a connect under way: keep it short.
    opts_.connect_timeout = std::min<std::chrono::milliseconds>(opts_.connect_timeout,
                                                                std::chrono::seconds(2));
    thread_ = std::thread([this] { run(); });
  }

  ~listener() {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      stopping_ = true;
      if (session_)
        session_->interrupt();
    }
    wake_.notify_all();
    thread_.join();
  }

  listener(const listener&) = delete;
  listener& operator=(const listener&) = delete;

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

namespace {

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

void publish(drain_state& st, const drain_reply& r) {
  if ((r.refused.empty() && r.forgotten == 0) || !st.cfg.subs || !st.cfg.subs->any()
      || !st.cfg.events)
    return;
  event_batch batch;
  if (r.forgotten > 0) {
    event e;
    e.kind = event_kind::swept;
    e.at_ms = st.cfg.clock->now_ms();
    e.inbox_entries_deleted = r.forgotten;
    batch.events.push_back(std::move(e));
  }
  for (auto& x : r.refused) {
    event e;
    e.kind = event_kind::inbox_refused;
    e.at_ms = st.cfg.clock->now_ms();
    e.type = x.type;
    e.message = x.why.to_string();
    e.inbox_entry = x.entry;
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
        publish(st, r);
        // A full batch of old entries deleted: more may be due.
        if (r.outcome && r.forgotten == static_cast<int64_t>(st.cfg.batch))
          st.forget_next = true;
        // A failed drain waits for the next notification or sweep.
        if ((r.outcome && (r.more || st.forget_next)) || st.again)
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

inbox_drain::inbox_drain(caf::actor_system& sys, inbox_drain_config cfg) {
  auto pg = cfg.pg;
  // Passed as a spawn argument, not captured (retention_sweeper.cpp says why).
  actor_ = sys.spawn(
    [](drain_ptr self, inbox_drain_config cfg) -> caf::behavior {
      auto& st = self->state;
      st.cfg = std::move(cfg);
      if (!st.cfg.clock->follows_real_time())
        tick_on_advance(self, st.cfg.clock);
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
  listener_ = std::make_unique<listener>(std::move(pg), actor_.address());
}

inbox_drain::~inbox_drain() {
  listener_.reset();
  caf::anon_send_exit(actor_, caf::exit_reason::user_shutdown);
}

}  // namespace ergon::actors
