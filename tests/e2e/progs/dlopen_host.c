// SPDX-License-Identifier: MIT
// Loads the plugin named in argv[1], calls its allocating function, unloads it, then loads
// libm-free code of its own: 20 blocks of 40 B. The plugin's blocks must still be named by
// their function after the plugin is gone.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static void *volatile keep[32];

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    void (*fn)(void);
    *(void **)&fn = dlsym(h, "plugin_allocate");
    if (!fn)
        return 1;
    fn();
    dlclose(h);
    for (int i = 0; i < 20; i++)
        keep[i] = malloc(40);
    return 0;
}
