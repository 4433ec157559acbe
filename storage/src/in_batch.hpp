// in_batch: a failure of one job of a batch, named by its position, as
// every operation that takes a batch of jobs reports it. Internal to
// storage/.
#pragma once

#include <cstddef>
#include <string>

#include "ergon/error.hpp"

namespace ergon::storage {

/// `st` prefixed with "job <index> of <size> in the batch: " (nothing for a
/// batch of one).
inline status in_batch(status st, size_t index, size_t size) {
  if (size == 1)
    return st;
  return {st.code(), "job " + std::to_string(index) + " of " + std::to_string(size)
                       + " in the batch: " + st.message(),
          st.field()};
}

}  // namespace ergon::storage
