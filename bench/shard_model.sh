#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/shard_model.sh: runs bench/tools/shard_model (replay's shard rounds as memory traffic
# alone) over its layouts and shard thread counts and prints one line each: which phase of a
# round costs what per event, and whether another layout of the round's data would cost less.
# For a many-core machine (bench/manycore_prepare.sh builds the tool into the bundle); on a
# 2-CPU VM it only shows that it runs.
# Usage: bash bench/shard_model.sh [--bin PATH] [--threads 1,2,4,8,16] [--live 4096]
#                                  [--rounds 40] [--workers 4]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="" THREADS=1,2,4,8,16 LIVE=4096 ROUNDS=40 WORKERS=4
while [ $# -gt 0 ]; do
    case "$1" in
    --bin) BIN=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --live) LIVE=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    -h | --help) sed -n 3,9p "$0"; exit 0 ;;
    *) echo "shard_model.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
if [ -z "$BIN" ]; then
    BIN=$(mktemp)
    trap 'rm -f "$BIN"' EXIT
    cc -O2 -pthread "$ROOT/bench/tools/shard_model.c" -o "$BIN"
fi
echo "shard_model.sh: $(nproc) CPUs, live $LIVE, $ROUNDS rounds of 131072 events, $WORKERS producers"
IFS=, read -r -a ts <<<"$THREADS"
for t in "${ts[@]}"; do
    for l in now own compact; do
        "$BIN" -t "$t" -w "$WORKERS" -r "$ROUNDS" -L "$LIVE" -l "$l"
    done
done
