#include "ergon/storage/op/savepoint.hpp"

namespace ergon::storage {
namespace {

constexpr const char* begin_savepoint = "SAVEPOINT request";
constexpr const char* release_savepoint = "RELEASE request";
constexpr const char* rollback_savepoint = "ROLLBACK TO request";

}  // namespace

savepoint::savepoint(db& d) : db_(d) {
  if (auto s = d.prepare(begin_savepoint); !s)
    begin_ = s.error();
  else
    begin_ = d.send(**s);
  done_ = !begin_.ok();
}

status savepoint::release() {
  auto s = db_.prepare(release_savepoint);
  if (!s)
    return s.error();
  auto st = db_.send(**s);
  done_ = st.ok();
  return st;
}

savepoint::~savepoint() {
  if (done_)
    return;
  // ROLLBACK TO keeps the savepoint open; RELEASE then discards it.
  if (auto s = db_.prepare(rollback_savepoint))
    db_.run(**s);
  if (auto s = db_.prepare(release_savepoint))
    db_.run(**s);
}

}  // namespace ergon::storage
