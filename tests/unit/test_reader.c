// SPDX-License-Identifier: MIT
// reader: merge order across threads at SYNC watermarks, realloc halves, definitions, damage
// (bad chunk in the middle, garbage, truncation, seq gaps, late events) and the one-line
// errors for files that are not traces, directories and FIFOs.
#include "read_trace.h"
#include "trace/reader.h"
#include "trace_builder.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef rt_events_t evs_t;

static char path[64];

static void cleanup(void) {
    if (path[0])
        unlink(path);
}

static reader_t *open_built(tb_t *tb) { return rt_open_built(tb, path); }

static evs_t read_all(reader_t *r) { return rt_read_all(r); }

static size_t count_kind(const evs_t *e, int kind) {
    size_t n = 0;
    for (size_t i = 0; i < e->n; i++)
        n += e->v[i].kind == kind;
    return n;
}

// A chunk of thread tid with n mallocs at the given times, addresses tid<<20 + i*16.
static size_t thread_chunk(tb_t *tb, uint32_t tid, const uint64_t *times, size_t n, bool zstd) {
    tb_begin(tb, HPT_CHUNK_EVENTS, tid, times[0], 0);
    for (size_t i = 0; i < n; i++)
        tb_rec_malloc(tb, times[i], 1, ((uint64_t)tid << 20) + times[i] * 16, 8);
    return tb_end(tb, zstd);
}

Test(reader, merges_threads_in_time_order_at_sync_watermarks, .fini = cleanup) {
    tb_t *tb = tb_new();
    thread_chunk(tb, 1, (uint64_t[]){10, 30, 50}, 3, false);
    thread_chunk(tb, 2, (uint64_t[]){20, 40}, 2, true);
    tb_sync(tb, 45);
    thread_chunk(tb, 2, (uint64_t[]){60, 70, 100}, 3, false);
    thread_chunk(tb, 1, (uint64_t[]){80, 85}, 2, false);
    thread_chunk(tb, 3, (uint64_t[]){45, 100}, 2, false);
    tb_sync(tb, 90);
    thread_chunk(tb, 1, (uint64_t[]){95, 100}, 2, false);
    reader_t *r = open_built(tb);
    evs_t e = read_all(r);
    static const struct {
        uint64_t t;
        uint32_t tid;
    } want[] = {{10, 1}, {20, 2}, {30, 1}, {40, 2}, {45, 3},  {50, 1},  {60, 2},
                {70, 2}, {80, 1}, {85, 1}, {95, 1}, {100, 1}, {100, 2}, {100, 3}};
    cr_assert_eq(e.n, sizeof want / sizeof *want);
    for (size_t i = 0; i < e.n; i++) {
        cr_assert_eq(e.v[i].time_ns, want[i].t, "event %zu", i);
        cr_assert_eq(e.v[i].tid, want[i].tid, "event %zu", i);
        cr_assert_eq(e.v[i].kind, READER_ALLOC);
        cr_assert_eq(e.v[i].sub, READER_MALLOC);
        cr_assert_eq(e.v[i].addr, ((uint64_t)want[i].tid << 20) + want[i].t * 16);
    }
    const reader_damage_t *d = reader_damage(r);
    cr_assert_eq(d->chunks_ok, 8);
    cr_assert_eq(d->chunks_damaged + d->seq_gaps + d->late_events, 0);
    cr_assert_not(d->truncated);
    cr_assert_not(d->trailer);
    free(e.v);
    reader_close(r);
    tb_free(tb);
}

static uint64_t rng = 0x853c49e6748fea9bull;
static uint64_t rnd(void) { return xorshift64(&rng); }

// Many threads, chunks interleaved at random between watermarks: the output is sorted by
// (time, tid) and each thread's events keep their order.
Test(reader, random_interleaving_comes_out_sorted, .fini = cleanup) {
    enum { THREADS = 37, ROUNDS = 40 };
    tb_t *tb = tb_new();
    uint64_t clock[THREADS], seqno[THREADS] = {0};
    for (int i = 0; i < THREADS; i++)
        clock[i] = rnd() % 50;
    size_t total = 0;
    for (int round = 0; round < ROUNDS; round++) {
        uint64_t w = (uint64_t)(round + 1) * 1000;
        int order[THREADS];
        for (int i = 0; i < THREADS; i++)
            order[i] = i;
        for (int i = THREADS - 1; i > 0; i--) {
            int j = (int)(rnd() % (uint64_t)(i + 1)), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (int k = 0; k < THREADS; k++) {
            int i = order[k];
            if (rnd() % 3 == 0)
                continue; // idle this round (events wait until later)
            tb_begin(tb, HPT_CHUNK_EVENTS, 100 + (uint32_t)i, clock[i], 0);
            int n = (int)(rnd() % 20);
            for (int m = 0; m < n && clock[i] < w + 5000; m++) {
                // addr carries the per-thread sequence number to check order
                tb_rec_malloc(tb, clock[i], 1, seqno[i]++, 1);
                total++;
                clock[i] += rnd() % 3 == 0 ? 0 : rnd() % 200; // equal times happen
            }
            tb_end(tb, rnd() % 2);
        }
        // watermark: below every thread's next timestamp
        uint64_t wm = UINT64_MAX;
        for (int i = 0; i < THREADS; i++)
            wm = clock[i] < wm ? clock[i] : wm;
        tb_sync(tb, wm);
    }
    reader_t *r = open_built(tb);
    evs_t e = read_all(r);
    cr_assert_eq(e.n, total);
    uint64_t next[THREADS] = {0};
    for (size_t i = 0; i < e.n; i++) {
        if (i) {
            bool ordered = e.v[i - 1].time_ns < e.v[i].time_ns ||
                           (e.v[i - 1].time_ns == e.v[i].time_ns && e.v[i - 1].tid <= e.v[i].tid);
            cr_assert(ordered, "event %zu out of order", i);
        }
        uint32_t t = e.v[i].tid - 100;
        cr_assert_eq(e.v[i].addr, next[t]++, "thread order of tid %u", e.v[i].tid);
    }
    cr_assert_eq(reader_damage(r)->late_events, 0);
    free(e.v);
    reader_close(r);
    tb_free(tb);
}

Test(reader, realloc_becomes_free_then_alloc_in_merge_order, .fini = cleanup) {
    tb_t *tb = tb_new();
    tb_begin(tb, HPT_CHUNK_EVENTS, 1, 0, 0);
    tb_rec_malloc(tb, 5, 1, 0xA000, 10);
    tb_rec_realloc(tb, 10, 50, 2, 0xA000, 0xB000, 40);
    tb_rec_realloc(tb, 60, 61, 3, 0, 0xC000, 8); // realloc(NULL, 8): no free half
    tb_end(tb, false);
    tb_begin(tb, HPT_CHUNK_EVENTS, 2, 30, 0);
    tb_rec_malloc(tb, 30, 4, 0xD000, 1);
    tb_end(tb, false);
    reader_t *r = open_built(tb);
    evs_t e = read_all(r);
    cr_assert_eq(e.n, 5);
    cr_assert_eq(e.v[0].addr, 0xA000);
    cr_assert_eq(e.v[1].kind, READER_FREE);
    cr_assert_eq(e.v[1].flags, READER_FREE_OF_REALLOC);
    cr_assert_eq(e.v[1].addr, 0xA000);
    cr_assert_eq(e.v[1].time_ns, 10);
    cr_assert_eq(e.v[2].tid, 2);
    cr_assert_eq(e.v[2].time_ns, 30);
    cr_assert_eq(e.v[3].kind, READER_ALLOC);
    cr_assert_eq(e.v[3].sub, READER_REALLOC);
    cr_assert_eq(e.v[3].addr, 0xB000);
    cr_assert_eq(e.v[3].old_addr, 0xA000);
    cr_assert_eq(e.v[3].size, 40);
    cr_assert_eq(e.v[3].stack, 2);
    cr_assert_eq(e.v[3].time_ns, 50);
    cr_assert_eq(e.v[4].sub, READER_REALLOC);
    cr_assert_eq(e.v[4].old_addr, 0);
    cr_assert_eq(e.v[4].time_ns, 61);
    free(e.v);
    reader_close(r);
    tb_free(tb);
}

Test(reader, keeps_stacks_modules_threads_process_and_trailer, .fini = cleanup) {
    tb_t *tb = tb_new();
    tb_begin(tb, HPT_CHUNK_META, 0, 0, 0);
    const char *argv[] = {"/bin/app", "--fast", ""};
    tb_rec_process(tb, "/bin/app", 3, argv);
    tb_rec_module_load(tb, 0, 0x400000, 0x10000, "/bin/app", (const uint8_t *)"\x01\x02\x03", 3);
    tb_end(tb, false);
    tb_begin(tb, HPT_CHUNK_EVENTS, 7, 100, 0);
    tb_rec_thread_start(tb, 100, "worker-1");
    tb_rec_malloc(tb, 110, 5, 0x1000, 32); // stack 5 is defined later, by another thread
    tb_rec_module_load(tb, 120, 0x7f0000, 0x2000, "/lib/libplug.so", NULL, 0);
    tb_rec_module_unload(tb, 130, 0x7f0000);
    tb_rec_thread_end(tb, 140);
    tb_end(tb, true);
    tb_begin(tb, HPT_CHUNK_EVENTS, 8, 100, 0);
    uint64_t frames[] = {0x401234, 0x401000, 0x7fffffff0000ull, 0x400010};
    tb_rec_stack(tb, 5, 4, frames);
    tb_end(tb, false);
    tb_begin(tb, HPT_CHUNK_TRAILER, 0, 0, 0);
    tb_rec_trailer(tb, 1, 2, 3, 4);
    tb_end(tb, false);
    reader_t *r = open_built(tb);
    evs_t e = read_all(r);
    cr_assert_eq(e.n, 6);
    cr_assert_eq(e.v[0].kind, READER_MODULE_LOAD);
    cr_assert_eq(e.v[0].tid, 0);
    cr_assert_eq(e.v[1].kind, READER_THREAD_START);
    cr_assert_eq(e.v[2].kind, READER_ALLOC);
    cr_assert_eq(e.v[3].kind, READER_MODULE_LOAD);
    cr_assert_eq(e.v[3].stack, 1); // index into reader_modules
    cr_assert_eq(e.v[4].kind, READER_MODULE_UNLOAD);
    cr_assert_eq(e.v[4].stack, 1);
    cr_assert_eq(e.v[5].kind, READER_THREAD_END);

    uint32_t n;
    const uint64_t *f = reader_stack(r, 5, &n);
    cr_assert_not_null(f);
    cr_assert_eq(n, 4);
    cr_assert_arr_eq(f, frames, sizeof frames);
    cr_assert_null(reader_stack(r, 6, &n));
    cr_assert_eq(reader_n_stacks(r), 1);

    size_t nm;
    const reader_module_t *m = reader_modules(r, &nm);
    cr_assert_eq(nm, 2);
    cr_assert_str_eq(m[0].path, "/bin/app");
    cr_assert_eq(m[0].build_id_len, 3);
    cr_assert_eq(m[0].build_id[2], 3);
    cr_assert_eq(m[0].unload_ns, UINT64_MAX);
    cr_assert_str_eq(m[1].path, "/lib/libplug.so");
    cr_assert_eq(m[1].load_ns, 120);
    cr_assert_eq(m[1].unload_ns, 130);

    size_t nt;
    const reader_thread_t *t = reader_threads(r, &nt);
    cr_assert_eq(nt, 1);
    cr_assert_eq(t[0].tid, 7);
    cr_assert_str_eq(t[0].name, "worker-1");
    cr_assert_eq(t[0].end_ns, 140);

    cr_assert_str_eq(reader_exe(r), "/bin/app");
    size_t argc;
    const char *const *av = reader_argv(r, &argc);
    cr_assert_eq(argc, 3);
    cr_assert_str_eq(av[1], "--fast");
    cr_assert_str_eq(av[2], "");

    const reader_trailer_t *tr = reader_trailer(r);
    cr_assert_not_null(tr);
    cr_assert_eq(tr->n_lost_events, 2);
    cr_assert_eq(tr->n_stack_overflows, 4);
    cr_assert(reader_damage(r)->trailer);
    cr_assert_eq(reader_header(r)->pid, 4242);
    free(e.v);
    reader_close(r);
    tb_free(tb);
}

// Three single-malloc chunks of thread 1 at times 1, 2, 3; returns the middle one's offset and
// size in *mid and *mid_len.
static tb_t *three_chunks(size_t *mid, size_t *mid_len, bool zstd) {
    tb_t *tb = tb_new();
    thread_chunk(tb, 1, (uint64_t[]){1}, 1, zstd);
    *mid = thread_chunk(tb, 1, (uint64_t[]){2}, 1, zstd);
    size_t third = thread_chunk(tb, 1, (uint64_t[]){3}, 1, zstd);
    *mid_len = third - *mid;
    return tb;
}

static void expect_times(const evs_t *e, const uint64_t *t, size_t n) {
    cr_assert_eq(e->n, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(e->v[i].time_ns, t[i]);
}

Test(reader, damaged_chunk_in_the_middle_is_skipped, .fini = cleanup) {
    size_t mid, mid_len, n;
    tb_t *tb = three_chunks(&mid, &mid_len, false);
    tb_data(tb, &n)[mid + sizeof(hpt_chunk_hdr_t) + 2] ^= 0x10; // payload byte
    reader_t *r = open_built(tb);
    evs_t e = read_all(r);
    expect_times(&e, (uint64_t[]){1, 3}, 2);
    const reader_damage_t *d = reader_damage(r);
    cr_assert_eq(d->chunks_ok, 2);
    cr_assert_eq(d->chunks_damaged, 1);
    cr_assert_eq(d->bytes_skipped, mid_len);
    cr_assert_eq(d->seq_gaps, 1);
    cr_assert_not(d->truncated);
    free(e.v);
    reader_close(r);
    tb_free(tb);
}

Test(reader, damaged_chunk_header_is_skipped, .fini = cleanup) {
    size_t mid, mid_len, n;
    tb_t *tb = three_chunks(&mid, &mid_len, true);
    uint8_t *b = tb_data(tb, &n);
    b[mid] = 'X';       // magic
    b[mid + 12] = 0xff; // stored_bytes now absurd as well
    reader_t *r = open_built(tb);
    evs_t e = read_all(r);
    expect_times(&e, (uint64_t[]){1, 3}, 2);
    cr_assert_eq(reader_damage(r)->chunks_damaged, 1);
    cr_assert_eq(reader_damage(r)->bytes_skipped, mid_len);
    free(e.v);
    reader_close(r);
    tb_free(tb);
}

Test(reader, garbage_between_chunks_is_skipped_without_seq_gap, .fini = cleanup) {
    tb_t *tb = tb_new();
    thread_chunk(tb, 1, (uint64_t[]){1}, 1, false);
    // garbage that even contains the chunk magic
    uint8_t junk[300];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)(i * 7);
    memcpy(junk + 100, "HPCK", 4);
    tb_raw(tb, junk, sizeof junk);
    thread_chunk(tb, 1, (uint64_t[]){2}, 1, false);
    reader_t *r = open_built(tb);
    evs_t e = read_all(r);
    expect_times(&e, (uint64_t[]){1, 2}, 2);
    const reader_damage_t *d = reader_damage(r);
    cr_assert_eq(d->chunks_damaged, 1);
    cr_assert_eq(d->bytes_skipped, sizeof junk);
    cr_assert_eq(d->seq_gaps, 0);
    free(e.v);
    reader_close(r);
    tb_free(tb);
}

// In both forms: the column chunk's table and columns are sound, only the count lies.
Test(reader, chunk_whose_records_do_not_decode_is_skipped_whole, .fini = cleanup) {
    for (int rows = 0; rows < 2; rows++) {
        tb_t *tb = tb_new();
        tb_set_rows(tb, rows);
        thread_chunk(tb, 1, (uint64_t[]){1}, 1, false);
        tb_begin(tb, HPT_CHUNK_EVENTS, 1, 2, 0);
        tb_rec_malloc(tb, 2, 1, 0x10, 1);
        tb_rec_malloc(tb, 3, 1, 0x20, 1);
        tb_set_n_records(tb, 3); // claims one more record than it holds: crc fine, contents not
        size_t bad = tb_end(tb, false);
        size_t next = thread_chunk(tb, 1, (uint64_t[]){4}, 1, false);
        hpt_chunk_hdr_t h;
        size_t n;
        memcpy(&h, tb_data(tb, &n) + bad, sizeof h);
        cr_assert_eq(!(h.flags & HPT_CHUNK_COLUMNS), rows);
        reader_t *r = open_built(tb);
        evs_t e = read_all(r);
        expect_times(&e, (uint64_t[]){1, 4}, 2); // no partial chunk: 2 and 3 are gone too
        cr_assert_eq(reader_damage(r)->chunks_damaged, 1);
        cr_assert_eq(reader_damage(r)->bytes_skipped, next - bad);
        free(e.v);
        reader_close(r);
        unlink(path);
        tb_free(tb);
    }
}

Test(reader, truncated_final_chunk_is_reported_as_truncation, .fini = cleanup) {
    size_t mid, mid_len, n;
    tb_t *tb = three_chunks(&mid, &mid_len, false);
    uint8_t *b = tb_data(tb, &n);
    size_t third = mid + mid_len;
    size_t keep = third + sizeof(hpt_chunk_hdr_t) + 1; // header and one payload byte
    cr_assert_eq(tb_write_tmp(tb, path), 0);
    cr_assert_eq(truncate(path, (off_t)keep), 0);
    (void)b;
    errmsg_t err;
    errmsg_init(&err);
    reader_t *r = reader_open(path, &err);
    if (r)
        reader_keep_threads(r); // reader_threads below
    cr_assert_not_null(r);
    evs_t e = read_all(r);
    expect_times(&e, (uint64_t[]){1, 2}, 2);
    const reader_damage_t *d = reader_damage(r);
    cr_assert(d->truncated);
    cr_assert_eq(d->truncated_bytes, keep - third);
    cr_assert_eq(d->chunks_damaged, 0);
    cr_assert_eq(d->bytes_skipped, 0);
    free(e.v);
    reader_close(r);
    tb_free(tb);
}

Test(reader, partial_chunk_header_at_end_is_truncation, .fini = cleanup) {
    size_t mid, mid_len, n;
    tb_t *tb = three_chunks(&mid, &mid_len, false);
    cr_assert_eq(tb_write_tmp(tb, path), 0);
    tb_data(tb, &n);
    cr_assert_eq(truncate(path, (off_t)(mid + mid_len + 20)), 0);
    errmsg_t err;
    errmsg_init(&err);
    reader_t *r = reader_open(path, &err);
    if (r)
        reader_keep_threads(r); // reader_threads below
    evs_t e = read_all(r);
    expect_times(&e, (uint64_t[]){1, 2}, 2);
    cr_assert(reader_damage(r)->truncated);
    cr_assert_eq(reader_damage(r)->truncated_bytes, 20);
    free(e.v);
    reader_close(r);
    tb_free(tb);
}

Test(reader, damage_then_truncation_reports_both, .fini = cleanup) {
    size_t mid, mid_len, n;
    tb_t *tb = three_chunks(&mid, &mid_len, false);
    tb_data(tb, &n)[mid + 40] ^= 1; // middle chunk's header (base_time) no longer matches crc
    cr_assert_eq(tb_write_tmp(tb, path), 0);
    cr_assert_eq(truncate(path, (off_t)(n - 3)), 0);
    errmsg_t err;
    errmsg_init(&err);
    reader_t *r = reader_open(path, &err);
    if (r)
        reader_keep_threads(r); // reader_threads below
    evs_t e = read_all(r);
    expect_times(&e, (uint64_t[]){1}, 1);
    const reader_damage_t *d = reader_damage(r);
    cr_assert_eq(d->chunks_damaged, 1);
    cr_assert_eq(d->bytes_skipped, mid_len);
    cr_assert(d->truncated);
    free(e.v);
    reader_close(r);
    tb_free(tb);
}

Test(reader, seq_gap_is_counted, .fini = cleanup) {
    tb_t *tb = tb_new();
    thread_chunk(tb, 1, (uint64_t[]){1}, 1, false);
    tb_skip_seq(tb, 2);
    thread_chunk(tb, 1, (uint64_t[]){2}, 1, false);
    thread_chunk(tb, 2, (uint64_t[]){3}, 1, false);
    tb_skip_seq(tb, 1);
    thread_chunk(tb, 2, (uint64_t[]){4}, 1, false);
    reader_t *r = open_built(tb);
    evs_t e = read_all(r);
    cr_assert_eq(e.n, 4);
    cr_assert_eq(reader_damage(r)->seq_gaps, 3);
    cr_assert_eq(reader_damage(r)->chunks_damaged, 0);
    free(e.v);
    reader_close(r);
    tb_free(tb);
}

Test(reader, record_below_released_watermark_is_late_but_kept, .fini = cleanup) {
    tb_t *tb = tb_new();
    thread_chunk(tb, 1, (uint64_t[]){10, 20}, 2, false);
    tb_sync(tb, 100);
    thread_chunk(tb, 2, (uint64_t[]){50, 150}, 2, false); // 50 < 100: breaks the promise
    reader_t *r = open_built(tb);
    evs_t e = read_all(r);
    cr_assert_eq(e.n, 4);
    cr_assert_eq(reader_damage(r)->late_events, 1);
    free(e.v);
    reader_close(r);
    tb_free(tb);
}

// A thread's chunk that begins before its previous chunk ended (a forged trace: the shim's
// times only grow) must not let the queue's tail speak for all of it at the watermark: 30 waits
// for thread 2's 28, as the merge order says.
Test(reader, chunk_going_back_in_time_is_released_in_merge_order, .fini = cleanup) {
    tb_t *tb = tb_new();
    thread_chunk(tb, 1, (uint64_t[]){10, 20, 30}, 3, false);
    thread_chunk(tb, 1, (uint64_t[]){15, 25}, 2, false);
    tb_sync(tb, 27);
    thread_chunk(tb, 2, (uint64_t[]){28}, 1, false);
    reader_t *r = open_built(tb);
    evs_t e = read_all(r);
    static const uint64_t want_t[] = {10, 20, 28, 30, 15, 25};
    static const uint32_t want_tid[] = {1, 1, 2, 1, 1, 1};
    cr_assert_eq(e.n, 6);
    for (size_t i = 0; i < e.n; i++) {
        cr_assert_eq(e.v[i].time_ns, want_t[i], "event %zu: time %lu", i,
                     (unsigned long)e.v[i].time_ns);
        cr_assert_eq(e.v[i].tid, want_tid[i], "event %zu", i);
    }
    free(e.v);
    reader_close(r);
    tb_free(tb);
}

Test(reader, load_defs_reads_definitions_without_events, .fini = cleanup) {
    tb_t *tb = tb_new();
    tb_begin(tb, HPT_CHUNK_EVENTS, 1, 0, 0);
    tb_rec_malloc(tb, 1, 9, 0x10, 1);
    tb_rec_module_load(tb, 2, 0x1000, 0x1000, "/x/libz.so", NULL, 0);
    tb_end(tb, true);
    tb_sync(tb, 5);
    tb_begin(tb, HPT_CHUNK_EVENTS, 2, 6, 0);
    uint64_t fr[] = {0x1010};
    tb_rec_stack(tb, 9, 1, fr);
    tb_end(tb, false);
    reader_t *r = open_built(tb);
    errmsg_t err;
    errmsg_init(&err);
    cr_assert_eq(reader_load_defs(r, &err), 0);
    uint32_t n;
    cr_assert_not_null(reader_stack(r, 9, &n));
    size_t nm;
    reader_modules(r, &nm);
    cr_assert_eq(nm, 1);
    reader_event_t ev;
    cr_assert_eq(reader_next(r, &ev, &err), 0);
    cr_assert_eq(reader_damage(r)->chunks_ok, 3);
    reader_close(r);
    tb_free(tb);
}

Test(reader, big_compressed_chunks_round_trip, .fini = cleanup) {
    tb_t *tb = tb_new();
    tb_begin(tb, HPT_CHUNK_EVENTS, 1, 0, 0x7f0000000000ull);
    for (uint64_t i = 0; i < 100000; i++) {
        tb_rec_malloc(tb, i * 3, i % 50, 0x7f0000000000ull + i * 32, i % 1000);
        tb_rec_free(tb, i * 3 + 1, 0x7f0000000000ull + i * 32);
    }
    tb_end(tb, true);
    size_t n;
    uint8_t *b = tb_data(tb, &n);
    hpt_chunk_hdr_t h;
    memcpy(&h, b + sizeof(hpt_file_hdr_t), sizeof h);
    cr_assert_eq(h.flags & HPT_CHUNK_ZSTD, HPT_CHUNK_ZSTD);
    cr_assert_lt(h.stored_bytes, h.raw_bytes);
    reader_t *r = open_built(tb);
    evs_t e = read_all(r);
    cr_assert_eq(e.n, 200000);
    cr_assert_eq(count_kind(&e, READER_FREE), 100000);
    cr_assert_eq(e.v[199999].time_ns, 99999 * 3 + 1);
    cr_assert_eq(e.v[199998].size, 99999 % 1000);
    free(e.v);
    reader_close(r);
    tb_free(tb);
}

Test(reader, header_only_trace_is_valid_and_empty, .fini = cleanup) {
    tb_t *tb = tb_new();
    reader_t *r = open_built(tb);
    evs_t e = read_all(r);
    cr_assert_eq(e.n, 0);
    cr_assert_not(reader_damage(r)->trailer);
    reader_close(r);
    tb_free(tb);
}

// ---- files that are not traces ----

static void expect_open_error(const char *p, const char *needle) {
    errmsg_t err;
    errmsg_init(&err);
    reader_t *r = reader_open(p, &err);
    if (r)
        reader_keep_threads(r); // reader_threads below
    cr_assert_null(r);
    cr_assert(err.is_set);
    cr_assert_not_null(strstr(err.msg, needle), "message '%s' lacks '%s'", err.msg, needle);
    cr_assert_null(strchr(err.msg, '\n'));
}

static void write_bytes(const void *b, size_t n) {
    strcpy(path, "/tmp/hpt-test-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, b, n), (ssize_t)n);
    close(fd);
}

Test(reader, rejects_empty_file, .fini = cleanup) {
    write_bytes("", 0);
    expect_open_error(path, "empty file");
}

Test(reader, rejects_bad_magic, .fini = cleanup) {
    write_bytes("#!/bin/sh\necho hello\n"
                "................................................",
                70);
    expect_open_error(path, "not a heapprof trace");
}

Test(reader, rejects_other_version, .fini = cleanup) {
    hpt_file_hdr_t h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, HPT_MAGIC, 8);
    h.version = HPT_VERSION - 1; // an older heapprof's trace
    h.hdr_bytes = sizeof h;
    tb_t *tb = tb_new_hdr(&h);
    cr_assert_eq(tb_write_tmp(tb, path), 0);
    char needle[64];
    snprintf(needle, sizeof needle, "unsupported trace version %u", HPT_VERSION - 1);
    expect_open_error(path, needle);
    tb_free(tb);
}

Test(reader, rejects_truncated_header, .fini = cleanup) {
    write_bytes("HEAPPROF\x01\x00", 10);
    expect_open_error(path, "truncated file header");
}

Test(reader, rejects_missing_file) {
    expect_open_error("/nonexistent/heapprof.1.hpt", "No such file");
}

Test(reader, rejects_directory) { expect_open_error("/tmp", "is a directory"); }

Test(reader, rejects_fifo_without_hanging, .timeout = 10) {
    char dir[] = "/tmp/hpt-fifo-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char fifo[64];
    snprintf(fifo, sizeof fifo, "%s/trace.hpt", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    expect_open_error(fifo, "not a regular file");
    unlink(fifo);
    rmdir(dir);
}

Test(reader, rejects_device) { expect_open_error("/dev/null", "not a regular file"); }

// Everything the reader hands out, as one comparable record.
typedef struct read_result {
    evs_t events;
    reader_damage_t damage;
    size_t n_stacks, n_modules, n_threads;
    uint64_t cpu_samples, deferred;
} read_result_t;

// How a test reads the trace at `path` (read_opts): the environment the reader opens with
// (NULL: unset) and how often the reading side frames ahead (reader_prefetch every
// prefetch_every events; 0: never). framed_ahead: how many of those calls framed something.
typedef struct read_opts {
    const char *workers, *buffer, *slots; // HEAPPROF_DECODE_THREADS, _READER_BUFFER, _DECODE_SLOTS
    size_t prefetch_every;
    size_t framed_ahead;
} read_opts_t;

static void set_or_unset(const char *name, const char *value) {
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
}

static read_result_t read_opts(read_opts_t *opt) {
    set_or_unset("HEAPPROF_DECODE_THREADS", opt->workers);
    set_or_unset("HEAPPROF_READER_BUFFER", opt->buffer);
    set_or_unset("HEAPPROF_DECODE_SLOTS", opt->slots);
    errmsg_t err;
    errmsg_init(&err);
    reader_t *r = reader_open(path, &err);
    if (r)
        reader_keep_threads(r); // reader_threads below
    unsetenv("HEAPPROF_DECODE_THREADS");
    unsetenv("HEAPPROF_READER_BUFFER");
    unsetenv("HEAPPROF_DECODE_SLOTS");
    cr_assert_not_null(r, "%s", err.msg);
    read_result_t o = {0};
    if (!opt->prefetch_every) {
        o.events = read_all(r);
    } else {
        reader_event_t ev;
        int rc;
        while ((rc = reader_next(r, &ev, &err)) == 1) {
            rt_push(&o.events, &ev);
            if (o.events.n % opt->prefetch_every == 0)
                opt->framed_ahead += reader_prefetch(r);
        }
        cr_assert_eq(rc, 0, "%s", err.msg);
    }
    o.deferred = reader_chunks_deferred(r);
    o.damage = *reader_damage(r);
    o.n_stacks = reader_n_stacks(r);
    reader_modules(r, &o.n_modules);
    reader_threads(r, &o.n_threads);
    o.cpu_samples = reader_cpu(r)->n_samples;
    reader_close(r);
    return o;
}

// With `buffer` (HEAPPROF_READER_BUFFER, NULL: the default cap) on what the reader holds.
static read_result_t read_with(const char *workers, const char *buffer) {
    read_opts_t opt = {.workers = workers, .buffer = buffer};
    return read_opts(&opt);
}

static read_result_t read_with_workers(const char *workers) { return read_with(workers, NULL); }

// o read what `one` read: events byte for byte, damage, definitions and samples. Frees o's.
static void expect_same_read(read_result_t *o, const read_result_t *one, const char *what) {
    cr_assert_eq(o->events.n, one->events.n, "%s", what);
    cr_assert(memcmp(o->events.v, one->events.v, one->events.n * sizeof *one->events.v) == 0,
              "the events differ %s", what);
    cr_assert(memcmp(&o->damage, &one->damage, sizeof o->damage) == 0, "%s", what);
    cr_assert_eq(o->n_stacks, one->n_stacks, "%s", what);
    cr_assert_eq(o->n_modules, one->n_modules, "%s", what);
    cr_assert_eq(o->n_threads, one->n_threads, "%s", what);
    cr_assert_eq(o->cpu_samples, one->cpu_samples, "%s", what);
    free(o->events.v);
}

// A trace of many small chunks of 9 threads with reallocs, frees, stacks, modules, CPU samples,
// a chunk whose records do not decode, garbage between chunks and late records, the same on
// every call (its random stream starts from the same seed). Returns the next unused stack id.
static uint64_t build_mixed(tb_t *tb) {
    enum { THREADS = 9, ROUNDS = 60 };
    rng = 0x853c49e6748fea9bull;
    uint64_t clock[THREADS] = {0}, next_stack = 1;
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < THREADS; i++) {
            const bool damaged = (round == 17 && i == 2) || (round == 23 && i == 4);
            if (rnd() % 4 == 0 && !damaged)
                continue;
            uint32_t tid = 200 + (uint32_t)i;
            tb_begin(tb, HPT_CHUNK_EVENTS, tid, clock[i], 0);
            if (round == 0)
                tb_rec_thread_start(tb, clock[i], "w");
            if (rnd() % 5 == 0) {
                uint64_t f[3] = {0x401000 + rnd() % 4096, 0x402000, 0x403000};
                tb_rec_stack(tb, next_stack++, 3, f);
            }
            if (rnd() % 7 == 0)
                tb_rec_module_load(tb, clock[i], 0x7f0000000000 + (rnd() % 8) * 0x100000,
                                   0x1000, "/lib/x.so", NULL, 0);
            if (rnd() % 6 == 0)
                tb_rec_cpu_sample(tb, clock[i], tid, next_stack - 1);
            int n = (int)(rnd() % 40);
            for (int m = 0; m < n; m++) {
                uint64_t a = ((uint64_t)tid << 24) + (rnd() % 64) * 16;
                switch (rnd() % 3) {
                case 0:
                    tb_rec_malloc(tb, clock[i], rnd() % next_stack, a, rnd() % 500);
                    break;
                case 1:
                    tb_rec_free(tb, clock[i], a);
                    break;
                default:
                    tb_rec_realloc(tb, clock[i], clock[i] + 3, rnd() % next_stack, a, a + 16,
                                   rnd() % 900);
                    clock[i] += 3;
                }
                clock[i] += rnd() % 50;
            }
            if (round == 17 && i == 2)
                tb_payload(tb, "\xff\x00\x13", 3, 1); // a record with no tag: does not decode
            tb_end(tb, rnd() % 2);
            if (round == 23 && i == 4)
                tb_raw(tb, "between chunks", 14);
        }
        uint64_t wm = UINT64_MAX;
        for (int i = 0; i < THREADS; i++)
            wm = clock[i] < wm ? clock[i] : wm;
        // now and then a watermark a little too high: some records arrive late
        tb_sync(tb, round % 11 == 10 ? wm + 40 : wm);
    }
    return next_stack;
}

// Chunks are decoded by worker threads but applied in file order: 0, 1 or 5 workers hand out
// the same events (byte for byte), definitions and damage counts, on build_mixed's trace.
Test(reader, decode_workers_change_nothing, .fini = cleanup) {
    tb_t *tb = tb_new();
    build_mixed(tb);
    cr_assert_eq(tb_write_tmp(tb, path), 0);
    read_result_t one = read_with_workers("0");
    cr_assert_gt(one.events.n, 1000);
    cr_assert_gt(one.damage.chunks_damaged, 0);
    cr_assert_gt(one.damage.late_events, 0);
    cr_assert_gt(one.n_modules, 0);
    cr_assert_gt(one.cpu_samples, 0);
    for (int k = 0; k < 2; k++) {
        read_result_t o = read_with_workers(k == 0 ? "1" : "5");
        expect_same_read(&o, &one, k == 0 ? "with 1 worker" : "with 5 workers");
    }
    free(one.events.v);
    tb_free(tb);
}

// Past the cap on events held in memory between two SYNCs, chunks stay in the file and are
// decoded again when the merge reaches them: whatever the cap, the same events in the same
// order, the same definitions and damage (build_mixed's late records are late at any cap: the
// trace says so, not the cap), with module events whose stack field a definition set.
Test(reader, a_small_buffer_defers_chunks_and_changes_nothing, .fini = cleanup) {
    tb_t *tb = tb_new();
    build_mixed(tb);
    cr_assert_eq(tb_write_tmp(tb, path), 0);
    read_result_t one = read_with("0", NULL);
    cr_assert_eq(one.deferred, 0);
    cr_assert_gt(one.damage.late_events, 0);
    cr_assert_gt(count_kind(&one.events, READER_MODULE_LOAD), 0);
    const char *caps[] = {"1", "37", "400"};
    for (size_t k = 0; k < 3; k++) {
        read_result_t o = read_with(k == 1 ? "2" : "0", caps[k]);
        cr_assert_gt(o.deferred, 0, "cap %s: nothing deferred", caps[k]);
        char what[32];
        snprintf(what, sizeof what, "at a cap of %s", caps[k]);
        expect_same_read(&o, &one, what);
    }
    free(one.events.v);
    tb_free(tb);
}

// One thread holds the watermark back (its chunk of times 20-22 is written after 40 of the
// other's, as a thread the CPU left waiting would): the first SYNC after it is what releases
// anything. A cap far below what waits still hands everything out in time order, none late
// (until session 13 the oldest were released once the cap was passed: the held-back thread's
// events then came out late, 0.1-0.3 M of 40 M on 1,000 threads on 2 CPUs).
Test(reader, a_held_back_thread_is_not_late_past_the_cap, .fini = cleanup) {
    tb_t *tb = tb_new();
    thread_chunk(tb, 1, (uint64_t[]){10, 11, 12}, 3, false);
    uint64_t t = 100;
    for (int c = 0; c < 40; c++) {
        uint64_t times[5];
        for (int i = 0; i < 5; i++)
            times[i] = t++;
        thread_chunk(tb, 2, times, 5, c % 2 == 0);
    }
    thread_chunk(tb, 1, (uint64_t[]){20, 21, 22}, 3, true);
    tb_sync(tb, 1000);
    thread_chunk(tb, 1, (uint64_t[]){1000, 1001}, 2, false);
    cr_assert_eq(tb_write_tmp(tb, path), 0);
    read_result_t o = read_with("0", "8");
    cr_assert_gt(o.deferred, 20);
    cr_assert_eq(o.damage.late_events, 0);
    cr_assert_eq(o.events.n, 3 + 200 + 3 + 2);
    for (size_t i = 1; i < o.events.n; i++)
        cr_assert(o.events.v[i - 1].time_ns < o.events.v[i].time_ns, "event %zu out of order", i);
    free(o.events.v);
    tb_free(tb);
}

// The next chunk header of a built file at or after *pos (0: the first), garbage between
// chunks skipped byte by byte as the reader resynchronises: false past the last one.
static bool next_chunk(const uint8_t *b, size_t n, size_t *pos, hpt_chunk_hdr_t *h) {
    if (*pos < sizeof(hpt_file_hdr_t))
        *pos = sizeof(hpt_file_hdr_t);
    for (; *pos + sizeof *h <= n; ++*pos) {
        memcpy(h, b + *pos, sizeof *h);
        if (h->magic == HPT_CHUNK_MAGIC && h->stored_bytes <= n - *pos - sizeof *h)
            return true;
    }
    return false;
}

// Payload bytes flipped in three EVENTS chunks of build_mixed's trace, two of them adjacent:
// their crc fails in the decoder, after the chunks behind them were framed by their lengths.
// Batches kept with reader_next_batch_keep (all of them, to the end, on 5 workers) hold the
// same events as reader_next hands out on the reading thread alone, and the damage is the same.
static void write_mixed_with_crc_failures(tb_t *tb) {
    build_mixed(tb);
    size_t n, k = 0;
    uint8_t *b = tb_data(tb, &n);
    hpt_chunk_hdr_t h;
    for (size_t pos = 0; next_chunk(b, n, &pos, &h); pos += sizeof h + h.stored_bytes) {
        if (h.type == HPT_CHUNK_EVENTS && h.stored_bytes > 4 && (k == 40 || k == 41 || k == 200))
            b[pos + sizeof h + h.stored_bytes / 2] ^= 0x20;
        k += h.type == HPT_CHUNK_EVENTS;
    }
    cr_assert_gt(k, 200);
    cr_assert_eq(tb_write_tmp(tb, path), 0);
}

Test(reader, kept_batches_and_crc_failures_in_decoders_change_nothing, .fini = cleanup) {
    tb_t *tb = tb_new();
    write_mixed_with_crc_failures(tb);
    read_result_t one = read_with_workers("0");
    cr_assert_gt(one.events.n, 1000);

    setenv("HEAPPROF_DECODE_THREADS", "5", 1);
    errmsg_t err;
    errmsg_init(&err);
    reader_t *r = reader_open(path, &err);
    if (r)
        reader_keep_threads(r); // reader_threads below
    unsetenv("HEAPPROF_DECODE_THREADS");
    cr_assert_not_null(r, "%s", err.msg);
    const reader_event_t **evs = NULL;
    size_t *lens = NULL, n_batches = 0, cap = 0;
    reader_batch_t **keep = NULL;
    int rc;
    const reader_event_t *ev;
    size_t len;
    reader_batch_t *kb;
    while ((rc = reader_next_batch_keep(r, &ev, &len, &kb, &err)) == 1) {
        if (n_batches == cap) {
            cap = cap ? 2 * cap : 64;
            evs = realloc(evs, cap * sizeof *evs);
            lens = realloc(lens, cap * sizeof *lens);
            keep = realloc(keep, cap * sizeof *keep);
            cr_assert(evs && lens && keep);
        }
        evs[n_batches] = ev;
        lens[n_batches] = len;
        keep[n_batches++] = kb;
    }
    cr_assert_eq(rc, 0, "%s", err.msg);
    size_t at = 0;
    for (size_t i = 0; i < n_batches; i++) {
        cr_assert_leq(at + lens[i], one.events.n);
        cr_assert(memcmp(evs[i], one.events.v + at, lens[i] * sizeof *evs[i]) == 0,
                  "batch %zu (events %zu..) differs", i, at);
        at += lens[i];
        reader_batch_done(r, keep[i]);
    }
    cr_assert_eq(at, one.events.n);
    const reader_damage_t *d = reader_damage(r);
    cr_assert(memcmp(d, &one.damage, sizeof *d) == 0);
    // build_mixed's two regions, and two here: resynchronisation passes over both adjacent ones
    cr_assert_eq(d->chunks_damaged, 4);
    reader_close(r);
    free(evs);
    free(lens);
    free(keep);
    free(one.events.v);
    tb_free(tb);
}

// The decode ring's depth and framing ahead of the merge (reader_prefetch, which the reading
// thread calls while its caller is busy) change nothing, also where a chunk's crc fails in the
// decoder after framing went on past it, over build_mixed's damage (the damage found there is
// counted once, not again when framing goes back): 5 workers, rings of 1, 7 and 128 chunks,
// prefetching every 0 (never), 1 and 97 events.
Test(reader, framing_ahead_changes_nothing, .fini = cleanup) {
    tb_t *tb = tb_new();
    write_mixed_with_crc_failures(tb);
    read_result_t one = read_with_workers("0");
    cr_assert_gt(one.events.n, 1000);
    cr_assert_eq(one.damage.chunks_damaged, 4);
    static const char *const slots[] = {"1", "7", "128"};
    static const size_t every[] = {0, 1, 97};
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 3; j++) {
            read_opts_t opt = {.workers = "5", .slots = slots[i], .prefetch_every = every[j]};
            read_result_t o = read_opts(&opt);
            if (every[j] && i > 0)
                cr_assert_gt(opt.framed_ahead, 0, "the ring of %s chunks had room", slots[i]);
            char what[64];
            snprintf(what, sizeof what, "ring of %s, prefetch every %zu", slots[i], every[j]);
            expect_same_read(&o, &one, what);
        }
    free(one.events.v);
    tb_free(tb);
}

// Every definition the reader holds after reading r to its end, as text: stacks by id (ids
// below n_ids), modules, threads, CPU samples by stack, process and trailer. The caller frees it.
static char *dump_defs(reader_t *r, uint64_t n_ids) {
    char *s = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&s, &len);
    cr_assert_not_null(f);
    fprintf(f, "stacks %zu\n", reader_n_stacks(r));
    for (uint64_t id = 0; id < n_ids; id++) {
        uint32_t n;
        const uint64_t *fr = reader_stack(r, id, &n);
        if (!fr)
            continue;
        fprintf(f, "stack %lu:", (unsigned long)id);
        for (uint32_t i = 0; i < n; i++)
            fprintf(f, " %lx", (unsigned long)fr[i]);
        fputc('\n', f);
    }
    size_t n;
    const reader_module_t *m = reader_modules(r, &n);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "module %s %lx+%lx tid %u %lu..%lu build-id %u\n", m[i].path,
                (unsigned long)m[i].base, (unsigned long)m[i].size, m[i].tid,
                (unsigned long)m[i].load_ns, (unsigned long)m[i].unload_ns, m[i].build_id_len);
    const reader_thread_t *t = reader_threads(r, &n);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "thread %u '%s' %lu..%lu\n", t[i].tid, t[i].name, (unsigned long)t[i].start_ns,
                (unsigned long)t[i].end_ns);
    const reader_cpu_t *c = reader_cpu(r);
    fprintf(f, "cpu %d %u %u %lu %lu '%s'\n", c->has_info, c->source, c->hz,
            (unsigned long)c->n_samples, (unsigned long)c->n_lost, c->reason ? c->reason : "");
    const uint64_t *ids, *counts;
    size_t k = reader_cpu_stacks(r, &ids, &counts);
    uint64_t sum = 0, weighted = 0; // in no particular order: compared as sums
    for (size_t i = 0; i < k; i++) {
        sum += counts[i];
        weighted += (ids[i] + 1) * counts[i];
    }
    fprintf(f, "cpu stacks %zu %lu %lu\n", k, (unsigned long)sum, (unsigned long)weighted);
    size_t argc;
    const char *const *argv = reader_argv(r, &argc);
    fprintf(f, "exe %s argc %zu\n", reader_exe(r) ? reader_exe(r) : "-", argc);
    for (size_t i = 0; i < argc; i++)
        fprintf(f, "arg '%s'\n", argv[i]);
    const reader_trailer_t *tr = reader_trailer(r);
    if (tr)
        fprintf(f, "trailer %lu %lu %lu %lu\n", (unsigned long)tr->n_events,
                (unsigned long)tr->n_lost_events, (unsigned long)tr->n_stacks,
                (unsigned long)tr->n_stack_overflows);
    cr_assert_eq(fclose(f), 0);
    return s;
}

// EVENTS chunks of the built file in column form and as rows, empty ones left out.
static void count_forms(tb_t *tb, size_t *cols, size_t *rows) {
    size_t n;
    const uint8_t *b = tb_data(tb, &n);
    *cols = *rows = 0;
    hpt_chunk_hdr_t h;
    for (size_t pos = 0; next_chunk(b, n, &pos, &h); pos += sizeof h + h.stored_bytes)
        if (h.type == HPT_CHUNK_EVENTS && h.raw_bytes)
            ++*(h.flags & HPT_CHUNK_COLUMNS ? cols : rows);
}

// The shim writes EVENTS chunks in columns and the tests build them so by default: the same
// trace built as rows (tb_set_rows) and in columns reads the same, events byte for byte,
// definitions and damage counts, so the column path (hpt_cols_untranspose) and the row decoder
// agree on everything build_mixed holds, damage included. The undecodable chunk (tb_payload) is
// rows in both files, as the shim would write a chunk the column form cannot carry.
Test(reader, rows_and_columns_read_the_same, .fini = cleanup) {
    read_result_t res[2];
    char *defs[2];
    size_t n_cols[2], n_rows[2];
    for (int form = 0; form < 2; form++) { // 0: rows, 1: columns (the default)
        tb_t *tb = tb_new();
        if (form == 0)
            tb_set_rows(tb, true);
        tb_begin(tb, HPT_CHUNK_META, 0, 0, 0);
        const char *argv[] = {"/bin/app", "-x"};
        tb_rec_process(tb, "/bin/app", 2, argv);
        tb_rec_module_load(tb, 0, 0x400000, 0x10000, "/bin/app", (const uint8_t *)"\1\2", 2);
        tb_end(tb, false);
        uint64_t n_ids = build_mixed(tb);
        tb_begin(tb, HPT_CHUNK_TRAILER, 0, 0, 0);
        tb_rec_trailer(tb, 5, 6, 7, 8);
        tb_end(tb, false);
        count_forms(tb, &n_cols[form], &n_rows[form]);
        reader_t *r = open_built(tb);
        res[form].events = read_all(r);
        res[form].damage = *reader_damage(r);
        defs[form] = dump_defs(r, n_ids);
        reader_close(r);
        unlink(path);
        tb_free(tb);
    }
    cr_assert_eq(n_cols[0], 0);
    cr_assert_gt(n_rows[0], 300);
    // build_mixed's empty chunks (no records) are rows in both: the shim writes none
    cr_assert_eq(n_rows[1], 1, "only the undecodable chunk is rows: %zu of %zu", n_rows[1], n_rows[0]);
    cr_assert_eq(n_cols[1] + n_rows[1], n_rows[0]);
    cr_assert_gt(res[0].events.n, 1000);
    cr_assert_gt(res[0].damage.chunks_damaged, 0);
    cr_assert_gt(res[0].damage.late_events, 0);
    cr_assert(res[0].damage.trailer);
    cr_assert_eq(res[1].events.n, res[0].events.n);
    cr_assert(memcmp(res[1].events.v, res[0].events.v,
                     res[0].events.n * sizeof *res[0].events.v) == 0);
    cr_assert(memcmp(&res[1].damage, &res[0].damage, sizeof res[0].damage) == 0,
              "damaged %lu/%lu skipped %lu/%lu gaps %lu/%lu late %lu/%lu",
              (unsigned long)res[0].damage.chunks_damaged,
              (unsigned long)res[1].damage.chunks_damaged,
              (unsigned long)res[0].damage.bytes_skipped, (unsigned long)res[1].damage.bytes_skipped,
              (unsigned long)res[0].damage.seq_gaps, (unsigned long)res[1].damage.seq_gaps,
              (unsigned long)res[0].damage.late_events, (unsigned long)res[1].damage.late_events);
    cr_assert_str_eq(defs[1], defs[0]);
    cr_assert_not_null(strstr(defs[0], "stack 1:"));
    cr_assert_not_null(strstr(defs[0], "/lib/x.so"));
    for (int form = 0; form < 2; form++) {
        free(res[form].events.v);
        free(defs[form]);
    }
}
