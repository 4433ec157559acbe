// The statement that finds the jobs a job_filter matches, a page at a time,
// shared by list_jobs, retry_failed and delete_finished. The filter picks
// one access path, each a range of an index or of the row ids (never a
// scan of the table):
//  - tags:                     job_tags_by_value (the first tag's key and value)
//  - name:                     jobs_by_name
//  - tag_prefix:               job_tags_by_value (the keys' range)
//  - failed/cancelled/expired: jobs_unsuccessful (dead_letter_status, id)
//  - pending/running:          row ids from the unfinished low mark
//  - otherwise:                row ids from the cursor
// Other fields filter the rows of that range. Internal to storage/.
#pragma once

#include <cstdint>
#include <string>

#include "ergon/listing.hpp"
#include "ergon/storage/db.hpp"

namespace ergon::storage::filter_sql {

/// What the statement does with the rows it finds.
enum class use : uint8_t {
  info,     ///< SELECT ERGON_JOB_INFO_COLUMNS (rows::read_info)
  rows,     ///< SELECT id, external_id
  removal,  ///< DELETE them, RETURNING id, type, status
};

/// The statement for the rows `f` matches past the cursor, in id order
/// (descending with newest_first), at most ?11 of them, in engine `e`'s SQL.
/// Bind with bind(). A constant string (db::prepare caches by address).
const char* select(use u, const job_filter& f, bool newest_first, engine e);

/// Where a range of rows starts and ends, exclusive: `after` is the cursor
/// (0 or INT64_MAX for none, by direction), `far_end` the other end.
struct range {
  int64_t after = 0;
  int64_t far_end = INT64_MAX;
};

/// Binds the parameters of select(): the range, the low mark (for the
/// unfinished path), the filter's fields and the limit.
void bind(stmt& s, const job_filter& f, range r, int64_t low_mark, int64_t limit);

/// The least UTF-8 string above every string that starts with `prefix` (a
/// tag key: UTF-8, not empty, not all U+10FFFF); empty if there is none.
std::string prefix_end(std::string prefix);

}  // namespace ergon::storage::filter_sql
