#include "queue_impl.hpp"

#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <algorithm>
#include <iostream>

#include <caf/actor_cast.hpp>
#include <caf/exit_reason.hpp>

#include "ergon/storage/field_rules.hpp"
#include "ergon/storage/op/delete_finished.hpp"
#include "ergon/storage/op/list_jobs.hpp"
#include "ergon/storage/op/pause_recurring.hpp"
#include "ergon/storage/op/read_recurring.hpp"
#include "ergon/storage/op/read_jobs.hpp"
#include "ergon/storage/times.hpp"
#include "validate_options.hpp"

namespace ergon {

status queue::impl::fill_pending_views(std::vector<ergon::job_info*> infos) {
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
  actors::tell(dispatcher, std::move(req));
  auto views = from.wait();
  if (!views)
    return views.error();
  for (size_t k = 0; k < pending.size() && k < views->size(); ++k) {
    pending[k]->effective_priority = (*views)[k].effective_priority;
    pending[k]->too_heavy = (*views)[k].too_heavy;
  }
  return {};
}

// Messages from one thread reach the dispatcher in order, so a call made
// after this one sees its effect.
result<int64_t> queue::impl::apply(actors::scheduling_control c) {
  if (closed.load(std::memory_order_acquire))
    return closed_status();
  // Waits until the dispatcher applied it, so a pause holds from the return on.
  auto [to, from] = actors::make_reply<result<int64_t>>();
  c.reply = std::move(to);
  actors::tell(dispatcher, std::move(c));
  return from.wait();
}

result<ergon::job_info> queue::impl::job_info(const job_id& id) {
  auto conn = reads->borrow();
  if (!conn)
    return conn.error();
  auto info = storage::read_job(**conn, id);
  if (info)
    if (auto st = fill_pending_views({&*info}); !st)
      return st;
  return info;
}

namespace {

std::vector<ergon::job_info*> pointers_to(std::vector<ergon::job_info>& infos) {
  std::vector<ergon::job_info*> all;
  for (auto& i : infos)
    all.push_back(&i);
  return all;
}

}  // namespace

result<std::vector<ergon::job_info>> queue::impl::jobs_by_name(const std::string& name,
                                                               size_t limit) {
  if (limit < 1 || limit > max_page_size)
    return invalid_field("limit", "must be 1 to " + std::to_string(max_page_size) + ", got "
                                    + std::to_string(limit));
  auto infos = read([&](storage::db& d) { return storage::read_jobs_by_name(d, name, limit); });
  if (infos)
    if (auto st = fill_pending_views(pointers_to(*infos)); !st)
      return st;
  return infos;
}

result<job_page> queue::impl::list_jobs(const job_filter& filter, const page_request& page) {
  auto listed = read([&](storage::db& d) { return storage::list_jobs(d, filter, page); });
  if (listed)
    if (auto st = fill_pending_views(pointers_to(listed->jobs)); !st)
      return st;
  return listed;
}

caf::actor queue::impl::spawn_bulk(actors::bulk_kind kind, job_filter filter) {
  auto closing = [flag = stop_flag] { return flag->load(std::memory_order_acquire); };
  auto action = actors::spawn_bulk_action(*sys, {writer, opts.bulk, kind, std::move(filter),
                                                 std::move(closing)});
  std::lock_guard<std::mutex> guard{bulk_mtx};
  // Those that ended have no actor behind their address any more.
  bulk_actions.erase(std::remove_if(bulk_actions.begin(), bulk_actions.end(),
                                    [](const caf::actor_addr& a) {
                                      return !caf::actor_cast<caf::actor>(a);
                                    }),
                     bulk_actions.end());
  bulk_actions.push_back(action.address());
  return action;
}

result<job_filter> queue::impl::failed_before(std::chrono::milliseconds older_than) {
  if (older_than < std::chrono::milliseconds::zero())
    return invalid_field("older_than", "must be >= 0, got " + std::to_string(older_than.count())
                                         + " ms");
  job_filter filter;
  filter.status = job_status::failed;
  filter.finished_before_ms = std::max<int64_t>(0, storage::add_ms(clk->now_ms(), -older_than.count()));
  return filter;
}

status queue::impl::set_group_weight(const std::string& group, int32_t weight) {
  if (auto st = runtime::validate_group_weight(group, weight); !st)
    return st;
  return control({actors::scheduling_control::set_group_weight, group, weight, {}, {}, {}});
}

status queue::impl::reset_group_weights() {
  return control({actors::scheduling_control::reset_group_weights, {}, 0, {}, {}, {}});
}

namespace {

using control = actors::scheduling_control;

// The field a call's name is: "group", "type", or none for the queue.
const char* name_field(control::op_type op) {
  switch (op) {
    case control::pause_queue:
    case control::resume_queue:
      return nullptr;
    case control::pause_group:
    case control::resume_group:
    case control::change_group:
    case control::reset_group:
      return "group";
    case control::change_worker:
    case control::reset_worker:
      return "worker";
    default:
      return "type";
  }
}

}  // namespace

status queue::impl::named_call(control::op_type op, const std::string& name) {
  auto field = name_field(op);
  // A breaker belongs to a job type, whose name is never empty.
  if (op == control::reset_breaker || op == control::reset_worker)
    if (auto st = storage::check_label(field, name); !st)
      return st;
  if (field)
    if (auto st = runtime::validate_name(field, name); !st)
      return st;
  return this->control({op, name, 0, {}, {}, {}});
}

status queue::impl::change(control::op_type op, const std::string& name,
                           const settings_change& c) {
  if (auto st = runtime::validate_settings(name_field(op), name, c); !st)
    return st;
  return this->control({op, name, 0, {}, c, {}});
}

status queue::impl::pause(control::op_type op, const std::string& name,
                          std::optional<std::chrono::milliseconds> duration) {
  auto field = name_field(op);
  if (auto st = field ? runtime::validate_pause(field, name, duration)
                : duration ? storage::check_positive_ms("duration", duration->count())
                           : status{};
      !st)
    return st;
  std::optional<int64_t> until;
  if (duration)
    until = storage::add_ms(clk->now_ms(), duration->count());
  return control({op, name, 0, until, {}, {}});
}

result<ergon::recurring_info> queue::impl::recurring_info(const std::string& id) {
  return read([&](storage::db& d) { return storage::read_recurring(d, id, clk->now_ms()); });
}

result<std::vector<ergon::recurring_info>> queue::impl::list_recurring(const std::string& prefix) {
  return read([&](storage::db& d) { return storage::list_recurring(d, prefix, clk->now_ms()); });
}

status queue::impl::pause_recurring(const std::string& id, bool pause,
                                    std::optional<std::chrono::milliseconds> duration) {
  if (auto st = storage::check_label("id", id); !st)
    return st;
  if (duration)
    if (auto st = storage::check_positive_ms("duration", duration->count()); !st)
      return st;
  return call<storage::pause_recurring_args, status>(storage::pause_recurring_args{
    id, pause, duration ? std::optional<int64_t>{duration->count()} : std::nullopt});
}

result<worker> queue::impl::start_worker(worker_options worker_opts) {
  if (closed.load(std::memory_order_acquire))
    return closed_status();
  auto w = worker_impl::spawn(*sys, std::move(worker_opts), clk,
                               caf::actor_cast<caf::actor>(dispatcher), gate);
  {
    std::lock_guard<std::mutex> guard{workers_mtx};
    workers.push_back(w);
  }
  return runtime_access::make_worker(std::move(w));
}

// Straight to the dispatcher: each control call returns once applied there.
result<std::vector<control_info>> queue::impl::controls() {
  return ask_dispatcher<actors::controls_request, result<std::vector<control_info>>>();
}

result<std::vector<worker_info>> queue::impl::list_workers() {
  return ask_dispatcher<actors::workers_request, result<std::vector<worker_info>>>();
}

result<metrics_snapshot> queue::impl::metrics() {
  if (closed.load(std::memory_order_acquire))
    return closed_status();
  auto [to, from] = actors::make_reply<result<metrics_snapshot>>();
  // Through the writer: the snapshot then includes every commit so far, even
  // claims whose jobs already run but whose feed was not yet taken.
  actors::metrics_request request{std::move(to)};
  actors::tell(writer, actors::after_writes{[d = dispatcher, m = std::move(request)] {
    actors::tell(d, m);
  }});
  auto snap = from.wait();
  if (!snap)
    return snap;
  snap->by_status = counters->totals();
  snap->subscriber_errors = subs->errors();
  snap->refused_messages = gate->refused();
  snap->forbidden_messages = gate->forbidden();
  snap->failed_handshakes = gate->failed_handshakes();
  snap->refused_connections = gate->refused_connections();
  snap->rejected_messages = gate->rejected();
  snap->waits = static_cast<int64_t>(watch->size());
  writer_stats->fill(*snap);
  for (auto& [type, counts] : counters->by_type())
    snap->by_type[type].by_status = counts;
  for (auto& [group, counts] : counters->by_group())
    snap->by_group[group].by_status = counts;
  return snap;
}

status queue::impl::attach(std::unique_ptr<runtime::front_end> f) {
  {
    std::lock_guard<std::mutex> guard{fronts_mtx};
    if (!closed.load(std::memory_order_acquire)) {
      fronts.push_back(std::move(f));
      return {};
    }
  }
  f->stop();
  return closed_status();
}

result<uint16_t> queue::impl::port_of(runtime::front_end::kind k) {
  if (closed.load(std::memory_order_acquire))
    return closed_status();
  std::lock_guard<std::mutex> guard{fronts_mtx};
  for (auto& f : fronts)
    if (f->what() == k)
      return f->port();
  if (k == runtime::front_end::kind::http)
    return status{error::invalid_argument, "the queue serves no HTTP: set options::http"};
  return status{error::invalid_argument,
                "the queue does not listen: set options::listen, or publish its actor"};
}

status queue::impl::closed_status() {
  return explain(actors::queue_closed());
}

status queue::impl::explain(status st) {
  if (st.code() != error::closed)
    return st;
  auto why = closing_cause();
  return why ? st : why;
}

status queue::impl::closing_cause() {
  std::lock_guard<std::mutex> guard{cause_mtx};
  return cause_of_close;
}

void queue::impl::close_for(const status& why) {
  std::lock_guard<std::mutex> guard{cause_mtx};
  if (destroying || !cause_of_close || closed.load(std::memory_order_acquire))
    return;
  cause_of_close = {why.code(), why.message() + "; this queue closed"};
  if (!ready)
    return;
  std::cerr << "ergon: " << cause_of_close << '\n';
  // Running jobs can't commit any more; the next owner recovers them. The
  // queue actor, if any, goes down with `cause_of_close`.
  closer = std::thread([this] { stop(std::chrono::milliseconds{0}); });
}

status queue::impl::open_done() {
  std::lock_guard<std::mutex> guard{cause_mtx};
  ready = true;
  return cause_of_close;
}

status queue::impl::record_listener(const std::string& address, uint16_t port, bool secret,
                                    bool tls) {
  std::lock_guard<std::mutex> guard{owner_mtx};
  if (owner)
    return owner->record_listener(address, port, secret, tls);
  if (lease)
    return lease->record_listener(address, port, secret, tls);
  return {};
}

status queue::impl::stop(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> stopping{stop_mtx};
  if (closed.exchange(true))
    return closing_cause();
  stop_flag->store(true, std::memory_order_release);
  {
    std::lock_guard<std::mutex> guard{bulk_mtx};
    for (auto& a : bulk_actions)
      if (auto action = caf::actor_cast<caf::actor>(a))
        caf::anon_send(action, actors::bulk_stop_atom::value);
    bulk_actions.clear();
  }
  {
    // Nothing from outside reaches a closed queue; requests in flight are
    // answered (`closed`, once the flag is up). Newest first: a port goes
    // before the actor it leads to.
    std::vector<std::unique_ptr<runtime::front_end>> open;
    {
      std::lock_guard<std::mutex> guard{fronts_mtx};
      open.swap(fronts);
    }
    for (auto f = open.rbegin(); f != open.rend(); ++f)
      (*f)->stop();
  }
  auto deadline = storage::steady_deadline(timeout);
  actors::tell(dispatcher, actors::drain_atom::value);
  std::vector<std::shared_ptr<worker_impl>> running;
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
  caf::anon_send_exit(sweeper, caf::exit_reason::user_shutdown);
  inbox.reset();
  // The writer's connection closes last, so SQLite folds the WAL into the
  // file and removes it (a read-only connection can't).
  reads->clear();
  auto [to, from] = actors::make_reply<status>();
  actors::tell(writer, actors::close_call{{}, std::move(to)});
  auto closed_writer = from.wait();
  if (result && !closed_writer)
    result = closed_writer;
  actors::tell_exit(caf::actor_cast<caf::actor>(dispatcher), caf::exit_reason::user_shutdown);
  caf::anon_send_exit(events, caf::exit_reason::user_shutdown);
  {
    std::lock_guard<std::mutex> guard{waits_mtx};
    if (waits) {
      auto why = closing_cause();
      actors::tell_exit(waits, why ? caf::error{caf::exit_reason::user_shutdown}
                                   : to_caf_error(why));
      // Ends its thread; the queue is closed already, so that is all it does.
      actors::tell(waits_calls, close_atom::value);
    }
  }
  {
    std::lock_guard<std::mutex> guard{owner_mtx};
    owner.reset();
    lease.reset();
  }
  if (auto why = closing_cause(); !why)
    return why;
  return result;
}

queue::impl::~impl() {
  {
    std::lock_guard<std::mutex> guard{cause_mtx};
    destroying = true;
  }
  if (closer.joinable())
    closer.join();
  if (writer)
    stop(std::chrono::seconds(30));
  lease.reset();  // before the mutexes its thread may take
}

}  // namespace ergon
