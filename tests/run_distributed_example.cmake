# Runs examples/queue_server and examples/remote_worker together against a
# fresh database: -D SERVER=<path> -D WORKER=<path> -D DB=<path> -D PORT=<n>.
# A shell starts both and waits for each, so neither writes into a pipe
# that the other closed by exiting first (execute_process would chain them).
# The worker proves the worker's secret: its role is enough to run jobs.
file(REMOVE "${DB}" "${DB}-wal" "${DB}-shm")
set(ENV{ERGON_SECRET} "6c3e0b8f1a9d4e7c2f5b8a0d3c6e9f1b4a7d0c3e6f9b2a5d8c1e4f7a0b3d6c9e")
set(ENV{ERGON_WORKER_SECRET} "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0")
set(script [=[
"$1" "$3" "$4" 20 &
server=$!
ERGON_SECRET="$ERGON_WORKER_SECRET" "$2" 127.0.0.1 "$4" 20
worker=$?
wait "$server"
server_rc=$?
echo "exit codes: server $server_rc, worker $worker"
[ "$server_rc" -eq 0 ] && [ "$worker" -eq 0 ]
]=])
execute_process(COMMAND sh -c "${script}" run "${SERVER}" "${WORKER}" "${DB}" "${PORT}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
message(STATUS "${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "queue_server and remote_worker failed (${rc})\n${out}\n${err}")
endif()
