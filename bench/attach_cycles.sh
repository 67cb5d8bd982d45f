#!/usr/bin/env bash
# What `heapprof attach` leaves behind: the CPU a server-like program (samples/c/server_loop:
# THREADS workers, one request a millisecond each) uses per second of wall time before any
# attach, while attached, and after 20 attach/detach cycles, side by side, in the same process.
# A slot left pointing at the shim, or a thread of heapprof's left running, shows as a ratio
# above 1 in the "after" column. Also the process's threads, descriptors and resident set.
# Usage: bench/attach_cycles.sh [BUILD_DIR] [THREADS] [SECONDS_PER_WINDOW]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
threads=${2:-4}
window=${3:-3}
heapprof=$build/analyzer/heapprof
server=$build/samples/server_loop
[ -x "$heapprof" ] && [ -x "$server" ] || { echo "build first: $heapprof, $server" >&2; exit 2; }
work=$(mktemp -d)
trap 'exec 3>&- 2>/dev/null || true; rm -rf "$work"' EXIT
mkfifo "$work/in"
"$server" "$threads" 0 <"$work/in" >"$work/out" &
pid=$!
exec 3>"$work/in"
until grep -q ready "$work/out" 2>/dev/null; do sleep 0.05; done
tck=$(getconf CLK_TCK)

cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
# CPU seconds per wall second over the window
cpu_rate() {
  local a b t0 t1
  a=$(cpu_ticks); t0=$(date +%s.%N)
  sleep "$window"
  b=$(cpu_ticks); t1=$(date +%s.%N)
  echo "($b - $a) / $tck / ($t1 - $t0)" | bc -l
}
state() {
  printf '%s threads, %s fds, RSS %s kB' "$(ls /proc/$pid/task | wc -l)" \
    "$(ls /proc/$pid/fd | wc -l)" "$(awk '/VmRSS/{print $2}' /proc/$pid/status)"
}

before=$(cpu_rate); before_state=$(state)
"$heapprof" attach "$pid" -o "$work/during.hpt" 2>/dev/null &
attach=$!
sleep 1
during=$(cpu_rate)
kill -INT "$attach"; wait "$attach"
for i in $(seq 1 20); do
  "$heapprof" attach "$pid" --duration 0.2 -o "$work/cycle$i.hpt" 2>/dev/null
done
after=$(cpu_rate); after_state=$(state)
exec 3>&-
wait "$pid"
result=$(tail -1 "$work/out")

printf 'server_loop %s threads, %s s windows, %s\n' "$threads" "$window" "$(nproc) CPUs"
printf '%-34s %14s %10s\n' "" "CPU s / s" "vs before"
printf '%-34s %14.4f %10s\n' "before any attach" "$before" "1.00"
printf '%-34s %14.4f %10.2f\n' "attached (recording)" "$during" "$(echo "$during / $before" | bc -l)"
printf '%-34s %14.4f %10.2f\n' "after 21 attach/detach cycles" "$after" "$(echo "$after / $before" | bc -l)"
printf 'before: %s\nafter:  %s\nprogram: %s\n' "$before_state" "$after_state" "$result"
