/*
 * flags.c: a verb's flags parsed by its table, and its usage printed from
 * the same table (flags.h says the kinds and where values go). Values are
 * checked here, once, with one message shape for every verb: the flag,
 * the value as given, what it should be, and an example.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "arbiter/resource.h"
#include "cli/flags.h"
#include "util/duration.h"

static bool fl_end(const fl_flag_t *f)
{
    return !f->name && !f->shortn;
}

static const char *fl_label(const fl_flag_t *f)
{
    return f->name ? f->name : f->shortn;
}

/* The example in an error: the default, else the metavar, else the least value. */
static void fl_example(const fl_flag_t *f, char *buf, size_t n)
{
    if (f->def)
        snprintf(buf, n, "%s %s", fl_label(f), f->def);
    else if (f->kind == FL_INT || f->kind == FL_I32 || f->kind == FL_NUM)
        snprintf(buf, n, "%s %lld", fl_label(f), f->min > 0 ? f->min : 1);
    else if (f->kind == FL_DURATION)
        snprintf(buf, n, "%s 30s", fl_label(f));
    else
        snprintf(buf, n, "%s %s", fl_label(f), f->metavar ? f->metavar : "VALUE");
}

static int fl_choice(const char *choices, const char *s)
{
    int idx = 0;
    size_t sl = strlen(s);

    for (const char *p = choices; *p; idx++) {
        size_t k = strcspn(p, "|");
        if (k == sl && strncmp(p, s, k) == 0)
            return idx;
        p += k;
        if (*p == '|')
            p++;
    }
    return -1;
}

/* Store value s of flag f into opts. */
static int fl_set(const fl_flag_t *f, const char *s, void *opts, arb_err_t *err)
{
    char *at = (char *)opts + f->off;
    char ex[160];
    arb_err_t sub = {{0}};

    fl_example(f, ex, sizeof ex);
    switch (f->kind) {
    case FL_BOOL:
        *(bool *)at = true;
        return 0;
    case FL_STR:
        *(const char **)at = s;
        return 0;
    case FL_INT:
    case FL_I32: {
        long long lo = f->min, hi = f->max ? f->max : f->kind == FL_I32 ? INT_MAX : LLONG_MAX;
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (!*s || *end || errno == ERANGE || v < lo || v > hi)
            return arb_errf(err, -EINVAL, "%s: '%s' is not a whole number in %lld..%lld (e.g. %s)",
                            fl_label(f), s, lo, hi, ex);
        if (f->kind == FL_I32)
            *(int *)at = (int)v;
        else
            *(long long *)at = v;
        return 0;
    }
    case FL_NUM: {
        double lo = (double)f->min, hi = f->max ? (double)f->max : 1e300;
        char *end;
        double v = strtod(s, &end);
        if (!*s || *end || !(v >= lo && v <= hi))
            return arb_errf(err, -EINVAL, "%s: '%s' is not a number in %g..%g (e.g. %s)",
                            fl_label(f), s, lo, hi, ex);
        memcpy(at, &v, sizeof v); /* at: a double field */
        return 0;
    }
    case FL_DURATION:
        if (arb_duration_parse(s, (int64_t *)at, &sub) < 0)
            return arb_errf(err, -EINVAL,
                            "%s: '%s' is not a duration: " ARB_DURATION_HELP " (e.g. %s)",
                            fl_label(f), s, ex);
        if (f->max && (*(int64_t *)at < f->min || *(int64_t *)at > f->max))
            return arb_errf(err, -EINVAL, "%s: '%s' is out of range: %s (e.g. %s)", fl_label(f), s,
                            f->help, ex);
        return 0;
    case FL_QTY:
        if (arb_qty_parse(s, (arb_qty_kind_t)f->qty, fl_label(f), (int64_t *)at, &sub) < 0)
            return arb_errf(err, -EINVAL, "%s (e.g. %s)", sub.msg, ex);
        return 0;
    case FL_CHOICE: {
        int idx = fl_choice(f->choices, s);
        if (idx < 0)
            return arb_errf(err, -EINVAL, "%s: '%s' is not one of %s (e.g. %s)", fl_label(f), s,
                            f->choices, ex);
        *(int *)at = idx;
        return 0;
    }
    case FL_LIST: {
        fl_list_t *l = (fl_list_t *)at;
        if (l->n >= FL_LIST_MAX)
            return arb_errf(err, -EINVAL, "%s: at most %d of them", fl_label(f), FL_LIST_MAX);
        l->v[l->n++] = s;
        return 0;
    }
    }
    return arb_errf(err, -EINVAL, "%s: unknown kind", fl_label(f));
}

static const fl_flag_t *fl_find(const fl_verb_t *v, const char *a, size_t n)
{
    for (const fl_flag_t *f = v->flags; !fl_end(f); f++)
        if ((f->name && strlen(f->name) == n && !strncmp(f->name, a, n)) ||
            (f->shortn && strlen(f->shortn) == n && !strncmp(f->shortn, a, n)))
            return f;
    return NULL;
}

int fl_parse(const fl_verb_t *v, int argc, char **argv, void *opts, fl_args_t *a, arb_err_t *err)
{
    int npos = 0, i;

    memset(a, 0, sizeof *a);
    for (const fl_flag_t *f = v->flags; !fl_end(f); f++)
        if (f->def && fl_set(f, f->def, opts, err) < 0)
            return -EINVAL;
    for (i = 1; i < argc; i++) {
        char *s = argv[i];
        if (strcmp(s, "--") == 0) {
            i++;
            a->rest = argv + i;
            a->nrest = argc - i;
            break;
        }
        if (s[0] != '-' || !s[1]) { /* a positional ("-" too: stdin) */
            if (v->stop_at_pos) {
                a->rest = argv + i;
                a->nrest = argc - i;
                break;
            }
            argv[1 + npos++] = s; /* i >= 1 + npos: nothing unread is overwritten */
            continue;
        }
        const char *eq = s[1] == '-' ? strchr(s, '=') : NULL;
        const fl_flag_t *f = fl_find(v, s, eq ? (size_t)(eq - s) : strlen(s));
        if (!f) {
            if (!strcmp(s, "--help") || !strcmp(s, "-h"))
                return 1;
            return arb_errf(err, -EINVAL, "unknown option '%s'", s);
        }
        if (f->kind == FL_BOOL) {
            if (eq)
                return arb_errf(err, -EINVAL, "%s takes no value (give %s alone)", f->name,
                                f->name);
            fl_set(f, NULL, opts, err);
            continue;
        }
        const char *val = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!val) {
            char ex[160];
            fl_example(f, ex, sizeof ex);
            return arb_errf(err, -EINVAL, "needs a value after '%s' (e.g. %s)", s, ex);
        }
        if (fl_set(f, val, opts, err) < 0)
            return -EINVAL;
    }
    a->pos = argv + 1;
    a->npos = npos;
    if (npos < v->min_pos || (v->max_pos >= 0 && npos > v->max_pos)) {
        if (npos > 0 && v->max_pos >= 0 && npos > v->max_pos)
            return arb_errf(err, -EINVAL, "unexpected argument '%s' (give %s)", a->pos[v->max_pos],
                            v->args ? v->args : "no arguments");
        return arb_errf(err, -EINVAL, "give %s", v->args ? v->args : "no arguments");
    }
    return 0;
}

/* "--queue Q" / "-o text|json" / "--all": a flag as usage shows it. */
static void fl_spell(const fl_flag_t *f, char *buf, size_t n)
{
    const char *mv = f->kind == FL_CHOICE ? f->choices : f->metavar ? f->metavar : "VALUE";

    if (f->kind == FL_BOOL)
        snprintf(buf, n, "%s", fl_label(f));
    else
        snprintf(buf, n, "%s %s%s", fl_label(f), mv, f->kind == FL_LIST ? " ..." : "");
}

void fl_usage(const fl_verb_t *v, FILE *f)
{
    char sp[160];
    size_t col = strlen("usage: arbiter ") + strlen(v->name);

    fprintf(f, "usage: arbiter %s", v->name);
    for (const fl_flag_t *x = v->flags; !fl_end(x); x++) {
        fl_spell(x, sp, sizeof sp);
        if (col + strlen(sp) + 3 > 100) {
            fprintf(f, "\n      ");
            col = 6;
        }
        col += strlen(sp) + 3;
        fprintf(f, " [%s]", sp);
    }
    if (v->args)
        fprintf(f, " %s", v->args);
    fprintf(f, "\n");
    if (v->summary)
        fprintf(f, "\n  %s\n", v->summary);
    if (!fl_end(v->flags))
        fprintf(f, "\nflags:\n");
    for (const fl_flag_t *x = v->flags; !fl_end(x); x++) {
        char left[200];
        fl_spell(x, sp, sizeof sp);
        if (x->name && x->shortn)
            snprintf(left, sizeof left, "%s, %s", x->shortn, sp);
        else
            snprintf(left, sizeof left, "%s", sp);
        fprintf(f, "  %-26s %s", left, x->help ? x->help : "");
        if (x->def)
            fprintf(f, " (default %s)", x->def);
        fprintf(f, "\n");
    }
    if (v->more)
        fprintf(f, "\n%s\n", v->more);
    if (v->more_fn)
        v->more_fn(f);
}

bool fl_run(const fl_verb_t *v, int argc, char **argv, void *opts, fl_args_t *a, int *rc)
{
    arb_err_t err = {{0}};
    int r = fl_parse(v, argc, argv, opts, a, &err);

    if (r == 1) {
        fl_usage(v, stdout);
        *rc = 0;
        return false;
    }
    if (r < 0) {
        fprintf(stderr, "arbiter %s: %s; run 'arbiter %s --help' for the usage\n", v->name, err.msg,
                v->name);
        *rc = 2;
        return false;
    }
    return true;
}
