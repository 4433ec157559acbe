// checkpointer: folds the writer's WAL into the database file on a thread
// and connection of its own, so that a commit does not wait for the copy
// and its two fsyncs (SQLite's autocheckpoint runs them inside the commit
// that crosses the threshold: about a quarter of a bulk submit's time).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "ergon/storage/sqlite_db.hpp"

namespace ergon::storage {

/// SQLite's default autocheckpoint, in WAL pages.
inline constexpr int sqlite_autocheckpoint_pages = 1'000;

/// When a checkpoint runs, by the WAL's length in pages after a commit.
struct checkpoint_limits {
  /// From here the checkpointer's thread folds the WAL in.
  int background_pages = sqlite_autocheckpoint_pages;
  /// From here the writer folds it in itself, within the commit, after a
  /// pass that is running ends. A WAL can restart from its beginning only
  /// once every frame is in the file, which a background pass under a
  /// steady load may never reach: this bounds it.
  int inline_pages = 8'000;
};

/// What a commit that leaves the WAL at `wal_pages` pages asks for.
enum class checkpoint_step { none, background, inline_now };

/// The step for a WAL of `wal_pages` pages of which the last pass folded in
/// the first `folded` (0 after the WAL started over): inline_now from
/// inline_pages, background once background_pages have come since that
/// pass, none otherwise.
checkpoint_step decide_checkpoint(int wal_pages, int folded, const checkpoint_limits& limits);

/// Takes over the checkpoints of one writer connection for its lifetime.
/// A failed or busy checkpoint loses nothing: the frames stay in the WAL and
/// the next one folds them in.
class checkpointer {
 public:
  /// Opens a second connection to `writer`'s file with `opts`, turns off the
  /// writer's autocheckpoint and watches its commits. Fails with the open's
  /// error; a private in-memory database has no WAL and is refused
  /// (invalid_argument).
  static result<std::unique_ptr<checkpointer>> start(sqlite_db& writer, const sqlite_options& opts,
                                                     checkpoint_limits limits = {});

  /// Stops the thread after the pass it is running and gives the writer its
  /// autocheckpoint back. Call on the writer's thread, between commits.
  ~checkpointer();

  checkpointer(const checkpointer&) = delete;
  checkpointer& operator=(const checkpointer&) = delete;

  /// Blocks until no pass is asked for or running.
  void wait_idle();

  /// Passes run so far: on the thread, and inline by the writer.
  uint64_t background_passes() const;
  uint64_t inline_passes() const;

 private:
  checkpointer(sqlite_db& writer, std::unique_ptr<sqlite_db> own, checkpoint_limits limits);
  static int on_commit(void* self, sqlite3* writer, const char* schema, int wal_pages);
  void run();

  sqlite_db& writer_;
  std::unique_ptr<sqlite_db> own_;
  checkpoint_limits limits_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool asked_ = false;
  bool running_ = false;
  int folded_ = 0;          // WAL pages the last pass folded in
  int last_wal_pages_ = 0;  // the WAL's length at the last commit
  uint64_t restarts_ = 0;   // times the WAL was seen to start over
  bool stopping_ = false;
  uint64_t background_passes_ = 0;
  uint64_t inline_passes_ = 0;
  std::thread thread_;
};

}  // namespace ergon::storage
