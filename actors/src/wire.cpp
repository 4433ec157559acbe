#include "ergon/wire.hpp"

#include <caf/make_message.hpp>
#include <caf/sec.hpp>

namespace ergon {

caf::error to_caf_error(const status& st) {
  if (st)
    return caf::error{};
  return caf::error{static_cast<uint8_t>(st.code()), error_category,
                    caf::make_message(st.message(), st.field())};
}

status to_status(const caf::error& e) {
  if (!e)
    return {};
  if (e.category() == error_category) {
    std::string message;
    std::string field;
    auto& ctx = e.context();
    if (ctx.match_elements<std::string, std::string>()) {
      message = ctx.get_as<std::string>(0);
      field = ctx.get_as<std::string>(1);
    }
    auto code = e.code();
    if (code == 0 || code > static_cast<uint8_t>(error::forbidden))
      return {error::internal, "an ergon error with unknown code " + std::to_string(code)};
    return {static_cast<error>(code), std::move(message), std::move(field)};
  }
  auto text = caf::to_string(e);
  if (e.category() == caf::atom("system")) {
    switch (static_cast<caf::sec>(e.code())) {
      case caf::sec::request_receiver_down:
        return {error::closed, "the queue is closed: " + text};
      case caf::sec::no_route_to_receiving_node:
      case caf::sec::cannot_connect_to_node:
      case caf::sec::disconnect_during_handshake:
        return {error::unreachable, "the queue is unreachable: " + text};
      default:
        break;
    }
  }
  return {error::internal, text};
}

}  // namespace ergon
