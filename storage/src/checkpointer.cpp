#include "ergon/storage/checkpointer.hpp"

#include <sqlite3.h>

namespace ergon::storage {

checkpoint_step decide_checkpoint(int wal_pages, int folded, const checkpoint_limits& limits) {
  if (wal_pages >= limits.inline_pages)
    return checkpoint_step::inline_now;
  // A WAL shorter than what was folded in has started over.
  int unfolded = wal_pages >= folded ? wal_pages - folded : wal_pages;
  if (unfolded >= limits.background_pages)
    return checkpoint_step::background;
  return checkpoint_step::none;
}

result<std::unique_ptr<checkpointer>> checkpointer::start(sqlite_db& writer, const sqlite_options& opts,
                                                          checkpoint_limits limits) {
  if (names_private_database(writer.path()))
    return invalid_field("path", "a private in-memory database has no WAL to fold in");
  auto own_opts = opts;
  own_opts.read_only = false;  // a checkpoint writes the database file
  own_opts.cache_kib = 2'048;   // it copies frames, and caches next to nothing
  auto own = sqlite_db::open(writer.path(), own_opts);
  if (!own)
    return own.error();
  return std::unique_ptr<checkpointer>{new checkpointer(writer, std::move(*own), limits)};
}

checkpointer::checkpointer(sqlite_db& writer, std::unique_ptr<sqlite_db> own, checkpoint_limits limits)
    : writer_(writer), own_(std::move(own)), limits_(limits) {
  thread_ = std::thread([this] { run(); });
  // Replaces SQLite's autocheckpoint, which is itself a WAL hook.
  sqlite3_wal_hook(writer_.raw(), &checkpointer::on_commit, this);
}

checkpointer::~checkpointer() {
  sqlite3_wal_autocheckpoint(writer_.raw(), sqlite_autocheckpoint_pages);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

int checkpointer::on_commit(void* ctx, sqlite3* writer, const char* schema, int wal_pages) {
  auto* self = static_cast<checkpointer*>(ctx);
  std::unique_lock<std::mutex> lock(self->mutex_);
  // A WAL shorter than at the last commit has started over: what a pass
  // folded in before counts no more, nor what one running now will report.
  if (wal_pages < self->last_wal_pages_) {
    self->folded_ = 0;
    ++self->restarts_;
  }
  self->last_wal_pages_ = wal_pages;
  switch (decide_checkpoint(wal_pages, self->folded_, self->limits_)) {
    case checkpoint_step::none:
      break;
    case checkpoint_step::background:
      // A pass asked for or running covers it, or a later commit asks
      // again: one wake-up per pass, not per commit.
      if (!self->asked_ && !self->running_) {
        self->asked_ = true;
        self->changed_.notify_all();
      }
      break;
    case checkpoint_step::inline_now: {
      // The bound holds even behind a slow pass: wait for it (at most one).
      self->changed_.wait(lock, [&] { return !self->running_; });
      self->asked_ = false;
      lock.unlock();
      int folded = 0;
      int rc = sqlite3_wal_checkpoint_v2(writer, schema, SQLITE_CHECKPOINT_PASSIVE, nullptr,
                                         &folded);
      lock.lock();
      if (rc == SQLITE_OK) {
        self->folded_ = folded;
        ++self->inline_passes_;
      }
      break;
    }
  }
  return SQLITE_OK;
}

void checkpointer::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return asked_ || stopping_; });
    if (stopping_)
      return;
    asked_ = false;
    running_ = true;
    auto restarts = restarts_;
    lock.unlock();
    // PASSIVE never waits on the writer; a failure leaves the frames in the
    // WAL for the next pass.
    int folded = 0;
    int rc = sqlite3_wal_checkpoint_v2(own_->raw(), nullptr, SQLITE_CHECKPOINT_PASSIVE,
                                       nullptr, &folded);
    lock.lock();
    running_ = false;
    if (rc == SQLITE_OK) {
      if (restarts == restarts_)
        folded_ = folded;
      ++background_passes_;
    }
    changed_.notify_all();
  }
}

void checkpointer::wait_idle() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return (!asked_ && !running_) || stopping_; });
}

uint64_t checkpointer::background_passes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return background_passes_;
}

uint64_t checkpointer::inline_passes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return inline_passes_;
}

}  // namespace ergon::storage
