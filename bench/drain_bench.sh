#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/drain_bench.sh: the drain's CPU an event on a trace's real events, alone on one CPU
# (bench/tools/drain_bench.c): the shim's column writer and zstd settings, built from this
# checkout, over the busiest thread's events written back into ring entries.
#   bash bench/drain_bench.sh TRACE.hpt [passes]
#   e.g. after bench/run.sh: bash bench/drain_bench.sh bench/out/traces/cpp_mixed.*.hpt
# Instructions instead of time: DRAIN_BENCH_CALLGRIND=1 runs it under callgrind and prints the
# column writer's and zstd's instructions an event (one pass).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
BIN="$ROOT/bench/out/bin"
SRC="$ROOT/bench/tools/drain_bench.c"
[ $# -ge 1 ] || { sed -n 3,9p "$0"; exit 2; }
mkdir -p "$BIN"
deps=("$SRC" "$HERE/tools/trace_file.h" "$ROOT/preload/ringcols.c" "$ROOT/preload/ringent.h" "$ROOT/preload/zstd_ctx.c"
    "$ROOT/format/hpt_columns.h" "$ROOT/format/hpt_codec.h" "$ROOT/format/hpt_format.h")
stale=0
[ -x "$BIN/drain_bench" ] || stale=1
for d in "${deps[@]}"; do [ $stale = 1 ] || [ "$d" -nt "$BIN/drain_bench" ] && stale=1; done
if [ $stale = 1 ]; then
    # the shim's own flags for its drain code (preload/CMakeLists.txt): -O2, and -g for callgrind
    cc -O2 -g -Wall -I"$ROOT" -I"$ROOT/preload" -o "$BIN/drain_bench" "$SRC" \
        "$ROOT/preload/ringcols.c" "$ROOT/preload/zstd_ctx.c" -lzstd
fi
if [ "${DRAIN_BENCH_CALLGRIND:-0}" = 1 ]; then
    out=$(mktemp)
    trap 'rm -f "$out"' EXIT
    res=$(valgrind --tool=callgrind --callgrind-out-file="$out" "$BIN/drain_bench" "$1" 1 2>/dev/null)
    printf '%s\n' "$res"
    ev=$(printf '%s\n' "$res" | sed -n 's/.*, \([0-9]*\) heap events,.*/\1/p')
    callgrind_annotate --inclusive=yes "$out" 2>/dev/null | awk -v ev="$ev" '
        /hp_rc_columns/ && !c { gsub(",", "", $1); c = $1 }
        /ZSTD_compress2/ && !z { gsub(",", "", $1); z = $1 }
        END { printf "instructions an event: columns %.1f, zstd %.1f (callgrind)\n", c / ev, z / ev }'
    exit 0
fi
exec "$BIN/drain_bench" "$@"
