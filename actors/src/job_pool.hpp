// job_pool: threads that run job code, off CAF's scheduler. Internal.
//
// Threads start on demand up to a limit and stay for reuse. Destroying the
// pool lets idle threads exit and busy ones exit after their current job:
// job code that never returns must not hang the process on shutdown, so the
// threads are detached and share the pool's state.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

namespace ergon::actors {

class job_pool {
 public:
  explicit job_pool(size_t max_threads);
  job_pool(const job_pool&) = delete;
  job_pool& operator=(const job_pool&) = delete;
  ~job_pool();

  /// Runs `task` on a pool thread; it waits if all threads are busy.
  void post(std::function<void()> task);

 private:
  struct shared {
    std::mutex mtx;
    std::condition_variable cv;
    std::deque<std::function<void()>> tasks;
    size_t threads = 0;
    size_t idle = 0;
    size_t max_threads = 1;
    bool stopping = false;
  };
  static void run(std::shared_ptr<shared> s);
  std::shared_ptr<shared> s_;
};

}  // namespace ergon::actors
