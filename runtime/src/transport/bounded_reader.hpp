// Reads a BASP payload as CAF will, without its side effects, and refuses
// a sequence longer than the bytes left. CAF 0.17's deserializer resizes a
// byte sequence (a std::vector<char> in a message, say) to the length it
// reads before it reads a byte, so a message of a few bytes could ask for
// 4 GiB (docs/reliability.md, finding 9). The scribe runs each payload
// through this first, so CAF's own read never allocates more than the
// message's size.
#pragma once

#include <caf/fwd.hpp>

#include <cstddef>
#include <string>

namespace ergon::transport {

/// What CAF reads from each kind of BASP payload.
enum class payload_kind {
  direct_message,   ///< forwarding stack, message
  monitor_message,  ///< source node, destination node
  down_message,     ///< source node, destination node, error
};

/// Empty if `data` reads as `kind`, every sequence length in it fits in the
/// bytes left where it is read, and (a message) it is not a link or unlink
/// request, which CAF 0.17 carries out as it reads the message, past every
/// gate; ergon links no remote actor. Otherwise why not. Creates no proxy
/// for the actors it names. `sys` knows the message types.
std::string check_payload_bytes(caf::actor_system& sys, payload_kind kind, const char* data,
                          size_t size);

}  // namespace ergon::transport
