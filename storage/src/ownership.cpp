#include "ergon/storage/ownership.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace ergon::storage {
namespace {

status errno_status(const std::string& what, int err) {
  auto code = err == EACCES || err == EPERM || err == EROFS ? error::read_only : error::io_error;
  return {code, what + ": " + std::strerror(err)};
}

std::string real_path(const char* p) {
  char buf[PATH_MAX];
  return ::realpath(p, buf) != nullptr ? std::string{buf} : std::string{};
}

// The lock file's text made safe to print: it may come from anyone who
// could write the file, so control bytes never reach a terminal.
std::string printable(std::string text) {
  for (auto& c : text) {
    auto b = static_cast<unsigned char>(c);
    if ((b < 0x20 && b != '\n') || b == 0x7f)
      c = '?';
  }
  return text;
}

// What the owner wrote into the lock file; may be empty if it was just made.
std::string read_owner(int fd) {
  char buf[256];
  auto n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  std::string text = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string{};
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0'))
    text.pop_back();
  return text.empty() ? std::string{"an owner that is still starting"} : printable(text);
}

// Why a lock file can't be ours as it is, or empty if it can: a regular
// file of this user that only this user may write.
std::string unfit(const struct stat& st) {
  if (!S_ISREG(st.st_mode))
    return "is not a regular file";
  if (st.st_uid != ::geteuid())
    return "belongs to user " + std::to_string(st.st_uid);
  return {};
}

std::string this_process() {
  return "pid " + std::to_string(::getpid()) + " on host " + host_name() + "\n";
}

// Writes the whole lock file anew.
status rewrite(int fd, const std::string& path, const std::string& text) {
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) < 0)
    return errno_status(path, errno);
  return {};
}

}  // namespace

result<std::string> ownership::lock_path(const std::string& db_path) {
  if (auto p = real_path(db_path.c_str()); !p.empty())
    return p + "-owner";
  // The database doesn't exist yet: resolve its directory instead.
  auto slash = db_path.rfind('/');
  auto dir = slash == std::string::npos ? std::string{"."}
                                        : db_path.substr(0, slash == 0 ? 1 : slash);
  auto base = slash == std::string::npos ? db_path : db_path.substr(slash + 1);
  auto real_dir = real_path(dir.c_str());
  if (real_dir.empty())
    return errno_status(db_path + ": directory " + dir, errno);
  return (real_dir == "/" ? real_dir : real_dir + "/") + base + "-owner";
}

namespace {

// Removes what sits at `path` where a lock file should be (a symlink, a
// FIFO, another user's file), unless a live owner holds it: then busy. The
// name is all that goes; a symlink's target is never touched.
status replace_unfit(const std::string& path, const std::string& db_path, const std::string& why) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd >= 0) {
    struct stat st {};
    bool held = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)
                && ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    if (held) {
      status busy{error::busy, db_path + " is owned by " + read_owner(fd)
                                 + " (a process of user " + std::to_string(st.st_uid) + ")"};
      ::close(fd);
      return busy;
    }
    ::close(fd);
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    auto st = errno_status(path, errno);
    return {st.code(), st.message() + " (the lock file " + why + " and can't be replaced: remove it)"};
  }
  return {};
}

}  // namespace

result<std::unique_ptr<ownership>> ownership::acquire(const std::string& db_path) {
  auto path = lock_path(db_path);
  if (!path)
    return path.error();
  for (int tries = 0;; ++tries) {
    // O_NOFOLLOW: a symlink planted at the lock's name must not make us
    // truncate its target.
    int fd = ::open(path->c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    std::string why;
    struct stat locked {};
    if (fd < 0 && (errno == ELOOP || errno == EISDIR || errno == ENXIO))
      why = errno == ELOOP ? "is a symbolic link" : "is not a regular file";
    else if (fd < 0)
      return errno_status(*path, errno);
    else if (::fstat(fd, &locked) != 0)
      why = "can't be read";
    else
      why = unfit(locked);
    if (!why.empty()) {
      if (fd >= 0)
        ::close(fd);
      if (tries >= 8)
        return status{error::io_error, *path + " " + why + ", again after replacing it"};
      if (auto st = replace_unfit(*path, db_path, why); !st)
        return st;
      continue;
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      status st = err == EWOULDBLOCK
                    ? status{error::busy, db_path + " is owned by " + read_owner(fd)
                                            + " (another open queue; use an inspector to "
                                              "read it, or close the other queue)"}
                    : errno_status(*path, err);
      ::close(fd);
      return st;
    }
    // The previous owner unlinks the file before it unlocks: if ours is no
    // longer the file at `path`, we locked a file nobody else will look at.
    struct stat current {};
    if (::lstat(path->c_str(), &current) == 0 && locked.st_dev == current.st_dev
        && locked.st_ino == current.st_ino) {
      // Tools trust only a lock file that others can't write (find).
      if ((locked.st_mode & 0777) != 0644)
        ::fchmod(fd, 0644);
      auto me = this_process();
      if (auto st = rewrite(fd, *path, me); !st) {
        ::close(fd);
        return st;
      }
      return std::unique_ptr<ownership>{new ownership(fd, std::move(*path), std::move(me))};
    }
    ::close(fd);
  }
}

status ownership::record_listener(const std::string& address, uint16_t port, bool secret,
                                  bool tls) {
  auto next = text_ + "listening on " + address + " port " + std::to_string(port)
              + (secret ? " secret" : "") + (tls ? " tls" : "") + "\n";
  if (auto st = rewrite(fd_, path_, next); !st)
    return st;
  text_ = std::move(next);
  return {};
}

std::optional<ownership::record> ownership::parse(const std::string& text) {
  std::istringstream in{text};
  std::string word;
  record r;
  std::string on, host_word;
  if (!(in >> word) || word != "pid" || !(in >> r.pid) || r.pid <= 0 || !(in >> on >> host_word)
      || on != "on" || host_word != "host" || !(in >> r.host))
    return std::nullopt;
  r.host = printable(r.host);
  std::string line;
  std::getline(in, line);  // the rest of the first line
  while (std::getline(in, line)) {
    std::istringstream l{line};
    std::string listening, port_word;
    record::listener x;
    int port = 0;
    if (!(l >> listening >> on >> x.address >> port_word >> port) || listening != "listening"
        || on != "on" || port_word != "port" || port <= 0 || port > 65535)
      return std::nullopt;
    x.port = static_cast<uint16_t>(port);
    x.address = printable(x.address);
    while (l >> word) {
      if (word == "secret")
        x.secret = true;
      else if (word == "tls")
        x.tls = true;
    }
    r.listeners.push_back(std::move(x));
  }
  return r;
}

result<std::optional<ownership::record>> ownership::find(const std::string& db_path) {
  auto path = lock_path(db_path);
  if (!path)
    return path.error();
  int fd = ::open(path->c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT || errno == ELOOP)  // a symlink is never an owner's
      return std::optional<record>{};
    return errno_status(*path, errno);
  }
  // The file says where to send the operator's writes: trust it only if its
  // writer could have been the owner (this user, or the database's owner)
  // and nobody else can write it.
  struct stat lock {};
  struct stat db_file {};
  bool trusted = ::fstat(fd, &lock) == 0 && S_ISREG(lock.st_mode)
                 && (lock.st_mode & (S_IWGRP | S_IWOTH)) == 0
                 && (lock.st_uid == ::geteuid()
                     || (::stat(db_path.c_str(), &db_file) == 0 && lock.st_uid == db_file.st_uid));
  std::string text;
  char buf[4096];
  ssize_t n = 0;
  while (trusted && text.size() < 64 * 1024
         && (n = ::pread(fd, buf, sizeof(buf), static_cast<off_t>(text.size()))) > 0)
    text.append(buf, static_cast<size_t>(n));
  ::close(fd);
  if (!trusted)
    return std::optional<record>{};
  if (n < 0)
    return errno_status(*path, errno);
  auto r = parse(text);
  if (!r)
    return std::optional<record>{};
  // A lock file whose process is gone was left by a crash: nobody owns it.
  if (r->host == host_name() && ::kill(static_cast<pid_t>(r->pid), 0) != 0 && errno == ESRCH)
    return std::optional<record>{};
  return r;
}

ownership::~ownership() {
  ::unlink(path_.c_str());
  ::close(fd_);
}

std::string host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0)
    return {};
  return host;
}

}  // namespace ergon::storage
