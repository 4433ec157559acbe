#include "ergon/storage/op/lose_attempts.hpp"

#include "attempt_end.hpp"

namespace ergon::storage {

result<std::vector<attempt_end>> lose_attempts(db& d, const lose_attempts_args& args,
                                               int64_t now_ms) {
  return end_attempts(args.attempts.size(), [&](size_t i) {
    auto& a = args.attempts[i];
    return end_attempt(d, a.row, a.token, {attempt_outcome::worker_lost, "worker lost"},
                       retry_timing::immediate, 0.0, now_ms);
  });
}

}  // namespace ergon::storage
