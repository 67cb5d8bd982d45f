#!/usr/bin/env bash
# Regenerates the fuzz seeds in tests/fuzz/corpus/ from a built tree: real traces of samples and
# of a small program under the real shim, the same cut to whole chunks and re-stored without
# compression, synthetic traces of every record type, and hand-damaged variants. Every file
# stays under 64 KiB (the fuzzer's -max_len). Crashers found later (crash-*) are kept as they are.
# usage: tests/fuzz/make_corpus.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
out="$root/tests/fuzz/corpus"
lib="$build/preload/libheapprof.so"
seedgen="$build/tests/fuzz/hp_fuzz_seedgen"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
find "$out" -maxdepth 1 -type f ! -name 'crash-*' ! -name 'oom-*' ! -name 'timeout-*' -delete

traced() { # traced NAME CMD... : runs CMD under the shim, the trace lands in $tmp/NAME.hpt
    local name=$1
    shift
    # sh -c: the shell that reports "Killed" for the crasher is one whose stderr is discarded
    sh -c '"$@"; true' sh env HEAPPROF_OUT="$tmp/$name.hpt" HEAPPROF_QUIET=1 LD_PRELOAD="$lib" \
        "$@" >/dev/null 2>&1
}

# A small program with what the samples lack: named threads, a block freed by another thread,
# realloc chains, calloc, aligned blocks, and a library loaded, used and unloaded mid-run.
cat >"$tmp/mini.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
static void *handoff;
static void *worker(void *arg) {
    pthread_setname_np(pthread_self(), (const char *)arg);
    char *p = NULL;
    for (int i = 1; i <= 20; i++)
        p = realloc(p, (size_t)i * 24);
    free(p);
    free(handoff);
    return NULL;
}
int main(void) {
    handoff = calloc(10, 12);
    void *a = aligned_alloc(64, 256), *b;
    if (posix_memalign(&b, 128, 100) != 0)
        return 1;
    pthread_t t;
    pthread_create(&t, NULL, worker, "mini-worker");
    pthread_join(t, NULL);
    void *z = dlopen("libz.so.1", RTLD_NOW);
    if (z) {
        int (*init)(void *, int, const char *, int) = (int (*)(void *, int, const char *, int))dlsym(z, "deflateInit_");
        int (*end)(void *) = (int (*)(void *))dlsym(z, "deflateEnd");
        static char strm[256]; // z_stream, large enough; zalloc/zfree NULL = malloc/free
        if (init && end && init(strm, 6, "1.2.13", 112) == 0)
            end(strm);
        dlclose(z);
    }
    free(a);
    return b == NULL;
}
EOF
cc -O1 -g -o "$tmp/mini" "$tmp/mini.c" -lpthread -ldl

traced mini "$tmp/mini"
# 4 KiB heap chunks: the hand-damaged variants below then lose one chunk, not the whole trace
HEAPPROF_CHUNK_KB=4 traced exact_counts "$build/samples/exact_counts"
# 1 ms flushes, small buffers and chunks: many small chunks, so a prefix of whole chunks fits
HEAPPROF_FLUSH_MS=1 HEAPPROF_BUFFER_KB=64 HEAPPROF_CHUNK_KB=16 traced vector_map "$build/samples/vector_map"
if [ -x "$build/samples/vec_growth" ]; then
    HEAPPROF_FLUSH_MS=1 HEAPPROF_BUFFER_KB=64 traced vec_growth "$build/samples/vec_growth"
fi
traced crasher "$build/tests/e2e/crasher" # SIGKILL: no trailer
HEAPPROF_OUT="$tmp/forker.%p.hpt" HEAPPROF_QUIET=1 LD_PRELOAD="$lib" "$build/tests/e2e/forker"

cp "$tmp/mini.hpt" "$out/mini.hpt"
"$seedgen" plain "$tmp/mini.hpt" "$out/mini-plain.hpt"
cp "$tmp/exact_counts.hpt" "$out/exact_counts.hpt"
"$seedgen" plain "$tmp/exact_counts.hpt" "$out/exact_counts-plain.hpt" 40000
# the shim writes EVENTS chunks in columns (HPT_CHUNK_COLUMNS) since they came: these two seeds
# are column chunks, zstd and plain (a rerun makes the two above columns as well)
cp "$tmp/exact_counts.hpt" "$out/exact_counts-columns.hpt"
"$seedgen" plain "$tmp/exact_counts.hpt" "$out/exact_counts-columns-plain.hpt" 60000
"$seedgen" prefix "$tmp/vector_map.hpt" "$out/vector_map-prefix.hpt" 48000
"$seedgen" plain "$tmp/vector_map.hpt" "$out/vector_map-plain-prefix.hpt" 60000
if [ -f "$tmp/vec_growth.hpt" ]; then
    "$seedgen" prefix "$tmp/vec_growth.hpt" "$out/rust_vec_growth-prefix.hpt" 32000
fi
cp "$tmp/crasher.hpt" "$out/crasher-killed.hpt"
child=$(ls -S "$tmp"/forker.*.hpt | tail -1) # the smaller one: the child
cp "$child" "$out/forker-child.hpt"
"$seedgen" synth "$out"

# Hand-damaged variants of one real trace (offsets from its chunk layout are not needed: the
# damage lands in the header, in a payload, and mid-chunk at the end).
src="$out/exact_counts.hpt"
size=$(stat -c %s "$src")
head -c $((size * 2 / 3)) "$src" >"$out/damaged-truncated.hpt"
cp "$src" "$out/damaged-flipped.hpt"
printf '\x5a' | dd of="$out/damaged-flipped.hpt" bs=1 seek=$((size / 2)) conv=notrunc status=none
hdr=56 # sizeof(hpt_file_hdr_t): the first chunk header starts here
printf '\xff' | dd of="$out/damaged-flipped.hpt" bs=1 seek=$((hdr + 5)) conv=notrunc status=none
cp "$src" "$out/damaged-version.hpt"
printf '\x02' | dd of="$out/damaged-version.hpt" bs=1 seek=8 conv=notrunc status=none
head -c $hdr "$src" >"$out/damaged-header-only.hpt"
: >"$out/damaged-empty.hpt"
{ head -c 3000 "$src"; head -c 700 /dev/urandom; tail -c +3001 "$out/mini-plain.hpt"; } \
    >"$out/damaged-spliced.hpt"
ls -l "$out"
