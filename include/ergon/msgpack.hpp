// Typed payloads with msgpack-c++ (opt-in: the only ergon header that pulls
// in msgpack).
//
//   struct email { std::string to, subject; MSGPACK_DEFINE(to, subject); };
//
//   auto job = ergon::job_builder("send_email").payload(ergon::pack(email{...})).build();
//   ...
//   ergon::result<email> e = ergon::unpack<email>(ctx.payload());
#pragma once

#include <msgpack.hpp>

#include <string>
#include <string_view>

#include "ergon/error.hpp"

namespace ergon {

/// Serializes `value` with msgpack into payload bytes.
template <class T>
std::string pack(const T& value) {
  msgpack::sbuffer buf;
  msgpack::pack(buf, value);
  return std::string{buf.data(), buf.size()};
}

/// Reads a T back from payload bytes. Fails with invalid_argument naming
/// "payload" if the bytes are not one msgpack value convertible to T.
template <class T>
result<T> unpack(std::string_view bytes) {
  try {
    size_t offset = 0;
    // Every element takes at least one byte, so no length may exceed the
    // input. Without this cap, msgpack allocates room for a declared array
    // before reading it: 5 bytes announcing 2^32 elements ask for 128 GiB
    // (found by fuzz/msgpack_fuzz.cpp).
    const auto n = bytes.size();
    const msgpack::unpack_limit limit{n, n, n, n, n};
    auto handle = msgpack::unpack(bytes.data(), bytes.size(), offset, nullptr, nullptr, limit);
    if (offset != bytes.size())
      return invalid_field("payload", "has " + std::to_string(bytes.size() - offset)
                                        + " trailing bytes after the msgpack value");
    return handle.get().as<T>();
  } catch (const std::exception& e) {
    return invalid_field("payload", std::string{"is not a valid msgpack value of the "
                                                "requested type: "} + e.what());
  }
}

}  // namespace ergon
