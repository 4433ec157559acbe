// A queue with a manual clock, for tests that run jobs: on a temp file, or
// in a fresh PostgreSQL database with ERGON_TEST_ENGINE=postgres.
#pragma once

#include <boost/test/unit_test.hpp>

#include "ergon/job_builder.hpp"
#include "ergon/queue.hpp"
#include "support/run_support.hpp"
#include "support/test_engine.hpp"
#include "support/test_support.hpp"

namespace ergon::test {

inline constexpr int64_t t0 = 1'700'000'000'000;

struct queue_fixture {
  temp_dir dir;
  /// Where the queue lives: a file in dir, or a PostgreSQL URI.
  std::string location = test_location(dir);
  std::shared_ptr<manual_clock> clock = std::make_shared<manual_clock>(t0);
  std::unique_ptr<queue> q;
  std::unique_ptr<event_log> log;

  queue_fixture() { reopen(); }

  /// (Re)opens the queue on the same data with `opts` and a fresh event log.
  void reopen(options opts = {}) {
    log.reset();
    q.reset();
    opts.clock = clock;
    auto r = queue::open(location, std::move(opts));
    BOOST_REQUIRE_MESSAGE(r.has_value(), r.error().to_string());
    q = std::make_unique<queue>(std::move(*r));
    log = std::make_unique<event_log>(*q);
  }

  job_id submit(const job& j) {
    auto id = q->submit(j);
    BOOST_REQUIRE_MESSAGE(id.has_value(), id.error().to_string());
    return *id;
  }

  worker start(worker_options opts) {
    auto w = q->start_worker(std::move(opts));
    BOOST_REQUIRE_MESSAGE(w.has_value(), w.error().to_string());
    return std::move(*w);
  }

  job_info info(const job_id& id) {
    auto i = q->job_info(id);
    BOOST_REQUIRE_MESSAGE(i.has_value(), i.error().to_string());
    return *i;
  }

  void advance(std::chrono::milliseconds d) { clock->advance(d); }
};

/// A job of `type` with no backoff randomization unless asked.
inline job_builder job_of(const std::string& type) {
  job_builder b{type};
  b.backoff(std::chrono::milliseconds{1'000}, 2.0, 0.0);
  return b;
}

}  // namespace ergon::test
