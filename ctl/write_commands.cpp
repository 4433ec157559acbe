// The commands that write: through the owner when a program owns the file,
// else on the file opened here (queue_link).
#include <ostream>

#include "commands.hpp"
#include "text.hpp"

namespace ergon::ctl {
namespace {

using json_views::json;

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

}  // namespace

int retry(context& c, const std::optional<std::string>& id,
          const std::optional<job_filter>& filter) {
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

int cancel(context& c, const std::string& id) {
  auto parsed = parse_id(id);
  if (!parsed)
    return c.fail(parsed.error());
  return with_link(c, [&](queue_link& q) {
    auto r = q.ask<ok_atom>(cancel_job_atom::value, *parsed);
    if (!r)
      return c.fail(r.error());
    return c.answer({{"cancelled", id}, {"route", q.route()}}, [&](std::ostream& out) {
      out << "cancelled " << id << " (a running job stops when its code sees the request)\n";
    });
  });
}

int purge(context& c, const job_filter& filter,
          std::optional<std::chrono::milliseconds> older_than) {
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

int pause(context& c, const std::string& what, const std::string& name, bool pause,
          std::optional<std::chrono::milliseconds> duration) {
  // Pauses live in the owner's memory: without an owner there is nothing
  // to pause, and a queue opened here would forget it on exit.
  auto sys = c.system();
  if (!sys)
    return c.fail(sys.error());
  auto owner = queue_link::owner(**sys, c.reach());
  if (!owner)
    return c.fail(owner.error());
  if (!*owner) {
    auto found = find_owner(c.reach().db);
    if (found && *found)
      return c.fail({error::busy, c.reach().db + " is owned by pid " + std::to_string((*found)->pid)
                                    + " on host " + (*found)->host
                                    + ", which takes no connections: pausing needs the owner "
                                      "to listen (options::listen, or ergon-server)"});
    return c.fail({error::closed, "no program owns " + c.reach().db
                                    + ": pauses live in the owning program's memory, so there "
                                      "is nothing to pause or resume"});
  }
  auto apply = [&](queue_link& q) {
    result<ok_atom> r = ok_atom::value;
    bool group = what == "group";
    if (!pause)
      r = group ? q.ask<ok_atom>(resume_group_atom::value, name)
                : q.ask<ok_atom>(resume_type_atom::value, name);
    else if (duration)
      r = group ? q.ask<ok_atom>(pause_group_atom::value, name, *duration)
                : q.ask<ok_atom>(pause_type_atom::value, name, *duration);
    else
      r = group ? q.ask<ok_atom>(pause_group_atom::value, name)
                : q.ask<ok_atom>(pause_type_atom::value, name);
    if (!r)
      return c.fail(r.error());
    json doc{{what, name}, {"paused", pause}, {"route", q.route()}};
    if (pause && duration)
      doc["for_ms"] = duration->count();
    return c.answer(doc, [&](std::ostream& out) {
      out << (pause ? "paused " : "resumed ") << what << " " << name
          << (pause && duration ? " for " + format_span(duration->count()) : "") << '\n';
    });
  };
  return apply(**owner);
}

int recurring_delete(context& c, const std::string& id) {
  return with_link(c, [&](queue_link& q) {
    auto r = q.ask<ok_atom>(delete_recurring_atom::value, id);
    if (!r)
      return c.fail(r.error());
    return c.answer({{"deleted", id}, {"route", q.route()}},
                    [&](std::ostream& out) { out << "deleted recurring job " << id << '\n'; });
  });
}

}  // namespace ergon::ctl
