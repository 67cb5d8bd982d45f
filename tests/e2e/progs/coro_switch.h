// SPDX-License-Identifier: MIT
// A coroutine switch written by hand, as libco, libaco, minicoro or Boost.Context have one: no
// CFI, and nothing on the coroutine's stack that ends an unwinder's walk. The word above the
// coroutine's entry frame is whatever the caller put there: coro_stale_return_site() gives a
// return address into a function whose frame is over 4 KiB, a stale word a stack may hold from
// earlier use, which sends a walk that trusts it ~4 KiB past the stack's top. Shared by
// tests/e2e/progs/coro_stale.c and tests/unit/test_unwind.c; header-only, one program each.
#ifndef HEAPPROF_TESTS_CORO_SWITCH_H
#define HEAPPROF_TESTS_CORO_SWITCH_H

#include <stdint.h>

// Saves the callee-saved registers and the stack pointer in *save, switches to new_sp and
// restores the registers saved there.
void coro_switch(void **save, void *new_sp);
__asm__(".text\n"
        ".type coro_switch,@function\n"
        "coro_switch:\n"
        "  push %rbp\n  push %rbx\n  push %r12\n  push %r13\n  push %r14\n  push %r15\n"
        "  mov %rsp, (%rdi)\n  mov %rsi, %rsp\n"
        "  pop %r15\n  pop %r14\n  pop %r13\n  pop %r12\n  pop %rbx\n  pop %rbp\n"
        "  ret\n"
        ".size coro_switch, .-coro_switch\n");

__attribute__((noinline)) static uint64_t coro_return_address_here(void) {
    return (uint64_t)(uintptr_t)__builtin_return_address(0);
}

__attribute__((noinline, unused)) static uint64_t coro_stale_return_site(void) {
    volatile char pad[4096];
    pad[0] = 1;
    uint64_t ra = coro_return_address_here();
    pad[4095] = (char)ra;
    return ra + (uint64_t)(pad[0] - 1);
}

// Lays out a fresh coroutine below top (16-byte aligned, the stack's end): the first
// coro_switch to the returned stack pointer enters entry, whose return address is `above`.
__attribute__((unused)) static void *coro_prepare(uint64_t *top, void (*entry)(void),
                                                  uint64_t above) {
    top[-1] = above;
    top[-2] = (uint64_t)(uintptr_t)entry; // where coro_switch's ret goes
    for (int k = 3; k <= 8; k++)
        top[-k] = 0; // the six registers coro_switch pops
    return &top[-8];
}

#endif
