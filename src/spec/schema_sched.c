/*
 * schema_sched.c: the tables of scheduler settings and queues (see
 * schema_sched.h), and the queues: list, read item by item through the
 * queue table. Quotas are resource maps (scenario_res.c), so a quota takes
 * the same names as a job's requests in both formats.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <libfyaml.h>

#include "spec/scenario_int.h"
#include "spec/schema_sched.h"

static const char *const queue_orders[] = {
    [ARB_QP_FIFO] = "fifo", [ARB_QP_PRIORITY] = "priority", [ARB_QP_DRF] = "drf"};

#define NS_MS 1000000LL
#define NS_S 1000000000LL
#define TIME_LIMIT_MSG "a time limit is whole seconds, at least 1s"

static int check_policy(sx_t *x, const sval_t *v, void *obj)
{
    arb_profile_t p;
    const spec_sched_t *s = obj;

    if (arb_profile_lookup(s->policy, &p, x->err) < 0)
        return sv_prefix(x, v, -EINVAL, true);
    return 0;
}

/* maxTimeLimit below defaultTimeLimit (of the same object, or the one it
 * had before this file) is refused at maxTimeLimit. */
static int check_limits(sx_t *x, const sval_t *map, int64_t def_s, int64_t max_s)
{
    sval_t f;

    if (sv_get(map, "maxTimeLimit", &f) && def_s > max_s)
        return sv_fail(x, &f, -EINVAL,
                       "maxTimeLimit %llds is below defaultTimeLimit %llds; raise it or lower "
                       "the default",
                       (long long)max_s, (long long)def_s);
    return 0;
}

static int rule_sched_limits(sx_t *x, const sval_t *map, void *obj)
{
    const spec_sched_t *s = obj;

    return check_limits(x, map, s->default_limit_s, s->max_limit_s);
}

#define LIMITS_RULE "maxTimeLimit is not below defaultTimeLimit"

#define SCHED(field) offsetof(spec_sched_t, field)

static const sc_field_t sched_fields[] = {
    {.key = "policy",
     .type = SC_STR,
     .off = SCHED(policy),
     .size = 32,
     .check = check_policy,
     .def_doc = "default",
     .help = "scoring profile (pack, spread, fgd, ...)",
     .ctx = SC_CTX_SCENARIO},
    {.key = "policy",
     .type = SC_STR,
     .off = SCHED(policy),
     .size = 32,
     .check = check_policy,
     .def = "default",
     .help = "scoring profile (pack, spread, fgd, ...)",
     .ctx = SC_CTX_CONFIG},
    {.key = "queue",
     .type = SC_ENUM,
     .off = SCHED(queue_policy),
     .names = queue_orders,
     .nnames = 3,
     .def = "fifo",
     .help = "queue order",
     .ctx = SC_CTX_SCENARIO},
    {.key = "queue",
     .type = SC_ENUM,
     .off = SCHED(queue_policy),
     .names = queue_orders,
     .nnames = 3,
     .def = "priority",
     .help = "queue order",
     .ctx = SC_CTX_CONFIG},
    {.key = "backfill",
     .type = SC_BOOL,
     .off = SCHED(backfill),
     .def = "false",
     .help = "EASY backfill behind a blocked head job"},
    {.key = "preemption",
     .type = SC_BOOL,
     .off = SCHED(preemption),
     .def = "false",
     .help = "evict lower-priority preemptible jobs"},
    {.key = "starvation",
     .type = SC_DURATION,
     .off = SCHED(starvation_ns),
     .def = "0",
     .def_doc = "0 (off)",
     .help = "a job waiting longer goes first"},
    {.key = "interval",
     .type = SC_DURATION,
     .off = SCHED(interval_ns),
     .lo = NS_MS,
     .hi = INT64_MAX,
     .range_msg = "the interval must be at least 1ms",
     .def = "1s",
     .help = "a cycle at least this often (and after changes)",
     .ctx = SC_CTX_CONFIG},
    {.key = "defaultTimeLimit",
     .type = SC_DURATION,
     .off = SCHED(default_limit_s),
     .lo = NS_S,
     .hi = INT64_MAX,
     .range_msg = TIME_LIMIT_MSG,
     .flags = SC_SECONDS,
     .help = "the timeLimit of a job that gives none, in a queue without its own (Slurm's "
             "DefaultTime)",
     .ctx = SC_CTX_CONFIG},
    {.key = "maxTimeLimit",
     .type = SC_DURATION,
     .off = SCHED(max_limit_s),
     .lo = NS_S,
     .hi = INT64_MAX,
     .range_msg = TIME_LIMIT_MSG,
     .flags = SC_SECONDS,
     .help = "the longest timeLimit a job may ask for, in a queue without its own (Slurm's "
             "MaxTime); a job that gives none gets it when there is no default",
     .ctx = SC_CTX_CONFIG},
    {.key = "defaultTimeLimit, maxTimeLimit",
     .type = SC_RULE,
     .check = rule_sched_limits,
     .help = LIMITS_RULE,
     .ctx = SC_CTX_CONFIG},
    {.key = NULL},
};

const sc_table_t spec_sched_table = {"scheduler", sched_fields, NULL};

/* ---- queues ------------------------------------------------------------------ */

static int check_queue_name(sx_t *x, const sval_t *v, void *obj)
{
    const spec_queue_t *q = obj;

    if (!strcmp(q->name, "default"))
        return sv_fail(x, v, -EINVAL,
                       "'default' is the quota-less queue of jobs without queue:; give this "
                       "queue another name");
    return 0;
}

static int read_quota(sx_t *x, const sval_t *v, arb_res_t *out)
{
    rmap_t r;
    int rc = scn_rmap(x, v, RM_QUOTA, &r);

    if (rc == 0)
        scn_rmap_to_res(&r, out);
    return rc;
}

static int set_nominal(sx_t *x, const sval_t *v, void *obj)
{
    spec_queue_t *q = obj;

    q->has_quota = true;
    return read_quota(x, v, &q->nominal);
}

static int set_borrow(sx_t *x, const sval_t *v, void *obj)
{
    spec_queue_t *q = obj;

    if (!q->has_quota)
        return sv_fail(x, v, -EINVAL,
                       "borrowingLimit: needs nominal: (the quota it borrows above)");
    return read_quota(x, v, &q->borrow_limit);
}

static int rule_queue_limits(sx_t *x, const sval_t *map, void *obj)
{
    const spec_queue_t *q = obj;

    return check_limits(x, map, q->default_limit_s, q->max_limit_s);
}

#define QUEUE(field) offsetof(spec_queue_t, field)
#define QUOTA_DOC "resources"

static const sc_field_t queue_fields[] = {
    {.key = "name",
     .type = SC_STR,
     .off = QUEUE(name),
     .size = SPEC_STR,
     .check = check_queue_name,
     .flags = SC_REQUIRED,
     .help = "the queue's name, unique",
     .ctx = SC_CTX_SCENARIO},
    {.key = "name",
     .type = SC_STR,
     .off = QUEUE(name),
     .size = 64,
     .check = check_queue_name,
     .flags = SC_REQUIRED,
     .help = "the queue's name, unique",
     .ctx = SC_CTX_CONFIG},
    {.key = "cohort",
     .type = SC_STR,
     .off = QUEUE(cohort),
     .size = SPEC_STR,
     .flags = SC_EMPTY_OK,
     .help = "queues of one cohort lend each other unused quota",
     .ctx = SC_CTX_SCENARIO},
    {.key = "cohort",
     .type = SC_STR,
     .off = QUEUE(cohort),
     .size = 64,
     .flags = SC_EMPTY_OK,
     .help = "queues of one cohort lend each other unused quota",
     .ctx = SC_CTX_CONFIG},
    {.key = "weight",
     .type = SC_DOUBLE,
     .off = QUEUE(weight),
     .dlo = 0.001,
     .dhi = 1e6,
     .def = "1",
     .help = "the queue's share in drf order (0.001..1e6)"},
    {.key = "nominal",
     .type = SC_CUSTOM,
     .set = set_nominal,
     .type_doc = QUOTA_DOC,
     .help = "the quota ({nvidia.com/gpu: 16, cpu: 128, memory: 1Ti, ...}); none: no quota"},
    {.key = "borrowingLimit",
     .type = SC_CUSTOM,
     .set = set_borrow,
     .type_doc = QUOTA_DOC,
     .help = "the most it borrows above nominal from its cohort (needs nominal)"},
    {.key = "defaultTimeLimit",
     .type = SC_DURATION,
     .off = QUEUE(default_limit_s),
     .lo = NS_S,
     .hi = INT64_MAX,
     .range_msg = TIME_LIMIT_MSG,
     .flags = SC_SECONDS,
     .help = "the timeLimit of this queue's jobs that give none",
     .ctx = SC_CTX_CONFIG},
    {.key = "maxTimeLimit",
     .type = SC_DURATION,
     .off = QUEUE(max_limit_s),
     .lo = NS_S,
     .hi = INT64_MAX,
     .range_msg = TIME_LIMIT_MSG,
     .flags = SC_SECONDS,
     .help = "the longest timeLimit this queue's jobs may ask for",
     .ctx = SC_CTX_CONFIG},
    {.key = "defaultTimeLimit, maxTimeLimit",
     .type = SC_RULE,
     .check = rule_queue_limits,
     .help = LIMITS_RULE,
     .ctx = SC_CTX_CONFIG},
    {.key = NULL},
};

const sc_table_t spec_queue_table = {"queue", queue_fields, NULL};

int spec_queues_read(sx_t *x, const sval_t *v, unsigned ctx, spec_queue_t **out, int *n)
{
    int count, rc = sv_seq(x, v, SPEC_MAX_QUEUES, &count);
    spec_queue_t *q = NULL;
    arb_err_t ierr;
    void *it = NULL;

    *out = NULL;
    *n = 0;
    if (rc < 0 || count == 0)
        return rc;
    if (!(q = calloc((size_t)count, sizeof *q)))
        return sv_oom(x, v);
    for (int i = 0; i < count && rc == 0; i++) {
        sval_t qv, f;
        bool is;
        sv_item(&qv, v, fy_node_sequence_iterate(v->n, &it), i);
        if ((rc = sc_init(&spec_queue_table, ctx, &q[i], &ierr)) < 0)
            rc = sv_fail(x, &qv, rc, "%s", ierr.msg);
        else if ((rc = sv_map(x, &qv, &is)) == 0 && !is)
            rc = sv_fail(x, &qv, -EINVAL, "a queue needs at least a name:");
        else if (rc == 0 && (rc = sc_walk(x, &qv, &spec_queue_table, ctx, &q[i])) == 0)
            for (int k = 0; k < i && rc == 0; k++)
                if (!strcmp(q[k].name, q[i].name) && sv_get(&qv, "name", &f))
                    rc = sv_fail(x, &f, -EINVAL, "queue '%s' is defined twice", q[i].name);
    }
    if (rc < 0) {
        free(q);
        return rc;
    }
    *out = q;
    *n = count;
    return 0;
}
