#include "commands.hpp"

#include <caf/io/middleman.hpp>

#include <algorithm>
#include <ostream>
#include <string>
#include <utility>

#include <ergon/queue.hpp>

#include "text.hpp"

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

namespace {

// The flag or argument an operator gave for a field the queue names. "id"
// is not one: the queue names it for a job in the wrong state.
const char* flag_of(const std::string& field, const std::string& command) {
  if ((command == "pause" || command == "set")
      && (field == "group" || field == "type" || field == "worker"))
    return "NAME";
  static const std::pair<const char*, const char*> flags[] = {
    {"limit", "--limit"}, {"type", "--type"},      {"group", "--group"},
    {"name", "--name"},   {"duration", "--for"},   {"older_than", "--older-than"},
    {"out", "OUT"},       {"after", "--after"},    {"weight", "--weight"},
    {"min_slots", "--min-slots"}, {"max_running", "--max-running"},
    {"rate.per_second", "--rate"}, {"rate.burst", "--burst"}, {"settings", "--weight"},
    {"tags", "--tag"}, {"tag_prefix", "--tag-prefix"}, {"status", "--status"},
  };
  for (auto& [f, flag] : flags)
    if (field == f)
      return flag;
  return nullptr;
}

}  // namespace

int context::fail(const status& given, const std::string& command) {
  auto st = given;
  // A value the operator gave that the queue refused is named as the flag
  // it came from, and is a usage error like a bad flag.
  if (st.code() == error::invalid_argument && !st.field().empty()
      && st.field().rfind("--", 0) != 0)
    if (auto flag = flag_of(st.field(), command))
      st = {error::invalid_argument, std::string{flag} + ": " + st.message(), flag};
  if (json_)
    err_ << json_views::of(st).dump() << '\n';
  else
    err_ << "ergonctl: " << printable(st.to_string()) << '\n';
  // A flag ("--limit") or an argument ("NAME") is the operator's input; a
  // field the queue names otherwise ("id": not failed) is its refusal.
  auto& f = st.field();
  bool usage = f.rfind("--", 0) == 0
               || (!f.empty() && std::all_of(f.begin(), f.end(), [](char ch) {
                     return (ch >= 'A' && ch <= 'Z') || ch == '_';
                   }));
  return st.code() == error::invalid_argument && usage ? exit_usage : exit_failed;
}

int with_owner(context& c, const char* doing, const char* why,
               const std::function<int(queue_link&)>& apply) {
  auto sys = c.system();
  if (!sys)
    return c.fail(sys.error());
  auto found = find_owner(c.reach().db);
  if (!found)
    return c.fail(found.error());
  auto owner = queue_link::owner(**sys, c.reach(), *found);
  if (!owner)
    return c.fail(owner.error());
  if (*owner)
    return apply(**owner);
  if (*found)
    return c.fail({error::busy, c.reach().db + " is owned by pid " + std::to_string((*found)->pid)
                                  + " on host " + (*found)->host + ", which takes no connections: "
                                  + doing + " needs the owner to listen (options::listen, or "
                                  "ergon-server)"});
  return c.fail({error::closed, "no program owns " + c.reach().db + ": " + why + ", so " + doing
                                  + " needs a running owner"});
}

}  // namespace ergon::ctl
