// SPDX-License-Identifier: MIT
// The forwarder rule (docs/design.md#allocator-wrappers) as a walk over every path of one small
// function, from its entry, with capstone decoding one instruction at a time. A path's state is
// which registers point into the allocator's block (its result, copies of it, and where in it
// they point), which hold zero (a NULL to return), how many bytes at the block's start were
// written (a size header, as sqlite3MemMalloc's), and whether an allocator or another function
// was called on the way; (address, state) pairs are visited once, so loops end. Bounded: a
// function past the limits is not a forwarder.
#include "symbols/forwarder.h"

#include "core/hmap.h"

#include <capstone/capstone.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FUNCTION_BYTES 2048 // "small": git's xmalloc is ~200 bytes, make_node-like code less
#define MAX_STATES 4096
#define MAX_PENDING 256
#define MAX_HEADER 64 // bytes a wrapper may keep in front of the block it returns

// CALLED_MAYBE_DEAD: the path went on past a call that may not return (see step)
enum { CALLED_ALLOC = 1, CALLED_OTHER = 2, CALLED_MAYBE_DEAD = 4 };

typedef struct state {
    uint64_t addr;
    uint16_t block; // bit i: general register i (gpr_index) points into the block, at off[i]
    uint16_t zero;  // bit i: register i holds 0
    uint8_t called; // CALLED_*
    uint8_t header; // bytes at the block's start written on this path
    int8_t off[16]; // 0 for registers outside block
} state_t;

static uint64_t state_key(const state_t *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    uint64_t parts[4] = {s->addr, (uint64_t)s->block << 32 | (uint64_t)s->zero << 16 |
                                      (uint64_t)s->called << 8 | s->header};
    memcpy(&parts[2], s->off, sizeof s->off);
    for (size_t i = 0; i < sizeof parts; i++)
        h = (h ^ ((const uint8_t *)parts)[i]) * 0x100000001b3ull;
    return h;
}

static void set_block(state_t *s, int reg, int64_t off) {
    if (reg < 0)
        return;
    if (off < 0 || off > MAX_HEADER) { // no longer the block's start or header: not tracked
        s->block &= (uint16_t) ~(1u << reg);
        s->off[reg] = 0;
        return;
    }
    s->block |= (uint16_t)(1u << reg);
    s->off[reg] = (int8_t)off;
}

// General-purpose register -> 0..15 (rax, rcx, rdx, rbx, rsp, rbp, rsi, rdi, r8..r15), any width;
// -1 for every other register. (One line per register, its names at every width.)
// clang-format off
static int gpr_index(unsigned reg) {
    switch (reg) {
    case X86_REG_RAX: case X86_REG_EAX: case X86_REG_AX: case X86_REG_AL: case X86_REG_AH:
        return 0;
    case X86_REG_RCX: case X86_REG_ECX: case X86_REG_CX: case X86_REG_CL: case X86_REG_CH:
        return 1;
    case X86_REG_RDX: case X86_REG_EDX: case X86_REG_DX: case X86_REG_DL: case X86_REG_DH:
        return 2;
    case X86_REG_RBX: case X86_REG_EBX: case X86_REG_BX: case X86_REG_BL: case X86_REG_BH:
        return 3;
    case X86_REG_RSP: case X86_REG_ESP: case X86_REG_SP: case X86_REG_SPL:
        return 4;
    case X86_REG_RBP: case X86_REG_EBP: case X86_REG_BP: case X86_REG_BPL:
        return 5;
    case X86_REG_RSI: case X86_REG_ESI: case X86_REG_SI: case X86_REG_SIL:
        return 6;
    case X86_REG_RDI: case X86_REG_EDI: case X86_REG_DI: case X86_REG_DIL:
        return 7;
    case X86_REG_R8: case X86_REG_R8D: case X86_REG_R8W: case X86_REG_R8B:
        return 8;
    case X86_REG_R9: case X86_REG_R9D: case X86_REG_R9W: case X86_REG_R9B:
        return 9;
    case X86_REG_R10: case X86_REG_R10D: case X86_REG_R10W: case X86_REG_R10B:
        return 10;
    case X86_REG_R11: case X86_REG_R11D: case X86_REG_R11W: case X86_REG_R11B:
        return 11;
    case X86_REG_R12: case X86_REG_R12D: case X86_REG_R12W: case X86_REG_R12B:
        return 12;
    case X86_REG_R13: case X86_REG_R13D: case X86_REG_R13W: case X86_REG_R13B:
        return 13;
    case X86_REG_R14: case X86_REG_R14D: case X86_REG_R14W: case X86_REG_R14B:
        return 14;
    case X86_REG_R15: case X86_REG_R15D: case X86_REG_R15W: case X86_REG_R15B:
        return 15;
    default:
        return -1;
    }
}
// clang-format on

#define BIT(i) ((uint16_t)(1u << (i)))
// System V AMD64: arguments in rdi, rsi, rdx, rcx, r8, r9; a call may clobber those and rax,
// r10, r11 (so the block survives a call only in rbx, rbp, r12-r15)
static const uint16_t ARG_REGS = BIT(7) | BIT(6) | BIT(2) | BIT(1) | BIT(8) | BIT(9);
static const uint16_t CALL_CLOBBERED =
    BIT(7) | BIT(6) | BIT(2) | BIT(1) | BIT(8) | BIT(9) | BIT(0) | BIT(10) | BIT(11);

static bool is_bit(uint16_t set, unsigned reg) {
    int i = gpr_index(reg);
    return i >= 0 && (set & BIT(i));
}

typedef struct walk {
    csh cs;
    cs_insn *insn;
    const forwarder_code_t *code;
    uint64_t ret_addr;
    uint64_t alloc_key;        // call_key of the observed allocator call (0: not comparable)
    uint64_t part_lo, part_hi; // bounds of the last part looked up
    bool loose;                // forwarder_check's loose rule
    hmap_t targets;            // addresses that a direct jump of the entry part goes to (a set)
    bool rbp_is_frame;         // the entry part sets up rbp as its frame pointer (mov rbp, rsp)
} walk_t;

static bool decode(walk_t *w, uint64_t addr) {
    size_t avail = 0;
    const uint8_t *p = w->code->bytes(w->code->ctx, addr, &avail);
    if (!p || avail == 0)
        return false;
    size_t size = avail < 16 ? avail : 16; // the longest x86 instruction
    uint64_t a = addr;
    return cs_disasm_iter(w->cs, &p, &size, &a, w->insn);
}

// The end of the function part holding addr, or 0 when unknown.
static uint64_t part_end(walk_t *w, uint64_t addr) {
    if (addr >= w->part_lo && addr < w->part_hi)
        return w->part_hi;
    uint64_t lo, hi;
    if (!w->code->bounds(w->code->ctx, addr, &lo, &hi) || addr < lo || addr >= hi)
        return 0;
    w->part_lo = lo;
    w->part_hi = hi;
    return hi;
}

// What a call goes to, comparable between two calls: the target of a direct call, the slot of
// an indirect call through a RIP-relative pointer (-fno-plt's GOT entry), else 0.
static uint64_t call_key(const cs_insn *in) {
    const cs_x86 *x = &in->detail->x86;
    if (x->op_count < 1)
        return 0;
    const cs_x86_op *op = &x->operands[0];
    if (op->type == X86_OP_IMM)
        return (uint64_t)op->imm;
    if (op->type == X86_OP_MEM && op->mem.base == X86_REG_RIP && op->mem.index == X86_REG_INVALID)
        return (in->address + in->size + (uint64_t)op->mem.disp) | (1ull << 63);
    return 0;
}

// Whether a jump or call's operand is a fixed target; *to is it.
static bool direct_target(const cs_insn *in, uint64_t *to) {
    const cs_x86 *x = &in->detail->x86;
    if (x->op_count < 1 || x->operands[0].type != X86_OP_IMM)
        return false;
    *to = (uint64_t)x->operands[0].imm;
    return true;
}

// The memory an instruction writes, checked against the block. Writing into it past a header
// (the caller's work, as make_node's field stores: recorded in s->header and judged at the
// return) or storing the block anywhere but the stack frame (a global, an out-parameter: the
// function keeps or publishes it) makes it no forwarder: false then.
// Whether operand i of in may be written. Capstone 4 marks the destination of many SSE/AVX
// stores as read only (movups [rax], xmm0: gcc's inlined memset), so its access flags alone
// would take a function that fills its block for a forwarder. In Intel order the destination
// comes first: a memory operand there is taken as written unless the instruction only reads it.
static bool may_write(const cs_insn *in, uint8_t i) {
    if (in->detail->x86.operands[i].access & CS_AC_WRITE)
        return true;
    if (i != 0)
        return false;
    switch (in->id) {
    case X86_INS_CMP: case X86_INS_TEST: case X86_INS_PUSH: case X86_INS_BT: case X86_INS_NOP:
    case X86_INS_UCOMISS: case X86_INS_UCOMISD: case X86_INS_COMISS: case X86_INS_COMISD:
    case X86_INS_PTEST: case X86_INS_PREFETCH: case X86_INS_PREFETCHNTA: case X86_INS_PREFETCHT0:
    case X86_INS_PREFETCHT1: case X86_INS_PREFETCHT2: case X86_INS_PREFETCHW:
        return false;
    default:
        return true;
    }
}

static bool check_stores(const walk_t *w, const cs_insn *in, state_t *s) {
    const cs_x86 *x = &in->detail->x86;
    bool stores_mem = false, frame_slot = false, block_read = false;
    for (uint8_t i = 0; i < x->op_count; i++) {
        const cs_x86_op *op = &x->operands[i];
        if (op->type == X86_OP_MEM && may_write(in, i)) {
            if (is_bit(s->block, op->mem.index))
                return false;
            if (is_bit(s->block, op->mem.base)) {
                int64_t start = s->off[gpr_index(op->mem.base)] + op->mem.disp;
                int64_t end = start + op->size;
                if (start < 0 || end > MAX_HEADER)
                    return false;
                if (end > s->header)
                    s->header = (uint8_t)end;
                continue;
            }
            stores_mem = true;
            // rbp is the frame only where the prologue made it so (plugin_allocate keeps a
            // global array's address in it)
            frame_slot =
                op->mem.index == X86_REG_INVALID &&
                (op->mem.base == X86_REG_RSP || (op->mem.base == X86_REG_RBP && w->rbp_is_frame));
        }
        if (op->type == X86_OP_REG && (op->access & CS_AC_READ) && is_bit(s->block, op->reg))
            block_read = true;
    }
    return !(stores_mem && block_read && !frame_slot);
}

// The registers after a non-call instruction: one it writes no longer holds the block or zero,
// unless the instruction is a 64-bit copy of one that does, moves a block pointer by a constant
// (add, sub, lea: a header's size), or zeroes it (xor r, r; mov r, 0).
static void after_writes(walk_t *w, const cs_insn *in, state_t *s) {
    cs_regs rd, wr;
    uint8_t n_rd = 0, n_wr = 0;
    const cs_x86 *x = &in->detail->x86;
    const cs_x86_op *o0 = &x->operands[0], *o1 = &x->operands[1];
    bool two = x->op_count == 2 && o0->type == X86_OP_REG;
    int dst = two ? gpr_index(o0->reg) : -1;
    int src = two && o1->type == X86_OP_REG ? gpr_index(o1->reg) : -1;
    bool wide = two && o0->size == 8;
    // what the destination holds afterwards, decided before the writes are applied
    bool to_block = false, to_zero = false;
    int64_t to_off = 0;
    if (dst >= 0) {
        if (in->id == X86_INS_MOV && wide && src >= 0 && (s->block & BIT(src))) {
            to_block = true;
            to_off = s->off[src];
        } else if (in->id == X86_INS_MOV && src >= 0 && (s->zero & BIT(src)) && o0->size >= 4) {
            to_zero = true;
        } else if ((in->id == X86_INS_ADD || in->id == X86_INS_SUB) && wide &&
                   o1->type == X86_OP_IMM && (s->block & BIT(dst))) {
            to_block = true;
            to_off = s->off[dst] + (in->id == X86_INS_ADD ? o1->imm : -o1->imm);
        } else if (in->id == X86_INS_LEA && wide && o1->type == X86_OP_MEM &&
                   o1->mem.index == X86_REG_INVALID && is_bit(s->block, o1->mem.base)) {
            to_block = true;
            to_off = s->off[gpr_index(o1->mem.base)] + o1->mem.disp;
        } else if ((in->id == X86_INS_XOR && src == dst && o0->size >= 4) ||
                   (in->id == X86_INS_MOV && o1->type == X86_OP_IMM && o1->imm == 0 &&
                    o0->size >= 4)) {
            to_zero = true;
        }
    }
    if (cs_regs_access(w->cs, in, rd, &n_rd, wr, &n_wr) != CS_ERR_OK) {
        s->block = s->zero = 0; // unknown writes: assume all is gone (a later return then fails)
        memset(s->off, 0, sizeof s->off);
        return;
    }
    for (uint8_t i = 0; i < n_wr; i++) {
        int g = gpr_index(wr[i]);
        if (g >= 0) {
            s->block &= (uint16_t)~BIT(g);
            s->zero &= (uint16_t)~BIT(g);
            s->off[g] = 0;
        }
    }
    if (to_block)
        set_block(s, dst, to_off);
    if (to_zero)
        s->zero |= BIT(dst);
}

// The call ending at w->ret_addr, found by decoding the function part from lo: its key, or
// false when the decoding does not land on a call there.
// Also notes the targets of the part's direct jumps (w->targets) and whether rbp is its frame
// pointer, decoding on to hi.
static bool find_observed_call(walk_t *w, uint64_t lo, uint64_t hi) {
    uint64_t a = lo, to;
    bool found = false;
    while (a < hi && decode(w, a)) {
        const cs_x86 *x = &w->insn->detail->x86;
        if (cs_insn_group(w->cs, w->insn, X86_GRP_JUMP) && direct_target(w->insn, &to))
            hmap_put(&w->targets, to, NULL);
        else if (w->insn->id == X86_INS_MOV && x->op_count == 2 &&
                 x->operands[0].type == X86_OP_REG && x->operands[0].reg == X86_REG_RBP &&
                 x->operands[1].type == X86_OP_REG && x->operands[1].reg == X86_REG_RSP)
            w->rbp_is_frame = true;
        a += w->insn->size;
        if (a == w->ret_addr && w->insn->id == X86_INS_CALL) {
            w->alloc_key = call_key(w->insn);
            found = true;
        }
    }
    return found;
}

typedef enum step { STEP_ON, STEP_END, STEP_FAIL } step_t;

// One instruction of a path: updates *s, queues the other branch of a conditional jump in
// *branch (branch->addr 0: none). *returned_block: this path returned the allocator's block.
static step_t step(walk_t *w, state_t *s, state_t *branch, bool *returned_block) {
    branch->addr = 0;
    if (!decode(w, s->addr))
        return STEP_FAIL;
    const cs_insn *in = w->insn;
    uint64_t next = in->address + in->size, to;
    uint64_t end = part_end(w, in->address);
    if (!end)
        return STEP_FAIL;
    bool is_call = cs_insn_group(w->cs, in, X86_GRP_CALL);
    bool is_jump = cs_insn_group(w->cs, in, X86_GRP_JUMP);
    if (is_call) {
        uint64_t key = call_key(in);
        bool is_alloc = next == w->ret_addr || (key && key == w->alloc_key);
        if (is_alloc) {
            // rax: the allocator's result, a block of its own (a header written before belongs
            // to another block: a second try after a failure starts afresh)
            s->block = BIT(0);
            s->zero = 0;
            s->header = 0;
            memset(s->off, 0, sizeof s->off);
            s->called |= CALLED_ALLOC;
        } else {
            if ((s->block & ARG_REGS) && !w->loose)
                return STEP_FAIL; // hands the block to another function
            s->block &= (uint16_t)~CALL_CLOBBERED;
            s->zero &= (uint16_t)~CALL_CLOBBERED;
            for (int r = 0; r < 16; r++)
                if (!(s->block & BIT(r)))
                    s->off[r] = 0;
            s->called |= CALLED_OTHER;
        }
        // a call that runs off the end of its function does not return (abort, die). One
        // followed by the target of a jump may not either: gcc places another block after a
        // call it knows never returns (Perl_croak_memory_wrap's), so the path goes on, but
        // what it meets there does not count against the function; the jump brings its own
        // state there, and that counts
        if (next >= end)
            return STEP_END;
        if (!is_alloc && hmap_get(&w->targets, next))
            s->called |= CALLED_MAYBE_DEAD;
        s->addr = next;
        return STEP_ON;
    }
    if (cs_insn_group(w->cs, in, X86_GRP_RET)) {
        if (s->block & BIT(0)) {
            if (s->header > s->off[0])
                return STEP_FAIL; // wrote into what it hands out: the caller's work
            *returned_block = true;
        } else if (!(s->zero & BIT(0)) && s->called) {
            // neither the block nor NULL, after a call: a function that finds or builds
            // something, not one that only forwards
            return STEP_FAIL;
        }
        return STEP_END;
    }
    if (is_jump) {
        if (!direct_target(in, &to)) {
            // a jump table, or a tail call through a pointer (sqlite3Malloc's to the configured
            // allocator when statistics are off): not followed; the loose rule takes the latter
            return w->loose && in->id == X86_INS_JMP ? STEP_END : STEP_FAIL;
        }
        if (in->id == X86_INS_JMP) {
            if (w->alloc_key && call_key(in) == w->alloc_key) {
                *returned_block = true; // a tail call to the allocator returns its block
                return STEP_END;
            }
            s->addr = to;
            return STEP_ON;
        }
        *branch = *s;
        branch->addr = to;
        s->addr = next;
        return next < end ? STEP_ON : STEP_FAIL;
    }
    if (in->id == X86_INS_HLT || in->id == X86_INS_UD2 || in->id == X86_INS_INT3)
        return STEP_END; // a trap ends the path
    if (!check_stores(w, in, s))
        return STEP_FAIL;
    after_writes(w, in, s);
    s->addr = next;
    return next < end ? STEP_ON : STEP_FAIL;
}

static bool walk(walk_t *w, uint64_t entry) {
    hmap_t seen;
    hmap_init(&seen, 1);
    state_t pending[MAX_PENDING];
    size_t n_pending = 0, n_states = 0;
    bool ok = true, returned_block = false;
    pending[n_pending++] = (state_t){.addr = entry};
    while (ok && n_pending > 0) {
        state_t s = pending[--n_pending];
        for (;;) {
            bool existed;
            hmap_put(&seen, state_key(&s), &existed);
            if (existed)
                break;
            if (++n_states > MAX_STATES) {
                ok = false;
                break;
            }
            state_t branch;
            step_t r = step(w, &s, &branch, &returned_block);
            if (r == STEP_FAIL && !(s.called & CALLED_MAYBE_DEAD))
                ok = false;
            if (branch.addr) {
                if (n_pending == MAX_PENDING)
                    ok = false;
                else
                    pending[n_pending++] = branch;
            }
            if (r != STEP_ON || !ok)
                break;
        }
    }
    hmap_fini(&seen);
    return ok && returned_block;
}

bool forwarder_check(const forwarder_code_t *code, uint64_t ret_addr, bool loose) {
    walk_t w = {.code = code, .ret_addr = ret_addr, .loose = loose};
    uint64_t lo, hi;
    if (ret_addr == 0 || !code->bounds(code->ctx, ret_addr - 1, &lo, &hi) ||
        hi - lo > MAX_FUNCTION_BYTES)
        return false;
    if (cs_open(CS_ARCH_X86, CS_MODE_64, &w.cs) != CS_ERR_OK)
        return false;
    cs_option(w.cs, CS_OPT_DETAIL, CS_OPT_ON);
    w.insn = cs_malloc(w.cs);
    hmap_init(&w.targets, 1);
    bool ok = w.insn && find_observed_call(&w, lo, hi) && walk(&w, lo);
    hmap_fini(&w.targets);
    if (w.insn)
        cs_free(w.insn, 1);
    cs_close(&w.cs);
    return ok;
}
