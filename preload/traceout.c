// SPDX-License-Identifier: MIT
// The open trace file: descriptor, reopen by path, chunk writes in seq order. Runs on the
// pipeline's drainers, the flusher and app threads with a full ring: no stdio, no host
// allocation; the one lock is held only across a write(2).
#include "traceout.h"

#include "chunk.h"
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_mutex_t io_lock = PTHREAD_MUTEX_INITIALIZER;
static int trace_fd = -1;
static char trace_path[4096]; // absolute, to reopen the file if the program closes our fd
static dev_t trace_dev;
static ino_t trace_ino;
static uint64_t seq;
static _Atomic uint64_t n_written, raw_since;

static bool fd_is_ours(int fd) {
    struct stat st;
    return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == trace_dev && st.st_ino == trace_ino;
}

// Programs close "all" descriptors (daemons) or dup2 over them. Before each write, check that
// trace_fd is still our file; if not, reopen it by path and leave the number to its new owner
// (never close or write to a descriptor the program now uses). Caller holds io_lock.
static bool ensure_fd(void) {
    if (trace_fd < 0)
        return false;
    if (fd_is_ours(trace_fd))
        return true;
    int fd = open(trace_path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0 && fd_is_ours(fd)) {
        int high = fcntl(fd, F_DUPFD_CLOEXEC, 500);
        if (high >= 0) {
            close(fd);
            fd = high;
        }
        trace_fd = fd;
        return true;
    }
    if (fd >= 0)
        close(fd);
    trace_fd = -1;
    hp_state_disable("the trace file was closed and cannot be reopened; profiling stopped");
    return false;
}

// Caller holds io_lock.
static bool write_all(const void *buf, size_t n) {
    const char *p = buf;
    while (n) {
        ssize_t w = write(trace_fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            hp_state_disable(w < 0 && errno == ENOSPC
                                 ? "disk full: the trace is incomplete; profiling stopped"
                                 : "cannot write the trace: it is incomplete; profiling stopped");
            trace_fd = -1;
            return false;
        }
        p += w;
        n -= (size_t)w;
    }
    return true;
}

bool hp_traceout_open(int fd, const char *path, const hpt_file_hdr_t *hdr) {
    struct stat st;
    pthread_mutex_lock(&io_lock);
    trace_fd = fd;
    trace_path[0] = 0;
    if (path[0] != '/' && getcwd(trace_path, sizeof trace_path - 2))
        strcat(trace_path, "/");
    bool ok = strlen(trace_path) + strlen(path) < sizeof trace_path && fstat(fd, &st) == 0;
    if (ok) {
        strcat(trace_path, path);
        trace_dev = st.st_dev;
        trace_ino = st.st_ino;
        seq = 0;
        atomic_store(&n_written, 0);
        atomic_store(&raw_since, 0);
        ok = write_all(hdr, sizeof *hdr);
    }
    if (!ok && trace_fd >= 0) {
        close(trace_fd);
        trace_fd = -1;
    }
    pthread_mutex_unlock(&io_lock);
    return ok;
}

bool hp_traceout_write(uint8_t *chunk, size_t n, uint32_t payload_crc) {
    pthread_mutex_lock(&io_lock);
    bool ok = ensure_fd();
    if (ok) {
        hp_chunk_seal(chunk, seq, payload_crc);
        ok = write_all(chunk, n);
        seq += ok;
    }
    pthread_mutex_unlock(&io_lock);
    if (ok)
        atomic_fetch_add_explicit(&n_written, 1, memory_order_relaxed);
    return ok;
}

bool hp_traceout_chunk(uint16_t type, uint16_t flags, uint32_t tid, const uint8_t *raw,
                       size_t len, uint32_t nrec, hpt_dstate_t base, uint8_t *out, size_t out_cap,
                       ZSTD_CCtx *cctx) {
    hpt_chunk_hdr_t h = {0};
    h.type = type;
    h.flags = flags;
    h.tid = tid;
    h.n_records = nrec;
    h.base_time_ns = base.time_ns;
    h.base_addr = base.addr;
    uint32_t pcrc;
    size_t n = hp_chunk_pack(out, out_cap, &h, raw, len, cctx, &pcrc);
    return n && hp_traceout_write(out, n, pcrc);
}

uint64_t hp_traceout_take_count(void) {
    return atomic_exchange_explicit(&n_written, 0, memory_order_relaxed);
}

uint64_t hp_traceout_take_bytes(void) {
    return atomic_exchange_explicit(&raw_since, 0, memory_order_relaxed);
}

void hp_traceout_add_bytes(uint64_t raw_bytes) {
    atomic_fetch_add_explicit(&raw_since, raw_bytes, memory_order_relaxed);
}

void hp_traceout_close(void) {
    pthread_mutex_lock(&io_lock);
    if (fd_is_ours(trace_fd))
        close(trace_fd);
    trace_fd = -1;
    pthread_mutex_unlock(&io_lock);
}

void hp_traceout_fork_prepare(void) {
    pthread_mutex_lock(&io_lock);
}

void hp_traceout_fork_parent(void) {
    pthread_mutex_unlock(&io_lock);
}

void hp_traceout_fork_child(void) {
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    io_lock = fresh;
    if (fd_is_ours(trace_fd))
        close(trace_fd); // the parent's file; the child opens its own on its first event
    trace_fd = -1;
}
