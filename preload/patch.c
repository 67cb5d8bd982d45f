// SPDX-License-Identifier: MIT
// Entry patching for allocators the dynamic linker does not route through the shim (allocscan.c).
// The function's entry becomes a 5-byte `jmp rel32` to a stub within reach; the stub jumps on to
// the wrapper, and holds the trampoline: the instructions the jump overwrote, relocated by what
// Capstone says about them (a RIP-relative operand re-aimed, a jump or conditional branch made
// absolute), then a jump back behind them. Runs once at start, single-threaded:
// never on the event path. Refuses what it cannot move exactly rather than guess.
// Capstone is loaded on the first patch that needs it, not linked: its 77,403 relocations
// were most of the loader's work for the shim, ~380 page faults of every recorded process
// (a recorded `true`: +6.3 -> +4.0 ms and peak RSS +6.8 -> +1.9 MiB on the 2-vCPU VM,
// bench/process_start.py), and only a program with an allocator of its own inside needs it.
#include "patch.h"

#include <capstone/capstone.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define JMP_REL32_BYTES 5  // e9 rel32: what the entry gets
#define JMP_ABS_BYTES 14   // ff 25 00000000 + 8-byte target: from a stub, anywhere
#define PROLOGUE_MAX 32    // the most bytes of fn's first instructions looked at
#define TRAMP_MAX 96       // the most bytes of code a trampoline holds (its jump back included)
#define JCC_MOVED_BYTES (2 + JMP_ABS_BYTES) // a moved conditional branch, below
#define STUB_PAGE 4096u
#define REACH ((int64_t)INT32_MAX - (int64_t)(1 << 20)) // a rel32's reach, with a margin

// One page per stub, each within rel32 reach of its function. Never written again once sealed:
// a page that held a live stub could not be made writable (not executable) for the next one,
// since patching itself calls the allocators it has already patched (Capstone, libelf).
#define MAX_STUBS 64
static int n_stubs;

// Capstone's functions, from HP_CAPSTONE_SONAME (the build's, preload/CMakeLists.txt).
static struct {
    cs_err (*open)(cs_arch, cs_mode, csh *);
    cs_err (*option)(csh, cs_opt_type, size_t);
    cs_insn *(*malloc)(csh);
    bool (*disasm_iter)(csh, const uint8_t **, size_t *, uint64_t *, cs_insn *);
    void (*free)(cs_insn *, size_t);
    cs_err (*close)(csh *);
} capstone;
static int capstone_state; // 0: not tried, 1: loaded, -1: not there

#define CAPSTONE_FN(field, name)                                                                  \
    do {                                                                                           \
        void *sym_ = dlsym(lib, name);                                                             \
        ok = ok && sym_;                                                                           \
        memcpy(&capstone.field, &sym_, sizeof sym_);                                               \
    } while (0)

// Patching runs with one thread (at start) or under the loader's lock (a module being
// loaded), so one caller at a time. A dlopen from inside the loader's notice of a new module
// (allocscan.c) is a nested one, which the loader's recursive lock allows.
static const char *capstone_load(void) {
    if (!capstone_state) {
        void *lib = dlopen(HP_CAPSTONE_SONAME, RTLD_NOW | RTLD_LOCAL);
        bool ok = lib != NULL;
        if (ok) {
            CAPSTONE_FN(open, "cs_open");
            CAPSTONE_FN(option, "cs_option");
            CAPSTONE_FN(malloc, "cs_malloc");
            CAPSTONE_FN(disasm_iter, "cs_disasm_iter");
            CAPSTONE_FN(free, "cs_free");
            CAPSTONE_FN(close, "cs_close");
        }
        capstone_state = ok ? 1 : -1;
    }
    return capstone_state > 0 ? NULL
                              : "the disassembler (Capstone, " HP_CAPSTONE_SONAME ") is not there";
}

static bool in_reach(uintptr_t a, uintptr_t b) {
    int64_t d = (int64_t)(a - b);
    return d < REACH && d > -REACH;
}

// A fresh writable page within rel32 reach of fn (sealed by stub_seal), or NULL. mmap takes
// the address as a hint; MAP_FIXED_NOREPLACE keeps it from clobbering a mapping that is there.
static uint8_t *stub_alloc(uintptr_t fn) {
    if (n_stubs == MAX_STUBS)
        return NULL;
    const uintptr_t step = 1u << 20;
    uintptr_t start = fn & ~(step - 1);
    for (int i = 1; i < 2000; i++) {
        for (int dir = -1; dir <= 1; dir += 2) {
            uintptr_t want = start + (uintptr_t)((int64_t)dir * i * (int64_t)step);
            if (want < (1u << 16) || !in_reach(want, fn))
                continue;
            void *p = mmap((void *)want, STUB_PAGE, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
            if (p == MAP_FAILED)
                continue;
            if (in_reach((uintptr_t)p, fn) && in_reach((uintptr_t)p + STUB_PAGE, fn)) {
                n_stubs++;
                return p;
            }
            munmap(p, STUB_PAGE); // an old kernel took the flag for a plain hint
        }
    }
    return NULL;
}

static bool stub_seal(const uint8_t *s) {
    uintptr_t page = (uintptr_t)s & ~(uintptr_t)(STUB_PAGE - 1);
    __builtin___clear_cache((char *)page, (char *)page + STUB_PAGE);
    return mprotect((void *)page, STUB_PAGE, PROT_READ | PROT_EXEC) == 0;
}

static uint8_t *put_jmp_abs(uint8_t *p, uintptr_t target) {
    static const uint8_t jmp_rip[6] = {0xff, 0x25, 0, 0, 0, 0}; // jmp *0(%rip)
    memcpy(p, jmp_rip, sizeof jmp_rip);
    memcpy(p + 6, &target, 8);
    return p + JMP_ABS_BYTES;
}

static bool has_group(const cs_insn *in, uint8_t group) {
    for (uint8_t i = 0; i < in->detail->groups_count; i++)
        if (in->detail->groups[i] == group)
            return true;
    return false;
}

// The immediate target of a relative branch, or 0 when in is not one.
static uint64_t branch_target(const cs_insn *in) {
    if (!has_group(in, CS_GRP_JUMP) && !has_group(in, CS_GRP_CALL))
        return 0;
    const cs_x86 *x = &in->detail->x86;
    if (x->op_count == 1 && x->operands[0].type == X86_OP_IMM)
        return (uint64_t)x->operands[0].imm;
    return 0;
}

static bool rip_relative(const cs_insn *in) {
    const cs_x86 *x = &in->detail->x86;
    for (uint8_t i = 0; i < x->op_count; i++)
        if (x->operands[i].type == X86_OP_MEM && x->operands[i].mem.base == X86_REG_RIP)
            return true;
    return false;
}

// The condition code (0-15) of a Jcc with a rel8 (70+cc) or rel32 (0f 80+cc) operand, past
// the prefixes compilers put on branches (the CS/DS branch hints, BND); -1 for any other
// conditional branch (jrcxz, loop), which has no inverse of the same form.
static int jcc_condition(const cs_insn *in) {
    size_t i = 0;
    while (i < in->size && (in->bytes[i] == 0x2e || in->bytes[i] == 0x3e || in->bytes[i] == 0xf2))
        i++;
    if (i < in->size && (in->bytes[i] & 0xf0) == 0x70)
        return in->bytes[i] & 0x0f;
    if (i + 1 < in->size && in->bytes[i] == 0x0f && (in->bytes[i + 1] & 0xf0) == 0x80)
        return in->bytes[i + 1] & 0x0f;
    return -1;
}

// A Jcc moved into the trampoline: the opposite condition skips an absolute jump to the
// branch's target (x86's condition codes come in pairs that differ in their lowest bit), so the
// target may be anywhere and the fall-through is the next moved instruction.
static uint8_t *put_jcc_moved(uint8_t *p, int cc, uintptr_t target) {
    p[0] = (uint8_t)(0x70 | (cc ^ 1));
    p[1] = JMP_ABS_BYTES;
    return put_jmp_abs(p + 2, target);
}

typedef struct plan {
    uint8_t code[TRAMP_MAX]; // the trampoline, for where it will stand
    size_t code_len;
    size_t patch_len; // bytes of fn the trampoline stands for (>= JMP_REL32_BYTES)
} plan_t;

// Whether n more bytes of code still leave the trampoline room for its jump back.
static bool room_for(const plan_t *pl, size_t n) {
    return pl->code_len + n + JMP_ABS_BYTES <= TRAMP_MAX;
}
#define TOO_LONG "its first instructions are too long to relocate"

// Relocates fn's first instructions to run at `at` (the trampoline's address). NULL or why not.
static const char *relocate(csh cs, const uint8_t *fn, size_t size, uintptr_t at, plan_t *pl) {
    const uint8_t *code = fn;
    size_t left = size < PROLOGUE_MAX ? size : PROLOGUE_MAX;
    uint64_t addr = (uint64_t)(uintptr_t)fn;
    cs_insn *in = capstone.malloc(cs);
    if (!in)
        return "out of memory for the disassembler";
    const char *why = NULL;
    bool ended = false; // an unconditional jump: nothing after it runs
    pl->code_len = 0;
    pl->patch_len = 0;
    while (!ended && pl->patch_len < JMP_REL32_BYTES) {
        uint64_t here = addr;
        if (!capstone.disasm_iter(cs, &code, &left, &addr, in)) {
            why = "an instruction at its entry could not be decoded";
            break;
        }
        uint8_t *out = pl->code + pl->code_len;
        uintptr_t out_addr = at + pl->code_len;
        if (has_group(in, CS_GRP_CALL) || has_group(in, CS_GRP_RET) ||
            has_group(in, CS_GRP_INT) || has_group(in, CS_GRP_IRET)) {
            why = "a call or return among its first instructions";
            break;
        }
        if (has_group(in, CS_GRP_JUMP) && in->id != X86_INS_JMP) {
            int cc = jcc_condition(in);
            uint64_t target = branch_target(in);
            if (cc < 0 || !target) {
                why = "a conditional branch among its first instructions that cannot be moved";
                break;
            }
            if (!room_for(pl, JCC_MOVED_BYTES)) {
                why = TOO_LONG;
                break;
            }
            // a target among the bytes the jump overwrites is refused by check_targets
            put_jcc_moved(out, cc, (uintptr_t)target);
            pl->code_len += JCC_MOVED_BYTES;
            pl->patch_len += in->size;
            continue;
        }
        if (has_group(in, CS_GRP_JUMP)) {
            ended = true;
            uint64_t target = branch_target(in);
            if (target) { // jmp rel: the same jump, from anywhere
                if (!room_for(pl, 0)) {
                    why = TOO_LONG;
                    break;
                }
                put_jmp_abs(out, (uintptr_t)target);
                pl->code_len += JMP_ABS_BYTES;
                pl->patch_len += in->size;
                continue;
            }
        }
        if (!room_for(pl, in->size)) {
            why = TOO_LONG;
            break;
        }
        memcpy(out, in->bytes, in->size);
        if (rip_relative(in)) {
            const cs_x86_encoding *e = &in->detail->x86.encoding;
            if (e->disp_offset == 0 || e->disp_size != 4) {
                why = "a RIP-relative instruction Capstone cannot say how to move";
                break;
            }
            int32_t disp;
            memcpy(&disp, in->bytes + e->disp_offset, 4);
            int64_t abs = (int64_t)(here + in->size) + disp;
            int64_t moved = abs - (int64_t)(out_addr + in->size);
            if (moved > INT32_MAX || moved < INT32_MIN) {
                why = "a RIP-relative operand out of the trampoline's reach";
                break;
            }
            int32_t d32 = (int32_t)moved;
            memcpy(out + e->disp_offset, &d32, 4);
        }
        pl->code_len += in->size;
        pl->patch_len += in->size;
    }
    if (!why && pl->patch_len < JMP_REL32_BYTES && (!ended || size < JMP_REL32_BYTES))
        why = "it is shorter than a jump";
    if (!why && !ended) {
        put_jmp_abs(pl->code + pl->code_len, (uintptr_t)fn + pl->patch_len);
        pl->code_len += JMP_ABS_BYTES;
    }
    capstone.free(in, 1);
    return why;
}

// A jump or call anywhere in fn whose target lies inside the bytes the patch overwrites (past
// the first) would land in the middle of our jump. NULL or why not.
static const char *check_targets(csh cs, const uint8_t *fn, size_t size, size_t patch_len) {
    uint64_t lo = (uint64_t)(uintptr_t)fn, hi = lo + (patch_len > JMP_REL32_BYTES ? patch_len : JMP_REL32_BYTES);
    cs_insn *in = capstone.malloc(cs);
    if (!in)
        return "out of memory for the disassembler";
    const uint8_t *code = fn;
    size_t left = size;
    uint64_t addr = lo;
    const char *why = NULL;
    while (left > 0) {
        if (!capstone.disasm_iter(cs, &code, &left, &addr, in)) {
            code++; // data or padding Capstone does not decode: go on from the next byte
            left--;
            addr++;
            continue;
        }
        uint64_t t = branch_target(in);
        if (t > lo && t < hi) {
            why = "a jump inside it lands in the bytes the patch would overwrite";
            break;
        }
    }
    capstone.free(in, 1);
    return why;
}

#if defined(__x86_64__)
static const char *write_jmp(void *fn, const uint8_t *stub);
#endif

static const char *open_cs(csh *cs) {
    const char *why = capstone_load();
    if (why)
        return why;
    if (capstone.open(CS_ARCH_X86, CS_MODE_64, cs) != CS_ERR_OK)
        return "the disassembler (Capstone) would not start";
    capstone.option(*cs, CS_OPT_DETAIL, CS_OPT_ON);
    return NULL;
}

// The length of the padding instruction at p (at most left bytes): int3, nop, or a multi-byte
// nop (`0f 1f /0` behind any operand-size and CS prefixes, the forms assemblers pad with); 0
// for anything else. Padding needs no disassembler: hp_patch_empty runs in every process.
static size_t padding_len(const uint8_t *p, size_t left) {
    if (left && (p[0] == 0xcc || p[0] == 0x90))
        return 1;
    size_t i = 0;
    while (i < left && (p[i] == 0x66 || p[i] == 0x2e))
        i++;
    if (i < left && i && p[i] == 0x90) // 66 90: xchg %ax,%ax
        return i + 1;
    if (i + 3 > left || p[i] != 0x0f || p[i + 1] != 0x1f || (p[i + 2] >> 3 & 7) != 0)
        return 0;
    uint8_t modrm = p[i + 2], mod = modrm >> 6, rm = modrm & 7;
    size_t n = i + 3;
    if (mod != 3 && rm == 4)
        n++; // SIB
    if (mod == 1)
        n += 1;
    else if (mod == 2 || (mod == 0 && rm == 5))
        n += 4;
    return n <= left ? n : 0;
}

const char *hp_patch_check(const void *fn, size_t size) {
    csh cs;
    const char *why = open_cs(&cs);
    if (why)
        return why;
    plan_t pl;
    // where the trampoline stands only matters for the reach of RIP-relative operands
    why = relocate(cs, fn, size, (uintptr_t)fn, &pl);
    if (!why)
        why = check_targets(cs, fn, size, pl.patch_len);
    capstone.close(&cs);
    return why;
}

const char *hp_patch_entry(void *fn, size_t size, uintptr_t wrapper, void *orig_slot) {
#if !defined(__x86_64__)
    (void)fn, (void)size, (void)wrapper, (void)orig_slot;
    return "entry patching is only implemented for x86-64";
#else
    csh cs;
    const char *why = open_cs(&cs);
    if (why)
        return why;
    uint8_t *stub = stub_alloc((uintptr_t)fn);
    plan_t pl;
    if (!stub)
        why = "no memory within a 32-bit jump of it";
    if (!why)
        why = relocate(cs, fn, size, (uintptr_t)stub + JMP_ABS_BYTES, &pl);
    if (!why)
        why = check_targets(cs, fn, size, pl.patch_len);
    capstone.close(&cs);
    if (why) {
        if (stub) {
            munmap(stub, STUB_PAGE);
            n_stubs--;
        }
        return why;
    }
    put_jmp_abs(stub, wrapper);
    memcpy(stub + JMP_ABS_BYTES, pl.code, pl.code_len);
    if (!stub_seal(stub))
        return "the trampoline's page could not be made executable";
    void *tramp = stub + JMP_ABS_BYTES; // set before the jump is live: a wrapper may run at once
    memcpy(orig_slot, &tramp, sizeof tramp);
    return write_jmp(fn, stub);
#endif
}

const char *hp_patch_empty(void *fn, uintptr_t target) {
#if !defined(__x86_64__)
    (void)fn, (void)target;
    return "entry patching is only implemented for x86-64";
#else
    // The jump may cover the return and the padding behind it, up to the next 16-byte boundary
    // (where a compiler aligns the next function): nothing jumps into padding.
    const uintptr_t end = ((uintptr_t)fn + 16) & ~(uintptr_t)15;
    if (end - (uintptr_t)fn < JMP_REL32_BYTES)
        return "too little room before the next function";
    static const uint8_t endbr64[4] = {0xf3, 0x0f, 0x1e, 0xfa};
    const uint8_t *code = fn;
    size_t at = 0, left = end - (uintptr_t)fn;
    if (left >= sizeof endbr64 && !memcmp(code, endbr64, sizeof endbr64))
        at = sizeof endbr64;
    if (code[at] != 0xc3) // ret
        return "it does something";
    for (at++; at < left;) {
        size_t n = padding_len(code + at, left - at);
        if (!n)
            return "what follows its return is not padding";
        at += n;
    }
    uint8_t *stub = stub_alloc((uintptr_t)fn);
    if (!stub)
        return "no memory within a 32-bit jump of it";
    put_jmp_abs(stub, target);
    if (!stub_seal(stub))
        return "the stub's page could not be made executable";
    return write_jmp(fn, stub);
#endif
}

#if defined(__x86_64__)
static const char *write_jmp(void *fn, const uint8_t *stub) {
    // The entry's page(s), writable for the 5 bytes; W^X kernels refuse RWX, so RW then back.
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)fn & ~(pg - 1);
    uintptr_t hi = ((uintptr_t)fn + JMP_REL32_BYTES + pg - 1) & ~(pg - 1);
    if (mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE | PROT_EXEC) != 0 &&
        mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE) != 0)
        return "its code could not be made writable";
    uint8_t jmp[JMP_REL32_BYTES] = {0xe9};
    int32_t rel = (int32_t)((int64_t)(uintptr_t)stub - (int64_t)((uintptr_t)fn + JMP_REL32_BYTES));
    memcpy(jmp + 1, &rel, 4);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    memcpy(fn, jmp, sizeof jmp);
    __builtin___clear_cache((char *)fn, (char *)fn + JMP_REL32_BYTES);
    mprotect((void *)lo, hi - lo, PROT_READ | PROT_EXEC);
    return NULL;
}
#endif
