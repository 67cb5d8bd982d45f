#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/trace_columns.sh: where a trace's bytes go, column by column (bench/tools/trace_columns.c
# says what each figure is), and what a coarser time unit or other zstd settings would change.
# Builds the tool into bench/out/bin on first use.
#   bash bench/trace_columns.sh TRACE.hpt [zstd level]
#   e.g. after bench/run.sh: bash bench/trace_columns.sh bench/out/traces/cpp_mixed.*.hpt
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="$ROOT/bench/out/bin"
SRC="$ROOT/bench/tools/trace_columns.c"
[ $# -ge 1 ] || { sed -n 3,7p "$0"; exit 2; }
mkdir -p "$BIN"
if [ ! -x "$BIN/trace_columns" ] || [ "$SRC" -nt "$BIN/trace_columns" ] ||
    [ "$ROOT/format/hpt_format.h" -nt "$BIN/trace_columns" ] ||
    [ "$ROOT/bench/tools/trace_file.h" -nt "$BIN/trace_columns" ]; then
    cc -O2 -Wall -I"$ROOT" -o "$BIN/trace_columns" "$SRC" -lzstd
fi
exec "$BIN/trace_columns" "$@"
