/*
 * place.c: `arbiter place SCENARIO.yaml [--policy NAME] [-o text|json]`.
 *
 * Loads a scenario (src/spec/scenario.h), makes a scheduler over its
 * cluster with the chosen profile, and replays the jobs as an arrival
 * stream: each job is submitted and tried once, at its arrival, with
 * arb_sched_place, so the cluster state each job sees is the one the jobs
 * before it left. Nothing finishes and nothing is retried. It then prints
 * where every job went and, for each pending job, why (arb_sched_explain,
 * against the final state), plus how free GPUs are spread over the nodes:
 * the seed's lesson is to check the distribution of free GPUs, not the sum.
 *
 * Exit status: 0 when the scenario loaded (pending jobs included), 1 on bad
 * input (message on stderr), 2 on bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arbiter/sched.h"
#include "cli/cli.h"
#include "spec/scenario.h"

#define PLACE_USAGE "usage: arbiter place SCENARIO.yaml [--policy NAME] [-o text|json] [--seed N]\n"

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

typedef struct place_run {
    spec_scenario_t sc;
    arb_sched_t *s;
    arb_ctx_t ctx;
    arb_job_t **jobs; /* borrowed from the scheduler, arrival order */
    int njobs;
    const char *file;
} place_run_t;

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
    arb_cluster_t *c = &r->sc.cluster;
    const arb_sched_conf_t *conf = arb_sched_conf(r->s);
    int64_t used, cap;
    int wname = 4, placed = 0;

    gpu_totals(c, &used, &cap);
    for (int i = 0; i < r->njobs; i++) {
        int w = (int)strlen(r->jobs[i]->name);
        wname = w > wname ? w : wname;
        placed += r->jobs[i]->state == ARB_JOB_PLACED;
    }
    if (wname > 40)
        wname = 40;
    printf("scenario %s: %u node%s, %lld GPUs, %d job%s; policy %s\n\n", r->file, c->nnodes,
           c->nnodes == 1 ? "" : "s", (long long)(cap / 1000), r->njobs, r->njobs == 1 ? "" : "s",
           conf->profile.name);
    printf("%-*s  %-8s %s\n", wname, "JOB", "STATE", "PLACEMENT / REASON");
    for (int i = 0; i < r->njobs; i++) {
        arb_job_t *j = r->jobs[i];
        printf("%-*s  %-8s", wname, j->name, arb_job_state_name(j->state));
        if (j->state == ARB_JOB_PLACED) {
            for (int t = 0; t < j->nalloc; t++) {
                const arb_task_alloc_t *a = &j->alloc[t];
                char gpus[64];
                mask_text(a->gpu_mask, gpus, sizeof gpus);
                printf("%s%s", t ? ", " : " ", arb_node_name(c, &c->nodes[a->node]));
                if (a->gpu_mask)
                    printf(" gpu %s", gpus);
                if (a->gpu_mask && a->gpu_milli < 1000)
                    printf(" (%dm)", a->gpu_milli);
            }
            printf("\n");
        } else {
            arb_explain_t ex;
            if (arb_sched_explain(r->s, j, &r->ctx, &ex) == 0) {
                printf(" %s\n", ex.summary);
                if (ex.hint[0])
                    printf("%-*s  %-8s hint: %s\n", wname, "", "", ex.hint);
            } else {
                printf(" (no explanation available)\n");
            }
        }
    }
    printf("\n%d of %d jobs placed; GPUs allocated %g/%lld (%.1f%%)\n", placed, r->njobs,
           (double)used / 1000.0, (long long)(cap / 1000), pct(used, cap));
    printf("free whole GPUs per node:");
    for (uint32_t i = 0; i < c->nnodes && i < 32; i++)
        printf(" %s=%d", arb_node_name(c, &c->nodes[i]), arb_node_free_gpus(&c->nodes[i]));
    if (c->nnodes > 32)
        printf(" ... (%u more nodes)", c->nnodes - 32);
    printf("\n");
}

static int print_json(place_run_t *r)
{
    arb_cluster_t *c = &r->sc.cluster;
    const arb_sched_conf_t *conf = arb_sched_conf(r->s);
    int64_t used, cap;
    char *buf = NULL;
    size_t bufn = 0;

    gpu_totals(c, &used, &cap);
    printf("{\"scenario\":");
    json_str(stdout, r->file);
    printf(",\"policy\":");
    json_str(stdout, conf->profile.name);
    printf(",\"jobs\":[\n");
    for (int i = 0; i < r->njobs; i++) {
        arb_job_t *j = r->jobs[i];
        bool placed = j->state == ARB_JOB_PLACED;
        /* One job per line, so a line-oriented grep can check one job. */
        printf("{\"name\":");
        json_str(stdout, j->name);
        printf(",\"state\":\"%s\",\"nodes\":[", arb_job_state_name(j->state));
        for (int t = 0; placed && t < j->nalloc; t++) {
            printf("%s", t ? "," : "");
            json_str(stdout, arb_node_name(c, &c->nodes[j->alloc[t].node]));
        }
        printf("],\"gpus\":[");
        for (int t = 0; placed && t < j->nalloc; t++) {
            printf("%s[", t ? "," : "");
            for (int g = 0, first = 1; g < 16; g++)
                if (j->alloc[t].gpu_mask & (1u << g)) {
                    printf("%s%d", first ? "" : ",", g);
                    first = 0;
                }
            printf("]");
        }
        printf("],\"gpu_milli\":[");
        for (int t = 0; placed && t < j->nalloc; t++)
            printf("%s%d", t ? "," : "", j->alloc[t].gpu_mask ? j->alloc[t].gpu_milli : 0);
        printf("]");
        if (!placed) {
            arb_explain_t ex;
            if (arb_sched_explain(r->s, j, &r->ctx, &ex) == 0) {
                int need;
                /* Grow until the whole object fits. */
                while ((need = arb_explain_json(r->s, &ex, buf, bufn)) >= 0 &&
                       (size_t)need + 1 >= bufn) {
                    size_t nn = bufn ? bufn * 2 : 4096;
                    char *nb = nn > (1u << 24) ? NULL : realloc(buf, nn);
                    if (!nb) {
                        free(buf);
                        fprintf(stderr, "arbiter place: out of memory\n");
                        return 1;
                    }
                    buf = nb;
                    bufn = nn;
                }
                printf(",\"reason\":%s", need >= 0 ? buf : "null");
            }
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
    free(buf);
    return 0;
}

/* Submit and place every job in arrival order. */
static int place_stream(place_run_t *r, arb_err_t *err)
{
    int rc;

    r->jobs = calloc((size_t)(r->sc.njobs ? r->sc.njobs : 1), sizeof *r->jobs);
    if (!r->jobs)
        return arb_errf(err, -ENOMEM, "out of memory");
    for (int i = 0; i < r->sc.nqueues; i++)
        if ((rc = arb_sched_set_queue(r->s, &r->sc.queues[i], err)) < 0)
            return rc;
    /* All jobs are submitted first, so policies that learn the workload's
     * shape mix (fgd) know it before the first placement, as they would from
     * a cluster's history; then each is placed once, in arrival order. */
    for (int i = 0; i < r->sc.njobs; i++) {
        arb_job_t *j = r->sc.jobs[i];
        if ((rc = arb_sched_submit(r->s, j, &r->ctx, err)) < 0) {
            arb_err_prefix(err, "job '%s': ", j->name);
            return rc;
        }
        r->sc.jobs[i] = NULL; /* the scheduler owns it now */
        r->jobs[r->njobs++] = j;
    }
    for (int i = 0; i < r->njobs; i++) {
        arb_job_t *j = r->jobs[i];
        rc = arb_sched_place(r->s, j, &r->ctx);
        if (rc < 0 && rc != -ENOSPC)
            return arb_errf(err, rc, "job '%s': placement failed: %s", j->name, strerror(-rc));
    }
    return 0;
}

int cli_place(int argc, char **argv)
{
    const char *file = NULL, *policy = NULL, *output = "text";
    unsigned long long seed = 1;
    place_run_t r;
    arb_sched_conf_t conf;
    arb_rng_t rng;
    arb_err_t err = {{0}};
    int rc, status = 1;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            char names[256];
            printf(PLACE_USAGE "\nPlace the jobs of a scenario one at a time, in arrival order, "
                               "and explain the pending ones.\npolicies: %s\n",
                   arb_profile_names(names, sizeof names));
            return 0;
        } else if ((!strcmp(a, "--policy") || !strcmp(a, "-p")) && i + 1 < argc) {
            policy = argv[++i];
        } else if (!strncmp(a, "--policy=", 9)) {
            policy = a + 9;
        } else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && i + 1 < argc) {
            output = argv[++i];
        } else if (!strncmp(a, "--output=", 9)) {
            output = a + 9;
        } else if (!strcmp(a, "--seed") && i + 1 < argc) {
            char *end;
            seed = strtoull(argv[++i], &end, 10);
            if (*end || end == argv[i]) {
                fprintf(stderr, "arbiter place: --seed '%s' is not a number\n", argv[i]);
                return 2;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "arbiter place: unknown or incomplete option '%s'\n" PLACE_USAGE, a);
            return 2;
        } else if (!file) {
            file = a;
        } else {
            fprintf(stderr, "arbiter place: one scenario at a time ('%s')\n" PLACE_USAGE, a);
            return 2;
        }
    }
    if (!file) {
        fprintf(stderr, PLACE_USAGE);
        return 2;
    }
    if (strcmp(output, "text") != 0 && strcmp(output, "json") != 0) {
        fprintf(stderr, "arbiter place: -o '%s': use text or json\n", output);
        return 2;
    }

    memset(&r, 0, sizeof r);
    r.file = file;
    arb_rng_seed(&rng, seed);
    r.ctx.now_ns = 0;
    r.ctx.rng = &rng;
    if ((rc = spec_scenario_load_file(file, &r.sc, &err)) < 0) {
        fprintf(stderr, "arbiter place: %s\n", err.msg);
        return 1;
    }
    if ((rc = spec_scenario_conf(&r.sc, policy, &conf, &err)) < 0) {
        arb_err_prefix(&err, "--policy: ");
        goto out;
    }
    if (!(r.s = arb_sched_new(&r.sc.cluster, &conf, &err))) {
        rc = -EINVAL;
        goto out;
    }
    if ((rc = place_stream(&r, &err)) < 0)
        goto out;
    if (!strcmp(output, "json"))
        status = print_json(&r);
    else {
        print_text(&r);
        status = 0;
    }
out:
    if (rc < 0)
        fprintf(stderr, "arbiter place: %s\n", err.msg);
    arb_sched_free(r.s); /* frees the jobs handed to it */
    free(r.jobs);
    spec_scenario_free(&r.sc);
    return status;
}
