#include "ergon/storage/field_rules.hpp"

#include "ergon/job.hpp"

namespace ergon::storage {

namespace {

// The length of the UTF-8 sequence at s[i], or 0 if there is none there:
// overlong forms, surrogates and code points past U+10FFFF are none.
size_t utf8_sequence(const std::string& s, size_t i) {
  auto at = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  auto c = at(i);
  if (c < 0x80)
    return 1;
  size_t n = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF)
    n = 2;
  else if (c >= 0xE0 && c <= 0xEF)
    n = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
  else if (c >= 0xF0 && c <= 0xF4)
    n = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
  else
    return 0;
  if (i + n > s.size() || at(i + 1) < lo || at(i + 1) > hi)
    return 0;
  for (size_t k = 2; k < n; ++k)
    if (at(i + k) < 0x80 || at(i + k) > 0xBF)
      return 0;
  return n;
}

// "U+001B": a code point below U+10000, as Unicode writes it.
std::string code_point(unsigned cp) {
  static constexpr char digits[] = "0123456789ABCDEF";
  std::string out = "U+";
  for (int shift = 12; shift >= 0; shift -= 4)
    out += digits[(cp >> shift) & 0xf];
  return out;
}

// The failure of a check: field names come in as views of literals, so
// that the passing path builds no string.
status refused(std::string_view field, std::string what) {
  return invalid_field(std::string{field}, std::move(what));
}

}  // namespace

status check_label(std::string_view field, const std::string& value) {
  if (value.empty())
    return refused(field, "must not be empty");
  return check_label_size(field, value);
}

status check_label_size(std::string_view field, const std::string& value) {
  return check_text(field, value, max_type_bytes);
}

namespace {

// Why `value` is no text of at most `limit` bytes; empty if it is.
std::string text_problem(const std::string& value, size_t limit) {
  if (value.size() > limit)
    return "is " + std::to_string(value.size()) + " bytes; the limit is " + std::to_string(limit);
  for (size_t i = 0; i < value.size();) {
    auto n = utf8_sequence(value, i);
    if (n == 0)
      return "is not UTF-8 (byte " + std::to_string(i) + ")";
    auto c = static_cast<unsigned char>(value[i]);
    unsigned cp = n == 1   ? c
                  : n == 2 ? ((c & 0x1Fu) << 6) | (static_cast<unsigned char>(value[i + 1]) & 0x3Fu)
                           : 0x800;
    if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F))
      return "holds a control character (" + code_point(cp) + " at byte " + std::to_string(i)
             + ")";
    i += n;
  }
  return {};
}

}  // namespace

status check_text(std::string_view field, const std::string& value, size_t limit) {
  auto problem = text_problem(value, limit);
  return problem.empty() ? status{} : refused(field, std::move(problem));
}

status check_tag_key(std::string_view field, const std::string& key) {
  if (key.empty())
    return refused(field, "holds an empty key");
  auto problem = text_problem(key, max_tag_key_bytes);
  // A key that is no text is not repeated in the message.
  return problem.empty() ? status{} : refused(field, "a key " + problem);
}

status check_tags(std::string_view field, const std::map<std::string, std::string>& tags,
                  size_t most) {
  if (tags.size() > most)
    return refused(field, "holds " + std::to_string(tags.size()) + " tags; the limit is "
                            + std::to_string(most));
  for (auto& [key, value] : tags) {
    if (auto st = check_tag_key(field, key); !st)
      return st;
    if (auto problem = text_problem(value, max_tag_value_bytes); !problem.empty())
      return refused(field, "the value of '" + key + "' " + problem);
  }
  return {};
}

status check_key(std::string_view field, const std::string& value) {
  if (value.empty())
    return refused(field, "must not be empty");
  if (value.size() > max_type_bytes)
    return refused(field, "is " + std::to_string(value.size()) + " bytes; the limit is "
                                  + std::to_string(max_type_bytes));
  return {};
}

status check_weight(std::string_view field, int64_t value) {
  if (value < 1 || value > max_weight)
    return refused(field, "must be between 1 and " + std::to_string(max_weight)
                                  + ", got " + std::to_string(value));
  return {};
}

status check_prefetch(std::string_view field, int64_t value) {
  if (value < 0 || value > max_weight)
    return refused(field, "must be between 0 and " + std::to_string(max_weight)
                                  + ", got " + std::to_string(value));
  return {};
}

status check_positive_ms(std::string_view field, int64_t ms) {
  if (ms <= 0)
    return refused(field, "must be > 0 ms, got " + std::to_string(ms));
  return {};
}

status check_not_negative_ms(std::string_view field, int64_t ms) {
  if (ms < 0)
    return refused(field, "must be >= 0 ms, got " + std::to_string(ms));
  return {};
}

status check_not_negative(std::string_view field, int64_t value) {
  if (value < 0)
    return refused(field, "must be >= 0, got " + std::to_string(value));
  return {};
}

std::string as_text(std::string bytes) {
  size_t i = 0;
  size_t n = 0;
  while (i < bytes.size() && bytes[i] != '\0' && (n = utf8_sequence(bytes, i)) != 0)
    i += n;
  if (i == bytes.size())
    return bytes;  // the common case: no copy
  static constexpr char digits[] = "0123456789abcdef";
  std::string out = bytes.substr(0, i);
  while (i < bytes.size()) {
    n = bytes[i] == '\0' ? 0 : utf8_sequence(bytes, i);
    if (n == 0) {
      auto c = static_cast<unsigned char>(bytes[i]);
      out += "\\x";
      out += digits[c >> 4];
      out += digits[c & 0xf];
      n = 1;
    } else {
      out.append(bytes, i, n);
    }
    i += n;
  }
  return out;
}

std::string log_text(std::string text) {
  text = as_text(std::move(text));
  if (text.size() > max_log_line_bytes) {
    auto end = max_log_line_bytes;
    while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80)
      --end;  // text[end] starts the sequence that would be cut
    text.resize(end);
  }
  return text;
}

status check_log_line(const log_line& line) {
  if (line.seq < 0 || line.seq >= max_log_lines)
    return invalid_field("seq", "must be 0 to " + std::to_string(max_log_lines - 1) + ", got "
                                  + std::to_string(line.seq));
  if (static_cast<uint8_t>(line.level) > static_cast<uint8_t>(log_level::error))
    return invalid_field("level", "is not a log_level: "
                                    + std::to_string(static_cast<int>(line.level)));
  if (line.text.size() > max_log_line_bytes)
    return invalid_field("text", "is " + std::to_string(line.text.size())
                                   + " bytes; the limit is " + std::to_string(max_log_line_bytes));
  return {};
}

status check_progress(int64_t done, int64_t total, const std::string& message) {
  if (auto st = check_not_negative("done", done); !st)
    return st;
  if (auto st = check_not_negative("total", total); !st)
    return st;
  if (total != 0 && done > total)
    return invalid_field("done", std::to_string(done) + " is more than the total ("
                                   + std::to_string(total) + ")");
  if (message.size() > max_progress_message_bytes)
    return invalid_field("message", "is " + std::to_string(message.size())
                                      + " bytes; the limit is "
                                      + std::to_string(max_progress_message_bytes));
  return {};
}

status check_payload_size(std::string_view field, size_t bytes, size_t limit) {
  if (limit != 0 && bytes > limit)
    return invalid_field(std::string{field}, "is " + std::to_string(bytes)
                                               + " bytes; the queue's limit is "
                                               + std::to_string(limit));
  return {};
}

}  // namespace ergon::storage
