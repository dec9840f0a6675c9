/*
 * bench_spec.c: `arbiter bench spec`: what reading one job spec costs, in
 * this thread's CPU time, without a controller around it (issue 20: the
 * submit path's share of a job's controller CPU). The spec is the body
 * `arbiter bench e2e` posts. Three stages, each timed over --rounds reads
 * of it and printed as one line (JSON with -o json):
 *   json  jansson's strict check of the JSON, as the controller does first
 *   doc   the libfyaml document (sv_doc_open and sv_doc_close: syntax,
 *         duplicate keys, the single-quote fix-up)
 *   job   the whole spec reader into a core job (spec_job_load_mem: the
 *         document, then every field; the body without the controller's
 *         own "command", which the reader does not know)
 *   submit the controller's whole submission of the body
 *         (st_job_submit_key into a state over a scratch directory, as
 *         h_submit calls it, without HTTP and the reply's JSON); the
 *         commits are the state's commit thread's and not counted here
 * Each figure is the median of 5 batches, in ns per read. --stage picks
 * one (callgrind: `--toggle-collect=bench_submit_one`).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arbiter/cluster.h"
#include "arbiter/job.h"
#include "cli/bench_proc.h"
#include "cli/cli.h"
#include "cli/flags.h"
#include "spec/scenario.h"
#include "spec/sval.h"
#include "state/state.h"

/* The body bench e2e posts, and the same without "command". */
static const char E2E_BODY[] =
    "{\"name\": \"e2e\", \"resources\": {\"requests\": {\"nvidia.com/gpu\": "
    "1}}, \"command\": [\"true\"]}";
static const char JOB_BODY[] =
    "{\"name\": \"e2e\", \"resources\": {\"requests\": {\"nvidia.com/gpu\": "
    "1}}}";

typedef struct bs_opts {
    long long rounds;
    int json;
    int stage; /* 0 every stage, else stages[stage - 1] */
} bs_opts_t;

static const fl_flag_t bs_flags[] = {
    FL_OPT(bs_opts_t, rounds, "--rounds", NULL, FL_INT, "N", "reads of the spec per batch",
           .def = "20000", .min = 1, .max = 100000000),
    FL_OPT(bs_opts_t, json, "--output", "-o", FL_CHOICE, NULL, "output format", .def = "text",
           .choices = "text|json"),
    FL_OPT(bs_opts_t, stage, "--stage", NULL, FL_CHOICE, NULL, "the stage to time (all: each)",
           .def = "all", .choices = "all|json|doc|job|submit"),
    FL_END,
};
static const fl_verb_t bs_verb = {
    .name = "bench spec",
    .summary = "the CPU time of reading one job spec: JSON check, YAML document, spec reader, "
               "the controller's whole submission",
    .flags = bs_flags};

static int64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* What the stages read with: the cluster the spec reader interns into, and
 * the submit stage's state over a scratch directory (made on its first
 * read, closed by cli_bench_spec). */
typedef struct bs_ctx {
    arb_cluster_t c;
    char dir[128];
    st_t *st;
} bs_ctx_t;

/* One read of the stage's text; 0 or a negative errno. */
static int read_json(bs_ctx_t *c)
{
    json_error_t je;
    json_t *v = json_loadb(E2E_BODY, sizeof E2E_BODY - 1, JSON_REJECT_DUPLICATES, &je);

    (void)c;
    json_decref(v);
    return v ? 0 : -EINVAL;
}

static int read_doc(bs_ctx_t *c)
{
    sv_doc_t d;
    int rc = sv_doc_open("job.json", E2E_BODY, sizeof E2E_BODY - 1, &d, NULL);

    (void)c;
    if (rc == 0)
        sv_doc_close(&d);
    return rc;
}

static int read_job(bs_ctx_t *c)
{
    arb_job_t *j = NULL;
    int rc = spec_job_load_mem("job.json", JOB_BODY, sizeof JOB_BODY - 1, &c->c, &j, NULL);

    if (rc == 0)
        arb_job_free(j);
    return rc;
}

/* One submission as h_submit makes it: the job made, its reply's view
 * freed; not inlined, so callgrind can count it alone. */
__attribute__((noinline)) int bench_submit_one(st_t *st)
{
    static const st_who_t who = {ST_ROLE_ADMIN, "", "bench", NULL};
    st_job_view_t v;
    bool created = false;
    int64_t t = 0;
    arb_err_t err = {{0}};
    int rc = st_job_submit_key(st, &who, NULL, E2E_BODY, sizeof E2E_BODY - 1, false, &v, &created,
                               &t, &err);

    if (rc < 0)
        fprintf(stderr, "arbiter bench spec: submit: %s\n", err.msg);
    else
        st_job_view_free(&v);
    return rc;
}

static int read_submit(bs_ctx_t *b)
{
    if (!b->st) {
        st_conf_t conf;
        arb_err_t err = {{0}};
        if (bench_tmpdir("spec", b->dir, sizeof b->dir) < 0)
            return -EIO;
        st_conf_init(&conf);
        conf.sync = STORE_SYNC_NORMAL; /* the commits are not what is timed */
        conf.reject_unfittable = false;
        int rc = st_open(b->dir, &conf, &b->st, &err);
        st_conf_free(&conf);
        if (rc < 0) {
            fprintf(stderr, "arbiter bench spec: %s: %s\n", b->dir, err.msg);
            bench_rmtree(b->dir);
            return rc;
        }
    }
    return bench_submit_one(b->st);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

int cli_bench_spec(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*read)(bs_ctx_t *c);
    } stages[] = {
        {"json", read_json}, {"doc", read_doc}, {"job", read_job}, {"submit", read_submit}};
    bs_opts_t o;
    fl_args_t a;
    bs_ctx_t c = {0};
    int rc = 0;

    if (!fl_run(&bs_verb, argc, argv, &o, &a, &rc))
        return rc;
    arb_cluster_init(&c.c);
    for (size_t s = 0; s < sizeof stages / sizeof stages[0] && rc == 0; s++) {
        int64_t batch[5];
        if (o.stage && (size_t)o.stage != s + 1)
            continue;
        for (int b = 0; b < 5 && rc == 0; b++) {
            int64_t t0 = cpu_ns();
            for (long long i = 0; i < o.rounds && rc == 0; i++)
                rc = stages[s].read(&c);
            batch[b] = (cpu_ns() - t0) / o.rounds;
        }
        if (rc < 0) {
            fprintf(stderr, "arbiter bench spec: the %s stage refused the spec (%d)\n",
                    stages[s].name, rc);
            break;
        }
        qsort(batch, 5, sizeof batch[0], cmp_i64);
        if (o.json == 1)
            printf("{\"bench\": \"spec\", \"stage\": \"%s\", \"rounds\": %lld, \"ns_per_read\": "
                   "%lld}\n",
                   stages[s].name, o.rounds, (long long)batch[2]);
        else
            printf("%-5s %8.2f us per read (median of 5 batches of %lld)\n", stages[s].name,
                   (double)batch[2] / 1000.0, o.rounds);
    }
    arb_cluster_free(&c.c);
    if (c.st) {
        st_close(c.st);
        bench_rmtree(c.dir);
    }
    return rc < 0 ? 1 : 0;
}
