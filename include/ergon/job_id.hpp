// job_id: the external identity of a job, a UUIDv7 (RFC 9562).
//
// Ids sort by creation time (48-bit millisecond timestamp first), so listing
// jobs by id lists them in submission order.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>

#include "ergon/error.hpp"

namespace ergon {

/// A job's external id. The nil id (all zero) is never assigned to a job.
class job_id {
 public:
  using bytes_type = std::array<uint8_t, 16>;

  /// The nil id.
  job_id() noexcept : bytes_{} {}
  explicit job_id(const bytes_type& bytes) noexcept : bytes_(bytes) {}

  /// Parses the canonical 36-character form ("0190163d-8694-739b-aea5-966c26f8ad91").
  /// Fails with invalid_argument naming field "id" on any other input.
  static result<job_id> parse(const std::string& text);

  /// The canonical lowercase 8-4-4-4-12 form.
  std::string to_string() const;

  const bytes_type& bytes() const noexcept { return bytes_; }
  bool is_nil() const noexcept;

  /// The creation time embedded in the id, in ms since the Unix epoch.
  int64_t timestamp_ms() const noexcept;

  friend bool operator==(const job_id& a, const job_id& b) noexcept {
    return a.bytes_ == b.bytes_;
  }
  friend bool operator!=(const job_id& a, const job_id& b) noexcept {
    return !(a == b);
  }
  friend bool operator<(const job_id& a, const job_id& b) noexcept {
    return a.bytes_ < b.bytes_;
  }

 private:
  bytes_type bytes_;
};

std::ostream& operator<<(std::ostream& out, const job_id& id);

}  // namespace ergon

template <>
struct std::hash<ergon::job_id> {
  size_t operator()(const ergon::job_id& id) const noexcept;
};
