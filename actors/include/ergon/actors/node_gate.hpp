// Which nodes may message an actor that faces the network.
//
// CAF 0.17 delivers a message from any connected node to any actor whose
// handle ever crossed the wire (its registry is global and actor ids are
// small integers), so a check in one gateway actor is no boundary. Each
// actor that faces the network is a gated<...> instead: it checks the
// sender's node as the message is enqueued, before any handler, exit or
// down handler, or response handler sees it.
#pragma once

#include <caf/actor_cast.hpp>
#include <caf/actor_control_block.hpp>
#include <caf/type_erased_tuple.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/make_message.hpp>
#include <caf/node_id.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "ergon/error.hpp"
#include "ergon/wire.hpp"

namespace ergon::actors {

/// Open (the default) it lets every node through. Closed, it lets through
/// only this process and the nodes admitted since: those that proved the
/// queue's secret, or the queue node a connection authenticated.
/// Thread-safe.
class node_gate {
 public:
  node_gate() = default;
  node_gate(const node_gate&) = delete;
  node_gate& operator=(const node_gate&) = delete;

  /// From now on only this process and admitted nodes get through.
  void close() { closed_.store(true, std::memory_order_release); }

  bool closed() const { return closed_.load(std::memory_order_acquire); }

  /// Closes the gate with `secret` as the key nodes must prove. Errors:
  /// invalid_argument if a different secret was set before.
  status lock_with(const std::string& secret);

  /// The key set by lock_with; empty if none.
  std::string secret() const;

  void admit(const caf::node_id& node);
  void forget(const caf::node_id& node);
  bool admitted(const caf::node_id& node) const;

  /// True if a message from `sender` may pass: the gate is open, there is
  /// no sender or it runs in this process (`local`), or its node was
  /// admitted.
  bool admits(const caf::strong_actor_ptr& sender, const caf::node_id& local) const {
    if (!closed() || !sender || sender->node() == local)
      return true;
    return admitted(sender->node());
  }

  void count_refused() { refused_.fetch_add(1, std::memory_order_relaxed); }
  void count_failed_handshake() { failed_handshakes_.fetch_add(1, std::memory_order_relaxed); }
  void count_rejected() { rejected_.fetch_add(1, std::memory_order_relaxed); }
  /// Messages dropped because their node had not authenticated.
  int64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  /// Handshakes that proved a wrong secret (or none).
  int64_t failed_handshakes() const {
    return failed_handshakes_.load(std::memory_order_relaxed);
  }
  /// Protocol messages rejected as malformed or out of range.
  int64_t rejected() const { return rejected_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> closed_{false};
  mutable std::mutex mtx_;
  std::string secret_;
  std::set<caf::node_id> admitted_;
  std::atomic<int64_t> refused_{0};
  std::atomic<int64_t> failed_handshakes_{0};
  std::atomic<int64_t> rejected_{0};
};

/// True for the handshake messages (hello, prove), which pass every gate:
/// they are how a node gets admitted.
bool is_handshake(const caf::type_erased_tuple& content);

/// The answer to a request refused by a gate.
caf::message refusal(const caf::node_id& node);

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
    if (gate && !gate->admits(what->sender, local_)
        && !is_handshake(what->content())) {
      gate->count_refused();
      auto& to = what->stages.empty() ? what->sender : what->stages.back();
      if (what->mid.is_request() && to)
        to->enqueue(caf::strong_actor_ptr{this->ctrl()}, what->mid.response_id(),
                    refusal(what->sender->node()), eu);
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

}  // namespace ergon::actors
