#include "ergon/actors/scheduling_policy.hpp"

#include <algorithm>
#include <iterator>
#include <cmath>
#include <utility>

#include "ergon/actors/fair_share.hpp"
#include "ergon/storage/times.hpp"

namespace ergon::actors {

// -- pauses and rate limits ---------------------------------------------------------------

int64_t scheduling_policy::pause_state::frozen(int64_t from, int64_t now) const {
  int64_t total = 0;
  auto overlap = [&](int64_t a, int64_t b) {
    auto lo = std::max(a, from);
    auto hi = std::min(b, now);
    if (hi > lo)
      total += hi - lo;
  };
  for (auto& [a, b] : past)
    overlap(a, b);
  if (paused)
    overlap(since, now);
  return total;
}

void scheduling_policy::pause_state::start(std::optional<int64_t> deadline, int64_t now) {
  if (!paused) {
    paused = true;
    since = now;
  }
  until = deadline;
}

void scheduling_policy::pause_state::stop(int64_t now) {
  if (!paused)
    return;
  paused = false;
  // A deadline passed while nobody looked (the queue was closed) ends the
  // span there: the pause was over then.
  past.emplace_back(since, until ? std::max(since, std::min(*until, now)) : now);
  until.reset();
}

void scheduling_policy::token_bucket::refill(int64_t now) {
  if (last < 0) {
    tokens = limit.burst;
  } else if (now > last) {
    tokens = std::min<double>(limit.burst,
                              tokens + limit.per_second * static_cast<double>(now - last) / 1e3);
  }
  last = std::max(last, now);
}

void scheduling_policy::token_bucket::change(const rate_limit& to) {
  // Tokens earned so far at the old rate stay, up to the new burst.
  if (last >= 0)
    tokens = std::min<double>(tokens, to.burst);
  limit = to;
}

int64_t scheduling_policy::token_bucket::next_token(int64_t now) const {
  if (tokens >= 1.0 || limit.per_second <= 0)
    return now;
  return storage::add_ms(last, storage::ms_from_double(std::ceil((1.0 - tokens) * 1e3 / limit.per_second)));
}

// -- setup -------------------------------------------------------------------------------------

scheduling_policy::scheduling_policy(scheduling_options opts) : opts_(std::move(opts)) {
  order_.by_aging = opts_.aging.has_value();
  group_id("");
}

uint32_t scheduling_policy::group_id(const std::string& name) {
  auto i = group_ids_.find(name);
  if (i != group_ids_.end())
    return i->second;
  auto id = static_cast<uint32_t>(groups_.size());
  group_state g;
  g.name = name;
  g.weight = configured_weight(name);
  auto cfg = opts_.groups.find(name);
  if (cfg != opts_.groups.end()) {
    g.min_slots = cfg->second.min_slots;
    g.cap = cfg->second.max_running;
  }
  if (auto ahead = groups_ahead_.find(name); ahead != groups_ahead_.end()) {
    g.pause = std::move(ahead->second);
    groups_ahead_.erase(ahead);
  }
  if (auto r = opts_.group_rate_limits.find(name); r != opts_.group_rate_limits.end())
    g.rate = token_bucket{r->second};
  groups_.push_back(std::move(g));
  group_ids_.emplace(name, id);
  if (auto ahead = group_settings_ahead_.find(name); ahead != group_settings_ahead_.end()) {
    auto settings = ahead->second;
    group_settings_ahead_.erase(ahead);
    change_group(name, settings);
  }
  return id;
}

uint32_t scheduling_policy::type_id(const std::string& name) {
  auto i = type_ids_.find(name);
  if (i != type_ids_.end())
    return i->second;
  auto id = static_cast<uint32_t>(types_.size());
  type_state t;
  t.name = name;
  if (auto c = opts_.type_max_running.find(name); c != opts_.type_max_running.end())
    t.cap = c->second;
  if (auto r = opts_.type_rate_limits.find(name); r != opts_.type_rate_limits.end())
    t.rate = token_bucket{r->second};
  if (auto ahead = types_ahead_.find(name); ahead != types_ahead_.end()) {
    t.pause = std::move(ahead->second);
    types_ahead_.erase(ahead);
  }
  types_.push_back(std::move(t));
  type_ids_.emplace(name, id);
  if (auto ahead = type_settings_ahead_.find(name); ahead != type_settings_ahead_.end()) {
    auto settings = ahead->second;
    type_settings_ahead_.erase(ahead);
    change_type(name, settings);
  }
  return id;
}

// -- the index ----------------------------------------------------------------------------------

void scheduling_policy::add(const pending_job& e, int64_t now) {
  if (too_heavy(e.type, e.weight))
    too_heavy_.push_back(e);
  if (e.run_at > now)
    waiting_.emplace(e.run_at, e);
  else
    insert_ready(e);
}

void scheduling_policy::insert_ready(const pending_job& e) {
  auto& g = groups_[e.group];
  auto key = std::make_tuple(e.type, e.priority, e.weight);
  auto i = g.buckets.find(key);
  if (i == g.buckets.end()) {
    i = g.buckets.emplace(key, bucket{e.type, e.priority, e.weight,
                                      std::set<pending_job, bucket_order>{order_}})
          .first;
    g.by_type[e.type].push_back(&i->second);  // map nodes never move
  }
  if (!i->second.jobs.insert(e).second)
    return;
  ++ready_count_;
  if (opts_.preemption && e.priority >= opts_.preemption->threshold)
    ++high_ready_;
  if (g.ready++ == 0) {
    ready_groups_.insert(e.group);
    refresh_queues(e.group);
    if (!g.active)
      mark_dirty(allocation_reason::rebalance);
  }
}

void scheduling_policy::refresh_queues(uint32_t gid) {
  auto& g = groups_[gid];
  if (g.ready > 0 && g.running < g.whole)
    short_groups_.insert(gid);
  else
    short_groups_.erase(gid);
  turns_.erase({g.pass, gid});
  if (g.ready > 0 && g.frac > 0 && g.running == g.whole)
    turns_.insert({g.pass, gid});
}

bool scheduling_policy::remove(const pending_job& e) {
  auto& g = groups_[e.group];
  auto i = g.buckets.find(std::make_tuple(e.type, e.priority, e.weight));
  auto other = e;  // the key with the other `resumed` flag
  other.flags ^= pending_job::resumed;
  if (i != g.buckets.end() && (i->second.jobs.erase(e) == 1 || i->second.jobs.erase(other) == 1)) {
    --ready_count_;
    if (opts_.preemption && e.priority >= opts_.preemption->threshold)
      --high_ready_;
    if (--g.ready == 0) {
      ready_groups_.erase(e.group);
      refresh_queues(e.group);
      if (g.running == 0)
        mark_dirty(allocation_reason::group_drained);
    }
    return true;
  }
  auto [first, last] = waiting_.equal_range(e.run_at);
  for (auto j = first; j != last; ++j) {
    if (j->second.row == e.row) {
      waiting_.erase(j);
      return true;
    }
  }
  return false;
}

// -- weight limits ------------------------------------------------------------------------

void scheduling_policy::set_type_limits(const std::unordered_map<uint32_t, int32_t>& limits) {
  for (uint32_t id = 0; id < types_.size(); ++id) {
    auto& t = types_[id];
    auto before = t.limit;
    auto i = limits.find(id);
    t.limit = i != limits.end() ? std::optional<int32_t>{i->second} : std::nullopt;
    if (!t.limit || (before && *before <= *t.limit))
      continue;  // nothing that fitted stopped fitting
    // Jobs heavier than the new limit that fitted before (or had no worker).
    auto newly = [&](int32_t w) { return w > *t.limit && (!before || w <= *before); };
    for (auto& g : groups_) {
      auto b = g.by_type.find(id);
      if (b == g.by_type.end())
        continue;
      for (auto* bk : b->second)
        if (newly(bk->weight))
          too_heavy_.insert(too_heavy_.end(), bk->jobs.begin(), bk->jobs.end());
    }
    for (auto& [at, e] : waiting_)
      if (e.type == id && newly(e.weight))
        too_heavy_.push_back(e);
  }
}

bool scheduling_policy::too_heavy(uint32_t type, int32_t weight) const {
  return type < types_.size() && types_[type].limit && weight > *types_[type].limit;
}

bool scheduling_policy::too_heavy(const std::string& type, int32_t weight) const {
  auto t = type_ids_.find(type);
  return t != type_ids_.end() && too_heavy(t->second, weight);
}

int32_t scheduling_policy::type_limit(uint32_t type) const {
  return type < types_.size() ? types_[type].limit.value_or(0) : 0;
}

std::vector<pending_job> scheduling_policy::take_too_heavy() {
  return std::exchange(too_heavy_, {});
}

void scheduling_policy::promote(int64_t now) {
  while (!waiting_.empty() && waiting_.begin()->first <= now) {
    insert_ready(waiting_.begin()->second);
    waiting_.erase(waiting_.begin());
  }
}

void scheduling_policy::mark_dirty(allocation_reason why) {
  // A weight change names the reason for the whole recomputation.
  if (!dirty_ || why == allocation_reason::weight_change)
    dirty_reason_ = why;
  dirty_ = true;
}

// -- picking -------------------------------------------------------------------------------------

bool scheduling_policy::better(const candidate& a, const candidate& b) const {
  if (a.effective != b.effective)
    return a.effective > b.effective;
  const auto& ja = *a.from->jobs.begin();
  const auto& jb = *b.from->jobs.begin();
  bool ra = (ja.flags & pending_job::resumed) != 0;
  if (ra != ((jb.flags & pending_job::resumed) != 0))
    return ra;
  if (ja.run_at != jb.run_at)
    return ja.run_at < jb.run_at;
  return ja.row < jb.row;
}

bool scheduling_policy::type_open(type_state& t, int32_t weight, int64_t now) {
  if (t.pause.paused || t.held)
    return false;
  if (t.cap && t.running + weight > *t.cap)
    return false;
  if (t.rate) {
    t.rate->refill(now);
    if (t.rate->tokens < 1.0)
      return false;
  }
  return true;
}

int64_t scheduling_policy::aged_ms(const group_state& g, const type_state& t,
                                   int64_t ready_since, int64_t now) const {
  const pause_state* ever[3];
  size_t n = 0;
  for (auto* p : {&queue_pause_, &g.pause, &t.pause})
    if (p->paused || !p->past.empty())
      ever[n++] = p;
  if (n == 0)
    return now - ready_since;
  if (n == 1)
    return now - ready_since - ever[0]->frozen(ready_since, now);
  // Several were paused at some time: time paused by any counts once.
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (size_t i = 0; i < n; ++i) {
    spans.insert(spans.end(), ever[i]->past.begin(), ever[i]->past.end());
    if (ever[i]->paused)
      spans.emplace_back(ever[i]->since, now);
  }
  std::sort(spans.begin(), spans.end());
  int64_t frozen = 0;
  int64_t covered = ready_since;  // time up to here is accounted for
  for (auto [a, b] : spans) {
    a = std::max(a, covered);
    b = std::min(b, now);
    if (b > a) {
      frozen += b - a;
      covered = b;
    }
  }
  return now - ready_since - frozen;
}

int32_t scheduling_policy::effective_now(const std::string& type, const std::string& group,
                                         int32_t priority, int64_t ready_since,
                                         int64_t now) const {
  if (!opts_.aging)
    return priority;
  static const group_state no_group;
  static const type_state no_type;
  auto g = group_ids_.find(group);
  auto t = type_ids_.find(type);
  return effective_priority(
    opts_.aging, priority,
    aged_ms(g != group_ids_.end() ? groups_[g->second] : no_group,
            t != type_ids_.end() ? types_[t->second] : no_type, ready_since, now));
}

std::optional<scheduling_policy::candidate>
scheduling_policy::best_in(group_state& g, const std::vector<uint32_t>& types, int32_t room,
                           int64_t now) {
  if (g.pause.paused)
    return std::nullopt;
  if (g.cap)
    room = std::min(room, *g.cap - g.running);
  if (room <= 0)
    return std::nullopt;
  if (g.rate) {
    g.rate->refill(now);
    if (g.rate->tokens < 1.0)
      return std::nullopt;
  }
  std::optional<candidate> best;
  for (auto t : types) {
    auto i = g.by_type.find(t);
    if (i == g.by_type.end())
      continue;
    for (auto* b : i->second) {
      if (b->jobs.empty() || b->weight > room || !type_open(types_[t], b->weight, now))
        continue;
      const auto& head = *b->jobs.begin();
      candidate c{b, head.priority, 0};
      if (opts_.aging) {
        c.waited = aged_ms(g, types_[t], head.ready_since, now);
        c.effective = effective_priority(opts_.aging, head.priority, c.waited);
      }
      if (!admitted(head, c.effective))
        continue;
      if (!best || better(c, *best))
        best = c;
    }
  }
  return best;
}

// A pick runs its steps in this order; the first that found a job wins in
// the order preemptor (4), urgent loan (3), below share (1), turn (2), and
// only if none did, any job that fits (5).
std::optional<picked_job> scheduling_policy::pick(const std::vector<uint32_t>& types,
                                                  int32_t room, int64_t now) {
  promote(now);
  if (ready_count_ == 0 || queue_pause_.paused)
    return std::nullopt;
  // Deferrals count once per pick, however many steps looked at the job.
  deferred_pressure_now_ = deferred_io_now_ = false;
  struct count_deferrals {
    scheduling_policy& p;
    ~count_deferrals() {
      p.deferred_by_pressure_ += p.deferred_pressure_now_ ? 1 : 0;
      p.deferred_by_io_ += p.deferred_io_now_ ? 1 : 0;
    }
  } counting{*this};
  pick_request q{types, room, now};
  choice c;
  c.below = below_share(q);
  c.turn = next_turn(q);
  c.urgent = urgent_loan(q, c);
  if (preempting())
    preemptor_first(q, c);
  auto chosen = c.urgent ? c.urgent : c.below ? c.below : c.turn ? c.turn : any_that_fits(q);
  if (!chosen)
    return std::nullopt;
  bool beyond_share = c.urgent || (!c.below && !c.turn);
  return take(*chosen, beyond_share, !beyond_share && !c.below);
}

// 1. Groups below their whole slots: the largest shortfall first.
std::optional<scheduling_policy::option> scheduling_policy::below_share(const pick_request& q) {
  std::optional<option> below;
  int32_t below_gap = 0;
  for (auto gid : short_groups_) {
    auto& g = groups_[gid];
    auto c = best_in(g, q.types, q.room, q.now);
    if (!c)
      continue;
    auto gap = g.whole - g.running;
    if (!below || gap > below_gap || (gap == below_gap && better(*c, below->c))) {
      below = option{gid, *c};
      below_gap = gap;
    }
  }
  return below;
}

// 2. Fractions of slots: groups holding their whole slots take turns at the
// rest, earliest `pass` first (stride scheduling, see take).
std::optional<scheduling_policy::option> scheduling_policy::next_turn(const pick_request& q) {
  for (auto& [pass, gid] : turns_)
    if (auto c = best_in(groups_[gid], q.types, q.room, q.now))
      return option{gid, *c};
  return std::nullopt;
}

// 3. Ahead of both, an urgent job whose group holds exactly its whole slots,
// and is not about to get its turn anyway, borrows one slot. Holding at most
// one borrowed slot, urgent backlogs cannot starve the other groups.
std::optional<scheduling_policy::option> scheduling_policy::urgent_loan(const pick_request& q,
                                                                        const choice& so_far) {
  if (!opts_.aging || !opts_.aging->urgent_threshold)
    return std::nullopt;
  std::optional<option> urgent;
  for (auto gid : ready_groups_) {
    auto& g = groups_[gid];
    if (g.running != g.whole || (!so_far.below && so_far.turn && so_far.turn->group == gid))
      continue;
    auto c = best_in(g, q.types, q.room, q.now);
    if (c && c->effective >= *opts_.aging->urgent_threshold && (!urgent || better(*c, urgent->c)))
      urgent = option{gid, *c};
  }
  return urgent;
}

// 4. Ahead of all of these, with preemption: a job at or above the threshold
// takes any slot it fits, as the slot it preempted is meant for it. Starting
// within its group's share, it counts as the share's start.
void scheduling_policy::preemptor_first(const pick_request& q, choice& c) {
  std::optional<option> high;
  for (auto gid : ready_groups_) {
    auto found = best_in(groups_[gid], q.types, q.room, q.now);
    if (found && found->effective >= opts_.preemption->threshold
        && (!high || better(*found, high->c)))
      high = option{gid, *found};
  }
  if (!high)
    return;
  bool in_below = c.below && c.below->group == high->group;
  bool in_turn = !c.below && c.turn && c.turn->group == high->group;
  c.urgent.reset();
  if (in_below) {
    c.below = high;
  } else if (in_turn) {
    c.turn = high;
  } else {
    c.urgent = high;
    c.below.reset();
    c.turn.reset();
  }
}

// 5. Otherwise whatever can run (work conservation).
std::optional<scheduling_policy::option> scheduling_policy::any_that_fits(const pick_request& q) {
  std::optional<option> any;
  for (auto gid : ready_groups_) {
    auto c = best_in(groups_[gid], q.types, q.room, q.now);
    if (c && (!any || better(*c, any->c)))
      any = option{gid, *c};
  }
  return any;
}

// Takes the chosen job out of the index and counts it as running.
// `its_turn`: it was chosen as its group's turn (step 2).
picked_job scheduling_policy::take(const option& chosen, bool beyond_share, bool its_turn) {
  auto gid = chosen.group;
  auto& g = groups_[gid];
  auto* b = chosen.c.from;
  picked_job p;
  p.job = *b->jobs.begin();
  p.effective_priority = chosen.c.effective;
  p.waited_ms = chosen.c.waited;
  p.beyond_share = beyond_share;
  if (!beyond_share) {
    // Every start within the share moves the group's next turn on by
    // 1/share, so over many starts each group's turns follow its share.
    turns_.erase({g.pass, gid});
    if (its_turn)
      turn_clock_ = g.pass;
    g.pass += 1.0 / g.share;
  }
  b->jobs.erase(b->jobs.begin());
  --ready_count_;
  if (opts_.preemption && p.job.priority >= opts_.preemption->threshold)
    --high_ready_;
  start_io(p.job);
  if (--g.ready == 0)
    ready_groups_.erase(gid);
  g.running += p.job.weight;
  refresh_queues(gid);
  auto& t = types_[p.job.type];
  t.running += p.job.weight;
  if (g.rate)
    g.rate->tokens -= 1.0;
  if (t.rate)
    t.rate->tokens -= 1.0;
  if (p.effective_priority > p.job.priority)
    ++promotions_;
  if (p.beyond_share)
    excess_ += p.job.weight;
  if (!g.active)
    mark_dirty(allocation_reason::rebalance);
  return p;
}

void scheduling_policy::start_io(const pending_job& e) {
  if (!(e.flags & pending_job::declares_io))
    return;
  auto i = io_.find(e.row);
  if (i == io_.end())
    return;
  running_io_.read_bytes += i->second.read_bytes;
  running_io_.write_bytes += i->second.write_bytes;
  running_io_by_row_[e.row] = i->second;
  io_.erase(i);
}

// Returns the I/O of a job that no longer runs; true if it had some.
bool scheduling_policy::end_io(int64_t row, io_estimate* io) {
  auto i = running_io_by_row_.find(row);
  if (i == running_io_by_row_.end())
    return false;
  running_io_.read_bytes -= i->second.read_bytes;
  running_io_.write_bytes -= i->second.write_bytes;
  if (io)
    *io = i->second;
  running_io_by_row_.erase(i);
  return true;
}

void scheduling_policy::unpick(const pending_job& e, bool pending_again) {
  io_estimate io;
  if (end_io(e.row, &io) && pending_again)
    io_[e.row] = io;
  finished(e.row, e.group, e.type, e.weight);
}

void scheduling_policy::finished(int64_t row, uint32_t group, uint32_t type, int32_t weight) {
  end_io(row, nullptr);
  auto& g = groups_[group];
  g.running = std::max(0, g.running - weight);
  types_[type].running = std::max(0, types_[type].running - weight);
  refresh_queues(group);
  if (g.running == 0 && g.ready == 0 && g.active)
    mark_dirty(allocation_reason::group_drained);
}

void scheduling_policy::mark_running(const pending_job& e) {
  start_io(e);
  groups_[e.group].running += e.weight;
  types_[e.type].running += e.weight;
  refresh_queues(e.group);
}

void scheduling_policy::record_wait(int64_t wait_ms) {
  wait_.record(wait_ms);
}

// -- control -------------------------------------------------------------------------------------

void scheduling_policy::set_capacity(int32_t capacity) {
  if (capacity != capacity_) {
    capacity_ = capacity;
    mark_dirty(allocation_reason::rebalance);
  }
}

void scheduling_policy::hold_type(const std::string& type, bool held) {
  types_[type_id(type)].held = held;
}

void scheduling_policy::set_group_weight(const std::string& group, int32_t weight) {
  auto& g = groups_[group_id(group)];
  if (g.weight != weight) {
    g.weight = weight;
    mark_dirty(allocation_reason::weight_change);
  }
}

void scheduling_policy::reset_group_weights() {
  for (auto& g : groups_) {
    auto w = configured_weight(g.name);
    if (g.weight != w) {
      g.weight = w;
      mark_dirty(allocation_reason::weight_change);
    }
  }
}

namespace {

// A run-time cap: 0 removes it.
std::optional<int32_t> cap_of(int32_t max_running) {
  return max_running > 0 ? std::optional<int32_t>{max_running} : std::nullopt;
}

}  // namespace

void scheduling_policy::set_rate(std::optional<token_bucket>& bucket, const rate_limit& r) {
  if (r.per_second <= 0)
    bucket.reset();  // 0: no limit
  else if (bucket)
    bucket->change(r);
  else
    bucket = token_bucket{r};
}

int32_t scheduling_policy::configured_weight(const std::string& group) const {
  auto cfg = opts_.groups.find(group);
  return cfg != opts_.groups.end() ? cfg->second.weight.value_or(opts_.default_group_weight)
                                   : opts_.default_group_weight;
}

void merge_settings(settings_change& into, const settings_change& c) {
  if (c.weight)
    into.weight = c.weight;
  if (c.min_slots)
    into.min_slots = c.min_slots;
  if (c.max_running)
    into.max_running = c.max_running;
  if (c.rate)
    into.rate = c.rate;
}

void scheduling_policy::change_group(const std::string& group, const settings_change& c) {
  auto known = group_ids_.find(group);
  if (known == group_ids_.end()) {
    // Held aside like a pause ahead: its first job takes it (group_id).
    merge_settings(group_settings_ahead_[group], c);
    return;
  }
  auto& g = groups_[known->second];
  if (c.weight && g.weight != *c.weight) {
    g.weight = *c.weight;
    mark_dirty(allocation_reason::weight_change);
  }
  if (c.min_slots && g.min_slots != *c.min_slots) {
    g.min_slots = *c.min_slots;
    mark_dirty(allocation_reason::weight_change);
  }
  if (c.max_running) {
    auto cap = cap_of(*c.max_running);
    if (g.cap != cap) {
      g.cap = cap;
      mark_dirty(allocation_reason::rebalance);
    }
  }
  if (c.rate)
    set_rate(g.rate, *c.rate);
}

void scheduling_policy::change_type(const std::string& type, const settings_change& c) {
  auto known = type_ids_.find(type);
  if (known == type_ids_.end()) {
    merge_settings(type_settings_ahead_[type], c);
    return;
  }
  auto& t = types_[known->second];
  if (c.max_running)
    t.cap = cap_of(*c.max_running);
  if (c.rate)
    set_rate(t.rate, *c.rate);
}

void scheduling_policy::reset_group_weight(const std::string& group) {
  if (auto ahead = group_settings_ahead_.find(group); ahead != group_settings_ahead_.end()) {
    ahead->second.weight.reset();
    return;
  }
  settings_change c;
  c.weight = configured_weight(group);
  change_group(group, c);
}

void scheduling_policy::reset_group(const std::string& group) {
  if (group_settings_ahead_.erase(group))
    return;
  settings_change c;
  auto cfg = opts_.groups.find(group);
  auto configured = cfg != opts_.groups.end() ? cfg->second : group_options{};
  c.weight = configured_weight(group);
  c.min_slots = configured.min_slots;
  c.max_running = configured.max_running.value_or(0);
  auto r = opts_.group_rate_limits.find(group);
  c.rate = r != opts_.group_rate_limits.end() ? r->second : rate_limit{0, 1};
  change_group(group, c);
}

void scheduling_policy::reset_type(const std::string& type) {
  if (type_settings_ahead_.erase(type))
    return;
  settings_change c;
  auto cap = opts_.type_max_running.find(type);
  c.max_running = cap != opts_.type_max_running.end() ? cap->second : 0;
  auto r = opts_.type_rate_limits.find(type);
  c.rate = r != opts_.type_rate_limits.end() ? r->second : rate_limit{0, 1};
  change_type(type, c);
}

void scheduling_policy::pause_queue(std::optional<int64_t> until, int64_t now) {
  queue_pause_.start(until, now);
}

void scheduling_policy::resume_queue(int64_t now) {
  queue_pause_.stop(now);
}

namespace {

// Pauses a name that has no state yet, within the bound.
template <class PauseState>
status pause_ahead(std::map<std::string, PauseState>& ahead, const char* field,
                   const std::string& name, std::optional<int64_t> until, int64_t now) {
  if (!ahead.count(name) && ahead.size() >= max_paused_ahead)
    return invalid_field(field, std::to_string(max_paused_ahead) + " " + field
                                  + "s without jobs are paused ahead already (the limit): "
                                    "resume some, or resume all");
  ahead[name].start(until, now);
  return {};
}

// Drops the pauses ahead whose deadline passed.
template <class PauseState>
void expire_ahead(std::map<std::string, PauseState>& ahead, int64_t now) {
  for (auto i = ahead.begin(); i != ahead.end();)
    i = i->second.until && *i->second.until <= now ? ahead.erase(i) : std::next(i);
}

}  // namespace

status scheduling_policy::pause_group(const std::string& group, std::optional<int64_t> until,
                                      int64_t now) {
  auto known = group_ids_.find(group);
  if (known == group_ids_.end())
    return pause_ahead(groups_ahead_, "group", group, until, now);
  groups_[known->second].pause.start(until, now);
  mark_dirty(allocation_reason::rebalance);
  return {};
}

void scheduling_policy::resume_group(const std::string& group, int64_t now) {
  auto known = group_ids_.find(group);
  if (known == group_ids_.end()) {
    groups_ahead_.erase(group);
    return;
  }
  groups_[known->second].pause.stop(now);
  mark_dirty(allocation_reason::rebalance);
}

status scheduling_policy::pause_type(const std::string& type, std::optional<int64_t> until,
                                     int64_t now) {
  auto known = type_ids_.find(type);
  if (known == type_ids_.end())
    return pause_ahead(types_ahead_, "type", type, until, now);
  types_[known->second].pause.start(until, now);
  return {};
}

void scheduling_policy::resume_type(const std::string& type, int64_t now) {
  auto known = type_ids_.find(type);
  if (known == type_ids_.end()) {
    types_ahead_.erase(type);
    return;
  }
  types_[known->second].pause.stop(now);
}

int64_t scheduling_policy::resume_all(int64_t now) {
  auto n = static_cast<int64_t>(groups_ahead_.size() + types_ahead_.size());
  if (queue_pause_.paused) {
    queue_pause_.stop(now);
    ++n;
  }
  groups_ahead_.clear();
  types_ahead_.clear();
  for (auto& g : groups_)
    if (g.pause.paused) {
      g.pause.stop(now);
      mark_dirty(allocation_reason::rebalance);
      ++n;
    }
  for (auto& t : types_)
    if (t.pause.paused) {
      t.pause.stop(now);
      ++n;
    }
  return n;
}

void scheduling_policy::expire_pauses(int64_t now) {
  if (queue_pause_.paused && queue_pause_.until && *queue_pause_.until <= now)
    queue_pause_.stop(now);
  expire_ahead(groups_ahead_, now);
  expire_ahead(types_ahead_, now);
  for (auto& g : groups_)
    if (g.pause.paused && g.pause.until && *g.pause.until <= now) {
      g.pause.stop(now);
      mark_dirty(allocation_reason::rebalance);
    }
  for (auto& t : types_)
    if (t.pause.paused && t.pause.until && *t.pause.until <= now)
      t.pause.stop(now);
}

std::vector<allocation_change> scheduling_policy::rebalance() {
  std::vector<allocation_change> changes;
  if (!dirty_)
    return changes;
  dirty_ = false;
  // Groups with work that are not paused share the capacity; a paused or
  // idle group gives its share up until it has work again.
  std::vector<uint32_t> members;
  std::vector<group_share> shares;
  for (uint32_t id = 0; id < groups_.size(); ++id) {
    auto& g = groups_[id];
    g.active = g.ready > 0 || g.running > 0;
    if (g.active && !g.pause.paused) {
      members.push_back(id);
      shares.push_back({g.name, g.weight, g.min_slots, g.cap});
    }
  }
  auto exact = fair_shares(shares, capacity_);
  auto alloc = round_shares(shares, exact);
  std::vector<int32_t> next(groups_.size(), 0);
  std::vector<double> next_share(groups_.size(), 0.0);
  for (size_t k = 0; k < members.size(); ++k) {
    next[members[k]] = alloc[k];
    next_share[members[k]] = exact[k];
  }
  for (uint32_t id = 0; id < groups_.size(); ++id) {
    auto& g = groups_[id];
    if (g.share != next_share[id]) {
      turns_.erase({g.pass, id});
      bool joins = g.share == 0;
      g.share = next_share[id];
      g.whole = static_cast<int32_t>(std::floor(g.share + 1e-9));
      g.frac = g.share - g.whole > 1e-9 ? g.share - g.whole : 0.0;
      // A group that (re)joins starts one stride from now: no credit banked
      // while it was away.
      if (joins && g.share > 0)
        g.pass = std::max(g.pass, turn_clock_) + 1.0 / g.share;
      refresh_queues(id);
    }
    if (g.alloc == next[id])
      continue;
    auto why = dirty_reason_;
    if (next[id] == 0 && !g.active)
      why = allocation_reason::group_drained;
    changes.push_back({g.name, g.alloc, next[id], why});
    g.alloc = next[id];
  }
  return changes;
}

bool scheduling_policy::ungated() const {
  // Names configured or set ahead that no job has brought in yet count too.
  if (opts_.admission || queue_pause_.paused || !groups_ahead_.empty() || !types_ahead_.empty()
      || !group_settings_ahead_.empty() || !type_settings_ahead_.empty()
      || !opts_.group_rate_limits.empty() || !opts_.type_rate_limits.empty()
      || !opts_.type_max_running.empty())
    return false;
  for (auto& g : groups_)
    if (g.pause.paused || g.cap || g.rate)
      return false;
  for (auto& t : types_)
    if (t.pause.paused || t.cap || t.held || t.rate)
      return false;
  return true;
}

std::optional<int64_t> scheduling_policy::next_wake(int64_t now) const {
  std::optional<int64_t> next;
  auto consider = [&](int64_t t) {
    if (!next || t < *next)
      next = t;
  };
  if (!waiting_.empty())
    consider(waiting_.begin()->first);
  if (queue_pause_.paused && queue_pause_.until)
    consider(*queue_pause_.until);
  for (auto& g : groups_) {
    if (g.pause.paused && g.pause.until)
      consider(*g.pause.until);
    if (g.rate && g.ready > 0 && g.rate->tokens < 1.0)
      consider(g.rate->next_token(now));
  }
  for (auto& t : types_) {
    if (t.pause.paused && t.pause.until)
      consider(*t.pause.until);
    if (t.rate && t.rate->tokens < 1.0)
      consider(t.rate->next_token(now));
  }
  for (auto* ahead : {&groups_ahead_, &types_ahead_})
    for (auto& [name, p] : *ahead)
      if (p.until)
        consider(*p.until);
  return next;
}

// -- preemption --------------------------------------------------------------------------------

bool scheduling_policy::preempting() const noexcept {
  if (!opts_.preemption)
    return false;
  // Aging may lift any job to the threshold; otherwise only a base priority
  // at or above it gets there.
  return high_ready_ > 0
         || (opts_.aging && opts_.aging->max_effective_priority >= opts_.preemption->threshold);
}

std::vector<picked_job> scheduling_policy::preemptors(int64_t now) {
  std::vector<picked_job> out;
  if (!preempting() || queue_pause_.paused)
    return out;
  promote(now);
  for (auto gid : ready_groups_) {
    auto& g = groups_[gid];
    if (g.pause.paused)
      continue;
    if (g.rate) {
      g.rate->refill(now);
      if (g.rate->tokens < 1.0)
        continue;
    }
    for (auto& [key, b] : g.buckets) {
      if (b.jobs.empty() || (g.cap && g.running + b.weight > *g.cap))
        continue;
      const auto& head = *b.jobs.begin();
      picked_job p{head, head.priority, 0, false};
      if (opts_.aging) {
        p.waited_ms = aged_ms(g, types_[b.type], head.ready_since, now);
        p.effective_priority = effective_priority(opts_.aging, head.priority, p.waited_ms);
      }
      if (p.effective_priority < opts_.preemption->threshold || too_heavy(b.type, b.weight)
          || !type_open(types_[b.type], b.weight, now) || !admitted(head, p.effective_priority))
        continue;
      out.push_back(p);
    }
  }
  std::sort(out.begin(), out.end(), [](const picked_job& a, const picked_job& b) {
    if (a.effective_priority != b.effective_priority)
      return a.effective_priority > b.effective_priority;
    return a.job.row < b.job.row;
  });
  return out;
}

bool scheduling_policy::may_lose(uint32_t group, int32_t weight) const {
  auto& g = groups_[group];
  return g.running - weight >= g.min_slots;
}

// -- admission ---------------------------------------------------------------------------------

void scheduling_policy::set_pressure(double pressure) {
  pressure_ = pressure;
  deferring_ = false;
}

void scheduling_policy::set_io_rates(double read_bytes_per_second,
                                     double write_bytes_per_second) {
  io_read_rate_ = read_bytes_per_second;
  io_write_rate_ = write_bytes_per_second;
}

bool scheduling_policy::io_fits(const io_estimate& io) const {
  auto& budget = *opts_.admission->io_budget;
  double window_s = static_cast<double>(budget.window.count()) / 1e3;
  // Per kind of I/O; alone on a kind, any job runs: the window is an estimate.
  auto fits = [&](int64_t running, int64_t more, double rate) {
    return more == 0 || running <= 0
           || static_cast<double>(running) + static_cast<double>(more)
                <= budget.share * rate * window_s;
  };
  return fits(running_io_.read_bytes, io.read_bytes, io_read_rate_)
         && fits(running_io_.write_bytes, io.write_bytes, io_write_rate_);
}

bool scheduling_policy::admitted(const pending_job& head, int32_t effective) {
  if (!opts_.admission)
    return true;
  if (!opts_.admission->throttle.admits(pressure_, effective)) {
    deferred_pressure_now_ = deferring_ = true;
    return false;
  }
  if ((head.flags & pending_job::declares_io) && opts_.admission->io_budget) {
    auto io = io_.find(head.row);
    if (io != io_.end() && !io_fits(io->second)) {
      deferred_io_now_ = deferring_ = true;
      return false;
    }
  }
  return true;
}

void scheduling_policy::fill_metrics(metrics_snapshot& m, int64_t now) const {
  auto wait = wait_.snapshot();
  m.queue_wait_bounds_ms = std::move(wait.bounds);
  m.queue_wait_counts = std::move(wait.counts);
  m.queue_wait_total = wait.total;
  m.queue_wait_sum_ms = wait.sum;
  // Each bucket's first job is its longest due (buckets order by due time).
  std::optional<int64_t> oldest_due;
  for (auto& g : groups_)
    for (auto& [key, b] : g.buckets)
      if (!b.jobs.empty()) {
        auto& j = *b.jobs.begin();
        auto due = opts_.aging ? j.ready_since : j.run_at;
        if (!oldest_due || due < *oldest_due)
          oldest_due = due;
      }
  // A job whose time came since the dispatcher last looked is due as well.
  if (!waiting_.empty() && waiting_.begin()->first <= now
      && (!oldest_due || waiting_.begin()->first < *oldest_due))
    oldest_due = waiting_.begin()->first;
  m.oldest_ready_ms = oldest_due ? std::max<int64_t>(0, now - *oldest_due) : 0;
  for (auto& g : groups_)
    for (auto& [key, b] : g.buckets)
      if (too_heavy(b.type, b.weight))
        m.too_heavy_jobs += static_cast<int64_t>(b.jobs.size());
  for (auto& [at, e] : waiting_)
    if (too_heavy(e.type, e.weight))
      ++m.too_heavy_jobs;
  m.aging_promotions = promotions_;
  m.pressure = pressure_;
  m.deferred_by_pressure = deferred_by_pressure_;
  m.deferred_by_io = deferred_by_io_;
  m.io_read_bytes_per_second = io_read_rate_;
  m.io_write_bytes_per_second = io_write_rate_;
  m.io_running_read_bytes = running_io_.read_bytes;
  m.io_running_write_bytes = running_io_.write_bytes;
  m.excess_slots_redistributed = excess_;
  m.capacity = capacity_;
  auto add_pause = [&](bool group, const std::string& name, const pause_state& p) {
    m.pauses.push_back({group, name, p.since, p.until});
  };
  for (auto& g : groups_)
    if (g.pause.paused)
      add_pause(true, g.name, g.pause);
  for (auto& [name, p] : groups_ahead_)
    add_pause(true, name, p);
  for (auto& t : types_)
    if (t.pause.paused)
      add_pause(false, t.name, t.pause);
  for (auto& [name, p] : types_ahead_)
    add_pause(false, name, p);
  for (auto& g : groups_) {
    if (g.ready == 0 && g.running == 0 && g.alloc == 0 && !g.pause.paused
        && !opts_.groups.count(g.name))
      continue;
    group_metrics gm;
    gm.group = g.name;
    gm.weight = g.weight;
    gm.share = g.share;
    gm.allocated_slots = g.alloc;
    gm.running_slots = g.running;
    gm.utilization = g.alloc > 0 ? static_cast<double>(g.running) / g.alloc : 0.0;
    gm.ready_jobs = g.ready;
    gm.paused = g.pause.paused;
    m.groups.push_back(std::move(gm));
    for (auto& [key, b] : g.buckets) {
      if (!opts_.aging) {
        if (!b.jobs.empty())
          m.effective_priorities[b.priority] += static_cast<int64_t>(b.jobs.size());
        continue;
      }
      for (auto& j : b.jobs)
        ++m.effective_priorities[effective_priority(
          opts_.aging, j.priority, aged_ms(g, types_[b.type], j.ready_since, now))];
    }
  }
}

}  // namespace ergon::actors

namespace ergon {

bool throttle_policy::admits(double pressure, int32_t priority) const noexcept {
  const throttle_step* decides = nullptr;
  for (auto& step : steps)
    if (pressure > step.above && (!decides || step.above > decides->above))
      decides = &step;
  return !decides || (decides->min_priority && priority >= *decides->min_priority);
}

}  // namespace ergon
