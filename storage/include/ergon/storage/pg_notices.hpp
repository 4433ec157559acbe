// pg_notices: a PostgreSQL session that LISTENs on a channel and waits for
// its notifications (storage/src/pg_notices.cpp). The inbox's owner wakes
// on them (pg_schema.cpp, version 5).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/storage/pg_db.hpp"

namespace ergon::storage {

class pg_notices {
 public:
  /// Opens a session and LISTENs on `channel`, a plain identifier.
  /// Errors: pg_db::open's, and the LISTEN's.
  static result<std::unique_ptr<pg_notices>> open(const pg_options& opts,
                                                  const std::string& channel);

  ~pg_notices();
  pg_notices(const pg_notices&) = delete;
  pg_notices& operator=(const pg_notices&) = delete;

  /// Waits up to `timeout` for notifications and returns their payloads,
  /// oldest first: none if the time passed or interrupt() was called.
  /// Notifications that came meanwhile are returned without a wait.
  /// Errors: unreachable once the session is lost; a notification may
  /// have been missed then, and the session does not come back: open a
  /// new one.
  result<std::vector<std::string>> wait(std::chrono::milliseconds timeout);

  /// Makes a wait under way, and every later one, return at once. Safe
  /// from any thread.
  void interrupt() noexcept;

 private:
  pg_notices(std::unique_ptr<pg_db> session, int wake_fd) noexcept;
  std::unique_ptr<pg_db> session_;
  int wake_fd_;  // an eventfd: readable once interrupt() was called
};

}  // namespace ergon::storage
