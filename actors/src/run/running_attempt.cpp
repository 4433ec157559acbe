#include "running_attempt.hpp"

#include <algorithm>

#include "ergon/actors/worker.hpp"
#include "ergon/storage/field_rules.hpp"
#include "job_runner.hpp"

namespace ergon::actors {

running_attempt::running_attempt(const job_assignment& a, caf::actor worker,
                                 std::shared_ptr<job_runner> runner,
                                 std::shared_ptr<ergon::clock> clock, log_bounds logs)
    : id_(id_from_wire(a.id)),
      type_(a.type),
      group_(a.group),
      payload_(a.payload),
      try_number_(a.try_number),
      row_(a.row),
      token_(a.token),
      weight_(a.weight),
      worker_(std::move(worker)),
      runner_(std::move(runner)),
      clock_(std::move(clock)),
      log_bounds_(logs) {}

void running_attempt::cancel() noexcept {
  {
    // Under the lock, so a waiter can't check the flag, miss this, and sleep.
    std::lock_guard<std::mutex> guard{cancel_mtx_};
    cancelled_.store(true, std::memory_order_release);
  }
  cancel_cv_.notify_all();
}

void running_attempt::request_cancel() noexcept {
  cancel_requested_.store(true, std::memory_order_release);
  cancel();
}

void running_attempt::request_preempt() noexcept {
  {
    std::lock_guard<std::mutex> guard{cancel_mtx_};
    preempted_.store(true, std::memory_order_release);
  }
  cancel_cv_.notify_all();
}

namespace {

constexpr std::chrono::milliseconds max_wait = std::chrono::hours{24 * 365 * 200};

// Waits on `cv` until `flagged` or `timeout`: 0 or less doesn't wait, max()
// waits without limit.
template <class Flagged>
void wait_flag(std::condition_variable& cv, std::unique_lock<std::mutex>& guard,
               std::chrono::milliseconds timeout, Flagged flagged) {
  if (timeout == std::chrono::milliseconds::max())
    cv.wait(guard, flagged);
  else if (timeout > std::chrono::milliseconds::zero())
    // steady_clock counts in ns, which overflow past 292 years.
    cv.wait_for(guard, std::min<std::chrono::milliseconds>(timeout, max_wait), flagged);
}

}  // namespace

bool running_attempt::wait_cancelled(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> guard{cancel_mtx_};
  wait_flag(cancel_cv_, guard, timeout, [this] { return cancelled(); });
  return cancelled();
}

bool running_attempt::wait_preempted(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> guard{cancel_mtx_};
  wait_flag(cancel_cv_, guard, timeout, [this] { return preempted() || cancelled(); });
  return preempted();
}

status running_attempt::yield() {
  if (!preempted())
    return {error::invalid_argument,
            "yield: the attempt was not asked to give up its slot (preempted() is false)",
            "yield"};
  return finish(storage::report_kind::yielded, {});
}

status running_attempt::finish(storage::report_kind kind, std::string text, int64_t after_ms) {
  if (!mark_finished())
    return {error::job_finished, "this attempt already reported its outcome"};
  auto [to, from] = make_reply<status>();
  runner_->report({row_, token_, kind, std::move(text), after_ms}, std::move(to));
  return from.wait();
}

status running_attempt::complete(std::string result) {
  return finish(storage::report_kind::succeeded, std::move(result));
}

status running_attempt::fail(std::string message) {
  return finish(storage::report_kind::failed, std::move(message));
}

status running_attempt::fail(std::string message, std::chrono::milliseconds retry_after) {
  if (retry_after.count() < 0)
    return invalid_field("retry_after", "must not be negative, got "
                                          + std::to_string(retry_after.count()) + " ms");
  return finish(storage::report_kind::failed, std::move(message), retry_after.count());
}

status running_attempt::snooze(std::chrono::milliseconds delay) {
  if (delay.count() < 0)
    return invalid_field("delay", "must not be negative, got " + std::to_string(delay.count())
                                    + " ms");
  return finish(storage::report_kind::snoozed, {}, delay.count());
}

status running_attempt::fail_permanently(std::string message) {
  return finish(storage::report_kind::failed_permanently, std::move(message));
}

status running_attempt::progress(int64_t done, int64_t total, std::string message) {
  if (finished())
    return {error::job_finished, "this attempt already reported its outcome"};
  if (auto st = storage::check_progress(done, total, message); !st)
    return st;
  bool notify = false;
  {
    std::lock_guard<std::mutex> guard{progress_mtx_};
    auto now = clock_->now_ms();
    auto eta = eta_.add(now, done, total);
    unsent_progress_ = storage::progress_report{row_, token_, done, total, std::move(message),
                                                now, eta};
    notify = !std::exchange(worker_told_, true);
  }
  if (notify)
    tell(worker_, progress_atom::value, token_);
  return {};
}

status running_attempt::log(log_level level, std::string text) {
  if (finished())
    return {error::job_finished, "this attempt already reported its outcome"};
  if (static_cast<uint8_t>(level) > static_cast<uint8_t>(log_level::error))
    return invalid_field("level", "is not a log_level: " + std::to_string(static_cast<int>(level)));
  text = storage::log_text(std::move(text));
  bool notify = false;
  {
    std::lock_guard<std::mutex> guard{progress_mtx_};
    auto size = static_cast<int64_t>(text.size());
    if (lines_kept_ >= log_bounds_.lines || bytes_kept_ + size > log_bounds_.bytes) {
      ++lines_dropped_;
      dropped_unsent_ = true;
    } else {
      unsent_lines_.push_back({lines_kept_++, clock_->now_ms(), level, std::move(text)});
      bytes_kept_ += size;
    }
    notify = !std::exchange(worker_told_, true);
  }
  if (notify)
    tell(worker_, progress_atom::value, token_);
  return {};
}

running_attempt::handover running_attempt::take_handover() {
  std::lock_guard<std::mutex> guard{progress_mtx_};
  worker_told_ = false;
  handover out;
  out.progress = std::exchange(unsent_progress_, std::nullopt);
  if (!unsent_lines_.empty() || dropped_unsent_)
    out.logs = storage::attempt_logs{row_, token_, std::exchange(unsent_lines_, {}),
                                     lines_dropped_};
  dropped_unsent_ = false;
  return out;
}

status running_attempt::extend(std::optional<std::string> checkpoint) {
  if (finished())
    return {error::job_finished, "this attempt already reported its outcome"};
  auto [to, from] = make_reply<status>();
  tell(worker_, heartbeat_call{token_, std::move(checkpoint), std::move(to)});
  return from.wait();
}

result<std::vector<dependency_result>> running_attempt::dependency_results() {
  if (finished())
    return status{error::job_finished, "this attempt already reported its outcome"};
  std::vector<dependency_result> out;
  int64_t after = 0;
  do {
    auto [to, from] = make_reply<result<results_reply>>();
    tell(worker_, results_call{token_, after, std::move(to)});
    auto page = from.wait();
    if (!page)
      return page.error();
    for (auto& r : page->results)
      out.push_back(std::move(r));
    after = page->next_after;
  } while (after != 0);
  return out;
}

status running_attempt::submit_children(std::vector<job> children, std::string checkpoint) {
  if (children.empty())
    return invalid_field("children", "submit at least one child");
  for (size_t i = 0; i < children.size(); ++i) {
    auto st = validate(children[i]);
    for (auto p : children[i].depends_on_batch)
      if (st && p >= i)
        st = invalid_field("depends_on_batch",
                           "position " + std::to_string(p) + " is not before the child's own ("
                             + std::to_string(i) + ")");
    if (!st) {
      auto prefix = "field '" + st.field() + "': ";
      auto what = st.message().rfind(prefix, 0) == 0 ? st.message().substr(prefix.size())
                                                     : st.message();
      return invalid_field("children[" + std::to_string(i) + "]." + st.field(), what);
    }
  }
  if (!mark_finished())
    return {error::job_finished, "this attempt already reported its outcome"};
  auto [to, from] = make_reply<status>();
  storage::attempt_report r{row_, token_, storage::report_kind::spawned, std::move(checkpoint)};
  r.children = std::move(children);
  runner_->report(std::move(r), std::move(to));
  return from.wait();
}

status running_attempt::checkpoint(std::string payload) {
  return extend(std::move(payload));
}

status running_attempt::heartbeat() {
  return extend(std::nullopt);
}

}  // namespace ergon::actors
