// SPDX-License-Identifier: MIT
// Stack capture behind one small interface, so the unwinder can be swapped per build.
#ifndef HEAPPROF_PRELOAD_UNWIND_H
#define HEAPPROF_PRELOAD_UNWIND_H

#include <stdbool.h>
#include <stdint.h>

// A frame to walk from: the return address into it, its stack pointer (the CFA of the function
// it called) and its rbp.
typedef struct hp_frame {
    uint64_t pc, sp, bp;
} hp_frame_t;

// The caller of the function this expands in, as that function's frame shows it. The function
// must keep a frame pointer: interpose.c, where every entry point takes it, is built with
// -fno-omit-frame-pointer. Starting there, a walk never visits the shim's own frames (malloc,
// the recorder, the unwinder), which were most of the frames a walk found changed: on
// rust_hashmap_growth 4.9 of them a walk, and the check of the cached outer frames went the
// slow way every time malloc was reached from another call site.
#define HP_CALLER_FRAME(f)                                                                         \
    do {                                                                                           \
        const uint64_t *fp_ = __builtin_frame_address(0);                                          \
        (f).pc = fp_[1];                                                                           \
        (f).sp = (uint64_t)(uintptr_t)(fp_ + 2);                                                   \
        (f).bp = fp_[0];                                                                           \
    } while (0)

// What a walk shares with this thread's previous one, when that says all there is to say about
// the new stack: its frames are fresh[0..n_fresh) followed by the previous stack's frames from
// index base on (both as reported: the shim's frames dropped, at most max of them).
#define HP_DELTA_FRESH_MAX 4
typedef struct hp_unwind_delta {
    bool valid;
    uint32_t base, n_fresh;
    uint64_t fresh[HP_DELTA_FRESH_MAX];
} hp_unwind_delta_t;

// Bytes of per-thread state the unwinder keeps in the thread's block (thread.h): the walk log, the
// fresh frames of a walk and a rule cache. Where a thread has no block (hp_tls_thread NULL),
// hp_unwind takes the full unwinder (libunwind), which keeps none.
#define HP_UNWIND_THREAD_BYTES (48u * 1024u)

// Fills out[0..max) with return addresses, innermost first, from frame `from` outwards (frames
// inside the shim are dropped). Returns the count, 0 if unwinding failed. Sets *same_as_last
// when the stack is exactly this thread's previous one, or fills *delta (valid) when the stack
// is a few new frames on top of part of the previous one; in both cases out is left unfilled
// (the caller reuses what it made of the previous stack, or calls hp_unwind_frames). Hot path;
// may call the real allocator through the recursion guard.
// A stack met before on this thread that is not the last one walked may come from a snapshot
// (hp_unwind_snap_put): then it returns 0 with *snap_id the id given there, and nothing else set.
uint32_t hp_unwind(const hp_frame_t *from, uint64_t *out, uint32_t max, bool *same_as_last,
                   hp_unwind_delta_t *delta, uint32_t *snap_id);

// Keeps the stack the last hp_unwind from `from` walked, under the id the caller gave it, for a
// later hp_unwind from the same frame to find without a walk (where the log does not hold it
// then). Does nothing where the log does not describe that stack.
void hp_unwind_snap_put(const hp_frame_t *from, uint32_t id);
// Drops this thread's snapshots: their ids mean nothing in a fork child's new trace.
void hp_unwind_forget_snaps(void);

// The frames of the stack the last hp_unwind on this thread walked, as hp_unwind would have
// filled them (and, with HEAPPROF_UNWIND=check, checked against libunwind).
uint32_t hp_unwind_frames(uint64_t *out, uint32_t max);

// HEAPPROF_UNWIND=check: the caller found the stack by another way too; counts a difference.
void hp_unwind_check_verdict(bool agree);
// The same for a stack found by a snapshot: the caller compared its id with libunwind's frames'.
void hp_unwind_check_snapshot(bool agree);
// Whether libunwind's frames ref[0..m) end where the walk goes on (a CPython trampoline): they
// are then no whole stack to compare an id with; hp_unwind_check_past counts such a stack.
bool hp_unwind_check_cut_short(const uint64_t *ref, uint32_t m);
void hp_unwind_check_past(void);

// Walks a copy of a stack taken elsewhere (a CPU sample): ip, sp and bp (rbp) are the
// interrupted registers, stack[0..len) the memory from sp upwards; no other stack memory is
// read. out[0] is ip + 1, so that every frame reads as a return address (symbolizers look up
// pc - 1), then the return addresses. Stops at the first frame whose rule is not the simple
// form or whose memory lies outside the copy. Returns the count (>= 1 when max >= 1). Not
// async-signal-safe: may compute rules (takes a lock, allocates through the recursion guard).
uint32_t hp_unwind_copy(uint64_t ip, uint64_t sp, uint64_t bp, const uint8_t *stack,
                        uint64_t len, uint64_t *out, uint32_t max);

// The same walk on the live stack from a signal handler (the CPU-time timer fallback): rules
// come from the shared table only, never computed; the first pc without one ends the walk and
// is returned in *want_pc (0 if none) for hp_unwind_prepare. Async-signal-safe: no lock, no
// allocation; reads only the stack slots the rules name.
uint32_t hp_unwind_signal(uint64_t ip, uint64_t sp, uint64_t bp, uint64_t *out, uint32_t max,
                          uint64_t *want_pc);
// Computes and caches the rule for pc (a value hp_unwind_signal or hp_unwind_copy recorded).
// Takes the rule lock and may allocate: never from a signal handler.
void hp_unwind_prepare(uint64_t pc);

// fork: the rule table's lock must not be held by another thread when the child is made.
void hp_unwind_fork_prepare(void);
void hp_unwind_fork_parent(void);
void hp_unwind_fork_child(void);

// Records the address range of the shim's own code so hp_unwind can drop those frames.
void hp_unwind_init(void);

// With HEAPPROF_UNWIND=check, says on stderr how many stacks differed from libunwind's.
void hp_unwind_report(void);

// The libunwind backend (reference and fallback), same contract as hp_unwind.
uint32_t hp_unwind_libunwind(uint64_t *out, uint32_t max);
void hp_unwind_libunwind_init(uintptr_t self_lo, uintptr_t self_hi);

#endif
