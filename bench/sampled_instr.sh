#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/sampled_instr.sh: instructions the shim adds per allocation event, counted by callgrind
# (exact and repeatable where wall time on a shared machine cannot resolve a few ns). Runs
# bench/tools/alloc_pairs (a loop of malloc+free, calloc+free or malloc+realloc+free of 16-256
# bytes, served by glibc's tcache) under valgrind --tool=callgrind at COUNT and 3 x COUNT
# iterations, so that start-up and exit cancel out: (Ir(3 COUNT) - Ir(COUNT)) / (2 COUNT) is
# the instructions of one iteration. Modes, side by side: the program alone (bare), with the
# shim preloaded but HEAPPROF_ENABLE=0 (the entry points passing through), sampled
# (HEAPPROF_SAMPLE_BYTES=N, seed 1) and full recording (HEAPPROF_CPU=0 in both). Under
# callgrind the shim's writer thread runs serialized with the program; its instructions are
# counted too (all threads' totals).
#
# Usage: bench/sampled_instr.sh [--count K] [--n BYTES] [--kinds malloc,calloc,realloc]
#                               [--modes bare,off,sampled,full] [--lib PATH] [--label TEXT]
set -u
export LC_ALL=C
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
COUNT=100000
N=524288
KINDS=malloc,calloc,realloc
MODES=bare,off,sampled,full
LIB="$ROOT/build/preload/libheapprof.so"
LABEL=""
while [ $# -gt 0 ]; do
    case "$1" in
    --count) COUNT="$2"; shift 2 ;;
    --n) N="$2"; shift 2 ;;
    --kinds) KINDS="$2"; shift 2 ;;
    --modes) MODES="$2"; shift 2 ;;
    --lib) LIB="$2"; shift 2 ;;
    --label) LABEL="$2"; shift 2 ;;
    -h | --help) sed -n 3,16p "$0"; exit 0 ;;
    *) echo "sampled_instr.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
command -v valgrind >/dev/null || { echo "sampled_instr.sh: needs valgrind (scripts/deps.sh)" >&2; exit 1; }
[ -f "$LIB" ] || { echo "sampled_instr.sh: no $LIB (build first)" >&2; exit 1; }
BIN="$HERE/out/bin"
OUT="$HERE/out/sampled_instr"
mkdir -p "$BIN" "$OUT"
PROG="$BIN/alloc_pairs"
if ! [ "$PROG" -nt "$HERE/tools/alloc_pairs.c" ]; then
    gcc -O2 -g -Wall -o "$PROG" "$HERE/tools/alloc_pairs.c" || exit 1
fi

# instr MODE KIND COUNT -> total instructions of the run (callgrind's "Collected")
instr() {
    local env=()
    case "$1" in
    bare) env=() ;;
    off) env=(LD_PRELOAD="$LIB" HEAPPROF_ENABLE=0) ;;
    sampled) env=(LD_PRELOAD="$LIB" HEAPPROF_OUT="$OUT/run.hpt" HEAPPROF_QUIET=1 HEAPPROF_CPU=0
        HEAPPROF_SAMPLE_BYTES="$N" HEAPPROF_SAMPLE_SEED=1) ;;
    full) env=(LD_PRELOAD="$LIB" HEAPPROF_OUT="$OUT/run.hpt" HEAPPROF_QUIET=1 HEAPPROF_CPU=0) ;;
    esac
    env "${env[@]}" valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.out" "$PROG" "$2" "$3" 2>&1 |
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}

IFS=, read -r -a kinds <<<"$KINDS"
IFS=, read -r -a modes <<<"$MODES"
[ -n "$LABEL" ] && echo "$LABEL"
printf "N = %s bytes (sampled); instructions per loop iteration; [added] = minus bare\n" "$N"
printf "%-22s" "kind (events/iter)"
for m in "${modes[@]}"; do printf " %18s" "$m"; done
echo
for k in "${kinds[@]}"; do
    case "$k" in realloc) ev=3 ;; *) ev=2 ;; esac
    bare=""
    printf "%-22s" "$k ($ev)"
    for m in "${modes[@]}"; do
        a=$(instr "$m" "$k" "$COUNT")
        b=$(instr "$m" "$k" $((3 * COUNT)))
        [ -n "$a" ] && [ -n "$b" ] || { printf " %18s" "failed"; continue; }
        per=$(awk -v a="$a" -v b="$b" -v c="$COUNT" 'BEGIN {printf "%.1f", (b - a) / (2 * c)}')
        [ "$m" = bare ] && bare=$per
        if [ -n "$bare" ] && [ "$m" != bare ]; then
            printf " %18s" "$per [+$(awk -v p="$per" -v b="$bare" 'BEGIN {printf "%.1f", p - b}')]"
        else
            printf " %18s" "$per"
        fi
    done
    echo
done
