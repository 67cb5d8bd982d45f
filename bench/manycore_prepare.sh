#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/manycore_prepare.sh: makes the many-core bundle for one device call that compares
# builds: ../shared/tools/manycore/bundle.sh over this checkout's build (the new build), then,
# for each NAME=REV, the analyzer built at git revision REV (a commit or a branch) in a worktree
# of its own, copied into the bundle as .manycore/heapprof/bin/heapprof.NAME, which
# bench/manycore_call.sh runs beside the new one with --alt NAME=.manycore/heapprof/bin/heapprof.NAME.
# The other builds link the same libraries as the new one (the bundle carries those); a revision
# that needs others is refused by its own cmake. NAME:VAR=VAL[,VAR=VAL...] makes
# .manycore/heapprof/bin/heapprof.NAME a wrapper that runs the new build with those settings
# (the environment knobs of the analyzer, side by side in one call). lib:NAME=REV builds the
# shim at REV instead, as .manycore/heapprof/lib/libheapprof.NAME.so, which the manycore bench
# runs as one more heapprof column with --variant NAME:LD_PRELOAD=<that file> (a variant's
# environment is applied after the bench sets LD_PRELOAD; the path must be absolute there, so
# the printed option says $PWD, the checkout's root where run.sh is started). Prints the
# options to pass. REV may also be a patch file (bench/experiments/*.patch): the build is then
# of this checkout's HEAD with the patch applied. Also builds bench/tools/shard_model and
# clock_context into the bundle.
# Usage: bash bench/manycore_prepare.sh [NAME=REV | NAME:VAR=VAL[,VAR=VAL] | lib:NAME=REV]...
#   e.g.  bash bench/manycore_prepare.sh base=f17d2b0 s4:HEAPPROF_REPLAY_SHARDS=4 lib:old=HEAD~3
# Needs what bundle.sh needs (a build of this checkout, or it builds one) and git.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUNDLE="$ROOT/../shared/tools/manycore/bundle.sh"
[ -f "$BUNDLE" ] || { echo "manycore_prepare.sh: no $BUNDLE" >&2; exit 1; }
for a in "$@"; do
    case "$a" in
    -h | --help) sed -n 3,18p "$0"; exit 0 ;;
    lib:*=* | *:*=* | *=*) ;;
    *) echo "manycore_prepare.sh: expected NAME=REV, NAME:VAR=VAL or lib:NAME=REV, got $a" >&2; exit 2 ;;
    esac
done
cd "$ROOT"
bash "$BUNDLE"
BIN="$ROOT/.manycore/heapprof/bin"
[ -x "$BIN/heapprof" ] || { echo "manycore_prepare.sh: bundle.sh left no $BIN/heapprof" >&2; exit 1; }
# the shard rounds' memory model (bench/shard_model.sh --bin .manycore/heapprof/bin/shard_model):
# libc alone, so it runs where the bundle runs
cc -O2 -pthread "$ROOT/bench/tools/shard_model.c" -o "$BIN/shard_model"
# what a TSC read costs where the shim takes it, modelled (.manycore/heapprof/bin/clock_context)
cc -O2 "$ROOT/bench/tools/clock_context.c" -o "$BIN/clock_context"
alts=() variants=()
for a in "$@"; do
    lib=0
    if [[ $a =~ ^lib:(.*)$ ]]; then
        lib=1 a=${BASH_REMATCH[1]}
    elif [[ $a =~ ^([A-Za-z0-9_-]+):([A-Za-z_][A-Za-z0-9_]*=.*)$ ]]; then
        name=${BASH_REMATCH[1]} sets=${BASH_REMATCH[2]}
        w="$BIN/heapprof.$name"
        {
            echo '#!/bin/sh'
            echo "# manycore_prepare.sh: the bundle's heapprof with $sets"
            printf 'exec env'
            IFS=, read -r -a kv <<<"$sets"
            for s in "${kv[@]}"; do printf " %q" "$s"; done
            printf ' "$(dirname "$0")/heapprof" "$@"\n'
        } >"$w"
        chmod +x "$w"
        alts+=("--alt $name=.manycore/heapprof/bin/heapprof.$name")
        continue
    fi
    name=${a%%=*} rev=${a#*=}
    case "$name" in '' | *[!A-Za-z0-9_-]*) echo "manycore_prepare.sh: bad name '$name'" >&2; exit 2 ;; esac
    patch=
    if [[ $rev == *.patch ]]; then
        [ -f "$rev" ] || { echo "manycore_prepare.sh: no patch file $rev" >&2; exit 2; }
        patch=$(cd "$(dirname "$rev")" && pwd)/$(basename "$rev") rev=HEAD
    fi
    git rev-parse --verify --quiet "$rev^{commit}" >/dev/null ||
        { echo "manycore_prepare.sh: no revision $rev" >&2; exit 2; }
    wt=$(mktemp -d)
    git worktree add -q --detach "$wt" "$rev"
    # the worktree goes whatever happens below
    trap 'git -C "$ROOT" worktree remove --force "$wt" 2>/dev/null || true' EXIT
    if [ -n "$patch" ]; then
        git -C "$wt" apply "$patch" || { echo "manycore_prepare.sh: $patch does not apply to HEAD" >&2; exit 2; }
    fi
    echo "manycore_prepare.sh: building $name ($rev, $(git rev-parse --short "$rev")${patch:+ + $(basename "$patch")}) in $wt"
    cmake -S "$wt" -B "$wt/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHEAPPROF_BUILD_TESTS=OFF \
        -DHEAPPROF_BUILD_SAMPLES=OFF >/dev/null
    if [ $lib = 1 ]; then
        cmake --build "$wt/build" -j"$(nproc)" --target heapprof_preload >/dev/null
        cp "$wt/build/preload/libheapprof.so" "$ROOT/.manycore/heapprof/lib/libheapprof.$name.so"
        variants+=("--variant \"$name:LD_PRELOAD=\$PWD/.manycore/heapprof/lib/libheapprof.$name.so\"")
    else
        cmake --build "$wt/build" -j"$(nproc)" --target heapprof >/dev/null
        cp "$wt/build/analyzer/heapprof" "$BIN/heapprof.$name"
        alts+=("--alt $name=.manycore/heapprof/bin/heapprof.$name")
    fi
    git worktree remove --force "$wt"
    trap - EXIT
done
du -sh "$ROOT/.manycore" | awk '{print "manycore_prepare.sh: bundle " $1 " (carry [\".manycore\"])"}'
[ ${#alts[@]} -eq 0 ] || echo "manycore_prepare.sh: pass to bench/manycore_call.sh: ${alts[*]}"
[ ${#variants[@]} -eq 0 ] || echo "manycore_prepare.sh: pass to .manycore/run.sh (or after -- to bench/manycore_call.sh): ${variants[*]}"
