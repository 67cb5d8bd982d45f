// SPDX-License-Identifier: MIT
// The trace's lifecycle: file creation, start (header, META, the flusher thread), flushes on
// demand (exec), the final flush and TRAILER at exit, fork. The flusher writes the merge
// watermarks (SYNC); the records themselves go out through the pipeline (pipeline.h).
#ifndef HEAPPROF_PRELOAD_WRITER_H
#define HEAPPROF_PRELOAD_WRITER_H

#include "format/hpt_format.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// Creates the trace file from a HEAPPROF_OUT template (%p -> pid) with O_EXCL|O_NOFOLLOW, mode
// 0600; if the name is a file or symlink, tries NAME.1.hpt, NAME.2.hpt, ... and says so on
// stderr (unless HEAPPROF_QUIET). A character device at the name (/dev/null) is opened as is;
// anything else there (FIFO, directory, terminal) is refused. Writes the chosen path into path.
// Returns the fd, or -1 after saying why on stderr.
int hp_writer_create_file(const char *tmpl, char *path, size_t path_cap);

// Writes the file header and the META chunk synchronously, then starts the flusher thread.
// Takes ownership of fd, created at path (kept to reopen the file if the program closes the fd).
// Returns false (fd closed) if any step fails.
bool hp_writer_start(int fd, const char *path, const hpt_file_hdr_t *hdr, const uint8_t *meta,
                     size_t meta_len, uint32_t meta_records);

bool hp_writer_running(void);

// Asks the writer to write everything recorded so far (then a TRAILER if with_trailer: the image
// is about to be replaced) and waits for it (at most ~2 s).
void hp_writer_flush_sync(bool with_trailer);

// Final flush, TRAILER, close. Waits for the writer thread to finish. Call once recording is off.
void hp_writer_stop(void);

// fork: the child must not touch the parent's file or thread.
void hp_writer_fork_prepare(void);
void hp_writer_fork_parent(void);
void hp_writer_fork_child(void);

#endif
