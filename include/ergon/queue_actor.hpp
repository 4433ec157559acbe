// queue_actor: the queue as a typed actor, for programs that run on CAF.
//
//   auto q = ergon::spawn_queue(sys, "jobs.db");     // result<queue_actor>
//   self->request(*q, caf::infinite, ergon::submit_atom::value, job)
//     .then([](const ergon::job_id& id) { ... },
//           [](const caf::error& e) { auto st = ergon::to_status(e); ... });
//
// Every request is answered once its effect is committed, like the blocking
// calls of queue.hpp, but no thread waits: an event-based actor keeps
// running. Errors arrive as caf::error in ergon's category (wire.hpp); their
// codes and messages are those the blocking call returns.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "ergon/credentials.hpp"
#include "ergon/options.hpp"
#include "ergon/worker.hpp"
#include "ergon/wire.hpp"

namespace ergon {

using submit_atom = caf::atom_constant<caf::atom("ergsubmit")>;
using job_info_atom = caf::atom_constant<caf::atom("ergjobinfo")>;
using jobs_by_name_atom = caf::atom_constant<caf::atom("ergbyname")>;
using counts_atom = caf::atom_constant<caf::atom("ergcounts")>;
using update_atom = caf::atom_constant<caf::atom("ergupdate")>;
using cancel_atom = caf::atom_constant<caf::atom("ergcancel")>;
/// queue::cancel (cancel_atom is cancel_pending).
using cancel_job_atom = caf::atom_constant<caf::atom("ergcanjob")>;
using wait_atom = caf::atom_constant<caf::atom("ergwait")>;
using list_jobs_atom = caf::atom_constant<caf::atom("erglist")>;
using list_failed_atom = caf::atom_constant<caf::atom("ergdead")>;
using retry_failed_atom = caf::atom_constant<caf::atom("ergretry")>;
using purge_failed_atom = caf::atom_constant<caf::atom("ergpurge")>;
using cancel_jobs_atom = caf::atom_constant<caf::atom("ergcanceln")>;
using replay_atom = caf::atom_constant<caf::atom("ergreplay")>;
using delete_jobs_atom = caf::atom_constant<caf::atom("ergdelete")>;
using metrics_atom = caf::atom_constant<caf::atom("ergmetrics")>;
using group_weight_atom = caf::atom_constant<caf::atom("erggweight")>;
using reset_weights_atom = caf::atom_constant<caf::atom("ergresetw")>;
using pause_group_atom = caf::atom_constant<caf::atom("ergpauseg")>;
using resume_group_atom = caf::atom_constant<caf::atom("ergresumeg")>;
using pause_type_atom = caf::atom_constant<caf::atom("ergpauset")>;
using resume_type_atom = caf::atom_constant<caf::atom("ergresumet")>;
using resume_all_atom = caf::atom_constant<caf::atom("ergresumea")>;
using reset_breaker_atom = caf::atom_constant<caf::atom("ergbreaker")>;
using pause_queue_atom = caf::atom_constant<caf::atom("ergpauseq")>;
using resume_queue_atom = caf::atom_constant<caf::atom("ergresumeq")>;
using set_group_atom = caf::atom_constant<caf::atom("ergsetg")>;
using set_type_atom = caf::atom_constant<caf::atom("ergsett")>;
using reset_group_atom = caf::atom_constant<caf::atom("ergresetg")>;
using reset_type_atom = caf::atom_constant<caf::atom("ergresett")>;
using set_worker_atom = caf::atom_constant<caf::atom("ergsetw")>;
using reset_worker_atom = caf::atom_constant<caf::atom("ergresetwk")>;
using controls_atom = caf::atom_constant<caf::atom("ergctrls")>;
using workers_atom = caf::atom_constant<caf::atom("ergworkers")>;
using add_recurring_atom = caf::atom_constant<caf::atom("ergaddrec")>;
using update_recurring_atom = caf::atom_constant<caf::atom("ergupdrec")>;
using upsert_recurring_atom = caf::atom_constant<caf::atom("ergupsrec")>;
using delete_recurring_atom = caf::atom_constant<caf::atom("ergdelrec")>;
using recurring_info_atom = caf::atom_constant<caf::atom("ergrecinfo")>;
using list_recurring_atom = caf::atom_constant<caf::atom("erglistrec")>;
using pause_recurring_atom = caf::atom_constant<caf::atom("ergpauser")>;
using resume_recurring_atom = caf::atom_constant<caf::atom("ergresumer")>;
using subscribe_atom = caf::atom_constant<caf::atom("ergsub")>;
using unsubscribe_atom = caf::atom_constant<caf::atom("ergunsub")>;
using close_atom = caf::atom_constant<caf::atom("ergclose")>;
/// A worker on another node asks where to register (start_worker sends it;
/// the answer is the queue's dispatcher).
using join_atom = caf::atom_constant<caf::atom("ergjoin")>;
/// The answer to a request that returns nothing but success.
using ok_atom = caf::atom_constant<caf::atom("ergok")>;

/// The queue's messages. Each mirrors the queue.hpp call of the same name and
/// fails with the same errors. A subscribed actor receives every `event` from
/// then on, until it unsubscribes or terminates. `close` stops the queue like
/// queue::close (30 s for running jobs), answers, and the actor exits.
using queue_actor = caf::typed_actor<
  caf::replies_to<submit_atom, job>::with<job_id>,
  caf::replies_to<submit_atom, std::vector<job>>::with<std::vector<job_id>>,
  caf::replies_to<job_info_atom, job_id>::with<job_info>,
  caf::replies_to<jobs_by_name_atom, std::string>::with<std::vector<job_info>>,
  caf::replies_to<jobs_by_name_atom, std::string, uint64_t>::with<std::vector<job_info>>,
  caf::replies_to<list_jobs_atom, job_filter, page_request>::with<job_page>,
  caf::replies_to<list_failed_atom, job_filter, page_request>::with<job_page>,
  caf::replies_to<retry_failed_atom, job_id>::with<ok_atom>,
  caf::replies_to<retry_failed_atom, job_filter>::with<retry_summary>,
  caf::replies_to<purge_failed_atom, job_filter>::with<int64_t>,
  caf::replies_to<purge_failed_atom, std::chrono::milliseconds>::with<int64_t>,
  caf::replies_to<cancel_jobs_atom, job_filter>::with<cancel_summary>,
  caf::replies_to<replay_atom, job_id>::with<ok_atom>,
  caf::replies_to<delete_jobs_atom, job_filter>::with<int64_t>,
  caf::replies_to<counts_atom>::with<status_counts>,
  caf::replies_to<update_atom, job_id, job_update>::with<ok_atom>,
  caf::replies_to<cancel_atom, job_id>::with<ok_atom>,
  caf::replies_to<cancel_job_atom, job_id>::with<ok_atom>,
  caf::replies_to<wait_atom, job_id, std::chrono::milliseconds>::with<job_info>,
  caf::replies_to<metrics_atom>::with<metrics_snapshot>,
  caf::replies_to<add_recurring_atom, recurring_job>::with<job_id>,
  caf::replies_to<update_recurring_atom, recurring_job>::with<job_id>,
  caf::replies_to<upsert_recurring_atom, recurring_job>::with<job_id>,
  caf::replies_to<delete_recurring_atom, std::string>::with<ok_atom>,
  caf::replies_to<recurring_info_atom, std::string>::with<recurring_info>,
  caf::replies_to<list_recurring_atom, std::string>::with<std::vector<recurring_info>>,
  caf::replies_to<pause_recurring_atom, std::string>::with<ok_atom>,
  caf::replies_to<pause_recurring_atom, std::string, std::chrono::milliseconds>::with<ok_atom>,
  caf::replies_to<resume_recurring_atom, std::string>::with<ok_atom>,
  caf::replies_to<group_weight_atom, std::string, int32_t>::with<ok_atom>,
  caf::replies_to<reset_weights_atom>::with<ok_atom>,
  caf::replies_to<pause_group_atom, std::string>::with<ok_atom>,
  caf::replies_to<pause_group_atom, std::string, std::chrono::milliseconds>::with<ok_atom>,
  caf::replies_to<resume_group_atom, std::string>::with<ok_atom>,
  caf::replies_to<pause_type_atom, std::string>::with<ok_atom>,
  caf::replies_to<pause_type_atom, std::string, std::chrono::milliseconds>::with<ok_atom>,
  caf::replies_to<resume_type_atom, std::string>::with<ok_atom>,
  caf::replies_to<resume_all_atom>::with<int64_t>,
  caf::replies_to<reset_breaker_atom, std::string>::with<ok_atom>,
  caf::replies_to<pause_queue_atom>::with<ok_atom>,
  caf::replies_to<pause_queue_atom, std::chrono::milliseconds>::with<ok_atom>,
  caf::replies_to<resume_queue_atom>::with<ok_atom>,
  caf::replies_to<set_group_atom, std::string, settings_change>::with<ok_atom>,
  caf::replies_to<set_type_atom, std::string, settings_change>::with<ok_atom>,
  caf::replies_to<reset_group_atom, std::string>::with<ok_atom>,
  caf::replies_to<reset_type_atom, std::string>::with<ok_atom>,
  caf::replies_to<set_worker_atom, std::string, settings_change>::with<ok_atom>,
  caf::replies_to<reset_worker_atom, std::string>::with<ok_atom>,
  caf::replies_to<controls_atom>::with<std::vector<control_info>>,
  caf::replies_to<workers_atom>::with<std::vector<worker_info>>,
  caf::replies_to<subscribe_atom, caf::actor>::with<ok_atom>,
  caf::replies_to<unsubscribe_atom, caf::actor>::with<ok_atom>,
  caf::replies_to<close_atom>::with<ok_atom>,
  caf::replies_to<join_atom>::with<caf::actor>>;

/// Opens the database at `path` as queue::open(sys, path, opts) does, and
/// returns the queue as an actor in `sys`. The actor owns the queue: it
/// closes it when asked to (close_atom) or when it exits, and closes its
/// ports with it. With `opts.listen` it is published at once. Call
/// queue::register_types on `sys`'s config before creating `sys`. Errors: those
/// of queue::open.
result<queue_actor> spawn_queue(caf::actor_system& sys, const std::string& path,
                                options opts = {});

/// Makes `q`, a queue spawned in this process, reachable from other
/// processes at `bind`:`port` (0: a free port) and returns the port. Every
/// connection first passes ergon's handshake (docs/distribution.md): TLS
/// when use_tls was called on `q`'s actor system, then the proof of
/// `creds.secret` if set; CAF reads nothing from a peer before. Without a
/// secret or TLS, every node that can connect reaches every message of
/// queue_actor: keep to loopback (the default) or a trusted network.
/// Refused connections are counted in metrics (failed_handshakes,
/// refused_connections). Needs caf::io::middleman loaded.
/// Errors: invalid_argument (no middleman; `q` is not a queue of this
/// process; a secret that is not 32 random bytes in hex or base64, or other
/// credentials than it was published with before; TLS files that no longer
/// load), io_error (the port can't be bound, naming it), closed (`q` is an
/// invalid handle, or its queue has closed).
result<uint16_t> publish(const queue_actor& q, uint16_t port,
                         const std::string& bind = "127.0.0.1", const credentials& creds = {});

/// The port `q`, a queue spawned in this process, listens on
/// (options::listen, or the first port of publish). Errors:
/// invalid_argument if it does not listen or is not a queue of this
/// process, closed once its queue has closed.
result<uint16_t> listening_port(const queue_actor& q);

/// The port of the HTTP endpoint of `q`, a queue spawned in this process
/// (options::http). Errors: invalid_argument if it has none or is not a
/// queue of this process, closed once its queue has closed.
result<uint16_t> http_port(const queue_actor& q);

/// How long a connection between two nodes may stay silent before each side
/// counts it as dropped, set on `cfg` before its actor system is built: CAF
/// then sends a heartbeat every quarter of it. A dropped connection makes
/// the queue retry that node's running jobs at once ("worker lost"), and
/// the worker reconnect. Without it (0, CAF's default), only a connection
/// the operating system closes counts: a node cut off by a partition is
/// noticed by its jobs' expiry instead. Set the same on every node of a
/// queue: a node that sends no heartbeats is dropped whenever it is idle
/// for that long. Error: invalid_argument ("timeout" negative, or between
/// 0 and 100 ms, or over a day).
status set_peer_timeout(caf::actor_system_config& cfg, std::chrono::milliseconds timeout);

/// The largest message, in bytes, that a connection of the actor system
/// built from `cfg` may send it (default_message_limit if unset). The
/// length each message announces is checked before anything is allocated
/// for it; a connection that announces more is closed (and counted in
/// metrics_snapshot::refused_connections on a queue). Give every node of a
/// queue the same limit, large enough for its biggest batch or page of
/// jobs. Error: invalid_argument ("bytes" outside min_message_limit to
/// max_message_limit).
status set_max_message_size(caf::actor_system_config& cfg, size_t bytes);

/// The queue published at `host`:`port` (by ergon-server or `publish`), as
/// a queue_actor in `sys`: a local actor that forwards each request over
/// one connection. Once the connection counts as dropped, requests in
/// flight and new ones get `unreachable` rather than hang, and the next
/// request after a backoff
/// (100 ms doubling to 5 s) reconnects. A connection the operating system
/// keeps open through a silent partition counts as dropped only after the
/// peer timeout (set_peer_timeout); without one, only when TCP gives up
/// (about 15 minutes on Linux). A queue that closed answers `closed` while
/// it closes, and is `unreachable` after. Each connection runs ergon's
/// handshake first, on a thread of its own with 10 s per step: TLS when
/// use_tls was called on `sys`'s config, then, with `creds.secret`, the
/// proof of the secret, first this side's, then the queue's. Only nodes
/// connected with these credentials reach the actors this connection
/// creates. Needs caf::io::middleman loaded and queue::register_types
/// called on `sys`'s config. Errors: invalid_argument (no middleman; a
/// secret that is not 32 random bytes in hex or base64), unreachable
/// (nothing answers there, the TLS handshake failed, or a handshake step
/// took too long; naming host and port), unauthenticated (the queue
/// refused the secret, requires one, or could not prove it), closed (it is
/// not an ergon queue of this version).
result<queue_actor> connect(caf::actor_system& sys, const std::string& host, uint16_t port,
                            const credentials& creds = {});

/// One server of a queue, for connect_options.
struct queue_address {
  std::string host;
  uint16_t port = 0;
};

/// How connect reaches a queue that any of several servers may own:
/// standby servers (standby.hpp), of which only the owner takes
/// connections on its queue port.
struct connect_options {
  /// The servers, each with a host and a port over 0. A round tries them
  /// in turn, starting with the one that answered last; the first that
  /// answers (the owner) is used. When its connection drops, the next
  /// round starts after it, so a client reaches the next owner after a
  /// takeover.
  std::vector<queue_address> addresses;
  /// The queue's location (a postgresql:// URI, or a SQLite file on this
  /// host): each round first asks it who owns the queue and where that
  /// owner listens (find_owner), and tries those addresses before
  /// `addresses`. A lookup that fails leaves `addresses`. Give this, or
  /// `addresses`, or both.
  std::string owner_of;
  credentials creds;
  /// Per address: one deadline for the TCP connect, TLS and ergon's
  /// handshake together, and another for CAF's connect after it, so a host
  /// that is gone costs at most twice this. 100 ms to 60 s.
  std::chrono::milliseconds dial_timeout{3'000};
  /// Between rounds that reached no server: from retry_min, doubling up to
  /// retry_max. 10 ms <= retry_min <= retry_max <= 60 s.
  std::chrono::milliseconds retry_min{50};
  std::chrono::milliseconds retry_max{500};
};

/// connect(sys, host, port, creds) for a queue that any of
/// `opts.addresses` may serve, with the same guarantees and errors, once
/// per round. Requests in flight when the owner dies get `unreachable`;
/// requests a deposed owner still answers get `busy` (nothing was
/// written); either may be sent again once a round reaches the new owner.
/// Errors: also invalid_argument naming "addresses" (none, and no
/// `owner_of`), "dial_timeout" or "retry_min"/"retry_max". When no server answers: an error no other
/// server would change (unauthenticated, closed, invalid_argument) if one
/// gave it, else unreachable naming each address tried.
result<queue_actor> connect(caf::actor_system& sys, const connect_options& opts);

/// Starts a worker in this process for the queue behind `q`, as
/// queue::start_worker does. `q` is a queue spawned in this process (closing
/// it stops the worker), or one from connect(): then job code runs here and
/// claims, heartbeats and outcomes travel over the connection. A remote
/// worker whose connection drops flags its running attempts cancelled (the
/// queue retries them as "worker lost"), reconnects with backoff and
/// registers again; outcomes its code reports meanwhile are sent then and
/// fenced (`stale_attempt`) if the queue already retried their job. Errors:
/// those of queue::start_worker; `closed` if `q` is neither kind or has
/// closed; `unreachable` if a connected queue can't be reached now.
result<worker> start_worker(const queue_actor& q, worker_options opts);

}  // namespace ergon
