#include "config_file.hpp"

#include <toml++/toml.h>

#include <filesystem>
#include <functional>
#include <limits>
#include <optional>

#include <ergon/storage/times.hpp>

namespace ergon::server {

server_settings::server_settings() {
  opts.listen = listen_options{};
  opts.listen->port = 4780;
}

std::string config_source::explain(const status& st) const {
  auto f = fields.find(st.field());
  if (f == fields.end())
    return st.to_string();
  auto message = st.message();
  // Option checks start their message with the field; the key replaces it.
  if (message.rfind("field '", 0) == 0) {
    if (auto end = message.find("': "); end != std::string::npos)
      message = message.substr(end + 3);
  } else if (message.rfind(st.field() + ": ", 0) == 0) {
    message = message.substr(st.field().size() + 2);
  }
  return path + ":" + std::to_string(f->second.second) + ": " + f->second.first + ": " + message;
}

namespace {

using ms = std::chrono::milliseconds;

// One table's keys: what each does with its value.
using handler = std::function<status(const toml::node&, const std::string& key)>;
using keys = std::map<std::string, handler>;

class reader {
 public:
  reader(std::string path, server_settings& s) : s_(s) { source_.path = std::move(path); }

  config_source take() { return std::move(source_); }

  status fail(const toml::node& n, const std::string& key, const std::string& why) const {
    return {error::invalid_argument,
            source_.path + ":" + std::to_string(n.source().begin.line) + ": " + key + ": " + why,
            key};
  }

  // Reads table `t` (at key path `at`) with `known`; any other key is an error.
  status walk(const toml::table& t, const std::string& at, const keys& known) {
    for (auto&& [k, v] : t) {
      auto key = at.empty() ? std::string{k.str()} : at + "." + std::string{k.str()};
      auto h = known.find(std::string{k.str()});
      if (h == known.end())
        return fail(v, key, "is not a key of " + (at.empty() ? std::string{"the file"} : "[" + at + "]"));
      if (auto st = h->second(v, key); !st)
        return st;
    }
    return {};
  }

  status table(const toml::node& n, const std::string& key, const keys& known) {
    auto t = n.as_table();
    if (!t)
      return fail(n, key, "must be a table");
    return walk(*t, key, known);
  }

  // Each named entry of a table of tables ([scheduling.groups."a"]).
  status each(const toml::node& n, const std::string& key,
              const std::function<keys(const std::string& name)>& entry) {
    auto t = n.as_table();
    if (!t)
      return fail(n, key, "must be a table of named tables");
    for (auto&& [k, v] : *t) {
      std::string name{k.str()};
      if (auto st = table(v, key + ".\"" + name + "\"", entry(name)); !st)
        return st;
    }
    return {};
  }

  void noted(const std::string& field, const std::string& key, const toml::node& n) {
    source_.fields[field] = {key, n.source().begin.line};
  }

  handler text(std::string& into, std::string field = {}) {
    return [this, &into, field](const toml::node& n, const std::string& key) -> status {
      auto v = n.as_string();
      if (!v)
        return fail(n, key, "must be a string");
      into = v->get();
      noted(field.empty() ? key : field, key, n);
      return {};
    };
  }

  handler flag(bool& into) {
    return [this, &into](const toml::node& n, const std::string& key) -> status {
      auto v = n.as_boolean();
      if (!v)
        return fail(n, key, "must be true or false");
      into = v->get();
      return {};
    };
  }

  // An integer in [lo, hi], stored in any integer type.
  template <class Int>
  handler integer(Int& into, const std::string& field, int64_t lo, int64_t hi) {
    return [this, &into, field, lo, hi](const toml::node& n, const std::string& key) -> status {
      auto v = n.as_integer();
      if (!v)
        return fail(n, key, "must be an integer");
      if (v->get() < lo || v->get() > hi)
        return fail(n, key, "must be " + std::to_string(lo) + " to " + std::to_string(hi)
                              + ", got " + std::to_string(v->get()));
      into = static_cast<Int>(v->get());
      noted(field, key, n);
      return {};
    };
  }

  template <class Int>
  handler optional_integer(std::optional<Int>& into, const std::string& field, int64_t lo,
                           int64_t hi) {
    return [this, &into, field, lo, hi](const toml::node& n, const std::string& key) {
      Int v{};
      auto st = integer(v, field, lo, hi)(n, key);
      if (st)
        into = v;
      return st;
    };
  }

  handler number(double& into, const std::string& field) {
    return [this, &into, field](const toml::node& n, const std::string& key) -> status {
      if (auto i = n.as_integer())
        into = static_cast<double>(i->get());
      else if (auto d = n.as_floating_point())
        into = d->get();
      else
        return fail(n, key, "must be a number");
      noted(field, key, n);
      return {};
    };
  }

  handler duration(ms& into, const std::string& field) {
    return [this, &into, field](const toml::node& n, const std::string& key) -> status {
      auto v = n.as_string();
      if (!v)
        return fail(n, key, "must be a duration with its unit, such as \"30s\" or \"500ms\"");
      auto d = storage::parse_duration(v->get(), key);
      if (!d)
        return fail(n, key, d.error().message().substr(key.size() + 2));
      into = *d;
      noted(field, key, n);
      return {};
    };
  }

  handler optional_duration(std::optional<ms>& into, const std::string& field) {
    return [this, &into, field](const toml::node& n, const std::string& key) {
      ms d{};
      auto st = duration(d, field)(n, key);
      if (st)
        into = d;
      return st;
    };
  }

  handler rate(std::map<std::string, rate_limit>& into, const std::string& name,
               const std::string& map) {
    return [this, &into, name, map](const toml::node& n, const std::string& key) {
      auto field = "scheduling." + map + "[" + name + "]";
      rate_limit r;
      auto st = table(n, key, {{"per_second", number(r.per_second, field + ".per_second")},
                               {"burst", integer(r.burst, field + ".burst", 1, max_i32)}});
      if (st)
        into[name] = r;
      return st;
    };
  }

  // `at` is the table's field, "listen.tls" or "http.tls", as the server
  // names use_tls's errors.
  handler tls(tls_options& into, std::string* passphrase_file, std::string at) {
    return [this, &into, passphrase_file, at](const toml::node& n, const std::string& key) {
      keys k{{"certificate", text(into.certificate, at + ".certificate")},
             {"key", text(into.key, at + ".key")},
             {"ca_file", text(into.ca_file, at + ".ca_file")}};
      if (passphrase_file) {
        k["passphrase_file"] = text(*passphrase_file);
        k["peer_name"] = text(into.peer_name);
      }
      return table(n, key, k);
    };
  }

  keys top();

  static constexpr int64_t max_i32 = std::numeric_limits<int32_t>::max();
  static constexpr int64_t max_i64 = std::numeric_limits<int64_t>::max();

 private:
  keys listen();
  keys http();
  keys retention();
  keys bulk();
  keys scheduler();
  keys scheduling();
  keys admission();

  server_settings& s_;
  config_source source_;
};

keys reader::listen() {
  auto& l = *s_.opts.listen;
  return {
    {"address", text(l.address, "listen.address")},
    {"port", integer(l.port, "listen.port", 0, 65'535)},
    {"secret_file", text(s_.secret_file)},
    {"worker_secret_file", text(s_.worker_secret_file, "listen.worker_secret")},
    {"client_secret_file", text(s_.client_secret_file, "listen.client_secret")},
    {"certificate_roles",
     [this, &l](const toml::node& n, const std::string& key) -> status {
       auto t = n.as_table();
       if (!t)
         return fail(n, key, "must be a table of certificate names and roles");
       for (auto&& [k, v] : *t) {
         auto name = std::string{k.str()};
         auto at = key + ".\"" + name + "\"";
         auto r = v.as_string();
         auto granted = !r                      ? std::optional<role>{}
                        : r->get() == "worker"   ? std::optional<role>{role::worker}
                        : r->get() == "client"   ? std::optional<role>{role::client}
                        : r->get() == "operator" ? std::optional<role>{role::operator_}
                                                 : std::optional<role>{};
         if (!granted)
           return fail(v, at, "must be \"worker\", \"client\" or \"operator\"");
         l.certificate_roles[name] = *granted;
         noted("listen.certificate_roles", at, v);
       }
       return {};
     }},
    {"handshake_timeout", duration(l.handshake_timeout, "listen.handshake_timeout")},
    {"peer_timeout", duration(s_.peer_timeout, "listen.peer_timeout")},
    {"max_message_bytes", integer(s_.max_message_bytes, "listen.max_message_bytes", 0, max_i64)},
    {"tls", tls(s_.tls, &s_.passphrase_file, "listen.tls")},
  };
}

keys reader::http() {
  if (!s_.opts.http)
    s_.opts.http = http_options{};
  auto& h = *s_.opts.http;
  return {
    {"address", text(h.address, "http.address")},
    {"port", integer(h.port, "http.port", 0, 65'535)},
    {"insecure_plaintext", flag(h.insecure_plaintext)},
    {"tls", [this, &h](const toml::node& n, const std::string& key) {
       tls_options t = h.tls.value_or(tls_options{});
       auto st = tls(t, nullptr, "http.tls")(n, key);
       if (st)
         h.tls = t;
       return st;
     }},
  };
}

keys reader::retention() {
  auto& r = s_.opts.retention;
  return {
    {"succeeded", optional_duration(r.succeeded, "retention.succeeded")},
    {"failed", optional_duration(r.failed, "retention.failed")},
    {"cancelled", optional_duration(r.cancelled, "retention.cancelled")},
    {"expired", optional_duration(r.expired, "retention.expired")},
    {"interval", duration(r.interval, "retention.interval")},
    {"batch", integer(r.batch, "retention.batch", 0, max_i64)},
    {"writer_share", number(r.writer_share, "retention.writer_share")},
  };
}

keys reader::bulk() {
  auto& b = s_.opts.bulk;
  return {
    {"batch", integer(b.batch, "bulk.batch", 0, max_i64)},
    {"writer_share", number(b.writer_share, "bulk.writer_share")},
  };
}

keys reader::scheduler() {
  auto& c = s_.opts.scheduler;
  return {
    {"threads", integer(c.threads, "scheduler.threads", 0, 1'024)},
    {"moderate_poll_attempts",
     integer(c.moderate_poll_attempts, "scheduler.moderate_poll_attempts", 0, max_i32)},
    {"aggressive_poll_attempts",
     integer(c.aggressive_poll_attempts, "scheduler.aggressive_poll_attempts", 0, max_i32)},
  };
}

keys reader::admission() {
  if (!s_.opts.scheduling.admission)
    s_.opts.scheduling.admission = admission_options{};
  auto& a = *s_.opts.scheduling.admission;
  return {
    {"recheck_interval", duration(a.recheck_interval, "scheduling.admission.recheck_interval")},
    {"throttle",
     [this, &a](const toml::node& n, const std::string& key) -> status {
       auto steps = n.as_array();
       if (!steps)
         return fail(n, key, "must be an array of tables {above = 0.8, min_priority = 1}");
       a.throttle.steps.clear();
       for (size_t i = 0; i < steps->size(); ++i) {
         auto field = "scheduling.admission.throttle.steps[" + std::to_string(i) + "]";
         throttle_step step;
         if (auto st = table((*steps)[i], key + "[" + std::to_string(i) + "]",
                             {{"above", number(step.above, field + ".above")},
                              {"min_priority",
                               optional_integer(step.min_priority, field + ".min_priority",
                                                -max_i32, max_i32)}});
             !st)
           return st;
         a.throttle.steps.push_back(step);
       }
       return {};
     }},
    {"io_budget",
     [this, &a](const toml::node& n, const std::string& key) {
       auto b = a.io_budget.value_or(io_budget_options{});
       auto field = std::string{"scheduling.admission.io_budget."};
       auto st = table(n, key,
                       {{"window", duration(b.window, field + "window")},
                        {"share", number(b.share, field + "share")},
                        {"sample_interval", duration(b.sample_interval, field + "sample_interval")},
                        {"smoothing", number(b.smoothing, field + "smoothing")}});
       if (st)
         a.io_budget = b;
       return st;
     }},
  };
}

keys reader::scheduling() {
  auto& sc = s_.opts.scheduling;
  return {
    {"default_group_weight",
     integer(sc.default_group_weight, "scheduling.default_group_weight", -max_i32, max_i32)},
    {"aging",
     [this, &sc](const toml::node& n, const std::string& key) {
       auto a = sc.aging.value_or(aging_options{});
       auto st = table(n, key,
                       {{"grace_period", duration(a.grace_period, "scheduling.aging.grace_period")},
                        {"interval", duration(a.interval, "scheduling.aging.interval")},
                        {"max_effective_priority",
                         integer(a.max_effective_priority,
                                 "scheduling.aging.max_effective_priority", -max_i32, max_i32)},
                        {"urgent_threshold",
                         optional_integer(a.urgent_threshold, "scheduling.aging.urgent_threshold",
                                          -max_i32, max_i32)}});
       if (st)
         sc.aging = a;
       return st;
     }},
    {"preemption",
     [this, &sc](const toml::node& n, const std::string& key) {
       auto p = sc.preemption.value_or(preemption_options{});
       auto st = table(n, key, {{"threshold", integer(p.threshold, "scheduling.preemption.threshold",
                                                      -max_i32, max_i32)}});
       if (st)
         sc.preemption = p;
       return st;
     }},
    {"groups",
     [this, &sc](const toml::node& n, const std::string& key) {
       return each(n, key, [this, &sc](const std::string& name) -> keys {
         auto& g = sc.groups[name];
         auto field = "scheduling.groups[" + name + "].";
         return {{"weight", optional_integer(g.weight, field + "weight", -max_i32, max_i32)},
                 {"min_slots", integer(g.min_slots, field + "min_slots", -max_i32, max_i32)},
                 {"max_running",
                  optional_integer(g.max_running, field + "max_running", -max_i32, max_i32)},
                 {"rate", rate(sc.group_rate_limits, name, "group_rate_limits")}};
       });
     }},
    {"types",
     [this, &sc](const toml::node& n, const std::string& key) {
       return each(n, key, [this, &sc](const std::string& name) -> keys {
         return {{"max_running",
                  [this, &sc, name](const toml::node& v, const std::string& k) {
                    int32_t cap = 0;
                    auto st = integer(cap, "scheduling.type_max_running[" + name + "]", -max_i32,
                                      max_i32)(v, k);
                    if (st)
                      sc.type_max_running[name] = cap;
                    return st;
                  }},
                 {"rate", rate(sc.type_rate_limits, name, "type_rate_limits")}};
       });
     }},
    {"breakers",
     [this, &sc](const toml::node& n, const std::string& key) {
       return each(n, key, [this, &sc](const std::string& name) -> keys {
         auto& b = sc.breakers[name];
         auto field = "scheduling.breakers[" + name + "].";
         return {{"failures", integer(b.failures, field + "failures", -max_i32, max_i32)},
                 {"window", duration(b.window, field + "window")},
                 {"cool_down", duration(b.cool_down, field + "cool_down")}};
       });
     }},
    {"admission",
     [this](const toml::node& n, const std::string& key) { return table(n, key, admission()); }},
  };
}

keys reader::top() {
  auto& o = s_.opts;
  return {
    {"db", text(s_.db)},
    {"recovery",
     [this, &o](const toml::node& n, const std::string& key) -> status {
       auto v = n.as_string();
       if (v && v->get() == "retry_with_backoff")
         o.recovery = recovery_mode::retry_with_backoff;
       else if (v && v->get() == "retry_immediately")
         o.recovery = recovery_mode::retry_immediately;
       else
         return fail(n, key, "must be \"retry_with_backoff\" or \"retry_immediately\"");
       return {};
     }},
    {"max_payload_bytes", integer(o.max_payload_bytes, "max_payload_bytes", 0, max_i64)},
    {"remote_grace", duration(o.remote_grace, "remote_grace")},
    {"idempotency_window", duration(o.idempotency_window, "idempotency_window")},
    {"inbox_sweep", duration(o.inbox_sweep, "inbox_sweep")},
    {"max_snoozes", integer(o.max_snoozes, "max_snoozes", -max_i64, max_i64)},
    {"synchronous_full", flag(o.synchronous_full)},
    {"checkpoint_in_commits", flag(o.checkpoint_in_commits)},
    {"busy_timeout", duration(o.busy_timeout, "busy_timeout")},
    {"max_database_bytes", integer(o.max_database_bytes, "max_database_bytes", -max_i64, max_i64)},
    {"lease_time", duration(o.lease_time, "lease_time")},
    {"commit_outcome_wait", duration(o.commit_outcome_wait, "commit_outcome_wait")},
    {"file_mode",
     [this, &o](const toml::node& n, const std::string& key) -> status {
       auto v = n.as_string();
       unsigned mode = 0;
       bool octal = v && !v->get().empty() && v->get().size() <= 4;
       for (char c : octal ? v->get() : std::string{})
         if (c < '0' || c > '7')
           octal = false;
         else
           mode = mode * 8 + static_cast<unsigned>(c - '0');
       if (!octal)
         return fail(n, key, "must be an octal mode as a string, such as \"0640\"");
       o.file_mode = mode;
       noted("file_mode", key, n);
       return {};
     }},
    {"writer_batch_limit", integer(o.writer_batch_limit, "writer_batch_limit", 0, max_i64)},
    {"writer_idle_spin_us",
     [this, &o](const toml::node& n, const std::string& key) {
       int64_t us = 0;
       auto st = integer(us, "writer_idle_spin", -max_i64, max_i64)(n, key);
       if (st)
         o.writer_idle_spin = std::chrono::microseconds{us};
       return st;
     }},
    {"read_connections", integer(o.read_connections, "read_connections", 1, 1'024)},
    {"cache_kib", integer(o.cache_kib, "cache_kib", -max_i64, max_i64)},
    {"allow_open_files", flag(s_.allow_open_files)},
    {"standby", flag(s_.standby)},
    {"standby_poll", duration(s_.standby_poll, "standby_poll")},
    {"listen", [this](const toml::node& n, const std::string& key) { return table(n, key, listen()); }},
    {"http", [this](const toml::node& n, const std::string& key) { return table(n, key, http()); }},
    {"retention",
     [this](const toml::node& n, const std::string& key) { return table(n, key, retention()); }},
    {"bulk", [this](const toml::node& n, const std::string& key) { return table(n, key, bulk()); }},
    {"scheduler",
     [this](const toml::node& n, const std::string& key) { return table(n, key, scheduler()); }},
    {"scheduling",
     [this](const toml::node& n, const std::string& key) { return table(n, key, scheduling()); }},
    {"retry_policies",
     [this, &o](const toml::node& n, const std::string& key) {
       return each(n, key, [this, &o](const std::string& type) -> keys {
         auto& p = o.retry_policies[type];
         auto field = "retry_policies." + type + ".backoff.";
         return {
           {"initial", [this, &p, field](const toml::node& v, const std::string& k) {
              ms d{};
              auto st = duration(d, field + "initial")(v, k);
              if (st)
                p.initial_ms = d.count();
              return st;
            }},
           {"multiplier", number(p.multiplier, field + "multiplier")},
           {"randomization", number(p.randomization, field + "randomization")},
           {"kind", [this, &p](const toml::node& v, const std::string& k) -> status {
              auto s = v.as_string();
              if (s && s->get() == "exponential")
                p.kind = backoff_kind::exponential;
              else if (s && s->get() == "constant")
                p.kind = backoff_kind::constant;
              else if (s && s->get() == "linear")
                p.kind = backoff_kind::linear;
              else
                return fail(v, k, "must be \"exponential\", \"constant\" or \"linear\"");
              return {};
            }},
           {"max", [this, &p, field](const toml::node& v, const std::string& k) {
              ms d{};
              auto st = duration(d, field + "max")(v, k);
              if (st)
                p.max_ms = d.count();
              return st;
            }},
         };
       });
     }},
  };
}

}  // namespace

result<config_source> read_config(const std::string& path, server_settings& into) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return status{error::not_found, path + ": no such configuration file", "config"};
  toml::table doc;
  try {
    doc = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    return status{error::invalid_argument,
                  path + ":" + std::to_string(e.source().begin.line) + ": "
                    + std::string{e.description()},
                  "config"};
  }
  reader r{path, into};
  if (auto st = r.walk(doc, "", r.top()); !st)
    return st;
  return r.take();
}

}  // namespace ergon::server
