// text: what ergonctl reads from flags and prints for people.
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <ergon/error.hpp>
#include <ergon/job_info.hpp>

#include "ergon/storage/times.hpp"

namespace ergon::ctl {

/// A time: ms since the epoch, or ISO 8601 in UTC ("2026-11-25",
/// "2026-11-25T10:00:00Z", "2026-11-25 10:00:00.250"). Error:
/// invalid_argument naming `flag`.
result<int64_t> parse_time(const std::string& text, const std::string& flag);

/// A duration >= 0 ("250ms", "90s"), as storage/times.hpp reads it.
using storage::parse_duration;

/// `text` safe for a terminal: control characters (C0, DEL, C1) and bytes
/// that are not UTF-8 become \xNN escapes, and a backslash becomes "\\",
/// so a job field can't move the cursor or fake a line of output.
std::string printable(const std::string& text);

/// This machine's time, in ms since the epoch.
int64_t now_ms();

/// "2026-11-25 10:00:00.123Z".
std::string format_time(int64_t ms);

/// A short age or span: "850ms", "42s", "5m03s", "3h12m", "4d07h".
std::string format_span(int64_t ms);

/// "NAME on HOST pid PID", or "worker #ID" once its record is gone;
/// "-" for an attempt recorded before the queue recorded workers.
std::string worker_text(const worker_identity& w);

/// Columns padded to their widest cell, the header first; every cell
/// passes through printable().
void print_table(std::ostream& out, const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows);

}  // namespace ergon::ctl
