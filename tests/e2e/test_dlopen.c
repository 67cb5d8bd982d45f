// SPDX-License-Identifier: MIT
// A library loaded, allocating and unloaded mid-run is still symbolized in the report.
#include "spawn.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

Test(dlopen, an_unloaded_plugin_is_still_symbolized) {
    char *dir = e2e_tmpdir("dlopen");
    char trace[4096];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    char *argv[] = {E2E_PROGS "/dlopen_host", E2E_PROGS "/libhp_plugin.so", NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, NULL, NULL), 0);
    const char *args[] = {"report", "--json", trace, NULL};
    char *out, *err;
    cr_assert_eq(e2e_heapprof(args, &out, &err), 0, "%s", err);
    json_error_t je;
    json_t *r = json_loads(out, 0, &je);
    cr_assert(r, "%s", je.text);
    bool plugin = false, host = false;
    size_t i;
    json_t *site;
    json_array_foreach(json_object_get(r, "sites"), i, site) {
        const char *fn = json_string_value(json_object_get(site, "function"));
        long long blocks = json_integer_value(json_object_get(site, "blocks"));
        if (fn && strstr(fn, "plugin_allocate") && blocks == 50)
            plugin = true;
        if (fn && !strcmp(fn, "main") && blocks == 20)
            host = true;
    }
    cr_expect(plugin, "no site named plugin_allocate with 50 blocks:\n%s", out);
    cr_expect(host, "no site in main with 20 blocks");
    json_decref(r);
    free(out);
    free(err);
    free(dir);
}
