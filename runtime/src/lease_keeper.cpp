#include "lease_keeper.hpp"

#include <iostream>

namespace ergon::runtime {

using steady = std::chrono::steady_clock;

lease_keeper::lease_keeper(std::unique_ptr<storage::pg_lease> lease,
                           std::chrono::milliseconds lease_time,
                           std::function<void(const status&)> on_deposed,
                           std::function<void()> on_lapse)
    : lease_(std::move(lease)), lease_time_(lease_time), epoch_(lease_->epoch()),
      on_deposed_(std::move(on_deposed)), on_lapse_(std::move(on_lapse)),
      clock_(lease_time, lease_->acquired_at()) {
  renewer_ = std::thread([this] { renew_loop(); });
  watcher_ = std::thread([this] { watch_loop(); });
}

lease_keeper::~lease_keeper() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_.notify_all();
  watcher_.join();
  // The renewer gives the lease up on its way out. On a silent server that
  // waits until the lease would lapse anyway, and no longer.
  bool done = false;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    done = stop_.wait_until(lock, clock_.lapses_at(), [this] { return renewer_done_; });
  }
  if (!done || deposed_)
    lease_->interrupt();
  renewer_.join();
  lease_->abandon();
  lease_.reset();
}

status lease_keeper::record_listener(const std::string& address, uint16_t port, bool secret,
                                     bool tls) {
  std::lock_guard<std::mutex> lock(conn_mtx_);
  return lease_->record_listener(address, port, secret, tls);
}

void lease_keeper::deposed(const status& why) {
  if (deposed_.exchange(true))
    return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_.notify_all();
  if (on_deposed_)
    on_deposed_(why);
}

void lease_keeper::renew_loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      auto due = clock_.next_renewal(steady::now());
      if (stop_.wait_until(lock, due, [this] { return stopping_; })) {
        lock.unlock();
        return give_up();
      }
    }
    auto sent = steady::now();
    status st;
    bool taken_over = false;
    {
      std::lock_guard<std::mutex> lock(conn_mtx_);
      st = lease_->renew();
      taken_over = lease_->taken_over();
    }
    if (st) {
      std::lock_guard<std::mutex> lock(mutex_);
      clock_.renewed(sent);
      continue;
    }
    if (taken_over) {
      deposed(st);
      return give_up();
    }
    if (!stopping())
      std::cerr << "ergon: renewing the queue's lease: " << st << '\n';
  }
}

void lease_keeper::give_up() {
  if (!deposed_) {
    std::lock_guard<std::mutex> lock(conn_mtx_);
    lease_->release();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  renewer_done_ = true;
  stop_.notify_all();
}

// Apart from the renewals: one may wait on a server that never answers.
void lease_keeper::watch_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    auto at = clock_.lapses_at();
    if (stop_.wait_until(lock, at, [this] { return stopping_; }))
      return;
    if (!clock_.lapsed(steady::now()))
      continue;  // renewed meanwhile
    lock.unlock();
    lease_->interrupt();
    if (on_lapse_ && !deposed_)
      on_lapse_();
    // busy, as for a takeover: nothing more is written, and another
    // server may own the queue by now.
    return deposed({error::busy,
                    "this server lost the queue's lease: no renewal reached PostgreSQL for "
                      + std::to_string((lease_time_ - clock_.margin()).count())
                      + " ms, so another server may take the queue over, or took it over"});
  }
}

}  // namespace ergon::runtime
