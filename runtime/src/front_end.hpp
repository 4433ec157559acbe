// front_end: a way in to a queue from outside its process's own calls: the
// queue actor, the ports it is published on, the HTTP endpoint. Each one
// registers with the queue (queue_impl::attach), which knows them only by
// this interface and stops them, newest first, before it drains: no request
// from outside arrives while the queue closes. Internal to runtime/.
#pragma once

#include <cstdint>

namespace ergon::runtime {

class front_end {
 public:
  enum class kind : uint8_t {
    queue_actor,  ///< the typed actor other actors and nodes talk to
    actor_port,   ///< a port the queue actor is published on
    http,         ///< the HTTP endpoint (options::http)
  };

  virtual ~front_end() = default;

  virtual kind what() const noexcept = 0;
  /// The bound port (0: none, the queue actor itself).
  virtual uint16_t port() const noexcept = 0;
  /// Stops taking requests; requests being answered get their answer
  /// (`closed` once the queue is). Called once, from the closing thread.
  virtual void stop() = 0;
};

}  // namespace ergon::runtime
