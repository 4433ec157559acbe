#include "queue_link.hpp"

namespace ergon::actors {

bool queue_link::registered() const {
  return phase_ == worker_phase::running || phase_ == worker_phase::leaving
         || phase_ == worker_phase::left;
}

bool queue_link::stopping() const {
  return phase_ != worker_phase::joining && phase_ != worker_phase::running
         && phase_ != worker_phase::lost;
}

bool queue_link::unregistered() const {
  return phase_ == worker_phase::left || phase_ == worker_phase::left_offline;
}

link_steps queue_link::joined(uint64_t id, int64_t hold_ms) {
  link_steps out;
  worker_id_ = id;
  hold_ms_ = remote_ ? hold_ms : 0;
  holding_ = false;
  // Asked to stop meanwhile: it registered only to leave.
  out.unregister = stopping();
  phase_ = phase_ == worker_phase::stop_joining   ? worker_phase::leaving
           : phase_ == worker_phase::left_offline ? worker_phase::left
                                                  : worker_phase::running;
  out.watch_queue = remote_;
  out.report = true;
  return out;
}

link_steps queue_link::stop() {
  link_steps out;
  out.stop_if_idle = true;
  if (stopping())
    return out;
  out.give_back_waiting = true;
  switch (phase_) {
    case worker_phase::running:
      phase_ = worker_phase::leaving;
      out.report = true;
      out.unregister = true;
      break;
    case worker_phase::lost:
      phase_ = worker_phase::left_offline;  // no queue to leave: it lost us already
      out.forget_connection = holding_;  // the kept attempts won't be listed
      holding_ = false;
      out.report = true;
      break;
    default:
      phase_ = worker_phase::stop_joining;  // leaves once registered
      break;
  }
  return out;
}

link_steps queue_link::left() {
  if (phase_ == worker_phase::leaving)
    phase_ = worker_phase::left;
  link_steps out;
  out.stop_if_idle = true;
  return out;
}

link_steps queue_link::join_failed() {
  if (remote_)
    return lost_connection();
  link_steps out;
  out.give_up = true;
  return out;
}

link_steps queue_link::queue_down() {
  if (remote_ && registered())
    return lost_connection();
  return {};
}

link_steps queue_link::hold_expired() {
  link_steps out;
  if (!holding_ || phase_ != worker_phase::lost)
    return out;
  holding_ = false;
  out.forget_connection = true;
  return out;
}

// The queue fails what it handed out as "worker lost" and retries it, or
// keeps it for the worker if it said so; what the code reports from now on
// goes after the next registration, fenced.
link_steps queue_link::lost_connection() {
  link_steps out;
  bool stays = remote_ && !stopping();
  if (stays && (holding_ || (hold_ms_ > 0 && registered()))) {
    out.hold_connection = !holding_;  // once per drop; a failed rejoin keeps holding
    holding_ = true;
    phase_ = worker_phase::lost;
    out.rejoin = true;
    return out;
  }
  holding_ = false;
  out.forget_connection = true;
  phase_ = stopping() ? worker_phase::left_offline : worker_phase::lost;
  if (phase_ == worker_phase::left_offline) {
    out.report = true;  // answers the outcomes' callers
    out.stop_if_idle = true;
  } else {
    out.rejoin = true;
  }
  return out;
}

}  // namespace ergon::actors
