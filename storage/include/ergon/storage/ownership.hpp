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
#include <optional>
#include <string>
#include <vector>

#include "ergon/error.hpp"

namespace ergon::storage {

class ownership {
 public:
  /// Takes ownership of the database at `db_path` and records this process
  /// (pid and host) in the lock file, mode 0644. Whatever else sits at the
  /// lock file's name (a symlink, a FIFO, another user's file that no live
  /// process locks) is removed and replaced; a symlink's target is never
  /// opened. Errors: busy (another open queue owns it; the message names
  /// its pid and host), io_error or read_only (the lock file can't be made
  /// or replaced: missing or unwritable directory, another user's symlink
  /// in a sticky directory).
  static result<std::unique_ptr<ownership>> acquire(const std::string& db_path);

  /// The lock file that guards `db_path`: the real path of the database
  /// (symlinks resolved) plus "-owner".
  static result<std::string> lock_path(const std::string& db_path);

  /// Adds to the lock file where this owner takes remote connections, so
  /// that tools find it (ergonctl). Errors: io_error.
  status record_listener(const std::string& address, uint16_t port, bool secret, bool tls);

  /// What a lock file says: the owner's pid and host, and its listeners.
  struct record {
    int64_t pid = 0;
    std::string host;
    struct listener {
      std::string address;
      uint16_t port = 0;
      bool secret = false;
      bool tls = false;
    };
    std::vector<listener> listeners;
  };

  /// Parses a lock file's text; empty if it isn't one (or is still being
  /// written).
  static std::optional<record> parse(const std::string& text);

  /// The owner of `db_path` now: its lock file's record, if the file exists
  /// and its process lives (checked on this host; one on another host is
  /// taken at its word). A lock file that its writer can't have been the
  /// owner's is ignored (empty): a symlink, not a regular file, owned by
  /// neither this user nor the database's owner, or writable by group or
  /// others. Host and addresses come with control bytes replaced by '?'.
  /// Takes no lock, so it never gets in an open's way. Errors: io_error
  /// (the lock file exists but can't be read).
  static result<std::optional<record>> find(const std::string& db_path);

  ownership(const ownership&) = delete;
  ownership& operator=(const ownership&) = delete;
  /// Removes the lock file, then releases the lock.
  ~ownership();

 private:
  ownership(int fd, std::string path, std::string text) noexcept
      : fd_(fd), path_(std::move(path)), text_(std::move(text)) {}
  int fd_;
  std::string path_;
  std::string text_;  // what the lock file holds
};

/// This machine's host name (gethostname); empty if it has none.
std::string host_name();

}  // namespace ergon::storage
