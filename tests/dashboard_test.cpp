// The dashboard in a real browser: Debian's chromium, driven by
// puppeteer-core (tests/browser/dashboard_check.mjs), against a queue with
// an HTTP endpoint and a worker in this process. The failed job is listed,
// Retry is clicked, and the job runs; its attempts and the Workers box name
// the worker, and its page shows each attempt's log and the job's tags; a
// screenshot goes to the build folder.
#define BOOST_TEST_MODULE dashboard
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <filesystem>
#include <sys/wait.h>

#include "ergon/job_builder.hpp"
#include "ergon/queue.hpp"
#include "support/child_process.hpp"
#include "support/test_engine.hpp"
#include "support/test_support.hpp"

using namespace ergon;
using ergon::test::child_process;
using ergon::test::temp_dir;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_CASE(a_failed_job_is_retried_from_the_dashboard_and_runs) {
  temp_dir dir;
  options o;
  o.http = http_options{};
  auto q = queue::open(ergon::test::location_of(dir), o);
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  // "flaky" fails for good the first time and succeeds when retried; the
  // other jobs give the page groups, a recurring job and some history.
  std::atomic<int> flaky_runs{0};
  worker_options w;
  w.name = "importer";
  w.max_concurrency = 4;
  w.runners["import"] = [&](job_context& ctx) {
    ctx.log(log_level::info, "importing " + ctx.payload());
    if (ctx.payload() == "flaky" && flaky_runs++ == 0)
      ctx.fail_permanently("the upstream API answered 503");
    else if (ctx.payload() == "broken")
      ctx.fail_permanently("no such account");
    else
      ctx.complete("imported");
  };
  auto wk = q->start_worker(std::move(w));
  BOOST_REQUIRE(wk.has_value());
  std::vector<job_id> ids;
  for (int i = 0; i < 24; ++i)
    ids.push_back(*q->submit(*job_builder("import")
                                .payload(i == 7 ? "broken" : "row " + std::to_string(i))
                                .group("tenant-" + std::string(1, static_cast<char>('a' + i % 3)))
                                .build()));
  // Its tag holds markup, which the page must show as text.
  auto flaky = *q->submit(
    *job_builder("import").payload("flaky").group("tenant-a").tag("tenant", "a<b>").build());
  recurring_job nightly;
  nightly.id = "nightly-report";
  nightly.schedule = "0 3 * * *";
  nightly.job = *job_builder("report").build();
  BOOST_REQUIRE(q->add_recurring(nightly).has_value());
  BOOST_REQUIRE(q->wait(flaky, 1min)->status == job_status::failed);
  for (auto& id : ids)
    BOOST_REQUIRE(is_final(q->wait(id, 1min)->status));

  auto url = "http://127.0.0.1:" + std::to_string(*q->http_port()) + "/";
  // One file per engine: ctest runs both executables at once.
  auto shot = std::string{ERGON_TEST_BUILD_DIR} + "/dashboard"
              + (test::on_postgres() ? "-postgres" : "") + ".png";
  std::filesystem::remove(shot);
  child_process browser{{ERGON_NODE, ERGON_DASHBOARD_CHECK, url, flaky.to_string(), shot,
                               "importer"}};
  for (auto line = browser.read_line(); !line.empty(); line = browser.read_line())
    BOOST_TEST_MESSAGE("browser: " << line);
  int st = browser.wait();
  BOOST_TEST((WIFEXITED(st) && WEXITSTATUS(st) == 0));
  auto info = q->job_info(flaky);
  BOOST_TEST(info->status == job_status::succeeded);
  BOOST_TEST(info->attempts.size() == 2u);
  BOOST_TEST(flaky_runs.load() == 2);
  BOOST_TEST(std::filesystem::exists(shot));
  BOOST_TEST(q->recurring_info("nightly-report")->paused_since_ms.has_value());  // paused in the page
  BOOST_TEST(wk->stop().ok());
}
