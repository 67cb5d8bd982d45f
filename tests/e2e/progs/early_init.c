// SPDX-License-Identifier: MIT
// Links early_lib.c, whose constructor allocates before the preloaded shim's: see there.
int early_lib_release(void);

int main(void) {
    return early_lib_release() == 10000 ? 0 : 1;
}
