// options: how a queue opens its database and runs. Every field has a
// default; set only what you need.
#pragma once

#include <chrono>
#include <map>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "ergon/clock.hpp"
#include "ergon/credentials.hpp"
#include "ergon/scheduling.hpp"

namespace ergon {

/// What happens at open to jobs a dead process left running.
enum class recovery_mode : uint8_t {
  /// The interrupted attempt counts as failed; the job waits its backoff delay.
  retry_with_backoff,
  /// The interrupted attempt counts as failed; the job is due at once.
  retry_immediately,
};

/// The largest message a connection takes by default (16 MiB), and the
/// range listen_options::max_message_bytes and set_max_message_size take.
/// Reading a message can take more memory than its size: up to about 32
/// times, for a message of many tiny elements.
inline constexpr size_t default_message_limit = size_t{16} << 20;
inline constexpr size_t min_message_limit = size_t{64} << 10;
inline constexpr size_t max_message_limit = size_t{1} << 30;

/// Where a queue takes connections from workers and clients in other
/// processes (see docs/distribution.md). They reach it with `connect`.
struct listen_options {
  /// The address to bind. The default takes only this machine's
  /// connections; another address takes the network's, so set a secret or
  /// TLS first.
  std::string address = "127.0.0.1";
  /// The TCP port; 0 picks a free one, which `listening_port` tells.
  uint16_t port = 0;
  /// What nodes must prove before they reach the queue (credentials.hpp).
  /// Its secret grants role::operator_: everything.
  credentials creds;
  /// Secrets that grant less (docs/distribution.md, "Roles"): a peer that
  /// proves worker_secret may only register workers and run their jobs;
  /// one that proves client_secret may submit and read. The handshake finds
  /// which of the queue's secrets a peer proved; the HTTP endpoint takes
  /// them as bearer secrets the same way. Empty: none. Each needs
  /// creds.secret, keeps its rules (32+ random bytes), and differs from the
  /// others. A request beyond the role is answered `forbidden`, naming the
  /// role it needs, and counted (metrics_snapshot::forbidden_messages).
  std::string worker_secret;
  std::string client_secret;
  /// With mutual TLS: the role of a peer by its certificate's subject
  /// common name. Set: a certificate whose name is not listed is refused at
  /// the handshake. With a secret too, a peer gets the lesser of the two
  /// roles. Empty: every certificate the CAs signed grants operator.
  std::map<std::string, role> certificate_roles;
  /// Mutual TLS for every connection. Only for a queue that owns its actor
  /// system (`queue::open(path, opts)`); with your own system, call
  /// use_tls on its config instead. Empty `certificate`: no TLS.
  tls_options tls;
  /// How long a silent connection lasts before it counts as dropped (see
  /// set_peer_timeout in queue_actor.hpp); 0: until the operating system
  /// closes it. Only for a queue that owns its actor system; with your own,
  /// call set_peer_timeout on its config.
  std::chrono::milliseconds peer_timeout{0};
  /// The largest message a connection may send, in bytes, checked before
  /// anything is allocated for it (see set_max_message_size in
  /// queue_actor.hpp). A larger one closes that connection. Bigger values
  /// let a batch or a page of jobs with large payloads through, at the
  /// cost of memory per connection. Only for a queue that owns its actor
  /// system; with your own, call set_max_message_size on its config.
  size_t max_message_bytes = default_message_limit;
  /// How long a connection may take from its accept to a passed handshake
  /// (TLS's and ergon's) before it is closed and counted in
  /// refused_connections: a silent or slow peer holds its slot no longer.
  /// Shorter frees slots sooner under a flood; too short refuses clients
  /// on a slow network. 100 ms to 10 min.
  std::chrono::milliseconds handshake_timeout{10'000};
};

/// The queue's HTTP endpoint (docs/operations.md): Prometheus metrics at
/// /metrics, /healthz, a JSON API under /api/ and the web dashboard at /.
/// Requests that change jobs (retry, cancel, pause, resume) need the
/// queue's shared secret, when it has one (listen.creds, publish), as
/// "Authorization: Bearer <secret>"; without one they are taken only from
/// this machine (a loopback address). An endpoint bound to a loopback
/// address answers only requests whose Host is a loopback name, so a web
/// page can't reach it by rebinding its own name.
///
/// Each request must arrive whole within 5 s of its connection, with
/// headers up to 16 KiB and a body up to 4 KiB (else 408, 431 or 413,
/// before the rest is read); each connection carries one request.
struct http_options {
  /// The address to bind; the default takes only this machine's requests.
  std::string address = "127.0.0.1";
  /// The TCP port; 0 picks a free one, which `http_port` tells.
  uint16_t port = 0;
  /// Set: the endpoint serves HTTPS only (TLS 1.2 or later, forward-secret
  /// ciphers), with `certificate` and `key` (and `passphrase`,
  /// `key_access`). With `ca_file` too, clients must present a certificate
  /// that chains to it (and carries `peer_name`, if set).
  std::optional<tls_options> tls;
  /// Binding an address other than loopback without `tls` is refused, since
  /// the secret and job data would cross the network in clear text; true
  /// allows it (a trusted network, or TLS ended in front of ergon).
  bool insecure_plaintext = false;
};

/// How long finished jobs are kept. A background sweeper deletes jobs (with
/// their attempts) that finished longer ago than their status's retention,
/// and drops results past job::result_ttl_ms. It works in steps of `batch`
/// rows, each one request in the writer's next transaction, so other
/// writes never wait long behind it. The space deleted rows leave is
/// reused by new ones, so under a steady load the file stops growing.
struct retention_options {
  /// Per final status; empty: kept until deleted (purge_failed). Each > 0.
  /// With all four set, the record of a worker that left longer ago than
  /// the longest goes too; a kept job whose attempt ran on it then names
  /// its id alone (worker_identity). Otherwise workers' records are kept.
  std::optional<std::chrono::milliseconds> succeeded;
  std::optional<std::chrono::milliseconds> failed;
  std::optional<std::chrono::milliseconds> cancelled;
  std::optional<std::chrono::milliseconds> expired;
  /// How often the sweeper looks (on the queue's clock), > 0. A pass
  /// deletes everything due, step by step, then waits this long.
  std::chrono::milliseconds interval{60'000};
  /// Rows per step, 1 to 100,000.
  size_t batch = 500;
  /// Most of the writer's time the sweeper takes, over 0 and at most 1:
  /// after a step that took t (real time), it waits t * (1 / share - 1)
  /// before the next, so a large backlog is deleted over a while rather
  /// than at the cost of other writes. 1: no waits.
  double writer_share = 0.05;
};

/// How bulk actions (queue::cancel_jobs, retry_failed and purge_failed
/// with a filter, delete_jobs) use the writer. Each works in steps of
/// `batch` jobs, one writer request each, and pauses between steps as the
/// retention sweeper does, so other writes go on while it runs.
struct bulk_options {
  /// Jobs per step, 1 to 100,000.
  size_t batch = 500;
  /// Most of the writer's time one bulk action takes, over 0 and at most
  /// 1: after a step that took t (real time), it waits t * (1 / share - 1).
  /// 1: no waits.
  double writer_share = 0.25;
};

/// CAF's scheduler, for an actor system the queue owns.
struct scheduler_options {
  /// Scheduler threads, at least 1.
  size_t threads = 2;

  /// CAF's "work-stealing.moderate-poll-attempts". CAF's default (500)
  /// keeps idle scheduler threads waking every 50 us for 25 ms after each
  /// message, which on small machines preempts the writer and its callers;
  /// 0 lets them sleep right after a short spin, at the price of a wake-up
  /// on the next message.
  size_t moderate_poll_attempts = 0;

  /// CAF's "work-stealing.aggressive-poll-attempts": how long an idle
  /// scheduler thread spins (no sleeping) before it sleeps. Longer catches
  /// the next message without a wake-up, at the cost of CPU after each burst.
  size_t aggressive_poll_attempts = 100;
};

/// Options for `queue::open`.
struct options {
  // -- behaviour ------------------------------------------------------------------

  /// Where time comes from. Empty: the system clock. Tests pass a
  /// manual_clock so retries and timeouts fire when the test advances it.
  /// A clock that reads before 1970 at open is invalid_argument ("clock").
  std::shared_ptr<ergon::clock> clock;

  /// Largest payload (and checkpoint) accepted, in bytes. Larger ones fail
  /// with invalid_argument naming "payload".
  size_t max_payload_bytes = 1 << 20;

  /// What to do at open with jobs that were running when a process died.
  recovery_mode recovery = recovery_mode::retry_with_backoff;

  /// How long attempts that workers in other processes were running when
  /// the owner died (or closed) wait for those workers to join again, from
  /// open. They stay running, their expiry held until then at least; a
  /// worker that comes back in time lists them and goes on under the same
  /// attempt tokens, so their code runs once. Those still waiting at the
  /// end fail as `worker lost` and retry at once. Workers learn it when
  /// they register, and keep running their jobs that long when their
  /// connection drops. 0: such attempts are recovered at open as the
  /// owner's own are (`recovery`), and workers stop their jobs as soon as
  /// the connection drops. Between 0 and 1 h (invalid_argument
  /// "remote_grace").
  std::chrono::milliseconds remote_grace{30'000};

  /// How long a job's idempotency key (job::idempotency_key) is kept from
  /// its first submission: a submit under the key within it returns the
  /// first job's id. Each keyed job keeps a small row (its key, id and a
  /// 64-bit fingerprint) this long; the retention sweeper deletes it after.
  /// Between 1 s and 30 days (invalid_argument "idempotency_window").
  std::chrono::milliseconds idempotency_window{86'400'000};

  /// PostgreSQL: how often the owner looks in the inbox (pg.hpp) without
  /// being told. A transaction's commit tells it at once (NOTIFY); this
  /// sweep covers a notification that was lost with its listening
  /// session. Each sweep also deletes entries taken in longer ago than
  /// `idempotency_window`. Between 10 ms and 1 h (invalid_argument
  /// "inbox_sweep"). Unused on SQLite.
  std::chrono::milliseconds inbox_sweep{1'000};

  /// How many times one job may snooze (job_context::snooze); a snooze past
  /// that counts as a failure, so a job can't snooze forever. Between 0
  /// (every snooze is a failure) and 1,000,000 (invalid_argument
  /// "max_snoozes").
  int64_t max_snoozes = 1'000;

  /// Retry policies per job type: a job of a type named here whose backoff
  /// is left at backoff_policy's defaults takes this one when it is
  /// submitted (in a batch, through the PostgreSQL inbox, or as a recurring
  /// job's template). A job that sets its own backoff keeps it. Each is
  /// checked as a job's backoff is (invalid_argument naming
  /// "retry_policies.<type>.backoff.<field>").
  std::map<std::string, backoff_policy> retry_policies;

  /// synchronous=FULL: an acknowledged job survives power loss, not just a
  /// process crash. Costs an fsync per commit (single submits get ~10x slower).
  bool synchronous_full = false;

  /// Fold the WAL into the database file within the commit that takes it
  /// past 1,000 pages, as SQLite does by default, instead of on a thread and
  /// connection of the queue's own. The own thread spares that commit the
  /// copy and its two fsyncs (bulk submits run about a quarter faster);
  /// within commits, under synchronous=NORMAL, the commit that checkpoints
  /// is durable once acknowledged. Either way a crash loses nothing
  /// acknowledged, and a power loss under NORMAL may take the commits since
  /// the last checkpoint. On the own thread, past 8,000 pages the writer
  /// folds the WAL in itself, so it stays bounded under a steady load.
  bool checkpoint_in_commits = false;

  /// How long a write waits for a lock held by another program before it
  /// fails with `busy`. >= 0; SQLite counts in int ms, so anything beyond
  /// about 24 days waits that long.
  std::chrono::milliseconds busy_timeout{5'000};

  /// Upper bound on the database file, in bytes; 0 means no limit. Writes
  /// beyond it fail with `storage_full` and change nothing. It bounds the
  /// main file only: the -wal file beside it holds commits not yet copied
  /// back, and SQLite copies them every ~1,000 pages (~4 MiB). With a limit
  /// set, each such checkpoint also cuts the -wal file back to 4 MiB, so the
  /// disk holds about max_database_bytes + 4 MiB + the largest single batch
  /// (up to writer_batch_limit jobs) + a small -shm file.
  int64_t max_database_bytes = 0;

  /// PostgreSQL: how long the owner's lease lasts without a renewal (every
  /// third of it). An owner that is stopped or cut off from the server is
  /// replaced this long after its last renewal; one whose session ended (a
  /// crash) is replaced at once. Between 1 s and 1 h. SQLite ignores it.
  std::chrono::milliseconds lease_time{10'000};

  /// PostgreSQL: how long the owner tries to learn whether a COMMIT whose
  /// answer was lost with the connection committed (reconnecting with
  /// backoff) before the queue closes itself with `unreachable` ("whether
  /// the transaction committed is unknown"). Between 1 s and 1 h. SQLite
  /// ignores it.
  std::chrono::milliseconds commit_outcome_wait{30'000};

  /// Permissions of a database file the open creates; its -wal and -shm
  /// files take the same. The default, 0600, lets only this user read
  /// payloads, results and checkpoints; 0640 lets the group read too. Must
  /// include 0600 and nothing beyond 0666 (invalid_argument "file_mode").
  /// An existing file keeps its own; the umask does not widen or narrow it.
  unsigned file_mode = 0600;

  /// When finished jobs are deleted. By default every job is kept; results
  /// with a job::result_ttl_ms are dropped once it passes either way.
  retention_options retention;

  /// How bulk cancels, retries and deletes share the writer.
  bulk_options bulk;

  /// Priority aging, group weights, caps and rate limits (scheduling.hpp).
  /// Off by default: plain priority order, groups share equally.
  scheduling_options scheduling;

  /// Set: the queue listens for workers and clients of other processes,
  /// from the moment it opens until it closes, as `publish` would. Errors
  /// at open: invalid_argument ("listen.address" empty; "secret" not 32
  /// random bytes in hex or base64; "certificate", "key" or "ca_file" for
  /// listen.tls files as use_tls names them; "listen.peer_timeout" out of
  /// set_peer_timeout's range; "listen.max_message_bytes" or
  /// "listen.handshake_timeout" out of range; "listen.tls",
  /// "listen.peer_timeout" or "listen.max_message_bytes" set with your own
  /// actor system; "sys" without caf::io::middleman), io_error (the port
  /// can't be bound). The queue does not open then.
  std::optional<listen_options> listen;

  /// Set: the queue serves HTTP (http_options) from the moment it opens
  /// until it closes. Errors at open: invalid_argument ("http.address"
  /// empty; "http.tls" when a non-loopback address has neither tls nor
  /// insecure_plaintext; "certificate", "key" or "ca_file" for tls's files,
  /// as use_tls names them), io_error (the address or port can't be
  /// bound). The queue does not open then.
  std::optional<http_options> http;

  // -- performance ------------------------------------------------------------------

  /// Most write requests the writer folds into one transaction. Larger
  /// batches raise throughput under load; each waits for the whole batch.
  size_t writer_batch_limit = 1'024;

  /// How long the writer spins on an empty mailbox before it sleeps, 0 to 1 s. Spinning
  /// saves the wake-up on the next request, at the cost of up to this much
  /// CPU after each burst of writes. On 2 cores, longer spins measured worse
  /// under load: the spinner holds a core the rest of the pipeline needs.
  /// For latency at a low rate, a spin longer than the gap between submits
  /// keeps the writer awake: on the 2-core VM of docs/performance.md, 3 ms
  /// took a lone submit's start from about 0.44 to 0.25 ms, for about 2 ms
  /// of CPU per job (the wake-up of a sleeping writer was ~220 us there).
  std::chrono::microseconds writer_idle_spin{50};

  /// Read-only connections for job_info and listing calls. Each holds its
  /// own page cache.
  size_t read_connections = 4;

  /// SQLite page cache per connection, in KiB. More memory, fewer reads.
  int64_t cache_kib = 64 * 1024;

  /// The actor system's scheduler, when the queue owns its system. When you
  /// pass your own system, set these keys in its config instead
  /// (docs/performance.md).
  scheduler_options scheduler;
};

/// Checks `opts` as queue::open does before it opens anything: no file is
/// opened and no port bound (TLS files are read by use_tls, not here).
/// Error: invalid_argument naming the first bad field as queue::open
/// would ("retention.interval", "scheduling.groups[a].weight", ...).
status validate(const options& opts);

}  // namespace ergon
