// SPDX-License-Identifier: MIT
// Stack capture with our own DWARF CFI walker. Each return address maps to one small rule (where
// the caller's CFA, return address and rbp are) computed once with elfutils' CFI reader and kept
// in a lock-free table; a walk is then a hash probe and two loads per frame, without libunwind's
// per-call cursor set-up. Frames whose rule does not fit the simple form (signal frames, CFA
// expressions, stack realignment) hand the whole capture to libunwind. See docs/design.md.
// Hot path: no locks, no allocation; the rule computation (cold) takes a lock and may allocate
// through the recursion guard.
#include "unwind.h"

#include "cfi_search.h"
#include "compiler.h"
#include "config.h"
#include "debug.h"
#include "diag.h"
#include "format/hpt_format.h"
#include "guard.h"
#include "mem.h"
#include "thread.h"

#include <dlfcn.h>
#include <dwarf.h>
#include <emmintrin.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <libelf.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

// Rule flags; a plain step to the caller has none of the first four.
enum rule_flag {
    RULE_STOP = 1,        // outermost frame (return address undefined): the walk ends
    RULE_UNSUPPORTED = 2, // needs a full unwinder
    RULE_CFA_BP = 4,      // CFA = rbp + cfa_off (else rsp + cfa_off)
    RULE_BP_LOST = 8,     // rbp is undefined in the caller
    RULE_BP_SAVED = 16,   // caller's rbp at CFA + bp_off (else unchanged)
    RULE_GUESS = 32,      // no CFI: a frame-pointer frame is guessed (guess_rule)
};

// One frame's rule, packed into 8 bytes so a table slot is 16 and a lookup touches one line.
typedef struct rule {
    int32_t cfa_off;
    int16_t bp_off;
    int8_t ra_off; // return address at CFA + ra_off
    uint8_t flags; // enum rule_flag
} rule_t;
_Static_assert(sizeof(rule_t) == 8, "rule_t packs into one word");

typedef struct slot {
    _Atomic uint64_t pc; // 0 = empty; published after the rule
    rule_t rule;
} slot_t;

// Per-thread direct-mapped cache in front of the shared table (in the thread's block, cfi_thread_t
// below): stays in L1.
#define TLS_RULES 256
typedef struct tls_slot {
    uint64_t pc;
    rule_t rule;
} tls_slot_t;

typedef struct table {
    uint64_t mask, used;
    slot_t slots[];
} table_t;

static _Atomic(table_t *) rules;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t self_lo, self_hi;

static inline uint64_t pc_hash(uint64_t pc) {
    return (pc * 0x9e3779b97f4a7c15ull) >> 20;
}

// ---- rule computation (cold, under lock) --------------------------------------------------------

#define MAX_MODULES 1024
typedef struct module {
    const void *map_start; // identifies the mapping (dl_find_object)
    uintptr_t bias;
    Dwarf_CFI *cfi; // NULL: no usable CFI
} module_t;

static module_t *modules;
static size_t n_modules;

static Dwarf_CFI *open_cfi(const struct dl_find_object *fo) {
    static bool elf_ready;
    if (!elf_ready) {
        elf_version(EV_CURRENT);
        elf_ready = true;
    }
    const struct link_map *lm = fo->dlfo_link_map;
    const char *path = lm->l_name;
    Elf *elf = NULL;
    if (!path || !*path)
        path = "/proc/self/exe";
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        // private: cfi_search.h may rename a section header in our copy
        elf = elf_begin(fd, ELF_C_READ_MMAP_PRIVATE, NULL);
        // the mapping stays valid after close
        close(fd);
        hp_cfi_search_table_first(elf);
    } else if ((uintptr_t)fo->dlfo_map_start <= getauxval(AT_SYSINFO_EHDR) &&
               getauxval(AT_SYSINFO_EHDR) < (uintptr_t)fo->dlfo_map_end) {
        // the vDSO has no file: read its image from memory
        elf = elf_memory((char *)getauxval(AT_SYSINFO_EHDR),
                         (size_t)((char *)fo->dlfo_map_end - (char *)getauxval(AT_SYSINFO_EHDR)));
    }
    return elf ? dwarf_getcfi_elf(elf) : NULL;
}

static module_t *module_for(uint64_t pc) {
    struct dl_find_object fo;
    if (_dl_find_object((void *)(uintptr_t)pc, &fo) != 0)
        return NULL;
    for (size_t i = 0; i < n_modules; i++)
        if (modules[i].map_start == fo.dlfo_map_start)
            return &modules[i];
    if (!modules && !(modules = hp_mem_map(MAX_MODULES * sizeof *modules)))
        return NULL;
    if (n_modules == MAX_MODULES)
        return NULL;
    module_t *m = &modules[n_modules++];
    m->map_start = fo.dlfo_map_start;
    m->bias = fo.dlfo_link_map->l_addr;
    m->cfi = open_cfi(&fo);
    return m;
}

// Offset of a register saved "at CFA + n": elfutils spells it call_frame_cfa [plus_uconst n].
static bool cfa_offset(const Dwarf_Op *ops, size_t nops, int64_t *off) {
    if (nops == 1 && ops[0].atom == DW_OP_call_frame_cfa) {
        *off = 0;
        return true;
    }
    if (nops == 2 && ops[0].atom == DW_OP_call_frame_cfa && ops[1].atom == DW_OP_plus_uconst) {
        *off = (int64_t)ops[1].number;
        return true;
    }
    return false;
}

// The CFA expression ld writes for .plt entries: rsp + n, plus 8 from the entry's byte `k` on
// (after its push): breg7 n; breg16 0; lit15; and; lit<k>; ge; lit3; shl; plus. Only CPU samples
// stop inside a stub (an allocation's stack never has one on its return path); at one known
// instruction address the expression is a plain rsp offset.
static bool plt_cfa(const Dwarf_Op *o, size_t n, uint64_t ip, int64_t *cfa_off) {
    if (n != 9 || o[0].atom != DW_OP_breg7 || o[1].atom != DW_OP_breg16 || o[1].number != 0 ||
        o[2].atom != DW_OP_lit15 || o[3].atom != DW_OP_and || o[4].atom < DW_OP_lit0 ||
        o[4].atom > DW_OP_lit31 || o[5].atom != DW_OP_ge || o[6].atom != DW_OP_lit3 ||
        o[7].atom != DW_OP_shl || o[8].atom != DW_OP_plus)
        return false;
    uint64_t k = (uint64_t)(o[4].atom - DW_OP_lit0);
    *cfa_off = (int64_t)o[0].number + ((ip & 15) >= k ? 8 : 0);
    return true;
}

// Code with no CFI: JIT-compiled code (V8, the JVM, LuaJIT), V8's builtins embedded in node's
// text, assembly and programs built without unwind tables. Most of it keeps a frame pointer, so
// the caller's frame is guessed from rbp as libunwind does: CFA = rbp + 16, the return address
// and the caller's rbp under it. The guess is taken only where rbp points into the frame's own
// part of the stack (guess_ok); else the walk ends there, as it did before session 33.
#define GUESS_MAX_BYTES 0x4000u // rbp at most this far above sp (libunwind's bound)
static const rule_t guess_rule = {.cfa_off = 16,
                                  .bp_off = -16,
                                  .ra_off = -8,
                                  .flags = RULE_CFA_BP | RULE_BP_SAVED | RULE_GUESS};

static inline bool guess_ok(uint64_t sp, uint64_t bp, bool bp_ok) {
    return bp_ok && bp - sp <= GUESS_MAX_BYTES && !(bp & 7); // also catches bp < sp
}

static rule_t no_cfi_rule(uint64_t pc); // the guess, or a known trampoline's rule

static rule_t compute_rule(uint64_t pc) {
    module_t *m = module_for(pc);
    if (!m || !m->cfi)
        return no_cfi_rule(pc);
    Dwarf_Frame *frame;
    // pc is a return address: the call instruction, whose unwind state we need, ends before it
    if (dwarf_cfi_addrframe(m->cfi, pc - 1 - m->bias, &frame) != 0)
        return no_cfi_rule(pc);
    rule_t r = {0};
    Dwarf_Addr start, end;
    bool signal_frame = false;
    int ra_reg = dwarf_frame_info(frame, &start, &end, &signal_frame);
    Dwarf_Op *ops, mem[3];
    size_t nops;
    int64_t ra_off, bp_off;
    r.flags = RULE_UNSUPPORTED;
    if (ra_reg != 16 || signal_frame || dwarf_frame_cfa(frame, &ops, &nops) != 0)
        goto out;
    uint8_t flags = 0;
    int64_t cfa_off;
    if (plt_cfa(ops, nops, pc - 1, &cfa_off)) {
        // a PLT stub, evaluated for this very instruction: CFA = rsp + cfa_off
    } else if (nops != 1) {
        goto out;
    } else if (ops[0].atom == DW_OP_bregx && (ops[0].number == 6 || ops[0].number == 7)) {
        flags |= ops[0].number == 6 ? RULE_CFA_BP : 0;
        cfa_off = (int64_t)ops[0].number2;
    } else if (ops[0].atom == DW_OP_breg6 || ops[0].atom == DW_OP_breg7) {
        flags |= ops[0].atom == DW_OP_breg6 ? RULE_CFA_BP : 0;
        cfa_off = (int64_t)ops[0].number;
    } else {
        goto out;
    }
    if (cfa_off < INT32_MIN || cfa_off > INT32_MAX)
        goto out;
    r.cfa_off = (int32_t)cfa_off;
    int rc = dwarf_frame_register(frame, 16, mem, &ops, &nops);
    if (rc == 0 && !cfa_offset(ops, nops, &ra_off)) {
        r.flags = RULE_STOP; // return address "same value" or undefined: the outermost frame
        goto out;
    }
    if (rc != 0 || ra_off < INT8_MIN || ra_off > INT8_MAX) {
        r.flags = rc == 1 && nops == 0 ? RULE_STOP : RULE_UNSUPPORTED;
        goto out;
    }
    r.ra_off = (int8_t)ra_off;
    rc = dwarf_frame_register(frame, 6, mem, &ops, &nops);
    if (rc == 0 && nops == 0) {
        // same value: the caller's rbp is ours
    } else if (rc == 0 && cfa_offset(ops, nops, &bp_off) && bp_off >= INT16_MIN && bp_off <= INT16_MAX) {
        flags |= RULE_BP_SAVED;
        r.bp_off = (int16_t)bp_off;
    } else if (rc == 1 && nops == 0) {
        flags |= RULE_BP_LOST;
    } else {
        goto out;
    }
    r.flags = flags;
out:
    free(frame);
    return r;
}

static table_t *table_with_room(void) {
    table_t *t = atomic_load_explicit(&rules, memory_order_relaxed);
    if (t && (t->used + 1) * 2 <= t->mask + 1)
        return t;
    uint64_t n = t ? (t->mask + 1) * 2 : 1024;
    table_t *nt = hp_mem_map(sizeof *nt + n * sizeof(slot_t));
    if (!nt)
        return NULL;
    nt->mask = n - 1;
    HP_ASSERT(!(n & (n - 1)));
    for (uint64_t i = 0; t && i <= t->mask; i++) {
        uint64_t pc = atomic_load_explicit(&t->slots[i].pc, memory_order_relaxed);
        if (!pc)
            continue;
        uint64_t j = pc_hash(pc) & nt->mask;
        while (atomic_load_explicit(&nt->slots[j].pc, memory_order_relaxed))
            j = (j + 1) & nt->mask;
        nt->slots[j].rule = t->slots[i].rule;
        atomic_store_explicit(&nt->slots[j].pc, pc, memory_order_relaxed);
        nt->used++;
    }
    HP_ASSERT(!t || nt->used == t->used);
    atomic_store_explicit(&rules, nt, memory_order_release); // old tables stay mapped for readers
    return nt;
}

HP_NOINLINE HP_COLD static rule_t rule_slow(uint64_t pc) {
    hp_guard_cold_t g = hp_guard_cold_enter(); // the rule lock and libdw's: see guard.h
    pthread_mutex_lock(&lock);
    rule_t r = compute_rule(pc);
    table_t *t = table_with_room();
    if (t) {
        HP_ASSERT((t->used + 1) * 2 <= t->mask + 1); // a free slot ends every probe
        uint64_t j = pc_hash(pc) & t->mask;
        uint64_t k;
        while ((k = atomic_load_explicit(&t->slots[j].pc, memory_order_relaxed)) && k != pc)
            j = (j + 1) & t->mask;
        if (!k) {
            t->slots[j].rule = r;
            atomic_store_explicit(&t->slots[j].pc, pc, memory_order_release);
            t->used++;
        }
    }
    pthread_mutex_unlock(&lock);
    hp_guard_cold_leave(g);
    return r;
}

static inline rule_t rule_shared(uint64_t pc) {
    const table_t *t = atomic_load_explicit(&rules, memory_order_acquire);
    if (HP_LIKELY(t != NULL))
        for (uint64_t j = pc_hash(pc) & t->mask;; j = (j + 1) & t->mask) {
            uint64_t k = atomic_load_explicit(&t->slots[j].pc, memory_order_acquire);
            if (k == pc)
                return t->slots[j].rule;
            if (!k)
                break;
        }
    return rule_slow(pc);
}

// Whether rule r is the shared table's rule for pc, where the table has one (a check of
// HEAPPROF_DEBUG_FULL builds; unused, it costs nothing).
__attribute__((unused)) static bool rule_agrees(uint64_t pc, rule_t r) {
    const table_t *t = atomic_load_explicit(&rules, memory_order_acquire);
    for (uint64_t j = t ? pc_hash(pc) & t->mask : 0; t; j = (j + 1) & t->mask) {
        uint64_t k = atomic_load_explicit(&t->slots[j].pc, memory_order_acquire);
        if (k == pc)
            return !memcmp(&t->slots[j].rule, &r, sizeof r);
        if (!k)
            return true;
    }
    return true;
}

// cache: the thread's (may be NULL: no block, the shared table only).
static inline rule_t rule_for(tls_slot_t *cache, uint64_t pc) {
    if (HP_UNLIKELY(!cache))
        return rule_shared(pc);
    tls_slot_t *c = &cache[(pc ^ (pc >> 8)) & (TLS_RULES - 1)];
    if (HP_LIKELY(c->pc == pc)) {
        // the thread's copy agrees with the shared table, where rules never change
        HP_ASSERT_EXPENSIVE(rule_agrees(pc, c->rule));
        return c->rule;
    }
    rule_t r = rule_shared(pc);
    c->pc = pc;
    c->rule = r;
    return r;
}

// ---- the walk -----------------------------------------------------------------------------------
//
// Consecutive events of a thread usually share their outer frames. Each walk is logged: the state
// at every frame (sp, pc, rbp) and the stack memory each step read. When a new walk reaches a
// frame with the same sp and pc as a logged one (and the same rbp, if the rest of that walk
// depended on it), the rest of the old walk is valid if every memory word it read still holds
// the value it read then: the walk is a pure function of that state and those words. Checking
// them is one independent load per word instead of a dependent rule lookup and load per frame.
//
// The log keeps its frames outermost first, and the words each step read in the same order, so
// that the part a new walk shares with it is a prefix of both: a walk that joins it writes only
// its fresh frames after the shared ones (no copy of the shared frames, however the depth
// changed), and the check of the shared part is one pass over a prefix of the word list.

#define MAX_FRAME_BYTES (64u << 20) // one frame bigger than this means the walk went wrong
#define STEPS_MAX (HPT_MAX_FRAMES + 32)
#define WORDS_MAX (2 * STEPS_MAX) // a step reads the return address and at most the saved rbp
_Static_assert(WORDS_MAX % 4 == 0, "whole blocks of words");

enum step_flag {
    STEP_BP_OK = 1,     // rbp holds a known value here
    STEP_NEEDS_BP = 2,  // the walk from here on depends on this frame's rbp
    STEP_BP_READ = 4,   // the step to the caller read the caller's rbp from memory
};

// A logged frame.
typedef struct frame {
    uint64_t sp, pc, bp;
    // The words the walk from this frame outwards read: the log's words [0, wend). A frame's own
    // step adds the return address it read (none where the walk stopped without reading one)
    // and the caller's saved rbp where the caller's frame needs its rbp: code without frame
    // pointers keeps any value in rbp, so the word a callee saved it in changes from call to
    // call (the shim's own malloc keeps the size there) without changing the walk.
    uint16_t wend;
    uint8_t flags; // enum step_flag
} frame_t;

// A frame walked before it is known whether and where the walk joins the log. The values its
// step read are the next frame's pc and rbp (after the last frame, the state the walk ended in).
typedef struct fresh {
    uint64_t sp, pc, bp;
    uint64_t ra_addr; // 0: the step read no return address
    uint64_t bp_addr; // 0: the step read no rbp
    uint64_t flags, pad_[2]; // 64 bytes: st - fr is a shift
} fresh_t;

typedef struct ck_block {
    _Alignas(64) uint64_t addr[4];
    uint64_t val[4];
} ck_block_t;

typedef struct walk_log {
    uint32_t n;    // frames visited
    uint32_t own;  // innermost frames inside the shim (not reported)
    bool complete; // ended at the outermost frame (not cut short, not failed): it can be reused
    // The last walk's relation to the one before it, for hp_unwind.
    bool same;     // reported frames are exactly the previous walk's
    bool d_ok;     // joined at or past the previous walk's own frames
    bool one;      // the last walk that was not the same stack was one_fresh's case
    // d_fresh frames walked before the join, at reported frame d_base of the previous walk,
    // which had d_prev_reported (hp_unwind_delta_t)
    uint32_t d_fresh, d_base, d_prev_reported;
    frame_t f[STEPS_MAX]; // outermost first: f[n - 1] is where the walk started
    // The words read, outermost frame's first: where each was read and what it held, four to a
    // block (one cache line), so that the check loads two addresses and compares two values with
    // one SSE2 operation.
    ck_block_t ck[WORDS_MAX / 4];
} walk_log_t;

// A stack this thread walked before, kept whole beside the log: where the walk started, every
// word it read, and the id record.c gave the stack. A program that allocates from a few call
// sites in turn (cpp_mixed: a string, a map node, a vector's growth) walks again each time the
// log holds another site's stack; a snapshot whose start is this one and whose words are
// unchanged is that stack, with no walk (the walk is a function of its start and the words it
// read, as the log's own reuse is).
#define SNAP_SETS 16
#define SNAP_WAYS 2 // two stacks from one start, taken in turn, both kept
#define SNAP_WORDS 32
typedef struct snap {
    uint64_t sp, pc, bp;
    uint32_t id; // 0: empty
    uint16_t nb;   // blocks of words: the last one filled up with snap_pad
    uint8_t flags; // the start frame's (enum step_flag)
    ck_block_t ck[SNAP_WORDS / 4];
} snap_t;
typedef struct snap_set {
    snap_t way[SNAP_WAYS];
    uint8_t victim; // the way the next put replaces: not the one found or put last
    // Lookups that found nothing since the last that did. From SNAP_GIVE_UP on, the set is left
    // alone (no lookup, no copy) until the count wraps, then tried again: where more stacks
    // than ways share a start (c_churn: 64 paths into one leaf) a lookup and a copy a walk
    // would only add to each walk.
    uint8_t misses;
} snap_set_t;
#define SNAP_GIVE_UP 8

// The last page a thread's walk found unreadable, taken as such without asking again for the
// next NO_READ_SKIPS walks that reach it: a probe that faults costs the kernel a fault and an
// exception table search, ~1.5 us, and a coroutine whose stack ends in a stale frame has every
// walk reach the same page (tests/e2e/progs/coro_stale.c). Asked again after that, in case
// something readable was mapped there since; until then a walk may only end early.
#define NO_READ_SKIPS 64u
typedef struct no_read {
    uint64_t page;
    uint32_t skips;
} no_read_t;

// This backend's part of the thread's block (thread.h).
typedef struct cfi_thread {
    tls_slot_t rules[TLS_RULES];
    snap_set_t snaps[SNAP_SETS];
    walk_log_t log;
    fresh_t fresh[STEPS_MAX + 1];         // the walk's frames before the join, innermost first
    uint32_t check_last_n;                // check mode: the last stack reported
    uint64_t check_last[HPT_MAX_FRAMES];
    // The part of the thread's own stack known readable, [stack_lo, stack_hi): from the lowest
    // page a walk started on, checked page by page, up to the thread's top (own_stack_grow).
    // Both 0 until a walk that starts on the stack learns them.
    uint64_t stack_lo, stack_hi;
    no_read_t no_read; // the last page a walk off the stack found unreadable (grow_readable)
} cfi_thread_t;
_Static_assert(sizeof(cfi_thread_t) <= HP_UNWIND_THREAD_BYTES, "HP_UNWIND_THREAD_BYTES too small");
_Static_assert(_Alignof(cfi_thread_t) <= 64, "the block aligns its unwinder part to 64");
_Static_assert(WORDS_MAX <= UINT16_MAX, "frame_t.wend");

// One TLS load; the block's first member is ours (thread.h).
static inline cfi_thread_t *cfi_thread(void) {
    return (cfi_thread_t *)(void *)hp_tls_thread;
}

static inline uint64_t word_at(uint64_t addr) {
    return *(const uint64_t *)(uintptr_t)addr;
}

// ---- where a walk may read ----------------------------------------------------------------------
//
// A walk reads the words its rules point at on the live stack, with plain loads: a fault there
// kills the host. Rules only point above the frame's sp, so a walk is safe while it stays below
// the end of the readable memory above its start. On the thread's own stack that end is the
// thread's top (its thread control block, which glibc puts at the top of every stack block it
// hands a thread, or the main thread's initial stack pointer): everything between a frame and it
// is the stack, mapped for the thread's life. A walk that starts anywhere else (a coroutine's
// stack, as libco, Boost.Context, Ruby's fibers or a hand-written switch make; a signal stack)
// does not know where its memory ends: the word above a coroutine's entry frame is whatever the
// stack held, and a stale return address there sent the walk past the stack's end into the next
// stack's guard page (SIGSEGV; tests/e2e/progs/coro_stale.c). So every page above the part of
// the thread's stack already known readable is checked before the walk reads it.
//
// The check: rt_sigprocmask with an invalid `how` copies the new mask from the address first
// (EFAULT if it cannot be read, unmapped or PROT_NONE) and then refuses the call (EINVAL),
// changing nothing: ~140 ns on the 2-vCPU VM, a raw system call (no errno). mincore cannot tell
// a PROT_NONE guard page from a readable one; process_vm_readv costs 1.5 us and 0.45 a page.
#define PAGE_BYTES 4096u
// How far below the part of its stack already checked a walk's start is still taken for the
// thread's own stack (its pages checked once: deeper recursion), and how far above its start a
// walk elsewhere may read.
#define OWN_GROW_MAX (64ull << 20)
#define ELSEWHERE_MAX (1ull << 20)

static inline uint64_t page_of(uint64_t a) {
    return a & ~(uint64_t)(PAGE_BYTES - 1);
}

static long sigprocmask_probe(uint64_t addr) {
    register long set_size __asm__("r10") = 8; // the kernel's sigset_t
    long r;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "a"((long)SYS_rt_sigprocmask), "D"(-1L), "S"(addr), "d"(0L),
                       "r"(set_size)
                     : "rcx", "r11", "memory");
    return r;
}

// Whether the probe can be trusted here: a seccomp filter that refuses rt_sigprocmask would make
// every page look unreadable. Asked once, on a word known readable.
static _Atomic int probe_state; // 0 not asked yet, 1 works, 2 refused
static const uint64_t probe_known;

static bool probing(void) {
    int st = atomic_load_explicit(&probe_state, memory_order_relaxed);
    if (HP_UNLIKELY(!st)) {
        st = sigprocmask_probe((uint64_t)(uintptr_t)&probe_known) == -EINVAL ? 1 : 2;
        atomic_store_explicit(&probe_state, st, memory_order_relaxed);
    }
    return st == 1;
}

static bool page_readable(uint64_t page) {
    return sigprocmask_probe(page) == -EINVAL;
}

// CPython's perf trampoline (3.12 on, `python -X perf`), copied into anonymous memory once per
// Python function so that perf can name it: no CFI and no frame pointer, so the guess ends the
// walk there and every stack under Python code stopped at its first Python function. Its code
// is `sub $8, %rsp; call *%rcx; add $8, %rsp; ret`: a return address right after that call
// has CFA = rsp + 16, the return address under it, rbp untouched. Read once per return address
// (rules are cached), from pages checked readable: pc may be any word a walk found.
// Such a word can point anywhere readable, another thread's stack included (a CPU sample's
// stray frame): the bytes are read one by one through volatile loads, which another thread's
// writes can only make compare equal or not, and kept out of the sanitizers' view (their
// interceptors would report the race, ASan a read of another frame's redzone). A page unmapped
// between the probe and the read would fault: the window the walk's own probes have.
__attribute__((no_sanitize_address, no_sanitize_thread)) static bool
code_is(uint64_t at, const uint8_t *want, size_t n) {
    const volatile uint8_t *p = (const volatile uint8_t *)(uintptr_t)at;
    for (size_t i = 0; i < n; i++)
        if (p[i] != want[i])
            return false;
    return true;
}

static bool py_trampoline_at(uint64_t pc) {
    static const uint8_t py_trampoline_call[] = {0x48, 0x83, 0xec, 0x08, 0xff, 0xd1};
    const uint64_t at = pc - sizeof py_trampoline_call;
    return pc >= sizeof py_trampoline_call && probing() && page_readable(page_of(at)) &&
           (page_of(pc - 1) == page_of(at) || page_readable(page_of(pc - 1))) &&
           code_is(at, py_trampoline_call, sizeof py_trampoline_call);
}

static rule_t no_cfi_rule(uint64_t pc) {
    if (py_trampoline_at(pc))
        return (rule_t){.cfa_off = 16, .ra_off = -8};
    return guess_rule;
}

// Moves *lim (a page boundary) up page by page, each checked readable, until it passes end;
// false at the first page that is not, or at cap. no (NULL in a signal handler): the thread's
// last unreadable page.
HP_NOINLINE static bool grow_readable(uint64_t *lim, uint64_t cap, uint64_t end, no_read_t *no) {
    while (*lim < end) {
        if (*lim >= cap)
            return false;
        if (no && no->page == *lim && no->skips < NO_READ_SKIPS) {
            no->skips++;
            return false;
        }
        if (!page_readable(*lim)) {
            if (no)
                *no = (no_read_t){.page = *lim, .skips = 0};
            return false;
        }
        *lim += PAGE_BYTES;
    }
    return true;
}

// Whether a walk may read the word at addr: inside [base, *lim), known readable, or (a walk
// off the thread's stack, cap above *lim) on pages above it checked now. *lim - base >= 8.
static inline bool may_read(uint64_t base, uint64_t *lim, uint64_t cap, uint64_t addr,
                            no_read_t *no) {
    if (HP_LIKELY(addr - base <= *lim - base - 8))
        return true;
    return addr >= base && grow_readable(lim, cap, addr + 8, no);
}

extern void *__libc_stack_end; // glibc: the main thread's stack pointer when the program started

// The end of the main thread's stack: from its initial stack pointer's page up to the first page
// that cannot be read (the arguments, environment and auxiliary vector lie above that pointer,
// in the same mapping), at most MAIN_TOP_MAX above it. Frames may lie above the initial pointer
// too: a test runner's, started on the stack's unused top. Once a process (a fork keeps it).
#define MAIN_TOP_MAX (2ull << 20)
static uint64_t main_stack_top(bool checked) {
    static _Atomic uint64_t known;
    uint64_t top = atomic_load_explicit(&known, memory_order_relaxed);
    if (top)
        return top;
    const uint64_t start = (uint64_t)(uintptr_t)__libc_stack_end;
    top = page_of(start) + PAGE_BYTES;
    if (checked)
        while (top - start < MAIN_TOP_MAX && page_readable(top))
            top += PAGE_BYTES;
    atomic_store_explicit(&known, top, memory_order_relaxed);
    return top;
}

// Whether the pages [from, to) can all be read now.
static bool pages_readable(uint64_t from, uint64_t to) {
    for (uint64_t p = from; p < to; p += PAGE_BYTES)
        if (!page_readable(p))
            return false;
    return true;
}

// Whether sp is on the thread's own stack, and if so moves the part known readable down to sp's
// page. The stack's top is learnt on the first walk that starts on it: the thread's control
// block (pthread_self), which glibc puts at the top of every stack block it gives a thread (its
// own or one the program passed), or for the main thread the end of the readable pages from its
// initial stack pointer up (main_stack_top); a walk from sp is on the stack below one of them
// when every page between is readable. A walk elsewhere (a coroutine) stops at the first page
// that is not: no guard page or gap lies inside a stack, and one lies below every thread's
// stack. Until a walk has started on it, each walk asks again; afterwards a start below the
// known part checks only its new pages (deeper recursion). A signal handler may read the span
// meanwhile (hp_unwind_signal): stack_lo is written before stack_hi, and only lowered. Cold:
// once a thread, and once a page of new depth.
HP_NOINLINE HP_COLD static bool own_stack_grow(cfi_thread_t *ct, uint64_t sp) {
    const uint64_t from = page_of(sp);
    const bool checked = probing(); // else tops are trusted as they are (no check)
    if (!ct->stack_hi) {
        const uint64_t tops[2] = {(uint64_t)pthread_self(), main_stack_top(checked)};
        for (int k = 0; k < 2; k++) {
            uint64_t top = tops[k];
            if (top <= sp || top - from > OWN_GROW_MAX || top - from < 64)
                continue;
            if (checked && !pages_readable(from, top))
                continue;
            ct->stack_lo = from;
            atomic_signal_fence(memory_order_seq_cst);
            ct->stack_hi = top;
            return true;
        }
        return false;
    }
    // here sp < stack_lo or sp >= stack_hi: the caller's check failed
    const uint64_t hi = ct->stack_hi, lo = ct->stack_lo;
    if (sp >= hi || lo - from > OWN_GROW_MAX)
        return false;
    if (checked && !pages_readable(from, lo))
        return false;
    ct->stack_lo = from;
    return true;
}

static inline void word_set(walk_log_t *w, uint32_t k, uint64_t addr, uint64_t val) {
    w->ck[k >> 2].addr[k & 3] = addr;
    w->ck[k >> 2].val[k & 3] = val;
}

static inline bool word_changed(const walk_log_t *w, uint32_t k) {
    return word_at(w->ck[k >> 2].addr[k & 3]) != w->ck[k >> 2].val[k & 3];
}

// Whether any of the words 0..nw no longer holds the value it held: no branch per word, two
// words per SSE2 register (movsd, movhpd), a block of four a round: ~3.75 instructions a word,
// where the loop over frames (two words a frame, one of them maybe a constant) took ~4.75.
static inline uint64_t blocks_differ(const ck_block_t *b, const ck_block_t *end) {
    __m128i acc0 = _mm_setzero_si128(), acc1 = _mm_setzero_si128();
    for (; b < end; b++) {
        __m128d x = _mm_loadh_pd(_mm_load_sd((const double *)(uintptr_t)b->addr[0]),
                                 (const double *)(uintptr_t)b->addr[1]);
        __m128d y = _mm_loadh_pd(_mm_load_sd((const double *)(uintptr_t)b->addr[2]),
                                 (const double *)(uintptr_t)b->addr[3]);
        acc0 = _mm_or_si128(acc0, _mm_xor_si128(_mm_castpd_si128(x),
                                                _mm_load_si128((const __m128i *)&b->val[0])));
        acc1 = _mm_or_si128(acc1, _mm_xor_si128(_mm_castpd_si128(y),
                                                _mm_load_si128((const __m128i *)&b->val[2])));
    }
    acc0 = _mm_or_si128(acc0, acc1);
    return (uint64_t)_mm_cvtsi128_si64(acc0) |
           (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(acc0, acc0));
}

static inline bool words_changed(const walk_log_t *w, uint32_t nw) {
    const ck_block_t *end = w->ck + (nw >> 2);
    uint64_t changed = blocks_differ(w->ck, end);
    for (uint32_t k = 0; k < (nw & 3); k++)
        changed |= word_at(end->addr[k]) ^ end->val[k];
    return changed != 0;
}

// What the last block of a stack's words holds past them (the log's, a snapshot's): a word of
// ours that never changes, so that the whole stack is checked in whole blocks, with no loop
// over the last few words (c_churn's unchanged stack: ~18 instructions a malloc of ~160).
static const uint64_t snap_pad;

static inline void pad_last_block(ck_block_t *ck, uint32_t nw) {
    for (uint32_t k = nw & 3; k && k < 4; k++) {
        ck[nw >> 2].addr[k] = (uint64_t)(uintptr_t)&snap_pad;
        ck[nw >> 2].val[k] = 0;
    }
}

// Whether any word of the whole logged stack changed: its last block padded (pad_last_block).
static inline bool stack_changed(const walk_log_t *w) {
    return blocks_differ(w->ck, w->ck + ((w->f[w->n - 1].wend + 3u) >> 2)) != 0;
}

// Whether the logged frames [0, c] read only words that still hold what they held: the words
// [0, f[c].wend). Every frame from *bad on is known not to (a frame's words include all its
// outer frames'), and a walk stops at the first join that passes, so it checks one prefix per
// join it tries, with no search for the changed word.
static inline bool frames_valid(const walk_log_t *w, int32_t c, int32_t *bad) {
    if (c >= *bad)
        return false;
    if (words_changed(w, w->f[c].wend)) {
        *bad = c;
        return false;
    }
    return true;
}

// Whether the walk from `from` starts where the logged one did, in a state that makes the rest
// of it the same as far as the words it read are the same.
static inline bool same_start(const walk_log_t *w, const hp_frame_t *from) {
    if (!w->complete || !w->n)
        return false;
    const frame_t *t = &w->f[w->n - 1];
    return t->sp == from->sp && t->pc == from->pc &&
           (!(t->flags & STEP_NEEDS_BP) || (t->bp == from->bp && (t->flags & STEP_BP_OK)));
}

static inline snap_set_t *snap_set(cfi_thread_t *ct, const hp_frame_t *from) {
    uint64_t h = (from->pc ^ (from->sp << 7)) * 0x9e3779b97f4a7c15ull;
    return &ct->snaps[h >> (64 - 4)];
}
_Static_assert(SNAP_SETS == 16, "snap_set takes 4 bits");

static inline bool snap_starts(const snap_t *s, const hp_frame_t *from) {
    return s->sp == from->sp && s->pc == from->pc && s->id &&
           (!(s->flags & STEP_NEEDS_BP) || (s->bp == from->bp && (s->flags & STEP_BP_OK)));
}

// The id of the snapshot that is the stack from `from`, or 0.
static inline uint32_t snap_find(cfi_thread_t *ct, const hp_frame_t *from) {
    snap_set_t *set = snap_set(ct, from);
    if (HP_UNLIKELY(set->misses >= SNAP_GIVE_UP)) {
        set->misses++; // uint8_t: wraps to 0 after 248 skipped lookups
        return 0;
    }
    for (uint32_t k = 0; k < SNAP_WAYS; k++) {
        const snap_t *s = &set->way[k];
        if (snap_starts(s, from) && !blocks_differ(s->ck, s->ck + s->nb)) {
            set->victim = (uint8_t)(k ^ 1);
            set->misses = 0;
            return s->id;
        }
    }
    set->misses++;
    return 0;
}
_Static_assert(SNAP_WAYS == 2, "victim flips between two ways");

// Walks from frame `from`, reusing the logged walk's outer frames where it can, and leaves the
// new walk in the log (with same, d_*). Returns false when a frame needs the full unwinder (the
// log is then left as it was).
static bool walk(const hp_frame_t *from, cfi_thread_t *ct, uint64_t base, uint64_t lim,
                 uint64_t cap) {
    walk_log_t *w = &ct->log;
    fresh_t *fr = ct->fresh;
    tls_slot_t *rules_cache = ct->rules;
    uint64_t pc = from->pc, sp = from->sp, bp = from->bp;
    bool bp_ok = true, complete = true, any_needs = false;
    uint32_t i = 0, own = 0;
    const uint32_t n = w->n;
    // just past the logged frame the walk may join (lo: none)
    const frame_t *const lo = w->f, *ce = w->complete ? lo + n : lo;
    int32_t bad = (int32_t)n; // frames_valid's bound
    fresh_t *st = fr, *const st_end = fr + STEPS_MAX;
    bool joined = false;
    for (;;) {
        while (ce != lo && ce[-1].sp < sp)
            ce--;
        if (ce != lo && ce[-1].sp == sp && ce[-1].pc == pc &&
            (!(ce[-1].flags & STEP_NEEDS_BP) ||
             (ce[-1].bp == bp && (ce[-1].flags & STEP_BP_OK) == (bp_ok ? STEP_BP_OK : 0))) &&
            (uint32_t)(ce - lo) + (uint32_t)(st - fr) <= STEPS_MAX &&
            frames_valid(w, (int32_t)(ce - lo) - 1, &bad)) {
            joined = true;
            break;
        }
        if (st == st_end) {
            complete = false;
            break;
        }
        st->sp = sp;
        st->pc = pc;
        st->bp = bp;
        uint64_t fl = bp_ok ? STEP_BP_OK : 0;
        rule_t r = rule_for(rules_cache, pc);
        uint64_t cfa;
        if (HP_LIKELY(!(r.flags & (RULE_STOP | RULE_UNSUPPORTED | RULE_CFA_BP | RULE_BP_LOST)))) {
            cfa = sp + (uint64_t)(int64_t)r.cfa_off;
        } else {
            if ((r.flags & RULE_STOP) ||
                ((r.flags & RULE_GUESS) && !guess_ok(sp, bp, bp_ok))) {
                if (r.flags & RULE_GUESS) { // the end depends on rbp: a join must compare it
                    fl |= STEP_NEEDS_BP;
                    any_needs = true;
                }
                st->ra_addr = st->bp_addr = 0;
                st->flags = fl;
                st++;
                break;
            }
            if ((r.flags & RULE_UNSUPPORTED) || ((r.flags & RULE_CFA_BP) && !bp_ok))
                return false;
            cfa = ((r.flags & RULE_CFA_BP) ? bp : sp) + (uint64_t)(int64_t)r.cfa_off;
            if (r.flags & RULE_CFA_BP) {
                fl |= STEP_NEEDS_BP;
                any_needs = true;
            }
            if (r.flags & RULE_BP_LOST)
                bp_ok = false;
        }
        uint64_t ra_addr = cfa + (uint64_t)(int64_t)r.ra_off, bp_addr = 0;
        if (r.flags & RULE_BP_SAVED)
            bp_addr = cfa + (uint64_t)(int64_t)r.bp_off;
        // also catches cfa <= sp; past the readable part: not a frame of this stack
        if (cfa - sp - 1 >= MAX_FRAME_BYTES || (cfa & 7) ||
            HP_UNLIKELY(!may_read(base, &lim, cap, ra_addr, &ct->no_read)) ||
            (bp_addr && HP_UNLIKELY(!may_read(base, &lim, cap, bp_addr, &ct->no_read)))) {
            st->ra_addr = st->bp_addr = 0;
            st->flags = fl;
            st++;
            break;
        }
        pc = word_at(ra_addr);
        if (bp_addr) {
            bp = word_at(bp_addr);
            bp_ok = true;
            fl |= STEP_BP_READ;
        }
        st->ra_addr = ra_addr;
        st->bp_addr = bp_addr;
        st->flags = fl;
        st++;
        sp = cfa;
        if (pc == 0)
            break;
    }
    // where the last step went: the values the words it read held
    st->pc = pc;
    st->bp = bp;
    i = (uint32_t)(st - fr);
    // The innermost fresh frames inside the shim (tested here, not at each step: only the first
    // ever is, where the walk starts in the shim)
    while (own < i && fr[own].pc - self_lo < self_hi - self_lo)
        own++;
    // What the new walk is to the logged one, before the log becomes the new walk.
    uint32_t m = joined ? (uint32_t)(ce - lo) : 0; // logged frames kept: the shared ones
    uint32_t jin = n - m;                      // the join, counted from the logged walk's start
    w->same = joined && own == i && jin <= w->own && complete;
    w->d_ok = joined && jin >= w->own && complete;
    w->d_fresh = i;
    w->d_base = jin - w->own;
    w->d_prev_reported = n - w->own;
    if (joined && own == i && w->own > jin)
        own = i + (w->own - jin); // the shim's frames continue into the shared part
    // The fresh frames after the shared ones, outermost first, each with the words its step
    // read. Which frames' rbp the rest of the walk depends on: a frame that takes its CFA from
    // rbp, or passes rbp on unchanged to one that does. Shared frames keep their flags.
    HP_ASSERT(m + i <= STEPS_MAX);
    bool needs = m && (w->f[m - 1].flags & STEP_NEEDS_BP);
    uint32_t nw = m ? w->f[m - 1].wend : 0;
    frame_t *d = &w->f[m];
    if (HP_LIKELY(joined && !needs && !any_needs)) {
        // The common case, code that keeps no frame pointer or does not unwind by it: no frame
        // needs its rbp, each step adds the return address it read (a joined walk's every
        // step read one) and keeps its flags.
        for (uint32_t k = i; k-- > 0; d++) {
            const fresh_t *f = &fr[k];
            HP_ASSERT(f->ra_addr && !(f->flags & STEP_NEEDS_BP));
            word_set(w, nw++, f->ra_addr, f[1].pc);
            d->sp = f->sp;
            d->pc = f->pc;
            d->bp = f->bp;
            d->flags = (uint8_t)f->flags;
            d->wend = (uint16_t)nw;
        }
    } else {
        for (uint32_t k = i; k-- > 0; d++) {
            const fresh_t *f = &fr[k];
            if (f->ra_addr) {
                word_set(w, nw++, f->ra_addr, f[1].pc);
            }
            if (f->bp_addr && needs) { // the caller (outer neighbour) uses the rbp read
                word_set(w, nw++, f->bp_addr, f[1].bp);
            }
            uint8_t fl = (uint8_t)f->flags;
            if (fl & STEP_NEEDS_BP)
                needs = true;
            else if (fl & STEP_BP_READ)
                needs = false; // the caller's rbp comes from memory, checked on reuse
            if (needs)
                fl |= STEP_NEEDS_BP;
            d->sp = f->sp;
            d->pc = f->pc;
            d->bp = f->bp;
            d->flags = fl;
            d->wend = (uint16_t)nw;
        }
    }
    HP_ASSERT(nw <= WORDS_MAX);
    pad_last_block(w->ck, nw);
    w->n = m + i;
    w->own = own;
    w->complete = complete;
    HP_ASSERT(w->n <= STEPS_MAX && own <= w->n);
    return true;
}

// ---- backend selection --------------------------------------------------------------------------

static _Atomic uint64_t n_checked, n_differ, n_same, n_steps, n_snaps, n_past;

bool hp_unwind_check_cut_short(const uint64_t *ref, uint32_t m) {
    return m && py_trampoline_at(ref[m - 1]);
}

void hp_unwind_check_past(void) {
    atomic_fetch_add_explicit(&n_checked, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&n_past, 1, memory_order_relaxed);
}

// HEAPPROF_UNWIND=check: compares with libunwind, and a "same as last" verdict with the last stack.
// Where libunwind ends at a CPython trampoline (no_cfi_rule) the walk goes on: its frames up to
// there must be libunwind's.
HP_NOINLINE HP_COLD static void check_against_libunwind(cfi_thread_t *ct, const uint64_t *out,
                                                        uint32_t n, uint32_t max, bool same) {
    uint64_t ref[HPT_MAX_FRAMES];
    uint32_t m = hp_unwind_libunwind(ref, max);
    bool past = m < n && !memcmp(ref, out, m * sizeof *out) && hp_unwind_check_cut_short(ref, m);
    if (past)
        atomic_fetch_add_explicit(&n_past, 1, memory_order_relaxed);
    bool differ = !past && (m != n || memcmp(ref, out, n * sizeof *out));
    if (same)
        differ |= m != ct->check_last_n || memcmp(ref, ct->check_last, m * sizeof *ref);
    memcpy(ct->check_last, ref, m * sizeof *ref);
    ct->check_last_n = m;
    atomic_fetch_add_explicit(&n_checked, 1, memory_order_relaxed);
    if (same)
        atomic_fetch_add_explicit(&n_same, 1, memory_order_relaxed);
    if (differ)
        atomic_fetch_add_explicit(&n_differ, 1, memory_order_relaxed);
}

// The n frames a log reports, innermost first: its own frames (inside the shim) dropped.
static inline void report_frames(const walk_log_t *w, uint64_t *out, uint32_t n) {
    HP_ASSERT(w->own + n <= w->n && n <= HPT_MAX_FRAMES);
    const frame_t *f = &w->f[w->n - 1 - w->own];
    for (uint32_t k = 0; k < n; k++)
        out[k] = f[-(int32_t)k].pc;
}

static inline uint32_t reported(const walk_log_t *w, uint32_t max) {
    return w->n - w->own < max ? w->n - w->own : max;
}

// One fresh frame on the logged walk's outer frames: the caller is another call site (or another
// function) whose own caller is the logged walk's second frame, in the same state. That is
// what the general walk finds after one step (it cannot join before it: same_start failed, or
// the words changed and the first frame is no longer valid), written for that case alone: no
// bookkeeping for longer fresh runs, other depths or the shim's frames, which go the general
// way. Fills *delta for record.c's known steps and returns the frame count, or 0 where the
// general walk must decide. ~60% of allocations on rust_hashmap_growth and cpp_mixed.
static inline uint32_t one_fresh(cfi_thread_t *ct, const hp_frame_t *from, uint32_t max,
                                 hp_unwind_delta_t *delta, uint64_t base, uint64_t lim) {
    walk_log_t *w = &ct->log;
    const uint32_t n = w->n;
    const uint64_t pc = from->pc, sp = from->sp;
    if (!w->one || !w->complete || n < 2 || w->own || n > max ||
        pc - self_lo < self_hi - self_lo)
        return 0;
    rule_t r = rule_for(ct->rules, pc);
    if (r.flags & (RULE_STOP | RULE_UNSUPPORTED | RULE_CFA_BP | RULE_BP_LOST))
        return 0;
    uint64_t cfa = sp + (uint64_t)(int64_t)r.cfa_off;
    frame_t *o = &w->f[n - 2];
    if (o->sp != cfa || cfa - sp - 1 >= MAX_FRAME_BYTES || (cfa & 7))
        return 0;
    uint64_t ra_addr = cfa + (uint64_t)(int64_t)r.ra_off;
    uint64_t bp = from->bp, bp_addr = 0;
    if (r.flags & RULE_BP_SAVED)
        bp_addr = cfa + (uint64_t)(int64_t)r.bp_off;
    if (!may_read(base, &lim, 0, ra_addr, NULL) ||
        (bp_addr && !may_read(base, &lim, 0, bp_addr, NULL)))
        return 0;
    uint64_t ra = word_at(ra_addr);
    uint8_t fl = STEP_BP_OK; // the walk starts with a known rbp, and no rule here loses it
    if (bp_addr) {
        bp = word_at(bp_addr);
        fl |= STEP_BP_READ;
    }
    bool needs = o->flags & STEP_NEEDS_BP;
    if (o->pc != ra || (needs && (o->bp != bp || !(o->flags & STEP_BP_OK))) ||
        words_changed(w, o->wend))
        return 0;
    // joined: the first frame replaced, as the general walk would write it
    uint32_t nw = o->wend;
    word_set(w, nw++, ra_addr, ra);
    if (bp_addr && needs) {
        word_set(w, nw++, bp_addr, bp);
    }
    if (needs && !(fl & STEP_BP_READ))
        fl |= STEP_NEEDS_BP;
    frame_t *t = &w->f[n - 1];
    t->sp = sp;
    t->pc = pc;
    t->bp = from->bp;
    t->flags = fl;
    t->wend = (uint16_t)nw;
    pad_last_block(w->ck, nw);
    delta->valid = true;
    delta->base = 1;
    delta->n_fresh = 1;
    delta->fresh[0] = pc;
    return n;
}

// Everything but the unchanged stack: the walk, the join, the delta. Reads only [base, lim), and
// pages above it up to cap checked as it goes (may_read).
HP_NOINLINE static uint32_t unwind_walk(cfi_thread_t *ct, const hp_frame_t *from, uint64_t *out,
                                        uint32_t max, bool *same_as_last,
                                        hp_unwind_delta_t *delta, uint64_t base, uint64_t lim,
                                        uint64_t cap) {
    walk_log_t *w = &ct->log;
    uint32_t n = one_fresh(ct, from, max, delta, base, lim);
    if (n)
        return n;
    if (HP_UNLIKELY(!walk(from, ct, base, lim, cap))) {
        w->complete = false; // the log no longer describes the last stack reported
        return hp_unwind_libunwind(out, max);
    }
    // Whether the next walk tries one_fresh first: where this one was its case (it failed on
    // a changed word, or was not tried). Where stacks change by more than one frame (cpp_mixed:
    // two to four at a time) every try failed after its step, ~35 instructions a malloc.
    w->one = w->d_ok && w->d_fresh == 1 && w->d_base == 1 && !w->own;
    n = reported(w, max);
    *same_as_last = w->same;
    if (w->same && hp_config.unwinder != HP_UNWIND_CHECK)
        return n;
    // A few new frames on the previous stack, neither cut at max: the caller may know the stack
    // from the last time it made this step (record.c), without the frames.
    if (!w->same && w->d_ok && w->d_prev_reported <= max && w->n - w->own <= max &&
        w->d_fresh >= w->own && w->d_fresh - w->own <= HP_DELTA_FRESH_MAX) {
        delta->valid = true;
        delta->base = w->d_base;
        delta->n_fresh = w->d_fresh - w->own;
        // the fresh frames and the previous stack's from base on make the whole stack
        HP_ASSERT(delta->base <= w->d_prev_reported && delta->n_fresh <= n);
        for (uint32_t k = 0; k < delta->n_fresh; k++)
            delta->fresh[k] = ct->fresh[w->own + k].pc;
        return n;
    }
    report_frames(w, out, n);
    if (HP_UNLIKELY(hp_config.unwinder == HP_UNWIND_CHECK))
        check_against_libunwind(ct, out, n, max, w->same);
    return n;
}

// A walk that does not start on the thread's own stack (a coroutine's, a signal stack): each
// page it reads checked first, up to ELSEWHERE_MAX above its start. The stack it is on may be
// gone by the next walk, so nothing of it is reused: the log it leaves is marked incomplete (no
// later walk joins it, no snapshot is taken of it). ~140 ns a page read, on top of a whole walk.
HP_NOINLINE static uint32_t unwind_elsewhere(cfi_thread_t *ct, const hp_frame_t *from,
                                             uint64_t *out, uint32_t max, bool *same_as_last,
                                             hp_unwind_delta_t *delta) {
    walk_log_t *w = &ct->log;
    w->complete = false;
    w->one = false;
    if (!probing())
        return 0; // nothing can be read safely: the event has no stack
    // The page of the return address the entry point read (HP_CALLER_FRAME) needs no check.
    const uint64_t base = page_of(from->sp - 8);
    uint32_t n = unwind_walk(ct, from, out, max, same_as_last, delta, base, base + PAGE_BYTES,
                             from->sp + ELSEWHERE_MAX);
    w->complete = false;
    return n;
}

// HEAPPROF_UNWIND=check, the stack unchanged: the frames, checked.
HP_NOINLINE HP_COLD static uint32_t check_same(cfi_thread_t *ct, uint64_t *out, uint32_t max) {
    uint32_t n = reported(&ct->log, max);
    report_frames(&ct->log, out, n);
    check_against_libunwind(ct, out, n, max, true);
    return n;
}

uint32_t hp_unwind(const hp_frame_t *from, uint64_t *out, uint32_t max, bool *same_as_last,
                   hp_unwind_delta_t *delta, uint32_t *snap_id) {
    *same_as_last = false;
    delta->valid = false;
    *snap_id = 0;
    cfi_thread_t *ct = cfi_thread();
    HP_ASSERT(max <= HPT_MAX_FRAMES); // out, and the check's copy of the last stack
    // No block: the thread gave it back at its exit and a later TLS destructor allocates, or
    // memory ran out. libunwind needs no state of ours.
    uint32_t mode = hp_config.unwinder;
    if (HP_UNLIKELY(mode == HP_UNWIND_LIBUNWIND || !ct))
        return hp_unwind_libunwind(out, max);
    // The common case first: the same caller at the same depth as last time, and nothing the
    // logged walk read has changed. No call, no write to the log. A complete log, and every
    // snapshot, was walked from a start on this thread's own stack (unwind_elsewhere leaves
    // neither), so a walk that starts where one did is on it too, and every word they read is
    // still there: neither needs the check below.
    walk_log_t *w = &ct->log;
    if (HP_LIKELY(same_start(w, from)) && HP_LIKELY(!stack_changed(w))) {
        *same_as_last = true;
        if (HP_UNLIKELY(mode == HP_UNWIND_CHECK))
            return check_same(ct, out, max);
        return reported(w, max);
    }
    if ((*snap_id = snap_find(ct, from)) != 0)
        return 0; // with HEAPPROF_UNWIND=check, record.c checks it against libunwind
    // Off the part of the thread's stack known readable: a deeper start on it (checked), or
    // another stack altogether.
    if (HP_UNLIKELY(from->sp - ct->stack_lo >= ct->stack_hi - ct->stack_lo) &&
        !own_stack_grow(ct, from->sp))
        return unwind_elsewhere(ct, from, out, max, same_as_last, delta);
    return unwind_walk(ct, from, out, max, same_as_last, delta, ct->stack_lo, ct->stack_hi, 0);
}

void hp_unwind_forget_snaps(void) {
    cfi_thread_t *ct = cfi_thread();
    if (ct)
        memset(ct->snaps, 0, sizeof ct->snaps);
}

void hp_unwind_snap_put(const hp_frame_t *from, uint32_t id) {
    cfi_thread_t *ct = cfi_thread();
    if (HP_UNLIKELY(!ct))
        return;
    const walk_log_t *w = &ct->log;
    if (!same_start(w, from)) // the log is not this stack (libunwind took it, or it was cut)
        return;
    const frame_t *t = &w->f[w->n - 1];
    uint32_t nw = t->wend;
    if (nw > SNAP_WORDS)
        return;
    snap_set_t *set = snap_set(ct, from);
    if (set->misses >= SNAP_GIVE_UP)
        return;
    snap_t *s = &set->way[set->victim];
    set->victim ^= 1;
    s->sp = t->sp;
    s->pc = t->pc;
    s->bp = t->bp;
    s->flags = t->flags;
    s->nb = (uint16_t)((nw + 3) >> 2);
    s->id = id;
    memcpy(s->ck, w->ck, s->nb * sizeof *s->ck); // the log's last block is padded already
}

uint32_t hp_unwind_frames(uint64_t *out, uint32_t max) {
    cfi_thread_t *ct = cfi_thread();
    if (HP_UNLIKELY(!ct)) // cannot happen after a walk that set *delta; never read a NULL block
        return hp_unwind_libunwind(out, max);
    const walk_log_t *w = &ct->log;
    uint32_t n = reported(w, max);
    report_frames(w, out, n);
    if (HP_UNLIKELY(hp_config.unwinder == HP_UNWIND_CHECK))
        check_against_libunwind(ct, out, n, max, false);
    return n;
}

void hp_unwind_check_verdict(bool agree) {
    atomic_fetch_add_explicit(&n_steps, 1, memory_order_relaxed);
    if (!agree)
        atomic_fetch_add_explicit(&n_differ, 1, memory_order_relaxed);
}

void hp_unwind_check_snapshot(bool agree) {
    atomic_fetch_add_explicit(&n_checked, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&n_snaps, 1, memory_order_relaxed);
    if (!agree)
        atomic_fetch_add_explicit(&n_differ, 1, memory_order_relaxed);
}

void hp_unwind_report(void) {
    if (hp_config.unwinder != HP_UNWIND_CHECK)
        return;
    char a[21], b[21], c[21], d[21], e[21], f[21];
    uint64_t past = atomic_load_explicit(&n_past, memory_order_relaxed);
    hp_diag_line("unwinder check: ", hp_diag_u64(a, n_checked), " stacks, ",
                 hp_diag_u64(b, n_differ), " differ from libunwind (", hp_diag_u64(c, n_same),
                 " found unchanged, ", hp_diag_u64(d, n_steps), " by a known step, ",
                 hp_diag_u64(e, n_snaps), " by a snapshot)",
                 past ? "; " : "", past ? hp_diag_u64(f, past) : "",
                 past ? " went on where libunwind stops, at a CPython trampoline" : "",
                 (char *)NULL);
}

// ---- walking a copied stack (CPU samples) --------------------------------------------------------

static bool copy_load(const uint8_t *stack, uint64_t sp0, uint64_t len, uint64_t addr,
                      uint64_t *v) {
    if (addr < sp0 || len < 8 || addr - sp0 > len - 8)
        return false; // outside the copy: refused, never read from the live stack
    memcpy(v, stack + (addr - sp0), sizeof *v);
    return true;
}

// The CFA of the frame rule r describes, walking from registers sp and bp (CPU samples), or 0
// where the walk must stop. Clears *bp_ok when the frame loses rbp.
static inline uint64_t sample_cfa(rule_t r, uint64_t sp, uint64_t bp, bool *bp_ok) {
    if (r.flags & (RULE_STOP | RULE_UNSUPPORTED))
        return 0;
    if ((r.flags & RULE_CFA_BP) && !*bp_ok)
        return 0;
    if ((r.flags & RULE_GUESS) && !guess_ok(sp, bp, *bp_ok))
        return 0;
    uint64_t cfa = ((r.flags & RULE_CFA_BP) ? bp : sp) + (uint64_t)(int64_t)r.cfa_off;
    if (r.flags & RULE_BP_LOST)
        *bp_ok = false;
    if (cfa - sp - 1 >= MAX_FRAME_BYTES || (cfa & 7)) // also catches cfa <= sp
        return 0;
    return cfa;
}

// The shared table only: no thread cache (the interrupted code may be using it), no libdw.
// Sets *missing and returns a STOP rule when pc has no rule yet.
static rule_t rule_known(uint64_t pc, bool *missing) {
    const table_t *t = atomic_load_explicit(&rules, memory_order_acquire);
    if (t)
        for (uint64_t j = pc_hash(pc) & t->mask;; j = (j + 1) & t->mask) {
            uint64_t k = atomic_load_explicit(&t->slots[j].pc, memory_order_acquire);
            if (k == pc)
                return t->slots[j].rule;
            if (!k)
                break;
        }
    *missing = true;
    return (rule_t){.flags = RULE_STOP};
}

// The walk of a CPU sample, for both of its sources. from_copy (stack[0..len) from sp up):
// rules computed as needed, memory read only inside the copy. Without (a signal handler on the
// live stack): rules from the shared table only, the first pc without one ends the walk and is
// left in *want_pc. Inlined into each caller, so each gets its own straight loop.
static inline __attribute__((always_inline)) uint32_t
walk_sample(bool from_copy, uint64_t ip, uint64_t sp, uint64_t bp, const uint8_t *stack,
            uint64_t len, uint64_t *out, uint32_t max, uint64_t *want_pc) {
    const uint64_t sp0 = sp;
    // A rule is keyed by a return address and describes pc - 1; keying the interrupted ip as
    // ip + 1 gets the rule at ip itself, which is what the innermost frame needs.
    uint64_t pc = ip + 1;
    bool bp_ok = true;
    uint32_t n = 0;
    cfi_thread_t *ct = from_copy ? cfi_thread() : NULL; // never touched from a signal handler
    tls_slot_t *cache = ct ? ct->rules : NULL;
    // The live stack (a signal handler): read inside the part of the thread's stack known
    // readable (read, never written here: own_stack_grow orders its writes for this), or else
    // on pages checked as the walk reaches them (may_read).
    uint64_t base = 0, lim = 0, cap = 0;
    if (!from_copy) {
        const cfi_thread_t *own = cfi_thread();
        uint64_t lo = own ? own->stack_lo : 0, hi = own ? own->stack_hi : 0;
        if (sp - lo < hi - lo && hi - sp >= 8) {
            base = lo;
            lim = hi;
        } else {
            base = page_of(sp);
            if (!probing() || !page_readable(base))
                return 0;
            lim = base + PAGE_BYTES;
            cap = sp + ELSEWHERE_MAX;
        }
    }
    while (n < max) {
        out[n++] = pc;
        rule_t r;
        if (from_copy) {
            r = rule_for(cache, pc);
        } else {
            bool missing = false;
            r = rule_known(pc, &missing);
            if (missing) {
                *want_pc = pc;
                break;
            }
        }
        uint64_t cfa = sample_cfa(r, sp, bp, &bp_ok);
        if (!cfa)
            break;
        uint64_t ra, at = cfa + (uint64_t)(int64_t)r.ra_off;
        if (from_copy && !copy_load(stack, sp0, len, at, &ra))
            break;
        if (!from_copy) {
            if (!may_read(base, &lim, cap, at, NULL))
                break;
            ra = *(const uint64_t *)(uintptr_t)at;
        }
        if (r.flags & RULE_BP_SAVED) {
            at = cfa + (uint64_t)(int64_t)r.bp_off;
            // A save slot below sp: an epilogue already popped rbp (GCC's CFI keeps it "saved"
            // until the ret), so the register holds the caller's value; the live walk would
            // read a stale slot, the copy does not have it.
            if (at >= sp) {
                if (from_copy && !copy_load(stack, sp0, len, at, &bp))
                    break;
                if (!from_copy) {
                    if (!may_read(base, &lim, cap, at, NULL))
                        break;
                    bp = *(const uint64_t *)(uintptr_t)at;
                }
            }
            bp_ok = true;
        }
        sp = cfa;
        pc = ra;
        if (pc == 0)
            break;
    }
    return n;
}

uint32_t hp_unwind_copy(uint64_t ip, uint64_t sp, uint64_t bp, const uint8_t *stack,
                        uint64_t len, uint64_t *out, uint32_t max) {
    uint64_t unused;
    return walk_sample(true, ip, sp, bp, stack, len, out, max, &unused);
}

uint32_t hp_unwind_signal(uint64_t ip, uint64_t sp, uint64_t bp, uint64_t *out, uint32_t max,
                          uint64_t *want_pc) {
    *want_pc = 0;
    return walk_sample(false, ip, sp, bp, NULL, 0, out, max, want_pc);
}

void hp_unwind_prepare(uint64_t pc) {
    cfi_thread_t *ct = cfi_thread();
    (void)rule_for(ct ? ct->rules : NULL, pc);
}

void hp_unwind_fork_prepare(void) {
    pthread_mutex_lock(&lock);
}

void hp_unwind_fork_parent(void) {
    pthread_mutex_unlock(&lock);
}

void hp_unwind_fork_child(void) {
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    lock = fresh;
}

static int find_self(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    uintptr_t probe = (uintptr_t)data, lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        if (info->dlpi_addr + ph->p_vaddr < lo)
            lo = info->dlpi_addr + ph->p_vaddr;
        if (info->dlpi_addr + ph->p_vaddr + ph->p_memsz > hi)
            hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
    }
    if (probe < lo || probe >= hi)
        return 0;
    self_lo = lo;
    self_hi = hi;
    return 1;
}

void hp_unwind_init(void) {
    dl_iterate_phdr(find_self, (void *)(uintptr_t)&hp_unwind);
    hp_unwind_libunwind_init(self_lo, self_hi);
}
