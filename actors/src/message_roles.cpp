// Which role each message from another node needs (docs/distribution.md,
// "Roles"). Read from the message's first element, before any handler sees
// it: anything not listed here needs operator, so a message added later is
// an operator's until it is placed.
#include <caf/atom.hpp>
#include <caf/type_erased_tuple.hpp>

#include <algorithm>
#include <initializer_list>

#include "ergon/actors/db_writer.hpp"
#include "ergon/actors/node_gate.hpp"
#include "ergon/actors/protocol.hpp"
#include "ergon/queue_actor.hpp"

namespace ergon {

const char* to_string(role r) noexcept {
  switch (r) {
    case role::worker: return "worker";
    case role::client: return "client";
    case role::operator_: return "operator";
  }
  return "unknown";
}

}  // namespace ergon

namespace ergon::actors {
namespace {

// A submit, or a read: what a client may send to the queue actor.
constexpr caf::atom_value client_atoms[] = {
  submit_atom::value,        job_info_atom::value,         jobs_by_name_atom::value,
  counts_atom::value,        wait_atom::value,             list_jobs_atom::value,
  list_failed_atom::value,   metrics_atom::value,          add_recurring_atom::value,
  update_recurring_atom::value, upsert_recurring_atom::value, recurring_info_atom::value,
  list_recurring_atom::value, controls_atom::value,        workers_atom::value,
  subscribe_atom::value,     unsubscribe_atom::value,
};

template <class... Ts>
bool first_is_one_of(const caf::type_erased_tuple& content) {
  return (content.match_element<Ts>(0) || ...);
}

}  // namespace

role needed_role(const caf::type_erased_tuple& content) {
  if (content.size() == 0)
    return role::operator_;
  // A worker's side of the worker protocol (protocol.hpp), and where to
  // find the dispatcher.
  if (first_is_one_of<register_worker, worker_report, unregister_worker, progress_batch,
                      heartbeat_request, results_request>(content))
    return role::worker;
  // A client's batch submit and recurring puts, as the queue actor passes
  // them on to the writer (delegated: the client stays the sender). Never
  // from the network: they are not serializable.
  if (first_is_one_of<submit_call, put_recurring_call>(content))
    return role::client;
  if (!content.match_element<caf::atom_value>(0))
    return role::operator_;
  auto atom = content.get_as<caf::atom_value>(0);
  if (atom == join_atom::value)
    return role::worker;
  if (std::find(std::begin(client_atoms), std::end(client_atoms), atom) != std::end(client_atoms))
    return role::client;
  return role::operator_;
}

}  // namespace ergon::actors
