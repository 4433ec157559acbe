#include "ergon/storage/op/sweep_finished.hpp"

#include "ergon/storage/op/delete_finished.hpp"

namespace ergon::storage {

result<delete_finished_result> sweep_finished(db& d, const sweep_finished_args& args) {
  // A job finishes after it is submitted: none submitted at or after the
  // cutoff can have finished before it.
  auto bound = first_row_submitted_at_or_after(d, args.cutoff_ms);
  if (!bound)
    return bound.error();
  delete_finished_args del;
  del.filter.status = args.status;
  del.filter.finished_before_ms = args.cutoff_ms;
  del.after_row = args.after_row;
  del.before_row = *bound;
  del.limit = args.limit;
  return delete_finished(d, del);
}

}  // namespace ergon::storage
