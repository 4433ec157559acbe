// Enqueue a job in the same transaction as your own rows: the job exists
// if and only if the transaction commits. The queue's owner takes it in
// within milliseconds of the commit.
//
//   transactional_enqueue "postgresql://app@db.example.com/app"
//
// The queue lives in schema "shop" of that database. Any language can
// enqueue with SQL alone (docs/distribution.md lists the parameters):
//
//   BEGIN;
//   INSERT INTO orders (id, total) VALUES (3, 12.50);
//   SELECT shop.submit('send_receipt', '3'::bytea, idempotency_key => 'receipt-3');
//   COMMIT;
#include <ergon/job_builder.hpp>
#include <ergon/pg.hpp>
#include <ergon/queue.hpp>
#include <libpq-fe.h>

#include <chrono>
#include <iostream>
#include <string>
#include <thread>

using namespace std::chrono_literals;

namespace {

bool exec(PGconn* conn, const std::string& sql) {
  PGresult* r = PQexec(conn, sql.c_str());
  bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
  if (!ok)
    std::cerr << sql << ": " << PQresultErrorMessage(r);
  PQclear(r);
  return ok;
}

// One order and its receipt job, committed or rolled back together.
ergon::result<int64_t> place_order(PGconn* conn, int id, bool commit) {
  if (!exec(conn, "BEGIN"))
    return ergon::status{ergon::error::internal, "BEGIN failed"};
  auto order = std::to_string(id);
  exec(conn, "INSERT INTO orders (id, total) VALUES (" + order + ", 12.50)");
  auto receipt = ergon::job_builder("send_receipt")
                   .payload(order)
                   .idempotency_key("receipt-" + order)  // safe to send again
                   .build();
  auto entry = ergon::pg::submit(conn, *receipt, {"shop"});
  exec(conn, entry && commit ? "COMMIT" : "ROLLBACK");
  return entry;
}

}  // namespace

int main(int argc, char** argv) {
  std::string db = argc > 1 ? argv[1] : "postgresql:///postgres";
  auto q = ergon::queue::open(db + (db.find('?') == std::string::npos ? "?" : "&")
                              + "schema=shop");
  if (!q) {
    std::cerr << "cannot open the queue: " << q.error() << '\n';
    return 1;
  }
  ergon::worker_options w;
  w.runners["send_receipt"] = [](ergon::job_context& ctx) {
    std::cout << "receipt for order " << ctx.payload() << " sent" << std::endl;
  };
  auto worker = q->start_worker(std::move(w));
  if (!worker) {
    std::cerr << "cannot start the worker: " << worker.error() << '\n';
    return 1;
  }

  // The application's own connection and table.
  PGconn* conn = PQconnectdb(db.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    std::cerr << "cannot connect: " << PQerrorMessage(conn);
    PQfinish(conn);
    return 1;
  }
  exec(conn, "CREATE TABLE IF NOT EXISTS orders (id bigint PRIMARY KEY, total numeric)");

  auto kept = place_order(conn, 1, true);
  auto dropped = place_order(conn, 2, false);
  if (!kept || !dropped) {
    std::cerr << "cannot enqueue: " << (kept ? dropped.error() : kept.error()) << '\n';
    PQfinish(conn);
    return 1;
  }
  auto gone = ergon::pg::find_entry(conn, *dropped, {"shop"});
  std::cout << "order 2 rolled back: " << gone.error() << '\n';

  // The entry names its job once the owner has taken it in.
  int rc = 1;
  for (auto until = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(5ms)) {
    auto entry = ergon::pg::find_entry(conn, *kept, {"shop"});
    if (!entry || entry->state == ergon::pg::entry_state::waiting)
      continue;
    if (entry->state == ergon::pg::entry_state::refused) {
      std::cerr << "order 1's receipt was refused: " << entry->refusal << '\n';
      break;
    }
    auto done = q->wait(entry->id, 30s);
    std::cout << "order 1: job " << entry->id << " " << (done ? ergon::to_string(done->status) : "?")
              << '\n';
    rc = done && done->status == ergon::job_status::succeeded ? 0 : 1;
    break;
  }
  PQfinish(conn);
  worker->stop();
  q->close();
  return rc;
}
