# SPDX-License-Identifier: MIT
# ctest fuzz.short: fuzzes the reader for SECONDS from a copy of CORPUS (the committed corpus is
# never written to). Fails with the crashing inputs listed; each becomes a corpus file once fixed.
# cmake -DFUZZER=... -DCORPUS=... -DDICT=... -DWORK=... -DSECONDS=60 -P fuzz_short.cmake
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/corpus" "${WORK}/artifacts")
file(GLOB seeds "${CORPUS}/*")
file(COPY ${seeds} DESTINATION "${WORK}/corpus")
# -timeout: a single input that takes this long is a hang; -rss_limit_mb: one that needs this
# much memory is a bug (the reader bounds what it holds: BUFFERED_MAX in analyzer/reader.c).
execute_process(
  COMMAND "${FUZZER}" -max_total_time=${SECONDS} -max_len=65536 -rss_limit_mb=2048 -timeout=30
          "-dict=${DICT}" -print_final_stats=1 "-artifact_prefix=${WORK}/artifacts/" "${WORK}/corpus"
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(GLOB found "${WORK}/artifacts/*")
  string(REPLACE ";" "\n  " found "${found}")
  message(FATAL_ERROR "fuzz_reader failed (${rc}). Inputs that broke it:\n  ${found}\n"
          "Reproduce with ${FUZZER} FILE; add FILE to tests/fuzz/corpus/ with the fix.")
endif()
