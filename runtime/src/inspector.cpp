#include "ergon/inspector.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "ergon/queue.hpp"
#include "ergon/storage/pg_db.hpp"
#include "ergon/storage/pg_lease.hpp"
#include "ergon/storage/sqlite_db.hpp"
#include "ergon/storage/op/backup_to.hpp"
#include "ergon/storage/op/count_jobs.hpp"
#include "ergon/storage/op/list_jobs.hpp"
#include "ergon/storage/op/read_jobs.hpp"
#include "ergon/storage/op/read_recurring.hpp"
#include "ergon/storage/op/save_controls.hpp"
#include "ergon/storage/ownership.hpp"
#include "ergon/storage/schema.hpp"
#include "read_pool.hpp"
#include "runtime_access.hpp"

namespace ergon {
namespace {

// An inspector has no queue clock: pauses are judged by the wall clock.
int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

}  // namespace

struct inspector::impl {
  std::unique_ptr<runtime::read_pool> reads;
  // A file no queue of this version has opened yet has no finished_counts table.
  storage::count_source counts_from = storage::count_source::table;
  int version = 0;
  // Whether the schema has the controls table (each engine counts its own).
  bool has_controls = false;
  // Whether its job rows, and its recurring jobs' rows, have every column
  // this build reads.
  bool jobs_readable = false;
  bool recurring_readable = false;
  std::string path;

  // Rows of a file older than this build's reads lack their columns: `what`
  // ("job rows", "recurring jobs") can't be read until queue::open migrates it.
  status readable(bool ok, const char* what) const {
    if (ok)
      return {};
    return {error::corrupt, path + ": schema version " + std::to_string(version)
                              + " predates this build's " + what + "; open it once with "
                                "queue::open, which migrates it, to read them"};
  }

  template <class Read>
  auto read_recurring(Read read) const -> decltype(read(std::declval<storage::db&>())) {
    if (auto st = readable(recurring_readable, "recurring jobs"); !st)
      return st;
    return with_connection(read);
  }

  template <class Read>
  auto read_jobs(Read read) const -> decltype(read(std::declval<storage::db&>())) {
    if (auto st = readable(jobs_readable, "job rows"); !st)
      return st;
    return with_connection(read);
  }

  template <class F>
  auto with_connection(F&& f) const -> decltype(f(std::declval<storage::db&>())) {
    auto conn = reads->borrow();
    if (!conn)
      return conn.error();
    return f(**conn);
  }
};

namespace {

status closed_inspector() {
  return {error::closed, "the inspector was moved from"};
}

result<std::vector<storage::type_status_count>> count_rows(const inspector_impl& p) {
  return p.with_connection(
    [&](storage::db& d) { return storage::count_jobs(d, p.counts_from); });
}

}  // namespace

namespace {

result<std::unique_ptr<inspector_impl>> inspect_postgres(const std::string& uri) {
  auto opts = storage::parse_pg_uri(uri);
  if (!opts)
    return opts.error();
  auto p = std::make_unique<inspector_impl>();
  p->reads = std::make_unique<runtime::read_pool>(runtime::read_pool::postgres_reader(*opts), 2);
  auto version = p->with_connection([](storage::db& d) { return storage::schema_version(d); });
  if (!version)
    return version.error();
  if (*version == 0)
    return status{error::corrupt, uri + " has no ergon tables yet: no queue has opened it"};
  if (*version > storage::current_schema_version(storage::engine::postgres))
    return status{error::corrupt, uri + ": schema version " + std::to_string(*version)
                                    + " is newer than this ergon build supports"};
  p->version = *version;
  p->has_controls = *version >= storage::controls_version(storage::engine::postgres);
  p->jobs_readable = *version >= storage::job_logs_version(storage::engine::postgres);
  p->recurring_readable =
    *version >= storage::recurring_pauses_version(storage::engine::postgres);
  p->path = uri;
  return p;
}

}  // namespace

result<inspector> queue::inspect(const std::string& path) {
  if (storage::names_postgres(path)) {
    auto p = inspect_postgres(path);
    if (!p)
      return p.error();
    return inspector{std::move(*p)};
  }
  if (storage::names_private_database(path))
    return invalid_field("path", "'" + path + "' names no file to inspect");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return status{error::io_error, path + ": " + std::strerror(errno)};
  if (auto checked = storage::check_ergon_file(path, true); !checked)
    return checked;
  auto p = std::make_unique<inspector_impl>();
  storage::sqlite_options opts;
  opts.read_only = true;
  p->reads = std::make_unique<runtime::read_pool>(runtime::read_pool::sqlite_reader(path, opts), 2);
  auto version = p->with_connection([](storage::db& d) { return storage::schema_version(d); });
  if (!version)
    return version.error();
  auto v = *version;
  if (v == 0)
    return status{error::corrupt, path + " has no ergon tables yet: no queue has opened it"};
  if (v > storage::current_schema_version())
    return status{error::corrupt, path + ": schema version " + std::to_string(v)
                                    + " is newer than this ergon build supports"};
  p->version = v;
  p->has_controls = v >= storage::controls_version(storage::engine::sqlite);
  p->jobs_readable = v >= storage::job_logs_version(storage::engine::sqlite);
  p->recurring_readable = v >= storage::recurring_pauses_version(storage::engine::sqlite);
  p->path = path;
  if (v < storage::finished_counts_version)
    p->counts_from = storage::count_source::scan;
  return inspector{std::move(p)};
}

inspector::inspector(std::unique_ptr<impl> p) noexcept : impl_(std::move(p)) {}
inspector::inspector(inspector&&) noexcept = default;
inspector& inspector::operator=(inspector&&) noexcept = default;
inspector::~inspector() = default;

result<ergon::job_info> inspector::job_info(const job_id& id) const {
  if (!impl_)
    return closed_inspector();
  return impl_->read_jobs([&](storage::db& d) { return storage::read_job(d, id); });
}

result<std::vector<ergon::job_info>> inspector::jobs_by_name(const std::string& name,
                                                             size_t limit) const {
  if (!impl_)
    return closed_inspector();
  if (limit < 1 || limit > max_page_size)
    return invalid_field("limit", "must be 1 to " + std::to_string(max_page_size) + ", got "
                                    + std::to_string(limit));
  return impl_->read_jobs(
    [&](storage::db& d) { return storage::read_jobs_by_name(d, name, limit); });
}

result<job_page> inspector::list_jobs(const job_filter& filter, const page_request& page) const {
  if (!impl_)
    return closed_inspector();
  return impl_->read_jobs([&](storage::db& d) { return storage::list_jobs(d, filter, page); });
}

result<job_page> inspector::list_failed(job_filter filter, const page_request& page) const {
  filter.status = job_status::failed;
  return list_jobs(filter, page);
}

result<ergon::recurring_info> inspector::recurring_info(const std::string& id) const {
  if (!impl_)
    return closed_inspector();
  return impl_->read_recurring(
    [&](storage::db& d) { return storage::read_recurring(d, id, wall_ms()); });
}

result<std::vector<ergon::recurring_info>> inspector::list_recurring(
  const std::string& prefix) const {
  if (!impl_)
    return closed_inspector();
  return impl_->read_recurring(
    [&](storage::db& d) { return storage::list_recurring(d, prefix, wall_ms()); });
}

result<status_counts> inspector::counts() const {
  auto m = metrics();
  if (!m)
    return m.error();
  return m->by_status;
}

result<metrics_snapshot> inspector::metrics() const {
  if (!impl_)
    return closed_inspector();
  auto rows = count_rows(*impl_);
  if (!rows)
    return rows.error();
  metrics_snapshot m;
  for (auto& row : *rows) {
    auto i = static_cast<size_t>(row.status);
    m.by_status.by_status[i] += row.count;
    m.by_type[row.type].by_status[i] += row.count;
  }
  auto groups = impl_->with_connection(
    [](storage::db& d) { return storage::count_unfinished_by_group(d); });
  if (!groups)
    return groups.error();
  for (auto& row : *groups)
    m.by_group[row.group].by_status[static_cast<size_t>(row.status)] += row.count;
  auto controls = this->controls();
  if (!controls)
    return controls.error();
  m.controls = std::move(*controls);
  return m;
}

result<std::vector<control_info>> inspector::controls() const {
  if (!impl_)
    return closed_inspector();
  return impl_->with_connection([&](storage::db& d) -> result<std::vector<control_info>> {
    if (!impl_->has_controls)
      return std::vector<control_info>{};
    auto stored = storage::read_controls(d);
    if (!stored)
      return stored.error();
    return storage::in_force_at(std::move(*stored), wall_ms());
  });
}

result<int64_t> inspector::backup(const std::string& out) const {
  if (!impl_)
    return closed_inspector();
  return impl_->with_connection([&](storage::db& d) -> result<int64_t> {
    if (d.engine() != storage::engine::sqlite)
      return status{error::invalid_argument,
                    d.location() + ": back a PostgreSQL queue up with pg_dump (docs/postgres.md)"};
    auto done = storage::backup_to(static_cast<storage::sqlite_db&>(d), out, 0600);
    if (!done)
      return done.error();
    return done->bytes;
  });
}

namespace {

result<std::optional<storage::ownership::record>> find_postgres_owner(const std::string& uri) {
  auto o = storage::parse_pg_uri(uri);
  if (!o)
    return o.error();
  o->read_only = true;
  auto d = storage::pg_db::open(*o);
  if (!d)
    return d.error();
  return storage::pg_lease::find(**d);
}

}  // namespace

result<std::optional<owner_info>> find_owner(const std::string& path) {
  if (path.empty())
    return status{error::invalid_argument, "the database path is empty", "path"};
  auto found = storage::names_postgres(path) ? find_postgres_owner(path)
                                             : storage::ownership::find(path);
  if (!found)
    return found.error();
  if (!*found)
    return std::optional<owner_info>{};
  owner_info o;
  o.pid = (*found)->pid;
  o.host = (*found)->host;
  for (auto& l : (*found)->listeners)
    o.listeners.push_back({l.address, l.port, l.secret, l.tls});
  return std::optional<owner_info>{std::move(o)};
}

}  // namespace ergon
