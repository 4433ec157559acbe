#include "ergon/queue.hpp"

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/exit_reason.hpp>
#include <caf/send.hpp>

#include <atomic>
#include <mutex>
#include <stdexcept>

#include "ergon/actors/db_writer.hpp"
#include "ergon/actors/dispatcher.hpp"
#include "ergon/actors/event_bus.hpp"
#include "ergon/actors/fair_share.hpp"
#include "ergon/storage/ownership.hpp"
#include "ergon/storage/schema.hpp"
#include "ergon/storage/times.hpp"
#include "moved_from.hpp"
#include "read_pool.hpp"
#include "recover.hpp"
#include "validate_options.hpp"
#include "worker_impl.hpp"

namespace ergon {
// -- queue ---------------------------------------------------------------------------------

struct queue::impl {
  options opts;
  std::shared_ptr<ergon::clock> clk;
  // Declared before the actors that run in it, so it is destroyed last.
  std::unique_ptr<caf::actor_system_config> own_cfg;
  std::unique_ptr<caf::actor_system> own_sys;
  caf::actor_system* sys = nullptr;
  caf::actor writer;
  actors::dispatcher_actor dispatcher;
  caf::actor events;
  std::shared_ptr<actors::subscribers> subs = std::make_shared<actors::subscribers>();
  std::shared_ptr<actors::job_counters> counters;
  std::unique_ptr<runtime::read_pool> reads;
  std::mutex workers_mtx;
  std::vector<std::weak_ptr<worker::impl>> workers;
  std::atomic<bool> closed{false};
  // Released last, once every connection of ours is closed.
  std::unique_ptr<storage::ownership> owner;

  // Sends a request to the writer and waits for the committed reply.
  template <class Args, class V>
  V call(Args args) {
    if (closed.load(std::memory_order_acquire))
      return V{status{error::closed, "the queue is closed"}};
    auto [to, from] = actors::make_reply<V>();
    // Move the only sending end into the message: if the writer drops it,
    // the waiter is woken with `closed` instead of hanging.
    caf::anon_send(writer, actors::local_call<Args, V>{std::move(args), std::move(to)});
    return from.wait();
  }

  // Asks the dispatcher how far aging has lifted these jobs' priorities and
  // whether any worker can take them. Only pending jobs have a view; the
  // rest keep effective == stored priority.
  status fill_pending_views(std::vector<ergon::job_info*> infos) {
    std::vector<ergon::job_info*> pending;
    actors::pending_view_request req;
    for (auto* i : infos)
      if (i->status == job_status::pending) {
        pending.push_back(i);
        req.jobs.push_back(
          {i->type, i->group.value_or(""), i->priority, i->weight, i->ready_since_ms});
      }
    if (pending.empty() || closed.load(std::memory_order_acquire))
      return {};
    auto [to, from] = actors::make_reply<result<std::vector<actors::pending_view>>>();
    req.reply = std::move(to);
    caf::anon_send(dispatcher, std::move(req));
    auto views = from.wait();
    if (!views)
      return views.error();
    for (size_t k = 0; k < pending.size() && k < views->size(); ++k) {
      pending[k]->effective_priority = (*views)[k].effective_priority;
      pending[k]->too_heavy = (*views)[k].too_heavy;
    }
    return {};
  }

  status stop(std::chrono::milliseconds timeout) {
    if (closed.exchange(true))
      return {};
    auto deadline = storage::steady_deadline(timeout);
    caf::anon_send(dispatcher, actors::drain_atom::value);
    std::vector<std::shared_ptr<worker::impl>> running;
    {
      std::lock_guard<std::mutex> guard{workers_mtx};
      for (auto& w : workers)
        if (auto p = w.lock())
          running.push_back(std::move(p));
      workers.clear();
    }
    status result;
    for (auto& w : running) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
      auto st = w->stop(std::max(left, std::chrono::milliseconds{0}));
      if (!st && result)
        result = st;
    }
    auto [to, from] = actors::make_reply<status>();
    caf::anon_send(writer, actors::close_call{{}, std::move(to)});
    auto closed_writer = from.wait();
    if (result && !closed_writer)
      result = closed_writer;
    caf::anon_send_exit(dispatcher, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(events, caf::exit_reason::user_shutdown);
    reads->clear();
    owner.reset();
    return result;
  }

  ~impl() {
    if (writer)
      stop(std::chrono::seconds(30));
  }
};

namespace {

storage::db_options db_options_from(const options& opts) {
  storage::db_options d;
  d.synchronous_full = opts.synchronous_full;
  d.busy_timeout_ms = opts.busy_timeout.count();
  d.cache_kib = opts.cache_kib;
  d.max_bytes = opts.max_database_bytes;
  return d;
}

status seed_counters(storage::db& d, actors::job_counters& counters) {
  auto rows = storage::count_jobs(d);
  if (!rows)
    return rows.error();
  actors::count_delta initial;
  for (auto& row : *rows)
    initial.add(row.type, row.status, row.count);
  counters.apply(initial);
  return {};
}

}  // namespace

result<queue> queue::open(const std::string& path, options opts) {
  // Before the actor system is built from them.
  if (auto st = runtime::validate(opts); !st)
    return st;
  auto cfg = std::make_unique<caf::actor_system_config>();
  cfg->set("scheduler.max-threads", opts.scheduler_threads);
  // See options::caf_moderate_poll_attempts (measured: 14k context switches
  // per 20k single submits with CAF's default, 1.3k without).
  cfg->set("work-stealing.moderate-poll-attempts", opts.caf_moderate_poll_attempts);
  cfg->set("work-stealing.aggressive-poll-attempts", opts.caf_aggressive_poll_attempts);
  register_types(*cfg);
  auto sys = std::make_unique<caf::actor_system>(*cfg);
  auto q = open(*sys, path, std::move(opts));
  if (!q)
    return q;
  q->impl_->own_cfg = std::move(cfg);
  q->impl_->own_sys = std::move(sys);
  return q;
}

result<queue> queue::open(caf::actor_system& sys, const std::string& path,
                          options opts) {
  if (auto st = runtime::validate_path(path); !st)
    return st;
  if (auto st = runtime::validate(opts); !st)
    return st;
  auto p = std::make_unique<impl>();
  p->clk = opts.clock ? opts.clock : default_clock();
  p->sys = &sys;
  // Ownership first: nothing below may touch a file another queue runs on.
  auto owner = storage::ownership::acquire(path);
  if (!owner)
    return owner.error();
  p->owner = std::move(*owner);
  if (auto st = storage::check_ergon_file(path); !st)
    return st;
  auto db_opts = db_options_from(opts);
  auto opened = storage::db::open(path, db_opts);
  if (!opened)
    return opened.error();
  std::shared_ptr<storage::db> write_db = std::move(*opened);
  if (auto st = storage::migrate(*write_db); !st)
    return st;
  auto pending = runtime::recover(*write_db, opts.recovery, p->clk->now_ms());
  if (!pending)
    return pending.error();
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
  wcfg.id_tag = meta->id_tag;
  auto feeds = wcfg.feeds;
  p->writer = actors::spawn_db_writer(sys, std::move(wcfg));
  p->events = actors::spawn_event_bus(sys, p->subs);
  actors::dispatcher_config dcfg;
  dcfg.clock = p->clk;
  dcfg.writer = p->writer;
  dcfg.feeds = feeds;
  dcfg.events = p->events;
  dcfg.id_tag = meta->id_tag;
  dcfg.subs = p->subs;
  dcfg.pending = std::move(*pending);
  dcfg.scheduling = opts.scheduling;
  p->dispatcher = actors::spawn_dispatcher(sys, std::move(dcfg));
  // Sent from this thread before open returns, so it is queued ahead of every
  // request a caller can make: no commit feed is missed.
  caf::anon_send(p->writer, actors::listen_to{caf::actor_cast<caf::actor>(p->dispatcher)});
  p->reads = std::make_unique<runtime::read_pool>(path, db_opts, opts.read_connections);
  p->opts = std::move(opts);
  return queue{std::move(p)};
}

void queue::register_types(caf::actor_system_config& cfg) {
  actors::register_protocol(cfg);
}

queue::queue(std::unique_ptr<impl> p) noexcept : impl_(std::move(p)) {}
queue::queue(queue&&) noexcept = default;
queue& queue::operator=(queue&&) noexcept = default;
queue::~queue() = default;

result<job_id> queue::submit(job j) {
  std::vector<job> one;
  one.push_back(std::move(j));
  auto ids = submit_batch(std::move(one));
  if (!ids)
    return ids.error();
  return ids->front();
}

result<std::vector<job_id>> queue::submit_batch(std::vector<job> jobs) {
  if (!impl_)
    return runtime::moved_from("queue");
  return impl_->call<actors::submit_args, result<std::vector<job_id>>>(
    actors::submit_args{std::move(jobs)});
}

result<ergon::job_info> queue::job_info(const job_id& id) const {
  if (!impl_)
    return runtime::moved_from("queue");
  auto conn = impl_->reads->borrow();
  if (!conn)
    return conn.error();
  auto info = storage::read_job(**conn, id);
  if (info)
    if (auto st = impl_->fill_pending_views({&*info}); !st)
      return st;
  return info;
}

result<std::vector<ergon::job_info>> queue::jobs_by_name(const std::string& name) const {
  if (!impl_)
    return runtime::moved_from("queue");
  auto conn = impl_->reads->borrow();
  if (!conn)
    return conn.error();
  auto infos = storage::read_jobs_by_name(**conn, name);
  if (infos) {
    std::vector<ergon::job_info*> all;
    for (auto& i : *infos)
      all.push_back(&i);
    if (auto st = impl_->fill_pending_views(std::move(all)); !st)
      return st;
  }
  return infos;
}

status_counts queue::counts() const {
  if (!impl_)
    return {};
  return impl_->counters->totals();
}

status queue::update_pending(const job_id& id, const job_update& changes) {
  if (!impl_)
    return runtime::moved_from("queue");
  return impl_->call<storage::update_pending_args, status>(
    storage::update_pending_args{id, changes, 0});
}

status queue::cancel_pending(const job_id& id) {
  if (!impl_)
    return runtime::moved_from("queue");
  return impl_->call<storage::cancel_pending_args, status>(
    storage::cancel_pending_args{id});
}

result<worker> queue::start_worker(worker_options opts) {
  if (!impl_)
    return runtime::moved_from("queue");
  if (auto st = runtime::validate(opts); !st)
    return st;
  if (impl_->closed.load(std::memory_order_acquire))
    return status{error::closed, "the queue is closed"};
  auto w = worker::impl::spawn(*impl_->sys, std::move(opts), impl_->clk,
                               caf::actor_cast<caf::actor>(impl_->dispatcher));
  {
    std::lock_guard<std::mutex> guard{impl_->workers_mtx};
    impl_->workers.push_back(w);
  }
  return worker{std::move(w)};
}

subscription queue::subscribe(std::function<void(const event&)> f) {
  if (!impl_)
    return subscription{};
  auto subs = impl_->subs;
  auto handle = subs->add(std::move(f));
  return subscription{[subs, handle] { subs->remove(handle); }};
}

namespace {

status send_control(queue::impl& q, actors::scheduling_control c);

}  // namespace

status queue::set_group_weight(const std::string& group, int32_t weight) {
  if (!impl_)
    return runtime::moved_from("queue");
  if (auto st = runtime::validate_group_weight(group, weight); !st)
    return st;
  return send_control(*impl_, {actors::scheduling_control::set_group_weight, group, weight, {}, {}});
}

status queue::reset_group_weights() {
  if (!impl_)
    return runtime::moved_from("queue");
  return send_control(*impl_, {actors::scheduling_control::reset_group_weights, {}, 0, {}, {}});
}

namespace {

status pause(queue::impl& q, actors::scheduling_control::op_type op, const char* field,
             const std::string& name, std::optional<std::chrono::milliseconds> duration) {
  if (auto st = runtime::validate_pause(field, name, duration); !st)
    return st;
  std::optional<int64_t> until;
  if (duration)
    until = storage::add_ms(q.clk->now_ms(), duration->count());
  return send_control(q, {op, name, 0, until, {}});
}

}  // namespace

status queue::pause_group(const std::string& group,
                          std::optional<std::chrono::milliseconds> duration) {
  if (!impl_)
    return runtime::moved_from("queue");
  return pause(*impl_, actors::scheduling_control::pause_group, "group", group, duration);
}

status queue::resume_group(const std::string& group) {
  if (!impl_)
    return runtime::moved_from("queue");
  if (auto st = runtime::validate_name("group", group); !st)
    return st;
  return send_control(*impl_, {actors::scheduling_control::resume_group, group, 0, {}, {}});
}

status queue::pause_type(const std::string& type,
                         std::optional<std::chrono::milliseconds> duration) {
  if (!impl_)
    return runtime::moved_from("queue");
  return pause(*impl_, actors::scheduling_control::pause_type, "type", type, duration);
}

status queue::resume_type(const std::string& type) {
  if (!impl_)
    return runtime::moved_from("queue");
  if (auto st = runtime::validate_name("type", type); !st)
    return st;
  return send_control(*impl_, {actors::scheduling_control::resume_type, type, 0, {}, {}});
}

std::optional<std::chrono::milliseconds> queue::max_wait(int32_t base_priority) const {
  if (!impl_)
    return std::nullopt;
  auto ms = actors::max_wait_ms(impl_->opts.scheduling.aging, base_priority);
  if (!ms)
    return std::nullopt;
  return std::chrono::milliseconds{*ms};
}

result<metrics_snapshot> queue::metrics() const {
  if (!impl_)
    return runtime::moved_from("queue");
  if (impl_->closed.load(std::memory_order_acquire))
    return status{error::closed, "the queue is closed"};
  auto [to, from] = actors::make_reply<result<metrics_snapshot>>();
  // Through the writer: the snapshot then includes every commit so far, even
  // claims whose jobs already run but whose feed was not yet taken.
  caf::anon_send(impl_->writer,
                 actors::after_writes{[d = impl_->dispatcher, m = actors::metrics_request{
                                                                std::move(to)}] {
                   caf::anon_send(d, m);
                 }});
  auto snap = from.wait();
  if (!snap)
    return snap;
  snap->by_status = impl_->counters->totals();
  snap->subscriber_errors = impl_->subs->errors();
  for (auto& [type, counts] : impl_->counters->by_type())
    for (size_t i = 0; i < counts.size(); ++i)
      snap->by_type[type].by_status[i] = counts[i];
  return snap;
}

namespace {

// Messages from one thread reach the dispatcher in order, so a call made
// after this one sees its effect.
status send_control(queue::impl& q, actors::scheduling_control c) {
  if (q.closed.load(std::memory_order_acquire))
    return {error::closed, "the queue is closed"};
  // Waits until the dispatcher applied it, so a pause holds from the return on.
  auto [to, from] = actors::make_reply<status>();
  c.reply = std::move(to);
  caf::anon_send(q.dispatcher, std::move(c));
  return from.wait();
}

}  // namespace

status queue::close(std::chrono::milliseconds timeout) {
  if (!impl_)
    return runtime::moved_from("queue");
  return impl_->stop(timeout);
}

ergon::clock& queue::clock() const {
  if (!impl_)
    throw std::logic_error("ergon::queue::clock() on a moved-from queue");
  return *impl_->clk;
}

caf::actor_system& queue::system() const {
  if (!impl_)
    throw std::logic_error("ergon::queue::system() on a moved-from queue");
  return *impl_->sys;
}

}  // namespace ergon
