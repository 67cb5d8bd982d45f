// SPDX-License-Identifier: MIT
// Helper of the pprof tests: gunzip a profile (zlib) and decode it with the protobuf-c code
// generated from profile.proto, and look things up in it. Header-only; asserts with Criterion.
#ifndef HEAPPROF_TESTS_PPROF_READ_H
#define HEAPPROF_TESTS_PPROF_READ_H

#include "out/profile.pb-c.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

// Decodes gzip bytes [gz, gz + n); the caller frees the result with
// perftools__profiles__profile__free_unpacked.
static inline Perftools__Profiles__Profile *pr_decode(const uint8_t *gz, size_t n) {
    cr_assert(n >= 2 && gz[0] == 0x1f && gz[1] == 0x8b, "not gzip");
    z_stream z;
    memset(&z, 0, sizeof z);
    cr_assert_eq(inflateInit2(&z, 15 + 16), Z_OK);
    size_t cap = 1 << 16, len = 0;
    uint8_t *out = malloc(cap);
    z.next_in = (Bytef *)gz;
    z.avail_in = (uInt)n;
    int rc;
    do {
        if (len == cap)
            out = realloc(out, cap *= 2);
        z.next_out = out + len;
        z.avail_out = (uInt)(cap - len);
        rc = inflate(&z, Z_NO_FLUSH);
        cr_assert(rc == Z_OK || rc == Z_STREAM_END, "inflate: %d", rc);
        len = cap - z.avail_out;
    } while (rc != Z_STREAM_END);
    cr_expect_eq(z.avail_in, 0, "bytes after the gzip stream");
    inflateEnd(&z);
    Perftools__Profiles__Profile *p = perftools__profiles__profile__unpack(NULL, len, out);
    cr_assert_not_null(p, "not a profile.proto message");
    free(out);
    return p;
}

static inline const char *pr_str(const Perftools__Profiles__Profile *p, int64_t i) {
    cr_assert(i >= 0 && (size_t)i < p->n_string_table, "string index %lld", (long long)i);
    return p->string_table[i];
}

static inline const Perftools__Profiles__Location *
pr_location(const Perftools__Profiles__Profile *p, uint64_t id) {
    for (size_t i = 0; i < p->n_location; i++)
        if (p->location[i]->id == id)
            return p->location[i];
    cr_assert_fail("no location %llu", (unsigned long long)id);
    return NULL;
}

static inline const Perftools__Profiles__Function *
pr_function(const Perftools__Profiles__Profile *p, uint64_t id) {
    for (size_t i = 0; i < p->n_function; i++)
        if (p->function[i]->id == id)
            return p->function[i];
    cr_assert_fail("no function %llu", (unsigned long long)id);
    return NULL;
}

// Name of the function of a sample's leaf (its first location's first line).
static inline const char *pr_leaf(const Perftools__Profiles__Profile *p,
                                  const Perftools__Profiles__Sample *s) {
    cr_assert(s->n_location_id > 0);
    const Perftools__Profiles__Location *l = pr_location(p, s->location_id[0]);
    cr_assert(l->n_line > 0);
    return pr_str(p, pr_function(p, l->line[0]->function_id)->name);
}

#endif
