#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/threads.sh: how heapprof's cost grows with allocating threads, next to heaptrack and
# the plain program, and what each stage of heapprof's pipeline costs per event.
#
# Runs bench/out/bin/c_threads N OPS (OPS malloc/free pairs in all, split over N threads) for
# each N, ROUNDS rounds, baseline / heapprof / heaptrack back to back in a rotating order; the
# added wall time is taken per round against that round's baseline, divided by the exact
# number of allocation events (OPS + the program's own few, from the trace's block count), and
# the median over rounds is printed. Per-stage CPU comes from the trace's TRAILER, which the
# shim fills with its pipeline workers' and flusher's CPU time (CLOCK_THREAD_CPUTIME_ID); the
# app threads' share is the process's CPU (GNU time) minus those.
#
# Usage: bench/threads.sh [--threads 1,2,4,8,16,32] [--ops N] [--runs K] [--no-heaptrack]
#                         [--lib PATH] [--cli PATH] [--prog PATH]
#   --prog: a built c_threads (the many-core machine's bundle: .manycore/workloads/c_threads);
#   without GNU time (that machine has none) CPU comes from bash's `time`.
set -u
export LC_ALL=C
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
THREADS=1,2,4,8,16,32
OPS=4000000
RUNS=3
USE_HT=1
PROG=
LIB="$ROOT/build/preload/libheapprof.so"
CLI="$ROOT/build/analyzer/heapprof"
while [ $# -gt 0 ]; do
    case "$1" in
    --threads) THREADS=$2; shift ;;
    --ops) OPS=$2; shift ;;
    --runs) RUNS=$2; shift ;;
    --no-heaptrack) USE_HT=0 ;;
    --lib) LIB=$2; shift ;;
    --cli) CLI=$2; shift ;;
    --prog) PROG=$2; shift ;;
    -h | --help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "threads.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
if [ -z "$PROG" ]; then
    "$HERE/run.sh" --build-only >/dev/null || { echo "threads.sh: cannot build the workloads" >&2; exit 1; }
    PROG="$HERE/out/bin/c_threads"
fi
[ $USE_HT = 1 ] && ! command -v heaptrack >/dev/null && USE_HT=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# timed CMD...: runs CMD (output dropped), its user and system CPU -> $TMP/time as "U S"
timed() {
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -f "%U %S" -o "$TMP/time" "$@" >/dev/null 2>&1
    else
        local TIMEFORMAT='%U %S'
        { time "$@" >/dev/null 2>&1; } 2>"$TMP/time"
    fi
}

# run TOOL N -> "wall_s cpu_s" on stdout; heapprof leaves its trace at $TMP/hp.hpt
run() {
    local tool=$1 n=$2 t0 t1
    rm -f "$TMP/hp.hpt" "$TMP"/ht.*
    t0=$EPOCHREALTIME
    case $tool in
    base) timed "$PROG" "$n" "$OPS" ;;
    hp) timed env HEAPPROF_QUIET=1 HEAPPROF_OUT="$TMP/hp.hpt" LD_PRELOAD="$LIB" "$PROG" "$n" "$OPS" ;;
    ht) timed heaptrack -o "$TMP/ht" "$PROG" "$n" "$OPS" ;;
    esac
    t1=$EPOCHREALTIME
    awk -v a="$t0" -v b="$t1" '{ printf "%.4f %.4f\n", b - a, $1 + $2 }' "$TMP/time"
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

printf '%-7s %9s %11s %11s %7s %7s | %9s %9s %9s %7s %9s\n' threads base_wall "hp +ns/ev" \
    "ht +ns/ev" "hp/ht" kept "app cpu" "workers" "flusher" workers "waited"
printf '%-7s %9s %11s %11s %7s %7s | %9s %9s %9s %7s %9s\n' "" s "" "" "" "" "ns/ev" "ns/ev" \
    "ns/ev" "most" ms
for n in ${THREADS//,/ }; do
    : >"$TMP/rows"
    for r in $(seq "$RUNS"); do
        case $(((r - 1) % 3)) in
        0) order="base hp ht" ;; 1) order="hp ht base" ;; *) order="ht base hp" ;;
        esac
        declare -A wall cpu
        for tool in $order; do
            [ "$tool" = ht ] && [ $USE_HT = 0 ] && continue
            read -r w c < <(run "$tool" "$n")
            wall[$tool]=$w
            cpu[$tool]=$c
            if [ "$tool" = hp ]; then
                "$CLI" stats --json "$TMP/hp.hpt" >"$TMP/stats.json" 2>/dev/null
            fi
        done
        python3 - "$TMP/stats.json" "${wall[base]}" "${wall[hp]}" "${wall[ht]:-nan}" "${cpu[hp]}" \
            "$OPS" >>"$TMP/rows" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
base, hp, ht, hp_cpu, ops = (float(x) for x in sys.argv[2:7])
ev = s["blocks"]
sh = s["shim"]
wk, fl = sh["workers_cpu_ns"] / 1e9, sh["flusher_cpu_ns"] / 1e9
kept = ev / ops if sh["events_lost"] == 0 else -(sh["events_lost"])
print(base, (hp - base) / ev * 1e9, (ht - base) / ev * 1e9, kept,
      (hp_cpu - wk - fl) / ev * 1e9, wk / ev * 1e9, fl / ev * 1e9, sh["pipeline_workers"],
      sh["wait_ns"] / 1e6)
PY
        unset wall cpu
    done
    col() { awk -v k="$1" '{ print $k }' "$TMP/rows" | median; }
    hp=$(col 2) ht=$(col 3)
    printf '%-7s %9.3f %11.0f %11s %7s %7.4f | %9.0f %9.1f %9.2f %7.0f %9.1f\n' "$n" "$(col 1)" "$hp" \
        "$([ $USE_HT = 1 ] && printf '%.0f' "$ht" || echo -)" \
        "$([ $USE_HT = 1 ] && awk -v a="$hp" -v b="$ht" 'BEGIN { printf "%.2f", a / b }' || echo -)" \
        "$(col 4)" "$(col 5)" "$(col 6)" "$(col 7)" "$(col 8)" "$(col 9)"
done
echo "kept: events in the trace / OPS (the program adds a few of its own; a negative value is events lost)"
echo "app cpu: the process's CPU minus the pipeline's, per allocation event (app threads and the CPU sampler)"
