#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/feature_cost.sh: what one of the shim's optional features adds to a profiled run:
# every workload runs under libheapprof.so with the feature off and on, back to back, the order
# alternating each round, and the added cost is taken per round (on - off) and reported as the
# median with min..max. Wall time from bash EPOCHREALTIME; CPU (user+sys of the whole process,
# the shim's threads included) from GNU time. Also checks that the feature does not change the
# allocation figures (stats blocks/bytes).
#   --feature cpu (default): CPU sampling (issue #8), HEAPPROF_CPU=0 against HEAPPROF_CPU=MODE;
#     "per unit" is the added CPU per sample the trace holds.
#   --feature touch: bytes touched (issue #5), HEAPPROF_TOUCH=0 against 1, both with
#     HEAPPROF_CPU=0; "per unit" is the added CPU per allocation event. c_large (issue #23:
#     160 KiB-4 MiB blocks on recycled heap pages) runs with this feature only.
#   --base-lib PATH: also measure the same feature with another build of libheapprof.so (the
#     one before a change), in the same rounds, and print its added CPU per unit beside ours.
#
# Usage: bench/feature_cost.sh [--feature cpu|touch] [--runs N] [--lib PATH] [--cli PATH]
#                              [--samples DIR] [--cpu MODE] [--only NAME] [--base-lib PATH]
#   --cpu MODE: the HEAPPROF_CPU of the sampled runs (default 1; `timer` measures the fallback)
#   needs the bench workloads built (bench/run.sh --build-only) and the samples (cpu_hot)
set -u
export LC_ALL=C
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
FEATURE=cpu
RUNS=5
LIB="$ROOT/build/preload/libheapprof.so"
CLI="$ROOT/build/analyzer/heapprof"
SAMPLES="$ROOT/build/samples"
MODE=1
ONLY=""
BASE_LIB=""
while [ $# -gt 0 ]; do
    case "$1" in
    --runs) RUNS="$2"; shift 2 ;;
    --lib) LIB="$2"; shift 2 ;;
    --cli) CLI="$2"; shift 2 ;;
    --samples) SAMPLES="$2"; shift 2 ;;
    --cpu) MODE="$2"; shift 2 ;;
    --feature) FEATURE="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    --base-lib) BASE_LIB="$2"; shift 2 ;;
    -h | --help) sed -n 3,21p "$0"; exit 0 ;;
    *) echo "feature_cost.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
case "$FEATURE" in
cpu) VAR=HEAPPROF_CPU OTHER="HEAPPROF_TOUCH=1" UNITS=samples UNIT="cpu/sample" ;;
touch) VAR=HEAPPROF_TOUCH MODE=1 OTHER="HEAPPROF_CPU=0" UNITS=events UNIT="cpu/event" ;;
*) echo "feature_cost.sh: --feature is cpu or touch" >&2; exit 2 ;;
esac
OUT="$HERE/out/$FEATURE"
BIN="$HERE/out/bin"
mkdir -p "$OUT"
[ -x "$BIN/c_churn" ] || "$HERE/run.sh" --build-only >/dev/null || exit 1
if [ "$FEATURE" = touch ] && [ "$HERE/workloads/c_large.c" -nt "$BIN/c_large" ]; then
    gcc -O2 -g -fno-omit-frame-pointer -o "$BIN/c_large" "$HERE/workloads/c_large.c" || exit 1
fi

# name | command: a CPU-bound run with few allocations, then allocation-heavy ones
WORKLOADS=(
    "cpu_hot|$SAMPLES/cpu_hot 3000"
    "c_churn|$BIN/c_churn 3000000"
    "c_threads_2|$BIN/c_threads 2 3000000"
    "rust_vec_growth|$BIN/rust_vec_growth 40000"
    "cpp_mixed|$BIN/cpp_mixed 8"
    "realloc_chain|$BIN/realloc_chain 60"
)
[ "$FEATURE" = touch ] && WORKLOADS+=("c_large|$BIN/c_large 20000")

# run MODE NAME CMD... -> "wall_s cpu_s units blocks bytes" (units: samples, or events)
run() {
    local mode="$1" name="$2"
    shift 2
    local trace="$OUT/$name.$mode.hpt"
    rm -f "$trace"
    local t0 t1
    t0=$EPOCHREALTIME
    /usr/bin/time -f "%U %S" -o "$OUT/time.txt" env LD_PRELOAD="${RUN_LIB:-$LIB}" HEAPPROF_OUT="$trace" \
        HEAPPROF_QUIET=1 $OTHER "$VAR=$mode" "$@" >/dev/null 2>"$OUT/$name.$mode.err" || return 1
    t1=$EPOCHREALTIME
    local cpu
    cpu=$(awk '{print $1 + $2}' "$OUT/time.txt")
    "$CLI" stats "$trace" --json | python3 -c '
import json, sys
s = json.load(sys.stdin)
c = s.get("cpu", {})
unit = c.get("samples", 0) if sys.argv[1] == "cpu" else s["events"]
print(unit, s["blocks"], s["bytes"])' "$FEATURE" | {
        read -r samples blocks bytes
        awk -v a="$t0" -v b="$t1" -v c="$cpu" -v s="$samples" -v k="$blocks" -v y="$bytes" \
            'BEGIN { printf "%.4f %.3f %d %d %d\n", b - a, c, s, k, y }'
    }
}

median_range() { # numbers on stdin -> "median (min..max)"
    sort -g | awk '{ v[NR] = $1 } END {
        if (NR == 0) { print "-"; exit }
        m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%+.3f (%+.3f..%+.3f)", m, v[1], v[NR] }'
}

# per-unit added CPU of one rounds file: "median unit" (per sample in µs, per event in ns)
per_unit() {
    local scale unit
    scale=$([ "$FEATURE" = cpu ] && echo 1e6 || echo 1e9)
    unit=$([ "$FEATURE" = cpu ] && echo us || echo ns)
    awk -v k="$scale" '{ if ($5 > 0) print ($4 - $2) / $5 * k }' "$1" |
        sort -g | awk -v u="$unit" '{v[NR]=$1} END { if (NR) printf "%.1f %s", v[int((NR+1)/2)], u; else print "-" }'
}

printf "%-16s %10s %10s %22s %22s %9s %14s" workload "wall off" "cpu off" \
    "added wall s" "added cpu s" "$UNITS" "$UNIT"
[ -z "$BASE_LIB" ] || printf " %14s %22s" "base $UNIT" "base added cpu s"
printf " %s\n" "alloc figures"
for w in "${WORKLOADS[@]}"; do
    name="${w%%|*}"
    [ -z "$ONLY" ] || [ "$ONLY" = "$name" ] || continue
    read -r -a cmd <<<"${w#*|}"
    : >"$OUT/$name.rounds"
    : >"$OUT/$name.base.rounds"
    same=yes
    for ((r = 0; r < RUNS; r++)); do
        if ((r % 2)); then order="$MODE 0"; else order="0 $MODE"; fi
        declare -A res=()
        for mode in $order; do
            res[$mode]=$(run "$mode" "$name" "${cmd[@]}") || { echo "$name: run failed" >&2; continue 2; }
        done
        read -r w0 c0 s0 k0 y0 <<<"${res[0]}"
        read -r w1 c1 s1 k1 y1 <<<"${res[$MODE]}"
        [ "$k0/$y0" = "$k1/$y1" ] || same="DIFFER ($k0/$y0 vs $k1/$y1)"
        echo "$w0 $c0 $w1 $c1 $s1" >>"$OUT/$name.rounds"
        [ -n "$BASE_LIB" ] || continue
        # the same pair with the base library, in the same round
        res=()
        for mode in $order; do
            res[$mode]=$(RUN_LIB="$BASE_LIB" run "$mode" "$name.base" "${cmd[@]}") ||
                { echo "$name: base run failed" >&2; continue 2; }
        done
        read -r w0 c0 s0 k0 y0 <<<"${res[0]}"
        read -r w1 c1 s1 k1 y1 <<<"${res[$MODE]}"
        echo "$w0 $c0 $w1 $c1 $s1" >>"$OUT/$name.base.rounds"
    done
    wall_off=$(awk '{print $1}' "$OUT/$name.rounds" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
    cpu_off=$(awk '{print $2}' "$OUT/$name.rounds" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
    dwall=$(awk '{print $3 - $1}' "$OUT/$name.rounds" | median_range)
    dcpu=$(awk '{print $4 - $2}' "$OUT/$name.rounds" | median_range)
    samples=$(awk '{print $5}' "$OUT/$name.rounds" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
    per=$(per_unit "$OUT/$name.rounds")
    printf "%-16s %9.3fs %9.3fs %22s %22s %9s %14s" "$name" "$wall_off" "$cpu_off" "$dwall" \
        "$dcpu" "$samples" "$per"
    if [ -n "$BASE_LIB" ]; then
        printf " %14s %22s" "$(per_unit "$OUT/$name.base.rounds")" \
            "$(awk '{print $4 - $2}' "$OUT/$name.base.rounds" | median_range)"
    fi
    printf " %s\n" "$same"
done
