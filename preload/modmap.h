// SPDX-License-Identifier: MIT
// The module map: which file is loaded where (load bias, size, path, build id), from
// dl_iterate_phdr at start and whenever the loader's add/remove counters change.
#ifndef HEAPPROF_PRELOAD_MODMAP_H
#define HEAPPROF_PRELOAD_MODMAP_H

#include "format/hpt_codec.h"

#include <stddef.h>
#include <stdint.h>

typedef void (*hp_modmap_emit_fn)(void *ctx, const uint8_t *rec, size_t len);

// Emits MODULE_LOAD / MODULE_UNLOAD records for every change since the last scan, encoded with
// delta state st at time t. Calls the loader (dl_iterate_phdr), so the caller must hold no lock
// of the shim's; skips the scan if another thread is scanning. Cold.
void hp_modmap_scan(hpt_dstate_t *st, uint64_t t, hp_modmap_emit_fn emit, void *ctx);

// Forgets every known module (fork child: the new trace must list them all again).
void hp_modmap_reset(void);

#endif
