// SPDX-License-Identifier: MIT
// A library that registers ATEXIT_HANDLERS exit handlers in its static constructor, as a C++
// library with many static objects does (LLVM's register thousands). The constructor runs
// before the program's start registers the loader's _dl_fini, so these handlers sit in older
// blocks of glibc's list than _dl_fini's, and glibc frees those blocks (1 KiB each, 32 handlers
// a block) only after _dl_fini, and so after the shim's destructor. test_process.c checks that
// the trace sees them freed, as DHAT does.
#include <stdlib.h>

#define ATEXIT_HANDLERS 200

int atexit_lib_handlers_run(void);

static int handlers_run;

static void on_exit_handler(void) {
    handlers_run++;
}

int atexit_lib_handlers_run(void) {
    return handlers_run;
}

__attribute__((constructor)) static void atexit_init(void) {
    for (int i = 0; i < ATEXIT_HANDLERS; i++)
        if (atexit(on_exit_handler) != 0)
            abort();
}
