// SPDX-License-Identifier: MIT
// pprof_build: assembles a pprof profile (Google's profile.proto, analyzer/out/profile.proto)
// from strings, mappings, functions, locations and samples, each de-duplicated, and writes it
// gzipped, encoded by protobuf-c. Knows nothing of traces: out_pprof.c feeds it. Strings that are
// not valid UTF-8 have those bytes replaced by '?', as the JSON outputs do (fmt_json_str), since
// proto3 strings must be UTF-8. Not thread-safe; one owner. Exits on OOM (xalloc.h).
#ifndef HEAPPROF_ANALYZER_PPROF_BUILD_H
#define HEAPPROF_ANALYZER_PPROF_BUILD_H

#include "core/errmsg.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct pprof_build pprof_build_t;

// An empty profile whose sample values are the n_types (type, unit) pairs given.
pprof_build_t *pprof_build_new(const char *const types[][2], size_t n_types);
void pprof_build_free(pprof_build_t *b);

// Index of s in the string table, added on first use; "" (and NULL) is 0.
int64_t pprof_build_string(pprof_build_t *b, const char *s);

typedef struct pprof_mapping {
    uint64_t start, limit, file_offset;
    const char *file;
    const uint8_t *build_id; // raw bytes, written as lowercase hex
    size_t build_id_len;
    bool has_functions, has_filenames, has_line_numbers, has_inline_frames;
} pprof_mapping_t;

// Adds a mapping (never merged: one per call); returns its id (1, 2, ...).
uint64_t pprof_build_mapping(pprof_build_t *b, const pprof_mapping_t *m);

// The id of the function (name, system name, source file), added on first use. NULL is "".
uint64_t pprof_build_function(pprof_build_t *b, const char *name, const char *system_name,
                              const char *file);

typedef struct pprof_line {
    uint64_t function_id;
    int64_t line;
} pprof_line_t;

// The id of the location (mapping, address, lines innermost first), added on first use: two
// calls with the same mapping, address and lines give the same id; a different line list at the
// same address (a stack cut inside a run of inlined calls) is another location.
uint64_t pprof_build_location(pprof_build_t *b, uint64_t mapping_id, uint64_t address,
                              const pprof_line_t *lines, size_t n_lines);

// Adds a sample: location ids leaf first, and one value per sample type.
void pprof_build_sample(pprof_build_t *b, const uint64_t *location_ids, size_t n_locations,
                        const int64_t *values);

// Profile-wide fields. default_type: the name of one of the sample types.
void pprof_build_set_period(pprof_build_t *b, const char *type, const char *unit, int64_t period);
void pprof_build_set_time(pprof_build_t *b, int64_t time_nanos, int64_t duration_nanos);
void pprof_build_set_default_type(pprof_build_t *b, const char *type);
void pprof_build_add_comment(pprof_build_t *b, const char *text);

size_t pprof_build_n_functions(const pprof_build_t *b);
size_t pprof_build_n_locations(const pprof_build_t *b);
size_t pprof_build_n_samples(const pprof_build_t *b);

// Encodes the profile and writes it gzip-compressed to f. Returns 0, or -1 with err filled
// ("pprof: cannot write the output").
int pprof_build_write(pprof_build_t *b, FILE *f, errmsg_t *err);

#endif
