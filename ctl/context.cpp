#include "commands.hpp"

#include <caf/io/middleman.hpp>

#include <ostream>

#include <ergon/queue.hpp>

namespace ergon::ctl {

struct context::config : caf::actor_system_config {
  config() {
    load<caf::io::middleman>();
    queue::register_types(*this);
    // A short tool: two threads are plenty, and quit promptly.
    set("scheduler.max-threads", 2);
  }
};

context::context(reach_options reach, tls_options tls, bool json, std::ostream& out,
                 std::ostream& err)
    : reach_(std::move(reach)), tls_(std::move(tls)), json_(json), out_(out), err_(err) {}

// The system goes before its config.
context::~context() {
  sys_.reset();
  reader_.reset();
}

result<inspector*> context::reader() {
  if (!reader_) {
    auto in = queue::inspect(reach_.db);
    if (!in)
      return in.error();
    reader_.emplace(std::move(*in));
  }
  return &*reader_;
}

result<caf::actor_system*> context::system() {
  if (!sys_) {
    cfg_ = std::make_unique<config>();
    if (!tls_.certificate.empty())
      if (auto st = use_tls(*cfg_, tls_); !st)
        return st;
    sys_ = std::make_unique<caf::actor_system>(*cfg_);
  }
  return sys_.get();
}

int context::fail(const status& st) {
  if (json_)
    err_ << json_views::of(st).dump() << '\n';
  else
    err_ << "ergonctl: " << st << '\n';
  return st.code() == error::invalid_argument && st.field().rfind("--", 0) == 0 ? exit_usage
                                                                                 : exit_failed;
}

}  // namespace ergon::ctl
