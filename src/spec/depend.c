/*
 * depend.c: Slurm's job dependency text (sbatch --dependency) read into
 * terms, as sbatch documents it:
 *
 *   LIST := TERM (',' TERM)*     every term must be met
 *         | TERM ('?' TERM)*     one term met is enough (the two do not mix)
 *   TERM := TYPE ':' JOB (':' JOB)*  |  'singleton'
 *   TYPE := after | afterany | afterok | afternotok | aftercorr | afterburstbuffer
 *   JOB  := ID ['_' TASK] ['+' MINUTES]   (+MINUTES only after 'after')
 *
 * Each JOB becomes a term of its own (afterok:1:2 is afterok:1,afterok:2,
 * or with '?' either one).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/depend.h"

static const char *const type_names[] = {
    [SPEC_DEP_AFTER] = "after",         [SPEC_DEP_ANY] = "afterany",
    [SPEC_DEP_OK] = "afterok",          [SPEC_DEP_NOTOK] = "afternotok",
    [SPEC_DEP_CORR] = "aftercorr",      [SPEC_DEP_BURST] = "afterburstbuffer",
    [SPEC_DEP_SINGLETON] = "singleton",
};

#define FORMS                                                                                      \
    "the forms are TYPE:JOBID[:JOBID...] (after, afterany, afterok, afternotok, aftercorr), "      \
    "after:JOBID+MINUTES, JOBID_TASK for an array element, and singleton; ',' between them: "      \
    "all, '?': any"

const char *spec_dep_type_name(spec_dep_type_t t)
{
    return (unsigned)t < sizeof type_names / sizeof type_names[0] ? type_names[t] : "?";
}

/* A decimal number of at most max, the whole of [s, e). */
static bool number(const char *s, const char *e, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    if (s == e)
        return false;
    for (; s < e; s++) {
        if (*s < '0' || *s > '9' || v > (max - (uint64_t)(*s - '0')) / 10)
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return true;
}

static int job_ref(const char *text, const char *s, const char *e, spec_dep_type_t type,
                   spec_dep_term_t *t, arb_err_t *err)
{
    const char *plus = memchr(s, '+', (size_t)(e - s)), *end = plus ? plus : e;
    const char *us = memchr(s, '_', (size_t)(end - s));
    uint64_t id, v;

    t->type = (uint8_t)type;
    t->task = -1;
    t->delay_min = 0;
    if (!number(s, us ? us : end, UINT64_MAX / 2, &id) || id == 0)
        return arb_errf(err, -EINVAL, "dependency '%s': '%.*s' is not a job id; %s", text,
                        (int)(e - s), s, FORMS);
    t->job = id;
    if (us) {
        if (!number(us + 1, end, INT32_MAX, &v))
            return arb_errf(err, -EINVAL,
                            "dependency '%s': '%.*s': after '_' comes the array task id; %s", text,
                            (int)(e - s), s, FORMS);
        t->task = (int32_t)v;
    }
    if (plus) {
        if (type != SPEC_DEP_AFTER)
            return arb_errf(err, -EINVAL,
                            "dependency '%s': '%.*s': a +MINUTES delay goes only with 'after'",
                            text, (int)(e - s), s);
        if (!number(plus + 1, e, 525600, &v))
            return arb_errf(err, -EINVAL,
                            "dependency '%s': '%.*s': give the delay in minutes (at most a year)",
                            text, (int)(e - s), s);
        t->delay_min = (int32_t)v;
    }
    return 0;
}

/* One TERM, [s, e). */
static int term(const char *text, const char *s, const char *e, spec_dep_t *d, arb_err_t *err)
{
    const char *colon = memchr(s, ':', (size_t)(e - s));
    size_t tl = (size_t)((colon ? colon : e) - s);
    int type = -1, rc;

    for (int k = 0; k < (int)(sizeof type_names / sizeof type_names[0]); k++)
        if (strlen(type_names[k]) == tl && !strncmp(s, type_names[k], tl))
            type = k;
    if (type < 0)
        return arb_errf(err, -EINVAL, "dependency '%s': '%.*s' is not a dependency type; %s", text,
                        (int)tl, s, FORMS);
    if (type == SPEC_DEP_SINGLETON) {
        if (colon)
            return arb_errf(err, -EINVAL, "dependency '%s': singleton takes no job ids", text);
        if (d->n >= SPEC_DEP_MAX)
            return arb_errf(err, -EINVAL, "dependency '%s': more than %d terms", text,
                            SPEC_DEP_MAX);
        d->t[d->n++] = (spec_dep_term_t){.type = SPEC_DEP_SINGLETON, .task = -1};
        return 0;
    }
    if (!colon || colon + 1 == e)
        return arb_errf(err, -EINVAL, "dependency '%s': '%.*s' names no job; %s", text, (int)tl, s,
                        FORMS);
    for (const char *p = colon + 1; p <= e;) {
        const char *q = memchr(p, ':', (size_t)(e - p));
        if (!q)
            q = e;
        if (d->n >= SPEC_DEP_MAX)
            return arb_errf(err, -EINVAL, "dependency '%s': more than %d job ids", text,
                            SPEC_DEP_MAX);
        if ((rc = job_ref(text, p, q, (spec_dep_type_t)type, &d->t[d->n], err)) < 0)
            return rc;
        d->n++;
        p = q + 1;
    }
    return 0;
}

int spec_dep_parse(const char *text, spec_dep_t *d, arb_err_t *err)
{
    const char *s = text;
    bool comma = strchr(text, ',') != NULL, query = strchr(text, '?') != NULL;
    int rc;

    memset(d, 0, sizeof *d);
    if (!*text)
        return arb_errf(err, -EINVAL, "dependency is empty; %s", FORMS);
    if (comma && query)
        return arb_errf(err, -EINVAL,
                        "dependency '%s': use ',' (all must be met) or '?' (any one), not both",
                        text);
    d->any = query;
    for (;;) {
        const char *e = s + strcspn(s, ",?");
        if (e == s)
            return arb_errf(err, -EINVAL, "dependency '%s': an empty term; %s", text, FORMS);
        if ((rc = term(text, s, e, d, err)) < 0)
            return rc;
        if (!*e)
            break;
        s = e + 1;
    }
    return 0;
}
