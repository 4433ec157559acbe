#include "job_runner.hpp"

#include <pthread.h>

#include <algorithm>
#include <stdexcept>
#include <thread>

#include "ergon/actors/worker.hpp"
#include "running_attempt.hpp"

namespace ergon::actors {

job_runner::job_runner(int32_t max_weight, std::function<void()> poke,
                       std::shared_ptr<worker_counters> counters)
    : max_weight_(std::max(max_weight, 1)), poke_(std::move(poke)), counters_(std::move(counters)) {}

void job_runner::add(std::shared_ptr<running_attempt> attempt, code run) {
  std::lock_guard<std::mutex> guard{mtx_};
  waiting_weight_ += attempt->weight();
  waiting_.push_back({std::move(attempt), std::move(run)});
  wake_locked();
}

std::vector<std::shared_ptr<running_attempt>> job_runner::take_waiting() {
  std::lock_guard<std::mutex> guard{mtx_};
  std::vector<std::shared_ptr<running_attempt>> out;
  for (auto& w : waiting_)
    out.push_back(std::move(w.attempt));
  waiting_.clear();
  waiting_weight_ = 0;
  return out;
}

bool job_runner::take_waiting(int64_t token) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = std::find_if(waiting_.begin(), waiting_.end(),
                        [&](const waiting_job& w) { return w.attempt->token() == token; });
  if (i == waiting_.end())
    return false;
  waiting_weight_ -= i->attempt->weight();
  waiting_.erase(i);
  return true;
}

bool job_runner::cancel_waiting(int64_t token) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = std::find_if(waiting_.begin(), waiting_.end(),
                        [&](const waiting_job& w) { return w.attempt->token() == token; });
  if (i == waiting_.end())
    return false;
  auto& a = *i->attempt;
  waiting_weight_ -= a.weight();
  if (a.mark_finished()) {
    outbox_.outcomes.push_back({a.row(), a.token(), storage::report_kind::stopped,
                                "cancelled before its code started"});
    outbox_.replies.emplace_back();
  }
  outbox_.returned.push_back({a.row(), a.token()});
  waiting_.erase(i);
  return true;
}

void job_runner::report(storage::attempt_report outcome, std::optional<reply_to<status>> reply) {
  bool poke = false;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    bool waits = reply.has_value();
    outbox_.outcomes.push_back(std::move(outcome));
    outbox_.replies.push_back(std::move(reply));
    poke = poke_locked();
    if (waits && idle_poke_armed_) {  // its code waits: the report goes now
      idle_poke_armed_ = false;
      poke = true;
    }
  }
  if (poke)
    poke_();
}

job_runner::outbox job_runner::take() {
  std::lock_guard<std::mutex> guard{mtx_};
  poke_armed_ = false;
  idle_poke_armed_ = false;
  auto box = std::exchange(outbox_, outbox{});
  box.held_weight = running_weight_ + waiting_weight_;
  return box;
}

bool job_runner::arm_poke() {
  std::lock_guard<std::mutex> guard{mtx_};
  if (!outbox_.empty())
    return false;
  poke_armed_ = true;
  return true;
}

bool job_runner::arm_idle_poke() {
  std::lock_guard<std::mutex> guard{mtx_};
  idle_poke_armed_ = running_weight_ + waiting_weight_ > 0;
  return idle_poke_armed_;
}

bool job_runner::mail_may_wait() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return !outbox_.empty()
         && std::none_of(outbox_.replies.begin(), outbox_.replies.end(),
                         [](const auto& r) { return r.has_value(); });
}

void job_runner::resize(int32_t max_weight) {
  std::lock_guard<std::mutex> guard{mtx_};
  max_weight_ = std::max(max_weight, 1);
  wake_locked();
}

int32_t job_runner::held_weight() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return running_weight_ + waiting_weight_;
}

bool job_runner::idle() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return running_ == 0 && waiting_.empty();
}

void job_runner::shut_down() {
  std::lock_guard<std::mutex> guard{mtx_};
  stopping_ = true;
  cv_.notify_all();
}

bool job_runner::poke_locked() {
  if (!poke_armed_)
    return false;
  poke_armed_ = false;
  return true;
}

// The first waiting job whose weight fits now. The dispatcher sent them in
// the order they should run; a heavy one that doesn't fit yet lets lighter
// ones pass, as the dispatcher does when it picks for the room a worker has.
std::optional<job_runner::waiting_job> job_runner::next_locked() {
  auto free = max_weight_ - running_weight_;
  auto i = std::find_if(waiting_.begin(), waiting_.end(),
                        [&](const waiting_job& w) { return w.attempt->weight() <= free; });
  if (i == waiting_.end())
    return std::nullopt;
  auto next = std::move(*i);
  waiting_.erase(i);
  waiting_weight_ -= next.attempt->weight();
  running_weight_ += next.attempt->weight();
  ++running_;
  counters_->running_jobs = running_;
  counters_->running_weight = running_weight_;
  return next;
}

// Gets one more thread going if a waiting job fits and no thread is already
// on its way. Each thread that gets going does the same, so a batch wakes
// threads one after another, and only as many as the jobs keep busy: a thread
// that finishes a short job first takes the next one itself.
void job_runner::wake_locked() {
  auto free = max_weight_ - running_weight_;
  if (waking_ > 0 || std::none_of(waiting_.begin(), waiting_.end(), [&](const waiting_job& w) {
        return w.attempt->weight() <= free;
      }))
    return;
  if (idle_ > 0) {
    ++waking_;
    cv_.notify_one();
  } else if (threads_ < max_weight_) {
    ++threads_;
    ++waking_;
    std::thread{thread_main, shared_from_this()}.detach();
  }
}

bool job_runner::returned_locked(running_attempt& a, storage::report_kind kind,
                                 std::string text) {
  running_weight_ -= a.weight();
  --running_;
  counters_->running_jobs = running_;
  counters_->running_weight = running_weight_;
  if (a.mark_finished()) {  // returning without complete() or fail() reports it
    if (kind == storage::report_kind::succeeded && a.cancel_requested()) {
      kind = storage::report_kind::stopped;
      text = "stopped after a cancel request";
    }
    outbox_.outcomes.push_back({a.row(), a.token(), kind, std::move(text)});
    outbox_.replies.emplace_back();
  }
  outbox_.returned.push_back({a.row(), a.token()});
  if (idle_poke_armed_ && running_weight_ + waiting_weight_ == 0) {
    idle_poke_armed_ = false;
    poke_armed_ = false;
    return true;
  }
  return poke_locked();
}

void job_runner::thread_main(std::shared_ptr<job_runner> self) {
  ::pthread_setname_np(::pthread_self(), "ergon.job");  // for profiles
  std::unique_lock<std::mutex> lock{self->mtx_};
  --self->waking_;
  for (;;) {
    auto next = self->next_locked();
    if (!next) {
      if (self->stopping_) {
        --self->threads_;
        return;
      }
      ++self->idle_;
      self->cv_.wait(lock);
      --self->idle_;
      self->waking_ = std::max(self->waking_ - 1, 0);
      continue;
    }
    self->wake_locked();
    lock.unlock();
    std::string text;  // the result, or why it failed
    auto kind = storage::report_kind::succeeded;
    try {
      if (!next->run)
        throw std::runtime_error("no runner for job type '" + next->attempt->type() + "'");
      text = next->run(*next->attempt);
    } catch (const permanent_failure& e) {
      kind = storage::report_kind::failed_permanently;
      text = e.what();
    } catch (const std::exception& e) {
      kind = storage::report_kind::failed;
      text = e.what();
    } catch (...) {
      kind = storage::report_kind::failed;
      text = "job code threw an exception that is not a std::exception";
    }
    lock.lock();
    if (self->returned_locked(*next->attempt, kind, std::move(text))) {
      lock.unlock();
      self->poke_();
      lock.lock();
    }
  }
}

}  // namespace ergon::actors
