// SPDX-License-Identifier: MIT
// Allocations below code that has no CFI but keeps a frame pointer, as V8's builtins in node's
// text, JIT-compiled code and assembly do. `fp_trampoline` (assembly, no .cfi directives: not in
// .eh_frame) sets up an rbp frame and calls its argument; a copy of its bytes in an anonymous
// executable mapping (no module at all) is the JIT case.
// main: 1,000 blocks of 40 B called directly, 1,000 of 48 B through the trampoline in the
// binary, 1,000 of 56 B through its copy: 3,000 blocks, 144,000 B; every block freed.
// The stacks of all three must reach main (the walk guesses the frame under code without CFI
// from rbp, as libunwind does). `no_cfi MAP`: also writes a perf map to MAP that names the copy
// "jit_trampoline", as a JIT does in /tmp/perf-PID.map.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void fp_trampoline(void (*fn)(long), long arg);
extern const char fp_trampoline_code[], fp_trampoline_end[]; // its bytes
__asm__(".text\n"
        ".globl fp_trampoline\n"
        ".type fp_trampoline, @function\n"
        ".globl fp_trampoline_code\n"
        "fp_trampoline:\n"
        "fp_trampoline_code:\n"
        "  push %rbp\n"
        "  mov %rsp, %rbp\n"
        "  mov %rdi, %rax\n"
        "  mov %rsi, %rdi\n"
        "  call *%rax\n"
        "  pop %rbp\n"
        "  ret\n"
        ".size fp_trampoline, .-fp_trampoline\n"
        ".globl fp_trampoline_end\n"
        "fp_trampoline_end:\n");

static void *volatile keep[1000];

__attribute__((noinline)) static void alloc_blocks(long size) {
    for (int i = 0; i < 1000; i++)
        keep[i] = malloc((size_t)size);
    for (int i = 0; i < 1000; i++)
        free(keep[i]);
}

__attribute__((noinline)) static void via_jit(void (*jit)(void (*)(long), long)) {
    jit(alloc_blocks, 56);
}

int main(int argc, char **argv) {
    alloc_blocks(40);
    fp_trampoline(alloc_blocks, 48);
    size_t len = (size_t)(fp_trampoline_end - fp_trampoline_code);
    void *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (code == MAP_FAILED)
        return 1;
    memcpy(code, fp_trampoline_code, len);
    if (mprotect(code, 4096, PROT_READ | PROT_EXEC) != 0)
        return 1;
    void (*jit)(void (*)(long), long);
    memcpy(&jit, &code, sizeof jit); // an object pointer made a function pointer
    if (argc > 1) {
        FILE *map = fopen(argv[1], "w");
        if (!map)
            return 1;
        fprintf(map, "%lx %zx jit_trampoline\n", (unsigned long)(uintptr_t)code, len);
        fclose(map);
    }
    via_jit(jit);
    munmap(code, 4096);
    puts("ok");
    return 0;
}
