// field_rules: the limits that a job's fields and the queue's options share,
// each written once with its message. Every check returns ok or
// `invalid_field(field, ...)`.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "ergon/error.hpp"
#include "ergon/job.hpp"
#include "ergon/job_info.hpp"

namespace ergon::storage {

/// A type, name, group or recurring id: 1 to max_type_bytes bytes of
/// UTF-8 without control characters (U+0000 to U+001F, U+007F to U+009F).
/// Labels reach metrics, logs and the dashboard as they are.
status check_label(std::string_view field, const std::string& value);

/// The same, but may be empty: for names such as the group "" of jobs
/// without one.
status check_label_size(std::string_view field, const std::string& value);

/// Text of at most `limit` bytes of UTF-8 without control characters.
status check_text(std::string_view field, const std::string& value, size_t limit);

/// A tag key: 1 to max_tag_key_bytes, as check_text.
status check_tag_key(std::string_view field, const std::string& key);

/// At most `most` tags, each a tag key and a value of 0 to
/// max_tag_value_bytes, as check_text. Errors name the key.
status check_tags(std::string_view field, const std::map<std::string, std::string>& tags,
                  size_t most = max_tags);

/// A unique key: 1 to max_type_bytes bytes of any kind (a hash, say).
status check_key(std::string_view field, const std::string& value);

/// A weight or a capacity in weight units: 1 to max_weight.
status check_weight(std::string_view field, int64_t value);

/// Weight units a worker holds beyond max_concurrency: 0 to max_weight.
status check_prefetch(std::string_view field, int64_t value);

/// A payload (or checkpoint, or result) of `bytes` under the queue's
/// limit (options::max_payload_bytes; 0: none).
status check_payload_size(std::string_view field, size_t bytes, size_t limit);

/// A duration that must be > 0 ms.
status check_positive_ms(std::string_view field, int64_t ms);

/// A duration that must be >= 0 ms.
status check_not_negative_ms(std::string_view field, int64_t ms);

/// A time or size that must be >= 0.
status check_not_negative(std::string_view field, int64_t value);

/// Longest progress message, in bytes.
inline constexpr size_t max_progress_message_bytes = 1'024;

/// A progress report: 0 <= done, 0 <= total, done <= total unless total is
/// 0 (unknown), and a message of at most max_progress_message_bytes.
status check_progress(int64_t done, int64_t total, const std::string& message);

/// Job logs (job_context::log): a line's text is cut to this many bytes;
/// an attempt keeps at most max_log_lines lines and max_log_bytes bytes
/// of text (the ceilings of worker_options::log_lines and log_bytes).
inline constexpr size_t max_log_line_bytes = 4'096;
inline constexpr int32_t max_log_lines = 1'000;
inline constexpr int64_t max_log_bytes = 1 << 20;

/// `text` as a log line keeps it: as_text, then cut to max_log_line_bytes
/// on a UTF-8 boundary.
std::string log_text(std::string text);

/// A line as a worker hands it over: seq 0 to max_log_lines - 1, a level
/// of log_level, and text of at most max_log_line_bytes.
status check_log_line(const log_line& line);

/// `bytes` as text that both engines store alike: each byte that is not part
/// of a UTF-8 sequence, and each NUL, becomes "\xNN" (PostgreSQL's text
/// holds neither). For the messages job code writes (failures, progress).
std::string as_text(std::string bytes);

}  // namespace ergon::storage
