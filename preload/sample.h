// SPDX-License-Identifier: MIT
// Sampled recording (HEAPPROF_SAMPLE_BYTES=N, docs/sampling.md): which allocations are recorded
// and which frees belong to them. Every allocation entry point's recording path asks
// hp_sample_alloc first and every free hp_sample_free; with N = 0 (the default) both say "record"
// after one load. Sampling is Poisson by bytes: a per-thread countdown of bytes drawn from an
// exponential distribution of mean N; an allocation that crosses zero is sampled. The unsampled
// path is a subtraction on a thread-local: no clock, no stack, no ring. Sampled blocks live in a
// fixed lock-free set (address -> present), so a free asks one bucket, whatever the live heap.
// Runs inside malloc: no locks, no allocation, no stdio.
#ifndef HEAPPROF_PRELOAD_SAMPLE_H
#define HEAPPROF_PRELOAD_SAMPLE_H

#include "compiler.h"
#include "config.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// 4 Ki buckets of 16 addresses (512 KiB, mapped only when sampling): the per-bucket counts that
// every free reads are 4 KiB, which stay cached where 32 KiB of them missed on most frees of
// c_churn (perf: 77% of the free path's samples on that load). 64 Ki blocks fit (a 32 GiB live
// heap at N = 512 KiB); a bucket that overflows makes every free recorded instead.
#define HP_SAMPLE_BUCKETS_LOG2 12u
#define HP_SAMPLE_WAYS 16u

extern HP_TLS int64_t hp_tls_sample_left;   // bytes until this thread's next sample point
extern _Atomic uint8_t *hp_sample_counts;   // addresses held per bucket (0: the bucket is empty)
extern _Atomic bool hp_sample_overflowed;   // a bucket was full once: every free is recorded

// Maps the set of sampled blocks. False when out of memory (the caller stops profiling).
// Called once by the lifecycle before recording starts, only with sampling on.
bool hp_sample_init(void);

// The rare halves, out of line (sample.c).
bool hp_sample_alloc_slow(size_t size);
bool hp_sample_free_slow(const void *p, uint32_t bucket);

static inline uint32_t hp_sample_bucket(const void *p) {
    uint64_t a = (uint64_t)(uintptr_t)p >> 4; // malloc's blocks are 16-byte aligned
    return (uint32_t)((a * 0x9E3779B97F4A7C15ull) >> (64 - HP_SAMPLE_BUCKETS_LOG2));
}

// THE sampling decision of an allocation of size bytes: whether to record it. Every entry point
// that allocates asks it once, before it does anything else for the record (interpose.c:
// alloc_done; realloc asks inside hp_record_realloc_begin), and calls hp_record_alloc only on
// true, which then keeps the block in the set. True always when not sampling. Hot path: one
// load when not sampling, a subtraction and a compare when sampling.
static inline bool hp_sample_alloc(size_t size) {
    if (HP_LIKELY(hp_config.sample_bytes == 0))
        return true;
    int64_t left = hp_tls_sample_left - (int64_t)size;
    hp_tls_sample_left = left;
    if (HP_LIKELY(left > 0))
        return false;
    return hp_sample_alloc_slow(size);
}

// A sampled allocation's block p: remembered so that its free is recorded. If its bucket is full
// every later free is recorded instead (the analyzer ignores frees of blocks it does not know).
void hp_sample_keep(const void *p);

// THE sampling decision of a free of p (non-NULL): whether to record it. Always when not
// sampling; when sampling, if p is a sampled block, which is then forgotten. Every entry point
// that frees asks it once, before the real free runs (so the address cannot be handed out and
// sampled again first), and calls hp_record_free only on true. Hot path: one load of the
// bucket's count when p's bucket is empty (the common case).
static inline bool hp_sample_free(const void *p) {
    if (HP_LIKELY(hp_config.sample_bytes == 0))
        return true;
    uint32_t b = hp_sample_bucket(p);
    if (HP_LIKELY(atomic_load_explicit(&hp_sample_counts[b], memory_order_relaxed) == 0))
        return atomic_load_explicit(&hp_sample_overflowed, memory_order_relaxed);
    return hp_sample_free_slow(p, b);
}

// Fork child: the thread's generator continues in the parent; give the child's its own draw.
void hp_sample_fork_child(void);

#endif
