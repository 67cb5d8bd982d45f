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
#include "guard.h"
#include "state.h"

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
// What frees read instead of the counts: the counts themselves, until a bucket overflows; then
// a page of non-zero bytes, so that every free takes the slow path (which then says "record")
// without a second load on the common path to ask whether the set overflowed.
extern _Atomic uint8_t *_Atomic hp_sample_free_counts;

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
    _Atomic uint8_t *counts = atomic_load_explicit(&hp_sample_free_counts, memory_order_acquire);
    if (HP_LIKELY(atomic_load_explicit(&counts[b], memory_order_relaxed) == 0))
        return false; // not a sampled block, and the set never overflowed
    return hp_sample_free_slow(p, b);
}

// The unsampled path of sampled mode, asked by an entry point before anything else (before
// the guard, the frame, errno or the real call: interpose.c): true when the call is certain to
// record nothing, the countdown having been charged size bytes; the entry point then hands the
// call straight to the real function as a tail call. False when not sampling or the state is
// not on (the full prologue decides those), or when a sample point falls in this block: then
// nothing was charged, and the full path decides again (and draws). The guard is not asked: a
// call nested in the shim (guard held) is passed through by either path, and charging its
// bytes to the countdown leaves every program block's chance at 1 - exp(-s/N) (memoryless);
// the shim's own threads never skip (their countdown is never drawn, so it stays <= 0).
// The countdown is charged before the real call: a request that fails consumes its bytes as
// one that succeeds, which leaves every block's chance at 1 - exp(-s/N) (the points are a
// Poisson process; which intervals carry no block does not matter to the others).
static inline __attribute__((always_inline)) bool hp_sample_skip_alloc(size_t size) {
    if (HP_LIKELY(hp_config.sample_bytes == 0) || !hp_state_is_on())
        return false;
    int64_t left = hp_tls_sample_left - (int64_t)size;
    if (HP_UNLIKELY(left <= 0))
        return false;
    hp_tls_sample_left = left;
    return true;
}

// The same for a free of p (non-NULL, not a bootstrap block): true when p is certainly not a
// sampled block (its bucket is empty and the set never overflowed), so the free records
// nothing and goes straight to the real free (nested in the shim or not: see above).
static inline __attribute__((always_inline)) bool hp_sample_skip_free(const void *p) {
    if (HP_LIKELY(hp_config.sample_bytes == 0) || !hp_state_is_on())
        return false;
    _Atomic uint8_t *counts = atomic_load_explicit(&hp_sample_free_counts, memory_order_acquire);
    return atomic_load_explicit(&counts[hp_sample_bucket(p)], memory_order_relaxed) == 0;
}

// Fork child: the thread's generator continues in the parent; give the child's its own draw.
void hp_sample_fork_child(void);

#endif
