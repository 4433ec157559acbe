// The secret handshake's arithmetic: nonces and proofs (HMAC-SHA256 over
// both nonces, both node ids and the role), so the secret never crosses the
// wire and a proof can't be replayed to another node or connection.
#pragma once

#include <caf/node_id.hpp>

#include <string>

#include "ergon/error.hpp"

namespace ergon::runtime {

/// Secrets shorter than this are refused (invalid_argument, "secret").
inline constexpr size_t min_secret_bytes = 16;

/// ok, or invalid_argument ("secret") if `secret` is too short.
status validate_secret(const std::string& secret);

/// 32 random bytes from OpenSSL, as 64 lowercase hex digits.
std::string make_nonce();

/// True if `s` has a nonce's shape (64 hex digits).
bool is_nonce(const std::string& s);

/// What `role` ("queue" or "client") proves: HMAC-SHA256 keyed with the
/// secret over the transcript, as hex.
std::string handshake_proof(const std::string& secret, const char* role,
                            const std::string& client_nonce, const std::string& queue_nonce,
                            const caf::node_id& client, const caf::node_id& queue);

/// Compares two proofs in time that does not depend on where they differ.
bool same_proof(const std::string& a, const std::string& b);

}  // namespace ergon::runtime
