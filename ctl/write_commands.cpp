// The commands that write: through the owner when a program owns the file,
// else on the file opened here (queue_link).
#include <ostream>

#include "commands.hpp"
#include "ergon/actors/bulk_action.hpp"
#include "text.hpp"

namespace ergon::ctl {
namespace {

using json_views::json;

// The owner applies a control as it saves it: a queue opened here to save
// one would contend with the owner for the file, and miss its scheduling.
constexpr const char* controls_why = "the owner applies controls as it saves them";

// Runs `write` on the queue that takes writes, then answers with its result.
template <class Write>
int with_link(context& c, Write write) {
  auto sys = c.system();
  if (!sys)
    return c.fail(sys.error());
  auto link = queue_link::for_writes(**sys, c.reach());
  if (!link)
    return c.fail(link.error());
  return write(*link);
}

// A dry run of a bulk write of `kind`: the jobs `filter` matches that it
// would take, as last committed, every page of them. It refuses what the
// action would.
int list_what_would_change(context& c, job_filter filter, actors::bulk_kind kind,
                           const std::string& verb, const std::string& note) {
  if (kind == actors::bulk_kind::retry)
    filter.status = job_status::failed;
  if (auto st = actors::check_bulk(kind, filter); !st)
    return c.fail(st, verb);
  auto in = c.reader();
  if (!in)
    return c.fail(in.error());
  auto taken = [kind](const job_info& j) {
    return (kind == actors::bulk_kind::cancel) != is_final(j.status);
  };
  std::vector<job_info> jobs;
  page_request page;
  page.limit = max_page_size;
  for (;;) {
    auto p = (*in)->list_jobs(filter, page);
    if (!p)
      return c.fail(p.error());
    for (auto& j : p->jobs)
      if (taken(j))
        jobs.push_back(std::move(j));
    if (!p->next)
      break;
    page.after = p->next;
  }
  json ids = json::array();
  for (auto& j : jobs)
    ids.push_back(j.id.to_string());
  json doc{{"dry_run", true}, {"would_" + verb, jobs.size()}, {"jobs", ids}};
  auto noun = std::string{filter.status == job_status::failed ? " failed job" : " job"};
  return c.answer(doc, [&](std::ostream& out) {
    out << "dry run: would " << verb << " " << jobs.size() << noun
        << (jobs.size() == 1 ? "" : "s") << note << "; nothing changed\n";
    if (jobs.empty())
      return;
    constexpr size_t shown = 50;
    std::vector<std::vector<std::string>> rows;
    for (size_t i = 0; i < jobs.size() && i < shown; ++i) {
      auto& j = jobs[i];
      rows.push_back({j.id.to_string(), j.type, j.group ? *j.group : "-", to_string(j.status),
                      j.finished_at_ms ? format_time(*j.finished_at_ms) : "-"});
    }
    print_table(out, {"ID", "TYPE", "GROUP", "STATUS", "FINISHED"}, rows);
    if (jobs.size() > shown)
      out << "... and " << jobs.size() - shown << " more (--json lists them all)\n";
  });
}

}  // namespace

int retry(context& c, const std::optional<std::string>& id,
          const std::optional<job_filter>& filter, bool dry_run) {
  if (dry_run)
    return list_what_would_change(c, filter.value_or(job_filter{}), actors::bulk_kind::retry, "retry",
                                  " (one whose unique key another job holds then would be skipped)");
  if (id) {
    auto parsed = parse_id(*id);
    if (!parsed)
      return c.fail(parsed.error());
    return with_link(c, [&](queue_link& q) {
      auto r = q.ask<ok_atom>(retry_failed_atom::value, *parsed);
      if (!r)
        return c.fail(r.error());
      return c.answer({{"retried", 1}, {"id", *id}, {"route", q.route()}},
                      [&](std::ostream& out) { out << "retried " << *id << '\n'; });
    });
  }
  return with_link(c, [&](queue_link& q) {
    auto r = q.ask<retry_summary>(retry_failed_atom::value, filter.value_or(job_filter{}));
    if (!r)
      return c.fail(r.error());
    auto doc = json_views::of(*r);
    doc["route"] = q.route();
    return c.answer(doc, [&](std::ostream& out) {
      out << "retried " << r->retried << " failed job" << (r->retried == 1 ? "" : "s") << '\n';
      for (auto& skipped : r->skipped)
        out << "skipped " << skipped.to_string() << ": its unique key is held by another job\n";
    });
  });
}

int cancel(context& c, const std::string& id, bool dry_run) {
  auto parsed = parse_id(id);
  if (!parsed)
    return c.fail(parsed.error());
  if (dry_run) {
    auto in = c.reader();
    if (!in)
      return c.fail(in.error());
    auto j = (*in)->job_info(*parsed);
    if (!j)
      return c.fail(j.error());
    if (j->status != job_status::pending && j->status != job_status::running)
      return c.fail({error::job_finished,
                     id + " is " + to_string(j->status) + ": cancel would refuse it"});
    bool running = j->status == job_status::running;
    return c.answer({{"dry_run", true}, {"would_cancel", id}, {"status", to_string(j->status)}},
                    [&](std::ostream& out) {
                      out << "dry run: would cancel " << id << ", now " << to_string(j->status)
                          << (running ? ": its code is asked to stop and the job ends cancelled"
                                      : ": it never runs")
                          << "; nothing changed\n";
                    });
  }
  return with_link(c, [&](queue_link& q) {
    auto r = q.ask<ok_atom>(cancel_job_atom::value, *parsed);
    if (!r)
      return c.fail(r.error());
    return c.answer({{"cancelled", id}, {"route", q.route()}}, [&](std::ostream& out) {
      out << "cancelled " << id << " (a running job stops when its code sees the request)\n";
    });
  });
}

int replay(context& c, const std::string& id) {
  auto parsed = parse_id(id);
  if (!parsed)
    return c.fail(parsed.error());
  return with_link(c, [&](queue_link& q) {
    auto r = q.ask<ok_atom>(replay_atom::value, *parsed);
    if (!r)
      return c.fail(r.error());
    return c.answer({{"replayed", id}, {"route", q.route()}}, [&](std::ostream& out) {
      out << "replayed " << id << ": pending again, with its history\n";
    });
  });
}

int cancel_all(context& c, const job_filter& filter, bool dry_run) {
  if (dry_run)
    return list_what_would_change(c, filter, actors::bulk_kind::cancel, "cancel",
                                  " (running ones would be asked to stop)");
  return with_link(c, [&](queue_link& q) {
    auto r = q.ask<cancel_summary>(cancel_jobs_atom::value, filter);
    if (!r)
      return c.fail(r.error(), "cancel");
    auto doc = json_views::of(*r);
    doc["route"] = q.route();
    return c.answer(doc, [&](std::ostream& out) {
      out << "cancelled " << r->cancelled << " job" << (r->cancelled == 1 ? "" : "s")
          << "; asked " << r->stop_requested << " running job"
          << (r->stop_requested == 1 ? "" : "s") << " to stop\n";
    });
  });
}

int delete_jobs(context& c, const job_filter& filter, bool dry_run) {
  if (dry_run)
    return list_what_would_change(c, filter, actors::bulk_kind::remove, "delete", "");
  return with_link(c, [&](queue_link& q) {
    auto r = q.ask<int64_t>(delete_jobs_atom::value, filter);
    if (!r)
      return c.fail(r.error(), "delete");
    return c.answer({{"deleted", *r}, {"route", q.route()}}, [&](std::ostream& out) {
      out << "deleted " << *r << " finished job" << (*r == 1 ? "" : "s") << '\n';
    });
  });
}

int purge(context& c, const job_filter& filter,
          std::optional<std::chrono::milliseconds> older_than, bool dry_run) {
  if (dry_run) {
    if (!older_than) {
      auto failed = filter;
      failed.status = job_status::failed;
      return list_what_would_change(c, failed, actors::bulk_kind::remove, "purge", "");
    }
    // The owner counts --older-than on its clock; this one is close to it.
    job_filter older;
    older.status = job_status::failed;
    auto now = now_ms();
    older.finished_before_ms = older_than->count() >= now ? 0 : now - older_than->count();
    return list_what_would_change(c, older, actors::bulk_kind::remove, "purge",
                                  " (failed before " + format_time(*older.finished_before_ms) + ")");
  }
  return with_link(c, [&](queue_link& q) {
    auto r = older_than ? q.ask<int64_t>(purge_failed_atom::value, *older_than)
                        : q.ask<int64_t>(purge_failed_atom::value, filter);
    if (!r)
      return c.fail(r.error());
    return c.answer({{"purged", *r}, {"route", q.route()}}, [&](std::ostream& out) {
      out << "purged " << *r << " failed job" << (*r == 1 ? "" : "s") << '\n';
    });
  });
}


namespace {

result<ok_atom> ask_pause(queue_link& q, const std::string& what, const std::string& name,
                          bool pause, std::optional<std::chrono::milliseconds> duration) {
  if (what == "queue") {
    if (!pause)
      return q.ask<ok_atom>(resume_queue_atom::value);
    return duration ? q.ask<ok_atom>(pause_queue_atom::value, *duration)
                    : q.ask<ok_atom>(pause_queue_atom::value);
  }
  bool group = what == "group";
  if (!pause)
    return group ? q.ask<ok_atom>(resume_group_atom::value, name)
                 : q.ask<ok_atom>(resume_type_atom::value, name);
  if (duration)
    return group ? q.ask<ok_atom>(pause_group_atom::value, name, *duration)
                 : q.ask<ok_atom>(pause_type_atom::value, name, *duration);
  return group ? q.ask<ok_atom>(pause_group_atom::value, name)
               : q.ask<ok_atom>(pause_type_atom::value, name);
}

// "group \"a\"" or "the queue".
std::string target_text(const std::string& what, const std::string& name) {
  return what == "queue" ? std::string{"the queue"} : what + " " + printable(name);
}

}  // namespace

int pause(context& c, const std::string& what, const std::string& name, bool pause,
          std::optional<std::chrono::milliseconds> duration) {
  return with_owner(c, pause ? "pausing" : "resuming", controls_why, [&](queue_link& q) {
    auto r = ask_pause(q, what, name, pause, duration);
    if (!r)
      return c.fail(r.error(), "pause");
    json doc{{what, what == "queue" ? json(true) : json(name)}, {"paused", pause},
             {"route", q.route()}};
    if (pause && duration)
      doc["for_ms"] = duration->count();
    return c.answer(doc, [&](std::ostream& out) {
      out << (pause ? "paused " : "resumed ") << target_text(what, name)
          << (pause && duration ? " for " + format_span(duration->count()) : "") << '\n';
    });
  });
}

int set_settings(context& c, const std::string& what, const std::string& name,
                 const settings_change& change) {
  return with_owner(c, "changing settings", controls_why, [&](queue_link& q) {
    auto r = what == "group"  ? q.ask<ok_atom>(set_group_atom::value, name, change)
             : what == "type" ? q.ask<ok_atom>(set_type_atom::value, name, change)
                              : q.ask<ok_atom>(set_worker_atom::value, name, change);
    if (!r)
      return c.fail(r.error(), "set");
    json doc = json_views::of(change);
    doc[what] = name;
    doc["route"] = q.route();
    return c.answer(doc, [&](std::ostream& out) {
      out << "set " << target_text(what, name) << ": " << to_string(change) << '\n';
    });
  });
}

int reset_settings(context& c, const std::string& what, const std::string& name) {
  return with_owner(c, "resetting settings", controls_why, [&](queue_link& q) {
    auto r = what == "group"  ? q.ask<ok_atom>(reset_group_atom::value, name)
             : what == "type" ? q.ask<ok_atom>(reset_type_atom::value, name)
                              : q.ask<ok_atom>(reset_worker_atom::value, name);
    if (!r)
      return c.fail(r.error(), "set");
    return c.answer({{what, name}, {"reset", true}, {"route", q.route()}}, [&](std::ostream& out) {
      out << "reset " << target_text(what, name) << " to its configured settings\n";
    });
  });
}

int resume_everything(context& c) {
  return with_owner(c, "resuming", controls_why, [&](queue_link& q) {
    auto n = q.ask<int64_t>(resume_all_atom::value);
    if (!n)
      return c.fail(n.error());
    return c.answer({{"resumed", *n}, {"route", q.route()}}, [&](std::ostream& out) {
      out << "resumed " << *n << " pause" << (*n == 1 ? "" : "s") << '\n';
    });
  });
}

int reset_breaker(context& c, const std::string& type) {
  return with_owner(c, "resetting a breaker", "breakers live in its memory", [&](queue_link& q) {
    auto r = q.ask<ok_atom>(reset_breaker_atom::value, type);
    if (!r)
      return c.fail(r.error(), "breaker reset");
    return c.answer({{"type", type}, {"breaker", "closed"}, {"route", q.route()}},
                    [&](std::ostream& out) {
                      out << "closed the breaker of type " << printable(type) << '\n';
                    });
  });
}

int recurring_delete(context& c, const std::string& id) {
  return with_link(c, [&](queue_link& q) {
    auto r = q.ask<ok_atom>(delete_recurring_atom::value, id);
    if (!r)
      return c.fail(r.error());
    return c.answer({{"deleted", id}, {"route", q.route()}},
                    [&](std::ostream& out) { out << "deleted recurring job " << printable(id) << '\n'; });
  });
}

int recurring_pause(context& c, const std::string& id, bool pause,
                    std::optional<std::chrono::milliseconds> duration) {
  return with_link(c, [&](queue_link& q) {
    auto r = !pause   ? q.ask<ok_atom>(resume_recurring_atom::value, id)
             : duration ? q.ask<ok_atom>(pause_recurring_atom::value, id, *duration)
                        : q.ask<ok_atom>(pause_recurring_atom::value, id);
    if (!r)
      return c.fail(r.error());
    json doc{{"recurring", id}, {"paused", pause}, {"route", q.route()}};
    if (pause && duration)
      doc["for_ms"] = duration->count();
    return c.answer(doc, [&](std::ostream& out) {
      out << (pause ? "paused" : "resumed") << " recurring job " << printable(id);
      if (pause)
        out << (duration ? " for " + format_span(duration->count()) : std::string{" until resumed"});
      out << '\n';
    });
  });
}

}  // namespace ergon::ctl
