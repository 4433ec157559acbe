#include "ergon/queue_actor.hpp"

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/exit_reason.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <iostream>
#include <map>
#include <mutex>

#include "ergon/storage/op/put_recurring.hpp"
#include "blocking_calls.hpp"
#include "bootstrap.hpp"
#include "front_end.hpp"
#include "private_files.hpp"
#include "transport/acceptor.hpp"
#include "transport/settings.hpp"
#include "transport/tls_context.hpp"
#include "job_waits.hpp"
#include "listen.hpp"
#include "queue_impl.hpp"
#include "remote_queue.hpp"
#include "validate_options.hpp"

namespace ergon {
namespace {

// Queues spawned in this process, so start_worker can reach the internals of
// the one behind a handle. Entries go when the actor's state does.
struct spawned_queues {
  std::mutex mtx;
  std::map<caf::actor_addr, std::weak_ptr<queue_impl>> by_actor;
};

spawned_queues& spawned() {
  static spawned_queues s;
  return s;
}

struct queue_actor_state {
  std::shared_ptr<queue_impl> q;
  caf::actor calls;  // runs the calls that wait; see blocking_calls.hpp
  bool closing = false;
  std::vector<caf::response_promise> close_requests;  // answered once closed
  std::map<caf::actor_addr, uint64_t> subscribers;  // actor -> subscription
  // Requests this actor answers once the writer has: if it goes first (its
  // queue closed by itself), they get the reason, not silence.
  std::map<uint64_t, caf::response_promise> awaiting_writer;
  uint64_t last_awaiting = 0;

  caf::actor_addr self;

  ~queue_actor_state() {
    if (!q)
      return;
    {
      std::lock_guard<std::mutex> guard{spawned().mtx};
      spawned().by_actor.erase(self);
    }
    for (auto& [addr, handle] : subscribers)
      q->subs->remove(handle);
    // Killed before it could close: the queue closes in the background.
    if (!closing && calls)
      actors::tell(calls, close_atom::value);
  }

  static inline const char* name = "ergon.queue";
};

using queue_ptr = actors::gated<queue_actor::stateful_base<queue_actor_state>>*;

// Calls that wait go to their own actor, which answers the requester.
template <class... Ts>
caf::response_promise to_calls(queue_ptr self, Ts&&... xs) {
  auto rp = self->make_response_promise();
  if (self->state.closing)
    rp.deliver(to_caf_error(self->state.q->closed_status()));
  else
    rp.delegate(self->state.calls, std::forward<Ts>(xs)...);
  return rp;
}

// Writes go to the writer, which answers the requester after the commit, so
// many requests are in flight at once and commit together.
template <class Call>
caf::response_promise to_writer(queue_ptr self, Call call) {
  auto rp = self->make_response_promise();
  if (self->state.q->closed.load(std::memory_order_acquire))
    rp.deliver(to_caf_error(self->state.q->closed_status()));
  else
    rp.delegate(self->state.q->writer, std::move(call));
  return rp;
}

// Sends `call` to the writer and answers the requester with `answer` of
// its reply (a Value), or with its error.
template <class Value, class Call, class Answer>
caf::response_promise ask_writer(queue_ptr self, Call call, Answer answer) {
  auto rp = self->make_response_promise();
  auto& st = self->state;
  if (st.q->closed.load(std::memory_order_acquire)) {
    rp.deliver(to_caf_error(st.q->closed_status()));
    return rp;
  }
  auto id = ++st.last_awaiting;
  st.awaiting_writer.emplace(id, rp);
  auto take = [self, id]() -> std::optional<caf::response_promise> {
    auto i = self->state.awaiting_writer.find(id);
    if (i == self->state.awaiting_writer.end())
      return std::nullopt;
    auto out = std::move(i->second);
    self->state.awaiting_writer.erase(i);
    return out;
  };
  self->request(st.q->writer, caf::infinite, std::move(call))
    .then(
      [take, answer](Value& v) mutable {
        if (auto rp = take())
          rp->deliver(answer(v));
      },
      [take](caf::error& e) mutable {
        if (auto rp = take())
          rp->deliver(std::move(e));
      });
  return rp;
}

// Runs a bulk action over `f` and answers the requester with its outcome
// (bulk_action.hpp). It has an actor of its own, which pauses between
// steps, so the queue actor goes on meanwhile.
caf::response_promise run_bulk(queue_ptr self, actors::bulk_kind kind, job_filter f) {
  auto rp = self->make_response_promise();
  auto& q = *self->state.q;
  if (self->state.closing || q.closed.load(std::memory_order_acquire)) {
    rp.deliver(to_caf_error(q.closed_status()));
    return rp;
  }
  if (auto st = actors::check_bulk(kind, f); !st) {
    rp.deliver(to_caf_error(st));
    return rp;
  }
  auto action = q.spawn_bulk(kind, std::move(f));
  rp.delegate(action, actors::bulk_run_atom::value);
  return rp;
}

// The writer answers a retry with its summary; for one job the answer is ok.
caf::result<ok_atom> retry_one(queue_ptr self, const job_id& id, bool replay) {
  storage::retry_failed_args args;
  args.id = id;
  args.replay = replay;
  return ask_writer<retry_summary>(self, actors::retry_failed_call{std::move(args), {}},
                                   [](retry_summary&) { return ok_atom::value; });
}

caf::result<ok_atom> subscribe(queue_ptr self, const caf::actor& subscriber) {
  auto& st = self->state;
  if (!subscriber)
    return to_caf_error({error::invalid_argument, "the subscriber is an invalid actor handle",
                         "subscriber"});
  // Events go only to an actor of the asking node: a peer can't point the
  // queue's events at another node's actor, or at the queue's own.
  if (auto& sender = self->current_sender(); sender && sender->node() != subscriber.node())
    return to_caf_error({error::invalid_argument,
                         "the subscriber is an actor of another node than the caller's",
                         "subscriber"});
  if (st.subscribers.count(subscriber.address()) == 0) {
    // From the queue actor: a remote subscriber's node refuses messages
    // without a sender.
    auto handle = st.q->subs->add([subscriber, me = self->address()](const event& e) {
      if (auto from = caf::actor_cast<caf::actor>(me))
        caf::send_as(from, subscriber, e);
    });
    st.subscribers.emplace(subscriber.address(), handle);
    self->monitor(subscriber);
  }
  return ok_atom::value;
}

void unsubscribe(queue_ptr self, const caf::actor_addr& subscriber) {
  auto& st = self->state;
  auto i = st.subscribers.find(subscriber);
  if (i == st.subscribers.end())
    return;
  st.q->subs->remove(i->second);
  st.subscribers.erase(i);
}

// Unpublishes and stops the queue, answers every close request, then quits
// with `reason`: once a close is answered or the actor is down, the file is
// released.
void close_then_quit(queue_ptr self, caf::error reason) {
  auto& st = self->state;
  if (st.closing)
    return;
  st.closing = true;
  auto done = [self, reason](caf::error e) {
    for (auto& rp : self->state.close_requests)
      e ? rp.deliver(e) : rp.deliver(ok_atom::value);
    self->state.close_requests.clear();
    for (auto& [id, rp] : self->state.awaiting_writer)
      rp.deliver(to_caf_error(self->state.q->closed_status()));
    self->state.awaiting_writer.clear();
    // Monitors learn that another process took the queue over.
    auto why = self->state.q->closing_cause();
    self->quit(why ? reason : to_caf_error(why));
  };
  self->request(st.calls, caf::infinite, close_atom::value)
    .then([done](ok_atom) { done(caf::error{}); }, [done](caf::error& e) { done(e); });
}

using ms = std::chrono::milliseconds;

queue_actor::behavior_type run(queue_ptr self, std::shared_ptr<queue_impl> opened,
                               caf::actor calls) {
  self->state.q = std::move(opened);
  self->state.calls = std::move(calls);
  self->state.self = self->address();
  self->set_down_handler([self](caf::down_msg& down) { unsubscribe(self, down.source); });
  self->set_exit_handler([self](caf::exit_msg& msg) { close_then_quit(self, msg.reason); });
  auto& q = *self->state.q;
  return {
    [self](submit_atom, job& j) -> caf::result<job_id> {
      std::vector<job> one;
      one.push_back(std::move(j));
      return ask_writer<std::vector<job_id>>(self, actors::submit_call{{std::move(one)}, {}},
                        [](std::vector<job_id>& ids) { return ids.front(); });
    },
    [self](submit_atom, std::vector<job>& jobs) -> caf::result<std::vector<job_id>> {
      return to_writer(self, actors::submit_call{{std::move(jobs)}, {}});
    },
    [self](job_info_atom a, const job_id& id) -> caf::result<job_info> {
      return to_calls(self, a, id);
    },
    [self](jobs_by_name_atom a, const std::string& name) -> caf::result<std::vector<job_info>> {
      return to_calls(self, a, name);
    },
    [self](jobs_by_name_atom a, const std::string& name, uint64_t limit)
      -> caf::result<std::vector<job_info>> { return to_calls(self, a, name, limit); },
    [self](list_jobs_atom a, const job_filter& f, const page_request& p)
      -> caf::result<job_page> { return to_calls(self, a, f, p); },
    [self](list_failed_atom a, const job_filter& f, const page_request& p)
      -> caf::result<job_page> { return to_calls(self, a, f, p); },
    [self](retry_failed_atom, const job_id& id) -> caf::result<ok_atom> {
      return retry_one(self, id, false);
    },
    [self](replay_atom, const job_id& id) -> caf::result<ok_atom> {
      return retry_one(self, id, true);
    },
    [self](retry_failed_atom, job_filter& f) -> caf::result<retry_summary> {
      f.status = job_status::failed;
      return run_bulk(self, actors::bulk_kind::retry, std::move(f));
    },
    [self](purge_failed_atom, job_filter& f) -> caf::result<int64_t> {
      f.status = job_status::failed;
      return run_bulk(self, actors::bulk_kind::remove, std::move(f));
    },
    [self](purge_failed_atom, ms older_than) -> caf::result<int64_t> {
      auto filter = self->state.q->failed_before(older_than);
      if (!filter)
        return to_caf_error(filter.error());
      return run_bulk(self, actors::bulk_kind::remove, std::move(*filter));
    },
    [self](cancel_jobs_atom, job_filter& f) -> caf::result<cancel_summary> {
      return run_bulk(self, actors::bulk_kind::cancel, std::move(f));
    },
    [self](delete_jobs_atom, job_filter& f) -> caf::result<int64_t> {
      return run_bulk(self, actors::bulk_kind::remove, std::move(f));
    },
    [&q](counts_atom) -> caf::result<status_counts> { return q.counters->totals(); },
    [self](update_atom, const job_id& id, job_update& changes) -> caf::result<ok_atom> {
      return to_writer(self, actors::update_call{{id, std::move(changes), 0}, {}});
    },
    [self](cancel_atom, const job_id& id) -> caf::result<ok_atom> {
      return to_writer(self, actors::cancel_call{{id}, {}});
    },
    [self](cancel_job_atom, const job_id& id) -> caf::result<ok_atom> {
      return to_writer(self, actors::cancel_job_call{{id}, {}});
    },
    [self](wait_atom a, const job_id& id, ms timeout) -> caf::result<job_info> {
      auto rp = self->make_response_promise();
      auto waits = runtime::job_waits(self->state.q);
      if (self->state.closing || !waits)
        rp.deliver(to_caf_error(self->state.q->closed_status()));
      else
        rp.delegate(waits, a, id, timeout);
      return rp;
    },
    [self](metrics_atom a) -> caf::result<metrics_snapshot> { return to_calls(self, a); },
    [self](add_recurring_atom, recurring_job& r) -> caf::result<job_id> {
      return to_writer(self, actors::put_recurring_call{{std::move(r), storage::put_mode::add}, {}});
    },
    [self](update_recurring_atom, recurring_job& r) -> caf::result<job_id> {
      return to_writer(self,
                       actors::put_recurring_call{{std::move(r), storage::put_mode::update}, {}});
    },
    [self](upsert_recurring_atom, recurring_job& r) -> caf::result<job_id> {
      return to_writer(self,
                       actors::put_recurring_call{{std::move(r), storage::put_mode::upsert}, {}});
    },
    [self](delete_recurring_atom, const std::string& id) -> caf::result<ok_atom> {
      return to_writer(self, actors::delete_recurring_call{{id}, {}});
    },
    [self](recurring_info_atom a, const std::string& id) -> caf::result<recurring_info> {
      return to_calls(self, a, id);
    },
    [self](list_recurring_atom a, const std::string& prefix)
      -> caf::result<std::vector<recurring_info>> { return to_calls(self, a, prefix); },
    [self](group_weight_atom a, const std::string& group, int32_t weight) -> caf::result<ok_atom> {
      return to_calls(self, a, group, weight);
    },
    [self](reset_weights_atom a) -> caf::result<ok_atom> { return to_calls(self, a); },
    [self](pause_group_atom a, const std::string& group) -> caf::result<ok_atom> {
      return to_calls(self, a, group);
    },
    [self](pause_group_atom a, const std::string& group, ms duration) -> caf::result<ok_atom> {
      return to_calls(self, a, group, duration);
    },
    [self](resume_group_atom a, const std::string& group) -> caf::result<ok_atom> {
      return to_calls(self, a, group);
    },
    [self](pause_type_atom a, const std::string& type) -> caf::result<ok_atom> {
      return to_calls(self, a, type);
    },
    [self](pause_recurring_atom a, const std::string& id) -> caf::result<ok_atom> {
      return to_calls(self, a, id);
    },
    [self](pause_recurring_atom a, const std::string& id, ms duration) -> caf::result<ok_atom> {
      return to_calls(self, a, id, duration);
    },
    [self](resume_recurring_atom a, const std::string& id) -> caf::result<ok_atom> {
      return to_calls(self, a, id);
    },
    [self](pause_type_atom a, const std::string& type, ms duration) -> caf::result<ok_atom> {
      return to_calls(self, a, type, duration);
    },
    [self](resume_type_atom a, const std::string& type) -> caf::result<ok_atom> {
      return to_calls(self, a, type);
    },
    [self](resume_all_atom a) -> caf::result<int64_t> { return to_calls(self, a); },
    [self](reset_breaker_atom a, const std::string& type) -> caf::result<ok_atom> {
      return to_calls(self, a, type);
    },
    [self](pause_queue_atom a) -> caf::result<ok_atom> { return to_calls(self, a); },
    [self](pause_queue_atom a, ms duration) -> caf::result<ok_atom> {
      return to_calls(self, a, duration);
    },
    [self](resume_queue_atom a) -> caf::result<ok_atom> { return to_calls(self, a); },
    [self](set_group_atom a, const std::string& group, const settings_change& c)
      -> caf::result<ok_atom> { return to_calls(self, a, group, c); },
    [self](set_type_atom a, const std::string& type, const settings_change& c)
      -> caf::result<ok_atom> { return to_calls(self, a, type, c); },
    [self](reset_group_atom a, const std::string& group) -> caf::result<ok_atom> {
      return to_calls(self, a, group);
    },
    [self](reset_type_atom a, const std::string& type) -> caf::result<ok_atom> {
      return to_calls(self, a, type);
    },
    [self](set_worker_atom a, const std::string& name, const settings_change& c)
      -> caf::result<ok_atom> { return to_calls(self, a, name, c); },
    [self](reset_worker_atom a, const std::string& name) -> caf::result<ok_atom> {
      return to_calls(self, a, name);
    },
    [self](controls_atom a) -> caf::result<std::vector<control_info>> {
      return to_calls(self, a);
    },
    [self](workers_atom a) -> caf::result<std::vector<worker_info>> {
      return to_calls(self, a);
    },
    [self](subscribe_atom, const caf::actor& subscriber) { return subscribe(self, subscriber); },
    [self](unsubscribe_atom, const caf::actor& subscriber) -> caf::result<ok_atom> {
      unsubscribe(self, subscriber.address());
      return ok_atom::value;
    },
    [&q](join_atom) -> caf::result<caf::actor> {
      if (q.closed.load(std::memory_order_acquire))
        return to_caf_error(q.closed_status());
      return caf::actor_cast<caf::actor>(q.dispatcher);
    },
    [self](close_atom) -> caf::result<ok_atom> {
      auto rp = self->make_response_promise();
      self->state.close_requests.push_back(rp);
      close_then_quit(self, caf::exit_reason::normal);
      return rp;
    },
  };
}

}  // namespace

namespace {

// The queue actor as a way in to its queue: a closing queue tells it to exit.
class queue_actor_front final : public runtime::front_end {
 public:
  explicit queue_actor_front(caf::actor_addr actor) : actor_(std::move(actor)) {}
  kind what() const noexcept override { return kind::queue_actor; }
  uint16_t port() const noexcept override { return 0; }
  void stop() override {
    if (auto a = caf::actor_cast<caf::actor>(actor_))
      actors::tell_exit(a, caf::exit_reason::user_shutdown);
  }

 private:
  caf::actor_addr actor_;
};

// A port the queue actor is published on: a closing queue closes it, so no
// node connects to a closed queue.
class actor_port_front final : public runtime::front_end {
 public:
  explicit actor_port_front(std::unique_ptr<transport::acceptor> port)
      : port_(std::move(port)) {}
  kind what() const noexcept override { return kind::actor_port; }
  uint16_t port() const noexcept override { return port_->port(); }
  void stop() override { port_.reset(); }

 private:
  std::unique_ptr<transport::acceptor> port_;
};

// The queue actor over `q`, registered so that start_worker and publish
// find `q` behind its handle.
queue_actor spawn_actor(caf::actor_system& sys, const std::shared_ptr<queue_impl>& q) {
  std::lock_guard<std::mutex> guard{spawned().mtx};
  auto actor = sys.spawn(run, q, runtime::spawn_blocking_calls(sys, q));
  actors::set_gate<std::remove_pointer_t<queue_ptr>>(actor, q->gate);
  spawned().by_actor[actor.address()] = q;
  q->actor = actor.address();
  // A queue that closed meanwhile tells the new actor to exit at once.
  static_cast<void>(q->attach(std::make_unique<queue_actor_front>(actor.address())));
  return actor;
}

status no_middleman() {
  return {error::invalid_argument,
          "the actor system has no network layer: load caf::io::middleman in its config",
          "sys"};
}

std::shared_ptr<queue_impl> spawned_queue(const queue_actor& q) {
  std::lock_guard<std::mutex> guard{spawned().mtx};
  auto i = spawned().by_actor.find(q.address());
  return i != spawned().by_actor.end() ? i->second.lock() : nullptr;
}

// Listens at where.address:where.port (only those, its credentials and
// their roles, and its handshake timeout are read).
result<uint16_t> publish(const queue_actor& q, queue_impl& impl, const listen_options& where) {
  auto& sys = q->home_system();
  if (!sys.has_middleman())
    return no_middleman();
  auto& creds = where.creds;
  if (!creds.secret.empty())
    if (auto st = runtime::validate_secret(creds.secret); !st)
      return st;
  if (auto st = runtime::validate_roles(where); !st)
    return st;
  transport::listener_terms terms;
  auto tls = transport::tls_of(sys);
  if (!where.certificate_roles.empty() && tls.certificate.empty())
    return status{error::invalid_argument, "needs TLS: without it no peer has a certificate",
                  "listen.certificate_roles"};
  if (!tls.certificate.empty()) {
    auto ctx = transport::tls_context::make(tls, true);
    if (!ctx)
      return ctx.error();
    terms.tls = std::move(*ctx);
  }
  terms.bind = where.address;
  terms.port = where.port;
  terms.secret = creds.secret;
  auto secrets = transport::role_secrets(where);
  if (!secrets.empty())
    terms.other_secrets.assign(secrets.begin() + 1, secrets.end());
  terms.certificate_roles = where.certificate_roles;
  terms.realm = transport::realm_of(creds.secret, tls);
  terms.max_message_bytes = transport::max_message_bytes_of(sys);
  terms.handshake_timeout = where.handshake_timeout;
  terms.gate = impl.gate;
  // Before the port opens: no node gets in ahead of the credentials.
  if (auto st = impl.gate->face_network(terms.realm, std::move(secrets)); !st)
    return st;
  if (impl.closed.load(std::memory_order_acquire))
    return impl.closed_status();
  auto listener = transport::acceptor::open(sys, std::move(terms),
                                            caf::actor_cast<caf::strong_actor_ptr>(q),
                                            sys.message_types<queue_actor>());
  if (!listener)
    return listener.error();
  auto bound = (*listener)->port();
  // A queue that closed while the port opened closes it here.
  if (auto st = impl.attach(std::make_unique<actor_port_front>(std::move(*listener))); !st)
    return st;
  // A queue that can't tell tools where it listens still listens.
  if (auto st = impl.record_listener(where.address, bound, !creds.secret.empty(), !tls.certificate.empty());
      !st)
    std::cerr << "ergon: " << st << '\n';
  return bound;
}

}  // namespace

namespace runtime {

status listen(const std::shared_ptr<queue_impl>& q, const listen_options& where) {
  auto actor = spawn_actor(*q->sys, q);
  auto bound = publish(actor, *q, where);
  if (!bound) {
    q->stop(std::chrono::seconds(30));
    return bound.error();
  }
  return {};
}

}  // namespace runtime

result<queue_actor> spawn_queue(caf::actor_system& sys, const std::string& path,
                                options opts) {
  auto opened = runtime::bootstrap(sys, path, std::move(opts));
  if (!opened)
    return opened.error();
  std::shared_ptr<queue_impl> q = std::move(*opened);
  auto actor = spawn_actor(sys, q);
  if (q->opts.listen) {
    auto& where = *q->opts.listen;
    if (auto bound = publish(actor, *q, where); !bound) {
      // Closes the queue and releases the file before the error is returned.
      caf::scoped_actor self{sys};
      self->request(actor, caf::infinite, close_atom::value)
        .receive([](ok_atom) {}, [](caf::error&) {});
      return bound.error();
    }
  }
  return actor;
}

result<uint16_t> publish(const queue_actor& q, uint16_t port, const std::string& bind,
                         const credentials& creds) {
  if (!q)
    return status{error::closed, "the queue actor handle is invalid"};
  auto impl = spawned_queue(q);
  if (!impl)
    return status{error::invalid_argument,
                  "only a queue spawned in this process can be published", "q"};
  listen_options where;
  where.address = bind;
  where.port = port;
  where.creds = creds;
  where.handshake_timeout = transport::handshake_timeout;
  return publish(q, *impl, where);
}

result<uint16_t> listening_port(const queue_actor& q) {
  auto impl = spawned_queue(q);
  if (!impl)
    return status{error::invalid_argument, "not a queue spawned in this process", "q"};
  return impl->port_of(runtime::front_end::kind::actor_port);
}

result<uint16_t> http_port(const queue_actor& q) {
  auto impl = spawned_queue(q);
  if (!impl)
    return status{error::invalid_argument, "not a queue spawned in this process", "q"};
  return impl->port_of(runtime::front_end::kind::http);
}

result<queue_actor> connect(caf::actor_system& sys, const std::string& host, uint16_t port,
                            const credentials& creds) {
  if (!sys.has_middleman())
    return no_middleman();
  if (!creds.secret.empty())
    if (auto st = runtime::validate_secret(creds.secret); !st)
      return st;
  return runtime::connect_remote(sys, {{{host, port}}, {}}, creds);
}

result<queue_actor> connect(caf::actor_system& sys, const connect_options& opts) {
  if (!sys.has_middleman())
    return no_middleman();
  if (!opts.creds.secret.empty())
    if (auto st = runtime::validate_secret(opts.creds.secret); !st)
      return st;
  if (opts.addresses.empty() && opts.owner_of.empty())
    return status{error::invalid_argument,
                  "name at least one server, or the queue's location in owner_of",
                  "addresses"};
  for (auto& a : opts.addresses)
    if (a.host.empty() || a.port == 0)
      return status{error::invalid_argument,
                    "each server needs a host and a port over 0, got '" + a.host + ":"
                      + std::to_string(a.port) + "'",
                    "addresses"};
  using std::chrono::milliseconds;
  if (opts.dial_timeout < milliseconds(100) || opts.dial_timeout > milliseconds(60'000))
    return status{error::invalid_argument,
                  "must be between 100 ms and 60 s, got "
                    + std::to_string(opts.dial_timeout.count()) + " ms",
                  "dial_timeout"};
  if (opts.retry_min < milliseconds(10) || opts.retry_min > opts.retry_max)
    return status{error::invalid_argument,
                  "must be at least 10 ms and at most retry_max, got "
                    + std::to_string(opts.retry_min.count()) + " ms",
                  "retry_min"};
  if (opts.retry_max > milliseconds(60'000))
    return status{error::invalid_argument,
                  "must be at most 60 s, got " + std::to_string(opts.retry_max.count()) + " ms",
                  "retry_max"};
  return runtime::connect_remote(
    sys, {opts.addresses, opts.owner_of, opts.dial_timeout, opts.retry_min, opts.retry_max},
    opts.creds);
}

result<worker> start_worker(const queue_actor& q, worker_options opts) {
  auto impl = spawned_queue(q);
  auto remote = impl ? runtime::remote_connection{} : runtime::find_remote_queue(q);
  if (!impl && !remote)
    return status{error::closed, "no open queue of this process, and no connected queue, is "
                                 "behind this handle"};
  if (auto st = runtime::validate(opts); !st)
    return st;
  if (impl)
    return impl->start_worker(std::move(opts));
  return runtime::start_remote_worker(remote, std::move(opts));
}

}  // namespace ergon
