// SPDX-License-Identifier: MIT
// The state word and the trace's clock origin. Includes only leaves (clock, diag): every module
// may read the state, so this file must never call back into one of them.
#include "state.h"

#include "clock.h"
#include "diag.h"

_Atomic int hp_state;
uint64_t hp_state_start_ns_;

uint64_t hp_state_start_ns(void) {
    return hp_state_start_ns_;
}

void hp_state_set_start_ns(uint64_t ns) {
    hp_state_start_ns_ = ns;
}

void hp_state_disable(const char *reason) {
    int expected = HP_STATE_ON;
    if (atomic_compare_exchange_strong(&hp_state, &expected, HP_STATE_DISABLED))
        hp_diag_line(reason, (char *)NULL);
}
