#include "ergon/storage/op/read_recurring.hpp"

#include "recurring_rows.hpp"

namespace ergon::storage {
namespace {

result<recurring_info> info_of(db& d, rows::recurring_row r, int64_t now_ms) {
  recurring_info info;
  info.id = std::move(r.id);
  info.schedule = std::move(r.spec);
  info.time_zone = std::move(r.time_zone);
  info.catch_up = r.mode;
  info.job = std::move(r.templ);
  info.added_at_ms = r.added_at;
  info.updated_at_ms = r.updated_at;
  info.last_job = r.last_job;
  info.last_scheduled_at_ms = r.last_scheduled_at;
  info.last_finished_at_ms = r.last_finished_at;
  info.last_status = r.last_status;
  info.executions = r.executions;
  info.max_executions = r.max_executions;
  if (r.paused_at(now_ms)) {
    info.paused_since_ms = r.paused_since;
    info.paused_until_ms = r.paused_until;
  }
  auto instance = rows::unfinished_instance(d, info.id);
  if (!instance)
    return instance.error();
  if (*instance) {
    info.next_job = (*instance)->key.id;
    info.next_status = (*instance)->status;
    info.next_scheduled_at_ms = (*instance)->scheduled_at;
    info.next_run_at_ms = (*instance)->key.run_at;
  }
  return info;
}

}  // namespace

result<recurring_info> read_recurring(db& d, const std::string& id, int64_t now_ms) {
  auto r = rows::find_recurring(d, id);
  if (!r)
    return r.error();
  if (!*r)
    return status{error::not_found, "no recurring job with id '" + id + "'"};
  return info_of(d, std::move(**r), now_ms);
}

result<std::vector<recurring_info>> list_recurring(db& d, const std::string& prefix,
                                                   int64_t now_ms) {
  auto found = rows::recurring_with_prefix(d, prefix);
  if (!found)
    return found.error();
  std::vector<recurring_info> out;
  out.reserve(found->size());
  for (auto& r : *found) {
    auto info = info_of(d, std::move(r), now_ms);
    if (!info)
      return info.error();
    out.push_back(std::move(*info));
  }
  return out;
}

}  // namespace ergon::storage
