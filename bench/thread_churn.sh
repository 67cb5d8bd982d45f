#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/thread_churn.sh: what a profiler adds to every thread a program creates and ends (a
# thread-per-request server's cost, where the per-allocation figures of bench/run.sh say little).
#  1. The kernel's part of heapprof's CPU samples: they are one cpu-clock perf event per online
#     CPU with `inherit` (preload/cpu.c), and the kernel copies every such event into each new
#     thread and tears it down at its end. bench/tools/perf_inherit.c creates and joins threads
#     while carrying K such events; the slope is the cost per event, so per CPU of the machine.
#  2. bench/workloads/thread_churn (THREADS short threads, AT_ONCE at a time, ALLOCS pairs each)
#     plain, under heapprof as it comes (CPU samples by perf events, given up for the timer
#     once threads come fast for two seconds: docs/design.md#cpu-samples), with
#     HEAPPROF_CPU_SWITCH=0 (noswitch: perf events kept whatever the rate), with
#     HEAPPROF_CPU=timer (a CPU-time timer per thread instead: nothing inherited), with
#     HEAPPROF_CPU=0, and under heaptrack; ROUNDS rounds in a rotating order; the median added
#     wall and CPU (user + sys) per thread, each against the plain run of its own round. A run
#     shorter than two seconds never switches: heapprof and noswitch are then the same.
# Usage: bench/thread_churn.sh [--threads N] [--allocs K] [--at-once A] [--runs R]
#                              [--events 0,1,2,4,8,16,32,64] [--lib PATH] [--no-heaptrack]
set -u
export LC_ALL=C
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
N=20000 K=10 A=4 RUNS=5 EVENTS=0,1,2,4,8,16,32,64 USE_HT=1
LIB="$ROOT/build/preload/libheapprof.so"
while [ $# -gt 0 ]; do
    case "$1" in
    --threads) N=$2; shift ;;
    --allocs) K=$2; shift ;;
    --at-once) A=$2; shift ;;
    --runs) RUNS=$2; shift ;;
    --events) EVENTS=$2; shift ;;
    --lib) LIB=$2; shift ;;
    --no-heaptrack) USE_HT=0 ;;
    -h | --help) sed -n '3,16p' "$0"; exit 0 ;;
    *) echo "thread_churn.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
[ -x /usr/bin/time ] || { echo "thread_churn.sh: GNU time is needed (apt-get install time)" >&2; exit 1; }
[ -f "$LIB" ] || { echo "thread_churn.sh: no $LIB (build first)" >&2; exit 1; }
[ $USE_HT = 1 ] && ! command -v heaptrack >/dev/null && USE_HT=0
BIN="$HERE/out/bin"
mkdir -p "$BIN"
gcc -O2 -g -pthread -o "$BIN/perf_inherit" "$HERE/tools/perf_inherit.c" &&
    gcc -O2 -g -fno-omit-frame-pointer -pthread -o "$BIN/thread_churn" \
        "$HERE/workloads/thread_churn.c" || exit 1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

echo "1. a thread's creation and end with K inherited perf events (perf_inherit, 4,000 threads)"
: >"$TMP/inherit"
for k in ${EVENTS//,/ }; do
    if out=$("$BIN/perf_inherit" "$k" 4000 2>"$TMP/err"); then
        echo "$out" >>"$TMP/inherit"
        printf "   K = %3d: %8.1f us a thread\n" $out
    else
        echo "   K = $k: $(head -1 "$TMP/err") (perf events refused here?)"
        break
    fi
done
awk -v c="$(nproc)" 'NF == 2 { n++; sx += $1; sy += $2; sxx += $1 * $1; sxy += $1 * $2 }
    END { if (n < 2) exit
          b = (n * sxy - sx * sy) / (n * sxx - sx * sx)
          printf "   slope %.2f us a thread per event: heapprof carries one per CPU, here %d (%.0f us",
              b, c, b * c
          printf " a thread);\n   at 16 and 64 CPUs that would be %.0f and %.0f us (this machine'"'"'s kernel)\n",
              b * 16, b * 64 }' "$TMP/inherit"

# ---------------------------------------------------------------- part 2
run() { # tool -> "wall user sys" of one run
    local pre=()
    case $1 in
    plain) ;;
    heapprof) pre=(env HEAPPROF_QUIET=1 HEAPPROF_OUT="$TMP/t.%p.hpt" LD_PRELOAD="$LIB") ;;
    noswitch) pre=(env HEAPPROF_QUIET=1 HEAPPROF_OUT="$TMP/t.%p.hpt" HEAPPROF_CPU_SWITCH=0 LD_PRELOAD="$LIB") ;;
    timer) pre=(env HEAPPROF_QUIET=1 HEAPPROF_OUT="$TMP/t.%p.hpt" HEAPPROF_CPU=timer LD_PRELOAD="$LIB") ;;
    nocpu) pre=(env HEAPPROF_QUIET=1 HEAPPROF_OUT="$TMP/t.%p.hpt" HEAPPROF_CPU=0 LD_PRELOAD="$LIB") ;;
    heaptrack) pre=(heaptrack -o "$TMP/ht") ;;
    esac
    /usr/bin/time -f "%e %U %S" -o "$TMP/time" "${pre[@]}" "$BIN/thread_churn" "$N" "$K" "$A" \
        >/dev/null 2>&1 || { echo "fail"; return; }
    rm -f "$TMP"/t.*.hpt "$TMP"/ht.*
    cat "$TMP/time"
}
tools=(plain heapprof noswitch timer nocpu)
[ $USE_HT = 1 ] && tools+=(heaptrack)
echo "2. thread_churn $N $K $A: $N threads, $A at a time, $K malloc/free pairs each; $RUNS rounds"
: >"$TMP/rounds"
for ((r = 0; r < RUNS; r++)); do
    order=("${tools[@]:r % ${#tools[@]}}" "${tools[@]:0:r % ${#tools[@]}}")
    for t in "${order[@]}"; do echo "$r $t $(run "$t")" >>"$TMP/rounds"; done
done
awk -v n="$N" -v tools="${tools[*]}" '
    $3 == "fail" { bad[$2]++; next }
    { w[$1, $2] = $3; c[$1, $2] = $4 + $5; rounds[$1] = 1 }
    function median(a, k,   i, j, t) { for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++)
                                          if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
                                      return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
    END {
        split(tools, T, " ")
        printf "   %-10s %12s %12s %14s %14s\n", "tool", "wall s", "cpu s", "+wall us/thr", "+cpu us/thr"
        for (i = 1; T[i] != ""; i++) {
            t = T[i]; k = 0; kw = 0
            for (r in rounds) if ((r, t) in w && (r, "plain") in w) {
                k++; W[k] = w[r, t]; C[k] = c[r, t]
                DW[k] = (w[r, t] - w[r, "plain"]) / n * 1e6; DC[k] = (c[r, t] - c[r, "plain"]) / n * 1e6 }
            if (!k) { printf "   %-10s failed\n", t; continue }
            printf "   %-10s %12.3f %12.3f", t, median(W, k), median(C, k)
            if (t == "plain") printf "\n"; else printf " %14.1f %14.1f\n", median(DW, k), median(DC, k)
            if (bad[t]) printf "   (%s failed %d times)\n", t, bad[t]
        }
    }' "$TMP/rounds"
