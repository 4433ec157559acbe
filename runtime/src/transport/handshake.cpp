#include "transport/handshake.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

namespace ergon::transport {
namespace {

constexpr char magic[] = "ergon";
constexpr size_t magic_bytes = sizeof(magic) - 1;
// magic, version, flags, nonce
constexpr size_t hello_bytes = magic_bytes + 2 + nonce_bytes;
// magic, version
constexpr size_t client_hello_bytes = magic_bytes + 1;
// TLS's record types for an alert and a handshake: a TLS peer's first byte.
constexpr char tls_alert = 0x15;
constexpr char tls_handshake = 0x16;
constexpr uint8_t has_secret = 0x01;

constexpr char client_hello_type = 'C';
constexpr char hello_type = 'H';
constexpr char proof_type = 'P';
constexpr char accepted_type = 'A';
constexpr char refused_type = 'R';

std::string frame(char type, const std::string& body) {
  std::string out;
  out.reserve(2 + body.size());
  out += type;
  out += static_cast<char>(body.size());
  out += body;
  return out;
}

// magic, version, flags, nonce: the start of a hello and of a proof.
std::string preamble(uint8_t flags, const std::string& nonce) {
  std::string out{magic, magic_bytes};
  out += static_cast<char>(protocol_version);
  out += static_cast<char>(flags);
  out += nonce;
  return out;
}

bool has_magic(const std::string& body) {
  return body.size() >= hello_bytes && body.compare(0, magic_bytes, magic) == 0;
}

uint8_t version_of(const std::string& body) {
  return static_cast<uint8_t>(body[magic_bytes]);
}

uint8_t flags_of(const std::string& body) {
  return static_cast<uint8_t>(body[magic_bytes + 1]);
}

std::string nonce_of(const std::string& body) {
  return body.substr(magic_bytes + 2, nonce_bytes);
}

step refuse(refusal why, std::string send = {}) {
  step s;
  s.send = std::move(send);
  s.refused = why;
  return s;
}

step read(size_t n, std::string send = {}) {
  step s;
  s.send = std::move(send);
  s.want = n;
  return s;
}

step admit(std::string send = {}) {
  step s;
  s.send = std::move(send);
  s.admitted = true;
  return s;
}

bool same(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

std::string handshake_proof(const handshake_keys& keys, const char* role,
                            const std::string& queue_nonce, const std::string& client_nonce) {
  std::string transcript = "ergon-transport-1";
  transcript += '\0';
  transcript += role;
  transcript += '\0';
  transcript += queue_nonce;
  transcript += client_nonce;
  transcript += keys.channel_binding;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), keys.secret.data(), static_cast<int>(keys.secret.size()),
       reinterpret_cast<const unsigned char*>(transcript.data()), transcript.size(), mac, &len);
  return std::string{reinterpret_cast<const char*>(mac), len};
}

server_handshake::server_handshake(handshake_keys keys,
                                   const std::array<uint8_t, nonce_bytes>& nonce)
    : keys_(std::move(keys)), nonce_(nonce.begin(), nonce.end()) {}

step server_handshake::start() {
  state_ = hello_frame;
  return read(2, frame(hello_type, preamble(keys_.secret.empty() ? 0 : has_secret, nonce_)));
}

step server_handshake::feed(const std::string& bytes) {
  auto len = bytes.size() == 2 ? static_cast<uint8_t>(bytes[1]) : 0;
  switch (state_) {
    case hello_frame:
      if (bytes.size() != 2 || bytes[0] != client_hello_type || len != client_hello_bytes)
        break;
      state_ = hello_body;
      return read(len);
    case hello_body:
      if (bytes.compare(0, magic_bytes, magic) != 0)
        break;
      if (static_cast<uint8_t>(bytes[magic_bytes]) != protocol_version) {
        state_ = done;
        return refuse(refusal::unsupported_version,
                      frame(refused_type, std::string(1, static_cast<char>(
                                                            refusal::unsupported_version))));
      }
      state_ = proof_frame;
      return read(2);
    case proof_frame:
      if (bytes.size() != 2 || bytes[0] != proof_type
          || (len != hello_bytes && len != hello_bytes + proof_bytes))
        break;
      state_ = proof_body;
      return read(len);
    case proof_body:
      state_ = done;
      return on_body(bytes);
    default:
      break;
  }
  state_ = done;
  return refuse(refusal::not_ergon);
}

step server_handshake::on_body(const std::string& body) {
  auto refused = [](refusal why) {
    return refuse(why, frame(refused_type, std::string(1, static_cast<char>(why))));
  };
  if (!has_magic(body))
    return refuse(refusal::not_ergon);
  if (version_of(body) != protocol_version)
    return refused(refusal::unsupported_version);
  bool proved = (flags_of(body) & has_secret) != 0;
  if (proved != (body.size() == hello_bytes + proof_bytes))
    return refuse(refusal::not_ergon);
  if (keys_.secret.empty())
    return admit(frame(accepted_type, {}));
  if (!proved)
    return refused(refusal::secret_required);
  auto client_nonce = nonce_of(body);
  auto proof = body.substr(hello_bytes);
  // Every candidate is tried, so the time taken says nothing of which matched.
  auto matched = keys_.other_secrets.size() + 1;
  for (size_t i = 0; i <= keys_.other_secrets.size(); ++i) {
    handshake_keys candidate{i == 0 ? keys_.secret : keys_.other_secrets[i - 1],
                             keys_.channel_binding};
    if (same(proof, handshake_proof(candidate, "client", nonce_, client_nonce)) && matched > i)
      matched = i;
  }
  if (matched > keys_.other_secrets.size())
    return refused(refusal::wrong_secret);
  proved_ = matched;
  handshake_keys as{matched == 0 ? keys_.secret : keys_.other_secrets[matched - 1],
                    keys_.channel_binding};
  return admit(frame(accepted_type, handshake_proof(as, "queue", nonce_, client_nonce)));
}

client_handshake::client_handshake(handshake_keys keys,
                                   const std::array<uint8_t, nonce_bytes>& nonce)
    : keys_(std::move(keys)), nonce_(nonce.begin(), nonce.end()) {}

step client_handshake::start() {
  state_ = hello_frame;
  std::string hello{magic, magic_bytes};
  hello += static_cast<char>(protocol_version);
  return read(2, frame(client_hello_type, hello));
}

step client_handshake::feed(const std::string& bytes) {
  auto len = bytes.size() == 2 ? static_cast<uint8_t>(bytes[1]) : 0;
  switch (state_) {
    case hello_frame:
      if (!bytes.empty() && (bytes[0] == tls_alert || bytes[0] == tls_handshake)) {
        state_ = done;
        return refuse(refusal::speaks_tls);
      }
      if (bytes.size() != 2 || bytes[0] != hello_type || len != hello_bytes)
        break;
      state_ = hello_body;
      return read(len);
    case hello_body:
      return on_hello(bytes);
    case answer_frame: {
      bool fits = bytes.size() == 2
                  && ((bytes[0] == accepted_type && (len == 0 || len == proof_bytes))
                      || (bytes[0] == refused_type && len == 1));
      if (!fits)
        break;
      answer_type_ = bytes[0];
      if (len == 0)
        return on_answer({});
      state_ = answer_body;
      return read(len);
    }
    case answer_body:
      return on_answer(bytes);
    default:
      break;
  }
  state_ = done;
  return refuse(refusal::not_ergon);
}

step client_handshake::on_hello(const std::string& body) {
  state_ = done;
  if (!has_magic(body) || body.size() != hello_bytes)
    return refuse(refusal::not_ergon);
  if (version_of(body) != protocol_version)
    return refuse(refusal::unsupported_version);
  bool queue_has_secret = (flags_of(body) & has_secret) != 0;
  // Nothing goes to a queue that can't prove the secret this client has.
  if (!keys_.secret.empty() && !queue_has_secret)
    return refuse(refusal::queue_without_secret);
  queue_nonce_ = nonce_of(body);
  auto proof = preamble(keys_.secret.empty() ? 0 : has_secret, nonce_);
  if (!keys_.secret.empty())
    proof += handshake_proof(keys_, "client", queue_nonce_, nonce_);
  state_ = answer_frame;
  return read(2, frame(proof_type, proof));
}

step client_handshake::on_answer(const std::string& body) {
  state_ = done;
  if (answer_type_ == refused_type) {
    auto why = static_cast<refusal>(body[0]);
    if (why == refusal::wrong_secret || why == refusal::secret_required
        || why == refusal::unsupported_version)
      return refuse(why);
    return refuse(refusal::not_ergon);
  }
  if (keys_.secret.empty())
    return body.empty() ? admit() : refuse(refusal::not_ergon);
  if (!same(body, handshake_proof(keys_, "queue", queue_nonce_, nonce_)))
    return refuse(refusal::queue_proof_wrong);
  return admit();
}

std::string describe(refusal why) {
  switch (why) {
    case refusal::none:
      return "admitted";
    case refusal::wrong_secret:
      return "the secret does not match the queue's";
    case refusal::secret_required:
      return "the queue requires a secret, and none was given";
    case refusal::unsupported_version:
      return "the peer speaks another version of ergon's handshake";
    case refusal::not_ergon:
      return "the peer does not speak ergon's handshake";
    case refusal::queue_without_secret:
      return "the queue did not prove the secret: it has none";
    case refusal::queue_proof_wrong:
      return "the queue did not prove the secret: it has another one";
    case refusal::speaks_tls:
      return "the queue speaks TLS: load certificates with use_tls";
  }
  return "refused";
}

}  // namespace ergon::transport
