// SPDX-License-Identifier: MIT
// The forwarder rule (docs/design.md#allocator-wrappers) as a walk over every path of one small
// function, from its entry, with capstone decoding one instruction at a time. A path's state is
// the set of registers that hold the allocator's block (its result, and copies of it) and
// whether an allocator or another function was called on the way; (address, state) pairs are
// visited once, so loops end. Bounded: a function past the limits is not a forwarder.
#include "symbols/forwarder.h"

#include "core/hmap.h"

#include <capstone/capstone.h>
#include <stdlib.h>

#define MAX_FUNCTION_BYTES 2048 // "small": git's xmalloc is ~200 bytes, make_node-like code less
#define MAX_STATES 4096
#define MAX_PENDING 256

enum { CALLED_ALLOC = 1, CALLED_OTHER = 2 };

typedef struct state {
    uint64_t addr;
    uint16_t block; // bit i: general register i (gpr_index) holds the block
    uint8_t called;
} state_t;

// General-purpose register -> 0..15 (rax, rcx, rdx, rbx, rsp, rbp, rsi, rdi, r8..r15), any width;
// -1 for every other register.
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

#define BIT(i) ((uint16_t)(1u << (i)))
// System V AMD64: arguments in rdi, rsi, rdx, rcx, r8, r9; a call may clobber those and rax,
// r10, r11 (so the block survives a call only in rbx, rbp, r12-r15)
static const uint16_t ARG_REGS = BIT(7) | BIT(6) | BIT(2) | BIT(1) | BIT(8) | BIT(9);
static const uint16_t CALL_CLOBBERED = BIT(7) | BIT(6) | BIT(2) | BIT(1) | BIT(8) | BIT(9) |
                                       BIT(0) | BIT(10) | BIT(11);

static bool is_bit(uint16_t set, unsigned reg) {
    int i = gpr_index(reg);
    return i >= 0 && (set & BIT(i));
}

typedef struct walk {
    csh cs;
    cs_insn *insn;
    const forwarder_code_t *code;
    uint64_t ret_addr;
    uint64_t alloc_key; // call_key of the observed allocator call (0: not comparable)
    uint64_t part_lo, part_hi; // bounds of the last part looked up
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

// The memory an instruction writes, checked against the block: writing through it (the caller's
// work, as make_node's field stores) or storing it anywhere but the stack frame (a global, an
// out-parameter: the function keeps or publishes the block) makes it no forwarder.
static bool writes_block(const cs_insn *in, uint16_t block) {
    const cs_x86 *x = &in->detail->x86;
    bool stores_mem = false, frame_slot = false, block_read = false;
    for (uint8_t i = 0; i < x->op_count; i++) {
        const cs_x86_op *op = &x->operands[i];
        if (op->type == X86_OP_MEM && (op->access & CS_AC_WRITE)) {
            if (is_bit(block, op->mem.base) || is_bit(block, op->mem.index))
                return true;
            stores_mem = true;
            frame_slot = op->mem.base == X86_REG_RSP || op->mem.base == X86_REG_RBP;
        }
        if (op->type == X86_OP_REG && (op->access & CS_AC_READ) && is_bit(block, op->reg))
            block_read = true;
    }
    return stores_mem && block_read && !frame_slot;
}

// The block set after a non-call instruction: a register it writes no longer holds the block,
// unless the instruction is a 64-bit copy of a register that does.
static uint16_t after_writes(walk_t *w, const cs_insn *in, uint16_t block) {
    cs_regs rd, wr;
    uint8_t n_rd = 0, n_wr = 0;
    const cs_x86 *x = &in->detail->x86;
    bool copy = in->id == X86_INS_MOV && x->op_count == 2 && x->operands[0].type == X86_OP_REG &&
                x->operands[1].type == X86_OP_REG && x->operands[0].size == 8 &&
                is_bit(block, x->operands[1].reg);
    if (cs_regs_access(w->cs, in, rd, &n_rd, wr, &n_wr) != CS_ERR_OK)
        return 0; // unknown writes: assume the block is gone (a later return then fails)
    for (uint8_t i = 0; i < n_wr; i++) {
        int g = gpr_index(wr[i]);
        if (g >= 0)
            block &= (uint16_t)~BIT(g);
    }
    if (copy)
        block |= BIT(gpr_index(x->operands[0].reg));
    return block;
}

// The call ending at w->ret_addr, found by decoding the function part from lo: its key, or
// false when the decoding does not land on a call there.
static bool find_observed_call(walk_t *w, uint64_t lo) {
    uint64_t a = lo;
    while (a < w->ret_addr) {
        if (!decode(w, a))
            return false;
        a += w->insn->size;
    }
    if (a != w->ret_addr || w->insn->id != X86_INS_CALL)
        return false;
    w->alloc_key = call_key(w->insn);
    return true;
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
        if (next == w->ret_addr || (key && key == w->alloc_key)) {
            s->block = BIT(0); // rax: the allocator's result
            s->called |= CALLED_ALLOC;
        } else {
            if (s->block & ARG_REGS)
                return STEP_FAIL; // hands the block to another function
            s->block &= (uint16_t)~CALL_CLOBBERED;
            s->called |= CALLED_OTHER;
        }
        // a call that runs off the end of its function does not return (abort, die)
        if (next >= end)
            return STEP_END;
        s->addr = next;
        return STEP_ON;
    }
    if (cs_insn_group(w->cs, in, X86_GRP_RET)) {
        if (s->called & CALLED_ALLOC) {
            if (!(s->block & BIT(0)))
                return STEP_FAIL; // returns something else than the block
            *returned_block = true;
        } else if (s->called & CALLED_OTHER) {
            return STEP_FAIL; // a path that allocates nothing but calls: not only forwarding
        }
        return STEP_END;
    }
    if (is_jump) {
        if (!direct_target(in, &to))
            return STEP_FAIL; // a jump table or a tail call through a pointer: not followed
        if (in->id == X86_INS_JMP) {
            if (call_key(in) == w->alloc_key) {
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
    if (writes_block(in, s->block))
        return STEP_FAIL;
    s->block = after_writes(w, in, s->block);
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
            if (s.addr >= (1ull << 44)) {
                ok = false;
                break;
            }
            bool existed;
            hmap_put(&seen, s.addr << 19 | (uint64_t)s.block << 3 | s.called, &existed);
            if (existed)
                break;
            if (++n_states > MAX_STATES) {
                ok = false;
                break;
            }
            state_t branch;
            step_t r = step(w, &s, &branch, &returned_block);
            if (r == STEP_FAIL)
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

bool forwarder_check(const forwarder_code_t *code, uint64_t ret_addr) {
    walk_t w = {.code = code, .ret_addr = ret_addr};
    uint64_t lo, hi;
    if (ret_addr == 0 || !code->bounds(code->ctx, ret_addr - 1, &lo, &hi) ||
        hi - lo > MAX_FUNCTION_BYTES)
        return false;
    if (cs_open(CS_ARCH_X86, CS_MODE_64, &w.cs) != CS_ERR_OK)
        return false;
    cs_option(w.cs, CS_OPT_DETAIL, CS_OPT_ON);
    w.insn = cs_malloc(w.cs);
    bool ok = w.insn && find_observed_call(&w, lo) && walk(&w, lo);
    if (w.insn)
        cs_free(w.insn, 1);
    cs_close(&w.cs);
    return ok;
}
