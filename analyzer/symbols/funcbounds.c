// SPDX-License-Identifier: MIT
// .eh_frame walked with libdw's dwarf_next_cfi; the FDE's initial location and address range are
// decoded here, with the pointer encoding that its CIE's augmentation ("zR", "zPLR") names: the
// DW_EH_PE_* values of the LSB's exception frame chapter. Only absolute and PC-relative pointers
// occur in the .eh_frame of x86-64 programs and libraries; others leave the entry out.
#include "symbols/funcbounds.h"

#include "core/hmap.h"
#include "core/sort.h"
#include "core/xalloc.h"

#include <elfutils/libdw.h>
#include <stdlib.h>
#include <string.h>

struct funcbounds_range {
    uint64_t lo, hi;
};

#define PE_OMIT 0xff

static bool read_uleb(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    *v = 0;
    for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return true;
    }
    return false;
}

// One pointer of encoding enc at *p (whose ELF address is at), advancing *p. PC-relative
// values add at; with_base false reads the bare value (an FDE's address range).
static bool read_encoded(const uint8_t **p, const uint8_t *end, uint8_t enc, uint64_t at,
                         bool with_base, uint64_t *v) {
    if (enc == PE_OMIT)
        return false;
    uint64_t x = 0;
    size_t size;
    switch (enc & 0x0f) {
    case 0x00: // absptr
    case 0x04: // udata8
    case 0x0c: // sdata8
        size = 8;
        break;
    case 0x03: // udata4
    case 0x0b: // sdata4
        size = 4;
        break;
    case 0x02: // udata2
    case 0x0a: // sdata2
        size = 2;
        break;
    case 0x01: // uleb128
        if (!read_uleb(p, end, &x))
            return false;
        size = 0;
        break;
    default:
        return false;
    }
    if (size) {
        if ((size_t)(end - *p) < size)
            return false;
        uint8_t b[8] = {0};
        memcpy(b, *p, size); // little-endian: x86-64 only (forwarder.h)
        for (size_t i = 0; i < size; i++)
            x |= (uint64_t)b[i] << (8 * i);
        bool is_signed = (enc & 0x08) != 0;
        if (is_signed && size < 8 && (x >> (8 * size - 1)) & 1)
            x |= ~0ull << (8 * size);
        *p += size;
    }
    if (with_base) {
        switch (enc & 0x70) {
        case 0x00:
            break;
        case 0x10: // pcrel
            x += at;
            break;
        default: // textrel, datarel, funcrel, aligned: not in x86-64 .eh_frame
            return false;
        }
    }
    *v = x;
    return true;
}

// The FDE pointer encoding that a CIE's augmentation names (absptr without 'z'); PE_OMIT for
// augmentations it cannot parse.
static uint8_t fde_encoding(const Dwarf_CIE *cie) {
    const char *aug = cie->augmentation;
    if (!aug || aug[0] != 'z')
        return 0;
    const uint8_t *p = cie->augmentation_data, *end = p + cie->augmentation_data_size;
    if (!p)
        return PE_OMIT;
    for (const char *c = aug + 1; *c; c++) {
        if (*c == 'R') {
            if (p >= end)
                return PE_OMIT;
            return *p;
        } else if (*c == 'L') {
            p++;
        } else if (*c == 'P') {
            if (p >= end)
                return PE_OMIT;
            uint8_t enc = *p++;
            uint64_t ignored;
            if (!read_encoded(&p, end, enc & 0x0f, 0, false, &ignored))
                return PE_OMIT;
        } else if (*c != 'S' && *c != 'B') {
            return PE_OMIT;
        }
    }
    return 0;
}

static int cmp_range(const void *a, const void *b) {
    const struct funcbounds_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

void funcbounds_init(funcbounds_t *fb, Elf *elf) {
    memset(fb, 0, sizeof *fb);
    size_t shstrndx;
    const unsigned char *ident = elf ? (const unsigned char *)elf_getident(elf, NULL) : NULL;
    if (!ident || elf_getshdrstrndx(elf, &shstrndx) != 0)
        return;
    Elf_Scn *scn = NULL;
    GElf_Shdr sh;
    while ((scn = elf_nextscn(elf, scn))) {
        const char *name = gelf_getshdr(scn, &sh) ? elf_strptr(elf, shstrndx, sh.sh_name) : NULL;
        // lld gives .eh_frame the x86-64 ABI's own type (LLVM's libraries, Chrome, Rust
        // programs linked with lld); GNU ld and gold PROGBITS
        if (name && strcmp(name, ".eh_frame") == 0 &&
            (sh.sh_type == SHT_PROGBITS || sh.sh_type == SHT_X86_64_UNWIND))
            break;
    }
    Elf_Data *data = scn ? elf_getdata(scn, NULL) : NULL;
    if (!data || !data->d_buf)
        return;
    const uint8_t *base = data->d_buf, *end = base + data->d_size;
    hmap_t cies; // CIE offset -> 1 + its FDE encoding
    hmap_init(&cies, 2);
    size_t cap = 0;
    Dwarf_Off off = 0, next;
    Dwarf_CFI_Entry e;
    for (int r; off != (Dwarf_Off)-1; off = next) {
        if ((r = dwarf_next_cfi(ident, data, true, off, &next, &e)) != 0) {
            if (r > 0 || next == off || next == (Dwarf_Off)-1)
                break;
            continue; // a damaged entry that can be skipped
        }
        if (dwarf_cfi_cie_p(&e))
            continue;
        const uint16_t *known = hmap_get(&cies, e.fde.CIE_pointer);
        uint16_t enc1 = known ? *known : 0;
        if (!known) {
            Dwarf_CFI_Entry c;
            Dwarf_Off ignored;
            enc1 = dwarf_next_cfi(ident, data, true, e.fde.CIE_pointer, &ignored, &c) == 0 &&
                           dwarf_cfi_cie_p(&c)
                       ? (uint16_t)(1 + fde_encoding(&c.cie))
                       : 1 + PE_OMIT;
            *(uint16_t *)hmap_put(&cies, e.fde.CIE_pointer, NULL) = enc1;
        }
        uint8_t enc = (uint8_t)(enc1 - 1);
        const uint8_t *p = e.fde.start;
        uint64_t lo, len;
        if (enc == PE_OMIT || p < base || p > end ||
            !read_encoded(&p, end, enc, sh.sh_addr + (uint64_t)(p - base), true, &lo) ||
            !read_encoded(&p, end, enc, 0, false, &len) || len == 0)
            continue;
        fb->r = xgrow(fb->r, &cap, fb->n + 1, sizeof *fb->r);
        fb->r[fb->n++] = (struct funcbounds_range){lo, lo + len};
    }
    hmap_fini(&cies);
    if (fb->n)
        sort_items(fb->r, fb->n, sizeof *fb->r, cmp_range);
}

void funcbounds_fini(funcbounds_t *fb) {
    free(fb->r);
    memset(fb, 0, sizeof *fb);
}

bool funcbounds_find(const funcbounds_t *fb, uint64_t addr, uint64_t *lo, uint64_t *hi) {
    size_t a = 0, b = fb->n;
    while (a < b) { // the first entry starting after addr
        size_t mid = a + (b - a) / 2;
        if (fb->r[mid].lo <= addr)
            a = mid + 1;
        else
            b = mid;
    }
    if (a == 0 || addr >= fb->r[a - 1].hi)
        return false;
    *lo = fb->r[a - 1].lo;
    *hi = fb->r[a - 1].hi;
    return true;
}
