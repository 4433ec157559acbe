// What a connection's terms come from: the credentials it proves, and the
// limits set on its actor system's config.
#pragma once

#include <caf/fwd.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "ergon/actors/node_gate.hpp"
#include "ergon/credentials.hpp"
#include "ergon/options.hpp"

namespace ergon::transport {

/// How long each step of a handshake may take, on both sides.
inline constexpr std::chrono::milliseconds handshake_timeout{10'000};

/// The realm (node_gate.hpp) of connections made or taken with `secret`
/// and `tls`: a name for the credentials that reveals neither. "" for none.
std::string realm_of(const std::string& secret, const tls_options& tls);

/// The secrets a queue listening with `where` takes, each with its role:
/// its own (operator) first, then the worker's and the client's; empty
/// without a secret.
std::vector<actors::role_secret> role_secrets(const listen_options& where);

/// The largest BASP payload `sys`'s connections take.
size_t max_message_bytes_of(const caf::actor_system& sys);

}  // namespace ergon::transport
