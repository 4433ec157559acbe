#include "recover.hpp"

#include <algorithm>
#include <random>
#include <unordered_map>
#include <unordered_set>

#include "ergon/storage/op/add_finished_counts.hpp"
#include "ergon/storage/op/hold_attempts.hpp"
#include "ergon/storage/op/load_unfinished.hpp"
#include "ergon/storage/op/meta.hpp"
#include "ergon/storage/op/reconcile_recurring.hpp"
#include "ergon/storage/op/recover_running.hpp"
#include "ergon/storage/op/save_controls.hpp"
#include "ergon/storage/op/save_worker.hpp"
#include "ergon/storage/records.hpp"
#include "ergon/storage/times.hpp"

namespace ergon::runtime {

namespace {

// Keeps the attempts of remote holders running until `until` at least;
// the others are left in `unfinished` for recovery. Returns those kept.
result<std::vector<storage::running_job>> hold_remote(storage::db& d,
                                                      std::vector<storage::running_job>& running,
                                                      int64_t until) {
  std::vector<storage::running_job> held;
  std::vector<storage::running_job> own;
  for (auto& r : running)
    (r.holder.empty() ? own : held).push_back(std::move(r));
  running = std::move(own);
  storage::hold_attempts_args args;
  args.until = until;
  for (auto& r : held)
    args.attempts.push_back({r.key.row, r.token});
  auto expiries = storage::hold_attempts(d, args);
  if (!expiries)
    return expiries.error();
  // Each one is held: nothing else writes before recovery commits.
  for (size_t i = 0; i < held.size(); ++i)
    held[i].expires_at = (*expiries)[i].value_or(held[i].expires_at);
  return held;
}

}  // namespace

result<recovered> recover(storage::db& d, recovery_mode mode, int64_t remote_grace_ms,
                          int64_t now_ms) {
  auto meta = storage::read_meta(d);
  if (!meta)
    return meta.error();
  auto unfinished = storage::load_unfinished(d, meta->unfinished_low_mark);
  if (!unfinished)
    return unfinished.error();
  auto controls = storage::read_controls(d);
  if (!controls)
    return controls.error();
  auto next_worker = storage::next_worker_id(d);
  if (!next_worker)
    return next_worker.error();
  if (auto st = d.begin_write(); !st)
    return st;
  recovered out;
  out.controls = std::move(*controls);
  out.first_worker_id = *next_worker;
  if (remote_grace_ms > 0) {
    out.held.until = storage::add_ms(now_ms, remote_grace_ms);
    auto held = hold_remote(d, unfinished->running, out.held.until);
    if (!held) {
      d.rollback();
      return held.error();
    }
    out.held.attempts = std::move(*held);
  }
  storage::recover_running_args args;
  args.timing = mode == recovery_mode::retry_immediately ? storage::retry_timing::immediate
                                                         : storage::retry_timing::backoff;
  std::mt19937_64 rng{std::random_device{}()};
  std::uniform_real_distribution<double> u{0.0, 1.0};
  for (auto& r : unfinished->running) {
    args.rows.push_back(r.key.row);
    args.randoms.push_back(u(rng));
  }
  auto ended = storage::recover_running(d, args, now_ms);
  status st = ended ? storage::raise_low_mark(d, unfinished->low_mark) : ended.error();
  if (st)
    st = storage::end_registrations(d, now_ms);
  // After recover_running: an instance it ended has its successor by now.
  result<storage::reconcile_recurring_result> reconciled = storage::reconcile_recurring_result{};
  if (st) {
    reconciled = storage::reconcile_recurring(d, now_ms);
    st = reconciled.error();
  }
  if (st) {
    // In the same transaction, so finished_counts never disagrees with the jobs.
    storage::count_delta moved;
    for (auto& end : *ended) {
      moved.move(end.type, end.group, job_status::running, end.status);
      for (auto& e : end.dependents.ended)
        moved.move(e.key.type, e.key.group, job_status::waiting, e.status);
      for (auto& c : end.dependents.cancelled)
        moved.move(c.key.type, c.key.group, job_status::pending, job_status::cancelled);
    }
    st = storage::add_finished_counts(d, moved);
  }
  if (st)
    st = d.commit();
  if (!st) {
    d.rollback();
    return st;
  }
  auto& pending = out.pending;
  pending = std::move(unfinished->pending);
  for (auto& end : *ended) {
    if (end.status == job_status::pending)
      pending.push_back(std::move(end.key));
    if (end.next_instance)
      pending.push_back(std::move(*end.next_instance));
    for (auto& k : end.dependents.released)
      pending.push_back(std::move(k));
    // Instances made when a waiting instance (a parent) ended with them.
    for (auto& k : end.dependents.next_instances)
      pending.push_back(std::move(k));
  }
  for (auto& k : reconciled->created)
    pending.push_back(std::move(k));
  // Children whose parent recovery failed were cancelled after they were
  // read as pending.
  std::unordered_set<int64_t> gone;
  for (auto& end : *ended)
    for (auto& c : end.dependents.cancelled)
      gone.insert(c.key.row);
  if (!gone.empty())
    pending.erase(std::remove_if(pending.begin(), pending.end(),
                                 [&](const storage::job_key& k) { return gone.count(k.row); }),
                  pending.end());
  // reconcile_recurring ran last: its keys replace any read before it,
  // including those of attempts recover_running just put back to pending.
  if (!reconciled->moved.empty()) {
    std::unordered_map<int64_t, storage::job_key*> by_row;
    for (auto& moved : reconciled->moved)
      by_row.emplace(moved.after.row, &moved.after);
    for (auto& k : pending)
      if (auto m = by_row.find(k.row); m != by_row.end())
        k = *m->second;
  }
  return out;
}

}  // namespace ergon::runtime
