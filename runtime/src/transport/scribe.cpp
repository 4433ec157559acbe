#include "transport/scribe.hpp"

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/stream_impl.hpp>
#include <caf/io/scribe.hpp>
#include <caf/policy/tcp.hpp>

#include <openssl/err.h>

#include <chrono>
#include <iostream>
#include <map>
#include <mutex>

#include "transport/basp_rules.hpp"

namespace ergon::transport {
namespace {

// A node's admission in a realm, with a role, for as long as this lives.
class admission {
 public:
  // Null if the node is live in another realm, or with another role.
  static std::shared_ptr<admission> claim(caf::node_id node, std::string realm, role granted) {
    if (!actors::admissions::of_process().add(node, realm, granted))
      return nullptr;
    return std::shared_ptr<admission>{new admission(std::move(node), std::move(realm))};
  }
  ~admission() { actors::admissions::of_process().remove(node_, realm_); }
  admission(const admission&) = delete;
  admission& operator=(const admission&) = delete;

 private:
  admission(caf::node_id node, std::string realm)
      : node_(std::move(node)), realm_(std::move(realm)) {}

  caf::node_id node_;
  std::string realm_;
};

// Carries an admission through BASP's delivery queue (see detach_from).
struct admission_release {
  std::shared_ptr<admission> held;
};

}  // namespace
}  // namespace ergon::transport

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ergon::transport::admission_release)

namespace ergon::transport {
namespace {

using caf::io::network::rw_state;

// Plain TCP, or TLS through the session the handshake ran in.
class socket_policy {
 public:
  explicit socket_policy(SSL* ssl) : ssl_(ssl) {}
  socket_policy(socket_policy&& other) noexcept : ssl_(std::exchange(other.ssl_, nullptr)) {}
  socket_policy(const socket_policy&) = delete;
  ~socket_policy() {
    if (ssl_) {
      no_sigpipe guard;
      SSL_free(ssl_);
    }
  }

  rw_state read_some(size_t& result, caf::io::network::native_socket fd, void* buf, size_t len) {
    if (!ssl_)
      return caf::policy::tcp::read_some(result, fd, buf, len);
    result = 0;
    if (len == 0)
      return rw_state::indeterminate;
    no_sigpipe guard;
    ERR_clear_error();
    auto got = SSL_read(ssl_, buf, static_cast<int>(len));
    if (got > 0) {
      result = static_cast<size_t>(got);
      return rw_state::success;
    }
    return on_error(got);
  }

  rw_state write_some(size_t& result, caf::io::network::native_socket fd, const void* buf,
                      size_t len) {
    if (!ssl_)
      return caf::policy::tcp::write_some(result, fd, buf, len);
    result = 0;
    if (len == 0)
      return rw_state::indeterminate;
    no_sigpipe guard;
    ERR_clear_error();
    auto put = SSL_write(ssl_, buf, static_cast<int>(len));
    if (put > 0) {
      result = static_cast<size_t>(put);
      return rw_state::success;
    }
    return on_error(put);
  }

  // Bytes TLS already took off the socket are read even if the socket is
  // not readable again.
  bool must_read_more(caf::io::network::native_socket, size_t) {
    return ssl_ && SSL_pending(ssl_) > 0;
  }

 private:
  // Waiting for the socket is a success of no bytes: the multiplexer polls.
  rw_state on_error(int ret) {
    switch (SSL_get_error(ssl_, ret)) {
      case SSL_ERROR_WANT_READ:
      case SSL_ERROR_WANT_WRITE:
        return rw_state::success;
      default:
        ERR_clear_error();
        return rw_state::failure;
    }
  }

  SSL* ssl_;
};

class guarded_scribe : public caf::io::scribe {
 public:
  guarded_scribe(caf::actor_system& sys, caf::io::network::default_multiplexer& mpx, int fd,
                 SSL* ssl, connection_terms terms)
      : scribe(caf::io::network::conn_hdl_from_socket(fd)),
        stream_(mpx, fd, socket_policy{ssl}),
        rules_(terms.accepted, terms.max_message_bytes, sys.node(),
               [&sys](payload_kind kind, const char* data, size_t size) {
                 return check_payload_bytes(sys, kind, data, size);
               }),
        terms_(std::move(terms)) {}


  void configure_read(caf::io::receive_policy::config config) override {
    stream_.configure_read(config);
    if (!launched_) {
      launched_ = true;
      stream_.start(this);
    }
  }

  bool consume(caf::execution_unit* ctx, const void* buf, size_t size) override {
    if (detached())
      return false;
    auto why = rules_.check(static_cast<const char*>(buf), size);
    // Admitted before BASP sees the handshake, so the messages after it
    // pass the gates.
    bool other_credentials = false;
    if (why.empty() && rules_.take_new_peer()) {
      admission_ = admission::claim(rules_.peer(), terms_.realm, terms_.granted);
      other_credentials = !admission_;
      if (other_credentials)
        why = "a handshake naming node " + caf::to_string(rules_.peer())
              + ", which is connected with other credentials";
    }
    if (!why.empty()) {
      if (terms_.note) {
        std::lock_guard<std::mutex> guard{terms_.note->mtx};
        terms_.note->why = why;
        terms_.note->other_credentials = other_credentials;
      }
      if (terms_.gate)
        terms_.gate->count_refused_connection();
      log_refused_connection(terms_.peer, why);
      io_failure(ctx, caf::io::network::operation::read);
      return false;
    }
    return scribe::consume(ctx, buf, size);
  }

  void ack_writes(bool enable) override { stream_.ack_writes(enable); }
  std::vector<char>& wr_buf() override { return stream_.wr_buf(); }
  std::vector<char>& rd_buf() override { return stream_.rd_buf(); }

  void graceful_shutdown() override {
    stream_.graceful_shutdown();
    detach(&stream_.backend(), false);
  }

  void flush() override { stream_.flush(this); }

  std::string addr() const override {
    auto x = caf::io::network::remote_addr_of_fd(stream_.fd());
    return x ? *x : std::string{};
  }

  uint16_t port() const override {
    auto x = caf::io::network::remote_port_of_fd(stream_.fd());
    return x ? *x : 0;
  }

  void add_to_loop() override { stream_.activate(this); }
  void remove_from_loop() override { stream_.passivate(); }

 protected:
  // The connection ends. Messages it brought may still be on their way
  // through BASP's delivery queue, which hands them over in the order they
  // were read: the admission goes through it too, after them, and ends
  // when the queue drops it.
  void detach_from(caf::io::abstract_broker* broker) override {
    scribe::detach_from(broker);
    auto basp = static_cast<caf::io::basp_broker*>(broker);
    // A broker on its way out (closing every connection) has destroyed
    // its BASP instance already, and delivers nothing more.
    if (!admission_ || !basp->alive()) {
      admission_.reset();
      return;
    }
    auto& queue = basp->instance.queue();
    queue.push(nullptr, queue.new_id(), nullptr,
               caf::make_mailbox_element(nullptr, caf::make_message_id(), {},
                                         admission_release{std::move(admission_)}));
  }

 private:
  bool launched_ = false;
  caf::io::network::stream_impl<socket_policy> stream_;
  basp_rules rules_;
  connection_terms terms_;
  std::shared_ptr<admission> admission_;
};

}  // namespace

caf::io::scribe_ptr make_scribe(caf::actor_system& sys, std::unique_ptr<connection> conn,
                                connection_terms terms) {
  auto& mpx = static_cast<caf::io::network::default_multiplexer&>(sys.middleman().backend());
  auto [fd, ssl] = conn->release();
  return caf::make_counted<guarded_scribe>(sys, mpx, fd, ssl, std::move(terms));
}

void log_refused_connection(const std::string& peer, const std::string& why) {
  struct seen {
    std::chrono::steady_clock::time_point last;
    int64_t quiet = 0;  // closed since `last` without a line
  };
  static std::mutex mtx;
  static std::map<std::string, seen> kinds;
  // The kind is the reason up to its first number, so sizes don't split it.
  auto kind = why.substr(0, why.find_first_of("0123456789"));
  auto now = std::chrono::steady_clock::now();
  int64_t quiet = 0;
  {
    std::lock_guard<std::mutex> guard{mtx};
    auto [i, fresh] = kinds.try_emplace(kind);
    if (!fresh && now - i->second.last < std::chrono::minutes(1)) {
      ++i->second.quiet;
      return;
    }
    quiet = std::exchange(i->second.quiet, 0);
    i->second.last = now;
  }
  std::cerr << "ergon: closed the connection of " << peer << ": " << why;
  if (quiet > 0)
    std::cerr << " (and " << quiet << " more like it since the last such line)";
  std::cerr << '\n';
}

}  // namespace ergon::transport
