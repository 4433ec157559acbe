#include "lease_keeper.hpp"

#include <iostream>

namespace ergon::runtime {

lease_keeper::lease_keeper(std::unique_ptr<storage::pg_lease> lease,
                           std::chrono::milliseconds lease_time,
                           std::function<void(const status&)> on_deposed)
    : lease_(std::move(lease)), every_(lease_time / 3), on_deposed_(std::move(on_deposed)) {
  thread_ = std::thread([this] { run(); });
}

lease_keeper::~lease_keeper() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_.notify_all();
  thread_.join();
  lease_.reset();
}

status lease_keeper::record_listener(const std::string& address, uint16_t port, bool secret,
                                     bool tls) {
  std::lock_guard<std::mutex> lock(mutex_);
  return lease_->record_listener(address, port, secret, tls);
}

void lease_keeper::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_.wait_for(lock, every_, [this] { return stopping_; })) {
    auto st = lease_->renew();
    if (!st && lease_->taken_over()) {
      if (on_deposed_)
        on_deposed_(st);
      return;
    }
    if (!st)
      std::cerr << "ergon: renewing the queue's lease: " << st << '\n';
  }
}

}  // namespace ergon::runtime
