#include "remote_queue.hpp"

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/blocking_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <functional>
#include <mutex>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "ergon/actors/node_gate.hpp"
#include "ergon/actors/reply.hpp"
#include "ergon/inspector.hpp"
#include "transport/dialer.hpp"
#include "transport/tls_context.hpp"
#include "transport/settings.hpp"
#include "owner_address.hpp"
#include "worker_impl.hpp"

namespace ergon::runtime {
namespace {

// The fronts of this process and their remote queues, so start_worker can
// tell one.
struct remote_queues {
  std::mutex mtx;
  std::map<caf::actor_addr, std::pair<caf::actor_addr, std::shared_ptr<actors::node_gate>>>
    by_front;
};

remote_queues& known() {
  static remote_queues r;
  return r;
}

std::string where(const queue_address& a) { return a.host + ":" + std::to_string(a.port); }

std::string where(const remote_target& t) {
  std::string out = t.owner_of.empty() ? "" : "the owner of " + t.owner_of;
  for (auto& a : t.addresses)
    out += (out.empty() ? "" : ", ") + where(a);
  return out;
}

// The addresses the owner of `location` listens on, to try first.
std::vector<queue_address> owner_addresses(const std::string& location, std::string& why) {
  std::vector<queue_address> out;
  auto found = find_owner(location);
  if (!found) {
    why = "looking the owner up: " + found.error().message();
    return out;
  }
  if (!*found) {
    why = "no process owns " + location + " now";
    return out;
  }
  for (auto& l : (*found)->listeners) {
    auto host = owner_address(**found, l);
    if (host)
      out.push_back({*host, l.port});
    else
      why = host.error().message();
  }
  return out;
}

status unreachable(const remote_target& t, const std::string& why) {
  return {error::unreachable, "the queue at " + where(t) + " is unreachable: " + why};
}

struct remote_queue_state {
  remote_target target;
  credentials creds;
  // Only nodes connected with these credentials (the queue's) reach this
  // actor and the workers of this connection.
  std::shared_ptr<actors::node_gate> gate;
  queue_actor remote;  // empty while disconnected
  // Callers of connect waiting for the first connection.
  std::vector<caf::typed_response_promise<ok_atom>> dialers;
  // Requests at the remote queue, to fail if the connection drops.
  uint64_t last_request = 0;
  std::unordered_map<uint64_t, std::function<void(caf::error)>> in_flight;
  // Workers waiting to register again, and who asked.
  std::vector<std::pair<caf::typed_response_promise<caf::actor>, caf::actor_addr>> rejoining;
  bool connecting = false;
  bool retry_armed = false;
  // The address a round starts at: the one that answered last, or the
  // next after one whose connection dropped.
  size_t start_at = 0;
  std::chrono::milliseconds backoff{0};
  std::chrono::steady_clock::time_point next_attempt{};
  status last_failure{error::unreachable, "the connection dropped"};
  // Fronts and workers it serves; it quits when the last one terminates.
  std::set<caf::actor_addr> holders;

  static inline const char* name = "ergon.remote_queue";
};

using remote_ptr = actors::gated<remote_queue_actor::stateful_base<remote_queue_state>>*;

caf::error unreachable_error(remote_queue_state& st) {
  if (st.last_failure.code() != error::unreachable)
    return to_caf_error(st.last_failure);
  return to_caf_error(unreachable(st.target, st.last_failure.message()));
}

// Answers from the remote queue carry its errors; CAF's own become ergon's.
// Its actor gone (closed and exiting, or cut off) is unreachable from here.
caf::error as_ergon(remote_queue_state& st, const caf::error& e) {
  if (e == caf::sec::request_receiver_down)
    return unreachable_error(st);
  return to_caf_error(to_status(e));
}

// Drops workers that stopped while waiting; true if any still wait.
bool anyone_rejoining(remote_queue_state& st) {
  auto gone = [](const auto& r) { return !caf::actor_cast<caf::strong_actor_ptr>(r.second); };
  st.rejoining.erase(std::remove_if(st.rejoining.begin(), st.rejoining.end(), gone),
                     st.rejoining.end());
  return !st.rejoining.empty();
}

void retry_later(remote_ptr self);

// Workers waiting drive the retries; clients retry on their next request
// once the backoff has passed.
void retry_later(remote_ptr self) {
  auto& st = self->state;
  st.next_attempt = std::chrono::steady_clock::now() + st.backoff;
  auto wait = st.backoff;
  st.backoff = std::min(st.backoff * 2, st.target.retry_max);
  if (anyone_rejoining(st) && !st.retry_armed) {
    st.retry_armed = true;
    self->delayed_send(self, wait, reconnect_atom::value);
  }
}

void attempt_failed(remote_ptr self, status why) {
  auto& st = self->state;
  st.connecting = false;
  st.last_failure = std::move(why);
  for (auto& d : st.dialers)
    d.deliver(unreachable_error(st));
  st.dialers.clear();
  retry_later(self);
}

// A worker that waits to register again gets the dispatcher once the queue
// answers. Until then (the queue is closing, or the connection drops again)
// it keeps waiting and the join is tried again later, so workers outlive a
// server restart.
void answer_rejoining(remote_ptr self) {
  auto& st = self->state;
  auto waiting = std::move(st.rejoining);
  st.rejoining.clear();
  for (auto& [rp, who] : waiting) {
    auto id = ++st.last_request;
    st.in_flight.emplace(id, [self, rp = rp, who = who](caf::error) mutable {
      self->state.rejoining.emplace_back(std::move(rp), std::move(who));
    });
    self->request(st.remote, caf::infinite, join_atom::value)
      .then(
        [self, id, rp = rp](caf::actor& dispatcher) mutable {
          if (self->state.in_flight.erase(id) == 1)
            rp.deliver(std::move(dispatcher));
        },
        [self, id](caf::error& e) {
          auto i = self->state.in_flight.find(id);
          if (i == self->state.in_flight.end())
            return;
          auto requeue = std::move(i->second);
          self->state.in_flight.erase(i);
          requeue(e);
          retry_later(self);
        });
  }
}

void connected(remote_ptr self, queue_actor q, size_t at) {
  auto& st = self->state;
  st.connecting = false;
  for (auto& d : st.dialers)
    d.deliver(ok_atom::value);
  st.dialers.clear();
  st.backoff = st.target.retry_min;
  if (at < st.target.addresses.size())
    st.start_at = at;
  st.remote = std::move(q);
  self->monitor(st.remote);
  answer_rejoining(self);
}

// Tries the addresses in turn from `start` until one answers. A failure
// that no other server changes (credentials, version) wins over
// `unreachable`, which names each address.
// The owner's own addresses (owner_of) come first; an answer from one of
// them gives the index addresses.size().
result<std::pair<transport::dialed, size_t>> dial_round(caf::actor_system& sys,
                                                         const remote_target& target,
                                                         size_t start, const credentials& creds) {
  auto n = target.addresses.size();
  std::string why;
  // The addresses of this round, each with the index an answer gives.
  std::vector<std::pair<queue_address, size_t>> round;
  if (!target.owner_of.empty()) {
    for (auto& a : owner_addresses(target.owner_of, why))
      round.emplace_back(std::move(a), n);
    if (round.empty() && n == 0 && why.empty())
      why = "the owner takes no connections";
  }
  for (size_t k = 0; k < n; ++k)
    round.emplace_back(target.addresses[(start + k) % n], (start + k) % n);
  std::optional<status> telling;
  for (auto& [a, at] : round) {
    auto dialed = transport::dial(sys, a.host, a.port, creds, target.dial_timeout);
    if (dialed)
      return std::make_pair(std::move(*dialed), at);
    if (round.size() == 1 && target.owner_of.empty())
      return dialed.error();
    if (dialed.error().code() != error::unreachable && !telling)
      telling = dialed.error();
    why += (why.empty() ? "" : "; ") + dialed.error().message();
  }
  if (telling)
    return *telling;
  return status{error::unreachable, "no server of the queue answers: " + why};
}

// Connects and runs the handshakes on a thread of its own (they block),
// then answers as CAF's remote_actor does, with the address that answered.
void run_dialer(caf::blocking_actor* self, remote_target target, size_t start,
                credentials creds) {
  self->receive(
    [&](dial_atom)
      -> caf::result<caf::node_id, caf::strong_actor_ptr, std::set<std::string>, uint64_t> {
      auto dialed = dial_round(self->home_system(), target, start, creds);
      if (!dialed)
        return to_caf_error(dialed.error());
      auto& [d, at] = *dialed;
      return {std::move(d.node), std::move(d.actor), std::move(d.ifs), at};
    });
}

void try_connect(remote_ptr self) {
  auto& st = self->state;
  if (st.remote || st.connecting)
    return;
  st.connecting = true;
  auto dialer = self->home_system().spawn(run_dialer, st.target, st.start_at, st.creds);
  self->request(dialer, caf::infinite, dial_atom::value)
    .then(
      [self](caf::node_id&, caf::strong_actor_ptr& ptr, std::set<std::string>& ifs, uint64_t at) {
        auto expected = self->home_system().message_types<queue_actor>();
        auto& target = self->state.target;
        if (!ptr || !std::includes(ifs.begin(), ifs.end(), expected.begin(), expected.end())) {
          auto there = at < target.addresses.size() ? where(target.addresses[at])
                                                    : "the owner of " + target.owner_of;
          attempt_failed(self, {error::closed, "the actor at " + there
                                                 + " is not an ergon queue of this version"});
          return;
        }
        connected(self, caf::actor_cast<queue_actor>(ptr), at);
      },
      [self](caf::error& e) { attempt_failed(self, to_status(e)); });
}

// The connection dropped (or the queue closed): nothing in flight will be
// answered by it.
void on_down(remote_ptr self, const caf::down_msg& down) {
  auto& st = self->state;
  if (st.holders.erase(down.source) == 1) {
    if (st.holders.empty())
      self->quit();
    return;
  }
  if (down.source != st.remote.address())
    return;
  st.remote = queue_actor{};
  st.last_failure = {error::unreachable, "the connection dropped"};
  // Another server may own the queue now: it comes first next round.
  if (!st.target.addresses.empty())
    st.start_at = (st.start_at + 1) % st.target.addresses.size();
  auto in_flight = std::move(st.in_flight);
  st.in_flight.clear();
  for (auto& [id, fail] : in_flight)
    fail(unreachable_error(st));
  retry_later(self);
}

// Forwards one request; its answer, or `unreachable`, goes to the caller.
template <class Out, class... Ts>
caf::result<Out> forward(remote_ptr self, Ts... xs) {
  auto& st = self->state;
  if (!st.remote) {
    if (std::chrono::steady_clock::now() >= st.next_attempt)
      try_connect(self);
    return unreachable_error(st);
  }
  auto rp = self->make_response_promise<Out>();
  auto id = ++st.last_request;
  st.in_flight.emplace(id, [rp](caf::error e) mutable { rp.deliver(std::move(e)); });
  self->request(st.remote, caf::infinite, std::move(xs)...)
    .then(
      [self, id, rp](Out& x) mutable {
        if (self->state.in_flight.erase(id) == 1)
          rp.deliver(std::move(x));
      },
      [self, id, rp](caf::error& e) mutable {
        if (self->state.in_flight.erase(id) == 1)
          rp.deliver(as_ergon(self->state, e));
      });
  return rp;
}

using ms = std::chrono::milliseconds;

remote_queue_actor::behavior_type run(remote_ptr self, remote_target target,
                                      credentials creds,
                                      std::shared_ptr<actors::node_gate> gate) {
  auto& st = self->state;
  st.target = std::move(target);
  st.backoff = st.target.retry_min;
  st.creds = std::move(creds);
  st.gate = std::move(gate);
  self->set_down_handler([self](caf::down_msg& down) { on_down(self, down); });
  return {
    [self](submit_atom a, job& j) { return forward<job_id>(self, a, std::move(j)); },
    [self](submit_atom a, std::vector<job>& jobs) {
      return forward<std::vector<job_id>>(self, a, std::move(jobs));
    },
    [self](job_info_atom a, const job_id& id) { return forward<job_info>(self, a, id); },
    [self](jobs_by_name_atom a, const std::string& name) {
      return forward<std::vector<job_info>>(self, a, name);
    },
    [self](counts_atom a) { return forward<status_counts>(self, a); },
    [self](update_atom a, const job_id& id, job_update& changes) {
      return forward<ok_atom>(self, a, id, std::move(changes));
    },
    [self](cancel_atom a, const job_id& id) { return forward<ok_atom>(self, a, id); },
    [self](cancel_job_atom a, const job_id& id) { return forward<ok_atom>(self, a, id); },
    [self](jobs_by_name_atom a, const std::string& name, uint64_t limit) {
      return forward<std::vector<job_info>>(self, a, name, limit);
    },
    [self](list_jobs_atom a, const job_filter& f, const page_request& p) {
      return forward<job_page>(self, a, f, p);
    },
    [self](list_failed_atom a, const job_filter& f, const page_request& p) {
      return forward<job_page>(self, a, f, p);
    },
    [self](retry_failed_atom a, const job_id& id) { return forward<ok_atom>(self, a, id); },
    [self](replay_atom a, const job_id& id) { return forward<ok_atom>(self, a, id); },
    [self](retry_failed_atom a, const job_filter& f) {
      return forward<retry_summary>(self, a, f);
    },
    [self](purge_failed_atom a, const job_filter& f) { return forward<int64_t>(self, a, f); },
    [self](purge_failed_atom a, std::chrono::milliseconds older_than) {
      return forward<int64_t>(self, a, older_than);
    },
    [self](cancel_jobs_atom a, const job_filter& f) { return forward<cancel_summary>(self, a, f); },
    [self](delete_jobs_atom a, const job_filter& f) { return forward<int64_t>(self, a, f); },
    [self](wait_atom a, const job_id& id, std::chrono::milliseconds timeout) {
      return forward<job_info>(self, a, id, timeout);
    },
    [self](metrics_atom a) { return forward<metrics_snapshot>(self, a); },
    [self](add_recurring_atom a, recurring_job& r) { return forward<job_id>(self, a, std::move(r)); },
    [self](update_recurring_atom a, recurring_job& r) {
      return forward<job_id>(self, a, std::move(r));
    },
    [self](upsert_recurring_atom a, recurring_job& r) {
      return forward<job_id>(self, a, std::move(r));
    },
    [self](delete_recurring_atom a, const std::string& id) { return forward<ok_atom>(self, a, id); },
    [self](recurring_info_atom a, const std::string& id) {
      return forward<recurring_info>(self, a, id);
    },
    [self](list_recurring_atom a, const std::string& prefix) {
      return forward<std::vector<recurring_info>>(self, a, prefix);
    },
    [self](group_weight_atom a, const std::string& group, int32_t weight) {
      return forward<ok_atom>(self, a, group, weight);
    },
    [self](reset_weights_atom a) { return forward<ok_atom>(self, a); },
    [self](pause_group_atom a, const std::string& group) {
      return forward<ok_atom>(self, a, group);
    },
    [self](pause_group_atom a, const std::string& group, ms duration) {
      return forward<ok_atom>(self, a, group, duration);
    },
    [self](resume_group_atom a, const std::string& group) {
      return forward<ok_atom>(self, a, group);
    },
    [self](pause_type_atom a, const std::string& type) {
      return forward<ok_atom>(self, a, type);
    },
    [self](pause_type_atom a, const std::string& type, ms duration) {
      return forward<ok_atom>(self, a, type, duration);
    },
    [self](resume_type_atom a, const std::string& type) {
      return forward<ok_atom>(self, a, type);
    },
    [self](pause_recurring_atom a, const std::string& id) { return forward<ok_atom>(self, a, id); },
    [self](pause_recurring_atom a, const std::string& id, ms duration) {
      return forward<ok_atom>(self, a, id, duration);
    },
    [self](resume_recurring_atom a, const std::string& id) {
      return forward<ok_atom>(self, a, id);
    },
    [self](resume_all_atom a) { return forward<int64_t>(self, a); },
    [self](reset_breaker_atom a, const std::string& type) {
      return forward<ok_atom>(self, a, type);
    },
    [self](pause_queue_atom a) { return forward<ok_atom>(self, a); },
    [self](pause_queue_atom a, ms duration) { return forward<ok_atom>(self, a, duration); },
    [self](resume_queue_atom a) { return forward<ok_atom>(self, a); },
    [self](set_group_atom a, const std::string& group, const settings_change& c) {
      return forward<ok_atom>(self, a, group, c);
    },
    [self](set_type_atom a, const std::string& type, const settings_change& c) {
      return forward<ok_atom>(self, a, type, c);
    },
    [self](reset_group_atom a, const std::string& group) {
      return forward<ok_atom>(self, a, group);
    },
    [self](reset_type_atom a, const std::string& type) {
      return forward<ok_atom>(self, a, type);
    },
    [self](set_worker_atom a, const std::string& name, const settings_change& c) {
      return forward<ok_atom>(self, a, name, c);
    },
    [self](reset_worker_atom a, const std::string& name) {
      return forward<ok_atom>(self, a, name);
    },
    [self](controls_atom a) { return forward<std::vector<control_info>>(self, a); },
    [self](workers_atom a) { return forward<std::vector<worker_info>>(self, a); },
    [self](subscribe_atom a, const caf::actor& subscriber) {
      return forward<ok_atom>(self, a, subscriber);
    },
    [self](unsubscribe_atom a, const caf::actor& subscriber) {
      return forward<ok_atom>(self, a, subscriber);
    },
    [self](close_atom a) { return forward<ok_atom>(self, a); },
    [self](join_atom a) { return forward<caf::actor>(self, a); },
    [self](rejoin_atom) -> caf::result<caf::actor> {
      auto& st = self->state;
      // Before the promise: making it takes the sender out of the message.
      auto who = caf::actor_cast<caf::actor_addr>(self->current_sender());
      st.rejoining.emplace_back(self->make_response_promise<caf::actor>(), std::move(who));
      auto rp = st.rejoining.back().first;
      if (st.remote)
        answer_rejoining(self);
      else if (!st.retry_armed)
        try_connect(self);
      return rp;
    },
    [self](hold_atom, const caf::actor& holder) {
      self->state.holders.insert(holder.address());
      self->monitor(holder);
    },
    [self](dial_atom) -> caf::result<ok_atom> {
      auto& st = self->state;
      if (st.remote)
        return ok_atom::value;
      st.dialers.push_back(self->make_response_promise<ok_atom>());
      try_connect(self);
      return st.dialers.back();
    },
    [self](reconnect_atom) {
      auto& st = self->state;
      st.retry_armed = false;
      if (!anyone_rejoining(st))
        return;
      if (st.remote)
        answer_rejoining(self);
      else
        try_connect(self);
    },
  };
}

struct front_state {
  caf::actor_addr self;

  ~front_state() {
    std::lock_guard<std::mutex> guard{known().mtx};
    known().by_front.erase(self);
  }

  static inline const char* name = "ergon.remote_queue_front";
};

// Passes every message on to the remote queue, keeping its sender, so the
// answer goes straight back.
caf::behavior run_front(caf::stateful_actor<front_state>* self, caf::actor link) {
  self->state.self = self->address();
  self->set_default_handler(
    [link](caf::scheduled_actor* s, caf::message_view& x) -> caf::result<caf::message> {
      static_cast<caf::local_actor*>(s)->delegate(link, x.move_content_to_message());
      return caf::delegated<caf::message>{};
    });
  return {[](hold_atom) {}};  // nothing is sent this; a behavior keeps it running
}

}  // namespace

result<queue_actor> connect_remote(caf::actor_system& sys, const remote_target& target,
                                   const credentials& creds) {
  auto gate = std::make_shared<actors::node_gate>();
  if (auto st = gate->face_network(transport::realm_of(creds.secret, transport::tls_of(sys)));
      !st)
    return st;
  auto link = sys.spawn(run, target, creds, gate);
  actors::set_gate<std::remove_pointer_t<remote_ptr>>(link, gate);
  status dialed;
  caf::scoped_actor self{sys};
  self->request(link, caf::infinite, dial_atom::value)
    .receive([](ok_atom) {}, [&](caf::error& e) { dialed = to_status(e); });
  if (!dialed) {
    self->send_exit(link, caf::exit_reason::user_shutdown);
    return dialed;
  }
  std::lock_guard<std::mutex> guard{known().mtx};
  auto front = sys.spawn(run_front, caf::actor_cast<caf::actor>(link));
  known().by_front.emplace(front.address(), std::make_pair(link.address(), gate));
  actors::tell(link, hold_atom::value, front);
  return caf::actor_cast<queue_actor>(front);
}

remote_connection find_remote_queue(const queue_actor& q) {
  std::lock_guard<std::mutex> guard{known().mtx};
  auto i = q ? known().by_front.find(q.address()) : known().by_front.end();
  if (i == known().by_front.end())
    return {};
  return {caf::actor_cast<remote_queue_actor>(i->second.first), i->second.second};
}

result<worker> start_remote_worker(const remote_connection& q, worker_options opts) {
  auto& sys = q.link->home_system();
  result<caf::actor> dispatcher = status{error::internal, "join was not answered"};
  caf::scoped_actor self{sys};
  self->request(q.link, caf::infinite, join_atom::value)
    .receive([&](caf::actor& d) { dispatcher = std::move(d); },
             [&](caf::error& e) { dispatcher = to_status(e); });
  if (!dispatcher)
    return dispatcher.error();
  auto w = worker_impl::spawn(sys, std::move(opts), default_clock(), std::move(*dispatcher),
                               q.gate, caf::actor_cast<caf::actor>(q.link));
  actors::tell(q.link, hold_atom::value, caf::actor_cast<caf::actor>(w->actor));
  return runtime_access::make_worker(std::move(w));
}

}  // namespace ergon::runtime
