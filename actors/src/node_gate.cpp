#include "ergon/actors/node_gate.hpp"

#include <caf/message.hpp>

#include "ergon/error.hpp"

namespace ergon::actors {

status node_gate::lock_with(const std::string& secret) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!secret_.empty() && secret_ != secret)
      return {error::invalid_argument,
              "the queue is already published with a different secret", "secret"};
    secret_ = secret;
  }
  close();
  return {};
}

std::string node_gate::secret() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return secret_;
}

void node_gate::admit(const caf::node_id& node) {
  std::lock_guard<std::mutex> guard{mtx_};
  admitted_.insert(node);
}

void node_gate::forget(const caf::node_id& node) {
  std::lock_guard<std::mutex> guard{mtx_};
  admitted_.erase(node);
}

bool node_gate::admitted(const caf::node_id& node) const {
  std::lock_guard<std::mutex> guard{mtx_};
  return admitted_.count(node) > 0;
}

bool is_handshake(const caf::type_erased_tuple& content) {
  return !content.empty()
         && (content.match_element<hello_atom>(0) || content.match_element<prove_atom>(0));
}

caf::message refusal(const caf::node_id& node) {
  return caf::make_message(to_caf_error(
    {error::unauthenticated, "node " + caf::to_string(node)
                               + " has not authenticated: connect with the queue's secret"}));
}

}  // namespace ergon::actors
