#include "support/fault_vfs.hpp"

#include <algorithm>
#include <ostream>
#include <stdexcept>

#include <fcntl.h>
#include <unistd.h>

namespace ergon::test {

const char* to_string(file_op op) noexcept {
  switch (op) {
    case file_op::write:
      return "write";
    case file_op::sync:
      return "sync";
    case file_op::read:
      return "read";
    case file_op::lock:
      return "lock";
  }
  return "?";
}

std::ostream& operator<<(std::ostream& out, file_op op) {
  return out << to_string(op);
}

int io_error_code(file_op op) noexcept {
  switch (op) {
    case file_op::write:
      return SQLITE_IOERR_WRITE;
    case file_op::sync:
      return SQLITE_IOERR_FSYNC;
    case file_op::read:
      return SQLITE_IOERR_READ;
    case file_op::lock:
      return SQLITE_IOERR_LOCK;
  }
  return SQLITE_IOERR;
}

// Our part of an open file; the wrapped VFS's file follows at real_offset_.
// SQLite allocates it as raw memory, so it holds only plain data.
struct fault_vfs::shim_file {
  sqlite3_file base;
  fault_vfs* owner;
  durable_file* durable;  // null unless a main database or WAL file
};

fault_vfs& fault_vfs::install() {
  // Never destroyed: SQLite may call it until the process exits.
  static fault_vfs* instance = [] {
    auto* v = new fault_vfs();
    if (sqlite3_vfs_register(&v->vfs_, /*makeDefault=*/1) != SQLITE_OK)
      throw std::runtime_error("fault_vfs: sqlite3_vfs_register failed");
    return v;
  }();
  return *instance;
}

fault_vfs::fault_vfs() : base_(sqlite3_vfs_find(nullptr)) {
  if (base_ == nullptr)
    throw std::runtime_error("fault_vfs: no default VFS to wrap");
  real_offset_ = (sizeof(shim_file) + 15) & ~size_t{15};
  // Everything but open and delete is the base VFS's own: the unix VFS
  // doesn't use the sqlite3_vfs pointer those methods get.
  vfs_ = *base_;
  vfs_.pNext = nullptr;
  vfs_.iVersion = std::min(base_->iVersion, 3);
  vfs_.szOsFile = static_cast<int>(real_offset_) + base_->szOsFile;
  vfs_.zName = "ergon-fault";
  vfs_.pAppData = this;
  vfs_.xOpen = x_open;
  vfs_.xDelete = x_delete;
  methods_.iVersion = 3;
  methods_.xClose = x_close;
  methods_.xRead = x_read;
  methods_.xWrite = x_write;
  methods_.xTruncate = x_truncate;
  methods_.xSync = x_sync;
  methods_.xFileSize = x_file_size;
  methods_.xLock = x_lock;
  methods_.xUnlock = x_unlock;
  methods_.xCheckReservedLock = x_check_reserved_lock;
  methods_.xFileControl = x_file_control;
  methods_.xSectorSize = x_sector_size;
  methods_.xDeviceCharacteristics = x_device_characteristics;
  methods_.xShmMap = x_shm_map;
  methods_.xShmLock = x_shm_lock;
  methods_.xShmBarrier = x_shm_barrier;
  methods_.xShmUnmap = x_shm_unmap;
  methods_.xFetch = x_fetch;
  methods_.xUnfetch = x_unfetch;
}

// -- control -------------------------------------------------------------------------------

void fault_vfs::arm(const fault& f) {
  std::lock_guard<std::mutex> guard{mtx_};
  armed_ = true;
  fault_ = f;
  armed_at_ = counts_[static_cast<size_t>(f.op)];
  fired_ = 0;
}

void fault_vfs::clear() {
  std::lock_guard<std::mutex> guard{mtx_};
  armed_ = false;
  fired_ = 0;
}

uint64_t fault_vfs::count(file_op op) const {
  std::lock_guard<std::mutex> guard{mtx_};
  return counts_[static_cast<size_t>(op)];
}

uint64_t fault_vfs::db_syncs() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return db_syncs_;
}

bool fault_vfs::wait_db_syncs_above(uint64_t n, std::chrono::milliseconds limit) const {
  std::unique_lock<std::mutex> lock{mtx_};
  return db_synced_.wait_for(lock, limit, [&] { return db_syncs_ > n; });
}

void fault_vfs::reset_counts() {
  std::lock_guard<std::mutex> guard{mtx_};
  counts_.fill(0);
  db_syncs_ = 0;
  armed_at_ = 0;
}

uint64_t fault_vfs::fired() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return fired_;
}

void fault_vfs::on_fire(std::function<void()> f) {
  std::lock_guard<std::mutex> guard{mtx_};
  on_fire_ = std::move(f);
}

void fault_vfs::power_loss() {
  std::lock_guard<std::mutex> guard{mtx_};
  powered_ = false;
}

void fault_vfs::power_on() {
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto& [path, d] : files_)
    if (d.open_handles > 0)
      throw std::logic_error("fault_vfs::power_on: " + path + " is still open");
  for (auto& [path, d] : files_)
    if (d.exists)
      restore(path, d);
  powered_ = true;
}

void fault_vfs::reset() {
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto i = files_.begin(); i != files_.end();)
    i = i->second.open_handles == 0 ? files_.erase(i) : std::next(i);
  counts_.fill(0);
  db_syncs_ = 0;
  armed_ = false;
  armed_at_ = 0;
  fired_ = 0;
  on_fire_ = nullptr;
  powered_ = true;
}

// -- internals -----------------------------------------------------------------------------

fault_vfs& fault_vfs::self(sqlite3_vfs* v) {
  return *static_cast<fault_vfs*>(v->pAppData);
}

fault_vfs& fault_vfs::self(sqlite3_file* f) {
  return *reinterpret_cast<shim_file*>(f)->owner;
}

sqlite3_file* fault_vfs::real(sqlite3_file* f) {
  auto* sf = reinterpret_cast<shim_file*>(f);
  return reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(f) + sf->owner->real_offset_);
}

// Counts `op` and decides its fate. Called with mtx_ held.
fault_vfs::verdict fault_vfs::inject(file_op op) {
  if (!powered_)
    return {io_error_code(op), false};
  auto n = ++counts_[static_cast<size_t>(op)];
  if (!armed_ || fault_.op != op)
    return {};
  auto k = n - armed_at_;
  if (k != fault_.nth && !(fault_.sticky && k > fault_.nth))
    return {};
  ++fired_;
  return {fault_.code != 0 ? fault_.code : io_error_code(op), true};
}

fault_vfs::verdict fault_vfs::judge(file_op op) {
  std::lock_guard<std::mutex> guard{mtx_};
  return inject(op);
}

// Runs `op` with mtx_ held, unless the fault or a power cut refuses it:
// power_loss() must not fall between the check and the operation, and an
// undo record must match the bytes the write replaces.
template <class Op>
int fault_vfs::run_locked(file_op kind, Op&& op) {
  verdict v;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    v = inject(kind);
    if (v.rc == SQLITE_OK)
      v.rc = op();
  }
  return report(v);
}

int fault_vfs::report(const verdict& v) {
  if (v.injected) {
    std::function<void()> f;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      f = on_fire_;
    }
    if (f)
      f();
  }
  return v.rc;
}

// Remembers the synced bytes in [offset, end) before they are overwritten.
// Bytes past the synced size need no record: power_on truncates them away.
void fault_vfs::save_old_bytes(durable_file& d, sqlite3_file* real, int64_t offset,
                               int64_t end) {
  end = std::min(end, d.synced_size);
  if (offset >= end)
    return;
  std::string old(static_cast<size_t>(end - offset), '\0');
  // A short read (the file was truncated since) leaves zeros; an older undo
  // entry, applied after this one, puts back the real bytes.
  real->pMethods->xRead(real, old.data(), static_cast<int>(old.size()), offset);
  d.undo.emplace_back(offset, std::move(old));
}

// Puts the file back to its synced content. Runs with no connection open, so
// closing our descriptor drops no SQLite lock.
void fault_vfs::restore(const std::string& path, durable_file& d) {
  int fd = ::open(path.c_str(), O_RDWR);
  if (fd < 0) {
    d.undo.clear();
    return;  // gone: nothing to restore
  }
  bool ok = true;
  for (auto i = d.undo.rbegin(); i != d.undo.rend(); ++i)
    ok = ok && ::pwrite(fd, i->second.data(), i->second.size(), i->first)
                 == static_cast<ssize_t>(i->second.size());
  ok = ok && ::ftruncate(fd, d.synced_size) == 0 && ::fsync(fd) == 0;
  ::close(fd);
  d.undo.clear();
  if (!ok)
    throw std::runtime_error("fault_vfs::power_on: cannot restore " + path);
}

// -- sqlite3_vfs ---------------------------------------------------------------------------

int fault_vfs::x_open(sqlite3_vfs* v, const char* name, sqlite3_file* f, int flags,
                      int* out_flags) {
  auto& me = self(v);
  auto* sf = reinterpret_cast<shim_file*>(f);
  sf->base.pMethods = nullptr;
  sf->owner = &me;
  sf->durable = nullptr;
  {
    std::lock_guard<std::mutex> guard{me.mtx_};
    if (!me.powered_)
      return SQLITE_CANTOPEN;
  }
  auto* r = real(f);
  int rc = me.base_->xOpen(me.base_, name, r, flags, out_flags);
  // SQLite calls xClose whenever pMethods is set, even after a failed open.
  if (r->pMethods != nullptr)
    sf->base.pMethods = &me.methods_;
  bool modelled = (flags & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_WAL)) != 0;
  if (rc != SQLITE_OK || name == nullptr || !modelled)
    return rc;
  sqlite3_int64 size = 0;
  r->pMethods->xFileSize(r, &size);
  std::lock_guard<std::mutex> guard{me.mtx_};
  auto [it, added] = me.files_.try_emplace(name);
  auto& d = it->second;
  if (added || !d.exists) {
    // First sight of this file: what is on disk now counts as synced.
    d = durable_file{};
    d.is_wal = (flags & SQLITE_OPEN_WAL) != 0;
    d.synced_size = size;
  }
  ++d.open_handles;
  sf->durable = &d;
  return rc;
}

int fault_vfs::x_delete(sqlite3_vfs* v, const char* name, int sync_dir) {
  auto& me = self(v);
  std::lock_guard<std::mutex> guard{me.mtx_};
  if (!me.powered_)
    return SQLITE_IOERR_DELETE;
  int rc = me.base_->xDelete(me.base_, name, sync_dir);
  if (rc == SQLITE_OK)
    if (auto i = me.files_.find(name); i != me.files_.end()) {
      i->second.exists = false;
      i->second.undo.clear();
      i->second.synced_size = 0;
    }
  return rc;
}

// -- sqlite3_io_methods --------------------------------------------------------------------

int fault_vfs::x_close(sqlite3_file* f) {
  auto& me = self(f);
  auto* r = real(f);
  int rc = r->pMethods->xClose(r);
  if (auto* d = reinterpret_cast<shim_file*>(f)->durable) {
    std::lock_guard<std::mutex> guard{me.mtx_};
    --d->open_handles;
  }
  return rc;
}

int fault_vfs::x_read(sqlite3_file* f, void* buf, int n, sqlite3_int64 offset) {
  auto& me = self(f);
  if (auto v = me.judge(file_op::read); v.rc != SQLITE_OK)
    return me.report(v);
  auto* r = real(f);
  return r->pMethods->xRead(r, buf, n, offset);
}

int fault_vfs::x_write(sqlite3_file* f, const void* buf, int n, sqlite3_int64 offset) {
  auto* r = real(f);
  return self(f).run_locked(file_op::write, [&] {
    if (auto* d = reinterpret_cast<shim_file*>(f)->durable)
      save_old_bytes(*d, r, offset, offset + n);
    return r->pMethods->xWrite(r, buf, n, offset);
  });
}

int fault_vfs::x_truncate(sqlite3_file* f, sqlite3_int64 size) {
  auto& me = self(f);
  auto* r = real(f);
  std::lock_guard<std::mutex> guard{me.mtx_};
  if (!me.powered_)
    return SQLITE_IOERR_TRUNCATE;
  if (auto* d = reinterpret_cast<shim_file*>(f)->durable) {
    sqlite3_int64 current = 0;
    r->pMethods->xFileSize(r, &current);
    save_old_bytes(*d, r, size, current);
  }
  return r->pMethods->xTruncate(r, size);
}

int fault_vfs::x_sync(sqlite3_file* f, int flags) {
  auto& me = self(f);
  auto* r = real(f);
  return me.run_locked(file_op::sync, [&] {
    int rc = r->pMethods->xSync(r, flags);
    auto* d = reinterpret_cast<shim_file*>(f)->durable;
    if (rc == SQLITE_OK && d != nullptr) {
      sqlite3_int64 size = 0;
      r->pMethods->xFileSize(r, &size);
      d->synced_size = size;
      d->undo.clear();
      if (!d->is_wal) {
        ++me.db_syncs_;
        me.db_synced_.notify_all();
      }
    }
    return rc;
  });
}

int fault_vfs::x_file_size(sqlite3_file* f, sqlite3_int64* size) {
  auto* r = real(f);
  return r->pMethods->xFileSize(r, size);
}

int fault_vfs::x_lock(sqlite3_file* f, int level) {
  auto& me = self(f);
  if (auto v = me.judge(file_op::lock); v.rc != SQLITE_OK)
    return me.report(v);
  auto* r = real(f);
  return r->pMethods->xLock(r, level);
}

int fault_vfs::x_unlock(sqlite3_file* f, int level) {
  auto* r = real(f);
  return r->pMethods->xUnlock(r, level);
}

int fault_vfs::x_check_reserved_lock(sqlite3_file* f, int* out) {
  auto* r = real(f);
  return r->pMethods->xCheckReservedLock(r, out);
}

int fault_vfs::x_file_control(sqlite3_file* f, int op, void* arg) {
  auto* r = real(f);
  return r->pMethods->xFileControl(r, op, arg);
}

int fault_vfs::x_sector_size(sqlite3_file* f) {
  auto* r = real(f);
  return r->pMethods->xSectorSize(r);
}

int fault_vfs::x_device_characteristics(sqlite3_file* f) {
  auto* r = real(f);
  return r->pMethods->xDeviceCharacteristics(r);
}

int fault_vfs::x_shm_map(sqlite3_file* f, int region, int size, int extend,
                         void volatile** out) {
  auto* r = real(f);
  return r->pMethods->xShmMap(r, region, size, extend, out);
}

int fault_vfs::x_shm_lock(sqlite3_file* f, int offset, int n, int flags) {
  auto* r = real(f);
  return r->pMethods->xShmLock(r, offset, n, flags);
}

void fault_vfs::x_shm_barrier(sqlite3_file* f) {
  auto* r = real(f);
  r->pMethods->xShmBarrier(r);
}

int fault_vfs::x_shm_unmap(sqlite3_file* f, int delete_flag) {
  auto* r = real(f);
  return r->pMethods->xShmUnmap(r, delete_flag);
}

int fault_vfs::x_fetch(sqlite3_file* f, sqlite3_int64 offset, int n, void** out) {
  auto* r = real(f);
  if (r->pMethods->iVersion < 3) {
    *out = nullptr;  // no memory map: SQLite falls back to xRead
    return SQLITE_OK;
  }
  return r->pMethods->xFetch(r, offset, n, out);
}

int fault_vfs::x_unfetch(sqlite3_file* f, sqlite3_int64 offset, void* p) {
  auto* r = real(f);
  if (r->pMethods->iVersion < 3)
    return SQLITE_OK;
  return r->pMethods->xUnfetch(r, offset, p);
}

}  // namespace ergon::test
