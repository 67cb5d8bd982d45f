#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/experiments/build.sh: builds the shim of this checkout's HEAD with patches applied (in a
# worktree of its own, removed after), to run beside the real one:
#   bash bench/experiments/build.sh OUT.so PATCH...
#   e.g. bash bench/experiments/build.sh /tmp/lf.so bench/experiments/rdtsc-lfence.patch
#        bash bench/experiments/build.sh /tmp/lf-sparse.so bench/experiments/rdtsc-lfence.patch \
#             bench/experiments/clock-sparse.patch
#   then (the bundle made by ../shared/tools/manycore/bundle.sh runs here too):
#        OUT=/tmp/cmp bash .manycore/run.sh --runs 5 --tools baseline,heapprof \
#             --variant lf:LD_PRELOAD=/tmp/lf.so --variant lfs:LD_PRELOAD=/tmp/lf-sparse.so single
# rdtsc-lfence.patch makes this machine's TSC read wait for the loads before it, as the 16-core
# Xeon's does (docs/design.md, "The clock"): a stand-in for that machine's clock cost here.
set -euo pipefail
[ $# -ge 2 ] || { sed -n 3,14p "$0"; exit 2; }
out=$1
shift
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
patches=()
for p in "$@"; do
    [ -f "$p" ] || { echo "build.sh: no patch file $p" >&2; exit 2; }
    patches+=("$(cd "$(dirname "$p")" && pwd)/$(basename "$p")")
done
wt=$(mktemp -d)
trap 'git -C "$ROOT" worktree remove --force "$wt" 2>/dev/null || rm -rf "$wt"' EXIT
git -C "$ROOT" worktree add -q --detach "$wt" HEAD
for p in "${patches[@]}"; do
    git -C "$wt" apply "$p" || { echo "build.sh: $p does not apply (after the ones before it)" >&2; exit 2; }
done
cmake -S "$wt" -B "$wt/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHEAPPROF_BUILD_TESTS=OFF \
    -DHEAPPROF_BUILD_SAMPLES=OFF >/dev/null
cmake --build "$wt/build" -j"$(nproc)" --target heapprof_preload >/dev/null
cp "$wt/build/preload/libheapprof.so" "$out"
echo "build.sh: $out ($(git -C "$ROOT" rev-parse --short HEAD) + $(printf '%s ' "${@##*/}"))"
