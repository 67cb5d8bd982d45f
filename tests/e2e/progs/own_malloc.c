// SPDX-License-Identifier: MIT
// A program with its own malloc (a bump allocator), whose entry starts with a jrcxz: no jump
// can be put there without moving a branch that has no opposite form, so the shim must refuse
// to patch it and say so (test_static_alloc.c), as it refuses free (a lone return). calloc and
// realloc have ordinary entries and are hooked. One function is both C++'s sized delete and
// its aligned delete: a wrapper of the first would read as a size what callers of the second
// pass as an alignment, so the shim must leave it alone too, and say why. Prints how many
// blocks main asked for.
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Alignas(16) char arena[1 << 22];
static size_t used;
static long n_blocks, n_deletes;

void *bump_alloc(size_t n);
void *bump_alloc(size_t n) {
    size_t need = (n + 15) & ~(size_t)15;
    if (used + need + 16 > sizeof arena)
        return NULL;
    char *p = arena + used;
    memcpy(p, &n, sizeof n);
    used += need + 16;
    n_blocks++;
    return p + 16;
}

// malloc(0) gets a 1-byte block: mov and jrcxz are the first five bytes (jrcxz, unlike the
// other conditional branches, has no opposite form a trampoline could use)
__asm__(".text\n"
        ".globl malloc\n"
        ".type malloc, @function\n"
        "malloc:\n"
        "  mov %rdi, %rcx\n"
        "  jrcxz 1f\n"
        "  jmp bump_alloc\n"
        "1:\n"
        "  mov $1, %edi\n"
        "  jmp bump_alloc\n"
        ".size malloc, .-malloc\n");

void free(void *p) {
    __asm__ volatile("" : : "r"(p) : "memory"); // the arena never reuses
}

__attribute__((noinline)) void *calloc(size_t n, size_t m) {
    size_t total;
    if (__builtin_mul_overflow(n, m, &total))
        return NULL;
    return bump_alloc(total); // static memory, never reused: already zero
}

void *realloc(void *old, size_t n) {
    void *p = bump_alloc(n);
    if (p && old) {
        size_t have;
        memcpy(&have, (char *)old - 16, sizeof have);
        memcpy(p, old, have < n ? have : n);
    }
    return p;
}

// operator delete(void *, size_t) and operator delete(void *, align_val_t), by their mangled
// names: one function, which ignores its second argument (the arena never reuses)
void sized_delete(void *p, size_t n) __asm__("_ZdlPvm");
__attribute__((noinline)) void sized_delete(void *p, size_t n) {
    __asm__ volatile("" : : "r"(p), "r"(n) : "memory");
    n_deletes++;
}
void aligned_delete(void *p, size_t align) __asm__("_ZdlPvSt11align_val_t")
    __attribute__((alias("_ZdlPvm")));

int main(void) {
    // the arena also serves the C library (and, under the shim, the shim's libraries): count
    // only the blocks asked for here
    void *keep[100];
    long mine = 0;
    for (int i = 0; i < 100; i++)
        mine += (keep[i] = calloc(1, 40)) != NULL;
    for (int i = 0; i < 100; i++)
        free(keep[i]);
    for (int i = 0; i < 10; i++) { // the arena's own blocks: not the shim's to count
        void *p = bump_alloc(64);
        if (i & 1)
            sized_delete(p, 64);
        else
            aligned_delete(p, 64);
    }
    printf("allocs=%ld reallocs=0 frees=100 deletes=%ld arena_blocks_total=%s\n", mine, n_deletes,
           n_blocks >= mine ? "ok" : "short");
    return 0;
}
