// lease_keeper: renews a PostgreSQL queue's ownership lease on a thread and
// connection of its own (storage::pg_lease). Internal to runtime/.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "ergon/storage/pg_lease.hpp"

namespace ergon::runtime {

class lease_keeper {
 public:
  /// Renews `lease` every third of `lease_time`. A renewal that fails for a
  /// while (a lost connection) is retried at the next turn: the lease may
  /// pass meanwhile, and the writer's fence then refuses every write.
  lease_keeper(std::unique_ptr<storage::pg_lease> lease, std::chrono::milliseconds lease_time);

  /// Stops renewing and gives the lease up.
  ~lease_keeper();

  lease_keeper(const lease_keeper&) = delete;
  lease_keeper& operator=(const lease_keeper&) = delete;

  /// Whether a renewal found the queue taken over.
  bool deposed() const noexcept { return deposed_.load(); }

 private:
  void run();

  std::unique_ptr<storage::pg_lease> lease_;
  std::chrono::milliseconds every_;
  std::mutex mutex_;
  std::condition_variable stop_;
  bool stopping_ = false;
  std::atomic<bool> deposed_{false};
  std::thread thread_;
};

}  // namespace ergon::runtime
