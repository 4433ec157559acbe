// runtime_access: how the runtime's own code reaches the state behind the
// public handles. queue, worker and inspector keep their impl private and
// befriend this struct only; a user can't name the impl types.
#pragma once

#include <memory>
#include <utility>

#include "ergon/inspector.hpp"
#include "ergon/queue.hpp"
#include "ergon/worker.hpp"

namespace ergon {

struct runtime_access {
  using queue_impl = queue::impl;
  using worker_impl = worker::impl;
  using inspector_impl = inspector::impl;

  static worker make_worker(std::shared_ptr<worker::impl> p) noexcept {
    return worker{std::move(p)};
  }

  /// The state behind `q`; null for a moved-from handle.
  static queue::impl* impl_of(const queue& q) noexcept { return q.impl_.get(); }
};

using queue_impl = runtime_access::queue_impl;
using worker_impl = runtime_access::worker_impl;
using inspector_impl = runtime_access::inspector_impl;

}  // namespace ergon
