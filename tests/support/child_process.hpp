// A child process started by a test, with pipes to its stdin and stdout.
// Tests end only children they started, by PID. A child gets SIGKILL when
// the thread that started it ends, so start children from the test's thread.
#pragma once

#include <csignal>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace ergon::test {

class child_process {
 public:
  explicit child_process(std::vector<std::string> argv) {
    int in[2];
    int out[2];
    if (::pipe(in) != 0 || ::pipe(out) != 0)
      throw std::runtime_error("pipe failed");
    std::vector<char*> args;
    for (auto& a : argv)
      args.push_back(a.data());
    args.push_back(nullptr);
    auto parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      // Only async-signal-safe calls until exec. The child dies with the
      // test: a test that crashes or fails an assertion must not leave a
      // server behind that holds ctest's output pipe open.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent)
        ::_exit(127);
      ::dup2(in[0], STDIN_FILENO);
      ::dup2(out[1], STDOUT_FILENO);
      ::close(in[0]);
      ::close(in[1]);
      ::close(out[0]);
      ::close(out[1]);
      ::execve(args[0], args.data(), environ);
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    if (pid_ < 0)
      throw std::runtime_error("fork for " + argv[0] + " failed");
    to_child_ = in[1];
    from_child_ = ::fdopen(out[0], "r");
  }

  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  ~child_process() {
    if (to_child_ >= 0)
      ::close(to_child_);
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (from_child_ != nullptr)
      ::fclose(from_child_);
  }

  /// Blocks until the child writes a line; returns it without the newline,
  /// or "" at end of file.
  std::string read_line() {
    std::string line;
    for (int c = std::fgetc(from_child_); c != EOF && c != '\n'; c = std::fgetc(from_child_))
      line.push_back(static_cast<char>(c));
    return line;
  }

  /// Whether the child's stdout reached its end.
  bool eof() const { return std::feof(from_child_) != 0; }

  /// Reads lines until one starts with `prefix` and returns it. Throws
  /// std::runtime_error at end of file, naming the prefix.
  std::string line_starting(const std::string& prefix) {
    for (;;) {
      auto line = read_line();
      if (line.rfind(prefix, 0) == 0)
        return line;
      if (line.empty() && std::feof(from_child_))
        throw std::runtime_error("the child ended before a line starting '" + prefix + "'");
    }
  }

  /// Reads lines until one equals `expected`; false at end of file.
  bool wait_for_line(const std::string& expected) {
    for (;;) {
      auto line = read_line();
      if (line == expected)
        return true;
      if (line.empty() && std::feof(from_child_))
        return false;
    }
  }

  /// Writes `line` and a newline to the child's stdin.
  bool write_line(const std::string& line) {
    auto text = line + "\n";
    return to_child_ >= 0 && ::write(to_child_, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  }

  /// Closes the child's stdin (many helpers exit on EOF).
  void close_stdin() {
    if (to_child_ >= 0) {
      ::close(to_child_);
      to_child_ = -1;
    }
  }

  /// Sends `sig` to this child only.
  void signal(int sig) { ::kill(pid_, sig); }

  /// Waits for the child to end; returns its wait status.
  int wait() {
    int st = 0;
    ::waitpid(pid_, &st, 0);
    reaped_ = true;
    return st;
  }

  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int to_child_ = -1;
  FILE* from_child_ = nullptr;
  bool reaped_ = false;
};

}  // namespace ergon::test
