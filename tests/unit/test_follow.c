// SPDX-License-Identifier: MIT
// Following a trace while it is written (reader_follow, analyze_follow_step): a trace fed to the
// file in pieces cut at arbitrary byte offsets (inside the file header, inside chunk headers,
// inside payloads) and read after each piece gives exactly the events, damage counts and replay
// figures of one read of the whole file; and a read after new bytes frames only the new chunks.
#include "analyze/analyze.h"
#include "read_trace.h"
#include "trace/reader.h"
#include "trace_builder.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char whole_path[64], grow_path[64] = "/tmp/hp_follow_XXXXXX";

static void cleanup(void) {
    if (whole_path[0])
        unlink(whole_path);
    unlink(grow_path);
}

typedef struct built {
    tb_t *tb;
    size_t offs[512]; // where each chunk starts
    size_t n_offs;
} built_t;

static uint64_t rng;
static uint64_t rnd(void) { return xorshift64(&rng); }

// Threads that allocate and free their own blocks (and realloc some) in chunks interleaved
// between SYNC watermarks; stacks and a module defined on the way, a PROCESS record first.
static void build(built_t *b, uint64_t seed, bool trailer, bool garbage) {
    enum { THREADS = 5, ROUNDS = 24, STACKS = 9 };
    rng = seed;
    memset(b, 0, sizeof *b);
    tb_t *tb = b->tb = tb_new();
    tb_begin(tb, HPT_CHUNK_META, 0, 0, 0);
    const char *argv[] = {"svc", "--port", "80"};
    tb_rec_process(tb, "/usr/bin/svc", 3, argv);
    tb_rec_module_load(tb, 0, 0x400000, 0x10000, "/usr/bin/svc", NULL, 0);
    b->offs[b->n_offs++] = tb_end(tb, false);
    tb_begin(tb, HPT_CHUNK_EVENTS, 100, 0, 0);
    for (uint64_t s = 1; s <= STACKS; s++) {
        uint64_t fr[3] = {0x401000 + s * 16, 0x402000 + s, 0x403000};
        tb_rec_stack(tb, s, 3, fr);
    }
    b->offs[b->n_offs++] = tb_end(tb, false);
    uint64_t clock[THREADS] = {0}, next_addr[THREADS], live[THREADS][64];
    size_t n_live[THREADS] = {0};
    for (int i = 0; i < THREADS; i++)
        next_addr[i] = 0x10000000ull * (uint64_t)(i + 1);
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < THREADS; i++) {
            if (rnd() % 4 == 0)
                continue; // idle this round: its events wait for a later watermark
            tb_begin(tb, HPT_CHUNK_EVENTS, 100 + (uint32_t)i, clock[i], 0);
            int n = 1 + (int)(rnd() % 40);
            for (int m = 0; m < n; m++) {
                uint64_t t = clock[i];
                unsigned what = (unsigned)(rnd() % 8);
                if (what < 4 || n_live[i] == 0) {
                    if (n_live[i] == 64)
                        continue;
                    uint64_t a = next_addr[i] += 64;
                    tb_rec_malloc(tb, t, 1 + rnd() % STACKS, a, 1 + rnd() % 5000);
                    live[i][n_live[i]++] = a;
                } else if (what < 7) {
                    size_t k = (size_t)(rnd() % n_live[i]);
                    tb_rec_free(tb, t, live[i][k]);
                    live[i][k] = live[i][--n_live[i]];
                } else {
                    size_t k = (size_t)(rnd() % n_live[i]);
                    uint64_t a = next_addr[i] += 64;
                    tb_rec_realloc(tb, t, t, 1 + rnd() % STACKS, live[i][k], a, 1 + rnd() % 9000);
                    live[i][k] = a;
                }
                clock[i] += rnd() % 3 == 0 ? 0 : rnd() % 300;
            }
            b->offs[b->n_offs++] = tb_end(tb, rnd() % 2);
        }
        if (garbage && round == ROUNDS / 2) {
            static const uint8_t junk[] = "this is no chunk at all, only damage in the file";
            tb_raw(tb, junk, sizeof junk);
        }
        uint64_t wm = UINT64_MAX;
        for (int i = 0; i < THREADS; i++)
            wm = clock[i] < wm ? clock[i] : wm;
        b->offs[b->n_offs++] = tb_sync(tb, wm);
    }
    if (trailer) {
        tb_begin(tb, HPT_CHUNK_TRAILER, 0, 0, 0);
        tb_rec_trailer(tb, 1000, 0, STACKS, 0);
        b->offs[b->n_offs++] = tb_end(tb, false);
    }
}

// Cut points: random ones, and some inside the file header, chunk headers and payloads.
static size_t cuts_for(const built_t *b, size_t total, size_t *cuts, size_t cap) {
    size_t n = 0;
    cuts[n++] = 5;  // inside the file header: the reader cannot open yet
    cuts[n++] = 60; // past it (56 bytes), inside the first chunk's header
    for (size_t i = 0; i < b->n_offs && n + 3 < cap; i++) {
        cuts[n++] = b->offs[i] + 1 + rnd() % 54; // inside a chunk header
        cuts[n++] = b->offs[i] + 57 + rnd() % 40; // inside (or just past) a payload
        if (rnd() % 2)
            cuts[n++] = (size_t)(rnd() % total);
    }
    for (size_t i = 0; i < n; i++)
        if (cuts[i] > total)
            cuts[i] = total;
    // sort
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && cuts[j - 1] > cuts[j]; j--) {
            size_t t = cuts[j];
            cuts[j] = cuts[j - 1];
            cuts[j - 1] = t;
        }
    return n;
}

static void append(int fd, const uint8_t *p, size_t n) {
    while (n) {
        ssize_t k = write(fd, p, n);
        cr_assert_gt(k, 0);
        p += k;
        n -= (size_t)k;
    }
}

static int new_grow_file(void) {
    snprintf(grow_path, sizeof grow_path, "/tmp/hp_follow_XXXXXX");
    int fd = mkstemp(grow_path);
    cr_assert_geq(fd, 0);
    return fd;
}

// Reads what can be released now; appends to e.
static void read_now(reader_t *r, rt_events_t *e) {
    errmsg_t err;
    errmsg_init(&err);
    reader_event_t ev;
    int rc;
    while ((rc = reader_next(r, &ev, &err)) == 1) {
        if (e->n == e->cap) {
            e->cap = e->cap ? e->cap * 2 : 256;
            e->v = realloc(e->v, e->cap * sizeof *e->v);
        }
        e->v[e->n++] = ev;
    }
    cr_assert_eq(rc, 0, "reader_next: %s", err.msg);
}

static void expect_same_events(const rt_events_t *a, const rt_events_t *b) {
    cr_assert_eq(a->n, b->n, "followed %zu events, one-shot %zu", a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        const reader_event_t *x = &a->v[i], *y = &b->v[i];
        cr_assert(x->kind == y->kind && x->sub == y->sub && x->flags == y->flags &&
                      x->tid == y->tid && x->time_ns == y->time_ns && x->stack == y->stack &&
                      x->addr == y->addr && x->old_addr == y->old_addr && x->size == y->size,
                  "event %zu differs", i);
    }
}

// Feeds the trace in pieces, reading after each; `stop`: then says the writer is gone.
static void follow_in_pieces(const built_t *b, bool stop, rt_events_t *got, reader_t **out) {
    size_t total;
    const uint8_t *data = tb_data(b->tb, &total);
    size_t cuts[1600];
    size_t n_cuts = cuts_for(b, total, cuts, 1500);
    cuts[n_cuts++] = total;
    int fd = new_grow_file();
    reader_t *r = NULL;
    size_t done = 0;
    for (size_t c = 0; c < n_cuts; c++) {
        append(fd, data + done, cuts[c] - done);
        done = cuts[c];
        if (!r) {
            errmsg_t err;
            errmsg_init(&err);
            r = reader_open(grow_path, &err);
            if (!r) {
                cr_assert_lt(done, 56, "reader_open with %zu bytes: %s", done, err.msg);
                continue;
            }
            reader_follow(r);
        }
        read_now(r, got);
        if (done < total) {
            cr_assert_not(reader_ended(r), "ended at byte %zu of %zu", done, total);
            cr_assert_not(reader_damage(r)->truncated, "a partial chunk counted as truncation");
        }
    }
    close(fd);
    cr_assert_not_null(r);
    if (stop) {
        cr_assert_not(reader_ended(r));
        reader_follow_stop(r);
        read_now(r, got);
    }
    cr_assert(reader_ended(r));
    *out = r;
}

static void one_shot(const built_t *b, rt_events_t *e, reader_t **out) {
    *out = rt_open_built(b->tb, whole_path);
    *e = rt_read_all(*out);
}

static void expect_same_reads(const reader_t *f, const reader_t *w) {
    const reader_damage_t *df = reader_damage(f), *dw = reader_damage(w);
    cr_assert_eq(df->chunks_ok, dw->chunks_ok);
    cr_assert_eq(df->seq_gaps, dw->seq_gaps);
    cr_assert_eq(df->late_events, dw->late_events);
    cr_assert_eq(df->truncated, dw->truncated);
    cr_assert_eq(df->truncated_bytes, dw->truncated_bytes);
    cr_assert_eq(df->trailer, dw->trailer);
    cr_assert_eq(reader_n_stacks(f), reader_n_stacks(w));
    cr_assert_str_eq(reader_exe(f), reader_exe(w));
    size_t nf, nw;
    reader_modules(f, &nf);
    reader_modules(w, &nw);
    cr_assert_eq(nf, nw);
    // every chunk framed once: following re-read none
    cr_assert_eq(reader_chunks_framed(f), reader_chunks_framed(w));
}

Test(follow, pieces_at_arbitrary_offsets_give_the_one_shot_events, .fini = cleanup) {
    for (uint64_t seed = 1; seed <= 6; seed++) {
        built_t b;
        build(&b, 0x9e3779b97f4a7c15ull * seed, true, false);
        rt_events_t want, got = {0};
        reader_t *w, *f;
        one_shot(&b, &want, &w);
        cr_assert_gt(want.n, 1000);
        follow_in_pieces(&b, false, &got, &f);
        expect_same_events(&got, &want);
        expect_same_reads(f, w);
        cr_assert_eq(reader_damage(f)->chunks_damaged, 0);
        cr_assert(reader_damage(f)->trailer);
        free(want.v);
        free(got.v);
        reader_close(w);
        reader_close(f);
        tb_free(b.tb);
        cleanup();
    }
}

// No TRAILER, and the file ends inside a chunk: while following that is "not yet"; once the
// writer is gone it is the truncation a one-shot read reports.
Test(follow, writer_gone_reads_the_rest_as_one_shot_with_truncation, .fini = cleanup) {
    built_t b;
    build(&b, 77, false, false);
    tb_begin(b.tb, HPT_CHUNK_EVENTS, 100, 1u << 30, 0);
    for (int i = 0; i < 50; i++)
        tb_rec_malloc(b.tb, (1u << 30) + (uint64_t)i, 1, 0x90000000ull + 64 * (uint64_t)i, 8);
    size_t last = tb_end(b.tb, false);
    size_t total;
    tb_data(b.tb, &total);
    // cut the last chunk short: rebuild the data without its final 30 bytes
    const uint8_t *data = tb_data(b.tb, &total);
    tb_t *cut = tb_new_hdr((const hpt_file_hdr_t *)data);
    tb_raw(cut, data + sizeof(hpt_file_hdr_t), total - sizeof(hpt_file_hdr_t) - 30);
    tb_t *full = b.tb;
    b.tb = cut;
    cr_assert_gt(last, 0);

    rt_events_t want, got = {0};
    reader_t *w, *f;
    one_shot(&b, &want, &w);
    cr_assert(reader_damage(w)->truncated);
    follow_in_pieces(&b, true, &got, &f);
    expect_same_events(&got, &want);
    expect_same_reads(f, w);
    cr_assert_eq(reader_damage(f)->chunks_damaged, reader_damage(w)->chunks_damaged);
    free(want.v);
    free(got.v);
    reader_close(w);
    reader_close(f);
    tb_free(cut);
    tb_free(full);
}

// Garbage between chunks is damage, found while following too; the events are the same.
Test(follow, damage_is_still_detected_while_following, .fini = cleanup) {
    for (uint64_t seed = 1; seed <= 3; seed++) {
        built_t b;
        build(&b, 1234 * seed, true, true);
        rt_events_t want, got = {0};
        reader_t *w, *f;
        one_shot(&b, &want, &w);
        follow_in_pieces(&b, false, &got, &f);
        expect_same_events(&got, &want);
        cr_assert_geq(reader_damage(w)->chunks_damaged, 1);
        cr_assert_geq(reader_damage(f)->chunks_damaged, 1);
        cr_assert_eq(reader_damage(f)->bytes_skipped, reader_damage(w)->bytes_skipped);
        cr_assert_eq(reader_damage(f)->chunks_ok, reader_damage(w)->chunks_ok);
        free(want.v);
        free(got.v);
        reader_close(w);
        reader_close(f);
        tb_free(b.tb);
        cleanup();
    }
}

// The work of a read after new bytes: only the chunks written since are framed (the debug
// counter reader_chunks_framed), none when nothing was written.
Test(follow, a_read_frames_only_the_chunks_written_since, .fini = cleanup) {
    built_t b;
    build(&b, 99, true, false);
    size_t total;
    const uint8_t *data = tb_data(b.tb, &total);
    int fd = new_grow_file();
    size_t done = b.offs[2]; // the header, the META chunk and the stacks' chunk
    append(fd, data, done);
    errmsg_t err;
    errmsg_init(&err);
    reader_t *r = reader_open(grow_path, &err);
    cr_assert_not_null(r, "%s", err.msg);
    reader_follow(r);
    rt_events_t e = {0};
    read_now(r, &e);
    cr_assert_eq(reader_chunks_framed(r), 2);
    for (size_t i = 3; i < b.n_offs; i++) {
        read_now(r, &e); // nothing new: nothing framed
        cr_assert_eq(reader_chunks_framed(r), i - 1);
        append(fd, data + done, b.offs[i] - done); // one more chunk, and half of the next
        append(fd, data + b.offs[i], 20);
        done = b.offs[i] + 20;
        read_now(r, &e);
        cr_assert_eq(reader_chunks_framed(r), i, "after chunk %zu", i);
    }
    append(fd, data + done, total - done);
    read_now(r, &e);
    cr_assert_eq(reader_chunks_framed(r), b.n_offs);
    cr_assert(reader_ended(r));
    close(fd);
    free(e.v);
    reader_close(r);
    tb_free(b.tb);
}

// analyze_follow_step after each piece: replay's totals and every site's figures at the end
// equal those of `heapprof report`'s one pass (analyze_open).
Test(follow, analyze_steps_give_the_one_shot_figures, .fini = cleanup) {
    built_t b;
    build(&b, 4242, true, false);
    size_t total;
    const uint8_t *data = tb_data(b.tb, &total);
    size_t cuts[1600];
    size_t n_cuts = cuts_for(&b, total, cuts, 1500);
    cuts[n_cuts++] = total;
    int fd = new_grow_file();
    analyze_t *a = NULL;
    analyze_opts_t ao = {.mode = REPLAY_SITES, .growth = true, .short_ns = 1000000};
    size_t done = 0;
    uint64_t framed_before = 0;
    errmsg_t err;
    errmsg_init(&err);
    for (size_t c = 0; c < n_cuts; c++) {
        append(fd, data + done, cuts[c] - done);
        done = cuts[c];
        if (!a && !(a = analyze_follow_open(grow_path, &ao, &err)))
            continue;
        cr_assert_eq(analyze_follow_step(a, false, &err), 0, "%s", err.msg);
        uint64_t framed = reader_chunks_framed(a->r);
        cr_assert_geq(framed, framed_before);
        framed_before = framed;
        cr_assert_not_null(a->sites);
    }
    close(fd);
    cr_assert(reader_ended(a->r));
    cr_assert_eq(tb_write_tmp(b.tb, whole_path), 0);
    analyze_t *w = analyze_open(whole_path, REPLAY_SITES, NULL, &err);
    cr_assert_not_null(w, "%s", err.msg);
    const replay_totals_t *tf = replay_totals(a->rp), *tw = replay_totals(w->rp);
    cr_assert_eq(tf->n_blocks, tw->n_blocks);
    cr_assert_eq(tf->n_bytes, tw->n_bytes);
    cr_assert_eq(tf->n_frees, tw->n_frees);
    cr_assert_eq(tf->live_bytes, tw->live_bytes);
    cr_assert_eq(tf->live_blocks, tw->live_blocks);
    cr_assert_eq(tf->peak_bytes, tw->peak_bytes);
    cr_assert_eq(tf->peak_time_ns, tw->peak_time_ns);
    cr_assert_eq(tf->last_time_ns, tw->last_time_ns);
    cr_assert_gt(tf->n_blocks, 1000);
    size_t n = sites_count(a->sites);
    cr_assert_eq(n, sites_count(w->sites));
    for (size_t i = 0; i < n; i++) {
        const replay_site_t *x = sites_figures(a->sites, i);
        size_t j = analyze_site_of(w, x->stack);
        cr_assert_neq(j, SIZE_MAX);
        const replay_site_t *y = sites_figures(w->sites, j);
        cr_assert(x->blocks == y->blocks && x->bytes == y->bytes &&
                      x->lifetime_ns == y->lifetime_ns && x->max_bytes == y->max_bytes &&
                      x->peak_bytes == y->peak_bytes && x->end_bytes == y->end_bytes &&
                      x->end_blocks == y->end_blocks && x->temp_blocks == y->temp_blocks,
                  "site of stack %llu differs", (unsigned long long)x->stack);
    }
    analyze_close(a);
    analyze_close(w);
    tb_free(b.tb);
}
