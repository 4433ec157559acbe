// The HTTP endpoint (options::http): /metrics in Prometheus' format, checked
// line by line and scraped by Debian's real prometheus binary; /healthz; the
// JSON API with its errors and the secret that writes need.
#define BOOST_TEST_MODULE http
#include <boost/test/unit_test.hpp>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <thread>

#include "ergon/job_builder.hpp"
#include "ergon/queue.hpp"
#include "prometheus_text.hpp"
#include "support/child_process.hpp"
#include "support/test_support.hpp"

using namespace ergon;
using ergon::test::child_process;
using ergon::test::temp_dir;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

constexpr int64_t t0 = 1'700'000'000'000;

// A queue with an HTTP endpoint on a free loopback port and a manual clock;
// `secret` set: it also listens, with that secret.
struct served_queue {
  temp_dir dir;
  std::shared_ptr<manual_clock> clock = std::make_shared<manual_clock>(t0);
  std::optional<queue> q;
  uint16_t port = 0;

  explicit served_queue(const std::string& secret = {}) {
    options o;
    o.clock = clock;
    o.http = http_options{};
    if (!secret.empty()) {
      o.listen = listen_options{};
      o.listen->creds.secret = secret;
    }
    auto opened = queue::open(dir.file("q.db"), o);
    BOOST_REQUIRE_MESSAGE(opened.has_value(), opened.error().to_string());
    q.emplace(std::move(*opened));
    auto p = q->http_port();
    BOOST_REQUIRE_MESSAGE(p.has_value(), p.error().to_string());
    port = *p;
  }

  httplib::Client client() const {
    httplib::Client c{"127.0.0.1", port};
    c.set_read_timeout(60, 0);
    return c;
  }

  // Jobs of type "work": the ones with payload "bad" fail for good.
  std::vector<job_id> run(const std::vector<std::string>& payloads) {
    worker_options w;
    w.runners["work"] = [](job_context& ctx) {
      if (ctx.payload() == "bad")
        ctx.fail_permanently("bad payload");
      else
        ctx.complete("ok");
    };
    auto wk = q->start_worker(std::move(w));
    BOOST_REQUIRE(wk.has_value());
    std::vector<job_id> ids;
    for (auto& p : payloads)
      ids.push_back(*q->submit(*job_builder("work").payload(p).group("g1").build()));
    for (auto& id : ids)
      BOOST_REQUIRE(is_final(q->wait(id, 1min)->status));
    BOOST_REQUIRE(wk->stop().ok());
    return ids;
  }
};

// What the dashboard sends with every write.
const httplib::Headers writes{{"X-Ergon", "1"}};

httplib::Result post(httplib::Client& c, const std::string& path,
                     httplib::Headers headers = writes) {
  return c.Post(path.c_str(), headers, "", "text/plain");
}

// A free port of 127.0.0.1: bound, read and closed.
uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

json body_of(const httplib::Result& r) {
  BOOST_REQUIRE_MESSAGE(r, "no answer: " << httplib::to_string(r.error()));
  auto doc = json::parse(r->body, nullptr, false);
  BOOST_REQUIRE_MESSAGE(!doc.is_discarded(), r->body);
  return doc;
}

// The sample lines of an exposition, as "name{labels}" -> value.
std::map<std::string, double> samples(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in{text};
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#')
      continue;
    auto space = line.rfind(' ');
    out[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_exposition_follows_prometheus_rules) {
  metrics_snapshot m;
  m.by_status.by_status = {4, 1, 10, 2, 0, 0};
  m.by_type["a\"b\\c\nd"].by_status = {1, 0, 0, 0, 0, 0};
  m.queue_wait_bounds_ms = {1, 10};
  m.queue_wait_counts = {3, 2, 1};
  m.queue_wait_total = 6;
  m.queue_wait_sum_ms = 50;
  m.run_ms_by_type["work"] = histogram{{5, 10}, {1, 0, 2}, 3, 2'500};
  m.attempts_by_outcome = {0, 10, 1, 0, 0, 0, 0, 1};
  m.oldest_ready_ms = 1'500;
  m.local_workers = 2;
  auto text = runtime::prometheus_text(m);
  auto s = samples(text);
  BOOST_TEST(s["ergon_jobs{status=\"pending\"}"] == 4);
  BOOST_TEST(s["ergon_jobs{status=\"succeeded\"}"] == 10);
  // Label values are escaped.
  BOOST_TEST(s.count("ergon_jobs_by_type{type=\"a\\\"b\\\\c\\nd\",status=\"pending\"}") == 1u);
  // Buckets are cumulative, in seconds, and end with +Inf = count.
  BOOST_TEST(s["ergon_queue_wait_seconds_bucket{le=\"0.001\"}"] == 3);
  BOOST_TEST(s["ergon_queue_wait_seconds_bucket{le=\"0.01\"}"] == 5);
  BOOST_TEST(s["ergon_queue_wait_seconds_bucket{le=\"+Inf\"}"] == 6);
  BOOST_TEST(s["ergon_queue_wait_seconds_count"] == 6);
  BOOST_TEST(s["ergon_queue_wait_seconds_sum"] == 0.05);
  BOOST_TEST(s["ergon_job_run_seconds_bucket{type=\"work\",le=\"0.005\"}"] == 1);
  BOOST_TEST(s["ergon_job_run_seconds_bucket{type=\"work\",le=\"+Inf\"}"] == 3);
  BOOST_TEST(s["ergon_job_run_seconds_sum{type=\"work\"}"] == 2.5);
  BOOST_TEST(s["ergon_attempts_total{outcome=\"succeeded\"}"] == 10);
  BOOST_TEST(s["ergon_attempts_total{outcome=\"failed_permanently\"}"] == 1);
  BOOST_TEST(s.count("ergon_attempts_total{outcome=\"running\"}") == 0u);
  BOOST_TEST(s["ergon_oldest_ready_seconds"] == 1.5);
  BOOST_TEST(s["ergon_workers{location=\"local\"}"] == 2);
  // Every family has one HELP and one TYPE line before its samples.
  BOOST_TEST(text.find("# TYPE ergon_queue_wait_seconds histogram\n") != std::string::npos);
  BOOST_TEST(text.find("# TYPE ergon_attempts_total counter\n") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(metrics_count_what_the_queue_did) {
  served_queue s;
  s.run({"a", "b", "bad"});
  s.q->submit(*job_builder("later").run_at(t0 + 3'600'000).build());
  auto c = s.client();
  auto r = c.Get("/metrics");
  BOOST_REQUIRE(r);
  BOOST_TEST(r->status == 200);
  BOOST_TEST(r->get_header_value("Content-Type").find("text/plain; version=0.0.4") == 0u);
  auto m = samples(r->body);
  BOOST_TEST(m["ergon_jobs{status=\"succeeded\"}"] == 2);
  BOOST_TEST(m["ergon_jobs{status=\"failed\"}"] == 1);
  BOOST_TEST(m["ergon_jobs{status=\"pending\"}"] == 1);
  BOOST_TEST(m["ergon_jobs_by_type{type=\"work\",status=\"succeeded\"}"] == 2);
  BOOST_TEST(m["ergon_jobs_by_group{group=\"\",status=\"pending\"}"] == 1);
  BOOST_TEST(m["ergon_attempts_total{outcome=\"succeeded\"}"] == 2);
  BOOST_TEST(m["ergon_attempts_total{outcome=\"failed_permanently\"}"] == 1);
  BOOST_TEST(m["ergon_job_run_seconds_count{type=\"work\"}"] == 3);
  BOOST_TEST(m["ergon_queue_wait_seconds_count"] == 3);
  BOOST_TEST(m["ergon_writer_batch_requests_count"] >= 1);
  BOOST_TEST(m["ergon_commit_seconds_count"] >= 1);
  BOOST_TEST(m["ergon_workers{location=\"local\"}"] == 0);  // stopped
  BOOST_TEST(m["ergon_oldest_ready_seconds"] == 0);        // the pending one is not due
  // Lag: once due, the job waits (no worker) for as long as the clock moves.
  s.clock->advance(2h);
  m = samples(c.Get("/metrics")->body);
  BOOST_TEST(m["ergon_oldest_ready_seconds"] == 3'600);
  auto health = c.Get("/healthz");
  BOOST_REQUIRE(health);
  BOOST_TEST(health->status == 200);
  BOOST_TEST(body_of(health)["status"] == "ok");
}

BOOST_AUTO_TEST_CASE(the_json_api_lists_shows_and_acts) {
  served_queue s;
  auto ids = s.run({"a", "bad"});
  auto c = s.client();
  auto failed = body_of(c.Get("/api/jobs?status=failed"));
  BOOST_REQUIRE(failed["jobs"].size() == 1u);
  BOOST_TEST(failed["jobs"][0]["id"] == ids[1].to_string());
  BOOST_TEST(failed["jobs"][0]["attempts"][0]["message"] == "bad payload");
  auto page = body_of(c.Get("/api/jobs?limit=1&newest_first=1"));
  BOOST_TEST(page["jobs"].size() == 1u);
  BOOST_TEST(page["jobs"][0]["id"] == ids[1].to_string());
  BOOST_TEST(page["next"] == ids[1].to_string());
  auto rest = body_of(c.Get(("/api/jobs?limit=1&newest_first=1&after=" + ids[1].to_string()).c_str()));
  BOOST_TEST(rest["jobs"][0]["id"] == ids[0].to_string());
  auto one = body_of(c.Get(("/api/jobs/" + ids[0].to_string()).c_str()));
  BOOST_TEST(one["status"] == "succeeded");
  BOOST_TEST(one["result"]["size"] == 2);
  auto stats = body_of(c.Get("/api/stats"));
  BOOST_TEST(stats["by_status"]["failed"] == 1);
  BOOST_TEST(stats["now_ms"] == t0);
  // Actions from this machine, with no secret set.
  auto retry_path = "/api/jobs/" + ids[1].to_string() + "/retry";
  // Without X-Ergon a write is refused: a web page elsewhere can't send it.
  auto bare = c.Post(retry_path.c_str());
  BOOST_TEST(bare->status == 401);
  BOOST_TEST(body_of(bare)["message"].get<std::string>().find("X-Ergon") != std::string::npos);
  BOOST_TEST(s.q->job_info(ids[1])->status == job_status::failed);
  auto retried = post(c, retry_path);
  BOOST_REQUIRE(retried);
  BOOST_TEST(retried->status == 200);
  BOOST_TEST(s.q->job_info(ids[1])->status == job_status::pending);
  auto again = post(c, retry_path);
  BOOST_TEST(again->status == 400);
  BOOST_TEST(body_of(again)["field"] == "id");
  BOOST_TEST(post(c, "/api/jobs/" + ids[1].to_string() + "/cancel")->status == 200);
  BOOST_TEST(s.q->job_info(ids[1])->status == job_status::cancelled);
  BOOST_TEST(post(c, "/api/groups/g1/pause")->status == 200);
  BOOST_TEST(post(c, "/api/groups/g1/resume")->status == 200);
  BOOST_TEST(post(c, "/api/types/work/pause?for_ms=1000")->status == 200);
  BOOST_TEST(post(c, "/api/types/work/pause?for_ms=99999999999999999999")->status == 400);
  // A page that rebinds its own name to 127.0.0.1 is not answered.
  httplib::Headers rebound{{"Host", "attacker.example:" + std::to_string(s.port)}};
  BOOST_TEST(c.Get("/api/stats", rebound)->status == 403);
  httplib::Headers local{{"Host", "localhost:" + std::to_string(s.port)}};
  BOOST_TEST(c.Get("/api/stats", local)->status == 200);
  // Errors name what is wrong, as JSON with a status code.
  auto unknown = c.Get(("/api/jobs/" + job_id{}.to_string()).c_str());
  BOOST_TEST(unknown->status == 404);
  BOOST_TEST(body_of(unknown)["error"] == "not_found");
  auto bad_status = c.Get("/api/jobs?status=done");
  BOOST_TEST(bad_status->status == 400);
  BOOST_TEST(body_of(bad_status)["field"] == "status");
  auto bad_limit = c.Get("/api/jobs?limit=0");
  BOOST_TEST(bad_limit->status == 400);
  BOOST_TEST(body_of(bad_limit)["field"] == "limit");
  BOOST_TEST(body_of(c.Get("/api/jobs?limit=-3"))["field"] == "limit");
  BOOST_TEST(body_of(c.Get("/api/jobs?after=x"))["field"] == "after");
  BOOST_TEST(c.Get("/nowhere")->status == 404);
  auto page_html = c.Get("/");
  BOOST_TEST(page_html->status == 200);
  BOOST_TEST(page_html->body.find("<title>ergon</title>") != std::string::npos);
  // After close the port is gone.
  BOOST_TEST(s.q->close().ok());
  BOOST_TEST(s.q->http_port().error().code() == error::closed);
  BOOST_TEST(!s.client().Get("/healthz"));
}

BOOST_AUTO_TEST_CASE(writes_need_the_secret_when_the_queue_has_one) {
  const std::string secret = test::test_secret;
  served_queue s{secret};
  auto ids = s.run({"bad"});
  auto c = s.client();
  auto path = "/api/jobs/" + ids[0].to_string() + "/retry";
  auto without = post(c, path);
  BOOST_TEST(without->status == 401);
  BOOST_TEST(without->get_header_value("WWW-Authenticate") == "Bearer");
  BOOST_TEST(body_of(without)["message"].get<std::string>().find("Authorization: Bearer")
             != std::string::npos);
  BOOST_TEST(post(c, path, {{"X-Ergon", "1"}, {"Authorization", "Bearer not it"}})->status == 401);
  BOOST_TEST(post(c, path, {{"X-Ergon", "1"}, {"Authorization", "Bearer " + secret + "x"}})->status
             == 401);
  BOOST_TEST(s.q->job_info(ids[0])->status == job_status::failed);
  // Reads need none.
  BOOST_TEST(c.Get("/metrics")->status == 200);
  BOOST_TEST(post(c, path, {{"X-Ergon", "1"}, {"Authorization", "Bearer " + secret}})->status
             == 200);
  BOOST_TEST(s.q->job_info(ids[0])->status == job_status::pending);
}

BOOST_AUTO_TEST_CASE(bad_http_options_are_named_and_open_nothing) {
  temp_dir dir;
  options o;
  o.http = http_options{};
  o.http->address = "";
  auto empty = queue::open(dir.file("q.db"), o);
  BOOST_REQUIRE(!empty.has_value());
  BOOST_TEST(empty.error().field() == "http.address");
  served_queue taken;
  o.http->address = "127.0.0.1";
  o.http->port = taken.port;
  auto clash = queue::open(dir.file("q.db"), o);
  BOOST_REQUIRE(!clash.has_value());
  BOOST_TEST(clash.error().code() == error::io_error);
  BOOST_TEST(clash.error().message().find(std::to_string(taken.port)) != std::string::npos);
  // The failed open released the file.
  BOOST_TEST(queue::open(dir.file("q.db")).has_value());
  auto plain = queue::open(dir.file("other.db"));
  BOOST_TEST(plain->http_port().error().code() == error::invalid_argument);
}

// Debian's prometheus scrapes /metrics; its query API then gives the
// queue's counts.
BOOST_AUTO_TEST_CASE(a_real_prometheus_scrapes_the_endpoint) {
  served_queue s;
  s.run({"a", "b", "c", "bad"});
  auto web_port = free_port();
  // A second target in the same job, served here, tells the test each time
  // Prometheus scraped: the test waits on those scrapes instead of a timer.
  std::mutex mtx;
  std::condition_variable scraped;
  int marker_scrapes = 0;
  httplib::Server marker;
  marker.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content("ergon_test_marker 1\n", "text/plain; version=0.0.4");
    std::lock_guard<std::mutex> guard{mtx};
    ++marker_scrapes;
    scraped.notify_all();
  });
  auto marker_port = marker.bind_to_any_port("127.0.0.1");
  std::thread marker_thread{[&] { marker.listen_after_bind(); }};
  auto config = s.dir.file("prometheus.yml");
  std::ofstream{config} << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                        << "scrape_configs:\n  - job_name: ergon\n    static_configs:\n"
                        << "      - targets: ['127.0.0.1:" << s.port << "', '127.0.0.1:"
                        << marker_port << "']\n";
  child_process prom{{"/usr/bin/prometheus", "--config.file=" + config,
                      "--storage.tsdb.path=" + s.dir.file("tsdb"),
                      "--web.listen-address=127.0.0.1:" + std::to_string(web_port),
                      "--log.level=warn"}};
  httplib::Client api{"127.0.0.1", web_port};
  api.set_connection_timeout(1, 0);
  // After each marker scrape, ask; both targets share the 1 s interval, so
  // within a few scrapes the queue's samples are in. Bounded.
  double succeeded = -1;
  std::string last;
  for (int seen = 0; seen < 60 && succeeded < 0; ++seen) {
    {
      std::unique_lock<std::mutex> guard{mtx};
      if (!scraped.wait_for(guard, 30s, [&] { return marker_scrapes > seen; }))
        break;
    }
    auto r = api.Get("/api/v1/query?query=ergon_jobs%7Bstatus%3D%22succeeded%22%7D");
    if (r && r->status == 200) {
      last = r->body;
      auto doc = json::parse(r->body, nullptr, false);
      if (!doc.is_discarded() && !doc["data"]["result"].empty())
        succeeded = std::stod(doc["data"]["result"][0]["value"][1].get<std::string>());
    }
  }
  BOOST_TEST_MESSAGE("prometheus answered: " << last);
  BOOST_TEST(succeeded == 3);
  auto up = api.Get(("/api/v1/query?query=up%7Binstance%3D%22127.0.0.1%3A"
                     + std::to_string(s.port) + "%22%7D").c_str());
  BOOST_REQUIRE(up);
  auto doc = json::parse(up->body);
  BOOST_TEST(doc["data"]["result"][0]["value"][1] == "1");
  auto failed = api.Get(
    "/api/v1/query?query=ergon_attempts_total%7Boutcome%3D%22failed_permanently%22%7D");
  BOOST_TEST(json::parse(failed->body)["data"]["result"][0]["value"][1] == "1");
  prom.signal(SIGTERM);
  prom.wait();
  marker.stop();
  marker_thread.join();
}
