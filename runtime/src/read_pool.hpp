// read_pool: read-only connections for queries, so reads never wait behind
// the writer. Internal to runtime/.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ergon/storage/db.hpp"

namespace ergon::runtime {

class read_pool {
 public:
  read_pool(std::string path, storage::db_options opts, size_t max_idle);

  /// A connection returned to the pool when the lease ends.
  class lease {
   public:
    lease(read_pool& pool, std::unique_ptr<storage::db> d)
        : pool_(&pool), db_(std::move(d)) {}
    lease(lease&&) = default;
    ~lease() {
      if (db_)
        pool_->give_back(std::move(db_));
    }
    storage::db& operator*() const { return *db_; }

   private:
    read_pool* pool_;
    std::unique_ptr<storage::db> db_;
  };

  /// An idle connection, or a new one if none is idle.
  result<lease> borrow();

  /// Closes idle connections; leases still out close when returned.
  void clear();

 private:
  void give_back(std::unique_ptr<storage::db> d);
  std::string path_;
  storage::db_options opts_;
  size_t max_idle_;
  std::mutex mtx_;
  std::vector<std::unique_ptr<storage::db>> idle_;
  bool cleared_ = false;
};

}  // namespace ergon::runtime
