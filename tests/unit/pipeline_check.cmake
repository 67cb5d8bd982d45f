# SPDX-License-Identifier: MIT
# ctest driver: runs hp_pipeline_stress (the shim's recording pipeline driven from many threads
# in one process) with the environment ENV (a ;-list of NAME=VALUE: buffers, flush interval, a
# slowed drain), then checks that `heapprof stats --json` finds exactly the totals it made,
# every event kept, none late, no anomaly, no damage; and that `report` and `dhat` read it the
# same on one thread and with replay and decode threads (under TSan: those threads checked too).
# Variables: STRESS, HEAPPROF, OUT, ARGS (;-list), ENV (;-list, optional; after the defaults
# here, so it may change them: CPU samples are off unless it says).
file(REMOVE ${OUT})
# No leak check in the stress program: the shim keeps its state in its own mappings, which
# LeakSanitizer does not scan, and by design frees none of it at exit (a worker's zstd context,
# reachable only from a drainer there, reads as leaked).
file(REMOVE ${OUT}.sites)
execute_process(COMMAND ${CMAKE_COMMAND} -E env HEAPPROF_OUT=${OUT} HEAPPROF_CPU=0 HEAPPROF_QUIET=1
  ASAN_OPTIONS=detect_leaks=0 HP_STRESS_SITES=${OUT}.sites ${ENV} ${STRESS} ${ARGS} OUTPUT_VARIABLE want ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "hp_pipeline_stress failed (${rc}): ${err}")
endif()
execute_process(COMMAND ${HEAPPROF} stats --json ${OUT} OUTPUT_VARIABLE got ERROR_VARIABLE err
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "heapprof stats failed (${rc}): ${err}")
endif()
# report: the sites' scans with growth's passes beside one apply thread; dhat: two apply parts
# (dhat refuses a sampled trace: its figures would be estimates)
set(commands report dhat)
if(ENV MATCHES "HEAPPROF_SAMPLE_BYTES")
  set(commands report)
endif()
foreach(command IN LISTS commands)
  foreach(threads 0 4)
    execute_process(COMMAND ${CMAKE_COMMAND} -E env HEAPPROF_REPLAY_THREADS=${threads}
      HEAPPROF_DECODE_THREADS=${threads} ${HEAPPROF} ${command} ${OUT}
      OUTPUT_VARIABLE out_${threads} ERROR_VARIABLE err RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "heapprof ${command} (${threads} threads) failed (${rc}): ${err}")
    endif()
  endforeach()
  if(NOT out_0 STREQUAL out_4)
    message(FATAL_ERROR "${command} differs with 4 replay and decode threads")
  endif()
endforeach()
# Every call site's blocks and bytes (not in sampled mode, whose figures are estimates): the
# stacks as the threads made them, interned and walked on 16 threads at once.
if(EXISTS ${OUT}.sites)
  file(STRINGS ${OUT}.sites sites)
  foreach(metric blocks bytes)
    execute_process(COMMAND ${HEAPPROF} flame ${OUT} --folded --metric ${metric}
      OUTPUT_VARIABLE folded ERROR_VARIABLE err RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "heapprof flame --metric ${metric} failed (${rc}): ${err}")
    endif()
    set(n_want 0)
    foreach(line IN LISTS sites)
      if(line MATCHES "^${metric} (.*)$")
        math(EXPR n_want "${n_want} + 1")
        string(FIND "${folded}" ";${CMAKE_MATCH_1}\n" at)
        if(at LESS 0)
          message(FATAL_ERROR "flame --metric ${metric} has no line ending in ${CMAKE_MATCH_1}:\n${folded}")
        endif()
      endif()
    endforeach()
    string(REGEX MATCHALL "\n" lines "${folded}")
    list(LENGTH lines n_have)
    if(NOT n_have EQUAL n_want)
      message(FATAL_ERROR "flame --metric ${metric}: ${n_have} stacks, the threads used ${n_want}:\n${folded}")
    endif()
  endforeach()
  file(REMOVE ${OUT}.sites)
endif()
file(REMOVE ${OUT})
include(${CMAKE_CURRENT_LIST_DIR}/expect_stats.cmake)
hp_expect_stats("${want}" "${got}" "the threads")
hp_expect_clean("${got}")
hp_expect_zero("${got}" shim.events_lost shim.stack_overflows)
string(JSON recorded GET "${got}" shim events_recorded)
string(JSON events GET "${got}" events)
if(NOT recorded EQUAL events)
  message(FATAL_ERROR "events recorded ${recorded}, read ${events}")
endif()
