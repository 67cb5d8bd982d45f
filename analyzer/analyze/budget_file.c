// SPDX-License-Identifier: MIT
// The budgets file: libyaml's document API, one mapping at the top; each value goes through the
// same parsers as the command line (budget.c), so a budget reads and fails the same in both.
#include "analyze/budget_file.h"

#include "core/xalloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

typedef struct ctx {
    const char *path;
    yaml_document_t *doc;
    budget_file_t *f;
    errmsg_t *err;
} ctx_t;

// An error at node n: "check: FILE:LINE: why" (why may be a budget.c message, "check: " cut).
static int fail_at(ctx_t *c, const yaml_node_t *n, const char *why) {
    if (strncmp(why, "check: ", 7) == 0)
        why += 7;
    errmsg_set(c->err, "check: %s:%zu: %s", c->path, n ? (size_t)n->start_mark.line + 1 : 0, why);
    return -1;
}

// The scalar of node n, or NULL (with err filled) when n is no scalar.
static const char *scalar(ctx_t *c, const yaml_node_t *n, const char *key) {
    if (!n || n->type != YAML_SCALAR_NODE) {
        char why[128];
        snprintf(why, sizeof why, "'%s' needs a single value", key);
        fail_at(c, n, why);
        return NULL;
    }
    return (const char *)n->data.scalar.value;
}

static budget_t *new_budget(ctx_t *c) {
    c->f->budgets = xrealloc(c->f->budgets, (c->f->n_budgets + 1) * sizeof *c->f->budgets);
    return &c->f->budgets[c->f->n_budgets];
}

// The items of a sequence node (a single scalar counts as a sequence of one), *n of them.
static const yaml_node_item_t *items(ctx_t *c, yaml_node_t *n, yaml_node_item_t *one,
                                     size_t *count) {
    if (n->type == YAML_SEQUENCE_NODE) {
        *count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
        return n->data.sequence.items.start;
    }
    *one = (yaml_node_item_t)(n - c->doc->nodes.start + 1);
    *count = 1;
    return one;
}

static int take(ctx_t *c, const char *key, yaml_node_t *v) {
    errmsg_t why;
    errmsg_init(&why);
    summary_metric_t m;
    if (summary_metric_parse(key, &m) == 0) {
        const char *s = scalar(c, v, key);
        if (!s)
            return -1;
        if (budget_total(m, s, new_budget(c), &why) != 0)
            return fail_at(c, v, why.msg);
        c->f->n_budgets++;
        return 0;
    }
    if (strcmp(key, "sites") == 0 || strcmp(key, "exclude") == 0) {
        yaml_node_item_t one;
        size_t n;
        const yaml_node_item_t *it = items(c, v, &one, &n);
        for (size_t i = 0; i < n; i++) {
            yaml_node_t *e = yaml_document_get_node(c->doc, it[i]);
            const char *s = scalar(c, e, key);
            if (!s)
                return -1;
            if (key[0] == 's') {
                if (budget_site(s, new_budget(c), &why) != 0)
                    return fail_at(c, e, why.msg);
                c->f->n_budgets++;
            } else {
                c->f->exclude =
                    xrealloc(c->f->exclude, (c->f->n_exclude + 1) * sizeof *c->f->exclude);
                c->f->exclude[c->f->n_exclude++] = xstrdup(s);
            }
        }
        return 0;
    }
    if (strcmp(key, "baseline") == 0 || strcmp(key, "from-module") == 0) {
        const char *s = scalar(c, v, key);
        if (!s)
            return -1;
        char **to = key[0] == 'b' ? &c->f->baseline : &c->f->from_module;
        free(*to);
        *to = xstrdup(s);
        return 0;
    }
    if (strcmp(key, "max-increase") == 0) {
        const char *s = scalar(c, v, key);
        if (!s)
            return -1;
        if (budget_parse_percent(s, &c->f->max_increase_pct, &why) != 0)
            return fail_at(c, v, why.msg);
        c->f->has_max_increase = true;
        return 0;
    }
    char msg[256];
    snprintf(msg, sizeof msg,
             "unknown key '%.64s' (peak, total, blocks, leaked, temporary, sites, baseline, "
             "max-increase, exclude, from-module)",
             key);
    return fail_at(c, v, msg);
}

int budget_file_read(const char *path, budget_file_t *f, errmsg_t *err) {
    memset(f, 0, sizeof *f);
    FILE *in = fopen(path, "rb");
    if (!in) {
        errmsg_set(err, "check: cannot read the budgets file %s: %s", path, strerror(errno));
        return -1;
    }
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_file(&parser, in);
    int rc = -1;
    if (!yaml_parser_load(&parser, &doc)) {
        errmsg_set(err, "check: %s:%zu: not YAML: %s", path, (size_t)parser.problem_mark.line + 1,
                   parser.problem ? parser.problem : "parse error");
        yaml_parser_delete(&parser);
        fclose(in);
        return -1;
    }
    ctx_t c = {path, &doc, f, err};
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root) {
        errmsg_set(err, "check: %s: empty: no budget in it", path);
    } else if (root->type != YAML_MAPPING_NODE) {
        fail_at(&c, root, "expected 'key: value' lines (peak: 64MiB, ...)");
    } else {
        rc = 0;
        for (yaml_node_pair_t *p = root->data.mapping.pairs.start;
             rc == 0 && p < root->data.mapping.pairs.top; p++) {
            yaml_node_t *k = yaml_document_get_node(&doc, p->key);
            yaml_node_t *v = yaml_document_get_node(&doc, p->value);
            const char *key = scalar(&c, k, "key");
            rc = key ? take(&c, key, v) : -1;
        }
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    fclose(in);
    if (rc != 0)
        budget_file_fini(f);
    return rc;
}

void budget_file_fini(budget_file_t *f) {
    free(f->budgets);
    free(f->baseline);
    free(f->from_module);
    for (size_t i = 0; i < f->n_exclude; i++)
        free(f->exclude[i]);
    free(f->exclude);
    memset(f, 0, sizeof *f);
}
