// ergonctl: looks at and changes an ergon database from the command line.
// See `ergonctl --help` and docs/operations.md.
#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>

#include "commands.hpp"
#include "text.hpp"

namespace {

using namespace ergon;
using namespace ergon::ctl;

const char* description = R"(ergonctl: look at and change an ergon job queue database.

Reads (list, show, stats, controls, backup, recurring list|show) go through a
read-only inspector: they work beside the program that owns the file and never
take it from it. Writes (retry, replay, cancel, purge, delete, pause, resume, set, reset,
recurring delete|pause|resume) go to
the owner: when a program owns the file and listens (options::listen, or
ergon-server), ergonctl connects to it, found through the file's lock;
when a program owns it but takes no connections, writes fail and say so;
when nobody owns it, ergonctl opens the file itself and closes it after.
)";

const char* footer = R"(
TIMES AND DURATIONS
  Times are ms since the epoch or ISO 8601 in UTC (2026-11-25,
  2026-11-25T10:00:00Z). Durations are a number with its unit: ms, s, m, h
  or d (90s, 12h, 7d); a bare number is refused.

OUTPUT
  Text for people by default; with --json, one JSON document on stdout.
  Errors go to stderr ({"error", "message", "field"} with --json).

EXIT STATUS
  0  done
  1  the queue refused or failed (not_found, job_running, busy, unreachable, ...)
  2  bad flags or values (the message names the flag)
  The same for every command.

EXAMPLES
  ergonctl --db jobs.db list --status failed --type send_email
  ergonctl --db jobs.db show 0190163d-8694-739b-aea5-966c26f8ad91 --json
  ergonctl --db jobs.db retry --all --type send_email
  ergonctl --db jobs.db purge --older-than 7d --dry-run
  ergonctl --db jobs.db list --tag tenant=acme --tag-prefix billing.
  ergonctl --db jobs.db cancel --all --tag batch=2026-12-03
  ergonctl --db jobs.db backup jobs-2026-11-26.db
  ergonctl --db jobs.db pause group tenant-42 --for 10m
  ergonctl --db jobs.db set group tenant-42 --weight 3 --rate 5 --burst 10
  ergonctl --db jobs.db controls
  ergonctl --db jobs.db --secret-file secret stats
)";

// What every command's --help ends with: the flags all commands share and
// the formats of values.
const char* common_footer = R"(
FLAGS OF EVERY COMMAND (before or after the command)
  --db FILE             the database file (required)
  --json                one JSON document on stdout instead of text;
                        errors as {"error", "message", "field"} on stderr
  --secret-file FILE    the owner's shared secret, for an owner that needs it
  --tls-cert, --tls-key, --tls-ca FILE, --tls-peer-name NAME,
  --tls-passphrase-file FILE   for an owner that takes TLS only

FORMATS
  TIME      ms since the epoch, or ISO 8601 in UTC: 2026-11-25T10:00:00Z
  DURATION  a number with its unit: 250ms, 90s, 10m, 12h, 7d
  ID        a job id: 0190163d-8694-739b-aea5-966c26f8ad91

EXIT STATUS
  0 done, 1 the queue refused or failed, 2 bad flags or values
)";

// The filter flags of list and the bulk writes.
struct filter_flags {
  std::string status, type, group, name;
  std::string submitted_from, submitted_before, finished_from, finished_before;
  std::vector<std::string> tags;
  std::string tag_prefix;

  void add_to(CLI::App* cmd, bool with_status) {
    if (with_status)
      cmd->add_option("--status", status,
                      "pending, running, succeeded, failed, cancelled or expired");
    cmd->add_option("--type", type, "jobs of this type");
    cmd->add_option("--group", group, "jobs in this group");
    cmd->add_option("--name", name, "jobs submitted with this name");
    cmd->add_option("--submitted-from", submitted_from, "submitted at or after this TIME");
    cmd->add_option("--submitted-before", submitted_before, "submitted before this TIME");
    cmd->add_option("--finished-from", finished_from, "finished at or after this TIME");
    cmd->add_option("--finished-before", finished_before, "finished before this TIME");
    cmd->add_option("--tag", tags, "jobs tagged KEY=VALUE (the key ends at the first =); repeat "
                                   "for several");
    cmd->add_option("--tag-prefix", tag_prefix, "jobs with a tag key that starts with PREFIX");
  }

  // Whether any flag but --status is given.
  bool narrows() const {
    return !type.empty() || !group.empty() || !name.empty() || !submitted_from.empty()
           || !submitted_before.empty() || !finished_from.empty() || !finished_before.empty()
           || !tags.empty() || !tag_prefix.empty();
  }

  result<job_filter> parse() const {
    job_filter f;
    if (!status.empty()) {
      f.status = json_views::parse_status(status);
      if (!f.status)
        return status_error();
    }
    if (!type.empty())
      f.type = type;
    if (!group.empty())
      f.group = group;
    if (!name.empty())
      f.name = name;
    for (auto& t : tags) {
      auto eq = t.find('=');
      if (eq == std::string::npos)
        return ergon::status{error::invalid_argument, "--tag: '" + t + "' is not KEY=VALUE",
                             "--tag"};
      if (!f.tags.emplace(t.substr(0, eq), t.substr(eq + 1)).second)
        return ergon::status{error::invalid_argument,
                             "--tag: key '" + t.substr(0, eq) + "' is given twice", "--tag"};
    }
    if (!tag_prefix.empty())
      f.tag_prefix = tag_prefix;
    for (auto [text, slot, flag] :
         {std::tuple{&submitted_from, &f.submitted_from_ms, "--submitted-from"},
          std::tuple{&submitted_before, &f.submitted_before_ms, "--submitted-before"},
          std::tuple{&finished_from, &f.finished_from_ms, "--finished-from"},
          std::tuple{&finished_before, &f.finished_before_ms, "--finished-before"}}) {
      if (text->empty())
        continue;
      auto t = parse_time(*text, flag);
      if (!t)
        return t.error();
      *slot = *t;
    }
    return f;
  }

  ergon::status status_error() const {
    return {error::invalid_argument,
            "--status: '" + status
              + "' is not a status (pending, running, succeeded, failed, cancelled, expired)",
            "--status"};
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{description, "ergonctl"};
  app.footer(footer);
  app.require_subcommand(1);
  app.fallthrough();
  std::string db, secret_file, passphrase_file;
  bool json = false;
  tls_options tls;
  app.add_option("--db", db, "the database file")->required();
  app.add_flag("--json", json, "print one JSON document instead of text");
  app.add_option("--secret-file", secret_file,
                 "the owner's shared secret (a file of one line), for an owner that needs it")
    ->check(CLI::ExistingFile);
  auto cert = app.add_option("--tls-cert", tls.certificate, "this client's PEM certificate")
                ->check(CLI::ExistingFile);
  auto key = app.add_option("--tls-key", tls.key, "its PEM private key")->check(CLI::ExistingFile);
  auto ca = app.add_option("--tls-ca", tls.ca_file, "the CAs the owner's certificate chains to")
              ->check(CLI::ExistingFile);
  app.add_option("--tls-passphrase-file", passphrase_file, "a file holding the key's passphrase")
    ->check(CLI::ExistingFile);
  app.add_option("--tls-peer-name", tls.peer_name,
                 "the name the owner's certificate must carry (DNS name or IP address)");
  bool allow_open_files = false;
  app.add_flag("--allow-open-files", allow_open_files,
               "accept a secret, key or passphrase file that its group or others may read "
               "(with a warning); refused otherwise, as ssh does");
  cert->needs(key, ca);
  key->needs(cert, ca);
  ca->needs(cert, key);

  // -- reads
  auto list_cmd = app.add_subcommand("list", "list jobs, a page at a time, oldest first");
  filter_flags list_filter;
  list_filter.add_to(list_cmd, true);
  int64_t limit = 100;
  std::string after;
  bool newest_first = false, failed_only = false;
  list_cmd->add_option("--limit", limit, "jobs per page, 1 to 1000")->capture_default_str();
  list_cmd->add_option("--after", after, "start after this job id (the previous page's 'more')");
  list_cmd->add_flag("--newest-first", newest_first, "newest submission first");
  list_cmd->add_flag("--failed", failed_only, "dead letters: failed jobs (ignores --status)");
  list_cmd->footer(std::string{"\nEach job with its type, status, tries, group, submission time and last error.\n"}
                   + common_footer);

  auto show_cmd = app.add_subcommand("show", "one job with its attempts, errors and payload size");
  std::string show_id;
  show_cmd->add_option("ID", show_id, "the job id")->required();
  show_cmd->footer(common_footer);

  auto stats_cmd = app.add_subcommand(
    "stats", "counts per status, type and group, the oldest pending job, and allocation");
  stats_cmd->footer(
    std::string{"\nCounts come from the file. Group allocation and pauses live in the owner's\n"
                "memory: they show when the owner listens (with --secret-file if it has a\n"
                "secret); otherwise stats says why not.\n"}
    + common_footer);

  auto backup_cmd = app.add_subcommand(
    "backup", "copy the database to a new file, beside a live owner, without writing to it");
  std::string backup_out;
  backup_cmd->add_option("OUT", backup_out, "the new file; refused if it exists")->required();
  backup_cmd->footer(std::string{R"(
SQLite's online backup: one consistent snapshot of what was committed, read
while the owner goes on writing. The copy is checked (quick_check) before it
takes its name, so OUT is whole or absent. It is one file (no WAL), mode 0600,
and opens like the original. Restore: stop the owner, replace the database
file with the copy (and delete its -wal and -shm), start the owner.
)"} + common_footer);

  // -- writes
  auto retry_cmd = app.add_subcommand("retry", "put failed jobs back to pending, with fresh tries");
  std::string retry_id;
  bool retry_all = false;
  filter_flags retry_filter;
  retry_cmd->add_option("ID", retry_id, "the failed job to retry");
  retry_cmd->add_flag("--all", retry_all, "every failed job the filters match, in steps");
  bool dry_run = false;
  retry_cmd->add_flag("--dry-run", dry_run, "print the jobs --all would retry, and change nothing");
  retry_filter.add_to(retry_cmd, false);
  retry_cmd->footer(std::string{"\nGive a job ID, or --all with or without filters.\n"} + common_footer);

  auto cancel_cmd = app.add_subcommand(
    "cancel", "cancel a job: a pending one never runs, a running one is asked to stop");
  std::string cancel_id;
  bool cancel_all_flag = false;
  filter_flags cancel_filter;
  cancel_cmd->add_option("ID", cancel_id, "the job id");
  cancel_cmd->add_flag("--all", cancel_all_flag,
                       "every pending, waiting or running job the filters match, in steps");
  cancel_cmd->add_flag("--dry-run", dry_run, "print what cancelling would do, and change nothing");
  cancel_filter.add_to(cancel_cmd, true);
  cancel_cmd->footer(std::string{"\nGive a job ID, or --all with filters (--all alone is refused: it would\n"
                                 "cancel every unfinished job; give --status pending to mean that).\n"}
                     + common_footer);

  auto replay_cmd = app.add_subcommand(
    "replay", "run a finished job again, with fresh tries, keeping its history");
  std::string replay_id;
  replay_cmd->add_option("ID", replay_id, "the finished job")->required();
  replay_cmd->footer(common_footer);

  auto delete_cmd = app.add_subcommand("delete", "delete finished jobs with their attempts, logs and tags");
  bool delete_all = false;
  filter_flags delete_filter;
  delete_cmd->add_flag("--all", delete_all, "every finished job the filters match, in steps");
  delete_cmd->add_flag("--dry-run", dry_run, "print the jobs it would delete, and change nothing");
  delete_filter.add_to(delete_cmd, true);
  delete_cmd->footer(std::string{"\nGive --all with filters; without --status it takes every final status.\n"
                                 "Unfinished jobs stay: cancel them first.\n"}
                     + common_footer);

  auto purge_cmd = app.add_subcommand("purge", "delete failed jobs with their attempts");
  filter_flags purge_filter;
  std::string older_than;
  purge_filter.add_to(purge_cmd, false);
  bool purge_all = false;
  purge_cmd->add_option("--older-than", older_than,
                        "the jobs that failed longer ago than this DURATION (not with the filters)");
  purge_cmd->add_flag("--dry-run", dry_run, "print the jobs it would delete, and change nothing");
  purge_cmd->add_flag("--all", purge_all, "every failed job the filters match (all of them without filters)");
  purge_cmd->footer(std::string{"\nGive --older-than, or --all with or without filters.\n"}
                    + common_footer);

  std::string what, target, pause_for;
  auto pause_cmd = app.add_subcommand("pause", "stop starting jobs of the queue, a group or a type");
  pause_cmd->add_option("WHAT", what, "queue, group or type")
    ->required()
    ->check(CLI::IsMember({"queue", "group", "type"}));
  pause_cmd->add_option("NAME", target, "the group or type (not for the queue)");
  pause_cmd->add_option("--for", pause_for, "resume by itself after this DURATION");
  pause_cmd->footer(std::string{"\nThe owner applies a pause and saves it in the database: it survives a\n"
                                "restart and a takeover, and a timed pause keeps its end. The owner must\n"
                                "listen. A name with no jobs yet may be paused ahead (up to 1000 names of\n"
                                "each kind).\n"}
                    + common_footer);
  auto resume_cmd = app.add_subcommand("resume", "start jobs of the paused queue, group or type again");
  resume_cmd->add_option("WHAT", what, "queue, group or type")
    ->check(CLI::IsMember({"queue", "group", "type"}));
  resume_cmd->add_option("NAME", target, "the group or type (not for the queue)");
  bool resume_all = false;
  resume_cmd->add_flag("--all", resume_all,
                       "end every pause, names paused ahead among them (stats lists them)");
  resume_cmd->footer(common_footer);

  settings_change change;
  std::optional<double> rate;
  std::optional<int32_t> burst;
  auto set_cmd = app.add_subcommand(
    "set", "change a group's, type's or worker's settings while the queue runs");
  set_cmd->add_option("WHAT", what, "group, type or worker")
    ->required()
    ->check(CLI::IsMember({"group", "type", "worker"}));
  set_cmd->add_option("NAME", target, "the group, type or worker name")->required();
  set_cmd->add_option("--weight", change.weight, "the group's share of capacity (1 to 1000000)");
  set_cmd->add_option("--min-slots", change.min_slots, "slots the group gets before weights apply");
  set_cmd->add_option("--max-running", change.max_running,
                      "most weight units running at once; 0 removes the cap; for a worker,\n"
                      "its max_concurrency (1 or more)");
  set_cmd->add_option("--rate", rate, "starts per second; 0 removes the limit");
  set_cmd->add_option("--burst", burst, "starts allowed at once under --rate (default 1)");
  set_cmd->footer(std::string{"\nThe owner applies the change and saves it in the database: it replaces the\n"
                              "configured value until `reset`, across restarts and takeovers. Fields not\n"
                              "given keep their value. A worker has only --max-running: every worker\n"
                              "of that name, running now or later, takes it. The owner must listen.\n"}
                  + common_footer);
  auto reset_cmd =
    app.add_subcommand("reset", "back to a group's, type's or worker's configured settings");
  reset_cmd->add_option("WHAT", what, "group, type or worker")
    ->required()
    ->check(CLI::IsMember({"group", "type", "worker"}));
  reset_cmd->add_option("NAME", target, "the group, type or worker name")->required();
  reset_cmd->footer(common_footer);
  auto controls_cmd = app.add_subcommand(
    "controls", "the run-time controls in force: pauses and settings changed while running");
  controls_cmd->footer(std::string{"\nRead from the file: no owner is needed.\n"} + common_footer);

  auto workers_cmd = app.add_subcommand(
    "workers", "the workers registered with the owner: where they run, how busy, when last heard");
  workers_cmd->footer(std::string{"\nWorkers register with the owner, in its memory: the owner must listen.\n"
                                  "`show ID` names the worker of each attempt, from the file.\n"}
                      + common_footer);

  auto breaker_cmd = app.add_subcommand("breaker", "circuit breakers of job types");
  breaker_cmd->require_subcommand(1);
  std::string breaker_type;
  auto breaker_reset = breaker_cmd->add_subcommand(
    "reset", "close a job type's circuit breaker: its jobs start again at once");
  breaker_reset->add_option("TYPE", breaker_type, "the job type")->required();
  breaker_reset->footer(std::string{"\nBreakers live in the owner's memory: the owner must "
                                    "listen. `stats` shows them.\n"}
                        + common_footer);

  auto recurring_cmd =
    app.add_subcommand("recurring", "recurring jobs: list, show, delete, pause, resume");
  recurring_cmd->require_subcommand(1);
  std::string prefix, recurring_id;
  recurring_cmd->footer(common_footer);
  auto rec_list = recurring_cmd->add_subcommand("list", "recurring jobs, by id");
  rec_list->footer(common_footer);
  rec_list->add_option("PREFIX", prefix, "only ids that start with this");
  auto rec_show = recurring_cmd->add_subcommand("show", "one recurring job and its instances");
  rec_show->add_option("ID", recurring_id, "the recurring job's id")->required();
  rec_show->footer(common_footer);
  auto rec_delete = recurring_cmd->add_subcommand(
    "delete", "delete a recurring job; its pending instance goes, a running one finishes");
  rec_delete->add_option("ID", recurring_id, "the recurring job's id")->required();
  rec_delete->footer(common_footer);
  auto rec_pause = recurring_cmd->add_subcommand(
    "pause", "make no instance of a recurring job until resumed (or for a while)");
  rec_pause->add_option("ID", recurring_id, "the recurring job's id")->required();
  rec_pause->add_option("--for", pause_for, "resume by itself after this DURATION");
  rec_pause->footer(std::string{"\nUntil resumed, the pending instance is cancelled; with --for it moves to the\n"
                                "first slot after the pause. A running one finishes. Slots the pause covers\n"
                                "are skipped. Stored with the recurring job: it survives a restart.\n"}
                    + common_footer);
  auto rec_resume = recurring_cmd->add_subcommand(
    "resume", "end a recurring job's pause: its next instance is the first slot after now");
  rec_resume->add_option("ID", recurring_id, "the recurring job's id")->required();
  rec_resume->footer(common_footer);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    auto rest = app.remaining();
    if (app.get_subcommands().empty() && !rest.empty()) {
      std::cerr << "ergonctl: unknown command '" << rest.front()
                << "' (list, show, stats, controls, backup, retry, replay, cancel, purge, delete, pause, "
                   "resume, "
                   "set, reset, workers, breaker, recurring; "
                   "see --help)\n";
      return exit_usage;
    }
    auto rc = app.exit(e);
    return rc == 0 ? exit_ok : exit_usage;
  }

  reach_options reach;
  reach.db = db;
  reach.tls = !tls.certificate.empty();
  auto access = allow_open_files ? file_access::any : file_access::owner_only;
  tls.key_access = access;
  for (auto [file, slot, flag] :
       {std::tuple{&secret_file, &reach.creds.secret, "--secret-file"},
        std::tuple{&passphrase_file, &tls.passphrase, "--tls-passphrase-file"}}) {
    if (file->empty())
      continue;
    auto text = read_secret_file(*file, access);
    if (!text)
      return context{reach, tls, json, std::cout, std::cerr}.fail(
        {error::invalid_argument, std::string{flag} + ": " + text.error().message(), flag});
    *slot = std::move(*text);
  }
  context c{reach, tls, json, std::cout, std::cerr};

  if (*list_cmd) {
    list_args a;
    auto f = list_filter.parse();
    if (!f)
      return c.fail(f.error());
    a.filter = std::move(*f);
    if (limit < 1 || limit > static_cast<int64_t>(max_page_size))
      return c.fail({error::invalid_argument,
                     "--limit: must be 1 to " + std::to_string(max_page_size) + ", got "
                       + std::to_string(limit),
                     "--limit"});
    a.page.limit = static_cast<size_t>(limit);
    a.page.newest_first = newest_first;
    a.failed = failed_only;
    if (!after.empty()) {
      auto id = parse_id(after);
      if (!id)
        return c.fail({error::invalid_argument, "--after: " + id.error().message(), "--after"});
      a.page.after = *id;
    }
    return list(c, a);
  }
  if (*show_cmd)
    return show(c, show_id);
  if (*stats_cmd)
    return stats(c);
  if (*backup_cmd)
    return backup(c, backup_out);
  if (*retry_cmd) {
    if (retry_all == !retry_id.empty())
      return c.fail({error::invalid_argument, "retry: give either a job ID or --all", "--all"});
    if (retry_all) {
      auto f = retry_filter.parse();
      if (!f)
        return c.fail(f.error());
      return retry(c, std::nullopt, *f, dry_run);
    }
    if (dry_run)
      return c.fail({error::invalid_argument, "--dry-run: give it with --all", "--dry-run"});
    return retry(c, retry_id, std::nullopt, false);
  }
  if (*cancel_cmd) {
    if (cancel_all_flag == !cancel_id.empty())
      return c.fail({error::invalid_argument, "cancel: give either a job ID or --all", "--all"});
    if (!cancel_all_flag) {
      if (cancel_filter.narrows() || !cancel_filter.status.empty())
        return c.fail({error::invalid_argument, "cancel: filters go with --all, not with an ID",
                       "--all"});
      return cancel(c, cancel_id, dry_run);
    }
    if (!cancel_filter.narrows() && cancel_filter.status.empty())
      return c.fail({error::invalid_argument,
                     "cancel --all: give a filter (--status pending takes every pending job)",
                     "--all"});
    auto f = cancel_filter.parse();
    if (!f)
      return c.fail(f.error());
    return cancel_all(c, *f, dry_run);
  }
  if (*replay_cmd)
    return replay(c, replay_id);
  if (*delete_cmd) {
    if (!delete_all)
      return c.fail({error::invalid_argument, "delete: give --all, with or without filters",
                     "--all"});
    auto f = delete_filter.parse();
    if (!f)
      return c.fail(f.error());
    return delete_jobs(c, *f, dry_run);
  }
  if (*purge_cmd) {
    auto f = purge_filter.parse();
    if (!f)
      return c.fail(f.error());
    bool filtered = purge_filter.narrows();
    if (older_than.empty() == !purge_all)
      return c.fail({error::invalid_argument, "purge: give either --older-than or --all", "--all"});
    if (!older_than.empty() && filtered)
      return c.fail({error::invalid_argument,
                     "--older-than: give it alone, or use --all with --finished-before",
                     "--older-than"});
    std::optional<std::chrono::milliseconds> older;
    if (!older_than.empty()) {
      auto d = parse_duration(older_than, "--older-than");
      if (!d)
        return c.fail(d.error());
      older = *d;
    }
    return purge(c, *f, older, dry_run);
  }
  if (*resume_cmd && resume_all) {
    if (!what.empty() || !target.empty())
      return c.fail({error::invalid_argument, "--all: give it without WHAT and NAME", "--all"});
    return resume_everything(c);
  }
  if (*resume_cmd && (what.empty() || (what != "queue" && target.empty())))
    return c.fail({error::invalid_argument,
                   "resume: give WHAT (queue, or group or type with NAME), or --all", "WHAT"});
  if ((*pause_cmd || *resume_cmd) && what == "queue" && !target.empty())
    return c.fail({error::invalid_argument, "NAME: the queue has none", "NAME"});
  if ((*pause_cmd || *resume_cmd) && what != "queue" && target.empty())
    return c.fail({error::invalid_argument, "NAME: give the " + what + "'s name", "NAME"});
  if (*set_cmd) {
    if (burst && !rate)
      return c.fail({error::invalid_argument, "--burst: give it with --rate", "--burst"});
    if (rate)
      change.rate = rate_limit{*rate, burst.value_or(1)};
    return set_settings(c, what, target, change);
  }
  if (*reset_cmd)
    return reset_settings(c, what, target);
  if (*controls_cmd)
    return controls(c);
  if (*workers_cmd)
    return workers(c);
  // --for of pause and of recurring pause.
  std::optional<std::chrono::milliseconds> duration;
  if (!pause_for.empty()) {
    auto d = parse_duration(pause_for, "--for");
    if (!d)
      return c.fail(d.error());
    duration = *d;
  }
  if (*pause_cmd || *resume_cmd)
    return pause(c, what, target, bool(*pause_cmd), duration);
  if (*breaker_reset)
    return reset_breaker(c, breaker_type);
  if (*rec_list)
    return recurring_list(c, prefix);
  if (*rec_show)
    return recurring_show(c, recurring_id);
  if (*rec_delete)
    return recurring_delete(c, recurring_id);
  if (*rec_pause || *rec_resume)
    return recurring_pause(c, recurring_id, bool(*rec_pause), duration);
  return exit_usage;
}
