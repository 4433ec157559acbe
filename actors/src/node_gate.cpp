#include "ergon/actors/node_gate.hpp"

#include <caf/exit_reason.hpp>
#include <caf/message.hpp>
#include <caf/system_messages.hpp>

#include <iostream>

#include "ergon/error.hpp"

namespace ergon::actors {
namespace {

// CAF sends a down message without a sender when the actor that ended has
// no strong reference left, and bounces failed requests without one.
bool answer_or_down(const caf::mailbox_element& what) {
  auto& content = what.content();
  if (content.size() != 1)
    return false;
  if (what.mid.is_response())
    return content.match_element<caf::error>(0);
  return content.match_element<caf::down_msg>(0);
}

// A down message about its own sender: CAF makes one for each monitor of a
// proxy when a connection ends, after its admission is gone, and it speaks
// only for its sender. (No gated actor links to a remote one, so no exit
// message needs the same.)
bool down_of_itself(const caf::mailbox_element& what) {
  auto& content = what.content();
  return content.size() == 1 && content.match_element<caf::down_msg>(0)
         && content.get_as<caf::down_msg>(0).source
              == caf::actor_cast<caf::actor_addr>(what.sender);
}

std::string brief(const caf::type_erased_tuple& content) {
  auto text = content.stringify();
  return text.size() <= 120 ? text : text.substr(0, 120) + "...";
}

}  // namespace

admissions& admissions::of_process() {
  static admissions table;
  return table;
}

bool admissions::add(const caf::node_id& node, const std::string& realm) {
  std::unique_lock<std::shared_mutex> guard{mtx_};
  auto& realms = live_[node];
  for (auto& [name, count] : realms) {
    if (name != realm)
      return false;
    ++count;
    return true;
  }
  realms.emplace_back(realm, 1);
  return true;
}

void admissions::remove(const caf::node_id& node, const std::string& realm) {
  std::unique_lock<std::shared_mutex> guard{mtx_};
  auto i = live_.find(node);
  if (i == live_.end())
    return;
  auto& realms = i->second;
  for (auto j = realms.begin(); j != realms.end(); ++j)
    if (j->first == realm) {
      if (--j->second <= 0)
        realms.erase(j);
      break;
    }
  if (realms.empty())
    live_.erase(i);
}

bool admissions::admitted(const caf::node_id& node, const std::string& realm) const {
  std::shared_lock<std::shared_mutex> guard{mtx_};
  auto i = live_.find(node);
  if (i == live_.end())
    return false;
  for (auto& entry : i->second)
    if (entry.first == realm)
      return true;
  return false;
}

status node_gate::face_network(const std::string& realm, const std::string& secret) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (faces_network()) {
    if (realm_ != realm || secret_ != secret)
      return {error::invalid_argument,
              "the queue already faces the network with other credentials", "secret"};
    return {};
  }
  realm_ = realm;
  secret_ = secret;
  faces_network_.store(true, std::memory_order_release);
  return {};
}

std::string node_gate::secret() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return secret_;
}

bool node_gate::admits(const caf::mailbox_element& what, const caf::node_id& local) const {
  if (!faces_network())
    return true;
  auto& sender = what.sender;
  if (!sender)
    return answer_or_down(what);
  if (sender->node() == local)
    return true;
  if (!what.stages.empty())
    return false;
  return realm_.empty() || admissions::of_process().admitted(sender->node(), realm_)
         || down_of_itself(what);
}

caf::message refusal(const caf::strong_actor_ptr& sender) {
  return caf::make_message(to_caf_error(
    {error::unauthenticated, "node " + caf::to_string(sender->node())
                               + " has not authenticated: connect with the queue's credentials"}));
}

void log_refused(const caf::mailbox_element& what, const char* actor, int64_t count) {
  if (count != 1 && count % 1000 != 0)
    return;
  std::cerr << "ergon: " << actor << " refused a message "
            << (what.sender ? "from node " + caf::to_string(what.sender->node())
                            : std::string{"without a sender"})
            << " (" << brief(what.content()) << "); "
            << count << " refused so far\n";
}

void tell_exit(const caf::actor& to, caf::error reason) {
  if (to)
    to->enqueue(caf::actor_cast<caf::strong_actor_ptr>(to), caf::make_message_id(),
                caf::make_message(caf::exit_msg{to.address(), std::move(reason)}), nullptr);
}

}  // namespace ergon::actors
