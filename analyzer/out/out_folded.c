// SPDX-License-Identifier: MIT
// Folded stacks, the text format flamegraph.pl and inferno read: `frame;frame;frame value` per
// line, root first, the value the last space-separated field; a diff has two value columns
// (`stack before after`, as difffolded.pl writes). Frame names were made safe by flame.c.
#include "analyze/flame.h"

#include <inttypes.h>

int out_folded_write(const flame_t *f, FILE *out, errmsg_t *err) {
    for (size_t i = 0; i < f->n; i++) {
        const flame_line_t *l = &f->lines[i];
        if (f->is_diff)
            fprintf(out, "%s %" PRIu64 " %" PRIu64 "\n", l->stack, l->value[0], l->value[1]);
        else
            fprintf(out, "%s %" PRIu64 "\n", l->stack, l->value[0]);
    }
    if (fflush(out) != 0 || ferror(out)) {
        errmsg_set(err, "cannot write the folded output");
        return -1;
    }
    return 0;
}
