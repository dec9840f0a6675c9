/*
 * nodeview.c: the nodes as the state answers for them: a typed view of
 * each (st_node_view_t, state.h), a snapshot taken under s->mu that the
 * caller owns; src/api/enc_node.c makes the JSON clients read of it.
 * GET /v1/nodes and GET /v1/nodes/{name} (st_nodes_list, st_node_get) and
 * the replies of the node operations (nodeops.c) are built here.
 *
 * Names (the node's, GPU models, labels, taints, datasets) are borrowed
 * from the cluster's interned strings, which never move nor go before
 * st_close; what an agent or an operator sent as JSON (telemetry,
 * inventory, what operators set) is copied as its JSON text.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/jv.h"
#include "state/state_int.h"

void st_node_view_free(st_node_view_t *v)
{
    for (int g = 0; g < v->ngpus; g++)
        free(v->gpus[g].jobs);
    free(v->gpus);
    free(v->labels);
    free(v->taints);
    free(v->datasets);
    free(v->op_json);
    free(v->telemetry_json);
    free(v->inventory_json);
    free(v->running);
    memset(v, 0, sizeof *v);
}

void st_node_list_free(st_node_list_t *l)
{
    for (int i = 0; i < l->n; i++)
        st_node_view_free(&l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* JSON text of a document the state keeps (NULL stays NULL); false out of memory. */
static bool text_of(const json_t *o, char **out)
{
    *out = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY) : NULL;
    return !o || *out;
}

int st_node_view_of(st_t *s, arb_node_t *n, bool full, st_node_view_t *v)
{
    st_node_t *x = st_node_ext(s, n);
    const arb_strtab_t *strs = &s->cluster.strs;

    memset(v, 0, sizeof *v);
    v->name = arb_node_name(&s->cluster, n);
    /* Lost: past its lease and grace, its tasks requeued; until it
     * registers again (the core keeps it NotReady). */
    v->state = x->lost ? "Lost" : arb_node_state_name(n->state);
    v->version = x->version;
    if ((n->ngpus && !(v->gpus = calloc((size_t)n->ngpus, sizeof *v->gpus))) ||
        (n->nlabels && !(v->labels = calloc((size_t)n->nlabels, sizeof *v->labels))) ||
        (n->ntaints && !(v->taints = calloc((size_t)n->ntaints, sizeof *v->taints))) ||
        (n->ndatasets && !(v->datasets = calloc((size_t)n->ndatasets, sizeof *v->datasets))))
        goto oom;
    for (int g = 0; g < n->ngpus; g++) {
        const arb_gpu_t *d = &n->gpu[g];
        st_gpu_view_t *gv = &v->gpus[v->ngpus++];
        gv->index = g;
        gv->model = arb_str(strs, d->model);
        gv->memory_mib = d->mem_mib;
        gv->used_milli = d->used_milli;
        gv->nvlink = d->nvlink;
        gv->pcie = d->pcie;
        gv->numa = d->numa;
        gv->util = d->util_pct;
        gv->temp_c = d->temp_c;
        gv->healthy = d->healthy != 0;
    }
    v->cap = n->cap;
    v->used = n->used;
    v->tasks = n->ntasks;
    for (int i = 0; i < n->nlabels; i++)
        v->labels[v->nlabels++] =
            (st_label_view_t){arb_str(strs, n->labels[i].key), arb_str(strs, n->labels[i].val)};
    for (int i = 0; i < n->ntaints; i++)
        v->taints[v->ntaints++] = (st_taint_view_t){arb_str(strs, n->taints[i].key),
                                                    arb_str(strs, n->taints[i].val) ?: "",
                                                    st_taint_effect_name(n->taints[i].effect)};
    for (int i = 0; i < n->ndatasets; i++)
        v->datasets[v->ndatasets++] = arb_str(strs, n->datasets[i]);
    v->schedulable = n->state == ARB_NODE_READY && !x->lost;
    if (x->reason[0] || x->lost || n->state == ARB_NODE_NOT_READY)
        snprintf(v->reason, sizeof v->reason, "%s",
                 x->reason[0] ? x->reason
                 : x->lost    ? "no report for longer than the lease and grace: its tasks were "
                                "requeued"
                              : "no report for longer than the lease");
    v->lost = x->lost;
    if (x->report_mono) {
        v->reported = true;
        v->report_age_s = (double)(st_now_ns(s) - x->report_mono) / 1e9;
        jv_time(x->report_ms, v->last_report, sizeof v->last_report);
        v->report_lamport = x->lamport;
    }
    if (full) {
        v->full = true;
        v->rack = n->rack ? arb_str(strs, n->rack) : NULL;
        v->block = n->block ? arb_str(strs, n->block) : NULL;
        v->zone = n->zone ? arb_str(strs, n->zone) : NULL;
        if (!text_of(x->op, &v->op_json) || !text_of(x->telemetry, &v->telemetry_json) ||
            !text_of(x->inventory, &v->inventory_json))
            goto oom;
    }
    return 0;
oom:
    st_node_view_free(v);
    return -ENOMEM;
}

/* Fill each GPU's jobs of the views (by node id; NULL: not asked) in one
 * pass over the active jobs; -ENOMEM. */
static int fill_gpu_jobs(st_t *s, st_node_view_t **by_id)
{
    for (int i = 0; i < s->nactive; i++) {
        const arb_job_t *j = s->active[i]->j;
        uint64_t id = s->active[i]->id;
        if (j->state != ARB_JOB_PLACED && j->state != ARB_JOB_RUNNING)
            continue;
        for (int t = 0; t < j->nalloc; t++) {
            st_node_view_t *v = j->alloc[t].node == ARB_NO_NODE ? NULL : by_id[j->alloc[t].node];
            if (!v)
                continue;
            for (int g = 0; g < ARB_MAX_GPUS && g < v->ngpus; g++) {
                st_gpu_view_t *gv = &v->gpus[g];
                int k = 0;
                if (!(j->alloc[t].gpu_mask & (1u << g)))
                    continue;
                while (k < gv->njobs && gv->jobs[k] != id) /* a job's tasks on one GPU: once */
                    k++;
                if (k < gv->njobs)
                    continue;
                uint64_t *nj = realloc(gv->jobs, (size_t)(gv->njobs + 1) * sizeof *nj);
                if (!nj)
                    return -ENOMEM;
                gv->jobs = nj;
                gv->jobs[gv->njobs++] = id;
            }
        }
    }
    return 0;
}

int st_node_get(st_t *s, const char *name, st_node_view_t *out, int64_t *ticket, arb_err_t *err)
{
    int rc = 0;

    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->mu);
    arb_node_t *n = arb_cluster_find_node(&s->cluster, name);
    st_node_view_t **by_id = NULL;
    if (!n) {
        rc = arb_errf(err, -ENOENT, "node '%s': no such node", name);
        goto out;
    }
    if (st_node_view_of(s, n, true, out) < 0 ||
        !(by_id = calloc(s->cluster.nnodes, sizeof *by_id))) {
        rc = arb_errf(err, -ENOMEM, "out of memory");
        goto out;
    }
    out->detail = true;
    out->stale_reports = st_node_ext(s, n)->stale_reports;
    by_id[n->id] = out;
    if (fill_gpu_jobs(s, by_id) < 0) {
        rc = arb_errf(err, -ENOMEM, "out of memory");
        goto out;
    }
    /* What runs there (the scheduler's word; each task's agent's report
     * moves it from assigned to running and on). */
    st_job_t **held;
    int nh = st_node_held(s, n, &held), cap = 0;
    for (int i = 0; i < nh; i++) {
        st_job_t *sj = held[i];
        for (int t = 0; t < sj->j->nalloc; t++) {
            if (sj->j->alloc[t].node != n->id)
                continue;
            if (out->nrunning == cap) {
                cap = cap ? 2 * cap : 8;
                st_task_here_t *v = realloc(out->running, (size_t)cap * sizeof *v);
                if (!v) {
                    rc = arb_errf(err, -ENOMEM, "out of memory");
                    goto out;
                }
                out->running = v;
            }
            st_task_here_t *h = &out->running[out->nrunning++];
            h->job = sj->id;
            snprintf(h->name, sizeof h->name, "%s", sj->j->name);
            h->task = t;
            h->attempt = sj->attempt;
            h->state = st_task_state_names[sj->tasks[t].state];
            h->gpu_mask = sj->j->alloc[t].gpu_mask;
            h->stopping = st_task_stop(sj, t);
        }
    }
out:
    *ticket = st_seen(s);
    pthread_mutex_unlock(&s->mu);
    free(by_id);
    if (rc < 0)
        st_node_view_free(out);
    return rc;
}

int st_nodes_list(st_t *s, st_node_list_t *out, int64_t *ticket, arb_err_t *err)
{
    st_node_view_t **by_id = NULL;
    int rc = 0;

    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->mu);
    uint32_t nn = s->cluster.nnodes;
    if ((nn && !(out->v = calloc(nn, sizeof *out->v))) ||
        !(by_id = calloc(nn + 1, sizeof *by_id))) {
        rc = arb_errf(err, -ENOMEM, "out of memory");
        goto out;
    }
    for (uint32_t i = 0; i < nn; i++) {
        if (s->cluster.nodes[i].state == ARB_NODE_LEFT) /* deleted */
            continue;
        if (st_node_view_of(s, &s->cluster.nodes[i], false, &out->v[out->n]) < 0) {
            rc = arb_errf(err, -ENOMEM, "out of memory");
            goto out;
        }
        by_id[i] = &out->v[out->n++];
    }
    if (fill_gpu_jobs(s, by_id) < 0)
        rc = arb_errf(err, -ENOMEM, "out of memory");
out:
    *ticket = st_seen(s);
    pthread_mutex_unlock(&s->mu);
    free(by_id);
    if (rc < 0)
        st_node_list_free(out);
    return rc;
}
