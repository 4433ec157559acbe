#include "ergon/storage/pg_lease.hpp"

#include <unistd.h>

#include "ergon/storage/ownership.hpp"
#include "ergon/storage/schema.hpp"

namespace ergon::storage {
namespace {

// The holder's session lives if its backend does. Another role may not see
// a backend's start time (NULL): the pid alone then decides.
constexpr const char* take_over =
  "INSERT INTO lease AS l (one, epoch, host, pid, backend_pid, backend_start, expires_at) "
  "SELECT true, 1, ?1, ?2, pg_backend_pid(), a.backend_start, "
  "clock_timestamp() + ?3 * interval '1 millisecond' "
  "FROM pg_stat_activity a WHERE a.pid = pg_backend_pid() "
  "ON CONFLICT (one) DO UPDATE SET epoch = l.epoch + 1, host = excluded.host, "
  "pid = excluded.pid, backend_pid = excluded.backend_pid, "
  "backend_start = excluded.backend_start, expires_at = excluded.expires_at, "
  "writer_pid = NULL, writer_start = NULL "
  "WHERE l.expires_at < clock_timestamp() OR NOT EXISTS (SELECT 1 FROM pg_stat_activity s "
  "WHERE s.pid = l.backend_pid AND (s.backend_start IS NULL OR s.backend_start = l.backend_start)) "
  "RETURNING epoch";

// Also names the session again: the keeper's connection may have been
// reset, and a dead session's pid would let anyone take over.
constexpr const char* extend =
  "UPDATE lease SET expires_at = clock_timestamp() + ?2 * interval '1 millisecond', "
  "backend_pid = pg_backend_pid(), "
  "backend_start = (SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()) "
  "WHERE epoch = ?1";

constexpr const char* give_up = "UPDATE lease SET expires_at = '-infinity' WHERE epoch = ?1";
constexpr const char* forget_listeners = "DELETE FROM listener WHERE epoch <> ?1";
constexpr const char* drop_listeners = "DELETE FROM listener WHERE epoch = ?1";
constexpr const char* add_listener =
  "INSERT INTO listener (epoch, address, port, needs_secret, needs_tls) "
  "VALUES (?1, ?2, ?3, ?4 <> 0, ?5 <> 0)";
constexpr const char* lease_as_seen =
  "SELECT l.epoch, l.host, l.pid, CASE WHEN l.expires_at < clock_timestamp() THEN -1 ELSE "
  "CAST(floor(extract(epoch FROM l.expires_at - clock_timestamp()) * 1000) AS bigint) END, "
  "CASE WHEN EXISTS (SELECT 1 FROM pg_stat_activity s WHERE s.pid = l.backend_pid "
  "AND (s.backend_start IS NULL OR s.backend_start = l.backend_start)) THEN 1 ELSE 0 END "
  "FROM lease l";
constexpr const char* listeners_of =
  "SELECT address, port, CASE WHEN needs_secret THEN 1 ELSE 0 END, "
  "CASE WHEN needs_tls THEN 1 ELSE 0 END "
  "FROM listener WHERE epoch = ?1";

// A takeover locks the row FOR UPDATE first: the owner's write transactions
// hold it FOR KEY SHARE (pg_db's fence), which renewals don't wait for but
// this does. A holder stopped (SIGSTOP) or cut off within a write
// transaction keeps that lock until PostgreSQL ends its session, so a
// takeover waits a little, and then, once the lease has passed, ends the
// holder's sessions (by pid and start time: a pid may be reused), which
// rolls their transactions back, and tries again.
constexpr const char* begin_takeover =
  "BEGIN; SET LOCAL lock_timeout = '500ms'; SELECT epoch FROM lease FOR UPDATE";
constexpr const char* end_stale_sessions =
  "SELECT pg_terminate_backend(a.pid) FROM lease l JOIN pg_stat_activity a "
  "ON (a.pid = l.backend_pid AND a.backend_start IS NOT DISTINCT FROM l.backend_start) "
  "OR (a.pid = l.writer_pid AND a.backend_start IS NOT DISTINCT FROM l.writer_start) "
  "WHERE l.expires_at < clock_timestamp()";

status held_by_another(pg_db& d) {
  auto lease = pg_lease::read(d);
  if (!lease)
    return lease.error();
  if (!*lease)
    return {error::busy, d.location() + ": the queue's lease is taken"};
  auto& v = **lease;
  return {error::busy, d.location() + " is owned by pid " + std::to_string(v.pid) + " on "
                         + v.host + " (lease epoch " + std::to_string(v.epoch) + ", ending in "
                         + std::to_string(v.ms_left) + " ms)"};
}

}  // namespace

result<std::unique_ptr<pg_lease>> pg_lease::acquire(std::unique_ptr<pg_db> conn,
                                                    std::chrono::milliseconds lease_time) {
  for (int attempt = 0;; ++attempt) {
    if (auto st = conn->exec(begin_takeover); !st) {
      conn->rollback();
      if (st.code() != error::busy)
        return st;
      if (attempt > 0)
        return held_by_another(*conn);
      auto end = conn->prepare(end_stale_sessions);
      if (!end)
        return end.error();
      if (auto ended = conn->run(**end); !ended)
        return ended;
      continue;
    }
    auto sent = std::chrono::steady_clock::now();
    auto s = conn->prepare(take_over);
    if (!s) {
      conn->rollback();
      return s.error();
    }
    auto& q = **s;
    q.bind_text(1, host_name());
    q.bind(2, static_cast<int64_t>(::getpid()));
    q.bind(3, static_cast<int64_t>(lease_time.count()));
    if (q.step()) {
      auto epoch = q.column_int(0);
      q.reset();
      // The last owner's listeners went with its lease.
      auto forget = conn->prepare(forget_listeners);
      if (!forget) {
        conn->rollback();
        return forget.error();
      }
      (*forget)->bind(1, epoch);
      if (auto st = conn->run(**forget); !st) {
        conn->rollback();
        return st;
      }
      if (auto st = conn->commit(); !st)
        return st;
      return std::unique_ptr<pg_lease>{new pg_lease(std::move(conn), lease_time, epoch, sent)};
    }
    auto st = q.step_status();
    conn->rollback();
    if (st || (st.code() == error::busy && attempt > 0))
      return held_by_another(*conn);
    if (st.code() != error::busy)
      return st;
    auto end = conn->prepare(end_stale_sessions);
    if (!end)
      return end.error();
    if (auto ended = conn->run(**end); !ended)
      return ended;
  }
}

status pg_lease::renew() {
  auto s = conn_->prepare(extend);
  if (!s)
    return s.error();
  (*s)->bind(1, epoch_);
  (*s)->bind(2, static_cast<int64_t>(lease_time_.count()));
  if (auto st = conn_->run(**s); !st)
    return st;
  if (conn_->changes() == 1)
    return {};
  taken_over_ = true;
  auto owner = held_by_another(*conn_);
  return {owner.code(), "another process took the queue over: " + owner.message()};
}

status pg_lease::record_listener(const std::string& address, uint16_t port, bool secret,
                                 bool tls) {
  auto s = conn_->prepare(add_listener);
  if (!s)
    return s.error();
  (*s)->bind(1, epoch_);
  (*s)->bind_text(2, address);
  (*s)->bind(3, static_cast<int64_t>(port));
  (*s)->bind(4, static_cast<int64_t>(secret));
  (*s)->bind(5, static_cast<int64_t>(tls));
  return conn_->run(**s);
}

result<std::optional<ownership::record>> pg_lease::find(pg_db& d) {
  auto lease = read(d);
  if (!lease)
    return lease.error();
  // A holder whose lease has passed, or whose session is gone, owns nothing.
  if (!*lease || (*lease)->takeable())
    return std::optional<ownership::record>{};
  ownership::record owner;
  owner.host = (*lease)->host;
  owner.pid = (*lease)->pid;
  auto epoch = (*lease)->epoch;
  auto l = d.prepare(listeners_of);
  if (!l)
    return l.error();
  (*l)->bind(1, epoch);
  while ((*l)->step())
    owner.listeners.push_back({(*l)->column_text(0),
                               static_cast<uint16_t>((*l)->column_int(1)),
                               (*l)->column_int(2) != 0, (*l)->column_int(3) != 0});
  if (!(*l)->step_status())
    return (*l)->step_status();
  return std::optional<ownership::record>{std::move(owner)};
}

result<std::optional<pg_lease::view>> pg_lease::read(pg_db& d) {
  auto version = schema_version(d);
  if (!version)
    return version.error();
  if (*version == 0)
    return std::optional<view>{};
  auto s = d.prepare(lease_as_seen);
  if (!s)
    return s.error();
  auto& q = **s;
  if (!q.step()) {
    if (!q.step_status())
      return q.step_status();
    return std::optional<view>{};
  }
  view v;
  v.epoch = q.column_int(0);
  v.host = q.column_text(1);
  v.pid = q.column_int(2);
  v.ms_left = q.column_int(3);
  v.session_alive = q.column_int(4) != 0;
  q.reset();
  return std::optional<view>{std::move(v)};
}

pg_lease::~pg_lease() { release(); }

void pg_lease::release() noexcept {
  if (done_)
    return;
  done_ = true;
  for (auto sql : {drop_listeners, give_up})
    if (auto s = conn_->prepare(sql)) {
      (*s)->bind(1, epoch_);
      (void)conn_->run(**s);
    }
}

}  // namespace ergon::storage
