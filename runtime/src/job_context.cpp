#include "ergon/job_context.hpp"

#include "ergon/actors/worker.hpp"

namespace ergon {

job_id job_context::id() const {
  return a_.id();
}

const std::string& job_context::type() const {
  return a_.type();
}

const std::string& job_context::group() const {
  return a_.group();
}

const std::string& job_context::payload() const {
  return a_.payload();
}

int32_t job_context::try_number() const {
  return a_.try_number();
}

bool job_context::cancelled() const {
  return a_.cancelled();
}

status job_context::checkpoint(std::string payload) {
  return a_.checkpoint(std::move(payload));
}

status job_context::heartbeat() {
  return a_.heartbeat();
}

status job_context::complete(std::string result) {
  return a_.complete(std::move(result));
}

status job_context::fail(std::string message) {
  return a_.fail(std::move(message));
}

}  // namespace ergon
