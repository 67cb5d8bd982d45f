#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The long version of host_safety's exit-race test (issue 17): RUNS runs of exitrace under each
# CPU sampler; counts hangs (killed after 8 s), crashes and processes that left other than one
# trace. Usage: tests/e2e/stress_exit_race.sh BUILD_DIR [RUNS]   (default 2000)
set -u
build=${1:?usage: stress_exit_race.sh BUILD_DIR [RUNS]}
runs=${2:-2000}
lib=$(cd "$build" && pwd)/preload/libheapprof.so
prog=$(cd "$build" && pwd)/tests/e2e/exitrace
for cpu in perf timer; do
    dir=$(mktemp -d)
    hangs=0 crashes=0
    for i in $(seq "$runs"); do
        timeout -s KILL 8 env HEAPPROF_CPU=$cpu HEAPPROF_QUIET=1 HEAPPROF_OUT="$dir/r.%p.hpt" \
            LD_PRELOAD="$lib" "$prog" $((i % 5 * 30)) 4
        rc=$?
        if [ $rc -eq 137 ]; then hangs=$((hangs + 1)); elif [ $rc -ne 0 ]; then crashes=$((crashes + 1)); fi
    done
    traces=$(find "$dir" -name '*.hpt' | wc -l)
    echo "cpu=$cpu runs=$runs hangs=$hangs crashes=$crashes traces=$traces"
    rm -rf "$dir"
done
