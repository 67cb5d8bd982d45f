// SPDX-License-Identifier: MIT
// Allocations below code that has no CFI but keeps a frame pointer, as V8's builtins in node's
// text, JIT-compiled code and assembly do. `fp_trampoline` (assembly, no .cfi directives: not in
// .eh_frame) sets up an rbp frame and calls its argument; a copy of its bytes in an anonymous
// executable mapping (no module at all) is the JIT case.
// `py_trampoline_code` is CPython's perf trampoline (3.12 on, `python -X perf`), byte for byte:
// no CFI and no frame pointer; a copy of it is called with rbp pointing nowhere.
// main: 1,000 blocks of 40 B called directly, 1,000 of 48 B through the trampoline in the
// binary, 1,000 of 56 B through its copy, 1,000 of 64 B through the copy of CPython's: 4,000
// blocks, 208,000 B; every block freed. The stacks of all four must reach main (the walk
// guesses the frame under code without CFI from rbp, as libunwind does, and knows CPython's
// trampoline). `no_cfi MAP`: also writes a perf map to MAP that names the copies
// "jit_trampoline" and "py_trampoline", as a JIT does in /tmp/perf-PID.map (`no_cfi tmp`: there).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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
        "fp_trampoline_end:\n"
        ".globl py_trampoline_code\n"
        "py_trampoline_code:\n"
        "  sub $8, %rsp\n"
        "  call *%rcx\n"
        "  add $8, %rsp\n"
        "  ret\n"
        ".globl py_trampoline_end\n"
        "py_trampoline_end:\n"
        // call_with_bad_rbp(trampoline, fn, arg): calls trampoline with fn in rcx and arg in
        // rdi, as CPython does, and rbp = 1 (its own frame has CFI: the walk gets past it)
        ".globl call_with_bad_rbp\n"
        ".type call_with_bad_rbp, @function\n"
        "call_with_bad_rbp:\n"
        "  .cfi_startproc\n"
        "  push %rbp\n"
        "  .cfi_def_cfa_offset 16\n"
        "  .cfi_offset %rbp, -16\n"
        "  mov $1, %ebp\n"
        "  mov %rdi, %rax\n"
        "  mov %rsi, %rcx\n"
        "  mov %rdx, %rdi\n"
        "  call *%rax\n"
        "  pop %rbp\n"
        "  .cfi_def_cfa_offset 8\n"
        "  ret\n"
        "  .cfi_endproc\n"
        ".size call_with_bad_rbp, .-call_with_bad_rbp\n");
extern const char py_trampoline_code[], py_trampoline_end[];
void call_with_bad_rbp(const void *trampoline, void (*fn)(long), long arg);

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
    size_t py_len = (size_t)(py_trampoline_end - py_trampoline_code);
    char *py_code = (char *)code + 64;
    memcpy(py_code, py_trampoline_code, py_len);
    if (mprotect(code, 4096, PROT_READ | PROT_EXEC) != 0)
        return 1;
    void (*jit)(void (*)(long), long);
    memcpy(&jit, &code, sizeof jit); // an object pointer made a function pointer
    if (argc > 1) {
        char tmp_map[64];
        snprintf(tmp_map, sizeof tmp_map, "/tmp/perf-%d.map", (int)getpid());
        FILE *map = fopen(strcmp(argv[1], "tmp") ? argv[1] : tmp_map, "w");
        if (!map)
            return 1;
        fprintf(map, "%lx %zx jit_trampoline\n", (unsigned long)(uintptr_t)code, len);
        fprintf(map, "%lx %zx py_trampoline\n", (unsigned long)(uintptr_t)py_code, py_len);
        fclose(map);
    }
    via_jit(jit);
    call_with_bad_rbp(py_code, alloc_blocks, 64);
    munmap(code, 4096);
    puts("ok");
    return 0;
}
