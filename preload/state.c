// SPDX-License-Identifier: MIT
// The state word and the trace's clock origin. Includes only leaves (clock, diag): every module
// may read the state, so this file must never call back into one of them.
#include "state.h"

#include "clock.h"
#include "diag.h"

#include <sys/mman.h>

_Static_assert(sizeof(hp_state_page_t) == 4096, "the copy has its page to itself");

_Atomic int hp_state;
hp_state_page_t hp_state_page;
uint64_t hp_state_start_ns_;

bool hp_state_raw_child(void) {
    return atomic_load(&hp_state_page.seen) == HP_STATE_OFF &&
           atomic_load(&hp_state) != HP_STATE_OFF;
}

void hp_state_set(int v) {
    if (!hp_state_raw_child())
        atomic_store(&hp_state_page.seen, v);
    atomic_store(&hp_state, v);
}

bool hp_state_cas(int *expected, int v) {
    bool raw = hp_state_raw_child();
    if (!atomic_compare_exchange_strong(&hp_state, expected, v))
        return false;
    if (!raw)
        atomic_store(&hp_state_page.seen, v);
    return true;
}

bool hp_state_protect(void) {
#ifdef MADV_WIPEONFORK
    // .bss past the file's last page is an anonymous private mapping, which the advice needs
    return madvise(&hp_state_page, sizeof hp_state_page, MADV_WIPEONFORK) == 0;
#else
    return false;
#endif
}

void hp_state_after_fork(void) {
    atomic_store(&hp_state_page.seen, atomic_load(&hp_state));
}

uint64_t hp_state_start_ns(void) {
    return hp_state_start_ns_;
}

void hp_state_set_start_ns(uint64_t ns) {
    hp_state_start_ns_ = ns;
}

void hp_state_disable(const char *reason) {
    int expected = HP_STATE_ON;
    if (hp_state_cas(&expected, HP_STATE_DISABLED))
        hp_diag_line(reason, (char *)NULL);
}
