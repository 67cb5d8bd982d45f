// SPDX-License-Identifier: MIT
// Module map from dl_iterate_phdr. Cold paths only; the shim's own memory only; never holds its
// lock while waiting for one (try-lock), because the loader may call malloc with its lock held.
#include "modmap.h"

#include "mem.h"

#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#define MAX_MODULES 4096
#define BUILD_ID_MAX 64

typedef struct module {
    uint64_t bias, size;
    const char *path;
    bool seen;
} module_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static module_t *mods; // MAX_MODULES entries, mapped on first use
static size_t n_mods;
static hp_arena_t arena;
static unsigned long long last_adds = ~0ull, last_subs = ~0ull;
static char exe_path[4096];

typedef struct scan {
    hpt_dstate_t *st;
    uint64_t t;
    hp_modmap_emit_fn emit;
    void *ctx;
} scan_t;

static uint8_t *put_bytes(uint8_t *p, const void *s, size_t n) {
    p = hpt_put_varint(p, n);
    memcpy(p, s, n);
    return p + n;
}

static size_t build_id(const struct dl_phdr_info *info, const uint8_t **out) {
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE)
            continue;
        const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
        const uint8_t *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(const void *)p;
            size_t name_sz = (nh->n_namesz + 3) & ~3u, desc_sz = (nh->n_descsz + 3) & ~3u;
            const uint8_t *name = p + sizeof *nh, *desc = name + name_sz;
            if (desc + desc_sz > end)
                break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(name, "GNU", 4) &&
                nh->n_descsz <= BUILD_ID_MAX) {
                *out = desc;
                return nh->n_descsz;
            }
            p = desc + desc_sz;
        }
    }
    return 0;
}

static void emit_unload(scan_t *s, const module_t *m) {
    uint8_t buf[32], *p = buf;
    *p++ = HPT_REC_MODULE_UNLOAD;
    p = hpt_put_varint(p, s->t - s->st->time_ns);
    s->st->time_ns = s->t;
    p = hpt_put_varint(p, m->bias);
    s->emit(s->ctx, buf, (size_t)(p - buf));
}

static int visit(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    scan_t *s = data;
    const char *path = info->dlpi_name;
    if (!path || !*path)
        path = exe_path;
    uint64_t hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_LOAD &&
            info->dlpi_phdr[i].p_vaddr + info->dlpi_phdr[i].p_memsz > hi)
            hi = info->dlpi_phdr[i].p_vaddr + info->dlpi_phdr[i].p_memsz;
    for (size_t i = 0; i < n_mods; i++)
        if (mods[i].bias == info->dlpi_addr && !strcmp(mods[i].path, path)) {
            mods[i].seen = true;
            return 0;
        }
    if (n_mods == MAX_MODULES)
        return 0;
    size_t plen = strnlen(path, 4000);
    char *copy = hp_arena_alloc(&arena, plen + 1);
    if (!copy)
        return 0;
    memcpy(copy, path, plen);
    copy[plen] = 0;
    mods[n_mods++] = (module_t){info->dlpi_addr, hi, copy, true};

    const uint8_t *bid = NULL;
    size_t bid_len = build_id(info, &bid);
    uint8_t buf[4200], *p = buf;
    *p++ = HPT_REC_MODULE_LOAD;
    p = hpt_put_varint(p, s->t - s->st->time_ns);
    s->st->time_ns = s->t;
    p = hpt_put_varint(p, info->dlpi_addr);
    p = hpt_put_varint(p, hi);
    p = put_bytes(p, copy, plen);
    p = put_bytes(p, bid, bid_len);
    s->emit(s->ctx, buf, (size_t)(p - buf));
    return 0;
}

static int read_counters(struct dl_phdr_info *info, size_t size, void *data) {
    unsigned long long *c = data;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
        c[0] = info->dlpi_adds;
        c[1] = info->dlpi_subs;
    }
    return 1;
}

void hp_modmap_scan(hpt_dstate_t *st, uint64_t t, hp_modmap_emit_fn emit, void *ctx) {
    unsigned long long c[2] = {0, 0};
    dl_iterate_phdr(read_counters, c);
    if (__atomic_load_n(&last_adds, __ATOMIC_RELAXED) == c[0] &&
        __atomic_load_n(&last_subs, __ATOMIC_RELAXED) == c[1])
        return;
    if (pthread_mutex_trylock(&lock))
        return; // another thread is scanning; its records cover this change
    if (!mods)
        mods = hp_mem_map(MAX_MODULES * sizeof *mods);
    if (mods) {
        if (!exe_path[0]) {
            ssize_t n = readlink("/proc/self/exe", exe_path, sizeof exe_path - 1);
            exe_path[n > 0 ? n : 0] = 0;
        }
        scan_t s = {st, t, emit, ctx};
        for (size_t i = 0; i < n_mods; i++)
            mods[i].seen = false;
        dl_iterate_phdr(visit, &s);
        for (size_t i = 0; i < n_mods;) {
            if (!mods[i].seen) {
                emit_unload(&s, &mods[i]);
                mods[i] = mods[--n_mods];
            } else {
                i++;
            }
        }
        __atomic_store_n(&last_adds, c[0], __ATOMIC_RELAXED);
        __atomic_store_n(&last_subs, c[1], __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&lock);
}

void hp_modmap_reset(void) {
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    lock = fresh;
    n_mods = 0;
    last_adds = last_subs = ~0ull;
}
