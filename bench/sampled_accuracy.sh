#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/sampled_accuracy.sh: how close sampled recording's estimates (docs/sampling.md) come to
# the exact figures, over many seeds. Each workload runs once recorded in full (the truth) and
# then sampled (HEAPPROF_SAMPLE_BYTES=N) with seeds 1..S; `heapprof report --json` of each
# trace gives bytes per naming function (estimates for the sampled ones). Prints per workload
# the total's error (median and worst over seeds, and how many seeds stay within 3%), and over
# the functions holding >= 5% of the bytes the worst error and how many (seed, function) pairs
# stay within 10%. The same program must allocate the same way on every run: single-threaded
# workloads only. Not a test (a seed's luck is not a bug); test_pprof.c holds one fixed seed.
#
# Usage: bench/sampled_accuracy.sh [--seeds S] [--n BYTES] [--only NAME[,NAME...]]
set -u
export LC_ALL=C
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
SEEDS=20
N=524288
ONLY=""
LIB="$ROOT/build/preload/libheapprof.so"
CLI="$ROOT/build/analyzer/heapprof"
while [ $# -gt 0 ]; do
    case "$1" in
    --seeds) SEEDS="$2"; shift 2 ;;
    --n) N="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    -h | --help) sed -n 3,12p "$0"; exit 0 ;;
    *) echo "sampled_accuracy.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
BIN="$HERE/out/bin"
OUT="$HERE/out/sampled_accuracy"
mkdir -p "$OUT"
[ -x "$BIN/c_churn" ] || "$HERE/run.sh" --build-only >/dev/null || exit 1
E2E="$ROOT/build/tests/e2e"
SAMPLES="$ROOT/build/samples"

WORKLOADS=(
    "sampled_mix|$E2E/sampled_mix"
    "c_churn|$BIN/c_churn 10000000"
    "cpp_mixed|$BIN/cpp_mixed 8"
    "realloc_chain|$BIN/realloc_chain 60"
    "rust_vec_growth|$BIN/rust_vec_growth 40000"
    "rust_hashmap_growth|$BIN/rust_hashmap_growth 1500000"
    "exact_counts|$SAMPLES/exact_counts"
    "small_stacks|$SAMPLES/small_stacks"
)

printf "N = %s bytes, %s seeds; errors in %% of the exact figure\n" "$N" "$SEEDS"
printf "%-20s %14s | %-30s | %-40s\n" workload exact_bytes "total: median worst within3%" \
    "sites>=5%: n worst within10%"
for w in "${WORKLOADS[@]}"; do
    name="${w%%|*}"
    cmd="${w#*|}"
    if [ -n "$ONLY" ] && ! [[ ",$ONLY," == *",$name,"* ]]; then
        continue
    fi
    exe="${cmd%% *}"
    [ -x "$exe" ] || { printf "%-20s (not built)\n" "$name"; continue; }
    # shellcheck disable=SC2086
    env LD_PRELOAD="$LIB" HEAPPROF_OUT="$OUT/$name.full.hpt" HEAPPROF_QUIET=1 HEAPPROF_CPU=0 \
        HEAPPROF_TOUCH=0 $cmd >/dev/null 2>&1 && "$CLI" report --json "$OUT/$name.full.hpt" \
        >"$OUT/$name.full.json" 2>/dev/null || { printf "%-20s (full run failed)\n" "$name"; continue; }
    for ((s = 1; s <= SEEDS; s++)); do
        rm -f "$OUT/$name.s$s.hpt"
        # shellcheck disable=SC2086
        env LD_PRELOAD="$LIB" HEAPPROF_OUT="$OUT/$name.s$s.hpt" HEAPPROF_QUIET=1 HEAPPROF_CPU=0 \
            HEAPPROF_SAMPLE_BYTES="$N" HEAPPROF_SAMPLE_SEED="$s" $cmd >/dev/null 2>&1
        "$CLI" report --json "$OUT/$name.s$s.hpt" >"$OUT/$name.s$s.json" 2>/dev/null
    done
    python3 - "$OUT" "$name" "$SEEDS" <<'PY'
import json, os, statistics, sys
out, name, seeds = sys.argv[1], sys.argv[2], int(sys.argv[3])
def by_function(path):
    try:
        r = json.load(open(path))
    except (OSError, ValueError):
        return None
    m = {}
    for s in r.get("sites", []):
        m[s["function"]] = m.get(s["function"], 0) + s["bytes"]
    return m
exact = by_function(f"{out}/{name}.full.json")
total = sum(exact.values())
big = [f for f, v in exact.items() if v >= 0.05 * total]
tot_err, site_err = [], []
for s in range(1, seeds + 1):
    est = by_function(f"{out}/{name}.s{s}.json")
    if est is None:
        continue
    tot_err.append(abs(sum(est.values()) / total - 1) * 100)
    site_err += [abs(est.get(f, 0) / exact[f] - 1) * 100 for f in big]
t3 = sum(e <= 3 for e in tot_err)
s10 = sum(e <= 10 for e in site_err)
print("%-20s %14d | %6.2f %6.2f %3d/%-3d          | %3d %6.2f %4d/%-4d" % (
    name, total, statistics.median(tot_err), max(tot_err), t3, len(tot_err),
    len(big), max(site_err) if site_err else 0, s10, len(site_err)))
PY
done
