/*
 * scenario.c: the YAML loader behind scenario.h: the document's top level
 * (a table, scn_root_table, read in its order: nodes first, then the
 * scheduler settings, queues and jobs), the budgets that bound what one
 * file may ask for, and the public calls. Each object
 * has its file (scenario_int.h lists them); the scheduler settings and
 * queues are tables (schema_sched.c) that the controller config reads too.
 *
 * Three rules shape the code:
 *   - Every message names FILE:LINE:COLUMN and the field path. A value that
 *     has no position of its own (an empty value, an empty mapping) is
 *     reported at the key it hangs from, so each value travels with its key
 *     and its path (sval_t).
 *   - Unknown fields, wrong types and aliases are errors, never ignored.
 *   - Everything is built into fresh objects (a private cluster, a new job)
 *     that are freed on failure; the caller's objects change only on success.
 *
 * The value layer (positions, messages, typed scalars, documents) is
 * sval.c; the files of the loader are the format: which fields exist and
 * what they mean.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libfyaml.h>

#include "spec/scenario_int.h"
#include "spec/schema_node.h"
#include "spec/schema_sched.h"

/* ---- tables ------------------------------------------------------------- */

typedef struct prio_class {
    const char *name;
    int32_t prio;
} prio_class_t;

static const prio_class_t prio_classes[] = {
    {"best-effort", 0}, {"low", 100}, {"normal", 500}, {"high", 1000}, {"critical", 10000},
};

/* ---- budgets ---------------------------------------------------------------- */

/* count: multiplies everything under it, so this is what bounds the memory
 * a small file can ask for. */
int scn_charge(sx_t *x, const sval_t *v, int copies)
{
    int64_t size = sv_tree_size(v->n, 0, SPEC_MAX_VALUES);
    sval_t f;

    if (size > (SPEC_MAX_VALUES - x->values) / copies) {
        if (!sv_get(v, "count", &f))
            f = *v;
        return sv_fail(x, &f, -EINVAL,
                       "%d cop%s of %" PRId64 " values each pass the limit of %d values per "
                       "file; make the file smaller",
                       copies, copies == 1 ? "y" : "ies", size, SPEC_MAX_VALUES);
    }
    x->values += size * copies;
    return 0;
}

int scn_count(sx_t *x, const sval_t *v, int left, int *count)
{
    sval_t f;
    int rc;

    *count = 1;
    if (!sv_get(v, "count", &f))
        return 0;
    if ((rc = sv_int32(x, &f, 1, INT_MAX, count)) < 0)
        return rc;
    if (*count > left)
        return sv_fail(x, &f, -EINVAL, "%d more would pass the limit of this file (%d left)",
                       *count, left);
    return 0;
}

/* ---- scheduler settings and queues ------------------------------------------- */

/* scheduler: through the table the controller config shares. */
static int parse_scheduler(sx_t *x, const sval_t *v, spec_scenario_t *s)
{
    spec_sched_t t;
    arb_err_t ierr;
    int rc;

    memset(&t, 0, sizeof t);
    if ((rc = sc_init(&spec_sched_table, SC_CTX_SCENARIO, &t, &ierr)) < 0)
        return sv_fail(x, v, rc, "%s", ierr.msg);
    if ((rc = sc_walk(x, v, &spec_sched_table, SC_CTX_SCENARIO, &t)) < 0)
        return rc;
    snprintf(s->policy, sizeof s->policy, "%s", t.policy);
    s->queue_policy = (arb_queue_policy_t)t.queue_policy;
    s->backfill = t.backfill;
    s->preemption = t.preemption;
    s->starvation_ns = t.starvation_ns;
    return 0;
}

/* queues: through the shared table, names interned in the cluster. */
static int parse_queues(sx_t *x, const sval_t *v, spec_scenario_t *s)
{
    spec_queue_t *q;
    int n, rc = spec_queues_read(x, v, SC_CTX_SCENARIO, &q, &n);

    if (rc < 0 || n == 0)
        return rc;
    if (!(s->queues = calloc((size_t)n, sizeof *s->queues))) {
        rc = sv_oom(x, v);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        arb_queue_t *aq = &s->queues[i];
        if ((rc = scn_intern(x, v, q[i].name, &aq->name)) < 0 ||
            (q[i].cohort[0] && (rc = scn_intern(x, v, q[i].cohort, &aq->cohort)) < 0))
            goto out;
        aq->weight = q[i].weight;
        aq->has_quota = q[i].has_quota;
        aq->nominal = q[i].nominal;
        aq->borrow_limit = q[i].borrow_limit;
        s->nqueues++;
    }
out:
    free(q);
    return rc;
}

/* ---- the document ------------------------------------------------------------------ */

static int set_nodes(sx_t *x, const sval_t *v, void *obj)
{
    (void)obj;
    return scn_nodes(x, v);
}

static int set_scheduler(sx_t *x, const sval_t *v, void *obj)
{
    return parse_scheduler(x, v, obj);
}

/* Jobs must then name a defined queue: the jobs below see the list. */
static int set_queues(sx_t *x, const sval_t *v, void *obj)
{
    spec_scenario_t *s = obj;
    int rc = parse_queues(x, v, s);

    x->queues = s->queues;
    x->nqueues = s->nqueues;
    return rc;
}

static int set_jobs(sx_t *x, const sval_t *v, void *obj)
{
    return scn_jobs(x, v, obj);
}

/* The document, read in table order: nodes first (they declare the
 * extended resources that quotas and jobs may name), queues before jobs
 * (which must name a defined queue). Each row's setter gets the whole
 * scenario. */
static const sc_field_t root_fields[] = {
    {.key = "nodes",
     .type = SC_CUSTOM,
     .sub = &spec_node_table,
     .set = set_nodes,
     .flags = SC_LIST | SC_REQUIRED | SC_WHOLE,
     .type_doc = "list",
     .help = "the cluster's machines"},
    {.key = "scheduler",
     .type = SC_OBJECT,
     .sub = &spec_sched_table,
     .set = set_scheduler,
     .flags = SC_WHOLE},
    {.key = "queues",
     .type = SC_CUSTOM,
     .sub = &spec_queue_table,
     .set = set_queues,
     .flags = SC_LIST | SC_WHOLE,
     .type_doc = "list",
     .def_doc = "none",
     .help = "queues with quotas; jobs must then name one (or none: the queue 'default')"},
    {.key = "jobs",
     .type = SC_CUSTOM,
     .sub = &scn_job_table,
     .set = set_jobs,
     .flags = SC_LIST | SC_WHOLE,
     .type_doc = "list",
     .def_doc = "[]",
     .help = "in arrival order"},
    {.key = NULL},
};
const sc_table_t scn_root_table = {"scenario", root_fields, NULL};

void spec_scenario_doc(FILE *f)
{
    sc_doc_markdown(f, &scn_root_table, SC_CTX_SCENARIO | SC_CTX_DOC, "");
}

void spec_job_doc(FILE *f)
{
    sc_doc_markdown(f, &scn_job_table, SC_CTX_SCENARIO | SC_CTX_DOC, "");
}

/* ---- jobs ------------------------------------------------------------------------ */

/* jobs: in arrival order, count: copies each, names unique, within the
 * file's budgets of jobs and tasks. */
int scn_jobs(sx_t *x, const sval_t *v, spec_scenario_t *s)
{
    int count, rc = sv_seq(x, v, SPEC_MAX_JOBS, &count), total = 0;
    arb_strtab_t names;
    void *it = NULL;

    if (rc < 0 || count == 0)
        return rc;
    arb_strtab_init(&names);
    for (int i = 0; rc == 0 && i < count; i++) {
        sval_t jv;
        int copies;
        bool is;

        sv_item(&jv, v, fy_node_sequence_iterate(v->n, &it), i);
        if ((rc = sv_map(x, &jv, &is)) < 0)
            break;
        if (is && (rc = scn_count(x, &jv, SPEC_MAX_JOBS - total, &copies)) < 0)
            break;
        if (!is)
            copies = 1;
        if ((rc = scn_charge(x, &jv, copies)) < 0)
            break;
        if (copies > 0) {
            arb_job_t **grown = realloc(s->jobs, (size_t)(s->njobs + copies) * sizeof *grown);
            if (!grown) {
                rc = sv_oom(x, &jv);
                break;
            }
            s->jobs = grown;
        }
        for (int k = 1; rc == 0 && k <= copies; k++) {
            arb_job_t *j;
            if ((rc = scn_job(x, &jv, copies > 1 ? k : 0, &j)) < 0)
                break;
            s->jobs[s->njobs++] = j;
            x->tasks += j->ntasks;
            if (x->tasks > SPEC_MAX_TASKS) {
                rc = sv_fail(x, &jv, -EINVAL,
                             "the jobs so far have more than %d tasks in all; make the file "
                             "smaller",
                             SPEC_MAX_TASKS);
            } else if (arb_strtab_find(&names, j->name)) {
                sval_t nf;
                sv_get(&jv, "name", &nf);
                rc = sv_fail(x, &nf, -EINVAL, "job name '%s' is used twice; names must be unique",
                             j->name);
            } else if (!arb_intern(&names, j->name)) {
                rc = sv_oom(x, &jv);
            }
        }
        total += copies;
    }
    arb_strtab_free(&names);
    return rc;
}

/* ---- public ------------------------------------------------------------------- */

int spec_priority_class(const char *name, int32_t *prio)
{
    for (size_t i = 0; i < sizeof prio_classes / sizeof prio_classes[0]; i++)
        if (strcmp(name, prio_classes[i].name) == 0) {
            *prio = prio_classes[i].prio;
            return 0;
        }
    return -ENOENT;
}

int spec_priority_builtins(spec_prio_class_t *out, int max)
{
    int n = 0;
    for (size_t i = 0; i < sizeof prio_classes / sizeof prio_classes[0] && n < max; i++, n++) {
        memset(&out[n], 0, sizeof out[n]);
        snprintf(out[n].name, sizeof out[n].name, "%s", prio_classes[i].name);
        out[n].value = prio_classes[i].prio;
        out[n].preemptible = -1;
        snprintf(out[n].description, sizeof out[n].description, "built-in");
    }
    return n;
}

void spec_scenario_free(spec_scenario_t *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->njobs; i++)
        arb_job_free(s->jobs[i]);
    free(s->jobs);
    free(s->queues);
    arb_cluster_free(&s->cluster);
    memset(s, 0, sizeof *s);
}

int spec_scenario_load_mem(const char *name, const char *buf, size_t len, spec_scenario_t *out,
                           arb_err_t *err)
{
    spec_scenario_t s;
    sv_doc_t d;
    sx_t x = {.file = name ? name : "scenario", .err = err};
    sval_t root;
    int rc;

    if ((rc = sv_doc_open(x.file, buf, len, &d, err)) < 0)
        return rc;
    memset(&s, 0, sizeof s);
    arb_cluster_init(&s.cluster);
    x.c = &s.cluster;
    sv_root(&root, fy_document_root(d.doc), "");
    rc = sc_walk(&x, &root, &scn_root_table, SC_CTX_SCENARIO, &s);
    sv_doc_close(&d);
    if (rc < 0) {
        spec_scenario_free(&s);
        return rc;
    }
    *out = s;
    return 0;
}

/* Read a whole file into a new buffer (free it). */
static int read_file(const char *path, char **buf, size_t *len, arb_err_t *err)
{
    FILE *fp = fopen(path, "rb");
    char *b = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;

    if (!fp) {
        int e = errno ? errno : EIO;
        return arb_errf(err, -e, "%s: cannot open: %s", path, strerror(e));
    }
    for (;;) {
        if (n == cap) {
            char *nb;
            if (cap >= SPEC_MAX_FILE) {
                rc = arb_errf(err, -EFBIG, "%s: larger than %d MiB", path, SPEC_MAX_FILE >> 20);
                break;
            }
            cap = cap ? cap * 2 : 65536;
            if (!(nb = realloc(b, cap))) {
                rc = arb_errf(err, -ENOMEM, "%s: out of memory", path);
                break;
            }
            b = nb;
        }
        size_t got = fread(b + n, 1, cap - n, fp);
        n += got;
        if (got == 0) {
            if (ferror(fp))
                rc = arb_errf(err, -EIO, "%s: read error", path);
            break;
        }
    }
    fclose(fp);
    if (rc < 0) {
        free(b);
        return rc;
    }
    *buf = b;
    *len = n;
    return 0;
}

int spec_scenario_load_file(const char *path, spec_scenario_t *out, arb_err_t *err)
{
    char *buf = NULL;
    size_t len = 0;
    int rc = read_file(path, &buf, &len, err);

    if (rc < 0)
        return rc;
    rc = spec_scenario_load_mem(path, buf, len, out, err);
    free(buf);
    return rc;
}

int spec_scenario_conf(const spec_scenario_t *s, const char *policy, arb_sched_conf_t *conf,
                       arb_err_t *err)
{
    arb_sched_conf_t c;
    const char *name = policy ? policy : s->policy[0] ? s->policy : "default";
    int rc;

    memset(&c, 0, sizeof c);
    if ((rc = arb_profile_lookup(name, &c.profile, err)) < 0)
        return rc;
    c.queue_policy = s->queue_policy;
    c.backfill = s->backfill;
    c.preemption = s->preemption;
    c.starvation_ns = s->starvation_ns;
    *conf = c;
    return 0;
}

int spec_job_from_node(const char *file, struct fy_node *node, const char *path, arb_cluster_t *c,
                       arb_job_t **out, arb_err_t *err)
{
    sx_t x = {.file = file ? file : "job", .err = err, .c = c, .lone_job = true};
    sval_t v;

    sv_root(&v, node, path);
    return scn_job(&x, &v, 0, out);
}

int spec_job_from_node_classes(const char *file, struct fy_node *node, const char *path,
                               arb_cluster_t *c, const spec_prio_table_t *classes, arb_job_t **out,
                               arb_err_t *err)
{
    sx_t x = {
        .file = file ? file : "job", .err = err, .c = c, .lone_job = true, .classes = classes};
    sval_t v;

    sv_root(&v, node, path);
    return scn_job(&x, &v, 0, out);
}

int spec_job_load_mem(const char *name, const char *buf, size_t len, arb_cluster_t *c,
                      arb_job_t **out, arb_err_t *err)
{
    sv_doc_t d;
    int rc;

    name = name ? name : "job";
    if ((rc = sv_doc_open(name, buf, len, &d, err)) < 0)
        return rc;
    rc = spec_job_from_node(name, fy_document_root(d.doc), "", c, out, err);
    sv_doc_close(&d);
    return rc;
}
