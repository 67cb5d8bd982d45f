#!/usr/bin/env bash
# ThreadSanitizer over the code that runs threads: the shim's recording pipeline driven from many
# threads in one process (tests/unit/pipeline_stress.c: rings, drains on workers and by their
# owners, the flusher's SYNCs and reaping, back-pressure, the exit flush) and the analyzer's
# decode and replay threads reading the trace back (pipeline_check.cmake), and on damaged traces
# agreeing with one thread (fuzz.threads_agree, bench/par_fuzz.py). Only those tests:
# Criterion's runner cannot start under TSan (its sandbox arena fails to map), so the unit
# tests proper run under ASan (scripts/test.sh). A report fails the test (exit code 66).
# Usage: scripts/tsan.sh   (after scripts/deps.sh; scripts/test.sh runs it)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc)
cmake -S "$root" -B "$root/build-tsan" -DCMAKE_BUILD_TYPE=Debug -DHEAPPROF_SANITIZE=thread \
      -DHEAPPROF_BUILD_SAMPLES=OFF >/dev/null
cmake --build "$root/build-tsan" -j"$jobs" --target hp_pipeline_stress heapprof >/dev/null
cd "$root/build-tsan" && ctest -R '^(unit\.pipeline_stress_|fuzz\.threads_agree$)' -j"$jobs" \
    --output-on-failure
