#include "transport/basp_rules.hpp"

#include <caf/atom.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/message_id.hpp>

#include <utility>

namespace ergon::transport {
namespace {

// BASP's message types in CAF 0.17.6 (caf/io/basp/message_type.hpp).
enum : uint8_t {
  server_handshake = 0,
  client_handshake = 1,
  direct_message = 2,
  routed_message = 3,
  monitor_message = 4,
  down_message = 5,
  heartbeat = 6,
};

constexpr uint8_t named_receiver_flag = 0x01;

// BASP writes integers in network byte order.
uint64_t big_endian(const char* p, size_t n) {
  uint64_t x = 0;
  for (size_t i = 0; i < n; ++i)
    x = (x << 8) | static_cast<uint8_t>(p[i]);
  return x;
}

}  // namespace

basp_rules::basp_rules(bool accepted, size_t max_message_bytes, caf::node_id local,
                       payload_check check_payload)
    : accepted_(accepted),
      max_message_bytes_(max_message_bytes),
      local_(std::move(local)),
      check_payload_(std::move(check_payload)) {}

std::string basp_rules::check(const char* data, size_t size) {
  if (!want_payload_)
    return size == basp_header_bytes ? check_header(data)
                                     : "a header of " + std::to_string(size) + " bytes";
  want_payload_ = false;
  if (size != payload_len_)
    return "a payload of " + std::to_string(size) + " bytes where the header announced "
           + std::to_string(payload_len_);
  return check_payload(data, size);
}

bool basp_rules::take_new_peer() {
  return std::exchange(new_peer_, false);
}

std::string basp_rules::check_header(const char* h) {
  operation_ = static_cast<uint8_t>(h[0]);
  auto flags = static_cast<uint8_t>(h[3]);
  payload_len_ = static_cast<uint32_t>(big_endian(h + 4, 4));
  auto operation_data = big_endian(h + 8, 8);
  auto source_actor = big_endian(h + 16, 8);
  auto dest_actor = big_endian(h + 24, 8);
  auto handshake = accepted_ ? client_handshake : server_handshake;
  if (!peer_ && operation_ != handshake)
    return "a message (type " + std::to_string(operation_) + ") before its handshake";
  if (operation_ > heartbeat)
    return "an unknown message type " + std::to_string(operation_);
  if (operation_ == routed_message)
    return "a routed message: ergon connections carry traffic between their two ends only";
  if (operation_ == server_handshake && peer_)
    return "a second server handshake";
  if (operation_ == client_handshake && !accepted_)
    return "a client handshake from the node it dialed";
  // CAF asks every new node's spawn server for its config server; no other
  // actor is reached by name.
  if (operation_ == direct_message && (flags & named_receiver_flag)
      && dest_actor != static_cast<uint64_t>(caf::atom("SpawnServ")))
    return "a message to a named actor other than CAF's spawn server";
  if (operation_ == direct_message && source_actor == 0
      && !caf::message_id{operation_data}.is_response())
    return "a message without a sender";
  auto limit = operation_ == handshake ? max_handshake_bytes : max_message_bytes_;
  if (payload_len_ > limit)
    return "a message of " + std::to_string(payload_len_) + " bytes, over the limit of "
           + std::to_string(limit);
  if (payload_len_ == 0 && (operation_ == handshake || operation_ == monitor_message
                            || operation_ == down_message))
    return "an empty payload where one is due";
  want_payload_ = payload_len_ > 0;
  return {};
}

std::string basp_rules::check_payload(const char* data, size_t size) {
  if (operation_ == direct_message)
    return check_payload_ ? check_payload_(payload_kind::direct_message, data, size)
                          : std::string{};
  if (operation_ != client_handshake && operation_ != server_handshake
      && operation_ != monitor_message && operation_ != down_message)
    return {};
  // Each of these payloads opens with a node id; monitor and down messages
  // then name the destination node.
  caf::binary_deserializer source{nullptr, data, size};
  caf::node_id first;
  if (auto err = inspect(source, first))
    return "a payload that does not start with a node id";
  if (operation_ == monitor_message || operation_ == down_message) {
    caf::node_id second;
    if (auto err = inspect(source, second))
      return "a monitor or down message without its destination node";
    if (first != peer_ || second != local_)
      return "a monitor or down message between other nodes";
    if (!check_payload_)
      return {};
    return check_payload_(operation_ == monitor_message ? payload_kind::monitor_message
                                                         : payload_kind::down_message,
                          data, size);
  }
  if (!first || first == local_)
    return "a handshake naming " + (first ? std::string{"this node"} : std::string{"no node"});
  if (peer_ && first != peer_)
    return "a handshake naming another node than before";
  if (!peer_) {
    peer_ = first;
    new_peer_ = true;
  }
  return {};
}

}  // namespace ergon::transport
