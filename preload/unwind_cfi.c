// SPDX-License-Identifier: MIT
// Stack capture with our own DWARF CFI walker. Each return address maps to one small rule (where
// the caller's CFA, return address and rbp are) computed once with elfutils' CFI reader and kept
// in a lock-free table; a walk is then a hash probe and two loads per frame, without libunwind's
// per-call cursor set-up. Frames whose rule does not fit the simple form (signal frames, CFA
// expressions, stack realignment) hand the whole capture to libunwind. See docs/design.md.
// Hot path: no locks, no allocation; the rule computation (cold) takes a lock and may allocate
// through the recursion guard.
#include "unwind.h"

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
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <libelf.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

// Rule flags; a plain step to the caller has none of the first four.
enum rule_flag {
    RULE_STOP = 1,        // outermost frame (return address undefined) or no CFI: the walk ends
    RULE_UNSUPPORTED = 2, // needs a full unwinder
    RULE_CFA_BP = 4,      // CFA = rbp + cfa_off (else rsp + cfa_off)
    RULE_BP_LOST = 8,     // rbp is undefined in the caller
    RULE_BP_SAVED = 16,   // caller's rbp at CFA + bp_off (else unchanged)
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
        elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
        // the mapping stays valid after close
        close(fd);
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

static rule_t compute_rule(uint64_t pc) {
    rule_t r = {0};
    r.flags = RULE_STOP;
    module_t *m = module_for(pc);
    if (!m || !m->cfi)
        return r;
    Dwarf_Frame *frame;
    // pc is a return address: the call instruction, whose unwind state we need, ends before it
    if (dwarf_cfi_addrframe(m->cfi, pc - 1 - m->bias, &frame) != 0)
        return r;
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
    uintptr_t g = hp_guard_cold_enter(); // the rule lock and libdw's: see guard.h
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
// them is one independent load per frame instead of a dependent rule lookup and load.

#define MAX_FRAME_BYTES (64u << 20) // one frame bigger than this means the walk went wrong
#define STEPS_MAX (HPT_MAX_FRAMES + 32)

typedef struct step {
    uint64_t sp, pc, bp;
    // The words the reuse check compares: the step to the caller read ra_val at ra_addr and
    // bp_val at bp_addr. Where a word was not read or does not matter (the last frame's return
    // address, a saved rbp the caller's frame does not use) it is unused_word and 0, so that
    // the check reads two words per frame without a branch.
    uint64_t ra_addr, ra_val;
    uint64_t bp_addr, bp_val;
} step_t;

enum step_flag {
    STEP_BP_OK = 1,     // rbp holds a known value here
    STEP_NEEDS_BP = 2,  // the walk from here on depends on this frame's rbp
    STEP_BP_READ = 4,   // the step to the caller read the caller's rbp from memory
};

static const uint64_t unused_word = 0; // what a step's unused check words point at

typedef struct walk_log {
    uint32_t n;        // frames visited
    uint32_t own;      // leading frames inside the shim (not reported)
    bool same;         // reported frames are exactly the previous walk's
    bool complete;     // ended at the outermost frame (not cut short), so it can be reused
    // The join with the previous walk, for hp_unwind_delta_t: d_fresh frames walked before it,
    // at frame d_base of the previous walk's reported frames, of which it had d_prev_reported.
    bool d_ok; // joined at or past the previous walk's own frames
    uint32_t d_fresh, d_base, d_prev_reported;
    uint8_t flags[STEPS_MAX];
    step_t s[STEPS_MAX];
} walk_log_t;

// This backend's part of the thread's block (thread.h): 23.4 KiB, which as static TLS glibc took
// out of every thread's stack (issue #17).
typedef struct cfi_thread {
    tls_slot_t rules[TLS_RULES];
    walk_log_t walks[2];
    uint8_t walk_cur;
    uint32_t check_last_n;                // check mode: the last stack reported
    uint64_t check_last[HPT_MAX_FRAMES];
} cfi_thread_t;
_Static_assert(sizeof(cfi_thread_t) <= HP_UNWIND_THREAD_BYTES, "HP_UNWIND_THREAD_BYTES too small");
_Static_assert(_Alignof(cfi_thread_t) <= 64, "the block aligns its unwinder part to 64");

// One TLS load; the block's first member is ours (thread.h).
static inline cfi_thread_t *cfi_thread(void) {
    return (cfi_thread_t *)(void *)hp_tls_thread;
}

static inline uint64_t step_changed(const step_t *st) {
    return (*(const uint64_t *)(uintptr_t)st->ra_addr ^ st->ra_val) |
           (*(const uint64_t *)(uintptr_t)st->bp_addr ^ st->bp_val);
}

// The first frame from which every word the logged walk read, from there to its end, still holds
// the value it read then. The common case, nothing changed, is one pass without a branch per
// frame; only then is the outermost change looked for.
static inline uint32_t valid_from(const walk_log_t *w, uint32_t j) {
    // n and the steps in locals: the compiler cannot tell that the words checked are not them
    uint64_t changed = 0;
    const step_t *st = &w->s[j], *end = &w->s[w->n];
    for (; st + 1 < end; st += 2)
        changed |= step_changed(st) | step_changed(st + 1);
    if (st < end)
        changed |= step_changed(st);
    if (HP_LIKELY(!changed))
        return j;
    for (uint32_t k = w->n; k-- > j;)
        if (step_changed(&w->s[k]))
            return k + 1;
    return j;
}


// Walks from frame `from` into cur, reusing prev's outer frames where it can. Returns the log
// that now describes the stack (cur, or prev updated in place when the walks joined at the same
// depth, which saves copying the shared frames), or NULL when a frame needs the full unwinder.
__attribute__((noinline)) static walk_log_t *walk(const hp_frame_t *from, walk_log_t *cur,
                                                  walk_log_t *prev, tls_slot_t *rules_cache) {
    uint64_t pc = from->pc, sp = from->sp, bp = from->bp;
    bool bp_ok = true;
    uint32_t i = 0, j = 0;
    uint32_t valid = UINT32_MAX; // frames of prev from here on are unchanged (computed on demand)
    uint32_t reused = UINT32_MAX; // where the reused frames start in cur
    uint32_t own = 0;
    // The common case first, as the loop below would find it at its first frame: the same
    // caller at the same depth as last time, and nothing the logged walk read has changed.
    if (prev->complete && prev->n && prev->s[0].sp == sp && prev->s[0].pc == pc &&
        (!(prev->flags[0] & STEP_NEEDS_BP) ||
         (prev->s[0].bp == bp && (prev->flags[0] & STEP_BP_OK))) &&
        valid_from(prev, 0) == 0) {
        prev->same = true;
        prev->d_ok = false;
        return prev;
    }
    cur->complete = true;
    cur->same = false;
    cur->d_ok = false;
    for (;;) {
        if (i == STEPS_MAX) {
            cur->complete = false;
            break;
        }
        // reuse the logged walk from the first frame both walks share
        while (j < prev->n && prev->s[j].sp < sp)
            j++;
        if (j < prev->n && prev->s[j].sp == sp && prev->s[j].pc == pc && prev->complete &&
            (!(prev->flags[j] & STEP_NEEDS_BP) ||
             (prev->s[j].bp == bp && (prev->flags[j] & STEP_BP_OK) == (bp_ok ? STEP_BP_OK : 0))) &&
            j >= (valid == UINT32_MAX ? (valid = valid_from(prev, j)) : valid)) {
            // joined where both walks were still inside the shim: the same stack is reported
            bool same = own == i && j <= prev->own;
            bool d_ok = j >= prev->own;
            uint32_t d_base = j - prev->own, d_prev_reported = prev->n - prev->own;
            if (own == i && prev->own > j)
                own = i + (prev->own - j); // the shim's frames continue into the reused part
            if (i == j) {
                // same depth: move the few fresh frames into prev instead of the shared ones
                // here; a loop, since memcpy of a few bytes became rep movsb, slow to start and
                // a store-forwarding stall for the flags read just after
                for (uint32_t k = 0; k < i; k++) {
                    prev->s[k] = cur->s[k];
                    prev->flags[k] = cur->flags[k];
                }
                i = prev->n;
                cur = prev;
            } else {
                uint32_t tail = prev->n - j;
                if (i + tail > STEPS_MAX)
                    tail = STEPS_MAX - i, cur->complete = false;
                HP_ASSERT(i + tail <= STEPS_MAX);
                memcpy(&cur->s[i], &prev->s[j], tail * sizeof(step_t));
                memcpy(&cur->flags[i], &prev->flags[j], tail);
                reused = i;
                i += tail;
            }
            cur->same = same && cur->complete;
            cur->d_ok = d_ok && cur->complete;
            cur->d_fresh = cur == prev ? j : reused; // the frames before the shared ones
            cur->d_base = d_base;
            cur->d_prev_reported = d_prev_reported;
            if (cur == prev)
                reused = j;
            break;
        }
        step_t *st = &cur->s[i];
        if (own == i && pc - self_lo < self_hi - self_lo)
            own++;
        st->sp = sp;
        st->pc = pc;
        st->bp = bp;
        st->ra_addr = st->bp_addr = (uint64_t)(uintptr_t)&unused_word;
        st->ra_val = st->bp_val = 0;
        uint8_t fl = bp_ok ? STEP_BP_OK : 0;
        i++;
        rule_t r = rule_for(rules_cache, pc);
        uint64_t cfa;
        if (HP_LIKELY(!(r.flags & (RULE_STOP | RULE_UNSUPPORTED | RULE_CFA_BP | RULE_BP_LOST)))) {
            cfa = sp + (uint64_t)(int64_t)r.cfa_off;
        } else {
            if (r.flags & RULE_STOP) {
                cur->flags[i - 1] = fl;
                break;
            }
            if ((r.flags & RULE_UNSUPPORTED) || ((r.flags & RULE_CFA_BP) && !bp_ok))
                return NULL;
            cfa = ((r.flags & RULE_CFA_BP) ? bp : sp) + (uint64_t)(int64_t)r.cfa_off;
            if (r.flags & RULE_CFA_BP)
                fl |= STEP_NEEDS_BP;
            if (r.flags & RULE_BP_LOST)
                bp_ok = false;
        }
        cur->flags[i - 1] = fl;
        if (cfa - sp - 1 >= MAX_FRAME_BYTES || (cfa & 7)) // also catches cfa <= sp
            break;
        st->ra_addr = cfa + (uint64_t)(int64_t)r.ra_off;
        st->ra_val = pc = *(const uint64_t *)(uintptr_t)st->ra_addr;
        if (r.flags & RULE_BP_SAVED) {
            st->bp_addr = cfa + (uint64_t)(int64_t)r.bp_off;
            st->bp_val = bp = *(const uint64_t *)(uintptr_t)st->bp_addr;
            bp_ok = true;
            fl |= STEP_BP_READ;
            cur->flags[i - 1] = fl;
        }
        sp = cfa;
        if (pc == 0)
            break;
    }
    HP_ASSERT(i <= STEPS_MAX && own <= i);
    cur->n = i;
    cur->own = own;
    // Which frames' rbp the rest of the walk depends on: a frame that takes its CFA from rbp,
    // or passes rbp on unchanged to one that does. Reused frames keep their flags.
    uint32_t fresh = reused == UINT32_MAX ? i : reused;
    bool needs = fresh < i && (cur->flags[fresh] & STEP_NEEDS_BP);
    for (uint32_t k = fresh; k-- > 0;) {
        if (cur->flags[k] & STEP_NEEDS_BP) {
            needs = true;
        } else {
            if (cur->flags[k] & STEP_BP_READ)
                needs = false; // the caller's rbp comes from memory, checked on reuse
            if (needs)
                cur->flags[k] |= STEP_NEEDS_BP;
        }
        needs = (cur->flags[k] & STEP_NEEDS_BP) != 0;
    }
    // A saved rbp word is checked on reuse only where the caller's frame needs its rbp: code
    // without frame pointers keeps any value in rbp, so the word a callee saved it in changes
    // from call to call (the shim's own malloc keeps the size there) without changing the walk.
    for (uint32_t k = 0; k < fresh; k++)
        if (!(k + 1 < i && (cur->flags[k + 1] & STEP_NEEDS_BP))) {
            cur->s[k].bp_addr = (uint64_t)(uintptr_t)&unused_word;
            cur->s[k].bp_val = 0;
        }
    return cur;
}

// ---- backend selection --------------------------------------------------------------------------

static _Atomic uint64_t n_checked, n_differ, n_same, n_steps;

// HEAPPROF_UNWIND=check: compares with libunwind, and a "same as last" verdict with the last stack.
HP_NOINLINE HP_COLD static void check_against_libunwind(cfi_thread_t *ct, const uint64_t *out,
                                                        uint32_t n, uint32_t max, bool same) {
    uint64_t ref[HPT_MAX_FRAMES];
    uint32_t m = hp_unwind_libunwind(ref, max);
    bool differ = m != n || memcmp(ref, out, n * sizeof *out);
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

// The n frames a log reports: its own frames (inside the shim) dropped.
static inline void report_frames(const walk_log_t *w, uint64_t *out, uint32_t n) {
    HP_ASSERT(w->own + n <= w->n && n <= HPT_MAX_FRAMES);
    for (uint32_t k = 0; k < n; k++)
        out[k] = w->s[w->own + k].pc;
}

uint32_t hp_unwind(const hp_frame_t *from, uint64_t *out, uint32_t max, bool *same_as_last,
                   hp_unwind_delta_t *delta) {
    *same_as_last = false;
    delta->valid = false;
    cfi_thread_t *ct = cfi_thread();
    // No block: the thread gave it back at its exit and a later TLS destructor allocates, or
    // memory ran out. libunwind needs no state of ours.
    HP_ASSERT(max <= HPT_MAX_FRAMES); // out, and the check's copy of the last stack
    if (hp_config.unwinder == HP_UNWIND_LIBUNWIND || HP_UNLIKELY(!ct))
        return hp_unwind_libunwind(out, max);
    walk_log_t *prev = &ct->walks[ct->walk_cur];
    walk_log_t *cur = walk(from, &ct->walks[ct->walk_cur ^ 1], prev, ct->rules);
    if (HP_UNLIKELY(!cur)) {
        prev->complete = false; // the log no longer describes the stack
        return hp_unwind_libunwind(out, max);
    }
    if (cur != prev)
        ct->walk_cur ^= 1;
    uint32_t n = cur->n - cur->own < max ? cur->n - cur->own : max;
    *same_as_last = cur->same;
    if (HP_LIKELY(cur->same && hp_config.unwinder != HP_UNWIND_CHECK))
        return n;
    // A few new frames on the previous stack, neither cut at max: the caller may know the stack
    // from the last time it made this step (record.c), without the frames.
    if (!cur->same && cur->d_ok && cur->d_prev_reported <= max && cur->n - cur->own <= max &&
        cur->d_fresh >= cur->own && cur->d_fresh - cur->own <= HP_DELTA_FRESH_MAX) {
        delta->valid = true;
        delta->base = cur->d_base;
        delta->n_fresh = cur->d_fresh - cur->own;
        // the fresh frames and the previous stack's from base on make the whole stack
        HP_ASSERT(delta->base <= cur->d_prev_reported && delta->n_fresh <= n);
        for (uint32_t k = 0; k < delta->n_fresh; k++)
            delta->fresh[k] = cur->s[cur->own + k].pc;
        return n;
    }
    report_frames(cur, out, n);
    if (HP_UNLIKELY(hp_config.unwinder == HP_UNWIND_CHECK))
        check_against_libunwind(ct, out, n, max, cur->same);
    return n;
}

uint32_t hp_unwind_frames(uint64_t *out, uint32_t max) {
    cfi_thread_t *ct = cfi_thread();
    if (HP_UNLIKELY(!ct)) // cannot happen after a walk that set *delta; never read a NULL block
        return hp_unwind_libunwind(out, max);
    const walk_log_t *cur = &ct->walks[ct->walk_cur];
    uint32_t n = cur->n - cur->own < max ? cur->n - cur->own : max;
    report_frames(cur, out, n);
    if (HP_UNLIKELY(hp_config.unwinder == HP_UNWIND_CHECK))
        check_against_libunwind(ct, out, n, max, false);
    return n;
}

void hp_unwind_check_verdict(bool agree) {
    atomic_fetch_add_explicit(&n_steps, 1, memory_order_relaxed);
    if (!agree)
        atomic_fetch_add_explicit(&n_differ, 1, memory_order_relaxed);
}

void hp_unwind_report(void) {
    if (hp_config.unwinder != HP_UNWIND_CHECK)
        return;
    char a[21], b[21], c[21], d[21];
    hp_diag_line("unwinder check: ", hp_diag_u64(a, n_checked), " stacks, ",
                 hp_diag_u64(b, n_differ), " differ from libunwind (", hp_diag_u64(c, n_same),
                 " found unchanged, ", hp_diag_u64(d, n_steps), " by a known step)", (char *)NULL);
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
        if (!from_copy)
            ra = *(const uint64_t *)(uintptr_t)at;
        if (r.flags & RULE_BP_SAVED) {
            at = cfa + (uint64_t)(int64_t)r.bp_off;
            // A save slot below sp: an epilogue already popped rbp (GCC's CFI keeps it "saved"
            // until the ret), so the register holds the caller's value; the live walk would
            // read a stale slot, the copy does not have it.
            if (at >= sp) {
                if (from_copy && !copy_load(stack, sp0, len, at, &bp))
                    break;
                if (!from_copy)
                    bp = *(const uint64_t *)(uintptr_t)at;
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
