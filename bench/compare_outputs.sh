#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/compare_outputs.sh: did a change to the analyzer change any of its outputs?  For
# refactorings, where the answer must be "no": record a fixed corpus of traces once, run every
# output of one `heapprof` binary over it (the baseline), then the same with another binary, and
# compare byte for byte.  Not a test (nothing in ctest runs it) and not a benchmark.
#
# Usage:
#   bench/compare_outputs.sh record DIR [--lib PATH] [--samples DIR]
#       Builds the corpus into DIR (which must not hold one yet): the bench workloads
#       (bench/workloads/, built as bench/run.sh builds them, at sizes below its --quick ones)
#       and the sample programs (build/samples/, as tests/e2e run them) under libheapprof.so,
#       a few variants (HEAPPROF_CPU=0/timer, HEAPPROF_TOUCH=0, small chunks, a program killed
#       by SIGKILL), and damaged copies of one trace (truncated mid-chunk and inside the file
#       header, a flipped byte, a wrong version, an empty file, a file that is no trace).
#       The programs and the library are copied into DIR/bin first and run from there, so the
#       binaries the traces name stay as they were when the analyzer symbolizes them later,
#       whatever is rebuilt meanwhile.  --lib: default build/preload/libheapprof.so;
#       --samples: default build/samples (the Rust samples are skipped if they were not built).
#   bench/compare_outputs.sh baseline DIR HEAPPROF_BIN
#       Runs every output command (below) on every trace of DIR with HEAPPROF_BIN and stores
#       stdout, stderr, the exit status and any -o file under DIR/out-baseline/.
#   bench/compare_outputs.sh check DIR HEAPPROF_BIN
#       The same into DIR/out-new/ (replaced), then compares it with DIR/out-baseline/: one
#       line per output that differs or exists on one side only, then "N outputs compared, all
#       identical" (exit 0) or "K of N differ" (exit 1).  `diff -r DIR/out-baseline DIR/out-new`
#       shows the differences themselves.  Exit 2: bad usage or a missing corpus/baseline.
#
# The outputs, per trace: stats (text, --json, --from-module PROGRAM), report (text, --json,
# --top 3 --short-ms 0, --top 25 --short-ms 50), dhat (stdout and -o FILE), flame (default SVG
# on stdout; every metric as SVG with -o FILE and as --folded; --trim for bytes and growth),
# view (-o FILE.html).  Per pair of traces: diff (table, --metric blocks, --folded, --trim
# --folded, -o FILE.svg; cpu for the CPU pair).  Once: heapprof --help, --version, every
# subcommand's --help, and a few usage errors.  Every output is one "output" in the count: a
# command's stdout, its stderr, its exit status and its -o file are four.
#
# Normalisations (applied to stdout, stderr and -o files as they are stored, both sides alike):
#   1. the absolute path of DIR becomes <DIR> (traces, programs and the scratch directory
#      DIR/work/, where every -o file is first written, live under it);
#   2. the absolute path of HEAPPROF_BIN becomes <HEAPPROF>.
# Nothing else is volatile: the corpus is recorded once (pids, times, CPU samples and program
# paths are inside the traces), -o files are written to the same scratch path by both binaries
# and moved into out-*/ afterwards, the analyzer runs with stdin from /dev/null and stderr into
# a file (so no progress line: that needs a terminal), and in a clean environment
# (env -i PATH=/usr/bin:/bin LC_ALL=C TZ=UTC: no HEAPPROF_*, no DEBUGINFOD_URLS).
#
# Timing on a 2-core VM: record ~10 s (4 s with the workloads built), baseline or check ~2 min.  Do not run two of these
# on one DIR at once (they share DIR/work/).
set -euo pipefail
export LC_ALL=C

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
TIMEOUT=120 # seconds, any one program or analyzer run

die() { printf 'compare_outputs.sh: %s\n' "$*" >&2; exit 2; }
log() { printf '%s\n' "$*" >&2; }
usage() { sed -n '3,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

# ---------------------------------------------------------------- record

# The analyzer symbolizes from the binaries the trace names: they must not change after record.
# WORKLOADS: trace name | program in DIR/bin | arguments | extra environment (space-separated)
WORKLOADS=(
    "c_churn|c_churn|200000|"
    "c_churn_50k|c_churn|50000|"
    "c_churn_chunk16|c_churn|200000|HEAPPROF_CHUNK_KB=16"
    "c_churn_exact|c_churn_exact|100000|"
    "c_threads_4|c_threads|4 200000|"
    "realloc_chain|realloc_chain|10|"
    "cpp_mixed|cpp_mixed|1|"
    "rust_vec_growth|rust_vec_growth|3000|"
    "rust_hashmap_growth|rust_hashmap_growth|30000|"
    "many_threads|many_threads|40 500|"
    "exact_counts|exact_counts||"
    "exact_counts_plain|exact_counts||HEAPPROF_CPU=0 HEAPPROF_TOUCH=0"
    "vector_map|vector_map||"
    "cpu_hot|cpu_hot||"
    "cpu_hot_timer|cpu_hot||HEAPPROF_CPU=timer"
    "small_stacks|small_stacks||"
    "exit_now|exit_now|_exit|"
    "exit_now_vfork|exit_now|vfork|"
    "longjmp_guard|longjmp_guard||"
    "vec_growth|vec_growth||"
    "hashmap_words|hashmap_words||"
    "cpu_hot_rust|cpu_hot_rust||"
)
SAMPLES="exact_counts vector_map cpu_hot small_stacks exit_now longjmp_guard vec_growth hashmap_words cpu_hot_rust"

# trace NAME PROG ARGS ENV: runs DIR/bin/PROG under the copied library; keeps DIR/traces/NAME.hpt
# and, for each forked child, NAME.child<k>.hpt.  Exit status 0 or a signal if KILL_AFTER is set.
trace() {
    local name="$1" prog="$2" args="$3" extra="$4" rc=0 kill=()
    # --foreground: a SIGKILL for the program only, not for timeout's whole process group
    [ -n "${KILL_AFTER:-}" ] && kill=(--foreground -s KILL "$KILL_AFTER") || kill=("$TIMEOUT")
    # timeout outside env: only the program is preloaded.
    # shellcheck disable=SC2086 # args and extra are word lists on purpose
    timeout "${kill[@]}" env -i PATH=/usr/bin:/bin LC_ALL=C HEAPPROF_QUIET=1 \
        HEAPPROF_OUT="$D/traces/$name.%p.hpt" LD_PRELOAD="$D/bin/libheapprof.so" $extra \
        "$D/bin/$prog" $args </dev/null >"$D/logs/$name.log" 2>&1 || rc=$?
    if [ $rc != 0 ] && [ -z "${KILL_AFTER:-}" ]; then
        die "$name: $prog $args exited with status $rc (see $D/logs/$name.log)"
    fi
    local files=() f k=0
    # shellcheck disable=SC2012 # the names are NAME.PID.hpt, NAME from WORKLOADS
    mapfile -t files < <(cd "$D/traces" && ls "$name".[0-9]*.hpt 2>/dev/null |
        sed "s/^$name\.\([0-9]*\)\.hpt\$/\1 &/" | sort -n | cut -d' ' -f2)
    [ ${#files[@]} -gt 0 ] || die "$name: no trace was written (see $D/logs/$name.log)"
    for f in "${files[@]}"; do # the parent has the lowest pid
        if [ $k = 0 ]; then
            mv "$D/traces/$f" "$D/traces/$name.hpt"
            printf '%s\t%s\n' "$name" "$prog" >>"$D/corpus.tsv"
        else
            mv "$D/traces/$f" "$D/traces/$name.child$k.hpt"
            printf '%s\t%s\n' "$name.child$k" "$prog" >>"$D/corpus.tsv"
        fi
        k=$((k + 1))
    done
}

# flip FILE OFFSET: xor the byte at OFFSET with 0xff
flip() {
    local v
    v=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
    # shellcheck disable=SC2059
    printf "$(printf '\\%03o' $((v ^ 255)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

damaged() { # damaged NAME SOURCE-NAME: a copy to damage, listed with its source's program
    cp "$D/traces/$2.hpt" "$D/traces/$1.hpt"
    printf '%s\t%s\n' "$1" "$(awk -F'\t' -v n="$2" '$1 == n { print $2 }' "$D/corpus.tsv")" \
        >>"$D/corpus.tsv"
}

cmd_record() {
    local lib="$ROOT/build/preload/libheapprof.so" samples="$ROOT/build/samples"
    while [ $# -gt 0 ]; do
        case "$1" in
        --lib) lib="${2:?--lib needs a path}"; shift ;;
        --samples) samples="${2:?--samples needs a directory}"; shift ;;
        *) die "record: unknown option '$1'" ;;
        esac
        shift
    done
    [ -f "$lib" ] || die "record: no $lib (build first, or --lib PATH)"
    [ -d "$samples" ] || die "record: no $samples (build first, or --samples DIR)"
    [ -e "$D/traces" ] && die "record: $D already holds a corpus (use a new DIR)"
    local t0=$EPOCHREALTIME
    mkdir -p "$D/bin" "$D/traces" "$D/logs" "$D/work"
    : >"$D/corpus.tsv"

    log "record: building the workloads (bench/run.sh --build-only)"
    "$HERE/run.sh" --build-only >"$D/logs/build.log" 2>&1 ||
        die "record: bench/run.sh --build-only failed (see $D/logs/build.log)"
    local w
    for w in c_churn c_churn_exact c_threads realloc_chain cpp_mixed rust_vec_growth \
        rust_hashmap_growth; do
        [ -x "$HERE/out/bin/$w" ] || die "record: workload $w was not built (see $D/logs/build.log)"
        cp "$HERE/out/bin/$w" "$D/bin/"
    done
    # built as bench/many_threads.sh builds it
    gcc -O2 -g -pthread -o "$D/bin/many_threads" "$HERE/workloads/many_threads.c"
    local s missing=""
    for s in $SAMPLES; do
        if [ -x "$samples/$s" ]; then cp "$samples/$s" "$D/bin/"; else missing+=" $s"; fi
    done
    [ -z "$missing" ] || log "record: samples not built, skipped:$missing"
    cp "$lib" "$D/bin/libheapprof.so"

    local spec name prog args extra
    for spec in "${WORKLOADS[@]}"; do
        IFS='|' read -r name prog args extra <<<"$spec"
        [ -x "$D/bin/$prog" ] || continue
        log "record: $name"
        trace "$name" "$prog" "$args" "$extra"
    done
    log "record: c_churn_killed (SIGKILL after 0.3 s)"
    KILL_AFTER=0.3 trace c_churn_killed c_churn 1000000000 ""

    # Damaged copies (what tests/e2e/test_damaged.c does to traces, one of each kind).
    local src="$D/traces/c_churn_chunk16.hpt" size
    size=$(stat -c %s "$src")
    damaged trunc_half c_churn_chunk16
    truncate -s $((size / 2)) "$D/traces/trunc_half.hpt"
    damaged trunc_last_chunk c_churn_chunk16
    truncate -s $((size - 100)) "$D/traces/trunc_last_chunk.hpt"
    damaged trunc_in_header c_churn_chunk16
    truncate -s 30 "$D/traces/trunc_in_header.hpt"
    damaged header_only c_churn_chunk16
    truncate -s 56 "$D/traces/header_only.hpt"
    damaged flipped_mid c_churn_chunk16
    flip "$D/traces/flipped_mid.hpt" $((size / 2))
    damaged flipped_chunk_magic c_churn_chunk16
    flip "$D/traces/flipped_chunk_magic.hpt" 56
    damaged bad_version c_churn_chunk16
    flip "$D/traces/bad_version.hpt" 8
    damaged empty c_churn_chunk16
    truncate -s 0 "$D/traces/empty.hpt"
    printf 'not a trace\n' >"$D/traces/not_a_trace.hpt"
    printf 'not_a_trace\tnone\n' >>"$D/corpus.tsv"

    {
        echo "recorded $(date -u +%FT%TZ) from $(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo '?')"
        echo "lib $lib"
        echo "samples $samples"
    } >"$D/record-info.txt"
    log "record: $(wc -l <"$D/corpus.tsv") traces in $D/traces ($(du -sh "$D/traces" | cut -f1))" \
        "in $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s"
}

# ---------------------------------------------------------------- baseline / check

# sed pattern for a literal string
lit() { printf '%s' "$1" | sed 's/[][\/.*^$]/\\&/g'; }

normalise() { # normalise FILE...: in place
    sed -i -e "s/$(lit "$D")/<DIR>/g" -e "s/$(lit "$HBIN")/<HEAPPROF>/g" "$@"
}

# one DEST ID EXT ARG...: runs HEAPPROF_BIN ARG... in DIR/work with @OUT@ in an argument
# replaced by DIR/work/ID.EXT; stores DEST/ID.stdout, .stderr, .rc and (if written) .EXT.
N_RUNS=0
one() {
    local dest="$1" id="$2" ext="$3" a rc=0
    shift 3
    local work="$D/work/$id.$ext" args=()
    for a in "$@"; do args+=("${a//@OUT@/$work}"); done
    rm -f "$work"
    (cd "$D/work" && env -i PATH=/usr/bin:/bin LC_ALL=C TZ=UTC \
        timeout "$TIMEOUT" "$HBIN" "${args[@]}" </dev/null >"$dest/$id.stdout" \
        2>"$dest/$id.stderr") || rc=$?
    echo "$rc" >"$dest/$id.rc"
    local files=("$dest/$id.stdout" "$dest/$id.stderr")
    if [ -n "$ext" ] && [ -e "$work" ]; then
        mv "$work" "$dest/$id.$ext"
        files+=("$dest/$id.$ext")
    fi
    normalise "${files[@]}"
    N_RUNS=$((N_RUNS + 1))
}

METRICS="bytes blocks peak leaked temporary growth cpu"

per_trace() { # per_trace OUT NAME PROGRAM
    local dest="$1/$2" t="$D/traces/$2.hpt" m
    mkdir -p "$dest"
    one "$dest" stats "" stats "$t"
    one "$dest" stats-json "" stats "$t" --json
    one "$dest" stats-from-module "" stats "$t" --from-module "$3"
    one "$dest" report "" report "$t"
    one "$dest" report-json "" report "$t" --json
    one "$dest" report-top3-short0 "" report "$t" --top 3 --short-ms 0
    one "$dest" report-top25-short50 "" report "$t" --top 25 --short-ms 50
    one "$dest" dhat "" dhat "$t"
    one "$dest" dhat-o json dhat "$t" -o @OUT@
    one "$dest" flame "" flame "$t"
    for m in $METRICS; do
        one "$dest" "flame-$m" svg flame "$t" --metric "$m" -o @OUT@
        one "$dest" "flame-$m-folded" "" flame "$t" --metric "$m" --folded
    done
    one "$dest" flame-bytes-trim svg flame "$t" --trim -o @OUT@
    one "$dest" flame-bytes-trim-folded "" flame "$t" --trim --folded
    one "$dest" flame-growth-trim-folded "" flame "$t" --metric growth --trim --folded
    one "$dest" view html view "$t" -o @OUT@
}

per_pair() { # per_pair OUT BEFORE AFTER [METRIC]
    local dest="$1/diff-$2-vs-$3" a="$D/traces/$2.hpt" b="$D/traces/$3.hpt"
    mkdir -p "$dest"
    one "$dest" diff "" diff "$a" "$b"
    one "$dest" diff-blocks "" diff "$a" "$b" --metric blocks
    one "$dest" diff-folded "" diff "$a" "$b" --folded
    one "$dest" diff-trim-folded "" diff "$a" "$b" --trim --folded
    one "$dest" diff-svg svg diff "$a" "$b" -o @OUT@
    if [ -n "${4:-}" ]; then
        one "$dest" "diff-$4" "" diff "$a" "$b" --metric "$4"
        one "$dest" "diff-$4-svg" svg diff "$a" "$b" --metric "$4" -o @OUT@
    fi
}

PAIRS=(
    "c_churn_50k c_churn"
    "exit_now exit_now_vfork"
    "vec_growth rust_vec_growth"
    "cpu_hot cpu_hot_timer cpu"
    "exact_counts trunc_half"
)

run_all() { # run_all OUT
    local out="$1" name prog c
    rm -rf "$out"
    mkdir -p "$out/global"
    log "normalising in every stored output: '$D' -> <DIR>, '$HBIN' -> <HEAPPROF>"
    one "$out/global" help "" --help
    one "$out/global" version "" --version
    one "$out/global" no-args ""
    one "$out/global" unknown-command "" frobnicate
    for c in run stats report dhat flame diff view; do
        one "$out/global" "help-$c" "" "$c" --help
    done
    one "$out/global" stats-missing-trace "" stats "$D/traces/no-such-trace.hpt"
    one "$out/global" flame-bad-metric "" flame "$D/traces/exact_counts.hpt" --metric nope
    one "$out/global" report-bad-top "" report "$D/traces/exact_counts.hpt" --top 0
    one "$out/global" view-to-directory "" view "$D/traces/exact_counts.hpt" -o "$D/work"
    while IFS=$'\t' read -r name prog; do
        per_trace "$out" "$name" "$prog"
    done <"$D/corpus.tsv"
    local p
    for p in "${PAIRS[@]}"; do
        # shellcheck disable=SC2086
        set -- $p
        if [ ! -e "$D/traces/$1.hpt" ] || [ ! -e "$D/traces/$2.hpt" ]; then continue; fi
        per_pair "$out" "$@"
    done
}

setup_run() { # setup_run DIR HEAPPROF_BIN
    [ -f "$D/corpus.tsv" ] || die "no corpus in $D (run: $0 record $D)"
    [ -n "$HBIN" ] || die "missing HEAPPROF_BIN"
    [[ "$HBIN" == */* ]] || HBIN="$(command -v "$HBIN")" || die "$HBIN: not found on PATH"
    if [ ! -f "$HBIN" ] || [ ! -x "$HBIN" ]; then die "$HBIN: not an executable file"; fi
    HBIN="$(cd "$(dirname "$HBIN")" && pwd)/$(basename "$HBIN")" # the runs happen in DIR/work
    "$HBIN" --version >/dev/null 2>&1 || die "$HBIN --version fails: not a heapprof binary?"
}

elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

cmd_baseline() {
    setup_run
    local t0=$EPOCHREALTIME
    run_all "$D/out-baseline"
    log "baseline: $N_RUNS runs of $HBIN stored in $D/out-baseline in $(elapsed "$t0") s"
}

cmd_check() {
    setup_run
    [ -d "$D/out-baseline" ] || die "no baseline in $D (run: $0 baseline $D HEAPPROF_BIN)"
    local t0=$EPOCHREALTIME
    run_all "$D/out-new"
    log "check: $N_RUNS runs of $HBIN in $(elapsed "$t0") s; comparing with $D/out-baseline"
    local n=0 k=0 f where
    while IFS= read -r f; do
        n=$((n + 1))
        if [ ! -e "$D/out-new/$f" ]; then
            echo "only in baseline: $f"
            k=$((k + 1))
        elif [ ! -e "$D/out-baseline/$f" ]; then
            echo "only in new: $f"
            k=$((k + 1))
        elif ! cmp -s "$D/out-baseline/$f" "$D/out-new/$f"; then
            where=$(cmp "$D/out-baseline/$f" "$D/out-new/$f" 2>&1 | sed -n '1s/^.*: //p' || true)
            echo "differs: $f (${where:-?})"
            k=$((k + 1))
        fi
    done < <( (cd "$D/out-baseline" && find . -type f; cd "$D/out-new" && find . -type f) |
        sed 's|^\./||' | sort -u)
    if [ $k = 0 ]; then
        echo "$n outputs compared, all identical"
        return 0
    fi
    echo "$k of $n differ"
    return 1
}

# ---------------------------------------------------------------- main
[ $# -ge 1 ] || { usage >&2; exit 2; }
case "$1" in
-h | --help) usage; exit 0 ;;
record | baseline | check) ;;
*) die "unknown command '$1' (record, baseline or check; see --help)" ;;
esac
CMD="$1"
[ $# -ge 2 ] || die "$CMD: missing DIR"
if [ "$CMD" = record ]; then mkdir -p "$2" || die "cannot create $2"; fi
[ -d "$2" ] || die "$CMD: no directory $2 (run: $0 record $2)"
D="$(cd "$2" && pwd)"
shift 2
case "$CMD" in
record) cmd_record "$@" ;;
baseline | check)
    [ $# -eq 1 ] || die "$CMD DIR HEAPPROF_BIN"
    HBIN="$1"
    "cmd_$CMD"
    ;;
esac
