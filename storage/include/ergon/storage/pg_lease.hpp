// pg_lease: the one owner of a queue in a PostgreSQL schema
// (storage/src/pg_lease.cpp). Internal to ergon.
//
// A flock can't be shared by hosts, and a session advisory lock survives a
// partition (and breaks behind a transaction-mode pooler). So ownership is a
// row with an epoch and an expiry on the server's clock:
//  - A new owner takes the row when there is none, when its lease has
//    passed, or when the holder's session is gone (pg_stat_activity): a
//    SIGKILLed owner is replaced at once. Each takeover raises the epoch.
//  - Every write transaction of the owner reads the epoch under a share lock
//    (pg_db::fence): a takeover waits for it, and once a takeover has
//    committed, the deposed owner's transactions fail `busy`. So nothing it
//    does after its successor's first write commits.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "ergon/error.hpp"
#include "ergon/storage/ownership.hpp"
#include "ergon/storage/pg_db.hpp"

namespace ergon::storage {

class pg_lease {
 public:
  /// Takes the queue over through `conn`, which the lease keeps for
  /// renew(), for `lease_time` from now on the server's clock. Errors:
  /// busy (another owner holds an unexpired lease and its session lives;
  /// the message names its host and pid and when the lease ends), and the
  /// connection's errors.
  static result<std::unique_ptr<pg_lease>> acquire(std::unique_ptr<pg_db> conn,
                                                   std::chrono::milliseconds lease_time);

  pg_lease(const pg_lease&) = delete;
  pg_lease& operator=(const pg_lease&) = delete;

  /// release(), unless it ran or abandon() did.
  ~pg_lease();

  /// Ends the lease at once if it is still this one's, with its listeners,
  /// so a successor need not wait for it to pass. Once.
  void release() noexcept;

  /// Leaves the lease to pass by itself: it was taken over, or the server
  /// can't be reached, and ending it would only wait for a connection.
  void abandon() noexcept { done_ = true; }

  /// The epoch this owner holds: fence its writer with it.
  int64_t epoch() const noexcept { return epoch_; }

  /// Extends the lease by lease_time from now. Errors: busy (the queue was
  /// taken over, and taken_over() says so: this owner must stop writing; or
  /// a lock timeout), and the connection's.
  status renew();

  /// Makes a renewal that waits on a silent server fail at once, from any
  /// thread (pg_db::interrupt).
  void interrupt() noexcept { conn_->interrupt(); }

  /// When acquire() sent the statement that took the lease: the server's
  /// lease runs from a moment after it.
  std::chrono::steady_clock::time_point acquired_at() const noexcept { return acquired_at_; }

  /// Whether a renewal found the lease taken over.
  bool taken_over() const noexcept { return taken_over_; }

  /// Records where this owner takes remote connections, for find(). They go
  /// with the lease. Errors: the connection's.
  status record_listener(const std::string& address, uint16_t port, bool secret, bool tls);

  /// The owner of the schema `d` searches now: the holder of a lease that
  /// has not passed and whose session lives, with its listeners; empty if
  /// there is none (or no ergon schema). Takes no lock. Errors: the
  /// connection's.
  static result<std::optional<ownership::record>> find(pg_db& d);

  /// The lease as a standby sees it: who holds it, until when, and whether
  /// acquire() could take it now.
  struct view {
    int64_t epoch = 0;
    std::string host;
    int64_t pid = 0;
    /// Until the lease passes on the server's clock; negative once passed.
    int64_t ms_left = 0;
    /// Whether the holder's lease session lives (pg_stat_activity).
    bool session_alive = false;
    /// What acquire() decides by: the lease passed or its session is gone.
    bool takeable() const noexcept { return ms_left < 0 || !session_alive; }
  };

  /// The lease of the schema `d` searches, read without a lock, so a
  /// standby that polls it never gets in the owner's way; empty if there is
  /// none yet (no ergon schema, or never owned: takeable). Errors: the
  /// connection's.
  static result<std::optional<view>> read(pg_db& d);

 private:
  pg_lease(std::unique_ptr<pg_db> conn, std::chrono::milliseconds lease_time, int64_t epoch,
           std::chrono::steady_clock::time_point acquired_at) noexcept
      : conn_(std::move(conn)), lease_time_(lease_time), epoch_(epoch),
        acquired_at_(acquired_at) {}

  std::unique_ptr<pg_db> conn_;
  std::chrono::milliseconds lease_time_;
  int64_t epoch_;
  std::chrono::steady_clock::time_point acquired_at_;
  bool taken_over_ = false;
  bool done_ = false;  // released or abandoned
};

}  // namespace ergon::storage
