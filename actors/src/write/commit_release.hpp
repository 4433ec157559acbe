// commit_release: what one writer transaction holds back until it commits,
// and the order in which a commit lets it go. This order is what makes the
// queue correct:
//
//   1. the job counters, only if the commit held;
//   2. assign_jobs to workers: claimed jobs reach a worker before the
//      dispatcher hears of the claim, so a worker that unregistered gets
//      them before its unregistration is answered. A lost commit sends no
//      jobs, and the outcome acks of a report say why;
//   3. the commit's feed, into the channel before any caller hears back, so
//      whatever a caller does next is decided with this commit in view;
//   4. the callers' replies (and the checks that find failed dispatcher
//      requests);
//   5. those failures, as a feed of their own after the commit's;
//   6. one ring of the dispatcher, after the replies, off their latency;
//   7. the hooks that wait for all of the above (after_writes).
//
// No actors: the writer supplies a sink that sends, and tests a recording
// one. `Worker` is what names a worker (an actor handle in the writer).
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "ergon/actors/commit_feed.hpp"
#include "ergon/actors/protocol_records.hpp"
#include "ergon/error.hpp"
#include "ergon/storage/count_delta.hpp"

namespace ergon::actors {

template <class Worker>
class commit_release {
 public:
  /// Where released things go.
  class sink {
   public:
    virtual ~sink() = default;
    /// The commit's finished-job counts (step 1).
    virtual void apply_counts(const storage::count_delta& counts) = 0;
    /// One worker's answer (step 2).
    virtual void assign(const Worker& worker, assign_jobs out) = 0;
    /// Puts a feed in the channel; true if the dispatcher must be rung.
    virtual bool push(commit_feed feed) = 0;
    /// Rings the dispatcher (step 6).
    virtual void ring() = 0;
  };

  /// What the commit changed, for the dispatcher.
  commit_feed& feed() noexcept { return feed_; }
  /// Status counts the commit moves.
  storage::count_delta& counts() noexcept { return counts_; }

  /// `out` goes to `worker` once the transaction ends.
  void assign(Worker worker, assign_jobs out) {
    assigns_.emplace_back(std::move(worker), std::move(out));
  }

  /// `f` runs with the commit's status once the transaction ends.
  void after_commit(std::function<void(const status&)> f) {
    after_commit_.push_back(std::move(f));
  }

  /// `f` runs once the batch is released, failures included: it survives
  /// an abort, to the batch's last release.
  void after_release(std::function<void()> f) { after_release_.push_back(std::move(f)); }

  /// A dispatcher request did not commit: it travels in a feed, so the
  /// dispatcher sees it in order with the commits around it.
  void fail(write_failed w) { failures_.push_back(std::move(w)); }

  /// The transaction ended with `commit` (ok or the error of a failed
  /// COMMIT): releases everything in the order above, and is empty after.
  void release(const status& commit, sink& to) {
    if (commit && !counts_.empty())
      to.apply_counts(counts_);
    if (!commit)
      feed_ = commit_feed{};
    send_assigns(commit, to);
    bool ring = !feed_.empty() && to.push(std::move(feed_));
    for (auto& f : after_commit_)
      f(commit);
    after_commit_.clear();
    if (!failures_.empty()) {
      commit_feed failed;
      failed.failed = std::move(failures_);
      failures_.clear();
      ring = to.push(std::move(failed)) || ring;
    }
    if (ring)
      to.ring();
    counts_.clear();
    feed_ = commit_feed{};
    auto hooks = std::move(after_release_);
    after_release_.clear();
    for (auto& f : hooks)
      f();
  }

  /// SQLite rolled the whole transaction back in the middle of a batch
  /// (disk full, I/O error): what the batch did so far fails with `why`
  /// and nothing of it is fed. Failures found so far stay for the release
  /// of the batch's next transaction.
  void abort(const status& why, sink& to) {
    for (auto& f : after_commit_)
      f(why);
    after_commit_.clear();
    counts_.clear();
    feed_ = commit_feed{};
    send_assigns(why, to);
  }

 private:
  // If the transaction was lost, no job was claimed and no outcome
  // recorded: only the answers to reports go, with the error as each ack.
  void send_assigns(const status& commit, sink& to) {
    for (auto& [worker, out] : assigns_) {
      if (!commit) {
        out.jobs.clear();
        out.acks.assign(out.acks.size(), to_wire(commit));
        if (!out.answers_report)
          continue;
      }
      to.assign(worker, std::move(out));
    }
    assigns_.clear();
  }

  commit_feed feed_;
  storage::count_delta counts_;
  std::vector<std::pair<Worker, assign_jobs>> assigns_;
  std::vector<std::function<void(const status&)>> after_commit_;
  std::vector<std::function<void()>> after_release_;
  std::vector<write_failed> failures_;
};

}  // namespace ergon::actors
