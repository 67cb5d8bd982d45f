// SPDX-License-Identifier: MIT
// Blocks still live at exit (issue #23): the addresses the trace leaves allocated, kept from the
// records the pipeline's drainers write, and measured at exit into TOUCH_LIVE records
// (docs/trace-format.md#touch), so leaked and long-lived blocks get a bytes-touched figure too.
// Kept by the drainers, not by the app's threads: an event pays nothing for it on its own thread.
#ifndef HEAPPROF_PRELOAD_TOUCH_LIVE_H
#define HEAPPROF_PRELOAD_TOUCH_LIVE_H

#include "format/hpt_codec.h"

#include <stddef.h>
#include <stdint.h>

// Applies the ring entries [p, end) (ringent.h) to the table: an allocation
// adds its address, a free takes it away. Counts per address, so that the order in which the
// threads' rings are drained does not matter. Called once per drain by whichever thread drains
// (recursion guard held); takes the table's lock for the call. Out of memory: the table stops
// (no figures at exit), the trace goes on.
void hp_touch_live_note(const uint8_t *p, const uint8_t *end);

// Measures every block the table holds (hp_touch_measure_live) and writes their TOUCH_LIVE
// records as EVENTS chunks of tid 0. Once, by the flusher at exit, after the last drain and
// before the trailer. Returns the records written.
size_t hp_touch_live_emit(void);

// How many addresses the table holds as allocated now (for tests).
size_t hp_touch_live_count(void);
// Whether addr is held as allocated (for tests).
bool hp_touch_live_has(uint64_t addr);

// fork: the child starts with an empty table (the parent's may be mid-change).
void hp_touch_live_fork_child(void);

#endif
