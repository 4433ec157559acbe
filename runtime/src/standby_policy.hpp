// standby_policy: what a standby server does next, from what it read of its
// queue's lease (storage::pg_lease::read). A plain class: the shell
// (standby_server.cpp) reads, waits and takes over as it says. Internal to
// runtime/.
#pragma once

#include <chrono>
#include <optional>

#include "ergon/error.hpp"
#include "ergon/storage/pg_lease.hpp"

namespace ergon::runtime {

class standby_policy {
 public:
  /// Try to take the queue over now, or read the lease again after `wait`.
  struct step {
    bool take_over = false;
    std::chrono::milliseconds wait{0};
  };

  /// Reads the lease every `poll`.
  explicit standby_policy(std::chrono::milliseconds poll) noexcept : poll_(poll) {}

  /// After a read: a lease that acquire() could take (none, passed, or its
  /// session gone) is taken over at once. A live one is read again after a
  /// poll, or just after it passes if that comes sooner. A failed read (the
  /// server is unreachable) is tried again with backoff, from a poll up to
  /// 5 s.
  step read(const result<std::optional<storage::pg_lease::view>>& lease);

  /// A takeover failed: `busy` (another server won it, or the owner came
  /// back) reads again after a poll; anything else backs off as a failed
  /// read does.
  step takeover_failed(const status& why);

  /// This server's queue closed by itself and it is a standby again: it
  /// reads again after a poll, not at once, so the owner that deposed it
  /// has that long to show its lease.
  step stepped_down();

 private:
  step back_off();

  std::chrono::milliseconds poll_;
  std::chrono::milliseconds backoff_{0};
};

}  // namespace ergon::runtime
