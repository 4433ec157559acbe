// The writer's typed interface checks its senders. Built as is, this file
// sends messages the writer takes; with ERGON_SEND_UNKNOWN it also sends one
// the writer does not take, and test-writer-interface expects that to fail
// to compile.
#include "ergon/actors/db_writer.hpp"

namespace ergon::actors {

struct not_a_writer_message {};

void send_to_writer(const db_writer_actor& writer) {
  tell(writer, listen_to{});
  tell(writer, after_writes{[] {}});
#ifdef ERGON_SEND_UNKNOWN
  tell(writer, not_a_writer_message{});
#endif
}

// A worker sees only what it may send; the full handle converts to it.
worker_writer_actor worker_view(const db_writer_actor& writer) {
  return writer;
}

}  // namespace ergon::actors
