// SPDX-License-Identifier: MIT
// The live walk's reuse of the previous walk (unwind_cfi.c): whatever it answers from its log
// (the same stack; a few fresh frames on the logged ones, as a known-step delta; the general
// join) must be the stack a walk without a log finds from the same frame, also where a word the
// logged walk read has changed underneath it: a frame rebuilt at the same depth under another
// caller, which only the check of the logged words can tell.
#include "thread.h"
#include "unwind.h"

#include "../e2e/progs/coro_switch.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MAXF 64

// One capture: the walk's answer (frames, and how it found them) and a fresh walk's frames.
typedef struct shot {
    uint32_t n, ref_n;
    bool same, delta, snapped;
    hp_unwind_delta_t d;
    uint64_t f[MAXF], ref[MAXF];
} shot_t;

static shot_t shots[16];
static int n_shots;
// With snaps_on, capture keeps every stack it walked as a snapshot (record.c's part), under an
// id that indexes known[]: a snapshot's answer is then checked like a walk's.
static bool snaps_on;
static struct {
    uint32_t n;
    uint64_t f[MAXF];
} known[17];
static uint32_t n_known;
static hp_thread_t saved; // the thread's block, kept aside around the fresh walk
static volatile int sink;

// The walk from capture's caller, as an entry point of the shim takes it. Built with frame
// pointers (CMakeLists.txt): HP_CALLER_FRAME reads the caller's frame through rbp.
__attribute__((noinline)) static void capture(void) {
    hp_frame_t from;
    HP_CALLER_FRAME(from);
    shot_t *s = &shots[n_shots++];
    uint32_t snap;
    s->n = hp_unwind(&from, s->f, MAXF, &s->same, &s->d, &snap);
    s->delta = s->d.valid;
    s->snapped = snap != 0;
    if (snap) {
        cr_assert(snaps_on && snap <= n_known, "an answer from a snapshot never kept");
        s->n = known[snap].n;
        memcpy(s->f, known[snap].f, s->n * sizeof *s->f);
    } else if (s->same || s->delta) { // the frames were not filled: the log has them
        s->n = hp_unwind_frames(s->f, MAXF);
    }
    if (snaps_on && !snap && !s->same && n_known + 1 < sizeof known / sizeof *known) {
        known[++n_known].n = s->n;
        memcpy(known[n_known].f, s->f, s->n * sizeof *s->f);
        hp_unwind_snap_put(&from, n_known);
    }
    // the same frame walked with an empty log, the log then put back as it was
    hp_thread_t *th = hp_tls_thread;
    memcpy(&saved, th, sizeof saved);
    memset(th->unwind, 0, sizeof th->unwind);
    bool same;
    hp_unwind_delta_t d;
    s->ref_n = hp_unwind(&from, s->ref, MAXF, &same, &d, &snap);
    cr_assert(!same && !d.valid && !snap, "a walk with an empty log answers with frames");
    memcpy(th, &saved, sizeof saved);
}

// Two call sites of capture in one function: the stacks differ in the first frame only. Without
// frame pointers, so that the walk meets both kinds of frame.
__attribute__((noinline, optimize("omit-frame-pointer"))) static void leaf(int k) {
    if (k) {
        capture();
        sink = 5;
    } else {
        sink = 6;
        capture();
    }
    sink = k;
}

__attribute__((noinline)) static void mid(int k) {
    leaf(k);
    sink = 2 * k;
}

// Two identical functions called from the same place: mid's frame has the same stack pointer
// and return address under either, only the return address it saved (into outer_a or outer_b)
// differs.
__attribute__((noinline)) static void outer_a(int k) {
    mid(k);
    sink = 3;
}

__attribute__((noinline)) static void outer_b(int k) {
    mid(k);
    sink = 3;
}

__attribute__((noinline)) static void drive(void (*outer)(int), int k) {
    outer(k);
    sink = 4;
}

// The same shape without frame pointers: no frame's CFA is rbp-based, and drive_nofp saves rbp
// (the clobber makes it a callee-saved register it pushes), so the walk from leaf outwards
// depends on no frame's rbp up to it: joins take the walk's path for frames that need none.
#define NOFP __attribute__((noinline, optimize("omit-frame-pointer")))
NOFP static void mid_nofp(int k) {
    leaf(k);
    sink = 2 * k;
}

NOFP static void outer_a_nofp(int k) {
    mid_nofp(k);
    sink = 3;
}

NOFP static void outer_b_nofp(int k) {
    mid_nofp(k);
    sink = 3;
}

NOFP static void drive_nofp(void (*outer)(int), int k) {
    __asm__ volatile("" ::: "rbp");
    outer(k);
    sink = 4;
}

static void expect_exact(int i) {
    const shot_t *s = &shots[i];
    cr_assert_gt(s->ref_n, 4, "shot %d: a walk of %u frames", i, s->ref_n);
    cr_expect_eq(s->n, s->ref_n, "shot %d: %u frames, a fresh walk finds %u", i, s->n, s->ref_n);
    cr_expect(!memcmp(s->f, s->ref, s->ref_n * sizeof *s->ref),
              "shot %d: the frames differ from a fresh walk's", i);
    // same and delta are relative to the stack the log holds: the last one walked (a
    // snapshot's answer leaves the log alone)
    int last = i - 1;
    while (last >= 0 && shots[last].snapped)
        last--;
    if (last < 0)
        return;
    const shot_t *p = &shots[last];
    if (s->same)
        cr_expect(p->n == s->n && !memcmp(p->f, s->f, s->n * sizeof *s->f),
                  "shot %d: 'the same stack' differs from the previous one", i);
    if (s->delta) {
        // the fresh frames, then the previous stack from base on
        uint32_t nf = s->d.n_fresh;
        cr_expect_eq(nf + (p->n - s->d.base), s->n, "shot %d: delta of the wrong length", i);
        cr_expect(!memcmp(s->d.fresh, s->f, nf * sizeof *s->f), "shot %d: fresh frames", i);
        cr_expect(!memcmp(p->f + s->d.base, s->f + nf, (s->n - nf) * sizeof *s->f),
                  "shot %d: shared frames", i);
    }
}

typedef struct step {
    void (*outer)(int);
    int k;
} step_t;

Test(unwind, reused_walks_give_the_stack_a_fresh_walk_gives) {
    cr_assert(hp_thread_attach(), "no thread block");
    n_shots = 0;
    static const step_t seq[] = {
        {outer_a, 1}, // fresh
        {outer_a, 1}, // the same stack
        {outer_a, 0}, // another call site in leaf: one fresh frame (the general join)
        {outer_a, 1}, // and back: one fresh frame again, now by one_fresh (the last was one)
        {outer_b, 0}, // leaf and mid in the same place, but mid's saved return address changed:
                      // one_fresh's join at mid must see it and leave it to the general walk
        {outer_b, 0}, // the same stack
        {outer_a, 0}, // mid's return address changed back
        {outer_a, 1},
    };
    for (size_t i = 0; i < sizeof seq / sizeof *seq; i++)
        drive(seq[i].outer, seq[i].k);
    for (int i = 0; i < n_shots; i++)
        expect_exact(i);
    // the cases the walk has shortcuts for were met (not an exactness condition: the layout
    // the compiler chose makes them)
    cr_expect(shots[1].same && shots[5].same, "the repeated stacks were not found the same");
    cr_expect(shots[3].delta && shots[3].d.n_fresh == 1 && shots[3].d.base == 1,
              "the one-frame change was not found as one");
    cr_expect(!shots[4].same && !(shots[4].delta && shots[4].d.n_fresh == 1),
              "a changed outer word was taken for a one-frame step");
    cr_expect(shots[4].f[2] != shots[3].f[2], "outer_b's frame is not outer_a's");
}

Test(unwind, reused_walks_without_frame_pointers) {
    cr_assert(hp_thread_attach(), "no thread block");
    n_shots = 0;
    static const step_t seq[] = {
        {outer_a_nofp, 1}, {outer_a_nofp, 1}, {outer_a_nofp, 0}, {outer_a_nofp, 1},
        {outer_b_nofp, 0}, // mid's saved return address changed: the join moves out past it
        {outer_b_nofp, 0}, {outer_a_nofp, 0}, {outer_a_nofp, 1}, {outer_b_nofp, 1},
    };
    for (size_t i = 0; i < sizeof seq / sizeof *seq; i++)
        drive_nofp(seq[i].outer, seq[i].k);
    for (int i = 0; i < n_shots; i++)
        expect_exact(i);
    cr_expect(shots[1].same && shots[5].same, "the repeated stacks were not found the same");
    cr_expect(shots[4].delta && shots[4].d.n_fresh == 3,
              "a join past the changed word was not found (%d, %u fresh)", shots[4].delta,
              shots[4].d.n_fresh);
}

// Snapshots (what record.c keeps of each stack it walked): a stack met again while the log holds
// another one comes from its snapshot, exactly; one whose start is the same but whose outer words
// changed (mid saved another return address) must not.
Test(unwind, snapshots_give_the_stack_a_fresh_walk_gives) {
    cr_assert(hp_thread_attach(), "no thread block");
    n_shots = 0;
    n_known = 0;
    snaps_on = true;
    static const step_t seq[] = {
        {outer_a_nofp, 1}, // fresh: kept
        {outer_a_nofp, 0}, // another site: walked and kept
        {outer_a_nofp, 1}, // the log holds the other site: the snapshot
        {outer_a_nofp, 0}, // the log still holds this one (shot 2 left it alone): the same
        {outer_b_nofp, 0}, // same start, mid's saved return address changed: not the snapshot
        {outer_a_nofp, 1}, // the first stack: its snapshot
        {outer_b_nofp, 1}, // same start as the first, another outer frame: not its snapshot
        {outer_b_nofp, 0}, // kept at shot 4
    };
    for (size_t i = 0; i < sizeof seq / sizeof *seq; i++)
        drive_nofp(seq[i].outer, seq[i].k);
    snaps_on = false;
    for (int i = 0; i < n_shots; i++)
        expect_exact(i);
    cr_expect(shots[2].snapped && shots[5].snapped && shots[7].snapped,
              "the stacks met again were walked again");
    cr_expect(shots[3].same, "the log still held shot 1's stack");
    cr_expect(!shots[4].snapped && !shots[6].snapped, "a changed outer word was not seen");
}

// ---- a walk off the thread's own stack ------------------------------------------------------------
// A coroutine on a stack of its own, entered by a hand-written switch with no CFI (as libco or
// Boost.Context do), the word above its entry frame a stale return address into a 4 KiB frame,
// PROT_NONE pages above the stack: a walk that trusts that word reads past the stack's top.

static void *main_sp, *coro_sp;

static void coroutine(void) {
    for (volatile int r = 0; r < 2; r++) // the same stack twice: walked again, none reused
        drive(outer_a, 1);
    drive(outer_a, 0);
    coro_switch(&coro_sp, main_sp);
    abort();
}

Test(unwind, a_walk_off_the_threads_stack_stops_at_the_first_unreadable_page) {
    cr_assert(hp_thread_attach(), "no thread block");
    n_shots = 0;
    drive(outer_a, 1); // the thread's own stack first: learnt, and a complete log left
    const size_t page = 4096, stack = 8 * page, above = 4 * page;
    char *m = mmap(NULL, stack + above, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert(m != MAP_FAILED);
    cr_assert_eq(mprotect(m + stack, above, PROT_NONE), 0);
    coro_sp = coro_prepare((uint64_t *)(void *)(m + stack), coroutine, coro_stale_return_site());
    coro_switch(&main_sp, coro_sp);
    munmap(m, stack + above);
    for (volatile int r = 0; r < 2; r++) // back on the thread's stack: reused again
        drive(outer_a, 1);
    cr_assert_eq(n_shots, 6);
    for (int i = 1; i <= 3; i++) {
        expect_exact(i);
        cr_expect(!shots[i].same && !shots[i].delta, "shot %d: a walk off the stack reused one", i);
        // leaf, mid, outer_a, drive, coroutine, and the stale frame last
        cr_expect_eq(shots[i].n, 6, "shot %d: %u frames", i, shots[i].n);
    }
    expect_exact(4);
    expect_exact(5);
    cr_expect(shots[5].same, "the thread's own stack was not reused after the coroutine");
}

// ---- code without CFI: the frame-pointer guess ----------------------------------------------------
// nocfi_tramp (assembly, no CFI, no frame pointer of its own) calls rcx(rdi) with 24 bytes of
// its own frame. call_guessed(fn, arg, good) calls it with rbp either pointing nowhere (1: the
// guess fails, the walk ends at the trampoline) or 16 bytes under the trampoline's CFA (the
// guess lands exactly on the return address), from the same stack pointer both times.
__asm__(".text\n"
        "nocfi_tramp:\n"
        "  sub $24, %rsp\n"
        "  call *%rcx\n"
        "  add $24, %rsp\n"
        "  ret\n"
        ".globl call_guessed\n"
        ".type call_guessed, @function\n"
        "call_guessed:\n"
        "  .cfi_startproc\n"
        "  push %rbp\n"
        "  .cfi_def_cfa_offset 16\n"
        "  .cfi_offset %rbp, -16\n"
        "  mov %rdi, %rcx\n"
        "  mov %rsi, %rdi\n"
        "  mov $1, %ebp\n"
        "  test %edx, %edx\n"
        "  jz 1f\n"
        "  lea -16(%rsp), %rbp\n"
        "1:\n"
        "  call nocfi_tramp\n"
        "  pop %rbp\n"
        "  .cfi_def_cfa_offset 8\n"
        "  ret\n"
        "  .cfi_endproc\n"
        ".size call_guessed, .-call_guessed\n");
void call_guessed(void (*fn)(int), int arg, int good);

NOFP static void guessed(int good) {
    call_guessed(leaf, 1, good);
    sink = 7;
}

// A walk that ended at a failed guess depended on rbp there: the same frame met again with an
// rbp the guess takes must be walked on, not answered with the ended walk (from the log or a
// snapshot); and the reverse.
Test(unwind, a_walk_that_ended_at_a_failed_guess_is_reused_only_with_the_same_rbp) {
    cr_assert(hp_thread_attach(), "no thread block");
    for (int with_snaps = 0; with_snaps < 2; with_snaps++) {
        n_shots = 0;
        n_known = 0;
        snaps_on = with_snaps;
        static const int good[] = {0, 1, 0, 1, 1, 0, 0};
        for (size_t i = 0; i < sizeof good / sizeof *good; i++)
            guessed(good[i]);
        snaps_on = false;
        for (int i = 0; i < n_shots; i++) {
            const shot_t *s = &shots[i];
            cr_expect_eq(s->n, s->ref_n, "snapshots %d, shot %d: %u frames, a fresh walk finds %u",
                         with_snaps, i, s->n, s->ref_n);
            cr_expect(!memcmp(s->f, s->ref, s->ref_n * sizeof *s->ref),
                      "snapshots %d, shot %d: the frames differ from a fresh walk's", with_snaps, i);
        }
        // leaf, the trampoline and no more; then on through call_guessed, guessed, the test
        cr_expect_eq(shots[0].ref_n, 2, "a failed guess: %u frames", shots[0].ref_n);
        cr_expect_gt(shots[1].ref_n, 4, "a guess taken: %u frames", shots[1].ref_n);
    }
}
