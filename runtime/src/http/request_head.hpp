// What the HTTP endpoint decides from a request's first bytes, before any
// handler runs: where the request ends, whether its size is allowed, and
// whether its Host names this endpoint. Plain functions: the front calls
// them as bytes arrive, the routes call the host check, and test-http-front
// checks them alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace ergon::http {

struct request_limits {
  /// The request line and headers; past it, 431.
  size_t max_head_bytes = 16 * 1024;
  /// The body, by its Content-Length; past it, 413 before any of it is
  /// read, except for a job submission (below).
  size_t max_body_bytes = 4 * 1024;
  /// The body of POST /api/jobs, allowed past max_body_bytes only when
  /// `may_submit` approves the request's head and the peer's address (the
  /// writer proved itself).
  size_t max_submit_body_bytes = 16 << 20;
  std::function<bool(std::string_view head, std::string_view peer_ip)> may_submit;
};

/// An answer the endpoint gives without running a handler.
struct refusal {
  int status = 0;
  std::string code;  ///< the JSON error's "error"
  std::string message;
};

/// What the bytes received so far say about the request.
struct framing {
  enum class verdict { incomplete, complete, refused };
  verdict what = verdict::incomplete;
  size_t length = 0;  ///< complete: the head and body, in bytes
  std::string path;   ///< complete: the request target's path, without its query
  refusal refused;    ///< refused: what to answer
};

/// Judges `received` (the first bytes of a connection). A request without a
/// Content-Length has no body; Transfer-Encoding is refused (411), as are a
/// Content-Length that is not one number (400), a head over the limit
/// (431) and a body over it (413).
framing frame_request(std::string_view received, const request_limits& limits,
                      std::string_view peer_ip = {});

/// The value of the first header `name` (any case) in a request's head,
/// trimmed; empty if it has none.
std::optional<std::string_view> header_value(std::string_view head, std::string_view name);

/// Whether `address` (a literal, as a peer's address is written) is a
/// loopback address: 127.0.0.0/8, ::1 or ::ffff:127.0.0.0/104.
bool loopback_address(std::string_view address);

/// Whether `host`, a Host header's value, names a loopback endpoint on
/// `port`: exactly "localhost" (any case), a dotted-quad address in
/// 127.0.0.0/8 or a bracketed IPv6 loopback address, then ":port". The port
/// may be left out only where it is the scheme's default (80, or 443 with
/// `tls`). Anything else is refused: names that merely start like one
/// ("127.rebind.example", "localhost.evil.example"), other spellings of an
/// address ("0x7f000001", "127.1") and an empty Host.
bool loopback_host(std::string_view host, uint16_t port, bool tls);

/// A complete HTTP/1.1 response that closes the connection, with `r` as a
/// JSON error body {"error": code, "message": message}.
std::string response_bytes(const refusal& r);

/// How ergon names an HTTP error status: the JSON error's code
/// ("body_too_large") and the status line's reason ("Payload Too Large").
struct status_words {
  const char* code;
  const char* reason;
};
status_words words_of(int status);

}  // namespace ergon::http
