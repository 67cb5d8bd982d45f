// SPDX-License-Identifier: MIT
// A shared library that plays an allocator's part for C++ (test_static_alloc.c): it defines
// operator new and delete over glibc's __libc_malloc and __libc_free, which the shim does not
// interpose, so its blocks reach the trace only if the shim hooks these six. tc_malloc marks it
// as an allocator's library (allocscan.c). Its sized delete starts with a jrcxz, which entry
// patching refuses: the six are then reached through their callers' GOT slots
// (allocscan.c's cxx_through_got), as the shim must show.
#include <stddef.h>

void *__libc_malloc(size_t n);
void __libc_free(void *p);

void *tc_malloc(size_t n);
void *tc_malloc(size_t n) {
    return __libc_malloc(n);
}

// the mangled names, from C
void *op_new(size_t n) __asm__("_Znwm");
void *op_new_array(size_t n) __asm__("_Znam");
void op_delete(void *p) __asm__("_ZdlPv");
void op_delete_array(void *p) __asm__("_ZdaPv");
void op_delete_array_sized(void *p, size_t n) __asm__("_ZdaPvm");

__attribute__((noinline)) void *op_new(size_t n) {
    void *p = __libc_malloc(n ? n : 1);
    if (!p)
        __builtin_trap(); // a test library: no bad_alloc to throw from C
    return p;
}

__attribute__((noinline)) void *op_new_array(size_t n) {
    return op_new(n);
}

__attribute__((noinline)) void op_delete(void *p) {
    __libc_free(p);
}

__attribute__((noinline)) void op_delete_array(void *p) {
    __libc_free(p);
}

// _ZdlPvm(p, n): `jrcxz` on n first (a null size cannot reach a sized delete; it only has to
// be the first instruction), then free
__asm__(".text\n"
        ".globl _ZdlPvm\n"
        ".type _ZdlPvm, @function\n"
        "_ZdlPvm:\n"
        "  mov %rsi, %rcx\n"
        "  jrcxz 1f\n"
        "1:\n"
        "  jmp _ZdlPv@PLT\n"
        ".size _ZdlPvm, .-_ZdlPvm\n");

__attribute__((noinline)) void op_delete_array_sized(void *p, size_t n) {
    (void)n;
    __libc_free(p);
}
