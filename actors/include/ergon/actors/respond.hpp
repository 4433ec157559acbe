// respond: answers a request from an actor (queue_actor) through CAF. The
// queue's actors take requests with a reply_to channel from the blocking
// facade; a request from an actor comes without one, and `answer_requester`
// gives it a channel that answers the requester. The promise is made and
// kept by the actor that answers, so it is delivered on that actor's thread.
#pragma once

#include <utility>
#include <vector>

#include <caf/response_promise.hpp>

#include "ergon/actors/reply.hpp"
#include "ergon/queue_actor.hpp"

namespace ergon::actors {

inline void respond(caf::response_promise& rp, status st) {
  if (st)
    rp.deliver(ok_atom::value);
  else
    rp.deliver(to_caf_error(st));
}

template <class T>
void respond(caf::response_promise& rp, result<T> r) {
  if (r)
    rp.deliver(std::move(*r));
  else
    rp.deliver(to_caf_error(r.error()));
}

/// Gives `to` a channel to the current requester unless it has one.
template <class Self, class V>
void answer_requester(Self* self, reply_to<V>& to) {
  if (to)
    return;
  auto rp = self->make_response_promise();
  to = reply_to<V>::calling([rp](V v) mutable { respond(rp, std::move(v)); });
}

}  // namespace ergon::actors
