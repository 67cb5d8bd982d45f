// SPDX-License-Identifier: MIT
// A program whose allocating function has a terminal escape in its name: the build renames
// evil_term with objcopy --redefine-syms (tests/e2e/CMakeLists.txt) to
// "\e]0;PWNED\a\e[41mRED\e[0m" (set the window title, paint the background red). Built without
// debug info, so the symbolizer names the frame from the symbol table. test_report.c checks that
// the text outputs print it escaped.
#include <stdlib.h>
#include <string.h>

void *evil_term(size_t n);

__attribute__((noinline)) void *evil_term(size_t n) {
    char *p = malloc(n);
    if (p)
        memset(p, 1, n);
    __asm__ volatile("" ::: "memory"); // keep the call a call, not a tail call
    return p;
}

int main(void) {
    void *keep = evil_term(4096); // leaked on purpose: a site in every ranking
    for (int i = 0; i < 100; i++)
        free(evil_term(100 + (size_t)i));
    __asm__ volatile("" ::"r"(keep) : "memory");
    return 0;
}
