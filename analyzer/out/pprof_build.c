// SPDX-License-Identifier: MIT
// pprof_build: the tables of a pprof profile, each entry de-duplicated by its bytes (a key table
// per kind), turned into protobuf-c messages only when written. The encoder streams straight
// into zlib's gzip deflate, so the encoded profile is never held in memory whole.
#include "out/pprof_build.h"

#include "core/fmt.h"
#include "core/hmap.h"
#include "core/xalloc.h"
#include "out/profile.pb-c.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

// ---- key tables: byte string -> dense index ----

typedef struct keytab {
    hmap_t index;   // hash of a key -> 1 + the newest entry with that hash
    uint8_t *bytes; // every key, one after another
    size_t n_bytes, cap_bytes;
    size_t *off;  // entry i is bytes[off[i] .. off[i + 1])
    size_t *next; // 1 + the previous entry with the same hash; 0: none
    size_t n, cap;
} keytab_t;

static void keytab_init(keytab_t *t) {
    memset(t, 0, sizeof *t);
    hmap_init(&t->index, sizeof(uint64_t));
    t->cap = 16;
    t->off = xcalloc(t->cap, sizeof *t->off);
    t->next = xcalloc(t->cap, sizeof *t->next);
}

static void keytab_fini(keytab_t *t) {
    hmap_fini(&t->index);
    free(t->bytes);
    free(t->off);
    free(t->next);
}

static uint64_t hash_bytes(const void *key, size_t len) {
    const uint8_t *p = key;
    uint64_t h = 0xcbf29ce484222325ull; // FNV-1a; hmap scrambles it further
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static const uint8_t *keytab_key(const keytab_t *t, size_t i, size_t *len) {
    *len = t->off[i + 1] - t->off[i];
    return t->bytes + t->off[i];
}

// The index of key, added if new (*added says which; may be NULL).
static size_t keytab_intern(keytab_t *t, const void *key, size_t len, bool *added) {
    uint64_t h = hash_bytes(key, len);
    bool existed;
    uint64_t *head = hmap_put(&t->index, h, &existed);
    for (size_t i = existed ? (size_t)*head : 0; i; i = t->next[i - 1]) {
        size_t klen;
        const uint8_t *k = keytab_key(t, i - 1, &klen);
        if (klen == len && memcmp(k, key, len) == 0) {
            if (added)
                *added = false;
            return i - 1;
        }
    }
    size_t i = t->n;
    if (i + 2 > t->cap) {
        t->cap = 2 * t->cap > i + 2 ? 2 * t->cap : i + 2;
        t->off = xrealloc(t->off, t->cap * sizeof *t->off);
        t->next = xrealloc(t->next, t->cap * sizeof *t->next);
    }
    t->bytes = xgrow(t->bytes, &t->cap_bytes, t->n_bytes + len + 1, 1);
    memcpy(t->bytes + t->n_bytes, key, len);
    t->n_bytes += len;
    t->off[i + 1] = t->n_bytes;
    t->next[i] = existed ? (size_t)*head : 0;
    *head = i + 1;
    t->n++;
    if (added)
        *added = true;
    return i;
}

// ---- the profile ----

typedef struct mapping {
    pprof_mapping_t m; // file and build_id are replaced by string indexes
    int64_t file, build_id;
} mapping_t;

struct pprof_build {
    size_t n_types;
    int64_t (*types)[2]; // string indexes of (type, unit)
    keytab_t strings;    // NUL-terminated, so each key is the string itself
    keytab_t functions;  // int64 name, system name, file
    keytab_t locations;  // uint64 mapping, address, then (function id, line) per line
    mapping_t *mappings;
    size_t n_mappings, cap_mappings;
    uint64_t *sample_locs; // every sample's location ids, one after another
    size_t n_sample_locs, cap_sample_locs;
    size_t *sample_off; // sample i's ids: sample_locs[sample_off[i] .. sample_off[i + 1])
    int64_t *values;    // n_types per sample
    size_t n_samples, cap_samples, cap_values;
    int64_t *comments;
    size_t n_comments, cap_comments;
    int64_t period_type[2], period, time_nanos, duration_nanos, default_type;
};

pprof_build_t *pprof_build_new(const char *const types[][2], size_t n_types) {
    pprof_build_t *b = xcalloc(1, sizeof *b);
    keytab_init(&b->strings);
    keytab_init(&b->functions);
    keytab_init(&b->locations);
    pprof_build_string(b, ""); // string_table[0] must be ""
    b->n_types = n_types;
    b->types = xcalloc(n_types ? n_types : 1, sizeof *b->types);
    for (size_t i = 0; i < n_types; i++) {
        b->types[i][0] = pprof_build_string(b, types[i][0]);
        b->types[i][1] = pprof_build_string(b, types[i][1]);
    }
    b->sample_off = xgrow(NULL, &b->cap_samples, 1, sizeof *b->sample_off);
    b->sample_off[0] = 0;
    return b;
}

void pprof_build_free(pprof_build_t *b) {
    if (!b)
        return;
    keytab_fini(&b->strings);
    keytab_fini(&b->functions);
    keytab_fini(&b->locations);
    free(b->types);
    free(b->mappings);
    free(b->sample_locs);
    free(b->sample_off);
    free(b->values);
    free(b->comments);
    free(b);
}

int64_t pprof_build_string(pprof_build_t *b, const char *s) {
    if (!s)
        s = "";
    // bytes that are not UTF-8 become '?', as fmt_json_str does, so names equal the JSON's
    size_t len = strlen(s), i = 0;
    char stack_buf[512], *clean = len < sizeof stack_buf ? stack_buf : xmalloc(len + 1);
    while (i < len) {
        size_t k = fmt_utf8_len((const unsigned char *)s + i);
        if (k == 0) {
            clean[i++] = '?';
        } else {
            memcpy(clean + i, s + i, k);
            i += k;
        }
    }
    clean[len] = '\0';
    size_t idx = keytab_intern(&b->strings, clean, len + 1, NULL);
    if (clean != stack_buf)
        free(clean);
    return (int64_t)idx;
}

uint64_t pprof_build_mapping(pprof_build_t *b, const pprof_mapping_t *m) {
    b->mappings = xgrow(b->mappings, &b->cap_mappings, b->n_mappings + 1, sizeof *b->mappings);
    mapping_t *d = &b->mappings[b->n_mappings++];
    d->m = *m;
    d->m.file = NULL;
    d->m.build_id = NULL;
    d->file = pprof_build_string(b, m->file);
    char *hex = xmalloc(2 * m->build_id_len + 1);
    for (size_t i = 0; i < m->build_id_len; i++)
        snprintf(hex + 2 * i, 3, "%02x", m->build_id[i]);
    hex[2 * m->build_id_len] = '\0';
    d->build_id = pprof_build_string(b, hex);
    free(hex);
    return b->n_mappings;
}

uint64_t pprof_build_function(pprof_build_t *b, const char *name, const char *system_name,
                              const char *file) {
    int64_t key[3] = {pprof_build_string(b, name), pprof_build_string(b, system_name),
                      pprof_build_string(b, file)};
    return keytab_intern(&b->functions, key, sizeof key, NULL) + 1;
}

uint64_t pprof_build_location(pprof_build_t *b, uint64_t mapping_id, uint64_t address,
                              const pprof_line_t *lines, size_t n_lines) {
    uint64_t stack_key[2 + 2 * 16];
    size_t words = 2 + 2 * n_lines;
    uint64_t *key = words <= sizeof stack_key / sizeof *stack_key ? stack_key
                                                                    : xcalloc(words, sizeof *key);
    key[0] = mapping_id;
    key[1] = address;
    for (size_t i = 0; i < n_lines; i++) {
        key[2 + 2 * i] = lines[i].function_id;
        key[3 + 2 * i] = (uint64_t)lines[i].line;
    }
    size_t idx = keytab_intern(&b->locations, key, words * sizeof *key, NULL);
    if (key != stack_key)
        free(key);
    return idx + 1;
}

void pprof_build_sample(pprof_build_t *b, const uint64_t *location_ids, size_t n_locations,
                        const int64_t *values) {
    b->sample_locs = xgrow(b->sample_locs, &b->cap_sample_locs, b->n_sample_locs + n_locations + 1,
                           sizeof *b->sample_locs);
    memcpy(b->sample_locs + b->n_sample_locs, location_ids, n_locations * sizeof *location_ids);
    b->n_sample_locs += n_locations;
    b->sample_off = xgrow(b->sample_off, &b->cap_samples, b->n_samples + 2, sizeof *b->sample_off);
    b->values = xgrow(b->values, &b->cap_values, (b->n_samples + 1) * b->n_types + 1,
                      sizeof *b->values);
    memcpy(b->values + b->n_samples * b->n_types, values, b->n_types * sizeof *values);
    b->n_samples++;
    b->sample_off[b->n_samples] = b->n_sample_locs;
}

void pprof_build_set_period(pprof_build_t *b, const char *type, const char *unit, int64_t period) {
    b->period_type[0] = pprof_build_string(b, type);
    b->period_type[1] = pprof_build_string(b, unit);
    b->period = period;
}

void pprof_build_set_time(pprof_build_t *b, int64_t time_nanos, int64_t duration_nanos) {
    b->time_nanos = time_nanos;
    b->duration_nanos = duration_nanos;
}

void pprof_build_set_default_type(pprof_build_t *b, const char *type) {
    b->default_type = pprof_build_string(b, type);
}

void pprof_build_add_comment(pprof_build_t *b, const char *text) {
    b->comments = xgrow(b->comments, &b->cap_comments, b->n_comments + 1, sizeof *b->comments);
    b->comments[b->n_comments++] = pprof_build_string(b, text);
}

size_t pprof_build_n_functions(const pprof_build_t *b) { return b->functions.n; }
size_t pprof_build_n_locations(const pprof_build_t *b) { return b->locations.n; }
size_t pprof_build_n_samples(const pprof_build_t *b) { return b->n_samples; }

// ---- encoding: protobuf-c into gzip ----

typedef struct gz_sink {
    ProtobufCBuffer base; // first: protobuf-c calls append with a pointer to it
    z_stream z;
    FILE *f;
    bool failed;
} gz_sink_t;

static void deflate_out(gz_sink_t *s, const uint8_t *data, size_t len, int flush) {
    uint8_t out[64 * 1024];
    s->z.next_in = (Bytef *)data;
    s->z.avail_in = (uInt)len;
    int rc;
    do {
        s->z.next_out = out;
        s->z.avail_out = sizeof out;
        rc = deflate(&s->z, flush);
        if (rc == Z_STREAM_ERROR) {
            s->failed = true;
            return;
        }
        size_t have = sizeof out - s->z.avail_out;
        if (have && fwrite(out, 1, have, s->f) != have)
            s->failed = true;
    } while (s->z.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
}

static void gz_append(ProtobufCBuffer *buf, size_t len, const uint8_t *data) {
    gz_sink_t *s = (gz_sink_t *)buf;
    // avail_in is 32 bits wide
    while (len && !s->failed) {
        size_t part = len > (1u << 30) ? (1u << 30) : len;
        deflate_out(s, data, part, Z_NO_FLUSH);
        data += part;
        len -= part;
    }
}

int pprof_build_write(pprof_build_t *b, FILE *f, errmsg_t *err) {
    Perftools__Profiles__Profile p = PERFTOOLS__PROFILES__PROFILE__INIT;

    // strings: the key table holds them NUL-terminated, in index order
    p.n_string_table = b->strings.n;
    p.string_table = xcalloc(b->strings.n, sizeof *p.string_table);
    for (size_t i = 0; i < b->strings.n; i++)
        p.string_table[i] = (char *)b->strings.bytes + b->strings.off[i];

    Perftools__Profiles__ValueType *vt = xcalloc(b->n_types + 1, sizeof *vt);
    p.n_sample_type = b->n_types;
    p.sample_type = xcalloc(b->n_types + 1, sizeof *p.sample_type);
    for (size_t i = 0; i < b->n_types; i++) {
        perftools__profiles__value_type__init(&vt[i]);
        vt[i].type = b->types[i][0];
        vt[i].unit = b->types[i][1];
        p.sample_type[i] = &vt[i];
    }
    Perftools__Profiles__ValueType period_type = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
    period_type.type = b->period_type[0];
    period_type.unit = b->period_type[1];
    if (period_type.type || period_type.unit)
        p.period_type = &period_type;
    p.period = b->period;
    p.time_nanos = b->time_nanos;
    p.duration_nanos = b->duration_nanos;
    p.default_sample_type = b->default_type;
    p.n_comment = b->n_comments;
    p.comment = b->comments;

    Perftools__Profiles__Mapping *mp = xcalloc(b->n_mappings + 1, sizeof *mp);
    p.n_mapping = b->n_mappings;
    p.mapping = xcalloc(b->n_mappings + 1, sizeof *p.mapping);
    for (size_t i = 0; i < b->n_mappings; i++) {
        const mapping_t *m = &b->mappings[i];
        perftools__profiles__mapping__init(&mp[i]);
        mp[i].id = i + 1;
        mp[i].memory_start = m->m.start;
        mp[i].memory_limit = m->m.limit;
        mp[i].file_offset = m->m.file_offset;
        mp[i].filename = m->file;
        mp[i].build_id = m->build_id;
        mp[i].has_functions = m->m.has_functions;
        mp[i].has_filenames = m->m.has_filenames;
        mp[i].has_line_numbers = m->m.has_line_numbers;
        mp[i].has_inline_frames = m->m.has_inline_frames;
        p.mapping[i] = &mp[i];
    }

    size_t nf = b->functions.n;
    Perftools__Profiles__Function *fn = xcalloc(nf + 1, sizeof *fn);
    p.n_function = nf;
    p.function = xcalloc(nf + 1, sizeof *p.function);
    for (size_t i = 0; i < nf; i++) {
        size_t len;
        int64_t key[3];
        memcpy(key, keytab_key(&b->functions, i, &len), sizeof key);
        perftools__profiles__function__init(&fn[i]);
        fn[i].id = i + 1;
        fn[i].name = key[0];
        fn[i].system_name = key[1];
        fn[i].filename = key[2];
        p.function[i] = &fn[i];
    }

    // every location's lines in one array
    size_t nl = b->locations.n, n_lines = 0;
    for (size_t i = 0; i < nl; i++)
        n_lines += (b->locations.off[i + 1] - b->locations.off[i]) / 16 - 1;
    Perftools__Profiles__Location *loc = xcalloc(nl + 1, sizeof *loc);
    Perftools__Profiles__Line *line = xcalloc(n_lines + 1, sizeof *line);
    Perftools__Profiles__Line **line_ptr = xcalloc(n_lines + 1, sizeof *line_ptr);
    p.n_location = nl;
    p.location = xcalloc(nl + 1, sizeof *p.location);
    size_t li = 0;
    for (size_t i = 0; i < nl; i++) {
        size_t len;
        const uint8_t *k = keytab_key(&b->locations, i, &len);
        uint64_t w[2];
        memcpy(w, k, sizeof w);
        perftools__profiles__location__init(&loc[i]);
        loc[i].id = i + 1;
        loc[i].mapping_id = w[0];
        loc[i].address = w[1];
        loc[i].n_line = len / 16 - 1;
        loc[i].line = line_ptr + li;
        for (size_t j = 0; j < loc[i].n_line; j++, li++) {
            memcpy(w, k + 16 * (j + 1), sizeof w);
            perftools__profiles__line__init(&line[li]);
            line[li].function_id = w[0];
            line[li].line = (int64_t)w[1];
            line_ptr[li] = &line[li];
        }
        p.location[i] = &loc[i];
    }

    Perftools__Profiles__Sample *sm = xcalloc(b->n_samples + 1, sizeof *sm);
    p.n_sample = b->n_samples;
    p.sample = xcalloc(b->n_samples + 1, sizeof *p.sample);
    for (size_t i = 0; i < b->n_samples; i++) {
        perftools__profiles__sample__init(&sm[i]);
        sm[i].n_location_id = b->sample_off[i + 1] - b->sample_off[i];
        sm[i].location_id = b->sample_locs + b->sample_off[i];
        sm[i].n_value = b->n_types;
        sm[i].value = b->values + i * b->n_types;
        p.sample[i] = &sm[i];
    }

    gz_sink_t s = {.base = {.append = gz_append}, .f = f};
    int rc = -1;
    // 15 + 16: a gzip wrapper, as pprof files are
    if (deflateInit2(&s.z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) ==
        Z_OK) {
        perftools__profiles__profile__pack_to_buffer(&p, &s.base);
        if (!s.failed)
            deflate_out(&s, NULL, 0, Z_FINISH);
        deflateEnd(&s.z);
        rc = s.failed || fflush(f) != 0 || ferror(f) ? -1 : 0;
    }
    if (rc != 0)
        errmsg_set(err, "pprof: cannot write the output");

    free(p.string_table);
    free(vt);
    free(p.sample_type);
    free(mp);
    free(p.mapping);
    free(fn);
    free(p.function);
    free(loc);
    free(line);
    free(line_ptr);
    free(p.location);
    free(sm);
    free(p.sample);
    return rc;
}
