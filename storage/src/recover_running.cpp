#include "ergon/storage/op/recover_running.hpp"

#include "attempt_end.hpp"

namespace ergon::storage {

result<std::vector<attempt_end>> recover_running(db& d, const recover_running_args& args,
                                                 int64_t now_ms) {
  return end_attempts(args.rows.size(), [&](size_t i) {
    double u = i < args.randoms.size() ? args.randoms[i] : 0.0;
    return end_attempt(d, args.rows[i], std::nullopt,
                       {attempt_outcome::process_restart, "process restart"}, args.timing, u,
                       now_ms);
  });
}

}  // namespace ergon::storage
