// The HTTP endpoint (options::http): /metrics in Prometheus' format, checked
// line by line and scraped by Debian's real prometheus binary; /healthz; the
// JSON API with its errors and the secret that writes need.
#define BOOST_TEST_MODULE http
#include <boost/test/unit_test.hpp>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <thread>

#include "ergon/job_builder.hpp"
#include "ergon/queue.hpp"
#include "http/request_head.hpp"
#include "prometheus_text.hpp"
#include "support/child_process.hpp"
#include "support/test_engine.hpp"
#include "support/test_support.hpp"

using namespace ergon;
using ergon::test::child_process;
using ergon::test::temp_dir;
using ergon::test::test_location;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

constexpr int64_t t0 = 1'700'000'000'000;

// A queue with an HTTP endpoint on a free loopback port and a manual clock;
// `secret` set: it also listens, with that secret.
struct served_queue {
  temp_dir dir;
  std::string location = test_location(dir);
  std::shared_ptr<manual_clock> clock = std::make_shared<manual_clock>(t0);
  std::optional<queue> q;
  uint16_t port = 0;

  explicit served_queue(const std::string& secret = {}, const std::string& worker_secret = {},
                        const std::string& client_secret = {}) {
    options o;
    o.clock = clock;
    o.http = http_options{};
    if (!secret.empty()) {
      o.listen = listen_options{};
      o.listen->creds.secret = secret;
      o.listen->worker_secret = worker_secret;
      o.listen->client_secret = client_secret;
    }
    auto opened = queue::open(location, o);
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
      if (ctx.payload() == "bad") {
        ctx.log(log_level::error, "refusing " + ctx.payload());
        ctx.fail_permanently("bad payload");
      }
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

// A TCP connection to 127.0.0.1:port; -1 if refused.
int connect_to(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Everything the peer sends on `fd` until it closes, or until `wait` passes
// with nothing new (then what came so far).
std::string read_until_closed(int fd, std::chrono::milliseconds wait = 10s) {
  std::string got;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0)
      return got;
    char buf[4096];
    auto n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0)
      return got;
    got.append(buf, static_cast<size_t>(n));
  }
}

// Sends `request` on a new connection and returns the whole answer.
std::string ask_raw(uint16_t port, const std::string& request) {
  int fd = connect_to(port);
  BOOST_REQUIRE(fd >= 0);
  BOOST_REQUIRE(::send(fd, request.data(), request.size(), MSG_NOSIGNAL)
                == static_cast<ssize_t>(request.size()));
  auto answer = read_until_closed(fd);
  ::close(fd);
  return answer;
}

int status_of(const std::string& answer) {
  return answer.rfind("HTTP/1.1 ", 0) == 0 ? std::stoi(answer.substr(9, 3)) : 0;
}

json json_of(const std::string& answer) {
  auto body = answer.find("\r\n\r\n");
  BOOST_REQUIRE_MESSAGE(body != std::string::npos, answer);
  auto doc = json::parse(answer.substr(body + 4), nullptr, false);
  BOOST_REQUIRE_MESSAGE(!doc.is_discarded(), answer);
  return doc;
}

bool paused(queue& q, const std::string& group) {
  auto m = q.metrics();
  BOOST_REQUIRE(m.has_value());
  auto& groups = m->groups;
  auto g = std::find_if(groups.begin(), groups.end(),
                        [&](const group_metrics& x) { return x.group == group; });
  return g != groups.end() && g->paused;
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
  BOOST_TEST(failed["jobs"][0]["attempts"][0]["worker"]["pid"] == ::getpid());
  auto shown = body_of(c.Get(("/api/jobs/" + ids[1].to_string()).c_str()));
  BOOST_TEST(shown["attempts"][0]["logs"][0]["text"] == "refusing bad");
  BOOST_TEST(shown["attempts"][0]["logs"][0]["level"] == "error");
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
  // A replay takes any finished job; the cancelled one is pending again.
  auto replayed = post(c, "/api/jobs/" + ids[1].to_string() + "/replay");
  BOOST_REQUIRE(replayed);
  BOOST_TEST(replayed->status == 200);
  BOOST_TEST(body_of(replayed)["done"] == "replay");
  BOOST_TEST(s.q->job_info(ids[1])->status == job_status::pending);
  BOOST_TEST(post(c, "/api/jobs/" + ids[1].to_string() + "/replay")->status == 400);
  BOOST_TEST(post(c, "/api/jobs/" + ids[1].to_string() + "/cancel")->status == 200);
  BOOST_TEST(post(c, "/api/groups/g1/pause")->status == 200);
  BOOST_TEST(post(c, "/api/groups/g1/resume")->status == 200);
  BOOST_TEST(post(c, "/api/types/work/pause?for_ms=1000")->status == 200);
  BOOST_TEST(post(c, "/api/types/work/pause?for_ms=99999999999999999999")->status == 400);
  // Pauses are listed, names paused ahead among them, and can all be ended.
  BOOST_TEST(post(c, "/api/groups/no-jobs-yet/pause")->status == 200);
  auto listed = body_of(c.Get("/api/stats"))["pauses"];
  BOOST_REQUIRE(listed.size() == 2u);
  BOOST_TEST(listed[0]["group"] == "no-jobs-yet");
  BOOST_TEST(listed[0]["until_ms"].is_null());
  BOOST_TEST(listed[1]["type"] == "work");
  BOOST_TEST(listed[1]["until_ms"].is_number());
  BOOST_TEST(c.Get("/api/pauses/resume")->status == 405);
  auto resumed = post(c, "/api/pauses/resume");
  BOOST_REQUIRE(resumed);
  BOOST_TEST(resumed->status == 200);
  BOOST_TEST(body_of(resumed)["resumed"] == 2);
  BOOST_TEST(s.q->metrics()->pauses.empty());
  // Run-time controls: the queue's pause, settings as JSON, their list, and
  // bodies refused by the field that is wrong.
  auto changes_before = body_of(c.Get("/api/stats"))["control_changes"].get<int64_t>();
  BOOST_TEST(post(c, "/api/queue/pause?for_ms=60000")->status == 200);
  auto post_json = [&](const std::string& path, const std::string& body) {
    return c.Post(path.c_str(), writes, body, "application/json");
  };
  auto set = post_json("/api/groups/g1/settings",
                       R"({"weight": 3, "max_running": 0, "rate": {"per_second": 2.5, "burst": 4}})");
  BOOST_REQUIRE(set);
  BOOST_TEST(set->status == 200, set->body);
  BOOST_TEST(body_of(set)["rate"]["burst"] == 4);
  for (auto [body, field] : {std::pair{"not json", "body"}, std::pair{"[1]", "body"},
                             std::pair{R"({"weight": "3"})", "weight"},
                             std::pair{R"({"weight": 0})", "weight"},
                             std::pair{R"({"colour": 1})", "colour"},
                             std::pair{R"({"rate": 5})", "rate.per_second"},
                             std::pair{R"({"rate": {"per_second": 1, "burst": 0}})", "rate.burst"},
                             std::pair{"{}", "settings"}}) {
    auto bad = post_json("/api/types/work/settings", body);
    BOOST_REQUIRE(bad);
    BOOST_TEST(bad->status == 400, body);
    BOOST_TEST(body_of(bad)["field"] == field, body << ": " << bad->body);
  }
  BOOST_TEST(c.Post("/api/groups/g1/settings", "{\"weight\": 2}", "application/json")->status
             == 401);  // no X-Ergon
  // A worker's concurrency: only max_running, 1 or more.
  for (auto [body, field] : {std::pair{R"({"max_running": 0})", "max_running"},
                             std::pair{R"({"weight": 2, "max_running": 2})", "weight"},
                             std::pair{R"({"rate": {"per_second": 1}})", "rate"}}) {
    auto bad = post_json("/api/workers/mailer/settings", body);
    BOOST_REQUIRE(bad);
    BOOST_TEST(bad->status == 400, body);
    BOOST_TEST(body_of(bad)["field"] == field, body << ": " << bad->body);
  }
  auto sized = post_json("/api/workers/mail%20er/settings", R"({"max_running": 6})");
  BOOST_REQUIRE(sized);
  BOOST_TEST(sized->status == 200, sized->body);
  BOOST_TEST(body_of(sized)["worker"] == "mail er");
  BOOST_TEST(body_of(sized)["max_running"] == 6);
  BOOST_TEST(s.q->controls()->back().name == "mail er");
  BOOST_TEST(post(c, "/api/workers/mail%20er/reset")->status == 200);
  auto controls = body_of(c.Get("/api/controls"));
  BOOST_REQUIRE(controls.size() == 2u);
  BOOST_TEST(controls[0]["scope"] == "queue");
  BOOST_TEST(controls[0]["paused_until_ms"].is_number());
  BOOST_TEST(controls[1]["name"] == "g1");
  BOOST_TEST(controls[1]["settings"]["weight"] == 3);
  // The queue's pause, g1's settings, and the worker's set and reset.
  BOOST_TEST(body_of(c.Get("/api/stats"))["control_changes"] == changes_before + 4);
  BOOST_TEST(post(c, "/api/groups/g1/reset")->status == 200);
  BOOST_TEST(post(c, "/api/queue/resume")->status == 200);
  BOOST_TEST(body_of(c.Get("/api/controls")).empty());
  BOOST_TEST(c.Get("/api/queue/pause")->status == 405);
  // A recurring job's own pause: by id, timed or not, named when missing.
  recurring_job r;
  r.id = "nightly report";
  r.schedule = "every 1h";
  r.job = *job_builder{"work"}.build();
  BOOST_REQUIRE(s.q->add_recurring(r).has_value());
  BOOST_TEST(post(c, "/api/recurring/nightly%20report/pause?for_ms=60000")->status == 200);
  auto rec = body_of(c.Get("/api/recurring"));
  BOOST_REQUIRE(rec.size() == 1u);
  BOOST_TEST(rec[0]["paused"] == true);
  BOOST_TEST(rec[0]["paused_until_ms"].is_number());
  BOOST_TEST(post(c, "/api/recurring/nightly%20report/pause?for_ms=0")->status == 400);
  BOOST_TEST(post(c, "/api/recurring/nightly%20report/resume")->status == 200);
  BOOST_TEST(body_of(c.Get("/api/recurring"))[0]["paused"] == false);
  auto missing = post(c, "/api/recurring/none/pause");
  BOOST_TEST(missing->status == 404);
  BOOST_TEST(c.Get("/api/recurring/none/pause")->status == 405);
  BOOST_TEST(c.Get("/api/jobs/" + ids[1].to_string() + "/replay")->status == 405);
  BOOST_TEST(c.Post("/api/recurring/nightly%20report/pause")->status == 401);  // no X-Ergon
  BOOST_TEST(body_of(c.Get("/api/stats"))["control_changes"] == changes_before + 8);
  BOOST_REQUIRE(s.q->delete_recurring("nightly report").ok());
  // The workers registered now: none once run() stopped its worker.
  BOOST_TEST(body_of(c.Get("/api/workers")).empty());
  worker_options w;
  w.name = "listed";
  w.runners["work"] = [](job_context& ctx) { ctx.complete("ok"); };
  auto wk = s.q->start_worker(std::move(w));
  BOOST_REQUIRE(wk.has_value());
  auto ran = s.q->submit(*job_builder("work").build());
  BOOST_REQUIRE(s.q->wait(*ran, 1min)->status == job_status::succeeded);
  auto workers = body_of(c.Get("/api/workers"));
  BOOST_REQUIRE(workers.size() == 1u);
  BOOST_TEST(workers[0]["worker"]["name"] == "listed");
  BOOST_TEST(workers[0]["worker"]["pid"] == ::getpid());
  BOOST_TEST(workers[0]["types"][0] == "work");
  BOOST_TEST(c.Post("/api/workers", writes, "", "text/plain")->status == 405);
  BOOST_TEST(wk->stop().ok());
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

// Roles on the HTTP endpoint: the bearer secret's role decides. A client's
// submits, an operator's does the rest; a worker's writes nothing. A
// refusal is 403 naming the role, counted with the actor port's.
BOOST_AUTO_TEST_CASE(a_bearer_secret_s_role_decides_what_it_may_write) {
  const std::string secret = test::test_secret;
  auto worker_secret = make_secret();
  auto client_secret = make_secret();
  served_queue s{secret, worker_secret, client_secret};
  auto ids = s.run({"bad"});
  auto c = s.client();
  auto as = [](const std::string& proof) {
    return httplib::Headers{{"X-Ergon", "1"}, {"Authorization", "Bearer " + proof}};
  };
  auto submit = [&](const std::string& proof) {
    return c.Post("/api/jobs", as(proof), R"({"type": "work", "payload": "x"})",
                  "application/json");
  };
  auto by_client = submit(client_secret);
  BOOST_REQUIRE(by_client);
  BOOST_TEST(by_client->status == 201, by_client->body);
  BOOST_TEST(submit(secret)->status == 201);
  auto by_worker = submit(worker_secret);
  BOOST_REQUIRE(by_worker);
  BOOST_TEST(by_worker->status == 403, by_worker->body);
  BOOST_TEST(body_of(by_worker)["error"] == "forbidden");
  BOOST_TEST(body_of(by_worker)["message"].get<std::string>().find("needs the client role")
               != std::string::npos,
             by_worker->body);
  BOOST_TEST(by_worker->get_header_value("WWW-Authenticate").empty());
  auto retry = "/api/jobs/" + ids[0].to_string() + "/retry";
  for (auto& proof : {client_secret, worker_secret}) {
    auto refused = post(c, retry, as(proof));
    BOOST_REQUIRE(refused);
    BOOST_TEST(refused->status == 403, refused->body);
    BOOST_TEST(body_of(refused)["message"].get<std::string>().find("needs the operator role")
                 != std::string::npos,
               refused->body);
  }
  BOOST_TEST(post(c, "/api/groups/g1/pause", as(client_secret))->status == 403);
  BOOST_TEST(s.q->job_info(ids[0])->status == job_status::failed);
  BOOST_TEST(s.q->metrics()->pauses.empty());
  BOOST_TEST(post(c, retry, as(secret))->status == 200);
  BOOST_TEST(s.q->job_info(ids[0])->status == job_status::pending);
  BOOST_TEST(post(c, retry, as(make_secret()))->status == 401);  // no role at all
  BOOST_TEST(s.q->metrics()->forbidden_messages == 4);
  BOOST_TEST(body_of(c.Get("/api/stats"))["forbidden_messages"] == 4);
  BOOST_TEST(c.Get("/metrics")->body.find("ergon_forbidden_messages_total 4") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(bad_http_options_are_named_and_open_nothing) {
  temp_dir dir;
  auto location = test_location(dir);
  options o;
  o.http = http_options{};
  o.http->address = "";
  auto empty = queue::open(location, o);
  BOOST_REQUIRE(!empty.has_value());
  BOOST_TEST(empty.error().field() == "http.address");
  served_queue taken;
  o.http->address = "127.0.0.1";
  o.http->port = taken.port;
  auto clash = queue::open(location, o);
  BOOST_REQUIRE(!clash.has_value());
  BOOST_TEST(clash.error().code() == error::io_error);
  BOOST_TEST(clash.error().message().find(std::to_string(taken.port)) != std::string::npos);
  // The failed open released the data.
  BOOST_TEST(queue::open(location).has_value());
  auto plain = queue::open(test_location(dir));
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

BOOST_AUTO_TEST_SUITE(front)

// The forms a DNS-rebinding page or a sloppy check lets through, and the
// ones a local client sends.
BOOST_AUTO_TEST_CASE(the_host_must_be_exactly_a_loopback_name_with_the_port) {
  for (auto host : {"127.0.0.1:4781", "localhost:4781", "LocalHost:4781", "[::1]:4781",
                    "127.9.8.7:4781", "[::ffff:127.0.0.1]:4781", "[0:0:0:0:0:0:0:1]:4781"})
    BOOST_TEST(http::loopback_host(host, 4781, false), host);
  for (auto host : {"127.rebind.attacker.example:4781", "[::1].attacker.example:4781",
                    "localhost.evil.example:4781", "0x7f000001:4781", "2130706433:4781",
                    "127.1:4781", "0127.0.0.1:4781", "127.0.0.1.:4781", "attacker.example:4781",
                    "", ":4781", "127.0.0.1:4782", "127.0.0.1:04781x", "127.0.0.1:",
                    "127.0.0.1:4781:4781", "localhost", "127.0.0.1", "[::1]", "[::1:4781",
                    "[::2]:4781", "10.0.0.1:4781", "localhost :4781", "127.0.0.1:+4781"})
    BOOST_TEST(!http::loopback_host(host, 4781, false), host);
  // The port may be left out only where it is the scheme's default.
  BOOST_TEST(http::loopback_host("localhost", 80, false));
  BOOST_TEST(http::loopback_host("[::1]", 443, true));
  BOOST_TEST(!http::loopback_host("localhost", 443, false));
  for (auto a : {"127.0.0.1", "127.255.0.9", "::1", "::ffff:127.0.0.1"})
    BOOST_TEST(http::loopback_address(a), a);
  for (auto a : {"0.0.0.0", "::", "10.1.2.3", "::ffff:10.0.0.1", "localhost", "", "127.1"})
    BOOST_TEST(!http::loopback_address(a), a);
}

BOOST_AUTO_TEST_CASE(a_request_is_framed_before_anything_reads_it) {
  http::request_limits limits;
  using v = http::framing::verdict;
  auto frame = [&](const std::string& bytes) { return http::frame_request(bytes, limits); };
  BOOST_TEST((frame("").what == v::incomplete));
  BOOST_TEST((frame("GET /healthz HTTP/1.1\r\nHost: x\r\n").what == v::incomplete));
  std::string head = "GET /api/jobs?limit=1 HTTP/1.1\r\nHost: x\r\n\r\n";
  auto get = frame(head + "extra");
  BOOST_TEST((get.what == v::complete));
  BOOST_TEST(get.length == head.size());
  BOOST_TEST(get.path == "/api/jobs");
  std::string post = "POST /a HTTP/1.1\r\ncontent-LENGTH: 5\r\n\r\n";
  BOOST_TEST((frame(post + "abcd").what == v::incomplete));
  BOOST_TEST(frame(post + "abcde").length == post.size() + 5);
  // Refused, with the status and code that say why, before a body byte.
  auto refused = [&](const std::string& bytes, int status, const std::string& code) {
    auto f = frame(bytes);
    BOOST_TEST((f.what == v::refused), bytes);
    BOOST_TEST(f.refused.status == status, bytes);
    BOOST_TEST(f.refused.code == code, bytes);
  };
  refused("POST /healthz HTTP/1.1\r\nContent-Length: 52428800\r\n\r\n", 413, "body_too_large");
  refused("POST /a HTTP/1.1\r\nContent-Length: 4097\r\n\r\n", 413, "body_too_large");
  BOOST_TEST((frame("POST /a HTTP/1.1\r\nContent-Length: 4096\r\n\r\n").what == v::incomplete));
  refused("POST /a HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", 400, "bad_request");
  refused("POST /a HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400, "bad_request");
  refused("POST /a HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400,
          "bad_request");
  refused("POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411, "length_required");
  refused("GET\r\n\r\n", 400, "bad_request");
  refused("GET /a HTTP/1.1\r\nno colon here\r\n\r\n", 400, "bad_request");
  refused("GET /a HTTP/1.1\r\nX: " + std::string(16 * 1024, 'a'), 431, "headers_too_large");
  auto answer = http::response_bytes({413, "body_too_large", "too big"});
  BOOST_TEST(status_of(answer) == 413);
  BOOST_TEST(json_of(answer)["error"] == "body_too_large");
}

// A page whose name rebinds to 127.0.0.1 sends its own Host: it reads
// nothing and changes nothing, with or without a secret.
BOOST_AUTO_TEST_CASE(a_rebinding_page_reaches_nothing) {
  for (std::string secret : {std::string{}, std::string{test::test_secret}}) {
    served_queue s{secret};
    auto ids = s.run({"a"});
    auto port = std::to_string(s.port);
    for (std::string host : {"127.rebind.attacker.example:" + port,
                             "[::1].attacker.example:" + port, "localhost.evil.example:" + port,
                             "0x7f000001:" + port, "attacker.example:" + port}) {
      auto read = ask_raw(s.port, "GET /api/jobs HTTP/1.1\r\nHost: " + host + "\r\n\r\n");
      BOOST_TEST(status_of(read) == 403, host);
      BOOST_TEST(json_of(read)["error"] == "host_not_allowed", host);
      auto pause = ask_raw(s.port, "POST /api/groups/g1/pause HTTP/1.1\r\nHost: " + host
                                      + "\r\nX-Ergon: 1\r\nContent-Length: 0\r\n\r\n");
      BOOST_TEST(status_of(pause) == 403, host);
    }
    BOOST_TEST(!paused(*s.q, "g1"));
    auto local = ask_raw(s.port, "GET /api/jobs/" + ids[0].to_string()
                                    + " HTTP/1.1\r\nHost: localhost:" + port + "\r\n\r\n");
    BOOST_TEST(status_of(local) == 200);
  }
}

// 300 silent connections and 20 that send a byte every 200 ms: the
// probes answer within 1 s throughout, and the request deadline (5 s)
// closes every one of them, the trickling ones with a 408.
BOOST_AUTO_TEST_CASE(idle_and_slow_connections_starve_nothing) {
  served_queue s;
  std::vector<int> idle;
  for (int i = 0; i < 300; ++i) {
    idle.push_back(connect_to(s.port));
    BOOST_REQUIRE(idle.back() >= 0);
  }
  std::vector<int> slow;
  for (int i = 0; i < 20; ++i) {
    slow.push_back(connect_to(s.port));
    BOOST_REQUIRE(slow.back() >= 0);
  }
  const std::string trickle =
    "GET /api/stats HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(s.port) + "\r\nX-Pad: "
    + std::string(200, 'a') + "\r\n\r\n";
  // The probes' loop trickles too: one byte to each slow client whenever
  // 200 ms have passed, so nothing sleeps.
  size_t trickled = 0;
  auto next_byte = std::chrono::steady_clock::now();
  auto until = next_byte + 6s;
  std::chrono::milliseconds slowest{0};
  int answered = 0;
  while (std::chrono::steady_clock::now() < until) {
    if (std::chrono::steady_clock::now() >= next_byte && trickled < trickle.size()) {
      for (int fd : slow)
        ::send(fd, &trickle[trickled], 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      ++trickled;
      next_byte += 200ms;
    }
    for (auto path : {"/healthz", "/metrics"}) {
      httplib::Client c{"127.0.0.1", s.port};
      c.set_connection_timeout(1, 0);
      c.set_read_timeout(1, 0);
      auto start = std::chrono::steady_clock::now();
      auto r = c.Get(path);
      auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
      slowest = std::max(slowest, took);
      BOOST_REQUIRE_MESSAGE(r, path << ": " << httplib::to_string(r.error()));
      BOOST_TEST(r->status == 200);
      ++answered;
    }
  }
  BOOST_TEST_MESSAGE(answered << " probes answered, the slowest in " << slowest.count() << " ms");
  BOOST_TEST(slowest.count() < 1000);
  // By now every connection is past its deadline: each was closed.
  for (int fd : idle) {
    BOOST_TEST(read_until_closed(fd, 5s).empty());
    ::close(fd);
  }
  for (int fd : slow) {
    auto answer = read_until_closed(fd, 5s);
    BOOST_TEST(status_of(answer) == 408, answer);
    ::close(fd);
  }
}

// A body over the limit is refused as soon as its headers say so: the
// answer comes before a byte of it is sent.
BOOST_AUTO_TEST_CASE(a_large_body_is_refused_before_it_is_read) {
  served_queue s;
  auto host = "Host: 127.0.0.1:" + std::to_string(s.port) + "\r\n";
  auto big = ask_raw(s.port, "POST /healthz HTTP/1.1\r\n" + host
                                + "Content-Length: 52428800\r\n\r\n");
  BOOST_TEST(status_of(big) == 413);
  BOOST_TEST(json_of(big)["error"] == "body_too_large");
  auto chunked = ask_raw(s.port, "POST /healthz HTTP/1.1\r\n" + host
                                    + "Transfer-Encoding: chunked\r\n\r\n");
  BOOST_TEST(status_of(chunked) == 411);
  auto headers = ask_raw(s.port, "GET /healthz HTTP/1.1\r\n" + host + "X-Big: "
                                    + std::string(20'000, 'h') + "\r\n\r\n");
  BOOST_TEST(status_of(headers) == 431);
  // While a client sends its 50 MB, the answer has come and gone.
  int fd = connect_to(s.port);
  auto head = "POST /healthz HTTP/1.1\r\n" + host + "Content-Length: 52428800\r\n\r\n";
  ::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
  std::string chunk(64 * 1024, 'x');
  size_t sent = 0;
  while (sent < 52428800) {
    auto n = ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (n <= 0)
      break;
    sent += static_cast<size_t>(n);
  }
  BOOST_TEST_MESSAGE("the server took " << sent << " bytes of the body before closing");
  BOOST_TEST(sent < 52428800u);
  ::close(fd);
}

// Every error is JSON with a code of its own.
BOOST_AUTO_TEST_CASE(errors_are_json_and_say_what_is_wrong) {
  served_queue s;
  auto ids = s.run({"a", "b"});
  auto c = s.client();
  auto wrong = c.Delete("/api/jobs");
  BOOST_TEST(wrong->status == 405);
  BOOST_TEST(wrong->get_header_value("Allow") == "GET, HEAD, POST");
  BOOST_TEST(body_of(wrong)["error"] == "method_not_allowed");
  auto get_cancel = c.Get(("/api/jobs/" + ids[0].to_string() + "/cancel").c_str());
  BOOST_TEST(get_cancel->status == 405);
  BOOST_TEST(get_cancel->get_header_value("Allow") == "POST");
  BOOST_TEST(c.Put("/healthz", "", "text/plain")->status == 405);
  auto nowhere = c.Get("/nowhere");
  BOOST_TEST(body_of(nowhere)["error"] == "not_found");
  auto garbage = ask_raw(s.port, "GET /healthz HTTP/9\r\nHost: 127.0.0.1:"
                                    + std::to_string(s.port) + "\r\n\r\n");
  BOOST_TEST(status_of(garbage) == 400);
  BOOST_TEST(json_of(garbage)["error"] == "bad_request");
  // A POST with neither a body nor a Content-Length is taken.
  auto host = "Host: 127.0.0.1:" + std::to_string(s.port) + "\r\n";
  auto bare = ask_raw(s.port, "POST /api/groups/g1/pause HTTP/1.1\r\n" + host
                                 + "X-Ergon: 1\r\n\r\n");
  BOOST_TEST(status_of(bare) == 200, bare);
  BOOST_TEST(paused(*s.q, "g1"));
  // Names follow the job field rules: a NUL never reaches a metrics label.
  for (auto name : {"%00evil", "a%0Ab", "%1B%5B2J", "%FF%FE", "%C2%9B"}) {
    auto refused = post(c, std::string{"/api/groups/"} + name + "/pause");
    BOOST_TEST(refused->status == 400, name);
    BOOST_TEST(body_of(refused)["field"] == "group", name);
  }
  BOOST_TEST(post(c, "/api/types/%00/resume")->status == 400);
  BOOST_TEST(s.q->metrics().has_value());
  BOOST_TEST(runtime::prometheus_text(*s.q->metrics()).find('\0') == std::string::npos);
  auto newest = body_of(c.Get("/api/jobs?newest_first=true"));
  BOOST_REQUIRE(newest["jobs"].size() == 2u);
  BOOST_TEST(newest["jobs"][0]["id"] == ids[1].to_string());
  auto oldest = body_of(c.Get("/api/jobs?newest_first=false"));
  BOOST_TEST(oldest["jobs"][0]["id"] == ids[0].to_string());
  auto bad = c.Get("/api/jobs?newest_first=yes");
  BOOST_TEST(bad->status == 400);
  BOOST_TEST(body_of(bad)["field"] == "newest_first");
}

// HTTPS from certificate files; a plain request to it gets no answer, and
// an address beyond loopback without TLS needs saying so.
BOOST_AUTO_TEST_CASE(https_serves_from_certificate_files) {
  temp_dir certs;
  auto cert = certs.file("web.pem");
  auto key = certs.file("web.key");
  BOOST_REQUIRE(std::system(("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 "
                             "-nodes -days 2 -subj /CN=127.0.0.1 -addext "
                             "subjectAltName=IP:127.0.0.1 -keyout " + key + " -out " + cert
                             + " 2>/dev/null").c_str()) == 0);
  ::chmod(key.c_str(), 0600);
  temp_dir dir;
  auto location = test_location(dir);
  options o;
  o.http = http_options{};
  o.http->tls = tls_options{};
  o.http->tls->certificate = cert;
  o.http->tls->key = key;
  auto q = queue::open(location, o);
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  auto port = *q->http_port();
  httplib::SSLClient tls{"127.0.0.1", port};
  tls.set_ca_cert_path(cert.c_str());
  tls.enable_server_certificate_verification(true);
  auto r = tls.Get("/healthz");
  BOOST_REQUIRE_MESSAGE(r, httplib::to_string(r.error()));
  BOOST_TEST(r->status == 200);
  auto plain = ask_raw(port, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port)
                                + "\r\n\r\n");
  BOOST_TEST(plain.find("HTTP/1.1 200") == std::string::npos);
  BOOST_TEST(q->close().ok());
  // Beyond loopback, plain HTTP is refused unless asked for by name.
  options wide;
  wide.http = http_options{};
  wide.http->address = "0.0.0.0";
  auto refused = queue::open(location, wide);
  BOOST_REQUIRE(!refused.has_value());
  BOOST_TEST(refused.error().field() == "http.tls");
  // A key others may read is refused, as for the queue's port.
  ::chmod(key.c_str(), 0644);
  auto open_key = queue::open(location, o);
  BOOST_REQUIRE(!open_key.has_value());
  BOOST_TEST(open_key.error().field() == "key");
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// Runs tests/support/submit_jobs.py (Python's standard library only)
// against the endpoint; its answers by case.
std::map<std::string, json> python_submits(uint16_t port, const std::string& secret = {}) {
  std::vector<std::string> argv{"/usr/bin/env", "python3", ERGON_SUBMIT_SCRIPT,
                                "http://127.0.0.1:" + std::to_string(port)};
  if (!secret.empty())
    argv.push_back(secret);
  test::child_process p{argv};
  std::map<std::string, json> out;
  for (auto line = p.read_line(); !line.empty() || !p.eof(); line = p.read_line()) {
    auto doc = json::parse(line, nullptr, false);
    BOOST_REQUIRE_MESSAGE(!doc.is_discarded(), line);
    out[doc["case"].get<std::string>()] = doc;
  }
  int st = p.wait();
  BOOST_REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(python_submits_jobs_as_json_base64_and_text_and_gets_named_errors) {
  const std::string secret = test::test_secret;
  served_queue s{secret};
  auto r = python_submits(s.port, secret);
  auto id_of = [&](const std::string& c) {
    BOOST_REQUIRE_MESSAGE(r[c]["status"] == 201, r[c].dump());
    auto id = job_id::parse(r[c]["body"]["id"].get<std::string>());
    BOOST_REQUIRE(id.has_value());
    return s.q->job_info(*id);
  };
  // JSON payloads are stored as msgpack; the other fields arrive as given.
  auto structured = id_of("json");
  BOOST_REQUIRE(structured.has_value());
  BOOST_TEST(json::from_msgpack(structured->payload) == json::parse(R"({"w": 640, "tags": ["a", "b"]})"));
  BOOST_TEST(structured->group.value_or("") == "tenant-a");
  BOOST_TEST(structured->priority == 5);
  BOOST_TEST(id_of("base64")->payload == std::string("\0\xffraw", 5));
  auto text = id_of("text");
  BOOST_TEST(text->payload == "hello");
  BOOST_TEST(text->name.value_or("") == "welcome");
  BOOST_TEST(text->max_retries == 1);
  BOOST_TEST((text->backoff.kind == backoff_kind::constant));
  // A batch answers its ids in order; a position names an earlier job.
  BOOST_REQUIRE(r["batch"]["status"] == 201);
  auto ids = r["batch"]["body"]["ids"];
  BOOST_REQUIRE(ids.size() == 2u);
  auto second = s.q->job_info(*job_id::parse(ids[1].get<std::string>()));
  BOOST_TEST((second->status == job_status::waiting));
  // Past the 4 KiB every other request is held to, from a writer that
  // proved itself in its headers.
  BOOST_TEST(id_of("big")->payload.size() == 100'000u);
  // Errors name the field (with the position in a batch), and write nothing.
  auto refused = [&](const std::string& c, const std::string& field) {
    BOOST_TEST_CONTEXT(c) {
      BOOST_TEST(r[c]["status"] == 400);
      BOOST_TEST(r[c]["body"]["field"] == field, r[c].dump());
    }
  };
  refused("bad-priority", "jobs[1].priority");
  refused("no-type", "type");
  refused("two-payloads", "payload");
  refused("unknown-key", "colour");
  refused("bad-base64", "payload_base64");
  refused("not-json", "body");
  refused("bad-tags", "tags.tenant");
  refused("tagged-kept", "tags");  // an empty key
  refused("bad-raise", "raise_holder_priority");
  refused("bad-policy", "on_duplicate");
  // A duplicate of a pending holder returns it, raised to its priority.
  BOOST_TEST(r["keyed-again"]["body"]["id"] == r["keyed"]["body"]["id"]);
  BOOST_TEST(id_of("keyed")->priority == 4);
  // Tags arrive as given; bulk actions by tag answer what they touched.
  BOOST_TEST((id_of("tagged-other")->tags
              == std::map<std::string, std::string>{{"tenant", "initech"}, {"note", "ok"}}));
  BOOST_REQUIRE(r["cancel-by-tag"]["status"] == 200);
  BOOST_TEST(r["cancel-by-tag"]["body"] == json::parse(R"({"cancelled": 1, "stop_requested": 0})"));
  refused("delete-pending", "status");
  BOOST_REQUIRE(r["delete-by-prefix"]["status"] == 200);
  BOOST_TEST(r["delete-by-prefix"]["body"]["deleted"] == 1);
  // An empty or misspelled filter, or paging, is refused: it acts on nothing.
  refused("cancel-no-filter", "all");
  refused("cancel-misspelled", "tags");
  refused("cancel-paged", "limit");
  refused("retry-pending", "status");
  BOOST_TEST((s.q->job_info(*job_id::parse(r["tagged-other"]["body"]["id"].get<std::string>()))
                ->status == job_status::pending));
  // json, base64, text, 2 in the batch, big, keyed, tagged-other; "tagged"
  // was cancelled, then deleted.
  BOOST_TEST(s.q->counts().total() == 8);
  BOOST_TEST(s.q->jobs_by_name("ok")->empty());
}

BOOST_AUTO_TEST_CASE(a_large_submission_needs_its_proof_before_its_body_is_read) {
  const std::string secret = test::test_secret;
  served_queue s{secret};
  auto c = s.client();
  std::string big = R"({"type": "blob", "payload_text": ")" + std::string(10'000, 'x') + R"("})";
  // No secret: refused by its head, 413, before the body is taken.
  auto unproven = c.Post("/api/jobs", writes, big, "application/json");
  BOOST_REQUIRE(unproven);
  BOOST_TEST(unproven->status == 413);
  BOOST_TEST(unproven->body.find("from a writer whose headers prove it") != std::string::npos,
             unproven->body);
  // A small one without the secret reaches the route, which says 401.
  auto small = c.Post("/api/jobs", writes, R"({"type": "t"})", "application/json");
  BOOST_TEST(small->status == 401);
  httplib::Headers proven{{"X-Ergon", "1"}, {"Authorization", "Bearer " + secret}};
  auto taken = c.Post("/api/jobs", proven, big, "application/json");
  BOOST_REQUIRE(taken);
  BOOST_TEST(taken->status == 201, taken->body);
  // Other routes keep the 4 KiB limit, proof or not.
  auto settings = c.Post("/api/groups/g/settings", proven, big, "application/json");
  BOOST_TEST(settings->status == 413);
  // Past 16 MiB nothing is taken, and it is refused by its Content-Length.
  auto answer = ask_raw(s.port, "POST /api/jobs HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(s.port)
                                  + "\r\nX-Ergon: 1\r\nAuthorization: Bearer " + secret
                                  + "\r\nContent-Length: 99999999\r\n\r\n");
  BOOST_TEST(answer.find("413") != std::string::npos, answer);
  BOOST_TEST(s.q->counts().total() == 1);
}
