#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/many_threads.sh: the memory a profiler adds per thread. Runs bench/workloads/many_threads
# (N threads alive at once, K allocations each) plain, under heapprof and under heaptrack, ROUNDS
# times in a rotating order, and prints the median peak RSS (GNU time's %M: the largest process,
# for heaptrack usually its interpreter) and what each tool adds per thread.
# Usage: bench/many_threads.sh [--threads N] [--allocs K] [--runs R] [--lib PATH] [--no-heaptrack]
set -u
export LC_ALL=C
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
N=1000 K=20000 RUNS=3 USE_HT=1
LIB="$ROOT/build/preload/libheapprof.so"
while [ $# -gt 0 ]; do
    case "$1" in
    --threads) N=$2; shift ;;
    --allocs) K=$2; shift ;;
    --runs) RUNS=$2; shift ;;
    --lib) LIB=$2; shift ;;
    --no-heaptrack) USE_HT=0 ;;
    -h | --help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "many_threads.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
[ -x /usr/bin/time ] || { echo "many_threads.sh: GNU time is needed (apt-get install time)" >&2; exit 1; }
[ $USE_HT = 1 ] && ! command -v heaptrack >/dev/null && USE_HT=0
mkdir -p "$HERE/out/bin"
PROG="$HERE/out/bin/many_threads"
gcc -O2 -g -pthread -o "$PROG" "$HERE/workloads/many_threads.c" || exit 1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
rss() { # tool -> peak KiB
    case $1 in
    plain) /usr/bin/time -f %M -o "$TMP/m" "$PROG" "$N" "$K" >/dev/null ;;
    heapprof) /usr/bin/time -f %M -o "$TMP/m" env HEAPPROF_QUIET=1 HEAPPROF_OUT="$TMP/t.hpt" \
                  LD_PRELOAD="$LIB" "$PROG" "$N" "$K" >/dev/null ;;
    heaptrack) /usr/bin/time -f %M -o "$TMP/m" heaptrack -o "$TMP/ht" "$PROG" "$N" "$K" \
                   >/dev/null 2>&1 ;;
    esac
    rm -f "$TMP/t.hpt" "$TMP"/ht.*
    tail -1 "$TMP/m"
}
tools="plain heapprof"
[ $USE_HT = 1 ] && tools="$tools heaptrack"
for r in $(seq "$RUNS"); do
    set -- $tools
    for ((i = 0; i < r % $#; i++)); do set -- "${@:2}" "$1"; done # rotate the order
    for t in "$@"; do echo "$t $(rss "$t")"; done
done >"$TMP/rows"
med() { awk -v t="$1" '$1 == t { print $2 }' "$TMP/rows" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
plain=$(med plain)
printf '%d threads x %d allocations, %d rounds (median peak RSS)\n' "$N" "$K" "$RUNS"
printf '%-10s %10s %12s %14s\n' tool "peak MiB" "added MiB" "added KiB/thr"
for t in $tools; do
    m=$(med "$t")
    awk -v t="$t" -v m="$m" -v p="$plain" -v n="$N" 'BEGIN {
        printf "%-10s %10.1f %12.1f %14.1f\n", t, m / 1024, (m - p) / 1024, (m - p) / n }'
done
