// SPDX-License-Identifier: MIT
// A program whose allocating functions have hostile names in the symbol table: the build renames
// evil_img and evil_script with objcopy --redefine-sym (tests/browser/CMakeLists.txt) to
// "<img src=x onerror=window.__pwned=1>" and "</script><script>window.__pwned=2</script>".
// Built without debug info, so the symbolizer names the frames from the symbol table. The
// browser test checks the viewer shows these names as text and runs none of it.
#include <stdlib.h>
#include <string.h>

void *evil_img(size_t n);
void *evil_script(size_t n);

__attribute__((noinline)) void *evil_img(size_t n) {
    char *p = malloc(n);
    if (p)
        memset(p, 1, n);
    __asm__ volatile("" ::: "memory"); // keep the call a call, not a tail call
    return p;
}

__attribute__((noinline)) void *evil_script(size_t n) {
    char *p = malloc(n);
    if (p)
        memset(p, 2, n);
    __asm__ volatile("" ::: "memory");
    return p;
}

int main(void) {
    void *keep = evil_img(4096); // leaked on purpose: a site in every view
    for (int i = 0; i < 100; i++) {
        free(evil_img(100 + (size_t)i));
        free(evil_script(200 + (size_t)i));
    }
    void *keep2 = evil_script(8192);
    __asm__ volatile("" ::"r"(keep), "r"(keep2) : "memory");
    return 0;
}
