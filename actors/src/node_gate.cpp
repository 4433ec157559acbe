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

bool admissions::add(const caf::node_id& node, const std::string& realm, role granted) {
  std::unique_lock<std::shared_mutex> guard{mtx_};
  auto& realms = live_[node];
  for (auto& entry : realms) {
    if (entry.realm != realm || entry.granted != granted)
      return false;
    ++entry.connections;
    return true;
  }
  realms.push_back({realm, granted, 1});
  return true;
}

void admissions::remove(const caf::node_id& node, const std::string& realm) {
  std::unique_lock<std::shared_mutex> guard{mtx_};
  auto i = live_.find(node);
  if (i == live_.end())
    return;
  auto& realms = i->second;
  for (auto j = realms.begin(); j != realms.end(); ++j)
    if (j->realm == realm) {
      if (--j->connections <= 0)
        realms.erase(j);
      break;
    }
  if (realms.empty())
    live_.erase(i);
}

std::optional<role> admissions::role_of(const caf::node_id& node, const std::string& realm) const {
  std::shared_lock<std::shared_mutex> guard{mtx_};
  auto i = live_.find(node);
  if (i == live_.end())
    return std::nullopt;
  for (auto& entry : i->second)
    if (entry.realm == realm)
      return entry.granted;
  return std::nullopt;
}

status node_gate::face_network(const std::string& realm, std::vector<role_secret> secrets) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (faces_network()) {
    if (realm_ != realm || secrets_ != secrets)
      return {error::invalid_argument,
              "the queue already faces the network with other credentials", "secret"};
    return {};
  }
  realm_ = realm;
  secrets_ = std::move(secrets);
  faces_network_.store(true, std::memory_order_release);
  return {};
}

std::vector<role_secret> node_gate::secrets() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return secrets_;
}

node_gate::verdict node_gate::judge(const caf::mailbox_element& what,
                                    const caf::node_id& local) const {
  constexpr verdict admit{};
  constexpr verdict refuse{verdict::unauthenticated};
  if (!faces_network())
    return admit;
  auto& sender = what.sender;
  if (!sender)
    return answer_or_down(what) ? admit : refuse;
  if (sender->node() == local)
    return admit;
  if (!what.stages.empty())
    return refuse;
  if (realm_.empty())
    return admit;  // no credentials: everyone may do everything
  auto held = admissions::of_process().role_of(sender->node(), realm_);
  if (!held)
    return down_of_itself(what) ? admit : refuse;
  if (*held == role::operator_ || down_of_itself(what))
    return admit;
  // The queue asks nothing of a worker's or a client's node, so no answer
  // from one is due; and a down message about another actor would drop
  // that actor (a worker, a subscriber) from the queue.
  if (what.mid.is_response() || answer_or_down(what))
    return {verdict::forbidden, *held, role::operator_};
  auto needed = needed_role(what.content());
  if (permits(*held, needed))
    return admit;
  return {verdict::forbidden, *held, needed};
}

caf::message refusal(const caf::strong_actor_ptr& sender, const node_gate::verdict& why) {
  if (why.kind == node_gate::verdict::forbidden)
    return caf::make_message(to_caf_error(
      {error::forbidden, std::string{"this request needs the "} + to_string(why.needed)
                           + " role; node " + caf::to_string(sender->node())
                           + " authenticated as " + to_string(why.held)}));
  return caf::make_message(to_caf_error(
    {error::unauthenticated, "node " + caf::to_string(sender->node())
                               + " has not authenticated: connect with the queue's credentials"}));
}

void log_refused(const caf::mailbox_element& what, const char* actor, int64_t count,
                 const node_gate::verdict& why) {
  if (!worth_logging(count))
    return;
  bool forbidden = why.kind == node_gate::verdict::forbidden;
  std::cerr << "ergon: " << actor << " refused a message "
            << (what.sender ? "from node " + caf::to_string(what.sender->node())
                            : std::string{"without a sender"})
            << " (" << brief(what.content()) << ")"
            << (forbidden ? std::string{": it needs the "} + to_string(why.needed)
                              + " role, the sender has " + to_string(why.held)
                          : std::string{})
            << "; " << count << (forbidden ? " forbidden" : " refused") << " so far\n";
}

void tell_exit(const caf::actor& to, caf::error reason) {
  if (to)
    to->enqueue(caf::actor_cast<caf::strong_actor_ptr>(to), caf::make_message_id(),
                caf::make_message(caf::exit_msg{to.address(), std::move(reason)}), nullptr);
}

}  // namespace ergon::actors
