// How job ids are made: a UUIDv7 whose counter bits hold the row id.
//
//   48 bits  unix_ts_ms      creation time
//    4 bits  version (7)
//   12 bits  rand_a          high bits of the database's 30-bit id tag
//    2 bits  variant (10)
//   18 bits  rand_b high     low bits of the id tag
//   44 bits  rand_b low      the job's row id
//
// RFC 9562 allows rand_b to hold a counter. Using the row id means a lookup
// by id needs no index of its own: decode the row, read it, compare the id
// stored in it. Ids of one database sort by (time, row); the random tag keeps
// ids of different databases apart.
#pragma once

#include <cstdint>
#include <optional>

#include "ergon/job_id.hpp"

namespace ergon::storage {

/// Highest row id an id can hold (2^44 - 1, about 17.6 trillion jobs).
inline constexpr int64_t max_row_id = (int64_t{1} << 44) - 1;

/// The id of row `row` created at `now_ms` in a database with tag `tag`.
job_id make_job_id(int64_t now_ms, uint32_t tag, int64_t row) noexcept;

/// The row id inside `id`, or nothing if `id` is not an ergon UUIDv7.
std::optional<int64_t> row_of(const job_id& id) noexcept;

}  // namespace ergon::storage
