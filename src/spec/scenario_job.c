/*
 * scenario_job.c: a job spec (a scenario's jobs[] item, or a lone job for
 * `arbiter submit`): its groups (replicas, elastic {min, max}, resources,
 * topology), priority (a number or a class from the caller's table),
 * queue, gang and time limits. Its requests and limits are read in
 * scenario_res.c, its affinity and tolerations in scenario_match.c.
 */
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libfyaml.h>

#include "spec/scenario_int.h"

static const char *const levels[] = {[ARB_TOPO_NVLINK] = "nvlink",
                                     [ARB_TOPO_NODE] = "node",
                                     [ARB_TOPO_RACK] = "rack",
                                     [ARB_TOPO_BLOCK] = "block"};
static const char *const topo_modes[] = {"preferred", "required"};
static const char *const sharing_modes[] = {"allow", "deny"};

/* topology: {level, mode} read into this, then into the group's request. */
typedef struct topo_rd {
    int level, mode;
} topo_rd_t;

static const sc_field_t topo_fields[] = {
    {.key = "level",
     .type = SC_ENUM,
     .off = offsetof(topo_rd_t, level),
     .names = levels,
     .nnames = 5,
     .flags = SC_REQUIRED,
     .missing = "missing level: (nvlink, node, rack or block)",
     .help = "where the group's tasks must be together (topology: nvlink is {level: nvlink})"},
    {.key = "mode",
     .type = SC_ENUM,
     .off = offsetof(topo_rd_t, mode),
     .names = topo_modes,
     .nnames = 2,
     .def = "required",
     .help = "required holds the job back until it fits; preferred only scores"},
    {.key = NULL},
};
static const sc_table_t topo_table = {"topology", topo_fields, NULL};

/* replicas: {min: 2, max: 8}: an elastic group; min is its gang minimum,
 * the group's replicas the max. Every rank up to max is a task record from
 * the start (the job's size changes, its task table does not), so max is
 * held to ELASTIC_MAX: 4,096 ranks, 32,768 GPUs at 8 per task. */
#define ELASTIC_MAX 4096
#define ELASTIC_BOTH "elastic replicas need both min: and max: (e.g. {min: 2, max: 8})"

typedef struct elastic_rd {
    int min, max;
} elastic_rd_t;

static int rule_min_max(sx_t *x, const sval_t *map, void *obj)
{
    const elastic_rd_t *e = obj;
    sval_t a;

    if (e->min <= e->max)
        return 0;
    sv_get(map, "min", &a);
    return sv_fail(x, &a, -EINVAL, "min %d is above max %d; give min <= max", e->min, e->max);
}

static const sc_field_t elastic_fields[] = {
    {.key = "min",
     .type = SC_INT,
     .off = offsetof(elastic_rd_t, min),
     .size = sizeof(int),
     .lo = 1,
     .hi = ELASTIC_MAX,
     .flags = SC_REQUIRED,
     .missing = ELASTIC_BOTH,
     .help = "the ranks the job starts with at least (its gang minimum)"},
    {.key = "max",
     .type = SC_INT,
     .off = offsetof(elastic_rd_t, max),
     .size = sizeof(int),
     .lo = 1,
     .hi = ELASTIC_MAX,
     .flags = SC_REQUIRED,
     .missing = ELASTIC_BOTH,
     .help = "the ranks it grows to when there is room"},
    {.key = "min, max", .type = SC_RULE, .check = rule_min_max, .help = "min <= max"},
    {.key = NULL},
};
static const sc_table_t elastic_table = {"elastic replicas", elastic_fields, NULL};

/* ---- a group's fields: setters of its table (a groups[] item, or the job's
 * one group when the job has no groups:) ------------------------------------ */

#define GROUP(field) offsetof(arb_tgroup_t, field)

/* topology: nvlink  ==  {level: nvlink} */
static int read_topology(sx_t *x, const sval_t *v, arb_topo_req_t *t)
{
    topo_rd_t rd = {.level = 0, .mode = 1};
    int rc = sv_no_alias(x, v);

    if (rc < 0 || sv_null(v))
        return rc;
    if (fy_node_is_scalar(v->n))
        rc = sv_enum(x, v, levels, 5, &rd.level);
    else
        rc = sc_walk(x, v, &topo_table, SC_CTX_SCENARIO, &rd);
    if (rc < 0)
        return rc;
    t->level = (arb_topo_level_t)rd.level;
    t->required = rd.mode == 1;
    return 0;
}

static int set_group_topology(sx_t *x, const sval_t *v, void *g)
{
    return read_topology(x, v, &((arb_tgroup_t *)g)->topo);
}

static int set_group_resources(sx_t *x, const sval_t *v, void *g)
{
    return scn_resources(x, v, g);
}

/* A groups[] item's replicas: a number (elastic is for a one-group job). */
static int set_group_replicas(sx_t *x, const sval_t *v, void *at)
{
    if (!sv_null(v) && fy_node_is_mapping(v->n))
        return sv_fail(x, v, -EINVAL,
                       "elastic replicas {min, max} are for a one-group job; give this "
                       "group a number");
    return sv_int32(x, v, 1, 100000, at);
}

/* An NVLink requirement, in group g of the object in map. */
static int nvlink_rule(sx_t *x, const sval_t *map, const arb_tgroup_t *g)
{
    sval_t f;

    if (g->topo.level != ARB_TOPO_NVLINK || !g->topo.required || g->gpus != 0)
        return 0;
    if (!sv_get(map, "topology", &f))
        f = *map;
    return sv_fail(x, &f, -EINVAL, "an NVLink requirement needs whole GPUs (%s) in the request",
                   RES_GPU);
}

static int rule_group_nvlink(sx_t *x, const sval_t *map, void *g)
{
    return nvlink_rule(x, map, g);
}

#define NVLINK_HELP "topology nvlink (required) needs whole GPUs (nvidia.com/gpu) in the requests"

/* A group's name: read as text of at most ARB_GROUP_NAME_MAX - 1 bytes, kept
 * through the group's setter (job.h). */
static int set_group_name(sx_t *x, const sval_t *v, void *g)
{
    char buf[ARB_GROUP_NAME_MAX];
    int rc = sv_text(x, v, buf, sizeof buf, false);

    if (rc < 0)
        return rc;
    return arb_tgroup_set_name(g, buf) < 0 ? sv_oom(x, v) : 0;
}

static const sc_field_t group_fields[] = {
    {.key = "name",
     .type = SC_CUSTOM,
     .set = set_group_name,
     .flags = SC_WHOLE,
     .type_doc = "string",
     .def_doc = "group-I",
     .help = "unique in the job"},
    {.key = "replicas",
     .type = SC_CUSTOM,
     .off = GROUP(replicas),
     .set = set_group_replicas,
     .type_doc = "int",
     .def = "1",
     .help = "tasks of the group"},
    {.key = "resources",
     .type = SC_OBJECT,
     .sub = &scn_resources_table,
     .set = set_group_resources,
     .flags = SC_WHOLE},
    {.key = "topology",
     .type = SC_OBJECT,
     .sub = &topo_table,
     .set = set_group_topology,
     .flags = SC_WHOLE},
    {.key = "topology, resources",
     .type = SC_RULE,
     .check = rule_group_nvlink,
     .help = NVLINK_HELP},
    {.key = NULL},
};
static const sc_table_t group_table = {"group", group_fields, NULL};

/* ---- the job's own fields: setters of its table ---------------------------- */

#define JOB(field) offsetof(arb_job_t, field)
#define JOB_NAME_MAX (ARB_JOB_NAME_MAX - 8) /* room for count:'s -K */

/* groups: j->ngroups of them (scn_job sized the job by the list), each
 * read through the group table, their names unique. */
static int set_groups(sx_t *x, const sval_t *v, void *obj)
{
    arb_job_t *j = obj;
    void *it = NULL;
    sval_t iv, f;
    bool is;
    int rc;

    for (int i = 0; i < j->ngroups; i++) {
        sv_item(&iv, v, fy_node_sequence_iterate(v->n, &it), i);
        if ((rc = sv_map(x, &iv, &is)) < 0)
            return rc;
        if (!is)
            return sv_fail(x, &iv, -EINVAL, "a group needs resources: at least");
        char dflt[ARB_GROUP_NAME_MAX];
        snprintf(dflt, sizeof dflt, "group-%d", i);
        if (arb_tgroup_set_name(&j->groups[i], dflt) < 0)
            return sv_oom(x, &iv);
        if ((rc = sc_walk(x, &iv, &group_table, SC_CTX_SCENARIO, &j->groups[i])) < 0)
            return rc;
        for (int k = 0; k < i; k++)
            if (!strcmp(j->groups[k].name, j->groups[i].name)) {
                sv_get(&iv, "name", &f);
                return sv_fail(x, &f, -EINVAL, "group name '%s' is used twice in this job",
                               j->groups[i].name);
            }
    }
    return 0;
}

/* The job's one group (no groups:, rule_lone_fields): replicas, a number
 * or {min, max} (elastic: the min is the gang minimum, the max the
 * replicas). */
static int set_replicas(sx_t *x, const sval_t *v, void *obj)
{
    arb_job_t *j = obj;
    elastic_rd_t e = {0, 0};
    int rc;

    if (sv_null(v) || !fy_node_is_mapping(v->n))
        return sv_int32(x, v, 1, 100000, &j->groups[0].replicas);
    if ((rc = sc_walk(x, v, &elastic_table, SC_CTX_SCENARIO, &e)) < 0)
        return rc;
    j->groups[0].replicas = e.max;
    j->gang_min = e.min;
    j->elastic = true;
    return 0;
}

static int set_resources(sx_t *x, const sval_t *v, void *obj)
{
    return scn_resources(x, v, &((arb_job_t *)obj)->groups[0]);
}

static int set_topology(sx_t *x, const sval_t *v, void *obj)
{
    return read_topology(x, v, &((arb_job_t *)obj)->groups[0].topo);
}

static int priority_from_table(sx_t *x, const sval_t *pc, const char *name, arb_job_t *j)
{
    const spec_prio_table_t *t = x->classes;
    char list[512];
    size_t used = 0;

    for (int i = 0; i < t->n; i++)
        if (strcmp(t->v[i].name, name) == 0) {
            j->priority = t->v[i].value;
            if (t->v[i].preemptible >= 0)
                j->preemptible = t->v[i].preemptible > 0;
            return 0;
        }
    list[0] = '\0';
    for (int i = 0; i < t->n && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s (%d)", i ? ", " : "",
                                 t->v[i].name, (int)t->v[i].value);
    return sv_fail(x, pc, -EINVAL,
                   "unknown priority class '%s'; the defined classes are %s (GET "
                   "/v1/priorityclasses), or give priority: N",
                   name, t->n ? list : "none");
}

/* priorityClassName: the caller's classes (x->classes: the priority and
 * maybe preemptible), else the built-in ones. */
static int set_priority_class(sx_t *x, const sval_t *v, void *obj)
{
    arb_job_t *j = obj;
    char buf[64];
    int rc = sv_text(x, v, buf, sizeof buf, false);

    if (rc < 0)
        return rc;
    if (x->classes)
        return priority_from_table(x, v, buf, j);
    if (spec_priority_class(buf, &j->priority) < 0)
        return sv_fail(x, v, -EINVAL,
                       "unknown priority class '%s'; use best-effort (0), low (100), normal "
                       "(500), high (1000) or critical (10000), or give priority: N",
                       buf);
    return 0;
}

/* queue: interned (0 for "default"), one of queues: when any is defined. */
static int set_queue(sx_t *x, const sval_t *v, void *at)
{
    uint32_t *queue = at;
    char buf[SPEC_STR];
    int rc = sv_text(x, v, buf, sizeof buf, false);

    if (rc < 0)
        return rc;
    *queue = 0;
    if (strcmp(buf, "default") != 0 && (rc = scn_intern(x, v, buf, queue)) < 0)
        return rc;
    if (x->nqueues > 0 && *queue) {
        int q;
        for (q = 0; q < x->nqueues && x->queues[q].name != *queue; q++)
            ;
        if (q == x->nqueues)
            return sv_fail(x, v, -EINVAL,
                           "unknown queue '%s'; define it under queues: or leave queue: out", buf);
    }
    return 0;
}

/* dataset: interned. */
static int set_dataset(sx_t *x, const sval_t *v, void *at)
{
    char buf[SPEC_STR];
    int rc = sv_text(x, v, buf, sizeof buf, false);

    return rc < 0 ? rc : scn_intern(x, v, buf, at);
}

/* gpuSharing: allow 1, deny -1 (arb_job_finalize applies it). Isolation: a
 * GPU is shared only by tasks that all allow it. A GPU-share task that
 * denies sharing gets a GPU of its own (whole GPUs are never shared), so
 * no other task can land on it. */
static int set_sharing(sx_t *x, const sval_t *v, void *at)
{
    int m = 0, rc = sv_enum(x, v, sharing_modes, 2, &m);

    if (rc == 0)
        *(int8_t *)at = m == 0 ? 1 : -1;
    return rc;
}

/* nodeSelector: {label: value}, keys and values interned. */
static int set_selector(sx_t *x, const sval_t *v, void *obj)
{
    arb_job_t *j = obj;
    char buf[SPEC_STR];
    void *it = NULL;
    struct fy_node_pair *p;
    sval_t iv;
    bool is;
    int count, rc = sv_map(x, v, &is);

    if (rc < 0)
        return rc;
    count = is ? fy_node_mapping_item_count(v->n) : 0;
    if (count > SPEC_MAX_LIST)
        return sv_fail(x, v, -EINVAL, "%d labels; the most is %d", count, SPEC_MAX_LIST);
    if (count > 0 && !(j->selector = calloc((size_t)count, sizeof *j->selector)))
        return sv_oom(x, v);
    while (is && j->nselector < count && (p = fy_node_mapping_iterate(v->n, &it))) {
        size_t len = 0;
        const char *k = sv_key_text(fy_node_pair_key(p), &len);
        arb_label_t *l = &j->selector[j->nselector];
        sv_pair(&iv, v, p);
        if (!k || len >= sizeof buf) {
            iv.n = fy_node_pair_key(p) ? fy_node_pair_key(p) : iv.n;
            return sv_fail(x, &iv, -EINVAL, "label keys are plain names");
        }
        memcpy(buf, k, len);
        buf[len] = '\0';
        if ((rc = scn_intern(x, &iv, buf, &l->key)) < 0 ||
            (rc = sv_text(x, &iv, buf, sizeof buf, true)) < 0 ||
            (rc = scn_intern(x, &iv, buf, &l->val)) < 0)
            return rc;
        j->nselector++;
    }
    return 0;
}

static int set_affinity(sx_t *x, const sval_t *v, void *obj)
{
    return scn_affinity(x, v, obj);
}

static int set_tolerations(sx_t *x, const sval_t *v, void *obj)
{
    return scn_tolerations(x, v, obj);
}

/* gpuModels: [model, ...], interned. */
static int set_models(sx_t *x, const sval_t *v, void *obj)
{
    arb_job_t *j = obj;
    char buf[SPEC_STR];
    void *it = NULL;
    sval_t iv;
    int count, rc = sv_seq(x, v, SPEC_MAX_LIST, &count);

    if (rc < 0)
        return rc;
    if (count && !(j->models = calloc((size_t)count, sizeof *j->models)))
        return sv_oom(x, v);
    for (int i = 0; i < count; i++) {
        sv_item(&iv, v, fy_node_sequence_iterate(v->n, &it), i);
        if ((rc = sv_text(x, &iv, buf, sizeof buf, false)) < 0 ||
            (rc = scn_intern(x, &iv, buf, &j->models[j->nmodels])) < 0)
            return rc;
        j->nmodels++;
    }
    return 0;
}

/* ---- the job's rules between fields ------------------------------------------ */

/* count: only where it means something (a scenario's jobs[]). */
static int rule_count(sx_t *x, const sval_t *map, void *obj)
{
    sval_t f;

    if (x->lone_job && sv_get(map, "count", &f))
        return sv_fail(x, &f, -EINVAL, "count: repeats a job in a scenario; submit one job here");
    return 0;
}

/* groups: or the one group's replicas, resources and topology on the job. */
static int rule_lone_fields(sx_t *x, const sval_t *map, void *obj)
{
    static const char *const lone[] = {"replicas", "resources", "topology"};
    sval_t f;

    if (!sv_get(map, "groups", &f))
        return 0;
    for (int i = 0; i < 3; i++)
        if (sv_get(map, lone[i], &f))
            return sv_fail(x, &f, -EINVAL,
                           "%s: belongs inside each of groups:, or drop groups: for a "
                           "one-group job",
                           lone[i]);
    return 0;
}

static int rule_job_nvlink(sx_t *x, const sval_t *map, void *obj)
{
    const arb_job_t *j = obj;
    sval_t f;

    return sv_get(map, "groups", &f) ? 0 : nvlink_rule(x, map, &j->groups[0]);
}

static int rule_elastic_gang(sx_t *x, const sval_t *map, void *obj)
{
    const arb_job_t *j = obj;
    sval_t f;

    if (j->elastic && sv_get(map, "gangMin", &f))
        return sv_fail(x, &f, -EINVAL,
                       "replicas {min, max} already sets the gang minimum; drop gangMin");
    return 0;
}

static int job_tasks(const arb_job_t *j)
{
    int64_t n = 0;

    for (int i = 0; i < j->ngroups; i++)
        n += j->groups[i].replicas;
    return n > INT_MAX ? INT_MAX : (int)n;
}

static int rule_tasks(sx_t *x, const sval_t *map, void *obj)
{
    int64_t ntasks = job_tasks(obj);
    sval_t f;

    if (ntasks <= SPEC_MAX_JOB_TASKS)
        return 0;
    if (!sv_get(map, "groups", &f))
        f = *map;
    return sv_fail(x, &f, -EINVAL,
                   "%" PRId64 " tasks; a job has at most %d (the sum of its replicas)", ntasks,
                   SPEC_MAX_JOB_TASKS);
}

static int rule_priority(sx_t *x, const sval_t *map, void *obj)
{
    sval_t f, pc;

    if (sv_get(map, "priority", &f) && sv_get(map, "priorityClassName", &pc))
        return sv_fail(x, &pc, -EINVAL, "give priority: or priorityClassName:, not both");
    return 0;
}

/* gangMin: 0..the job's tasks (read as any int32 by its row). */
static int rule_gang_min(sx_t *x, const sval_t *map, void *obj)
{
    const arb_job_t *j = obj;
    int total = job_tasks(j);
    sval_t f;

    if (!sv_get(map, "gangMin", &f) || (j->gang_min >= 0 && j->gang_min <= total))
        return 0;
    return sv_fail(x, &f, -EINVAL, "gangMin must be 0..%d (the job's tasks; 0 means all)", total);
}

/* The job's name: text of at most JOB_NAME_MAX - 1 bytes, kept through the
 * job's setter (job.h). */
static int set_job_name(sx_t *x, const sval_t *v, void *obj)
{
    char buf[JOB_NAME_MAX];
    int rc = sv_text(x, v, buf, sizeof buf, false);

    if (rc < 0)
        return rc;
    return arb_job_set_name(obj, buf) < 0 ? sv_oom(x, v) : 0;
}

/* A job in a scenario; a lone job spec has the same fields (count: is
 * refused there with a word of its own). Every field is read by its row,
 * in table order (scn_job sizes the job by groups: first); the rules
 * between fields are rows where they are checked: a rule row runs after
 * the rows above it (gangMin's range after groups and replicas), and
 * priorityClassName sits above preemptible, so an explicit preemptible:
 * wins over its class's. */
static const sc_field_t job_fields[] = {
    {.key = "count",
     .type = SC_RULE,
     .check = rule_count,
     .help = "only in a scenario's jobs[]; a lone job spec is one job"},
    {.key = "name",
     .type = SC_CUSTOM,
     .set = set_job_name,
     .type_doc = "string",
     .flags = SC_REQUIRED | SC_WHOLE,
     .missing = "missing name:; give every job a unique name",
     .help = "unique; with count: N the jobs are NAME-1 .. NAME-N"},
    {.key = "queue",
     .type = SC_CUSTOM,
     .off = JOB(queue),
     .set = set_queue,
     .type_doc = "string",
     .def = "default",
     .help = "a queue under queues: (when any is defined); default is the quota-less queue"},
    {.key = "priority, priorityClassName",
     .type = SC_RULE,
     .check = rule_priority,
     .help = "give priority or priorityClassName, not both"},
    {.key = "priority",
     .type = SC_INT,
     .off = JOB(priority),
     .size = sizeof(int32_t),
     .lo = INT32_MIN,
     .hi = INT32_MAX,
     .def = "0",
     .type_doc = "int32",
     .help = "higher runs first and may preempt lower"},
    {.key = "priorityClassName",
     .type = SC_CUSTOM,
     .set = set_priority_class,
     .flags = SC_WHOLE,
     .type_doc = "string",
     .help = "best-effort 0, low 100, normal 500, high 1000, critical 10000 (or the controller's "
             "priorityClasses); not together with priority"},
    {.key = "preemptible",
     .type = SC_BOOL,
     .off = JOB(preemptible),
     .def = "true",
     .help = "whether higher-priority jobs may evict it"},
    {.key = "gangMin",
     .type = SC_INT,
     .off = JOB(gang_min),
     .size = sizeof(int),
     .lo = INT32_MIN,
     .hi = INT32_MAX,
     .range_msg = "gangMin must be 0..the job's tasks (0 means all)",
     .def_doc = "all tasks",
     .help = "how many tasks must start together (0..task count; 0 = all); below the task count "
             "the rest start as room frees"},
    {.key = "timeLimit",
     .type = SC_DURATION,
     .off = JOB(time_limit_s),
     .flags = SC_SECONDS,
     .range_msg = "is counted in whole seconds; give 1s or more (as 90s, 2m)",
     .def_doc = "unlimited, or its queue's defaultTimeLimit",
     .help = "whole seconds: 3600, 90m, 1h30m, 1d; enforced: SIGTERM, the grace, SIGKILL, state "
             "timeout"},
    {.key = "dataset",
     .type = SC_CUSTOM,
     .off = JOB(dataset),
     .set = set_dataset,
     .type_doc = "string",
     .help = "preferred on nodes that cache it"},
    {.key = "nodeSelector",
     .type = SC_CUSTOM,
     .set = set_selector,
     .flags = SC_WHOLE,
     .type_doc = "map",
     .def_doc = "none",
     .help = "labels that must all match"},
    {.key = "affinity",
     .type = SC_OBJECT,
     .sub = &scn_affinity_table,
     .set = set_affinity,
     .flags = SC_WHOLE},
    {.key = "tolerations",
     .type = SC_CUSTOM,
     .sub = &scn_toleration_table,
     .set = set_tolerations,
     .flags = SC_LIST | SC_WHOLE,
     .type_doc = "list",
     .def_doc = "[]",
     .help = "the taints the job tolerates"},
    {.key = "gpuModels",
     .type = SC_CUSTOM,
     .set = set_models,
     .flags = SC_WHOLE,
     .type_doc = "list of strings",
     .def_doc = "any",
     .help = "allowed GPU models"},
    {.key = "groups, replicas, resources, topology",
     .type = SC_RULE,
     .check = rule_lone_fields,
     .help = "with groups:, replicas, resources and topology go inside each group"},
    {.key = "groups",
     .type = SC_CUSTOM,
     .sub = &group_table,
     .set = set_groups,
     .flags = SC_LIST | SC_WHOLE,
     .type_doc = "list",
     .def_doc = "one group, main",
     .help = "task groups (at most 256); without groups, replicas, resources and topology sit on "
             "the job itself (one group named main)"},
    {.key = "replicas",
     .type = SC_CUSTOM,
     .sub = &elastic_table,
     .set = set_replicas,
     .flags = SC_WHOLE,
     .type_doc = "int or {min, max}",
     .def = "1",
     .help = "tasks of a one-group job, 1..100000; {min, max}: elastic, grown and shrunk between "
             "them"},
    {.key = "resources",
     .type = SC_OBJECT,
     .sub = &scn_resources_table,
     .set = set_resources,
     .flags = SC_WHOLE},
    {.key = "topology",
     .type = SC_OBJECT,
     .sub = &topo_table,
     .set = set_topology,
     .flags = SC_WHOLE},
    {.key = "topology, resources", .type = SC_RULE, .check = rule_job_nvlink, .help = NVLINK_HELP},
    {.key = "gangMin, replicas",
     .type = SC_RULE,
     .check = rule_elastic_gang,
     .help = "replicas {min, max} sets the gang minimum (its min): not with gangMin"},
    {.key = "groups, replicas",
     .type = SC_RULE,
     .check = rule_tasks,
     .help = "a job has at most 100000 tasks (the sum of its replicas)"},
    {.key = "gangMin, groups, replicas",
     .type = SC_RULE,
     .check = rule_gang_min,
     .help = "gangMin is 0..the job's tasks"},
    {.key = "count",
     .type = SC_INT,
     .flags = SC_HAND,
     .lo = 1,
     .hi = SPEC_MAX_JOBS,
     .def = "1",
     .help = "scenarios only: how many identical jobs arrive here (NAME-1 .. NAME-N); read by "
             "the jobs list (it repeats the job)"},
    {.key = "terminationGracePeriodSeconds",
     .type = SC_INT,
     .off = JOB(grace_s),
     .size = sizeof(int32_t),
     .lo = 0,
     .hi = ARB_GRACE_MAX_S,
     .def_doc = "the agent's --grace (10 s)",
     .help = "0..3600: on preempt, cancel or shrink, SIGTERM to each task's process group, SIGKILL "
             "this long after"},
    {.key = "gpuSharing",
     .type = SC_CUSTOM,
     .off = JOB(gpu_sharing),
     .set = set_sharing,
     .type_doc = "allow\\|deny",
     .def_doc = "shares share, whole GPUs do not",
     .help = "deny gives a GPU-share task a GPU of its own"},
    {.key = "exclusive",
     .type = SC_BOOL,
     .off = JOB(exclusive),
     .def = "false",
     .help = "true: each task goes to a node with no other task on it, and no other job's task "
             "joins it there (sbatch --exclusive)"},
    {.key = NULL},
};
const sc_table_t scn_job_table = {"job", job_fields, NULL};

/* One job (instance k of a job with count:, named NAME-k); *out on success.
 * Its groups live in the job's own allocation, so the job is sized by
 * groups: before its table reads it. */
int scn_job(sx_t *x, const sval_t *v, int k, arb_job_t **out)
{
    sval_t groups;
    arb_job_t *j = NULL;
    int rc, ngroups = 1;
    bool is, has_groups;

    if ((rc = sv_map(x, v, &is)) < 0)
        return rc;
    if (!is)
        return sv_fail(x, v, -EINVAL, "a job needs at least a name: and resources:");
    if ((rc = sc_check_keys(x, v, &scn_job_table, SC_CTX_SCENARIO)) < 0)
        return rc;
    has_groups = sv_get(v, "groups", &groups);
    if (has_groups) {
        if ((rc = sv_seq(x, &groups, SPEC_MAX_GROUPS, &ngroups)) < 0)
            return rc;
        if (ngroups == 0)
            return sv_fail(x, &groups, -EINVAL, "groups: needs at least one group");
    }
    j = arb_job_new(NULL, ngroups);
    if (!j)
        return sv_oom(x, v);
    if (!has_groups && arb_tgroup_set_name(&j->groups[0], "main") < 0) {
        arb_job_free(j);
        return sv_oom(x, v);
    }
    rc = sc_walk_fields(x, v, &scn_job_table, SC_CTX_SCENARIO, j);
    if (rc == 0 && k > 0) {
        char nm[ARB_JOB_NAME_MAX];
        snprintf(nm, sizeof nm, "%s-%d", j->name, k);
        if (arb_job_set_name(j, nm) < 0)
            rc = sv_oom(x, v);
    }
    if (rc == 0 && (rc = arb_job_finalize(j, x->err)) < 0)
        rc = sv_prefix(x, v, rc, true);
    if (rc < 0) {
        arb_job_free(j);
        return rc;
    }
    *out = j;
    return 0;
}
