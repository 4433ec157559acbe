#include "next_report.hpp"

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
  if (!news && !asks && box.returned.empty())
    return std::nullopt;
  report_plan plan;
  auto& r = plan.report;
  r.worker_id = worker_id;
  r.capacity = free;
  r.received_weight = received_weight;
  r.outcomes = std::move(box.outcomes);
  r.returned = std::move(box.returned);
  r.released = std::move(to_release);
  box.outcomes.clear();
  box.returned.clear();
  to_release.clear();
  last = {free, received_weight};
  plan.carries_writes = news;
  return plan;
}

size_t reports_in_flight::answered(const std::vector<wire_status>& acks) {
  if (sent_.empty())
    return 0;
  auto callers = std::move(sent_.front());
  sent_.pop_front();
  for (size_t i = 0; i < callers.size(); ++i)
    if (callers[i])
      callers[i]->deliver(i < acks.size() ? from_wire(acks[i]) : status{});
  return callers.size();
}

void reports_in_flight::drop(const status& why) {
  for (auto& callers : sent_)
    for (auto& c : callers)
      if (c)
        c->deliver(why);
  sent_.clear();
}

}  // namespace ergon::actors
