// Tags and bulk actions (issue 32, item 3): jobs carry key/value tags,
// kept with the job and gone with it; listings filter by every given tag
// and by a key prefix (through job_tags' index); cancel_jobs, retry_failed,
// purge_failed and delete_jobs act on a filter in steps of their own
// transactions, pausing to keep to their share of the writer, and report
// what they touched. bulk_pass, the plain class behind them, on its own.
#define BOOST_TEST_MODULE tags
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <future>
#include <set>

#include "ergon/actors/bulk_action.hpp"
#include "ergon/recurring.hpp"
#include "ergon/storage/op/list_jobs.hpp"
#include "support/queue_fixture.hpp"
#include "support/run_support.hpp"

using namespace ergon;
using namespace ergon::test;
using namespace std::chrono_literals;

namespace {

job_filter tagged(std::map<std::string, std::string> tags) {
  job_filter f;
  f.tags = std::move(tags);
  return f;
}

job_filter prefixed(std::string prefix) {
  job_filter f;
  f.tag_prefix = std::move(prefix);
  return f;
}

struct tags_fixture : queue_fixture {
  // Every job `f` matches, oldest first (or newest first), `limit` a page.
  std::vector<job_id> ids(const job_filter& f, size_t limit = 1'000, bool newest_first = false) {
    std::vector<job_id> out;
    page_request page;
    page.limit = limit;
    page.newest_first = newest_first;
    for (int guard = 0; guard < 10'000; ++guard) {
      auto p = q->list_jobs(f, page);
      BOOST_REQUIRE_MESSAGE(p.has_value(), p.error().to_string());
      for (auto& j : p->jobs)
        out.push_back(j.id);
      if (!p->next)
        return out;
      page.after = p->next;
    }
    BOOST_FAIL("the listing did not end");
    return out;
  }

  job_id tagged_job(const std::string& type, std::map<std::string, std::string> tags) {
    auto b = job_of(type).max_retries(0);
    for (auto& [k, v] : tags)
      b.tag(k, v);
    auto j = b.build();
    BOOST_REQUIRE_MESSAGE(j.has_value(), j.error().to_string());
    return submit(*j);
  }

  job_info finished(const job_id& id) {
    auto r = q->wait(id, hang_guard);
    BOOST_REQUIRE_MESSAGE(r.has_value(), r.error().to_string());
    return *r;
  }

  // "ok" succeeds, "bad" fails.
  worker start_simple() {
    worker_options w;
    w.max_concurrency = 4;
    w.runners["ok"] = [](job_context&) {};
    w.runners["bad"] = [](job_context&) { throw std::runtime_error("bad"); };
    return start(std::move(w));
  }

  void reopen_with_batch(size_t batch, double share = 1.0) {
    options o;
    o.bulk.batch = batch;
    o.bulk.writer_share = share;
    reopen(o);
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(tags)

BOOST_FIXTURE_TEST_CASE(tags_are_kept_with_the_job_through_a_retry, tags_fixture) {
  auto plain = submit(*job_of("bad").max_retries(0).build());
  auto id = tagged_job("bad", {{"tenant", "acme"}, {"batch", "7"}, {"empty", ""}});
  BOOST_TEST(info(plain).tags.empty());
  auto j = info(id);
  BOOST_TEST(j.tags.size() == 3u);
  BOOST_TEST(j.tags["tenant"] == "acme");
  BOOST_TEST(j.tags["empty"] == "");
  {
    auto w = start_simple();
    BOOST_TEST((finished(id).status == job_status::failed));
    finished(plain);
  }
  BOOST_TEST(q->retry_failed(id).ok());
  BOOST_TEST((info(id).tags == j.tags));
  // A listing carries them too, and they survive a reopen.
  reopen();
  auto listed = q->list_jobs(tagged({{"tenant", "acme"}}), {});
  BOOST_REQUIRE(listed.has_value());
  BOOST_REQUIRE(listed->jobs.size() == 1u);
  BOOST_TEST((listed->jobs[0].tags == j.tags));
}

BOOST_FIXTURE_TEST_CASE(an_idempotency_key_tells_jobs_apart_by_their_tags, tags_fixture) {
  auto first = submit(*job_of("t").idempotency_key("k").tag("tenant", "a").build());
  // The same job again: the first one's id, nothing written.
  BOOST_TEST(submit(*job_of("t").idempotency_key("k").tag("tenant", "a").build()) == first);
  auto other = q->submit(*job_of("t").idempotency_key("k").tag("tenant", "b").build());
  BOOST_REQUIRE(!other.has_value());
  BOOST_TEST(other.error().code() == error::already_exists);
  BOOST_TEST(other.error().field() == "idempotency_key");
  BOOST_TEST(q->submit(*job_of("t").idempotency_key("k").build()).error().field()
             == "idempotency_key");
  BOOST_TEST(q->counts().total() == 1);
}

BOOST_FIXTURE_TEST_CASE(bad_tags_are_named_and_nothing_is_written, tags_fixture) {
  auto twice = job_builder{"t"}.tag("a", "1").tag("a", "2").build();
  BOOST_TEST(twice.error().code() == error::invalid_argument);
  BOOST_TEST(twice.error().field() == "tags");
  BOOST_TEST(twice.error().message().find("'a' is given twice") != std::string::npos);
  auto bad = [&](std::map<std::string, std::string> tags, const std::string& says) {
    job j;
    j.type = "t";
    j.tags = std::move(tags);
    auto r = q->submit(j);
    BOOST_REQUIRE(!r.has_value());
    BOOST_TEST(r.error().code() == error::invalid_argument);
    BOOST_TEST(r.error().field() == "tags");
    BOOST_TEST(r.error().message().find(says) != std::string::npos, r.error().message());
  };
  bad({{"", "x"}}, "empty key");
  bad({{std::string(max_tag_key_bytes + 1, 'k'), "x"}}, "65 bytes");
  bad({{"k", std::string(max_tag_value_bytes + 1, 'v')}}, "the value of 'k' is 257 bytes");
  bad({{"k", "line\nbreak"}}, "the value of 'k' holds a control character");
  bad({{"k\x01", "v"}}, "a key holds a control character");
  bad({{"k", "\xff"}}, "is not UTF-8");
  std::map<std::string, std::string> many;
  for (size_t i = 0; i <= max_tags; ++i)
    many["k" + std::to_string(i)] = "v";
  bad(many, "17 tags; the limit is 16");
  BOOST_TEST(q->counts().total() == 0);
  // At the limits, a job is fine.
  many.erase("k0");
  many["k1"] = std::string(max_tag_value_bytes, 'v');
  many[std::string(max_tag_key_bytes, 'k')] = "";
  many.erase("k2");
  job ok;
  ok.type = "t";
  ok.tags = many;
  auto id = submit(ok);
  BOOST_TEST((info(id).tags == many));
  // Recurring jobs carry none; filters name theirs.
  recurring_job r;
  r.id = "tick";
  r.schedule = "every 1m";
  r.job.type = "t";
  r.job.tags["a"] = "b";
  BOOST_TEST(q->add_recurring(r).error().field() == "job.tags");
  job_filter f;
  for (size_t i = 0; i <= max_filter_tags; ++i)
    f.tags["k" + std::to_string(i)] = "v";
  BOOST_TEST(q->list_jobs(f, {}).error().field() == "tags");
  BOOST_TEST(q->list_jobs(prefixed(""), {}).error().field() == "tag_prefix");
  BOOST_TEST(q->cancel_jobs(prefixed("")).error().field() == "tag_prefix");
}

BOOST_FIXTURE_TEST_CASE(a_filter_takes_every_tag_it_names_and_a_key_prefix, tags_fixture) {
  auto a1 = tagged_job("t", {{"tenant", "a"}, {"batch", "1"}});
  auto a2 = tagged_job("t", {{"tenant", "a"}, {"batch", "2"}});
  auto b = tagged_job("t", {{"tenant", "b"}});
  auto plan = tagged_job("u", {{"billing.plan", "x"}});
  auto both = tagged_job("t", {{"billing.customer", "y"}, {"billing.region", "eu"}, {"tenant", "a"}});
  auto percent = tagged_job("t", {{"bill%", "z"}});
  submit(*job_of("t").build());  // no tags
  using v = std::vector<job_id>;
  BOOST_TEST((ids(tagged({{"tenant", "a"}})) == v{a1, a2, both}));
  BOOST_TEST((ids(tagged({{"tenant", "a"}, {"batch", "2"}})) == v{a2}));
  BOOST_TEST((ids(tagged({{"tenant", "c"}})).empty()));
  BOOST_TEST((ids(tagged({{"tenant", "b"}})) == v{b}));
  // A job with two keys in the range is listed once.
  BOOST_TEST((ids(prefixed("billing.")) == v{plan, both}));
  // No character is a wildcard: "%" and "_" are themselves.
  BOOST_TEST((ids(prefixed("bill%")) == v{percent}));
  BOOST_TEST((ids(prefixed("bill_")).empty()));
  BOOST_TEST((ids(prefixed("billing.plan")) == v{plan}));
  // Tags with the other fields, and with each other.
  auto by_type = prefixed("billing.");
  by_type.type = "u";
  BOOST_TEST((ids(by_type) == v{plan}));
  auto mixed = tagged({{"tenant", "a"}});
  mixed.tag_prefix = "billing.";
  BOOST_TEST((ids(mixed) == v{both}));
  // Pages of one, either way, neither skip nor repeat.
  BOOST_TEST((ids(tagged({{"tenant", "a"}}), 1) == v{a1, a2, both}));
  BOOST_TEST((ids(tagged({{"tenant", "a"}}), 1, true) == v{both, a2, a1}));
  BOOST_TEST((ids(prefixed("bill"), 1, true) == v{percent, both, plan}));
}

BOOST_FIXTURE_TEST_CASE(a_prefix_that_ends_in_any_character_finds_its_keys_alone, tags_fixture) {
  // "п" is D0 BF and "р" D1 80; "タ" ends in BF too; U+10FFFF ends the range.
  auto cyrillic = tagged_job("t", {{"п.ключ", "1"}});
  tagged_job("t", {{"р.ключ", "2"}});
  auto katakana = tagged_job("t", {{"タグ", "3"}});
  tagged_job("t", {{"ダ", "4"}});
  auto last = tagged_job("t", {{"a\xF4\x8F\xBF\xBF", "5"}});
  tagged_job("t", {{"b", "6"}});
  using v = std::vector<job_id>;
  BOOST_TEST((ids(prefixed("п")) == v{cyrillic}));
  BOOST_TEST((ids(prefixed("タ")) == v{katakana}));
  BOOST_TEST((ids(prefixed("a\xF4\x8F\xBF\xBF")) == v{last}));
  BOOST_TEST(q->list_jobs(prefixed("\xF4\x8F\xBF\xBF"), {}).error().field() == "tag_prefix");
}

BOOST_FIXTURE_TEST_CASE(a_closing_queue_stops_a_bulk_action_in_its_pause, tags_fixture) {
  // A share this small pauses for hours after each step: only the stop
  // that close() sends ends the action within the hang guard.
  reopen_with_batch(1, 1e-6);
  for (int i = 0; i < 3; ++i)
    tagged_job("later", {{"batch", "x"}});
  auto cancelling = std::async(std::launch::async, [&] { return q->cancel_jobs(tagged({{"batch", "x"}})); });
  BOOST_REQUIRE(log->wait_for(event_kind::cancelled, 1));
  BOOST_TEST(q->close().ok());
  BOOST_REQUIRE(cancelling.wait_for(hang_guard) == std::future_status::ready);
  auto r = cancelling.get();
  BOOST_REQUIRE(!r.has_value());
  BOOST_TEST(r.error().code() == error::closed);
  BOOST_TEST(r.error().message().find("the steps before stay done: 1 cancelled, 0 asked to stop")
               != std::string::npos,
             r.error().message());
}

BOOST_FIXTURE_TEST_CASE(tag_filters_read_the_tag_index_and_never_scan, tags_fixture,
                        *ergon::test::sqlite_only("it reads SQLite's query plans")) {
  tagged_job("t", {{"a", "b"}});
  sqlite_probe db{dir.file("q.db")};
  auto with_prefix = prefixed("a");
  with_prefix.status = job_status::failed;
  auto two = tagged({{"a", "b"}, {"c", "d"}});
  two.name = "n";
  for (auto& f : {tagged({{"a", "b"}}), prefixed("a"), with_prefix, two}) {
    for (bool desc : {false, true}) {
      sqlite3_stmt* s = nullptr;
      auto explain = "EXPLAIN QUERY PLAN " + std::string{storage::list_jobs_sql(f, desc)};
      BOOST_REQUIRE(sqlite3_prepare_v2(db.raw(), explain.c_str(), -1, &s, nullptr) == SQLITE_OK);
      std::string text;
      while (sqlite3_step(s) == SQLITE_ROW)
        text += std::string{reinterpret_cast<const char*>(sqlite3_column_text(s, 3))} + "; ";
      sqlite3_finalize(s);
      BOOST_TEST_MESSAGE(text);
      BOOST_TEST(text.find("job_tags_by_value") != std::string::npos, text);
      BOOST_TEST(text.find("SCAN") == std::string::npos, text);
      // A tag's rows come in id order; only a prefix's set is sorted.
      if (!f.tags.empty())
        BOOST_TEST(text.find("TEMP B-TREE") == std::string::npos, text);
    }
  }
}

BOOST_FIXTURE_TEST_CASE(tags_go_with_their_job, tags_fixture) {
  auto gone = tagged_job("bad", {{"tenant", "a"}, {"x", "1"}});
  auto kept = tagged_job("bad", {{"tenant", "a"}});
  {
    auto w = start_simple();
    finished(gone);
    finished(kept);
  }
  job_filter f;
  f.finished_before_ms = t0 + 1;
  f.tags["x"] = "1";
  auto purged = q->purge_failed(f);
  BOOST_REQUIRE_MESSAGE(purged.has_value(), purged.error().to_string());
  BOOST_TEST(*purged == 1);
  BOOST_TEST(q->job_info(gone).error().code() == error::not_found);
  BOOST_TEST((ids(tagged({{"tenant", "a"}})) == std::vector<job_id>{kept}));
  engine_probe probe{location};
  BOOST_TEST(probe.number("SELECT count(*) FROM job_tags") == 1);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(bulk)

BOOST_FIXTURE_TEST_CASE(a_cancel_by_tag_cancels_pending_and_stops_running_jobs_in_steps,
                        tags_fixture) {
  reopen_with_batch(2);
  gate g;
  worker_options w;
  w.max_concurrency = 1;
  w.runners["long"] = [&](job_context& ctx) {
    g.pass();
    ctx.wait_cancelled(std::chrono::milliseconds::max());
  };
  w.runners["ok"] = [](job_context&) {};
  auto wk = start(std::move(w));
  auto done = tagged_job("ok", {{"batch", "1"}});
  finished(done);
  auto running = tagged_job("long", {{"batch", "1"}});
  BOOST_REQUIRE(g.wait_for_waiting(1));
  g.open();
  std::vector<job_id> pending;
  for (int i = 0; i < 5; ++i)
    pending.push_back(tagged_job("ok", {{"batch", "1"}}));
  auto other = tagged_job("ok", {{"batch", "2"}});
  // The worker's one slot is taken: the others wait. A pause of the type
  // keeps "other" from running meanwhile.
  BOOST_TEST(q->pause_type("ok").ok());
  auto c = q->cancel_jobs(tagged({{"batch", "1"}}));
  BOOST_REQUIRE_MESSAGE(c.has_value(), c.error().to_string());
  BOOST_TEST(c->cancelled == 5);
  BOOST_TEST(c->stop_requested == 1);
  BOOST_TEST((finished(running).status == job_status::cancelled));
  for (auto& id : pending)
    BOOST_TEST((info(id).status == job_status::cancelled));
  BOOST_TEST((info(done).status == job_status::succeeded));
  BOOST_TEST((info(other).status == job_status::pending));
  // Events reach subscribers after the answer: wait for them, then count.
  BOOST_REQUIRE(log->wait_for(event_kind::cancelled, 6));
  BOOST_TEST(log->of(event_kind::cancelled).size() == 6u);
  // Again: nothing left to touch.
  auto again = q->cancel_jobs(tagged({{"batch", "1"}}));
  BOOST_REQUIRE(again.has_value());
  BOOST_TEST(again->cancelled == 0);
  BOOST_TEST(again->stop_requested == 0);
  // A final status is refused, naming the field.
  auto f = tagged({{"batch", "2"}});
  f.status = job_status::succeeded;
  BOOST_TEST(q->cancel_jobs(f).error().field() == "status");
  BOOST_TEST((info(other).status == job_status::pending));
}

BOOST_FIXTURE_TEST_CASE(a_cancel_leaves_the_jobs_submitted_after_it_began, tags_fixture) {
  reopen_with_batch(1);
  recurring_job r;
  r.id = "tick";
  r.schedule = "every 1m";
  r.job.type = "tick";
  auto first = q->add_recurring(r);
  BOOST_REQUIRE(first.has_value());
  job_filter f;
  f.type = "tick";
  // Cancelling the instance makes the next one; the cancel does not chase it.
  auto c = q->cancel_jobs(f);
  BOOST_REQUIRE_MESSAGE(c.has_value(), c.error().to_string());
  BOOST_TEST(c->cancelled == 1);
  BOOST_TEST((info(*first).status == job_status::cancelled));
  f.status = job_status::pending;
  auto next = ids(f);
  BOOST_REQUIRE(next.size() == 1u);
  BOOST_TEST(next[0] != *first);
}

BOOST_FIXTURE_TEST_CASE(a_retry_by_tag_takes_failed_jobs_in_steps, tags_fixture) {
  reopen_with_batch(2, 0.5);  // pauses between steps
  std::vector<job_id> failed;
  for (int i = 0; i < 5; ++i)
    failed.push_back(tagged_job("bad", {{"run", "9"}}));
  auto elsewhere = tagged_job("bad", {{"run", "8"}});
  auto keyed = submit(*job_of("bad").max_retries(0).tag("run", "9").unique_key("k").build());
  {
    auto w = start_simple();
    for (auto& id : failed)
      finished(id);
    finished(elsewhere);
    finished(keyed);
  }
  auto holder = submit(*job_of("ok").unique_key("k").build());  // holds the key now
  auto r = q->retry_failed(tagged({{"run", "9"}}));
  BOOST_REQUIRE_MESSAGE(r.has_value(), r.error().to_string());
  BOOST_TEST(r->retried == 5);
  BOOST_TEST((r->skipped == std::vector<job_id>{keyed}));
  for (auto& id : failed)
    BOOST_TEST((info(id).status == job_status::pending));
  BOOST_TEST((info(elsewhere).status == job_status::failed));
  BOOST_TEST((info(holder).status == job_status::pending));
}

BOOST_FIXTURE_TEST_CASE(a_delete_takes_finished_jobs_of_every_status_and_leaves_the_rest,
                        tags_fixture) {
  reopen_with_batch(1);
  std::vector<job_id> ended;
  {
    auto w = start_simple();
    for (auto type : {"ok", "bad", "ok"}) {
      auto id = tagged_job(type, {{"tenant", "z"}});
      finished(id);
      ended.push_back(id);
    }
  }
  auto cancelled = tagged_job("later", {{"tenant", "z"}});
  BOOST_TEST(q->cancel(cancelled).ok());
  auto waiting = tagged_job("later", {{"tenant", "z"}});
  auto untagged = submit(*job_of("later").build());
  job_filter f = tagged({{"tenant", "z"}});
  f.status = job_status::pending;
  BOOST_TEST(q->delete_jobs(f).error().field() == "status");
  BOOST_TEST((info(waiting).status == job_status::pending));
  // One status alone: the failed one.
  auto only_failed = tagged({{"tenant", "z"}});
  only_failed.status = job_status::failed;
  auto failed = q->delete_jobs(only_failed);
  BOOST_REQUIRE_MESSAGE(failed.has_value(), failed.error().to_string());
  BOOST_TEST(*failed == 1);
  BOOST_TEST(q->job_info(ended[1]).error().code() == error::not_found);
  BOOST_TEST((info(ended[0]).status == job_status::succeeded));
  // Then every final status.
  auto n = q->delete_jobs(tagged({{"tenant", "z"}}));
  BOOST_REQUIRE_MESSAGE(n.has_value(), n.error().to_string());
  BOOST_TEST(*n == 3);
  for (auto& id : ended)
    BOOST_TEST(q->job_info(id).error().code() == error::not_found);
  BOOST_TEST(q->job_info(cancelled).error().code() == error::not_found);
  BOOST_TEST((info(waiting).status == job_status::pending));
  BOOST_TEST((info(untagged).status == job_status::pending));
  BOOST_TEST(q->counts().total() == 2);
  // Nothing is left to delete.
  auto again = q->delete_jobs(tagged({{"tenant", "z"}}));
  BOOST_REQUIRE(again.has_value());
  BOOST_TEST(*again == 0);
}

BOOST_FIXTURE_TEST_CASE(bulk_actions_refuse_a_moved_from_or_closed_queue, tags_fixture) {
  queue moved = std::move(*q);
  BOOST_TEST(q->cancel_jobs({}).error().code() == error::closed);
  BOOST_TEST(q->cancel_jobs({}).error().message().find("moved from") != std::string::npos);
  BOOST_TEST(q->delete_jobs({}).error().code() == error::closed);
  BOOST_TEST(moved.close().ok());
  BOOST_TEST(moved.cancel_jobs(tagged({{"a", "b"}})).error().code() == error::closed);
  BOOST_TEST(moved.delete_jobs({}).error().code() == error::closed);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(bulk_pass)

using actors::bulk_kind;
using actors::bulk_reply;

BOOST_AUTO_TEST_CASE(a_delete_without_a_status_goes_status_by_status) {
  actors::bulk_pass pass{bulk_kind::remove, tagged({{"a", "b"}}), 10};
  std::vector<job_status> seen;
  for (int guard = 0; guard < 20; ++guard) {
    auto step = pass.next();
    if (!step)
      break;
    BOOST_TEST(step->limit == 10u);
    BOOST_TEST((step->filter.tags == std::map<std::string, std::string>{{"a", "b"}}));
    seen.push_back(*step->filter.status);
    bulk_reply r;
    r.deleted = 3;
    // The first status takes two steps: the first stopped at the limit.
    if (seen.size() == 1) {
      r.resume_after = 41;
    } else if (seen.size() == 2) {
      BOOST_TEST(step->after_row == 41);
    } else {
      BOOST_TEST(step->after_row == 0);
    }
    pass.done(r);
  }
  BOOST_TEST((seen == std::vector<job_status>{job_status::succeeded, job_status::succeeded,
                                               job_status::failed, job_status::cancelled,
                                               job_status::expired}));
  BOOST_TEST(pass.deleted() == 15);
  BOOST_TEST(pass.steps() == 5);
  BOOST_TEST(pass.outcome().ok());
}

BOOST_AUTO_TEST_CASE(a_cancel_keeps_the_end_its_first_step_found) {
  actors::bulk_pass pass{bulk_kind::cancel, {}, 2};
  auto first = pass.next();
  BOOST_REQUIRE(first.has_value());
  BOOST_TEST(first->before_row == 0);
  bulk_reply r;
  r.cancelled = 2;
  r.resume_after = 5;
  r.before_row = 100;
  pass.done(r);
  auto second = pass.next();
  BOOST_REQUIRE(second.has_value());
  BOOST_TEST(second->after_row == 5);
  BOOST_TEST(second->before_row == 100);
  bulk_reply last;
  last.stop_requested = 1;
  last.before_row = 100;
  pass.done(last);
  BOOST_TEST(!pass.next().has_value());
  BOOST_TEST(pass.cancelled().cancelled == 2);
  BOOST_TEST(pass.cancelled().stop_requested == 1);
}

BOOST_AUTO_TEST_CASE(a_failed_step_ends_the_pass_with_its_error_and_keeps_the_counts) {
  actors::bulk_pass pass{bulk_kind::retry, {}, 2};
  BOOST_TEST((pass.next()->filter.status == std::optional<job_status>{job_status::failed}));
  bulk_reply r;
  r.retried = 2;
  r.skipped.push_back(job_id{});
  r.resume_after = 9;
  pass.done(r);
  bulk_reply bad;
  bad.outcome = status{error::io_error, "disk"};
  pass.done(bad);
  BOOST_TEST(!pass.next().has_value());
  BOOST_TEST(pass.outcome().code() == error::io_error);
  BOOST_TEST(pass.outcome().message() == "disk (the steps before stay done: 2 retried)");
  BOOST_TEST(pass.retried().retried == 2);
  BOOST_TEST(pass.retried().skipped.size() == 1u);
}

BOOST_AUTO_TEST_CASE(check_bulk_names_what_a_kind_does_not_take) {
  job_filter f;
  f.status = job_status::succeeded;
  BOOST_TEST(actors::check_bulk(bulk_kind::cancel, f).field() == "status");
  BOOST_TEST(actors::check_bulk(bulk_kind::retry, f).field() == "status");
  BOOST_TEST(actors::check_bulk(bulk_kind::remove, f).ok());
  f.status = job_status::running;
  BOOST_TEST(actors::check_bulk(bulk_kind::cancel, f).ok());
  BOOST_TEST(actors::check_bulk(bulk_kind::remove, f).message().find("cancel them first")
             != std::string::npos);
  f.status.reset();
  f.type = "";
  BOOST_TEST(actors::check_bulk(bulk_kind::remove, f).field() == "type");
}

BOOST_AUTO_TEST_SUITE_END()
