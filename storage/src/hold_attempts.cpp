#include "ergon/storage/op/hold_attempts.hpp"

#include "status_sql.hpp"

namespace ergon::storage {
namespace {

#define ERGON_HOLD_ATTEMPT(greater)                                                   \
  "UPDATE jobs SET expires_at = " greater "(expires_at, ?3) "                          \
  "WHERE id = ?1 AND status = " ERGON_SQL_RUNNING " AND attempt_token = ?2 "         \
  "RETURNING expires_at"
constexpr dialect_sql hold_attempt = {ERGON_HOLD_ATTEMPT("max"), ERGON_HOLD_ATTEMPT("greatest")};

}  // namespace

result<std::vector<std::optional<int64_t>>> hold_attempts(db& d, const hold_attempts_args& args) {
  auto s = d.prepare(hold_attempt);
  if (!s)
    return s.error();
  auto& q = **s;
  std::vector<std::optional<int64_t>> out;
  out.reserve(args.attempts.size());
  for (auto& a : args.attempts) {
    q.reset();
    q.bind(1, a.row);
    q.bind(2, a.token);
    q.bind(3, args.until);
    if (!q.step()) {
      if (!q.step_status())
        return q.step_status();
      out.emplace_back();
      continue;
    }
    out.emplace_back(q.column_int(0));
    if (auto st = d.run(q); !st)
      return st;
  }
  return out;
}

}  // namespace ergon::storage
