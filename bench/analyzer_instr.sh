#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/analyzer_instr.sh: where the analyzer's instructions go, thread by thread, at the thread
# counts of a many-core machine, counted by callgrind on any machine (exact and repeatable, where
# wall time on a 2-CPU VM says nothing about 16 cores). valgrind runs the threads one at a time,
# so each thread's count is its work alone, none of its waiting. Per role (a thread's role is
# the function its instructions go to: decode workers, shard threads, the ordered scans,
# growth's two passes, the reading thread, the caller), instructions per event of the trace:
#   max    the busiest thread of that role
#   sum    all its threads
#   bound  what one thread of the role must do at least: max, except for the decode workers,
#          which take chunks from one queue as they come (under valgrind one may take most of
#          them), so sum / threads
# and the totals: every thread's instructions an event (what all cores together spend), and
# the largest bound (the serial bound: with enough cores, the wall time goes no lower than that
# thread's work, whatever the others do). The reading thread's symbolizing while idle (symbolize_warm, the debug
# info of every module a stack names: a fixed cost, large where libc6-dbg is installed) is left
# out of its count and printed apart.
# Where it records its own trace (no --trace) and heaptrack is installed, it also counts
# heaptrack_print's instructions on heaptrack's trace of the same run (one thread: all of them,
# start-up included) and prints how many times the serial bound that is: the most `report`
# could gain on heaptrack_print with every thread on a core of its own, at equal instructions
# per cycle (issue 18's goal is 10x on >= 8 cores).
# Usage: bench/analyzer_instr.sh [--trace FILE | --ops N] [--replay R] [--workers W]
#                                [--command report|stats|dhat|view|massif] [--cli PATH] [--keep DIR]
#                                [--no-heaptrack]
#   default: a c_churn trace of --ops 1000000 pairs (2 M events) recorded here, report, R 8, W 4
# Needs valgrind, build/analyzer/heapprof and (without --trace) build/preload/libheapprof.so
# and the bench workloads (bench/run.sh --build-only).
set -u
export LC_ALL=C
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
CLI="$ROOT/build/analyzer/heapprof"
LIB="$ROOT/build/preload/libheapprof.so"
TRACE="" OPS=1000000 REPLAY=8 WORKERS=4 CMD=report KEEP="" HT=1
while [ $# -gt 0 ]; do
    case "$1" in
    --trace) TRACE="$2"; shift 2 ;;
    --ops) OPS="$2"; shift 2 ;;
    --replay) REPLAY="$2"; shift 2 ;;
    --workers) WORKERS="$2"; shift 2 ;;
    --command) CMD="$2"; shift 2 ;;
    --cli) CLI="$2"; shift 2 ;;
    --keep) KEEP="$2"; shift 2 ;;
    --no-heaptrack) HT=0; shift ;;
    -h | --help) sed -n 3,27p "$0"; exit 0 ;;
    *) echo "analyzer_instr.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
case "$CMD" in report | stats | dhat | view | massif) ;;
*) echo "analyzer_instr.sh: --command report, stats, dhat, view or massif" >&2; exit 2 ;;
esac
command -v valgrind >/dev/null || { echo "analyzer_instr.sh: needs valgrind" >&2; exit 1; }
[ -x "$CLI" ] || { echo "analyzer_instr.sh: no $CLI (build first)" >&2; exit 1; }
OUT="${KEEP:-$(mktemp -d)}"
mkdir -p "$OUT"
if [ -z "$TRACE" ]; then
    [ -f "$LIB" ] && [ -x "$HERE/out/bin/c_churn" ] ||
        { echo "analyzer_instr.sh: no $LIB or bench/out/bin/c_churn (build, bench/run.sh --build-only)" >&2; exit 1; }
    rm -f "$OUT"/rec.*.hpt
    env LD_PRELOAD="$LIB" HEAPPROF_OUT="$OUT/rec.%p.hpt" HEAPPROF_QUIET=1 \
        "$HERE/out/bin/c_churn" "$OPS" >/dev/null
    TRACE=$(ls -S "$OUT"/rec.*.hpt | head -1)
    OPS_RECORDED=1
fi
[ -r "$TRACE" ] || { echo "analyzer_instr.sh: cannot read $TRACE" >&2; exit 1; }
EV=$("$CLI" stats "$TRACE" --json | sed -n 's/^  "events": *\([0-9]*\).*/\1/p')
[ -n "$EV" ] && [ "$EV" -gt 0 ] || { echo "analyzer_instr.sh: no events in $TRACE" >&2; exit 1; }

rm -f "$OUT"/cg.*
args=("$CMD" "$TRACE")
case "$CMD" in dhat | massif) args+=(-o /dev/null) ;; view) args+=(-o "$OUT/view.html") ;; esac
env HEAPPROF_REPLAY_THREADS="$REPLAY" HEAPPROF_DECODE_THREADS="$WORKERS" \
    valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$OUT/cg.%p" \
    "$CLI" "${args[@]}" >/dev/null 2>&1 || { echo "analyzer_instr.sh: $CMD failed under valgrind" >&2; exit 1; }

. "$HERE/tools/callgrind_sums.sh"
incl() { cg_sum "$1" "$2" yes; } # inclusive Ir of the functions matching $2

# role of a thread: the first of these entry points (or kernels) that holds most of its work
role_of() {
    local f=$1 total=$2 r pat
    for r in "decode:decode_pool.c:worker \\[" "shard:replay_par.c:shard_main \\[" \
        "order:replay_scan_order \\[" "peak:replay_scan_peak \\[" "apply:replay_scan_apply \\[" \
        "links:growth_scan_links \\[" "chains:growth_scan_chains \\[" "timeline:timeline_scan \\[" \
        "reader:readahead.c:run \\["; do
        pat=${r#*:}
        if [ "$(incl "$f" "$pat")" -gt $((total / 2)) ]; then
            echo "${r%%:*}"
            return
        fi
    done
    echo other
}

declare -A max=() sum=() n=()
all=0 warm=0
for f in "$OUT"/cg.*-*; do
    t=$(cg_totals "$f")
    [ -n "$t" ] || continue
    case "$f" in *-01) r=caller ;; *) r=$(role_of "$f" "$t") ;; esac
    if [ "$r" = reader ]; then
        w=$(incl "$f" ':symbolize_warm \[')
        warm=$((warm + w))
        t=$((t - w))
    fi
    all=$((all + t))
    n[$r]=$(( ${n[$r]:-0} + 1 ))
    sum[$r]=$(( ${sum[$r]:-0} + t ))
    [ "$t" -gt "${max[$r]:-0}" ] && max[$r]=$t
done
top=0 topname=""
for r in "${!n[@]}"; do
    b=${max[$r]}
    [ "$r" = decode ] && b=$(( ${sum[$r]} / ${n[$r]} ))
    [ "$b" -gt "$top" ] && top=$b topname=$r
done

printf "%s on %s: %d events, %s replay threads, %s decode workers (callgrind; instructions per event)\n" \
    "$CMD" "$(basename "$TRACE")" "$EV" "$REPLAY" "$WORKERS"
printf "%-8s %8s %10s %10s %10s\n" role threads max sum bound
for r in caller reader decode shard order peak apply links chains timeline other; do
    [ -n "${n[$r]:-}" ] || continue
    awk -v r="$r" -v k="${n[$r]}" -v m="${max[$r]}" -v s="${sum[$r]}" -v e="$EV" \
        'BEGIN {b = r == "decode" ? s / k : m
                printf "%-8s %8d %10.1f %10.1f %10.1f\n", r, k, m / e, s / e, b / e}'
done
awk -v a="$all" -v t="$top" -v tn="$topname" -v w="$warm" -v e="$EV" 'BEGIN {
    printf "all threads %.1f an event; the largest bound (%s) %.1f: at most %.1fx one thread'"'"'s work\n",
        a / e, tn, t / e, a / t
    printf "left out: the reading thread symbolizing while idle, %.1f M instructions\n", w / 1e6 }'
# heaptrack_print on heaptrack's trace of the same program and arguments (same events)
if [ -n "${OPS_RECORDED:-}" ] && [ "$HT" = 1 ] && command -v heaptrack >/dev/null &&
    command -v heaptrack_print >/dev/null; then
    rm -f "$OUT"/ht.* "$OUT"/cg.htp
    if heaptrack -o "$OUT/ht" "$HERE/out/bin/c_churn" "$OPS" >/dev/null 2>&1 &&
        valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.htp" \
            heaptrack_print "$(ls "$OUT"/ht.* | head -1)" >/dev/null 2>&1; then
        h=$(cg_totals "$OUT/cg.htp")
        awk -v h="$h" -v t="$top" -v e="$EV" 'BEGIN {
            printf "heaptrack_print on the same run: %.1f an event (one thread), %.1fx the largest bound\n",
                h / e, h / t }'
    else
        echo "heaptrack_print: not measured (heaptrack or callgrind failed)"
    fi
fi
[ -n "$KEEP" ] || rm -rf "$OUT"
