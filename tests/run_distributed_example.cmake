# Runs examples/queue_server and examples/remote_worker together against a
# fresh database: -D SERVER=<path> -D WORKER=<path> -D DB=<path> -D PORT=<n>.
# execute_process starts both at once (the server's stdout feeds the
# worker's stdin, which it ignores).
file(REMOVE "${DB}" "${DB}-wal" "${DB}-shm")
set(ENV{ERGON_SECRET} "example secret of the distributed example run")
execute_process(COMMAND "${SERVER}" "${DB}" "${PORT}" 20
                COMMAND "${WORKER}" 127.0.0.1 "${PORT}" 20
                RESULTS_VARIABLE rcs OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
message(STATUS "${out}")
if(NOT rcs STREQUAL "0;0")
  message(FATAL_ERROR "queue_server and remote_worker exited with ${rcs}\n${err}")
endif()
