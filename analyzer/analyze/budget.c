// SPDX-License-Identifier: MIT
// Budget spelling and evaluation. Limits are exact integers (a size's fraction must come out a
// whole byte), so "passes at the limit, fails one byte over it" holds for any figure; the
// baseline's limit is rounded down, so a 0% increase allows none.
#include "analyze/budget.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *suffix;
    uint64_t scale;
} units[] = {
    {"", 1},
    {"b", 1},
    {"k", 1ull << 10},
    {"kib", 1ull << 10},
    {"kb", 1000ull},
    {"m", 1ull << 20},
    {"mib", 1ull << 20},
    {"mb", 1000000ull},
    {"g", 1ull << 30},
    {"gib", 1ull << 30},
    {"gb", 1000000000ull},
    {"t", 1ull << 40},
    {"tib", 1ull << 40},
    {"tb", 1000000000000ull},
};

// Digits with an optional fraction, then the suffix; *out = value * unit of the suffix.
static int parse_scaled(const char *s, bool sizes, uint64_t *out) {
    const char *p = s;
    uint64_t whole = 0, frac = 0, frac_div = 1;
    bool digits = false;
    for (; isdigit((unsigned char)*p); p++, digits = true) {
        if (whole > (UINT64_MAX - 9) / 10)
            return -1;
        whole = whole * 10 + (uint64_t)(*p - '0');
    }
    if (*p == '.') {
        for (p++; isdigit((unsigned char)*p); p++, digits = true) {
            if (frac_div >= 1000) // three decimals at most: frac * scale stays far below 2^64
                return -1;
            frac = frac * 10 + (uint64_t)(*p - '0');
            frac_div *= 10;
        }
    }
    if (!digits)
        return -1;
    while (*p == ' ')
        p++;
    char suf[8];
    size_t n = strlen(p);
    if (n >= sizeof suf)
        return -1;
    for (size_t i = 0; i < sizeof suf; i++) // bounded by suf, not n: gcc -O3 then sees no overflow
        suf[i] = i < n ? (char)tolower((unsigned char)p[i]) : '\0';
    uint64_t scale = 0;
    if (sizes) {
        for (size_t i = 0; i < sizeof units / sizeof *units; i++)
            if (strcmp(suf, units[i].suffix) == 0)
                scale = units[i].scale;
    } else {
        scale = !suf[0] ? 1 : !strcmp(suf, "k") ? 1000 : !strcmp(suf, "m") ? 1000000 : 0;
    }
    if (!scale || whole > UINT64_MAX / scale)
        return -1;
    // the fraction must come out a whole number: exact, no rounding
    if ((frac * scale) % frac_div != 0)
        return -1;
    uint64_t v = whole * scale + frac * scale / frac_div;
    if (v < whole * scale)
        return -1;
    *out = v;
    return 0;
}

int budget_parse_size(const char *s, uint64_t *out, errmsg_t *err) {
    if (parse_scaled(s, true, out) != 0) {
        errmsg_set(err,
                   "check: '%s' is not a size (e.g. 1048576, 512K, 1.5MiB, 10MB; a whole number "
                   "of bytes)",
                   s);
        return -1;
    }
    return 0;
}

int budget_parse_count(const char *s, uint64_t *out, errmsg_t *err) {
    if (parse_scaled(s, false, out) != 0) {
        errmsg_set(err, "check: '%s' is not a number of blocks (e.g. 1000, 10k)", s);
        return -1;
    }
    return 0;
}

int budget_parse_percent(const char *s, double *pct, errmsg_t *err) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end != s && *end == '%')
        end++;
    if (errno || end == s || *end || !isdigit((unsigned char)s[0]) || !isfinite(v) || v > 1e6) {
        errmsg_set(err, "check: '%s' is not a percentage (e.g. 5%%, 0.5%%)", s);
        return -1;
    }
    *pct = v;
    return 0;
}

static int parse_value(summary_metric_t m, const char *value, uint64_t *out, errmsg_t *err) {
    return summary_metric_is_bytes(m) ? budget_parse_size(value, out, err)
                                      : budget_parse_count(value, out, err);
}

int budget_total(summary_metric_t m, const char *value, budget_t *b, errmsg_t *err) {
    memset(b, 0, sizeof *b);
    b->kind = BUDGET_TOTAL;
    b->metric = m;
    if (parse_value(m, value, &b->limit, err) != 0)
        return -1;
    snprintf(b->name, sizeof b->name, "%s <= %s", summary_metric_name(m), value);
    return 0;
}

int budget_site(const char *spec, budget_t *b, errmsg_t *err) {
    memset(b, 0, sizeof *b);
    b->kind = BUDGET_SITE;
    const char *le = strstr(spec, "<=");
    for (const char *p = le; p; p = strstr(p + 2, "<="))
        le = p; // the last one: a pattern may hold "<=" (operator<=)
    const char *colon = NULL;
    for (const char *p = spec; le && p < le; p++)
        if (*p == ':')
            colon = p;
    if (!le || !colon || colon == spec) {
        errmsg_set(err,
                   "check: --site '%s': expected 'PATTERN:METRIC<=VALUE', e.g. "
                   "'parse_*:total<=1MiB'",
                   spec);
        return -1;
    }
    size_t plen = (size_t)(colon - spec), mlen = (size_t)(le - colon - 1);
    char metric[32];
    while (mlen && colon[1 + mlen - 1] == ' ')
        mlen--;
    if (plen >= sizeof b->pattern || mlen >= sizeof metric) {
        errmsg_set(err, "check: --site '%s': pattern or metric too long", spec);
        return -1;
    }
    memcpy(b->pattern, spec, plen);
    memcpy(metric, colon + 1, mlen);
    metric[mlen] = '\0';
    if (summary_metric_parse(metric, &b->metric) != 0) {
        errmsg_set(err,
                   "check: --site '%s': unknown metric '%s' (peak, total, blocks, leaked, "
                   "temporary)",
                   spec, metric);
        return -1;
    }
    const char *value = le + 2;
    while (*value == ' ')
        value++;
    if (parse_value(b->metric, value, &b->limit, err) != 0)
        return -1;
    snprintf(b->name, sizeof b->name, "site '%s': %s <= %s", b->pattern, metric, value);
    return 0;
}

void budget_baseline(summary_metric_t m, double pct, budget_t *b) {
    memset(b, 0, sizeof *b);
    b->kind = BUDGET_BASELINE;
    b->metric = m;
    b->max_increase_pct = pct;
    snprintf(b->name, sizeof b->name, "%s <= baseline + %g%%", summary_metric_name(m), pct);
}

// Keeps the BUDGET_MAX_CULPRITS largest values, biggest first (ties: the earlier site).
static void add_culprit(budget_result_t *r, size_t site, uint64_t v) {
    if (v == 0)
        return;
    size_t at = r->n_culprits;
    while (at > 0 && r->culprit_value[at - 1] < v)
        at--;
    if (at >= BUDGET_MAX_CULPRITS)
        return;
    size_t last = r->n_culprits < BUDGET_MAX_CULPRITS ? r->n_culprits : BUDGET_MAX_CULPRITS - 1;
    for (size_t k = last; k > at; k--) {
        r->culprit[k] = r->culprit[k - 1];
        r->culprit_value[k] = r->culprit_value[k - 1];
    }
    r->culprit[at] = site;
    r->culprit_value[at] = v;
    if (r->n_culprits < BUDGET_MAX_CULPRITS)
        r->n_culprits++;
}

void budget_eval(const budget_t *b, const summary_t *cur, const summary_t *base,
                 budget_result_t *res) {
    memset(res, 0, sizeof *res);
    summary_metric_t m = b->metric;
    switch (b->kind) {
    case BUDGET_TOTAL:
        res->figure = cur->total[m];
        res->limit = b->limit;
        for (size_t i = 0; i < cur->n_sites; i++)
            add_culprit(res, i, cur->sites[i].v[m]);
        break;
    case BUDGET_SITE:
        res->limit = b->limit;
        for (size_t i = 0; i < cur->n_sites; i++) {
            if (fnmatch(b->pattern, cur->sites[i].function, 0) != 0)
                continue;
            res->figure += cur->sites[i].v[m];
            add_culprit(res, i, cur->sites[i].v[m]);
        }
        break;
    case BUDGET_BASELINE: {
        res->figure = cur->total[m];
        res->base = base->total[m];
        long double lim = (long double)res->base * (100.0L + b->max_increase_pct) / 100.0L;
        // the cast truncates, which rounds a non-negative limit down (no libm needed)
        res->limit = lim >= 18446744073709551615.0L ? UINT64_MAX : (uint64_t)lim;
        for (size_t i = 0; i < cur->n_sites; i++) {
            const summary_site_t *o = summary_find(base, cur->sites[i].function);
            uint64_t was = o ? o->v[m] : 0;
            if (cur->sites[i].v[m] > was)
                add_culprit(res, i, cur->sites[i].v[m] - was);
        }
        break;
    }
    }
    res->broken = res->figure > res->limit;
    if (!res->broken)
        res->n_culprits = 0;
}
