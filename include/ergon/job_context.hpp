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

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "ergon/error.hpp"
#include "ergon/job_id.hpp"

namespace ergon {

/// The running attempt of one job. Valid only during the handler call.
/// Thread-safe: the handler may pass it to helper threads it joins. Only
/// ergon's workers make one.
class job_context {
 public:
  job_context(const job_context&) = delete;
  job_context& operator=(const job_context&) = delete;

  virtual job_id id() const = 0;
  virtual const std::string& type() const = 0;
  virtual const std::string& group() const = 0;

  /// The payload this attempt runs with: the last checkpoint if an earlier
  /// attempt stored one, else the submitted payload.
  virtual const std::string& payload() const = 0;

  /// 1 for the first attempt, 2 for the first retry, ...
  virtual int32_t try_number() const = 0;

  /// True once the attempt expired (its result will be rejected) or the
  /// worker is stopping. Long jobs should check it and return early.
  virtual bool cancelled() const = 0;

  /// Waits until cancelled() is true or `timeout` passes, and returns
  /// cancelled(): for job code that waits on something else and must stop
  /// promptly when asked, without polling. A timeout of 0 or less doesn't
  /// wait; milliseconds::max() waits without limit. Not an error either way.
  virtual bool wait_cancelled(std::chrono::milliseconds timeout) = 0;

  /// Stores `payload` as what the next attempt receives if this one fails,
  /// and extends the expiry like a heartbeat. Returns once committed.
  /// Errors: invalid_argument (too large), stale_attempt (expired), closed,
  /// and for a worker on another node unreachable (the connection dropped).
  virtual status checkpoint(std::string payload) = 0;

  /// Extends the expiry to at least now + heartbeat_increment. Returns once
  /// committed. Errors: stale_attempt (the attempt already expired), closed,
  /// unreachable (a worker on another node lost its connection).
  virtual status heartbeat() = 0;

  /// Ends the attempt successfully with optional result bytes. Returns once
  /// committed. Errors: invalid_argument naming "result" (larger than the
  /// queue's limit), stale_attempt (the attempt expired: the result is
  /// discarded and the job's state is unchanged), job_finished (complete or
  /// fail was already called), closed, and for a worker on another node
  /// unreachable (the connection dropped before the commit was
  /// acknowledged; the queue fences the outcome if it retried the job).
  virtual status complete(std::string result = {}) = 0;

  /// Ends the attempt as failed with `message`: the job is retried with
  /// backoff, or fails if no retries are left. Returns once committed. Same
  /// errors as complete.
  virtual status fail(std::string message) = 0;

 protected:
  job_context() = default;
  ~job_context() = default;
};

/// Job code for one job type.
using job_handler = std::function<void(job_context&)>;

}  // namespace ergon
