// SPDX-License-Identifier: MIT
// A plugin that dlopen_host loads, calls and unloads mid-run: 50 blocks of 96 B leaked from
// plugin_allocate.
#include <stdlib.h>

void plugin_allocate(void); // looked up with dlsym by dlopen_host
void *volatile plugin_sink[64];

__attribute__((noinline)) void plugin_allocate(void) {
    for (int i = 0; i < 50; i++)
        plugin_sink[i] = malloc(96);
}
