// SPDX-License-Identifier: MIT
// Linked statically: no dynamic linker loads it, so nothing can be preloaded (test_cli.c).
#include <stdio.h>

int main(void) {
    puts("hello");
    return 0;
}
