// SPDX-License-Identifier: MIT
// event: the one event type the trace reader hands out in merged time order, and what every
// decoding stage produces (docs/trace-format.md#records says how records become events).
#ifndef HEAPPROF_ANALYZER_EVENT_H
#define HEAPPROF_ANALYZER_EVENT_H

#include <stdint.h>

typedef enum reader_kind {
    READER_ALLOC = 1,
    READER_FREE,
    READER_THREAD_START,
    READER_THREAD_END,
    READER_MODULE_LOAD,
    READER_MODULE_UNLOAD,
    READER_TOUCH_LIVE, // a block still live at exit, and its bytes-touched measure (as FREE's)
} reader_kind_t;

typedef enum reader_alloc_kind { // reader_event_t.sub of READER_ALLOC
    READER_MALLOC = 1,
    READER_CALLOC,
    READER_ALIGNED,
    READER_REALLOC, // the new-block half of a REALLOC record; old_addr says what it replaced
} reader_alloc_kind_t;

#define READER_FREE_OF_REALLOC                                                                     \
    1u // reader_event_t.flags of READER_FREE: the old-block half of a REALLOC
#define READER_FREE_SIZED                                                                          \
    2u // reader_event_t.flags of READER_FREE: a FREE_SIZED record; size and free_align hold what
       // the free named (never with touch)

// One merged event. A REALLOC record becomes two: FREE(old_addr, flag READER_FREE_OF_REALLOC) at
// the time before the call (left out for realloc(NULL, n)), then ALLOC(sub READER_REALLOC) at the
// time after it returned.
// FREE events carry the freed block's bytes-touched measure (docs/trace-format.md#touch) in
// fields an ALLOC uses otherwise, so the event stays 48 bytes.
typedef struct reader_event {
    uint8_t kind;     // reader_kind_t
    union {
        uint8_t sub;   // READER_ALLOC: reader_alloc_kind_t; else 0
        uint8_t touch; // READER_FREE, _TOUCH_LIVE: 0 not measured, else 1 + HPT_TOUCH_*
    };
    uint16_t flags;   // READER_FREE_OF_REALLOC
    uint32_t tid;     // 0 for process-wide records (module map at start)
    uint64_t time_ns; // since the trace start (hpt_file_hdr_t.start_ns)
    uint64_t stack;   // ALLOC: stack id; MODULE_*: index into reader_modules() (UINT64_MAX unknown)
    uint64_t addr;    // ALLOC/FREE: block address; MODULE_*: load base
    union {
        uint64_t old_addr;   // ALLOC of a realloc: the block it replaced (0 for realloc(NULL, n))
        uint64_t touched_nz; // FREE with touch: bytes not zero (the measure for calloc blocks)
        uint64_t free_align; // FREE with READER_FREE_SIZED: the alignment it named (0: none)
    };
    union {
        uint64_t size;    // ALLOC: bytes; MODULE_LOAD: mapped size
        uint64_t touched; // FREE with touch: bytes touched (see docs/trace-format.md#touch);
                          // FREE with READER_FREE_SIZED: the size it named (size)
    };
} reader_event_t;

#endif
