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
#include <fstream>
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

// What the owner wrote into the lock file; may be empty if it was just made.
std::string read_owner(int fd) {
  char buf[256];
  auto n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  std::string text = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string{};
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0'))
    text.pop_back();
  return text.empty() ? std::string{"an owner that is still starting"} : text;
}

std::string this_host() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

std::string this_process() {
  return "pid " + std::to_string(::getpid()) + " on host " + this_host() + "\n";
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

result<std::unique_ptr<ownership>> ownership::acquire(const std::string& db_path) {
  auto path = lock_path(db_path);
  if (!path)
    return path.error();
  for (;;) {
    int fd = ::open(path->c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
      return errno_status(*path, errno);
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
    struct stat locked {};
    struct stat current {};
    if (::fstat(fd, &locked) == 0 && ::stat(path->c_str(), &current) == 0
        && locked.st_dev == current.st_dev && locked.st_ino == current.st_ino) {
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
  std::ifstream in{*path};
  if (!in) {
    if (errno == ENOENT)
      return std::optional<record>{};
    return errno_status(*path, errno);
  }
  std::ostringstream text;
  text << in.rdbuf();
  auto r = parse(text.str());
  if (!r)
    return std::optional<record>{};
  // A lock file whose process is gone was left by a crash: nobody owns it.
  if (r->host == this_host() && ::kill(static_cast<pid_t>(r->pid), 0) != 0 && errno == ESRCH)
    return std::optional<record>{};
  return r;
}

ownership::~ownership() {
  ::unlink(path_.c_str());
  ::close(fd_);
}

}  // namespace ergon::storage
