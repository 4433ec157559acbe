// A connected TCP socket, with a TLS session on it or not, while ergon's
// handshake runs: the acceptor drives it without blocking, the dialer
// blocks on it with a deadline. The scribe takes it over afterwards.
#pragma once

#include <openssl/ssl.h>

#include <csignal>

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "ergon/error.hpp"

namespace ergon::transport {

/// Blocks SIGPIPE in this thread while it lives, and drops one raised
/// meanwhile. OpenSSL writes to its socket with send(2) and no
/// MSG_NOSIGNAL, so a peer that closed would kill the process; a library
/// must not change the process's signal handling.
class no_sigpipe {
 public:
  no_sigpipe();
  ~no_sigpipe();
  no_sigpipe(const no_sigpipe&) = delete;
  no_sigpipe& operator=(const no_sigpipe&) = delete;

 private:
  sigset_t pipe_;
  sigset_t saved_;
};

/// What a non-blocking step did.
enum class progress {
  done,        ///< finished what was asked
  want_read,   ///< waits until the socket is readable
  want_write,  ///< waits until the socket is writable
  closed,      ///< the peer closed, or the socket or TLS failed
};

class connection {
 public:
  /// Owns `fd` (non-blocking) and `ssl` (may be null: no TLS).
  connection(int fd, SSL* ssl);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  int fd() const { return fd_; }
  SSL* ssl() const { return ssl_; }

  /// Puts a TLS session on the socket, owned from now on.
  void set_ssl(SSL* ssl) { ssl_ = ssl; }

  /// One step of the TLS handshake, as the accepting (`server`) or
  /// connecting side.
  progress tls_handshake(bool server);

  /// Reads until `into` holds `want` bytes; never more.
  progress read_into(std::string& into, size_t want);

  /// Writes `out`, erasing what was written.
  progress write_from(std::string& out);

  /// The TLS channel's exported key (RFC 5705), 32 bytes; empty without TLS.
  std::string channel_binding() const;

  /// The common name of the peer's verified certificate's subject; empty
  /// without TLS or without one.
  std::string peer_common_name() const;

  /// Why the last step failed, for a log line.
  const std::string& failure() const { return failure_; }

  /// "address:port" of the peer.
  std::string peer() const;

  /// Gives up the socket and session to the caller.
  std::pair<int, SSL*> release();

 private:
  progress ssl_result(int ret);

  int fd_;
  SSL* ssl_;
  std::string failure_;
};

/// Waits until `c` can make `p` (want_read or want_write) progress, or the
/// deadline passes (false).
bool wait_for(const connection& c, progress p, std::chrono::steady_clock::time_point deadline);

}  // namespace ergon::transport
