// SPDX-License-Identifier: MIT
// The executable's own allocator entries, hooked before the program's libraries run their
// constructors (early_hook.c). Only in the preloaded module, on x86-64: the loader arms the
// entries while relocating the module.
#ifndef HEAPPROF_PRELOAD_EARLY_HOOK_H
#define HEAPPROF_PRELOAD_EARLY_HOOK_H

// Puts every armed entry back, if that was not done yet: set-up does it first, before it
// patches them the ordinary way, where no entry was called before it (lifecycle.c).
void hp_early_hook_disarm(void);

// What the stub of entry k asks, from the executable's first call of one of its entries: puts
// every entry back, starts set-up where it can start, and returns entry k's address to go on to.
void *hp_early_hit(unsigned k);

#endif
