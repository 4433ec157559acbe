#include "transport/connection.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "transport/tls_context.hpp"

namespace ergon::transport {

no_sigpipe::no_sigpipe() {
  sigemptyset(&pipe_);
  sigaddset(&pipe_, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_, &saved_);
}

no_sigpipe::~no_sigpipe() {
  timespec now{};
  while (sigtimedwait(&pipe_, nullptr, &now) == SIGPIPE)
    continue;
  pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
}

connection::connection(int fd, SSL* ssl) : fd_(fd), ssl_(ssl) {}

connection::~connection() {
  if (ssl_) {
    no_sigpipe guard;  // SSL_free may send an alert
    SSL_free(ssl_);
  }
  if (fd_ >= 0)
    ::close(fd_);
}

std::pair<int, SSL*> connection::release() {
  auto out = std::make_pair(fd_, ssl_);
  fd_ = -1;
  ssl_ = nullptr;
  return out;
}

progress connection::ssl_result(int ret) {
  switch (SSL_get_error(ssl_, ret)) {
    case SSL_ERROR_WANT_READ:
      return progress::want_read;
    case SSL_ERROR_WANT_WRITE:
      return progress::want_write;
    case SSL_ERROR_ZERO_RETURN:
      failure_ = "the peer closed the connection";
      return progress::closed;
    case SSL_ERROR_SYSCALL:
      failure_ = errno != 0 ? std::strerror(errno) : "the peer closed the connection";
      ERR_clear_error();
      return progress::closed;
    default:
      failure_ = "TLS: " + openssl_reason();
      return progress::closed;
  }
}

progress connection::tls_handshake(bool server) {
  no_sigpipe guard;
  ERR_clear_error();
  auto ret = server ? SSL_accept(ssl_) : SSL_connect(ssl_);
  if (ret == 1)
    return progress::done;
  auto p = ssl_result(ret);
  if (p == progress::closed && SSL_get_verify_result(ssl_) != X509_V_OK)
    failure_ = std::string{"TLS: the peer's certificate: "}
               + X509_verify_cert_error_string(SSL_get_verify_result(ssl_));
  return p;
}

progress connection::read_into(std::string& into, size_t want) {
  while (into.size() < want) {
    char buf[512];
    auto n = std::min(sizeof(buf), want - into.size());
    if (ssl_) {
      no_sigpipe guard;
      ERR_clear_error();
      auto got = SSL_read(ssl_, buf, static_cast<int>(n));
      if (got <= 0)
        return ssl_result(got);
      into.append(buf, static_cast<size_t>(got));
      continue;
    }
    auto got = ::recv(fd_, buf, n, 0);
    if (got > 0) {
      into.append(buf, static_cast<size_t>(got));
    } else if (got == 0) {
      failure_ = "the peer closed the connection";
      return progress::closed;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return progress::want_read;
    } else if (errno != EINTR) {
      failure_ = std::strerror(errno);
      return progress::closed;
    }
  }
  return progress::done;
}

progress connection::write_from(std::string& out) {
  while (!out.empty()) {
    if (ssl_) {
      no_sigpipe guard;
      ERR_clear_error();
      auto put = SSL_write(ssl_, out.data(), static_cast<int>(out.size()));
      if (put <= 0)
        return ssl_result(put);
      out.erase(0, static_cast<size_t>(put));
      continue;
    }
    auto put = ::send(fd_, out.data(), out.size(), MSG_NOSIGNAL);
    if (put >= 0) {
      out.erase(0, static_cast<size_t>(put));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return progress::want_write;
    } else if (errno != EINTR) {
      failure_ = std::strerror(errno);
      return progress::closed;
    }
  }
  return progress::done;
}

std::string connection::channel_binding() const {
  if (!ssl_)
    return {};
  static constexpr char label[] = "EXPORTER-ergon-handshake";
  unsigned char key[32];
  if (SSL_export_keying_material(ssl_, key, sizeof(key), label, sizeof(label) - 1, nullptr, 0, 0)
      != 1)
    return {};
  return std::string{reinterpret_cast<const char*>(key), sizeof(key)};
}

std::string connection::peer_common_name() const {
  if (!ssl_)
    return {};
  X509* cert = SSL_get1_peer_certificate(ssl_);
  if (!cert)
    return {};
  std::string name;
  auto* subject = X509_get_subject_name(cert);
  int at = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (at >= 0)
    if (auto* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at))) {
      unsigned char* text = nullptr;
      int len = ASN1_STRING_to_UTF8(&text, data);
      if (len > 0)
        name.assign(reinterpret_cast<const char*>(text), static_cast<size_t>(len));
      OPENSSL_free(text);
    }
  X509_free(cert);
  return name;
}

std::string connection::peer() const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return "an unknown peer";
  char host[INET6_ADDRSTRLEN] = {};
  uint16_t port = 0;
  if (addr.ss_family == AF_INET) {
    auto& in = reinterpret_cast<sockaddr_in&>(addr);
    ::inet_ntop(AF_INET, &in.sin_addr, host, sizeof(host));
    port = ntohs(in.sin_port);
  } else if (addr.ss_family == AF_INET6) {
    auto& in6 = reinterpret_cast<sockaddr_in6&>(addr);
    ::inet_ntop(AF_INET6, &in6.sin6_addr, host, sizeof(host));
    port = ntohs(in6.sin6_port);
  }
  return std::string{host} + ":" + std::to_string(port);
}

bool wait_for(const connection& c, progress p, std::chrono::steady_clock::time_point deadline) {
  // TLS may hold bytes already read from the socket.
  if (p == progress::want_read && c.ssl() && SSL_pending(c.ssl()) > 0)
    return true;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return false;
    pollfd pfd{c.fd(), static_cast<short>(p == progress::want_write ? POLLOUT : POLLIN), 0};
    auto n = ::poll(&pfd, 1, static_cast<int>(left.count()));
    if (n > 0)
      return true;
    if (n < 0 && errno != EINTR)
      return false;
  }
}

}  // namespace ergon::transport
