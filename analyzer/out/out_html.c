// SPDX-License-Identifier: MIT
// The viewer page: viewer.html with viewer.css, viewer.js and the data (view_data.c) put in
// place of its three placeholders. Nothing else is inserted into the HTML, so no string from
// the trace ever reaches the page except inside the JSON, escaped for a <script> element.
#include "out/out.h"

#include "analyze/view_data.h"
#include "out/viewer_assets.h"

#include <string.h>

static const struct {
    const char *mark;
    const unsigned char *text;
    const size_t *len;
} slots[] = {
    {"/*HEAPPROF_CSS*/", viewer_css, &viewer_css_len},
    {"/*HEAPPROF_DATA*/", NULL, NULL}, // in page order: data before the script that reads it
    {"/*HEAPPROF_JS*/", viewer_js, &viewer_js_len},
};

int out_html_write(analyze_t *a, FILE *f, errmsg_t *err) {
    const char *p = (const char *)viewer_html;
    for (size_t i = 0; i < sizeof slots / sizeof *slots; i++) {
        const char *at = strstr(p, slots[i].mark);
        if (!at) { // the build embeds a checked viewer.html; this guards a broken edit of it
            errmsg_set(err, "view: viewer.html lacks the %s placeholder", slots[i].mark);
            return -1;
        }
        fwrite(p, 1, (size_t)(at - p), f);
        if (slots[i].text) {
            fwrite(slots[i].text, 1, *slots[i].len, f);
        } else if (view_data_write(a, f, err) != 0) {
            return -1;
        }
        p = at + strlen(slots[i].mark);
    }
    fputs(p, f);
    if (ferror(f)) {
        errmsg_set(err, "view: cannot write the report");
        return -1;
    }
    return 0;
}
