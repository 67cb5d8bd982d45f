#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/timer_threads.sh: what heapprof costs a process by its number of threads alone, with
# and without the CPU-time timer fallback (HEAPPROF_CPU=timer, the source where
# perf_event_paranoid refuses perf events): bench/tools/idle_threads N S keeps N threads alive
# (one allocation each, then asleep) for S seconds, run under heapprof with HEAPPROF_CPU=0 and
# =timer (and, with --base-lib, the same two with another build), in turn, R rounds; prints the
# median user and system CPU seconds of each. HEAPPROF_CPU=0 against the plain program is the
# pipeline's per-thread work (the flusher's walks over the rings); timer - 0 is the sampling
# thread's listing of /proc/self/task and its table of timers.
# Usage: bench/timer_threads.sh [--threads N] [--secs S] [--runs R] [--lib PATH] [--base-lib PATH]
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
N=4000 SECS=3 RUNS=3 LIB="$ROOT/build/preload/libheapprof.so" BASE=""
while [ $# -gt 0 ]; do
    case "$1" in
    --threads) N="$2"; shift 2 ;;
    --secs) SECS="$2"; shift 2 ;;
    --runs) RUNS="$2"; shift 2 ;;
    --lib) LIB="$2"; shift 2 ;;
    --base-lib) BASE="$2"; shift 2 ;;
    *) echo "usage: $0 [--threads N] [--secs S] [--runs R] [--lib PATH] [--base-lib PATH]" >&2; exit 2 ;;
    esac
done
[ -f "$LIB" ] || { echo "no $LIB: build first" >&2; exit 1; }
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
gcc -O2 -pthread -o "$TMP/idle_threads" "$HERE/tools/idle_threads.c" || exit 1
echo "$N idle threads for $SECS s, medians of $RUNS (user / system CPU seconds)"
libs=("new=$LIB")
[ -n "$BASE" ] && libs+=("base=$BASE")
for r in $(seq "$RUNS"); do
    for l in "${libs[@]}"; do
        for cpu in 0 timer; do
            rm -f "$TMP/t.hpt"
            /usr/bin/time -f "${l%%=*} cpu=$cpu %U %S" -o "$TMP/time" env HEAPPROF_QUIET=1 \
                HEAPPROF_CPU=$cpu HEAPPROF_OUT="$TMP/t.hpt" LD_PRELOAD="${l#*=}" \
                "$TMP/idle_threads" "$N" "$SECS" >/dev/null || { echo "run failed" >&2; exit 1; }
            cat "$TMP/time"
        done
    done
done | awk -v n="$N" -v s="$SECS" '
    { k = $1 " " $2; u[k] = u[k] " " $3; y[k] = y[k] " " $4 }
    function med(list,   a, c, i, j, t) {
        c = split(list, a, " ")
        for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
        return a[int((c + 1) / 2)]
    }
    END { for (k in u) printf "  %-18s %s / %s\n", k, med(u[k]), med(y[k]) }' | sort
