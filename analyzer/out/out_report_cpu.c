// SPDX-License-Identifier: MIT
// The report's CPU section, text and JSON (docs/report-json.md#cpu): how the samples were taken,
// the top functions by self and total samples, and the allocator's CPU share charged to the
// user functions that called it. Figures come from cpu.h; only formatting lives here.
#include "out/out.h"

#include "model/cpu.h"

#include <inttypes.h>
#include <string.h>

static void print_fn_rows(FILE *f, const cpu_fn_t *v, size_t n, size_t top, uint64_t total,
                          bool with_total) {
    char s1[32], s2[32], p1[16], p2[16], name[1024], loc[1024];
    if (n == 0)
        fprintf(f, "  (none)\n");
    for (size_t i = 0; i < n && i < top; i++) {
        if (with_total)
            fprintf(f, "  %8s %6s  %8s %6s  %s", fmt_grouped(v[i].self, s1),
                    fmt_percent(v[i].self, total, p1), fmt_grouped(v[i].total, s2),
                    fmt_percent(v[i].total, total, p2),
                    fmt_safe_text(v[i].name, name, sizeof name));
        else
            fprintf(f, "  %8s %6s  %s", fmt_grouped(v[i].self, s1),
                    fmt_percent(v[i].self, total, p1), fmt_safe_text(v[i].name, name, sizeof name));
        if (v[i].location[0] && strcmp(v[i].location, v[i].name) != 0)
            fprintf(f, "  %s", fmt_safe_text(v[i].location, loc, sizeof loc));
        fputc('\n', f);
    }
}

void out_report_cpu_text(analyze_t *a, size_t top, FILE *f) {
    const reader_cpu_t *ci = reader_cpu(a->r);
    char line[512], safe[2048], b1[32], p1[16];
    uint64_t total = cpu_total(a->cpu);
    fprintf(f, "\nCPU samples: %s\n",
            fmt_safe_text(cpu_describe(ci, line, sizeof line), safe, sizeof safe));
    if (total == 0)
        return;
    uint64_t in_alloc = cpu_allocator_samples(a->cpu), in_shim = cpu_shim_samples(a->cpu);
    char b2[32], p2[16];
    fprintf(f, "  allocator CPU share: %s of %s samples (%s) inside the allocator (malloc and "
               "free, operator new/delete, Rust's alloc layer, heapprof's own shim)\n",
            fmt_grouped(in_alloc, b1), fmt_grouped(total, line), fmt_percent(in_alloc, total, p1));
    if (in_shim)
        fprintf(f, "  of which heapprof's shim: %s sample%s (%s), recording the calls: the "
                   "profiler's own cost, absent from an unprofiled run%s\n",
                fmt_grouped(in_shim, b2), in_shim == 1 ? "" : "s", fmt_percent(in_shim, total, p2),
                cpu_ranks_shim(a->cpu) ? "" : "; left out of the rankings below (--shim-cpu keeps them)");
    size_t n = 0;
    const cpu_fn_t *fns = cpu_functions(a->cpu, &n);
    fprintf(f, "\nTop functions by CPU samples (self: innermost frame; total: anywhere on the "
               "stack)\n");
    fprintf(f, "  %8s %6s  %8s %6s  %s\n", "self", "", "total", "", "function  location");
    print_fn_rows(f, fns, n, top, total, true);
    const cpu_fn_t *callers = cpu_allocator_callers(a->cpu, &n);
    fprintf(f, "\nAllocator CPU by calling function (the first user frame above the allocator)\n");
    print_fn_rows(f, callers, n, top, total, false);
}

static json_t *fn_json(const cpu_fn_t *v, bool with_total) {
    json_t *j = json_object();
    json_object_set_new(j, "function", fmt_json_str(v->name));
    json_object_set_new(j, "location", fmt_json_str(v->location));
    json_object_set_new(j, with_total ? "self" : "samples", fmt_json_int(v->self));
    if (with_total)
        json_object_set_new(j, "total", fmt_json_int(v->total));
    return j;
}

json_t *out_report_cpu_json(analyze_t *a, size_t top) {
    json_t *j = cpu_info_json(reader_cpu(a->r));
    uint64_t total = cpu_total(a->cpu);
    json_object_set_new(j, "samples", fmt_json_int(total));
    json_object_set_new(j, "allocator_samples", fmt_json_int(cpu_allocator_samples(a->cpu)));
    json_object_set_new(j, "shim_samples", fmt_json_int(cpu_shim_samples(a->cpu)));
    // whether the rankings below include the shim's samples (report --shim-cpu)
    json_object_set_new(j, "shim_ranked", json_boolean(cpu_ranks_shim(a->cpu)));
    size_t n = 0;
    const cpu_fn_t *fns = cpu_functions(a->cpu, &n);
    json_t *arr = json_array();
    for (size_t i = 0; i < n && i < top; i++)
        json_array_append_new(arr, fn_json(&fns[i], true));
    json_object_set_new(j, "functions", arr);
    const cpu_fn_t *callers = cpu_allocator_callers(a->cpu, &n);
    arr = json_array();
    for (size_t i = 0; i < n && i < top; i++)
        json_array_append_new(arr, fn_json(&callers[i], false));
    json_object_set_new(j, "allocator_callers", arr);
    return j;
}
