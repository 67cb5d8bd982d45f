#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/static_alloc.sh: what the shim adds per allocation event when the program's allocator
# is hooked by entry patching (issue #21), against the libc path it is preloaded over. One Rust
# workload (bench/workloads/rust_static_alloc.rs) is built twice: with Rust's System allocator
# (libc's malloc, interposed) and with a #[global_allocator] over jemalloc linked statically
# (mallocx/rallocx/sdallocx, patched). Each binary runs plain and profiled in rotating rounds;
# the added time per event (profiled - plain, over the trace's events) is taken per round, as
# wall time and as CPU time (user + sys of the whole process, the shim's threads included: on a
# shared machine the steadier of the two), and the medians are printed side by side with their
# ratio (static / libc; the goal: <= 1.2).
# The patched path measures no bytes touched (its blocks are not libc's), so the libc path is
# also run with HEAPPROF_TOUCH=0, the like-for-like figure.
#
# Usage: bench/static_alloc.sh [--runs N] [--n ROUNDS] [--lib PATH] [--cli PATH]
set -u
export LC_ALL=C
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
RUNS=5
N=20000
LIB="$ROOT/build/preload/libheapprof.so"
CLI="$ROOT/build/analyzer/heapprof"
while [ $# -gt 0 ]; do
    case "$1" in
    --runs) RUNS="$2"; shift 2 ;;
    --n) N="$2"; shift 2 ;;
    --lib) LIB="$2"; shift 2 ;;
    --cli) CLI="$2"; shift 2 ;;
    -h | --help) sed -n 3,14p "$0"; exit 0 ;;
    *) echo "static_alloc.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
OUT="$HERE/out/static_alloc"
mkdir -p "$OUT"
JE_A="$(gcc -print-file-name=libjemalloc.a)"
[ -f "$JE_A" ] || JE_A=/usr/lib/x86_64-linux-gnu/libjemalloc.a
[ -f "$JE_A" ] || { echo "static_alloc.sh: libjemalloc.a not found (libjemalloc-dev)" >&2; exit 1; }
SRC="$HERE/workloads/rust_static_alloc.rs"
env -u MAKEFLAGS rustc --edition 2021 -C opt-level=3 -g -o "$OUT/rust_libc" "$SRC" || exit 1
env -u MAKEFLAGS rustc --edition 2021 -C opt-level=3 -g --cfg je -C "link-arg=$JE_A" \
    -C link-arg=-lpthread -C link-arg=-lm -o "$OUT/rust_static" "$SRC" || exit 1

# secs CMD...: "wall_s cpu_s" of one run
secs() {
    local t0=$EPOCHREALTIME
    /usr/bin/time -f "%U %S" -o "$OUT/time.txt" "$@" >/dev/null 2>&1 ||
        { echo "static_alloc.sh: $* failed" >&2; exit 1; }
    local t1=$EPOCHREALTIME
    echo "$t1 $t0 $(cat "$OUT/time.txt")" | awk '{printf "%.6f %.3f", $1 - $2, $3 + $4}'
}

# added NAME BIN TOUCH ROUND: plain and profiled in alternating order ->
# "wall_ns_per_event cpu_ns_per_event events"
added() {
    local name="$1" bin="$2" touch="$3" round="$4" plain prof
    local trace="$OUT/$name.hpt"
    rm -f "$trace"
    local prof_cmd=(env LD_PRELOAD="$LIB" HEAPPROF_OUT="$trace" HEAPPROF_QUIET=1 HEAPPROF_CPU=0
        HEAPPROF_TOUCH="$touch" "$bin" "$N")
    if [ $((round % 2)) = 0 ]; then
        plain=$(secs "$bin" "$N")
        prof=$(secs "${prof_cmd[@]}")
    else
        prof=$(secs "${prof_cmd[@]}")
        plain=$(secs "$bin" "$N")
    fi
    local events
    events=$("$CLI" stats --json "$trace" | python3 -c 'import json,sys; print(json.load(sys.stdin)["events"])')
    echo "$plain $prof $events" |
        awk '{printf "%.1f %.1f %d\n", ($3 - $1) * 1e9 / $5, ($4 - $2) * 1e9 / $5, $5}'
}

median() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR]=$1} END {print v[int((NR + 1) / 2)]}'; }

declare -A wall cpu n_events
CONFIGS=("libc|$OUT/rust_libc|1" "libc_notouch|$OUT/rust_libc|0" "static|$OUT/rust_static|1")
for ((r = 0; r < RUNS; r++)); do
    for cfg in "${CONFIGS[@]}"; do
        IFS='|' read -r name bin touch <<<"$cfg"
        read -r w c e <<<"$(added "$name" "$bin" "$touch" "$r")"
        wall[$name]+="$w "
        cpu[$name]+="$c "
        n_events[$name]=$e
    done
done
echo "rust_static_alloc $N rounds, $RUNS runs each; added ns per allocation event, median:"
printf "  %-30s %10s %10s %10s\n" "" "wall" "cpu" "events"
declare -A mw mc
for name in libc libc_notouch static; do
    mw[$name]=$(echo "${wall[$name]}" | median)
    mc[$name]=$(echo "${cpu[$name]}" | median)
done
printf "  %-30s %10s %10s %10s\n" "libc path (interposed)" "${mw[libc]}" "${mc[libc]}" "${n_events[libc]}"
printf "  %-30s %10s %10s\n" "libc path, HEAPPROF_TOUCH=0" "${mw[libc_notouch]}" "${mc[libc_notouch]}"
printf "  %-30s %10s %10s %10s\n" "static jemalloc (patched)" "${mw[static]}" "${mc[static]}" "${n_events[static]}"
echo "${mw[static]} ${mw[libc]} ${mw[libc_notouch]} ${mc[static]} ${mc[libc]} ${mc[libc_notouch]}" | awk '{
    printf "  ratio static/libc: wall %.2fx, cpu %.2fx; static/libc without touch: wall %.2fx, cpu %.2fx (goal <= 1.2x)\n",
        $1 / $2, $4 / $5, $1 / $3, $4 / $6 }'
