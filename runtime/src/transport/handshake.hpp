// ergon's own handshake: the first bytes of every connection (inside TLS
// when there is TLS), run before CAF reads a byte. A plain class: it takes
// the bytes read and says what to write, how many bytes to read next, and
// whether the peer is admitted. The acceptor and the dialer do the I/O.
//
//   queue                                   client
//                                      ◄───  hello: "ergon", version
//     hello: "ergon", version, flags,  ───►  (both at once, on connect)
//            the queue's nonce
//                                      ◄───  proof: "ergon", version, flags,
//                                              the client's nonce, and its
//                                              proof (with a secret)
//     accepted: the queue's proof      ───►  (or refused: a reason code)
//
// The client's hello lets a TLS server fail a plain client at once (TLS
// waits for the client to speak first), and a queue refuse what is not
// ergon after three bytes.
// The client proves first, so the queue gives nothing to guess from before
// the client proved the secret, and it proves nothing to a client that
// failed. A proof is HMAC-SHA256, keyed with the secret, over the role, both
// nonces and the TLS channel's exported key (when there is TLS), so a proof
// can't be replayed on another connection or relayed through another TLS
// session. Every frame is a type byte, a length byte and at most 255 bytes:
// a peer can't make either side buffer more.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace ergon::transport {

inline constexpr size_t nonce_bytes = 32;
inline constexpr size_t proof_bytes = 32;
// 2: reinstated attempts; 3: job::idempotency_key; 4: the inbox's event fields (issue 30), snoozes and backoff kinds
// (issue 31); 5: dependencies between jobs, the waiting status (issue 31); 6: run-time
// controls, the worker of each attempt and the workers listing (issue 32); 7: job tags,
// tag filters, bulk cancel and delete, replay, max_executions and ttl_from (issue 32); 8:
// a recurring job's own pause, and the requeue duplicate policy (issue 32); 9: worker
// concurrency set at run time (issue 32).
inline constexpr uint8_t protocol_version = 9;

/// Why a handshake admitted nobody. The first three travel in a refusal
/// frame (frozen numbers); the rest are found by the side that closes.
enum class refusal : uint8_t {
  none = 0,
  wrong_secret = 1,         ///< the client's proof does not match the queue's secret
  secret_required = 2,      ///< the client proved nothing; the queue has a secret
  unsupported_version = 3,  ///< the peers speak different handshake versions
  not_ergon = 4,            ///< bytes that are not this handshake
  queue_without_secret = 5,  ///< the client has a secret; the queue proved none
  queue_proof_wrong = 6,    ///< the queue's proof does not match the client's secret
  speaks_tls = 7,           ///< the client's side: the queue answered with TLS
};

/// What to do after a step: write `send` (if any), then read exactly
/// `want` bytes and feed them back; or stop, admitted or refused.
struct step {
  std::string send;
  size_t want = 0;
  bool admitted = false;
  refusal refused = refusal::none;

  bool finished() const { return admitted || refused != refusal::none; }
};

/// The keys of one connection: the secret (empty: none) and the TLS
/// channel binding (empty without TLS). A queue may take more secrets
/// besides its own (roles): a client proves one of them.
struct handshake_keys {
  std::string secret;
  std::string channel_binding;
  std::vector<std::string> other_secrets{};  ///< the queue's side only
};

/// The queue's side. Feed it exactly the bytes each step wants.
class server_handshake {
 public:
  server_handshake(handshake_keys keys, const std::array<uint8_t, nonce_bytes>& nonce);

  /// The hello to send first, and how much of the client's hello to read.
  step start();

  /// The bytes last asked for.
  step feed(const std::string& bytes);

  /// Once admitted: which secret the client proved, 0 for keys.secret (or
  /// none), i + 1 for other_secrets[i].
  size_t proved() const { return proved_; }

 private:
  step on_body(const std::string& body);

  handshake_keys keys_;
  std::string nonce_;
  size_t proved_ = 0;
  enum { hello_frame, hello_body, proof_frame, proof_body, done } state_ = hello_frame;
};

/// The client's side. Feed it exactly the bytes each step wants.
class client_handshake {
 public:
  client_handshake(handshake_keys keys, const std::array<uint8_t, nonce_bytes>& nonce);

  /// The hello to send first, and how much of the queue's hello to read.
  step start();

  /// The bytes last asked for.
  step feed(const std::string& bytes);

 private:
  step on_hello(const std::string& body);
  step on_answer(const std::string& body);

  handshake_keys keys_;
  std::string nonce_;
  std::string queue_nonce_;
  char answer_type_ = 0;
  enum { hello_frame, hello_body, answer_frame, answer_body, done } state_ = hello_frame;
};

/// What `role` ("client" or "queue") proves: HMAC-SHA256 keyed with the
/// secret over the role, both nonces and the channel binding.
std::string handshake_proof(const handshake_keys& keys, const char* role,
                            const std::string& queue_nonce, const std::string& client_nonce);

/// A sentence for a refusal, as a user reads it.
std::string describe(refusal why);

}  // namespace ergon::transport
