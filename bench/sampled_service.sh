#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/sampled_service.sh: the trace a long-running service leaves under sampled recording.
# Runs bench/workloads/steady_service (a steady allocation rate, a flat heap) for SECONDS under
# HEAPPROF_SAMPLE_BYTES=N, with CPU sampling off and on, and prints the trace's size, its growth
# per second and that growth over 10 minutes (the size grows linearly: a sampled allocation and
# its free are a few bytes each, plus one SYNC chunk per flush interval).
#
# Usage: bench/sampled_service.sh [--seconds S] [--rate ALLOCS_PER_S] [--n BYTES]
set -u
export LC_ALL=C
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
SECONDS_RUN=60
RATE=100000
N=524288
LIB="$ROOT/build/preload/libheapprof.so"
CLI="$ROOT/build/analyzer/heapprof"
while [ $# -gt 0 ]; do
    case "$1" in
    --seconds) SECONDS_RUN="$2"; shift 2 ;;
    --rate) RATE="$2"; shift 2 ;;
    --n) N="$2"; shift 2 ;;
    -h | --help) sed -n 3,9p "$0"; exit 0 ;;
    *) echo "sampled_service.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
OUT="$HERE/out/sampled_service"
mkdir -p "$OUT"
gcc -O2 -g -fno-omit-frame-pointer -o "$OUT/steady_service" "$HERE/workloads/steady_service.c" ||
    exit 1
printf "steady_service %s s at %s allocations/s, N = %s bytes\n" "$SECONDS_RUN" "$RATE" "$N"
printf "%-8s %12s %14s %12s %12s %14s\n" cpu allocs bytes_alloc trace_bytes bytes_per_s "10 min (MB)"
for cpu in 0 1; do
    trace="$OUT/service.cpu$cpu.hpt"
    rm -f "$trace"
    env LD_PRELOAD="$LIB" HEAPPROF_OUT="$trace" HEAPPROF_QUIET=1 HEAPPROF_CPU=$cpu \
        HEAPPROF_SAMPLE_BYTES="$N" "$OUT/steady_service" "$SECONDS_RUN" "$RATE" || exit 1
    size=$(stat -c %s "$trace")
    "$CLI" stats --json "$trace" | python3 -c '
import json, sys
s = json.load(sys.stdin)
size, secs = int(sys.argv[2]), float(sys.argv[3])
print("%-8s %12d %14d %12d %12.0f %14.2f" % (sys.argv[1], s["blocks"], s["bytes"], size,
      size / secs, size / secs * 600 / 1e6))' "$cpu" "$size" "$SECONDS_RUN"
done
echo "(allocs and bytes_alloc are the sampled trace's estimates)"
