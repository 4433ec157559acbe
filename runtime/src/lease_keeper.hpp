// lease_keeper: renews a PostgreSQL queue's ownership lease on a thread and
// connection of its own (storage::pg_lease), and notices when it lapsed.
// Internal to runtime/.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "ergon/storage/pg_lease.hpp"
#include "lease_clock.hpp"

namespace ergon::runtime {

class lease_keeper {
 public:
  /// Renews `lease` every third of `lease_time` (lease_clock). `on_deposed`
  /// gets, once, on one of the keeper's threads:
  ///  - the `busy` status that names the new owner, when a renewal finds
  ///    the queue taken over;
  ///  - `busy` ("lost the queue's lease"), when no renewal reached PostgreSQL
  ///    for so long that a successor may take over soon (a server stopped
  ///    or cut off): this owner must stop serving before that. A renewal
  ///    still waiting on a silent server then fails at once, and
  ///    `on_lapse` runs first, to interrupt the owner's other sessions.
  /// Renewing stops after either.
  lease_keeper(std::unique_ptr<storage::pg_lease> lease, std::chrono::milliseconds lease_time,
               std::function<void(const status&)> on_deposed,
               std::function<void()> on_lapse = {});

  /// Stops renewing and gives the lease up. A renewal or the give-up that
  /// waits on a silent server is interrupted when the lease would lapse,
  /// so this never waits longer than that.
  ~lease_keeper();

  lease_keeper(const lease_keeper&) = delete;
  lease_keeper& operator=(const lease_keeper&) = delete;

  /// The epoch this owner holds.
  int64_t epoch() const noexcept { return epoch_; }

  /// Records a listener with the lease (pg_lease::record_listener), between
  /// renewals.
  status record_listener(const std::string& address, uint16_t port, bool secret, bool tls);

 private:
  void renew_loop();
  void watch_loop();
  // The renewer's last act: releases the lease unless deposed.
  void give_up();
  void deposed(const status& why);
  bool stopping() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stopping_;
  }

  std::unique_ptr<storage::pg_lease> lease_;
  std::chrono::milliseconds lease_time_;
  int64_t epoch_;
  std::function<void(const status&)> on_deposed_;
  std::function<void()> on_lapse_;
  std::atomic<bool> deposed_{false};
  // The lease's connection, for renewals and record_listener.
  std::mutex conn_mtx_;
  // stopping_, clock_ and the waits on stop_.
  std::mutex mutex_;
  std::condition_variable stop_;
  bool stopping_ = false;
  bool renewer_done_ = false;  // it returned, the lease given up unless deposed
  lease_clock clock_;
  std::thread renewer_;
  std::thread watcher_;
};

}  // namespace ergon::runtime
