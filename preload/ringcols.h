// SPDX-License-Identifier: MIT
// A ring's entries (ringent.h) -> one EVENTS chunk's payload: in columns (hpt_columns.h), read
// straight from the fixed-width entries, or, where the columns cannot carry a chunk, as the
// trace's varint rows. Either way the chunk says exactly what the rows of the same records say:
// the columns' table counts the rows' bytes, and hpt_cols_untranspose rebuilds them. Runs on
// the drainers (pipeline.c); never allocates.
#ifndef HEAPPROF_PRELOAD_RINGCOLS_H
#define HEAPPROF_PRELOAD_RINGCOLS_H

#include "format/hpt_columns.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// Where a ring's stream stands between chunks (and drains).
typedef struct hp_rc_pos {
    hpt_dstate_t w;    // delta state of the rows written so far: the next chunk's base
    uint64_t raw_time; // the time the stream's next trace record counts from (ringent.h)
    uint64_t t_hi;     // the high bits of its events' times (the last THI's)
} hp_rc_pos_t;

// What one chunk took.
typedef struct hp_rc_info {
    size_t in_bytes;  // ring bytes consumed (whole entries)
    size_t row_bytes; // the bytes of the trace rows they stand for
    uint32_t n_records, n_events;
} hp_rc_info_t;

// Scratch a call needs: a trace record moved to the rows' time base.
#define HP_RC_SCRATCH (HPT_COLS_REC_MAX + 2 * HPT_VARINT_MAX)

// Columns of the entries at in (n bytes), taking whole entries while their rows stay within
// max_bytes (at least one record). Returns the payload's bytes at out, fills *info and advances
// *pos; 0 (pos unchanged) where the columns cannot carry the records (a value the codes cannot
// express, a record kind they do not take, out_cap too small) or the entries are damaged: the
// caller then tries hp_rc_rows. enc: the caller's across calls (hpt_cols_transpose).
size_t hp_rc_columns(const uint8_t *in, size_t n, size_t max_bytes, uint8_t *out, size_t out_cap,
                     hpt_cols_enc_t *enc, uint8_t *scratch, hp_rc_pos_t *pos,
                     hp_rc_info_t *info);

// The same entries as the trace's rows, at most max_bytes of them (at least one record), into
// out (room for max_bytes + HPT_COLS_REC_MAX). The rows' bytes are info->row_bytes. False
// (pos unchanged) if the entries are damaged: an internal error.
bool hp_rc_rows(const uint8_t *in, size_t n, size_t max_bytes, uint8_t *out, size_t out_cap,
                uint8_t *scratch, hp_rc_pos_t *pos, hp_rc_info_t *info);

#endif
