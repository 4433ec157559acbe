# Installs the built ergon into a scratch prefix, then configures, builds and
# runs the consumer project against it. Invoked by ctest with -D BUILD_DIR,
# SOURCE_DIR, WORK_DIR, GENERATOR and CAF_ROOT (may be empty).
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()
run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
run(${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}/build" -G "${GENERATOR}"
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release
    # The same CAF as the build (the tsan preset uses an instrumented one).
    -DCAF_ROOT=${CAF_ROOT})
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
run("${WORK_DIR}/build/consumer" "${WORK_DIR}/consumer.db")
message(STATUS "${last_output}")
if(NOT last_output MATCHES "consumer ok 42 pending")
  message(FATAL_ERROR "unexpected output: ${last_output}")
endif()
