// SPDX-License-Identifier: MIT
// GOT/PLT slot rewriting for attached mode (`heapprof attach`): points the
// slots through which loaded modules call the allocator at the shim's entry
// points, and puts every slot back on detach. Never unmaps, never allocates
// from the host's heap (slot table in bss), and writes each slot with one
// aligned 8-byte store, so threads that keep running see the old or the new
// target.
#ifndef HEAPPROF_PRELOAD_GOT_PATCH_H
#define HEAPPROF_PRELOAD_GOT_PATCH_H

#include <stddef.h>

typedef struct hp_got_hook {
    const char *name; // dynamic symbol name, e.g. "malloc"
    void *hook;       // what its slots should call instead
} hp_got_hook_t;

// Rewrites, in every loaded module except the shim's own, the dynamic loader
// and the vDSO, each JUMP_SLOT or GLOB_DAT slot bound to one of the n hooks'
// names, remembering the old value. Slots that already hold the hook are left
// alone, so calling it again after a dlopen patches only what is new. Takes the
// loader's lock (dl_iterate_phdr); the caller holds no lock of the shim's.
// Returns the number of slots rewritten by this call. Cold.
size_t hp_got_patch(const hp_got_hook_t *hooks, size_t n, const void *own_base);

// Puts back every remembered slot of a module that is still loaded (the same base and program
// headers) and still holds its hook, except those holding `last` (NULL: none excepted), which
// stay remembered for a later call; with last NULL it forgets all of them. Returns how many were
// put back. So a caller can put back its allocation slots before its free slots. Cold.
size_t hp_got_restore(const void *last);

// Slots remembered now, and slots that could not be remembered (table full:
// left unpatched).
size_t hp_got_n_patched(void);
size_t hp_got_n_skipped(void);

#endif
