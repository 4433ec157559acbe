#include "ergon/storage/op/backup_to.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "ergon/storage/sqlite_db.hpp"

namespace ergon::storage {
namespace {

status errno_status(const std::string& what, int err) {
  auto code = err == EEXIST   ? error::already_exists
              : err == EACCES || err == EPERM || err == EROFS ? error::read_only
                                                              : error::io_error;
  return {code, what + ": " + std::strerror(err)};
}

// The copy is written under this name and renamed once it is whole.
std::string partial_name(const std::string& out) {
  std::random_device rd;
  return out + ".partial-" + std::to_string(rd() % 1'000'000);
}

// The copy's own connection: plain SQLite, rollback journal, so the file
// it leaves is the whole database.
class copy_file {
 public:
  copy_file(const std::string& path, uint32_t file_mode) : path_(path) {
    // Made here first: private, and never through a planted symlink.
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, file_mode);
    if (fd < 0) {
      st_ = errno_status(path, errno);
      return;
    }
    ::fchmod(fd, file_mode);
    ::close(fd);
    made_ = true;
    int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr);
    if (rc != SQLITE_OK)
      st_ = {error::io_error, path + ": " + sqlite3_errstr(rc)};
  }
  ~copy_file() {
    sqlite3_close(db_);
    if (made_ && !kept_)
      ::unlink(path_.c_str());
  }
  copy_file(const copy_file&) = delete;
  copy_file& operator=(const copy_file&) = delete;

  const status& opened() const noexcept { return st_; }
  sqlite3* raw() const noexcept { return db_; }
  // Closes the copy; from then on the file stays.
  status close_and_keep() {
    int rc = sqlite3_close(db_);
    db_ = nullptr;
    if (rc != SQLITE_OK)
      return {error::io_error, path_ + ": " + sqlite3_errstr(rc)};
    kept_ = true;
    return {};
  }

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
  status st_;
  bool made_ = false;
  bool kept_ = false;
};

status check_copy(sqlite3* copy, const std::string& path) {
  sqlite3_stmt* s = nullptr;
  int rc = sqlite3_prepare_v2(copy, "PRAGMA quick_check", -1, &s, nullptr);
  std::string verdict;
  if (rc == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
    verdict = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
  sqlite3_finalize(s);
  if (verdict != "ok")
    return {error::corrupt, path + ": the copy fails quick_check: "
                              + (verdict.empty() ? std::string{sqlite3_errmsg(copy)} : verdict)};
  return {};
}

}  // namespace

result<backup_result> backup_to(sqlite_db& source, const std::string& out, uint32_t file_mode) {
  if (out.empty())
    return status{error::invalid_argument, "the backup's path is empty", "out"};
  struct stat st {};
  if (::lstat(out.c_str(), &st) == 0)
    return status{error::already_exists, out + " exists: a backup never overwrites a file", "out"};
  auto partial = partial_name(out);
  copy_file copy{partial, file_mode};
  if (!copy.opened())
    return copy.opened();
  source.end_reads();
  // One step copies every page under one read transaction: a consistent
  // snapshot, while the owner goes on writing (WAL readers block nobody).
  auto* b = sqlite3_backup_init(copy.raw(), "main", source.raw(), "main");
  if (b == nullptr)
    return status{error::io_error, out + ": " + sqlite3_errmsg(copy.raw())};
  int rc = sqlite3_backup_step(b, -1);
  backup_result r;
  r.pages = sqlite3_backup_pagecount(b);
  int finished = sqlite3_backup_finish(b);
  if (rc != SQLITE_DONE)
    return source.error_status(rc, "backup of " + source.path());
  if (finished != SQLITE_OK)
    return status{error::io_error, out + ": " + sqlite3_errstr(finished)};
  if (auto checked = check_copy(copy.raw(), out); !checked)
    return checked;
  if (auto closed = copy.close_and_keep(); !closed)
    return closed;
  // link() refuses an existing name, unlike rename(): a file that appeared
  // at `out` meanwhile is left alone.
  if (::link(partial.c_str(), out.c_str()) != 0) {
    auto failed = errno_status(out, errno);
    ::unlink(partial.c_str());
    return failed;
  }
  ::unlink(partial.c_str());
  if (::stat(out.c_str(), &st) == 0)
    r.bytes = st.st_size;
  return r;
}

}  // namespace ergon::storage
