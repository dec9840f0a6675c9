/*
 * metrics.c: the resource manager's metrics in Prometheus text format
 * (version 0.0.4): jobs by state, queue lengths, pending jobs by reason,
 * GPU allocation and fragmentation, node report ages, the scheduling-cycle
 * latency histogram, agent report handling time, replies held for their
 * commit (by route), lost nodes and tasks, requeues, placements, and the store's group-commit
 * figures; per GPU and per node, what the agents last reported (utilisation, memory, temperature,
 * health, allocation; CPU, memory, network and disk rates), copied under the lock and written after
 * it, so a scrape of 40,000 GPUs holds the scheduler up for a copy, not for the formatting.
 *
 * Fragmentation: the share of free whole GPUs that sit on nodes which
 * already run something (1.0 in the seed's case study, where 16 free GPUs
 * are spread 4 per node; 0 when every free GPU is on an empty node).
 * Pending reasons: the core's explanation of the 200 oldest pending jobs
 * (explaining is a filter pass over every node, so it is bounded).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/state_int.h"
#include "util/buf.h"

static void help(arb_buf_t *b, const char *name, const char *type, const char *text)
{
    arb_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, type);
}

/* Label values: escape backslash, quote and newline. */
static void esc(char *out, size_t n, const char *s)
{
    size_t k = 0;
    for (; *s && k + 3 < n; s++) {
        if (*s == '\\' || *s == '"') {
            out[k++] = '\\';
            out[k++] = *s;
        } else if (*s == '\n') {
            out[k++] = '\\';
            out[k++] = 'n';
        } else {
            out[k++] = *s;
        }
    }
    out[k] = '\0';
}

/* ---- per node and per GPU: a snapshot taken under the lock, written after ---------------- */

typedef struct gpu_snap {
    char model[48];
    int util, temp, healthy, alloc_milli; /* util, temp < 0: unknown */
    int64_t mem_total_mib, mem_used_mib;  /* used < 0: unknown */
} gpu_snap_t;

typedef struct node_snap {
    char name[ST_NAME_MAX * 2];
    double cpu, mem_used, mem_total, rx, tx, dr, dw; /* < 0: unknown */
    int ngpus;
    gpu_snap_t gpu[ARB_MAX_GPUS];
} node_snap_t;

static double tel_num(const json_t *tel, const char *k)
{
    json_t *v = json_object_get(tel, k);
    return json_is_number(v) ? json_number_value(v) : -1;
}

/* Under s->mu: what the per-node families need, for every node not left. */
static node_snap_t *snap_nodes(st_t *s, int *count)
{
    node_snap_t *v = calloc(s->cluster.nnodes + 1, sizeof *v);
    int k = 0;

    *count = 0;
    if (!v)
        return NULL;
    for (uint32_t i = 0; i < s->cluster.nnodes; i++) {
        const arb_node_t *n = &s->cluster.nodes[i];
        const json_t *tel = s->nodes[i].telemetry;
        node_snap_t *o = &v[k];
        arb_err_t err = {{0}};
        int64_t b;
        if (n->state == ARB_NODE_LEFT)
            continue;
        esc(o->name, sizeof o->name, arb_node_name(&s->cluster, n));
        o->cpu = tel_num(tel, "cpu_util");
        o->rx = tel_num(tel, "net_rx_bps");
        o->tx = tel_num(tel, "net_tx_bps");
        o->dr = tel_num(tel, "disk_read_bps");
        o->dw = tel_num(tel, "disk_write_bps");
        const char *mu = json_string_value(json_object_get(tel, "memory_used"));
        o->mem_used =
            mu && arb_qty_parse(mu, ARB_QTY_BYTES, "memory_used", &b, &err) == 0 ? (double)b : -1;
        o->mem_total = (double)n->cap.mem_bytes;
        o->ngpus = n->ngpus;
        for (int g = 0; g < n->ngpus; g++) {
            const arb_gpu_t *d = &n->gpu[g];
            gpu_snap_t *e = &o->gpu[g];
            esc(e->model, sizeof e->model, d->model ? arb_str(&s->cluster.strs, d->model) : "");
            e->util = tel ? d->util_pct : -1; /* no telemetry yet: unknown, not idle */
            e->temp = tel ? d->temp_c : -1;
            e->healthy = d->healthy != 0;
            e->alloc_milli = d->used_milli;
            e->mem_total_mib = d->mem_mib;
            e->mem_used_mib = -1;
        }
        json_t *gv;
        size_t gi;
        json_array_foreach(json_object_get(tel, "gpus"), gi, gv)
        {
            json_int_t ix = json_integer_value(json_object_get(gv, "index"));
            json_t *m = json_object_get(gv, "memory_used_mib");
            if (ix >= 0 && ix < n->ngpus && json_is_integer(m))
                o->gpu[ix].mem_used_mib = json_integer_value(m);
        }
        k++;
    }
    *count = k;
    return v;
}

/* The families of one value per node (NODE_FAMILIES) and per GPU
 * (GPU_FAMILIES), as the agents last reported; names follow DCGM's
 * exporter where it has one (DCGM_FI_DEV_GPU_UTIL, _FB_USED, _GPU_TEMP). */
static const struct {
    const char *name, *help;
    size_t off; /* of a double in node_snap_t */
} node_families[] = {
    {"arbiter_node_cpu_utilization_ratio", "Node CPU utilisation (0..1), as its agent reported.",
     offsetof(node_snap_t, cpu)},
    {"arbiter_node_memory_used_bytes", "Node memory in use (total less available), bytes.",
     offsetof(node_snap_t, mem_used)},
    {"arbiter_node_memory_allocatable_bytes", "Node memory the scheduler may allocate, bytes.",
     offsetof(node_snap_t, mem_total)},
    {"arbiter_node_network_receive_bytes_per_second", "Node network receive rate, bytes/s.",
     offsetof(node_snap_t, rx)},
    {"arbiter_node_network_transmit_bytes_per_second", "Node network transmit rate, bytes/s.",
     offsetof(node_snap_t, tx)},
    {"arbiter_node_disk_read_bytes_per_second", "Node disk read rate, bytes/s.",
     offsetof(node_snap_t, dr)},
    {"arbiter_node_disk_write_bytes_per_second", "Node disk write rate, bytes/s.",
     offsetof(node_snap_t, dw)},
};

static void node_metrics(arb_buf_t *b, const node_snap_t *v, int count)
{
    for (size_t f = 0; f < sizeof node_families / sizeof node_families[0]; f++) {
        help(b, node_families[f].name, "gauge", node_families[f].help);
        for (int i = 0; i < count; i++) {
            double x = *(const double *)(const void *)((const char *)&v[i] + node_families[f].off);
            if (x >= 0)
                arb_buf_printf(b, "%s{node=\"%s\"} %.15g\n", node_families[f].name, v[i].name, x);
        }
    }
    static const char *const gname[] = {
        "arbiter_gpu_utilization_ratio",
        "arbiter_gpu_memory_used_bytes",
        "arbiter_gpu_memory_total_bytes",
        "arbiter_gpu_temperature_celsius",
        "arbiter_gpu_healthy",
        "arbiter_gpu_allocated_ratio",
    };
    static const char *const ghelp[] = {
        "GPU utilisation (0..1; DCGM_FI_DEV_GPU_UTIL / 100), as its node's agent reported.",
        "GPU framebuffer memory in use, bytes (DCGM_FI_DEV_FB_USED).",
        "GPU framebuffer memory, bytes (DCGM_FI_DEV_FB_TOTAL).",
        "GPU temperature, degrees Celsius (DCGM_FI_DEV_GPU_TEMP).",
        "1 when the GPU is healthy, 0 when its agent reports it unhealthy (out of capacity).",
        "Share of the GPU allocated to jobs (0..1; a shared GPU holds fractions).",
    };
    for (int f = 0; f < 6; f++) {
        help(b, gname[f], "gauge", ghelp[f]);
        for (int i = 0; i < count; i++)
            for (int g = 0; g < v[i].ngpus; g++) {
                const gpu_snap_t *e = &v[i].gpu[g];
                double x = f == 0 ? (e->util < 0 ? -1 : e->util / 100.0)
                           : f == 1
                               ? (e->mem_used_mib < 0 ? -1 : (double)e->mem_used_mib * 1048576.0)
                           : f == 2 ? (double)e->mem_total_mib * 1048576.0
                           : f == 3 ? e->temp
                           : f == 4 ? e->healthy
                                    : e->alloc_milli / 1000.0;
                if (x >= 0)
                    arb_buf_printf(b, "%s{node=\"%s\",gpu=\"%d\",model=\"%s\"} %.15g\n", gname[f],
                                   v[i].name, g, e->model, x);
            }
    }
}

void st_note_held(st_t *s, unsigned route, const char *method, const char *path)
{
    if (route >= ST_HELD_ROUTES) {
        route = ST_HELD_ROUTES - 1;
        method = "other";
        path = "";
    }
    /* the names first: metrics reads them once it sees the count move */
    __atomic_store_n(&s->m_held_path[route], path, __ATOMIC_RELAXED);
    __atomic_store_n(&s->m_held_method[route], method, __ATOMIC_RELEASE);
    __atomic_add_fetch(&s->m_held[route], 1, __ATOMIC_RELEASE);
}

int st_metrics(st_t *s, char **out, size_t *len)
{
    arb_buf_t b = {0};
    store_gc_stats_t gs;
    char lbl[256];
    int64_t now = st_now_ns(s);

    if (arb_buf_reserve(&b, 16384) < 0)
        return -ENOMEM;
    store_gc_get_stats(s->gc, &gs);
    pthread_mutex_lock(&s->mu);

    /* jobs */
    uint64_t by_state[ARB_JOB_NSTATES] = {0};
    for (uint64_t id = 1; id < s->next_id; id++)
        if (s->jobs[id])
            by_state[s->jobs[id]->j->state]++;
    help(&b, "arbiter_jobs", "gauge", "Jobs by state.");
    for (int k = 0; k < ARB_JOB_NSTATES; k++)
        arb_buf_printf(&b, "arbiter_jobs{state=\"%s\"} %llu\n",
                       arb_job_state_name((arb_job_state_t)k), (unsigned long long)by_state[k]);
    help(&b, "arbiter_queue_length", "gauge", "Pending jobs per queue.");
    for (int i = 0; i < s->nqueues; i++) {
        int pending = 0;
        for (int k = 0; k < s->nactive; k++)
            pending += s->active[k]->j->queue == s->queues[i] &&
                       (s->active[k]->j->state == ARB_JOB_PENDING ||
                        s->active[k]->j->state == ARB_JOB_PREEMPTED);
        esc(lbl, sizeof lbl, arb_str(&s->cluster.strs, s->queues[i]));
        arb_buf_printf(&b, "arbiter_queue_length{queue=\"%s\"} %d\n", lbl, pending);
    }

    /* why jobs wait: what the last cycle found for each (arb_job_t.wait) */
    int reasons[ARB_WAIT_NREASONS] = {0};
    for (int k = 0; k < s->nactive; k++) {
        const arb_job_t *j = s->active[k]->j;
        if ((j->state == ARB_JOB_PENDING || j->state == ARB_JOB_PREEMPTED) &&
            j->wait < ARB_WAIT_NREASONS && !s->active[k]->own_j)
            reasons[j->wait]++;
    }
    help(&b, "arbiter_pending_jobs_by_reason", "gauge",
         "Pending jobs by why the last scheduling cycle did not place them (none: not tried "
         "yet).");
    for (int r = 0; r < ARB_WAIT_NREASONS; r++)
        arb_buf_printf(&b, "arbiter_pending_jobs_by_reason{reason=\"%s\"} %d\n",
                       arb_wait_name((arb_wait_t)r), reasons[r]);

    /* GPUs, fragmentation, nodes */
    int64_t gpus = 0, used_milli = 0, free_whole = 0, free_on_busy = 0;
    int nstate[ARB_NODE_LEFT + 1] = {0};
    double max_age = 0;
    for (uint32_t i = 0; i < s->cluster.nnodes; i++) {
        const arb_node_t *n = &s->cluster.nodes[i];
        nstate[n->state]++;
        if (n->state == ARB_NODE_LEFT)
            continue;
        int fr = arb_node_free_gpus(n);
        gpus += n->ngpus;
        used_milli += n->used.gpu_milli;
        free_whole += fr;
        if (n->ntasks > 0)
            free_on_busy += fr;
        double age = (double)(now - s->nodes[i].report_mono) / 1e9;
        if (age > max_age)
            max_age = age;
    }
    help(&b, "arbiter_gpus", "gauge", "GPUs of all nodes.");
    arb_buf_printf(&b, "arbiter_gpus %lld\n", (long long)gpus);
    help(&b, "arbiter_gpu_allocation_ratio", "gauge", "Allocated share of all GPUs (0..1).");
    arb_buf_printf(&b, "arbiter_gpu_allocation_ratio %.6f\n",
                   gpus ? (double)used_milli / 1000.0 / (double)gpus : 0.0);
    help(&b, "arbiter_gpu_fragmentation_ratio", "gauge",
         "Share of free whole GPUs that sit on nodes already running tasks (0..1).");
    arb_buf_printf(&b, "arbiter_gpu_fragmentation_ratio %.6f\n",
                   free_whole ? (double)free_on_busy / (double)free_whole : 0.0);
    help(&b, "arbiter_nodes", "gauge", "Nodes by state.");
    for (int k = 0; k <= ARB_NODE_LEFT; k++)
        arb_buf_printf(&b, "arbiter_nodes{state=\"%s\"} %d\n",
                       arb_node_state_name((arb_node_state_t)k), nstate[k]);
    help(&b, "arbiter_node_report_age_max_seconds", "gauge", "Age of the stalest node report.");
    arb_buf_printf(&b, "arbiter_node_report_age_max_seconds %.3f\n", max_age);
    if (s->cluster.nnodes <= 1000) {
        help(&b, "arbiter_node_report_age_seconds", "gauge", "Age of each node's last report.");
        for (uint32_t i = 0; i < s->cluster.nnodes; i++) {
            esc(lbl, sizeof lbl, arb_node_name(&s->cluster, &s->cluster.nodes[i]));
            arb_buf_printf(&b, "arbiter_node_report_age_seconds{node=\"%s\"} %.3f\n", lbl,
                           (double)(now - s->nodes[i].report_mono) / 1e9);
        }
    }

    /* scheduling */
    help(&b, "arbiter_scheduling_cycle_seconds", "histogram", "Duration of scheduling cycles.");
    uint64_t cum = 0;
    for (int k = 0; k < ST_HIST - 1; k++) {
        cum += s->m_cycle_hist[k];
        arb_buf_printf(&b, "arbiter_scheduling_cycle_seconds_bucket{le=\"%g\"} %llu\n",
                       st_cycle_buckets_ms[k] / 1000.0, (unsigned long long)cum);
    }
    cum += s->m_cycle_hist[ST_HIST - 1];
    arb_buf_printf(&b, "arbiter_scheduling_cycle_seconds_bucket{le=\"+Inf\"} %llu\n",
                   (unsigned long long)cum);
    arb_buf_printf(&b, "arbiter_scheduling_cycle_seconds_sum %.6f\n", s->m_cycle_sum_s);
    arb_buf_printf(&b, "arbiter_scheduling_cycle_seconds_count %llu\n",
                   (unsigned long long)s->m_cycles);
    help(&b, "arbiter_node_report_seconds", "histogram",
         "Time to handle one agent report (parse, apply, commit, reply).");
    cum = 0;
    for (int k = 0; k < ST_HIST - 1; k++) {
        cum += s->m_report_hist[k];
        arb_buf_printf(&b, "arbiter_node_report_seconds_bucket{le=\"%g\"} %llu\n",
                       st_cycle_buckets_ms[k] / 1000.0, (unsigned long long)cum);
    }
    cum += s->m_report_hist[ST_HIST - 1];
    arb_buf_printf(&b, "arbiter_node_report_seconds_bucket{le=\"+Inf\"} %llu\n",
                   (unsigned long long)cum);
    arb_buf_printf(&b, "arbiter_node_report_seconds_sum %.6f\n", s->m_report_sum_s);
    arb_buf_printf(&b, "arbiter_node_report_seconds_count %llu\n",
                   (unsigned long long)s->m_reports);
    help(&b, "arbiter_replies_held_total", "counter",
         "Replies held (suspended) until their store commit, by route.");
    for (int k = 0; k < ST_HELD_ROUTES; k++) {
        uint64_t n = __atomic_load_n(&s->m_held[k], __ATOMIC_ACQUIRE);
        const char *m = __atomic_load_n(&s->m_held_method[k], __ATOMIC_ACQUIRE);
        const char *p = __atomic_load_n(&s->m_held_path[k], __ATOMIC_RELAXED);
        if (n == 0 || !m || !p)
            continue;
        char route[200];
        snprintf(route, sizeof route, "%s %s", m, p);
        esc(lbl, sizeof lbl, route);
        arb_buf_printf(&b, "arbiter_replies_held_total{route=\"%s\"} %llu\n", lbl,
                       (unsigned long long)n);
    }
    help(&b, "arbiter_nodes_lost_total", "counter",
         "Nodes declared lost (silent past lease + grace).");
    arb_buf_printf(&b, "arbiter_nodes_lost_total %llu\n", (unsigned long long)s->m_nodes_lost);
    help(&b, "arbiter_tasks_lost_total", "counter", "Tasks lost with their node or fenced.");
    arb_buf_printf(&b, "arbiter_tasks_lost_total %llu\n", (unsigned long long)s->m_tasks_lost);
    help(&b, "arbiter_jobs_requeued_total", "counter", "Jobs requeued whole after a lost task.");
    arb_buf_printf(&b, "arbiter_jobs_requeued_total %llu\n", (unsigned long long)s->m_requeued);
    help(&b, "arbiter_placements_total", "counter", "Jobs placed.");
    arb_buf_printf(&b, "arbiter_placements_total %llu\n", (unsigned long long)s->m_placed);
    help(&b, "arbiter_decisions_per_second", "gauge", "Placements per second over the last 5 s.");
    arb_buf_printf(&b, "arbiter_decisions_per_second %.3f\n", s->m_decisions_per_s);
    help(&b, "arbiter_preemptions_total", "counter", "Jobs preempted.");
    arb_buf_printf(&b, "arbiter_preemptions_total %llu\n", (unsigned long long)s->m_preempted);
    help(&b, "arbiter_jobs_submitted_total", "counter", "Jobs accepted since start.");
    arb_buf_printf(&b, "arbiter_jobs_submitted_total %llu\n", (unsigned long long)s->m_submitted);
    help(&b, "arbiter_lamport_clock", "gauge", "The controller's Lamport clock.");
    arb_buf_printf(&b, "arbiter_lamport_clock %llu\n", (unsigned long long)s->clock);
    help(&b, "arbiter_epoch", "gauge", "The controller's epoch (bumped at every start).");
    arb_buf_printf(&b, "arbiter_epoch %llu\n", (unsigned long long)s->epoch);
    int nsnap = 0;
    node_snap_t *snap = snap_nodes(s, &nsnap);
    pthread_mutex_unlock(&s->mu);
    if (snap)
        node_metrics(&b, snap, nsnap);
    free(snap);

    /* store */
    help(&b, "arbiter_store_commits_total", "counter", "Store transactions (group commits).");
    arb_buf_printf(&b, "arbiter_store_commits_total %llu\n", (unsigned long long)gs.commits);
    help(&b, "arbiter_store_batches_total", "counter", "Mutations handed to the store.");
    arb_buf_printf(&b, "arbiter_store_batches_total %llu\n", (unsigned long long)gs.batches);
    help(&b, "arbiter_store_commit_seconds", "histogram", "Store commit latency.");
    cum = 0;
    for (int k = 0; k < 11; k++) {
        cum += gs.hist[k];
        arb_buf_printf(&b, "arbiter_store_commit_seconds_bucket{le=\"%g\"} %llu\n",
                       store_gc_buckets_ms[k] / 1000.0, (unsigned long long)cum);
    }
    cum += gs.hist[11];
    arb_buf_printf(&b, "arbiter_store_commit_seconds_bucket{le=\"+Inf\"} %llu\n",
                   (unsigned long long)cum);
    arb_buf_printf(&b, "arbiter_store_commit_seconds_sum %.6f\n", (double)gs.commit_ns_sum / 1e9);
    arb_buf_printf(&b, "arbiter_store_commit_seconds_count %llu\n", (unsigned long long)gs.commits);
    *len = b.len;
    *out = arb_buf_take(&b);
    return *out ? 0 : -ENOMEM;
}
