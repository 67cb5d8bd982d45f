// SPDX-License-Identifier: MIT
// The state word and the trace's clock origin. Includes only leaves (clock, diag): every module
// may read the state, so this file must never call back into one of them.
#include "state.h"

#include "clock.h"
#include "diag.h"

_Atomic int hp_state;
static uint64_t start_ns;

uint64_t hp_state_now(void) {
    // the TSC clock starts a little behind the vDSO's (clock.h): never before the start
    uint64_t t = hp_clock_ns();
    return HP_LIKELY(t > start_ns) ? t - start_ns : 0;
}

uint64_t hp_state_start_ns(void) {
    return start_ns;
}

void hp_state_set_start_ns(uint64_t ns) {
    start_ns = ns;
}

void hp_state_disable(const char *reason) {
    int expected = HP_STATE_ON;
    if (atomic_compare_exchange_strong(&hp_state, &expected, HP_STATE_DISABLED))
        hp_diag_line(reason, (char *)NULL);
}
