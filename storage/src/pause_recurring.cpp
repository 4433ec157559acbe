#include "ergon/storage/op/pause_recurring.hpp"

#include "job_rows.hpp"
#include "recurring_rows.hpp"

namespace ergon::storage {
namespace {

constexpr const char* set_pause =
  "UPDATE recurring_jobs SET paused_since = ?2, paused_until = ?3 WHERE id = ?1";

status store_pause(db& d, const std::string& id, std::optional<int64_t> since,
                   std::optional<int64_t> until) {
  auto s = d.prepare(set_pause);
  if (!s)
    return s.error();
  (*s)->bind_text(1, id);
  (*s)->bind(2, since);
  (*s)->bind(3, until);
  return d.run(**s);
}

// Where the instance goes now that `r` stands as it does: nothing while
// it is held or has run its limit, else its next slot (after a timed
// pause's end, or after now).
std::optional<next_slot> slot_now(const rows::recurring_row& r, const schedule& s,
                                  int64_t now_ms) {
  if (r.held() || r.exhausted())
    return std::nullopt;
  auto n = s.next_after(now_ms);
  return rows::after_pause(r, s, n ? std::optional<next_slot>{next_slot{*n, *n}} : std::nullopt);
}

}  // namespace

result<pause_recurring_result> pause_recurring(db& d, const pause_recurring_args& args,
                                               int64_t now_ms) {
  if (args.pause && args.until && *args.until <= now_ms)
    return status{error::invalid_argument, "a pause must end after now", "until"};
  auto found = rows::find_recurring(d, args.id);
  if (!found)
    return found.error();
  if (!*found)
    return status{error::not_found, "no recurring job with id '" + args.id + "'"};
  auto r = std::move(**found);
  pause_recurring_result out;
  bool was_paused = r.paused_at(now_ms);
  if (!args.pause && !was_paused)
    return out;
  if (args.pause) {
    r.paused_since = was_paused ? r.paused_since : std::optional<int64_t>{now_ms};
    r.paused_until = args.until;
  } else {
    r.paused_since.reset();
    r.paused_until.reset();
  }
  if (auto st = store_pause(d, r.id, r.paused_since, r.paused_until); !st)
    return st;
  out.changed = true;
  auto instance = rows::unfinished_instance(d, r.id);
  if (!instance)
    return instance.error();
  if (*instance && (*instance)->status != job_status::pending)
    return out;  // running: the next one follows the pause
  auto sched = rows::schedule_of(r);
  if (!sched)
    return out;  // its zone is missing; the next open makes the instance
  auto at = slot_now(r, *sched, now_ms);
  if (!*instance) {
    if (!at)
      return out;
    auto k = rows::create_instance(d, r, *at, now_ms);
    if (!k)
      return k.error();
    out.created = std::move(*k);
    return out;
  }
  auto& inst = (*instance)->key;
  if (!at) {
    auto cancelled = rows::cancel_instance(d, inst, "its recurring job was paused", now_ms);
    if (!cancelled)
      return cancelled.error();
    out.cancelled = std::move(*cancelled);
    return out;
  }
  if (at->scheduled_at == (*instance)->scheduled_at)
    return out;
  auto moved = rows::move_instance(d, r, inst, at->scheduled_at, now_ms);
  if (!moved)
    return moved.error();
  out.moved = std::move(*moved);
  return out;
}

}  // namespace ergon::storage
