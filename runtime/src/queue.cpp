#include "ergon/queue.hpp"

#include <stdexcept>

#include "bootstrap.hpp"
#include "ergon/actors/fair_share.hpp"
#include "moved_from.hpp"
#include "queue_impl.hpp"
#include "validate_options.hpp"

namespace ergon {

using runtime::moved_from;

result<queue> queue::open(const std::string& path, options opts) {
  auto p = runtime::bootstrap(path, std::move(opts));
  if (!p)
    return p.error();
  return queue{std::move(*p)};
}

result<queue> queue::open(caf::actor_system& sys, const std::string& path,
                          options opts) {
  auto p = runtime::bootstrap(sys, path, std::move(opts));
  if (!p)
    return p.error();
  return queue{std::move(*p)};
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
    return moved_from("queue");
  return impl_->call<actors::submit_args, result<std::vector<job_id>>>(
    actors::submit_args{std::move(jobs)});
}

result<ergon::job_info> queue::job_info(const job_id& id) const {
  if (!impl_)
    return moved_from("queue");
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
    return moved_from("queue");
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

result<worker> queue::start_worker(worker_options opts) {
  if (!impl_)
    return moved_from("queue");
  if (auto st = runtime::validate(opts); !st)
    return st;
  return impl_->start_worker(std::move(opts));
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
  if (auto st = runtime::validate_group_weight(group, weight); !st)
    return st;
  return impl_->control({actors::scheduling_control::set_group_weight, group, weight, {}, {}});
}

status queue::reset_group_weights() {
  if (!impl_)
    return moved_from("queue");
  return impl_->control({actors::scheduling_control::reset_group_weights, {}, 0, {}, {}});
}

status queue::pause_group(const std::string& group,
                          std::optional<std::chrono::milliseconds> duration) {
  if (!impl_)
    return moved_from("queue");
  if (auto st = runtime::validate_pause("group", group, duration); !st)
    return st;
  return impl_->pause(actors::scheduling_control::pause_group, group, duration);
}

status queue::resume_group(const std::string& group) {
  if (!impl_)
    return moved_from("queue");
  if (auto st = runtime::validate_name("group", group); !st)
    return st;
  return impl_->control({actors::scheduling_control::resume_group, group, 0, {}, {}});
}

status queue::pause_type(const std::string& type,
                         std::optional<std::chrono::milliseconds> duration) {
  if (!impl_)
    return moved_from("queue");
  if (auto st = runtime::validate_pause("type", type, duration); !st)
    return st;
  return impl_->pause(actors::scheduling_control::pause_type, type, duration);
}

status queue::resume_type(const std::string& type) {
  if (!impl_)
    return moved_from("queue");
  if (auto st = runtime::validate_name("type", type); !st)
    return st;
  return impl_->control({actors::scheduling_control::resume_type, type, 0, {}, {}});
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
    return moved_from("queue");
  return impl_->metrics();
}

status queue::close(std::chrono::milliseconds timeout) {
  if (!impl_)
    return moved_from("queue");
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
