// middleware: a worker's hooks around each job (worker_options::middleware).
// Internal to runtime/.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ergon/actors/worker.hpp"
#include "ergon/worker.hpp"

namespace ergon::runtime {

class middleware {
 public:
  middleware(std::vector<job_middleware> hooks, std::string worker,
             std::shared_ptr<actors::worker_counters> counters);

  /// Runs `code` inside the hooks: befores in order, then the code, then
  /// afters (or on_errors, and the exception goes on) in reverse. A hook
  /// that throws is logged and counted, and skipped.
  std::string around(job_context& ctx, const job_handler& code) const;

 private:
  template <class Hook, class... Args>
  void call(const char* which, const Hook& hook, job_context& ctx, Args&&... args) const;

  std::vector<job_middleware> hooks_;
  std::string worker_;
  std::shared_ptr<actors::worker_counters> counters_;
};

}  // namespace ergon::runtime
