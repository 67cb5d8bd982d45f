#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/sampled.sh: what sampled recording (HEAPPROF_SAMPLE_BYTES=N, docs/sampling.md) adds per
# allocation, beside full recording and heaptrack. Every round runs the uninstrumented program
# (base), heapprof full, heapprof sampled and heaptrack back to back, the order rotating each
# round; the added cost is taken per round (tool - base of the same round) and divided by the
# program's allocation calls (the full trace's blocks), then the median over rounds is printed
# (min..max beside it). Wall time from EPOCHREALTIME; CPU = user+sys of the process tree (GNU
# time): heaptrack's interpreter and zstd run as processes of their own, heapprof's writer as a
# thread, both counted. Also prints the trace sizes. HEAPPROF_CPU=0 in both heapprof modes: the
# CPU sampler is another feature (bench/feature_cost.sh).
#
# Usage: bench/sampled.sh [--runs N] [--n BYTES] [--only NAME[,NAME...]] [--no-heaptrack]
#                         [--tools base,sampled,...] [--scale K] [--lib PATH] [--cli PATH]
#   --tools: which of base, full, sampled, heaptrack run (base always does); without full the
#     allocation calls are counted by bench/tools/count_events.so in a run of its own
#   --scale K: multiplies each workload's size argument, so that a cheap tool's few ns per call
#     stand out of the noise (GNU time counts CPU in 10 ms steps); the start-up cost (the writer
#     thread, the first module scan) is spread over more calls too
#   needs the bench workloads (bench/run.sh --build-only builds them)
set -u
export LC_ALL=C
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
RUNS=5
N=524288
ONLY=""
HEAPTRACK=1
TOOLS_ARG="base,full,sampled,heaptrack"
SCALE=1
LIB="$ROOT/build/preload/libheapprof.so"
CLI="$ROOT/build/analyzer/heapprof"
while [ $# -gt 0 ]; do
    case "$1" in
    --runs) RUNS="$2"; shift 2 ;;
    --n) N="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    --no-heaptrack) HEAPTRACK=0; shift ;;
    --tools) TOOLS_ARG="$2"; shift 2 ;;
    --scale) SCALE="$2"; shift 2 ;;
    --lib) LIB="$2"; shift 2 ;;
    --cli) CLI="$2"; shift 2 ;;
    -h | --help) sed -n 3,21p "$0"; exit 0 ;;
    *) echo "sampled.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
BIN="$HERE/out/bin"
OUT="$HERE/out/sampled"
mkdir -p "$OUT"
[ -x "$BIN/c_churn" ] || "$HERE/run.sh" --build-only >/dev/null || exit 1
[ "$HEAPTRACK" = 1 ] && ! command -v heaptrack >/dev/null && HEAPTRACK=0

# name | command (sizes as bench/run.sh --quick: a round stays short on a shared machine)
WORKLOADS=(
    "c_churn|$BIN/c_churn 2000000"
    "c_threads_1|$BIN/c_threads 1 1600000"
    "c_threads_2|$BIN/c_threads 2 1600000"
    "c_threads_4|$BIN/c_threads 4 1600000"
    "c_threads_8|$BIN/c_threads 8 1600000"
    "cpp_mixed|$BIN/cpp_mixed 4"
    "realloc_chain|$BIN/realloc_chain 30"
    "rust_vec_growth|$BIN/rust_vec_growth 12000"
)

# run TOOL NAME CMD... -> "wall_s cpu_s" on stdout
run() {
    local tool="$1" name="$2"
    shift 2
    local pre=() trace="$OUT/$name.$tool.hpt"
    rm -f "$trace" "$OUT/$name.heaptrack".*
    case "$tool" in
    full) pre=(env LD_PRELOAD="$LIB" HEAPPROF_OUT="$trace" HEAPPROF_QUIET=1 HEAPPROF_CPU=0) ;;
    sampled) pre=(env LD_PRELOAD="$LIB" HEAPPROF_OUT="$trace" HEAPPROF_QUIET=1 HEAPPROF_CPU=0
        HEAPPROF_SAMPLE_BYTES="$N" HEAPPROF_SAMPLE_SEED=1) ;;
    heaptrack) pre=(heaptrack -o "$OUT/$name.heaptrack") ;;
    base) pre=() ;;
    esac
    local t0 t1
    t0=$EPOCHREALTIME
    /usr/bin/time -f "%U %S" -o "$OUT/time.txt" "${pre[@]}" "$@" >/dev/null 2>"$OUT/$name.$tool.err" ||
        { echo "sampled.sh: $name under $tool failed (see $OUT/$name.$tool.err)" >&2; return 1; }
    t1=$EPOCHREALTIME
    awk -v w="$(echo "$t1 - $t0" | bc -l)" '{printf "%.6f %.3f\n", w, $1 + $2}' "$OUT/time.txt"
}

median_range() { # values on stdin -> "median (min..max)"
    sort -g | awk '{v[NR] = $1} END {
        if (NR == 0) { print "-"; exit }
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.1f (%.1f..%.1f)", m, v[1], v[NR] }'
}

TOOLS=(base)
for t in full sampled heaptrack; do
    [[ ",$TOOLS_ARG," == *",$t,"* ]] || continue
    [ "$t" = heaptrack ] && [ "$HEAPTRACK" = 0 ] && continue
    TOOLS+=("$t")
done
has() { [[ " ${TOOLS[*]} " == *" $1 "* ]]; }
printf "N = %s bytes, %s rounds, added time per allocation call in ns (median (min..max) of rounds)\n" "$N" "$RUNS"
printf "%-16s %10s %8s | %-24s %-24s %-24s | %-24s %-24s | %10s %10s\n" workload allocs base_s \
    "full wall" "sampled wall" "heaptrack wall" "full cpu" "sampled cpu" full_trace sampled_trace
for w in "${WORKLOADS[@]}"; do
    name="${w%%|*}"
    cmd="${w#*|}"
    if [ -n "$ONLY" ] && ! [[ ",$ONLY," == *",$name,"* ]]; then
        continue
    fi
    size="${cmd##* }"
    cmd="${cmd% *} $((size * SCALE))"
    : >"$OUT/$name.rounds"
    for ((r = 0; r < RUNS; r++)); do
        line="$r"
        n=${#TOOLS[@]}
        declare -A got=()
        for ((k = 0; k < n; k++)); do
            tool="${TOOLS[$(((k + r) % n))]}"
            # shellcheck disable=SC2086
            got[$tool]=$(run "$tool" "$name" $cmd) || exit 1
        done
        for tool in "${TOOLS[@]}"; do line="$line $tool ${got[$tool]}"; done
        echo "$line" >>"$OUT/$name.rounds"
        unset got
    done
    if has full; then
        allocs=$("$CLI" stats --json "$OUT/$name.full.hpt" | python3 -c 'import json,sys; print(json.load(sys.stdin)["blocks"])')
    else
        rm -f "$OUT/count.txt"
        # shellcheck disable=SC2086
        env LD_PRELOAD="$BIN/count_events.so" BENCH_COUNT_OUT="$OUT/count.txt" $cmd >/dev/null
        allocs=$(awk '{n += $2} END {print n}' "$OUT/count.txt")
    fi
    base=$(awk '{for (i = 2; i < NF; i += 3) if ($i == "base") print $(i + 1)}' "$OUT/$name.rounds" | median_range | cut -d' ' -f1)
    added() { # TOOL FIELD(1 wall, 2 cpu)
        awk -v t="$1" -v f="$2" -v n="$allocs" '{
            for (i = 2; i < NF; i += 3) { if ($i == "base") b = $(i + f); if ($i == t) x = $(i + f) }
            if (x != "") printf "%.3f\n", (x - b) / n * 1e9 }' "$OUT/$name.rounds" | median_range
    }
    col() { if has "$1"; then added "$1" "$2"; else echo "-"; fi; }
    size_of() { if has "$1"; then stat -c %s "$OUT/$name.$1.hpt"; else echo "-"; fi; }
    printf "%-16s %10s %8s | %-24s %-24s %-24s | %-24s %-24s | %10s %10s\n" "$name" "$allocs" "$base" \
        "$(col full 1)" "$(col sampled 1)" "$(col heaptrack 1)" "$(col full 2)" "$(col sampled 2)" \
        "$(size_of full)" "$(size_of sampled)"
done
