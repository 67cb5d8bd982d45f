// SPDX-License-Identifier: MIT
// perfmap_t: the names a JIT gives its code in a perf map, the text file perf reads for code
// that lies in no module ("START SIZE NAME" a line, hex numbers; node --perf-basic-prof and
// the JVM's perf-map-agent write /tmp/perf-PID.map). A JIT reuses addresses as it frees and
// recompiles code, and the file has no times: where entries overlap, the one written last
// names the address.
#ifndef HEAPPROF_ANALYZER_PERFMAP_H
#define HEAPPROF_ANALYZER_PERFMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct perfmap perfmap_t;

// Reads the map at path; NULL when it cannot be opened or holds no entry. Lines that are not
// "START SIZE NAME" are skipped. May allocate; exits on OOM like xmalloc.
perfmap_t *perfmap_load(const char *path);
void perfmap_free(perfmap_t *m);

// The name of the latest entry whose [START, START + SIZE) holds addr; NULL when none does.
// Owned by m.
const char *perfmap_find(const perfmap_t *m, uint64_t addr);

size_t perfmap_entries(const perfmap_t *m);
const char *perfmap_path(const perfmap_t *m);

// Where the perf map of a traced process is, or NULL: HEAPPROF_PERF_MAP when set (empty: none),
// else the copy beside the trace (TRACE.perf.map, left by `heapprof run`), else the process's
// own (perfmap_of_process). Returns a malloc'd path.
char *perfmap_path_for(const char *trace, uint32_t pid, uint64_t trace_start_unix_ns,
                       bool attached);

// /tmp/perf-PID.map where it is a regular file owned by this user (or root, as perf asks) and
// was last written at or after since_unix_ns (not a map some earlier process of that pid left;
// 0: whenever); NULL otherwise. Returns a malloc'd path.
char *perfmap_of_process(uint32_t pid, uint64_t since_unix_ns);

// Copies the process's perf map (perfmap_of_process) to TRACE.perf.map, where the analyzer
// looks first: the trace and its JIT names travel together (without a map, a TRACE.perf.map
// an earlier trace of that name left is removed). 1 copied, 0 no map, -1 failed.
int perfmap_keep_beside(const char *trace, uint32_t pid, uint64_t since_unix_ns);
// Removes TRACE.perf.map (with the trace it belongs to: `heapprof check` drops its traces).
void perfmap_remove_beside(const char *trace);

#endif
