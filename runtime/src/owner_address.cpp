#include "owner_address.hpp"

#include "ergon/storage/ownership.hpp"
#include "http/request_head.hpp"

namespace ergon::runtime {
namespace {

bool on_this_host(const owner_info& o) {
  return o.host == storage::host_name();
}

}  // namespace

result<std::string> owner_address(const owner_info& o, const owner_info::listener& l) {
  bool loopback = http::loopback_address(l.address) || l.address == "localhost";
  if (loopback && !on_this_host(o))
    return status{error::unreachable, "it listens on " + l.address + " of its own host only"};
  if (l.address != "0.0.0.0" && l.address != "::" && !l.address.empty())
    return l.address;
  return on_this_host(o) ? std::string{"127.0.0.1"} : o.host;
}

}  // namespace ergon::runtime
