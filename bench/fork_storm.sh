#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/fork_storm.sh: what a fork costs while other threads allocate, plain and under heapprof
# (and heaptrack), ROUNDS rounds in a rotating order; prints each run's line. A speed property,
# so it lives here, not in the tests (issue 17, item 8).
# Usage: bench/fork_storm.sh [--threads N] [--forks F] [--runs R] [--lib PATH] [--no-heaptrack]
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
N=3 F=200 RUNS=3 USE_HT=1
LIB="$ROOT/build/preload/libheapprof.so"
while [ $# -gt 0 ]; do
    case "$1" in
    --threads) N=$2; shift ;;
    --forks) F=$2; shift ;;
    --runs) RUNS=$2; shift ;;
    --lib) LIB=$2; shift ;;
    --no-heaptrack) USE_HT=0 ;;
    -h | --help) sed -n '2,6p' "$0"; exit 0 ;;
    *) echo "fork_storm.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
[ $USE_HT = 1 ] && ! command -v heaptrack >/dev/null && USE_HT=0
mkdir -p "$HERE/out/bin"
PROG="$HERE/out/bin/fork_storm"
gcc -O2 -g -pthread -o "$PROG" "$HERE/workloads/fork_storm.c" || exit 1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for r in $(seq "$RUNS"); do
    for tool in plain heapprof heaptrack; do
        case $tool in
        plain) printf '%-9s ' plain; "$PROG" "$N" "$F" ;;
        heapprof) printf '%-9s ' heapprof
            HEAPPROF_QUIET=1 HEAPPROF_OUT="$TMP/t.%p.hpt" LD_PRELOAD="$LIB" "$PROG" "$N" "$F" ;;
        heaptrack) [ $USE_HT = 1 ] || continue
            printf '%-9s ' heaptrack
            heaptrack -o "$TMP/ht" "$PROG" "$N" "$F" 2>/dev/null | grep fork_storm ;;
        esac
        rm -f "$TMP"/*
    done
done
