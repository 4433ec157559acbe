#include "prometheus_text.hpp"

#include <charconv>
#include <sstream>
#include <tuple>

#include "ergon/job_info.hpp"

namespace ergon::runtime {
namespace {

// Valid UTF-8 with \\, \" and \n escaped; a byte that is not part of a
// valid UTF-8 sequence becomes U+FFFD, since Prometheus rejects the whole
// scrape otherwise.
std::string escaped(const std::string& raw) {
  std::string v;
  v.reserve(raw.size());
  for (size_t i = 0; i < raw.size();) {
    auto c = static_cast<unsigned char>(raw[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    bool ok = n > 0 && i + n <= raw.size();
    for (size_t k = 1; ok && k < n; ++k)
      ok = (static_cast<unsigned char>(raw[i + k]) >> 6) == 0x2;
    if (ok) {
      v.append(raw, i, n);
      i += n;
    } else {
      v += "\xEF\xBF\xBD";
      ++i;
    }
  }
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

// The shortest text that reads back as `v` (0.005, not 0.0050000000000000001).
std::string number(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return ec == std::errc{} ? std::string(buf, end) : std::string{"NaN"};
}

class exposition {
 public:
  // One # HELP and # TYPE per metric family, before its samples.
  void family(const std::string& name, const char* type, const char* help) {
    out_ << "# HELP " << name << ' ' << help << '\n' << "# TYPE " << name << ' ' << type << '\n';
  }

  void sample(const std::string& name, const std::string& labels, double value) {
    out_ << name;
    if (!labels.empty())
      out_ << '{' << labels << '}';
    out_ << ' ' << number(value) << '\n';
  }

  // Buckets in the histogram's unit, shown divided by `scale` (ms to s).
  void histogram_samples(const std::string& name, const std::string& labels,
                         const histogram& h, double scale) {
    auto with = [&](const std::string& le) {
      return labels.empty() ? "le=\"" + le + "\"" : labels + ",le=\"" + le + "\"";
    };
    int64_t cumulative = 0;
    for (size_t i = 0; i < h.bounds.size() && i < h.counts.size(); ++i) {
      cumulative += h.counts[i];
      sample(name + "_bucket", with(number(static_cast<double>(h.bounds[i]) / scale)),
             static_cast<double>(cumulative));
    }
    sample(name + "_bucket", with("+Inf"), static_cast<double>(h.total));
    sample(name + "_sum", labels, static_cast<double>(h.sum) / scale);
    sample(name + "_count", labels, static_cast<double>(h.total));
  }

  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

std::string label(const char* key, const std::string& value) {
  return std::string{key} + "=\"" + escaped(value) + "\"";
}

void status_samples(exposition& e, const std::string& name, const std::string& labels,
                    const status_counts& c, size_t statuses) {
  for (size_t i = 0; i < statuses; ++i) {
    auto s = label("status", to_string(static_cast<job_status>(i)));
    e.sample(name, labels.empty() ? s : labels + "," + s, static_cast<double>(c.by_status[i]));
  }
}

}  // namespace

std::string prometheus_text(const metrics_snapshot& m) {
  exposition e;
  e.family("ergon_jobs", "gauge", "Jobs in the queue by status.");
  status_samples(e, "ergon_jobs", "", m.by_status, job_status_count);
  e.family("ergon_jobs_by_type", "gauge", "Jobs by type and status.");
  for (auto& [type, c] : m.by_type)
    status_samples(e, "ergon_jobs_by_type", label("type", type), c, job_status_count);
  e.family("ergon_jobs_by_group", "gauge",
           "Pending and running jobs by group (group \"\" has the jobs without one).");
  for (auto& [group, c] : m.by_group)
    status_samples(e, "ergon_jobs_by_group", label("group", group), c, 2);

  e.family("ergon_queue_wait_seconds", "histogram",
           "Time from a job becoming due to its start, since the queue opened.");
  e.histogram_samples("ergon_queue_wait_seconds", "",
                      {m.queue_wait_bounds_ms, m.queue_wait_counts, m.queue_wait_total,
                       m.queue_wait_sum_ms},
                      1'000.0);
  e.family("ergon_oldest_ready_seconds", "gauge",
           "How long the longest-waiting ready job has been due (queue lag).");
  e.sample("ergon_oldest_ready_seconds", "", static_cast<double>(m.oldest_ready_ms) / 1'000.0);
  e.family("ergon_job_run_seconds", "histogram",
           "Run time of attempts that ended since the queue opened, by job type.");
  for (auto& [type, h] : m.run_ms_by_type)
    e.histogram_samples("ergon_job_run_seconds", label("type", type), h, 1'000.0);
  e.family("ergon_attempts_total", "counter", "Attempts that ended since the queue opened, by outcome.");
  for (size_t i = 1; i < m.attempts_by_outcome.size(); ++i)
    e.sample("ergon_attempts_total", label("outcome", to_string(static_cast<attempt_outcome>(i))),
             static_cast<double>(m.attempts_by_outcome[i]));

  e.family("ergon_capacity_slots", "gauge", "Worker capacity known to the dispatcher, in weight units.");
  e.sample("ergon_capacity_slots", "", m.capacity);
  struct group_gauge {
    const char* name;
    const char* help;
    double (*value)(const group_metrics&);
  };
  const group_gauge gauges[] = {
    {"ergon_group_weight", "A group's weight.",
     [](const group_metrics& g) { return static_cast<double>(g.weight); }},
    {"ergon_group_share_slots", "A group's exact share of capacity, in slots.",
     [](const group_metrics& g) { return g.share; }},
    {"ergon_group_allocated_slots", "A group's share rounded to whole slots.",
     [](const group_metrics& g) { return static_cast<double>(g.allocated_slots); }},
    {"ergon_group_running_slots", "Slots a group's running jobs take.",
     [](const group_metrics& g) { return static_cast<double>(g.running_slots); }},
    {"ergon_group_utilization", "Running slots over allocated slots.",
     [](const group_metrics& g) { return g.utilization; }},
    {"ergon_group_ready_jobs", "A group's jobs that are due and wait for a slot.",
     [](const group_metrics& g) { return static_cast<double>(g.ready_jobs); }},
    {"ergon_group_paused", "1 while a group is paused.",
     [](const group_metrics& g) { return g.paused ? 1.0 : 0.0; }},
  };
  for (auto& gauge : gauges) {
    e.family(gauge.name, "gauge", gauge.help);
    for (auto& g : m.groups)
      e.sample(gauge.name, label("group", g.group), gauge.value(g));
  }
  e.family("ergon_aging_promotions_total", "counter",
           "Jobs started with a priority raised by aging.");
  e.sample("ergon_aging_promotions_total", "", static_cast<double>(m.aging_promotions));
  e.family("ergon_excess_slots_redistributed_total", "counter",
           "Slots given beyond a group's allocation because others could not use them.");
  e.sample("ergon_excess_slots_redistributed_total", "",
           static_cast<double>(m.excess_slots_redistributed));
  e.family("ergon_too_heavy_jobs", "gauge", "Pending jobs heavier than every worker of their type.");
  e.sample("ergon_too_heavy_jobs", "", static_cast<double>(m.too_heavy_jobs));

  struct single {
    const char* name;
    const char* type;
    const char* help;
    double value;
  };
  const single singles[] = {
    {"ergon_preemptions_total", "counter", "Running attempts asked to yield their slot.",
     static_cast<double>(m.preemptions)},
    {"ergon_yields_total", "counter", "Attempts that yielded their slot when asked.",
     static_cast<double>(m.yields)},
    {"ergon_resumptions_total", "counter", "Yielded jobs made ready again.",
     static_cast<double>(m.resumptions)},
    {"ergon_preempted_waiting_jobs", "gauge", "Yielded jobs waiting for their preemptor to end.",
     static_cast<double>(m.preempted_waiting)},
    {"ergon_pressure", "gauge", "Combined admission pressure at the last dispatch (0 to 1).",
     m.pressure},
    {"ergon_pressure_errors_total", "counter", "Pressure readings that threw or were NaN.",
     static_cast<double>(m.pressure_errors)},
    {"ergon_deferred_by_pressure_total", "counter",
     "Times a ready job was passed over because the throttle deferred it.",
     static_cast<double>(m.deferred_by_pressure)},
    {"ergon_deferred_by_io_total", "counter",
     "Times a ready job was passed over because its declared I/O did not fit the budget.",
     static_cast<double>(m.deferred_by_io)},
    {"ergon_io_running_read_bytes", "gauge", "Disk reads declared by running jobs.",
     static_cast<double>(m.io_running_read_bytes)},
    {"ergon_io_running_write_bytes", "gauge", "Disk writes declared by running jobs.",
     static_cast<double>(m.io_running_write_bytes)},
    {"ergon_disk_read_bytes_per_second", "gauge", "The disks' smoothed read throughput.",
     m.io_read_bytes_per_second},
    {"ergon_disk_write_bytes_per_second", "gauge", "The disks' smoothed write throughput.",
     m.io_write_bytes_per_second},
  };
  for (auto& x : singles) {
    e.family(x.name, x.type, x.help);
    e.sample(x.name, "", x.value);
  }
  e.family("ergon_pressure_by_source", "gauge", "Each pressure source's last good reading.");
  for (auto& r : m.pressure_by_source)
    e.sample("ergon_pressure_by_source", label("source", r.source), r.value);

  e.family("ergon_writer_batch_requests", "histogram", "Requests per writer transaction.");
  e.histogram_samples("ergon_writer_batch_requests", "", m.writer_batch_requests, 1.0);
  e.family("ergon_commit_seconds", "histogram", "How long each COMMIT took (the disk's sync).");
  e.histogram_samples("ergon_commit_seconds", "", m.commit_us, 1'000'000.0);

  e.family("ergon_workers", "gauge", "Registered workers, in the owner's process and remote.");
  e.sample("ergon_workers", label("location", "local"), m.local_workers);
  e.sample("ergon_workers", label("location", "remote"), m.remote_workers);
  e.family("ergon_orphaned_attempts", "gauge",
           "Attempts of remote workers kept running since open for those workers to return.");
  e.sample("ergon_orphaned_attempts", "", static_cast<double>(m.orphaned_attempts));
  e.family("ergon_breaker_state", "gauge",
           "Each job type's circuit breaker: 0 closed, 1 open, 2 half-open.");
  for (auto& b : m.breakers)
    e.sample("ergon_breaker_state", label("type", b.type), static_cast<double>(b.state));
  e.family("ergon_breaker_trips_total", "counter", "Times each type's circuit breaker opened.");
  for (auto& b : m.breakers)
    e.sample("ergon_breaker_trips_total", label("type", b.type), static_cast<double>(b.trips));
  e.family("ergon_breaker_recent_failures", "gauge",
           "Failures a closed breaker counts in its window (an open one: those that opened it).");
  for (auto& b : m.breakers)
    e.sample("ergon_breaker_recent_failures", label("type", b.type),
             static_cast<double>(b.recent_failures));
  e.family("ergon_paused", "gauge",
           "1 for each pause in force: of the queue, a group or a type (scope and name).");
  for (auto& c : m.controls)
    if (c.paused)
      e.sample("ergon_paused", label("scope", to_string(c.scope)) + "," + label("name", c.name), 1);
  e.family("ergon_waits", "gauge", "queue::wait calls waiting for a job to finish.");
  e.sample("ergon_waits", "", static_cast<double>(m.waits));
  struct counter {
    const char* name;
    const char* help;
    int64_t value;
  };
  for (auto& c : {counter{"ergon_subscriber_errors_total", "Exceptions thrown by subscriber callbacks.",
                          m.subscriber_errors},
                  counter{"ergon_refused_messages_total",
                          "Messages refused by the actors that face the network.",
                          m.refused_messages},
                  counter{"ergon_forbidden_messages_total",
                          "Requests refused because the caller's role may not make them.",
                          m.forbidden_messages},
                  counter{"ergon_failed_handshakes_total",
                          "Handshakes that failed: a wrong secret, none, or a TLS handshake.",
                          m.failed_handshakes},
                  counter{"ergon_refused_connections_total",
                          "Connections closed for breaking the transport's rules.",
                          m.refused_connections},
                  counter{"ergon_rejected_messages_total", "Malformed worker protocol messages.",
                          m.rejected_messages},
                  counter{"ergon_control_changes_total",
                          "Run-time control changes (pauses, resumes, settings) since open.",
                          m.control_changes}}) {
    e.family(c.name, "counter", c.help);
    e.sample(c.name, "", static_cast<double>(c.value));
  }
  return e.str();
}

std::string prometheus_text(const role_metrics& r) {
  exposition e;
  e.family("ergon_role", "gauge",
           "1 for this server's role for its queue (owner or standby), 0 for the other.");
  e.sample("ergon_role", label("role", "owner"), r.owner ? 1 : 0);
  e.sample("ergon_role", label("role", "standby"), r.owner ? 0 : 1);
  if (r.epoch > 0) {
    e.family("ergon_lease_epoch", "gauge",
             "The epoch of the queue's lease: the owner's, or the one a standby saw last.");
    e.sample("ergon_lease_epoch", "", static_cast<double>(r.epoch));
  }
  if (r.standby_server)
    for (auto [name, help, value] :
         {std::tuple{"ergon_takeovers_total", "Times this standby server took the queue over.",
                     r.takeovers},
          std::tuple{"ergon_step_downs_total",
                     "Times this server's queue closed by itself and it became a standby again.",
                     r.step_downs}}) {
      e.family(name, "counter", help);
      e.sample(name, "", static_cast<double>(value));
    }
  return e.str();
}

}  // namespace ergon::runtime
