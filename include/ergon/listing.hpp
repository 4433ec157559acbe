// listing: which jobs queue::list_jobs returns, a page at a time, and the
// dead-letter calls that take the same filter.
//
//   ergon::job_filter f;
//   f.status = ergon::job_status::failed;
//   f.type = "send_email";
//   ergon::page_request page;             // 100 jobs, oldest first
//   for (;;) {
//     auto p = q.list_jobs(f, page);
//     if (!p) break;                      // p.error() names the bad field
//     for (auto& j : p->jobs) show(j);
//     if (!p->next) break;
//     page.after = p->next;               // stable while jobs come and go
//   }
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/job_id.hpp"
#include "ergon/job_info.hpp"

namespace ergon {

/// Which jobs a listing, retry or purge takes. Empty fields don't filter;
/// set ones must all match. Times are ms since the epoch, each range
/// including its `from` and excluding its `before`.
struct job_filter {
  std::optional<job_status> status;
  std::optional<std::string> type;   ///< 1 to 256 bytes
  std::optional<std::string> group;  ///< 1 to 256 bytes
  std::optional<std::string> name;   ///< 1 to 256 bytes
  std::optional<int64_t> submitted_from_ms;
  std::optional<int64_t> submitted_before_ms;
  /// Finished jobs only: a filter with either never matches a pending or
  /// running job.
  std::optional<int64_t> finished_from_ms;
  std::optional<int64_t> finished_before_ms;
  /// Tags the job carries, each with exactly this value (job::tags); at
  /// most max_filter_tags. Found through an index on (key, value).
  std::map<std::string, std::string> tags;
  /// Some tag key of the job starts with this, 1 to max_tag_key_bytes
  /// ("billing." finds "billing.customer" and "billing.plan"). Compared
  /// as bytes: no character is a wildcard.
  std::optional<std::string> tag_prefix;
};

/// The most tags one job_filter names.
inline constexpr size_t max_filter_tags = 4;

/// Checks the fields of `f`: labels of 1 to 256 bytes, times >= 0, tags
/// as job::tags (at most max_filter_tags), a tag_prefix as a tag key.
/// Error: invalid_argument naming the field ("type", "finished_before",
/// "tags", ...).
status validate(const job_filter& f);

/// Largest page a listing returns.
inline constexpr size_t max_page_size = 1'000;

/// Which page of a listing to return.
struct page_request {
  /// Jobs per page, 1 to max_page_size.
  size_t limit = 100;
  /// The previous page's `next`: the page starts after that job. Empty:
  /// the first page.
  std::optional<job_id> after;
  /// Newest submission first (descending ids) instead of oldest first.
  bool newest_first = false;
};

/// One page of a listing.
struct job_page {
  /// In submission order (the job ids' order), or reversed with
  /// newest_first; each with its attempts.
  std::vector<job_info> jobs;
  /// Where the next page starts (page_request::after); empty when this page
  /// ended the listing. Pages neither skip nor repeat a job, however jobs
  /// are submitted or finish meanwhile: a job is listed on the page its
  /// position falls on, with the status it has when that page is read.
  std::optional<job_id> next;
};

/// What a bulk cancel (queue::cancel_jobs) did.
struct cancel_summary {
  int64_t cancelled = 0;  ///< pending or waiting jobs now cancelled
  /// Running jobs asked to stop (as queue::cancel): each ends cancelled
  /// however its attempt ends.
  int64_t stop_requested = 0;
};

/// What a bulk retry_failed did.
struct retry_summary {
  int64_t retried = 0;  ///< failed jobs put back to pending
  /// Failed jobs that matched but stayed failed: their unique key is held
  /// by another job now.
  std::vector<job_id> skipped;
};

}  // namespace ergon
