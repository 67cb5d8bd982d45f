# SPDX-License-Identifier: MIT
# hp_expect_stats(WANT GOT WHO): fails unless the `heapprof stats --json` document GOT holds
# every key=value of WANT (space-separated; a.b is b inside a), naming WHO as what made them.
# Shared by the ctest drivers that check a trace's totals (mktrace_check.cmake,
# pipeline_check.cmake).
function(hp_expect_stats want got who)
  string(STRIP "${want}" want)
  string(REPLACE " " ";" pairs "${want}")
  foreach(pair IN LISTS pairs)
    string(REPLACE "=" ";" kv "${pair}")
    list(GET kv 0 key)
    list(GET kv 1 value)
    string(REPLACE "." ";" path "${key}")
    string(JSON have GET "${got}" ${path})
    if(NOT have STREQUAL value)
      message(FATAL_ERROR "${key}: heapprof says ${have}, ${who} made ${value}")
    endif()
  endforeach()
endfunction()

# hp_expect_zero(GOT PATH...): fails unless every PATH (a.b: b inside a) of the stats document
# GOT is 0.
function(hp_expect_zero got)
  foreach(path IN LISTS ARGN)
    string(REPLACE "." ";" path "${path}")
    string(JSON have GET "${got}" ${path})
    if(NOT have EQUAL 0)
      message(FATAL_ERROR "${path} = ${have}")
    endif()
  endforeach()
endfunction()

# hp_expect_clean(GOT): fails unless the stats document GOT says the trace read whole and sound:
# no unknown free or double allocation, no late event, no damage, a clean exit.
function(hp_expect_clean got)
  hp_expect_zero("${got}" anomalies.unknown_frees anomalies.double_allocs damage.late_events
    damage.chunks_damaged damage.chunks_missing damage.bytes_skipped)
  string(JSON clean GET "${got}" damage clean_exit)
  if(NOT clean)
    message(FATAL_ERROR "clean_exit ${clean}")
  endif()
endfunction()
