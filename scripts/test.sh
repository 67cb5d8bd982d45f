#!/usr/bin/env bash
# Quick start, part 2 (and CI): install dependencies, then build and run the suite:
# the unit tests under ASan/UBSan (Debug), the threaded pipeline under TSan (scripts/tsan.sh),
# then everything (unit, end-to-end under the real preload) in a RelWithDebInfo build. Ends
# with ctest's summary line.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/deps.sh"
jobs=$(nproc)
cmake -S "$root" -B "$root/build-asan" -DCMAKE_BUILD_TYPE=Debug -DHEAPPROF_SANITIZE=address,undefined \
      -DHEAPPROF_BUILD_SAMPLES=OFF >/dev/null
cmake --build "$root/build-asan" -j"$jobs" >/dev/null
(cd "$root/build-asan" && ctest -L "unit|e2e" -j"$jobs" --output-on-failure)
"$root/scripts/tsan.sh"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$root/build" -j"$jobs" >/dev/null
cd "$root/build" && ctest -j"$jobs" --output-on-failure
