#include "read_pool.hpp"

#include "ergon/actors/reply.hpp"

namespace ergon::runtime {

read_pool::read_pool(opener open, size_t max_idle)
    : open_(std::move(open)), max_idle_(max_idle) {}

read_pool::opener read_pool::sqlite_reader(std::string path, storage::sqlite_options opts) {
  opts.read_only = true;
  return [path = std::move(path), opts]() -> result<std::unique_ptr<storage::db>> {
    auto d = storage::sqlite_db::open(path, opts);
    if (!d)
      return d.error();
    return std::unique_ptr<storage::db>{std::move(*d)};
  };
}

read_pool::opener read_pool::postgres_reader(storage::pg_options opts) {
  opts.read_only = true;
  return [opts]() -> result<std::unique_ptr<storage::db>> {
    auto d = storage::pg_db::open(opts);
    if (!d)
      return d.error();
    return std::unique_ptr<storage::db>{std::move(*d)};
  };
}

result<read_pool::lease> read_pool::borrow() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (cleared_)
      return actors::queue_closed();
    if (!idle_.empty()) {
      auto d = std::move(idle_.back());
      idle_.pop_back();
      return lease{*this, std::move(d)};
    }
  }
  auto d = open_();
  if (!d)
    return d.error();
  return lease{*this, std::move(*d)};
}

void read_pool::give_back(std::unique_ptr<storage::db> d) {
  d->end_reads();
  std::lock_guard<std::mutex> guard{mtx_};
  if (!cleared_ && idle_.size() < max_idle_)
    idle_.push_back(std::move(d));
}

void read_pool::clear() {
  std::lock_guard<std::mutex> guard{mtx_};
  cleared_ = true;
  idle_.clear();
}

}  // namespace ergon::runtime
