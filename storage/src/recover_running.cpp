#include "attempt_end.hpp"
#include "ergon/storage/operations.hpp"

namespace ergon::storage {

result<std::vector<attempt_end>> recover_running(db& d, const recover_running_args& args,
                                                 int64_t now_ms) {
  std::vector<attempt_end> out;
  for (size_t i = 0; i < args.rows.size(); ++i) {
    double u = i < args.randoms.size() ? args.randoms[i] : 0.0;
    auto ended = end_attempt(d, args.rows[i], std::nullopt,
                             attempt_outcome::process_restart, "process restart",
                             args.timing, u, now_ms);
    if (!ended)
      return ended.error();
    if (*ended)
      out.push_back(std::move(**ended));
  }
  return out;
}

}  // namespace ergon::storage
