// SPDX-License-Identifier: MIT
// The totals of a trace as `heapprof stats` prints them: text for humans, one JSON object for
// scripts (also the "totals" of `report --json`).
#include "out/out.h"

#include "model/cpu.h"

#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <string.h>

// ---- text ----

static const char *allocator_status(uint8_t status) {
    switch (status) {
    case HPT_ALLOC_PATCHED:
        return "hooked";
    case HPT_ALLOC_INTERPOSED:
        return "interposed";
    default:
        return "NOT HOOKED";
    }
}

void out_touch_unmeasured(FILE *out, uint64_t frees, uint64_t measured) {
    char a[32];
    if (frees > measured)
        fprintf(out, "; %s freed blocks not measured (heapprof fills only the blocks of the "
                     "malloc it is preloaded over)",
                fmt_grouped(frees - measured, a));
}

void out_allocators_text(FILE *out, const reader_t *r) {
    size_t n;
    const reader_allocator_t *al = reader_allocators(r, &n);
    char s1[512], s2[4096];
    for (size_t i = 0; i < n; i++)
        fprintf(out, "allocator  %s %s: %s%s\n", allocator_status(al[i].status),
                fmt_safe_text(al[i].family, s1, sizeof s1),
                fmt_safe_text(al[i].detail, s2, sizeof s2),
                al[i].status == HPT_ALLOC_UNHOOKED
                    ? "; its allocations are missing from this trace"
                    : "");
}

void out_stats_unknown_frees(FILE *out, const reader_t *r, const replay_totals_t *t,
                             const char *at_end) {
    const hpt_file_hdr_t *h = reader_header(r);
    bool attached = h->flags & HPT_FILE_ATTACHED, forked = h->flags & HPT_FILE_FORKED;
    char a[32], b[32];
    if (attached)
        fprintf(out, "attached   the trace started mid-run (heapprof attach): %s frees of blocks "
                     "allocated before it are counted apart; \"%s\" is at detach\n",
                fmt_grouped(t->n_unknown_frees, a), at_end);
    else if (forked)
        fprintf(out, "forked     the trace of a fork child of pid %" PRIu32 ": %s frees of blocks "
                     "the parent allocated before the fork are counted apart\n",
                h->ppid, fmt_grouped(t->n_unknown_frees, a));
    if (t->n_double_allocs || (t->n_unknown_frees && !attached && !forked))
        fprintf(out, "anomalies  %s frees of unknown addresses, %s allocations at live addresses\n",
                fmt_grouped(t->n_unknown_frees, a), fmt_grouped(t->n_double_allocs, b));
}

void out_stats_sampled_line(FILE *out, const reader_t *r) {
    const hpt_file_hdr_t *h = reader_header(r);
    if (!(h->flags & HPT_FILE_SAMPLED))
        return;
    char n[32];
    fprintf(out,
            "sampled    ESTIMATES: one allocation in every %s on average was recorded "
            "(HEAPPROF_SAMPLE_BYTES=%" PRIu32 "); blocks, bytes, frees, peak and at-end figures "
            "are weighted estimates, the rest count the sampled blocks (docs/sampling.md)\n",
            fmt_bytes(h->sample_bytes, n), h->sample_bytes);
}

// 1234567 -> "1,234,567"
void out_stats_text(FILE *out, const char *trace, const reader_t *r, const replay_totals_t *t,
                    const char *from_module, const filter_t *f) {
    char a[32], b[32], c[32], s1[4096], s2[4096];
    const hpt_file_hdr_t *h = reader_header(r);
    const char *exe = reader_exe(r);
    // the executable (and the CPU sampler's reason below) come from the trace: fmt_safe_text
    fprintf(out, "trace      %s (pid %u%s%s)\n", fmt_safe_text(trace, s1, sizeof s1), h->pid,
            exe ? ", " : "", exe ? fmt_safe_text(exe, s2, sizeof s2) : "");
    out_stats_sampled_line(out, r);
    if (f)
        fprintf(out, "filter     allocations from %s (%zu module%s matched)\n",
                fmt_safe_text(from_module, s1, sizeof s1),
                filter_n_matching_modules(f), filter_n_matching_modules(f) == 1 ? "" : "s");
    fprintf(out, "allocated  %s blocks, %s (%s bytes)\n", fmt_grouped(t->n_blocks, a),
            fmt_bytes(t->n_bytes, b), fmt_grouped(t->n_bytes, c));
    fprintf(out, "freed      %s blocks\n", fmt_grouped(t->n_frees, a));
    fprintf(out, "peak       %s (%s bytes) in %s blocks at %.3f s\n", fmt_bytes(t->peak_bytes, a),
            fmt_grouped(t->peak_bytes, b), fmt_grouped(t->peak_blocks, c), (double)t->peak_time_ns / 1e9);
    fprintf(out, "at end     %s (%s bytes) in %s blocks\n", fmt_bytes(t->live_bytes, a),
            fmt_grouped(t->live_bytes, b), fmt_grouped(t->live_blocks, c));
    const reader_rss_t *rss = reader_rss(r);
    if (rss->n_samples)
        fprintf(out, "peak RSS   %s (%s bytes) at %.3f s, the process's resident set (heap, code, "
                     "stacks, heapprof's buffers), sampled %s time%s\n",
                fmt_bytes(rss->peak_bytes, a), fmt_grouped(rss->peak_bytes, b),
                (double)rss->peak_time_ns / 1e9, fmt_grouped(rss->n_samples, c),
                rss->n_samples == 1 ? "" : "s");
    fprintf(out, "threads    %" PRIu64 "\n", t->n_threads);
    fprintf(out, "stacks     %s\n", fmt_grouped(reader_n_stacks(r), a));
    fprintf(out, "events     %s\n", fmt_grouped(t->n_events, a));
    fprintf(out, "duration   %.3f s\n", (double)t->last_time_ns / 1e9);
    char cpu_line[512];
    fprintf(out, "cpu        %s\n",
            fmt_safe_text(cpu_describe(reader_cpu(r), cpu_line, sizeof cpu_line), s1, sizeof s1));
    out_allocators_text(out, r);
    if (reader_header(r)->flags & HPT_FILE_TOUCH) {
        char p[16];
        fprintf(out, "touched    %s of the %s in %s freed blocks (%s)",
                fmt_bytes(t->touched_bytes, a), fmt_bytes(t->touch_bytes, b),
                fmt_grouped(t->touch_blocks, c), fmt_percent(t->touched_bytes, t->touch_bytes, p));
        out_touch_unmeasured(out, t->n_frees, t->touch_blocks);
        fputc('\n', out);
    } else {
        fprintf(out, "touched    not measured (HEAPPROF_TOUCH=0)\n");
    }

    const reader_damage_t *d = reader_damage(r);
    const reader_trailer_t *tr = reader_trailer(r);
    if (d->chunks_damaged)
        fprintf(out, "damaged    %s chunk%s skipped (%s bytes)\n", fmt_grouped(d->chunks_damaged, a),
                d->chunks_damaged == 1 ? "" : "s", fmt_grouped(d->bytes_skipped, b));
    if (d->seq_gaps)
        fprintf(out, "missing    %s chunk%s by sequence number (events in them are not counted)\n",
                fmt_grouped(d->seq_gaps, a), d->seq_gaps == 1 ? "" : "s");
    if (d->truncated)
        fprintf(out, "truncated  the trace ends inside a chunk (%s bytes unread)\n",
                fmt_grouped(d->truncated_bytes, a));
    if (!d->trailer)
        fprintf(out, "unfinished no trailer: the process did not exit cleanly (killed, crashed, or "
                     "ended by the exit system call itself, as Go programs do); events of its "
                     "last flush interval (HEAPPROF_FLUSH_MS) may be missing\n");
    if (tr && tr->n_lost_events)
        fprintf(out, "shim lost  %s events it could not record\n", fmt_grouped(tr->n_lost_events, a));
    if (tr && tr->n_waits)
        fprintf(out, "waited     %.1f ms: the program's threads waited %s times for heapprof "
                     "to write their full buffers\n",
                tr->wait_ns / 1e6, fmt_grouped(tr->n_waits, a));
    if (tr && tr->n_stack_overflows)
        fprintf(out, "overflow   %s stacks did not fit the shim's stack table\n",
                fmt_grouped(tr->n_stack_overflows, a));
    if (d->late_events)
        fprintf(out, "late       %s events arrived after their merge watermark\n",
                fmt_grouped(d->late_events, a));
    out_stats_unknown_frees(out, r, t, "at end");
    if (t->n_sized_mismatches)
        fprintf(out,
                "sized      %s of %s sized frees named a size other than their block's (the "
                "first: a %s-byte block freed as %s bytes)\n",
                fmt_grouped(t->n_sized_mismatches, a), fmt_grouped(t->n_sized_frees, b),
                fmt_grouped(t->mismatch_block_size, c), fmt_grouped(t->mismatch_freed_size, s1));
}

// ---- JSON ----


json_t *out_stats_json(const reader_t *r, const replay_totals_t *t, const char *from_module,
                       const filter_t *f) {
    json_t *j = json_object();
    const hpt_file_hdr_t *h = reader_header(r);
    json_object_set_new(j, "pid", fmt_json_int(h->pid));
    // the parent's pid; with "forked", the process the child was forked from
    json_object_set_new(j, "ppid", fmt_json_int(h->ppid));
    json_object_set_new(j, "exe", reader_exe(r) ? json_string(reader_exe(r)) : json_null());
    // a sampled trace: blocks, bytes, frees, peak_* and end_* are estimates (docs/sampling.md)
    json_object_set_new(j, "sample_bytes", h->flags & HPT_FILE_SAMPLED
                                               ? fmt_json_int(h->sample_bytes)
                                               : json_null());
    json_object_set_new(j, "blocks", fmt_json_int(t->n_blocks));
    json_object_set_new(j, "bytes", fmt_json_int(t->n_bytes));
    json_object_set_new(j, "frees", fmt_json_int(t->n_frees));
    json_object_set_new(j, "peak_bytes", fmt_json_int(t->peak_bytes));
    json_object_set_new(j, "peak_blocks", fmt_json_int(t->peak_blocks));
    json_object_set_new(j, "peak_time_ns", fmt_json_int(t->peak_time_ns));
    json_object_set_new(j, "end_bytes", fmt_json_int(t->live_bytes));
    json_object_set_new(j, "end_blocks", fmt_json_int(t->live_blocks));
    json_object_set_new(j, "threads", fmt_json_int(t->n_threads));
    json_object_set_new(j, "events", fmt_json_int(t->n_events));
    json_object_set_new(j, "stacks", fmt_json_int(reader_n_stacks(r)));
    json_object_set_new(j, "duration_ns", fmt_json_int(t->last_time_ns));
    json_object_set_new(j, "cpu", cpu_info_json(reader_cpu(r)));
    // allocators beside libc's malloc; null when the shim did not look (older traces)
    json_t *jal = json_array();
    size_t n_al;
    const reader_allocator_t *al = reader_allocators(r, &n_al);
    for (size_t i = 0; i < n_al; i++) {
        json_t *ja = json_object();
        json_object_set_new(ja, "status", json_string(al[i].status == HPT_ALLOC_PATCHED ? "patched"
                                                      : al[i].status == HPT_ALLOC_INTERPOSED
                                                          ? "interposed"
                                                          : "unhooked"));
        json_object_set_new(ja, "family", fmt_json_str(al[i].family));
        json_object_set_new(ja, "detail", fmt_json_str(al[i].detail));
        json_array_append_new(jal, ja);
    }
    if (!(h->flags & HPT_FILE_ALLOC_SCAN)) {
        json_decref(jal);
        jal = json_null();
    }
    json_object_set_new(j, "allocators", jal);
    // the resident set sampled at each flush; null when the trace has no sample
    const reader_rss_t *rss = reader_rss(r);
    json_object_set_new(j, "peak_rss_bytes",
                        rss->n_samples ? fmt_json_int(rss->peak_bytes) : json_null());
    json_object_set_new(j, "rss_samples", fmt_json_int(rss->n_samples));
    json_t *touch = json_object();
    bool measured = (h->flags & HPT_FILE_TOUCH) != 0;
    json_object_set_new(touch, "measured", json_boolean(measured));
    json_object_set_new(touch, "fill_max", measured ? fmt_json_int(h->touch_fill_max) : json_null());
    json_object_set_new(touch, "blocks", fmt_json_int(t->touch_blocks));
    json_object_set_new(touch, "bytes", fmt_json_int(t->touch_bytes));
    json_object_set_new(touch, "touched_bytes", fmt_json_int(t->touched_bytes));
    json_object_set_new(touch, "resident_blocks", fmt_json_int(t->touch_resident_blocks));
    json_object_set_new(touch, "sampled_blocks", fmt_json_int(t->touch_sampled_blocks));
    json_object_set_new(touch, "pages_blocks", fmt_json_int(t->touch_pages_blocks));
    json_object_set_new(touch, "live_blocks", fmt_json_int(t->touch_live_blocks));
    json_object_set_new(j, "touch", touch);
    if (f) {
        json_t *jf = json_object();
        json_object_set_new(jf, "from_module", json_string(from_module));
        json_object_set_new(jf, "modules_matched", fmt_json_int(filter_n_matching_modules(f)));
        json_object_set_new(j, "filter", jf);
    }

    const reader_damage_t *d = reader_damage(r);
    json_t *jd = json_object();
    json_object_set_new(jd, "chunks_ok", fmt_json_int(d->chunks_ok));
    json_object_set_new(jd, "chunks_damaged", fmt_json_int(d->chunks_damaged));
    json_object_set_new(jd, "bytes_skipped", fmt_json_int(d->bytes_skipped));
    json_object_set_new(jd, "chunks_missing", fmt_json_int(d->seq_gaps));
    json_object_set_new(jd, "truncated", json_boolean(d->truncated));
    json_object_set_new(jd, "truncated_bytes", fmt_json_int(d->truncated_bytes));
    json_object_set_new(jd, "clean_exit", json_boolean(d->trailer));
    json_object_set_new(jd, "late_events", fmt_json_int(d->late_events));
    json_object_set_new(j, "damage", jd);

    json_t *ja = json_object();
    json_object_set_new(ja, "unknown_frees", fmt_json_int(t->n_unknown_frees));
    json_object_set_new(ja, "double_allocs", fmt_json_int(t->n_double_allocs));
    json_object_set_new(ja, "sized_frees", fmt_json_int(t->n_sized_frees));
    json_object_set_new(ja, "sized_free_mismatches", fmt_json_int(t->n_sized_mismatches));
    json_object_set_new(ja, "sized_unknown_frees", fmt_json_int(t->n_sized_unknown_frees));
    json_object_set_new(j, "anomalies", ja);
    json_object_set_new(j, "attached", json_boolean(h->flags & HPT_FILE_ATTACHED));
    json_object_set_new(j, "forked", json_boolean(h->flags & HPT_FILE_FORKED));

    // shim counters come from the trailer; without one they are unknown, not zero
    const reader_trailer_t *tr = reader_trailer(r);
    json_t *js = json_object();
    json_object_set_new(js, "events_recorded", tr ? fmt_json_int(tr->n_events) : json_null());
    json_object_set_new(js, "events_lost", tr ? fmt_json_int(tr->n_lost_events) : json_null());
    json_object_set_new(js, "stacks", tr ? fmt_json_int(tr->n_stacks) : json_null());
    json_object_set_new(js, "stack_overflows", tr ? fmt_json_int(tr->n_stack_overflows) : json_null());
    json_object_set_new(js, "waits", tr ? fmt_json_int(tr->n_waits) : json_null());
    json_object_set_new(js, "wait_ns", tr ? fmt_json_int(tr->wait_ns) : json_null());
    json_object_set_new(js, "pipeline_workers", tr ? fmt_json_int(tr->n_workers) : json_null());
    json_object_set_new(js, "workers_cpu_ns", tr ? fmt_json_int(tr->workers_cpu_ns) : json_null());
    json_object_set_new(js, "flusher_cpu_ns", tr ? fmt_json_int(tr->flusher_cpu_ns) : json_null());
    json_object_set_new(j, "shim", js);

    return j;
}

int out_stats_json_write(FILE *out, const reader_t *r, const replay_totals_t *t,
                         const char *from_module, const filter_t *f, errmsg_t *err) {
    json_t *j = out_stats_json(r, t, from_module, f);
    int rc = json_dumpf(j, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(j);
    if (rc != 0 || fputc('\n', out) == EOF) {
        errmsg_set(err, "stats: cannot write the JSON output");
        return -1;
    }
    return 0;
}

