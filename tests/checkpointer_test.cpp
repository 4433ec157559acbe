// The checkpointer: when the writer's WAL is folded into the database file,
// and by whom, on real files.
#define BOOST_TEST_MODULE checkpointer
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <vector>

#include "ergon/storage/checkpointer.hpp"
#include "ergon/storage/sqlite_db.hpp"
#include "support/test_support.hpp"

using namespace ergon;
using namespace ergon::storage;
using ergon::test::temp_dir;

namespace {

constexpr int64_t page_bytes = 4'096;
constexpr int64_t frame_bytes = page_bytes + 24;  // each WAL frame has a header

// Four rows of 3,000 bytes: about five pages a commit.
constexpr const char* add_rows =
  "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 4) "
  "INSERT INTO t SELECT randomblob(3000) FROM n";

// Limits no WAL in these tests reaches.
constexpr checkpoint_limits never{1'000'000, 1'000'000};

// Commits that take the WAL past SQLite's autocheckpoint of 1,000 pages.
constexpr int past_autocheckpoint = 250;

struct file_db {
  temp_dir dir;
  std::string path = dir.file("c.db");
  std::unique_ptr<sqlite_db> writer = open_writer();

  std::unique_ptr<sqlite_db> open_writer() {
    auto d = sqlite_db::open(path, {});
    BOOST_REQUIRE(d);
    BOOST_REQUIRE((*d)->exec("CREATE TABLE t (x BLOB)"));
    return std::move(*d);
  }

  void commit_rows(int commits) {
    for (int i = 0; i < commits; ++i)
      BOOST_REQUIRE(writer->exec(add_rows));
  }

  int64_t pages() {
    auto n = writer->pragma_text("PRAGMA page_count");
    BOOST_REQUIRE(n);
    return std::stoll(*n);
  }

  // How much the database file grows over `commits` commits.
  int64_t file_growth(int commits) {
    auto before = file_bytes();
    commit_rows(commits);
    return file_bytes() - before;
  }

  int64_t file_bytes() { return static_cast<int64_t>(std::filesystem::file_size(path)); }

  int64_t wal_frames() {
    auto bytes = static_cast<int64_t>(std::filesystem::file_size(path + "-wal"));
    return bytes <= 32 ? 0 : (bytes - 32) / frame_bytes;
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_commit_asks_by_the_wal_length_since_the_last_pass) {
  using step = checkpoint_step;
  struct row {
    int wal_pages, folded;
    step expected;
  };
  checkpoint_limits limits{10, 40};
  for (auto [wal, folded, expected] : std::vector<row>{
         {0, 0, step::none},
         {9, 0, step::none},
         {10, 0, step::background},
         {39, 0, step::background},
         {40, 0, step::inline_now},
         {1'000'000, 0, step::inline_now},
         {29, 20, step::none},
         {30, 20, step::background},
         {40, 39, step::inline_now},  // the bound, however little is new
         {5, 20, step::none},         // shorter than what was folded: started over
         {12, 20, step::background},
       })
    BOOST_TEST((decide_checkpoint(wal, folded, limits) == expected),
               "wal " << wal << ", folded " << folded);
  checkpoint_limits defaults;
  BOOST_TEST((decide_checkpoint(999, 0, defaults) == step::none));
  BOOST_TEST((decide_checkpoint(1'000, 0, defaults) == step::background));
  BOOST_TEST((decide_checkpoint(8'000, 0, defaults) == step::inline_now));
}

BOOST_AUTO_TEST_CASE(the_thread_folds_the_wal_in) {
  file_db f;
  auto c = checkpointer::start(*f.writer, {}, {10, 1'000'000});
  BOOST_REQUIRE(c);
  auto before = f.file_bytes();
  f.commit_rows(20);
  (*c)->wait_idle();
  BOOST_TEST((*c)->background_passes() >= 1u);
  BOOST_TEST((*c)->inline_passes() == 0u);
  BOOST_TEST(f.file_bytes() > before);
  BOOST_TEST(f.file_bytes() <= f.pages() * page_bytes);
}

BOOST_AUTO_TEST_CASE(with_the_writer_still_a_pass_folds_every_frame_in) {
  file_db f;
  auto c = checkpointer::start(*f.writer, {}, {10, 1'000'000});
  BOOST_REQUIRE(c);
  // One commit past the threshold, then nothing: its pass takes it all.
  BOOST_REQUIRE(f.writer->exec(
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20) "
    "INSERT INTO t SELECT randomblob(3000) FROM n"));
  (*c)->wait_idle();
  BOOST_TEST((*c)->background_passes() == 1u);
  BOOST_TEST(f.file_bytes() == f.pages() * page_bytes);
}

BOOST_AUTO_TEST_CASE(the_writer_no_longer_checkpoints_within_commits) {
  file_db f;
  auto c = checkpointer::start(*f.writer, {}, never);
  BOOST_REQUIRE(c);
  BOOST_TEST(f.file_growth(past_autocheckpoint) == 0);
  BOOST_TEST(f.wal_frames() > 1'000);
  BOOST_TEST((*c)->background_passes() == 0u);
  BOOST_TEST((*c)->inline_passes() == 0u);
}

BOOST_AUTO_TEST_CASE(the_writer_folds_in_itself_past_the_bound) {
  file_db f;
  auto c = checkpointer::start(*f.writer, {}, {1'000'000, 20});
  BOOST_REQUIRE(c);
  int64_t most = 0;
  for (int i = 0; i < 100; ++i) {
    f.commit_rows(1);
    most = std::max(most, f.wal_frames());
  }
  BOOST_TEST((*c)->inline_passes() >= 1u);
  BOOST_TEST((*c)->background_passes() == 0u);
  // Below the bound before a commit, plus that commit: not the 500 frames
  // of 100 commits.
  BOOST_TEST(most < 20 + 10);
}

BOOST_AUTO_TEST_CASE(the_writer_gets_its_autocheckpoint_back) {
  file_db f;
  BOOST_REQUIRE(checkpointer::start(*f.writer, {}, never));
  BOOST_TEST(f.file_growth(past_autocheckpoint) > 0);
}

BOOST_AUTO_TEST_CASE(a_private_database_has_no_wal_to_fold) {
  auto d = sqlite_db::open(":memory:", {});
  BOOST_REQUIRE(d);
  auto c = checkpointer::start(**d, {});
  BOOST_REQUIRE(!c);
  BOOST_TEST((c.error().code() == error::invalid_argument));
  BOOST_TEST(c.error().field() == "path");
}
