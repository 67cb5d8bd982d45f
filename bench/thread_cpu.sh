#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/thread_cpu.sh: CPU time of each of the analyzer's threads on one trace, from perf
# cpu-clock samples (4 kHz): the main thread (replay), the reading thread (readahead.c: framing,
# applying chunks, the merge, hand-over; with 0 decode workers also decoding) and the decode
# workers together, told apart by their decoding symbols. Not a test; perf must be allowed
# (perf_event_paranoid) and the binary built with symbols (RelWithDebInfo).
#
# Usage: bench/thread_cpu.sh HEAPPROF_BIN TRACE.hpt DECODE_WORKERS [COMMAND] [RUNS]
#   COMMAND: default stats (report also symbolizes on the reading thread while it waits).
#   Prints one line per run: "main MS  reader MS  workers MS  events N  reader NS/event".
set -euo pipefail
BIN=$1 TRACE=$2 W=$3 CMD=${4:-stats} RUNS=${5:-3}
command -v perf >/dev/null || { echo "thread_cpu.sh: no perf" >&2; exit 2; }
DATA=$(mktemp)
trap 'rm -f "$DATA"' EXIT
EVENTS=$("$BIN" stats "$TRACE" 2>/dev/null | awk '$1 == "events" { gsub(",", "", $2); print $2 }')
for ((i = 0; i < RUNS; i++)); do
    HEAPPROF_DECODE_THREADS=$W HEAPPROF_REPLAY_THREADS=0 perf record -q -o "$DATA" -e cpu-clock \
        -F 4000 "$BIN" "$CMD" "$TRACE" >/dev/null 2>&1
    perf report -i "$DATA" --no-children --sort pid,sym -n --stdio 2>/dev/null | grep -v '^#' |
        grep -v '^$' | python3 -c '
import sys, collections
tot, dec = collections.Counter(), collections.Counter()
for line in sys.stdin:
    f = line.split()
    if len(f) < 5:
        continue
    n, tid, sym = int(f[1]), int(f[2].split(":")[0]), f[4]
    tot[tid] += n
    if sym in ("dchunk_decode", "hpt_rec_decode"):
        dec[tid] += n
workers_asked, events = int(sys.argv[1]), int(sys.argv[2] or 0)
main = min(tot)  # the process id: the first thread
rest = [t for t in tot if t != main]
workers = [t for t in rest if workers_asked and dec[t] > 0.4 * tot[t]]
reader = [t for t in rest if t not in workers]
ms = lambda ts: sum(tot[t] for t in ts) / 4.0
r = ms(reader)
print("main %5.0f ms  reader %5.0f ms  workers %5.0f ms  events %d  reader %.1f ns/event"
      % (ms([main]), r, ms(workers), events, r * 1e6 / events if events else 0))
' "$W" "$EVENTS"
done
