#include "http_endpoint.hpp"

#include <httplib.h>
#include <openssl/crypto.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ergon/storage/op/cancel_job.hpp"
#include "ergon/storage/op/retry_failed.hpp"
#include "dashboard_page.hpp"
#include "http/front.hpp"
#include "http/request_head.hpp"
#include "job_json.hpp"
#include "json_views.hpp"
#include "prometheus_text.hpp"
#include "queue_impl.hpp"
#include "transport/settings.hpp"

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
    case error::forbidden: return 403;
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

// A settings change as JSON: {"weight": 3, "min_slots": 1, "max_running": 4,
// "rate": {"per_second": 5, "burst": 10}}. Errors name the field.
result<settings_change> settings_body(const std::string& body) {
  auto doc = json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    return invalid_field("body", "must be a JSON object of settings (weight, min_slots, "
                                 "max_running, rate)");
  settings_change c;
  auto int_field = [&](const char* key, std::optional<int32_t>& into) -> status {
    auto v = doc.find(key);
    if (v == doc.end())
      return {};
    if (!v->is_number_integer() || v->get<int64_t>() < INT32_MIN || v->get<int64_t>() > INT32_MAX)
      return invalid_field(key, "must be an integer");
    into = v->get<int32_t>();
    return {};
  };
  for (auto [key, slot] : {std::pair{"weight", &c.weight}, std::pair{"min_slots", &c.min_slots},
                           std::pair{"max_running", &c.max_running}})
    if (auto st = int_field(key, *slot); !st)
      return st;
  if (auto r = doc.find("rate"); r != doc.end()) {
    auto per_second = r->is_object() ? r->find("per_second") : r->end();
    if (!r->is_object() || per_second == r->end() || !per_second->is_number())
      return invalid_field("rate.per_second", "must be a number (0 removes the limit)");
    rate_limit limit{per_second->get<double>(), 1};
    if (auto burst = r->find("burst"); burst != r->end()) {
      if (!burst->is_number_integer() || burst->get<int64_t>() < 1
          || burst->get<int64_t>() > INT32_MAX)
        return invalid_field("rate.burst", "must be an integer >= 1");
      limit.burst = burst->get<int32_t>();
    }
    c.rate = limit;
  }
  for (auto& [key, value] : doc.items())
    if (key != "weight" && key != "min_slots" && key != "max_running" && key != "rate")
      return invalid_field(key, "is not a setting (weight, min_slots, max_running, rate)");
  return c;
}

// A pause's ?for_ms=N; none: until resumed (a resume reads none).
result<std::optional<std::chrono::milliseconds>> pause_duration(const httplib::Request& req,
                                                                 bool pause) {
  if (!pause || !req.has_param("for_ms"))
    return std::optional<std::chrono::milliseconds>{};
  auto v = int_param(req, "for_ms");
  if (!v)
    return v.error();
  return std::optional<std::chrono::milliseconds>{std::chrono::milliseconds{*v}};
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
  // tag=KEY=VALUE, repeated: the key ends at the first "=".
  auto tags = req.get_param_value_count("tag");
  for (size_t i = 0; i < tags; ++i) {
    auto t = req.get_param_value("tag", i);
    auto eq = t.find('=');
    if (eq == std::string::npos)
      return bad_param("tag", "'" + t + "' is not KEY=VALUE");
    if (!f.tags.emplace(t.substr(0, eq), t.substr(eq + 1)).second)
      return bad_param("tag", "key '" + t.substr(0, eq) + "' is given twice");
  }
  if (req.has_param("tag_prefix"))
    f.tag_prefix = req.get_param_value("tag_prefix");
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
  if (req.has_param("newest_first")) {
    auto v = req.get_param_value("newest_first");
    if (v != "1" && v != "true" && v != "0" && v != "false")
      return bad_param("newest_first", "'" + v + "' is not true, false, 1 or 0");
    page.newest_first = v == "1" || v == "true";
  }
  return {};
}

// A bulk action's query string: the filter's parameters alone, and at
// least one of them unless `all=1` says every job is meant. A misspelled
// or empty filter would otherwise act on every job.
status check_bulk_params(const httplib::Request& req) {
  static const std::set<std::string> filters{
    "status", "type", "group", "name", "submitted_from", "submitted_before", "finished_from",
    "finished_before", "tag", "tag_prefix"};
  bool some = false;
  for (auto& [key, value] : req.params) {
    if (key == "all")
      continue;
    if (filters.count(key) == 0)
      return bad_param(key, "is not a filter of a bulk action (status, type, group, name, "
                            "submitted_from, submitted_before, finished_from, finished_before, "
                            "tag, tag_prefix, all)");
    some = true;
  }
  if (req.has_param("all")) {
    auto v = req.get_param_value("all");
    if (v != "1" && v != "true")
      return bad_param("all", "'" + v + "' is not 1 or true");
    return {};
  }
  return some ? status{} : bad_param("all", "give a filter, or all=1 to act on every job");
}

// What the host check needs to know of the endpoint.
struct endpoint_name {
  std::string bound;
  std::shared_ptr<std::atomic<uint16_t>> port;  // set once bound
  bool tls = false;
};

// A loopback endpoint answers only requests addressed to a loopback name:
// a web page that rebinds its own host name to 127.0.0.1 gets nothing.
bool host_allowed(const endpoint_name& e, const httplib::Request& req) {
  if (!http::loopback_address(e.bound) && e.bound != "localhost")
    return true;
  return http::loopback_host(req.get_header_value("Host"), e.port->load(), e.tls);
}

// The parts of `path` between slashes: "/api/jobs" gives {"api", "jobs"}.
std::vector<std::string_view> segments(std::string_view path) {
  std::vector<std::string_view> out;
  while (!path.empty() && path.front() == '/') {
    path.remove_prefix(1);
    auto slash = path.find('/');
    out.push_back(path.substr(0, slash));
    path = slash == std::string_view::npos ? std::string_view{} : path.substr(slash);
  }
  return out;
}

bool job_id_text(std::string_view s) {
  return s.size() == 36 && std::all_of(s.begin(), s.end(), [](char c) {
           return std::isxdigit(static_cast<unsigned char>(c)) || c == '-';
         });
}

// The methods `path` takes, or null if no route has it; another method on
// a route is answered 405. Matched by hand: std::regex trips g++ 12's
// -Wmaybe-uninitialized under the sanitizers.
const char* allowed_methods(const std::string& path) {
  static const char* const get = "GET, HEAD";
  static const char* const post = "POST";
  if (path == "/api/jobs")
    return "GET, HEAD, POST";
  for (auto exact : {"/", "/healthz", "/livez", "/metrics", "/api/stats", "/api/recurring"})
    if (path == exact)
      return get;
  if (path == "/api/pauses/resume" || path == "/api/queue/pause" || path == "/api/queue/resume")
    return post;
  if (path == "/api/controls" || path == "/api/workers")
    return get;
  auto s = segments(path);
  if (s.size() < 3 || s[0] != "api")
    return nullptr;
  if (s[1] == "jobs" && job_id_text(s[2]))
    return s.size() == 3 ? get
           : s.size() == 4 && (s[3] == "retry" || s[3] == "replay" || s[3] == "cancel") ? post
                                                                                        : nullptr;
  if (s[1] == "recurring" && s.size() == 4 && !s[2].empty() && s[2].size() <= 256
      && (s[3] == "pause" || s[3] == "resume"))
    return post;
  if ((s[1] == "groups" || s[1] == "types") && s.size() == 4 && !s[2].empty() && s[2].size() <= 256
      && (s[3] == "pause" || s[3] == "resume" || s[3] == "settings" || s[3] == "reset"))
    return post;
  if (s[1] == "breakers" && s.size() == 4 && !s[2].empty() && s[2].size() <= 256
      && s[3] == "reset")
    return post;
  return nullptr;
}

// The secrets the queue's nodes prove, with their roles: locked by publish,
// or given to the open (listen) before publish runs.
std::vector<actors::role_secret> secrets_of(queue_impl& q) {
  auto secrets = q.gate->secrets();
  if (secrets.empty() && q.opts.listen)
    secrets = transport::role_secrets(*q.opts.listen);
  return secrets;
}

// The proof a write carries: X-Ergon: 1, which a web page on another
// origin can't send without a preflight this endpoint never grants, and a
// secret whose role permits `needed` when the queue has secrets (without
// one, a loopback peer). Checked on a parsed request, and on a job
// submission's head before its body is read.
status writer_proof(queue_impl& q, std::string_view x_ergon, std::string_view authorization,
                    std::string_view peer_ip, role needed) {
  if (x_ergon != "1")
    return {error::unauthenticated,
            "a request that changes jobs must carry the header 'X-Ergon: 1'"};
  auto secrets = secrets_of(q);
  if (secrets.empty())
    return http::loopback_address(peer_ip)
             ? status{}
             : status{error::unauthenticated,
                      "writes from other hosts need the queue's shared secret; it has none"};
  // Every secret is compared, so the time taken says nothing of which matched.
  std::optional<role> held;
  for (auto& s : secrets) {
    auto expected = "Bearer " + s.secret;
    if (authorization.size() == expected.size()
        && CRYPTO_memcmp(authorization.data(), expected.data(), expected.size()) == 0 && !held)
      held = s.granted;
  }
  if (!held)
    return {error::unauthenticated,
            "this request changes jobs: send the queue's shared secret as "
            "'Authorization: Bearer <secret>'"};
  if (!actors::permits(*held, needed))
    return {error::forbidden, std::string{"this request needs the "} + to_string(needed)
                                + " role; the secret sent grants " + to_string(*held)};
  return {};
}

status may_write(queue_impl& q, const httplib::Request& req, httplib::Response& res,
                 role needed = role::operator_) {
  auto st = writer_proof(q, req.get_header_value("X-Ergon"), req.get_header_value("Authorization"),
                         req.remote_addr, needed);
  if (st.code() == error::forbidden) {
    q.gate->count_forbidden();
    if (auto n = q.gate->forbidden(); actors::worth_logging(n))
      std::cerr << "ergon: the HTTP endpoint refused " << req.method << ' ' << req.path
                << " from " << req.remote_addr << ": " << st.message() << "; " << n
                << " forbidden so far\n";
  } else if (!st && req.get_header_value("X-Ergon") == "1" && !secrets_of(q).empty()) {
    res.set_header("WWW-Authenticate", "Bearer");
  }
  return st;
}

// Host names and methods, checked before any route; and the answers to
// errors and exceptions. Both roles' pages share them.
void common_rules(httplib::Server& s, const endpoint_name& name) {
  s.set_pre_routing_handler([name](const httplib::Request& req, httplib::Response& res) {
    if (!host_allowed(name, req)) {
      reply_json(res, {{"error", "host_not_allowed"},
                       {"message", "this endpoint answers requests addressed to localhost, "
                                   "127.0.0.1 or [::1] with its port only; Host was '"
                                     + req.get_header_value("Host") + "'"}},
                 403);
      return httplib::Server::HandlerResponse::Handled;
    }
    auto methods = allowed_methods(req.path);
    if (!methods || std::strstr(methods, req.method.c_str()) != nullptr)
      return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("Allow", methods);
    reply_json(res, {{"error", "method_not_allowed"},
                     {"message", req.method + " is not taken here; " + req.path + " takes "
                                   + methods}},
               405);
    return httplib::Server::HandlerResponse::Handled;
  });
  s.Get("/livez", [](const httplib::Request&, httplib::Response& res) {
    reply_json(res, {{"status", "live"}});
  });
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty())
      return;
    auto message = res.status == 404 ? "no such page: " + req.path
                                     : std::string{"the request can't be taken: HTTP "}
                                         + std::to_string(res.status);
    reply_json(res, {{"error", http::words_of(res.status).code}, {"message", message}}, res.status);
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

// The lease epoch of a PostgreSQL owner; 0 on SQLite or once closing.
int64_t epoch_of(queue_impl& q) {
  std::lock_guard<std::mutex> guard{q.owner_mtx};
  return q.lease ? q.lease->epoch() : 0;
}

void routes(httplib::Server& s, queue_impl& q, const endpoint_name& name) {
  common_rules(s, name);
  s.Get("/healthz", [&q](const httplib::Request&, httplib::Response& res) {
    if (q.closed.load(std::memory_order_acquire))
      return reply_json(res, {{"status", "closing"}, {"role", "owner"}}, 503);
    json doc{{"status", "ok"}, {"role", "owner"}};
    if (auto epoch = epoch_of(q); epoch > 0)
      doc["epoch"] = epoch;
    reply_json(res, doc);
  });
  s.Get("/metrics", [&q](const httplib::Request&, httplib::Response& res) {
    auto m = q.metrics();
    if (!m)
      return reply_error(res, m.error());
    role_metrics role;
    role.epoch = epoch_of(q);
    res.set_content(prometheus_text(*m) + prometheus_text(role),
                    "text/plain; version=0.0.4; charset=utf-8");
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
  s.Post("/api/jobs", [&q](const httplib::Request& req, httplib::Response& res) {
    if (auto st = may_write(q, req, res, role::client); !st)
      return reply_error(res, st);
    auto submission = jobs_from_json(req.body, q.opts.max_payload_bytes);
    if (!submission)
      return reply_error(res, submission.error());
    auto ids = q.call<actors::submit_args, result<std::vector<job_id>>>(
      actors::submit_args{std::move(submission->jobs)});
    if (!ids)
      return reply_error(res, ids.error());
    if (!submission->batch)
      return reply_json(res, {{"id", ids->front().to_string()}}, 201);
    json list = json::array();
    for (auto& id : *ids)
      list.push_back(id.to_string());
    reply_json(res, {{"ids", std::move(list)}}, 201);
  });
  // Bulk actions over the jobs a listing's filter matches (no page).
  s.Post(R"(/api/jobs/(cancel|retry|delete))",
         [&q](const httplib::Request& req, httplib::Response& res) {
           if (auto st = may_write(q, req, res); !st)
             return reply_error(res, st);
           if (auto st = check_bulk_params(req); !st)
             return reply_error(res, st);
           job_filter f;
           page_request unused;
           if (auto st = read_listing(req, f, unused); !st)
             return reply_error(res, st);
           if (req.matches[1] == "cancel")
             return reply(res, q.bulk<cancel_summary>(actors::bulk_kind::cancel, std::move(f)),
                          [](const cancel_summary& c) { return json_views::of(c); });
           if (req.matches[1] == "retry") {
             // Another status is refused (check_bulk), not overwritten.
             if (!f.status)
               f.status = job_status::failed;
             return reply(res, q.bulk<retry_summary>(actors::bulk_kind::retry, std::move(f)),
                          [](const retry_summary& r) { return json_views::of(r); });
           }
           reply(res, q.bulk<int64_t>(actors::bulk_kind::remove, std::move(f)),
                 [](int64_t n) { return json{{"deleted", n}}; });
         });
  s.Get(R"(/api/jobs/([0-9a-fA-F-]{36}))", [&q](const httplib::Request& req, httplib::Response& res) {
    auto id = id_param(req.matches[1], "id");
    if (!id)
      return reply_error(res, id.error());
    reply(res, q.job_info(*id), [](const job_info& j) { return json_views::of(j); });
  });
  s.Post(R"(/api/jobs/([0-9a-fA-F-]{36})/(retry|replay|cancel))",
         [&q](const httplib::Request& req, httplib::Response& res) {
           if (auto st = may_write(q, req, res); !st)
             return reply_error(res, st);
           auto id = id_param(req.matches[1], "id");
           if (!id)
             return reply_error(res, id.error());
           status st;
           if (req.matches[2] != "cancel") {
             storage::retry_failed_args args;
             args.id = *id;
             args.replay = req.matches[2] == "replay";
             st = q.call<storage::retry_failed_args, result<retry_summary>>(std::move(args)).error();
           } else {
             st = q.call<storage::cancel_job_args, status>(storage::cancel_job_args{*id});
           }
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
           auto duration = pause_duration(req, pause);
           if (!duration)
             return reply_error(res, duration.error());
           auto st = pause ? q.pause(group ? control::pause_group : control::pause_type, name,
                                     *duration)
                           : q.named_call(group ? control::resume_group : control::resume_type, name);
           if (!st)
             return reply_error(res, st);
           reply_json(res, {{group ? "group" : "type", name}, {"paused", pause}});
         });
  s.Post(R"(/api/(groups|types|workers)/([^/]{1,256})/(settings|reset))",
         [&q](const httplib::Request& req, httplib::Response& res) {
           if (auto st = may_write(q, req, res); !st)
             return reply_error(res, st);
           struct kind {
             const char* field;
             control::op_type change, reset;
           };
           auto k = req.matches[1] == "groups"
                      ? kind{"group", control::change_group, control::reset_group}
                    : req.matches[1] == "types"
                      ? kind{"type", control::change_type, control::reset_type}
                      : kind{"worker", control::change_worker, control::reset_worker};
           auto field = k.field;
           std::string name = req.matches[2];  // httplib decoded the path
           if (req.matches[3] == "reset") {
             if (auto st = q.named_call(k.reset, name); !st)
               return reply_error(res, st);
             return reply_json(res, {{field, name}, {"reset", true}});
           }
           auto change = settings_body(req.body);
           if (!change)
             return reply_error(res, change.error());
           if (auto st = q.change(k.change, name, *change); !st)
             return reply_error(res, st);
           auto doc = json_views::of(*change);
           doc[field] = name;
           reply_json(res, doc);
         });
  s.Post(R"(/api/recurring/([^/]{1,256})/(pause|resume))",
         [&q](const httplib::Request& req, httplib::Response& res) {
           if (auto st = may_write(q, req, res); !st)
             return reply_error(res, st);
           bool pause = req.matches[2] == "pause";
           std::string id = req.matches[1];  // httplib decoded the path
           auto duration = pause_duration(req, pause);
           if (!duration)
             return reply_error(res, duration.error());
           if (auto st = q.pause_recurring(id, pause, *duration); !st)
             return reply_error(res, st);
           reply_json(res, {{"recurring", id}, {"paused", pause}});
         });
  s.Post(R"(/api/queue/(pause|resume))", [&q](const httplib::Request& req, httplib::Response& res) {
    if (auto st = may_write(q, req, res); !st)
      return reply_error(res, st);
    bool pause = req.matches[1] == "pause";
    auto duration = pause_duration(req, pause);
    if (!duration)
      return reply_error(res, duration.error());
    auto st = pause ? q.pause(control::pause_queue, {}, *duration)
                    : q.named_call(control::resume_queue, {});
    if (!st)
      return reply_error(res, st);
    reply_json(res, {{"queue", true}, {"paused", pause}});
  });
  s.Get("/api/controls", [&q](const httplib::Request&, httplib::Response& res) {
    reply(res, q.controls(), [](const std::vector<control_info>& controls) {
      return json_views::of_each(controls);
    });
  });
  s.Get("/api/workers", [&q](const httplib::Request&, httplib::Response& res) {
    reply(res, q.list_workers(), [](const std::vector<worker_info>& workers) {
      return json_views::of_each(workers);
    });
  });
  s.Post(R"(/api/breakers/([^/]{1,256})/reset)",
         [&q](const httplib::Request& req, httplib::Response& res) {
           if (auto st = may_write(q, req, res); !st)
             return reply_error(res, st);
           std::string type = req.matches[1];  // httplib decoded the path
           if (auto st = q.named_call(control::reset_breaker, type); !st)
             return reply_error(res, st);
           reply_json(res, {{"type", type}, {"breaker", "closed"}});
         });
  s.Post("/api/pauses/resume", [&q](const httplib::Request& req, httplib::Response& res) {
    if (auto st = may_write(q, req, res); !st)
      return reply_error(res, st);
    reply(res, q.resume_all(), [](int64_t n) { return json{{"resumed", n}}; });
  });
  s.Get("/api/recurring", [&q](const httplib::Request& req, httplib::Response& res) {
    auto prefix = req.get_param_value("prefix");
    auto all = q.list_recurring(prefix);
    reply(res, all, [](const std::vector<recurring_info>& rs) {
      return json_views::of_each(rs);
    });
  });
}

json owner_of(const standby_status& st) {
  if (!st.owner_known)
    return nullptr;
  return {{"host", st.owner_host}, {"pid", st.owner_pid}, {"epoch", st.epoch},
          {"lease_ms_left", st.lease_ms_left}};
}

// A standby's pages: it has no queue to show.
void standby_routes(httplib::Server& s, std::function<standby_status()> now,
                    const endpoint_name& name) {
  common_rules(s, name);
  s.Get("/healthz", [now](const httplib::Request&, httplib::Response& res) {
    auto st = now();
    json doc{{"status", "standby"}, {"role", "standby"}, {"owner", owner_of(st)}};
    if (!st.read_error.empty())
      doc["error"] = st.read_error;
    reply_json(res, doc, 503);
  });
  s.Get("/metrics", [now](const httplib::Request&, httplib::Response& res) {
    auto st = now();
    role_metrics role{false, st.epoch, true, st.takeovers, st.step_downs};
    res.set_content(prometheus_text(role), "text/plain; version=0.0.4; charset=utf-8");
  });
  // The rest is the owner's: the dashboard and the API.
  auto elsewhere = [now](const httplib::Request&, httplib::Response& res) {
    auto st = now();
    auto owner = st.owner_known ? "pid " + std::to_string(st.owner_pid) + " on " + st.owner_host
                                : std::string{"not known"};
    reply_json(res, {{"error", "standby"},
                     {"message", "this server is a standby for the queue; its owner is " + owner},
                     {"owner", owner_of(st)}},
               503);
  };
  s.Get(".*", elsewhere);
  s.Post(".*", elsewhere);
}

// A complete request as received, read by httplib as if from its socket;
// what httplib writes is the answer.
class memory_stream final : public httplib::Stream {
 public:
  memory_stream(std::string request, const http::peer_address& from)
      : in_(std::move(request)), from_(from) {}

  bool is_readable() const override { return at_ < in_.size(); }
  bool is_writable() const override { return true; }

  ssize_t read(char* ptr, size_t size) override {
    auto n = std::min(size, in_.size() - at_);
    std::memcpy(ptr, in_.data() + at_, n);
    at_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    out_.append(ptr, size);
    return static_cast<ssize_t>(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = from_.ip;
    port = from_.port;
  }

  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = from_.local_ip;
    port = from_.local_port;
  }

  socket_t socket() const override { return INVALID_SOCKET; }

  std::string take_answer() { return std::move(out_); }

 private:
  std::string in_;
  size_t at_ = 0;
  const http::peer_address& from_;
  std::string out_;
};

// httplib's parsing and routing, for a request the front has read whole.
class routed_server : public httplib::Server {
 public:
  std::string answer(std::string request, const http::peer_address& from) {
    try {
      memory_stream s{std::move(request), from};
      bool closed = true;
      process_request(s, true, closed, {});
      return s.take_answer();
    } catch (const std::exception& e) {
      return http::response_bytes({500, "internal", e.what()});
    }
  }
};

// The endpoint as one of the queue's front ends.
class http_endpoint final : public front_end {
 public:
  http_endpoint(std::unique_ptr<routed_server> server, std::unique_ptr<http::front> front)
      : server_(std::move(server)), front_(std::move(front)), port_(front_->port()) {}
  ~http_endpoint() override { stop(); }
  kind what() const noexcept override { return kind::http; }
  uint16_t port() const noexcept override { return port_; }
  // Closes the port and every connection, once the requests being answered
  // are. The server goes after the front that calls it.
  void stop() override { front_.reset(); }

 private:
  std::unique_ptr<routed_server> server_;
  std::unique_ptr<http::front> front_;
  uint16_t port_;
};

// Binds `where` and answers with `server`, whose routes `route(name)` adds.
template <class Route>
result<std::unique_ptr<front_end>> open_endpoint(
  const http_options& where, Route route,
  std::function<bool(std::string_view head, std::string_view peer_ip)> may_submit = {}) {
  http::front_terms terms;
  terms.limits.may_submit = std::move(may_submit);
  terms.address = where.address;
  terms.port = where.port;
  if (where.tls) {
    auto tls = transport::tls_context::make(*where.tls, true, false);
    if (!tls)
      return tls.error();
    terms.tls = *tls;
  }
  endpoint_name name{where.address, std::make_shared<std::atomic<uint16_t>>(0),
                     where.tls.has_value()};
  terms.probe_paths.push_back("/livez");
  auto server = std::make_unique<routed_server>();
  route(*server, name);
  auto* routed = server.get();
  auto front = http::front::open(std::move(terms),
                                 [routed](std::string request, const http::peer_address& from) {
                                   return routed->answer(std::move(request), from);
                                 });
  if (!front)
    return status{error::io_error, "cannot serve HTTP: " + front.error().message()};
  name.port->store((*front)->port());
  return std::unique_ptr<front_end>{
    std::make_unique<http_endpoint>(std::move(server), std::move(*front))};
}

}  // namespace

status serve_http(queue_impl& q, const http_options& where) {
  auto endpoint = open_endpoint(
    where, [&q](httplib::Server& s, const endpoint_name& name) { routes(s, q, name); },
    [&q](std::string_view head, std::string_view peer_ip) {
      auto header = [&](std::string_view name) {
        return http::header_value(head, name).value_or(std::string_view{});
      };
      return writer_proof(q, header("X-Ergon"), header("Authorization"), peer_ip, role::client)
        .ok();
    });
  if (!endpoint)
    return endpoint.error();
  return q.attach(std::move(*endpoint));
}

result<std::unique_ptr<front_end>> serve_standby_http(const http_options& where,
                                                      std::function<standby_status()> now) {
  return open_endpoint(where, [&now](httplib::Server& s, const endpoint_name& name) {
    standby_routes(s, std::move(now), name);
  });
}

}  // namespace ergon::runtime
