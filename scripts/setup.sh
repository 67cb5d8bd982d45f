#!/usr/bin/env bash
# Quick start, part 1: install dependencies, build, install heapprof and libheapprof.so, then
# profile a sample and write its reports into ./heapprof-demo/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/deps.sh"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$root/build" -j"$(nproc)"
cmake --install "$root/build" >/dev/null
# the loader must find libheapprof.so by its bare name
ldconfig
demo="$root/heapprof-demo"
mkdir -p "$demo"
rm -f "$demo"/exact_counts.hpt
heapprof run -o "$demo/exact_counts.hpt" -- "$root/build/samples/exact_counts" >/dev/null
heapprof stats "$demo/exact_counts.hpt" | tee "$demo/exact_counts.stats.txt"
heapprof stats --json "$demo/exact_counts.hpt" > "$demo/exact_counts.stats.json"
heapprof report "$demo/exact_counts.hpt" > "$demo/exact_counts.report.txt"
heapprof report --json "$demo/exact_counts.hpt" > "$demo/exact_counts.report.json"
# for Valgrind's DHAT viewer: open /usr/libexec/valgrind/dh_view.html and load this file
heapprof dhat "$demo/exact_counts.hpt" -o "$demo/exact_counts.dhat.json"
# an allocation flamegraph (open the SVG in a browser) and its folded stacks
heapprof flame "$demo/exact_counts.hpt" --metric bytes -o "$demo/exact_counts.bytes.svg"
heapprof flame "$demo/exact_counts.hpt" --metric bytes --folded -o "$demo/exact_counts.bytes.folded"
# the self-contained HTML viewer (docs/viewer.md)
heapprof view "$demo/exact_counts.hpt" -o "$demo/exact_counts.html"
# the CPU side of the same tool: a program with one CPU-hot and one allocation-hot function;
# its CPU flamegraph (CPU samples, HEAPPROF_CPU) and its viewer page
rm -f "$demo"/cpu_hot.hpt
heapprof run -o "$demo/cpu_hot.hpt" -- "$root/build/samples/cpu_hot" >/dev/null
heapprof flame "$demo/cpu_hot.hpt" --metric cpu -o "$demo/cpu_hot.cpu.svg"
heapprof report "$demo/cpu_hot.hpt" > "$demo/cpu_hot.report.txt"
heapprof view "$demo/cpu_hot.hpt" -o "$demo/cpu_hot.html"
echo "heapprof: reports written to $demo"
