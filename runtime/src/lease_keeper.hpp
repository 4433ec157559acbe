// lease_keeper: renews a PostgreSQL queue's ownership lease on a thread and
// connection of its own (storage::pg_lease). Internal to runtime/.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "ergon/storage/pg_lease.hpp"

namespace ergon::runtime {

class lease_keeper {
 public:
  /// Renews `lease` every third of `lease_time`. A renewal that fails for a
  /// while (a lost connection) is retried at the next turn: the lease may
  /// pass meanwhile, and the writer's fence then refuses every write. Once
  /// a renewal finds the queue taken over, renewing stops and `on_deposed`
  /// gets the `busy` status that names the new owner, on the keeper's
  /// thread.
  lease_keeper(std::unique_ptr<storage::pg_lease> lease, std::chrono::milliseconds lease_time,
               std::function<void(const status&)> on_deposed);

  /// Stops renewing and gives the lease up.
  ~lease_keeper();

  lease_keeper(const lease_keeper&) = delete;
  lease_keeper& operator=(const lease_keeper&) = delete;

  /// Records a listener with the lease (pg_lease::record_listener), between
  /// renewals.
  status record_listener(const std::string& address, uint16_t port, bool secret, bool tls);

 private:
  void run();

  std::unique_ptr<storage::pg_lease> lease_;
  std::chrono::milliseconds every_;
  std::function<void(const status&)> on_deposed_;
  std::mutex mutex_;
  std::condition_variable stop_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ergon::runtime
