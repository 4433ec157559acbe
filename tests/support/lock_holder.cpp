// Test helper: holds the write lock of an SQLite file until its stdin closes.
//   ergon-test-lock-holder <db path>
// Prints "locked" once it holds the lock.
#include <sqlite3.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2)
    return 2;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK)
    return 1;
  sqlite3_busy_timeout(db, 10'000);
  if (sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK)
    return 1;
  std::puts("locked");
  std::fflush(stdout);
  while (std::getchar() != EOF) {
  }
  sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  return 0;
}
