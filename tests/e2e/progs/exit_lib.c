// SPDX-License-Identifier: MIT
// A library that frees its blocks as a program is torn down: half in its destructor, half in an
// exit handler it registered from its constructor (as a C++ library's static objects do: their
// destructors are registered then and run when the library is finalised). The dynamic loader
// finalises it after the preloaded shim, which was initialised after it. test_process.c checks
// that the trace sees every one of these frees: no block of this library is live at exit.
#include <stdint.h>
#include <stdlib.h>

#define EXIT_BLOCKS 1000

int exit_lib_fill(void); // exit_main.c calls it

static void *by_dtor[EXIT_BLOCKS], *by_handler[EXIT_BLOCKS];

static void free_by_handler(void) {
    for (size_t i = 0; i < EXIT_BLOCKS; i++)
        free(by_handler[i]);
}

__attribute__((constructor)) static void exit_lib_init(void) {
    atexit(free_by_handler);
}

__attribute__((destructor)) static void exit_lib_fini(void) {
    for (size_t i = 0; i < EXIT_BLOCKS; i++)
        free(by_dtor[i]);
}

int exit_lib_fill(void) {
    for (size_t i = 0; i < EXIT_BLOCKS; i++) {
        by_dtor[i] = malloc(24 + i % 40);
        by_handler[i] = malloc(100 + i % 100);
        if (!by_dtor[i] || !by_handler[i])
            return 1;
        *(volatile uint8_t *)by_dtor[i] = 1;
        *(volatile uint8_t *)by_handler[i] = 2;
    }
    return 0;
}
