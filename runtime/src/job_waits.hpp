// job_waits: the actor that answers waits for a job's final status
// (queue::wait, queue::wait_async, wait_atom). It never polls: it reads the
// job once, and again only when the dispatcher's final_watch says a commit
// finished it, or answers `timeout` when the wait's time is up. Reads go to
// a blocking-calls actor of its own, so no scheduler thread waits on SQLite.
// Internal to runtime/.
#pragma once

#include <memory>

#include <caf/actor.hpp>
#include <caf/atom.hpp>

#include "runtime_access.hpp"
#include "queue_impl.hpp"

namespace ergon::runtime {

/// `q`'s wait actor, spawned on first use. It takes (wait_atom, job_id,
/// milliseconds) and answers with the job's job_info once the job is final,
/// or an error: not_found, timeout, closed. Answers `closed` to every wait
/// it holds when it exits (the queue stops). An invalid handle once `q`
/// closed.
caf::actor job_waits(const std::shared_ptr<queue_impl>& q);

}  // namespace ergon::runtime
