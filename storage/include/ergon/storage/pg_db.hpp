// pg_db: a db on a PostgreSQL server, through libpq (storage/src/pg_db.cpp).
//
// Statements use the extended protocol with binary parameters and results.
// Each is prepared once per session; the server infers its parameter types,
// and a bound value is sent in the form the parameter takes. All tables live
// in one schema, which is the session's search_path, so the SQL both engines
// share names tables without a schema.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/storage/db.hpp"

struct pg_conn;
struct pg_result;

namespace ergon::storage {

/// Where a PostgreSQL queue lives and how its connections behave.
struct pg_options {
  /// A libpq connection URI (postgresql://user@host:port/db?...) or keyword
  /// string, without ergon's own `schema` parameter.
  std::string conninfo;
  /// The schema that holds the queue's tables: a plain lowercase SQL
  /// identifier (letters, digits, '_'; at most 63 bytes).
  std::string schema = "ergon";
  /// How long connecting may take before failing `unreachable`.
  std::chrono::milliseconds connect_timeout{10'000};
  /// When set, a server that stops answering fails the session's
  /// statements after about this long, not after the kernel's minutes:
  /// TCP keepalives and tcp_user_timeout, unless the connection string
  /// sets them itself. Zero: libpq's defaults.
  std::chrono::milliseconds dead_peer_after{0};
  /// Sessions that only read (default_transaction_read_only).
  bool read_only = false;
  /// How long a fenced connection tries to learn the fate of a COMMIT whose
  /// answer was lost (pg_db::fence) before it halts writing.
  std::chrono::milliseconds commit_outcome_wait{30'000};
};

/// Splits `uri` into libpq's part and ergon's `schema` query parameter,
/// which libpq would refuse. Errors: invalid_argument naming "schema" (not a
/// plain identifier) or "db" (not a postgresql:// or postgres:// URI).
result<pg_options> parse_pg_uri(const std::string& uri);

/// Ok if `schema` is a plain lowercase SQL identifier (a-z, 0-9, '_', not
/// starting with a digit, at most 63 bytes), which needs no quoting;
/// otherwise invalid_argument naming "schema".
status check_schema_name(std::string_view schema);

/// Whether `location` names a PostgreSQL server rather than a SQLite file.
bool names_postgres(std::string_view location) noexcept;

class pg_db;

/// Rows in COPY's binary format, for pg_db::copy_in: each row is
/// begin_row(fields) and then that many fields, in the column list's order
/// and with the columns' own types (bigint, double precision, text, bytea).
class pg_copy_rows {
 public:
  void begin_row(int16_t fields);
  void add(int64_t v);
  void add(std::optional<int64_t> v);
  void add(double v);
  /// text or bytea, as they are; nullopt: NULL.
  void add(std::optional<std::string_view> v);

 private:
  friend class pg_db;
  explicit pg_copy_rows(std::string& data) noexcept : data_(data) {}
  std::string& data_;  // the rows not sent yet (pg_db's, kept between COPYs)
};

/// A prepared PostgreSQL statement. After a reconnect it prepares itself
/// again on the new session before it runs.
class pg_stmt final : public stmt {
 public:
  pg_stmt(pg_db& owner, const char* sql, std::string text, std::string name);
  ~pg_stmt() override;

  void bind(int i, int64_t v) override;
  void bind(int i, double v) override;
  using stmt::bind;
  void bind_text(int i, std::string_view v) override;
  void bind_blob(int i, std::string_view v) override;
  void bind_null(int i) override;
  void bind_text_static(int i, std::string_view v) override;
  void bind_blob_static(int i, std::string_view v) override;
  /// Arrays, for statements that take a whole batch in one parameter
  /// (`id = ANY(…)`): an int8[] or bytea[] parameter. Unset elements are
  /// NULL.
  void bind_ints(int i, const std::vector<int64_t>& v);
  void bind_blobs(int i, const std::vector<std::optional<std::string_view>>& v);
  bool step() override;
  int64_t column_int(int i) const override;
  double column_double(int i) const override;
  bool column_is_null(int i) const override;
  std::string column_text(int i) const override;
  std::string column_blob(int i) const override;
  void reset() override;
  /// Clears every binding (db::prepare does).
  void clear();

 private:
  struct param {
    std::string own;          // the bytes, unless they are borrowed
    const char* data = nullptr;
    int length = 0;
    int format = 1;           // 1 binary, 0 text
    bool null = true;
  };
  friend class pg_db;
  struct wire_form;
  status ensure_prepared();
  status ready_to_run();
  wire_form wire() const;
  bool send_prepared();
  /// Reads the result that run() or the pipeline left in res_.
  bool take_result();
  param& slot(int i);
  unsigned type_of(int i) const;
  void put_text_form(int i, std::string value);
  const char* value(int i, int& length) const;

  pg_db& db_;
  const char* sql_;      // the cache key: ergon's text with ?N parameters
  std::string text_;     // the text sent, with $N parameters
  std::string name_;
  uint64_t session_ = 0; // the session it was prepared on; 0: none yet
  std::vector<unsigned> types_;  // what the server inferred per parameter
  std::vector<param> params_;
  pg_result* res_ = nullptr;
  int row_ = -1;
  int rows_ = 0;
  bool ran_ = false;
  bool awaiting_ = false;  // sent by pg_db::send_for_rows, its result not read yet
  bool unread_rows_ = false;  // its result came with the pipeline; step() takes it
};

/// An open PostgreSQL session.
class pg_db final : public db {
 public:
  /// Connects, sets the session's search_path to the schema, and checks the
  /// server (PostgreSQL 13 or later). Errors: unreachable (no server, or it
  /// refused), unauthenticated (its authentication failed),
  /// invalid_argument (the options).
  static result<std::unique_ptr<pg_db>> open(const pg_options& opts);

  ~pg_db() override;

  storage::engine engine() const noexcept override { return engine::postgres; }
  const std::string& location() const noexcept override { return location_; }
  using db::prepare;
  result<stmt*> prepare(const char* sql) override;
  status exec(const char* sql) override;
  /// Runs `copy_sql` (COPY … FROM STDIN (FORMAT binary)) with `count` rows,
  /// in the transaction under way: `add_row(rows, k)` adds row k. The rows
  /// go out in pieces as they are made, so the server stores the first
  /// while later ones are made. changes() is the rows copied.
  status copy_in(const char* copy_sql, size_t count,
                 const std::function<void(pg_copy_rows&, size_t)>& add_row);
  /// Sends `s` in pipeline mode with whatever follows it (db::send).
  status send(stmt& s) override;
  /// Sends `s` in pipeline mode and leaves its rows to step(): they come
  /// back with the next statement that is read, in the same round trip, or
  /// at its first step(). As with send(), a failure of `s` or of anything
  /// sent with it rolls the whole transaction back; step() then fails with
  /// it.
  status send_for_rows(pg_stmt& s);
  status begin_write() override;
  /// Fails (internal) if the transaction had failed: PostgreSQL then rolls
  /// it back and still answers COMMIT without an error.
  status commit() override;
  void rollback() noexcept override;
  bool in_transaction() const noexcept override;
  void end_reads() noexcept override {}
  int64_t changes() const noexcept override { return changes_; }

  /// Makes every later begin_write check, inside its transaction, that the
  /// lease row still carries `epoch` (ownership.hpp), and take a share lock
  /// on it: a successor's takeover waits for the transaction, and once it
  /// has committed, the transaction fails `busy`, naming the new owner.
  ///
  /// A fenced connection also learns the fate of a COMMIT whose answer was
  /// lost with the connection: it reconnects (for up to
  /// pg_options::commit_outcome_wait) and asks the server whether the
  /// transaction committed. commit() then succeeds or fails as the
  /// transaction did.
  ///
  /// Writing halts for good when the queue was taken over or a commit's
  /// fate stays unknown: every later begin_write fails with that status
  /// without asking the server, and `on_halt` (if set) gets it once, on the
  /// writing thread.
  void fence(int64_t epoch, std::function<void(const status&)> on_halt = {}) {
    epoch_ = epoch;
    on_halt_ = std::move(on_halt);
  }

  const pg_options& options() const noexcept { return opts_; }
  pg_conn* raw() const noexcept { return conn_; }

  /// Shuts the session's socket down, from any thread: a statement that
  /// waits on a server that went silent (stopped, or behind a network that
  /// acknowledges but never answers) fails `unreachable` at once, and so
  /// does every later one: the connection never reconnects. For a session
  /// whose owner gave up on it (a lapsed lease, a stopping standby).
  void interrupt() noexcept;

  /// The ergon status for a failed result (or the connection's error if
  /// `res` is null), with `context` in front of the server's message.
  status error_status(const pg_result* res, std::string_view context) const;

  /// Records a statement's changed rows as the connection's changes().
  void note_changes(int64_t n) noexcept { changes_ = n; }

 private:
  friend class pg_stmt;
  pg_db(pg_conn* conn, pg_options opts, std::string location) noexcept;
  status reconnect_if_lost();
  status halt(status why);
  status learn_commit(status lost);
  status check_fence(const pg_result* r);

  // Pipelining (libpq's pipeline mode): commands whose results nobody waits
  // for go out with the next one that is read, in one round trip.
  enum class unread_kind { effect, fence, rows };
  struct unread {
    unread_kind kind;
    const char* what;  // for messages
    pg_stmt* stmt = nullptr;  // rows: whose they are (null once it was reset)
  };
  status start_pipeline();
  /// What a command that waits for its answer needs first: the pipeline
  /// read, and a lost session replaced.
  status ready_to_exec();
  /// Sends `sql` with text results; a fence goes as the statement that
  /// prepare_fence() made.
  status send_text(const char* sql, unread_kind kind);
  /// Prepares the fence once a session, so the server plans it once.
  status prepare_fence();
  /// Sends a Sync and reads every result sent since the pipeline started,
  /// then leaves pipeline mode. With `last`, the last command sent is the
  /// caller's: its result goes there, and its failure is the caller's to
  /// handle. Any other failure (or a fence that does not hold) rolls the
  /// whole transaction back and is returned.
  status read_pipeline(pg_result** last = nullptr);
  /// Gives each statement that waits for its rows its result, or `failed`.
  void settle_rows(const status& failed) noexcept;
  /// Stops waiting for `s`'s rows (it was reset).
  void forget_rows(pg_stmt& s) noexcept;
  /// Starts a new session: the old one's state is unknown.
  void drop_session() noexcept;
  /// What a new session no longer has: prepared statements, the pipeline.
  void forget_session() noexcept;
  bool fence_unread() const noexcept;
  /// Keeps a duplicate of the session's socket for interrupt(): libpq may
  /// close and reuse its own fd number while another thread interrupts.
  void keep_socket() noexcept;

  pg_conn* conn_;
  std::mutex socket_mtx_;
  int socket_ = -1;  // the duplicate
  std::atomic<bool> interrupted_{false};
  pg_options opts_;
  std::string location_;
  std::string copy_data_;  // copy_in's pieces: its capacity stays, so no page faults
  std::unordered_map<const char*, std::unique_ptr<pg_stmt>> cache_;
  unsigned next_name_ = 0;
  uint64_t session_ = 1;  // counts sessions: prepared statements die with one
  uint64_t named_session_ = 0;  // the session the lease names as its writer
  uint64_t fence_session_ = 0;  // the session the fence was prepared on
  bool in_write_ = false;
  std::chrono::steady_clock::time_point next_attempt_{};
  std::chrono::milliseconds backoff_{0};
  int64_t changes_ = 0;
  std::optional<int64_t> epoch_;
  std::function<void(const status&)> on_halt_;
  status halted_;  // why writing stopped for good
  std::string xact_;  // the open write transaction's id, when fenced
  std::vector<unread> unread_;  // sent in pipeline mode, results not read yet
  bool pipelined_ = false;
};

/// The ergon error for a SQLSTATE (e.g. "57014": timeout).
error error_from_sqlstate(std::string_view sqlstate) noexcept;

}  // namespace ergon::storage
