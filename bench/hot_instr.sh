#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/hot_instr.sh: where the instructions of an allocation event go, on the bench workloads
# with default settings (full recording, bytes touched, CPU samples), counted by callgrind (exact
# and repeatable where wall time on this shared machine is not). Each workload runs under
# valgrind --tool=callgrind --separate-threads=yes at two sizes, so that start-up and exit
# cancel out: a figure is (Ir(big) - Ir(small)) / (events(big) - events(small)), events from
# `heapprof stats` on the run's own trace. Per workload:
#   app      the program's thread, less the uninstrumented program's (the same two sizes), less
#            what the thread spent draining its own ring (hp_tbuf_wait_slow: under valgrind the
#            threads run one at a time, so how often the ring fills varies from run to run)
#   stack    the walk and the stack table: hp_unwind*, hp_stacktab_* and new_stack_slow,
#            inclusive. Until session 28 this was capture_stack inclusive; it is inlined into the
#            recorder since, and its own lines (the known-step lookup: c_churn 122 -> 104 an event
#            in this column, cpp_mixed 78 -> 66) now fall into rest
#   touch    hp_touch_fill(_fresh) + hp_touch_usable + hp_touch_measure, inclusive
#   clock    the TSC read and its conversion: the lines of clock.h and state.h (hp_state_now,
#            inlined into the recorder since session 12; before, the function hp_state_now)
#   rest     app - stack - touch - clock: entry points, errno, encoding, the ring
#   drain    the shim's other threads (pipeline workers, flusher, CPU sampler), whole, and the
#            app thread's own drains: turning records into compressed chunks and writing them
# A function's cost is summed over the source files callgrind splits it into (inlined code).
# With --cache, callgrind also models the caches of one core of a current server Xeon (48 KiB
# 12-way L1d, a 2 MiB 16-way L2 as the last level, or --l2 KIB of another machine, which
# bench/manycore_call.sh's "caches:" line names) and a second table gives the L2
# misses an event on the app thread, reads and writes (what goes to the L3 or another core's
# cache there: heapprof's added cost per event was 1.2-1.8x this VM's there, heaptrack's ~0.85x):
#   app      the program's thread, less the uninstrumented program's and the thread's own drains
#   measure  reads of the freed block's lines by the bytes-touched count (touch.c's lines)
#   fill     writes of the pattern into a new block (touch.c's lines)
#   entries  writes of the ring entries (ringent.h and tbuf.h inlined into the event path)
#   rest     app - the three, reads and writes together
# Usage: bench/hot_instr.sh [--lib PATH] [--only c_churn,cpp_mixed,rust_hashmap_growth,...]
#                           [--cache] [--l2 KIB] [--keep DIR]   (callgrind files kept in DIR, for callgrind_annotate)
# Needs the workloads built (bench/run.sh --build-only), valgrind and build/analyzer/heapprof.
# A shim built with link-time optimisation (the default since session 15, HEAPPROF_SHIM_LTO)
# has the touch functions inlined into the entry points, so there touch is counted by source
# line instead: every line of touch.c wherever it was inlined, and the vector intrinsics'
# lines inside touch.c's own functions (on c_churn both ways give the same 80 an event on a
# build without LTO; the intrinsics of the small-block paths inlined into the entry points,
# a few an event, fall into rest). For the split by functions build one without:
#   cmake -B build-nolto -DHEAPPROF_SHIM_LTO=OFF && cmake --build build-nolto --target heapprof_preload
#   bench/hot_instr.sh --lib build-nolto/preload/libheapprof.so
set -u
export LC_ALL=C
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
LIB="$ROOT/build/preload/libheapprof.so"
CLI="$ROOT/build/analyzer/heapprof"
ONLY=c_churn,cpp_mixed,rust_hashmap_growth
KEEP=""
CACHE=0
L2_KIB=2048
while [ $# -gt 0 ]; do
    case "$1" in
    --lib) LIB="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    --keep) KEEP="$2"; shift 2 ;;
    --cache) CACHE=1; shift ;;
    --l2) CACHE=1; L2_KIB="$2"; shift 2 ;;
    -h | --help) sed -n '3,/^#  *\[--cache\]/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "hot_instr.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
command -v valgrind >/dev/null || { echo "hot_instr.sh: needs valgrind" >&2; exit 1; }
[ -f "$LIB" ] && [ -x "$CLI" ] || { echo "hot_instr.sh: no $LIB or $CLI (build first)" >&2; exit 1; }
BIN="$HERE/out/bin"
OUT="${KEEP:-$(mktemp -d)}"
mkdir -p "$OUT"

# workload -> "small big" arguments (small enough for callgrind; the bench's sizes / 10 or less)
declare -A SIZES=(
    [c_churn]="100000 300000" [realloc_chain]="2 6" [cpp_mixed]="1 2"
    [rust_vec_growth]="1000 3000" [rust_hashmap_growth]="50000 150000"
)

. "$HERE/tools/callgrind_sums.sh"
totals() { cg_totals "$1" "${2:-}"; }    # $2: the event (Ir unless named)
incl() { cg_sum "$1" "$2" yes "${3:-}"; } # inclusive Ir (or event $3) of the functions matching $2
selfsum() { cg_sum "$1" "$2" no "${3:-}"; } # self Ir (or $3) of the lines matching $2 (inlined code too)
VG_CACHE=()
if [ $CACHE = 1 ]; then VG_CACHE=(--cache-sim=yes --D1=49152,12,64 --LL=$((L2_KIB * 1024)),16,64); fi
# the ring entries as the event path writes them: ringent.h and tbuf.h inlined anywhere but in the
# drain's write_records
ENTRY_LINES='preload/(ringent|tbuf)\.h:([^w]|w[^r])'
CACHE_ROWS=()
# link-time optimised: the touch functions have no body of their own to count (HOT_INSTR_LINES=1
# counts by lines on any build, to compare the two ways)
LTO=${HOT_INSTR_LINES:-0}
nm "$LIB" 2>/dev/null | grep -q 'lto_priv' && LTO=1
TOUCH_LINES='preload/touch\.c:|intrin\.h:(measure_(whole|general)|fill_(block|general|whole)|count_(lines|equal|filled|resident)|resident_visit|hp_touch_)'
printf "%-22s %8s %8s %8s %8s %8s %9s   (instructions per event)\n" workload app stack touch \
    clock rest drain
IFS=, read -r -a names <<<"$ONLY"
for w in "${names[@]}"; do
    sz="${SIZES[$w]:-}"
    [ -n "$sz" ] && [ -x "$BIN/$w" ] || { echo "$w: unknown or not built" >&2; continue; }
    declare -A v=()
    for a in $sz; do
        valgrind --tool=callgrind "${VG_CACHE[@]}" --callgrind-out-file="$OUT/bare.$w.$a" "$BIN/$w" "$a" \
            >/dev/null 2>&1
        rm -f "$OUT"/run.*.hpt
        # (valgrind's launcher is a process of its own, with a trace of its own: the
        # workload's is the biggest)
        env LD_PRELOAD="$LIB" HEAPPROF_OUT="$OUT/run.%p.hpt" HEAPPROF_QUIET=1 valgrind \
            --tool=callgrind "${VG_CACHE[@]}" --separate-threads=yes --callgrind-out-file="$OUT/hp.$w.$a" \
            "$BIN/$w" "$a" >/dev/null 2>&1
        tr=$(ls -S "$OUT"/run.*.hpt | head -1)
        v[ev.$a]=$("$CLI" stats "$tr" --json | sed -n 's/^  "events": *\([0-9]*\).*/\1/p')
        v[bare.$a]=$(totals "$OUT/bare.$w.$a")
        app="$OUT/hp.$w.$a-01"
        self=$(incl "$app" ':hp_tbuf_wait_slow \\[')
        v[app.$a]=$(($(totals "$app") - self))
        v[stack.$a]=$(incl "$app" ':(hp_unwind[a-z_]*|hp_stacktab_[a-z_]*|new_stack_slow)[^ ]* \\[')
        if [ "$LTO" = 1 ]; then
            v[touch.$a]=$(selfsum "$app" "$TOUCH_LINES")
        else
            v[touch.$a]=$(incl "$app" ':hp_touch_(fill|fill_fresh|usable|measure) \\[')
        fi
        v[clock.$a]=$(( $(incl "$app" ':hp_state_now \\[') + $(incl "$app" 'preload/(clock|state)\\.h:') ))
        wk=$self
        for f in "$OUT/hp.$w.$a"-*; do
            [ "$f" = "$app" ] || wk=$((wk + $(totals "$f")))
        done
        v[workers.$a]=$wk
        if [ $CACHE = 1 ]; then
            for m in DLmr DLmw; do
                v[$m.$a]=$(($(totals "$app" $m) - $(incl "$app" ':hp_tbuf_wait_slow \\[' $m) -
                    $(totals "$OUT/bare.$w.$a" $m)))
                v[touch$m.$a]=$(selfsum "$app" "$TOUCH_LINES" $m)
            done
            v[entries.$a]=$(selfsum "$app" "$ENTRY_LINES" DLmw)
        fi
    done
    set -- $sz
    s=$1 b=$2
    awk -v w="$w" -v e="$((${v[ev.$b]} - ${v[ev.$s]}))" \
        -v app="$((${v[app.$b]} - ${v[app.$s]} - (${v[bare.$b]} - ${v[bare.$s]})))" \
        -v st="$((${v[stack.$b]} - ${v[stack.$s]}))" -v to="$((${v[touch.$b]} - ${v[touch.$s]}))" \
        -v cl="$((${v[clock.$b]} - ${v[clock.$s]}))" -v wk="$((${v[workers.$b]} - ${v[workers.$s]}))" \
        'BEGIN {printf "%-22s %8.0f %8.0f %8.0f %8.0f %8.0f %9.0f\n", w, app / e, st / e, to / e,
                cl / e, (app - st - to - cl) / e, wk / e}'
    if [ $CACHE = 1 ]; then
        d() { echo $((${v[$1.$b]} - ${v[$1.$s]})); }
        CACHE_ROWS+=("$(awk -v w="$w" -v e="$((${v[ev.$b]} - ${v[ev.$s]}))" -v r="$(d DLmr)" \
            -v wr="$(d DLmw)" -v me="$(d touchDLmr)" -v fi="$(d touchDLmw)" -v en="$(d entries)" \
            'BEGIN {printf "%-22s %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f", w, r / e, wr / e, me / e,
                    fi / e, en / e, (r + wr - me - fi - en) / e}')")
    fi
    unset v
done
if [ $CACHE = 1 ]; then
    printf "\n%-22s %8s %8s %8s %8s %8s %8s   (L2 misses per event, app thread; %s KiB L2)\n" \
        workload reads writes measure fill entries rest "$L2_KIB"
    printf "%s\n" "${CACHE_ROWS[@]}"
fi
rm -f "$OUT"/run.*.hpt
[ -n "$KEEP" ] || rm -rf "$OUT"
