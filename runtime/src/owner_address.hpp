// owner_address: the host to dial for one of a queue's owner's listeners
// (find_owner). Shared by connect (connect_options::owner_of) and ergonctl.
// Internal to runtime/.
#pragma once

#include <string>

#include "ergon/error.hpp"
#include "ergon/inspector.hpp"

namespace ergon::runtime {

/// A listener bound to every address is reached on this host's loopback,
/// or by the owner's host name from elsewhere. One bound to loopback on
/// another host can't be reached: this host's loopback would lead to some
/// other queue (unreachable, saying so).
result<std::string> owner_address(const owner_info& o, const owner_info::listener& l);

}  // namespace ergon::runtime
