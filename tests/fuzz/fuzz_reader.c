// SPDX-License-Identifier: MIT
// Fuzz target: the input is a .hpt file. Runs what the analyzer does with an untrusted trace
// (open, merge, replay, the two-pass definitions of --from-module, both stats renderings) on
// the bytes as given and again with every chunk's crc32 recomputed, so mutations reach the
// record decoder instead of dying at the checksum. Checks the reader's promises and aborts when
// one breaks. Built with clang -fsanitize=fuzzer, or linked with replay_driver.c.
#include "cmd/cmd_stats.h"
#include "model/replay.h"
#include "trace/reader.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHUNK_HDR sizeof(hpt_chunk_hdr_t)

// A broken promise of the reader: report it the way a sanitizer would and stop.
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_reader: %s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);  \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

// What one full read saw; two reads of the same bytes must agree on it.
typedef struct summary {
    reader_damage_t damage;
    size_t n_stacks, n_modules, n_threads, argc;
    bool has_exe, has_trailer;
    char first_module[256]; // basename of the first module, for --from-module
} summary_t;

// The reader takes a path and refuses anything but a regular file: a memfd is one, reachable
// through /proc/self/fd without touching the disk.
static const char *input_path(const uint8_t *data, size_t size) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("hpt-fuzz", MFD_CLOEXEC);
        if (fd < 0) {
            char tmpl[] = "/tmp/hpt-fuzz-XXXXXX";
            fd = mkstemp(tmpl);
            CHECK(fd >= 0, "no memfd and no temporary file");
            unlink(tmpl);
        }
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    CHECK(ftruncate(fd, 0) == 0, "ftruncate");
    for (size_t done = 0; done < size;) {
        ssize_t w = pwrite(fd, data + done, size - done, (off_t)done);
        CHECK(w > 0, "pwrite");
        done += (size_t)w;
    }
    return path;
}

static void check_open_error(const errmsg_t *err) {
    CHECK(err->is_set && err->msg[0], "reader_open failed without a message");
    CHECK(!strchr(err->msg, '\n'), "error is not one line: %s", err->msg);
}

static void touch(const void *p, size_t n) {
    // reading every byte lets ASan see a dangling or short pointer
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < n; i++)
        sink ^= ((const uint8_t *)p)[i];
    (void)sink;
}

static void check_event(const reader_t *r, const reader_event_t *ev) {
    CHECK(ev->kind >= READER_ALLOC && ev->kind <= READER_TOUCH_LIVE, "kind %u", ev->kind);
    if (ev->kind == READER_ALLOC) {
        CHECK(ev->sub >= READER_MALLOC && ev->sub <= READER_REALLOC, "sub %u", ev->sub);
        uint32_t n;
        const uint64_t *frames = reader_stack(r, ev->stack, &n);
        if (frames)
            touch(frames, n * sizeof *frames);
        CHECK(frames || n == 0, "a stack without frames has %u of them", n);
    } else if (ev->kind == READER_MODULE_LOAD || ev->kind == READER_MODULE_UNLOAD) {
        size_t n;
        reader_modules(r, &n);
        CHECK(ev->stack < n || (ev->kind == READER_MODULE_UNLOAD && ev->stack == UINT64_MAX),
              "module index %llu of %zu", (unsigned long long)ev->stack, n);
    }
}

static void summarize(const reader_t *r, summary_t *s) {
    memset(s, 0, sizeof *s);
    s->damage = *reader_damage(r);
    s->n_stacks = reader_n_stacks(r);
    const reader_module_t *m = reader_modules(r, &s->n_modules);
    for (size_t i = 0; i < s->n_modules; i++) {
        touch(m[i].path, strlen(m[i].path) + 1);
        touch(m[i].build_id, m[i].build_id_len);
    }
    if (s->n_modules) {
        const char *base = strrchr(m[0].path, '/');
        snprintf(s->first_module, sizeof s->first_module, "%s", base ? base + 1 : m[0].path);
    }
    const reader_thread_t *t = reader_threads(r, &s->n_threads);
    for (size_t i = 0; i < s->n_threads; i++)
        touch(t[i].name, strlen(t[i].name) + 1);
    const char *exe = reader_exe(r);
    s->has_exe = exe != NULL;
    if (exe)
        touch(exe, strlen(exe) + 1);
    const char *const *argv = reader_argv(r, &s->argc);
    for (size_t i = 0; i < s->argc; i++)
        touch(argv[i], strlen(argv[i]) + 1);
    s->has_trailer = reader_trailer(r) != NULL;
}

// Every byte after the file header is in exactly one of: a verified chunk, a skipped region,
// the truncated tail. So the counts can never add up to more than the file.
static void check_accounting(const reader_t *r, size_t size) {
    const reader_damage_t *d = reader_damage(r);
    uint64_t rest = size - reader_header(r)->hdr_bytes;
    CHECK(d->bytes_skipped <= rest && d->truncated_bytes <= rest - d->bytes_skipped,
          "skipped %llu + truncated %llu > %llu bytes after the header",
          (unsigned long long)d->bytes_skipped, (unsigned long long)d->truncated_bytes,
          (unsigned long long)rest);
    CHECK(d->chunks_ok <= (rest - d->bytes_skipped - d->truncated_bytes) / CHUNK_HDR,
          "%llu verified chunks do not fit", (unsigned long long)d->chunks_ok);
    CHECK(d->truncated == (d->truncated_bytes > 0), "truncated flag and byte count disagree");
    CHECK(!d->trailer || reader_trailer(r), "clean exit without a trailer");
}

// Pass 1: every event through replay, mixing single and batch calls as a consumer might.
// Returns false if the file does not open.
static bool read_events(const char *path, size_t size, bool batches, summary_t *s) {
    errmsg_t err;
    errmsg_init(&err);
    reader_t *r = reader_open(path, &err);
    if (r)
        reader_keep_threads(r); // the thread list is read too
    if (!r) {
        check_open_error(&err);
        return false;
    }
    replay_t *rp = replay_new(NULL, NULL);
    int rc;
    if (batches) {
        const reader_event_t *evs;
        size_t n;
        while ((rc = reader_next_batch(r, &evs, &n, &err)) == 1) {
            CHECK(n >= 1, "an empty batch");
            for (size_t i = 0; i < n; i++)
                check_event(r, &evs[i]);
            replay_events(rp, evs, n);
        }
        CHECK(n == 0, "end of trace with %zu events", n);
    } else {
        reader_event_t ev;
        while ((rc = reader_next(r, &ev, &err)) == 1) {
            check_event(r, &ev);
            replay_event(rp, &ev);
        }
    }
    CHECK(rc == 0, "read error on a memory file: %s", err.msg);
    reader_event_t ev;
    CHECK(reader_next(r, &ev, &err) == 0, "events after the end");
    const replay_totals_t *t = replay_totals(rp);
    CHECK(t->live_blocks <= t->n_blocks && t->peak_blocks <= t->n_blocks &&
              t->n_frees <= t->n_blocks,
          "replay totals: %llu blocks, %llu live, %llu at peak, %llu frees",
          (unsigned long long)t->n_blocks, (unsigned long long)t->live_blocks,
          (unsigned long long)t->peak_blocks, (unsigned long long)t->n_frees);
    check_accounting(r, size);
    summarize(r, s);
    replay_free(rp);
    reader_close(r);
    return true;
}

// Pass 2, as --from-module does it: a few events, then the definitions only. Must see the same
// definitions and damage as pass 1 (late events are counted only where events are kept).
static void read_defs(const char *path, size_t size, unsigned n_first, const summary_t *want) {
    errmsg_t err;
    errmsg_init(&err);
    reader_t *r = reader_open(path, &err);
    if (r)
        reader_keep_threads(r); // the thread list is read too
    CHECK(r, "opened once, not twice: %s", err.msg);
    reader_event_t ev;
    for (unsigned i = 0; i < n_first && reader_next(r, &ev, &err) == 1; i++)
        check_event(r, &ev);
    CHECK(reader_load_defs(r, &err) == 0, "read error on a memory file: %s", err.msg);
    CHECK(reader_next(r, &ev, &err) == 0, "events after reader_load_defs");
    check_accounting(r, size);
    summary_t s;
    summarize(r, &s);
    const reader_damage_t *a = &want->damage, *b = &s.damage;
    CHECK(a->chunks_ok == b->chunks_ok && a->chunks_damaged == b->chunks_damaged &&
              a->bytes_skipped == b->bytes_skipped && a->seq_gaps == b->seq_gaps &&
              a->truncated == b->truncated && a->truncated_bytes == b->truncated_bytes &&
              a->trailer == b->trailer,
          "the definitions pass saw other damage");
    CHECK(want->n_stacks == s.n_stacks && want->n_modules == s.n_modules &&
              want->n_threads == s.n_threads && want->argc == s.argc &&
              want->has_exe == s.has_exe && want->has_trailer == s.has_trailer,
          "the definitions pass saw other definitions");
    reader_close(r);
}

// `heapprof stats` itself, into memory: text or JSON, with or without a module filter.
static void run_stats(const char *path, bool json, const char *from_module) {
    char *out = NULL;
    size_t out_len = 0;
    FILE *f = open_memstream(&out, &out_len);
    CHECK(f, "open_memstream");
    cmd_stats_opts_t o = {.trace = path, .json = json, .from_module = from_module};
    errmsg_t err;
    errmsg_init(&err);
    int rc = cmd_stats_run(&o, f, &err);
    fclose(f);
    CHECK(rc == 0, "stats failed on a trace that opens: %s", err.msg);
    if (json) {
        json_error_t je;
        json_t *j = json_loads(out, 0, &je);
        CHECK(j, "stats --json wrote no JSON (%s)", je.text);
        CHECK(json_is_object(json_object_get(j, "damage")), "no damage in the JSON");
        json_decref(j);
    } else {
        CHECK(out_len > 0, "stats wrote nothing");
    }
    free(out);
}

static void run_all(const uint8_t *data, size_t size) {
    const char *path = input_path(data, size);
    summary_t s;
    bool batches = size & 1;
    if (!read_events(path, size, batches, &s))
        return;
    read_defs(path, size, size > 0 ? data[size - 1] % 64 : 0, &s);
    // one rendering per input (each costs a full read): the size picks which
    const char *module = s.first_module[0] ? s.first_module : "libc.so.6";
    run_stats(path, size & 2, size & 4 ? module : NULL);
}

// Recomputes the crc32 of every chunk whose header and payload lie inside the data, walking
// chunk by chunk where the framing holds and byte by byte where it does not (as the reader's
// resync does). Returns false if nothing changed.
static bool fix_crcs(uint8_t *d, size_t n) {
    bool changed = false;
    size_t i = sizeof(hpt_file_hdr_t) <= n ? sizeof(hpt_file_hdr_t) : n;
    while (n - i >= CHUNK_HDR) {
        hpt_chunk_hdr_t h;
        memcpy(&h, d + i, sizeof h);
        if (h.magic != HPT_CHUNK_MAGIC || h.stored_bytes > n - i - CHUNK_HDR) {
            i++;
            continue;
        }
        hpt_chunk_hdr_t z = h;
        z.crc32 = 0;
        uLong crc = crc32(0L, (const Bytef *)&z, sizeof z);
        crc = crc32(crc, d + i + CHUNK_HDR, h.stored_bytes);
        if ((uint32_t)crc != h.crc32) {
            h.crc32 = (uint32_t)crc;
            memcpy(d + i, &h, sizeof h);
            changed = true;
        }
        i += CHUNK_HDR + h.stored_bytes;
    }
    return changed;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    run_all(data, size);
    uint8_t *copy = malloc(size ? size : 1);
    CHECK(copy, "out of memory");
    if (size)
        memcpy(copy, data, size);
    if (fix_crcs(copy, size))
        run_all(copy, size);
    free(copy);
    return 0;
}
