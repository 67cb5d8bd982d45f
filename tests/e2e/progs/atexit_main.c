// SPDX-License-Identifier: MIT
// Links atexit_lib.c, whose constructor registers its exit handlers before the program starts:
// see there. Allocates nothing itself.
int atexit_lib_handlers_run(void);

int main(void) {
    return atexit_lib_handlers_run() == 0 ? 0 : 1;
}
