// read_pool: read-only connections for queries, so reads never wait behind
// the writer. Internal to runtime/.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ergon/storage/pg_db.hpp"
#include "ergon/storage/sqlite_db.hpp"

namespace ergon::runtime {

class read_pool {
 public:
  /// How a new read connection opens.
  using opener = std::function<result<std::unique_ptr<storage::db>>()>;

  read_pool(opener open, size_t max_idle);

  /// Opens read-only connections to the SQLite file at `path`.
  static opener sqlite_reader(std::string path, storage::sqlite_options opts);
  /// Opens read-only sessions on the PostgreSQL server and schema of `opts`.
  static opener postgres_reader(storage::pg_options opts);

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
  opener open_;
  size_t max_idle_;
  std::mutex mtx_;
  std::vector<std::unique_ptr<storage::db>> idle_;
  bool cleared_ = false;
};

}  // namespace ergon::runtime
