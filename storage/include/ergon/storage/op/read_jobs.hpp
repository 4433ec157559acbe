// read_job and read_jobs_by_name: reading jobs (storage/src/read_jobs.cpp).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/job_id.hpp"
#include "ergon/job_info.hpp"
#include "ergon/storage/db.hpp"

namespace ergon::storage {

/// The job with this id, with its attempts. Error: not_found.
result<job_info> read_job(db& d, const job_id& id);

/// Jobs with this name, oldest first (possibly none), at most `limit`.
result<std::vector<job_info>> read_jobs_by_name(db& d, const std::string& name, size_t limit);

}  // namespace ergon::storage
