// SPDX-License-Identifier: MIT
// Where an analyzer command's time goes, for maintainers measuring on many cores: with
// HEAPPROF_STAGE_TIMES=1 each stage_mark prints one stderr line with the wall time since the
// previous mark, the process's CPU time (all threads) and the calling thread's CPU time in
// that stretch. CPU/wall near 1 on the calling thread marks a serial stage. Silent otherwise.
#pragma once

// Ends the stretch since the previous mark (or the first call) and names it.
void stage_mark(const char *stage);
