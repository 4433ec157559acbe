#include "ergon/worker.hpp"

#include <caf/send.hpp>

#include "middleware.hpp"
#include "moved_from.hpp"
#include "worker_impl.hpp"

namespace ergon {

std::shared_ptr<worker_impl> worker::impl::spawn(caf::actor_system& sys, worker_options opts,
                                                  std::shared_ptr<ergon::clock> clock,
                                                  caf::actor dispatcher,
                                                  std::shared_ptr<actors::node_gate> gate,
                                                  caf::actor rejoin) {
  actors::worker_config cfg;
  cfg.name = std::move(opts.name);
  if (opts.middleware.empty()) {
    for (auto& [type, handler] : opts.runners)
      cfg.runners.emplace(type, [h = std::move(handler)](job_context& a) { return h(a); });
  } else {
    auto hooks = std::make_shared<runtime::middleware>(std::move(opts.middleware), cfg.name,
                                                       cfg.counters);
    for (auto& [type, handler] : opts.runners)
      cfg.runners.emplace(type, [h = std::move(handler), hooks](job_context& a) {
        return hooks->around(a, h);
      });
  }
  cfg.max_capacity = opts.max_concurrency;
  cfg.min_capacity = opts.min_concurrency.value_or(opts.max_concurrency);
  cfg.prefetch = opts.prefetch;
  cfg.auto_heartbeat_ms = opts.auto_heartbeat ? opts.auto_heartbeat->count() : 0;
  cfg.progress_interval_ms = opts.progress_interval.count();
  cfg.logs = {opts.log_lines, opts.log_bytes};
  cfg.clock = std::move(clock);
  cfg.dispatcher = std::move(dispatcher);
  cfg.rejoin = std::move(rejoin);
  cfg.gate = std::move(gate);
  auto w = std::make_shared<impl>();
  w->counters = cfg.counters;
  w->actor = actors::spawn_worker(sys, std::move(cfg));
  return w;
}

status worker::impl::stop(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> guard{mtx};
  if (stopped)
    return {};
  stopped = true;
  auto [to, from] = actors::make_reply<status>();
  actors::tell(actor, actors::stop_worker{std::move(to)});
  auto done = from.wait_for(timeout);
  if (done)
    return *done;
  actors::tell(actor, actors::abandon_atom::value);
  return {error::timeout, "running jobs did not finish within "
                            + std::to_string(timeout.count()) + " ms"};
}

worker::worker(std::shared_ptr<impl> p) noexcept : impl_(std::move(p)) {}
worker::worker(worker&&) noexcept = default;
worker& worker::operator=(worker&&) noexcept = default;

worker::~worker() {
  if (impl_)
    impl_->stop(std::chrono::seconds(30));
}

status worker::stop(std::chrono::milliseconds timeout) {
  if (!impl_)
    return runtime::moved_from("worker");
  return impl_->stop(timeout);
}

worker_stats worker::stats() const {
  if (!impl_)
    return {};
  auto& c = *impl_->counters;
  worker_stats s;
  s.jobs_received = c.jobs_received.load();
  s.batches_received = c.batches_received.load();
  s.requests_sent = c.requests_sent.load();
  s.outcomes_committed = c.outcomes_committed.load();
  s.outcomes_resent = c.outcomes_resent.load();
  s.running_jobs = c.running_jobs.load();
  s.running_weight = c.running_weight.load();
  s.middleware_errors = c.middleware_errors.load();
  s.max_concurrency = c.max_capacity.load();
  return s;
}

}  // namespace ergon
