#include "http/request_head.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>

namespace ergon::http {
namespace {

bool same_text(std::string_view a, std::string_view b) {
  return a.size() == b.size()
         && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
              return std::tolower(static_cast<unsigned char>(x))
                     == std::tolower(static_cast<unsigned char>(y));
            });
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

// Decimal digits only, at most `max_digits` of them.
bool read_number(std::string_view text, size_t max_digits, uint64_t& out) {
  if (text.empty() || text.size() > max_digits)
    return false;
  out = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return false;
    out = out * 10 + static_cast<uint64_t>(c - '0');
  }
  return true;
}

framing refused(int status, std::string code, std::string message) {
  framing f;
  f.what = framing::verdict::refused;
  f.refused = {status, std::move(code), std::move(message)};
  return f;
}

bool v4_loopback(std::string_view text) {
  in_addr a{};
  return ::inet_pton(AF_INET, std::string{text}.c_str(), &a) == 1
         && (ntohl(a.s_addr) >> 24) == 127;
}

bool v6_loopback(std::string_view text) {
  in6_addr a{};
  if (::inet_pton(AF_INET6, std::string{text}.c_str(), &a) != 1)
    return false;
  return IN6_IS_ADDR_LOOPBACK(&a) || (IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127);
}

}  // namespace

framing frame_request(std::string_view received, const request_limits& limits,
                      std::string_view peer_ip) {
  auto end = received.find("\r\n\r\n");
  auto head = end == std::string_view::npos ? received.size() : end + 4;
  if (head > limits.max_head_bytes)
    return refused(431, "headers_too_large",
                   "the request line and headers take more than "
                     + std::to_string(limits.max_head_bytes) + " bytes");
  if (end == std::string_view::npos)
    return {};
  auto line_end = received.find("\r\n");
  auto line = received.substr(0, line_end);
  auto sp1 = line.find(' ');
  auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || sp1 == 0 || sp2 == sp1 + 1)
    return refused(400, "bad_request", "the request line is not 'METHOD target HTTP/1.1'");
  auto target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  bool has_length = false;
  uint64_t length = 0;
  for (auto at = line_end + 2; at < end;) {
    auto next = received.find("\r\n", at);
    auto field = received.substr(at, next - at);
    at = next + 2;
    auto colon = field.find(':');
    if (colon == std::string_view::npos || colon == 0)
      return refused(400, "bad_request", "a header line without a name and ':'");
    auto name = field.substr(0, colon);
    auto value = trimmed(field.substr(colon + 1));
    if (same_text(name, "transfer-encoding"))
      return refused(411, "length_required",
                     "a body must come with a Content-Length; Transfer-Encoding is not taken");
    if (!same_text(name, "content-length"))
      continue;
    uint64_t v = 0;
    if (!read_number(value, 19, v) || (has_length && v != length))
      return refused(400, "bad_request", "Content-Length must be one decimal number");
    has_length = true;
    length = v;
  }
  auto method = line.substr(0, sp1);
  bool submit = method == "POST" && target.substr(0, target.find('?')) == "/api/jobs";
  if (length > limits.max_body_bytes
      && !(submit && length <= limits.max_submit_body_bytes && limits.may_submit
           && limits.may_submit(received.substr(0, head), peer_ip)))
    return refused(413, "body_too_large",
                   "the body has " + std::to_string(length) + " bytes; this endpoint takes at most "
                     + std::to_string(limits.max_body_bytes)
                     + (submit ? " (a job submission up to "
                                   + std::to_string(limits.max_submit_body_bytes)
                                   + " from a writer whose headers prove it: X-Ergon and the "
                                     "secret, or loopback when the queue has none)"
                               : std::string{}));
  if (received.size() < head + length)
    return {};
  framing f;
  f.what = framing::verdict::complete;
  f.length = head + static_cast<size_t>(length);
  f.path = std::string{target.substr(0, target.find('?'))};
  return f;
}

std::optional<std::string_view> header_value(std::string_view head, std::string_view name) {
  auto line_end = head.find("\r\n");
  for (auto at = line_end == std::string_view::npos ? head.size() : line_end + 2;
       at < head.size();) {
    auto next = head.find("\r\n", at);
    if (next == std::string_view::npos)
      next = head.size();
    auto field = head.substr(at, next - at);
    at = next + 2;
    auto colon = field.find(':');
    if (colon != std::string_view::npos && same_text(field.substr(0, colon), name))
      return trimmed(field.substr(colon + 1));
  }
  return std::nullopt;
}

bool loopback_address(std::string_view address) {
  return v4_loopback(address) || v6_loopback(address);
}

bool loopback_host(std::string_view host, uint16_t port, bool tls) {
  std::string_view port_text;
  bool has_port = false;
  if (!host.empty() && host.front() == '[') {
    auto close = host.find(']');
    if (close == std::string_view::npos || !v6_loopback(host.substr(1, close - 1)))
      return false;
    auto rest = host.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':')
        return false;
      port_text = rest.substr(1);
      has_port = true;
    }
  } else {
    auto colon = host.find(':');
    auto name = host.substr(0, colon);
    if (colon != std::string_view::npos) {
      port_text = host.substr(colon + 1);
      has_port = true;
    }
    if (!same_text(name, "localhost") && !v4_loopback(name))
      return false;
  }
  if (!has_port)
    return port == (tls ? 443 : 80);
  uint64_t given = 0;
  return read_number(port_text, 5, given) && given == port;
}

status_words words_of(int status) {
  switch (status) {
    case 400: return {"bad_request", "Bad Request"};
    case 403: return {"forbidden", "Forbidden"};
    case 404: return {"not_found", "Not Found"};
    case 405: return {"method_not_allowed", "Method Not Allowed"};
    case 408: return {"request_timeout", "Request Timeout"};
    case 411: return {"length_required", "Length Required"};
    case 413: return {"body_too_large", "Payload Too Large"};
    case 414: return {"uri_too_long", "URI Too Long"};
    case 416: return {"range_not_satisfiable", "Range Not Satisfiable"};
    case 431: return {"headers_too_large", "Request Header Fields Too Large"};
    case 503: return {"busy", "Service Unavailable"};
    default: return {"http_error", "Error"};
  }
}

std::string response_bytes(const refusal& r) {
  nlohmann::json doc{{"error", r.code}, {"message", r.message}};
  auto body = doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return "HTTP/1.1 " + std::to_string(r.status) + " " + words_of(r.status).reason
         + "\r\nContent-Type: application/json\r\nCache-Control: no-store\r\nContent-Length: "
         + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

}  // namespace ergon::http
