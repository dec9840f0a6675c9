/*
 * service.c: service jobs (service.h): the spec keys, the parent job, the
 * replicas' reconciliation (start, restart with backoff, drain and stop),
 * autoscaling on live load (the decision is core's arb_as_decide), the
 * endpoints a balancer follows, balancers' load reports, and who preempted
 * whom.
 *
 * Every function here expects s->mu held, except the st_* entry points
 * declared in state.h (endpoints, list, load), which take it.
 */
#include <libfyaml.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "state/jv.h"
#include "state/service.h"
#include "state/state_int.h"
#include "util/mtime.h"
#include "util/hash.h"

#define BACKOFF_MIN_NS 1000000000LL
#define BACKOFF_MAX_NS 30000000000LL
#define LOAD_FRESH_NS 5000000000LL
#define SAMPLE_NS 1000000000LL
#define DRAIN_SEEN_NS 1500000000LL

/* The service settings of a spec body (parsed again: cheap, and it keeps
 * codec.c's interface as it is). */
static int spec_conf(st_t *s, const char *body, size_t n, bool yaml, st_svc_conf_t *c,
                     arb_err_t *err)
{
    sv_doc_t d;
    char *alt = NULL;
    int rc;

    memset(c, 0, sizeof *c);
    if (!yaml) { /* canonical layout, as codec.c does for odd JSON */
        json_t *v = json_loadb(body, n, 0, NULL);
        alt = v ? json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        json_decref(v);
        if (alt) {
            body = alt;
            n = strlen(alt);
        }
    }
    if ((rc = sv_doc_open("job", body, n, &d, err)) < 0) {
        free(alt);
        return rc;
    }
    sx_t x = {
        .file = yaml ? "job.yaml" : "job.json", .err = err, .c = &s->cluster, .lone_job = true};
    rc = spec_service_take(&x, fy_document_root(d.doc), c);
    sv_doc_close(&d);
    free(alt);
    return rc;
}

/* ---- parent and replicas ---------------------------------------------------------- */

static st_svc_t *svc_of(st_t *s, const st_job_t *child, st_job_t **parent)
{
    st_job_t *p = child->svc_of ? st_job_find(s, child->svc_of) : NULL;
    if (parent)
        *parent = p;
    return p ? p->svc : NULL;
}

static bool ended(const st_job_t *sj)
{
    return !sj || sj->j->state >= ARB_JOB_SUCCEEDED;
}

static bool holds(const st_job_t *sj)
{
    return sj && (sj->j->state == ARB_JOB_PLACED || sj->j->state == ARB_JOB_RUNNING);
}

static int grow(st_svc_t *v, int n)
{
    if (n <= v->nrep)
        return 0;
    st_replica_t *r = realloc(v->rep, (size_t)n * sizeof *r);
    if (!r)
        return -ENOMEM;
    memset(r + v->nrep, 0, (size_t)(n - v->nrep) * sizeof *r);
    v->rep = r;
    v->nrep = n;
    return 0;
}

/* The ports a service's replicas may use: port .. port + span - 1. */
static int port_span(const st_svc_conf_t *c)
{
    return c->autoscale ? c->as.max : c->replicas;
}

int st_service_check(st_t *s, const arb_job_t *tmpl, const st_svc_conf_t *c, arb_err_t *err)
{
    if (c->is && tmpl->ntasks != 1)
        return arb_errf(err, -EINVAL,
                        "groups: a service replica is one task; give its resources at the top "
                        "level and the count as replicas: N");
    for (int i = 0; c->is && i < s->nactive; i++) {
        const st_job_t *o = s->active[i];
        if (!o->svc)
            continue;
        if (strcmp(o->j->name, tmpl->name) == 0)
            return arb_errf(err, -EBUSY,
                            "name: a service named '%s' is running already (job %llu); balancers "
                            "find services by name: cancel it first or pick another name",
                            tmpl->name, (unsigned long long)o->id);
        /* replicas of two services on one host must not share a port */
        int lo = c->port, hi = c->port + port_span(c) - 1;
        int olo = o->svc->conf.port, ohi = olo + port_span(&o->svc->conf) - 1;
        if (lo <= ohi && olo <= hi)
            return arb_errf(err, -EBUSY,
                            "port: %d..%d overlaps the ports of service '%s' (job %llu, %d..%d); "
                            "pick a port outside them",
                            lo, hi, o->j->name, (unsigned long long)o->id, olo, ohi);
    }
    return 0;
}

int st_service_attach(st_t *s, st_job_t *sj, const st_svc_conf_t *c, int desired)
{
    st_svc_t *v = calloc(1, sizeof *v);

    if (!v)
        return -ENOMEM;
    s->nsvc_ever++; /* st_cycle walks for services only once there are some */
    v->conf = *c;
    v->desired = desired > 0 ? desired : c->replicas;
    v->version = 1;
    arb_as_reset(&v->as);
    sj->svc = v;
    for (int t = 0; sj->j && t < sj->ntasks && sj->j->state == ARB_JOB_RUNNING; t++)
        sj->tasks[t].state = TK_RUNNING; /* the service runs while its replicas do */
    return grow(v, v->desired);
}

void st_service_free(st_job_t *sj)
{
    if (sj->svc) {
        free(sj->svc->rep);
        free(sj->svc);
        sj->svc = NULL;
    }
}

/* The env a replica gets on top of the service's. */
static json_t *replica_env(const st_job_t *parent, int i)
{
    json_t *env = parent->env ? json_deep_copy(parent->env) : json_object(); /* secrets kept */
    char port[16], idx[16];

    snprintf(port, sizeof port, "%d", parent->svc->conf.port + i);
    snprintf(idx, sizeof idx, "%d", i);
    json_object_set_new(env, "PORT", json_string(port));
    json_object_set_new(env, "ARBITER_PORT", json_string(port));
    json_object_set_new(env, "ARBITER_REPLICA", json_string(idx));
    json_object_set_new(env, "ARBITER_SERVICE", json_string(parent->j->name));
    return env;
}

/* Make a replica of job j (the parsed template) into child job sj. */
static void dress_replica(st_t *s, st_job_t *parent, st_job_t *sj, arb_job_t *j, int i)
{
    char nm[ARB_JOB_NAME_MAX];

    snprintf(nm, sizeof nm, "%.80s-%d", parent->j->name, i);
    (void)arb_job_set_name(j, nm); /* -ENOMEM: it keeps the template's name, the service's */
    j->queue = parent->j->queue;
    j->priority = parent->j->priority;
    /* Below the minimum a service is never preempted. */
    j->preemptible = i >= parent->svc->conf.min;
    j->service = true; /* least-loaded placement (score_load.c) */
    sj->svc_of = parent->id;
    sj->replica = i;
    json_decref(sj->env);
    sj->env = replica_env(parent, i);
    (void)s;
}

/* Submit a new child for replica i. */
static int start_replica(st_t *s, st_job_t *parent, int i, const char *why)
{
    st_svc_t *v = parent->svc;
    arb_job_t *j = NULL;
    json_t *cmd = NULL, *env = NULL;
    bool rs = true;
    arb_err_t err = {{0}};
    st_job_t *sj = NULL;
    int rc = st_spec_parse(s, parent->spec, parent->speclen, parent->yaml, &j, &cmd, &env, &rs,
                           NULL, &err);

    if (rc < 0)
        return rc;
    sj = calloc(1, sizeof *sj);
    if (sj)
        sj->tasks = calloc((size_t)j->ntasks, sizeof *sj->tasks);
    if (sj)
        sj->spec = malloc(parent->speclen + 1);
    if (!sj || !sj->tasks || !sj->spec) {
        rc = -ENOMEM;
        goto fail;
    }
    memcpy(sj->spec, parent->spec, parent->speclen + 1);
    sj->speclen = parent->speclen;
    sj->yaml = parent->yaml;
    sj->ntasks = j->ntasks;
    sj->id = s->next_id;
    sj->team = parent->team; /* interned: shared */
    sj->owner = parent->owner;
    sj->command = cmd;
    sj->env = env;
    cmd = env = NULL;
    sj->restartable = true;
    sj->submit_ms = st_now_ms(s);
    dress_replica(s, parent, sj, j, i);
    j->ext_id = sj->id;
    arb_ctx_t ctx = {.now_ns = st_now_ns(s), .rng = &s->rng};
    if ((rc = arb_sched_submit(s->sched, j, &ctx, &err)) < 0)
        goto fail;
    sj->j = j;
    j = NULL;
    if ((rc = st_job_add(s, sj)) < 0) {
        arb_sched_finish(s->sched, sj->j, ARB_JOB_CANCELLED, NULL);
        sj->j = NULL;
        goto fail;
    }
    sj->last = ARB_JOB_PENDING;
    v->rep[i].job = sj->id;
    v->rep[i].counted = false;
    v->rep[i].ready = false;
    v->rep[i].draining = false;
    v->rep[i].inflight = 0;
    v->rep[i].load_ns = 0;
    sj->lamport_submit = st_event(
        s, "replica-started", sj->id, NULL, "service '%s' (job %llu): replica %d is job %llu (%s)",
        parent->j->name, (unsigned long long)parent->id, i, (unsigned long long)sj->id, why);
    st_job_save(s, sj, sj->lamport_submit);
    s->m_submitted++;
    return 0;
fail:
    if (sj) {
        free(sj->spec);
        free(sj->tasks);
        json_decref(sj->command);
        json_decref(sj->env);
        free(sj);
    }
    arb_job_free(j);
    json_decref(cmd);
    json_decref(env);
    return rc;
}

/* Stop a child: at once if no agent has it, else ask its agents. */
static void stop_child(st_t *s, st_job_t *sj, const char *why)
{
    if (ended(sj))
        return;
    if ((sj->j->state == ARB_JOB_PLACED || sj->j->state == ARB_JOB_RUNNING) && sj->delivered) {
        if (!sj->stop || sj->stop_then != ST_THEN_CANCEL) {
            sj->stop = true;
            sj->stop_then = ST_THEN_CANCEL;
            st_job_say(sj, "%s", why);
            uint64_t lam = st_event(s, "job-cancel-requested", sj->id, NULL,
                                    "job %llu: %s; waiting for its agent to stop it",
                                    (unsigned long long)sj->id, why);
            st_job_save(s, sj, lam);
        }
        return;
    }
    st_finish_job(s, sj, ARB_JOB_CANCELLED, why);
}

static void replica_addr(st_t *s, const st_job_t *parent, const st_job_t *c, int i, char *buf,
                         size_t n)
{
    buf[0] = '\0';
    if (!holds(c) || c->j->nalloc < 1)
        return;
    const arb_node_t *nd = &s->cluster.nodes[c->j->alloc[0].node];
    const st_node_t *x = st_node_ext(s, nd);
    snprintf(buf, n, "%s:%d", x->addr[0] ? x->addr : arb_node_name(&s->cluster, nd),
             parent->svc->conf.port + i);
}

/* Bump the endpoints version when what a balancer sees changed. */
static void publish(st_t *s, st_job_t *parent)
{
    st_svc_t *v = parent->svc;
    uint64_t h = ARB_HASH_SEED;

    for (int i = 0; i < v->nrep; i++) {
        st_replica_t *r = &v->rep[i];
        h = arb_hash(h, &r->job, sizeof r->job);
        h = arb_hash(h, r->addr, strlen(r->addr));
        h = arb_hash(h, &r->ready, sizeof r->ready);
        h = arb_hash(h, &r->draining, sizeof r->draining);
    }
    h = arb_hash(h, &v->desired, sizeof v->desired);
    if (h != v->sig) {
        v->sig = h;
        v->version++;
        st_changed(s);
    }
}

/* The parent ends once every replica has: cancelled. */
static void finish_parent(st_t *s, st_job_t *sj)
{
    arb_job_transition(sj->j, ARB_JOB_CANCELLED, NULL);
    for (int t = 0; t < sj->ntasks; t++)
        sj->tasks[t].state = TK_CANCELLED;
    sj->end_ms = st_now_ms(s);
    sj->stop = false;
    uint64_t lam = st_event(s, "job-cancelled", sj->id, NULL,
                            "job %llu '%s': service stopped, every replica ended",
                            (unsigned long long)sj->id, sj->j->name);
    st_job_save(s, sj, lam);
    st_job_retire(s, sj);
    s->m_cancelled++;
    publish(s, sj);
}

bool st_service_cancel(st_t *s, st_job_t *sj, const char *by)
{
    if (!sj->svc)
        return false;
    if (!sj->stop) {
        sj->stop = true;
        sj->stop_then = ST_THEN_CANCEL;
        st_job_say(sj, "cancel requested by %s", by && by[0] ? by : "user");
        uint64_t lam = st_event(s, "job-cancel-requested", sj->id, NULL,
                                "service '%s' (job %llu): stopping its %d replicas", sj->j->name,
                                (unsigned long long)sj->id, sj->svc->nrep);
        st_job_save(s, sj, lam);
    }
    st_kick(s);
    return true;
}

/* Load of the ready replicas, for the autoscaler. */
static void service_load(st_t *s, st_job_t *parent, int64_t now, arb_as_load_t *l)
{
    st_svc_t *v = parent->svc;
    double util = 0;
    int ngpu = 0;

    memset(l, 0, sizeof *l);
    for (int i = 0; i < v->nrep && i < v->desired; i++) {
        st_replica_t *r = &v->rep[i];
        st_job_t *c = st_job_find(s, r->job);
        if (!r->ready || r->draining || !holds(c))
            continue;
        l->ready++;
        if (r->load_ns && now - r->load_ns <= LOAD_FRESH_NS) {
            l->inflight += r->inflight;
            l->queue += r->queue;
        }
        const arb_task_alloc_t *a = &c->j->alloc[0];
        const arb_node_t *nd = &s->cluster.nodes[a->node];
        for (int g = 0; g < nd->ngpus; g++)
            if (a->gpu_mask & (1u << g)) {
                util += nd->gpu[g].util_pct / 100.0;
                ngpu++;
            }
    }
    l->gpu_util = ngpu ? util / ngpu : -1;
}

static void autoscale(st_t *s, st_job_t *parent, int64_t now)
{
    st_svc_t *v = parent->svc;
    arb_as_load_t l;
    arb_as_decision_t d;

    if (!v->conf.autoscale || parent->stop || now < v->as_next_ns)
        return;
    v->as_next_ns = now + SAMPLE_NS;
    service_load(s, parent, now, &l);
    if (l.ready == 0)
        return; /* nothing measured: no decision on no data */
    arb_as_decide(&v->conf.as, &v->as, now, v->desired, &l, &d);
    v->last = d;
    if (d.desired == v->desired)
        return;
    uint64_t lam =
        st_event(s, d.desired > v->desired ? "service-scale-out" : "service-scale-in", parent->id,
                 NULL, "service '%s' (job %llu): %d -> %d replicas: %s", parent->j->name,
                 (unsigned long long)parent->id, v->desired, d.desired, d.why);
    v->desired = d.desired;
    arb_as_note_change(&v->as, now);
    grow(v, v->desired);
    st_job_save(s, parent, lam);
    s->dirty = true;
}

static void reconcile_one(st_t *s, st_job_t *parent, int64_t now)
{
    st_svc_t *v = parent->svc;
    int want = parent->stop ? 0 : v->desired;
    bool any = false;

    autoscale(s, parent, now);
    want = parent->stop ? 0 : v->desired;
    for (int i = 0; i < v->nrep; i++) {
        st_replica_t *r = &v->rep[i];
        st_job_t *c = r->job ? st_job_find(s, r->job) : NULL;
        if (!ended(c))
            any = true;
        if (i >= want) {
            /* scale-in or stop: drain first, then stop */
            if (ended(c))
                continue;
            if (!r->draining) {
                r->draining = true;
                r->drain_ns = now;
                if (!parent->stop)
                    st_event(s, "replica-draining", c->id, NULL,
                             "service '%s' (job %llu): replica %d (job %llu) draining: the "
                             "balancer stops sending to it; %.0f requests in flight",
                             parent->j->name, (unsigned long long)parent->id, i,
                             (unsigned long long)c->id, r->inflight);
            }
            /* idle: a balancer report taken a while after the endpoint was
             * marked draining (so the balancer has seen it go) says 0 */
            bool idle = r->load_ns > r->drain_ns + DRAIN_SEEN_NS && r->inflight <= 0;
            bool late = now - r->drain_ns >= v->conf.drain_ns;
            if (parent->stop || !r->ready || idle || late || !holds(c)) {
                char why[256];
                snprintf(why, sizeof why, "replica %d of service '%.96s' stopped (%s)", i,
                         parent->j->name,
                         parent->stop ? "service cancelled"
                         : idle       ? "scaled in, drained"
                         : late       ? "scaled in, drain timeout"
                                      : "scaled in");
                stop_child(s, c, why);
                /* stopped on purpose: no failure, no backoff if it is wanted again */
                r->counted = true;
                r->restarts = 0;
                r->retry_ns = 0;
            }
            continue;
        }
        if (c && !ended(c)) {
            if (r->draining) { /* scaled out again before it stopped: keep it */
                r->draining = false;
            }
            if (!holds(c))
                r->ready = false;
            continue;
        }
        /* no live child: start one, after the backoff if the last one ended */
        if (c && !r->counted) {
            r->counted = true;
            r->ready = false;
            r->restarts++;
            int64_t b = BACKOFF_MIN_NS << (r->restarts - 1 < 5 ? r->restarts - 1 : 5);
            if (b > BACKOFF_MAX_NS)
                b = BACKOFF_MAX_NS;
            r->retry_ns = now + b;
            const st_task_t *tk = &c->tasks[0];
            char ex[32] = "";
            if (tk->has_exit)
                snprintf(ex, sizeof ex, ", exit %d", tk->exit_code);
            st_event(s, "replica-restarting", c->id, NULL,
                     "service '%s' (job %llu): replica %d (job %llu) %s%s; restart %d in %.1f s",
                     parent->j->name, (unsigned long long)parent->id, i, (unsigned long long)c->id,
                     arb_job_state_name(c->j->state), ex, r->restarts, (double)b / 1e9);
        }
        if (c && now < r->retry_ns)
            continue;
        char why[64];
        if (c)
            snprintf(why, sizeof why, "restart %d", r->restarts);
        else
            snprintf(why, sizeof why, "new");
        if (start_replica(s, parent, i, why) == 0) {
            any = true;
            s->dirty = true;
        }
    }
    /* forget replicas past the count once they ended */
    while (v->nrep > want) {
        st_replica_t *r = &v->rep[v->nrep - 1];
        if (!ended(r->job ? st_job_find(s, r->job) : NULL))
            break;
        v->nrep--;
    }
    if (parent->stop && !any)
        finish_parent(s, parent);
}

/* Addresses and readiness as placement left them; publish changes. */
static void refresh(st_t *s, st_job_t *parent)
{
    st_svc_t *v = parent->svc;

    for (int i = 0; i < v->nrep; i++) {
        st_replica_t *r = &v->rep[i];
        st_job_t *c = r->job ? st_job_find(s, r->job) : NULL;
        if (!holds(c))
            r->ready = false;
        replica_addr(s, parent, c, i, r->addr, sizeof r->addr);
    }
    publish(s, parent);
}

void st_service_refresh(st_t *s)
{
    for (int i = 0; i < s->nactive; i++)
        if (s->active[i]->svc)
            refresh(s, s->active[i]);
}

void st_service_reconcile(st_t *s, int64_t now)
{
    /* reconcile_one may add children (appended) and retire the parent
     * (moves the last active job into its slot): walk backwards over the
     * jobs that were active at the start. */
    for (int i = s->nactive - 1; i >= 0; i--) {
        if (i >= s->nactive)
            continue;
        st_job_t *sj = s->active[i];
        if (sj->svc)
            reconcile_one(s, sj, now);
    }
}

/* ---- who preempted whom ------------------------------------------------------------- */

bool st_service_who(st_t *s, const st_job_t *p, char *buf, size_t n)
{
    st_job_t *parent = NULL;

    if (!p->svc_of || !svc_of(s, p, &parent) || !parent)
        return false;
    snprintf(buf, n, "job %llu (service '%s', priority %d) placing replica %d (job %llu)",
             (unsigned long long)parent->id, parent->j->name, p->j->priority, p->replica,
             (unsigned long long)p->id);
    return true;
}

void st_service_preempted(st_t *s, st_job_t *victim, char *msg, size_t n)
{
    uint32_t by = victim->j->preempted_by;
    st_job_t *p = NULL, *parent = NULL;

    for (int i = 0; by && i < s->nactive && !p; i++)
        if (s->active[i]->j && s->active[i]->j->id == by && !s->active[i]->own_j)
            p = s->active[i];
    const char *vk = victim->svc_of ? "service replica" : "batch";
    if (!p) {
        snprintf(msg, n, "job %llu '%s' (%s) preempted by a higher-priority job; requeued",
                 (unsigned long long)victim->id, victim->j->name, vk);
        return;
    }
    if (svc_of(s, p, &parent) && parent)
        snprintf(msg, n,
                 "job %llu (service '%s', priority %d) preempted job %llu '%s' (%s, priority "
                 "%d) to place replica %d (job %llu); requeued",
                 (unsigned long long)parent->id, parent->j->name, p->j->priority,
                 (unsigned long long)victim->id, victim->j->name, vk, victim->j->priority,
                 p->replica, (unsigned long long)p->id);
    else
        snprintf(msg, n,
                 "job %llu '%s' (priority %d) preempted job %llu '%s' (%s, priority %d) to "
                 "place it; requeued",
                 (unsigned long long)p->id, p->j->name, p->j->priority,
                 (unsigned long long)victim->id, victim->j->name, vk, victim->j->priority);
}

/* ---- the view ------------------------------------------------------------------------------ */

void st_service_view_free(st_service_view_t *v)
{
    free(v->replicas);
    memset(v, 0, sizeof *v);
}

void st_service_list_free(st_service_list_t *l)
{
    for (int i = 0; i < l->n; i++)
        st_service_view_free(&l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* What the agent of a replica's node last reported, for the balancers'
 * feedback policy: the mean utilisation of the replica's GPUs (the node's
 * mean for a replica without GPUs), 0..1, the node's queue length, and the
 * report's age (ms, the controller's monotonic clock); none before the
 * node's first report. */
static void replica_load(st_t *s, const st_job_t *c, int64_t now, st_replica_view_t *o)
{
    const arb_node_t *n = &s->cluster.nodes[c->j->alloc[0].node];
    const st_node_t *x = st_node_ext(s, n);
    uint16_t mask = c->j->alloc[0].gpu_mask;
    double util = 0;
    int k = 0;

    if (!x || x->report_mono <= 0)
        return;
    for (int g = 0; g < n->ngpus; g++)
        if (!mask || (mask & (1u << g))) {
            util += n->gpu[g].util_pct;
            k++;
        }
    o->has_load = true;
    o->gpu_util = k ? util / k / 100.0 : 0.0;
    o->queue = n->queue_len > 0 ? n->queue_len : 0;
    o->age_ms = (now - x->report_mono) / 1000000;
}

static void replica_view(st_t *s, st_job_t *parent, int i, int64_t now, st_replica_view_t *o)
{
    st_replica_t *r = &parent->svc->rep[i];
    st_job_t *c = r->job ? st_job_find(s, r->job) : NULL;

    memset(o, 0, sizeof *o);
    o->index = i;
    o->job = r->job;
    o->state = c ? arb_job_state_name(c->j->state) : "starting";
    o->ready = r->ready;
    o->draining = r->draining;
    o->restarts = r->restarts;
    if (holds(c)) {
        o->node = arb_node_name(&s->cluster, &s->cluster.nodes[c->j->alloc[0].node]);
        snprintf(o->address, sizeof o->address, "%s", r->addr);
        replica_load(s, c, now, o);
    }
    o->port = parent->svc->conf.port + i;
    o->has_inflight = r->load_ns && now - r->load_ns <= LOAD_FRESH_NS;
    o->inflight = o->has_inflight ? r->inflight : 0;
}

/* Service sj's view; -ENOMEM (v empty). Caller holds s->mu. */
int st_service_view_of(st_t *s, st_job_t *sj, st_service_view_t *v)
{
    const st_svc_t *sv = sj->svc;
    int64_t now = st_now_ns(s);

    memset(v, 0, sizeof *v);
    snprintf(v->name, sizeof v->name, "%s", sj->j->name);
    v->job = sj->id;
    v->version = sv->version;
    v->desired = sv->desired;
    v->min = sv->conf.min;
    v->port = sv->conf.port;
    snprintf(v->health, sizeof v->health, "%s", sv->conf.health);
    if (sv->nrep > 0 && !(v->replicas = calloc((size_t)sv->nrep, sizeof *v->replicas))) {
        memset(v, 0, sizeof *v);
        return -ENOMEM;
    }
    v->nreplicas = sv->nrep;
    for (int i = 0; i < sv->nrep; i++)
        replica_view(s, sj, i, now, &v->replicas[i]);
    v->autoscale = sv->conf.autoscale;
    if (v->autoscale) {
        v->as = sv->conf.as;
        v->has_last = sv->last.why[0] != '\0';
        v->recommended = sv->last.recommended;
        v->per_replica = sv->last.per_replica;
        snprintf(v->last, sizeof v->last, "%s", sv->last.why);
    }
    return 0;
}

/* ---- the API: endpoints, list, load ------------------------------------------------------- */

static st_job_t *find_service(st_t *s, const char *name)
{
    st_job_t *best = NULL;
    for (int i = 0; i < s->nactive; i++)
        if (s->active[i]->svc && strcmp(s->active[i]->j->name, name) == 0 &&
            (!best || s->active[i]->id > best->id))
            best = s->active[i];
    return best;
}

static bool may_see_svc(const st_who_t *who, const st_job_t *sj)
{
    return who->role != ST_ROLE_USER || strcmp(who->team ? who->team : "", sj->team) == 0;
}

int st_service_endpoints(st_t *s, const st_who_t *who, const char *name, uint64_t version,
                         int64_t wait_ms, st_service_view_t *out, int64_t *ticket, arb_err_t *err)
{
    struct timespec dl;
    st_job_t *sj;
    int rc = 0;

    memset(out, 0, sizeof *out);
    dl = st_deadline(wait_ms);
    pthread_mutex_lock(&s->mu);
    for (;;) {
        sj = find_service(s, name);
        if (!sj || !may_see_svc(who, sj)) {
            rc = arb_errf(err, -ENOENT,
                          "service '%s': no such running service (submit a job with kind: "
                          "service and name: %s)",
                          name, name);
            break;
        }
        if (wait_ms <= 0 || sj->svc->version != version || s->stop)
            break;
        if (arb_cond_wait_until(&s->ev_cond, &s->mu, &dl) != 0)
            break;
    }
    if (rc == 0 && st_service_view_of(s, sj, out) < 0)
        rc = arb_errf(err, -ENOMEM, "out of memory for service '%s''s endpoints", name);
    *ticket = st_seen(s);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int st_services_list(st_t *s, const st_who_t *who, st_service_list_t *out, int64_t *ticket,
                     arb_err_t *err)
{
    int rc = 0;

    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->mu);
    if (s->nactive > 0 && !(out->v = calloc((size_t)s->nactive, sizeof *out->v)))
        rc = arb_errf(err, -ENOMEM, "out of memory listing the services");
    for (int i = 0; rc == 0 && i < s->nactive; i++)
        if (s->active[i]->svc && may_see_svc(who, s->active[i])) {
            if (st_service_view_of(s, s->active[i], &out->v[out->n]) < 0)
                rc = arb_errf(err, -ENOMEM, "out of memory listing the services");
            else
                out->n++;
        }
    *ticket = st_seen(s);
    pthread_mutex_unlock(&s->mu);
    if (rc < 0)
        st_service_list_free(out);
    return rc;
}

int st_service_load(st_t *s, const st_who_t *who, const char *name, const st_replica_load_t *v,
                    int n, st_load_ack_t *out, int64_t *ticket, arb_err_t *err)
{
    int rc = 0;

    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->mu);
    st_job_t *sj = find_service(s, name);
    if (!sj || !may_see_svc(who, sj)) {
        rc = arb_errf(err, -ENOENT, "service '%s': no such running service", name);
    } else {
        int64_t now = st_now_ns(s);
        for (int i = 0; i < sj->svc->nrep; i++) {
            /* A draining replica the balancer no longer lists has nothing
             * in flight there. (With several balancers the last report
             * wins: a known approximation; the drain timeout bounds it.) */
            st_replica_t *r = &sj->svc->rep[i];
            if (r->draining) {
                r->inflight = 0;
                r->queue = 0;
                r->load_ns = now;
            }
        }
        for (int k = 0; k < n; k++)
            for (int i = 0; i < sj->svc->nrep; i++)
                if (strcmp(sj->svc->rep[i].addr, v[k].address) == 0) {
                    sj->svc->rep[i].inflight = v[k].inflight;
                    sj->svc->rep[i].queue = v[k].queue;
                    sj->svc->rep[i].load_ns = now;
                    out->matched++;
                }
        out->version = sj->svc->version;
    }
    *ticket = st_seen(s);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* ---- records and recovery ------------------------------------------------------------------- */

void st_service_record(st_job_t *sj, json_t *o)
{
    if (sj->svc)
        json_object_set_new(o, "svc_desired", json_integer(sj->svc->desired));
    if (sj->svc_of) {
        json_object_set_new(o, "svc_of", json_integer((json_int_t)sj->svc_of));
        json_object_set_new(o, "replica", json_integer(sj->replica));
    }
}

int st_service_recover(st_t *s, st_job_t *sj, arb_job_t *j, const json_t *o, int state,
                       bool *parent)
{
    st_svc_conf_t c;
    arb_err_t e = {{0}};

    *parent = false;
    if (spec_conf(s, sj->spec, sj->speclen, sj->yaml, &c, &e) < 0 || !c.is)
        return 0;
    if (json_is_integer(json_object_get(o, "svc_of"))) {
        sj->svc_of = (uint64_t)json_integer_value(json_object_get(o, "svc_of"));
        sj->replica = (int)json_integer_value(json_object_get(o, "replica"));
        st_job_t *p = st_job_find(s, sj->svc_of);
        if (p && p->svc) {
            dress_replica(s, p, sj, j, sj->replica);
            if (sj->replica >= p->svc->nrep && grow(p->svc, sj->replica + 1) < 0)
                return -ENOMEM;
            if (state < ARB_JOB_SUCCEEDED)
                p->svc->rep[sj->replica].job = sj->id;
            else if (sj->replica < p->svc->nrep && p->svc->rep[sj->replica].job < sj->id)
                p->svc->rep[sj->replica].job = sj->id, p->svc->rep[sj->replica].counted = true;
        }
        return 0;
    }
    *parent = true;
    int desired = (int)json_integer_value(json_object_get(o, "svc_desired"));
    return st_service_attach(s, sj, &c, desired);
}

/* ---- readiness ------------------------------------------------------------------------------ */

void st_service_probed(st_t *s, uint64_t parent, int i, uint64_t child, bool ok)
{
    st_job_t *p = st_job_find(s, parent);
    st_replica_t *r;
    st_job_t *c;
    bool was;

    if (!p || !p->svc || i >= p->svc->nrep || p->svc->rep[i].job != child)
        return;
    r = &p->svc->rep[i];
    c = st_job_find(s, child);
    was = r->ready;
    if (ok) {
        r->probe_fails = 0;
        r->ready = holds(c);
    } else if (++r->probe_fails >= 2) {
        r->ready = false;
    }
    if (r->ready != was) {
        if (r->ready)
            r->restarts = 0; /* it works: the next failure starts the backoff over */
        st_event(s, r->ready ? "replica-ready" : "replica-unready", child, NULL,
                 "service '%s' (job %llu): replica %d (job %llu) at %s is %s", p->j->name,
                 (unsigned long long)p->id, i, (unsigned long long)child, r->addr,
                 r->ready ? "ready" : "not ready (health check failing)");
        publish(s, p);
    }
}
