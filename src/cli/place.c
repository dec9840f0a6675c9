/*
 * place.c: `arbiter place SCENARIO.yaml [--policy NAME] [-o text|json] [--seed N]`.
 *
 * The controller's answer, offline: the scenario is replayed through the
 * controller's own state machine and scheduling cycle (src/vc: a virtual
 * clock, simulated agents, a store in a temporary directory), exactly as a
 * live controller would see it, so preemption (with victims stopping
 * first), quotas and reclaim, backfill, elastic growth, gangs and services
 * behave as they do live. The scenario's scheduler settings (or --policy)
 * and queues become the controller's config; its nodes register, in file
 * order, as agents with those inventories (Draining nodes are drained,
 * NotReady ones go silent until their lease runs out); then the jobs arrive
 * one at a time, in file order: each is submitted and the cluster left to
 * settle (reports and cycles, one heartbeat apart, until nothing changes)
 * before the next arrives. Tasks run until stopped: nothing finishes by
 * itself. It then prints where every job went and, for each pending job,
 * the controller's explanation, plus how free GPUs are spread over the
 * nodes: the seed's lesson is to check the distribution of free GPUs, not
 * the sum. tests/cli/place_live.sh runs every example scenario through this
 * and through a live controller and compares the placements.
 *
 * --export DIR also writes what a live cluster needs to be given the same
 * scenario: DIR/controller.yaml (the config), DIR/node-NNN.yaml (each node's
 * agent inventory, in file order) and DIR/job-NNN.yaml (each job's spec, in
 * arrival order; a job without a command gets `sleep 86400`, so that it
 * runs as long as it would here).
 *
 * Exit status: 0 when the scenario loaded (pending jobs included), 1 on bad
 * input (message on stderr), 2 on bad usage.
 */
#include <libfyaml.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "arbiter/sched.h"
#include "cli/cli.h"
#include "cli/flags.h"
#include "spec/scenario.h"
#include "state/state_int.h"
#include "vc/vcluster.h"

static const st_who_t place_admin = {ST_ROLE_ADMIN, "", "place", NULL};

/* Write s as a JSON string. */
static void json_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", out);
        else if (c == '\t')
            fputs("\\t", out);
        else if (c < 0x20 || c == 0x7f)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

/* "0-3,6" for the GPUs of mask. */
static void mask_text(uint16_t mask, char *buf, size_t n)
{
    size_t off = 0;

    buf[0] = '\0';
    for (int i = 0; i < 16 && off < n; i++) {
        int k = i;
        if (!(mask & (1u << i)))
            continue;
        while (k + 1 < 16 && (mask & (1u << (k + 1))))
            k++;
        if (k > i)
            off += (size_t)snprintf(buf + off, n - off, "%s%d-%d", off ? "," : "", i, k);
        else
            off += (size_t)snprintf(buf + off, n - off, "%s%d", off ? "," : "", i);
        i = k;
    }
}

typedef struct place_job {
    char name[ARB_JOB_NAME_MAX];
    char *spec;    /* its YAML, as the controller gets it (owned) */
    uint64_t id;   /* the controller's id; 0 when refused */
    char err[512]; /* why it was refused */
} place_job_t;

typedef struct place_run {
    spec_scenario_t sc;
    const char *file;
    char dir[64];
    vc_t *v;
    st_conf_t conf;
    place_job_t *jobs;
    int njobs;
    char policy[32];
} place_run_t;

/* ---- the scenario as the controller gets it --------------------------------------------- */

/* Each job of the file as a single job spec: "count" dropped, the copies
 * named name-1 .. name-N as the scenario loader names them. */
static int job_specs(place_run_t *r, arb_err_t *err)
{
    struct fy_document *fyd = fy_document_build_from_file(NULL, r->file);
    struct fy_node *jobs, *item;
    void *it = NULL;
    int rc = 0;

    if (!fyd)
        return arb_errf(err, -EINVAL, "%s: cannot read it again", r->file);
    jobs = fy_node_mapping_lookup_by_string(fy_document_root(fyd), "jobs", FY_NT);
    r->jobs = calloc((size_t)r->sc.njobs + 1, sizeof *r->jobs);
    if (!r->jobs) {
        fy_document_destroy(fyd);
        return arb_errf(err, -ENOMEM, "out of memory");
    }
    while (jobs && (item = fy_node_sequence_iterate(jobs, &it)) && rc == 0) {
        struct fy_node *cn = fy_node_mapping_lookup_by_string(item, "count", FY_NT);
        const char *cs = cn ? fy_node_get_scalar0(cn) : NULL;
        int count = cs ? atoi(cs) : 1;
        for (int k = 1; k <= (count > 0 ? count : 1) && rc == 0; k++) {
            struct fy_document *d = fy_document_create(NULL);
            struct fy_node *copy = d ? fy_node_copy(d, item) : NULL;
            struct fy_node_pair *p;
            char *txt = NULL;
            char nm[ARB_JOB_NAME_MAX + 16]; /* the new name: the node built from it refers to
                                               it (libfyaml does not copy), so it lives to the
                                               emit */
            if (!copy || fy_document_set_root(d, copy) != 0) {
                rc = arb_errf(err, -ENOMEM, "out of memory");
            } else {
                /* Removed by its key, which frees the pair and its key and hands
                 * back the value (fy_node_mapping_remove would leave the pair
                 * unowned: a leak, as LeakSanitizer found). */
                if ((p = fy_node_mapping_lookup_pair_by_string(copy, "count", FY_NT)))
                    fy_node_free(fy_node_mapping_remove_by_key(copy, fy_node_pair_key(p)));
                if (count > 1 && (p = fy_node_mapping_lookup_pair_by_string(copy, "name", FY_NT))) {
                    snprintf(nm, sizeof nm, "%s-%d", fy_node_get_scalar0(fy_node_pair_value(p)), k);
                    fy_node_pair_set_value(p, fy_node_build_from_string(d, nm, FY_NT));
                }
                txt = fy_emit_document_to_string(d, FYECF_MODE_BLOCK);
                if (!txt || r->njobs >= r->sc.njobs)
                    rc = arb_errf(err, -EINVAL, "%s: jobs[] does not read back", r->file);
                else {
                    place_job_t *pj = &r->jobs[r->njobs];
                    pj->spec = txt;
                    snprintf(pj->name, sizeof pj->name, "%s", r->sc.jobs[r->njobs]->name);
                    r->njobs++;
                    txt = NULL;
                }
            }
            free(txt);
            if (d)
                fy_document_destroy(d);
        }
    }
    fy_document_destroy(fyd);
    return rc;
}

/* Node n's inventory, as its agent would report it. */
static json_t *inventory(const arb_cluster_t *c, const arb_node_t *n)
{
    char q[48];
    json_t *o = json_object(), *labels = json_object(), *gpus = json_array(),
           *taints = json_array();
    json_t *ds = json_array(), *ext = json_object();

    arb_qty_format(n->cap.cpu_milli, ARB_QTY_MILLI, q, sizeof q);
    json_object_set_new(o, "cpu", json_string(q));
    arb_qty_format(n->cap.mem_bytes, ARB_QTY_BYTES, q, sizeof q);
    json_object_set_new(o, "memory", json_string(q));
    for (int i = 0; i < n->nlabels; i++)
        json_object_set_new(labels, arb_str(&c->strs, n->labels[i].key),
                            json_string(arb_str(&c->strs, n->labels[i].val)));
    for (int i = 0; i < n->ntaints; i++)
        json_array_append_new(
            taints, json_pack("{s:s,s:s,s:s}", "key", arb_str(&c->strs, n->taints[i].key), "value",
                              arb_str(&c->strs, n->taints[i].val), "effect",
                              n->taints[i].effect == ARB_TAINT_NO_SCHEDULE ? "NoSchedule"
                                                                           : "PreferNoSchedule"));
    for (int i = 0; i < n->ndatasets; i++)
        json_array_append_new(ds, json_string(arb_str(&c->strs, n->datasets[i])));
    for (int e = 0; e < c->ext.n; e++)
        if (n->cap.ext[e])
            json_object_set_new(ext, c->ext.name[e], json_integer(n->cap.ext[e]));
    for (int g = 0; g < n->ngpus; g++) {
        const arb_gpu_t *d = &n->gpu[g];
        snprintf(q, sizeof q, "%dMi", d->mem_mib);
        json_array_append_new(gpus, json_pack("{s:s,s:s,s:i,s:i,s:i}", "model",
                                              arb_str(&c->strs, d->model), "memory", q, "nvlink",
                                              d->nvlink, "pcie", d->pcie, "numa", d->numa));
    }
    json_object_set_new(o, "labels", labels);
    json_object_set_new(o, "taints", taints);
    json_object_set_new(o, "datasets", ds);
    json_object_set_new(o, "extended", ext);
    json_object_set_new(o, "gpus", gpus);
    return o;
}

/* The controller's config: the scenario's scheduler settings and queues. */
static int make_conf(place_run_t *r, const char *policy, uint64_t seed, arb_err_t *err)
{
    arb_sched_conf_t sc;
    int rc = spec_scenario_conf(&r->sc, policy, &sc, err);

    if (rc < 0)
        return rc;
    st_conf_init(&r->conf);
    snprintf(r->conf.policy, sizeof r->conf.policy, "%s", sc.profile.name);
    snprintf(r->policy, sizeof r->policy, "%s", sc.profile.name);
    r->conf.queue_policy = sc.queue_policy;
    r->conf.backfill = sc.backfill;
    r->conf.preemption = sc.preemption;
    r->conf.starvation_ns = sc.starvation_ns;
    r->conf.sync = STORE_SYNC_NORMAL;
    r->conf.reject_unfittable = false; /* a pending job is explained, not refused */
    r->conf.seed = seed;
    if (r->sc.nqueues > 0) {
        r->conf.queues = calloc((size_t)r->sc.nqueues, sizeof *r->conf.queues);
        if (!r->conf.queues)
            return arb_errf(err, -ENOMEM, "out of memory");
        r->conf.nqueues = r->sc.nqueues;
    }
    for (int i = 0; i < r->sc.nqueues; i++) {
        const arb_queue_t *q = &r->sc.queues[i];
        st_queue_conf_t *c = &r->conf.queues[i];
        snprintf(c->name, sizeof c->name, "%s", arb_str(&r->sc.cluster.strs, q->name));
        if (q->cohort)
            snprintf(c->cohort, sizeof c->cohort, "%s", arb_str(&r->sc.cluster.strs, q->cohort));
        c->has_quota = q->has_quota;
        c->nominal = q->nominal;
        c->borrow_limit = q->borrow_limit;
        c->weight = q->weight > 0 ? q->weight : 1;
    }
    return 0;
}

/* Register the nodes in file order; drain the Draining ones; let the
 * NotReady ones fall silent past their lease. */
static int add_nodes(place_run_t *r, arb_err_t *err)
{
    const arb_cluster_t *c = &r->sc.cluster;
    bool silent = false;
    int rc;

    for (uint32_t i = 0; i < c->nnodes; i++) {
        const arb_node_t *n = &c->nodes[i];
        json_t *inv = inventory(c, n);
        st_node_view_t out;
        int k = vc_node_add(r->v, arb_node_name(c, n), inv);
        int64_t t;
        json_decref(inv);
        if (k < 0)
            return arb_errf(err, k, "out of memory");
        if ((rc = vc_report(r->v, k, err)) < 0) {
            arb_err_prefix(err, "node '%s': ", arb_node_name(c, n));
            return rc;
        }
        if (n->state == ARB_NODE_DRAINING) {
            st_node_cordon(vc_state(r->v), &place_admin, arb_node_name(c, n), ST_CORDON, NULL, -1,
                           &out, &t, err);
            st_node_view_free(&out);
        } else if (n->state == ARB_NODE_NOT_READY) {
            vc_agent_down(r->v, k, false);
            silent = true;
        }
    }
    if (silent) /* past the lease: NotReady */
        for (int64_t w = 0; w <= r->conf.lease_ns; w += 1000000000LL) {
            vc_advance(r->v, 1000000000LL);
            if ((rc = vc_heartbeats(r->v, err)) < 0 || (rc = vc_cycle(r->v, NULL, err)) < 0)
                return rc;
        }
    return 0;
}

/* Each job arrives, then the cluster settles, before the next. */
static int arrive(place_run_t *r, arb_err_t *err)
{
    int rc;

    for (int i = 0; i < r->njobs; i++) {
        place_job_t *pj = &r->jobs[i];
        arb_err_t jerr = {{0}};
        if (vc_submit(r->v, &place_admin, pj->spec, &pj->id, &jerr) < 0) {
            pj->id = 0;
            snprintf(pj->err, sizeof pj->err, "%s", jerr.msg);
        }
        if ((rc = vc_settle(r->v, 2, 60, err)) < 0)
            return rc;
    }
    return 0;
}

/* ---- --export ------------------------------------------------------------------------------- */

static int export_to(place_run_t *r, const char *dir, arb_err_t *err)
{
    static const char *const qn[] = {"fifo", "priority", "drf"};
    const arb_cluster_t *c = &r->sc.cluster;
    char path[4096];
    FILE *f;

    snprintf(path, sizeof path, "%s/controller.yaml", dir);
    if (!(f = fopen(path, "w")))
        return arb_errf(err, -errno, "--export: %s: %s", path, strerror(errno));
    fprintf(f, "scheduler: {policy: %s, queue: %s, backfill: %s, preemption: %s", r->policy,
            qn[r->conf.queue_policy], r->conf.backfill ? "true" : "false",
            r->conf.preemption ? "true" : "false");
    if (r->conf.starvation_ns)
        fprintf(f, ", starvation: %llds", (long long)(r->conf.starvation_ns / 1000000000LL));
    fprintf(f, "}\nadmission: {rejectUnfittable: false}\n");
    if (r->conf.nqueues)
        fprintf(f, "queues:\n");
    for (int i = 0; i < r->conf.nqueues; i++) {
        const st_queue_conf_t *q = &r->conf.queues[i];
        char cpu[32], mem[32];
        fprintf(f, "  - {name: %s, weight: %g", q->name, q->weight);
        if (q->cohort[0])
            fprintf(f, ", cohort: %s", q->cohort);
        for (int k = 0; q->has_quota && k < 2; k++) {
            const arb_res_t *x = k ? &q->borrow_limit : &q->nominal;
            arb_qty_format(x->cpu_milli, ARB_QTY_MILLI, cpu, sizeof cpu);
            arb_qty_format(x->mem_bytes, ARB_QTY_BYTES, mem, sizeof mem);
            fprintf(f, ", %s: {nvidia.com/gpu: %g", k ? "borrowingLimit" : "nominal",
                    (double)x->gpu_milli / 1000.0);
            if (x->cpu_milli)
                fprintf(f, ", cpu: %s", cpu);
            if (x->mem_bytes)
                fprintf(f, ", memory: %s", mem);
            fprintf(f, "}");
        }
        fprintf(f, "}\n");
    }
    fclose(f);
    for (uint32_t i = 0; i < c->nnodes; i++) {
        const arb_node_t *n = &c->nodes[i];
        char mem[32];
        snprintf(path, sizeof path, "%s/node-%03u.yaml", dir, i + 1);
        if (!(f = fopen(path, "w")))
            return arb_errf(err, -errno, "--export: %s: %s", path, strerror(errno));
        arb_qty_format(n->cap.mem_bytes, ARB_QTY_BYTES, mem, sizeof mem);
        fprintf(f, "name: %s\ncpu: %lld\nmemory: %s\nlabels: {", arb_node_name(c, n),
                (long long)(n->cap.cpu_milli / 1000), mem);
        for (int k = 0; k < n->nlabels; k++)
            fprintf(f, "%s%s: \"%s\"", k ? ", " : "", arb_str(&c->strs, n->labels[k].key),
                    arb_str(&c->strs, n->labels[k].val));
        fprintf(f, "}\ngpus:\n");
        for (int g = 0; g < n->ngpus; g++)
            fprintf(f, "  - {model: %s, memory: %dMi, nvlink: %d, pcie: %d, numa: %d}\n",
                    arb_str(&c->strs, n->gpu[g].model), n->gpu[g].mem_mib, n->gpu[g].nvlink,
                    n->gpu[g].pcie, n->gpu[g].numa);
        if (n->ngpus == 0)
            fprintf(f, "  []\n");
        fclose(f);
    }
    for (int i = 0; i < r->njobs; i++) {
        snprintf(path, sizeof path, "%s/job-%03d.yaml", dir, i + 1);
        if (!(f = fopen(path, "w")))
            return arb_errf(err, -errno, "--export: %s: %s", path, strerror(errno));
        fputs(r->jobs[i].spec, f);
        if (!strstr(r->jobs[i].spec, "\ncommand:") && strncmp(r->jobs[i].spec, "command:", 8))
            fputs("\ncommand: [sleep, \"86400\"]\n", f);
        fclose(f);
    }
    return 0;
}

/* ---- output ---------------------------------------------------------------------------- */

static st_job_t *job_of(place_run_t *r, const place_job_t *pj)
{
    return pj->id ? st_job_find(vc_state(r->v), pj->id) : NULL;
}

static bool placed(const arb_job_t *j)
{
    return j && (j->state == ARB_JOB_PLACED || j->state == ARB_JOB_RUNNING);
}

static const char *state_of(const st_job_t *sj)
{
    if (!sj)
        return "refused";
    return placed(sj->j) ? "placed" : arb_job_state_name(sj->j->state);
}

/* The controller's explanation of job sj (a new reference). */
static json_t *explain(place_run_t *r, st_job_t *sj)
{
    st_explain_view_t v;
    int64_t t;
    arb_err_t err;
    json_t *out = st_job_explain(vc_state(r->v), &place_admin, sj->id, &v, &t, &err) == 0
                      ? api_explain_json(&v)
                      : NULL;
    st_explain_view_free(&v);
    return out;
}

static void gpu_totals(const arb_cluster_t *c, int64_t *used, int64_t *cap)
{
    *used = *cap = 0;
    for (uint32_t i = 0; i < c->nnodes; i++) {
        *used += c->nodes[i].used.gpu_milli;
        *cap += c->nodes[i].cap.gpu_milli;
    }
}

static double pct(int64_t a, int64_t b)
{
    return b > 0 ? 100.0 * (double)a / (double)b : 0.0;
}

static void print_text(place_run_t *r)
{
    arb_cluster_t *c = &vc_state(r->v)->cluster;
    int64_t used, cap;
    int wname = 4, nplaced = 0;

    gpu_totals(c, &used, &cap);
    for (int i = 0; i < r->njobs; i++) {
        int w = (int)strlen(r->jobs[i].name);
        wname = w > wname ? w : wname;
        nplaced += placed(job_of(r, &r->jobs[i]) ? job_of(r, &r->jobs[i])->j : NULL);
    }
    if (wname > 40)
        wname = 40;
    printf("scenario %s: %u node%s, %lld GPUs, %d job%s; policy %s\n\n", r->file, c->nnodes,
           c->nnodes == 1 ? "" : "s", (long long)(cap / 1000), r->njobs, r->njobs == 1 ? "" : "s",
           r->policy);
    printf("%-*s  %-8s %s\n", wname, "JOB", "STATE", "PLACEMENT / REASON");
    for (int i = 0; i < r->njobs; i++) {
        st_job_t *sj = job_of(r, &r->jobs[i]);
        printf("%-*s  %-8s", wname, r->jobs[i].name, state_of(sj));
        if (!sj) {
            printf(" %s\n", r->jobs[i].err);
        } else if (placed(sj->j)) {
            for (int t = 0; t < sj->j->nalloc; t++) {
                const arb_task_alloc_t *a = &sj->j->alloc[t];
                char gpus[64];
                if (a->node == ARB_NO_NODE)
                    continue;
                mask_text(a->gpu_mask, gpus, sizeof gpus);
                printf("%s%s", t ? ", " : " ", arb_node_name(c, &c->nodes[a->node]));
                if (a->gpu_mask)
                    printf(" gpu %s", gpus);
                if (a->gpu_mask && a->gpu_milli < 1000)
                    printf(" (%dm)", a->gpu_milli);
            }
            printf("\n");
        } else {
            json_t *x = explain(r, sj);
            const char *sum = json_string_value(json_object_get(x, "summary"));
            const char *hint = json_string_value(json_object_get(x, "hint"));
            printf(" %s\n", sum ? sum : "(no explanation available)");
            if (hint && hint[0])
                printf("%-*s  %-8s hint: %s\n", wname, "", "", hint);
            json_decref(x);
        }
    }
    printf("\n%d of %d jobs placed; GPUs allocated %g/%lld (%.1f%%)\n", nplaced, r->njobs,
           (double)used / 1000.0, (long long)(cap / 1000), pct(used, cap));
    printf("free whole GPUs per node:");
    for (uint32_t i = 0; i < c->nnodes && i < 32; i++)
        printf(" %s=%d", arb_node_name(c, &c->nodes[i]), arb_node_free_gpus(&c->nodes[i]));
    if (c->nnodes > 32)
        printf(" ... (%u more nodes)", c->nnodes - 32);
    printf("\n");
}

static void print_json(place_run_t *r)
{
    arb_cluster_t *c = &vc_state(r->v)->cluster;
    int64_t used, cap;

    gpu_totals(c, &used, &cap);
    printf("{\"scenario\":");
    json_str(stdout, r->file);
    printf(",\"policy\":");
    json_str(stdout, r->policy);
    printf(",\"jobs\":[\n");
    for (int i = 0; i < r->njobs; i++) {
        st_job_t *sj = job_of(r, &r->jobs[i]);
        const arb_job_t *j = sj ? sj->j : NULL;
        bool p = placed(j);
        /* One job per line, so a line-oriented grep can check one job. */
        printf("{\"name\":");
        json_str(stdout, r->jobs[i].name);
        printf(",\"state\":\"%s\",\"nodes\":[", state_of(sj));
        for (int t = 0, k = 0; p && t < j->nalloc; t++)
            if (j->alloc[t].node != ARB_NO_NODE) {
                printf("%s", k++ ? "," : "");
                json_str(stdout, arb_node_name(c, &c->nodes[j->alloc[t].node]));
            }
        printf("],\"gpus\":[");
        for (int t = 0, k = 0; p && t < j->nalloc; t++) {
            if (j->alloc[t].node == ARB_NO_NODE)
                continue;
            printf("%s[", k++ ? "," : "");
            for (int g = 0, first = 1; g < 16; g++)
                if (j->alloc[t].gpu_mask & (1u << g)) {
                    printf("%s%d", first ? "" : ",", g);
                    first = 0;
                }
            printf("]");
        }
        printf("],\"gpu_milli\":[");
        for (int t = 0, k = 0; p && t < j->nalloc; t++)
            if (j->alloc[t].node != ARB_NO_NODE)
                printf("%s%d", k++ ? "," : "", j->alloc[t].gpu_mask ? j->alloc[t].gpu_milli : 0);
        printf("]");
        if (!sj) {
            printf(",\"error\":");
            json_str(stdout, r->jobs[i].err);
        } else if (!p) {
            json_t *x = explain(r, sj), *e = json_object_get(x, "explain");
            char *txt = e ? json_dumps(e, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
            printf(",\"reason\":%s", txt ? txt : "null");
            free(txt);
            json_decref(x);
        }
        printf("}%s\n", i + 1 < r->njobs ? "," : "");
    }
    printf("],\"gpus_total\":%lld,\"gpus_allocated\":%.3f,\"alloc_pct\":%.2f,\"free_gpus\":{",
           (long long)(cap / 1000), (double)used / 1000.0, pct(used, cap));
    for (uint32_t i = 0; i < c->nnodes; i++) {
        printf("%s", i ? "," : "");
        json_str(stdout, arb_node_name(c, &c->nodes[i]));
        printf(":%d", arb_node_free_gpus(&c->nodes[i]));
    }
    printf("}}\n");
}

typedef struct place_opts {
    const char *policy, *export;
    int out;
    long long seed;
} place_opts_t;

static void place_more(FILE *f)
{
    char names[256];
    fprintf(f, "\npolicies: %s\n", arb_profile_names(names, sizeof names));
}

static const fl_flag_t place_flags[] = {
    FL_OPT(place_opts_t, policy, "--policy", "-p", FL_STR, "NAME",
           "the scoring profile (default: the scenario's)"),
    FL_OPT(place_opts_t, out, "--output", "-o", FL_CHOICE, NULL, "a report, or JSON lines",
           .def = "text", .choices = "text|json"),
    FL_OPT(place_opts_t, seed, "--seed", NULL, FL_INT, "N",
           "seeds the controller's random tie-breaking", .def = "1"),
    FL_OPT(place_opts_t, export, "--export", NULL, FL_STR, "DIR",
           "write the controller config, agent inventories and job specs that give a live "
           "cluster the same scenario"),
    FL_END,
};
static const fl_verb_t place_verb = {
    .name = "place",
    .args = "SCENARIO.yaml",
    .summary = "replay a scenario through the controller's own cycle on a virtual clock and "
               "explain the pending ones",
    .more = "Jobs arrive one at a time; preemption, quotas, backfill, elastic jobs and services "
            "act as live.",
    .flags = place_flags,
    .min_pos = 1,
    .max_pos = 1,
    .more_fn = place_more};

/* The scenario through the virtual cluster; the exit status (0, or 1 with the message). */
static int place_file(const char *file, const place_opts_t *o)
{
    const char *policy = o->policy, *export = o->export;
    unsigned long long seed = (unsigned long long)o->seed;
    place_run_t r;
    arb_err_t err = {{0}};
    int rc, status = 1;

    memset(&r, 0, sizeof r);
    r.file = file;
    st_conf_init(&r.conf);
    if ((rc = spec_scenario_load_file(file, &r.sc, &err)) < 0) {
        fprintf(stderr, "arbiter place: %s\n", err.msg);
        return 1;
    }
    if ((rc = make_conf(&r, policy, seed, &err)) < 0) {
        arb_err_prefix(&err, "--policy: ");
        goto out;
    }
    if ((rc = job_specs(&r, &err)) < 0 || (export && (rc = export_to(&r, export, &err)) < 0))
        goto out;
    snprintf(r.dir, sizeof r.dir, "%s/arb_place.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(r.dir)) {
        rc = arb_errf(&err, -errno, "cannot make a temporary directory: %s", strerror(errno));
        r.dir[0] = '\0';
        goto out;
    }
    vc_conf_t vcc = {.dir = r.dir, .st = &r.conf};
    if ((rc = vc_open(&vcc, &r.v, &err)) < 0 || (rc = add_nodes(&r, &err)) < 0 ||
        (rc = arrive(&r, &err)) < 0)
        goto out;
    if (o->out == 1)
        print_json(&r);
    else
        print_text(&r);
    status = 0;
out:
    if (rc < 0)
        fprintf(stderr, "arbiter place: %s\n", err.msg);
    vc_close(r.v);
    if (r.dir[0]) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", r.dir);
        if (system(cmd) != 0)
            fprintf(stderr, "arbiter place: could not remove %s\n", r.dir);
    }
    for (int i = 0; i < r.njobs; i++)
        free(r.jobs[i].spec);
    free(r.jobs);
    st_conf_free(&r.conf);
    spec_scenario_free(&r.sc);
    return status;
}

int cli_place(int argc, char **argv)
{
    place_opts_t o = {0};
    fl_args_t a = {0};
    int rc;

    if (!fl_run(&place_verb, argc, argv, &o, &a, &rc))
        return rc;
    return place_file(a.pos[0], &o);
}
