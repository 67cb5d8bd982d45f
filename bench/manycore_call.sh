#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/manycore_call.sh: everything issue 18 measures on the many-core machine, in one device
# call over the bundle made by ../shared/tools/manycore/bundle.sh (carry [".manycore"]):
#   1. the manycore bench's sections (default "env threads") with its own options;
#   2. with --stages: bench/threads.sh (heapprof alone: the per-stage CPU per event, app threads,
#      pipeline workers, flusher, time waited) at 1..32 threads; with --clock: what a TSC read
#      costs there, alone, after cold loads and stores, and in the model of the two hooks
#      (bench/tools/clock_context, built into the bundle by manycore_prepare.sh; ~25 s: the
#      Xeon of session 26 waited for the loads in flight before each read);
#   3. each --workload (default "c_churn OPS", repeatable) recorded once under heapprof and once under heaptrack, then
#      bench/analyzer_scaling.sh over decode workers x replay threads (report only by default),
#      beside heaptrack_print, and one report with HEAPPROF_STAGE_TIMES=2 at the widest setting
#      (where a serial stage shows as thread CPU close to its wall time); with --depth 2,3,4 each
#      replay setting at each count of rounds in flight too (HEAPPROF_REPLAY_DEPTH), and the
#      stage times at the widest setting once per depth; with --alt NAME=PATH (repeatable; another
#      build of heapprof in the bundle, e.g. base=.manycore/heapprof/bin/heapprof.base) every
#      report setting runs with each too, side by side, and their stage times are printed after
#      the new build's; --base-cli PATH is --alt base=PATH; with --timeline, `view` and `massif`
#      (the heap over time) at one replay thread and at the widest setting too.
# Output under $OUT (the device's result folder), tables on stdout.
# Usage: bash bench/manycore_call.sh [--budget S] [--ops N] [--workers 4,12] [--replay 0,4,8,16]
#                                    [--depth 2,3,4] [--commands report] [--runs K] [--skip-bench] [--stages] [--clock]
#                                    [--workload "c_threads 8 40000000"]...
#                                    [--alt NAME=PATH]... [--base-cli PATH] [--skip-analyzer]
#                                    [--timeline]
#                                    -- [bench.py args]
set -u -o pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
M="$ROOT/.manycore"
OPS=25000000 WORKERS=4,12 REPLAY=0,4,8,16 DEPTH= COMMANDS=report RUNS=2 BUDGET=240 SKIP_BENCH=0 STAGES=0 SKIP_ANALYZER=0 TIMELINE=0 CLOCK=0
WORKLOADS=()
ALTS=() # NAME=PATH, for analyzer_scaling.sh --alt
while [ $# -gt 0 ]; do
    case "$1" in
    --budget) BUDGET=$2; shift ;;
    --ops) OPS=$2; shift ;;
    --workload) WORKLOADS+=("$2"); shift ;;
    --workers) WORKERS=$2; shift ;;
    --replay) REPLAY=$2; shift ;;
    --depth) DEPTH=$2; shift ;;
    --commands) COMMANDS=$2; shift ;;
    --runs) RUNS=$2; shift ;;
    --skip-bench) SKIP_BENCH=1 ;;
    --stages) STAGES=1 ;;
    --clock) CLOCK=1 ;;
    --skip-analyzer) SKIP_ANALYZER=1 ;;
    --timeline) TIMELINE=1 ;;
    --base-cli) ALTS+=("base=$2"); shift ;;
    --alt) ALTS+=("$2"); shift ;;
    --) shift; break ;;
    -h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "manycore_call.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
[ -d "$M" ] || { echo "manycore_call.sh: no .manycore bundle (run ../shared/tools/manycore/bundle.sh)" >&2; exit 2; }
export OUT="${OUT:-/tmp/manycore-out}"
mkdir -p "$OUT"
echo "machine: $(nproc) CPUs, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
# the caches per core (the bench's own env section prints the L3 only): what bench/hot_instr.sh
# --cache models
echo "caches: $(lscpu 2>/dev/null | sed -n 's/^ *\(L1d\|L2\|L3\) cache: *\(.*\)/\1 \2/p' | paste -sd ';' -)"
if [ $SKIP_BENCH = 0 ]; then
    [ $# -gt 0 ] || set -- env threads
    bash "$M/run.sh" --budget "$BUDGET" "$@"
fi

L="$M/lib"
[ -n "$(ls -A "$M/libcxx" 2>/dev/null)" ] && ! LD_LIBRARY_PATH="$L" ldd "$M/heaptrack/bin/heaptrack_print" |
    grep -q 'not found' || L="$L:$M/libcxx"
if [ $STAGES = 1 ]; then
    echo "== stages: bench/threads.sh, heapprof alone, c_threads N 4000000"
    env LD_LIBRARY_PATH="$L" bash "$ROOT/bench/threads.sh" --no-heaptrack --runs "$RUNS" \
        --prog "$M/workloads/c_threads" --lib "$M/heapprof/lib/libheapprof.so" \
        --cli "$M/heapprof/bin/heapprof" | tee "$OUT/stages.txt"
fi
if [ $CLOCK = 1 ]; then
    cc_bin="$M/heapprof/bin/clock_context"
    if [ -x "$cc_bin" ]; then
        echo "== clock: clock_context, the blocks in 4 MiB, then in 64 MiB"
        { "$cc_bin" 4000000 7 4; "$cc_bin" 2000000 5 64 | grep '^hooks'; } | tee "$OUT/clock.txt"
    else
        echo "== clock: no $cc_bin (made by bench/manycore_prepare.sh)"
    fi
fi
[ $SKIP_ANALYZER = 1 ] && exit 0
[ ${#WORKLOADS[@]} -gt 0 ] || WORKLOADS=("c_churn $OPS")
alt_args=()
for a in "${ALTS[@]}"; do alt_args+=(--alt "$a"); done
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
for wl in "${WORKLOADS[@]}"; do
    read -r prog args <<<"$wl"
    read -r -a args <<<"$args"
    rm -f "$W"/*
    echo "== analyzer: $wl, recorded under each tool"
    t0=$EPOCHREALTIME
    env LD_LIBRARY_PATH="$L" LD_PRELOAD="$M/heapprof/lib/libheapprof.so" HEAPPROF_QUIET=1 \
        HEAPPROF_OUT="$W/hp.hpt" "$M/workloads/$prog" "${args[@]}" >/dev/null
    t1=$EPOCHREALTIME
    env LD_LIBRARY_PATH="$L" PATH="$M/heaptrack/bin:$PATH" sh "$M/heaptrack/bin/heaptrack" -o "$W/ht" \
        "$M/workloads/$prog" "${args[@]}" >/dev/null 2>&1
    t2=$EPOCHREALTIME
    HT=$(ls "$W"/ht.* 2>/dev/null | head -1)
    awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN { printf "recorded: heapprof %.1f s, heaptrack %.1f s\n", b - a, c - b }'
    ls -la "$W"
    env LD_LIBRARY_PATH="$L" PATH="$M/heaptrack/bin:$PATH" bash "$ROOT/bench/analyzer_scaling.sh" \
        --trace "$W/hp.hpt" ${HT:+--ht-trace "$HT"} --cli "$M/heapprof/bin/heapprof" --runs "$RUNS" \
        --workers "$WORKERS" --replay "$REPLAY" ${DEPTH:+--depth "$DEPTH"} --commands "$COMMANDS" \
        "${alt_args[@]}" |
        tee -a "$OUT/analyzer.txt"
    wmax=${WORKERS##*,} rmax=${REPLAY##*,}
    if [ $TIMELINE = 1 ]; then
        echo "== the heap over time: view and massif at replay threads 0 and $rmax"
        env LD_LIBRARY_PATH="$L" bash "$ROOT/bench/analyzer_scaling.sh" --trace "$W/hp.hpt" \
            --cli "$M/heapprof/bin/heapprof" --runs "$RUNS" --workers "$wmax" --replay "0,$rmax" \
            --commands view,massif | tee -a "$OUT/analyzer.txt"
    fi
    wrs=("0 0 " "$wmax $rmax ")
    [ -n "$DEPTH" ] && { wrs=("0 0 "); for d in ${DEPTH//,/ }; do wrs+=("$wmax $rmax $d"); done; }
    for cli in "$M/heapprof/bin/heapprof" "${ALTS[@]#*=}"; do
        for wr in "${wrs[@]}"; do
            set -- $wr
            echo "== stage times: report ($cli), decode workers $1, replay threads $2${3:+, depth $3}"
            env LD_LIBRARY_PATH="$L" HEAPPROF_STAGE_TIMES=2 HEAPPROF_DECODE_THREADS=$1 HEAPPROF_REPLAY_THREADS=$2 \
                ${3:+HEAPPROF_REPLAY_DEPTH=$3} "$cli" report "$W/hp.hpt" 2>&1 >/dev/null |
                grep '^stage\|^threads at\|waits\|waited' | tee -a "$OUT/analyzer.txt"
        done
    done
done
