// Job tags (job::tags): written with their job by insert_jobs, read into
// job_info by listings, removed with the job (ON DELETE CASCADE). Internal
// to storage/.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/storage/db.hpp"

namespace ergon::storage {

/// The tags of the job at `row`.
struct row_tags {
  int64_t row = 0;
  const std::map<std::string, std::string>* tags = nullptr;
};

/// Writes the tags of new jobs, whose rows exist; one statement on
/// PostgreSQL.
status insert_tags(db& d, const std::vector<row_tags>& rows);

/// Reads the tags of the job at `row` into `out`.
status read_tags(db& d, int64_t row, std::map<std::string, std::string>& out);

}  // namespace ergon::storage
