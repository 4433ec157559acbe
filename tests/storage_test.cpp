// Storage layer: schema, migrations, pragmas and each operation on a real
// SQLite file, without actors.
#define BOOST_TEST_MODULE storage
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "ergon/storage/sqlite_db.hpp"
#include "ergon/storage/field_rules.hpp"
#include "ergon/storage/job_ids.hpp"
#include "ergon/storage/op/add_finished_counts.hpp"
#include "ergon/storage/op/advance_low_mark.hpp"
#include "ergon/storage/op/cancel_job.hpp"
#include "ergon/storage/op/cancel_pending.hpp"
#include "ergon/storage/op/claim_jobs.hpp"
#include "ergon/storage/op/count_jobs.hpp"
#include "ergon/storage/op/delete_finished.hpp"
#include "ergon/storage/op/expire_attempt.hpp"
#include "ergon/storage/op/finish_attempts.hpp"
#include "ergon/storage/op/heartbeat.hpp"
#include "ergon/storage/op/hold_attempts.hpp"
#include "ergon/storage/op/insert_jobs.hpp"
#include "ergon/storage/op/list_jobs.hpp"
#include "ergon/storage/op/load_unfinished.hpp"
#include "ergon/storage/op/lose_attempts.hpp"
#include "ergon/storage/op/meta.hpp"
#include "ergon/storage/op/read_jobs.hpp"
#include "ergon/storage/op/record_logs.hpp"
#include "ergon/storage/op/recover_running.hpp"
#include "ergon/storage/op/release_claims.hpp"
#include "ergon/storage/op/save_worker.hpp"
#include "ergon/storage/op/savepoint.hpp"
#include "ergon/storage/op/update_pending.hpp"
#include "ergon/storage/records.hpp"
#include "ergon/storage/pg_lease.hpp"
#include "ergon/storage/schema.hpp"
#include "support/test_engine.hpp"
#include "support/test_support.hpp"

using namespace ergon;
using namespace ergon::storage;
using ergon::test::engine_probe;
using ergon::test::postgres_only;
using ergon::test::sqlite_only;
using ergon::test::sqlite_probe;
using ergon::test::temp_dir;

namespace {

constexpr int64_t t0 = 1'700'000'000'000;

// A fresh migrated database on the test engine (ERGON_TEST_ENGINE).
std::unique_ptr<db> open_migrated(const std::string& path) {
  return ergon::test::fresh_db(path);
}

job simple_job(std::string type = "t", int32_t priority = 0) {
  job j;
  j.type = std::move(type);
  j.payload = "p";
  j.priority = priority;
  return j;
}

// Inserts inside a transaction, as db_writer does.
std::vector<job_key> insert(db& d, std::vector<job> jobs, int64_t now = t0,
                                 uint32_t tag = 7) {
  BOOST_REQUIRE(d.begin_write().ok());
  auto r = insert_jobs(d, insert_jobs_args{std::move(jobs), 0, tag}, now);
  BOOST_REQUIRE_MESSAGE(r.has_value(), r.error().to_string());
  BOOST_REQUIRE(d.commit().ok());
  return std::move(r->added);
}

// Ends attempt `token` of `row` with `kind`, as the writer does.
void finish(db& d, int64_t row, int64_t token, report_kind kind) {
  finish_attempts_args outcomes;
  outcomes.reports = {{row, token, kind, kind == report_kind::succeeded ? "" : "boom"}};
  outcomes.randoms = {0.0};
  BOOST_REQUIRE(d.begin_write().ok());
  auto r = finish_attempts(d, outcomes, t0 + 5);
  BOOST_REQUIRE_MESSAGE(r.has_value(), r.error().to_string());
  BOOST_REQUIRE(d.commit().ok());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(schema)

BOOST_AUTO_TEST_CASE(migrating_an_empty_file_creates_the_current_schema) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  engine_probe probe{*d, dir.file("q.db")};
  BOOST_TEST(*schema_version(*d) == current_schema_version(d->engine()));
  BOOST_TEST(probe.number("SELECT count(*) FROM sqlite_master WHERE name IN "
                          "('jobs', 'attempts', 'meta')",
                          "SELECT count(*) FROM pg_tables WHERE schemaname = 'ergon' AND "
                          "tablename IN ('jobs', 'attempts', 'meta')")
             == 3);
  auto meta = read_meta(*d);
  BOOST_REQUIRE(meta.has_value());
  BOOST_TEST(meta->unfinished_low_mark == 0);
  BOOST_TEST(meta->id_tag < (1u << 30));
}

// PostgreSQL updates a row in place (HOT) only if no index names a column
// the update changes: no index of jobs may name `status`, which every claim
// and every end changes.
BOOST_AUTO_TEST_CASE(no_index_of_jobs_names_the_status) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  engine_probe probe{*d, dir.file("q.db")};
  BOOST_TEST(probe.number("SELECT count(*) FROM sqlite_master WHERE type = 'index' "
                          "AND tbl_name = 'jobs'",
                          "SELECT count(*) FROM pg_indexes WHERE schemaname = 'ergon' "
                          "AND tablename = 'jobs'")
             >= 4);
  BOOST_TEST(probe.number("SELECT count(*) FROM sqlite_master WHERE type = 'index' "
                          "AND tbl_name = 'jobs' AND ' ' || sql || ' ' GLOB "
                          "'*[^_a-z]status[^_a-z]*'",
                          "SELECT count(*) FROM pg_indexes WHERE schemaname = 'ergon' "
                          "AND tablename = 'jobs' AND indexdef ~ '\\mstatus\\M'")
             == 0);
}

BOOST_AUTO_TEST_CASE(claims_and_successes_update_job_rows_in_place,
                     *postgres_only("HOT updates are PostgreSQL's")) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto rows = insert(*d, {simple_job(), simple_job()});
  BOOST_REQUIRE(d->begin_write().ok());
  auto claimed = claim_jobs(*d, claim_jobs_args{{{rows[0].row, 1}, {rows[1].row, 2}}}, t0);
  BOOST_REQUIRE(claimed.has_value());
  BOOST_REQUIRE(claimed->claimed.size() == 2u);
  finish_attempts_args done;
  done.reports = {{rows[0].row, 1, report_kind::succeeded, ""},
                  {rows[1].row, 2, report_kind::succeeded, ""}};
  done.randoms = {0.0, 0.0};
  BOOST_REQUIRE(finish_attempts(*d, done, t0).has_value());
  // Counted in this transaction, on its own session.
  engine_probe probe{*d, dir.file("q.db")};
  BOOST_TEST(probe.number("SELECT pg_stat_get_xact_tuples_updated(CAST('jobs' AS regclass))")
             == 4);
  BOOST_TEST(
    probe.number("SELECT pg_stat_get_xact_tuples_hot_updated(CAST('jobs' AS regclass))") == 4);
  BOOST_REQUIRE(d->commit().ok());
}

BOOST_AUTO_TEST_CASE(reopening_keeps_jobs_and_migrating_again_changes_nothing) {
  temp_dir dir;
  job_id id;
  uint32_t tag = 0;
  std::unique_ptr<db> first;
  {
    auto d = open_migrated(dir.file("q.db"));
    tag = read_meta(*d)->id_tag;
    auto j = simple_job("keep");
    j.payload = std::string("\0\1binary", 8);
    j.name = "named";
    id = insert(*d, {j}, t0, tag).front().id;
    first = std::move(d);
  }
  std::string before = engine_probe(*first, dir.file("q.db")).dump();
  auto d = ergon::test::reopen(*first, dir.file("q.db"));
  first.reset();
  BOOST_REQUIRE(migrate(*d).ok());
  BOOST_TEST(engine_probe(*d, dir.file("q.db")).dump() == before);
  BOOST_TEST(read_meta(*d)->id_tag == tag);
  auto info = read_job(*d, id);
  BOOST_REQUIRE(info.has_value());
  BOOST_TEST(info->type == "keep");
  BOOST_TEST(info->payload == std::string("\0\1binary", 8));
  BOOST_TEST(info->name.value_or("") == "named");
  BOOST_TEST(info->status == job_status::pending);
}

BOOST_AUTO_TEST_CASE(a_file_from_a_newer_ergon_is_refused) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  engine_probe(*d, dir.file("q.db")).exec("PRAGMA user_version = 999",
                                          "UPDATE schema_version SET version = 999");
  auto st = migrate(*ergon::test::reopen(*d, dir.file("q.db")));
  BOOST_TEST(st.code() == error::corrupt);
  BOOST_TEST(st.message().find("999") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_file_that_is_not_a_database_is_refused,
                     *sqlite_only("a PostgreSQL schema is not a file")) {
  temp_dir dir;
  std::ofstream{dir.file("junk.db")} << std::string(8192, 'x');
  auto d = sqlite_db::open(dir.file("junk.db"), sqlite_options{});
  BOOST_REQUIRE(!d.has_value());
  BOOST_TEST(d.error().code() == error::corrupt);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(a_schema_with_other_tables_is_refused_and_left_unchanged,
                     *postgres_only("SQLite's rule for files is tested above")) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  storage::pg_options o = static_cast<pg_db&>(*d).options();
  o.schema = "theirs";
  engine_probe(*d, "").exec("", "CREATE SCHEMA theirs; CREATE TABLE theirs.orders (id int)");
  auto other = pg_db::open(o);
  BOOST_REQUIRE(other.has_value());
  auto st = migrate(**other);
  BOOST_TEST(st.code() == error::corrupt);
  BOOST_TEST(st.message().find("orders") != std::string::npos, st.message());
  BOOST_TEST(engine_probe(*d, "").number("", "SELECT count(*) FROM pg_tables WHERE "
                                             "schemaname = 'theirs'")
             == 1);
}

BOOST_AUTO_TEST_SUITE(pragmas, *sqlite_only("pragmas are SQLite's"))

BOOST_AUTO_TEST_CASE(journal_mode_reads_back_as_wal) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  BOOST_TEST(sqlite_probe{dir.file("q.db")}.text("PRAGMA journal_mode") == "wal");
  auto& sqlite = static_cast<sqlite_db&>(*d);
  BOOST_TEST(*sqlite.pragma_text("PRAGMA synchronous") == "1");  // NORMAL
  BOOST_TEST(*sqlite.pragma_text("PRAGMA foreign_keys") == "1");
}

BOOST_AUTO_TEST_CASE(synchronous_full_is_an_option) {
  temp_dir dir;
  sqlite_options opts;
  opts.synchronous_full = true;
  auto d = sqlite_db::open(dir.file("q.db"), opts);
  BOOST_REQUIRE(d.has_value());
  BOOST_TEST(*(*d)->pragma_text("PRAGMA synchronous") == "2");  // FULL
}

BOOST_AUTO_TEST_CASE(opening_fails_when_wal_does_not_take) {
  // SQLite keeps temporary databases (empty path) out of WAL and answers
  // "delete": the read-back must catch it.
  auto d = sqlite_db::open("", sqlite_options{});
  BOOST_REQUIRE(!d.has_value());
  BOOST_TEST(d.error().code() == error::io_error);
  BOOST_TEST(d.error().message().find("expected 'wal'") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(job_ids)

BOOST_AUTO_TEST_CASE(ids_are_uuidv7_and_carry_the_row) {
  auto id = make_job_id(t0, 0x2aaaaaaa, 12345);
  auto text = id.to_string();
  BOOST_TEST(text.size() == 36u);
  BOOST_TEST(text[14] == '7');  // version
  BOOST_TEST((text[19] == '8' || text[19] == '9' || text[19] == 'a' || text[19] == 'b'));
  BOOST_TEST(id.timestamp_ms() == t0);
  BOOST_TEST(row_of(id).value_or(0) == 12345);
  auto parsed = job_id::parse(text);
  BOOST_REQUIRE(parsed.has_value());
  BOOST_TEST((*parsed == id));
}

BOOST_AUTO_TEST_CASE(ids_sort_by_time_then_row) {
  auto a = make_job_id(t0, 5, 9);
  auto b = make_job_id(t0, 5, 10);
  auto c = make_job_id(t0 + 1, 5, 1);
  BOOST_TEST((a < b));
  BOOST_TEST((b < c));
}

BOOST_AUTO_TEST_CASE(malformed_ids_are_rejected_naming_the_field) {
  for (const char* bad : {"", "not-a-uuid", "0190163d-8694-739b-aea5-966c26f8ad9",
                          "0190163d-8694-739b-aea5-966c26f8ad9g",
                          "0190163d+8694-739b-aea5-966c26f8ad91"}) {
    auto r = job_id::parse(bad);
    BOOST_TEST(!r.has_value());
    BOOST_TEST(r.error().code() == error::invalid_argument);
    BOOST_TEST(r.error().field() == "id");
  }
  // A well-formed UUID that ergon never made (version 4) holds no row.
  auto v4 = job_id::parse("9b2f3c4d-1e2f-4a5b-8c6d-7e8f9a0b1c2d");
  BOOST_REQUIRE(v4.has_value());
  BOOST_TEST(!row_of(*v4).has_value());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(insert_jobs_op)

BOOST_AUTO_TEST_CASE(inserts_in_order_with_fresh_rows) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto rows = insert(*d, {simple_job("a"), simple_job("b")});
  BOOST_REQUIRE(rows.size() == 2u);
  BOOST_TEST(rows[0].type == "a");
  BOOST_TEST(rows[1].row == rows[0].row + 1);
  BOOST_TEST(rows[0].run_at == t0);
  BOOST_TEST(rows[0].added_at == t0);
}

BOOST_AUTO_TEST_CASE(run_at_delay_and_ttl_resolve_against_now) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto delayed = simple_job();
  delayed.delay_ms = 500;
  delayed.ttl_ms = 100;
  auto fixed = simple_job();
  fixed.run_at_ms = t0 + 9;
  auto rows = insert(*d, {delayed, fixed});
  BOOST_TEST(rows[0].run_at == t0 + 500);
  BOOST_TEST(rows[0].deadline.value_or(0) == t0 + 600);
  BOOST_TEST(rows[1].run_at == t0 + 9);
  BOOST_TEST(!rows[1].deadline.has_value());
}

BOOST_AUTO_TEST_CASE(one_invalid_job_fails_the_whole_call_and_writes_nothing) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  insert(*d, {simple_job("existing")});
  auto before = engine_probe(*d, dir.file("q.db")).dump();
  auto bad = simple_job();
  bad.weight = 0;
  BOOST_REQUIRE(d->begin_write().ok());
  auto r = insert_jobs(*d, insert_jobs_args{{simple_job(), bad, simple_job()}, 0, 1}, t0);
  BOOST_REQUIRE(d->commit().ok());
  BOOST_REQUIRE(!r.has_value());
  BOOST_TEST(r.error().code() == error::invalid_argument);
  BOOST_TEST(r.error().field() == "weight");
  BOOST_TEST(r.error().message().find("job 1 of 3") != std::string::npos);
  BOOST_TEST(engine_probe(*d, dir.file("q.db")).dump() == before);
}

BOOST_AUTO_TEST_CASE(payload_limit_is_enforced) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto big = simple_job();
  big.payload.assign(11, 'x');
  auto r = insert_jobs(*d, insert_jobs_args{{big}, 10, 1}, t0);
  BOOST_REQUIRE(!r.has_value());
  BOOST_TEST(r.error().field() == "payload");
  BOOST_TEST(engine_probe(*d, dir.file("q.db")).number("SELECT count(*) FROM jobs") == 0);
}

// Submits `jobs` in a transaction of their own and returns what the call
// returned (committed on success, rolled back on failure).
result<insert_jobs_result> submit(db& d, std::vector<job> jobs, int64_t now,
                                  int64_t window_ms = 60'000) {
  BOOST_REQUIRE(d.begin_write().ok());
  auto r = insert_jobs(d, insert_jobs_args{std::move(jobs), 0, 7, 0, window_ms}, now);
  if (r)
    BOOST_REQUIRE(d.commit().ok());
  else
    d.rollback();
  return r;
}

job keyed(const std::string& key, const std::string& payload = "p") {
  auto j = simple_job();
  j.payload = payload;
  j.idempotency_key = key;
  return j;
}

// A job submitted again under its idempotency key, within the window, gets
// the first one's id and writes nothing; after the window it is new.
BOOST_AUTO_TEST_CASE(an_idempotency_key_returns_the_first_jobs_id_within_its_window) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto first = submit(*d, {keyed("order-7")}, t0);
  BOOST_REQUIRE(first.has_value());
  BOOST_TEST(first->added.size() == 1u);
  auto again = submit(*d, {keyed("order-7")}, t0 + 59'999);
  BOOST_REQUIRE_MESSAGE(again.has_value(), again.error().to_string());
  BOOST_TEST(again->ids == first->ids);
  BOOST_TEST(again->added.empty());
  engine_probe probe{*d, dir.file("q.db")};
  BOOST_TEST(probe.number("SELECT count(*) FROM jobs") == 1);
  // A different job under the key is refused, naming the first.
  auto other = submit(*d, {keyed("order-7", "other")}, t0 + 1);
  BOOST_REQUIRE(!other.has_value());
  BOOST_TEST(other.error().code() == error::already_exists);
  BOOST_TEST(other.error().field() == "idempotency_key");
  BOOST_TEST(other.error().message().find(first->ids[0].to_string()) != std::string::npos,
             other.error().message());
  // The window passed: the key is free, and taken anew.
  auto later = submit(*d, {keyed("order-7", "other")}, t0 + 60'000);
  BOOST_REQUIRE_MESSAGE(later.has_value(), later.error().to_string());
  BOOST_TEST(later->added.size() == 1u);
  BOOST_TEST(later->ids != first->ids);
  BOOST_TEST(probe.number("SELECT count(*) FROM idempotency_keys") == 1);
  BOOST_TEST(probe.number("SELECT expires_at FROM idempotency_keys") == t0 + 120'000);
}

BOOST_AUTO_TEST_CASE(a_batch_shares_ids_for_one_key_and_refuses_two_jobs_under_it) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto known = submit(*d, {keyed("k0")}, t0);
  BOOST_REQUIRE(known.has_value());
  // Known, new, new again (the same job), unkeyed.
  auto r = submit(*d, {keyed("k0"), keyed("k1"), keyed("k1"), simple_job()}, t0 + 1);
  BOOST_REQUIRE_MESSAGE(r.has_value(), r.error().to_string());
  BOOST_TEST(r->ids[0] == known->ids[0]);
  BOOST_TEST(r->ids[1] == r->ids[2]);
  BOOST_TEST(r->ids[3] != r->ids[1]);
  BOOST_TEST(r->added.size() == 2u);
  engine_probe probe{*d, dir.file("q.db")};
  auto before = probe.dump();
  auto clash = submit(*d, {simple_job(), keyed("k2", "a"), keyed("k2", "b")}, t0 + 2);
  BOOST_REQUIRE(!clash.has_value());
  BOOST_TEST(clash.error().code() == error::invalid_argument);
  BOOST_TEST(clash.error().field() == "idempotency_key");
  BOOST_TEST(clash.error().message().find("job 2 of 3") != std::string::npos,
             clash.error().message());
  BOOST_TEST(probe.dump() == before);
  // Every field counts: a retry count that differs is another job.
  auto fewer = keyed("k1");
  fewer.max_retries = 0;
  BOOST_TEST(submit(*d, {fewer}, t0 + 3).error().code() == error::already_exists);
  BOOST_TEST(probe.dump() == before);
}

// An idempotency key maps to whatever id the first submit returned: a
// unique key's holder when it skipped.
BOOST_AUTO_TEST_CASE(an_idempotency_key_keeps_the_id_a_unique_key_gave) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto holder = simple_job();
  holder.unique_key = "daily";
  auto held = submit(*d, {holder}, t0);
  BOOST_REQUIRE(held.has_value());
  auto j = keyed("retry-safe");
  j.unique_key = "daily";
  auto skipped = submit(*d, {j}, t0 + 1);
  BOOST_REQUIRE(skipped.has_value());
  BOOST_TEST(skipped->ids == held->ids);
  auto again = submit(*d, {j}, t0 + 2);
  BOOST_REQUIRE(again.has_value());
  BOOST_TEST(again->ids == held->ids);
  BOOST_TEST(engine_probe(*d, dir.file("q.db")).number("SELECT count(*) FROM jobs") == 1);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(update_and_cancel_ops)

BOOST_AUTO_TEST_CASE(update_changes_only_its_own_row) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto rows = insert(*d, {simple_job("a"), simple_job("b")});
  job_update u;
  u.priority = 9;
  u.payload = "new";
  auto r = update_pending(*d, update_pending_args{rows[0].id, u, 0}, t0);
  BOOST_REQUIRE_MESSAGE(r.has_value(), r.error().to_string());
  BOOST_TEST(r->before.priority == 0);
  BOOST_TEST(r->after.priority == 9);
  BOOST_TEST(read_job(*d, rows[0].id)->payload == "new");
  BOOST_TEST(read_job(*d, rows[1].id)->priority == 0);
  BOOST_TEST(read_job(*d, rows[1].id)->payload == "p");
}

BOOST_AUTO_TEST_CASE(update_and_cancel_report_each_error_distinctly) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto rows = insert(*d, {simple_job("a"), simple_job("b"), simple_job("c")});
  // running: claimed by a worker
  BOOST_REQUIRE(claim_jobs(*d, claim_jobs_args{{{rows[1].row, 77}}}, t0).has_value());
  // finished: cancelled
  BOOST_REQUIRE(cancel_pending(*d, cancel_pending_args{rows[2].id}, t0).has_value());
  job_update u;
  u.priority = 1;
  auto unknown = make_job_id(t0, 1, 999);
  struct expectation {
    job_id id;
    error code;
  };
  for (auto& e : {expectation{unknown, error::not_found},
                  expectation{rows[1].id, error::job_running},
                  expectation{rows[2].id, error::job_finished}}) {
    auto before = engine_probe(*d, dir.file("q.db")).dump();
    BOOST_TEST(update_pending(*d, update_pending_args{e.id, u, 0}, t0).error().code() == e.code);
    BOOST_TEST(cancel_pending(*d, cancel_pending_args{e.id}, t0).error().code() == e.code);
    BOOST_TEST(engine_probe(*d, dir.file("q.db")).dump() == before);
  }
}

BOOST_AUTO_TEST_CASE(an_id_from_another_database_is_not_found) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto rows = insert(*d, {simple_job()}, t0, 1);
  // Same row and time, different tag: must not address our row.
  auto foreign = make_job_id(t0, 2, rows[0].row);
  BOOST_TEST(read_job(*d, foreign).error().code() == error::not_found);
  BOOST_TEST(cancel_pending(*d, cancel_pending_args{foreign}, t0).error().code()
             == error::not_found);
}

BOOST_AUTO_TEST_CASE(update_rejects_a_run_at_past_the_deadline) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto j = simple_job();
  j.ttl_ms = 1'000;
  auto rows = insert(*d, {j});
  job_update u;
  u.run_at_ms = t0 + 5'000;
  auto r = update_pending(*d, update_pending_args{rows[0].id, u, 0}, t0);
  BOOST_REQUIRE(!r.has_value());
  BOOST_TEST(r.error().field() == "run_at");
}

BOOST_AUTO_TEST_CASE(cancel_marks_the_job_cancelled) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto rows = insert(*d, {simple_job()});
  auto key = cancel_pending(*d, cancel_pending_args{rows[0].id}, t0 + 5);
  BOOST_REQUIRE(key.has_value());
  BOOST_TEST(key->key.row == rows[0].row);
  auto info = read_job(*d, rows[0].id);
  BOOST_TEST(info->status == job_status::cancelled);
  BOOST_TEST(info->finished_at_ms.value_or(0) == t0 + 5);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(claim_and_load)

// A claim for a worker in another process records it; one for the owner's
// own worker records nobody, also when it claims a job another held before.
BOOST_AUTO_TEST_CASE(a_claim_records_its_remote_holder) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto rows = insert(*d, {simple_job(), simple_job(), simple_job()});
  auto held = [&](int64_t row) {
    return engine_probe(*d, dir.file("q.db"))
      .text("SELECT coalesce(held_by, 'nobody') FROM jobs WHERE id = " + std::to_string(row));
  };
  claim_jobs_args remote{{{rows[0].row, 11}, {rows[1].row, 12}}, "node-a#42/7"};
  BOOST_REQUIRE(claim_jobs(*d, remote, t0).has_value());
  BOOST_REQUIRE(claim_jobs(*d, claim_jobs_args{{{rows[2].row, 13}}}, t0).has_value());
  BOOST_TEST(held(rows[0].row) == "node-a#42/7");
  BOOST_TEST(held(rows[1].row) == "node-a#42/7");
  BOOST_TEST(held(rows[2].row) == "nobody");
  storage::release_claims_args back{{{rows[1].row, 12}}};
  BOOST_REQUIRE(release_claims(*d, back, t0).has_value());
  BOOST_REQUIRE(claim_jobs(*d, claim_jobs_args{{{rows[1].row, 14}}}, t0).has_value());
  BOOST_TEST(held(rows[1].row) == "nobody");
}

BOOST_AUTO_TEST_CASE(claim_takes_only_pending_due_jobs) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto later = simple_job();
  later.delay_ms = 1'000;
  auto rows = insert(*d, {simple_job(), later});
  auto r = claim_jobs(*d, claim_jobs_args{{{rows[0].row, 11}, {rows[1].row, 12}}}, t0);
  BOOST_REQUIRE(r.has_value());
  BOOST_REQUIRE(r->claimed.size() == 1u);
  BOOST_TEST(r->claimed[0].try_number == 1);
  BOOST_TEST(r->claimed[0].token == 11);
  BOOST_TEST(r->claimed[0].expires_at == t0 + 300'000);
  BOOST_TEST(r->missed == (std::vector<int64_t>{rows[1].row}), boost::test_tools::per_element());
  // A second claim of the same job misses: it is running.
  auto again = claim_jobs(*d, claim_jobs_args{{{rows[0].row, 13}}}, t0);
  BOOST_TEST(again->claimed.empty());
}

// Tokens that are one base XOR each row (the dispatcher's): PostgreSQL
// computes each row's token from the base. Fencing holds the same: a token
// of another base, or of another row, completes nothing.
BOOST_AUTO_TEST_CASE(tokens_of_one_base_claim_and_complete_each_row_under_its_own) {
  constexpr int64_t base = 0x5a5a5a5a5a5aLL;
  BOOST_TEST(!shared_token_base({}).has_value());
  BOOST_TEST(shared_token_base({{3, 17}}).value() == (17 ^ 3));
  BOOST_TEST(shared_token_base({{3, base ^ 3}, {9, base ^ 9}}).value() == base);
  BOOST_TEST(!shared_token_base({{3, base ^ 3}, {9, base ^ 8}}).has_value());
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto rows = insert(*d, {simple_job(), simple_job(), simple_job(), simple_job()});
  claim_jobs_args claims;
  for (auto& k : rows)
    claims.claims.push_back({k.row, base ^ k.row});
  BOOST_REQUIRE(d->begin_write().ok());
  auto claimed = claim_jobs(*d, claims, t0);
  BOOST_REQUIRE(claimed.has_value());
  BOOST_REQUIRE(claimed->claimed.size() == rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    BOOST_TEST(claimed->claimed[i].key.row == rows[i].row);  // in the order asked for
    BOOST_TEST(claimed->claimed[i].token == (base ^ rows[i].row));
  }
  // Row 1's token of another base, row 2's token named for row 3: stale.
  finish_attempts_args done;
  done.reports = {{rows[0].row, base ^ rows[0].row, report_kind::succeeded, ""},
                  {rows[1].row, (base + 1) ^ rows[1].row, report_kind::succeeded, ""},
                  {rows[2].row, base ^ rows[3].row, report_kind::succeeded, ""},
                  {rows[3].row, base ^ rows[3].row, report_kind::succeeded, ""}};
  done.randoms.assign(4, 0.0);
  auto finished = finish_attempts(*d, done, t0 + 5);
  BOOST_REQUIRE(finished.has_value());
  BOOST_REQUIRE(d->commit().ok());
  BOOST_TEST(finished->statuses[0].ok());
  BOOST_TEST(finished->statuses[1].code() == error::stale_attempt);
  BOOST_TEST(finished->statuses[2].code() == error::stale_attempt);
  BOOST_TEST(finished->statuses[3].ok());
  BOOST_REQUIRE(finished->ended.size() == 2u);
  BOOST_TEST(finished->ended[0].row == rows[0].row);
  BOOST_TEST(finished->ended[1].row == rows[3].row);
  // The same run of successes again, each under its own token, now that
  // the tokens share a base: rows 1 and 2 complete; rows 0 and 3 succeeded
  // under these very tokens already, so their successes sent again are ok
  // and change nothing (an answer lost with the connection).
  done.reports = {{rows[0].row, base ^ rows[0].row, report_kind::succeeded, ""},
                  {rows[1].row, base ^ rows[1].row, report_kind::succeeded, ""},
                  {rows[2].row, base ^ rows[2].row, report_kind::succeeded, ""},
                  {rows[3].row, base ^ rows[3].row, report_kind::succeeded, ""}};
  BOOST_REQUIRE(d->begin_write().ok());
  finished = finish_attempts(*d, done, t0 + 6);
  BOOST_REQUIRE(finished.has_value());
  BOOST_REQUIRE(d->commit().ok());
  BOOST_TEST(finished->statuses[0].ok());
  BOOST_TEST(finished->statuses[1].ok());
  BOOST_TEST(finished->statuses[2].ok());
  BOOST_TEST(finished->statuses[3].ok());
  BOOST_REQUIRE(finished->ended.size() == 2u);
  BOOST_TEST(finished->ended[0].row == rows[1].row);
  BOOST_TEST(finished->ended[1].row == rows[2].row);
  // A failure, or a success under another token, is stale all the same.
  done.reports = {{rows[0].row, base ^ rows[0].row, report_kind::failed, "late"},
                  {rows[3].row, (base + 1) ^ rows[3].row, report_kind::succeeded, ""}};
  done.randoms.assign(2, 0.0);
  BOOST_REQUIRE(d->begin_write().ok());
  finished = finish_attempts(*d, done, t0 + 7);
  BOOST_REQUIRE(finished.has_value());
  BOOST_REQUIRE(d->commit().ok());
  BOOST_TEST(finished->statuses[0].code() == error::stale_attempt);
  BOOST_TEST(finished->statuses[1].code() == error::stale_attempt);
  BOOST_TEST(finished->ended.empty());
}

BOOST_AUTO_TEST_CASE(a_lost_worker_s_attempts_retry_at_once_or_fail_on_the_last_try) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto retried = simple_job();
  retried.max_retries = 2;
  retried.backoff.initial_ms = 3'600'000;  // "at once" ignores the backoff
  auto last = simple_job();
  last.max_retries = 0;
  auto rows = insert(*d, {retried, last, simple_job()});
  BOOST_REQUIRE(claim_jobs(*d,
                           claim_jobs_args{{{rows[0].row, 1}, {rows[1].row, 2},
                                            {rows[2].row, 3}}},
                           t0)
                  .has_value());
  // The third was claimed again under another token: not this worker's.
  auto ended = lose_attempts(
    *d, lose_attempts_args{{{rows[0].row, 1}, {rows[1].row, 2}, {rows[2].row, 99}}},
    t0 + 10);
  BOOST_REQUIRE_MESSAGE(ended.has_value(), ended.error().to_string());
  BOOST_REQUIRE(ended->size() == 2u);
  auto& a = (*ended)[0];
  BOOST_TEST(a.row == rows[0].row);
  BOOST_TEST(a.outcome == attempt_outcome::worker_lost);
  BOOST_TEST(a.message == "worker lost");
  BOOST_TEST(a.status == job_status::pending);
  BOOST_TEST(a.key.run_at == t0 + 10);
  auto& b = (*ended)[1];
  BOOST_TEST(b.row == rows[1].row);
  BOOST_TEST(b.status == job_status::failed);
  // Losing the same attempts again changes nothing.
  auto again = lose_attempts(*d, lose_attempts_args{{{rows[0].row, 1}, {rows[1].row, 2}}},
                             t0 + 20);
  BOOST_REQUIRE(again.has_value());
  BOOST_TEST(again->empty());
}

// A report batch may hold a stale success and the current one of the same
// row: the stale one changes nothing, the current one succeeds.
BOOST_AUTO_TEST_CASE(a_stale_and_a_current_success_of_one_row_in_one_batch) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto rows = insert(*d, {simple_job(), simple_job()});
  BOOST_REQUIRE(d->begin_write().ok());
  BOOST_REQUIRE(claim_jobs(*d, claim_jobs_args{{{rows[0].row, 5}, {rows[1].row, 6}}}, t0)
                  .has_value());
  finish_attempts_args done;
  done.reports = {{rows[0].row, 4, report_kind::succeeded, "old"},
                  {rows[0].row, 5, report_kind::succeeded, "new"},
                  {rows[1].row, 6, report_kind::succeeded, ""}};
  auto r = finish_attempts(*d, done, t0 + 1);
  BOOST_REQUIRE_MESSAGE(r.has_value(), r.error().to_string());
  BOOST_REQUIRE(d->commit().ok());
  BOOST_REQUIRE(r->statuses.size() == 3u);
  BOOST_TEST(r->statuses[0].code() == error::stale_attempt);
  BOOST_TEST(r->statuses[1].ok());
  BOOST_TEST(r->statuses[2].ok());
  auto info = read_job(*d, rows[0].id);
  BOOST_REQUIRE(info.has_value());
  BOOST_TEST(info->status == job_status::succeeded);
  BOOST_TEST(info->result.value_or("") == "new");
}

BOOST_AUTO_TEST_CASE(load_unfinished_scans_from_the_low_mark) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto rows = insert(*d, {simple_job("a"), simple_job("b"), simple_job("c")});
  BOOST_REQUIRE(cancel_pending(*d, cancel_pending_args{rows[0].id}, t0).has_value());
  BOOST_REQUIRE(claim_jobs(*d, claim_jobs_args{{{rows[1].row, 1}}}, t0).has_value());
  auto all = load_unfinished(*d, 0);
  BOOST_REQUIRE(all.has_value());
  BOOST_TEST(all->low_mark == rows[1].row);
  BOOST_REQUIRE(all->running.size() == 1u);
  BOOST_REQUIRE(all->pending.size() == 1u);
  BOOST_TEST(all->pending[0].type == "c");
  BOOST_REQUIRE(raise_low_mark(*d, all->low_mark).ok());
  BOOST_TEST(read_meta(*d)->unfinished_low_mark == rows[1].row);
  // The mark never goes down.
  BOOST_REQUIRE(raise_low_mark(*d, 1).ok());
  BOOST_TEST(read_meta(*d)->unfinished_low_mark == rows[1].row);
  // From above the last row there is nothing; the mark is one past the end.
  auto none = load_unfinished(*d, rows[2].row + 1);
  BOOST_TEST(none->pending.empty());
  BOOST_TEST(none->low_mark == rows[2].row + 1);
}

// At open, a running job comes with its attempt and, for a worker in
// another process, its holder; a pending row's old holder is not one.
BOOST_AUTO_TEST_CASE(load_unfinished_gives_running_jobs_their_attempt_and_holder) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto rows = insert(*d, {simple_job("a"), simple_job("b"), simple_job("c")});
  auto timeout = job{}.timeout_ms;
  BOOST_REQUIRE(claim_jobs(*d, claim_jobs_args{{{rows[0].row, 21}}, "node-a#1/5"}, t0));
  BOOST_REQUIRE(claim_jobs(*d, claim_jobs_args{{{rows[1].row, 22}}}, t0 + 5));
  BOOST_REQUIRE(claim_jobs(*d, claim_jobs_args{{{rows[2].row, 23}}, "node-b#2/6"}, t0));
  BOOST_REQUIRE(release_claims(*d, release_claims_args{{{rows[2].row, 23}}}, t0));
  BOOST_REQUIRE(cancel_job(*d, cancel_job_args{rows[1].id}, t0 + 6));
  auto all = load_unfinished(*d, 0);
  BOOST_REQUIRE(all.has_value());
  BOOST_REQUIRE_EQUAL(all->running.size(), 2u);
  auto& remote = all->running[0];
  BOOST_TEST(remote.key.row == rows[0].row);
  BOOST_TEST(remote.key.type == "a");
  BOOST_TEST(remote.token == 21);
  BOOST_TEST(remote.started_at == t0);
  BOOST_TEST(remote.expires_at == t0 + timeout);
  BOOST_TEST(!remote.cancel_requested);
  BOOST_TEST(remote.holder == "node-a#1/5");
  auto& local = all->running[1];
  BOOST_TEST(local.token == 22);
  BOOST_TEST(local.started_at == t0 + 5);
  BOOST_TEST(local.cancel_requested);
  BOOST_TEST(local.holder.empty());
  BOOST_REQUIRE_EQUAL(all->pending.size(), 1u);
  BOOST_TEST(all->pending[0].row == rows[2].row);
}

// A remote worker's attempts stay while it is away: each expiry moves to
// the end of its grace, never earlier, and only under the attempt's own
// token.
BOOST_AUTO_TEST_CASE(holding_attempts_extends_only_their_own_expiry) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto rows = insert(*d, {simple_job(), simple_job(), simple_job()});
  auto timeout = job{}.timeout_ms;
  BOOST_REQUIRE(claim_jobs(*d, claim_jobs_args{{{rows[0].row, 31}, {rows[1].row, 32}}}, t0));
  auto expiries = [&] {
    std::vector<int64_t> out;
    auto all = load_unfinished(*d, 0);
    BOOST_REQUIRE(all.has_value());
    for (auto& r : all->running)
      out.push_back(r.expires_at);
    return out;
  };
  auto grace_end = t0 + timeout + 1'000;
  auto held = hold_attempts(*d, {{{rows[0].row, 31}, {rows[1].row, 99}, {rows[2].row, 0}},
                                 grace_end});
  BOOST_REQUIRE_MESSAGE(held.has_value(), held.error().to_string());
  BOOST_REQUIRE_EQUAL(held->size(), 3u);
  BOOST_TEST((*held)[0].value_or(0) == grace_end);
  BOOST_TEST(!(*held)[1].has_value());  // another attempt's token
  BOOST_TEST(!(*held)[2].has_value());  // not running
  BOOST_TEST(expiries() == (std::vector<int64_t>{grace_end, t0 + timeout}), "expiries");
  // A grace that ends sooner shortens nothing.
  held = hold_attempts(*d, {{{rows[0].row, 31}, {rows[1].row, 32}}, t0 + 1});
  BOOST_REQUIRE(held.has_value());
  BOOST_TEST((*held)[0].value_or(0) == grace_end);
  BOOST_TEST((*held)[1].value_or(0) == t0 + timeout);
  BOOST_TEST(expiries() == (std::vector<int64_t>{grace_end, t0 + timeout}), "expiries");
}

BOOST_AUTO_TEST_CASE(loading_leaves_no_read_open_so_the_connection_can_write_later) {
  // The queue loads through the connection its writer then takes over. A
  // statement left mid-step would pin that connection to an old snapshot:
  // once another process wrote, it could neither see that write nor write.
  temp_dir dir;
  auto a = open_migrated(dir.file("q.db"));
  BOOST_REQUIRE(load_unfinished(*a, 0).has_value());
  auto b = ergon::test::reopen(*a, dir.file("q.db"));
  auto rows = insert(*b, {simple_job()});
  BOOST_REQUIRE(a->begin_write().ok());
  auto r = cancel_pending(*a, cancel_pending_args{rows[0].id}, t0);
  BOOST_TEST_REQUIRE(r.has_value(), (r ? "" : r.error().to_string()));
  BOOST_REQUIRE(a->commit().ok());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(finished_counts)

namespace {

// "type:status=count" pairs, in count_jobs order.
std::string pairs(const result<std::vector<type_status_count>>& counts) {
  BOOST_REQUIRE_MESSAGE(counts.has_value(), counts.error().to_string());
  std::string out;
  for (auto& c : *counts)
    out += c.type + ":" + to_string(c.status) + "=" + std::to_string(c.count) + " ";
  return out;
}

// PostgreSQL sends the rows with COMMIT (db::send): a failure surfaces there.
status in_transaction(db& d, const count_delta& delta) {
  BOOST_REQUIRE(d.begin_write().ok());
  auto st = add_finished_counts(d, delta);
  if (st)
    st = d.commit();
  if (!st)
    d.rollback();
  BOOST_TEST(!d.in_transaction());
  return st;
}

}  // namespace

// Version 2 keys the dead letters' and the recurring instances' indexes by
// columns of their own, filled in from the statuses of the rows there are.
BOOST_AUTO_TEST_CASE(a_version_1_schema_migrates_its_dead_letters_and_unfinished_instances,
                     *postgres_only("SQLite's version 6 is checked by the test below")) {
  auto d = ergon::test::open_db(ergon::test::shared_pg_server().fresh_database());
  BOOST_REQUIRE(migrate(*d, 1).ok());
  engine_probe probe{*d, ""};
  // Rows 1-6: a pending instance of "r", a running one of "s", a
  // succeeded one of "r", then a failed, a cancelled and an expired job.
  std::string rows;
  for (int status = 0; status < 6; ++status)
    rows += std::string{rows.empty() ? "" : ", "} + "(" + std::to_string(status + 1)
            + ", '\\x00', 't', 0, 1, 0, 0, '\\x00', " + std::to_string(status)
            + ", 0, 0, 1, 0, 1000, 1000, 0, "
            + (status == 1 ? "'s'" : status < 3 ? "'r'" : "NULL") + ")";
  probe.exec("", "INSERT INTO jobs (id, external_id, type, priority, weight, run_at, "
                 "ready_since, payload, status, max_retries, backoff_initial_ms, "
                 "backoff_multiplier, backoff_randomization, timeout_ms, "
                 "heartbeat_increment_ms, added_at, recurring_id) VALUES " + rows);
  BOOST_REQUIRE(migrate(*d).ok());
  BOOST_TEST(probe.text("", "SELECT string_agg(id || ':' || coalesce(dead_letter_status::text, "
                            "'-') || ':' || coalesce(unfinished_instance_of, '-'), ' ' "
                            "ORDER BY id) FROM jobs")
             == "1:-:r 2:-:s 3:-:- 4:3:- 5:4:- 6:5:-");
  BOOST_TEST(probe.text("", "SELECT reloptions::text FROM pg_class WHERE relname = 'jobs' "
                            "AND relnamespace = CAST('ergon' AS regnamespace)")
             == "{fillfactor=80}");
  // The index refuses a second unfinished instance, as before.
  auto second = d->exec("INSERT INTO jobs (id, external_id, type, priority, weight, run_at, "
                        "ready_since, payload, status, max_retries, backoff_initial_ms, "
                        "backoff_multiplier, backoff_randomization, timeout_ms, "
                        "heartbeat_increment_ms, added_at, recurring_id, "
                        "unfinished_instance_of) VALUES (7, '\\x00', 't', 0, 1, 0, 0, "
                        "'\\x00', 0, 0, 0, 1, 0, 1000, 1000, 0, 'r', 'r')");
  BOOST_TEST(!second.ok());
}

BOOST_AUTO_TEST_CASE(a_version_1_file_migrates_with_the_counts_of_its_jobs,
                     *sqlite_only("PostgreSQL schemas start past SQLite's version 1")) {
  temp_dir dir;
  auto opened = sqlite_db::open(dir.file("q.db"), sqlite_options{});
  BOOST_REQUIRE(opened.has_value());
  auto& d = **opened;
  BOOST_REQUIRE(migrate(d).ok());
  // Jobs in several statuses; then the file goes back to version 1, which
  // had no counts (nor anything later).
  auto no_retries = simple_job("b");
  no_retries.max_retries = 0;
  auto rows = insert(d, {simple_job("a"), simple_job("a"), simple_job("a"), simple_job("a"),
                         no_retries, simple_job("b")});
  BOOST_REQUIRE(cancel_pending(d, cancel_pending_args{rows[0].id}, t0).has_value());
  auto claimed = claim_jobs(
    d, claim_jobs_args{{{rows[1].row, 1}, {rows[2].row, 2}, {rows[4].row, 3}}}, t0);
  BOOST_REQUIRE(claimed.has_value());
  BOOST_REQUIRE(claimed->claimed.size() == 3u);
  finish_attempts_args outcomes;
  outcomes.reports = {{rows[2].row, 2, report_kind::succeeded, ""},
                      {rows[4].row, 3, report_kind::failed, "boom"}};
  outcomes.randoms = {0.0, 0.0};
  BOOST_REQUIRE(finish_attempts(d, outcomes, t0).has_value());
  d.end_reads();  // cached statements would keep the tables locked
  auto downgraded = d.exec(ergon::test::downgrade_sql(1).c_str());
  BOOST_REQUIRE_MESSAGE(downgraded.ok(), downgraded.to_string());
  sqlite_probe probe{dir.file("q.db")};
  BOOST_TEST(probe.number("PRAGMA user_version") == 1);
  BOOST_TEST(probe.number("SELECT count(*) FROM sqlite_master WHERE name = 'finished_counts'") == 0);

  BOOST_REQUIRE(migrate(d).ok());
  BOOST_TEST(probe.number("PRAGMA user_version") == current_schema_version());
  auto expected = "a:pending=1 a:running=1 a:succeeded=1 a:cancelled=1 b:pending=1 b:failed=1 ";
  BOOST_TEST(pairs(count_jobs(d, count_source::table)) == expected);
  BOOST_TEST(pairs(count_jobs(d, count_source::scan)) == expected);
  // The dead letters' index was filled in from the statuses.
  auto dead = [&](job_status s) {
    job_filter f;
    f.status = s;
    auto page = list_jobs(d, f, page_request{});
    BOOST_REQUIRE(page.has_value());
    std::vector<job_id> ids;
    for (auto& j : page->jobs)
      ids.push_back(j.id);
    return ids;
  };
  BOOST_TEST((dead(job_status::cancelled) == std::vector<job_id>{rows[0].id}));
  BOOST_TEST((dead(job_status::failed) == std::vector<job_id>{rows[4].id}));
}

BOOST_AUTO_TEST_CASE(a_delta_upserts_each_changed_finished_pair_and_skips_the_rest) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  engine_probe probe{*d, dir.file("q.db")};
  auto listing = [&] {
    return probe.text("SELECT coalesce(group_concat(type || status || '=' || count, ' '), '') "
                      "FROM (SELECT * FROM finished_counts ORDER BY type, status)",
                      "SELECT coalesce(string_agg(type || status || '=' || count, ' ' "
                      "ORDER BY type, status), '') FROM finished_counts");
  };
  count_delta delta;
  delta.add("a", job_status::pending, 2);
  delta.move("a", "", job_status::pending, job_status::running);
  delta.add("b", job_status::succeeded, 0);
  BOOST_REQUIRE(in_transaction(*d, delta).ok());
  BOOST_TEST(listing() == "");  // unfinished changes and zeros write nothing
  delta.clear();
  delta.move("a", "", job_status::running, job_status::succeeded);
  delta.move("a", "", job_status::pending, job_status::cancelled);
  delta.add("b", job_status::failed, 3);
  BOOST_REQUIRE(in_transaction(*d, delta).ok());
  BOOST_TEST(listing() == "a2=1 a4=1 b3=3");
  delta.clear();
  delta.add("b", job_status::failed, 2);
  BOOST_REQUIRE(in_transaction(*d, delta).ok());
  BOOST_TEST(listing() == "a2=1 a4=1 b3=5");
}

BOOST_AUTO_TEST_CASE(counts_read_unfinished_jobs_from_the_low_mark_only) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto rows = insert(*d, {simple_job("a"), simple_job("a"), simple_job("b")});
  BOOST_TEST(pairs(count_jobs(*d)) == "a:pending=2 b:pending=1 ");
  // Below the mark every job is finished by contract, so a pending row there
  // is not seen: the history below the mark is never read.
  BOOST_REQUIRE(raise_low_mark(*d, rows[1].row).ok());
  BOOST_TEST(pairs(count_jobs(*d)) == "a:pending=1 b:pending=1 ");
  BOOST_TEST(pairs(count_jobs(*d, count_source::scan)) == "a:pending=2 b:pending=1 ");
}

BOOST_AUTO_TEST_CASE(the_low_mark_advances_to_the_first_unfinished_row_within_its_budget) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto rows = insert(*d, {simple_job(), simple_job(), simple_job(), simple_job(), simple_job()});
  auto finish = [&](size_t i) {
    BOOST_REQUIRE(cancel_pending(*d, cancel_pending_args{rows[i].id}, t0).has_value());
  };
  auto advance = [&](int64_t budget) {
    auto mark = advance_low_mark(*d, budget);
    BOOST_REQUIRE_MESSAGE(mark.has_value(), mark.error().to_string());
    auto stored = read_meta(*d);
    BOOST_REQUIRE(stored.has_value());
    BOOST_TEST(stored->unfinished_low_mark == *mark);
    return *mark;
  };
  BOOST_TEST(advance(10) == rows[0].row);  // nothing finished yet
  finish(0);
  finish(1);
  finish(3);
  BOOST_TEST(advance(1) == rows[1].row);   // one row read: past row 0 only
  BOOST_TEST(advance(10) == rows[2].row);  // stops at the pending row 2
  finish(2);
  BOOST_TEST(advance(10) == rows[4].row);  // past 2 and 3, stops at 4
  finish(4);
  BOOST_TEST(advance(10) == rows[4].row + 1);  // all finished: one past the last
  BOOST_TEST(advance(10) == rows[4].row + 1);  // nothing to read: unchanged
  // A new job comes after the mark, and the mark never goes down.
  auto later = insert(*d, {simple_job()});
  BOOST_TEST(later[0].row >= rows[4].row + 1);
  BOOST_REQUIRE(raise_low_mark(*d, 1).ok());
  BOOST_TEST(advance(10) == later[0].row);
  auto unfinished = load_unfinished(*d, later[0].row);
  BOOST_REQUIRE(unfinished.has_value());
  BOOST_TEST(unfinished->pending.size() == 1u);
}

// Makes a finished count of type "poison" fail to insert; the delta of a
// good count and such a one.
count_delta poisoned_delta(db& d, const std::string& path) {
  engine_probe(d, path).exec(
    "CREATE TRIGGER reject_poison BEFORE INSERT ON finished_counts WHEN NEW.type = 'poison' "
    "BEGIN SELECT RAISE(ABORT, 'poisoned'); END;",
    "CREATE FUNCTION reject_poison() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN IF NEW.type = 'poison' THEN RAISE EXCEPTION 'poisoned'; END IF; RETURN NEW; END $$;"
    "CREATE TRIGGER reject_poison BEFORE INSERT ON finished_counts FOR EACH ROW "
    "EXECUTE FUNCTION reject_poison()");
  count_delta delta;
  delta.add("a", job_status::succeeded);
  delta.add("poison", job_status::succeeded);
  return delta;
}

BOOST_AUTO_TEST_CASE(a_failed_delta_returns_the_error_and_rolls_back_with_its_transaction) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto delta = poisoned_delta(*d, dir.file("q.db"));
  auto st = in_transaction(*d, delta);
  BOOST_TEST(!st.ok());
  BOOST_TEST(st.message().find("poisoned") != std::string::npos, st.message());
  BOOST_TEST(pairs(count_jobs(*d)).empty());
}

// A batch large enough for PostgreSQL's COPY, with one job the database
// refuses: the batch writes nothing, the request's savepoint takes it back,
// and the transaction goes on (the writer's pattern), COPY included.
BOOST_AUTO_TEST_CASE(a_refused_batch_writes_nothing_and_its_transaction_goes_on) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  engine_probe(*d, dir.file("q.db")).exec(
    "CREATE TRIGGER reject_poison BEFORE INSERT ON jobs WHEN NEW.type = 'poison' "
    "BEGIN SELECT RAISE(ABORT, 'poisoned'); END;",
    "CREATE FUNCTION reject_poison() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN IF NEW.type = 'poison' THEN RAISE EXCEPTION 'poisoned'; END IF; RETURN NEW; END $$;"
    "CREATE TRIGGER reject_poison BEFORE INSERT ON jobs FOR EACH ROW "
    "EXECUTE FUNCTION reject_poison()");
  std::vector<job> good(20, simple_job("a"));
  auto bad = good;
  bad[13].type = "poison";
  BOOST_REQUIRE(d->begin_write().ok());
  BOOST_REQUIRE(insert_jobs(*d, insert_jobs_args{{simple_job("a")}, 0, 7}, t0).has_value());
  {
    savepoint sp{*d};
    BOOST_REQUIRE(sp.begin_status().ok());
    auto refused = insert_jobs(*d, insert_jobs_args{bad, 0, 7}, t0);
    BOOST_REQUIRE(!refused.has_value());
    BOOST_TEST(refused.error().message().find("poisoned") != std::string::npos,
               refused.error().message());
  }  // rolls back to the savepoint
  BOOST_REQUIRE(d->in_transaction());
  auto added = insert_jobs(*d, insert_jobs_args{good, 0, 7}, t0);
  BOOST_REQUIRE_MESSAGE(added.has_value(), added.error().to_string());
  BOOST_REQUIRE(d->commit().ok());
  BOOST_TEST(pairs(count_jobs(*d)) == "a:pending=21 ");
}

// PostgreSQL sends the counts with whatever is read next (db::send): a
// failure among them ends the whole transaction, and a COMMIT after it fails
// too, even when the failure went to a caller that dropped it.
BOOST_AUTO_TEST_CASE(a_commit_after_a_sent_write_failed_fails_and_writes_nothing,
                     *ergon::test::postgres_only("SQLite runs send() at once")) {
  auto d = open_migrated("");
  auto delta = poisoned_delta(*d, "");
  BOOST_REQUIRE(d->begin_write().ok());
  BOOST_REQUIRE(add_finished_counts(*d, delta).ok());  // sent, not read
  auto read = count_jobs(*d);
  BOOST_REQUIRE(!read.has_value());
  BOOST_TEST(read.error().message().find("poisoned") != std::string::npos, read.error().message());
  BOOST_TEST(!d->in_transaction());
  auto st = d->commit();
  BOOST_TEST(!st.ok());
  BOOST_TEST(st.message().find("nothing to commit") != std::string::npos, st.message());
  BOOST_TEST(pairs(count_jobs(*d)).empty());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(workers_table)

namespace {

worker_row registered(int64_t id, std::string name, std::string host, int64_t pid,
                      std::string node = "", std::optional<int64_t> left = std::nullopt) {
  return {{id, std::move(name), std::move(host), pid, std::move(node)}, t0, left};
}

}  // namespace

// Each attempt keeps the worker its claim named, local or remote, with the
// identity the worker registered under.
BOOST_AUTO_TEST_CASE(an_attempt_names_the_worker_its_claim_recorded) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  BOOST_REQUIRE(save_worker(*d, registered(5, "billing", "host-a", 4242)).ok());
  BOOST_REQUIRE(save_worker(*d, registered(6, "far", "host-b", 77, "node-b/3")).ok());
  auto rows = insert(*d, {simple_job(), simple_job()});
  claim_jobs_args local{{{rows[0].row, 11}}};
  local.worker = 5;
  claim_jobs_args remote{{{rows[1].row, 12}}, "node-b/3", 6};
  BOOST_REQUIRE(claim_jobs(*d, local, t0).has_value());
  BOOST_REQUIRE(claim_jobs(*d, remote, t0).has_value());
  BOOST_TEST(engine_probe(*d, dir.file("q.db"))
               .number("SELECT worker FROM jobs WHERE id = " + std::to_string(rows[1].row))
             == 6);
  finish(*d, rows[0].row, 11, report_kind::succeeded);
  finish(*d, rows[1].row, 12, report_kind::failed);
  auto first = read_job(*d, rows[0].id);
  BOOST_REQUIRE(first.has_value());
  BOOST_REQUIRE(first->attempts.size() == 1u);
  auto& w = first->attempts[0].worker;
  BOOST_TEST(w.id == 5);
  BOOST_TEST(w.name == "billing");
  BOOST_TEST(w.host == "host-a");
  BOOST_TEST(w.pid == 4242);
  BOOST_TEST(w.node == "");
  // The failed one goes back to pending; its next claim is another worker's.
  auto second = read_job(*d, rows[1].id);
  BOOST_REQUIRE(second->attempts.size() == 1u);
  BOOST_TEST(second->attempts[0].worker.node == "node-b/3");
  BOOST_TEST(second->attempts[0].worker.pid == 77);
  claim_jobs_args again{{{rows[1].row, 13}}};
  again.worker = 5;
  auto later = t0 + 3'600'000;  // past its backoff
  BOOST_REQUIRE(claim_jobs(*d, again, later).value().claimed.size() == 1u);
  finish(*d, rows[1].row, 13, report_kind::succeeded);
  auto both = read_job(*d, rows[1].id);
  BOOST_REQUIRE(both->attempts.size() == 2u);
  BOOST_TEST(both->attempts[0].worker.id == 6);
  BOOST_TEST(both->attempts[1].worker.id == 5);
}

// Retention removed the record: the attempt keeps the id alone. A claim
// that named nobody (0) gives an attempt of worker 0.
BOOST_AUTO_TEST_CASE(an_attempt_whose_worker_record_is_gone_keeps_the_id) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto rows = insert(*d, {simple_job(), simple_job()});
  claim_jobs_args gone{{{rows[0].row, 11}}};
  gone.worker = 9;
  BOOST_REQUIRE(claim_jobs(*d, gone, t0).has_value());
  BOOST_REQUIRE(claim_jobs(*d, claim_jobs_args{{{rows[1].row, 12}}}, t0).has_value());
  finish(*d, rows[0].row, 11, report_kind::succeeded);
  finish(*d, rows[1].row, 12, report_kind::succeeded);
  auto a = read_job(*d, rows[0].id)->attempts.at(0).worker;
  BOOST_TEST(a.id == 9);
  BOOST_TEST(a.host == "");
  BOOST_TEST(a.pid == 0);
  BOOST_TEST(read_job(*d, rows[1].id)->attempts.at(0).worker.id == 0);
}

// Ids count on from the highest recorded; an open ends the registrations
// the last owner left open; retention deletes the oldest departures first,
// never the highest id, so no id is given twice.
BOOST_AUTO_TEST_CASE(worker_ids_count_on_and_departed_workers_go_oldest_first) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  BOOST_TEST(next_worker_id(*d).value() == 1);
  BOOST_REQUIRE(save_worker(*d, registered(1, "a", "h", 1)).ok());
  BOOST_REQUIRE(save_worker(*d, registered(2, "b", "h", 2, "", t0 + 10)).ok());
  BOOST_REQUIRE(save_worker(*d, registered(3, "c", "h", 3)).ok());
  BOOST_TEST(next_worker_id(*d).value() == 4);
  // A second save of an id records its departure, and nothing else.
  BOOST_REQUIRE(save_worker(*d, registered(1, "renamed", "other", 99, "", t0 + 30)).ok());
  BOOST_REQUIRE(end_registrations(*d, t0 + 20).ok());
  engine_probe probe{*d, dir.file("q.db")};
  auto left = [&](int64_t id) {
    return probe.number("SELECT left_at FROM workers WHERE id = " + std::to_string(id));
  };
  BOOST_TEST(left(1) == t0 + 30);
  BOOST_TEST(left(2) == t0 + 10);
  BOOST_TEST(left(3) == t0 + 20);
  BOOST_TEST(read_workers(*d, {1}).value().at(0).name == "a");
  BOOST_TEST(delete_departed_workers(*d, t0 + 15, 10).value() == 1);  // 2
  BOOST_TEST(delete_departed_workers(*d, t0 + 100, 10).value() == 1);  // 1, not 3
  BOOST_TEST(delete_departed_workers(*d, t0 + 100, 10).value() == 0);
  auto rest = read_workers(*d, {3, 2, 1, 3});
  BOOST_REQUIRE(rest.has_value());
  BOOST_REQUIRE(rest->size() == 1u);
  BOOST_TEST(rest->at(0).id == 3);
  BOOST_TEST(next_worker_id(*d).value() == 4);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(job_logs_table)

// Lines go on the job's current try while the token is its attempt's: a
// line sent again keeps what was stored, a late line of an earlier attempt
// goes, and the dropped count only grows. Deleting the job deletes them.
BOOST_AUTO_TEST_CASE(lines_are_fenced_by_token_and_go_with_their_job) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto rows = insert(*d, {simple_job()});
  auto row = rows[0].row;
  BOOST_REQUIRE(claim_jobs(*d, claim_jobs_args{{{row, 11}}}, t0).has_value());
  auto lines = [](std::vector<std::pair<int32_t, std::string>> xs) {
    std::vector<log_line> out;
    for (auto& [seq, text] : xs)
      out.push_back({seq, t0 + seq, log_level::warn, text});
    return out;
  };
  BOOST_REQUIRE(record_logs(*d, {{row, 11, lines({{0, "a"}, {1, "b"}}), 0}}).ok());
  BOOST_REQUIRE(record_logs(*d, {{row, 11, lines({{1, "changed"}, {2, "c"}}), 3}}).ok());
  BOOST_REQUIRE(record_logs(*d, {{row, 11, {}, 2}}).ok());  // lower: no change
  BOOST_REQUIRE(record_logs(*d, {{row, 99, lines({{3, "stale"}}), 50}}).ok());
  finish(*d, row, 11, report_kind::failed);
  claim_jobs_args second{{{row, 12}}};
  BOOST_REQUIRE(claim_jobs(*d, second, t0 + 3'600'000).value().claimed.size() == 1u);
  BOOST_REQUIRE(record_logs(*d, {{row, 11, lines({{3, "late"}}), 0}}).ok());  // try 1 is over
  BOOST_REQUIRE(record_logs(*d, {{row, 12, lines({{0, "second try"}}), 0}}).ok());
  auto j = read_job(*d, rows[0].id);
  BOOST_REQUIRE(j.has_value());
  BOOST_REQUIRE(j->attempts.size() == 2u);
  auto& first = j->attempts[0];
  BOOST_REQUIRE(first.logs.size() == 3u);
  BOOST_TEST(first.logs[1].text == "b");
  BOOST_TEST(first.logs[2].text == "c");
  BOOST_TEST(first.logs[2].at_ms == t0 + 2);
  BOOST_TEST(first.logs[2].level == log_level::warn);
  BOOST_TEST(first.logs_dropped == 3);
  BOOST_REQUIRE(j->attempts[1].logs.size() == 1u);
  BOOST_TEST(j->attempts[1].logs[0].text == "second try");
  BOOST_TEST(j->attempts[1].logs_dropped == 0);
  engine_probe probe{*d, dir.file("q.db")};
  BOOST_TEST(probe.number("SELECT count(*) FROM job_logs") == 4);
  BOOST_REQUIRE(d->begin_write().ok());
  BOOST_REQUIRE(d->exec(("DELETE FROM jobs WHERE id = " + std::to_string(row)).c_str()).ok());
  BOOST_REQUIRE(d->commit().ok());
  BOOST_TEST(probe.number("SELECT count(*) FROM job_logs") == 0);
  BOOST_TEST(probe.number("SELECT count(*) FROM job_log_drops") == 0);
}

// A yielded attempt resumes on the same try, numbering its lines from 0
// again: both runs' lines are kept, one run after the other.
BOOST_AUTO_TEST_CASE(a_resumed_attempt_s_lines_follow_those_before_its_yield) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto rows = insert(*d, {simple_job()});
  auto row = rows[0].row;
  BOOST_REQUIRE(claim_jobs(*d, claim_jobs_args{{{row, 11}}}, t0).has_value());
  BOOST_REQUIRE(record_logs(*d, {{row, 11, {{0, t0, log_level::info, "a"},
                                            {1, t0 + 1, log_level::info, "b"}}, 1}})
                  .ok());
  finish(*d, row, 11, report_kind::yielded);
  auto resumed = claim_jobs(*d, claim_jobs_args{{{row, 12}}}, t0 + 10);
  BOOST_REQUIRE(resumed.value().claimed.size() == 1u);
  BOOST_TEST(resumed->claimed[0].try_number == 1);
  BOOST_REQUIRE(record_logs(*d, {{row, 12, {{0, t0 + 10, log_level::info, "c"}}, 2}}).ok());
  auto j = read_job(*d, rows[0].id);
  BOOST_REQUIRE(j.has_value());
  std::string texts;
  int64_t dropped = 0;
  for (auto& a : j->attempts) {
    for (auto& l : a.logs)
      texts += l.text;
    dropped += a.logs_dropped;
  }
  BOOST_TEST(texts == "abc");
  BOOST_TEST(dropped == 3);
}

// A line as a worker hands it over is checked before it is stored; text
// job code writes is cut on a UTF-8 boundary.
BOOST_AUTO_TEST_CASE(log_lines_are_checked_and_cut) {
  BOOST_TEST(check_log_line({0, t0, log_level::error, "x"}).ok());
  BOOST_TEST(check_log_line({-1, t0, log_level::info, "x"}).field() == "seq");
  BOOST_TEST(check_log_line({1'000, t0, log_level::info, "x"}).field() == "seq");
  BOOST_TEST(check_log_line({0, t0, static_cast<log_level>(4), "x"}).field() == "level");
  BOOST_TEST(check_log_line({0, t0, log_level::info, std::string(4'097, 'x')}).field() == "text");
  BOOST_TEST(log_text(std::string(5'000, 'x')).size() == 4'096u);
  BOOST_TEST(log_text(std::string(4'094, 'x') + "\xe2\x82\xac").size() == 4'094u);  // €
  BOOST_TEST(log_text(std::string("a\0b", 3)) == "a\\x00b");
  BOOST_TEST(log_text("") == "");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(cancel_requests)

// A running job asked to stop ends `cancelled` however its attempt ends:
// released by a stopping worker, expired, lost with its worker, or found
// running at open.
BOOST_AUTO_TEST_CASE(every_end_of_a_requested_attempt_cancels_the_job) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto keys = insert(*d, {simple_job(), simple_job(), simple_job(), simple_job()});
  BOOST_REQUIRE(d->begin_write().ok());
  std::vector<attempt_ref> claims;
  for (auto& k : keys)
    claims.push_back({k.row, k.row * 10});
  auto claimed = claim_jobs(*d, {claims}, t0);
  BOOST_REQUIRE(claimed.has_value());
  BOOST_REQUIRE(claimed->claimed.size() == 4u);
  for (auto& k : keys) {
    auto c = cancel_job(*d, {k.id}, t0 + 1);
    BOOST_REQUIRE_MESSAGE(c.has_value(), c.error().to_string());
    BOOST_TEST((c->running && c->running->token == k.row * 10));
  }
  // A heartbeat is refused and changes nothing.
  auto beat = heartbeat(*d, {keys[0].row, keys[0].row * 10, std::string{"cp"}, 0}, t0 + 2);
  BOOST_TEST(beat.error().code() == error::cancelled);
  auto released = release_claims(*d, {{claims[0]}}, t0 + 3);
  BOOST_REQUIRE_MESSAGE(released.has_value(), released.error().to_string());
  BOOST_TEST(released->released.empty());
  BOOST_REQUIRE(released->cancelled.size() == 1u);
  BOOST_TEST(released->cancelled[0].status == job_status::cancelled);
  auto expired = expire_attempt(*d, {keys[1].row, keys[1].row * 10, 0.0}, t0 + 400'000);
  BOOST_REQUIRE(expired.has_value());
  BOOST_TEST(expired->ended.status == job_status::cancelled);
  auto lost = lose_attempts(*d, {{claims[2]}}, t0 + 4);
  BOOST_REQUIRE(lost.has_value());
  BOOST_TEST(lost->at(0).status == job_status::cancelled);
  auto recovered = recover_running(*d, {{keys[3].row}, retry_timing::immediate, {0.0}}, t0 + 5);
  BOOST_REQUIRE(recovered.has_value());
  BOOST_TEST(recovered->at(0).status == job_status::cancelled);
  BOOST_REQUIRE(d->commit().ok());
  engine_probe probe{*d, dir.file("q.db")};
  BOOST_TEST(probe.number("SELECT count(*) FROM jobs WHERE status = 4") == 4);
  BOOST_TEST(probe.number("SELECT count(*) FROM jobs WHERE checkpoint IS NOT NULL") == 0);
  BOOST_TEST(probe.number("SELECT count(*) FROM attempts") == 0);  // no retry recorded
}

BOOST_AUTO_TEST_CASE(deleted_rows_are_never_reused) {
  temp_dir dir;
  auto d = open_migrated(dir.file("q.db"));
  auto keys = insert(*d, {simple_job(), simple_job(), simple_job()});
  BOOST_REQUIRE(d->begin_write().ok());
  for (auto& k : keys)
    BOOST_REQUIRE(cancel_pending(*d, {k.id}, t0).has_value());
  delete_finished_args del;
  del.filter.status = job_status::cancelled;
  auto gone = delete_finished(*d, del);
  BOOST_REQUIRE_MESSAGE(gone.has_value(), gone.error().to_string());
  BOOST_TEST(gone->deleted.size() == 3u);
  BOOST_REQUIRE(d->commit().ok());
  auto again = insert(*d, {simple_job()});
  BOOST_TEST(again[0].row == keys.back().row + 1);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(pg_lease_ownership,
                      *ergon::test::postgres_only("SQLite's owner holds a flock (test-open)"))

namespace {

std::unique_ptr<pg_db> connect(db& d) {
  auto c = pg_db::open(static_cast<pg_db&>(d).options());
  BOOST_REQUIRE_MESSAGE(c.has_value(), c.error().to_string());
  return std::move(*c);
}

constexpr std::chrono::milliseconds minute{60'000};

}  // namespace

BOOST_AUTO_TEST_CASE(a_second_owner_is_refused_naming_the_first) {
  auto d = open_migrated("");
  auto first = pg_lease::acquire(connect(*d), minute);
  BOOST_REQUIRE_MESSAGE(first.has_value(), first.error().to_string());
  BOOST_TEST((*first)->epoch() == 1);
  auto second = pg_lease::acquire(connect(*d), minute);
  BOOST_REQUIRE(!second.has_value());
  BOOST_TEST(second.error().code() == error::busy);
  auto pid = "pid " + std::to_string(::getpid());
  BOOST_TEST(second.error().message().find(pid) != std::string::npos, second.error().message());
  // Closing gives the lease up at once.
  first->reset();
  auto third = pg_lease::acquire(connect(*d), minute);
  BOOST_REQUIRE_MESSAGE(third.has_value(), third.error().to_string());
  BOOST_TEST((*third)->epoch() == 2);
}

BOOST_AUTO_TEST_CASE(an_owner_whose_session_died_is_replaced_before_its_lease_ends) {
  auto d = open_migrated("");
  auto first = pg_lease::acquire(connect(*d), minute);
  BOOST_REQUIRE(first.has_value());
  // As if its process were SIGKILLed: the server ends the session.
  engine_probe(*d, "").exec("", "SELECT pg_terminate_backend(CAST(backend_pid AS integer), 10000) FROM lease");
  auto second = pg_lease::acquire(connect(*d), minute);
  BOOST_REQUIRE_MESSAGE(second.has_value(), second.error().to_string());
  BOOST_TEST((*second)->epoch() == 2);
}

count_delta one_success(const std::string& type) {
  count_delta c;
  c.add(type, job_status::succeeded);
  return c;
}

// What a standby polls: who holds the lease and whether acquire() could
// take it, read without a lock while a writer holds the row's share lock.
BOOST_AUTO_TEST_CASE(a_standby_reads_the_lease_without_waiting_for_the_owner) {
  auto d = open_migrated("");
  auto reader = connect(*d);
  auto none = pg_lease::read(*reader);
  BOOST_REQUIRE_MESSAGE(none.has_value(), none.error().to_string());
  BOOST_TEST(!none->has_value());
  auto first = pg_lease::acquire(connect(*d), minute);
  BOOST_REQUIRE(first.has_value());
  auto writer = connect(*d);
  writer->fence((*first)->epoch());
  BOOST_REQUIRE(writer->begin_write().ok());
  BOOST_REQUIRE(add_finished_counts(*writer, one_success("held")).ok());
  auto live = pg_lease::read(*reader);
  BOOST_REQUIRE_MESSAGE(live.has_value(), live.error().to_string());
  BOOST_REQUIRE(live->has_value());
  BOOST_TEST((*live)->epoch == 1);
  BOOST_TEST((*live)->pid == ::getpid());
  BOOST_TEST((*live)->session_alive);
  BOOST_TEST((*live)->ms_left > 50'000);
  BOOST_TEST(!(*live)->takeable());
  BOOST_REQUIRE(writer->commit().ok());
  // Its lease session ends (a SIGKILLed owner): takeable before the lease passes.
  engine_probe(*d, "").exec("", "SELECT pg_terminate_backend(CAST(backend_pid AS integer), 10000) FROM lease");
  auto dead = pg_lease::read(*reader);
  BOOST_REQUIRE(dead.has_value() && dead->has_value());
  BOOST_TEST(!(*dead)->session_alive);
  BOOST_TEST((*dead)->takeable());
  // A lease given up (or passed) is takeable too, and reads as passed.
  auto second = pg_lease::acquire(connect(*d), minute);
  BOOST_REQUIRE_MESSAGE(second.has_value(), second.error().to_string());
  second->reset();
  auto given_up = pg_lease::read(*reader);
  BOOST_REQUIRE(given_up.has_value() && given_up->has_value());
  BOOST_TEST((*given_up)->epoch == 2);
  BOOST_TEST((*given_up)->ms_left < 0);
  BOOST_TEST((*given_up)->takeable());
}

BOOST_AUTO_TEST_CASE(a_deposed_owner_commits_nothing_after_its_successor_took_over) {
  auto d = open_migrated("");
  auto first = pg_lease::acquire(connect(*d), minute);
  BOOST_REQUIRE(first.has_value());
  auto writer = connect(*d);
  writer->fence((*first)->epoch());
  BOOST_REQUIRE(writer->begin_write().ok());
  BOOST_REQUIRE(add_finished_counts(*writer, one_success("before")).ok());
  BOOST_REQUIRE(writer->commit().ok());
  // Its lease passes (a stopped or cut-off owner), and another takes over.
  engine_probe(*d, "").exec("", "UPDATE lease SET expires_at = '-infinity'");
  auto second = pg_lease::acquire(connect(*d), minute);
  BOOST_REQUIRE_MESSAGE(second.has_value(), second.error().to_string());
  // The fence goes out with the transaction's statements (pipelined), and
  // COMMIT only once it held: this commit fails and writes nothing.
  BOOST_REQUIRE(writer->begin_write().ok());
  BOOST_REQUIRE(add_finished_counts(*writer, one_success("after")).ok());
  auto st = writer->commit();
  BOOST_TEST(st.code() == error::busy);
  BOOST_TEST(st.message().find("took the queue over") != std::string::npos, st.message());
  BOOST_TEST(!writer->in_transaction());
  // Writing has halted: the next transaction fails at once.
  BOOST_TEST(writer->begin_write().code() == error::busy);
  BOOST_TEST((*first)->renew().code() == error::busy);
  BOOST_TEST((*second)->renew().ok());
  BOOST_TEST(finished_counts::pairs(count_jobs(*d)) == "before:succeeded=1 ");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(postgres_plans,
                      *ergon::test::postgres_only("SQLite's plans: test-listing"))

namespace {

// The plan PostgreSQL makes for `sql` (ergon's ?N text) with `args`, under
// `mode` (plan_cache_mode): prepared statements get custom plans first, and
// a generic one from the sixth run if it costs no more.
std::string plan_of(db& d, std::string sql, const std::string& args, const std::string& mode,
                    const std::string& explain = "EXPLAIN") {
  for (auto& c : sql)
    if (c == '?')
      c = '$';
  engine_probe probe(d, "");
  probe.exec("", "DEALLOCATE ALL; SET plan_cache_mode = " + mode + "; PREPARE checked AS " + sql);
  PGresult* r =
    PQexec(static_cast<pg_db&>(d).raw(), (explain + " EXECUTE checked(" + args + ")").c_str());
  BOOST_REQUIRE_MESSAGE(PQresultStatus(r) == PGRES_TUPLES_OK, PQresultErrorMessage(r));
  std::string plan;
  for (int i = 0; i < PQntuples(r); ++i)
    plan += std::string{PQgetvalue(r, i, 0)} + "\n";
  PQclear(r);
  return plan;
}

// A queue of 5,000 pending jobs, with the planner's statistics: plans are
// checked on a table of many rows.
std::unique_ptr<db> many_pending_jobs() {
  auto d = open_migrated("");
  std::vector<job> jobs(5'000, simple_job());
  BOOST_REQUIRE(d->begin_write().ok());
  BOOST_REQUIRE(insert_jobs(*d, insert_jobs_args{std::move(jobs), 0, 7}, t0).has_value());
  BOOST_REQUIRE(d->commit().ok());
  engine_probe(*d, "").exec("", "ANALYZE jobs");
  return d;
}

}  // namespace

// The finding: joined with the requests, or with IN over a
// subquery, PostgreSQL 15 scans the table. Each batch must look its rows up
// by primary key, under custom and generic plans, on a table of many rows.
BOOST_AUTO_TEST_CASE(claims_and_completions_find_their_rows_by_primary_key) {
  auto d = many_pending_jobs();
  std::string rows = "'{";
  for (int i = 1; i <= 256; ++i)
    rows += (i > 1 ? "," : "") + std::to_string(i * 7);
  rows += "}'";
  for (auto mode : {"force_custom_plan", "force_generic_plan"}) {
    auto plans = {plan_of(*d, claim_batch_sql(), rows + ", " + rows + ", 1, NULL, 0", mode),
                  plan_of(*d, claim_batch_sql(true), rows + ", 5, 1, NULL, 0", mode),
                  plan_of(*d, complete_batch_sql(), rows + ", 1, " + rows + ", '{}'", mode),
                  plan_of(*d, complete_batch_sql(true), rows + ", 1, 5", mode)};
    for (auto& plan : plans) {
      BOOST_TEST(plan.find("jobs_pkey") != std::string::npos, mode << ":\n" << plan);
      BOOST_TEST(plan.find("Seq Scan") == std::string::npos, mode << ":\n" << plan);
    }
  }
}

// The end of a job finds what waits on it by index in both places a
// dependency lives: an edge row, or a job's only dependency in its row.
BOOST_AUTO_TEST_CASE(an_end_finds_its_dependents_by_index) {
  auto d = many_pending_jobs();
  // A chain whose first half keeps each dependency in the row and whose
  // second half names two, as edges.
  std::vector<job> graph(1'000, simple_job());
  for (uint32_t i = 1; i < graph.size(); ++i)
    graph[i].depends_on_batch = i < 500 ? std::vector<uint32_t>{i - 1}
                                        : std::vector<uint32_t>{i - 2, i - 1};
  BOOST_REQUIRE(d->begin_write().ok());
  auto ids = insert_jobs(*d, insert_jobs_args{std::move(graph), 0, 7}, t0);
  BOOST_REQUIRE_MESSAGE(ids.has_value(), ids.error().to_string());
  BOOST_REQUIRE(d->commit().ok());
  engine_probe(*d, "").exec("", "ANALYZE jobs; ANALYZE job_dependencies");
  for (auto mode : {"force_custom_plan", "force_generic_plan"})
    for (auto row : {"5251", "5701"}) {  // jobs 250 and 700 of the chain
      auto plan = plan_of(*d, waiting_dependents_sql(), row, mode);
      BOOST_TEST(plan.find("Seq Scan") == std::string::npos, mode << ":\n" << plan);
      BOOST_TEST(plan.find("jobs_by_only_dependency") != std::string::npos, mode << ":\n" << plan);
      BOOST_TEST(plan.find("job_dependencies_pkey") != std::string::npos, mode << ":\n" << plan);
    }
}

// Moving the low mark reads from the mark to the first unfinished row, not
// its whole window: here the first row is pending, so the scan reads one
// row, and the window's last row is never looked for.
BOOST_AUTO_TEST_CASE(the_low_mark_stops_reading_at_the_first_unfinished_row) {
  auto d = many_pending_jobs();
  for (auto mode : {"force_custom_plan", "force_generic_plan"}) {
    auto plan = plan_of(*d, advance_low_mark_sql(), "5000", mode,
                        "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)");
    BOOST_TEST(plan.find("Sort") == std::string::npos, mode << ":\n" << plan);
    BOOST_TEST(plan.find("Index Scan using jobs_pkey on jobs (actual rows=1 loops=1)")
                 != std::string::npos, mode << ":\n" << plan);
    BOOST_TEST(plan.find("never executed") != std::string::npos, mode << ":\n" << plan);
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(postgres_sessions,
                      *ergon::test::postgres_only("PostgreSQL's transactions and roles"))

// PostgreSQL rolls a failed transaction back at COMMIT and answers without
// an error: commit() must not report success then.
BOOST_AUTO_TEST_CASE(committing_a_failed_transaction_is_an_error) {
  auto d = open_migrated("");
  BOOST_REQUIRE(d->begin_write().ok());
  BOOST_REQUIRE(!d->exec("SELECT no_such_column FROM jobs").ok());
  auto st = d->commit();
  BOOST_TEST(!st.ok());
  BOOST_TEST(!d->in_transaction());
}

// Statement texts for the cases below: the statement cache is keyed by the
// text's address.
constexpr const char* sent_ahead_sql =
  "SELECT x * 2 FROM generate_series(1, CAST(?1 AS bigint)) AS x";
constexpr const char* failing_ahead_sql = "SELECT 1 / (CAST(?1 AS bigint) - ?1)";
constexpr const char* count_jobs_sql = "SELECT count(*) FROM jobs";

// A statement sent for its rows comes back with the next statement that
// is read, in the same round trip, and step() then reads its rows.
BOOST_AUTO_TEST_CASE(rows_sent_ahead_come_back_with_the_next_statement_read) {
  auto d = open_migrated("");
  auto& pg = static_cast<pg_db&>(*d);
  // Prepared first: preparing waits for its answer, which reads the pipeline.
  auto next = d->prepare(count_jobs_sql);
  BOOST_REQUIRE(next.has_value());
  BOOST_REQUIRE(d->begin_write().ok());
  auto ahead = d->prepare(sent_ahead_sql);
  BOOST_REQUIRE(ahead.has_value());
  (*ahead)->bind(1, int64_t{3});
  BOOST_REQUIRE(pg.send_for_rows(static_cast<pg_stmt&>(**ahead)).ok());
  BOOST_TEST(PQpipelineStatus(pg.raw()) == PQ_PIPELINE_ON);
  BOOST_REQUIRE((*next)->step());
  BOOST_TEST((*next)->column_int(0) == 0);
  // Read already: nothing is pending any more, and the rows are there.
  BOOST_TEST(PQpipelineStatus(pg.raw()) == PQ_PIPELINE_OFF);
  std::vector<int64_t> rows;
  while ((*ahead)->step())
    rows.push_back((*ahead)->column_int(0));
  BOOST_REQUIRE((*ahead)->step_status().ok());
  BOOST_TEST(rows == (std::vector<int64_t>{2, 4, 6}), "rows");
  // Alone, its own first step() reads it.
  (*ahead)->reset();
  (*ahead)->bind(1, int64_t{1});
  BOOST_REQUIRE(pg.send_for_rows(static_cast<pg_stmt&>(**ahead)).ok());
  BOOST_REQUIRE((*ahead)->step());
  BOOST_TEST((*ahead)->column_int(0) == 2);
  BOOST_TEST(!(*ahead)->step());
  // Reset before it came back: it is forgotten, and the transaction goes on.
  (*ahead)->reset();
  BOOST_REQUIRE(pg.send_for_rows(static_cast<pg_stmt&>(**ahead)).ok());
  (*ahead)->reset();
  BOOST_TEST(d->commit().ok());
}

// Its failure rolls the whole transaction back: the statement read after it
// fails with it, and so does its own step().
BOOST_AUTO_TEST_CASE(a_statement_sent_for_its_rows_that_fails_ends_the_transaction) {
  auto d = open_migrated("");
  auto& pg = static_cast<pg_db&>(*d);
  BOOST_REQUIRE(d->begin_write().ok());
  BOOST_REQUIRE(insert_jobs(*d, insert_jobs_args{{simple_job()}, 0, 7}, t0).has_value());
  auto next = d->prepare(count_jobs_sql);
  BOOST_REQUIRE(next.has_value());
  auto ahead = d->prepare(failing_ahead_sql);
  BOOST_REQUIRE(ahead.has_value());
  (*ahead)->bind(1, int64_t{5});
  BOOST_REQUIRE(pg.send_for_rows(static_cast<pg_stmt&>(**ahead)).ok());
  BOOST_TEST(!(*next)->step());
  BOOST_TEST((*next)->step_status().message().find("division by zero") != std::string::npos,
             (*next)->step_status().message());
  BOOST_TEST(!d->in_transaction());
  BOOST_TEST(!(*ahead)->step());
  BOOST_TEST((*ahead)->step_status().message().find("division by zero") != std::string::npos,
             (*ahead)->step_status().message());
  BOOST_TEST(engine_probe(*d, "").number("", "SELECT count(*) FROM jobs") == 0);
  // Its rows came, but a statement sent after it failed: they were rolled
  // back with the transaction, and step() says so.
  auto good = d->prepare(sent_ahead_sql);
  BOOST_REQUIRE(good.has_value());
  BOOST_REQUIRE(d->begin_write().ok());
  (*good)->bind(1, int64_t{2});
  BOOST_REQUIRE(pg.send_for_rows(static_cast<pg_stmt&>(**good)).ok());
  (*ahead)->reset();
  (*ahead)->bind(1, int64_t{5});
  BOOST_REQUIRE(d->send(**ahead).ok());
  (*next)->reset();
  BOOST_TEST(!(*next)->step());
  BOOST_TEST(!d->in_transaction());
  BOOST_TEST(!(*good)->step());
  BOOST_TEST((*good)->step_status().message().find("division by zero") != std::string::npos,
             (*good)->step_status().message());
}

// A role that owns its schema and may not create schemas opens the queue;
// one that may not create the schema it names gets read_only, naming why.
BOOST_AUTO_TEST_CASE(a_role_that_owns_its_schema_needs_no_create_on_the_database) {
  auto d = open_migrated("");
  engine_probe(*d, "").exec("", "CREATE ROLE queue_role LOGIN; "
                                "CREATE SCHEMA owned AUTHORIZATION queue_role");
  auto as_role = static_cast<pg_db&>(*d).options();
  as_role.conninfo += as_role.conninfo.find('?') == std::string::npos ? "?" : "&";
  as_role.conninfo += "user=queue_role";
  as_role.schema = "owned";
  auto owned = pg_db::open(as_role);
  BOOST_REQUIRE_MESSAGE(owned.has_value(), owned.error().to_string());
  auto st = migrate(**owned);
  BOOST_TEST(st.ok(), st.to_string());
  as_role.schema = "elsewhere";
  auto other = pg_db::open(as_role);
  BOOST_REQUIRE(other.has_value());
  st = migrate(**other);
  BOOST_TEST(st.code() == error::read_only);
  BOOST_TEST(st.message().find("permission denied") != std::string::npos, st.message());
}

BOOST_AUTO_TEST_SUITE_END()
