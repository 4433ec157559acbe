// The status every call on a moved-from queue or worker handle returns.
// Internal to runtime/.
#pragma once

#include <string>

#include "ergon/error.hpp"

namespace ergon::runtime {

inline status moved_from(const char* what) {
  return {error::closed, std::string{"this "} + what + " handle was moved from"};
}

}  // namespace ergon::runtime
