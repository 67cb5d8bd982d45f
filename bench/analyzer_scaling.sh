#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/analyzer_scaling.sh: how `heapprof report`, `stats` and `dhat` (with --commands, `view` and
# `massif` too) scale with the analyzer's decode workers (HEAPPROF_DECODE_THREADS) and replay
# threads (HEAPPROF_REPLAY_THREADS, docs/design.md "Replay across cores"), next to heaptrack_print
# on the same program's heaptrack trace: issue 18's "report >= 10x heaptrack_print on >= 8 cores"
# measured in one run.
#
# Records bench/out/bin/c_churn OPS (OPS malloc/free pairs, 2 * OPS events) once under heapprof
# and once under heaptrack, then for ROUNDS rounds runs heaptrack_print and heapprof report,
# stats and dhat with each decode worker count W and replay thread count R (report_wW_rR,
# stats_wW_rR, dhat_wW_rR), in a rotating order, and prints per command the median wall time,
# user+system CPU, peak RSS, ns per event and the ratio to heaptrack_print. With --depth, each
# of those at each count of rounds in flight D too (HEAPPROF_REPLAY_DEPTH; report_wW_rR_dD;
# report and dhat only, stats runs one round at a time).
#
# With --alt NAME=PATH (repeatable; --base-cli PATH is --alt base=PATH), every report setting
# also runs with that other build of `heapprof` (NAME_report_wW_rR...), in the same rotation:
# changes measured against the build before them, and against each other, in one run on one
# machine (NAME: letters and digits).
#
# Usage: bench/analyzer_scaling.sh [--ops N] [--runs K] [--workers 0,1,2,4] [--replay 0,2,4]
#                                   [--depth 2,3,4] [--commands report,stats,dhat,view,massif] [--cli PATH]
#                                   [--alt NAME=PATH]... [--base-cli PATH] [--lib PATH]
#                                   [--trace FILE.hpt --ht-trace FILE.zst]
# Without GNU time (the many-core machine has none) CPU comes from bash's `time` and RSS is 0.
set -u
export LC_ALL=C
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
OPS=5000000
RUNS=3
WORKERS=0,1,2,4
REPLAY=0,2,4
DEPTH= # empty: HEAPPROF_REPLAY_DEPTH unset (the default)
COMMANDS=report,stats,dhat
LIB="$ROOT/build/preload/libheapprof.so"
CLI="$ROOT/build/analyzer/heapprof"
declare -A ALT=() # NAME -> another build's heapprof
HP_TRACE=
HT_TRACE=
while [ $# -gt 0 ]; do
    case "$1" in
    --ops) OPS=$2; shift ;;
    --runs) RUNS=$2; shift ;;
    --workers) WORKERS=$2; shift ;;
    --replay) REPLAY=$2; shift ;;
    --depth) DEPTH=$2; shift ;;
    --commands) COMMANDS=$2; shift ;;
    --cli) CLI=$2; shift ;;
    --base-cli) ALT[base]=$2; shift ;;
    --alt)
        [[ $2 =~ ^([A-Za-z0-9]+)=(.+)$ ]] || { echo "analyzer_scaling.sh: --alt NAME=PATH, not $2" >&2; exit 2; }
        ALT[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
        shift ;;
    --lib) LIB=$2; shift ;;
    --trace) HP_TRACE=$2; shift ;;
    --ht-trace) HT_TRACE=$2; shift ;;
    -h | --help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "analyzer_scaling.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
HT_PRINT=$(command -v heaptrack_print || true)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

if [ -z "$HP_TRACE" ]; then
    "$HERE/run.sh" --build-only >/dev/null || { echo "analyzer_scaling.sh: cannot build the workloads" >&2; exit 1; }
    PROG="$HERE/out/bin/c_churn"
    HP_TRACE="$TMP/hp.hpt"
    env HEAPPROF_QUIET=1 HEAPPROF_OUT="$HP_TRACE" LD_PRELOAD="$LIB" "$PROG" "$OPS" >/dev/null ||
        { echo "analyzer_scaling.sh: the profiled run failed" >&2; exit 1; }
    if [ -n "$HT_PRINT" ] && command -v heaptrack >/dev/null; then
        heaptrack -o "$TMP/ht" "$PROG" "$OPS" >/dev/null 2>&1
        HT_TRACE=$(ls "$TMP"/ht.* 2>/dev/null | head -1)
    fi
fi
EVENTS=$("$CLI" stats --json "$HP_TRACE" | awk -F'[:,]' '/"events"/ { gsub(/ /, "", $2); print $2; exit }')
[ -n "$EVENTS" ] || { echo "analyzer_scaling.sh: cannot read $HP_TRACE" >&2; exit 1; }
echo "trace: $HP_TRACE, $EVENTS events ($(du -h "$HP_TRACE" | cut -f1)); online CPUs: $(nproc)"

# one NAME CMD...: appends "wall cpu rss_kb" of one run to $TMP/NAME
one() {
    local name=$1 t0 t1
    shift
    t0=$EPOCHREALTIME
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -f "%U %S %M" -o "$TMP/time" "$@" >/dev/null 2>&1 || { echo "analyzer_scaling.sh: $name failed" >&2; return; }
    else
        local TIMEFORMAT='%U %S 0' rc
        { time "$@" >/dev/null 2>"$TMP/err"; } 2>"$TMP/time"
        rc=$?
        [ $rc = 0 ] || { echo "analyzer_scaling.sh: $name failed: $(tail -1 "$TMP/err")" >&2; return; }
    fi
    t1=$EPOCHREALTIME
    awk -v a="$t0" -v b="$t1" '{ printf "%.4f %.4f %d\n", b - a, $1 + $2, $3 }' "$TMP/time" >>"$TMP/$name"
}

IFS=, read -r -a WS <<<"$WORKERS"
IFS=, read -r -a RS <<<"$REPLAY"
IFS=, read -r -a CS <<<"$COMMANDS"
DS=("")
[ -n "$DEPTH" ] && IFS=, read -r -a DS <<<"$DEPTH"
names=()
[ -n "$HT_TRACE" ] && names+=(heaptrack_print)
for w in "${WS[@]}"; do
    for r in "${RS[@]}"; do
        for c in "${CS[@]}"; do
            for d in "${DS[@]}"; do
                if [ "$c" = stats ]; then # no rounds in flight: once, whatever the depths
                    [ "$d" = "${DS[0]}" ] && names+=("${c}_w${w}_r$r")
                    continue
                fi
                names+=("${c}_w${w}_r$r${d:+_d$d}")
                if [ "$c" = report ]; then
                    for a in "${!ALT[@]}"; do names+=("${a}_${c}_w${w}_r$r${d:+_d$d}"); done
                fi
            done
        done
    done
done
for ((round = 0; round < RUNS; round++)); do
    n=${#names[@]}
    for ((k = 0; k < n; k++)); do
        name=${names[$(((k + round) % n))]}
        case $name in
        heaptrack_print) one "$name" "$HT_PRINT" "$HT_TRACE" ;;
        *report_w* | stats_w* | dhat_w* | massif_w* | view_w*)
            [[ $name =~ ^([A-Za-z0-9]+_)?[a-z]+_w([0-9]+)_r([0-9]+)(_d([0-9]+))?$ ]] || continue
            m=("${BASH_REMATCH[@]}")
            cli=$CLI
            [ -n "${m[1]}" ] && cli=${ALT[${m[1]%_}]}
            depth=()
            [ -n "${m[5]}" ] && depth=(HEAPPROF_REPLAY_DEPTH="${m[5]}")
            cmd=(stats "$HP_TRACE")
            c=${name#"${m[1]}"}
            [ "${c%%_*}" = dhat ] && cmd=(dhat -o "$TMP/dhat.json" "$HP_TRACE")
            [ "${c%%_*}" = report ] && cmd=(report "$HP_TRACE")
            [ "${c%%_*}" = massif ] && cmd=(massif -o "$TMP/massif.out" "$HP_TRACE")
            [ "${c%%_*}" = view ] && cmd=(view -o "$TMP/view.html" "$HP_TRACE")
            one "$name" env HEAPPROF_DECODE_THREADS="${m[2]}" \
                HEAPPROF_REPLAY_THREADS="${m[3]}" "${depth[@]}" "$cli" "${cmd[@]}" ;;
        esac
    done
done

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
col() { awk -v c="$2" '{ print $c }' "$TMP/$1" | median; }
ht_wall=
[ -n "$HT_TRACE" ] && [ -s "$TMP/heaptrack_print" ] && ht_wall=$(col heaptrack_print 1)
printf '%-24s %9s %9s %9s %9s %12s\n' command wall_s cpu_s rss_MiB ns/event vs_ht_print
for name in "${names[@]}"; do
    [ -s "$TMP/$name" ] || continue
    wall=$(col "$name" 1) cpu=$(col "$name" 2) rss=$(col "$name" 3)
    ratio=-
    [ -n "$ht_wall" ] && [ "$name" != heaptrack_print ] && ratio=$(awk -v h="$ht_wall" -v w="$wall" 'BEGIN { printf "%.2fx", h / w }')
    awk -v n="$name" -v w="$wall" -v c="$cpu" -v r="$rss" -v e="$EVENTS" -v x="$ratio" \
        'BEGIN { printf "%-24s %9.3f %9.3f %9.1f %9.1f %12s\n", n, w, c, r / 1024, w * 1e9 / e, x }'
done
echo "medians of $RUNS rounds; vs_ht_print: heaptrack_print's wall time / this one's (higher is faster)"
