/*
 * k8s.c: Kubernetes manifests as Arbiter jobs (wl.h). Every document of a
 * file is read; each workload becomes one job (a LeaderWorkerSet one per
 * group, pods of one Kueue or Volcano pod group one together), documents
 * that are not workloads (Service, ConfigMap, PVC, ...) are skipped with a
 * warning naming them. One table maps each kind to its reader; each reader
 * turns the kind's replica sets into task groups through k8s_pod.c and
 * says what the job's gang is. docs/compat.md is the table for people.
 *
 *   kind                     job                         gang
 *   Pod                      one task                    -
 *   batch/v1 Job             completions (Indexed) or    all pods
 *                            parallelism tasks
 *   Deployment/StatefulSet   a service, replicas         -
 *   PyTorchJob, TFJob, ...   a group per replica type    all (or minAvailable)
 *   Volcano Job              a group per task            minAvailable
 *   JobSet                   a group per replicated job  all
 *   LeaderWorkerSet          a job per group: leader +   the group
 *                            size-1 workers
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libfyaml.h>

#include "spec/k8s_int.h"

#define KJ_MAX_GROUPS 256

/* ---- a job being built ------------------------------------------------------------ */

typedef struct kjob {
    char name[96];
    int ngroups;
    k8s_pod_t pods[KJ_MAX_GROUPS];
    char gname[KJ_MAX_GROUPS][64];
    int replicas[KJ_MAX_GROUPS];
    sval_t at[KJ_MAX_GROUPS]; /* where each group's template is, for messages */
    json_t *groups;
    json_t *spec;
    int64_t tasks;
} kjob_t;

static kjob_t *kjob_new(kx_t *k, const sval_t *v, const char *name)
{
    kjob_t *j = calloc(1, sizeof *j);
    if (!j) {
        sv_oom(&k->x, v);
        return NULL;
    }
    wl_job_name(j->name, sizeof j->name, name);
    j->groups = json_array();
    j->spec = json_pack("{s:s}", "name", j->name);
    return j;
}

static void kjob_free(kjob_t *j)
{
    if (!j)
        return;
    for (int i = 0; i < j->ngroups; i++)
        k8s_pod_free(&j->pods[i]);
    json_decref(j->groups);
    json_decref(j->spec);
    free(j);
}

/* Read template v as group name x replicas; ctx as in k8s_pod_read. */
static int kjob_group(kx_t *k, kjob_t *j, const sval_t *v, const char *name, int64_t replicas,
                      const json_t *ctx)
{
    int rc;

    if (j->ngroups == KJ_MAX_GROUPS)
        return sv_fail(&k->x, v, -EINVAL, "more than %d task groups in one job", KJ_MAX_GROUPS);
    if (replicas < 0 || replicas > 100000)
        return sv_fail(&k->x, v, -EINVAL, "%" PRId64 " replicas; use 0..100000", replicas);
    if (replicas == 0) {
        kx_warn(k, v, "%s has 0 replicas: no task is made for it", name);
        return 0;
    }
    k8s_pod_t *p = &j->pods[j->ngroups];
    if ((rc = k8s_pod_read(k, v, ctx, p)) < 0) {
        k8s_pod_free(p);
        return rc;
    }
    /* What the kind sets at start comes first; the pod's own env may use it. */
    json_t *dyn = json_object();
    json_object_update(dyn, (json_t *)ctx);
    json_object_update(dyn, p->dyn);
    void *it = json_object_iter(dyn);
    while (it) { /* ctx's "meta:" entries are labels for fieldRefs, not variables */
        const char *key = json_object_iter_key(it);
        it = json_object_iter_next(dyn, it);
        if (!strncmp(key, "meta:", 5))
            json_object_del(dyn, key);
    }
    json_decref(p->dyn);
    p->dyn = dyn;
    snprintf(j->gname[j->ngroups], sizeof j->gname[0], "%s", name);
    for (char *c = j->gname[j->ngroups]; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    for (int g = 0; g < j->ngroups; g++) /* pods of a pod group may share a name */
        if (!strcmp(j->gname[g], j->gname[j->ngroups])) {
            char num[16];
            snprintf(num, sizeof num, "-%d", j->ngroups);
            size_t l = strlen(j->gname[j->ngroups]);
            if (l + strlen(num) >= sizeof j->gname[0])
                l = sizeof j->gname[0] - strlen(num) - 1;
            snprintf(j->gname[j->ngroups] + l, sizeof j->gname[0] - l, "%s", num);
            g = -1;
        }
    j->replicas[j->ngroups] = (int)replicas;
    j->at[j->ngroups] = *v;
    j->tasks += replicas;
    j->ngroups++;
    return 0;
}

/* A job-wide constraint every group must agree on (Arbiter applies one
 * to the whole job). */
static int same_across(kx_t *k, kjob_t *j, json_t *(*get)(const k8s_pod_t *), const char *what,
                       json_t **out)
{
    *out = NULL;
    for (int i = 0; i < j->ngroups; i++) {
        json_t *v = get(&j->pods[i]);
        if (!*out) {
            *out = v;
            continue;
        }
        if (!json_equal(*out, v))
            return sv_fail(&k->x, &j->at[i], -EINVAL,
                           "groups '%s' and '%s' ask for different %s; Arbiter applies one to "
                           "the whole job: make them the same",
                           j->gname[0], j->gname[i], what);
    }
    return 0;
}

static json_t *get_sel(const k8s_pod_t *p)
{
    return p->selector;
}
static json_t *get_req(const k8s_pod_t *p)
{
    return p->required;
}
static json_t *get_pref(const k8s_pod_t *p)
{
    return p->preferred;
}
static json_t *get_tol(const k8s_pod_t *p)
{
    return p->tolerations;
}

typedef struct kopts {
    int64_t gang_min;     /* 0: all */
    char queue[K8S_NAME]; /* from the workload's own fields, "" none */
    char prio[K8S_NAME];
    int64_t deadline_s;
    int elastic_min, elastic_max; /* a one-group elastic job, 0 none */
    const sval_t *meta;           /* the workload's metadata, NULL none */
    const char *prelude;          /* launcher text, NULL none */
} kopts_t;

/* Labels of the workload itself: Kueue, KAI. */
static void meta_opts(const sval_t *meta, kopts_t *o)
{
    char buf[K8S_NAME];
    static const char *const ql[] = {"kueue.x-k8s.io/queue-name", "kai.scheduler/queue",
                                     "runai/queue", NULL};

    if (!meta)
        return;
    for (int i = 0; ql[i] && !o->queue[0]; i++)
        if (k8s_meta(meta, "labels", ql[i], buf, sizeof buf))
            snprintf(o->queue, sizeof o->queue, "%s", buf);
    if (!o->queue[0] &&
        k8s_meta(meta, "annotations", "scheduling.volcano.sh/queue-name", buf, sizeof buf))
        snprintf(o->queue, sizeof o->queue, "%s", buf);
    if (!o->prio[0] && k8s_meta(meta, "labels", "kueue.x-k8s.io/priority-class", buf, sizeof buf))
        snprintf(o->prio, sizeof o->prio, "%s", buf);
}

/* Finish j into a native spec and hand it to w (j is freed). */
static int kjob_done(kx_t *k, kjob_t *j, kopts_t *o, const sval_t *at)
{
    json_t *sel, *req, *pref, *tol, *spec = j->spec;
    wl_run_t runs[KJ_MAX_GROUPS];
    int rc = 0;

    if (j->ngroups == 0) {
        rc = sv_fail(&k->x, at, -EINVAL, "%s '%s' has no pods to run (every replica count is 0)",
                     k->kind, j->name);
        goto out;
    }
    for (int g = 0; g < j->ngroups && k->nnamed_pg < 16; g++) /* a pod group its template names */
        if (j->pods[g].podgroup[0])
            snprintf(k->named_pg[k->nnamed_pg++], sizeof k->named_pg[0], "%s", j->pods[g].podgroup);
    if (j->tasks > 100000) {
        rc = sv_fail(&k->x, at, -EINVAL, "%" PRId64 " pods; a job has at most 100000", j->tasks);
        goto out;
    }
    meta_opts(o->meta, o);
    if ((rc = same_across(k, j, get_sel, "nodeSelector", &sel)) < 0 ||
        (rc = same_across(k, j, get_req, "required node affinity", &req)) < 0 ||
        (rc = same_across(k, j, get_pref, "preferred node affinity", &pref)) < 0 ||
        (rc = same_across(k, j, get_tol, "tolerations", &tol)) < 0)
        goto out;
    const char *queue = o->queue;
    const char *prio = o->prio;
    int grace = -1;
    int64_t deadline = o->deadline_s;
    for (int i = 0; i < j->ngroups; i++) {
        const k8s_pod_t *p = &j->pods[i];
        if (!queue[0] && p->queue[0])
            queue = p->queue;
        if (!prio[0] && p->prio[0])
            prio = p->prio;
        if (p->grace > grace)
            grace = p->grace;
        if (p->deadline_s && (!deadline || p->deadline_s < deadline))
            deadline = p->deadline_s;
        const char *key = p->topo_req[0] ? p->topo_req : p->topo_pref;
        if (key[0] && !k8s_topo_level(key)) {
            if (p->topo_req[0]) {
                rc = sv_fail(&k->x, &j->at[i], -EINVAL,
                             "kueue.x-k8s.io/podset-required-topology '%s' names no level "
                             "Arbiter knows (a key with hostname, nvlink, rack, block in it); "
                             "use one, or make it preferred",
                             key);
                goto out;
            }
            kx_warn(k, &j->at[i], "preferred topology '%s' names no level Arbiter knows; ignored",
                    key);
        }
        if (p->topo_req[0] && !strcmp(k8s_topo_level(key), "nvlink") && k8s_pod_gpus(p) == 0) {
            rc = sv_fail(&k->x, &j->at[i], -EINVAL,
                         "an NVLink topology needs whole GPUs (nvidia.com/gpu) in the pod");
            goto out;
        }
    }
    if (queue[0])
        json_object_set_new(spec, "queue", json_string(queue));
    for (int i = 0; i < j->ngroups; i++) { /* HAMi's use-gputype: the job's GPU models */
        const char *m = j->pods[i].gpu_models;
        if (!m[0] || json_object_get(spec, "gpuModels"))
            continue;
        json_t *a = json_array();
        char one[K8S_NAME];
        for (const char *p = m; *p;) {
            size_t n = strcspn(p, ",");
            snprintf(one, sizeof one, "%.*s", (int)n, p);
            char *t = one + strspn(one, " ");
            t[strcspn(t, " ")] = '\0';
            if (*t)
                json_array_append_new(a, json_string(t));
            p += n + (p[n] == ',');
        }
        if (json_array_size(a))
            json_object_set_new(spec, "gpuModels", a);
        else
            json_decref(a);
    }
    if (prio[0])
        json_object_set_new(spec, "priorityClassName", json_string(prio));
    if (grace >= 0)
        json_object_set_new(spec, "terminationGracePeriodSeconds", json_integer(grace));
    if (deadline)
        json_object_set_new(spec, "timeLimit", json_integer(deadline));
    if (json_object_size(sel))
        json_object_set(spec, "nodeSelector", sel);
    if (json_array_size(req) || json_array_size(pref)) {
        json_t *a = json_object();
        if (json_array_size(req))
            json_object_set(a, "required", req);
        if (json_array_size(pref))
            json_object_set(a, "preferred", pref);
        json_object_set_new(spec, "affinity", a);
    }
    if (json_array_size(tol))
        json_object_set(spec, "tolerations", tol);
    if (o->elastic_max > 0 && j->ngroups == 1) {
        json_object_set_new(spec, "replicas",
                            json_pack("{s:i,s:i}", "min", o->elastic_min, "max", o->elastic_max));
        json_object_set_new(spec, "resources", k8s_pod_resources(&j->pods[0]));
    } else {
        for (int i = 0; i < j->ngroups; i++)
            json_array_append_new(j->groups,
                                  k8s_pod_group(k, &j->pods[i], j->gname[i], j->replicas[i]));
        json_object_set(spec, "groups", j->groups);
        if (o->gang_min > 0 && o->gang_min < j->tasks)
            json_object_set_new(spec, "gangMin", json_integer(o->gang_min));
    }
    for (int i = 0; i < j->ngroups; i++) {
        k8s_pod_t *p = &j->pods[i];
        runs[i] = (wl_run_t){.group = j->gname[i],
                             .replicas = j->replicas[i],
                             .argv = p->argv,
                             .env = p->env,
                             .dyn = p->dyn,
                             .dir = p->dir[0] ? p->dir : NULL,
                             .argv_expand = p->expand};
        if (json_array_size(p->argv) == 0)
            kx_warn(k, &j->at[i],
                    "group '%s' has no command: Arbiter runs no images, so its tasks would "
                    "fail; give the container command:",
                    j->gname[i]);
    }
    if (wl_command(spec, runs, j->ngroups, o->prelude) < 0) {
        rc = sv_oom(&k->x, at);
        goto out;
    }
    j->spec = NULL;
    rc = wl_add_job(k->w, spec,
                    json_pack("{s:s,s:s,s:s,s:I}", "kind", k->kind, "apiVersion", k->api, "name",
                              j->name, "pods", (json_int_t)j->tasks));
out:
    kjob_free(j);
    return rc;
}

/* ---- kinds ------------------------------------------------------------------------------ */

typedef struct kdoc {
    sval_t root, meta, spec;
    char name[96];
} kdoc_t;

typedef int (*kind_fn)(kx_t *k, kdoc_t *d);

/* Fields of a workload's spec that are read, so the rest can be named. */
static void warn_spec_rest(kx_t *k, const sval_t *spec, const char *const *read,
                           const char *const *quiet)
{
    void *it = NULL;
    struct fy_node_pair *p;

    if (!spec->n || !fy_node_is_mapping(spec->n))
        return;
    while ((p = fy_node_mapping_iterate(spec->n, &it))) {
        size_t len = 0;
        const char *kt = sv_key_text(fy_node_pair_key(p), &len);
        bool known = false;
        for (const char *const *l = read; !known && l && *l; l++)
            known = strlen(*l) == len && !memcmp(*l, kt, len);
        for (const char *const *l = quiet; !known && l && *l; l++)
            known = strlen(*l) == len && !memcmp(*l, kt, len);
        if (known || !kt)
            continue;
        sval_t f;
        sv_pair(&f, spec, p);
        f.n = fy_node_pair_key(p);
        kx_warn(k, &f, "not honoured by Arbiter; ignored");
    }
}

static int kind_pod(kx_t *k, kdoc_t *d)
{
    kopts_t o = {.meta = &d->meta};
    kjob_t *j = kjob_new(k, &d->root, d->name);
    int rc;

    if (!j)
        return -ENOMEM;
    if ((rc = kjob_group(k, j, &d->root, "pod", 1, NULL)) < 0) {
        kjob_free(j);
        return rc;
    }
    return kjob_done(k, j, &o, &d->root);
}

/* A batch/v1 JobSpec's pod count and template; *indexed for Indexed. */
static int job_spec(kx_t *k, const sval_t *spec, int64_t *pods, bool *indexed, sval_t *tmpl,
                    int64_t *deadline)
{
    sval_t f;
    int64_t par = 1, comp = -1;
    char mode[32] = "";
    int rc;

    *indexed = false;
    if (sv_get(spec, "parallelism", &f) && (rc = k8s_int(k, &f, 0, 100000, &par)) < 0)
        return rc;
    if (sv_get(spec, "completions", &f) && !sv_null(&f) &&
        (rc = k8s_int(k, &f, 0, 100000, &comp)) < 0)
        return rc;
    if (sv_get(spec, "completionMode", &f) && (rc = k8s_text(k, &f, mode, sizeof mode)) < 0)
        return rc;
    *indexed = !strcmp(mode, "Indexed");
    if (*indexed && comp < 0)
        return sv_fail(&k->x, spec, -EINVAL, "an Indexed Job needs completions: N");
    *pods = comp >= 0 ? comp : par;
    if (comp > par && par > 0)
        kx_warn(k, spec,
                "parallelism %" PRId64 " < completions %" PRId64 ": Arbiter starts all %" PRId64
                " pods together, not %" PRId64 " at a time",
                par, comp, comp, par);
    if (par == 0)
        *pods = 0;
    if (deadline && sv_get(spec, "activeDeadlineSeconds", &f) &&
        (rc = k8s_int(k, &f, 1, INT64_MAX, deadline)) < 0)
        return rc;
    if (sv_get(spec, "suspend", &f) && !sv_null(&f)) {
        bool s = false;
        if (sv_bool(&k->x, &f, &s) == 0 && s)
            kx_warn(k, &f, "suspend: true is not honoured: the job is queued as submitted");
    }
    if (sv_get(spec, "podFailurePolicy", &f))
        kx_warn(k, &f, "podFailurePolicy is not honoured (a failed task fails the job)");
    if (sv_get(spec, "successPolicy", &f))
        kx_warn(k, &f, "successPolicy is not honoured (the job succeeds when every task has)");
    if (!sv_get(spec, "template", tmpl))
        return sv_fail(&k->x, spec, -EINVAL, "missing template: (the pods' template)");
    return 0;
}

static const char *const jobspec_read[] = {"parallelism",
                                           "completions",
                                           "completionMode",
                                           "template",
                                           "activeDeadlineSeconds",
                                           "suspend",
                                           "podFailurePolicy",
                                           "successPolicy",
                                           "backoffLimit",
                                           "backoffLimitPerIndex",
                                           "maxFailedIndexes",
                                           "ttlSecondsAfterFinished",
                                           "manualSelector",
                                           "selector",
                                           "podReplacementPolicy",
                                           "managedBy",
                                           NULL};

/* The start-time variables of an Indexed Job's pods. */
static json_t *indexed_ctx(bool indexed)
{
    json_t *c = json_object();
    if (indexed)
        json_object_set_new(c, "JOB_COMPLETION_INDEX",
                            json_string("\x01"
                                        "ARBITER_GROUP_INDEX\x02"));
    return c;
}

static int kind_job(kx_t *k, kdoc_t *d)
{
    kopts_t o = {.meta = &d->meta};
    sval_t tmpl;
    int64_t pods;
    bool indexed;
    int rc;

    if ((rc = job_spec(k, &d->spec, &pods, &indexed, &tmpl, &o.deadline_s)) < 0)
        return rc;
    warn_spec_rest(k, &d->spec, jobspec_read, NULL);
    kjob_t *j = kjob_new(k, &d->root, d->name);
    if (!j)
        return -ENOMEM;
    json_t *ctx = indexed_ctx(indexed);
    rc = kjob_group(k, j, &tmpl, "pod", pods, ctx);
    json_decref(ctx);
    if (rc < 0) {
        kjob_free(j);
        return rc;
    }
    /* Kueue's partial admission: the Job may start with as few as N pods. */
    char buf[K8S_NAME];
    if (k8s_meta(&d->meta, "annotations", "kueue.x-k8s.io/job-min-parallelism", buf, sizeof buf)) {
        char *end;
        long mp = strtol(buf, &end, 10);
        if (*end || end == buf || mp < 1 || mp > pods) {
            sval_t f;
            sv_get(&d->meta, "annotations", &f);
            kjob_free(j);
            return sv_fail(&k->x, &f, -EINVAL,
                           "kueue.x-k8s.io/job-min-parallelism '%s': give a pod count 1..%" PRId64
                           " (at most the Job's parallelism)",
                           buf, pods);
        }
        o.gang_min = (int)mp;
    }
    return kjob_done(k, j, &o, &d->root);
}

/* Deployment, StatefulSet, ReplicaSet: a service of replicas. */
static int kind_service(kx_t *k, kdoc_t *d)
{
    static const char *const read[] = {"replicas",
                                       "template",
                                       "selector",
                                       "strategy",
                                       "minReadySeconds",
                                       "revisionHistoryLimit",
                                       "progressDeadlineSeconds",
                                       "serviceName",
                                       "podManagementPolicy",
                                       "updateStrategy",
                                       "paused",
                                       "persistentVolumeClaimRetentionPolicy",
                                       "ordinals",
                                       NULL};
    kopts_t o = {.meta = &d->meta};
    sval_t f, tmpl;
    int64_t replicas = 1;
    int rc;

    if (sv_get(&d->spec, "replicas", &f) && (rc = k8s_int(k, &f, 0, 1000, &replicas)) < 0)
        return rc;
    if (replicas == 0) {
        kx_warn(k, &f, "replicas: 0 is raised to 1 (an Arbiter service runs at least one)");
        replicas = 1;
    }
    if (sv_get(&d->spec, "volumeClaimTemplates", &f))
        kx_warn(k, &f, "volumeClaimTemplates are not provisioned (replicas get no volumes)");
    warn_spec_rest(k, &d->spec, read, (const char *const[]){"volumeClaimTemplates", NULL});
    if (!sv_get(&d->spec, "template", &tmpl))
        return sv_fail(&k->x, &d->spec, -EINVAL, "missing template: (the pods' template)");
    kjob_t *j = kjob_new(k, &d->root, d->name);
    if (!j)
        return -ENOMEM;
    if ((rc = kjob_group(k, j, &tmpl, "replica", 1, NULL)) < 0) {
        kjob_free(j);
        return rc;
    }
    k8s_pod_t *p = &j->pods[0];
    int port = p->port ? p->port : p->probe_port;
    if (!port) {
        port = 8000;
        kx_warn(k, &tmpl,
                "no containerPort: replicas listen on 8000 + i (the PORT variable tells each)");
    } else {
        kx_warn(k, &tmpl,
                "replica i listens on port %d + i here (no pod network): the PORT variable "
                "tells each; a fixed port in the command serves only one replica per node",
                port);
    }
    json_object_set_new(j->spec, "kind", json_string("service"));
    json_object_set_new(j->spec, "replicas", json_integer(replicas));
    json_object_set_new(j->spec, "port", json_integer(port));
    if (p->health[0] == '/')
        json_object_set_new(j->spec, "health", json_string(p->health));
    json_object_set_new(j->spec, "resources", k8s_pod_resources(p));
    /* one group: the command is the replica's; constraints as for any job */
    json_t *sel, *req, *pref, *tol;
    same_across(k, j, get_sel, "", &sel);
    same_across(k, j, get_req, "", &req);
    same_across(k, j, get_pref, "", &pref);
    same_across(k, j, get_tol, "", &tol);
    meta_opts(o.meta, &o);
    if (o.queue[0] || p->queue[0])
        json_object_set_new(j->spec, "queue", json_string(o.queue[0] ? o.queue : p->queue));
    if (p->prio[0] || o.prio[0])
        json_object_set_new(j->spec, "priorityClassName",
                            json_string(o.prio[0] ? o.prio : p->prio));
    if (p->grace >= 0)
        json_object_set_new(j->spec, "terminationGracePeriodSeconds", json_integer(p->grace));
    if (json_object_size(sel))
        json_object_set(j->spec, "nodeSelector", sel);
    if (json_array_size(req) || json_array_size(pref)) {
        json_t *a = json_object();
        if (json_array_size(req))
            json_object_set(a, "required", req);
        if (json_array_size(pref))
            json_object_set(a, "preferred", pref);
        json_object_set_new(j->spec, "affinity", a);
    }
    if (json_array_size(tol))
        json_object_set(j->spec, "tolerations", tol);
    if (json_array_size(p->argv) == 0)
        kx_warn(k, &tmpl,
                "the replicas have no command: Arbiter runs no images, so they would fail; give "
                "the container command:");
    wl_run_t run = {.group = "replica",
                    .replicas = 1,
                    .argv = p->argv,
                    .env = p->env,
                    .dyn = p->dyn,
                    .dir = p->dir[0] ? p->dir : NULL,
                    .argv_expand = p->expand};
    if (wl_command(j->spec, &run, 1, NULL) < 0) {
        kjob_free(j);
        return sv_oom(&k->x, &d->root);
    }
    json_t *spec = j->spec;
    j->spec = NULL;
    kjob_free(j);
    return wl_add_job(k->w, spec,
                      json_pack("{s:s,s:s,s:s,s:I}", "kind", k->kind, "apiVersion", k->api, "name",
                                d->name, "pods", (json_int_t)replicas));
}

/* Kubeflow training jobs: one map of replica specs, one gang. */
typedef struct kf_kind {
    const char *kind, *specs, *container;
    const char *order[7]; /* replica types in task order; others follow as written */
} kf_kind_t;

static const kf_kind_t kf_kinds[] = {
    {"PyTorchJob", "pytorchReplicaSpecs", "pytorch", {"Master", "Worker"}},
    {"TFJob", "tfReplicaSpecs", "tensorflow", {"Chief", "Master", "PS", "Worker", "Evaluator"}},
    {"MPIJob", "mpiReplicaSpecs", "mpi", {"Launcher", "Worker"}},
    {"XGBoostJob", "xgbReplicaSpecs", "xgboost", {"Master", "Worker"}},
    {"PaddleJob", "paddleReplicaSpecs", "paddle", {"Master", "Worker"}},
    {"JAXJob", "jaxReplicaSpecs", "jax", {"Worker"}},
    {"MXJob",
     "mxReplicaSpecs",
     "mxnet",
     {"Scheduler", "Server", "Worker", "TunerTracker", "TunerServer", "Tuner"}},
};

/* The launcher's functions for Kubeflow's start-time files and variables.
 * TF_CONFIG as the training operator builds it: {"cluster": {TYPE:
 * [host:port, ...]} for every replica type but the evaluator, "task":
 * {"type", "index"}, "environment": "cloud"}; hosts from the controller's
 * ARBITER_TASK_HOSTS (task order), ports MASTER_PORT + 1 + task (2222 + task
 * alone), so tasks sharing a node do not collide. %s: " type replicas ...". */
#define TF_CONFIG_FN                                                                               \
    "arbiter_tf_config() {\n"                                                                      \
    "  _ty=$1 _c= _t=0 _p=$((${MASTER_PORT:-2221} + 1))\n"                                         \
    "  set --%s\n"                                                                                 \
    "  while [ $# -ge 2 ]; do\n"                                                                   \
    "    _l= _k=0\n"                                                                               \
    "    while [ \"$_k\" -lt \"$2\" ]; do\n"                                                       \
    "      _h=$(printf %%s \"${ARBITER_TASK_HOSTS:-}\" | cut -d, -f$((_t + 1)))\n"                 \
    "      _l=\"$_l${_l:+,}\\\"${_h:-localhost}:$((_p + _t))\\\"\"\n"                              \
    "      _k=$((_k + 1)) _t=$((_t + 1))\n"                                                        \
    "    done\n"                                                                                   \
    "    [ \"$1\" = evaluator ] || _c=\"$_c${_c:+,}\\\"$1\\\":[$_l]\"\n"                           \
    "    shift 2\n"                                                                                \
    "  done\n"                                                                                     \
    "  printf '{\"cluster\":{%%s},\"task\":{\"type\":\"%%s\",\"index\":%%s},"                      \
    "\"environment\":\"cloud\"}' \"$_c\" \"$_ty\" \"${ARBITER_GROUP_INDEX:-0}\"\n"                 \
    "}\n"
/* The MPI operator's hostfile: a line "host slots=N" per worker (tasks
 * %d.. of which %d, slotsPerWorker %d), written beside the task; prints
 * its path. */
#define MPI_HOSTFILE_FN                                                                            \
    "arbiter_mpi_hostfile() {\n"                                                                   \
    "  _f=${TMPDIR:-/tmp}/arbiter-hostfile-${ARBITER_JOB_ID:-0}-${ARBITER_TASK_INDEX:-0}\n"        \
    "  _t=%d _n=%d _k=0\n"                                                                         \
    "  : >\"$_f\"\n"                                                                               \
    "  while [ \"$_k\" -lt \"$_n\" ]; do\n"                                                        \
    "    _h=$(printf %%s \"${ARBITER_TASK_HOSTS:-}\" | cut -d, -f$((_t + _k + 1)))\n"              \
    "    echo \"${_h:-localhost} slots=%d\" >>\"$_f\"\n"                                           \
    "    _k=$((_k + 1))\n"                                                                         \
    "  done\n"                                                                                     \
    "  printf %%s \"$_f\"\n"                                                                       \
    "}\n"

static int kf_run_policy(kx_t *k, const sval_t *spec, kopts_t *o)
{
    sval_t rp, sp, f;
    int rc;

    if (!sv_get(spec, "runPolicy", &rp))
        rp = *spec; /* v1alpha/v1beta and MPIJob v1 kept these in spec */
    if (sv_get(&rp, "activeDeadlineSeconds", &f) &&
        (rc = k8s_int(k, &f, 1, INT64_MAX, &o->deadline_s)) < 0)
        return rc;
    if (sv_get(&rp, "suspend", &f)) {
        bool s = false;
        if (sv_bool(&k->x, &f, &s) == 0 && s)
            kx_warn(k, &f, "suspend: true is not honoured: the job is queued as submitted");
    }
    if (sv_get(&rp, "schedulingPolicy", &sp)) {
        if (sv_get(&sp, "minAvailable", &f) && (rc = k8s_int(k, &f, 0, 100000, &o->gang_min)) < 0)
            return rc;
        if (sv_get(&sp, "queue", &f) && (rc = k8s_text(k, &f, o->queue, sizeof o->queue)) < 0)
            return rc;
        if (sv_get(&sp, "priorityClass", &f) && (rc = k8s_text(k, &f, o->prio, sizeof o->prio)) < 0)
            return rc;
    }
    return 0;
}

static int kind_kubeflow(kx_t *k, kdoc_t *d)
{
    const kf_kind_t *kf = NULL;
    kopts_t o = {.meta = &d->meta};
    sval_t specs, f;
    int rc, n = 0;
    char nproc[32] = "1";

    for (size_t i = 0; i < sizeof kf_kinds / sizeof kf_kinds[0]; i++)
        if (!strcmp(kf_kinds[i].kind, k->kind))
            kf = &kf_kinds[i];
    k->mainctr = kf->container;
    if (!sv_get(&d->spec, kf->specs, &specs))
        return sv_fail(&k->x, &d->spec, -EINVAL, "missing %s: (the replica types and templates)",
                       kf->specs);
    bool is;
    if ((rc = sv_map(&k->x, &specs, &is)) < 0)
        return rc;
    if ((rc = kf_run_policy(k, &d->spec, &o)) < 0)
        return rc;
    if (sv_get(&d->spec, "nprocPerNode", &f))
        k8s_text(k, &f, nproc, sizeof nproc);
    kjob_t *j = kjob_new(k, &d->root, d->name);
    if (!j)
        return -ENOMEM;
    arb_buf_t layout = {0}; /* TFJob: " type replicas ..." in task order */
    char *prelude = NULL;
    int ntask = 0, mpi_first = -1, mpi_workers_at = 0, mpi_workers = 0;
    int64_t slots = 1;
    if (sv_get(&d->spec, "slotsPerWorker", &f) && (rc = k8s_int(k, &f, 1, 4096, &slots)) < 0) {
        kjob_free(j);
        return rc;
    }
    /* Replica types in the kind's task order, then any others as written. */
    const char *seen[32];
    int nseen = 0;
    n = is ? fy_node_mapping_item_count(specs.n) : 0;
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        int norder = 0;
        while (norder < 7 && kf->order[norder])
            norder++;
        int count = pass == 0 ? norder : n;
        for (int i = 0; i < count && rc == 0; i++) {
            sval_t rs, tmpl, rv;
            char rname[64];
            int64_t replicas = 1;
            if (pass == 0) {
                if (!sv_get(&specs, kf->order[i], &rs))
                    continue;
                snprintf(rname, sizeof rname, "%s", kf->order[i]);
            } else {
                struct fy_node_pair *pr = fy_node_mapping_get_by_index(specs.n, i);
                size_t len = 0;
                const char *kt = sv_key_text(fy_node_pair_key(pr), &len);
                if (!kt || len >= sizeof rname)
                    continue;
                memcpy(rname, kt, len);
                rname[len] = '\0';
                bool dup = false;
                for (int s = 0; s < nseen; s++)
                    dup |= !strcmp(seen[s], rname);
                if (dup)
                    continue;
                sv_pair(&rs, &specs, pr);
            }
            if (nseen < 32)
                seen[nseen++] = pass == 0 ? kf->order[i] : "";
            if (sv_get(&rs, "replicas", &rv) && (rc = k8s_int(k, &rv, 0, 100000, &replicas)) < 0)
                break;
            if (!sv_get(&rs, "template", &tmpl)) {
                rc = sv_fail(&k->x, &rs, -EINVAL, "missing template: (the %s pods' template)",
                             rname);
                break;
            }
            json_t *ctx = json_object();
            if (!strcmp(kf->kind, "PyTorchJob")) {
                /* what the operator sets, for torchrun (PET_*) and init_process_group */
                json_object_set_new(ctx, "MASTER_ADDR",
                                    json_string("\x01"
                                                "MASTER_ADDR:-localhost\x02"));
                json_object_set_new(ctx, "MASTER_PORT",
                                    json_string("\x01"
                                                "MASTER_PORT:-29500\x02"));
                json_object_set_new(ctx, "WORLD_SIZE",
                                    json_string("\x01"
                                                "WORLD_SIZE:-1\x02"));
                json_object_set_new(ctx, "RANK",
                                    json_string("\x01"
                                                "RANK:-0\x02"));
                json_object_set_new(ctx, "PET_MASTER_ADDR",
                                    json_string("\x01"
                                                "MASTER_ADDR\x02"));
                json_object_set_new(ctx, "PET_MASTER_PORT",
                                    json_string("\x01"
                                                "MASTER_PORT\x02"));
                json_object_set_new(ctx, "PET_NNODES",
                                    json_string("\x01"
                                                "WORLD_SIZE\x02"));
                json_object_set_new(ctx, "PET_NODE_RANK",
                                    json_string("\x01"
                                                "RANK\x02"));
                json_object_set_new(ctx, "PET_NPROC_PER_NODE", json_string(nproc));
            } else if (!strcmp(kf->kind, "TFJob")) {
                /* TF_CONFIG as the operator sets it: every replica's host:port */
                char ty[64], call[96];
                size_t l = strlen(rname);
                for (size_t c = 0; c <= l; c++)
                    ty[c] = (char)tolower((unsigned char)rname[c]);
                snprintf(call, sizeof call, "\x01(arbiter_tf_config %s)\x02", ty);
                json_object_set_new(ctx, "TF_CONFIG", json_string(call));
                arb_buf_printf(&layout, " %s %d", ty, (int)replicas);
            } else if (!strcmp(kf->kind, "MPIJob")) {
                if (!strcmp(rname, "Launcher")) {
                    /* the operator's hostfile: the workers, slotsPerWorker each */
                    static const char *const hv[] = {"OMPI_MCA_orte_default_hostfile",
                                                     "I_MPI_HYDRA_HOST_FILE", "HYDRA_HOST_FILE"};
                    for (size_t v = 0; v < sizeof hv / sizeof hv[0]; v++)
                        json_object_set_new(ctx, hv[v],
                                            json_string("\x01(arbiter_mpi_hostfile)\x02"));
                    kx_warn(k, &rs,
                            "workers run no sshd: mpirun reaches them only with its own "
                            "launcher agent (the hostfile and MASTER_ADDR, RANK are set)");
                    mpi_first = ntask;
                } else if (!strcmp(rname, "Worker")) {
                    mpi_workers_at = ntask;
                    mpi_workers = (int)replicas;
                }
            }
            ntask += (int)replicas;
            rc = kjob_group(k, j, &tmpl, rname, replicas, ctx);
            json_decref(ctx);
        }
    }
    if (rc == 0 && (layout.p || mpi_first >= 0)) {
        arb_buf_t pre = {0};
        if (layout.p)
            arb_buf_printf(&pre, TF_CONFIG_FN, layout.p);
        if (mpi_first >= 0)
            arb_buf_printf(&pre, MPI_HOSTFILE_FN, mpi_workers_at, mpi_workers, (int)slots);
        prelude = pre.p;
        o.prelude = prelude;
        if (pre.oom)
            rc = -ENOMEM;
    }
    free(layout.p);
    if (rc < 0) {
        kjob_free(j);
        free(prelude);
        return rc;
    }
    if (sv_get(&d->spec, "elasticPolicy", &f)) {
        sval_t a, b;
        int64_t mn = 0, mx = 0;
        if (sv_get(&f, "minReplicas", &a) && sv_get(&f, "maxReplicas", &b) &&
            k8s_int(k, &a, 1, 4096, &mn) == 0 && k8s_int(k, &b, 1, 4096, &mx) == 0 && mn <= mx &&
            j->ngroups == 1) {
            o.elastic_min = (int)mn;
            o.elastic_max = (int)mx;
        } else {
            kx_warn(k, &f,
                    "elasticPolicy is honoured only for a Worker-only job with minReplicas and "
                    "maxReplicas; the job runs at its replicas");
        }
    }
    static const char *const read[] = {"runPolicy",
                                       "elasticPolicy",
                                       "nprocPerNode",
                                       "slotsPerWorker",
                                       "activeDeadlineSeconds",
                                       "schedulingPolicy",
                                       "suspend",
                                       NULL};
    static const char *const quiet[] = {"cleanPodPolicy",
                                        "ttlSecondsAfterFinished",
                                        "backoffLimit",
                                        "mpiImplementation",
                                        "sshAuthMountPath",
                                        "launcherCreationPolicy",
                                        "runLauncherAsWorker",
                                        "successPolicy",
                                        "enableDynamicWorker",
                                        "managedBy",
                                        NULL};
    const char *rd[16];
    int nrd = 0;
    for (; read[nrd]; nrd++) /* 7 names: rd has room */
        rd[nrd] = read[nrd];
    rd[nrd++] = kf->specs;
    rd[nrd] = NULL;
    warn_spec_rest(k, &d->spec, rd, quiet);
    rc = kjob_done(k, j, &o, &d->root);
    free(prelude);
    return rc;
}

static int kind_volcano(kx_t *k, kdoc_t *d)
{
    static const char *const read[] = {"tasks",
                                       "minAvailable",
                                       "queue",
                                       "priorityClassName",
                                       "schedulerName",
                                       "maxRetry",
                                       "ttlSecondsAfterFinished",
                                       "minSuccess",
                                       "runningEstimate",
                                       NULL};
    kopts_t o = {.meta = &d->meta};
    sval_t tasks, f;
    int n, rc;

    if (!sv_get(&d->spec, "tasks", &tasks))
        return sv_fail(&k->x, &d->spec, -EINVAL, "missing tasks: (the job's task templates)");
    if ((rc = sv_seq(&k->x, &tasks, KJ_MAX_GROUPS, &n)) < 0)
        return rc;
    if (sv_get(&d->spec, "minAvailable", &f) && (rc = k8s_int(k, &f, 0, 100000, &o.gang_min)) < 0)
        return rc;
    if (sv_get(&d->spec, "queue", &f) && (rc = k8s_text(k, &f, o.queue, sizeof o.queue)) < 0)
        return rc;
    if (!strcmp(o.queue, "default"))
        o.queue[0] = '\0';
    if (sv_get(&d->spec, "priorityClassName", &f) &&
        (rc = k8s_text(k, &f, o.prio, sizeof o.prio)) < 0)
        return rc;
    if (sv_get(&d->spec, "policies", &f))
        kx_warn(k, &f, "policies (event -> action) are not honoured: a failed task fails the job");
    if (sv_get(&d->spec, "plugins", &f))
        kx_warn(k, &f,
                "plugins are not run (svc, ssh, env, pytorch): tasks get MASTER_ADDR, RANK and "
                "VC_TASK_INDEX instead");
    if (sv_get(&d->spec, "volumes", &f))
        kx_warn(k, &f, "volumes are not provisioned");
    if (sv_get(&d->spec, "networkTopology", &f))
        kx_warn(k, &f, "networkTopology is not honoured; use Kueue's topology annotations");
    warn_spec_rest(
        k, &d->spec, read,
        (const char *const[]){"policies", "plugins", "volumes", "networkTopology", NULL});
    kjob_t *j = kjob_new(k, &d->root, d->name);
    if (!j)
        return -ENOMEM;
    void *it = NULL;
    for (int i = 0; i < n; i++) {
        sval_t t, tmpl;
        char tname[64];
        int64_t replicas = 1;
        sv_item(&t, &tasks, fy_node_sequence_iterate(tasks.n, &it), i);
        snprintf(tname, sizeof tname, "task-%d", i);
        if (sv_get(&t, "name", &f) && (rc = k8s_text(k, &f, tname, sizeof tname)) < 0)
            break;
        if (sv_get(&t, "replicas", &f) && (rc = k8s_int(k, &f, 0, 100000, &replicas)) < 0)
            break;
        if (sv_get(&t, "policies", &f))
            kx_warn(k, &f, "task policies are not honoured");
        if (sv_get(&t, "dependsOn", &f))
            kx_warn(k, &f, "dependsOn is not honoured: every task starts together");
        if (!sv_get(&t, "template", &tmpl)) {
            rc = sv_fail(&k->x, &t, -EINVAL, "missing template: (the task's pod template)");
            break;
        }
        json_t *ctx = json_object();
        json_object_set_new(ctx, "VC_TASK_INDEX",
                            json_string("\x01"
                                        "ARBITER_GROUP_INDEX\x02"));
        json_object_set_new(ctx, "VK_TASK_INDEX",
                            json_string("\x01"
                                        "ARBITER_GROUP_INDEX\x02"));
        rc = kjob_group(k, j, &tmpl, tname, replicas, ctx);
        json_decref(ctx);
        if (rc < 0)
            break;
    }
    if (rc < 0) {
        kjob_free(j);
        return rc;
    }
    return kjob_done(k, j, &o, &d->root);
}

/* An exclusive-topology annotation: the level each child job is kept in. */
static int exclusive_level(kx_t *k, const sval_t *meta, const char *key, const char **level)
{
    char buf[K8S_NAME];
    sval_t f;

    *level = NULL;
    if (!meta || !k8s_meta(meta, "annotations", key, buf, sizeof buf))
        return 0;
    sv_get(meta, "annotations", &f);
    *level = k8s_topo_level(buf);
    if (!*level)
        return sv_fail(&k->x, &f, -EINVAL,
                       "%s '%s' names no level Arbiter knows (hostname, nvlink, rack, block); it "
                       "changes where the pods may run, so it cannot be dropped",
                       key, buf);
    kx_warn(k, &f,
            "%s: each child job is kept within one %s, but the domain is not reserved for it "
            "alone",
            key, *level);
    return 0;
}

static int kind_jobset(kx_t *k, kdoc_t *d)
{
    static const char *const read[] = {
        "replicatedJobs", "network", "successPolicy",           "failurePolicy",
        "startupPolicy",  "suspend", "ttlSecondsAfterFinished", "managedBy",
        "coordinator",    NULL};
    kopts_t o = {.meta = &d->meta};
    sval_t rjobs, f;
    int n, rc;
    const char *excl = NULL;

    if (!sv_get(&d->spec, "replicatedJobs", &rjobs))
        return sv_fail(&k->x, &d->spec, -EINVAL, "missing replicatedJobs:");
    if ((rc = sv_seq(&k->x, &rjobs, KJ_MAX_GROUPS, &n)) < 0)
        return rc;
    if ((rc = exclusive_level(k, &d->meta, "alpha.jobset.sigs.k8s.io/exclusive-topology", &excl)) <
        0)
        return rc;
    if (sv_get(&d->spec, "successPolicy", &f))
        kx_warn(k, &f, "successPolicy is not honoured (the JobSet succeeds when every task has)");
    if (sv_get(&d->spec, "failurePolicy", &f))
        kx_warn(k, &f, "failurePolicy is not honoured (a failed task fails the JobSet)");
    if (sv_get(&d->spec, "startupPolicy", &f))
        kx_warn(k, &f, "startupPolicy is not honoured: every replicated job starts together");
    warn_spec_rest(k, &d->spec, read, NULL);
    kjob_t *j = kjob_new(k, &d->root, d->name);
    if (!j)
        return -ENOMEM;
    void *it = NULL;
    int global = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        sval_t r, tmpl, jspec, tmeta, ptmpl;
        char rname[48];
        int64_t reps = 1, pods;
        bool indexed;
        const char *lvl = excl;
        sv_item(&r, &rjobs, fy_node_sequence_iterate(rjobs.n, &it), i);
        snprintf(rname, sizeof rname, "job-%d", i);
        if (sv_get(&r, "name", &f) && (rc = k8s_text(k, &f, rname, sizeof rname)) < 0)
            break;
        if (sv_get(&r, "replicas", &f) && (rc = k8s_int(k, &f, 0, 10000, &reps)) < 0)
            break;
        if (!sv_get(&r, "template", &tmpl) || !sv_get(&tmpl, "spec", &jspec)) {
            rc = sv_fail(&k->x, &r, -EINVAL, "missing template.spec (the child Job's spec)");
            break;
        }
        if (sv_get(&tmpl, "metadata", &tmeta) && !lvl &&
            (rc = exclusive_level(k, &tmeta, "alpha.jobset.sigs.k8s.io/exclusive-topology", &lvl)) <
                0)
            break;
        if ((rc = job_spec(k, &jspec, &pods, &indexed, &ptmpl, NULL)) < 0)
            break;
        /* One group per child job when each must stay in its own domain; else
         * all of a replicated job's pods in one group. */
        int64_t groups = lvl ? reps : (reps > 0 ? 1 : 0);
        for (int64_t g = 0; g < groups && rc == 0; g++) {
            char gname[80], idx[24];
            if (lvl)
                snprintf(gname, sizeof gname, "%s-%" PRId64, rname, g);
            else
                snprintf(gname, sizeof gname, "%s", rname);
            json_t *ctx = indexed_ctx(indexed);
            json_object_set_new(ctx, "meta:jobset.sigs.k8s.io/jobset-name", json_string(d->name));
            json_object_set_new(ctx, "meta:jobset.sigs.k8s.io/replicatedjob-name",
                                json_string(rname));
            snprintf(idx, sizeof idx, "%" PRId64, g);
            json_object_set_new(ctx, "meta:jobset.sigs.k8s.io/job-index",
                                json_string(lvl ? idx
                                                : "\x01"
                                                  "ARBITER_GROUP_INDEX\x02"));
            snprintf(idx, sizeof idx, "%d", global + (int)g);
            json_object_set_new(ctx, "meta:jobset.sigs.k8s.io/job-global-index", json_string(idx));
            rc = kjob_group(k, j, &ptmpl, gname, lvl ? pods : pods * reps, ctx);
            json_decref(ctx);
            if (rc == 0 && lvl && j->ngroups && !j->pods[j->ngroups - 1].topo_req[0])
                snprintf(j->pods[j->ngroups - 1].topo_req, K8S_NAME, "%s",
                         !strcmp(lvl, "node") ? "kubernetes.io/hostname" : lvl);
        }
        global += (int)reps;
        if (!lvl && reps > 1 && indexed)
            kx_warn(k, &r,
                    "%s: %" PRId64 " child jobs in one group; JOB_COMPLETION_INDEX counts across "
                    "them (0..%" PRId64 ")",
                    rname, reps, reps * pods - 1);
    }
    if (rc < 0) {
        kjob_free(j);
        return rc;
    }
    return kjob_done(k, j, &o, &d->root);
}

static int kind_lws(kx_t *k, kdoc_t *d)
{
    static const char *const read[] = {"replicas",        "leaderWorkerTemplate", "startupPolicy",
                                       "rolloutStrategy", "networkConfig",        NULL};
    sval_t lwt, f, lt, wt;
    int64_t replicas = 1, size = 1;
    const char *excl = NULL;
    int rc;

    if (sv_get(&d->spec, "replicas", &f) && (rc = k8s_int(k, &f, 0, 1000, &replicas)) < 0)
        return rc;
    if (!sv_get(&d->spec, "leaderWorkerTemplate", &lwt))
        return sv_fail(&k->x, &d->spec, -EINVAL, "missing leaderWorkerTemplate:");
    if (sv_get(&lwt, "size", &f) && (rc = k8s_int(k, &f, 1, 100000, &size)) < 0)
        return rc;
    if (!sv_get(&lwt, "workerTemplate", &wt))
        return sv_fail(&k->x, &lwt, -EINVAL, "missing workerTemplate:");
    bool has_leader = sv_get(&lwt, "leaderTemplate", &lt);
    if (sv_get(&lwt, "subGroupPolicy", &f))
        kx_warn(k, &f, "subGroupPolicy is not honoured");
    if ((rc = exclusive_level(k, &d->meta, "leaderworkerset.sigs.k8s.io/exclusive-topology",
                              &excl)) < 0)
        return rc;
    warn_spec_rest(k, &d->spec, read, NULL);
    if (replicas == 0)
        kx_warn(k, &d->spec, "replicas: 0: no group is made");
    for (int64_t r = 0; r < replicas; r++) {
        char name[128], sz[24];
        kopts_t o = {.meta = &d->meta};
        snprintf(name, sizeof name, "%s-%" PRId64, d->name, r);
        kjob_t *j = kjob_new(k, &d->root, name);
        if (!j)
            return -ENOMEM;
        json_t *ctx = json_object();
        snprintf(sz, sizeof sz, "%" PRId64, size);
        json_object_set_new(ctx, "LWS_LEADER_ADDRESS",
                            json_string("\x01"
                                        "MASTER_ADDR:-localhost\x02"));
        json_object_set_new(ctx, "LWS_GROUP_SIZE", json_string(sz));
        json_object_set_new(ctx, "LWS_WORKER_INDEX",
                            json_string("\x01"
                                        "ARBITER_TASK_INDEX\x02"));
        snprintf(sz, sizeof sz, "%" PRId64, r);
        json_object_set_new(ctx, "meta:leaderworkerset.sigs.k8s.io/group-index", json_string(sz));
        json_object_set_new(ctx, "meta:leaderworkerset.sigs.k8s.io/worker-index",
                            json_string("\x01"
                                        "ARBITER_TASK_INDEX\x02"));
        rc = kjob_group(k, j, has_leader ? &lt : &wt, "leader", 1, ctx);
        if (rc == 0 && size > 1)
            rc = kjob_group(k, j, &wt, "worker", size - 1, ctx);
        json_decref(ctx);
        for (int g = 0; rc == 0 && excl && g < j->ngroups; g++)
            if (!j->pods[g].topo_req[0])
                snprintf(j->pods[g].topo_req, K8S_NAME, "%s",
                         !strcmp(excl, "node") ? "kubernetes.io/hostname" : excl);
        if (rc < 0) {
            kjob_free(j);
            return rc;
        }
        if ((rc = kjob_done(k, j, &o, &d->root)) < 0)
            return rc;
    }
    return 0;
}

/* ---- pod groups (Kueue plain pods, Volcano PodGroups) ----------------------------------- */

typedef struct pgroup {
    char name[K8S_NAME];
    int min; /* from a PodGroup's minMember or Kueue's total count, 0 all */
    char queue[K8S_NAME];
    kjob_t *job; /* its pods so far */
    sval_t at;
} pgroup_t;

typedef struct pgroups {
    int n;
    pgroup_t g[64];
} pgroups_t;

static pgroup_t *pg_find(kx_t *k, pgroups_t *pg, const char *name, const sval_t *at)
{
    for (int i = 0; i < pg->n; i++)
        if (!strcmp(pg->g[i].name, name))
            return &pg->g[i];
    if (pg->n == 64) {
        sv_fail(&k->x, at, -EINVAL, "more than 64 pod groups in one file");
        return NULL;
    }
    pgroup_t *g = &pg->g[pg->n++];
    memset(g, 0, sizeof *g);
    snprintf(g->name, sizeof g->name, "%s", name);
    g->at = *at;
    return g;
}

/* A Pod of a pod group joins its group's job (one group per pod). */
static int pod_in_group(kx_t *k, kdoc_t *d, pgroups_t *pg, const char *group)
{
    pgroup_t *g = pg_find(k, pg, group, &d->root);
    int rc;

    if (!g)
        return -EINVAL;
    if (!g->job && !(g->job = kjob_new(k, &d->root, group)))
        return -ENOMEM;
    if ((rc = kjob_group(k, g->job, &d->root, d->name, 1, NULL)) < 0)
        return rc;
    k8s_pod_t *p = &g->job->pods[g->job->ngroups - 1];
    if (p->podgroup_total > g->min)
        g->min = p->podgroup_total;
    if (p->queue[0] && !g->queue[0])
        snprintf(g->queue, sizeof g->queue, "%s", p->queue);
    return 0;
}

static int podgroup_doc(kx_t *k, kdoc_t *d, pgroups_t *pg)
{
    pgroup_t *g = pg_find(k, pg, d->name, &d->root);
    sval_t f;
    int64_t m = 0;
    int rc;

    if (!g)
        return -EINVAL;
    if (sv_get(&d->spec, "minMember", &f) && (rc = k8s_int(k, &f, 0, 100000, &m)) < 0)
        return rc;
    g->min = (int)m;
    if (sv_get(&d->spec, "queue", &f))
        k8s_text(k, &f, g->queue, sizeof g->queue);
    if (!strcmp(g->queue, "default"))
        g->queue[0] = '\0';
    return 0;
}

static int pg_finish(kx_t *k, pgroups_t *pg)
{
    int rc = 0;

    for (int i = 0; i < pg->n; i++) {
        pgroup_t *g = &pg->g[i];
        if (!g->job) {
            bool named = false;
            for (int n = 0; n < k->nnamed_pg; n++)
                named |= !strcmp(k->named_pg[n], g->name);
            if (rc == 0 && named)
                kx_warn(k, &g->at,
                        "pod group '%s' (minMember %d) is not read: the workload whose pod "
                        "template names it is placed as its kind's gang (docs/compat.md)",
                        g->name, g->min);
            else if (rc == 0)
                kx_warn(k, &g->at, "pod group '%s' has no pods in this file; skipped", g->name);
            continue;
        }
        kopts_t o = {.gang_min = g->min};
        snprintf(o.queue, sizeof o.queue, "%s", g->queue);
        if (g->min > g->job->tasks)
            kx_warn(k, &g->at,
                    "pod group '%s' wants %d pods together; this file has %" PRId64
                    ": the gang is all of them",
                    g->name, g->min, g->job->tasks);
        kjob_t *j = g->job;
        g->job = NULL;
        if (rc == 0)
            rc = kjob_done(k, j, &o, &g->at);
        else
            kjob_free(j);
    }
    for (int i = 0; i < pg->n; i++)
        kjob_free(pg->g[i].job);
    return rc;
}

/* ---- the kind table ---------------------------------------------------------------------- */

typedef struct kind_row {
    const char *group; /* the apiVersion's group ("" for core v1), NULL: any */
    const char *kind;
    kind_fn fn;
} kind_row_t;

static const kind_row_t kind_rows[] = {
    {"", "Pod", kind_pod},
    {"batch", "Job", kind_job},
    {"apps", "Deployment", kind_service},
    {"apps", "StatefulSet", kind_service},
    {"apps", "ReplicaSet", kind_service},
    {"kubeflow.org", "PyTorchJob", kind_kubeflow},
    {"kubeflow.org", "TFJob", kind_kubeflow},
    {"kubeflow.org", "MPIJob", kind_kubeflow},
    {"kubeflow.org", "XGBoostJob", kind_kubeflow},
    {"kubeflow.org", "PaddleJob", kind_kubeflow},
    {"kubeflow.org", "JAXJob", kind_kubeflow},
    {"kubeflow.org", "MXJob", kind_kubeflow},
    {"batch.volcano.sh", "Job", kind_volcano},
    {"jobset.x-k8s.io", "JobSet", kind_jobset},
    {"leaderworkerset.x-k8s.io", "LeaderWorkerSet", kind_lws},
};

#define SUPPORTED                                                                                  \
    "Pod, batch/v1 Job, Deployment, StatefulSet, ReplicaSet, PyTorchJob, TFJob, MPIJob, "          \
    "XGBoostJob, PaddleJob, JAXJob, MXJob, Volcano Job (batch.volcano.sh), JobSet, "               \
    "LeaderWorkerSet"

/* Workload kinds Arbiter does not run: refused, not skipped. */
static const char *const refused[] = {"CronJob",          "DaemonSet",  "ReplicationController",
                                      "RayJob",           "RayCluster", "RayService",
                                      "TrainJob",         "Workflow",   "CronWorkflow",
                                      "SparkApplication", "Notebook",   "InferenceService",
                                      "AppWrapper",       "Job",        NULL};

static int one_doc(kx_t *k, const sval_t *root, pgroups_t *pg, int docno);

static int read_list(kx_t *k, const sval_t *root, pgroups_t *pg, int docno)
{
    sval_t items, it;
    int n, rc = 0;

    if (!sv_get(root, "items", &items))
        return 0;
    if ((rc = sv_seq(&k->x, &items, 10000, &n)) < 0)
        return rc;
    void *iter = NULL;
    for (int i = 0; i < n && rc == 0; i++) {
        sv_item(&it, &items, fy_node_sequence_iterate(items.n, &iter), i);
        rc = one_doc(k, &it, pg, docno);
    }
    return rc;
}

static int one_doc(kx_t *k, const sval_t *root, pgroups_t *pg, int docno)
{
    kdoc_t d;
    sval_t f;
    char api[96] = "", kind[64] = "", group[96];
    int rc;
    bool is;

    memset(&d, 0, sizeof d);
    d.root = *root;
    if ((rc = sv_map(&k->x, root, &is)) < 0)
        return rc;
    if (!is)
        return 0; /* an empty document */
    if (sv_get(root, "kind", &f) && (rc = k8s_text(k, &f, kind, sizeof kind)) < 0)
        return rc;
    if (!kind[0])
        return sv_fail(&k->x, root, -EINVAL,
                       "document %d has no kind:; a Kubernetes manifest names its kind (" SUPPORTED
                       ")",
                       docno);
    if (!sv_get(root, "apiVersion", &f))
        return sv_fail(&k->x, &f, -EINVAL,
                       "kind '%s' without apiVersion:; give the manifest's apiVersion (v1, "
                       "batch/v1, kubeflow.org/v1, ...), or for Arbiter's own spec use kind: "
                       "batch or service",
                       kind);
    if ((rc = k8s_text(k, &f, api, sizeof api)) < 0)
        return rc;
    snprintf(group, sizeof group, "%s", api);
    char *slash = strrchr(group, '/');
    if (slash)
        *slash = '\0';
    else
        group[0] = '\0'; /* "v1": the core group */
    snprintf(k->kind, sizeof k->kind, "%s", kind);
    snprintf(k->api, sizeof k->api, "%s", api);
    k->mainctr = NULL;
    if (!strcmp(kind, "List"))
        return read_list(k, root, pg, docno);
    sv_get(root, "metadata", &d.meta);
    if (sv_get(&d.meta, "name", &f) && (rc = k8s_text(k, &f, d.name, sizeof d.name)) < 0)
        return rc;
    if (!d.name[0] && sv_get(&d.meta, "generateName", &f) &&
        (rc = k8s_text(k, &f, d.name, sizeof d.name)) < 0)
        return rc;
    size_t nl = strlen(d.name);
    while (nl && d.name[nl - 1] == '-')
        d.name[--nl] = '\0';
    sv_get(root, "spec", &d.spec);
    if (!strcmp(kind, "PodGroup"))
        return podgroup_doc(k, &d, pg);
    for (size_t i = 0; i < sizeof kind_rows / sizeof kind_rows[0]; i++) {
        const kind_row_t *r = &kind_rows[i];
        if (strcmp(r->kind, kind) || strcmp(r->group, group))
            continue;
        if (!d.name[0])
            return sv_fail(&k->x, d.meta.n ? &d.meta : root, -EINVAL,
                           "%s has no metadata.name; give it a name", kind);
        if (!d.spec.n && r->fn != kind_pod)
            return sv_fail(&k->x, root, -EINVAL, "%s '%s' has no spec:", kind, d.name);
        if (r->fn == kind_pod) {
            char pgname[K8S_NAME];
            if (k8s_meta(&d.meta, "labels", "kueue.x-k8s.io/pod-group-name", pgname,
                         sizeof pgname) ||
                k8s_meta(&d.meta, "annotations", "scheduling.k8s.io/group-name", pgname,
                         sizeof pgname))
                return pod_in_group(k, &d, pg, pgname);
        }
        return r->fn(k, &d);
    }
    for (int i = 0; refused[i]; i++)
        if (!strcmp(refused[i], kind)) {
            sv_get(root, "kind", &f);
            return sv_fail(&k->x, &f, -EINVAL,
                           "kind %s (%s) is not supported; Arbiter runs " SUPPORTED, kind, api);
        }
    sv_get(root, "kind", &f);
    kx_warn(k, &f, "%s '%s' (%s) is not a workload Arbiter runs; skipped", kind,
            d.name[0] ? d.name : "?", api);
    return 0;
}

int wl_k8s(wl_t *w, const char *buf, size_t len)
{
    kx_t k = {.x = {.file = w->file, .err = w->err}, .w = w};
    pgroups_t *pg = calloc(1, sizeof *pg);
    char *alt = NULL;
    sv_doc_t d;
    int rc, docno = 0;
    size_t i = 0;

    if (!pg)
        return arb_errf(w->err, -ENOMEM, "out of memory");
    while (i < len && isspace((unsigned char)buf[i]))
        i++;
    if (i < len && (buf[i] == '{' || buf[i] == '[')) { /* JSON: a canonical layout for libfyaml */
        json_error_t je;
        json_t *v = json_loadb(buf, len, 0, &je);
        if (!v) {
            free(pg);
            return arb_errf(w->err, -EINVAL, "%s:%d:%d: malformed JSON: %s", w->file, je.line,
                            je.column, je.text);
        }
        alt = json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(v);
        if (!alt) {
            free(pg);
            return arb_errf(w->err, -ENOMEM, "out of memory");
        }
        buf = alt;
        len = strlen(alt);
    }
    if ((rc = sv_docs_open(w->file, buf, len, &d, w->err)) < 0) {
        free(pg);
        free(alt);
        return rc;
    }
    size_t before = json_array_size(w->jobs);
    while ((rc = sv_docs_next(&d, w->file, w->err)) > 0) {
        sval_t root;
        docno++;
        sv_root(&root, fy_document_root(d.doc), "");
        if (!root.n)
            continue;
        if ((rc = one_doc(&k, &root, pg, docno)) < 0)
            break;
    }
    if (rc == 0)
        rc = pg_finish(&k, pg);
    else
        for (int g = 0; g < pg->n; g++)
            kjob_free(pg->g[g].job);
    sv_doc_close(&d);
    free(pg);
    free(alt);
    if (rc == 0 && json_array_size(w->jobs) == before)
        rc = arb_errf(w->err, -EINVAL, "%s: no workload in %d document%s; Arbiter runs " SUPPORTED,
                      w->file, docno, docno == 1 ? "" : "s");
    return rc < 0 ? rc : 0;
}
