#include "ergon/storage/op/pause_recurring.hpp"

#include "ergon/storage/times.hpp"
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

// The next slot now that `r` stands as it does: after a timed pause's end,
// or after now.
std::optional<next_slot> slot_now(const rows::recurring_row& r, const schedule& s,
                                  int64_t now_ms) {
  auto n = s.next_after(now_ms);
  return rows::after_pause(r, s, n ? std::optional<next_slot>{next_slot{*n, *n}} : std::nullopt);
}

}  // namespace

result<pause_recurring_result> pause_recurring(db& d, const pause_recurring_args& args,
                                               int64_t now_ms) {
  if (args.pause && args.for_ms && *args.for_ms <= 0)
    return status{error::invalid_argument,
                  "must be positive, got " + std::to_string(*args.for_ms) + " ms", "duration"};
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
  auto since = r.paused_since;
  auto until = r.paused_until;
  if (args.pause) {
    r.paused_since = was_paused ? r.paused_since : std::optional<int64_t>{now_ms};
    r.paused_until.reset();
    if (args.for_ms && add_ms(now_ms, *args.for_ms) != never_ms)
      r.paused_until = add_ms(now_ms, *args.for_ms);
    out.until = r.paused_until;
  } else {
    // Kept as a pause that ended now: an instance running through it still
    // skips the slots it covered when it ends.
    r.paused_until = now_ms;
  }
  if (r.paused_since == since && r.paused_until == until)
    return out;  // paused again with the same end
  if (auto st = store_pause(d, r.id, r.paused_since, r.paused_until); !st)
    return st;
  out.changed = true;
  auto instance = rows::unfinished_instance(d, r.id);
  if (!instance)
    return instance.error();
  // Running, or a retry of one that ran: it finishes, and the next one
  // follows the pause.
  if (*instance && ((*instance)->status != job_status::pending || (*instance)->started))
    return out;
  std::optional<next_slot> at;
  if (!r.held() && !r.exhausted()) {
    auto sched = rows::schedule_of(r);
    if (!sched)
      return out;  // its zone is missing; the next open makes the instance
    at = slot_now(r, *sched, now_ms);
  }
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
