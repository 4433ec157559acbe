#include "ergon/queue.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/send.hpp>

#include <atomic>

#include "ergon/actors/db_writer.hpp"
#include "ergon/storage/schema.hpp"
#include "read_pool.hpp"

namespace ergon {

struct queue::impl {
  options opts;
  std::shared_ptr<ergon::clock> clk;
  // Declared before the actors that run in it, so it is destroyed last.
  std::unique_ptr<caf::actor_system_config> own_cfg;
  std::unique_ptr<caf::actor_system> own_sys;
  caf::actor_system* sys = nullptr;
  caf::actor writer;
  std::shared_ptr<actors::job_counters> counters;
  std::unique_ptr<runtime::read_pool> reads;
  std::atomic<bool> closed{false};

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

  status stop() {
    if (closed.exchange(true))
      return {};
    auto [to, from] = actors::make_reply<status>();
    caf::anon_send(writer, actors::close_call{{}, std::move(to)});
    auto st = from.wait();
    reads->clear();
    return st;
  }

  ~impl() {
    if (writer)
      stop();
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
  auto cfg = std::make_unique<caf::actor_system_config>();
  cfg->set("scheduler.max-threads", opts.scheduler_threads);
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
  auto p = std::make_unique<impl>();
  p->clk = opts.clock ? opts.clock : default_clock();
  p->sys = &sys;
  auto db_opts = db_options_from(opts);
  auto opened = storage::db::open(path, db_opts);
  if (!opened)
    return opened.error();
  std::shared_ptr<storage::db> write_db = std::move(*opened);
  if (auto st = storage::migrate(*write_db); !st)
    return st;
  auto meta = storage::read_meta(*write_db);
  if (!meta)
    return meta.error();
  auto unfinished = storage::load_unfinished(*write_db, meta->unfinished_low_mark);
  if (!unfinished)
    return unfinished.error();
  if (auto st = storage::raise_low_mark(*write_db, unfinished->low_mark); !st)
    return st;
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
  p->writer = actors::spawn_db_writer(sys, std::move(wcfg));
  p->reads = std::make_unique<runtime::read_pool>(path, db_opts, opts.read_connections);
  p->opts = std::move(opts);
  return queue{std::move(p)};
}

void queue::register_types(caf::actor_system_config&) {
  // Workers in other processes arrive with the dispatcher protocol.
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
  return impl_->call<actors::submit_args, result<std::vector<job_id>>>(
    actors::submit_args{std::move(jobs)});
}

result<ergon::job_info> queue::job_info(const job_id& id) const {
  auto conn = impl_->reads->borrow();
  if (!conn)
    return conn.error();
  return storage::read_job(**conn, id);
}

result<std::vector<ergon::job_info>> queue::jobs_by_name(const std::string& name) const {
  auto conn = impl_->reads->borrow();
  if (!conn)
    return conn.error();
  return storage::read_jobs_by_name(**conn, name);
}

status_counts queue::counts() const {
  return impl_->counters->totals();
}

status queue::update_pending(const job_id& id, const job_update& changes) {
  return impl_->call<storage::update_pending_args, status>(
    storage::update_pending_args{id, changes, 0});
}

status queue::cancel_pending(const job_id& id) {
  return impl_->call<storage::cancel_pending_args, status>(
    storage::cancel_pending_args{id});
}

status queue::close(std::chrono::milliseconds) {
  return impl_->stop();
}

ergon::clock& queue::clock() const {
  return *impl_->clk;
}

caf::actor_system& queue::system() const {
  return *impl_->sys;
}

}  // namespace ergon
