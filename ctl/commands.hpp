// commands: one function per ergonctl command. Each prints its answer (as
// text or, with --json, one JSON document) to `out` and returns the exit
// status; errors go to `err`, naming the problem.
#pragma once

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <chrono>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>

#include <ergon/inspector.hpp>
#include <ergon/listing.hpp>

#include "json_views.hpp"
#include "queue_link.hpp"

namespace ergon::ctl {

/// Exit statuses (see `ergonctl --help`).
enum exit_code : int {
  exit_ok = 0,
  exit_failed = 1,  ///< the queue answered with an error
  exit_usage = 2,   ///< bad flags or values
};

/// What every command shares: where the database is, how to reach its
/// owner, and how to print.
class context {
 public:
  context(reach_options reach, tls_options tls, bool json, std::ostream& out, std::ostream& err);
  ~context();

  const reach_options& reach() const noexcept { return reach_; }
  bool json() const noexcept { return json_; }
  std::ostream& out() noexcept { return out_; }

  /// The inspector over the file (made on first use).
  result<inspector*> reader();
  /// An actor system with the network layer (made on first use).
  result<caf::actor_system*> system();

  /// Prints `st` to err (as JSON with --json) and returns its exit status:
  /// exit_usage for invalid_argument naming a flag or argument (a field of
  /// the queue's is reported as the flag of `command` it came from),
  /// exit_failed otherwise.
  int fail(const status& st, const std::string& command = {});
  /// Prints `doc` with --json, or calls `text`; returns exit_ok.
  template <class Text>
  int answer(const json_views::json& doc, Text text) {
    if (json_)
      out_ << doc.dump(2) << '\n';
    else
      text(out_);
    return exit_ok;
  }

 private:
  struct config;
  reach_options reach_;
  tls_options tls_;
  bool json_;
  std::ostream& out_;
  std::ostream& err_;
  std::optional<inspector> reader_;
  std::unique_ptr<config> cfg_;
  std::unique_ptr<caf::actor_system> sys_;
};

/// Calls `apply` on the owner's queue. Errors, printed: busy when the
/// owner takes no connections, closed when nobody owns the file; both say
/// that `doing` ("pausing") needs the owner because `why` ("the owner
/// applies controls as it saves them").
int with_owner(context& c, const char* doing, const char* why,
               const std::function<int(queue_link&)>& apply);

/// A job id from the command line. Error: invalid_argument naming ID.
result<job_id> parse_id(const std::string& text);

struct list_args {
  job_filter filter;
  page_request page;
  bool failed = false;  ///< dead letters (list_failed)
};

int list(context& c, const list_args& a);
int show(context& c, const std::string& id);
int stats(context& c);
/// Copies the database to `out` through the inspector (online backup).
int backup(context& c, const std::string& out);
int recurring_list(context& c, const std::string& prefix);
int recurring_show(context& c, const std::string& id);

/// Retries one failed job, or with `filter` every failed job it matches.
/// A dry run lists what would be retried, read through the inspector.
int retry(context& c, const std::optional<std::string>& id, const std::optional<job_filter>& filter,
          bool dry_run);
/// A dry run says what cancelling would do to the job, as last committed.
int cancel(context& c, const std::string& id, bool dry_run);
/// Runs a finished job again (queue::replay).
int replay(context& c, const std::string& id);
/// Cancels every unfinished job `filter` matches (queue::cancel_jobs).
int cancel_all(context& c, const job_filter& filter, bool dry_run);
/// Deletes every finished job `filter` matches (queue::delete_jobs).
int delete_jobs(context& c, const job_filter& filter, bool dry_run);
/// Purges failed jobs: those `filter` matches, or that failed longer ago
/// than `older_than`. A dry run lists them instead.
int purge(context& c, const job_filter& filter, std::optional<std::chrono::milliseconds> older_than,
          bool dry_run);
/// `what` is "group" or "type"; `pause` false resumes.
int pause(context& c, const std::string& what, const std::string& name, bool pause,
          std::optional<std::chrono::milliseconds> duration);
/// Ends every pause the owner holds.
int resume_everything(context& c);
/// set group|type|worker NAME: a run-time settings change (queue::set_group,
/// set_type, set_worker).
int set_settings(context& c, const std::string& what, const std::string& name,
                 const settings_change& change);
/// reset group|type|worker NAME: back to the configured settings.
int reset_settings(context& c, const std::string& what, const std::string& name);
/// The run-time controls in force, from the file.
int controls(context& c);
/// The workers registered with the owner, live.
int workers(context& c);
/// ergonctl breaker reset TYPE.
int reset_breaker(context& c, const std::string& type);
int recurring_delete(context& c, const std::string& id);
/// Pauses (for `duration`, or until resumed) or resumes a recurring job.
int recurring_pause(context& c, const std::string& id, bool pause,
                    std::optional<std::chrono::milliseconds> duration);

}  // namespace ergon::ctl
