#include "ergon/storage/field_rules.hpp"

#include "ergon/job.hpp"

namespace ergon::storage {

status check_label(const std::string& field, const std::string& value) {
  if (value.empty())
    return invalid_field(field, "must not be empty");
  return check_label_size(field, value);
}

status check_label_size(const std::string& field, const std::string& value) {
  if (value.size() > max_type_bytes)
    return invalid_field(field, "is " + std::to_string(value.size()) + " bytes; the limit is "
                                  + std::to_string(max_type_bytes));
  return {};
}

status check_weight(const std::string& field, int64_t value) {
  if (value < 1 || value > max_weight)
    return invalid_field(field, "must be between 1 and " + std::to_string(max_weight)
                                  + ", got " + std::to_string(value));
  return {};
}

status check_prefetch(const std::string& field, int64_t value) {
  if (value < 0 || value > max_weight)
    return invalid_field(field, "must be between 0 and " + std::to_string(max_weight)
                                  + ", got " + std::to_string(value));
  return {};
}

status check_positive_ms(const std::string& field, int64_t ms) {
  if (ms <= 0)
    return invalid_field(field, "must be > 0 ms, got " + std::to_string(ms));
  return {};
}

status check_not_negative_ms(const std::string& field, int64_t ms) {
  if (ms < 0)
    return invalid_field(field, "must be >= 0 ms, got " + std::to_string(ms));
  return {};
}

status check_not_negative(const std::string& field, int64_t value) {
  if (value < 0)
    return invalid_field(field, "must be >= 0, got " + std::to_string(value));
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

}  // namespace ergon::storage
