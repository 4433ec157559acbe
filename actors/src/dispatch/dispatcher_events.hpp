// dispatcher_events: the events the dispatcher publishes, built from a
// commit feed and from what the scheduling policy reports. Internal to the
// dispatcher; pure functions, no actors.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "attempt_table.hpp"
#include "ergon/actors/commit_feed.hpp"
#include "ergon/actors/scheduling_policy.hpp"
#include "ergon/event.hpp"

namespace ergon::actors {

/// The events of commit feed `f`, in the order of its parts, once the
/// dispatcher has applied it. `picks` are the picked jobs of its claims by
/// row (for started and job_aged); `attempts` and `names` are the
/// dispatcher's after the feed (for heartbeat). `now` dates everything but
/// started and job_aged, which carry the claim's time.
std::vector<event> feed_events(const commit_feed& f, int64_t now,
                               const std::unordered_map<int64_t, picked_job>& picks,
                               const attempt_table& attempts, const scheduling_policy& names);

/// One group_allocation_changed event per change.
std::vector<event> allocation_events(const std::vector<allocation_change>& changes, int64_t now);

/// One job_too_heavy event per job, naming its weight and the largest
/// worker of its type. `id_tag` is the database's, to name the jobs.
std::vector<event> too_heavy_events(const std::vector<pending_job>& jobs,
                                    const scheduling_policy& policy, uint32_t id_tag,
                                    int64_t now);

/// The running attempt `a` was asked to yield for job `preemptor`, which
/// waits at `preemptor_priority`.
event preempted_event(const attempt_table::attempt& a, const scheduling_policy& names,
                      const job_id& preemptor, int32_t preemptor_priority, int64_t now);

/// A yielded job is ready again.
event resumed_event(const storage::job_key& k, int64_t now);

}  // namespace ergon::actors
