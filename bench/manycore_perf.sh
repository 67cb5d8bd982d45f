#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/manycore_perf.sh: perf on the many-core machine, which has none. Two steps:
#   here:  bash bench/manycore_perf.sh bundle
#          copies this machine's perf, objdump and the libraries they load (not glibc's) into
#          .manycore-perf/ (~33 MiB; the manycore bundle .manycore/ is ~27: both fit the 64 MiB
#          carry limit) and adds it to .git/info/exclude.
#   there: carry [".manycore", ".manycore-perf"] and run one of
#          bash bench/manycore_perf.sh app [WORKLOAD...]   each single-thread workload under
#                 heapprof (defaults on, then touch off + one frame), perf -e cpu-clock, the
#                 program's thread by symbol
#          bash bench/manycore_perf.sh report [OPS] [DEPTHS]  `heapprof report` on c_churn OPS
#                 (default 50000000: 100 M events) at 4 and 16 replay threads, perf per thread;
#                 DEPTHS (e.g. 2,4): each at those rounds in flight too (HEAPPROF_REPLAY_DEPTH);
#                 env REPLAYS="8 16" and WORKERS=8 change the replay threads and decode workers
# perf.data files go to $OUT (they come back); read them here with
#   perf report -i FILE --sort pid,sym -n --stdio        (pid: one line per thread)
# Symbols of the bundled heapprof resolve here; the device's libc does not (addresses only).
# Session 11 used it to find the clock's share of the app thread on the Xeon and the analyzer's
# lock-step rounds (bench/README.md "Many cores and many threads").
set -u -o pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
M="$ROOT/.manycore" P="$ROOT/.manycore-perf"
OUT="${OUT:-/tmp/manycore-out}"
case "${1:-}" in
bundle)
    mkdir -p "$P/lib"
    perf=$(readlink -f "$(command -v perf)") || { echo "manycore_perf.sh: no perf here" >&2; exit 2; }
    cp "$perf" "$P/perf"
    cp "$(command -v objdump)" "$P/objdump"
    for b in "$perf" "$(command -v objdump)"; do
        ldd "$b" | awk '/=>/ {print $3}' | grep -Ev '/(libc|libm|libpthread|libdl|librt)\.so|ld-linux' |
            while read -r l; do cp -L "$l" "$P/lib/"; done
    done
    grep -qx '/.manycore-perf/' "$ROOT/.git/info/exclude" 2>/dev/null ||
        echo '/.manycore-perf/' >>"$ROOT/.git/info/exclude"
    du -sh "$P"
    ;;
app)
    shift
    [ $# -gt 0 ] || set -- c_churn cpp_mixed rust_hashmap_growth
    export LD_LIBRARY_PATH="$P/lib:$M/lib" PATH="$P:$PATH"
    mkdir -p "$OUT"
    for w in "$@"; do
        for mode in all bare; do
            extra=()
            [ $mode = bare ] && extra=(HEAPPROF_TOUCH=0 HEAPPROF_MAX_FRAMES=1)
            echo "=== $w $mode"
            "$P/perf" record -q -e cpu-clock -F 15000 -o "$OUT/$w-$mode.data" -- env \
                LD_PRELOAD="$M/heapprof/lib/libheapprof.so" HEAPPROF_OUT=/tmp/mcp.hpt HEAPPROF_QUIET=1 \
                "${extra[@]}" "$M/workloads/$w" >/dev/null 2>&1
            "$P/perf" report -i "$OUT/$w-$mode.data" --sort comm,sym -n --stdio 2>/dev/null |
                grep -v '^#' | grep -v '^$' | grep -v 'heapprof-' | head -25
            rm -f /tmp/mcp.hpt
        done
    done
    ;;
report)
    ops=${2:-50000000}
    export LD_LIBRARY_PATH="$P/lib:$M/lib"
    mkdir -p "$OUT" /tmp/mcp
    env LD_PRELOAD="$M/heapprof/lib/libheapprof.so" HEAPPROF_OUT=/tmp/mcp/hp.hpt HEAPPROF_QUIET=1 \
        "$M/workloads/c_churn" "$ops" >/dev/null
    depths=(${3:+${3//,/ }})
    [ ${#depths[@]} -gt 0 ] || depths=("") # HEAPPROF_REPLAY_DEPTH unset
    for r in ${REPLAYS:-4 16}; do
        for d in "${depths[@]}"; do
            echo "=== replay threads $r${d:+, depth $d}, decode workers ${WORKERS:-4}"
            env HEAPPROF_DECODE_THREADS=${WORKERS:-4} HEAPPROF_REPLAY_THREADS=$r HEAPPROF_STAGE_TIMES=1 \
                ${d:+HEAPPROF_REPLAY_DEPTH=$d} "$P/perf" record -q -F 1000 -e cpu-clock -s \
                -o "$OUT/report-r$r${d:+-d$d}.data" -- "$M/heapprof/bin/heapprof" report \
                /tmp/mcp/hp.hpt 2>&1 >/dev/null | grep 'stage:'
            "$P/perf" report -i "$OUT/report-r$r${d:+-d$d}.data" --sort pid -n --stdio 2>/dev/null |
                grep -v '^#' | grep -v '^$' | head -30
        done
    done
    rm -rf /tmp/mcp
    ;;
*)
    sed -n '3,20p' "$0"
    exit 2
    ;;
esac
