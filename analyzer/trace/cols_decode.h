// SPDX-License-Identifier: MIT
// cols_decode: a column chunk's payload (docs/trace-format.md#columns) straight into events and
// definitions. The heap events (MALLOC, CALLOC, ALIGNED, FREE, FREE_SIZED, REALLOC) are read
// from their columns into reader_event_t without building the row bytes and parsing them again
// (hpt_cols_untranspose, then hpt_rec_decode: the reference, chunk_decode.c); the records the
// OTHER column holds whole go through hpt_rec_decode and dchunk_record as in rows.
//
// It takes a chunk only when the reference would take it whole, with the same events and
// definitions: every check of both (lengths, indexes, the rows' size the table states, the
// record count of the header) is made on the values, without the bytes. What a damaged chunk
// keeps (the definitions before its damage, or none when the columns themselves do not add up)
// is the reference's alone to say: on any doubt this decoder refuses and the caller decodes the
// chunk again through its rows.
#ifndef HEAPPROF_ANALYZER_COLS_DECODE_H
#define HEAPPROF_ANALYZER_COLS_DECODE_H

#include "trace/chunk_decode.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// Decodes the column payload [in, in + n) (decompressed, after c's crc) into c's events,
// definitions and CPU samples, appended to what c holds. True if the whole chunk decoded, as
// the reference would decode it; false otherwise, with c's outputs in no particular state (the
// caller empties them and takes the reference path). Never reads out of bounds.
bool cols_decode(dchunk_t *c, const uint8_t *in, size_t n);

#endif
