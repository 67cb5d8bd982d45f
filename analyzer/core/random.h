// SPDX-License-Identifier: MIT
// random_u64: 64 bits from the kernel's generator, for names and ids that another process
// must not guess or repeat by chance (temporary files, `heapprof run`'s run id). Early in boot,
// before the kernel has entropy, a mix of the clock and the pid: callers keep such values safe
// by other means (O_EXCL, a pid check beside the id).
#ifndef HEAPPROF_ANALYZER_RANDOM_H
#define HEAPPROF_ANALYZER_RANDOM_H

#include <stdint.h>

uint64_t random_u64(void);

#endif
