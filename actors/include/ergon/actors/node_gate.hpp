// Which messages may reach an actor that faces the network.
//
// The transport (runtime/src/transport) is the boundary: a connection
// reaches CAF only after ergon's handshake, and carries only messages
// between its two ends. The gate is the second line, in each actor that
// faces the network: it checks the sender as the message is enqueued,
// before any handler, exit or down handler, or response handler sees it.
// CAF 0.17 delivers a message from any connected node to any actor whose
// handle ever crossed the wire, so a check in one gateway actor would not do.
#pragma once

#include <caf/actor_cast.hpp>
#include <caf/actor_control_block.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/make_message.hpp>
#include <caf/node_id.hpp>
#include <caf/send.hpp>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "ergon/credentials.hpp"
#include "ergon/error.hpp"
#include "ergon/wire.hpp"

namespace ergon::actors {

/// The nodes that have a live connection which passed ergon's handshake,
/// by realm (a name for the credentials the handshake checked: "" for
/// none; runtime/src/transport names the others), with the role the
/// credentials it proved grant.
/// The transport adds a node when a connection's BASP handshake names it,
/// and removes it when that connection ends. One per process; thread-safe.
class admissions {
 public:
  static admissions& of_process();

  /// Admits `node` in `realm` with `granted`, unless it is live in another
  /// realm or with another role: a node id is the peer's to choose, and CAF
  /// would take a second connection naming a connected node as another
  /// route to it. False then, and nothing changes.
  bool add(const caf::node_id& node, const std::string& realm, role granted);
  void remove(const caf::node_id& node, const std::string& realm);
  /// The role `node` has in `realm`; empty if it is not admitted there.
  std::optional<role> role_of(const caf::node_id& node, const std::string& realm) const;

 private:
  struct live {
    std::string realm;
    role granted = role::operator_;
    int connections = 0;
  };
  // Read for every message from another node; written per connection.
  mutable std::shared_mutex mtx_;
  // A short list per node.
  std::map<caf::node_id, std::vector<live>> live_;
};

/// The role a message needs (docs/distribution.md, "Roles"), by its first
/// element: a worker's protocol messages and join need role::worker; a
/// submit or a read needs role::client; anything else needs operator.
role needed_role(const caf::type_erased_tuple& content);

/// Whether a peer of role `held` may send what needs `needed`.
constexpr bool permits(role held, role needed) {
  return held == role::operator_ || held == needed;
}

/// A secret the queue takes, and the role it grants.
struct role_secret {
  std::string secret;
  role granted = role::operator_;

  bool operator==(const role_secret& x) const {
    return secret == x.secret && granted == x.granted;
  }
};

/// Whether the `count`th refusal is logged: the first, then one in a
/// thousand, so a flood can't fill the log.
constexpr bool worth_logging(int64_t count) {
  return count == 1 || count % 1000 == 0;
}

/// Unlocked (the default) it lets everything through: the actor does not
/// face the network. Once it faces the network, it refuses messages
/// without a sender (but answers: CAF bounces failed requests without one)
/// and with a forwarding stack from another node, and lets in only this
/// process and, unless its realm is "" (no credentials), the nodes with a
/// live connection of its realm. Thread-safe.
class node_gate {
 public:
  node_gate() = default;
  node_gate(const node_gate&) = delete;
  node_gate& operator=(const node_gate&) = delete;

  /// From now on the gate admits only what its realm admits, and to each
  /// node what its role permits. `secrets` (the queue's, which grants
  /// operator, first) are kept for the HTTP endpoint. Errors:
  /// invalid_argument ("secret") if the gate faces the network with other
  /// credentials already.
  status face_network(const std::string& realm, std::vector<role_secret> secrets = {});

  bool faces_network() const { return faces_network_.load(std::memory_order_acquire); }

  /// The secrets given to face_network; empty if none.
  std::vector<role_secret> secrets() const;

  /// What the gate makes of a message.
  struct verdict {
    enum { admit, unauthenticated, forbidden } kind = admit;
    role held = role::operator_;    ///< forbidden: the sender's role
    role needed = role::operator_;  ///< forbidden: what the message needs
  };

  /// Whether `what` may pass; `local` is this process's node.
  verdict judge(const caf::mailbox_element& what, const caf::node_id& local) const;
  bool admits(const caf::mailbox_element& what, const caf::node_id& local) const {
    return judge(what, local).kind == verdict::admit;
  }

  void count_refused() { refused_.fetch_add(1, std::memory_order_relaxed); }
  void count_forbidden() { forbidden_.fetch_add(1, std::memory_order_relaxed); }
  void count_failed_handshake() { failed_handshakes_.fetch_add(1, std::memory_order_relaxed); }
  void count_rejected() { rejected_.fetch_add(1, std::memory_order_relaxed); }
  void count_refused_connection() {
    refused_connections_.fetch_add(1, std::memory_order_relaxed);
  }
  /// Messages a gate dropped.
  int64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  /// Requests refused for their sender's role (the actor port and HTTP).
  int64_t forbidden() const { return forbidden_.load(std::memory_order_relaxed); }
  /// Handshakes that proved a wrong secret, none, or no certificate.
  int64_t failed_handshakes() const {
    return failed_handshakes_.load(std::memory_order_relaxed);
  }
  /// Protocol messages rejected as malformed or out of range.
  int64_t rejected() const { return rejected_.load(std::memory_order_relaxed); }
  /// Connections the transport closed for breaking its rules.
  int64_t refused_connections() const {
    return refused_connections_.load(std::memory_order_relaxed);
  }

 private:
  std::atomic<bool> faces_network_{false};
  mutable std::mutex mtx_;
  // Written once, before faces_network_ is set; read without the lock after.
  std::string realm_;
  std::vector<role_secret> secrets_;
  std::atomic<int64_t> refused_{0};
  std::atomic<int64_t> forbidden_{0};
  std::atomic<int64_t> failed_handshakes_{0};
  std::atomic<int64_t> rejected_{0};
  std::atomic<int64_t> refused_connections_{0};
};

/// The answer to a request refused by a gate: unauthenticated, or
/// forbidden naming the role it needs.
caf::message refusal(const caf::strong_actor_ptr& sender, const node_gate::verdict& why);

/// Logs a message a gate refused: the first one of each gate, then one in a
/// thousand, so a flood can't fill the log.
void log_refused(const caf::mailbox_element& what, const char* actor, int64_t count,
                 const node_gate::verdict& why);

/// `Base` (a CAF actor type) whose mailbox takes only what its gate
/// admits; a refused request is answered `unauthenticated`, anything else
/// refused is dropped. Without a gate it takes everything.
template <class Base>
class gated : public Base {
 public:
  using Base::Base;

  /// Call once, right after spawning and before the handle leaves the
  /// spawning code (so before it can cross the wire).
  void set_gate(std::shared_ptr<node_gate> gate) {
    local_ = this->home_system().node();
    owner_ = std::move(gate);
    gate_.store(owner_.get(), std::memory_order_release);
  }

  // Touches nothing of the actor system: a job thread may still send to a
  // terminated actor after a queue's own system was destroyed.
  void enqueue(caf::mailbox_element_ptr what, caf::execution_unit* eu) override {
    auto gate = gate_.load(std::memory_order_acquire);
    auto why = gate ? gate->judge(*what, local_) : node_gate::verdict{};
    if (why.kind != node_gate::verdict::admit) {
      bool forbidden = why.kind == node_gate::verdict::forbidden;
      forbidden ? gate->count_forbidden() : gate->count_refused();
      log_refused(*what, this->name(), forbidden ? gate->forbidden() : gate->refused(), why);
      // Only to the sender itself: a forwarding stack names whoever the
      // peer liked.
      auto& to = what->sender;
      if (what->mid.is_request() && to && what->stages.empty())
        to->enqueue(caf::strong_actor_ptr{this->ctrl()}, what->mid.response_id(),
                    refusal(to, why), eu);
      return;
    }
    Base::enqueue(std::move(what), eu);
  }

 private:
  std::shared_ptr<node_gate> owner_;
  caf::node_id local_;  // set before gate_ is published
  std::atomic<node_gate*> gate_{nullptr};
};

/// Gives the actor behind `handle` (spawned as gated<...>) its gate.
template <class Impl, class Handle>
void set_gate(const Handle& handle, std::shared_ptr<node_gate> gate) {
  if (gate)
    static_cast<Impl*>(caf::actor_cast<caf::abstract_actor*>(handle))->set_gate(std::move(gate));
}

/// Sends `xs` to `to` from this process's own code that is not an actor (a
/// job's thread, the blocking API): gated actors refuse messages without a
/// sender, so these carry the receiver as theirs. Nothing answers them.
template <class Handle, class... Ts>
void tell(const Handle& to, Ts&&... xs) {
  using token = caf::detail::type_list<caf::detail::strip_and_convert_t<Ts>...>;
  static_assert(caf::response_type_unbox<caf::signatures_of_t<Handle>, token>::valid,
                "the receiver does not accept this message");
  if (to)
    to->eq_impl(caf::make_message_id(), caf::actor_cast<caf::strong_actor_ptr>(to), nullptr,
                std::forward<Ts>(xs)...);
}

/// Asks `to` to exit with `reason`, as tell() sends: with a sender.
void tell_exit(const caf::actor& to, caf::error reason);

}  // namespace ergon::actors
