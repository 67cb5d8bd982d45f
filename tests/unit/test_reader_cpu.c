// SPDX-License-Identifier: MIT
// reader: CPU samples (docs/trace-format.md#cpu) are counted by stack as chunks decode, never
// merged and never counted late, whatever their times against the SYNC watermarks; a damaged
// chunk's samples are dropped with it; the last CPU_INFO wins; reader_load_defs counts them too.
#include "read_trace.h"
#include "trace/reader.h"
#include "trace_builder.h"

#include <criterion/criterion.h>
#include <string.h>
#include <unistd.h>

static char path[64];

static void cleanup(void) {
    if (path[0])
        unlink(path);
}

static reader_t *open_built(tb_t *tb) { return rt_open_built(tb, path); }

static uint64_t count_of(const reader_t *r, uint64_t stack) {
    const uint64_t *ids, *counts;
    size_t n = reader_cpu_stacks(r, &ids, &counts);
    for (size_t i = 0; i < n; i++)
        if (ids[i] == stack)
            return counts[i];
    return 0;
}

// A thread with 3 mallocs, a SYNC at 1000, then the sampler's chunk with samples from before
// the watermark (as a drain a poll interval late writes them), times going back and forth.
static tb_t *trace_with_samples(void) {
    tb_t *tb = tb_new();
    tb_begin(tb, HPT_CHUNK_EVENTS, 7, 100, 0);
    tb_rec_malloc(tb, 100, 1, 0x1000, 8);
    tb_rec_malloc(tb, 200, 1, 0x2000, 8);
    tb_rec_malloc(tb, 1500, 1, 0x3000, 8);
    tb_end(tb, false);
    tb_sync(tb, 1000);
    tb_begin(tb, HPT_CHUNK_EVENTS, 0, 0, 0);
    tb_rec_cpu_info(tb, HPT_CPU_PERF, 997, 0, 0, "");
    tb_rec_stack(tb, 5, 2, (const uint64_t[]){0x401001, 0x402000});
    tb_rec_cpu_sample(tb, 300, 7, 5);
    tb_rec_cpu_sample(tb, 250, 8, 5);
    tb_rec_cpu_sample(tb, 900, 7, 6);
    tb_rec_cpu_sample(tb, 10, 7, 0);
    tb_end(tb, true);
    tb_begin(tb, HPT_CHUNK_EVENTS, 0, 10, 0);
    tb_rec_cpu_sample(tb, 2000, 8, 6);
    tb_rec_cpu_info(tb, HPT_CPU_PERF, 997, 5, 2, "");
    tb_end(tb, false);
    return tb;
}

Test(reader_cpu, samples_are_counted_by_stack_and_never_late, .fini = cleanup) {
    tb_t *tb = trace_with_samples();
    reader_t *r = open_built(tb);
    errmsg_t err;
    errmsg_init(&err);
    reader_event_t ev;
    int rc, n_alloc = 0;
    while ((rc = reader_next(r, &ev, &err)) == 1)
        n_alloc += ev.kind == READER_ALLOC;
    cr_assert_eq(rc, 0);
    cr_expect_eq(n_alloc, 3, "samples must not become events");
    cr_expect_eq(reader_damage(r)->late_events, 0);
    cr_expect_eq(reader_damage(r)->chunks_damaged, 0);
    const reader_cpu_t *c = reader_cpu(r);
    cr_expect(c->has_info);
    cr_expect_eq(c->source, HPT_CPU_PERF);
    cr_expect_eq(c->hz, 997);
    cr_expect_eq(c->n_samples, 5);
    cr_expect_eq(c->n_lost, 2, "the last CPU_INFO wins");
    cr_expect_str_eq(c->reason, "");
    cr_expect_eq(count_of(r, 5), 2);
    cr_expect_eq(count_of(r, 6), 2);
    cr_expect_eq(count_of(r, 0), 1);
    uint32_t nf;
    cr_expect_not_null(reader_stack(r, 5, &nf));
    cr_expect_eq(nf, 2);
    reader_close(r);
    tb_free(tb);
}

Test(reader_cpu, load_defs_counts_the_samples_too, .fini = cleanup) {
    tb_t *tb = trace_with_samples();
    reader_t *r = open_built(tb);
    errmsg_t err;
    errmsg_init(&err);
    cr_assert_eq(reader_load_defs(r, &err), 0);
    cr_expect_eq(reader_cpu(r)->n_samples, 5);
    cr_expect_eq(count_of(r, 5), 2);
    reader_close(r);
    tb_free(tb);
}

Test(reader_cpu, a_damaged_chunk_drops_its_samples_and_the_reason_is_kept, .fini = cleanup) {
    tb_t *tb = tb_new();
    tb_begin(tb, HPT_CHUNK_EVENTS, 0, 0, 0);
    tb_rec_cpu_info(tb, HPT_CPU_OFF, 997, 0, 0, "HEAPPROF_CPU=0");
    tb_end(tb, false);
    tb_begin(tb, HPT_CHUNK_EVENTS, 0, 0, 0);
    tb_rec_cpu_sample(tb, 5, 1, 3);
    tb_rec_cpu_sample(tb, 6, 1, 3);
    tb_set_n_records(tb, 3); // says 3, holds 2: the chunk does not decode
    tb_end(tb, false);
    tb_begin(tb, HPT_CHUNK_EVENTS, 0, 0, 0);
    tb_rec_cpu_sample(tb, 7, 1, 4);
    tb_end(tb, false);
    reader_t *r = open_built(tb);
    errmsg_t err;
    errmsg_init(&err);
    cr_assert_eq(reader_load_defs(r, &err), 0);
    cr_expect_eq(reader_damage(r)->chunks_damaged, 1);
    const reader_cpu_t *c = reader_cpu(r);
    cr_expect_eq(c->n_samples, 1);
    cr_expect_eq(count_of(r, 3), 0);
    cr_expect_eq(count_of(r, 4), 1);
    cr_expect_eq(c->source, HPT_CPU_OFF);
    cr_expect_str_eq(c->reason, "HEAPPROF_CPU=0");
    reader_close(r);
    tb_free(tb);
}

Test(reader_cpu, a_trace_without_cpu_records_says_so, .fini = cleanup) {
    tb_t *tb = tb_new();
    tb_begin(tb, HPT_CHUNK_EVENTS, 1, 0, 0);
    tb_rec_malloc(tb, 1, 1, 0x10, 8);
    tb_end(tb, false);
    reader_t *r = open_built(tb);
    errmsg_t err;
    errmsg_init(&err);
    cr_assert_eq(reader_load_defs(r, &err), 0);
    cr_expect(!reader_cpu(r)->has_info);
    cr_expect_eq(reader_cpu(r)->n_samples, 0);
    cr_expect_str_eq(reader_cpu(r)->reason, "");
    reader_close(r);
    tb_free(tb);
}
