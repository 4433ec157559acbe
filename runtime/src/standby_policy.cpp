#include "standby_policy.hpp"

#include <algorithm>

namespace ergon::runtime {

namespace {
constexpr std::chrono::milliseconds longest_backoff{5'000};
}

standby_policy::step standby_policy::read(
  const result<std::optional<storage::pg_lease::view>>& lease) {
  if (!lease)
    return back_off();
  backoff_ = {};
  if (!*lease || (*lease)->takeable())
    return {true, {}};
  // Just after it passes: the server's clock, so a little later.
  auto passes = std::chrono::milliseconds{(*lease)->ms_left + 10};
  return {false, std::min(poll_, passes)};
}

standby_policy::step standby_policy::takeover_failed(const status& why) {
  if (why.code() == error::busy) {
    backoff_ = {};
    return {false, poll_};
  }
  return back_off();
}

standby_policy::step standby_policy::stepped_down() {
  backoff_ = {};
  return {false, poll_};
}

standby_policy::step standby_policy::back_off() {
  backoff_ = backoff_.count() == 0 ? poll_ : std::min(backoff_ * 2, longest_backoff);
  backoff_ = std::max(backoff_, poll_);
  return {false, backoff_};
}

}  // namespace ergon::runtime
