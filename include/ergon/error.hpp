// Error codes, status and result<T>: how every ergon call reports failure.
//
//   ergon::result<ergon::job_id> id = q.submit(job);
//   if (!id) {
//     if (id.error().code() == ergon::error::invalid_argument)
//       std::cerr << "bad field " << id.error().field() << '\n';
//     return;
//   }
//   use(*id);
//
// Nothing in ergon throws for an expected failure; a call returns a status or
// a result<T>. Check for the specific code you can handle.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <utility>
#include <variant>

namespace ergon {

/// What went wrong. The numeric values are frozen: they cross the network to
/// remote workers. New codes are only ever appended, so switch statements over
/// this enum need a `default:` branch.
enum class error : uint8_t {
  /// Not an error.
  none = 0,
  /// A field of the input is invalid; `status::field()` names it. Nothing was
  /// written. Don't retry: fix the input.
  invalid_argument = 1,
  /// No job has this id. Don't retry.
  not_found = 2,
  /// The job is running, and the operation needs a pending job. Retrying after
  /// the attempt ends fails with `job_finished` or succeeds if it was retried.
  job_running = 3,
  /// The job already succeeded, failed, expired or was cancelled. Don't retry.
  job_finished = 4,
  /// The attempt token is no longer current: the attempt expired, or was
  /// failed by recovery, and the job moved on. The call changed nothing.
  stale_attempt = 5,
  /// A deadline passed before the operation finished (for example
  /// `queue::close` with running jobs). The state on disk is consistent.
  timeout = 6,
  /// Another process held the database lock for longer than `busy_timeout`.
  /// Nothing was written; retrying the same call may succeed.
  busy = 7,
  /// The database file can't be written (permissions, read-only medium).
  /// Don't retry until the file is fixed.
  read_only = 8,
  /// The disk, or the configured database size limit, is full. Nothing was
  /// written. Retry after freeing space.
  storage_full = 9,
  /// An I/O error from the operating system. Nothing was acknowledged.
  io_error = 10,
  /// The file is not an ergon database, is corrupt, or was written by a newer
  /// ergon (schema version too high). Don't retry.
  corrupt = 11,
  /// The queue was closed. Don't retry on this handle.
  closed = 12,
  /// A job was asked to stop: queue::cancel requested it (heartbeats and
  /// checkpoints are refused from then on), it expired, or the worker is
  /// shutting down.
  cancelled = 13,
  /// A broken invariant inside ergon: please report it.
  internal = 14,
  /// The queue is on another node and the connection to it is down. A
  /// connected handle reconnects by itself (with backoff); retry later.
  /// A write whose answer this replaced may or may not have committed.
  unreachable = 15,
  /// The other side refused to authenticate, or this side refused it: a
  /// wrong or missing shared secret, or an untrusted certificate. Nothing
  /// was read or written. Don't retry until the credentials are fixed.
  unauthenticated = 16,
  /// Something with this identity already exists: a recurring job with this
  /// id (add_recurring), or an unfinished job holding this unique key, or a
  /// finished one within its hold (job::unique_key with
  /// unique_policy::reject; the message names the holder). Nothing was
  /// written. Don't retry the same call.
  already_exists = 17,
  /// The caller authenticated, but its role may not do this (roles:
  /// listen_options::worker_secret, client_secret, certificate_roles); the
  /// message names the role it lacks. Nothing was read or written. Don't
  /// retry with the same credentials.
  forbidden = 18,
};

/// Returns the code's name, e.g. "invalid_argument".
const char* to_string(error code) noexcept;
std::ostream& operator<<(std::ostream& out, error code);

/// The outcome of an operation: ok, or an error code with a message and, for
/// `invalid_argument`, the name of the offending field.
class status {
 public:
  /// An ok status.
  status() noexcept = default;

  /// An error status. `code` must not be `error::none`.
  status(error code, std::string message, std::string field = {})
      : code_(code), message_(std::move(message)), field_(std::move(field)) {}

  /// Returns true if the operation succeeded.
  bool ok() const noexcept { return code_ == error::none; }
  explicit operator bool() const noexcept { return ok(); }

  error code() const noexcept { return code_; }

  /// A human-readable description; empty when ok.
  const std::string& message() const noexcept { return message_; }

  /// For `invalid_argument`: the field at fault, e.g. "weight". Otherwise empty.
  const std::string& field() const noexcept { return field_; }

  /// "ok", or "<code>: <message>" (the message names the field, if any).
  std::string to_string() const;

 private:
  error code_ = error::none;
  std::string message_;
  std::string field_;
};

std::ostream& operator<<(std::ostream& out, const status& st);

/// Shorthand for `status(error::invalid_argument, ...)` naming `field`.
status invalid_field(std::string field, std::string what);

/// A value of type T, or the status saying why there is none.
/// Reading `value()` of an error, or `error()` of a value, is a checked
/// programming error (std::bad_variant_access), never undefined behaviour.
template <class T>
class result {
 public:
  result(T value) : state_(std::move(value)) {}  // NOLINT: implicit on purpose
  result(status failure) : state_(std::move(failure)) {}  // NOLINT

  bool has_value() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  /// The failure; an ok status when this holds a value.
  status error() const {
    return has_value() ? status{} : std::get<1>(state_);
  }

 private:
  std::variant<T, status> state_;
};

}  // namespace ergon
