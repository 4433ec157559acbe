// job_status values as SQL literals, for statement text. Internal to storage/.
//
// Statuses are stored as these integers (schema.cpp: frozen): statements
// name the values, and the asserts below tie each name to job_status.
#pragma once

#include "ergon/job_info.hpp"

#define ERGON_SQL_PENDING "0"
#define ERGON_SQL_RUNNING "1"
#define ERGON_SQL_SUCCEEDED "2"
#define ERGON_SQL_FAILED "3"
#define ERGON_SQL_CANCELLED "4"
#define ERGON_SQL_EXPIRED "5"
#define ERGON_SQL_WAITING "6"
/// The statuses of jobs that have not ended, for `status IN (...)`.
#define ERGON_SQL_UNFINISHED ERGON_SQL_PENDING ", " ERGON_SQL_RUNNING ", " ERGON_SQL_WAITING

namespace ergon::storage {

constexpr int sql_status(job_status s) { return static_cast<int>(s); }

static_assert(sql_status(job_status::pending) == 0 && sql_status(job_status::running) == 1
                && sql_status(job_status::succeeded) == 2 && sql_status(job_status::failed) == 3
                && sql_status(job_status::cancelled) == 4 && sql_status(job_status::expired) == 5
                && sql_status(job_status::waiting) == 6,
              "the ERGON_SQL_ status literals follow job_status");
static_assert(job_status_count == 7, "a new status needs its ERGON_SQL_ literal");

}  // namespace ergon::storage
