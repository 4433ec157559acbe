// list_jobs: pages of the jobs a filter matches (storage/src/list_jobs.cpp).
#pragma once

#include "ergon/error.hpp"
#include "ergon/listing.hpp"
#include "ergon/storage/db.hpp"

namespace ergon::storage {

/// One page of the jobs `filter` matches (listing.hpp), with their attempts.
/// Served by one range of an index or of the row ids (job_filter_sql.hpp);
/// reads rows of that range until `page.limit` match. Errors:
/// invalid_argument ("limit", "after", or a filter field).
result<job_page> list_jobs(db& d, const job_filter& filter, const page_request& page);

/// The statement list_jobs runs for `filter`, for EXPLAIN QUERY PLAN.
const char* list_jobs_sql(const job_filter& filter, bool newest_first,
                          engine e = engine::sqlite);

}  // namespace ergon::storage
