// SPDX-License-Identifier: MIT
// Damaged input for `heapprof stats`: real traces truncated at every twentieth of their length,
// single bytes flipped in the file header and in every chunk's header and payload, a wrong
// version, an empty file, a directory, FIFOs, a device, impossible chunk lengths, trailing
// garbage, and forged traces of a few KB that inflate to millions of records (memory, time).
// Every case ends in status 0 with a report that says what was lost, or in status 2 with one
// line on stderr; never a signal, never a hang (each run has an alarm).
#include "spawn.h"

#include "chunk.h"
#include "format/hpt_codec.h"
#include "format/hpt_format.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#define STATS_TIMEOUT_S 60

typedef struct outcome {
    int status;
    json_t *json; // status 0: the report
    json_t *damage;
    char *err;
} outcome_t;

typedef struct trace {
    uint8_t *data;
    size_t size;
    size_t n_chunks;
    size_t off[65536]; // chunk offsets; off[n_chunks] = size
} trace_t;

static void outcome_free(outcome_t *o) {
    json_decref(o->json);
    free(o->err);
}

static int one_line(const char *s) {
    const char *nl = strchr(s, '\n');
    return nl && nl[1] == 0 && !strncmp(s, "heapprof: ", 10);
}

// `heapprof stats --json path`, held to the contract: status 0 with JSON, or 2 with one line.
// max_as_bytes: its address-space limit (0: none).
static outcome_t stats_limited(const char *path, const char *what,
                               unsigned long long max_as_bytes) {
    char *argv[] = {E2E_HEAPPROF, "stats", "--json", (char *)path, NULL};
    e2e_run_opts_t o = {
        .no_preload = true, .timeout_s = STATS_TIMEOUT_S, .max_as_bytes = max_as_bytes};
    char *out;
    outcome_t r = {0};
    r.status = e2e_run(argv, &o, &out, &r.err, NULL);
    cr_assert(r.status == 0 || r.status == 2,
              "%s: heapprof stats ended with status %d (128 + 14: hung; > 128: killed by a "
              "signal); stderr: %s",
              what, r.status, r.err);
    if (r.status == 0) {
        json_error_t je;
        r.json = json_loads(out, 0, &je);
        cr_assert(r.json, "%s: status 0 but no JSON (%s): %s", what, je.text, out);
        r.damage = json_object_get(r.json, "damage");
        cr_assert(json_is_object(r.damage), "%s: no damage in the report", what);
    } else {
        cr_assert(one_line(r.err), "%s: status 2 needs one 'heapprof: ' line; stderr: %s", what,
                  r.err);
    }
    free(out);
    return r;
}

static outcome_t stats(const char *path, const char *what) { return stats_limited(path, what, 0); }

static bool dmg_bool(const outcome_t *o, const char *key) {
    json_t *v = json_object_get(o->damage, key);
    cr_assert(json_is_boolean(v), "damage.%s missing", key);
    return json_is_true(v);
}

static long long dmg_int(const outcome_t *o, const char *key) { return e2e_int(o->damage, key); }

static void write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    cr_assert(f, "%s: %s", path, strerror(errno));
    cr_assert_eq(fwrite(p, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
}

// Runs argv under the shim into dir/NAME.hpt (path) and maps out its chunks.
static void record(const char *dir, const char *name, char *const argv[], const char *const *env,
                   trace_t *t, char *path) {
    snprintf(path, 4096, "%s/%s.hpt", dir, name);
    cr_assert_eq(e2e_run_preloaded(argv, path, env, NULL), 0, "%s under the shim failed", argv[0]);
    FILE *f = fopen(path, "rb");
    cr_assert(f);
    fseek(f, 0, SEEK_END);
    t->size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    t->data = malloc(t->size);
    cr_assert_eq(fread(t->data, 1, t->size, f), t->size);
    fclose(f);
    hpt_file_hdr_t fh;
    cr_assert_geq(t->size, sizeof fh);
    memcpy(&fh, t->data, sizeof fh);
    size_t pos = fh.hdr_bytes;
    t->n_chunks = 0;
    while (pos < t->size) {
        hpt_chunk_hdr_t h;
        cr_assert_leq(pos + sizeof h, t->size, "the shim's own trace ends inside a chunk header");
        cr_assert_lt(t->n_chunks, 65535, "more chunks than this test maps");
        memcpy(&h, t->data + pos, sizeof h);
        cr_assert_eq(h.magic, HPT_CHUNK_MAGIC, "the shim's own trace is damaged at %zu", pos);
        t->off[t->n_chunks++] = pos;
        pos += sizeof h + h.stored_bytes;
    }
    cr_assert_eq(pos, t->size);
    t->off[t->n_chunks] = t->size;
}

static void sample_trace(const char *dir, trace_t *t, char *path) {
    // 1 ms flushes and 1 KiB heap chunks: a small trace of many chunks, several threads
    // interleaved (however fast the program runs)
    const char *env[] = {"HEAPPROF_FLUSH_MS=1", "HEAPPROF_CHUNK_KB=1", NULL};
    char *argv[] = {E2E_SAMPLES "/exact_counts", NULL};
    record(dir, "exact_counts", argv, env, t, path);
    cr_assert_geq(t->n_chunks, 6, "the sample trace has only %zu chunks", t->n_chunks);
}

// Each prefix of the trace: complete chunks count, a partial last one is reported as truncated
// with its exact size, nothing past the cut is invented, no prefix claims a clean exit.
static void check_prefixes(const char *dir, const trace_t *t, const char *full_path) {
    outcome_t full = stats(full_path, "the whole trace");
    cr_assert_eq(full.status, 0);
    cr_assert(dmg_bool(&full, "clean_exit"));
    cr_assert_eq(dmg_int(&full, "chunks_ok"), (long long)t->n_chunks);
    long long prev_blocks = 0;
    for (int k = 0; k < 20; k++) {
        size_t cut = t->size * (size_t)k / 20;
        char path[4096], what[64];
        snprintf(path, sizeof path, "%s/cut-%02d.hpt", dir, k);
        snprintf(what, sizeof what, "cut at %zu of %zu bytes", cut, t->size);
        write_file(path, t->data, cut);
        outcome_t o = stats(path, what);
        if (cut < sizeof(hpt_file_hdr_t)) {
            cr_expect_eq(o.status, 2, "%s: a cut inside the file header is an error", what);
            if (cut == 0)
                cr_expect(strstr(o.err, "empty"), "%s: %s", what, o.err);
            outcome_free(&o);
            continue;
        }
        cr_assert_eq(o.status, 0, "%s: %s", what, o.err);
        size_t whole = 0;
        while (whole < t->n_chunks && t->off[whole + 1] <= cut)
            whole++;
        bool partial = whole < t->n_chunks && t->off[whole] < cut;
        cr_expect_eq(dmg_int(&o, "chunks_ok"), (long long)whole, "%s", what);
        cr_expect_eq(dmg_bool(&o, "truncated"), partial, "%s", what);
        cr_expect_eq(dmg_int(&o, "truncated_bytes"), partial ? (long long)(cut - t->off[whole]) : 0,
                     "%s", what);
        cr_expect_eq(dmg_int(&o, "bytes_skipped"), 0, "%s", what);
        cr_expect_not(dmg_bool(&o, "clean_exit"), "%s: a prefix has no trailer", what);
        long long blocks = e2e_int(o.json, "blocks");
        cr_expect_geq(blocks, prev_blocks, "%s: a longer prefix lost blocks", what);
        cr_expect_leq(blocks, e2e_int(full.json, "blocks"), "%s", what);
        prev_blocks = blocks;
        outcome_free(&o);
        unlink(path);
    }
    outcome_free(&full);
}

Test(damaged, truncated_at_every_twentieth_reads_up_to_the_cut, .timeout = 600) {
    char *dir = e2e_tmpdir("trunc");
    trace_t *t = calloc(1, sizeof *t);
    char path[4096];
    sample_trace(dir, t, path);
    check_prefixes(dir, t, path);
    free(t->data);

    // many threads, small buffers: cuts land inside zstd frames of every thread. A chunk holds
    // at most 16 KiB of records, so the ~30 MiB of records make well over 20 chunks however
    // the drains fall (the count must not depend on the machine's timing)
    const char *env[] = {"HEAPPROF_BUFFER_KB=64", "HEAPPROF_CHUNK_KB=16", NULL};
    char *argv[] = {E2E_PROGS "/threads16", NULL};
    record(dir, "threads16", argv, env, t, path);
    cr_assert_geq(t->n_chunks, 20, "the threads16 trace has only %zu chunks", t->n_chunks);
    check_prefixes(dir, t, path);
    free(t->data);
    free(t);
    free(dir);
}

// Flips one byte at offset at of the trace; expects that chunk alone lost.
static void flip_costs_one_chunk(const char *dir, const trace_t *t, const outcome_t *full,
                                 size_t chunk, size_t at, const char *field) {
    char path[4096], what[128];
    snprintf(path, sizeof path, "%s/flip.hpt", dir);
    snprintf(what, sizeof what, "chunk %zu (of %zu): byte %zu flipped (%s)", chunk, t->n_chunks, at,
             field);
    t->data[at] ^= 0x5a;
    write_file(path, t->data, t->size);
    t->data[at] ^= 0x5a;
    outcome_t o = stats(path, what);
    cr_assert_eq(o.status, 0, "%s: %s", what, o.err);
    cr_expect_eq(dmg_int(&o, "chunks_ok"), dmg_int(full, "chunks_ok") - 1, "%s", what);
    cr_expect(dmg_int(&o, "chunks_damaged") >= 1 || dmg_bool(&o, "truncated"),
              "%s: the loss is not reported", what);
    cr_expect_leq(e2e_int(o.json, "blocks"), e2e_int(full->json, "blocks"), "%s", what);
    if (chunk == t->n_chunks - 1)
        cr_expect_not(dmg_bool(&o, "clean_exit"), "%s: the trailer was damaged", what);
    outcome_free(&o);
}

Test(damaged, a_flipped_byte_in_a_chunk_costs_that_chunk_only, .timeout = 600) {
    char *dir = e2e_tmpdir("flip");
    trace_t *t = calloc(1, sizeof *t);
    char path[4096];
    sample_trace(dir, t, path);
    outcome_t full = stats(path, "the whole trace");
    static const struct {
        size_t off;
        const char *field;
    } fields[] = {
        {0, "magic"},
        {offsetof(hpt_chunk_hdr_t, type), "type"},
        {offsetof(hpt_chunk_hdr_t, flags), "flags"},
        {offsetof(hpt_chunk_hdr_t, tid), "tid"},
        {offsetof(hpt_chunk_hdr_t, stored_bytes), "stored_bytes"},
        {offsetof(hpt_chunk_hdr_t, stored_bytes) + 2, "stored_bytes, high"},
        {offsetof(hpt_chunk_hdr_t, raw_bytes), "raw_bytes"},
        {offsetof(hpt_chunk_hdr_t, n_records), "n_records"},
        {offsetof(hpt_chunk_hdr_t, seq), "seq"},
        {offsetof(hpt_chunk_hdr_t, base_time_ns), "base_time_ns"},
        {offsetof(hpt_chunk_hdr_t, base_addr), "base_addr"},
        {offsetof(hpt_chunk_hdr_t, crc32), "crc32"},
        {offsetof(hpt_chunk_hdr_t, reserved), "reserved"},
    };
    for (size_t c = 0; c < t->n_chunks; c++) {
        size_t start = t->off[c], end = t->off[c + 1];
        for (size_t f = 0; f < sizeof fields / sizeof *fields; f++)
            flip_costs_one_chunk(dir, t, &full, c, start + fields[f].off, fields[f].field);
        size_t payload = start + sizeof(hpt_chunk_hdr_t);
        if (end > payload) {
            flip_costs_one_chunk(dir, t, &full, c, payload, "first payload byte");
            flip_costs_one_chunk(dir, t, &full, c, payload + (end - payload) / 2, "mid payload");
            flip_costs_one_chunk(dir, t, &full, c, end - 1, "last payload byte");
        }
    }
    outcome_free(&full);
    free(t->data);
    free(t);
    free(dir);
}

Test(damaged, a_flipped_byte_in_the_file_header_is_an_error_or_harmless, .timeout = 300) {
    char *dir = e2e_tmpdir("fhdr");
    trace_t *t = calloc(1, sizeof *t);
    char path[4096], flipped[4096];
    sample_trace(dir, t, path);
    snprintf(flipped, sizeof flipped, "%s/flip.hpt", dir);
    outcome_t full = stats(path, "the whole trace");
    for (size_t at = 0; at < sizeof(hpt_file_hdr_t); at++) {
        char what[64];
        snprintf(what, sizeof what, "file header byte %zu flipped", at);
        t->data[at] ^= 0x5a;
        write_file(flipped, t->data, t->size);
        t->data[at] ^= 0x5a;
        outcome_t o = stats(flipped, what);
        if (at < offsetof(hpt_file_hdr_t, version)) {
            cr_expect_eq(o.status, 2, "%s", what);
            cr_expect(o.status != 2 || strstr(o.err, "not a heapprof trace"), "%s: %s", what,
                      o.err);
        } else if (at < offsetof(hpt_file_hdr_t, hdr_bytes)) {
            cr_expect_eq(o.status, 2, "%s", what);
            cr_expect(o.status != 2 || strstr(o.err, "version"), "%s: %s", what, o.err);
        } else if (at >= offsetof(hpt_file_hdr_t, start_ns)) {
            // informational and reserved fields: nothing to verify them against, the events
            // are intact
            cr_expect_eq(o.status, 0, "%s: %s", what, o.err);
            if (o.status == 0)
                cr_expect_eq(e2e_int(o.json, "blocks"), e2e_int(full.json, "blocks"), "%s", what);
        }
        // hdr_bytes: an error, or chunks read from the wrong place as damage; stats() checked both
        outcome_free(&o);
    }
    outcome_free(&full);
    free(t->data);
    free(t);
    free(dir);
}

Test(damaged, wrong_version_and_empty_file_are_one_line_errors) {
    char *dir = e2e_tmpdir("version");
    trace_t *t = calloc(1, sizeof *t);
    char path[4096], bad[4096];
    sample_trace(dir, t, path);
    snprintf(bad, sizeof bad, "%s/v.hpt", dir);
    hpt_file_hdr_t fh;
    memcpy(&fh, t->data, sizeof fh);
    fh.version = HPT_VERSION + 1;
    memcpy(t->data, &fh, sizeof fh);
    write_file(bad, t->data, t->size);
    outcome_t o = stats(bad, "a newer version");
    cr_expect_eq(o.status, 2);
    cr_expect(strstr(o.err, "version"), "stderr: %s", o.err);
    outcome_free(&o);

    write_file(bad, "", 0);
    o = stats(bad, "an empty file");
    cr_expect_eq(o.status, 2);
    cr_expect(strstr(o.err, "empty"), "stderr: %s", o.err);
    outcome_free(&o);
    free(t->data);
    free(t);
    free(dir);
}

Test(damaged, directory_fifo_and_device_are_refused_without_blocking, .timeout = 300) {
    char *dir = e2e_tmpdir("special");
    outcome_t o = stats(dir, "a directory");
    cr_expect_eq(o.status, 2);
    outcome_free(&o);

    char fifo[4096];
    snprintf(fifo, sizeof fifo, "%s/fifo.hpt", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0, "mkfifo: %s", strerror(errno));
    o = stats(fifo, "a FIFO without a writer");
    cr_expect_eq(o.status, 2);
    outcome_free(&o);
    // with a writer that never writes: a read would block forever
    int keep = open(fifo, O_RDWR | O_NONBLOCK);
    cr_assert(keep >= 0);
    o = stats(fifo, "a FIFO with a silent writer");
    cr_expect_eq(o.status, 2);
    outcome_free(&o);
    close(keep);

    o = stats("/dev/zero", "/dev/zero");
    cr_expect_eq(o.status, 2);
    outcome_free(&o);
    o = stats("/dev/null", "/dev/null");
    cr_expect_eq(o.status, 2);
    outcome_free(&o);
    free(dir);
}

static void put_hdr(uint8_t *at, const hpt_chunk_hdr_t *h) { memcpy(at, h, sizeof *h); }

Test(damaged, impossible_chunk_lengths_cost_one_chunk, .timeout = 300) {
    char *dir = e2e_tmpdir("huge");
    trace_t *t = calloc(1, sizeof *t);
    char path[4096], bad[4096];
    sample_trace(dir, t, path);
    snprintf(bad, sizeof bad, "%s/huge.hpt", dir);
    outcome_t full = stats(path, "the whole trace");
    size_t mid = t->off[t->n_chunks / 2];
    hpt_chunk_hdr_t orig;
    memcpy(&orig, t->data + mid, sizeof orig);
    static const struct {
        uint32_t stored, raw;
        uint16_t flags;
        const char *what;
    } lies[] = {
        {HPT_CHUNK_MAX_RAW, HPT_CHUNK_MAX_RAW, 0, "16 MiB claimed, past the end of the file"},
        {UINT32_MAX, UINT32_MAX, 0, "4 GiB claimed"},
        {UINT32_MAX, HPT_CHUNK_MAX_RAW, HPT_CHUNK_ZSTD, "4 GiB of zstd claimed"},
        {100, HPT_CHUNK_MAX_RAW, HPT_CHUNK_ZSTD, "16 MiB from 100 bytes of zstd"},
    };
    for (size_t i = 0; i < sizeof lies / sizeof *lies; i++) {
        hpt_chunk_hdr_t h = orig;
        h.stored_bytes = lies[i].stored;
        h.raw_bytes = lies[i].raw;
        h.flags = lies[i].flags;
        put_hdr(t->data + mid, &h);
        write_file(bad, t->data, t->size);
        outcome_t o = stats(bad, lies[i].what);
        cr_assert_eq(o.status, 0, "%s: %s", lies[i].what, o.err);
        cr_expect_eq(dmg_int(&o, "chunks_ok"), dmg_int(&full, "chunks_ok") - 1, "%s", lies[i].what);
        cr_expect_geq(dmg_int(&o, "chunks_damaged"), 1, "%s", lies[i].what);
        outcome_free(&o);
    }
    put_hdr(t->data + mid, &orig);

    // a header at the very end that claims 16 MiB: the process was killed while writing it
    uint8_t *grown = malloc(t->size + sizeof orig + 100);
    memcpy(grown, t->data, t->size);
    hpt_chunk_hdr_t h = orig;
    h.stored_bytes = h.raw_bytes = HPT_CHUNK_MAX_RAW;
    h.flags = 0;
    put_hdr(grown + t->size, &h);
    memset(grown + t->size + sizeof h, 0xab, 100);
    write_file(bad, grown, t->size + sizeof h + 100);
    outcome_t o = stats(bad, "a 16 MiB chunk cut after 100 bytes");
    cr_assert_eq(o.status, 0, "%s", o.err);
    cr_expect(dmg_bool(&o, "truncated"));
    cr_expect_eq(dmg_int(&o, "truncated_bytes"), (long long)(sizeof h + 100));
    cr_expect_eq(dmg_int(&o, "chunks_ok"), dmg_int(&full, "chunks_ok"));
    outcome_free(&o);

    // garbage after the trailer is skipped and counted
    memset(grown + t->size, 0xaa, sizeof h + 100);
    write_file(bad, grown, t->size + sizeof h + 100);
    o = stats(bad, "garbage after the trailer");
    cr_assert_eq(o.status, 0, "%s", o.err);
    cr_expect_eq(dmg_int(&o, "bytes_skipped"), (long long)(sizeof h + 100));
    cr_expect_eq(dmg_int(&o, "chunks_ok"), dmg_int(&full, "chunks_ok"));
    cr_expect(dmg_bool(&o, "clean_exit"));
    cr_expect_eq(e2e_int(o.json, "blocks"), e2e_int(full.json, "blocks"));
    outcome_free(&o);
    free(grown);
    outcome_free(&full);
    free(t->data);
    free(t);
    free(dir);
}

// Writes a trace of n_chunks EVENTS chunks, each ~1.6 KB of zstd that inflates to 16 MiB of
// FREE records (4.2 million events), of one thread or each of its own. Returns the records
// per chunk.
static uint32_t write_bomb(const char *path, int n_chunks, bool one_thread) {
    size_t n = HPT_CHUNK_MAX_RAW / 4, raw_len = n * 4;
    uint8_t *raw = malloc(raw_len);
    for (size_t i = 0; i < n; i++) {
        raw[4 * i] = HPT_REC_FREE; // dt 0, address delta 0, touch not measured
        raw[4 * i + 1] = raw[4 * i + 2] = raw[4 * i + 3] = 0;
    }
    size_t cap = hp_chunk_bound(raw_len);
    uint8_t *chunk = malloc(cap);
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    FILE *f = fopen(path, "wb");
    cr_assert(f && cctx && raw && chunk);
    hpt_file_hdr_t fh = {.version = HPT_VERSION, .hdr_bytes = sizeof fh, .pid = 1};
    memcpy(fh.magic, HPT_MAGIC, sizeof fh.magic);
    cr_assert_eq(fwrite(&fh, sizeof fh, 1, f), 1);
    for (int c = 0; c < n_chunks; c++) {
        hpt_chunk_hdr_t h = {.type = HPT_CHUNK_EVENTS,
                             .tid = one_thread ? 1 : 1 + (uint32_t)c,
                             .n_records = (uint32_t)n,
                             .seq = (uint64_t)c,
                             .base_addr = 0x1000};
        size_t len = hp_chunk_encode(chunk, cap, &h, raw, raw_len, cctx);
        cr_assert(len > 0 && len < 4096, "zstd made %zu bytes of the bomb", len);
        cr_assert_eq(fwrite(chunk, 1, len, f), len);
    }
    cr_assert_eq(fclose(f), 0);
    ZSTD_freeCCtx(cctx);
    free(chunk);
    free(raw);
    return (uint32_t)n;
}

// 16 KB that decompress to 160 MiB: 42 million events with no SYNC to release them. The
// reader must not hold them all (2.0 GiB of events) nor keep each drained thread's buffer
// (which it did when the buffer's last run was handed out in place: 1.9 GiB peak; ~0.6 now).
Test(damaged, a_decompression_bomb_is_read_in_bounded_memory, .timeout = 600) {
    char *dir = e2e_tmpdir("bomb");
    char path[4096];
    snprintf(path, sizeof path, "%s/bomb.hpt", dir);
    const int n_chunks = 10;
    for (int one_thread = 1; one_thread >= 0; one_thread--) {
        uint32_t n = write_bomb(path, n_chunks, one_thread);
        const char *what = one_thread ? "a bomb of one thread" : "a bomb of 10 threads";
        outcome_t o = stats_limited(path, what, 1ull << 30);
        cr_assert_eq(o.status, 0, "%s: %s", what, o.err);
        cr_expect_eq(dmg_int(&o, "chunks_ok"), n_chunks, "%s", what);
        cr_expect_eq(e2e_int(json_object_get(o.json, "anomalies"), "unknown_frees"),
                     (long long)n * n_chunks, "%s: not every event was read", what);
        outcome_free(&o);
    }
    unlink(path);
    free(dir);
}

// One EVENTS chunk of records made by emit(i, p) for i in [0, n), zstd-compressed, in a trace
// of its own.
static void write_one_chunk(const char *path, uint32_t n, uint8_t *(*emit)(uint32_t, uint8_t *)) {
    size_t cap = (size_t)n * 32;
    uint8_t *raw = malloc(cap), *p = raw;
    for (uint32_t i = 0; i < n; i++)
        p = emit(i, p);
    size_t raw_len = (size_t)(p - raw);
    cr_assert_leq(raw_len, HPT_CHUNK_MAX_RAW);
    size_t ccap = hp_chunk_bound(raw_len);
    uint8_t *chunk = malloc(ccap);
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    hpt_chunk_hdr_t h = {.type = HPT_CHUNK_EVENTS, .tid = 1, .n_records = n};
    size_t len = hp_chunk_encode(chunk, ccap, &h, raw, raw_len, cctx);
    cr_assert(len > 0);
    hpt_file_hdr_t fh = {.version = HPT_VERSION, .hdr_bytes = sizeof fh, .pid = 1};
    memcpy(fh.magic, HPT_MAGIC, sizeof fh.magic);
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(&fh, sizeof fh, 1, f), 1);
    cr_assert_eq(fwrite(chunk, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
    ZSTD_freeCCtx(cctx);
    free(chunk);
    free(raw);
}

// MALLOCs whose addresses step by the inverse of the Fibonacci hashing multiplier: every one
// lands in the same slot of a multiplicative hash table. The same record each time, so zstd
// makes it a few hundred bytes.
static uint8_t *colliding_malloc(uint32_t i, uint8_t *p) {
    (void)i;
    uint64_t inv = 0x9E3779B97F4A7C15ull; // Newton: x = x(2 - ax) doubles the correct bits
    for (int k = 0; k < 6; k++)
        inv *= 2 - 0x9E3779B97F4A7C15ull * inv;
    *p++ = HPT_REC_MALLOC;
    p = hpt_put_varint(p, 0);                        // dt
    p = hpt_put_varint(p, 1);                        // stack
    p = hpt_put_varint(p, hpt_zigzag((int64_t)inv)); // address delta
    return hpt_put_varint(p, 16);                    // size
}

// Half the records load a module at one base, half unload another base that is never loaded.
static uint8_t *module_churn(uint32_t i, uint8_t *p) {
    if (i % 2 == 0) {
        *p++ = HPT_REC_MODULE_LOAD;
        p = hpt_put_varint(p, 0);      // dt
        p = hpt_put_varint(p, 0x1000); // base
        p = hpt_put_varint(p, 0x1000); // size
        p = hpt_put_varint(p, 0);      // path ""
        return hpt_put_varint(p, 0);   // build id ""
    }
    *p++ = HPT_REC_MODULE_UNLOAD;
    p = hpt_put_varint(p, 0);
    return hpt_put_varint(p, 0x2000);
}

// A few KB of zstd whose records, read naively, take quadratic time (hours). Each run has
// STATS_TIMEOUT_S; linear work takes a second.
Test(damaged, records_forged_for_quadratic_work_are_read_in_linear_time, .timeout = 600) {
    char *dir = e2e_tmpdir("quadratic");
    char path[4096];
    snprintf(path, sizeof path, "%s/q.hpt", dir);
    write_one_chunk(path, 1000000, colliding_malloc);
    outcome_t o = stats(path, "a million colliding addresses");
    cr_assert_eq(o.status, 0, "%s", o.err);
    cr_expect_eq(e2e_int(o.json, "blocks"), 1000000);
    outcome_free(&o);

    write_one_chunk(path, 2000000, module_churn);
    o = stats(path, "a million module loads and unloads");
    cr_assert_eq(o.status, 0, "%s", o.err);
    cr_expect_eq(dmg_int(&o, "chunks_ok"), 1);
    outcome_free(&o);
    unlink(path);
    free(dir);
}
