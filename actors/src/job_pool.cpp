#include "job_pool.hpp"

#include <thread>

#include <pthread.h>

namespace ergon::actors {

job_pool::job_pool(size_t max_threads) : s_(std::make_shared<shared>()) {
  s_->max_threads = max_threads > 0 ? max_threads : 1;
}

job_pool::~job_pool() {
  std::lock_guard<std::mutex> guard{s_->mtx};
  s_->stopping = true;
  s_->cv.notify_all();
}

void job_pool::post(std::function<void()> task) {
  std::unique_lock<std::mutex> guard{s_->mtx};
  s_->tasks.push_back(std::move(task));
  // An idle thread only stops counting as idle once it wakes and takes the
  // lock, so `idle > 0` alone would send a whole batch to the one thread that
  // was notified first. Each idle thread takes one task: wake one while the
  // queued tasks don't outnumber them, and start a thread when they do.
  if (s_->tasks.size() <= s_->idle) {
    guard.unlock();
    s_->cv.notify_one();
    return;
  }
  if (s_->threads < s_->max_threads) {
    ++s_->threads;
    std::thread{run, s_}.detach();
  }
}

void job_pool::run(std::shared_ptr<shared> s) {
  ::pthread_setname_np(::pthread_self(), "ergon.job");  // for profiles
  std::unique_lock<std::mutex> guard{s->mtx};
  for (;;) {
    while (s->tasks.empty() && !s->stopping) {
      ++s->idle;
      s->cv.wait(guard);
      --s->idle;
    }
    if (s->tasks.empty()) {
      --s->threads;
      return;
    }
    auto task = std::move(s->tasks.front());
    s->tasks.pop_front();
    guard.unlock();
    task();
    guard.lock();
  }
}

}  // namespace ergon::actors
