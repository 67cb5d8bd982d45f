# SPDX-License-Identifier: MIT
# ctest driver: writes a synthetic multi-thread trace with hp_mktrace and checks that
# `heapprof stats --json` reports exactly the totals the generator made.
# Variables: MKTRACE, HEAPPROF, OUT, ARGS (generator arguments after the path, ;-list);
# REPLAY_THREADS (optional): HEAPPROF_REPLAY_THREADS for heapprof (replay on shard threads).
execute_process(COMMAND ${MKTRACE} ${OUT} ${ARGS} OUTPUT_VARIABLE want RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "hp_mktrace failed: ${rc}")
endif()
if(NOT DEFINED REPLAY_THREADS)
  set(REPLAY_THREADS 0)
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env HEAPPROF_REPLAY_THREADS=${REPLAY_THREADS}
  ${HEAPPROF} stats --json ${OUT} OUTPUT_VARIABLE got RESULT_VARIABLE rc)
file(REMOVE ${OUT})
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "heapprof stats failed: ${rc}")
endif()
include(${CMAKE_CURRENT_LIST_DIR}/expect_stats.cmake)
hp_expect_stats("${want}" "${got}" "the generator")
hp_expect_clean("${got}")
