#include "ergon/actors/db_writer.hpp"

#include <caf/actor_system.hpp>
#include <caf/behavior.hpp>
#include <caf/blocking_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/send.hpp>
#include <caf/system_messages.hpp>

#include <functional>
#include <thread>


namespace ergon::actors {
namespace {

constexpr const char* begin_batch = "BEGIN IMMEDIATE";
constexpr const char* commit_batch = "COMMIT";
constexpr const char* rollback_batch = "ROLLBACK";

// One transaction's worth of requests: their deferred replies and what they
// changed, all published only if COMMIT succeeds.
class writer {
 public:
  explicit writer(db_writer_config cfg) : cfg_(std::move(cfg)) {}

  void run(caf::blocking_actor* self) {
    bool stopping = false;
    std::vector<reply_to<status>> on_closed;
    caf::behavior bhvr{
      [&](submit_call& c) { on_submit(c); },
      [&](update_call& c) { on_update(c); },
      [&](cancel_call& c) { on_cancel(c); },
      [&](close_call& c) {
        stopping = true;
        on_closed.push_back(std::move(c.reply));
      },
      [&](caf::exit_msg&) { stopping = true; },
    };
    while (!stopping) {
      wait_for_mail(self);
      self->receive(bhvr);
      // The self-flush: everything already queued joins this commit.
      for (size_t n = 1; n < cfg_.batch_limit && !stopping && !self->mailbox().empty(); ++n)
        self->receive(bhvr);
      finish_batch(self);
    }
    // Close the connection before acknowledging, so a caller may reopen the
    // file at once.
    cfg_.db.reset();
    for (auto& reply : on_closed)
      reply.deliver(status{});
  }

 private:
  // Spins briefly before receive() sleeps: the next request of a busy caller
  // usually arrives within microseconds, and waking costs ~25 us.
  void wait_for_mail(caf::blocking_actor* self) {
    auto until = std::chrono::steady_clock::now() + cfg_.idle_spin;
    for (unsigned i = 0; self->mailbox().empty(); ++i)
      if ((i & 63) == 63 && std::chrono::steady_clock::now() > until)
        return;  // receive() sleeps until mail arrives
  }

  // Runs `op` inside the batch transaction. On success `publish` records the
  // request's effects (feed, counts) for the commit. Each request but the
  // first gets a savepoint; the first one alone in the transaction can roll
  // the whole transaction back instead, which saves two statements for the
  // common single-request batch.
  template <class R, class Op, class Publish>
  result<R> in_savepoint(Op&& op, Publish&& publish) {
    if (!open_) {
      begin_status_ = run_cached(begin_batch);
      open_ = true;
      if (!begin_status_)
        return begin_status_;
      result<R> r = op();
      if (r) {
        publish(*r);
      } else {
        run_cached(rollback_batch);
        open_ = false;
        next_row_ = 0;
      }
      return r;
    }
    if (!begin_status_)
      return begin_status_;
    result<R> r = status{};
    {
      storage::savepoint sp{*cfg_.db};
      if (!sp.begin_status())
        return sp.begin_status();
      r = op();
      if (r)
        if (auto st = sp.release(); !st)
          r = st;
    }
    if (r)
      publish(*r);
    else if (!cfg_.db->in_transaction())
      abort_batch(r.error());
    return r;
  }

  // SQLite rolled the whole transaction back (disk full, I/O error): the
  // earlier requests of this batch are gone too, so they must not be
  // acknowledged. They fail with the same error; later requests of the batch
  // start a new transaction.
  void abort_batch(const status& why) {
    for (auto& reply : replies_)
      reply(why);
    replies_.clear();
    counts_.clear();
    feed_ = commit_feed{};
    open_ = false;
    next_row_ = 0;
  }

  status run_cached(const char* sql) {
    auto s = cfg_.db->prepare(sql);
    return s ? cfg_.db->run(**s) : s.error();
  }

  template <class V>
  void reply_after_commit(const reply_to<V>& to, V value) {
    replies_.emplace_back(
      [to, value = std::move(value)](const status& commit) mutable {
        if (commit)
          to.deliver(std::move(value));
        else
          to.deliver(V{commit});
      });
  }

  void on_submit(submit_call& c) {
    auto now = cfg_.clock->now_ms();
    storage::insert_jobs_args args{std::move(c.args.jobs), cfg_.max_payload_bytes,
                                   cfg_.id_tag, next_row_};
    std::vector<job_id> ids;
    auto r = in_savepoint<std::vector<storage::inserted_job>>(
      [&] { return storage::insert_jobs(*cfg_.db, args, now); },
      [&](std::vector<storage::inserted_job>& jobs) {
        ids.reserve(jobs.size());
        if (!jobs.empty())
          next_row_ = jobs.back().key.row + 1;
        for (auto& j : jobs) {
          ids.push_back(j.id);
          counts_.add(j.key.type, job_status::pending);
          feed_.added.push_back(std::move(j.key));
        }
      });
    if (r)
      reply_after_commit(c.reply, result<std::vector<job_id>>{std::move(ids)});
    else
      reply_after_commit(c.reply, result<std::vector<job_id>>{r.error()});
  }

  void on_update(update_call& c) {
    c.args.max_payload_bytes = cfg_.max_payload_bytes;
    auto r = in_savepoint<storage::key_change>(
      [&] { return storage::update_pending(*cfg_.db, c.args, cfg_.clock->now_ms()); },
      [&](storage::key_change& change) { feed_.changed.push_back(std::move(change)); });
    reply_after_commit(c.reply, r.error());
  }

  void on_cancel(cancel_call& c) {
    auto r = in_savepoint<storage::job_key>(
      [&] { return storage::cancel_pending(*cfg_.db, c.args, cfg_.clock->now_ms()); },
      [&](storage::job_key& key) {
        counts_.move(key.type, job_status::pending, job_status::cancelled);
        feed_.removed.push_back(std::move(key));
      });
    reply_after_commit(c.reply, r.error());
  }

  void finish_batch(caf::blocking_actor* self) {
    status commit;
    if (open_ && begin_status_) {
      commit = run_cached(commit_batch);
      if (!commit)
        run_cached(rollback_batch);
    } else if (open_) {
      commit = begin_status_;  // BEGIN failed: nothing was written
    }
    if (commit) {
      if (!counts_.empty())
        cfg_.counters->apply(counts_);
      if (cfg_.listener && !feed_.empty())
        self->send(cfg_.listener, std::move(feed_));
    }
    for (auto& reply : replies_)
      reply(commit);
    replies_.clear();
    counts_.clear();
    feed_ = commit_feed{};
    open_ = false;
    next_row_ = 0;
    begin_status_ = {};
  }

  db_writer_config cfg_;
  bool open_ = false;  // a transaction is open
  // Next free row id within the open transaction (0: unknown). Only valid
  // while we hold the write lock, so it is forgotten at every commit.
  int64_t next_row_ = 0;
  status begin_status_;
  std::vector<std::function<void(const status&)>> replies_;
  count_delta counts_;
  commit_feed feed_;
};

}  // namespace

caf::actor spawn_db_writer(caf::actor_system& sys, db_writer_config cfg) {
  return sys.spawn([cfg = std::move(cfg)](caf::blocking_actor* self) mutable {
    writer w{std::move(cfg)};
    w.run(self);
  });
}

}  // namespace ergon::actors
