// job_context: what job code receives while it runs.
//
//   worker_opts.runners["resize"] = [](ergon::job_context& ctx) {
//     auto image = ergon::unpack<image_spec>(ctx.payload());  // msgpack.hpp
//     for (auto& tile : tiles(*image)) {
//       if (ctx.cancelled()) return;      // expired or shutting down
//       render(tile);
//       ctx.heartbeat();                  // keeps a long job alive
//     }
//     ctx.complete(summary_bytes);        // or just return: success
//   };
//
// Returning normally completes the job. Throwing fails the attempt with the
// exception's text; the worker keeps running.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "ergon/error.hpp"
#include "ergon/job_id.hpp"

namespace ergon {

namespace actors {
class running_attempt;
}  // namespace actors

/// The running attempt of one job. Valid only during the handler call.
/// Thread-safe: the handler may pass it to helper threads it joins.
class job_context {
 public:
  explicit job_context(actors::running_attempt& attempt) noexcept : a_(attempt) {}

  job_id id() const;
  const std::string& type() const;
  const std::string& group() const;

  /// The payload this attempt runs with: the last checkpoint if an earlier
  /// attempt stored one, else the submitted payload.
  const std::string& payload() const;

  /// 1 for the first attempt, 2 for the first retry, ...
  int32_t try_number() const;

  /// True once the attempt expired (its result will be rejected) or the
  /// worker is stopping. Long jobs should check it and return early.
  bool cancelled() const;

  /// Stores `payload` as what the next attempt receives if this one fails,
  /// and extends the expiry like a heartbeat. Returns once committed.
  /// Errors: invalid_argument (too large), stale_attempt (expired), closed.
  status checkpoint(std::string payload);

  /// Extends the expiry to at least now + heartbeat_increment. Returns once
  /// committed. Errors: stale_attempt (the attempt already expired), closed.
  status heartbeat();

  /// Ends the attempt successfully with optional result bytes. Returns once
  /// committed. Errors: stale_attempt (the attempt expired: the result is
  /// discarded and the job's state is unchanged), job_finished (complete or
  /// fail was already called), closed.
  status complete(std::string result = {});

  /// Ends the attempt as failed with `message`: the job is retried with
  /// backoff, or fails if no retries are left. Returns once committed. Same
  /// errors as complete.
  status fail(std::string message);

 private:
  actors::running_attempt& a_;
};

/// Job code for one job type.
using job_handler = std::function<void(job_context&)>;

}  // namespace ergon
