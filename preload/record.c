// SPDX-License-Identifier: MIT
// Per-event recording. Runs inside malloc on the app's threads: no stdio, no allocation of the
// host's, no locks on the hot path; rare work (first event of a thread, new stack) is out of
// line.
//
// Budget (issue #7), callgrind, app thread, instructions added per malloc/free pair (session 6):
// c_churn (C, frame pointers, 9-16 frames, 97% of stacks unchanged): ~1,200 in all: the walk
// ~320 (starting at malloc's caller; the check of the logged frames is two loads a frame),
// bytes touched ~360 (fill ~60, measure ~250), two clock reads ~80 (TSC, ~10 ns each; clock.h),
// record/encode/append the rest. rust_hashmap_growth (no frame pointers, call sites alternate):
// ~550 for the stack (walk ~360, copying the shared frames when the depth changed ~45, the step
// lookup; 97% of stacks come from a known step, with no stack-table probe). The writer thread
// adds ~240 an event on the other core (merge ~95, naming blocks ~85, columns, zstd, crc; on
// c_threads 2). See docs/design.md.
#include "record.h"

#include "config.h"
#include "cpu.h"
#include "debug.h"
#include "diag.h"
#include "guard.h"
#include "modmap.h"
#include "sample.h"
#include "stacktab.h"
#include "state.h"
#include "tbuf.h"
#include "thread.h"
#include "touch.h"
#include "unwind.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

// Static TLS stays a few words: glibc takes it out of every thread's stack. The rest of a
// thread's state is in its block (thread.h).
HP_TLS uintptr_t hp_tls_guard;
// The thread's ring. Its entries carry absolute times and addresses (ringent.h): the thread keeps
// no encoder state, so an entry abandoned before its commit (a longjmp out of a signal handler)
// leaves nothing to put back.
static HP_TLS hp_ring_t *hp_tls_ring;
static HP_TLS uint32_t hp_tls_last_stack; // id of this thread's previous stack (0: none)
// Sampled mode: what hp_record_realloc_begin decided for the realloc in flight (REALLOC_*).
static HP_TLS uint8_t hp_tls_realloc_plan;
#define REALLOC_OLD_SAMPLED 1u // the old block was a sampled one (taken out of the set)
#define REALLOC_NEW_SAMPLED 2u // the new block is to be sampled

static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static bool (*ensure_trace)(void); // the lifecycle's (hp_record_set_trace_hook)

void hp_record_set_trace_hook(bool (*fn)(void)) {
    ensure_trace = fn;
}

static void make_exit_key(void) {
    pthread_key_create(&exit_key, hp_record_thread_exit);
}

// The module scan of a new stack writes its records with times counted from the event's (a
// local delta state at t): a TBASE entry before the first says so to the drain.
typedef struct scan_out {
    hp_ring_t *r;
    uint64_t t;
    bool based;
} scan_out_t;

static void emit_to_ring(void *ctx, const uint8_t *rec, size_t len) {
    scan_out_t *o = ctx;
    if (!o->based) {
        uint8_t b[HP_RE_TBASE_BYTES];
        o->based = hp_tbuf_append(o->r, b, hp_re_put_tbase(b, o->t));
    }
    if (o->based) // else dropped (no pipeline): its time would count from the wrong base
        hp_tbuf_append(o->r, rec, len);
}

HP_NOINLINE HP_COLD static hp_ring_t *thread_start(void) {
    if (ensure_trace && !ensure_trace())
        return NULL;
    uint32_t tid = (uint32_t)syscall(SYS_gettid);
    hp_ring_t *r = hp_tbuf_new(tid);
    if (!r) {
        hp_state_disable("out of memory for a thread buffer; profiling stopped");
        return NULL;
    }
    pthread_once(&exit_key_once, make_exit_key);
    pthread_setspecific(exit_key, r);
    hp_tls_ring = r;
    hp_thread_attach(); // NULL (out of memory) only makes the unwinder take its slow path

    char name[17] = {0};
    prctl(PR_GET_NAME, name, 0, 0, 0);
    size_t len = strnlen(name, 16);
    uint8_t buf[40], *p = buf;
    uint64_t t = hp_tbuf_busy_now(r);
    *p++ = HPT_REC_THREAD_START;
    p = hpt_put_varint(p, t); // the ring's first record: its stream's time is 0
    p = hpt_put_varint(p, len);
    memcpy(p, name, len);
    p += len;
    HP_ASSERT((size_t)(p - buf) <= sizeof buf);
    hp_tbuf_append(r, buf, (size_t)(p - buf));
    hp_tbuf_idle(r);
    // counted for the CPU sampler's choice of source; with the CPU-time timer sampling, the
    // thread's own timer now: a short thread is over before the next listing would find it
    hp_cpu_thread_start(tid);
    return r;
}

HP_NOINLINE HP_COLD static hp_ring_t *thread_start_slow(void) {
    hp_guard_cold_t g = hp_guard_cold_enter(); // locks: abandoned in here, the thread cannot resume
    hp_ring_t *r = thread_start();
    hp_guard_cold_leave(g);
    return r;
}

static inline hp_ring_t *ring(void) {
    hp_ring_t *r = hp_tls_ring;
    return HP_LIKELY(r != NULL) ? r : thread_start_slow();
}

void hp_record_note(const uint8_t *rec, size_t len) {
    HP_ASSERT(hp_tls_guard != 0);
    hp_ring_t *r = ring();
    if (!r)
        return;
    (void)hp_tbuf_busy_now(r);
    hp_tbuf_append(r, rec, len);
    hp_tbuf_idle(r);
}

// capture_stack's t where the event is timed after its stack (TIME_LATER): what the stack
// writes takes a time of its own, before the event's.
#define TIME_LATER UINT64_MAX

HP_NOINLINE HP_COLD static uint32_t new_stack_slow(hp_ring_t *r, uint64_t t, const uint64_t *f,
                                                   uint32_t n) {
    // A new stack may come from a newly loaded module: list it first, with the event's time so
    // the thread's times stay in order (or with a time of its own, the event's to come later).
    bool own = t == TIME_LATER;
    if (own)
        t = hp_tbuf_busy_now(r);
    hp_guard_cold_t g = hp_guard_cold_enter(); // the loader's lock, the table's
    hpt_dstate_t st = {.time_ns = t};
    scan_out_t out = {r, t, false};
    hp_modmap_scan(&st, t, emit_to_ring, &out);
    uint32_t id = hp_stacktab_intern(r, f, n);
    hp_guard_cold_leave(g);
    if (own)
        hp_tbuf_idle(r);
    return id;
}

// The stack a walk found, from what it shares with the thread's previous one (hp_unwind_delta_t):
// the previous stack's id, where the shared part starts in it, and the new frames. A thread
// that alternates between a few call sites keeps making the same few steps; knowing where each
// led skips copying, hashing and comparing the whole stack (~250 instructions an allocation on
// rust_hashmap_growth). In the thread's block (thread.h); an entry is exact, so a hit is the
// stack itself. Two ways a set: the hash takes in a return address, so where ASLR loads the code
// decides which steps share a set, and direct-mapped, 3% of runs of hashmap_words had its two
// hot steps (48,000 hits) evict each other at every allocation (79 hits).
_Static_assert(HP_STEP_CACHE == 512u, "step_set takes the hash's top 8 bits");

// The set's two entries: [0] the step learnt last, [1] the one before.
static inline hp_step_t *step_set(hp_thread_t *th, uint32_t from_id,
                                  const hp_unwind_delta_t *d) {
    uint64_t h = ((uint64_t)from_id << 32 | (uint64_t)d->base << 8 | d->n_fresh) *
                 0x9E3779B97F4A7C15ull;
    h ^= d->fresh[0] * 0xff51afd7ed558ccdull;
    return &th->steps[h >> 56 << 1];
}

static inline bool step_matches(const hp_step_t *e, uint32_t from_id,
                                const hp_unwind_delta_t *d) {
    if (e->from_id != from_id || e->base != d->base || e->n_fresh != d->n_fresh || !e->to_id)
        return false;
    for (uint32_t k = 0; k < d->n_fresh; k++)
        if (e->fresh[k] != d->fresh[k])
            return false;
    return true;
}

// always_inline: as a call of its own it saved and restored registers and took its arguments
// anew, 6-16 instructions an event (bench/hot_instr.sh, session 28)
static inline __attribute__((always_inline)) uint32_t capture_stack(hp_ring_t *r, uint64_t t,
                                                                   const hp_frame_t *from) {
    uint64_t frames[HPT_MAX_FRAMES];
    bool same;
    hp_unwind_delta_t d;
    uint32_t last = hp_tls_last_stack;
    HP_ASSERT(hp_config.max_frames >= 1 && hp_config.max_frames <= HPT_MAX_FRAMES);
    uint32_t snap;
    uint32_t n = hp_unwind(from, frames, hp_config.max_frames, &same, &d, &snap);
    HP_ASSERT(n <= hp_config.max_frames);
    HP_ASSERT(!d.valid || (!same && d.n_fresh <= HP_DELTA_FRESH_MAX));
    if (same && last != HPT_STACK_UNKNOWN)
        return last;
    // A snapshot: the log, and so hp_tls_last_stack (its stack's id, which the known steps start
    // from), stay as they were.
    if (snap) {
        if (HP_UNLIKELY(hp_config.unwinder == HP_UNWIND_CHECK)) {
            n = hp_unwind_libunwind(frames, hp_config.max_frames);
            if (hp_unwind_check_cut_short(frames, n))
                hp_unwind_check_past();
            else
                hp_unwind_check_snapshot(hp_stacktab_find(frames, n) == snap);
        }
        return snap;
    }
    hp_step_t *step = NULL;
    if (d.valid) {
        hp_thread_t *th = hp_tls_thread; // not NULL: the walk that set d.valid used it
        if (last != HPT_STACK_UNKNOWN && HP_LIKELY(th != NULL)) {
            step = step_set(th, last, &d);
            const hp_step_t *e = step_matches(&step[0], last, &d)   ? &step[0]
                                 : step_matches(&step[1], last, &d) ? &step[1]
                                                                    : NULL;
            if (e) {
                if (HP_UNLIKELY(hp_config.unwinder == HP_UNWIND_CHECK)) {
                    n = hp_unwind_frames(frames, hp_config.max_frames);
                    hp_unwind_check_verdict(hp_stacktab_find(frames, n) == e->to_id);
                }
                hp_tls_last_stack = e->to_id;
                hp_unwind_snap_put(from, e->to_id);
                return e->to_id;
            }
        }
        n = hp_unwind_frames(frames, hp_config.max_frames);
    }
    uint32_t id = HPT_STACK_UNKNOWN;
    if (HP_LIKELY(n != 0 && !same)) {
        id = hp_stacktab_find(frames, n);
        if (HP_UNLIKELY(id == HPT_STACK_UNKNOWN))
            id = new_stack_slow(r, t, frames, n);
    }
    if (step && id != HPT_STACK_UNKNOWN) {
        step[1] = step[0];
        *step = (hp_step_t){.from_id = last, .to_id = id, .base = d.base, .n_fresh = d.n_fresh};
        for (uint32_t k = 0; k < d.n_fresh; k++)
            step->fresh[k] = d.fresh[k];
    }
    hp_tls_last_stack = id;
    if (id != HPT_STACK_UNKNOWN && !same)
        hp_unwind_snap_put(from, id);
    return id;
}

// An event at t whose time's high bits are not the ring's: a THI entry with them first
// (ringent.h). False: it was dropped (no pipeline), and the event is too.
HP_NOINLINE HP_COLD static bool thi_slow(hp_ring_t *r, uint64_t t) {
    uint8_t b[HP_RE_THI_BYTES];
    if (!hp_tbuf_append(r, b, hp_re_put_thi(b, (uint32_t)(t >> 32)))) {
        r->n_lost++; // the event's own; the THI's is counted
        return false;
    }
    r->t_hi = t >> 32; // only now that it is committed: a longjmp before just writes it again
    return true;
}

// Whether the ring's entries may carry t's low bits: one compare an event.
static inline bool time_ok(hp_ring_t *r, uint64_t t) {
    return HP_LIKELY(t >> 32 == r->t_hi) || thi_slow(r, t);
}

// Publishes the entry of n bytes at rec: written straight into the ring (in_ring, from
// hp_tbuf_reserve) or aside, where there was no room for it there.
static inline void publish(hp_ring_t *r, bool in_ring, const uint8_t *rec, size_t n) {
    if (HP_LIKELY(in_ring))
        hp_tbuf_commit(r, n);
    else
        hp_tbuf_append(r, rec, n);
}

// touch: whether the block is libc's (through hp_real), so hp_touch_* may ask its usable size;
// false for an allocator the shim is not preloaded over (hp_record_alloc_foreign).
static inline __attribute__((always_inline)) void
record_alloc(uint8_t tag, const void *ptr, size_t size, size_t align, const hp_frame_t *from,
             bool touch) {
    HP_ASSERT(hp_tls_guard != 0); // the caller's: the shim's own allocations pass through
    HP_ASSERT(tag == HPT_REC_MALLOC || tag == HPT_REC_CALLOC || tag == HPT_REC_ALIGNED);
    hp_ring_t *r = ring();
    if (HP_UNLIKELY(!r))
        return;
    if (hp_config.sample_bytes)
        hp_sample_keep(ptr);
    if (touch && tag != HPT_REC_CALLOC)
        hp_touch_fill_fresh((void *)ptr);
    // Timed after the walk, as late as can be: the ring is busy (and holds the flusher's
    // watermark at its time) only from here to the commit, so a thread the scheduler preempts
    // is seldom caught inside (docs/design.md, "The pipeline"). Still after the real call.
    uint32_t stack = capture_stack(r, TIME_LATER, from);
    hp_tbuf_room(r, HP_RE_ALLOC_MAX + HP_RE_THI_BYTES);
    uint64_t t = hp_tbuf_busy_now(r);
    if (!time_ok(r, t)) {
        hp_tbuf_idle(r);
        return;
    }
    uint8_t buf[HP_RE_ALLOC_MAX], *in_ring = hp_tbuf_reserve(r, sizeof buf);
    uint8_t *p = in_ring ? in_ring : buf;
    publish(r, in_ring != NULL, p,
            hp_re_put_alloc(p, tag, t, (uint64_t)(uintptr_t)ptr, stack, size, align));
    hp_tbuf_idle(r);
}

void hp_record_alloc(uint8_t tag, const void *ptr, size_t size, size_t align,
                     const hp_frame_t *from) {
    record_alloc(tag, ptr, size, align, from, hp_config.touch);
}

void hp_record_alloc_foreign(uint8_t tag, const void *ptr, size_t size, size_t align,
                             const hp_frame_t *from) {
    record_alloc(tag, ptr, size, align, from, false);
}

static inline void measure(const void *ptr, hp_touch_t *t, bool touch) {
    t->method = -1;
    if (touch)
        hp_touch_measure(ptr, t);
}

// One FREE record, or with sized a FREE_SIZED one (the size and alignment the caller freed
// with; such a free is never measured). sized is a constant at every call: each inlined copy
// keeps only its own branch.
static inline __attribute__((always_inline)) void record_free(const void *ptr, bool touch,
                                                              bool sized, size_t size,
                                                              size_t align) {
    HP_ASSERT(hp_tls_guard != 0 && ptr != NULL);
    hp_ring_t *r = ring();
    if (HP_UNLIKELY(!r))
        return;
    // The block's header and first line are usually cold by now: start loading them, and
    // measure the block after the clock read, which does not need it (measured before the
    // clock instead, to keep it out of the busy window as record_alloc keeps the walk:
    // c_churn 3 M pairs, 15 paired rounds, 12 ms slower, within the noise but not better).
    // The time is still taken before the real free runs.
    hp_touch_t tm = {.method = -1};
    if (!sized) {
        __builtin_prefetch((const char *)ptr - 16);
        __builtin_prefetch(ptr);
    }
    hp_tbuf_room(r, HP_RE_FREE_MAX + HP_RE_THI_BYTES);
    uint64_t t = hp_tbuf_busy_now(r);
    if (!sized)
        measure(ptr, &tm, touch);
    if (!time_ok(r, t)) {
        hp_tbuf_idle(r);
        return;
    }
    uint8_t buf[HP_RE_FREE_MAX], *in_ring = hp_tbuf_reserve(r, sizeof buf);
    uint8_t *p = in_ring ? in_ring : buf;
    size_t n;
    if (sized)
        n = hp_re_put_free_sized(p, t, (uint64_t)(uintptr_t)ptr, size, align);
    else {
        // The figures as two 8-byte loads: the measure stored them 8 bytes at a time, and the
        // one 16-byte load gcc makes of the pair cannot be forwarded from two stores, so it
        // waited for them to reach the cache (16% of free_entry's samples on the Xeon).
        uint64_t touched = tm.touched, touched_nz = tm.touched_nz;
        __asm__("" : "+r"(touched), "+r"(touched_nz));
        n = hp_re_put_free(p, t, (uint64_t)(uintptr_t)ptr, tm.method, touched, touched_nz);
    }
    publish(r, in_ring != NULL, p, n);
    hp_tbuf_idle(r);
}

void hp_record_free(const void *ptr) {
    record_free(ptr, hp_config.touch, false, 0, 0);
}

void hp_record_free_foreign(const void *ptr) {
    record_free(ptr, false, false, 0, 0);
}

void hp_record_free_sized_foreign(const void *ptr, size_t size, size_t align) {
    record_free(ptr, false, true, size, align);
}

// Sampled mode: decides both halves of a realloc of old to size before the real call, into
// hp_tls_realloc_plan; false when neither is sampled (the call then records nothing and reads
// no clock). The old block leaves the set before the real call can free it.
static inline bool realloc_plan(const void *old, size_t size) {
    if (!hp_config.sample_bytes)
        return true;
    unsigned plan = 0;
    if (old && hp_sample_free(old))
        plan |= REALLOC_OLD_SAMPLED;
    if (hp_sample_alloc(size))
        plan |= REALLOC_NEW_SAMPLED;
    hp_tls_realloc_plan = (uint8_t)plan;
    return plan != 0;
}

uint64_t hp_record_realloc_begin(const void *old, size_t size, size_t *old_usable) {
    HP_ASSERT(hp_tls_guard != 0);
    *old_usable = 0;
    if (!realloc_plan(old, size))
        return 0;
    hp_ring_t *r = ring();
    if (HP_UNLIKELY(!r))
        return 0;
    // The old block is not measured: its bytes live on in the new one, which is measured when
    // it is freed. Measuring every step would make a realloc-by-one loop quadratic.
    if (old && hp_config.touch)
        *old_usable = hp_touch_usable(old);
    return hp_tbuf_busy_now(r);
}

uint64_t hp_record_realloc_begin_foreign(const void *old, size_t size) {
    HP_ASSERT(hp_tls_guard != 0);
    if (!realloc_plan(old, size))
        return 0;
    hp_ring_t *r = ring();
    return HP_LIKELY(r != NULL) ? hp_tbuf_busy_now(r) : 0;
}

static inline __attribute__((always_inline)) void
record_realloc_end(uint64_t t0, size_t old_usable, const void *old, const void *ptr, size_t size,
                   const hp_frame_t *from, bool touch) {
    unsigned plan = REALLOC_OLD_SAMPLED | REALLOC_NEW_SAMPLED;
    if (hp_config.sample_bytes) {
        plan = hp_tls_realloc_plan;
        if (!plan)
            return;
        if (!ptr && size != 0 && (plan & REALLOC_OLD_SAMPLED))
            hp_sample_keep(old); // the call failed: the old block lives on, still sampled
        else if (ptr && (plan & REALLOC_NEW_SAMPLED))
            hp_sample_keep(ptr);
    }
    hp_ring_t *r = hp_tls_ring;
    if (HP_UNLIKELY(!r))
        return;
    // begin marked the ring busy at t0, and nothing since has committed past it
    HP_ASSERT(atomic_load_explicit(&r->busy, memory_order_relaxed) == 1);
    uint8_t buf[HP_RE_REALLOC_BYTES];
    if (!(plan & REALLOC_OLD_SAMPLED))
        old = NULL; // sampled mode: an unsampled old block is not in the trace
    if (ptr && !(plan & REALLOC_NEW_SAMPLED)) {
        // sampled mode: the old block was sampled, the new one is not: the old one dies
        HP_ASSERT(old != NULL);
        ptr = NULL;
        size = 0;
    }
    if (!ptr) {
        // realloc(p, 0) freed p (glibc); a failed realloc left it alone and records nothing
        if (old && size == 0 && time_ok(r, t0))
            hp_tbuf_append(r, buf, hp_re_put_free(buf, t0, (uint64_t)(uintptr_t)old, -1, 0, 0));
        hp_tbuf_idle(r);
        return;
    }
    if (touch) // realloc kept min(old usable, size) bytes; the rest is new to the program
        hp_touch_fill((void *)ptr, hp_touch_usable(ptr), old_usable < size ? old_usable : size);
    // The new block's time orders it after any free of its address by another thread, which a
    // moved block's may have had while the call ran. A block that stayed where it was was this
    // thread's all along: the time before the call orders it, and a realloc-by-one loop (mostly
    // in place) saves one clock read of two (17% of the app's samples on realloc_chain were
    // the clock).
    uint64_t t1 = t0;
    if (ptr != old) {
        t1 = hp_state_now();
        if (HP_UNLIKELY(t1 < t0))
            t1 = t0; // the clock switched to the TSC in between (clock.h)
    }
    uint32_t stack = capture_stack(r, t0, from);
    hp_tbuf_append(r, buf,
                   hp_re_put_realloc(buf, t0, t1, stack, (uint64_t)(uintptr_t)old,
                                     (uint64_t)(uintptr_t)ptr, size));
    if (t1 > t0) {
        // The stream's time is t1 now, so the ring's next time must not be below it: the clock
        // may have switched to the TSC (which starts behind) between t0 and t1, and a time below
        // the stream's would wrap the drain's delta. Raised only now that the record (timed t0)
        // is committed: the flusher, seeing the ring busy at t1, has its head too (release).
        atomic_store_explicit(&r->last_t, t1, memory_order_release);
    }
    hp_tbuf_idle(r);
}

void hp_record_realloc_end(uint64_t t0, size_t old_usable, const void *old, const void *ptr,
                           size_t size, const hp_frame_t *from) {
    record_realloc_end(t0, old_usable, old, ptr, size, from, hp_config.touch);
}

void hp_record_realloc_end_foreign(uint64_t t0, const void *old, const void *ptr, size_t size,
                                   const hp_frame_t *from) {
    record_realloc_end(t0, 0, old, ptr, size, from, false);
}

void hp_record_thread_exit(void *arg) {
    hp_ring_t *r = arg;
    // The block goes back for the next thread; allocations of later TLS destructors are still
    // recorded (the ring stays until the thread is gone), their stacks by libunwind.
    hp_thread_detach();
    if (!r || r != hp_tls_ring)
        return;
    int entered = hp_guard_enter();
    int cancel = hp_nocancel_begin(); // guard.h
    if (hp_state_is_on()) {
        // a TBASE entry at t, then the record, its time counted from t
        uint8_t buf[HP_RE_TBASE_BYTES + 2];
        size_t n = hp_re_put_tbase(buf, hp_tbuf_busy_now(r));
        buf[n++] = HPT_REC_THREAD_END;
        buf[n++] = 0;
        hp_tbuf_append(r, buf, n);
        hp_tbuf_idle(r);
        // Drained now rather than at the next flush, so that the flusher can reap the ring
        // (into the pool the next thread takes it from, tbuf.c) a nap after the thread is gone;
        // only while recording (a stopped pipeline would keep it queued for good). Before
        // hp_tbuf_close (its `closed`): the reaper's acquire of it then orders this thread's last touch of the ring
        // (queued, here) before the next owner's reset (TSan, hp_pipeline_stress short_threads).
        hp_tbuf_nudge_slow(r);
    }
    hp_tbuf_close(r);
    hp_nocancel_end(cancel);
    if (entered)
        hp_guard_leave();
}

void hp_record_fork_child(void) {
    hp_tls_ring = NULL;
    hp_tls_last_stack = HPT_STACK_UNKNOWN; // ids restart in the child's trace
    hp_thread_fork_child();
    if (hp_tls_thread)
        memset(hp_tls_thread->steps, 0, sizeof hp_tls_thread->steps);
    hp_unwind_forget_snaps();
}

// A signal handler that interrupted the shim on this thread (holding the guard) longjmp'd out of
// it, and the guard was never given back (issue #17 item 9). Recording resumes wherever the
// shim's state can be put back exactly, rather than the thread's later events being counted
// lost: an event's record is wholly in the ring or not at all (the head moves once, after the
// record is written) and its entry holds no state of the thread's (ringent.h), and the
// unwinder's caches, which it may have left half-written, are
// dropped. Not where the holder was in a cold path (guard.h): a lock of the shim's, the loader's,
// libdw's or libunwind's may be held, so the thread passes every later event through and counts
// it lost in its ring, which the trailer reports; the same for the process if a lock is held.
bool hp_record_guard_slow(uintptr_t here) {
    uintptr_t g = hp_tls_guard;
    HP_ASSERT(g != 0); // only an entry point that found the guard held comes here
    hp_ring_t *r = hp_tls_ring;
    if (g == HP_GUARD_LOST) {
        if (r && hp_state_is_on())
            r->n_lost++;
        return false;
    }
    // Held for good (the shim's threads, the CPU timer's handler), or by a frame below this
    // one: a real nesting. An entry from the holder's frame or above it means the frame is gone.
    if (g <= HP_GUARD_LOST || here < (g & ~HP_GUARD_COLD))
        return false;
    // ... on the same stack: a handler on the alternate signal stack may sit anywhere
    stack_t ss;
    if (sigaltstack(NULL, &ss) != 0 || (ss.ss_flags & SS_ONSTACK))
        return false;
    if (g & HP_GUARD_COLD) {
        hp_tls_guard = HP_GUARD_LOST;
        if (r) {
            hp_tbuf_idle(r); // no event of this thread is in flight: never hold the merge back
            if (hp_state_is_on())
                r->n_lost++;
        }
        static _Atomic bool said;
        if (!hp_config.quiet && !atomic_exchange(&said, true))
            hp_diag_line("a longjmp left the profiler's locks in an unknown state; that thread's "
                         "later events are counted as lost",
                         (char *)NULL);
        return false;
    }
    if (r)
        hp_tbuf_idle(r);
    hp_tls_last_stack = HPT_STACK_UNKNOWN;
    hp_thread_reset();
    hp_tls_guard = 0;
    return hp_state_is_on();
}
