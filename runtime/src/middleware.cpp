#include "middleware.hpp"

#include <exception>
#include <iostream>

namespace ergon::runtime {
namespace {

// What an exception says, for on_error hooks and logs.
std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

}  // namespace

middleware::middleware(std::vector<job_middleware> hooks, std::string worker,
                       std::shared_ptr<actors::worker_counters> counters)
    : hooks_(std::move(hooks)), worker_(std::move(worker)), counters_(std::move(counters)) {}

template <class Hook, class... Args>
void middleware::call(const char* which, const Hook& hook, job_context& ctx,
                      Args&&... args) const {
  if (!hook)
    return;
  try {
    hook(ctx, std::forward<Args>(args)...);
  } catch (...) {
    counters_->middleware_errors.fetch_add(1, std::memory_order_relaxed);
    // One write per line: several job threads may log at once.
    std::cerr << "ergon: worker " + worker_ + ": middleware " + which + " hook threw for job "
                   + ctx.id().to_string() + ": " + what_of(std::current_exception()) + "\n";
  }
}

std::string middleware::around(job_context& ctx, const job_handler& code) const {
  for (auto& h : hooks_)
    call("before", h.before, ctx);
  std::string result;
  try {
    if (!code)
      throw std::runtime_error("no runner for job type '" + ctx.type() + "'");
    result = code(ctx);
  } catch (...) {
    auto error = what_of(std::current_exception());
    for (auto h = hooks_.rbegin(); h != hooks_.rend(); ++h)
      call("on_error", h->on_error, ctx, error);
    throw;
  }
  for (auto h = hooks_.rbegin(); h != hooks_.rend(); ++h)
    call("after", h->after, ctx);
  return result;
}

}  // namespace ergon::runtime
