#include "next_report.hpp"

#include <algorithm>
#include <iterator>

namespace ergon::actors {

std::optional<report_plan> next_report(uint64_t worker_id, job_runner::outbox& box,
                                       std::vector<storage::attempt_ref>& to_release,
                                       bool stopping, int64_t received_weight,
                                       const report_room& room, last_room& last) {
  int32_t free = 0;
  auto held = box.held_weight;
  if (!stopping && held < room.min_capacity + room.prefetch)
    free = room.max_capacity + room.prefetch - held;
  bool news = !box.outcomes.empty() || !to_release.empty();
  bool asks = free > 0 && (free != last.capacity || received_weight != last.received);
  // A resize is told even without room: the dispatcher's credit shrinks.
  bool resized = room.max_capacity != last.max_capacity;
  if (!news && !asks && !resized && box.returned.empty())
    return std::nullopt;
  report_plan plan;
  auto& r = plan.report;
  r.worker_id = worker_id;
  r.capacity = free;
  r.received_weight = received_weight;
  r.max_capacity = room.max_capacity;
  r.outcomes = std::move(box.outcomes);
  r.returned = std::move(box.returned);
  r.released = std::move(to_release);
  box.outcomes.clear();
  box.returned.clear();
  to_release.clear();
  last = {free, received_weight, room.max_capacity};
  plan.carries_writes = news;
  return plan;
}

int64_t report_hold_us(int64_t answer_us, bool others_held) noexcept {
  return others_held ? std::clamp<int64_t>(answer_us / 8, 0, longest_hold_us) : 0;
}

bool passing_failure(error code) noexcept {
  return code == error::unreachable || code == error::timeout;
}

void reports_in_flight::sent(std::vector<storage::attempt_report> outcomes, replies callers) {
  sent_.push_back({std::move(outcomes), std::move(callers), std::chrono::steady_clock::now()});
}

size_t reports_in_flight::answered(const std::vector<wire_status>& acks, bool resend) {
  if (sent_.empty())
    return 0;
  auto r = std::move(sent_.front());
  sent_.pop_front();
  last_answer_us_ = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::steady_clock::now() - r.sent_at)
                      .count();
  bool failed = false;
  for (size_t i = 0; i < r.callers.size(); ++i) {
    auto st = i < acks.size() ? from_wire(acks[i]) : status{};
    if (resend && passing_failure(st.code()) && i < r.outcomes.size()) {
      failed = true;
      resends_.outcomes.push_back(std::move(r.outcomes[i]));
      resends_.callers.push_back(std::move(r.callers[i]));
    } else if (r.callers[i]) {
      r.callers[i]->deliver(st);
    }
  }
  failed_rounds_ = failed ? std::min(failed_rounds_ + 1, 32) : 0;
  return r.callers.size();
}

int64_t reports_in_flight::resend_wait_ms() const noexcept {
  if (failed_rounds_ <= 1)
    return first_wait_ms;
  return std::min(longest_wait_ms, first_wait_ms << std::min(failed_rounds_ - 1, 16));
}

size_t reports_in_flight::resend_into(job_runner::outbox& box) {
  auto n = resends_.outcomes.size();
  std::move(box.outcomes.begin(), box.outcomes.end(), std::back_inserter(resends_.outcomes));
  std::move(box.replies.begin(), box.replies.end(), std::back_inserter(resends_.callers));
  box.outcomes = std::move(resends_.outcomes);
  box.replies = std::move(resends_.callers);
  resends_ = {};
  return n;
}

void reports_in_flight::drop(const status& why) {
  for (auto& r : sent_)
    for (auto& c : r.callers)
      if (c)
        c->deliver(why);
  sent_.clear();
  for (auto& c : resends_.callers)
    if (c)
      c->deliver(why);
  resends_ = {};
}

void reports_in_flight::keep_for_resend() {
  report kept;
  for (auto& r : sent_) {
    std::move(r.outcomes.begin(), r.outcomes.end(), std::back_inserter(kept.outcomes));
    std::move(r.callers.begin(), r.callers.end(), std::back_inserter(kept.callers));
  }
  sent_.clear();
  std::move(resends_.outcomes.begin(), resends_.outcomes.end(),
            std::back_inserter(kept.outcomes));
  std::move(resends_.callers.begin(), resends_.callers.end(), std::back_inserter(kept.callers));
  resends_ = std::move(kept);
  failed_rounds_ = 0;
}

std::vector<storage::attempt_ref> reports_in_flight::unacknowledged() const {
  std::vector<storage::attempt_ref> out;
  for (auto& r : sent_)
    for (auto& o : r.outcomes)
      out.push_back({o.row, o.token});
  for (auto& o : resends_.outcomes)
    out.push_back({o.row, o.token});
  return out;
}

}  // namespace ergon::actors
