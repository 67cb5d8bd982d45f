#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/run.sh: heapprof against heaptrack and the uninstrumented program, side by side.
# Owns bench/out/ (binaries, traces, logs, results.tsv); reads bench/workloads/ and
# bench/tools/; never writes outside bench/out/ (except `apt-get install heaptrack`).
#
# Method.  This machine is shared and noisy: the same uninstrumented run varies by up to
# +-20% between calls (shared/notes/perf-baselines.md).  Timing each tool in its own batch
# would fold that drift into the comparison, so every round runs baseline (A), heaptrack (B)
# and heapprof (C) back to back, rotating the order each round (ABC, BCA, CAB, ...), and the
# added cost is taken *per round* (tool - baseline of the same round), then the median and
# min..max over rounds are reported.  Wall time is measured around each run (bash
# EPOCHREALTIME); CPU time (user+sys) and peak RSS come from GNU time's wait4() rusage, which
# covers the whole process tree: heaptrack runs heaptrack_interpret and zstd as separate
# processes on the second core, so its CPU cost is larger than its wall cost.
# Alloc events (the denominator) are heaptrack_print's "calls to allocation functions" on
# the heaptrack trace (bench/tools/count_events.so counts them when heaptrack is not run).
#
# Usage: bench/run.sh [--runs N] [--quick] [--only NAME[,NAME...]] [--lib PATH]
#                     [--cli PATH] [--no-heaptrack] [--timeout SEC] [--rebuild] [--build-only]
set -u
export LC_ALL=C # EPOCHREALTIME and awk must use '.' as the decimal point

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
OUT="$HERE/out"
BIN="$OUT/bin"
TR="$OUT/traces"
LOGS="$OUT/logs"
RESULTS="$OUT/results.tsv"
ROUNDS_TSV="$OUT/rounds.tsv"

usage() {
    cat <<'EOF'
Usage: bench/run.sh [options]
  --runs N          rounds per workload (default 3; 1 with --quick)
  --quick           small workload sizes and 1 round: a smoke test, not a measurement
  --only LIST       comma-separated workloads: c_churn, c_threads_2 (or "c_threads 2"),
                    c_threads (both thread counts), realloc_chain, cpp_mixed,
                    rust_vec_growth, rust_hashmap_growth; opt-in: c_churn_exact, thread_churn
  --lib PATH        libheapprof.so to preload (default: build/preload/libheapprof.so
                    under the repo root if it exists, else "libheapprof.so" from the
                    loader's search path)
  --cli PATH        heapprof command used to time `heapprof stats TRACE --json` and
                    `heapprof report TRACE`
                    (default: build/analyzer/heapprof if it exists, else heapprof on PATH)
  --no-heaptrack    skip heaptrack (events then come from count_events.so)
  --timeout SEC     kill a single run after SEC seconds (default 600)
  --rebuild         rebuild the workloads even if they look up to date
  --build-only      build the workloads and stop
Output: a table on stdout, bench/out/results.tsv (one row per workload and tool),
bench/out/rounds.tsv (every run), logs and last traces under bench/out/.
EOF
}

# ---------------------------------------------------------------- options
RUNS=""
QUICK=0
ONLY=""
LIB=""
CLI=""
USE_HT=1
TIMEOUT=600
REBUILD=0
BUILD_ONLY=0
while [ $# -gt 0 ]; do
    case "$1" in
    --runs) RUNS="${2:-}"; shift ;;
    --runs=*) RUNS="${1#*=}" ;;
    --quick) QUICK=1 ;;
    --only) ONLY="${2:-}"; shift ;;
    --only=*) ONLY="${1#*=}" ;;
    --lib) LIB="${2:-}"; shift ;;
    --lib=*) LIB="${1#*=}" ;;
    --cli) CLI="${2:-}"; shift ;;
    --cli=*) CLI="${1#*=}" ;;
    --no-heaptrack) USE_HT=0 ;;
    --timeout) TIMEOUT="${2:-}"; shift ;;
    --timeout=*) TIMEOUT="${1#*=}" ;;
    --rebuild) REBUILD=1 ;;
    --build-only) BUILD_ONLY=1 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ -n "$RUNS" ] || { [ $QUICK = 1 ] && RUNS=1 || RUNS=3; }
case "$RUNS" in '' | *[!0-9]* | 0) echo "run.sh: --runs needs a positive integer" >&2; exit 2 ;; esac
case "$TIMEOUT" in '' | *[!0-9]* | 0) echo "run.sh: --timeout needs a positive integer" >&2; exit 2 ;; esac

# The runs must see only what this script sets.
if [ -n "${LD_PRELOAD:-}" ]; then
    echo "run.sh: note: ignoring LD_PRELOAD=$LD_PRELOAD from the environment" >&2
    unset LD_PRELOAD
fi
for v in $(env | sed -n 's/^\(HEAPPROF_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done

log() { printf '%s\n' "$*" >&2; }
die() { printf 'run.sh: %s\n' "$*" >&2; exit 2; }

mkdir -p "$BIN" "$TR" "$LOGS" || die "cannot create $OUT"

# ---------------------------------------------------------------- workloads
# name | command (binary and default arguments) | --quick command | flags
# Default sizes are those of perf-baselines.md; --quick sizes are ~1/10.
# Flag "optin": only run when named in --only.  "noht": never run heaptrack on it.
WORKLOADS=(
    "c_churn|c_churn|c_churn 1000000|"
    "c_threads 2|c_threads 2|c_threads 2 1600000|"
    "c_threads 8|c_threads 8|c_threads 8 1600000|"
    "realloc_chain|realloc_chain|realloc_chain 30|"
    "cpp_mixed|cpp_mixed|cpp_mixed 4|"
    "rust_vec_growth|rust_vec_growth|rust_vec_growth 12000|"
    "rust_hashmap_growth|rust_hashmap_growth|rust_hashmap_growth 150000|"
    # Every byte size distinct: heaptrack 1.4's interpreter grows to tens of GB on it
    # (perf-baselines.md point 5), so only baseline and heapprof run it.
    "c_churn_exact|c_churn_exact|c_churn_exact 1000000|optin,noht"
    # Short threads, 10 allocations each: the cost per thread made (bench/thread_churn.sh)
    "thread_churn|thread_churn|thread_churn 2000|optin"
)

# ---------------------------------------------------------------- build
declare -A BUILD_ERR # binary name -> why it is missing
SRC="$HERE/workloads"

# up_to_date OUT SRC...: true if OUT exists and is newer than every SRC.
up_to_date() {
    local out="$1" s
    shift
    [ $REBUILD = 0 ] && [ -e "$out" ] || return 1
    for s in "$@"; do [ "$out" -nt "$s" ] || return 1; done
    return 0
}

# build_one NAME DEPS -- COMMAND...: runs COMMAND unless bin/NAME is newer than DEPS.
build_one() {
    local name="$1" deps=()
    shift
    while [ "$1" != "--" ]; do deps+=("$1"); shift; done
    shift
    up_to_date "$BIN/$name" "${deps[@]}" && return 0
    if ! command -v "$1" >/dev/null 2>&1; then
        BUILD_ERR[$name]="$1 not found"
        log "build: $name skipped: $1 not found"
        return 1
    fi
    log "build: $name"
    if ! "$@" >>"$LOGS/build.log" 2>&1; then
        BUILD_ERR[$name]="build failed (see bench/out/logs/build.log)"
        log "build: $name FAILED (see $LOGS/build.log)"
        rm -f "$BIN/$name"
        return 1
    fi
}

build_all() {
    # C with frame pointers (the FP-walk lower bound needs them); C++ and Rust with their
    # defaults (no frame pointers): the case a DWARF unwinder must handle.
    local CF=(-O2 -g -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer)
    local H="$SRC/churn_common.h"
    : >"$LOGS/build.log"
    build_one c_churn "$SRC/c_churn.c" "$H" -- gcc "${CF[@]}" -o "$BIN/c_churn" "$SRC/c_churn.c"
    build_one c_churn_exact "$SRC/c_churn.c" "$H" -- \
        gcc "${CF[@]}" -DEXACT_SIZES -o "$BIN/c_churn_exact" "$SRC/c_churn.c"
    build_one c_threads "$SRC/c_threads.c" "$H" -- \
        gcc "${CF[@]}" -pthread -o "$BIN/c_threads" "$SRC/c_threads.c"
    build_one thread_churn "$SRC/thread_churn.c" -- \
        gcc "${CF[@]}" -pthread -o "$BIN/thread_churn" "$SRC/thread_churn.c"
    build_one realloc_chain "$SRC/realloc_chain.c" -- \
        gcc "${CF[@]}" -o "$BIN/realloc_chain" "$SRC/realloc_chain.c"
    build_one cpp_mixed "$SRC/cpp_mixed.cpp" -- g++ -O2 -g -o "$BIN/cpp_mixed" "$SRC/cpp_mixed.cpp"
    build_one rust_vec_growth "$SRC/rust_vec_growth.rs" -- \
        rustc -C opt-level=3 -g -o "$BIN/rust_vec_growth" "$SRC/rust_vec_growth.rs"
    build_one rust_hashmap_growth "$SRC/rust_hashmap_growth.rs" -- \
        rustc -C opt-level=3 -g -o "$BIN/rust_hashmap_growth" "$SRC/rust_hashmap_growth.rs"
    build_one count_events.so "$HERE/tools/count_events.c" -- \
        gcc -O2 -g -fPIC -shared -Wall -o "$BIN/count_events.so" "$HERE/tools/count_events.c" -ldl
    return 0
}

build_all
[ $BUILD_ONLY = 1 ] && { log "built into $BIN"; exit 0; }

# ---------------------------------------------------------------- tools
TIME_BIN=/usr/bin/time
if [ ! -x "$TIME_BIN" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing GNU time (apt-get install -y time)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y time >>"$LOGS/apt.log" 2>&1
fi
[ -x "$TIME_BIN" ] || die "GNU time ($TIME_BIN) is needed: apt-get install time"
command -v timeout >/dev/null || die "timeout (coreutils) is needed"
[ -n "${EPOCHREALTIME:-}" ] || die "bash >= 5 is needed (EPOCHREALTIME)"

HT_WHY="" # why heaptrack is not run, if it is not
if [ $USE_HT = 1 ] && ! command -v heaptrack >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        log "heaptrack not found: apt-get install -y heaptrack (log: $LOGS/apt.log)"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y heaptrack >>"$LOGS/apt.log" 2>&1 ||
            { apt-get update >>"$LOGS/apt.log" 2>&1 && apt-get install -y heaptrack >>"$LOGS/apt.log" 2>&1; }
    fi
    command -v heaptrack >/dev/null || { USE_HT=0; HT_WHY="heaptrack not installed"; }
elif [ $USE_HT = 0 ]; then
    HT_WHY="--no-heaptrack"
fi
[ -n "$HT_WHY" ] && log "heaptrack will not be run: $HT_WHY"
HT_PRINT=""
command -v heaptrack_print >/dev/null && HT_PRINT=heaptrack_print

if [ -z "$LIB" ]; then
    if [ -f "$ROOT/build/preload/libheapprof.so" ]; then
        LIB="$ROOT/build/preload/libheapprof.so"
    else
        LIB="libheapprof.so"
        ldconfig -p 2>/dev/null | grep -q 'libheapprof\.so ' ||
            log "warning: no build/preload/libheapprof.so and libheapprof.so is not in the" \
                "loader cache; heapprof runs will fail unless LD_LIBRARY_PATH finds it"
    fi
elif [[ "$LIB" == */* ]]; then
    [ -f "$LIB" ] || die "--lib $LIB: no such file"
    LIB="$(cd "$(dirname "$LIB")" && pwd)/$(basename "$LIB")"
fi

if [ -z "$CLI" ]; then
    if [ -x "$ROOT/build/analyzer/heapprof" ]; then
        CLI="$ROOT/build/analyzer/heapprof"
    elif command -v heapprof >/dev/null; then
        CLI="$(command -v heapprof)"
    fi
elif [ ! -x "$CLI" ]; then
    die "--cli $CLI: not an executable"
fi

# ---------------------------------------------------------------- helpers
calc() { awk "BEGIN { x = $1; print x }"; }

# ratio A B: A/B, nothing if either is missing or B is not positive.
ratio() {
    [ -n "${1:-}" ] && [ -n "${2:-}" ] || return 0
    awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) print a / b }'
}

# one VALUE FMT: VALUE formatted, or "n/a" if empty.
one() { if [ -n "${1:-}" ]; then printf "$2" "$1"; else echo "n/a"; fi; }

# stat3 V...: prints "median min max count" of the numbers given, nothing if none.
stat3() {
    [ $# -gt 0 ] || return 0
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
        END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
              printf "%.9g %.9g %.9g %d\n", m, v[1], v[NR], NR }'
}

# fmt3 PRINTF-FMT "MED MIN MAX COUNT": "med [min..max]" (just "med" for one value), "n/a" if empty.
fmt3() {
    [ -n "$2" ] || { echo "n/a"; return; }
    awk -v f="$1" -v s="$2" 'BEGIN { split(s, a, " ")
        if (a[4] > 1) printf(f " [" f ".." f "]\n", a[1], a[2], a[3]); else printf(f "\n", a[1]) }'
}

# tsv3 "MED MIN MAX COUNT": three TSV fields (median, min, max), NA when empty.
tsv3() { if [ -n "$1" ]; then echo "$1" | awk '{ print $1 "\t" $2 "\t" $3 }'; else printf 'NA\tNA\tNA\n'; fi; }
na() { if [ -n "${1:-}" ]; then echo "$1"; else echo NA; fi; }

# tsv_fail WORKLOAD STATUS: a results.tsv row for a workload that could not run at all.
tsv_fail() {
    printf '%s\tall\t%s\t0' "$1" "$2"
    for _ in $(seq 23); do printf '\tNA'; done
    printf '\n'
}

# heaptrack_print prints sizes with SI suffixes (1000-based, "6.03M").
si_to_kib() {
    awk -v s="$1" 'BEGIN { m = 1; u = substr(s, length(s))
        if (u == "K") m = 1e3; else if (u == "M") m = 1e6; else if (u == "G") m = 1e9
        else if (u == "T") m = 1e12
        printf "%.0f\n", (s + 0) * m / 1024 }'
}

# spawn_wait CMD...: runs CMD in the background and waits for it, so that Ctrl-C reaches
# on_signal below at once (timeout(1) puts CMD in its own process group, away from the
# terminal's SIGINT).  Returns CMD's exit status.
RUN_PID=""
spawn_wait() {
    "$@" &
    RUN_PID=$!
    wait "$RUN_PID"
    local rc=$?
    RUN_PID=""
    return $rc
}
# analysis NAME OUT CMD...: one analysis run (warm cache) under GNU time, stdout to OUT, stderr
# to logs/<workload>.NAME.err. Sets AN_S (wall s) and AN_KIB (peak RSS, KiB); returns its status.
analysis() {
    local name="$1" out="$2"
    shift 2
    AN_S="" AN_KIB=""
    spawn_wait "$TIME_BIN" -f '%e %M' -o "$LOGS/$id.$name.time" "$@" >"$out" \
        2>"$LOGS/$id.$name.err" </dev/null || return 1
    read -r AN_S AN_KIB <"$LOGS/$id.$name.time"
}
on_signal() {
    trap - INT TERM
    if [ -n "$RUN_PID" ]; then
        # RUN_PID is GNU time or timeout; timeout passes TERM on to the whole run.
        local c
        for c in $(pgrep -P "$RUN_PID" 2>/dev/null) "$RUN_PID"; do kill -TERM "$c" 2>/dev/null; done
        wait "$RUN_PID" 2>/dev/null
    fi
    # fd 3 is the script's own stderr: the handler may run inside a redirected spawn_wait.
    echo "run.sh: interrupted; results so far in $RESULTS" >&3
    exit 130
}
exec 3>&2
trap on_signal INT TERM

declare -A WALL CPU RSS TBYTES # key "id|tool|round"
declare -A FAIL NOTE NOK       # key "id|tool"

# run_one TOOL ID ROUND: one timed run of CMD[@] under TOOL; sets RUN_STATUS ("ok" or why
# not) and fills WALL/CPU/RSS/TBYTES for the round.  The output is compared with REF_OUT.
run_one() {
    local tool="$1" id="$2" r="$3" pre=()
    local log="$LOGS/$id.$tool.r$r" k="$id|$tool|$r"
    case "$tool" in
    baseline) ;;
    heaptrack) rm -f "$TR/$id.zst" "$TR/$id.gz"; pre=(heaptrack -o "$TR/$id") ;;
    heapprof)
        rm -f "$TR/$id".*.hpt
        pre=(env "LD_PRELOAD=$LIB" "HEAPPROF_OUT=$TR/$id.%p.hpt")
        ;;
    esac
    local t0="$EPOCHREALTIME"
    spawn_wait "$TIME_BIN" -f '%e %U %S %M' -o "$log.time" \
        timeout -k 10 "$TIMEOUT" "${pre[@]}" "${CMD[@]}" >"$log.out" 2>"$log.err" </dev/null
    local rc=$? t1="$EPOCHREALTIME"

    RUN_STATUS=ok
    if grep -q 'cannot be preloaded' "$log.err"; then
        RUN_STATUS="preload failed: $(grep -m1 -o "object '[^']*'" "$log.err")"
    elif [ $rc = 124 ] || { [ $rc = 137 ] && [ "$(calc "$t1 - $t0 >= $TIMEOUT")" = 1 ]; }; then
        RUN_STATUS="timeout after ${TIMEOUT}s"
    elif [ $rc -gt 128 ]; then
        RUN_STATUS="killed by signal $((rc - 128))"
    elif [ $rc != 0 ]; then
        RUN_STATUS="exit status $rc"
    elif [ "$(grep -m1 'checksum=' "$log.out")" != "$REF_OUT" ]; then
        RUN_STATUS="wrong output: $(grep -m1 'checksum=' "$log.out" | cut -c1-60)"
    fi
    local times
    times="$(tail -n 1 "$log.time" 2>/dev/null)"
    set -- $times
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$WL_NAME" "$tool" "$r" \
        "$(calc "$t1 - $t0")" "$(na "${2:-}")" "$(na "${3:-}")" "$(na "${4:-}")" "$rc" \
        "$RUN_STATUS" >>"$ROUNDS_TSV"
    [ "$RUN_STATUS" = ok ] || return 1

    WALL[$k]="$(calc "$t1 - $t0")"
    CPU[$k]="$(calc "${2:-0} + ${3:-0}")"
    RSS[$k]="${4:-}"
    case "$tool" in
    heaptrack)
        local f
        for f in "$TR/$id.zst" "$TR/$id.gz"; do
            [ -s "$f" ] && TBYTES[$k]="$(stat -c %s "$f")"
        done
        ;;
    heapprof)
        local total=0 f found=0
        for f in "$TR/$id".*.hpt; do
            [ -f "$f" ] || continue
            total=$((total + $(stat -c %s "$f")))
            found=1
        done
        [ $found = 1 ] && TBYTES[$k]="$total"
        # The shim speaks only on trouble (hp_disable) or by request: keep its first line.
        [ -s "$log.err" ] && NOTE[$id|$tool]="stderr: $(head -n 1 "$log.err" | cut -c1-70)"
        ;;
    esac
    return 0
}

# per_round ID TOOL EXPR: values of EXPR for each round where both TOOL and baseline ran;
# EXPR sees t (tool), b (baseline) for WALL or CPU as named by the variable AX.
per_round() {
    local id="$1" tool="$2" expr="$3" r t b
    local -n ax="$AX"
    for ((r = 1; r <= RUNS; r++)); do
        t="${ax[$id|$tool|$r]:-}"
        b="${ax[$id|baseline|$r]:-}"
        [ -n "$t" ] && [ -n "$b" ] || continue
        awk -v t="$t" -v b="$b" -v e="$EVENTS" "BEGIN { print $expr }"
    done
}

# values ARRAY-NAME ID TOOL: the per-round values stored for ID and TOOL.
values() {
    local -n arr="$1"
    local r
    for ((r = 1; r <= RUNS; r++)); do
        [ -n "${arr[$2|$3|$r]:-}" ] && echo "${arr[$2|$3|$r]}"
    done
}

# ---------------------------------------------------------------- selection
selected() { # selected NAME FLAGS: should this workload run?
    local name="$1" flags="$2" id="${1// /_}" item
    if [ -z "$ONLY" ]; then
        [[ ",$flags," != *,optin,* ]]
        return
    fi
    IFS=, read -r -a items <<<"$ONLY"
    for item in "${items[@]}"; do
        item="${item// /_}"
        # "c_threads" selects c_threads_2 and c_threads_8; "c_churn" selects only c_churn
        [ "$item" = "$id" ] || [ "$item" = "${id%_[0-9]*}" ] && return 0
    done
    return 1
}

SEL=()
for w in "${WORKLOADS[@]}"; do
    IFS='|' read -r name _ _ flags <<<"$w"
    selected "$name" "$flags" && SEL+=("$w")
done
# A typo in --only must not silently shrink the run.
IFS=, read -r -a items <<<"$ONLY"
for item in "${items[@]}"; do
    hit=0
    for w in "${WORKLOADS[@]}"; do
        IFS='|' read -r name _ _ _ <<<"$w"
        id="${name// /_}"
        [ "${item// /_}" = "$id" ] || [ "${item// /_}" = "${id%_[0-9]*}" ] && hit=1
    done
    [ $hit = 1 ] || die "--only: no workload named '$item' (see --help)"
done

TOOLS=(baseline)
[ $USE_HT = 1 ] && TOOLS+=(heaptrack)
TOOLS+=(heapprof)

# ---------------------------------------------------------------- run
printf 'workload\ttool\tround\twall_s\tuser_s\tsys_s\tmaxrss_kib\texit\tstatus\n' >"$ROUNDS_TSV"
printf '%s\n' workload tool status rounds_ok events events_src \
    wall_s_med wall_s_min wall_s_max cpu_s_med cpu_s_min cpu_s_max slowdown_med \
    add_wall_ns_per_ev_med add_wall_ns_per_ev_min add_wall_ns_per_ev_max \
    add_cpu_ns_per_ev_med add_cpu_ns_per_ev_min add_cpu_ns_per_ev_max \
    wall_ratio_vs_heaptrack cpu_ratio_vs_heaptrack trace_bytes trace_bytes_per_ev \
    peak_rss_kib app_peak_rss_kib analysis_s note analysis_rss_kib report_s report_rss_kib |
    paste -s - >"$RESULTS"

{
    echo "date: $(date -Is)"
    echo "host: $(uname -srm), $(nproc) CPUs"
    echo "rounds: $RUNS  quick: $QUICK  timeout: ${TIMEOUT}s"
    echo "heapprof lib: $LIB"
    echo "heapprof cli: ${CLI:-none}"
    echo "heaptrack: $([ $USE_HT = 1 ] && heaptrack --version 2>&1 | head -n 1 || echo "not run ($HT_WHY)")"
    echo "gcc: $(gcc -dumpfullversion 2>/dev/null)  rustc: $(rustc --version 2>/dev/null)"
} >"$OUT/run-info.txt"

echo "heapprof bench: $RUNS round(s)$([ $QUICK = 1 ] && echo ", --quick sizes (smoke test: not a measurement)")"
echo "lib: $LIB"
echo "heaptrack: $([ $USE_HT = 1 ] && echo yes || echo "not run ($HT_WHY)")   started $(date '+%F %T')"
echo "Columns: median [min..max] over rounds.  +wall/+cpu ns/event = (tool - baseline of the same round)"
echo "  / alloc events; cpu = user+sys of the whole process tree.  Peak RSS of the app; for heaptrack the"
echo "  app's peak from heaptrack_print, with its largest process (heaptrack_interpret) in brackets."

SUM_ROWS=()
ROW_FMT='  %-19s %-24s %-9s %-20s %-20s %-10s %-14s %s\n'

for w in "${SEL[@]}"; do
    IFS='|' read -r WL_NAME cmd qcmd flags <<<"$w"
    id="${WL_NAME// /_}"
    [ $QUICK = 1 ] && cmd="$qcmd"
    read -r -a CMD <<<"$cmd"
    exe="${CMD[0]}"
    CMD[0]="$BIN/$exe"
    echo
    if [ ! -x "${CMD[0]}" ]; then
        echo "$WL_NAME: not built: ${BUILD_ERR[$exe]:-missing ${CMD[0]}}"
        tsv_fail "$WL_NAME" "not built" >>"$RESULTS"
        SUM_ROWS+=("$(printf '%-21s %s' "$WL_NAME" "not built")")
        continue
    fi
    rm -f "$LOGS/$id".*

    wl_tools=()
    for t in "${TOOLS[@]}"; do
        [ "$t" = heaptrack ] && [[ ",$flags," == *,noht,* ]] && continue
        wl_tools+=("$t")
    done

    # Warm-up: page cache, and the reference output every timed run must reproduce.
    log "[$WL_NAME] warm-up: ${CMD[*]#$BIN/}"
    REF_OUT=""
    if ! spawn_wait timeout "$TIMEOUT" "${CMD[@]}" >"$LOGS/$id.warmup.out" 2>&1 </dev/null; then
        echo "$WL_NAME: the uninstrumented program itself fails (see $LOGS/$id.warmup.out)"
        tsv_fail "$WL_NAME" "baseline fails" >>"$RESULTS"
        SUM_ROWS+=("$(printf '%-21s %s' "$WL_NAME" "baseline fails")")
        continue
    fi
    REF_OUT="$(grep -m1 'checksum=' "$LOGS/$id.warmup.out")"

    for t in "${wl_tools[@]}"; do FAIL[$id|$t]=""; NOTE[$id|$t]=""; NOK[$id|$t]=0; done
    for ((r = 1; r <= RUNS; r++)); do
        n=${#wl_tools[@]}
        line="[$WL_NAME] round $r/$RUNS:"
        for ((j = 0; j < n; j++)); do
            t="${wl_tools[$(((j + r - 1) % n))]}"
            if [ -n "${FAIL[$id|$t]}" ]; then
                line+=" $t skipped;"
                continue
            fi
            if run_one "$t" "$id" "$r"; then
                NOK[$id|$t]=$((NOK[$id|$t] + 1))
                line+=" $t $(printf '%.2f' "${WALL[$id|$t|$r]}")s;"
            else
                # A failed tool is not retried: a crash or hang would repeat every round.
                FAIL[$id|$t]="FAILED round $r: $RUN_STATUS (log: bench/out/logs/$id.$t.r$r.*)"
                line+=" $t FAILED ($RUN_STATUS);"
            fi
        done
        log "$line"
    done

    # Events: heaptrack_print on the last heaptrack trace; else the counting preload.
    EVENTS="" EV_SRC="" HT_APP_RSS="" HT_PRINT_S="" HT_PRINT_KIB=""
    htrace=""
    for f in "$TR/$id.zst" "$TR/$id.gz"; do [ -s "$f" ] && htrace="$f"; done
    if [ -n "$htrace" ] && [ -n "$HT_PRINT" ] && [ "${NOK[$id|heaptrack]:-0}" -gt 0 ]; then
        log "[$WL_NAME] heaptrack_print (events, app peak RSS, analysis time)"
        if analysis heaptrack_print "$LOGS/$id.heaptrack_print.txt" heaptrack_print "$htrace"; then
            HT_PRINT_S="$AN_S" HT_PRINT_KIB="$AN_KIB"
            EVENTS="$(sed -n 's/^calls to allocation functions: \([0-9]*\).*/\1/p' \
                "$LOGS/$id.heaptrack_print.txt")"
            rss="$(sed -n 's/^peak RSS (including heaptrack overhead): *\([0-9.]*[KMGT]\?\).*/\1/p' \
                "$LOGS/$id.heaptrack_print.txt")"
            [ -n "$rss" ] && HT_APP_RSS="$(si_to_kib "$rss")"
            [ -n "$EVENTS" ] && EV_SRC=heaptrack_print
        fi
    fi
    if [ -z "$EVENTS" ] && [ -f "$BIN/count_events.so" ]; then
        log "[$WL_NAME] counting events with count_events.so"
        rm -f "$LOGS/$id.count"
        spawn_wait timeout "$TIMEOUT" env BENCH_COUNT_OUT="$LOGS/$id.count" LD_PRELOAD="$BIN/count_events.so" \
            "${CMD[@]}" >/dev/null 2>&1 </dev/null
        EVENTS="$(awk '{ s += $2 } END { if (NR) print s }' "$LOGS/$id.count" 2>/dev/null)"
        [ -n "$EVENTS" ] && EV_SRC=count_events
    fi

    # heapprof's own analysis time and peak RSS, if the CLI exists and a trace was written:
    # `stats` (totals only) and `report` (per-site figures, growth chains, symbols).
    HP_STATS_S="" HP_STATS_KIB="" HP_REPORT_S="" HP_REPORT_KIB="" HP_STATS_NOTE=""
    hptrace="$(ls -S "$TR/$id".*.hpt 2>/dev/null | head -n 1)"
    if [ -n "$CLI" ] && [ -n "$hptrace" ]; then
        log "[$WL_NAME] heapprof stats --json, heapprof report"
        if analysis heapprof_stats "$TR/$id.stats.json" timeout "$TIMEOUT" "$CLI" stats \
            "$hptrace" --json; then
            HP_STATS_S="$AN_S" HP_STATS_KIB="$AN_KIB"
        else
            HP_STATS_NOTE="heapprof stats failed (see bench/out/logs/$id.heapprof_stats.err)"
        fi
        if analysis heapprof_report "$TR/$id.report.txt" timeout "$TIMEOUT" "$CLI" report \
            "$hptrace"; then
            HP_REPORT_S="$AN_S" HP_REPORT_KIB="$AN_KIB"
        else
            HP_STATS_NOTE+="${HP_STATS_NOTE:+; }heapprof report failed (see"
            HP_STATS_NOTE+=" bench/out/logs/$id.heapprof_report.err)"
        fi
    fi

    # ------------------------------------------------ per-workload table
    if [ -n "$EVENTS" ]; then
        evs="$(awk -v e="$EVENTS" 'BEGIN { printf "%.2f M", e / 1e6 }')"
    else
        evs="unknown"
    fi
    echo "$WL_NAME  ($evs alloc events, from ${EV_SRC:-nowhere}; $RUNS round(s); ${CMD[*]#$BIN/})"
    printf "$ROW_FMT" tool "wall s" slowdown "+wall ns/event" "+cpu ns/event" "trace B/ev" \
        "peak RSS MiB" status
    declare -A ADDW=() ADDC=() BPE=()
    for t in "${wl_tools[@]}"; do
        n="${NOK[$id|$t]}"
        wall="$(stat3 $(values WALL "$id" "$t"))"
        cpu="$(stat3 $(values CPU "$id" "$t"))"
        rss="$(stat3 $(values RSS "$id" "$t"))"
        tb="$(stat3 $(values TBYTES "$id" "$t"))"
        slow="" addw="" addc="" bpe=""
        if [ "$t" != baseline ]; then
            AX=WALL
            slow="$(stat3 $(per_round "$id" "$t" 't / b'))"
            if [ -n "$EVENTS" ]; then
                addw="$(stat3 $(per_round "$id" "$t" '(t - b) * 1e9 / e'))"
                AX=CPU
                addc="$(stat3 $(per_round "$id" "$t" '(t - b) * 1e9 / e'))"
            fi
        fi
        [ -n "$tb" ] && [ -n "$EVENTS" ] && bpe="$(calc "${tb%% *} / $EVENTS")"
        ADDW[$t]="${addw%% *}" ADDC[$t]="${addc%% *}" BPE[$t]="$bpe"

        status=ok
        [ -n "${FAIL[$id|$t]}" ] && status="${FAIL[$id|$t]}"
        [ "$n" = 0 ] && wall="" # nothing measured
        [ -n "${NOTE[$id|$t]}" ] && status+="; ${NOTE[$id|$t]}"
        rss_s="n/a"
        [ -n "$rss" ] && rss_s="$(awk -v k="${rss%% *}" 'BEGIN { printf "%.1f", k / 1024 }')"
        app_rss=""
        if [ "$t" = heaptrack ] && [ -n "$HT_APP_RSS" ]; then
            app_rss="$HT_APP_RSS" # the app's own peak; GNU time sees the interpreter's
            rss_s="$(awk -v a="$HT_APP_RSS" -v k="${rss%% *}" \
                'BEGIN { printf "%.1f (%s)", a / 1024, k ? sprintf("%.0f", k / 1024) : "?" }')"
        fi
        bpe_s="n/a"
        [ -n "$bpe" ] && bpe_s="$(printf '%.2f' "$bpe")"
        [ "$t" = baseline ] && bpe_s="-"
        slow_s="-"
        [ -n "$slow" ] && slow_s="$(printf '%.2fx' "${slow%% *}")"
        if [ "$t" = baseline ]; then addw_s="-" addc_s="-"; else
            addw_s="$(fmt3 '%.0f' "$addw")" addc_s="$(fmt3 '%.0f' "$addc")"
        fi
        [ "$n" = 0 ] && { addw_s="-" addc_s="-"; }
        printf "$ROW_FMT" "$t" "$(fmt3 '%.3f' "$wall")" "$slow_s" "$addw_s" "$addc_s" \
            "$bpe_s" "$rss_s" "$status"

        analysis="" an_kib="" rep_s="" rep_kib=""
        [ "$t" = heaptrack ] && analysis="$HT_PRINT_S" an_kib="$HT_PRINT_KIB"
        [ "$t" = heapprof ] && analysis="$HP_STATS_S" an_kib="$HP_STATS_KIB" \
            rep_s="$HP_REPORT_S" rep_kib="$HP_REPORT_KIB"
        wr="" cr=""
        if [ "$t" = heapprof ]; then
            wr="$(ratio "${ADDW[heapprof]}" "${ADDW[heaptrack]:-}")"
            cr="$(ratio "${ADDC[heapprof]}" "${ADDC[heaptrack]:-}")"
        fi
        note="${NOTE[$id|$t]}"
        [ "$t" = heapprof ] && [ -n "$HP_STATS_NOTE" ] && note+="${note:+; }$HP_STATS_NOTE"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
            "$WL_NAME" "$t" "$([ -n "${FAIL[$id|$t]}" ] && echo "${FAIL[$id|$t]}" || echo ok)" "$n" \
            "$(na "$EVENTS")" "$(na "$EV_SRC")" "$(tsv3 "$wall")" "$(tsv3 "$cpu")" \
            "$(na "${slow%% *}")" "$(tsv3 "$addw")" "$(tsv3 "$addc")" "$(na "$wr")" "$(na "$cr")" \
            "$(na "${tb%% *}")" "$(na "$bpe")" "$(na "${rss%% *}")" "$(na "$app_rss")" \
            "$(na "$analysis")" "$(na "$note")" "$(na "$an_kib")" "$(na "$rep_s")" \
            "$(na "$rep_kib")" >>"$RESULTS"
    done

    # heapprof / heaptrack ratios: the goal is <= 0.25 of heaptrack's added cost.
    ratio_w="$(ratio "${ADDW[heapprof]:-}" "${ADDW[heaptrack]:-}")"
    ratio_c="$(ratio "${ADDC[heapprof]:-}" "${ADDC[heaptrack]:-}")"
    if [ -n "${ADDW[heaptrack]:-}" ] && [ -n "${ADDW[heapprof]:-}" ]; then
        printf "$ROW_FMT" "heapprof/heaptrack" "" "" "$(one "$ratio_w" '%.3f')" \
            "$(one "$ratio_c" '%.3f')" \
            "$(one "$(ratio "${BPE[heapprof]:-}" "${BPE[heaptrack]:-}")" '%.2f')" \
            "" "(goal: +wall ratio <= 0.25)"
    fi
    # one line per analyzer: time, alloc events per second, peak RSS; report against heaptrack_print
    an_fmt() { # SECONDS KIB
        if [ -n "$1" ] && [ -n "$EVENTS" ]; then
            awk -v s="$1" -v e="$EVENTS" -v k="${2:-0}" \
                'BEGIN { printf "%.2f s, %.1f M ev/s, %.0f MiB", s, e / s / 1e6, k / 1024 }'
        else echo "n/a"; fi
    }
    echo "  analysis (one run each, warm cache; ev/s = alloc events / wall s; peak RSS):"
    echo "    heaptrack_print  $(an_fmt "$HT_PRINT_S" "$HT_PRINT_KIB")"
    if [ -n "$HP_STATS_S$HP_REPORT_S" ]; then
        echo "    heapprof stats   $(an_fmt "$HP_STATS_S" "$HP_STATS_KIB")"
        sp="$(ratio "$HT_PRINT_S" "$HP_REPORT_S")"
        echo "    heapprof report  $(an_fmt "$HP_REPORT_S" "$HP_REPORT_KIB")$([ -n "$sp" ] &&
            printf ' = %.2fx heaptrack_print (goal: >= 5x)' "$sp")"
    fi
    if [ -n "$HP_STATS_NOTE" ]; then echo "    heapprof: $HP_STATS_NOTE"
    elif [ -z "$CLI" ]; then echo "    heapprof: n/a (no heapprof command)"
    elif [ -z "$hptrace" ]; then echo "    heapprof: n/a (no .hpt trace)"; fi

    goal="n/a"
    [ -n "$ratio_w" ] && goal="$(awk -v x="$ratio_w" 'BEGIN { print (x <= 0.25) ? "met" : "MISSED" }')"
    hpcol="$(one "${ADDW[heapprof]:-}" '%.0f')"
    [ -n "${FAIL[$id|heapprof]:-}" ] && [ "${NOK[$id|heapprof]}" = 0 ] && hpcol="FAILED"
    htcol="$(one "${ADDW[heaptrack]:-}" '%.0f')"
    [ -n "${FAIL[$id|heaptrack]:-}" ] && [ "${NOK[$id|heaptrack]:-0}" = 0 ] && htcol="FAILED"
    SUM_ROWS+=("$(printf '%-21s %-9s %-11s %-10s %-8s %-9s %-8s %-8s %s' "$WL_NAME" \
        "$([ -n "$EVENTS" ] && echo "$evs" | tr -d ' ' || echo n/a)" "$htcol" "$hpcol" \
        "$(one "$ratio_w" '%.3f')" "$(one "$ratio_c" '%.3f')" \
        "$(one "${BPE[heaptrack]:-}" '%.2f')" "$(one "${BPE[heapprof]:-}" '%.2f')" "$goal")")
    unset ADDW ADDC BPE
done

echo
echo "Summary: added wall ns per alloc event (median of per-round differences); ratios heapprof/heaptrack"
printf '%-21s %-9s %-11s %-10s %-8s %-9s %-8s %-8s %s\n' workload events heaptrack heapprof \
    "ratio" "cpu ratio" "ht B/ev" "hp B/ev" "goal<=0.25"
for row in "${SUM_ROWS[@]}"; do echo "$row"; done
echo
echo "results: bench/out/results.tsv (per tool), bench/out/rounds.tsv (per run), logs in bench/out/logs/"
