#include "http_endpoint.hpp"

#include <httplib.h>
#include <openssl/crypto.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <cstring>

#include "dashboard_page.hpp"
#include "json_views.hpp"
#include "prometheus_text.hpp"
#include "queue_impl.hpp"

namespace ergon::runtime {
namespace {

using json_views::json;
using control = actors::scheduling_control;

int http_status_of(const status& st) {
  switch (st.code()) {
    case error::invalid_argument: return 400;
    case error::not_found: return 404;
    case error::job_running:
    case error::job_finished:
    case error::already_exists: return 409;
    case error::unauthenticated: return 401;
    case error::closed:
    case error::busy:
    case error::timeout: return 503;
    default: return 500;
  }
}

void reply_json(httplib::Response& res, const json& doc, int code = 200) {
  res.status = code;
  res.set_header("Cache-Control", "no-store");
  // Payloads and messages may hold bytes that are not UTF-8.
  res.set_content(doc.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void reply_error(httplib::Response& res, const status& st) {
  reply_json(res, json_views::of(st), http_status_of(st));
}

template <class T, class Ok>
void reply(httplib::Response& res, const result<T>& r, Ok ok) {
  if (r)
    reply_json(res, ok(*r));
  else
    reply_error(res, r.error());
}

status bad_param(const std::string& name, const std::string& why) {
  return {error::invalid_argument, name + ": " + why, name};
}

result<int64_t> int_param(const httplib::Request& req, const std::string& name) {
  auto text = req.get_param_value(name);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])) || ec != std::errc{}
      || end != text.data() + text.size())
    return bad_param(name, "'" + text + "' is not a number from 0 to 2^63-1");
  return v;
}

result<job_id> id_param(const std::string& text, const std::string& name) {
  auto id = job_id::parse(text);
  if (!id)
    return bad_param(name, "'" + text + "' is not a job id");
  return id;
}

// The filter and page of a listing, from its query string.
status read_listing(const httplib::Request& req, job_filter& f, page_request& page) {
  if (req.has_param("status")) {
    f.status = json_views::parse_status(req.get_param_value("status"));
    if (!f.status)
      return bad_param("status", "'" + req.get_param_value("status") + "' is not a status");
  }
  for (auto [name, slot] : {std::pair{"type", &f.type}, std::pair{"group", &f.group},
                            std::pair{"name", &f.name}})
    if (req.has_param(name))
      *slot = req.get_param_value(name);
  for (auto [name, slot] :
       {std::pair{"submitted_from", &f.submitted_from_ms},
        std::pair{"submitted_before", &f.submitted_before_ms},
        std::pair{"finished_from", &f.finished_from_ms},
        std::pair{"finished_before", &f.finished_before_ms}}) {
    if (!req.has_param(name))
      continue;
    auto v = int_param(req, name);
    if (!v)
      return v.error();
    *slot = *v;
  }
  if (req.has_param("limit")) {
    auto v = int_param(req, "limit");
    if (!v)
      return v.error();
    page.limit = static_cast<size_t>(std::min<int64_t>(*v, int64_t{1} << 30));
  }
  if (req.has_param("after")) {
    auto id = id_param(req.get_param_value("after"), "after");
    if (!id)
      return id.error();
    page.after = *id;
  }
  page.newest_first = req.get_param_value("newest_first") == "1";
  return {};
}

bool loopback(const std::string& addr) {
  return addr.rfind("127.", 0) == 0 || addr == "::1" || addr.rfind("::ffff:127.", 0) == 0;
}

// A loopback endpoint answers only requests addressed to a loopback name:
// a web page that rebinds its own host name to 127.0.0.1 gets nothing.
bool host_allowed(const std::string& bound, const httplib::Request& req) {
  if (!loopback(bound) && bound != "localhost")
    return true;
  auto host = req.get_header_value("Host");
  if (!host.empty() && host.front() == '[')  // [::1]:port
    host = host.substr(1, host.find(']') == std::string::npos ? 0 : host.find(']') - 1);
  else
    host = host.substr(0, host.rfind(':'));
  return loopback(host) || host == "localhost";
}

// The secret the queue's nodes prove: locked by publish, or given to the
// open (listen.creds) before publish runs.
std::string secret_of(queue::impl& q) {
  auto secret = q.gate->secret();
  if (secret.empty() && q.opts.listen)
    secret = q.opts.listen->creds.secret;
  return secret;
}

// Writes need the queue's secret when it has one; without one, they are
// taken only from this machine. Either way they carry X-Ergon: 1, which a
// web page on another origin can't send without a preflight this endpoint
// never grants.
status may_write(queue::impl& q, const httplib::Request& req, httplib::Response& res) {
  if (req.get_header_value("X-Ergon") != "1")
    return {error::unauthenticated,
            "a request that changes jobs must carry the header 'X-Ergon: 1'"};
  auto secret = secret_of(q);
  if (secret.empty())
    return loopback(req.remote_addr)
             ? status{}
             : status{error::unauthenticated,
                      "writes from other hosts need the queue's shared secret; it has none"};
  auto given = req.get_header_value("Authorization");
  auto expected = "Bearer " + secret;
  if (given.size() != expected.size()
      || CRYPTO_memcmp(given.data(), expected.data(), expected.size()) != 0) {
    res.set_header("WWW-Authenticate", "Bearer");
    return {error::unauthenticated,
            "this request changes jobs: send the queue's shared secret as "
            "'Authorization: Bearer <secret>'"};
  }
  return {};
}

void routes(httplib::Server& s, queue::impl& q, const std::string& bound) {
  s.set_pre_routing_handler([bound](const httplib::Request& req, httplib::Response& res) {
    if (host_allowed(bound, req))
      return httplib::Server::HandlerResponse::Unhandled;
    reply_json(res, {{"error", "unauthenticated"},
                     {"message", "this endpoint answers requests to a loopback host name only"}},
               403);
    return httplib::Server::HandlerResponse::Handled;
  });
  s.Get("/healthz", [&q](const httplib::Request&, httplib::Response& res) {
    if (q.closed.load(std::memory_order_acquire))
      return reply_json(res, {{"status", "closing"}}, 503);
    reply_json(res, {{"status", "ok"}});
  });
  s.Get("/metrics", [&q](const httplib::Request&, httplib::Response& res) {
    auto m = q.metrics();
    if (!m)
      return reply_error(res, m.error());
    res.set_content(prometheus_text(*m), "text/plain; version=0.0.4; charset=utf-8");
  });
  s.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    res.set_content(dashboard_html(), "text/html; charset=utf-8");
  });
  s.Get("/api/stats", [&q](const httplib::Request&, httplib::Response& res) {
    auto m = q.metrics();
    reply(res, m, [&](const metrics_snapshot& snap) {
      auto doc = json_views::of(snap);
      doc["now_ms"] = q.clk->now_ms();
      return doc;
    });
  });
  s.Get("/api/jobs", [&q](const httplib::Request& req, httplib::Response& res) {
    job_filter f;
    page_request page;
    if (auto st = read_listing(req, f, page); !st)
      return reply_error(res, st);
    reply(res, q.list_jobs(f, page), [](const job_page& p) { return json_views::of(p); });
  });
  s.Get(R"(/api/jobs/([0-9a-fA-F-]{36}))", [&q](const httplib::Request& req, httplib::Response& res) {
    auto id = id_param(req.matches[1], "id");
    if (!id)
      return reply_error(res, id.error());
    reply(res, q.job_info(*id), [](const job_info& j) { return json_views::of(j); });
  });
  s.Post(R"(/api/jobs/([0-9a-fA-F-]{36})/(retry|cancel))",
         [&q](const httplib::Request& req, httplib::Response& res) {
           if (auto st = may_write(q, req, res); !st)
             return reply_error(res, st);
           auto id = id_param(req.matches[1], "id");
           if (!id)
             return reply_error(res, id.error());
           status st;
           if (req.matches[2] == "retry")
             st = q.call<storage::retry_failed_args, result<retry_summary>>(
                     storage::retry_failed_args{*id, {}})
                    .error();
           else
             st = q.call<storage::cancel_job_args, status>(storage::cancel_job_args{*id});
           if (!st)
             return reply_error(res, st);
           reply_json(res, {{"id", id->to_string()}, {"done", std::string{req.matches[2]}}});
         });
  s.Post(R"(/api/(groups|types)/([^/]{1,256})/(pause|resume))",
         [&q](const httplib::Request& req, httplib::Response& res) {
           if (auto st = may_write(q, req, res); !st)
             return reply_error(res, st);
           bool group = req.matches[1] == "groups";
           bool pause = req.matches[3] == "pause";
           std::string name = req.matches[2];  // httplib decoded the path
           std::optional<std::chrono::milliseconds> duration;
           if (pause && req.has_param("for_ms")) {
             auto v = int_param(req, "for_ms");
             if (!v)
               return reply_error(res, v.error());
             duration = std::chrono::milliseconds{*v};
           }
           auto st = pause ? q.pause(group ? control::pause_group : control::pause_type, name,
                                     duration)
                           : q.resume(group ? control::resume_group : control::resume_type, name);
           if (!st)
             return reply_error(res, st);
           reply_json(res, {{group ? "group" : "type", name}, {"paused", pause}});
         });
  s.Get("/api/recurring", [&q](const httplib::Request& req, httplib::Response& res) {
    auto prefix = req.get_param_value("prefix");
    auto all = q.read([&](storage::db& d) { return storage::list_recurring(d, prefix); });
    reply(res, all, [](const std::vector<recurring_info>& rs) {
      json doc = json::array();
      for (auto& r : rs)
        doc.push_back(json_views::of(r));
      return doc;
    });
  });
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (res.status == 404 && res.body.empty())
      reply_json(res, {{"error", "not_found"}, {"message", "no such page: " + req.path}}, 404);
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    reply_json(res, {{"error", "internal"}, {"message", what}}, 500);
  });
}

}  // namespace

result<std::unique_ptr<http_endpoint>> http_endpoint::start(queue::impl& q,
                                                            const http_options& where) {
  std::unique_ptr<http_endpoint> e{new http_endpoint};
  e->server_ = std::make_unique<httplib::Server>();
  auto& s = *e->server_;
  // Requests are short, but idle keep-alive connections hold a thread each.
  s.new_task_queue = [] { return new httplib::ThreadPool(4); };
  s.set_keep_alive_timeout(1);
  // Not httplib's SO_REUSEPORT: a second queue must not share the port.
  s.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  routes(s, q, where.address);
  int port = where.port == 0 ? s.bind_to_any_port(where.address)
                             : (s.bind_to_port(where.address, where.port) ? where.port : -1);
  if (port <= 0)
    return status{error::io_error, "cannot serve HTTP on " + where.address + ":"
                                     + std::to_string(where.port)
                                     + ": the address is not this host's, or the port is taken"};
  e->port_ = static_cast<uint16_t>(port);
  auto returned = std::make_shared<std::atomic<bool>>(false);
  e->thread_ = std::thread{[&s, returned] {
    s.listen_after_bind();
    returned->store(true);
  }};
  // stop() is lost on a server that is not running yet.
  while (!s.is_running() && !returned->load())
    std::this_thread::yield();
  return e;
}

void http_endpoint::stop() {
  if (server_)
    server_->stop();
  if (thread_.joinable())
    thread_.join();
}

http_endpoint::~http_endpoint() { stop(); }

}  // namespace ergon::runtime
