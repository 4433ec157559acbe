// put_recurring: adding or updating a recurring job (storage/src/put_recurring.cpp).
#pragma once

#include <map>
#include <string>

#include <cstddef>
#include <cstdint>
#include <optional>

#include "ergon/error.hpp"
#include "ergon/job_id.hpp"
#include "ergon/recurring.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

/// How put_recurring treats an id that exists, or doesn't.
enum class put_mode : uint8_t {
  add,     ///< error already_exists if it exists
  update,  ///< error not_found if it doesn't
  upsert,  ///< either
};

struct put_recurring_args {
  recurring_job job;
  put_mode mode = put_mode::add;
  size_t max_payload_bytes = 0;
  /// As insert_jobs_args::retry_policies: applied to the template.
  const std::map<std::string, backoff_policy>* retry_policies = nullptr;
};

struct put_recurring_result {
  /// The unfinished instance's id (nil if the schedule has no time left).
  job_id instance;
  /// A new recurring job's first instance (also after an update found none).
  std::optional<job_key> created;
  /// The pending instance, given the new template (and, if the schedule
  /// changed, the schedule's next time after now).
  std::optional<key_change> changed;
  /// A pending instance cancelled because the template changed its type,
  /// group or weight; `created` replaces it.
  std::optional<job_key> superseded;
  /// What cancelling `superseded` did to the jobs waiting on it.
  dependents_settled dependents;
};

/// Adds or updates a recurring job, with its instance, in one transaction.
/// A new one whose deleted namesake's instance still runs adopts it.
/// A new one gets its first instance at the first slot after now (or now,
/// with run_now). An update that keeps the schedule and zone keeps the
/// pending instance's time; one that changes either moves it to the new
/// schedule's first slot after now, and later slots count from now. The
/// template applies to the pending instance and later ones (one whose type,
/// group or weight changes is cancelled and replaced by a new instance at
/// the same time); a running instance finishes as it started. With no slot
/// left before the year 10000 there is no instance (`instance` is nil). Errors: invalid_argument (validate),
/// already_exists (add), not_found (update).
result<put_recurring_result> put_recurring(db& d, const put_recurring_args& args,
                                           int64_t now_ms);

}  // namespace ergon::storage
