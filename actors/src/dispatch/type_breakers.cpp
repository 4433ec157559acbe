#include "type_breakers.hpp"

namespace ergon::actors {
namespace {

bool is_failure(attempt_outcome o) {
  return o == attempt_outcome::failed || o == attempt_outcome::failed_permanently
         || o == attempt_outcome::expired;
}

}  // namespace

type_breakers::type_breakers(const std::map<std::string, breaker_options>& options) {
  for (auto& [type, opts] : options)
    breakers_[type].opts = opts;
}

bool type_breakers::may_start(const std::string& type) const {
  auto i = breakers_.find(type);
  if (i == breakers_.end())
    return true;
  auto& b = i->second;
  if (b.state == breaker_state::closed)
    return static_cast<int64_t>(b.failures.size() + b.reported.size()) < b.opts.failures;
  return b.state == breaker_state::half_open && !b.trial;
}

void type_breakers::forget_old(breaker& b, int64_t now) {
  while (!b.failures.empty() && b.failures.front() <= now - b.opts.window.count())
    b.failures.pop_front();
}

void type_breakers::reported_failure(const std::string& type, int64_t row, int64_t now) {
  auto i = breakers_.find(type);
  if (i == breakers_.end() || i->second.state != breaker_state::closed)
    return;
  // Failures that slid out of the window must not hold the type back.
  forget_old(i->second, now);
  i->second.reported.insert(row);
}

type_breakers::change type_breakers::open(const std::string& type, breaker& b, int64_t now,
                                          std::string why) {
  change c{type, b.state, breaker_state::open, std::move(why), now + b.opts.cool_down.count()};
  b.state = breaker_state::open;
  b.open_until = c.until;
  b.trial.reset();
  b.failures_when_opened = static_cast<int32_t>(b.failures.size());
  b.failures.clear();
  b.reported.clear();
  ++b.trips;
  return c;
}

std::optional<type_breakers::change> type_breakers::ended(const std::string& type, int64_t row,
                                                          attempt_outcome outcome,
                                                          int64_t now) {
  auto i = breakers_.find(type);
  if (i == breakers_.end())
    return std::nullopt;
  auto& b = i->second;
  b.reported.erase(row);
  bool failed = is_failure(outcome);
  switch (b.state) {
    case breaker_state::closed: {
      forget_old(b, now);
      if (!failed)
        return std::nullopt;
      b.failures.push_back(now);
      if (static_cast<int32_t>(b.failures.size()) < b.opts.failures)
        return std::nullopt;
      return open(type, b, now,
                  std::to_string(b.failures.size()) + " failures within "
                    + std::to_string(b.opts.window.count()) + " ms");
    }
    case breaker_state::open:
      return std::nullopt;  // attempts that started before it opened
    case breaker_state::half_open: {
      if (b.trial != row)
        return std::nullopt;
      if (failed)
        return open(type, b, now, "the trial job failed");
      b.trial.reset();
      if (outcome != attempt_outcome::succeeded)
        return std::nullopt;  // no verdict: another job may try
      b.state = breaker_state::closed;
      b.open_until.reset();
      return change{type, breaker_state::half_open, breaker_state::closed,
                    "the trial job succeeded", std::nullopt};
    }
  }
  return std::nullopt;
}

void type_breakers::picked(const std::string& type, int64_t row) {
  auto i = breakers_.find(type);
  if (i != breakers_.end() && i->second.state == breaker_state::half_open && !i->second.trial)
    i->second.trial = row;
}

void type_breakers::trial_lost(const std::string& type, int64_t row) {
  auto i = breakers_.find(type);
  if (i != breakers_.end() && i->second.trial == row)
    i->second.trial.reset();
}

std::vector<type_breakers::change> type_breakers::tick(int64_t now) {
  std::vector<change> out;
  for (auto& [type, b] : breakers_) {
    if (b.state != breaker_state::open || !b.open_until || *b.open_until > now)
      continue;
    b.state = breaker_state::half_open;
    b.open_until.reset();
    out.push_back({type, breaker_state::open, breaker_state::half_open,
                   "the cool-down ended: one trial job may start", std::nullopt});
  }
  return out;
}

std::optional<int64_t> type_breakers::next_wake() const {
  std::optional<int64_t> next;
  for (auto& [type, b] : breakers_)
    if (b.state == breaker_state::open && b.open_until && (!next || *b.open_until < *next))
      next = b.open_until;
  return next;
}

result<std::optional<type_breakers::change>> type_breakers::reset(const std::string& type) {
  auto i = breakers_.find(type);
  if (i == breakers_.end())
    return status{error::not_found, "job type '" + type + "' has no circuit breaker "
                                    "(scheduling_options::breakers)"};
  auto& b = i->second;
  auto from = b.state;
  b.state = breaker_state::closed;
  b.failures.clear();
  b.reported.clear();
  b.open_until.reset();
  b.trial.reset();
  if (from == breaker_state::closed)
    return std::optional<change>{};
  return std::optional<change>{change{type, from, breaker_state::closed, "reset", std::nullopt}};
}

std::vector<breaker_info> type_breakers::snapshot() const {
  std::vector<breaker_info> out;
  for (auto& [type, b] : breakers_)
    out.push_back({type, b.state,
                   b.state == breaker_state::closed ? static_cast<int32_t>(b.failures.size())
                                                    : b.failures_when_opened,
                   b.open_until, b.trips});
  return out;
}

}  // namespace ergon::actors
