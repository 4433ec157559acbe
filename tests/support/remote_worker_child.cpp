// A worker process for the remote-worker tests: connects to a queue at
// host:port (or host:port1,port2,...: servers that may own it, tried in
// turn) and runs jobs of type "job" until SIGTERM, then stops its
// worker and exits 0. It writes one line per event to stdout:
//   ready                       the worker is registered
//   started <payload>           job code started (mode hold and late)
//   outcome <payload> <code>    what complete() returned (mode late, and
//                               step for a payload "complete")
//   progressed <payload>        three progress reports made (mode progress)
//   returned <payload> <flag>   code returned; flag: ctx.cancelled() (hold, progress)
//   yielded <payload> <status>  what yield() returned (mode yield)
//   resumed <payload> <try>     started from its checkpoint (mode yield)
//   stopped <status>            after SIGTERM
//   submit|counts|purge <code>[: message]
//                               what the queue answered (mode probe, before ready)
//
// Modes: complete (complete "done:<payload>" at once); hold (wait until the
// attempt is cancelled, then return without an outcome); late (wait until
// cancelled, then complete anyway: a late result that must be fenced);
// progress (report 1/3 "one", 2/3 "two", 3/3 "three" at once, then hold);
// fail (fail for good with "boom:<payload>"); yield (a payload starting with
// "now" completes at once; others wait until asked to yield, checkpoint
// "resumed:<payload>" and yield, and complete when resumed from it); step
// (wait for a line on stdin, then call complete() if the payload is
// "complete", else return normally: so the test orders its cancel before);
// side (append "<payload>\n" to $ERGON_TEST_SIDE_FILE in one write, work
// 200 ms, or less if cancelled, then complete "done:<payload>": the file
// shows how many times each job's code ran); parent (a payload "kid..."
// completes "done:<payload>"; any other submits three children "kid0",
// "kid1", "kid2" with the checkpoint "join" and says "spawned <status>";
// run again from "join", it says "joined <results>", the children's
// results read with dependency_results, and completes with them); probe
// (first submits, reads the counts and purges, saying what the queue
// answered each, as roles decide; then completes like complete).
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

#include "ergon/job_builder.hpp"
#include "ergon/queue.hpp"
#include "ergon/queue_actor.hpp"

namespace {

std::mutex out_mtx;

void say(const std::string& line) {
  std::lock_guard<std::mutex> guard{out_mtx};
  std::cout << line << std::endl;
}

struct config : caf::actor_system_config {
  config() {
    load<caf::io::middleman>();
    ergon::queue::register_types(*this);
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: " << argv[0] << " HOST PORT complete|hold|late [CONCURRENCY]\n";
    return 2;
  }
  ergon::connect_options where;
  for (std::string ports = argv[2];;) {
    auto comma = ports.find(',');
    where.addresses.push_back({argv[1], static_cast<uint16_t>(std::stoi(ports.substr(0, comma)))});
    if (comma == std::string::npos)
      break;
    ports = ports.substr(comma + 1);
  }
  std::string mode = argv[3];
  int concurrency = argc > 4 ? std::stoi(argv[4]) : 4;
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  config cfg;
  if (auto ms = std::getenv("ERGON_TEST_PEER_TIMEOUT_MS"))
    if (auto st = ergon::set_peer_timeout(cfg, std::chrono::milliseconds{std::stoi(ms)}); !st) {
      say("error " + st.to_string());
      return 1;
    }
  caf::actor_system sys{cfg};
  if (auto secret = std::getenv("ERGON_TEST_SECRET"))
    where.creds.secret = secret;
  auto q = where.addresses.size() == 1
             ? ergon::connect(sys, where.addresses[0].host, where.addresses[0].port, where.creds)
             : ergon::connect(sys, where);
  if (!q) {
    say("error " + q.error().to_string());
    return 1;
  }
  if (mode == "probe") {
    caf::scoped_actor self{sys};
    auto said = [](const char* what, const caf::error& e) {
      auto st = ergon::to_status(e);
      say(std::string{what} + " " + (st.ok() ? std::string{"ok"}
                                            : ergon::to_string(st.code()) + (": " + st.message())));
    };
    self->request(*q, caf::infinite, ergon::submit_atom::value, *ergon::job_builder("job").payload("probe").build())
      .receive([&](ergon::job_id&) { said("submit", {}); }, [&](caf::error& e) { said("submit", e); });
    self->request(*q, caf::infinite, ergon::counts_atom::value)
      .receive([&](ergon::status_counts&) { said("counts", {}); },
               [&](caf::error& e) { said("counts", e); });
    self->request(*q, caf::infinite, ergon::purge_failed_atom::value, std::chrono::milliseconds{0})
      .receive([&](int64_t) { said("purge", {}); }, [&](caf::error& e) { said("purge", e); });
  }
  ergon::worker_options opts;
  opts.name = "child-" + mode;
  opts.max_concurrency = concurrency;
  if (mode == "progress")
    opts.progress_interval = std::chrono::milliseconds::zero();
  opts.runners["job"] = [mode](ergon::job_context& ctx) {
    if (mode == "complete" || mode == "probe") {
      ctx.log(ergon::log_level::info, "completing " + ctx.payload());
      ctx.complete("done:" + ctx.payload());
      return;
    }
    if (mode == "side") {
      auto line = ctx.payload() + "\n";
      int fd = ::open(std::getenv("ERGON_TEST_SIDE_FILE"), O_WRONLY | O_APPEND | O_CREAT, 0600);
      if (fd < 0 || ::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
        say("error side file");
      ::close(fd);
      ctx.wait_cancelled(std::chrono::milliseconds(200));  // the job's work
      ctx.complete("done:" + ctx.payload());
      return;
    }
    if (mode == "fail") {
      ctx.fail_permanently("boom:" + ctx.payload());
      return;
    }
    if (mode == "parent") {
      if (ctx.payload().rfind("kid", 0) == 0) {
        ctx.complete("done:" + ctx.payload());
      } else if (ctx.payload() == "join") {
        auto results = ctx.dependency_results();
        std::string joined;
        if (!results)
          joined = results.error().to_string();
        else
          for (auto& r : *results)
            joined += (joined.empty() ? "" : ",") + r.result.value_or("-");
        say("joined " + joined);
        ctx.complete(joined);
      } else {
        std::vector<ergon::job> kids;
        for (int i = 0; i < 3; ++i)
          kids.push_back(*ergon::job_builder("job").payload("kid" + std::to_string(i)).build());
        auto st = ctx.submit_children(std::move(kids), "join");
        say("spawned " + (st.ok() ? std::string{"ok"} : st.to_string()));
      }
      return;
    }
    if (mode == "snooze") {
      // Not yet, once: back in 10 ms with a checkpoint; then done.
      if (ctx.payload().rfind("later:", 0) == 0) {
        say("ran " + ctx.payload() + " " + std::to_string(ctx.try_number()));
        return;
      }
      if (auto st = ctx.checkpoint("later:" + ctx.payload()); !st)
        say("error " + st.to_string());
      auto st = ctx.snooze(std::chrono::milliseconds(10));
      say("snoozed " + ctx.payload() + " " + (st.ok() ? std::string{"ok"} : st.to_string()));
      return;
    }
    if (mode == "yield") {
      if (ctx.payload().rfind("now", 0) == 0)
        return;
      if (ctx.payload().rfind("resumed:", 0) == 0) {
        say("resumed " + ctx.payload() + " " + std::to_string(ctx.try_number()));
        return;
      }
      say("started " + ctx.payload());
      if (ctx.wait_preempted(std::chrono::milliseconds::max())) {
        if (auto st = ctx.checkpoint("resumed:" + ctx.payload()); !st)
          say("error " + st.to_string());
        auto st = ctx.yield();
        say("yielded " + ctx.payload() + " " + (st.ok() ? std::string{"ok"} : st.to_string()));
      }
      return;
    }
    say("started " + ctx.payload());
    if (mode == "step") {
      std::string go;
      std::getline(std::cin, go);
      if (ctx.payload() == "complete")
        say("outcome " + ctx.payload() + " " + ergon::to_string(ctx.complete("result").code()));
      else
        say("returned " + ctx.payload());
      return;
    }
    if (mode == "progress") {
      const char* words[] = {"one", "two", "three"};
      for (int64_t i = 1; i <= 3; ++i)
        if (auto st = ctx.progress(i, 3, words[i - 1]); !st)
          say("error " + st.to_string());
      say("progressed " + ctx.payload());
    }
    ctx.wait_cancelled(std::chrono::milliseconds::max());
    if (mode == "late") {
      auto st = ctx.complete("late:" + ctx.payload());
      say("outcome " + ctx.payload() + " " + ergon::to_string(st.code()));
    } else {
      say("returned " + ctx.payload() + " " + (ctx.cancelled() ? "cancelled" : "not-cancelled"));
    }
  };
  auto w = ergon::start_worker(*q, std::move(opts));
  if (!w) {
    say("error " + w.error().to_string());
    return 1;
  }
  say("ready");
  int sig = 0;
  sigwait(&stop_signals, &sig);
  auto st = w->stop(std::chrono::seconds(10));
  say("stopped " + st.to_string());
  return 0;
}
