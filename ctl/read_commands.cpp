// The commands that only read: through an inspector, so they work beside a
// running owner and never take the file from it.
#include <cstdio>
#include <map>
#include <ostream>

#include "commands.hpp"
#include "text.hpp"

namespace ergon::ctl {
namespace {

using json_views::json;

std::string last_error(const job_info& j) {
  for (auto a = j.attempts.rbegin(); a != j.attempts.rend(); ++a)
    if (!a->message.empty())
      return a->message.size() > 60 ? a->message.substr(0, 57) + "..." : a->message;
  return "";
}

std::string or_dash(const std::optional<std::string>& s) { return s ? *s : "-"; }

std::string or_dash(const std::optional<int64_t>& t) { return t ? format_time(*t) : "-"; }

void print_counts(std::ostream& out, const std::string& title,
                  const std::map<std::string, status_counts>& rows, bool unfinished_only) {
  std::vector<job_status> columns{job_status::waiting, job_status::pending, job_status::running};
  if (!unfinished_only)
    for (auto s : {job_status::succeeded, job_status::failed, job_status::cancelled,
                   job_status::expired})
      columns.push_back(s);
  std::vector<std::string> header{title};
  for (auto s : columns)
    header.push_back(to_string(s));
  std::vector<std::vector<std::string>> cells;
  for (auto& [name, c] : rows) {
    std::vector<std::string> r{name.empty() ? "(none)" : name};
    for (auto s : columns)
      r.push_back(std::to_string(c[s]));
    cells.push_back(std::move(r));
  }
  print_table(out, header, cells);
}

}  // namespace

result<job_id> parse_id(const std::string& text) {
  auto id = job_id::parse(text);
  if (!id)
    return status{error::invalid_argument,
                  "ID: '" + text + "' is not a job id (36 characters, like "
                    "0190163d-8694-739b-aea5-966c26f8ad91)",
                  "ID"};
  return id;
}

int list(context& c, const list_args& a) {
  auto in = c.reader();
  if (!in)
    return c.fail(in.error());
  auto page = a.failed ? (*in)->list_failed(a.filter, a.page) : (*in)->list_jobs(a.filter, a.page);
  if (!page)
    return c.fail(page.error());
  return c.answer(json_views::of(*page), [&](std::ostream& out) {
    if (page->jobs.empty()) {
      out << "no jobs match\n";
      return;
    }
    std::vector<std::vector<std::string>> rows;
    for (auto& j : page->jobs)
      rows.push_back({j.id.to_string(), j.type, to_string(j.status), std::to_string(j.tries),
                      or_dash(j.group), format_time(j.added_at_ms), last_error(j)});
    print_table(out, {"ID", "TYPE", "STATUS", "TRIES", "GROUP", "SUBMITTED", "LAST ERROR"}, rows);
    if (page->next)
      out << "more: add --after " << page->next->to_string() << '\n';
  });
}

int show(context& c, const std::string& text) {
  auto id = parse_id(text);
  if (!id)
    return c.fail(id.error());
  auto in = c.reader();
  if (!in)
    return c.fail(in.error());
  auto j = (*in)->job_info(*id);
  if (!j)
    return c.fail(j.error());
  return c.answer(json_views::of(*j), [&](std::ostream& out) {
    auto line = [&](const char* k, const std::string& v) {
      out << k << std::string(13 - std::string{k}.size(), ' ') << printable(v) << '\n';
    };
    line("id", j->id.to_string());
    line("type", j->type);
    line("status", to_string(j->status));
    line("name", or_dash(j->name));
    line("group", or_dash(j->group));
    line("priority", std::to_string(j->priority) + ", weight " + std::to_string(j->weight));
    line("tries", std::to_string(j->tries) + " of " + std::to_string(j->tries_before_retry + j->max_retries + 1));
    line("submitted", format_time(j->added_at_ms));
    line("run at", format_time(j->run_at_ms));
    line("deadline", or_dash(j->deadline_ms));
    line("started", or_dash(j->started_at_ms));
    line("finished", or_dash(j->finished_at_ms));
    line("payload", std::to_string(j->payload.size()) + " bytes");
    if (j->checkpoint)
      line("checkpoint", std::to_string(j->checkpoint->size()) + " bytes");
    if (j->result)
      line("result", std::to_string(j->result->size()) + " bytes");
    if (j->unique_key)
      line("unique key", *j->unique_key);
    if (j->recurring_id)
      line("recurring", *j->recurring_id);
    if (j->cancel_requested_at_ms)
      line("cancel asked", format_time(*j->cancel_requested_at_ms));
    if (j->yields > 0)
      line("yields", std::to_string(j->yields));
    if (j->expected_io)
      line("expected io", std::to_string(j->expected_io->read_bytes) + " bytes read, "
                            + std::to_string(j->expected_io->write_bytes) + " written");
    // A fan-in may name thousands: the first few, and how many in all.
    auto some = [](const std::vector<job_id>& ids) {
      std::string out;
      for (size_t k = 0; k < ids.size() && k < 3; ++k)
        out += (k ? ", " : "") + ids[k].to_string();
      if (ids.size() > 3)
        out += " and " + std::to_string(ids.size() - 3) + " more";
      return out;
    };
    if (!j->depends_on.empty())
      line("depends on", some(j->depends_on) + " (" + to_string(j->on_dependency_failure)
                           + " if one fails"
                           + (j->status == job_status::waiting
                                ? "; waiting on " + std::to_string(j->waiting_on)
                                : std::string{})
                           + ")");
    if (!j->dependents.empty())
      line("dependents", some(j->dependents));
    if (!j->tags.empty()) {
      std::string tags;
      for (auto& [k, v] : j->tags)
        tags += (tags.empty() ? "" : ", ") + printable(k) + "=" + printable(v);
      line("tags", tags);
    }
    if (j->progress)
      line("progress", std::to_string(j->progress->done) + "/" + std::to_string(j->progress->total)
                         + (j->progress->message.empty() ? "" : " " + j->progress->message));
    if (j->attempts.empty())
      return;
    out << '\n';
    std::vector<std::vector<std::string>> rows;
    for (auto& a : j->attempts)
      rows.push_back({std::to_string(a.try_number), format_time(a.started_at_ms),
                      a.finished_at_ms ? format_span(*a.finished_at_ms - a.started_at_ms) : "-",
                      to_string(a.outcome), worker_text(a.worker), a.message});
    print_table(out, {"TRY", "STARTED", "TOOK", "OUTCOME", "WORKER", "MESSAGE"}, rows);
    for (auto& a : j->attempts) {
      if (a.logs.empty() && a.logs_dropped == 0)
        continue;
      out << "\ntry " << a.try_number << " log:\n";
      for (auto& l : a.logs)
        out << "  " << format_time(l.at_ms) << ' ' << to_string(l.level) << ' '
            << printable(l.text) << '\n';
      if (a.logs_dropped > 0)
        out << "  (" << a.logs_dropped << " more line" << (a.logs_dropped == 1 ? "" : "s")
            << " dropped: worker_options::log_lines, log_bytes)\n";
    }
  });
}

int stats(context& c) {
  auto in = c.reader();
  if (!in)
    return c.fail(in.error());
  auto counts = (*in)->metrics();
  if (!counts)
    return c.fail(counts.error());
  job_filter pending;
  pending.status = job_status::pending;
  page_request first;
  first.limit = 1;
  auto oldest = (*in)->list_jobs(pending, first);
  if (!oldest)
    return c.fail(oldest.error());
  auto owner = find_owner(c.reach().db);
  if (!owner)
    return c.fail(owner.error());
  // Allocation lives in the owner's memory: asked for when it listens.
  std::optional<metrics_snapshot> scheduling;
  std::string scheduling_note;
  if (!*owner) {
    scheduling_note = "no process owns the file: nothing runs";
  } else if ((*owner)->listeners.empty()) {
    scheduling_note = "the owner (pid " + std::to_string((*owner)->pid)
                      + ") takes no connections: allocation is not visible";
  } else {
    auto sys = c.system();
    if (!sys)
      return c.fail(sys.error());
    auto link = queue_link::owner(**sys, c.reach(), *owner);
    // The counts are the file's and need nothing: say what is missing and
    // print them.
    if (!link)
      scheduling_note = "not shown: " + link.error().message();
    else if (*link) {
      auto m = (*link)->ask<metrics_snapshot>(metrics_atom::value);
      if (!m)
        scheduling_note = "not shown: " + m.error().message();
      else
        scheduling = std::move(*m);
    }
  }
  auto now = now_ms();
  json doc{{"by_status", json_views::of(counts->by_status)}};
  doc["by_type"] = json::object();
  for (auto& [type, n] : counts->by_type)
    doc["by_type"][type] = json_views::of(n);
  doc["by_group"] = json::object();
  for (auto& [group, n] : counts->by_group)
    doc["by_group"][group] = json_views::of(n);
  doc["oldest_pending"] = nullptr;
  if (!oldest->jobs.empty()) {
    auto& j = oldest->jobs.front();
    doc["oldest_pending"] = {{"id", j.id.to_string()},
                             {"added_at_ms", j.added_at_ms},
                             {"run_at_ms", j.run_at_ms},
                             {"age_ms", now - j.added_at_ms}};
  }
  doc["owner"] = *owner ? json_views::of(**owner) : json(nullptr);
  doc["scheduling"] = scheduling ? json_views::of(*scheduling) : json(nullptr);
  if (!scheduling)
    doc["scheduling_note"] = scheduling_note;
  return c.answer(doc, [&](std::ostream& out) {
    out << "jobs: " << counts->by_status.total() << " in all\n";
    for (size_t i = 0; i < job_status_count; ++i)
      out << "  " << to_string(static_cast<job_status>(i)) << ": " << counts->by_status.by_status[i]
          << '\n';
    if (!oldest->jobs.empty()) {
      auto& j = oldest->jobs.front();
      out << "oldest pending: " << j.id.to_string() << ", submitted "
          << format_span(now - j.added_at_ms) << " ago, due "
          << (j.run_at_ms <= now ? format_span(now - j.run_at_ms) + " ago" : "in " + format_span(j.run_at_ms - now))
          << '\n';
    }
    out << '\n';
    print_counts(out, "TYPE", counts->by_type, false);
    if (!counts->by_group.empty()) {
      out << '\n';
      print_counts(out, "GROUP", counts->by_group, true);
    }
    out << '\n';
    if (!scheduling) {
      out << "allocation: " << printable(scheduling_note) << '\n';
      return;
    }
    out << "capacity: " << scheduling->capacity << " slots\n";
    std::vector<std::vector<std::string>> rows;
    for (auto& g : scheduling->groups) {
      char share[32];
      std::snprintf(share, sizeof(share), "%.2f", g.share);
      rows.push_back({g.group.empty() ? "(none)" : g.group, std::to_string(g.weight), share,
                      std::to_string(g.allocated_slots), std::to_string(g.running_slots),
                      std::to_string(g.ready_jobs), g.paused ? "paused" : ""});
    }
    print_table(out, {"GROUP", "WEIGHT", "SHARE", "ALLOCATED", "RUNNING", "READY", ""}, rows);
    if (!scheduling->breakers.empty()) {
      out << '\n';
      rows.clear();
      for (auto& b : scheduling->breakers)
        rows.push_back({b.type, to_string(b.state), std::to_string(b.recent_failures),
                        b.open_until_ms ? format_time(*b.open_until_ms) : "-",
                        std::to_string(b.trips)});
      print_table(out, {"BREAKER", "STATE", "FAILURES", "OPEN UNTIL", "TRIPS"}, rows);
    }
    if (scheduling->pauses.empty())
      return;
    out << '\n';
    rows.clear();
    for (auto& p : scheduling->pauses)
      rows.push_back({p.group ? "group" : "type", p.name, format_time(p.since_ms),
                      p.until_ms ? format_time(*p.until_ms) : "resumed by hand"});
    print_table(out, {"PAUSED", "NAME", "SINCE", "UNTIL"}, rows);
  });
}

int controls(context& c) {
  auto in = c.reader();
  if (!in)
    return c.fail(in.error());
  auto all = (*in)->controls();
  if (!all)
    return c.fail(all.error());
  auto doc = json_views::of_each(*all);
  return c.answer(doc, [&](std::ostream& out) {
    if (all->empty()) {
      out << "no run-time controls: every group and type runs with its configured settings\n";
      return;
    }
    std::vector<std::vector<std::string>> rows;
    for (auto& k : *all) {
      std::string paused = "-";
      if (k.paused)
        paused = "since " + format_time(k.paused_since_ms)
                 + (k.paused_until_ms ? ", until " + format_time(*k.paused_until_ms) : "");
      auto settings = to_string(k.settings);
      rows.push_back({to_string(k.scope), k.scope == control_scope::queue ? "-" : printable(k.name),
                      paused, settings.empty() ? "-" : settings, format_time(k.changed_at_ms)});
    }
    print_table(out, {"SCOPE", "NAME", "PAUSED", "SETTINGS", "CHANGED"}, rows);
  });
}

int workers(context& c) {
  return with_owner(c, "listing workers", "workers register with it", [&](queue_link& q) {
    auto all = q.ask<std::vector<worker_info>>(workers_atom::value);
    if (!all)
      return c.fail(all.error());
    auto doc = json_views::of_each(*all);
    return c.answer(doc, [&](std::ostream& out) {
      if (all->empty()) {
        out << "no workers registered: nothing runs jobs\n";
        return;
      }
      auto now = now_ms();
      std::vector<std::vector<std::string>> rows;
      for (auto& w : *all) {
        std::string types;
        for (auto& t : w.types)
          types += (types.empty() ? "" : ",") + t;
        rows.push_back({std::to_string(w.identity.id), w.identity.name, w.identity.host,
                        std::to_string(w.identity.pid),
                        w.identity.node.empty() ? "local" : w.identity.node,
                        types,
                        std::to_string(w.running_weight) + "/" + std::to_string(w.max_concurrency),
                        w.last_report_ms ? format_span(now - *w.last_report_ms) + " ago" : "-",
                        w.leaving ? "leaving" : "ready"});
      }
      print_table(out, {"ID", "NAME", "HOST", "PID", "NODE", "TYPES", "BUSY", "REPORTED", "STATE"},
                  rows);
    });
  });
}

int backup(context& c, const std::string& out) {
  auto in = c.reader();
  if (!in)
    return c.fail(in.error());
  auto bytes = (*in)->backup(out);
  if (!bytes)
    return c.fail(bytes.error());
  return c.answer({{"backup", out}, {"bytes", *bytes}, {"quick_check", "ok"}},
                  [&](std::ostream& o) {
                    o << "backed up " << printable(c.reach().db) << " to " << printable(out) << ": "
                      << *bytes << " bytes, quick_check ok\n";
                  });
}

namespace {

// "-", "until resumed" or "until <time>".
std::string pause_text(const recurring_info& r) {
  if (!r.paused_since_ms)
    return "-";
  return r.paused_until_ms ? "until " + format_time(*r.paused_until_ms) : "until resumed";
}

}  // namespace

int recurring_list(context& c, const std::string& prefix) {
  auto in = c.reader();
  if (!in)
    return c.fail(in.error());
  auto all = (*in)->list_recurring(prefix);
  if (!all)
    return c.fail(all.error());
  auto doc = json_views::of_each(*all);
  return c.answer(doc, [&](std::ostream& out) {
    if (all->empty()) {
      out << "no recurring jobs"
          << (prefix.empty() ? "" : " with ids starting '" + printable(prefix) + "'")
          << '\n';
      return;
    }
    std::vector<std::vector<std::string>> rows;
    for (auto& r : *all)
      rows.push_back({r.id, r.schedule, r.time_zone.empty() ? "UTC" : r.time_zone, r.job.type,
                      r.next_run_at_ms ? format_time(*r.next_run_at_ms) : "-",
                      r.last_status ? to_string(*r.last_status) : "-", pause_text(r)});
    print_table(out, {"ID", "SCHEDULE", "ZONE", "TYPE", "NEXT RUN", "LAST", "PAUSED"}, rows);
  });
}

int recurring_show(context& c, const std::string& id) {
  auto in = c.reader();
  if (!in)
    return c.fail(in.error());
  auto r = (*in)->recurring_info(id);
  if (!r)
    return c.fail(r.error());
  return c.answer(json_views::of(*r), [&](std::ostream& out) {
    auto line = [&](const char* k, const std::string& v) {
      out << k << std::string(15 - std::string{k}.size(), ' ') << printable(v) << '\n';
    };
    line("id", r->id);
    line("schedule", r->schedule);
    line("time zone", r->time_zone.empty() ? "UTC" : r->time_zone);
    line("catch up", to_string(r->catch_up));
    line("type", r->job.type);
    line("added", format_time(r->added_at_ms));
    line("updated", format_time(r->updated_at_ms));
    line("next job", r->next_job ? r->next_job->to_string() + " (" + to_string(*r->next_status) + ")" : "-");
    line("next run", or_dash(r->next_run_at_ms));
    line("executions", std::to_string(r->executions)
                         + (r->max_executions ? " of " + std::to_string(*r->max_executions)
                                                  + (r->executions >= *r->max_executions
                                                       ? " (done: no more instances)"
                                                       : "")
                                              : ""));
    line("last job", r->last_job ? r->last_job->to_string() + " (" + to_string(*r->last_status) + ")" : "-");
    line("last finished", or_dash(r->last_finished_at_ms));
    line("paused", pause_text(*r));
  });
}

}  // namespace ergon::ctl
