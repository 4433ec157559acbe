// What an ergon connection may carry once its handshake passed: checked on
// each BASP header and payload as CAF asks for them, before CAF allocates
// a buffer for the payload or sees a byte of it. A plain class; the scribe
// (scribe.hpp) closes the connection when a check fails.
//
// The rules, beyond CAF's own:
// - no payload over the connection's message limit (CAF's length field is
//   trusted up to 4 GiB, and zero-filled before it reads);
// - the connection opens with the peer's BASP handshake, whose node id is
//   neither empty nor this node's, and keeps that node id;
// - traffic is between the two ends only: no routed message (whose source
//   node the peer names), no monitor or down message naming other nodes,
//   and no message to an actor by name but CAF's spawn server (which CAF
//   asks for its config server on every new connection);
// - a message without a sender is only an answer (CAF bounces failed
//   requests without one);
// - no sequence inside a payload is longer than the bytes left (checked by
//   the payload check it is given: bounded_reader.hpp).
#pragma once

#include <caf/node_id.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "transport/bounded_reader.hpp"

namespace ergon::transport {

/// BASP's header size in CAF 0.17.6.
inline constexpr size_t basp_header_bytes = 32;

/// The largest BASP handshake payload: app ids and interface names.
inline constexpr size_t max_handshake_bytes = 64 * 1024;

class basp_rules {
 public:
  /// Checks the payload of a message, a monitor or a down message that
  /// passed the other rules; empty if it may pass.
  using payload_check = std::function<std::string(payload_kind, const char*, size_t)>;

  /// `accepted`: the peer dialed us and sends client handshakes; otherwise
  /// it sends the server handshake.
  basp_rules(bool accepted, size_t max_message_bytes, caf::node_id local,
             payload_check check_payload = nullptr);

  /// Checks the next chunk CAF reads: a header, or the payload the last
  /// header announced. Empty: it may pass; otherwise why the connection
  /// must close.
  std::string check(const char* data, size_t size);

  /// True once, right after the handshake that named the peer's node
  /// passed: that node is then peer().
  bool take_new_peer();

  const caf::node_id& peer() const { return peer_; }

 private:
  std::string check_header(const char* data);
  std::string check_payload(const char* data, size_t size);

  bool accepted_;
  size_t max_message_bytes_;
  caf::node_id local_;
  payload_check check_payload_;
  caf::node_id peer_;
  bool new_peer_ = false;
  // The header whose payload comes next.
  bool want_payload_ = false;
  uint8_t operation_ = 0;
  uint32_t payload_len_ = 0;
};

}  // namespace ergon::transport
