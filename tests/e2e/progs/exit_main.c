// SPDX-License-Identifier: MIT
// Links exit_lib.c, whose blocks are freed as the process is torn down: see there.
int exit_lib_fill(void);

int main(void) {
    return exit_lib_fill();
}
