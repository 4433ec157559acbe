// ownership: one open queue per database file, across processes and within
// one. Internal to ergon.
//
// The owner holds flock(2) on "<database>-owner". The OS drops the lock when
// the process dies, even by SIGKILL, so a crash never blocks the next open.
// flock, unlike fcntl locks, conflicts between two opens in one process, and
// closing the lock file never touches the locks SQLite holds on the database.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ergon/error.hpp"

namespace ergon::storage {

class ownership {
 public:
  /// Takes ownership of the database at `db_path` and records this process
  /// (pid and host) in the lock file. Errors: busy (another open queue owns
  /// it; the message names its pid and host), io_error or read_only (the
  /// lock file can't be made: missing or unwritable directory).
  static result<std::unique_ptr<ownership>> acquire(const std::string& db_path);

  /// The lock file that guards `db_path`: the real path of the database
  /// (symlinks resolved) plus "-owner".
  static result<std::string> lock_path(const std::string& db_path);

  ownership(const ownership&) = delete;
  ownership& operator=(const ownership&) = delete;
  /// Removes the lock file, then releases the lock.
  ~ownership();

 private:
  ownership(int fd, std::string path) noexcept : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
};

}  // namespace ergon::storage
