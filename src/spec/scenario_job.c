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

static const sc_field_t topo_fields[] = {
    {.key = "level",
     .type = SC_ENUM,
     .names = levels,
     .nnames = 5,
     .flags = SC_REQUIRED,
     .help = "where the group's tasks must be together (topology: nvlink is {level: nvlink})"},
    {.key = "mode",
     .type = SC_ENUM,
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

static const sc_field_t elastic_fields[] = {
    {.key = "min",
     .type = SC_INT,
     .lo = 1,
     .hi = ELASTIC_MAX,
     .flags = SC_REQUIRED,
     .help = "the ranks the job starts with at least (its gang minimum)"},
    {.key = "max",
     .type = SC_INT,
     .lo = 1,
     .hi = ELASTIC_MAX,
     .flags = SC_REQUIRED,
     .help = "the ranks it grows to when there is room"},
    {.key = NULL},
};
static const sc_table_t elastic_table = {"elastic replicas", elastic_fields, NULL};

static const sc_field_t group_fields[] = {
    {.key = "name", .type = SC_STR, .def_doc = "group-I", .help = "unique in the job"},
    {.key = "replicas",
     .type = SC_INT,
     .lo = 1,
     .hi = 100000,
     .def = "1",
     .help = "tasks of the group"},
    {.key = "resources", .type = SC_OBJECT, .sub = &scn_resources_table},
    {.key = "topology", .type = SC_OBJECT, .sub = &topo_table},
    {.key = NULL},
};
static const sc_table_t group_table = {"group", group_fields, NULL};

/* ---- the job's own fields: setters of its table ---------------------------- */

#define JOB(field) offsetof(arb_job_t, field)

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

/* A job in a scenario; a lone job spec has the same fields (count: is
 * refused there with a word of its own). The flat fields are read through
 * the table (sc_walk in parse_job_fields); the rest (SC_HAND) by hand, for
 * the rules between them: groups or a one-group job, priority or its
 * class, gangMin within the tasks. */
static const sc_field_t job_fields[] = {
    {.key = "name",
     .type = SC_STR,
     .flags = SC_REQUIRED | SC_HAND,
     .help = "unique; with count: N the jobs are NAME-1 .. NAME-N"},
    {.key = "queue",
     .type = SC_CUSTOM,
     .off = JOB(queue),
     .set = set_queue,
     .type_doc = "string",
     .def = "default",
     .help = "a queue under queues: (when any is defined); default is the quota-less queue"},
    {.key = "priority",
     .type = SC_INT,
     .lo = INT32_MIN,
     .hi = INT32_MAX,
     .def = "0",
     .type_doc = "int32",
     .flags = SC_HAND,
     .help = "higher runs first and may preempt lower"},
    {.key = "priorityClassName",
     .type = SC_STR,
     .flags = SC_HAND,
     .help = "best-effort 0, low 100, normal 500, high 1000, critical 10000 (or the controller's "
             "priorityClasses); not together with priority"},
    {.key = "preemptible",
     .type = SC_BOOL,
     .off = JOB(preemptible),
     .def = "true",
     .help = "whether higher-priority jobs may evict it"},
    {.key = "gangMin",
     .type = SC_INT,
     .flags = SC_HAND,
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
     .flags = SC_HAND,
     .type_doc = "map",
     .def_doc = "none",
     .help = "labels that must all match"},
    {.key = "affinity", .type = SC_OBJECT, .sub = &scn_affinity_table, .flags = SC_HAND},
    {.key = "tolerations",
     .type = SC_CUSTOM,
     .sub = &scn_toleration_table,
     .flags = SC_LIST | SC_HAND,
     .type_doc = "list",
     .def_doc = "[]",
     .help = "the taints the job tolerates"},
    {.key = "gpuModels",
     .type = SC_CUSTOM,
     .flags = SC_HAND,
     .type_doc = "list of strings",
     .def_doc = "any",
     .help = "allowed GPU models"},
    {.key = "groups",
     .type = SC_CUSTOM,
     .sub = &group_table,
     .flags = SC_LIST | SC_HAND,
     .type_doc = "list",
     .def_doc = "one group, main",
     .help = "task groups (at most 256); without groups, replicas, resources and topology sit on "
             "the job itself (one group named main)"},
    {.key = "replicas",
     .type = SC_CUSTOM,
     .sub = &elastic_table,
     .flags = SC_HAND,
     .type_doc = "int or {min, max}",
     .def = "1",
     .help = "tasks of a one-group job, 1..100000; {min, max}: elastic, grown and shrunk between "
             "them"},
    {.key = "resources", .type = SC_OBJECT, .sub = &scn_resources_table, .flags = SC_HAND},
    {.key = "topology", .type = SC_OBJECT, .sub = &topo_table, .flags = SC_HAND},
    {.key = "count",
     .type = SC_INT,
     .flags = SC_HAND,
     .lo = 1,
     .hi = SPEC_MAX_JOBS,
     .def = "1",
     .help = "scenarios only: how many identical jobs arrive here (NAME-1 .. NAME-N)"},
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

static int parse_topology(sx_t *x, const sval_t *v, arb_topo_req_t *t)
{
    int level, mode = 1, rc = sv_no_alias(x, v);
    sval_t f;
    bool is;

    if (rc < 0 || sv_null(v))
        return rc;
    if (fy_node_is_scalar(v->n)) { /* topology: nvlink  ==  {level: nvlink} */
        if ((rc = sv_enum(x, v, levels, 5, &level)) < 0)
            return rc;
    } else {
        if ((rc = sv_map(x, v, &is)) < 0 ||
            (rc = sc_check_keys(x, v, &topo_table, SC_CTX_SCENARIO)) < 0)
            return rc;
        if (!sv_get(v, "level", &f))
            return sv_fail(x, v, -EINVAL, "missing level: (nvlink, node, rack or block)");
        if ((rc = sv_enum(x, &f, levels, 5, &level)) < 0)
            return rc;
        if (sv_get(v, "mode", &f) && (rc = sv_enum(x, &f, topo_modes, 2, &mode)) < 0)
            return rc;
    }
    t->level = (arb_topo_level_t)level;
    t->required = mode == 1;
    return 0;
}

/* replicas: {min, max} (elastic_table): *min gets the min, the group's
 * replicas the max. */
static int parse_elastic(sx_t *x, const sval_t *f, arb_tgroup_t *g, int *min)
{
    sval_t a, b;
    int rc;

    if ((rc = sc_check_keys(x, f, &elastic_table, SC_CTX_SCENARIO)) < 0)
        return rc;
    if (!sv_get(f, "min", &a) || !sv_get(f, "max", &b))
        return sv_fail(x, f, -EINVAL,
                       "elastic replicas need both min: and max: (e.g. {min: 2, max: 8})");
    if ((rc = sv_int32(x, &a, 1, ELASTIC_MAX, min)) < 0 ||
        (rc = sv_int32(x, &b, 1, ELASTIC_MAX, &g->replicas)) < 0)
        return rc;
    if (*min > g->replicas)
        return sv_fail(x, &a, -EINVAL, "min %d is above max %d; give min <= max", *min,
                       g->replicas);
    return 0;
}

/* A group's fields, from a groups[] item or from the job itself. *emin
 * (when not NULL) gets an elastic min, else stays 0. */
static int parse_group_el(sx_t *x, const sval_t *v, arb_tgroup_t *g, const char *defname,
                          bool named, int *emin);

static int parse_group(sx_t *x, const sval_t *v, arb_tgroup_t *g, const char *defname, bool named)
{
    return parse_group_el(x, v, g, defname, named, NULL);
}

static int parse_group_el(sx_t *x, const sval_t *v, arb_tgroup_t *g, const char *defname,
                          bool named, int *emin)
{
    sval_t f;
    int rc;
    bool is_map = false;

    snprintf(g->name, sizeof g->name, "%s", defname);
    if (named && sv_get(v, "name", &f) && (rc = sv_text(x, &f, g->name, sizeof g->name, false)) < 0)
        return rc;
    g->replicas = 1;
    if (sv_get(v, "replicas", &f) && !sv_null(&f) && fy_node_is_mapping(f.n)) {
        int min = 0;
        if (!emin)
            return sv_fail(x, &f, -EINVAL,
                           "elastic replicas {min, max} are for a one-group job; give this "
                           "group a number");
        if ((rc = parse_elastic(x, &f, g, &min)) < 0)
            return rc;
        *emin = min;
        is_map = true;
    }
    if (!is_map && sv_get(v, "replicas", &f) && (rc = sv_int32(x, &f, 1, 100000, &g->replicas)) < 0)
        return rc;
    if (sv_get(v, "resources", &f) && (rc = scn_resources(x, &f, g)) < 0)
        return rc;
    if (sv_get(v, "topology", &f) && (rc = parse_topology(x, &f, &g->topo)) < 0)
        return rc;
    if (g->topo.level == ARB_TOPO_NVLINK && g->topo.required && g->gpus == 0)
        return sv_fail(x, &f, -EINVAL, "an NVLink requirement needs whole GPUs (%s) in the request",
                       RES_GPU);
    return 0;
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

static int parse_priority(sx_t *x, const sval_t *v, arb_job_t *j)
{
    sval_t f, pc;
    bool has_prio = sv_get(v, "priority", &f), has_class = sv_get(v, "priorityClassName", &pc);
    char buf[64];
    int rc;

    if (has_prio && has_class)
        return sv_fail(x, &pc, -EINVAL, "give priority: or priorityClassName:, not both");
    if (has_prio)
        return sv_int32(x, &f, INT32_MIN, INT32_MAX, &j->priority);
    if (!has_class)
        return 0;
    if ((rc = sv_text(x, &pc, buf, sizeof buf, false)) < 0)
        return rc;
    if (x->classes)
        return priority_from_table(x, &pc, buf, j);
    if (spec_priority_class(buf, &j->priority) < 0)
        return sv_fail(x, &pc, -EINVAL,
                       "unknown priority class '%s'; use best-effort (0), low (100), normal "
                       "(500), high (1000) or critical (10000), or give priority: N",
                       buf);
    return 0;
}

static int parse_job_fields(sx_t *x, const sval_t *v, arb_job_t *j, const sval_t *groups)
{
    char buf[SPEC_STR];
    sval_t f, iv;
    int rc, count, emin = 0;
    bool is;

    if (groups) {
        void *it = NULL;
        for (int i = 0; i < j->ngroups; i++) {
            char defname[24];
            sv_item(&iv, groups, fy_node_sequence_iterate(groups->n, &it), i);
            if ((rc = sv_map(x, &iv, &is)) < 0)
                return rc;
            if (!is)
                return sv_fail(x, &iv, -EINVAL, "a group needs resources: at least");
            if ((rc = sc_check_keys(x, &iv, &group_table, SC_CTX_SCENARIO)) < 0)
                return rc;
            snprintf(defname, sizeof defname, "group-%d", i);
            if ((rc = parse_group(x, &iv, &j->groups[i], defname, true)) < 0)
                return rc;
            for (int k = 0; k < i; k++)
                if (!strcmp(j->groups[k].name, j->groups[i].name)) {
                    sv_get(&iv, "name", &f);
                    return sv_fail(x, &f, -EINVAL, "group name '%s' is used twice in this job",
                                   j->groups[i].name);
                }
        }
    } else if ((rc = parse_group_el(x, v, &j->groups[0], "main", false, &emin)) < 0) {
        return rc;
    }
    if (emin > 0) {
        j->elastic = true;
        j->gang_min = emin;
        if (sv_get(v, "gangMin", &f))
            return sv_fail(x, &f, -EINVAL,
                           "replicas {min, max} already sets the gang minimum; drop gangMin");
    }
    int64_t ntasks = 0;
    for (int i = 0; i < j->ngroups; i++)
        ntasks += j->groups[i].replicas;
    if (ntasks > SPEC_MAX_JOB_TASKS)
        return sv_fail(x, groups ? groups : v, -EINVAL,
                       "%" PRId64 " tasks; a job has at most %d (the sum of its replicas)", ntasks,
                       SPEC_MAX_JOB_TASKS);
    if ((rc = parse_priority(x, v, j)) < 0)
        return rc;
    /* the flat fields, through the table (after priority: an explicit
     * preemptible: wins over its class's) */
    if ((rc = sc_walk(x, v, &scn_job_table, SC_CTX_SCENARIO, j)) < 0)
        return rc;
    if (sv_get(v, "gangMin", &f)) {
        int total = 0;
        for (int i = 0; i < j->ngroups; i++)
            total += j->groups[i].replicas;
        if ((rc = sv_int32(x, &f, 0, total, &j->gang_min)) < 0)
            return rc == -ERANGE ? sv_fail(x, &f, -EINVAL,
                                           "gangMin must be 0..%d (the job's tasks; 0 means "
                                           "all)",
                                           total)
                                 : rc;
    }
    if (sv_get(v, "nodeSelector", &f)) {
        void *it = NULL;
        struct fy_node_pair *p;
        if ((rc = sv_map(x, &f, &is)) < 0)
            return rc;
        count = is ? fy_node_mapping_item_count(f.n) : 0;
        if (count > SPEC_MAX_LIST)
            return sv_fail(x, &f, -EINVAL, "%d labels; the most is %d", count, SPEC_MAX_LIST);
        if (count > 0 && !(j->selector = calloc((size_t)count, sizeof *j->selector)))
            return sv_oom(x, &f);
        while (is && j->nselector < count && (p = fy_node_mapping_iterate(f.n, &it))) {
            size_t len = 0;
            const char *k = sv_key_text(fy_node_pair_key(p), &len);
            arb_label_t *l = &j->selector[j->nselector];
            sv_pair(&iv, &f, p);
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
    }
    if (sv_get(v, "affinity", &f) && (rc = scn_affinity(x, &f, j)) < 0)
        return rc;
    if (sv_get(v, "tolerations", &f) && (rc = scn_tolerations(x, &f, j)) < 0)
        return rc;
    if (sv_get(v, "gpuModels", &f)) {
        void *it = NULL;
        if ((rc = sv_seq(x, &f, SPEC_MAX_LIST, &count)) < 0)
            return rc;
        if (count && !(j->models = calloc((size_t)count, sizeof *j->models)))
            return sv_oom(x, &f);
        for (int i = 0; i < count; i++) {
            sv_item(&iv, &f, fy_node_sequence_iterate(f.n, &it), i);
            if ((rc = sv_text(x, &iv, buf, sizeof buf, false)) < 0 ||
                (rc = scn_intern(x, &iv, buf, &j->models[j->nmodels])) < 0)
                return rc;
            j->nmodels++;
        }
    }
    return 0;
}

/* One job (instance k of a job with count:, named NAME-k); *out on success. */
int scn_job(sx_t *x, const sval_t *v, int k, arb_job_t **out)
{
    char name[ARB_JOB_NAME_MAX + 16];
    sval_t f, groups;
    arb_job_t *j = NULL;
    int rc, ngroups = 1;
    bool is, has_groups;

    if ((rc = sv_map(x, v, &is)) < 0)
        return rc;
    if (!is)
        return sv_fail(x, v, -EINVAL, "a job needs at least a name: and resources:");
    if ((rc = sc_check_keys(x, v, &scn_job_table, SC_CTX_SCENARIO)) < 0)
        return rc;
    if (x->lone_job && sv_get(v, "count", &f))
        return sv_fail(x, &f, -EINVAL, "count: repeats a job in a scenario; submit one job here");
    if (!sv_get(v, "name", &f))
        return sv_fail(x, v, -EINVAL, "missing name:; give every job a unique name");
    if ((rc = sv_text(x, &f, name, ARB_JOB_NAME_MAX - 8, false)) < 0)
        return rc;
    if (k > 0)
        snprintf(name + strlen(name), 16, "-%d", k);
    has_groups = sv_get(v, "groups", &groups);
    if (has_groups) {
        static const char *const lone[] = {"replicas", "resources", "topology"};
        for (int i = 0; i < 3; i++)
            if (sv_get(v, lone[i], &f))
                return sv_fail(x, &f, -EINVAL,
                               "%s: belongs inside each of groups:, or drop groups: for a "
                               "one-group job",
                               lone[i]);
        if ((rc = sv_seq(x, &groups, SPEC_MAX_GROUPS, &ngroups)) < 0)
            return rc;
        if (ngroups == 0)
            return sv_fail(x, &groups, -EINVAL, "groups: needs at least one group");
    }
    j = arb_job_new(name, ngroups);
    if (!j)
        return sv_oom(x, v);
    rc = parse_job_fields(x, v, j, has_groups ? &groups : NULL);
    if (rc == 0 && (rc = arb_job_finalize(j, x->err)) < 0)
        rc = sv_prefix(x, v, rc, true);
    if (rc < 0) {
        arb_job_free(j);
        return rc;
    }
    *out = j;
    return 0;
}
