# Runs one example program against a fresh database: -D EXAMPLE=<path> -D DB=<path>.
file(REMOVE "${DB}" "${DB}-wal" "${DB}-shm")
execute_process(COMMAND "${EXAMPLE}" "${DB}" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err TIMEOUT 120)
message(STATUS "${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${EXAMPLE} exited with ${rc}\n${err}")
endif()
