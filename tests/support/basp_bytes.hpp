// CAF 0.17.6's BASP bytes, written by hand: for the tests of the
// transport's rules and for the attacker process.
#pragma once

#include <caf/actor_system.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/event_based_actor.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ergon::test {

/// Appends the low `bytes` bytes of `x`, most significant first, as BASP
/// writes integers.
inline void put_be(std::string& out, uint64_t x, int bytes) {
  for (int i = bytes - 1; i >= 0; --i)
    out += static_cast<char>((x >> (8 * i)) & 0xff);
}

/// A BASP header: operation, two padding bytes, flags, payload length,
/// operation data, source actor and destination actor (32 bytes).
inline std::string basp_header(uint8_t op, uint32_t payload_len, uint64_t op_data = 0,
                               uint64_t source = 0, uint64_t dest = 0, uint8_t flags = 0) {
  std::string h;
  h += static_cast<char>(op);
  h += std::string(2, '\0');
  h += static_cast<char>(flags);
  put_be(h, payload_len, 4);
  put_be(h, op_data, 8);
  put_be(h, source, 8);
  put_be(h, dest, 8);
  return h;
}

/// `xs` as CAF serializes them in a payload.
template <class... Ts>
std::string serialized(caf::actor_system& sys, const Ts&... xs) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  if (auto err = sink(xs...))
    throw std::runtime_error("cannot serialize: " + sys.render(err));
  return {buf.begin(), buf.end()};
}

/// An actor that takes ints and nothing else, to be a sender, a forwarding
/// stage or a published actor. A class, not a function: CAF 0.17.6 spawns a
/// function actor without arguments through a reference bound to a null
/// pointer, which UBSan stops.
class sink_actor : public caf::event_based_actor {
public:
  using caf::event_based_actor::event_based_actor;
  caf::behavior make_behavior() override { return {[](int) {}}; }
};

}  // namespace ergon::test
