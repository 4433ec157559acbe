// queue_impl: the state behind a queue handle and its requests to the
// queue's actors. bootstrap.cpp builds it; queue.cpp's methods use it.
// Internal to runtime/.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "runtime_access.hpp"
#include "ergon/actors/bulk_action.hpp"
#include "ergon/actors/db_writer.hpp"
#include "ergon/actors/dispatcher.hpp"
#include "ergon/actors/event_bus.hpp"
#include "ergon/actors/inbox_drain.hpp"
#include "ergon/actors/node_gate.hpp"
#include "ergon/actors/retention_sweeper.hpp"
#include "ergon/queue.hpp"
#include "ergon/storage/ownership.hpp"
#include "lease_keeper.hpp"
#include "front_end.hpp"
#include "read_pool.hpp"
#include "worker_impl.hpp"

namespace ergon {

struct queue::impl {
  options opts;
  std::shared_ptr<ergon::clock> clk;
  // Declared before the actors that run in it, so it is destroyed last.
  std::unique_ptr<caf::actor_system_config> own_cfg;
  std::unique_ptr<caf::actor_system> own_sys;
  caf::actor_system* sys = nullptr;
  actors::db_writer_actor writer;
  caf::actor sweeper;  // retention_sweeper.hpp
  std::unique_ptr<actors::inbox_drain> inbox;  // on PostgreSQL
  actors::dispatcher_actor dispatcher;
  caf::actor events;
  std::shared_ptr<actors::subscribers> subs = std::make_shared<actors::subscribers>();
  std::shared_ptr<actors::job_counters> counters;
  // Who waits for which job to finish (the dispatcher tells it), and the
  // actor that answers waits, spawned on first use (job_waits.hpp).
  std::shared_ptr<actors::final_watch> watch = std::make_shared<actors::final_watch>();
  std::mutex waits_mtx;
  caf::actor waits;
  caf::actor waits_calls;  // its reads
  // Which messages reach the actors that face the network; set by publish.
  std::shared_ptr<actors::node_gate> gate = std::make_shared<actors::node_gate>();
  std::shared_ptr<actors::writer_stats> writer_stats = std::make_shared<actors::writer_stats>();
  std::unique_ptr<runtime::read_pool> reads;
  std::mutex workers_mtx;
  std::vector<std::weak_ptr<worker_impl>> workers;
  // Bulk actions under way, told to stop when the queue closes, so a close
  // never waits for one (an HTTP request that runs one holds the close).
  std::mutex bulk_mtx;
  std::vector<caf::actor_addr> bulk_actions;
  // Set with `closed`; shared, so that an action that outlives this impl
  // reads it without keeping the impl (whose last owner must not be a
  // thread of its own actor system).
  std::shared_ptr<std::atomic<bool>> stop_flag = std::make_shared<std::atomic<bool>>(false);
  std::atomic<bool> closed{false};
  // The queue actor over this queue, if one was spawned (spawn_queue, or
  // options::listen): a handle waits for it to go before it lets go.
  caf::actor_addr actor;
  // The ways in from outside, oldest first (front_end.hpp).
  std::mutex fronts_mtx;
  std::vector<std::unique_ptr<runtime::front_end>> fronts;
  // Released last, once every connection of ours is closed.
  /// The owner's hold: a flock on SQLite, a renewed lease on PostgreSQL.
  /// Let go under owner_mtx: a port may be recording itself meanwhile.
  std::mutex owner_mtx;
  std::unique_ptr<storage::ownership> owner;
  std::unique_ptr<runtime::lease_keeper> lease;
  // One close at a time; a second waits for the first.
  std::mutex stop_mtx;
  // Why the queue closed by itself (close_for): another process took it
  // over, or a commit's fate stayed unknown. Once the open is done
  // (`ready`), the closer thread closes it; the destructor joins that thread.
  std::mutex cause_mtx;
  status cause_of_close;
  bool ready = false;
  bool destroying = false;
  std::thread closer;

  // Sends a request to the writer and waits for the committed reply.
  template <class Args, class V>
  V call(Args args) {
    if (closed.load(std::memory_order_acquire))
      return V{closed_status()};
    auto [to, from] = actors::make_reply<V>();
    // Move the only sending end into the message: if the writer drops it,
    // the waiter is woken with `closed` instead of hanging.
    actors::tell(writer, actors::local_call<Args, V>{std::move(args), std::move(to)});
    return explain(from.wait());
  }

  // Asks the dispatcher, which answers from its memory: a `Request` whose
  // reply is V.
  template <class Request, class V>
  V ask_dispatcher() {
    if (closed.load(std::memory_order_acquire))
      return V{closed_status()};
    auto [to, from] = actors::make_reply<V>();
    actors::tell(dispatcher, Request{std::move(to)});
    return explain(from.wait());
  }

  // Asks the dispatcher how far aging has lifted these jobs' priorities and
  // whether any worker can take them. Only pending jobs have a view; the
  // rest keep effective == stored priority.
  status fill_pending_views(std::vector<ergon::job_info*> infos);

  // What a call to the closed queue gets: why it closed by itself (busy
  // naming the new owner after a takeover), else `closed`.
  status closed_status();
  // `st`, unless it is `closed` and the queue closed by itself: then why.
  status explain(status st);
  template <class T>
  result<T> explain(result<T> r) {
    if (r || r.error().code() != error::closed)
      return r;
    return explain(r.error());
  }
  // Ok, or why the queue closed by itself.
  status closing_cause();
  // Closes the queue on a thread of its own because writing can't go on:
  // the writer's fence or the lease keeper found the queue taken over, or
  // a commit's fate stayed unknown (pg_db::fence). Before the open is done,
  // the open fails with `why` instead.
  void close_for(const status& why);
  // Marks the open done; fails with a cause to close that came first.
  status open_done();
  // Tells tools where this queue takes connections (find_owner): in
  // SQLite's lock file, or with PostgreSQL's lease. Ok once closed.
  status record_listener(const std::string& address, uint16_t port, bool secret, bool tls);

  // Runs `read` on a connection of the read pool.
  template <class Read>
  auto read(Read read) -> decltype(read(std::declval<storage::db&>())) {
    if (closed.load(std::memory_order_acquire))
      return closed_status();
    auto conn = reads->borrow();
    if (!conn)
      return conn.error();
    return read(**conn);
  }

  // A job, the jobs with a name, or a page of a listing, with their
  // scheduling view.
  result<ergon::job_info> job_info(const job_id& id);
  result<std::vector<ergon::job_info>> jobs_by_name(const std::string& name, size_t limit);
  result<job_page> list_jobs(const job_filter& filter, const page_request& page);

  // Runs a bulk action over `filter` and waits for its answer: T is
  // cancel_summary, retry_summary or int64_t (deleted), by kind.
  template <class T>
  result<T> bulk(actors::bulk_kind kind, job_filter filter) {
    if (closed.load(std::memory_order_acquire))
      return closed_status();
    if (auto st = actors::check_bulk(kind, filter); !st)
      return st;
    auto action = spawn_bulk(kind, std::move(filter));
    result<T> out = status{error::internal, "the bulk action did not answer"};
    caf::scoped_actor self{*sys};
    self->request(action, caf::infinite, actors::bulk_run_atom::value)
      .receive([&](T& v) { out = std::move(v); }, [&](caf::error& e) { out = to_status(e); });
    return explain(std::move(out));
  }
  // Spawns a bulk action that stop() will stop.
  caf::actor spawn_bulk(actors::bulk_kind kind, job_filter filter);
  // The failed jobs that failed more than `older_than` ago. Error:
  // invalid_argument ("older_than" negative).
  result<job_filter> failed_before(std::chrono::milliseconds older_than);

  // Sends a scheduling change to the dispatcher and waits until it applied it.
  /// Applies `c` in the dispatcher and waits until it holds; the number of
  /// pauses resume_all ended.
  result<int64_t> apply(actors::scheduling_control c);
  result<int64_t> resume_all() {
    return apply({actors::scheduling_control::resume_all, {}, 0, {}, {}, {}});
  }
  status control(actors::scheduling_control c) {
    auto done = apply(std::move(c));
    return done ? status{} : done.error();
  }

  // The scheduling calls of queue.hpp, validated here for every caller.
  status set_group_weight(const std::string& group, int32_t weight);
  status reset_group_weights();
  // Pauses the group or type `name` for `duration`, or until resumed.
  status pause(actors::scheduling_control::op_type op, const std::string& name,
               std::optional<std::chrono::milliseconds> duration);
  // Recurring jobs as stored, their pauses judged by the queue's clock.
  result<ergon::recurring_info> recurring_info(const std::string& id);
  result<std::vector<ergon::recurring_info>> list_recurring(const std::string& prefix);
  // Pauses the recurring job `id` for `duration` (until resumed without
  // one, or with milliseconds::max()), or resumes it.
  status pause_recurring(const std::string& id, bool pause,
                         std::optional<std::chrono::milliseconds> duration);
  // A call that takes only a name (or none): resumes, resets, reset_breaker.
  status named_call(actors::scheduling_control::op_type op, const std::string& name);
  // set_group, set_type and set_worker (change_group, change_type, change_worker).
  status change(actors::scheduling_control::op_type op, const std::string& name,
                const settings_change& c);

  // The run-time controls in force (queue::controls).
  result<std::vector<control_info>> controls();
  // Scheduling metrics plus job counts.
  result<metrics_snapshot> metrics();
  result<std::vector<worker_info>> list_workers();

  // Starts a worker that close() will stop.
  result<worker> start_worker(worker_options worker_opts);

  // Adds a way in. A closed queue stops `f` and answers queue_closed, so a
  // front end that registers while the queue closes never outlives it.
  status attach(std::unique_ptr<runtime::front_end> f);
  // The port of the oldest front end of kind `k`, or why there is none.
  result<uint16_t> port_of(runtime::front_end::kind k);

  // Stops taking connections, then stops the workers, then the actors,
  // then releases the file. Blocks: not from a scheduled actor, except on
  // the way out of one.
  status stop(std::chrono::milliseconds timeout);

  ~impl();
};

}  // namespace ergon
