// text: what ergonctl reads from flags and prints for people.
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <ergon/error.hpp>

namespace ergon::ctl {

/// A time: ms since the epoch, or ISO 8601 in UTC ("2026-11-25",
/// "2026-11-25T10:00:00Z", "2026-11-25 10:00:00.250"). Error:
/// invalid_argument naming `flag`.
result<int64_t> parse_time(const std::string& text, const std::string& flag);

/// A duration >= 0: a number with a unit (ms, s, m, h, d: "250ms", "90s",
/// "1h30m" is not accepted) or bare ms. Error: invalid_argument naming
/// `flag` (no number, unknown unit, negative, or past the ms range).
result<std::chrono::milliseconds> parse_duration(const std::string& text,
                                                 const std::string& flag);

/// "2026-11-25 10:00:00.123Z".
std::string format_time(int64_t ms);

/// A short age or span: "850ms", "42s", "5m03s", "3h12m", "4d07h".
std::string format_span(int64_t ms);

/// Columns padded to their widest cell, the header first.
void print_table(std::ostream& out, const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows);

}  // namespace ergon::ctl
