#include "bootstrap.hpp"

#include <iostream>
#include <optional>

#include <caf/io/middleman.hpp>
#include <caf/actor_cast.hpp>

#include "ergon/storage/op/count_jobs.hpp"
#include "ergon/storage/op/meta.hpp"
#include "ergon/storage/schema.hpp"
#include "ergon/storage/pg_db.hpp"
#include "ergon/storage/pg_lease.hpp"
#include "ergon/storage/sqlite_db.hpp"
#include "http_endpoint.hpp"
#include "recover.hpp"
#include "validate_options.hpp"

namespace ergon::runtime {
namespace {

storage::sqlite_options db_options_from(const options& opts) {
  storage::sqlite_options d;
  d.synchronous_full = opts.synchronous_full;
  d.busy_timeout_ms = opts.busy_timeout.count();
  d.cache_kib = opts.cache_kib;
  d.max_bytes = opts.max_database_bytes;
  d.file_mode = opts.file_mode;
  return d;
}

// Reads finished_counts and the unfinished jobs: the history is not scanned.
status seed_counters(storage::db& d, actors::job_counters& counters) {
  auto rows = storage::count_jobs(d, storage::count_source::table);
  if (!rows)
    return rows.error();
  auto groups = storage::count_unfinished_by_group(d);
  if (!groups)
    return groups.error();
  storage::count_delta initial;
  for (auto& row : *rows)
    initial.add(row.type, row.status, row.count);
  for (auto& row : *groups)
    initial.add_group(row.group, row.status, row.count);
  counters.apply(initial);
  return {};
}

// The migrated write connection of an owned queue, and how its reads connect.
struct owned_storage {
  std::shared_ptr<storage::db> write_db;
  read_pool::opener reads;
  /// PostgreSQL: where the inbox's listening session connects.
  std::optional<storage::pg_options> pg;
};

// SQLite: the owner holds a flock on the file's lock file.
result<owned_storage> own_sqlite(queue_impl& p, const std::string& path, const options& opts) {
  // Ownership first: nothing below may touch a file another queue runs on.
  auto owner = storage::ownership::acquire(path);
  if (!owner)
    return owner.error();
  p.owner = std::move(*owner);
  if (auto st = storage::check_ergon_file(path); !st)
    return st;
  auto db_opts = db_options_from(opts);
  auto opened = storage::sqlite_db::open(path, db_opts);
  if (!opened)
    return opened.error();
  auto& sqlite = **opened;
  std::shared_ptr<storage::db> write_db = std::move(*opened);
  if (auto st = storage::migrate(*write_db); !st)
    return st;
  // Without a checkpointer, SQLite's own autocheckpoint stays: slower, and
  // it loses nothing either.
  if (!opts.checkpoint_in_commits && !storage::names_private_database(path))
    if (auto st = sqlite.checkpoint_apart(db_opts); !st)
      std::cerr << "ergon: " << path << ": checkpoints stay within commits: " << st << '\n';
  return owned_storage{std::move(write_db), read_pool::sqlite_reader(path, db_opts), {}};
}

// PostgreSQL: the owner holds the schema's lease, and its writer is fenced
// with the lease's epoch. A schema ergon made is leased before it is
// migrated, so a newer ergon never migrates under a running owner; a new
// schema is migrated first, which creates the lease's table (two openers
// migrate one after the other).
result<owned_storage> own_postgres(queue_impl& p, const std::string& uri, const options& opts) {
  auto pg_opts = storage::parse_pg_uri(uri);
  if (!pg_opts)
    return pg_opts.error();
  pg_opts->commit_outcome_wait = opts.commit_outcome_wait;
  // An owner cut off from the server must learn it within its lease.
  pg_opts->dead_peer_after = opts.lease_time / 3;
  auto opened = storage::pg_db::open(*pg_opts);
  if (!opened)
    return opened.error();
  auto& writer = **opened;
  std::shared_ptr<storage::db> write_db = std::move(*opened);
  std::unique_ptr<storage::pg_lease> lease;
  auto take_lease = [&]() -> status {
    auto lease_conn = storage::pg_db::open(*pg_opts);
    if (!lease_conn)
      return lease_conn.error();
    auto held = storage::pg_lease::acquire(std::move(*lease_conn), opts.lease_time);
    if (!held)
      return held.error();
    lease = std::move(*held);
    return {};
  };
  auto version = storage::schema_version(*write_db);
  if (!version)
    return version.error();
  if (*version > 0)
    if (auto st = take_lease(); !st)
      return st;
  if (auto st = storage::migrate(*write_db); !st)
    return st;
  if (!lease)
    if (auto st = take_lease(); !st)
      return st;
  auto epoch = lease->epoch();
  // On a lapse the writer may wait on a silent server: the close must not.
  auto interrupt_writer = [w = std::weak_ptr<storage::db>(write_db)] {
    if (auto d = w.lock())
      static_cast<storage::pg_db&>(*d).interrupt();
  };
  p.lease = std::make_unique<lease_keeper>(std::move(lease), opts.lease_time,
                                           [&p](const status& why) { p.close_for(why); },
                                           interrupt_writer);
  writer.fence(epoch, [&p](const status& why) { p.close_for(why); });
  return owned_storage{std::move(write_db), read_pool::postgres_reader(*pg_opts), *pg_opts};
}

// `path` and `opts` are valid.
result<std::unique_ptr<queue_impl>> start(caf::actor_system& sys, const std::string& path,
                                           options opts) {
  auto p = std::make_unique<queue_impl>();
  p->clk = opts.clock ? opts.clock : default_clock();
  p->sys = &sys;
  auto owned = storage::names_postgres(path) ? own_postgres(*p, path, opts)
                                             : own_sqlite(*p, path, opts);
  if (!owned)
    return owned.error();
  auto write_db = std::move(owned->write_db);
  auto found = recover(*write_db, opts.recovery, opts.remote_grace.count(), p->clk->now_ms());
  if (!found)
    return found.error();
  auto meta = storage::read_meta(*write_db);
  if (!meta)
    return meta.error();
  p->counters = std::make_shared<actors::job_counters>();
  if (auto st = seed_counters(*write_db, *p->counters); !st)
    return st;
  actors::db_writer_config wcfg;
  wcfg.db = std::move(write_db);
  wcfg.clock = p->clk;
  wcfg.counters = p->counters;
  wcfg.batch_limit = opts.writer_batch_limit;
  wcfg.idle_spin = opts.writer_idle_spin;
  wcfg.max_payload_bytes = opts.max_payload_bytes;
  wcfg.idempotency_window_ms = opts.idempotency_window.count();
  wcfg.max_snoozes = opts.max_snoozes;
  wcfg.retry_policies = opts.retry_policies;
  wcfg.id_tag = meta->id_tag;
  wcfg.gate = p->gate;
  wcfg.stats = p->writer_stats;
  auto feeds = wcfg.feeds;
  p->writer = actors::spawn_db_writer(sys, std::move(wcfg));
  p->events = actors::spawn_event_bus(sys, p->subs);
  p->sweeper = actors::spawn_retention_sweeper(
    sys, {opts.retention, p->clk, p->writer, p->events, p->subs});
  actors::dispatcher_config dcfg;
  dcfg.clock = p->clk;
  dcfg.writer = p->writer;
  dcfg.feeds = feeds;
  dcfg.events = p->events;
  dcfg.id_tag = meta->id_tag;
  dcfg.subs = p->subs;
  dcfg.pending = std::move(found->pending);
  dcfg.held = std::move(found->held);
  dcfg.controls = std::move(found->controls);
  dcfg.first_worker_id = found->first_worker_id;
  dcfg.remote_grace_ms = opts.remote_grace.count();
  dcfg.scheduling = opts.scheduling;
  dcfg.gate = p->gate;
  dcfg.watch = p->watch;
  p->dispatcher = actors::spawn_dispatcher(sys, std::move(dcfg));
  // Sent from this thread before open returns, so it is queued ahead of every
  // request a caller can make: no commit feed is missed.
  actors::tell(p->writer, actors::listen_to{caf::actor_cast<caf::actor>(p->dispatcher)});
  // After listen_to: the jobs of its first drain reach the dispatcher.
  if (owned->pg) {
    actors::inbox_drain_config icfg;
    icfg.clock = p->clk;
    icfg.writer = p->writer;
    icfg.pg = *owned->pg;
    icfg.sweep_every = opts.inbox_sweep;
    icfg.events = p->events;
    icfg.subs = p->subs;
    p->inbox = std::make_unique<actors::inbox_drain>(sys, std::move(icfg));
  }
  p->reads = std::make_unique<read_pool>(std::move(owned->reads), opts.read_connections);
  p->opts = std::move(opts);
  if (p->opts.http) {
    if (auto served = runtime::serve_http(*p, *p->opts.http); !served) {
      p->stop(std::chrono::seconds(30));
      return served;
    }
  }
  if (auto why = p->open_done(); !why) {
    p->stop(std::chrono::seconds(30));
    return why;
  }
  return p;
}

}  // namespace

status validate_in(caf::actor_system& sys, const std::string& path, const options& opts) {
  if (auto st = validate_path(path); !st)
    return st;
  if (auto st = runtime::validate(opts); !st)
    return st;
  if (opts.listen && opts.listen->peer_timeout.count() != 0)
    return status{error::invalid_argument,
                  "the peer timeout of a queue in your actor system is set on its config: call "
                  "set_peer_timeout on it, and leave listen.peer_timeout 0",
                  "listen.peer_timeout"};
  if (opts.listen && !opts.listen->tls.certificate.empty())
    return status{error::invalid_argument,
                  "TLS for a queue in your actor system is set on its config: call use_tls "
                  "on it, and leave listen.tls empty",
                  "listen.tls"};
  if (opts.listen && opts.listen->max_message_bytes != default_message_limit)
    return status{error::invalid_argument,
                  "the message limit of a queue in your actor system is set on its config: "
                  "call set_max_message_size on it, and leave listen.max_message_bytes as it is",
                  "listen.max_message_bytes"};
  if (opts.listen && !sys.has_middleman())
    return status{error::invalid_argument,
                  "a queue that listens needs the network layer: load caf::io::middleman in "
                  "the actor system's config",
                  "sys"};
  return {};
}

result<std::unique_ptr<queue_impl>> bootstrap(caf::actor_system& sys, const std::string& path,
                                               options opts) {
  if (auto st = validate_in(sys, path, opts); !st)
    return st;
  return start(sys, path, std::move(opts));
}

result<std::unique_ptr<queue_impl>> bootstrap(const std::string& path, options opts) {
  // Before the actor system is built from them.
  if (auto st = runtime::validate(opts); !st)
    return st;
  if (auto st = validate_path(path); !st)
    return st;
  auto cfg = std::make_unique<caf::actor_system_config>();
  cfg->set("scheduler.max-threads", opts.scheduler.threads);
  // See scheduler_options::moderate_poll_attempts (measured: 14k context switches
  // per 20k single submits with CAF's default, 1.3k without).
  cfg->set("work-stealing.moderate-poll-attempts", opts.scheduler.moderate_poll_attempts);
  cfg->set("work-stealing.aggressive-poll-attempts", opts.scheduler.aggressive_poll_attempts);
  queue::register_types(*cfg);
  if (opts.listen) {
    cfg->load<caf::io::middleman>();
    if (auto st = set_peer_timeout(*cfg, opts.listen->peer_timeout); !st)
      return st;
    if (auto st = set_max_message_size(*cfg, opts.listen->max_message_bytes); !st)
      return st;
    if (!opts.listen->tls.certificate.empty())
      if (auto st = use_tls(*cfg, opts.listen->tls); !st)
        return st;
  }
  auto sys = std::make_unique<caf::actor_system>(*cfg);
  auto p = start(*sys, path, std::move(opts));
  if (!p)
    return p;
  (*p)->own_cfg = std::move(cfg);
  (*p)->own_sys = std::move(sys);
  return p;
}

}  // namespace ergon::runtime
