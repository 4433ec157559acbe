// job_json: jobs as JSON, for POST /api/jobs. Every field of ergon::job
// has a key of the same name; the payload comes as JSON (stored as
// msgpack), as base64 bytes or as text. Internal to runtime/.
#pragma once

#include <string>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/job.hpp"

namespace ergon::runtime {

/// What a submission's body holds.
struct json_submission {
  std::vector<job> jobs;
  bool batch = false;  ///< {"jobs": [...]}, not one job
};

/// Reads a body that is one job ({"type": ...}) or a batch ({"jobs":
/// [...]}). Each job is checked as queue::submit checks it
/// (validate(job, max_payload_bytes)). Errors: invalid_argument naming the
/// key, with "jobs[i]." before it in a batch ("body" when it is not a JSON
/// object; "payload" when more than one payload form is given; an unknown
/// key by its name).
result<json_submission> jobs_from_json(const std::string& body, size_t max_payload_bytes);

}  // namespace ergon::runtime
