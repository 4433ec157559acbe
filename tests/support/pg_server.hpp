// A PostgreSQL 15 server of the test's own (issue 29): initdb and pg_ctl in a
// temporary folder, listening on 127.0.0.1 and a free port only, with
// Debian's defaults otherwise (fsync and synchronous_commit on). initdb
// refuses to run as root, so a test run as root runs the server as the
// `postgres` user. The destructor stops the server (fast shutdown) even
// when the test failed, and removes the folder; a watchdog process does so
// if the test process dies without it. Connections are trusted from
// loopback for the superuser `ergon`.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libpq-fe.h>

extern char** environ;

namespace ergon::test {

class pg_server {
 public:
  /// Starts the server. Throws std::runtime_error naming the step that
  /// failed (no PostgreSQL 15 binaries, initdb, start), with its output.
  pg_server() : pg_server(reachable_at{}) {}

  /// Where else the server listens, beside 127.0.0.1, and which network it
  /// trusts there (pg_hba), e.g. a veth address for another namespace.
  struct reachable_at {
    std::string address;  ///< empty: loopback only
    std::string network;  ///< CIDR
  };
  explicit pg_server(reachable_at also) {
    bin_ = find_bin();
    make_folder();
    try {
      run_as_owner({bin_ + "/initdb", "-D", data(), "--username=ergon", "--auth=trust",
                    "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync"},
                   "initdb");
      if (!also.address.empty()) {
        listen_ += "," + also.address;
        std::ofstream hba{data() + "/pg_hba.conf", std::ios::app};
        hba << "host all all " << also.network << " trust\n";
      }
    } catch (...) {
      remove_folder();  // the destructor won't run
      throw;
    }
    start_on_a_free_port();
  }

  /// A hot standby of `primary`: a base backup of it that streams its
  /// changes and takes reads only.
  struct standby_of {
    const pg_server& primary;
  };
  explicit pg_server(standby_of s) {
    bin_ = find_bin();
    make_folder();
    try {
      run_as_owner({bin_ + "/pg_basebackup", "-D", data(), "-R", "-X", "stream", "-c", "fast", "-h",
                    "127.0.0.1", "-p", std::to_string(s.primary.port()), "-U", "ergon"},
                   "pg_basebackup");
    } catch (...) {
      remove_folder();
      throw;
    }
    start_on_a_free_port();
  }

  pg_server(const pg_server&) = delete;
  pg_server& operator=(const pg_server&) = delete;

  ~pg_server() {
    if (watchdog_fd_ >= 0) {
      // Stopped below; the watchdog then finds nothing left to do.
      ::close(watchdog_fd_);
    }
    if (running_) {
      try {
        run_as_owner({bin_ + "/pg_ctl", "-D", data(), "-m", "fast", "-w", "stop"}, "pg_ctl stop");
      } catch (const std::exception&) {
        // Nothing else to do: the folder goes anyway.
      }
    }
    remove_folder();
    if (watchdog_pid_ > 0)
      while (::waitpid(watchdog_pid_, nullptr, 0) < 0 && errno == EINTR) {
      }
  }

  /// Restarts the server (fast shutdown: sessions end, transactions in
  /// flight roll back), on the same port.
  void restart() {
    run_as_owner({bin_ + "/pg_ctl", "-D", data(), "-l", folder_ + "/server.log", "-m", "fast",
                  "-w", "-t", "60", "restart"},
                 "pg_ctl restart");
  }

  int port() const noexcept { return port_; }
  /// The temporary folder with the data, the socket and the logs.
  const std::string& folder() const noexcept { return folder_; }

  /// A libpq connection URI for database `db` as the superuser.
  std::string uri(const std::string& db = "postgres") const {
    return "postgresql://ergon@127.0.0.1:" + std::to_string(port_) + "/" + db;
  }

  /// A new empty database for one test; returns its URI.
  std::string fresh_database() {
    auto name = "t" + std::to_string(++databases_);
    run_sql(uri(), "CREATE DATABASE " + name);
    return uri(name);
  }

  /// Runs `sql` on `conninfo`; throws with the server's message on error.
  static void run_sql(const std::string& conninfo, const std::string& sql) {
    PGconn* c = PQconnectdb(conninfo.c_str());
    if (PQstatus(c) != CONNECTION_OK) {
      std::string why = PQerrorMessage(c);
      PQfinish(c);
      throw std::runtime_error("connect to " + conninfo + ": " + why);
    }
    PGresult* r = PQexec(c, sql.c_str());
    auto st = PQresultStatus(r);
    std::string why = PQresultErrorMessage(r);
    PQclear(r);
    PQfinish(c);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
      throw std::runtime_error(sql + ": " + why);
  }

 private:
  std::string listen_ = "127.0.0.1";
  std::string data() const { return folder_ + "/data"; }

  static std::string find_bin() {
    for (const char* dir : {"/usr/lib/postgresql/15/bin"})
      if (::access((std::string{dir} + "/pg_ctl").c_str(), X_OK) == 0)
        return dir;
    throw std::runtime_error(
      "PostgreSQL 15 is not installed (no /usr/lib/postgresql/15/bin/pg_ctl): "
      "install postgresql-15, or run tools/setup-deps");
  }

  void make_folder() {
    std::string templ = (std::filesystem::temp_directory_path() / "ergon-pg-XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr)
      throw std::runtime_error("mkdtemp: " + std::string{std::strerror(errno)});
    folder_ = templ;
    if (::geteuid() == 0) {
      auto* pw = ::getpwnam("postgres");
      if (pw == nullptr)
        throw std::runtime_error("running as root, and there is no postgres user to run the "
                                 "server as");
      uid_ = pw->pw_uid;
      gid_ = pw->pw_gid;
      if (::chown(folder_.c_str(), uid_, gid_) != 0)
        throw std::runtime_error("chown " + folder_ + ": " + std::strerror(errno));
    }
  }

  void remove_folder() {
    if (folder_.empty())
      return;
    std::error_code ec;
    std::filesystem::remove_all(folder_, ec);
    folder_.clear();
  }

  // A port on 127.0.0.1 that nothing listens on now.
  static int free_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0
        || ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      if (fd >= 0)
        ::close(fd);
      throw std::runtime_error("no free port on 127.0.0.1");
    }
    ::close(fd);
    return ntohs(a.sin_port);
  }

  // A free port can be taken between the probe and the start: try again.
  void start_on_a_free_port() {
    std::string why;
    for (int attempt = 0; attempt < 3; ++attempt) {
      port_ = free_port();
      try {
        run_as_owner({bin_ + "/pg_ctl", "-D", data(), "-l", folder_ + "/server.log", "-w",
                      "-t", "60", "-o",
                      "-p " + std::to_string(port_)
                        + " -c listen_addresses=" + listen_
                        + " -c unix_socket_directories=" + folder_,
                      "start"},
                     "pg_ctl start");
        running_ = true;
        start_watchdog();
        return;
      } catch (const std::runtime_error& e) {
        why = e.what();
      }
    }
    remove_folder();
    throw std::runtime_error(why);
  }

  // A test process that dies without its destructors (a crash, SIGKILL from
  // a ctest timeout, exit from a static's destructor) must not leave a
  // server behind: a shell of its own waits for a pipe from this process to
  // close, then stops the server and removes the folder. It is exec'd at
  // once: after a fork in a threaded process only such calls are safe.
  void start_watchdog() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
      throw std::runtime_error("pg_server: pipe failed");
    std::string as_owner = uid_ != 0 ? "runuser -u postgres -- " : "";
    std::string script = "read _; " + as_owner + bin_ + "/pg_ctl -D " + data()
                         + " -m immediate -w stop >/dev/null 2>&1; rm -rf " + folder_;
    const char* argv[] = {"/bin/sh", "-c", script.c_str(), nullptr};
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setsid();  // out of the test's process group and its signals
      ::dup2(fds[0], STDIN_FILENO);
      ::execve("/bin/sh", const_cast<char* const*>(argv), environ);
      ::_exit(127);
    }
    ::close(fds[0]);
    if (pid < 0) {
      ::close(fds[1]);
      throw std::runtime_error("pg_server: fork failed");
    }
    watchdog_fd_ = fds[1];
    watchdog_pid_ = pid;
  }

  // Runs `argv` as the server's owner and waits; throws with its output if
  // it fails.
  void run_as_owner(std::vector<std::string> argv, const std::string& what) {
    auto out_path = folder_ + "/" + std::to_string(++commands_) + ".out";
    std::vector<char*> args;
    for (auto& a : argv)
      args.push_back(a.data());
    args.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
      int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (out < 0 || (uid_ != 0 && ::fchown(out, uid_, gid_) != 0))
        ::_exit(126);
      ::dup2(out, STDOUT_FILENO);
      ::dup2(out, STDERR_FILENO);
      if (uid_ != 0 && (::setgroups(0, nullptr) != 0 || ::setgid(gid_) != 0
                        || ::setuid(uid_) != 0))
        ::_exit(126);
      if (::chdir(folder_.c_str()) != 0)
        ::_exit(126);
      ::execve(args[0], args.data(), environ);
      ::_exit(127);
    }
    if (pid < 0)
      throw std::runtime_error(what + ": fork failed");
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
      return;
    std::ifstream in{out_path};
    std::stringstream text;
    text << in.rdbuf();
    throw std::runtime_error(what + " failed (status " + std::to_string(st) + "): " + text.str());
  }

  std::string bin_;
  std::string folder_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  int port_ = 0;
  bool running_ = false;
  int commands_ = 0;
  int databases_ = 0;
  int watchdog_fd_ = -1;
  pid_t watchdog_pid_ = 0;
};

}  // namespace ergon::test
