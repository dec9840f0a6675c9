/*
 * test_seed16_noise.c: the seed's 16-GPU case (tests/cli/sched_seed16.sh)
 * on the scheduling core, with the noise of a live cluster drawn at random:
 * four nodes of 16 GPUs (one NVLink domain each), twelve 4-GPU jobs arriving
 * 0.1 to 0.7 s apart, then a 16-GPU job that needs one NVLink domain, under
 * the default profile and the controller's staleness (5 s, half the default
 * lease). Before every decision each node gets a fresh draw of what its agent
 * last reported, as the controller would hold it:
 *
 *   age    the time since its last heartbeat, on time (under 0.3 s) or late
 *          by up to 4 s (an agent starved on a loaded machine), then floored
 *          to the second as the controller hands report times to the
 *          scheduler (src/state/node.c): always under the staleness, so no
 *          node is ever filtered out as stale;
 *   load   the temperature and utilisation of its GPUs: idle ones 25..45 C
 *          and 0..5 %, busy ones 55..85 C and 40..100 %.
 *
 * Nothing of that is a reason to break a whole node: the four-GPU jobs must
 * fill three nodes and leave the fourth whole, so the 16-GPU job places, for
 * every seed of each noise (age alone, load alone, both). A failure names
 * the seed, the noise and where the jobs went.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "core_fixture.h"

#define SEC 1000000000LL
#define NNODES 4
#define NSMALL 12
#define NSEEDS 300

enum { NOISE_AGE = 1, NOISE_LOAD = 2 };

/* A uniform draw in [lo, hi). */
static int64_t draw(arb_rng_t *r, int64_t lo, int64_t hi)
{
    return lo + (int64_t)arb_rng_below(r, (uint64_t)(hi - lo));
}

/* What each agent last reported, drawn anew before a decision. */
static void noise(fx_t *f, arb_rng_t *r, int what)
{
    for (uint32_t id = 0; id < NNODES; id++) {
        arb_node_t *n = N(f, id);
        if (what & NOISE_AGE) {
            int64_t late = arb_rng_below(r, 2) ? draw(r, 0, 4 * SEC) : draw(r, 0, 3 * SEC / 10);
            int64_t t = f->ctx.now_ns - late;
            n->report_ns = t - t % SEC;
        } else {
            n->report_ns = f->ctx.now_ns - f->ctx.now_ns % SEC;
        }
        for (int g = 0; g < n->ngpus; g++) {
            bool busy = n->gpu[g].used_milli > 0;
            if (what & NOISE_LOAD) {
                n->gpu[g].temp_c = (int16_t)(busy ? draw(r, 55, 86) : draw(r, 25, 46));
                n->gpu[g].util_pct = (uint8_t)(busy ? draw(r, 40, 101) : draw(r, 0, 6));
            } else {
                n->gpu[g].temp_c = busy ? 65 : 30;
                n->gpu[g].util_pct = busy ? 90 : 0;
            }
        }
        fx_touch(f, id);
    }
}

static arb_job_t *job(const char *name, int gpus, bool nvlink)
{
    arb_job_t *j = fx_job_new(name, 1, gpus, 0);
    j->groups[0].req.cpu_milli = 100;
    j->groups[0].req.mem_bytes = 64LL << 20;
    if (nvlink)
        j->groups[0].topo = (arb_topo_req_t){ARB_TOPO_NVLINK, true};
    return j;
}

/* One run of the case; true when the 16-GPU job placed. On failure *why
 * says where the jobs went. */
static bool run(uint64_t seed, int what, char *why, size_t nwhy)
{
    fx_t f;
    arb_sched_conf_t base = {0};
    arb_rng_t r;
    arb_cycle_stats_t st;
    uint32_t where[NSMALL];
    int per[NNODES] = {0};
    size_t off = 0;
    bool ok;

    fx_init(&f);
    arb_rng_seed(&r, seed * 7919 + (uint64_t)what);
    for (int i = 0; i < NNODES; i++) {
        char name[16];
        snprintf(name, sizeof name, "dgx-%d", i + 1);
        fx_node(&f, name, 16, 1, "V100", 32768);
    }
    base.profile.stale_ns = 5 * SEC; /* the controller's default: half the 10 s lease */
    fx_sched_conf(&f, "default", &base);
    f.ctx.now_ns = 100 * SEC;
    for (int i = 0; i < NSMALL; i++) {
        f.ctx.now_ns += draw(&r, SEC / 10, 7 * SEC / 10);
        noise(&f, &r, what);
        arb_job_t *j = fx_submit(&f, job("train-4gpu", 4, false));
        assert_int_equal(arb_sched_cycle(f.s, &f.ctx, &st), 0);
        assert_int_equal(j->state, ARB_JOB_PLACED);
        where[i] = j->alloc[0].node;
        per[where[i]]++;
    }
    f.ctx.now_ns += draw(&r, SEC / 10, 7 * SEC / 10);
    noise(&f, &r, what);
    arb_job_t *big = fx_submit(&f, job("tp-16gpu", 16, true));
    assert_int_equal(arb_sched_cycle(f.s, &f.ctx, &st), 0);
    ok = big->state == ARB_JOB_PLACED;
    if (!ok) {
        off += (size_t)snprintf(why + off, nwhy - off, "4-GPU jobs per node:");
        for (int i = 0; i < NNODES && off < nwhy; i++)
            off += (size_t)snprintf(why + off, nwhy - off, " dgx-%d %d", i + 1, per[i]);
        if (off < nwhy)
            off += (size_t)snprintf(why + off, nwhy - off, "; in order:");
        for (int i = 0; i < NSMALL && off < nwhy; i++)
            off += (size_t)snprintf(why + off, nwhy - off, " %u", where[i] + 1);
    }
    fx_check(&f);
    fx_free(&f);
    return ok;
}

static void search(int what, const char *label)
{
    int failed = 0;
    uint64_t first = 0;
    char why[256] = "", w[256];

    for (uint64_t seed = 1; seed <= NSEEDS; seed++)
        if (!run(seed, what, w, sizeof w)) {
            if (!failed++) {
                first = seed;
                snprintf(why, sizeof why, "%s", w);
            }
        }
    printf("seed16 noise (%s): the 16-GPU job placed in %d of %d seeds\n", label, NSEEDS - failed,
           NSEEDS);
    if (failed)
        fail_msg("noise %s: the 16-GPU job did not place in %d of %d seeds; first: seed %llu: %s",
                 label, failed, NSEEDS, (unsigned long long)first, why);
}

static void test_age_noise(void **st)
{
    (void)st;
    search(NOISE_AGE, "report age");
}

static void test_load_noise(void **st)
{
    (void)st;
    search(NOISE_LOAD, "GPU temperature and utilisation");
}

static void test_both(void **st)
{
    (void)st;
    search(NOISE_AGE | NOISE_LOAD, "age and load");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_age_noise),
        cmocka_unit_test(test_load_noise),
        cmocka_unit_test(test_both),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
