// standby_server: a thread that reads the queue's lease while it stands by
// (standby_policy decides), opens the queue when the lease can be taken,
// and stands by again when that queue closes by itself.
#include "ergon/standby.hpp"

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <unistd.h>

#include <condition_variable>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

#include "ergon/storage/pg_db.hpp"
#include "ergon/storage/pg_lease.hpp"
#include "http_endpoint.hpp"
#include "moved_from.hpp"
#include "standby_policy.hpp"
#include "transport/listening_socket.hpp"
#include "bootstrap.hpp"

namespace ergon {

using wake_atom = caf::atom_constant<caf::atom("ergwake")>;

const char* to_string(server_role r) noexcept {
  switch (r) {
    case server_role::standby: return "standby";
    case server_role::owner: return "owner";
    case server_role::stopped: return "stopped";
  }
  return "?";
}

class standby_server::impl {
 public:
  impl(caf::actor_system& sys, std::string location, options opts, standby_options standby,
       storage::pg_options reader_opts, std::unique_ptr<storage::pg_db> reader,
       std::function<void(const role_change&)> on_change)
      : sys_(sys), location_(std::move(location)), opts_(std::move(opts)),
        policy_(standby.poll), reader_opts_(std::move(reader_opts)), reader_(std::move(reader)),
        on_change_(std::move(on_change)) {
    http_ = opts_.http;
    opts_.http.reset();  // served here in both roles
  }

  ~impl() { stop(); }

  // The first read comes before start returns, so role() and the pages
  // know the owner from the start.
  status begin() {
    if (http_)
      if (auto st = serve_standby_page(); !st)
        return st;
    auto first = read_and_decide();
    thread_ = std::thread([this, first] { run(first); });
    return {};
  }

  server_role role() const {
    std::lock_guard<std::mutex> lock(mtx_);
    return role_;
  }

  queue_actor queue() const {
    std::lock_guard<std::mutex> lock(mtx_);
    return queue_;
  }

  result<uint16_t> http_port() const {
    std::lock_guard<std::mutex> lock(mtx_);
    if (!http_)
      return status{error::invalid_argument, "this server has no HTTP endpoint (options::http)",
                    "http"};
    return http_->port;
  }

  int64_t takeovers() const {
    std::lock_guard<std::mutex> lock(mtx_);
    return page_.takeovers;
  }

  int64_t step_downs() const {
    std::lock_guard<std::mutex> lock(mtx_);
    return page_.step_downs;
  }

  status stop() {
    {
      std::lock_guard<std::mutex> lock(mtx_);
      stopping_ = true;
      if (waker_)
        caf::anon_send(waker_, wake_atom::value);
      if (reader_)
        reader_->interrupt();  // a read waiting on a silent server
    }
    woken_.notify_all();
    {
      std::lock_guard<std::mutex> lock(join_mtx_);
      if (thread_.joinable())
        thread_.join();
    }
    // Outside the lock: requests being answered take it.
    take_page_front().reset();
    std::lock_guard<std::mutex> lock(mtx_);
    return close_status_;
  }

 private:
  // The standby's pages on the HTTP port; once bound, the port stays.
  status serve_standby_page() {
    auto front = runtime::serve_standby_http(*http_, [this] {
      std::lock_guard<std::mutex> lock(mtx_);
      return page_;
    });
    if (!front)
      return front.error();
    std::lock_guard<std::mutex> lock(mtx_);
    http_->port = (*front)->port();
    page_front_ = std::move(*front);
    return {};
  }

  std::unique_ptr<runtime::front_end> take_page_front() {
    std::lock_guard<std::mutex> lock(mtx_);
    return std::move(page_front_);
  }

  void report(server_role r, status why, queue_actor q = {}) {
    {
      std::lock_guard<std::mutex> lock(mtx_);
      role_ = r;
      queue_ = q;
    }
    if (!on_change_)
      return;
    try {
      on_change_(role_change{r, std::move(why), std::move(q)});
    } catch (...) {  // documented: ignored
    }
  }

  // Waits `d` unless stop() comes first; true if it did.
  bool wait(std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock(mtx_);
    return woken_.wait_for(lock, d, [this] { return stopping_; });
  }

  bool stopping() {
    std::lock_guard<std::mutex> lock(mtx_);
    return stopping_;
  }

  result<std::optional<storage::pg_lease::view>> read_lease() {
    if (!reader_) {
      auto opened = storage::pg_db::open(reader_opts_);
      if (!opened)
        return opened.error();
      std::lock_guard<std::mutex> lock(mtx_);
      if (stopping_)
        return status{error::closed, "stopping"};
      reader_ = std::move(*opened);
    }
    return storage::pg_lease::read(*reader_);
  }

  void note_read(const result<std::optional<storage::pg_lease::view>>& lease) {
    std::lock_guard<std::mutex> lock(mtx_);
    page_.read_error = lease ? std::string{} : lease.error().to_string();
    if (!lease)
      return;
    page_.owner_known = lease->has_value() && !(*lease)->takeable();
    if (!page_.owner_known)
      return;
    page_.owner_host = (*lease)->host;
    page_.owner_pid = (*lease)->pid;
    page_.epoch = (*lease)->epoch;
    page_.lease_ms_left = (*lease)->ms_left;
  }

  runtime::standby_policy::step read_and_decide() {
    auto lease = read_lease();
    note_read(lease);
    return policy_.read(lease);
  }

  void run(runtime::standby_policy::step next) {
    while (!stopping()) {
      if (next.take_over) {
        auto after = serve_as_owner();
        if (!after)
          break;  // stopped, or a client closed the queue
        next = *after;
        continue;
      }
      if (wait(next.wait))
        break;
      next = read_and_decide();
    }
    report(server_role::stopped, {error::closed, stop_reason_});
  }

  // Reopens the standby's pages once the queue's own endpoint is gone.
  void reopen_page() {
    if (!http_)
      return;
    if (auto st = serve_standby_page(); !st)
      std::cerr << "ergon: serving the standby's HTTP page: " << st << '\n';
  }

  // Takes the queue over and serves it until it closes. Returns what the
  // standby does next (the takeover failed, or the queue closed by itself),
  // or nothing when it is to stop.
  std::optional<runtime::standby_policy::step> serve_as_owner() {
    auto opts = opts_;
    {
      std::lock_guard<std::mutex> lock(mtx_);
      opts.http = http_;
    }
    take_page_front().reset();  // the queue's own endpoint takes the port
    auto q = spawn_queue(sys_, location_, opts);
    if (!q) {
      if (q.error().code() != error::busy)
        std::cerr << "ergon: taking " << location_ << " over: " << q.error() << '\n';
      reopen_page();
      return policy_.takeover_failed(q.error());
    }
    if (opts_.listen && opts_.listen->port == 0)
      if (auto port = listening_port(*q))
        opts_.listen->port = *port;
    {
      std::lock_guard<std::mutex> lock(mtx_);
      ++page_.takeovers;
    }
    report(server_role::owner, {}, *q);
    auto gone = serve_until_closed(*q);
    reopen_page();
    if (gone)
      return std::nullopt;
    note_read(read_lease());  // the pages name the new owner at once
    {
      std::lock_guard<std::mutex> lock(mtx_);
      ++page_.step_downs;
    }
    report(server_role::standby, gone);
    return policy_.stepped_down();
  }

  // Until `q` is down: its reason if the queue closed by itself, ok if a
  // client closed it or stop() did.
  status serve_until_closed(const queue_actor& q) {
    caf::scoped_actor self{sys_};
    {
      std::lock_guard<std::mutex> lock(mtx_);
      waker_ = caf::actor{self};
    }
    self->monitor(q);
    caf::error reason;
    bool down = false;
    bool closing = false;
    while (!down) {
      if (!closing && stopping()) {
        closing = true;
        self->request(q, caf::infinite, close_atom::value)
          .receive([](ok_atom) {},
                   [this](caf::error& e) {
                     std::lock_guard<std::mutex> lock(mtx_);
                     close_status_ = to_status(e);
                   });
      }
      self->receive([&](caf::down_msg& d) {
                      down = true;
                      reason = std::move(d.reason);
                    },
                    [](wake_atom) {});
    }
    {
      std::lock_guard<std::mutex> lock(mtx_);
      waker_ = caf::actor{};
    }
    if (closing)
      return {};
    // Only a close someone asked for ends it normally; anything else is
    // the queue closing by itself.
    if (!reason) {
      stop_reason_ = "a client closed the queue";
      return {};
    }
    if (reason.category() == error_category)
      return to_status(reason);
    return {error::internal, "the queue's actor went down: " + sys_.render(reason)};
  }

  caf::actor_system& sys_;
  std::string location_;
  options opts_;
  std::optional<http_options> http_;
  runtime::standby_policy policy_;
  storage::pg_options reader_opts_;
  std::unique_ptr<storage::pg_db> reader_;  // set under mtx_, used by the thread
  std::function<void(const role_change&)> on_change_;
  std::string stop_reason_ = "stopped";

  mutable std::mutex mtx_;
  std::condition_variable woken_;
  bool stopping_ = false;
  server_role role_ = server_role::standby;
  queue_actor queue_;
  caf::actor waker_;  // while owner: the thread's receiver
  runtime::standby_status page_;
  std::unique_ptr<runtime::front_end> page_front_;
  status close_status_;
  std::mutex join_mtx_;  // stop() from two threads
  std::thread thread_;
};

namespace {

// A port that can't be bound fails the start, not every takeover.
status check_port(const std::string& address, uint16_t port) {
  if (port == 0)
    return {};
  auto fd = transport::listen_on(address, port);
  if (!fd)
    return fd.error();
  ::close(*fd);
  return {};
}

}  // namespace

result<standby_server> standby_server::start(caf::actor_system& sys, const std::string& location,
                                             options opts, standby_options standby,
                                             std::function<void(const role_change&)> on_change) {
  if (!storage::names_postgres(location))
    return status{error::invalid_argument,
                  "a standby server needs a PostgreSQL queue (postgresql://...): a SQLite "
                  "queue's file lives on one machine's disk, so no other host can take it over",
                  "location"};
  if (auto st = runtime::validate_in(sys, location, opts); !st)
    return st;
  if (standby.poll < std::chrono::milliseconds(10) || standby.poll > std::chrono::seconds(60))
    return status{error::invalid_argument,
                  "must be between 10 ms and 60 s, got " + std::to_string(standby.poll.count())
                    + " ms",
                  "poll"};
  if (opts.listen)
    if (auto st = check_port(opts.listen->address, opts.listen->port); !st)
      return st;
  auto reader = storage::parse_pg_uri(location);
  if (!reader)
    return reader.error();
  reader->read_only = true;
  reader->dead_peer_after = opts.lease_time / 3;
  // Wrong credentials or options fail now; a server that is down is waited
  // for (the first read opens the session then).
  auto session = storage::pg_db::open(*reader);
  if (!session && session.error().code() != error::unreachable)
    return session.error();
  auto p = std::make_shared<impl>(sys, location, std::move(opts), standby, std::move(*reader),
                                  session ? std::move(*session) : nullptr,
                                  std::move(on_change));
  if (auto st = p->begin(); !st)
    return st;
  return standby_server{std::move(p)};
}

standby_server::standby_server(std::shared_ptr<impl> p) noexcept : impl_(std::move(p)) {}
standby_server::standby_server(standby_server&&) noexcept = default;
standby_server& standby_server::operator=(standby_server&& other) noexcept {
  if (this != &other) {
    if (impl_)
      impl_->stop();
    impl_ = std::move(other.impl_);
  }
  return *this;
}
standby_server::~standby_server() {
  if (impl_)
    impl_->stop();
}

server_role standby_server::role() const {
  return impl_ ? impl_->role() : server_role::stopped;
}

queue_actor standby_server::queue() const { return impl_ ? impl_->queue() : queue_actor{}; }

result<uint16_t> standby_server::http_port() const {
  if (!impl_)
    return runtime::moved_from("standby_server");
  return impl_->http_port();
}

int64_t standby_server::takeovers() const { return impl_ ? impl_->takeovers() : 0; }
int64_t standby_server::step_downs() const { return impl_ ? impl_->step_downs() : 0; }

status standby_server::stop() {
  if (!impl_)
    return runtime::moved_from("standby_server");
  return impl_->stop();
}

}  // namespace ergon
