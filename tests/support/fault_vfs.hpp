// fault_vfs: an SQLite VFS for storage-failure tests. It wraps the default
// VFS, passes every call through, counts file operations, fails a chosen one,
// and can simulate a power loss.
//
//   auto& vfs = ergon::test::fault_vfs::install();  // now the default VFS
//   vfs.arm({ergon::test::file_op::write, 3});      // the 3rd write from now fails
//   ...                                             // run code that uses SQLite
//   vfs.clear();
//
// Every connection opened with a null VFS name uses it, so the queue needs no
// change to be tested. All members are thread-safe.
//
// Power-loss model. For each main database and WAL file the shim remembers
// its content as of the last successful xSync (for a file it sees for the
// first time: its content at open; for a new file: empty). `power_loss()`
// cuts the power: from then on every read, write, sync, truncate, lock, open
// and delete fails with an I/O error, so nothing more reaches the disk.
// `power_on()` then puts every such file back to its last synced content
// (writes and truncations since the last sync are undone, via an undo log of
// the bytes each one overwrote) and lets operations through again. So every
// unsynced write is lost, and every synced one survives: the harshest
// outcome a disk that honours fsync can produce. Deletions are taken as
// durable at once. The -shm file is memory to SQLite and is not modelled:
// the first connection after power_on rebuilds it from the WAL.
#pragma once

#include <sqlite3.h>

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace ergon::test {

/// The file operations the shim counts and can fail.
enum class file_op : uint8_t { write, sync, read, lock };

inline constexpr size_t file_op_count = 4;
inline constexpr std::array<file_op, file_op_count> all_file_ops{
  file_op::write, file_op::sync, file_op::read, file_op::lock};

/// "write", "sync", "read" or "lock".
const char* to_string(file_op op) noexcept;
std::ostream& operator<<(std::ostream& out, file_op op);

/// The extended I/O error SQLite's own VFS returns when `op` fails
/// (SQLITE_IOERR_WRITE, SQLITE_IOERR_FSYNC, SQLITE_IOERR_READ, SQLITE_IOERR_LOCK).
int io_error_code(file_op op) noexcept;

/// A fault to inject: the `nth` operation of kind `op` after `arm` fails.
struct fault {
  file_op op = file_op::write;
  /// 1 for the first operation after arming.
  uint64_t nth = 1;
  /// The result the operation returns: 0 for io_error_code(op), or any SQLite
  /// error code such as SQLITE_FULL.
  int code = 0;
  /// Sticky: the nth and every later operation of this kind fail until
  /// `clear`. Otherwise only the nth fails.
  bool sticky = false;
};

class fault_vfs {
 public:
  /// Registers the shim as the process's default VFS on the first call and
  /// returns it. Call it before opening any connection that should use it.
  static fault_vfs& install();

  fault_vfs(const fault_vfs&) = delete;
  fault_vfs& operator=(const fault_vfs&) = delete;

  /// Arms `f`, replacing any armed fault. Only operations from now on count
  /// towards its `nth`.
  void arm(const fault& f);

  /// Disarms the fault; later operations succeed.
  void clear();

  /// Operations of kind `op` since the last `reset_counts`, failed or not.
  /// Operations refused for lack of power are not counted.
  uint64_t count(file_op op) const;

  /// Successful syncs of main database files since the last `reset_counts`.
  /// In WAL mode only checkpoints sync them, right after syncing the WAL.
  uint64_t db_syncs() const;

  /// Blocks until db_syncs() is above `n` or `limit` has passed: whether it
  /// is. For checkpoints that run on a thread of their own.
  bool wait_db_syncs_above(uint64_t n, std::chrono::milliseconds limit) const;

  void reset_counts();

  /// How many operations the armed fault has failed so far (0 after clear).
  uint64_t fired() const;

  /// Calls `f` (outside the shim's lock) after every injected failure, on the
  /// thread that made the operation. Empty: no call.
  void on_fire(std::function<void()> f);

  /// Cuts the power; see the model above. Connections stay open but every
  /// operation fails. Close them, then call power_on().
  void power_loss();

  /// Restores every modelled file to its last synced content and lets
  /// operations through again. Throws std::logic_error if a modelled file is
  /// still open: restoring under a live connection would drop its POSIX locks.
  void power_on();

  /// Forgets files with no open handle (their durable content included), and
  /// resets the counts and the fault. Tests call it between runs.
  void reset();

 private:
  fault_vfs();

  // What the shim knows about one main database or WAL file, by path.
  struct durable_file {
    bool is_wal = false;
    bool exists = true;
    int open_handles = 0;
    int64_t synced_size = 0;  // size at the last successful sync
    // Bytes that writes and truncations since that sync overwrote, oldest
    // first; applied newest first, they give back the synced content.
    std::vector<std::pair<int64_t, std::string>> undo;
  };

  struct shim_file;

  // SQLITE_OK to run an operation, or the result to return instead, and
  // whether the armed fault (not a power cut) chose it.
  struct verdict {
    int rc = SQLITE_OK;
    bool injected = false;
  };
  verdict inject(file_op op);  // with mtx_ held
  verdict judge(file_op op);   // takes mtx_
  // Calls on_fire_ if the fault fired; returns the operation's result.
  int report(const verdict& v);
  template <class Op>
  int run_locked(file_op kind, Op&& op);

  static fault_vfs& self(sqlite3_vfs* v);
  static fault_vfs& self(sqlite3_file* f);
  static sqlite3_file* real(sqlite3_file* f);
  static void save_old_bytes(durable_file& d, sqlite3_file* real, int64_t offset,
                             int64_t end);
  static void restore(const std::string& path, durable_file& d);

  // sqlite3_vfs methods.
  static int x_open(sqlite3_vfs*, const char*, sqlite3_file*, int, int*);
  static int x_delete(sqlite3_vfs*, const char*, int);

  // sqlite3_io_methods.
  static int x_close(sqlite3_file*);
  static int x_read(sqlite3_file*, void*, int, sqlite3_int64);
  static int x_write(sqlite3_file*, const void*, int, sqlite3_int64);
  static int x_truncate(sqlite3_file*, sqlite3_int64);
  static int x_sync(sqlite3_file*, int);
  static int x_file_size(sqlite3_file*, sqlite3_int64*);
  static int x_lock(sqlite3_file*, int);
  static int x_unlock(sqlite3_file*, int);
  static int x_check_reserved_lock(sqlite3_file*, int*);
  static int x_file_control(sqlite3_file*, int, void*);
  static int x_sector_size(sqlite3_file*);
  static int x_device_characteristics(sqlite3_file*);
  static int x_shm_map(sqlite3_file*, int, int, int, void volatile**);
  static int x_shm_lock(sqlite3_file*, int, int, int);
  static void x_shm_barrier(sqlite3_file*);
  static int x_shm_unmap(sqlite3_file*, int);
  static int x_fetch(sqlite3_file*, sqlite3_int64, int, void**);
  static int x_unfetch(sqlite3_file*, sqlite3_int64, void*);

  sqlite3_vfs* base_;  // the default VFS we wrap
  sqlite3_vfs vfs_{};
  sqlite3_io_methods methods_{};
  size_t real_offset_ = 0;  // where the wrapped file starts inside ours

  mutable std::mutex mtx_;
  std::array<uint64_t, file_op_count> counts_{};
  uint64_t db_syncs_ = 0;
  mutable std::condition_variable db_synced_;
  bool armed_ = false;
  fault fault_;
  uint64_t armed_at_ = 0;  // count_[fault_.op] when armed
  uint64_t fired_ = 0;
  std::function<void()> on_fire_;
  bool powered_ = true;
  std::map<std::string, durable_file> files_;
};

}  // namespace ergon::test
