#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/follow.sh: the CPU of one `heapprof live` / `pprof --follow` refresh on a long trace,
# re-reading the whole file so far (before issue #25/#20's fix) next to following it (reading
# only what was written since the last refresh). Makes a synthetic trace with hp_mktrace
# (EVENTS events over THREADS threads), then hp_follow_bench copies it into a file in STEPS
# pieces and prints, at each quarter, the CPU of one re-read and of one follow step, and their
# ratio. The follow step's cost stays flat while the re-read grows with the trace.
#
# Usage: bench/follow.sh [--events N] [--threads T] [--steps S] [--build DIR]
set -eu
export LC_ALL=C
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
EVENTS=4000000
THREADS=4
STEPS=200
BUILD="$ROOT/build"
while [ $# -gt 0 ]; do
    case "$1" in
    --events) EVENTS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    *) echo "usage: $0 [--events N] [--threads T] [--steps S] [--build DIR]" >&2; exit 2 ;;
    esac
done
MK="$BUILD/tests/unit/hp_mktrace"
FB="$BUILD/tests/unit/hp_follow_bench"
for t in "$MK" "$FB"; do
    [ -x "$t" ] || { echo "missing $t: build first" >&2; exit 2; }
done
TRACE=$(mktemp /tmp/hp_follow_XXXXXX.hpt)
trap 'rm -f "$TRACE"' EXIT
"$MK" "$TRACE" "$EVENTS" "$THREADS" 20000 random >/dev/null
echo "trace: $EVENTS events, $THREADS threads, $(du -h "$TRACE" | cut -f1); $STEPS refreshes;" \
    "$(nproc) CPUs"
"$FB" "$TRACE" "$STEPS"
