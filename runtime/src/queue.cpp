#include "ergon/queue.hpp"

#include <caf/actor_cast.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include "ergon/storage/op/cancel_job.hpp"
#include "ergon/storage/op/cancel_pending.hpp"
#include "ergon/storage/op/delete_recurring.hpp"
#include "ergon/storage/op/put_recurring.hpp"
#include "ergon/storage/op/retry_failed.hpp"
#include "ergon/storage/op/update_pending.hpp"
#include "ergon/wire.hpp"

#include <stdexcept>

#include "bootstrap.hpp"
#include "job_waits.hpp"
#include "listen.hpp"
#include "ergon/actors/fair_share.hpp"
#include "moved_from.hpp"
#include "queue_impl.hpp"
#include "validate_options.hpp"

namespace ergon {

using runtime::moved_from;

namespace {

// The opened queue, listening if its options say so.
result<std::shared_ptr<queue_impl>> started(result<std::unique_ptr<queue_impl>> opened) {
  if (!opened)
    return opened.error();
  std::shared_ptr<queue_impl> p = std::move(*opened);
  if (p->opts.listen)
    if (auto st = runtime::listen(p, *p->opts.listen); !st)
      return st;
  return p;
}

// Closes a queue handle's queue. A listening queue's actor shares it: wait
// until that actor is gone, so that the handle lets go last and the actor
// system the queue may own is not torn down from one of its own threads.
void let_go(std::shared_ptr<queue_impl>& p) {
  if (!p)
    return;
  if (auto actor = caf::actor_cast<caf::actor>(p->actor)) {
    p->stop(std::chrono::seconds(30));
    caf::scoped_actor self{*p->sys, true};
    self->wait_for(actor);
  }
  p.reset();
}

}  // namespace

result<queue> queue::open(const std::string& path, options opts) {
  auto p = started(runtime::bootstrap(path, std::move(opts)));
  if (!p)
    return p.error();
  return queue{std::move(*p)};
}

result<queue> queue::open(caf::actor_system& sys, const std::string& path,
                          options opts) {
  auto p = started(runtime::bootstrap(sys, path, std::move(opts)));
  if (!p)
    return p.error();
  return queue{std::move(*p)};
}

void queue::register_types(caf::actor_system_config& cfg) {
  actors::register_protocol(cfg);
  cfg.add_message_type<job_id>("ergon::job_id")
    .add_message_type<std::vector<job_id>>("ergon::job_ids")
    .add_message_type<job>("ergon::job")
    .add_message_type<std::vector<job>>("ergon::jobs")
    .add_message_type<job_update>("ergon::job_update")
    .add_message_type<ergon::job_info>("ergon::job_info")
    .add_message_type<std::vector<ergon::job_info>>("ergon::job_infos")
    .add_message_type<recurring_job>("ergon::recurring_job")
    .add_message_type<ergon::recurring_info>("ergon::recurring_info")
    .add_message_type<std::vector<ergon::recurring_info>>("ergon::recurring_infos")
    .add_message_type<status_counts>("ergon::status_counts")
    .add_message_type<metrics_snapshot>("ergon::metrics_snapshot")
    .add_message_type<event>("ergon::event")
    .add_message_type<std::chrono::milliseconds>("ergon::milliseconds")
    .add_message_type<job_filter>("ergon::job_filter")
    .add_message_type<page_request>("ergon::page_request")
    .add_message_type<job_page>("ergon::job_page")
    .add_message_type<retry_summary>("ergon::retry_summary")
    .add_message_type<cancel_summary>("ergon::cancel_summary")
    .add_message_type<settings_change>("ergon::settings_change")
    .add_message_type<std::vector<control_info>>("ergon::control_infos")
    .add_message_type<std::vector<worker_info>>("ergon::worker_infos");
  cfg.add_error_category(error_category, [](uint8_t code, caf::atom_value, const caf::message& ctx) {
    auto st = to_status(caf::error{code, error_category, ctx});
    return st.to_string();
  });
}

queue::queue(std::shared_ptr<impl> p) noexcept : impl_(std::move(p)) {}
queue::queue(queue&&) noexcept = default;

queue& queue::operator=(queue&& other) noexcept {
  if (this != &other) {
    let_go(impl_);
    impl_ = std::move(other.impl_);
  }
  return *this;
}

queue::~queue() { let_go(impl_); }

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
    return moved_from("queue");
  return impl_->call<actors::submit_args, result<std::vector<job_id>>>(
    actors::submit_args{std::move(jobs)});
}

result<ergon::job_info> queue::wait(const job_id& id, std::chrono::milliseconds timeout) const {
  if (!impl_)
    return moved_from("queue");
  auto waits = runtime::job_waits(impl_);
  if (!waits)
    return impl_->closed_status();
  result<ergon::job_info> out = impl_->closed_status();
  caf::scoped_actor self{*impl_->sys};
  self->request(waits, caf::infinite, wait_atom::value, id, timeout)
    .receive([&](ergon::job_info& info) { out = std::move(info); },
             [&](caf::error& e) { out = impl_->explain(to_status(e)); });
  return out;
}

void queue::wait_async(const job_id& id, std::chrono::milliseconds timeout,
                       std::function<void(result<ergon::job_info>)> done) const {
  auto call = [&done](result<ergon::job_info> r) {
    try {
      done(std::move(r));
    } catch (...) {  // documented: not reported further
    }
  };
  if (!impl_)
    return call(moved_from("queue"));
  auto waits = runtime::job_waits(impl_);
  if (!waits)
    return call(impl_->closed_status());
  // The waits actor goes as a spawn argument: CAF 0.17.6 dereferences a null
  // argument tuple for a function actor spawned without one (UBSan).
  impl_->sys->spawn([id, timeout, done = std::move(done)](caf::event_based_actor* self,
                                                          caf::actor waits) {
    auto call = [done](result<ergon::job_info> r) {
      try {
        done(std::move(r));
      } catch (...) {  // documented: not reported further
      }
    };
    self->request(waits, caf::infinite, wait_atom::value, id, timeout)
      .then([call](ergon::job_info& info) { call(std::move(info)); },
            [call](caf::error& e) { call(to_status(e)); });
  }, waits);
}

result<ergon::job_info> queue::job_info(const job_id& id) const {
  if (!impl_)
    return moved_from("queue");
  return impl_->explain(impl_->job_info(id));
}

result<std::vector<ergon::job_info>> queue::jobs_by_name(const std::string& name,
                                                         size_t limit) const {
  if (!impl_)
    return moved_from("queue");
  return impl_->explain(impl_->jobs_by_name(name, limit));
}

result<job_page> queue::list_jobs(const job_filter& filter, const page_request& page) const {
  if (!impl_)
    return moved_from("queue");
  return impl_->explain(impl_->list_jobs(filter, page));
}

result<job_page> queue::list_failed(job_filter filter, const page_request& page) const {
  filter.status = job_status::failed;
  return list_jobs(filter, page);
}

status queue::retry_failed(const job_id& id) {
  if (!impl_)
    return moved_from("queue");
  return impl_
    ->call<storage::retry_failed_args, result<retry_summary>>(storage::retry_failed_args{id, {}})
    .error();
}

status queue::replay(const job_id& id) {
  if (!impl_)
    return moved_from("queue");
  storage::retry_failed_args args;
  args.id = id;
  args.replay = true;
  return impl_->call<storage::retry_failed_args, result<retry_summary>>(std::move(args)).error();
}

result<retry_summary> queue::retry_failed(job_filter filter) {
  if (!impl_)
    return moved_from("queue");
  filter.status = job_status::failed;
  return impl_->bulk<retry_summary>(actors::bulk_kind::retry, std::move(filter));
}

result<int64_t> queue::purge_failed(job_filter filter) {
  if (!impl_)
    return moved_from("queue");
  filter.status = job_status::failed;
  return impl_->bulk<int64_t>(actors::bulk_kind::remove, std::move(filter));
}

result<cancel_summary> queue::cancel_jobs(job_filter filter) {
  if (!impl_)
    return moved_from("queue");
  return impl_->bulk<cancel_summary>(actors::bulk_kind::cancel, std::move(filter));
}

result<int64_t> queue::delete_jobs(job_filter filter) {
  if (!impl_)
    return moved_from("queue");
  return impl_->bulk<int64_t>(actors::bulk_kind::remove, std::move(filter));
}

result<int64_t> queue::purge_failed(std::chrono::milliseconds older_than) {
  if (!impl_)
    return moved_from("queue");
  auto filter = impl_->failed_before(older_than);
  if (!filter)
    return filter.error();
  return impl_->bulk<int64_t>(actors::bulk_kind::remove, std::move(*filter));
}

status_counts queue::counts() const {
  if (!impl_)
    return {};
  return impl_->counters->totals();
}

status queue::update_pending(const job_id& id, const job_update& changes) {
  if (!impl_)
    return moved_from("queue");
  return impl_->call<storage::update_pending_args, status>(
    storage::update_pending_args{id, changes, 0});
}

status queue::cancel_pending(const job_id& id) {
  if (!impl_)
    return moved_from("queue");
  return impl_->call<storage::cancel_pending_args, status>(
    storage::cancel_pending_args{id});
}

status queue::cancel(const job_id& id) {
  if (!impl_)
    return moved_from("queue");
  return impl_->call<storage::cancel_job_args, status>(storage::cancel_job_args{id});
}

result<job_id> queue::add_recurring(const recurring_job& r) {
  if (!impl_)
    return moved_from("queue");
  return impl_->call<storage::put_recurring_args, result<job_id>>(
    storage::put_recurring_args{r, storage::put_mode::add, 0});
}

result<job_id> queue::update_recurring(const recurring_job& r) {
  if (!impl_)
    return moved_from("queue");
  return impl_->call<storage::put_recurring_args, result<job_id>>(
    storage::put_recurring_args{r, storage::put_mode::update, 0});
}

result<job_id> queue::upsert_recurring(const recurring_job& r) {
  if (!impl_)
    return moved_from("queue");
  return impl_->call<storage::put_recurring_args, result<job_id>>(
    storage::put_recurring_args{r, storage::put_mode::upsert, 0});
}

status queue::delete_recurring(const std::string& id) {
  if (!impl_)
    return moved_from("queue");
  return impl_->call<storage::delete_recurring_args, status>(
    storage::delete_recurring_args{id});
}

status queue::pause_recurring(const std::string& id,
                              std::optional<std::chrono::milliseconds> duration) {
  if (!impl_)
    return moved_from("queue");
  return impl_->explain(impl_->pause_recurring(id, true, duration));
}

status queue::resume_recurring(const std::string& id) {
  if (!impl_)
    return moved_from("queue");
  return impl_->explain(impl_->pause_recurring(id, false, std::nullopt));
}

result<ergon::recurring_info> queue::recurring_info(const std::string& id) const {
  if (!impl_)
    return moved_from("queue");
  return impl_->explain(impl_->recurring_info(id));
}

result<std::vector<ergon::recurring_info>> queue::list_recurring(const std::string& prefix) const {
  if (!impl_)
    return moved_from("queue");
  return impl_->explain(impl_->list_recurring(prefix));
}

result<worker> queue::start_worker(worker_options opts) {
  if (!impl_)
    return moved_from("queue");
  if (auto st = runtime::validate(opts); !st)
    return st;
  return impl_->explain(impl_->start_worker(std::move(opts)));
}

subscription queue::subscribe(std::function<void(const event&)> f) {
  if (!impl_)
    return subscription{};
  auto subs = impl_->subs;
  auto handle = subs->add(std::move(f));
  return subscription{[subs, handle] { subs->remove(handle); }};
}

status queue::set_group_weight(const std::string& group, int32_t weight) {
  if (!impl_)
    return moved_from("queue");
  return impl_->explain(impl_->set_group_weight(group, weight));
}

status queue::reset_group_weights() {
  if (!impl_)
    return moved_from("queue");
  return impl_->explain(impl_->reset_group_weights());
}

status queue::pause_group(const std::string& group,
                          std::optional<std::chrono::milliseconds> duration) {
  if (!impl_)
    return moved_from("queue");
  return impl_->explain(impl_->pause(actors::scheduling_control::pause_group, group, duration));
}

status queue::resume_group(const std::string& group) {
  if (!impl_)
    return moved_from("queue");
  return impl_->explain(impl_->named_call(actors::scheduling_control::resume_group, group));
}

status queue::pause_type(const std::string& type,
                         std::optional<std::chrono::milliseconds> duration) {
  if (!impl_)
    return moved_from("queue");
  return impl_->explain(impl_->pause(actors::scheduling_control::pause_type, type, duration));
}

result<int64_t> queue::resume_all() {
  if (!impl_)
    return moved_from("queue");
  return impl_->explain(impl_->resume_all());
}

status queue::reset_breaker(const std::string& type) {
  if (!impl_)
    return moved_from("queue");
  return impl_->explain(impl_->named_call(actors::scheduling_control::reset_breaker, type));
}

status queue::resume_type(const std::string& type) {
  if (!impl_)
    return moved_from("queue");
  return impl_->explain(impl_->named_call(actors::scheduling_control::resume_type, type));
}

status queue::set_group(const std::string& group, const settings_change& change) {
  if (!impl_)
    return moved_from("queue");
  return impl_->explain(impl_->change(actors::scheduling_control::change_group, group, change));
}

status queue::set_type(const std::string& type, const settings_change& change) {
  if (!impl_)
    return moved_from("queue");
  return impl_->explain(impl_->change(actors::scheduling_control::change_type, type, change));
}

status queue::reset_group(const std::string& group) {
  if (!impl_)
    return moved_from("queue");
  return impl_->explain(impl_->named_call(actors::scheduling_control::reset_group, group));
}

status queue::reset_type(const std::string& type) {
  if (!impl_)
    return moved_from("queue");
  return impl_->explain(impl_->named_call(actors::scheduling_control::reset_type, type));
}

status queue::set_worker(const std::string& name, const settings_change& change) {
  if (!impl_)
    return moved_from("queue");
  return impl_->explain(impl_->change(actors::scheduling_control::change_worker, name, change));
}

status queue::reset_worker(const std::string& name) {
  if (!impl_)
    return moved_from("queue");
  return impl_->explain(impl_->named_call(actors::scheduling_control::reset_worker, name));
}

status queue::pause_queue(std::optional<std::chrono::milliseconds> duration) {
  if (!impl_)
    return moved_from("queue");
  return impl_->explain(impl_->pause(actors::scheduling_control::pause_queue, {}, duration));
}

status queue::resume_queue() {
  if (!impl_)
    return moved_from("queue");
  return impl_->explain(impl_->named_call(actors::scheduling_control::resume_queue, {}));
}

result<std::vector<control_info>> queue::controls() const {
  if (!impl_)
    return moved_from("queue");
  return impl_->explain(impl_->controls());
}

std::optional<std::chrono::milliseconds> queue::max_wait(int32_t base_priority) const {
  if (!impl_)
    return std::nullopt;
  auto ms = actors::max_wait_ms(impl_->opts.scheduling.aging, base_priority);
  if (!ms)
    return std::nullopt;
  return std::chrono::milliseconds{*ms};
}

result<std::vector<worker_info>> queue::workers() const {
  if (!impl_)
    return moved_from("queue");
  return impl_->explain(impl_->list_workers());
}

result<metrics_snapshot> queue::metrics() const {
  if (!impl_)
    return moved_from("queue");
  return impl_->explain(impl_->metrics());
}

status queue::close(std::chrono::milliseconds timeout) {
  if (!impl_)
    return moved_from("queue");
  return impl_->stop(timeout);
}

result<uint16_t> queue::listening_port() const {
  if (!impl_)
    return moved_from("queue");
  return impl_->port_of(runtime::front_end::kind::actor_port);
}

result<uint16_t> queue::http_port() const {
  if (!impl_)
    return moved_from("queue");
  return impl_->port_of(runtime::front_end::kind::http);
}

ergon::clock& queue::clock() const {
  if (!impl_)
    throw std::logic_error("ergon::queue::clock() on a moved-from queue");
  return *impl_->clk;
}

}  // namespace ergon
