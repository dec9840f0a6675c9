/*
 * sweep.c: many independent runs at once. Worker processes (fork) take the
 * next run from a shared counter and write its result into a shared,
 * anonymous mapping; the parent waits, drawing a progress bar on stderr
 * when asked. Processes rather than threads: a run touches nothing shared,
 * and a crash in one run cannot corrupt the others' results.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sim/sim.h"

typedef struct sweep_shared {
    int next; /* the next run to take (atomic) */
    int done; /* runs finished (atomic) */
} sweep_shared_t;

typedef struct sweep {
    const sim_nodes_t *nodes;
    const sim_tasks_t *workloads;
    const char *const *policies;
    int npolicies;
    const uint64_t *seeds;
    int nseeds;
    const sim_opts_t *base;
    int nruns;
    sweep_shared_t *sh;
    sim_result_t *out;
} sweep_t;

static void run_one(const sweep_t *w, int i)
{
    int per_w = w->npolicies * w->nseeds;
    sim_opts_t o = *w->base;
    arb_err_t err = {{0}};

    o.policy = w->policies[(i % per_w) / w->nseeds];
    o.seed = w->seeds[i % w->nseeds];
    if (o.mode == SIM_MODE_EVENTS)
        sim_run_events(w->nodes, &w->workloads[i / per_w], &o, &w->out[i], &err);
    else
        sim_run(w->nodes, &w->workloads[i / per_w], &o, &w->out[i], &err);
}

static void work(const sweep_t *w)
{
    for (;;) {
        int i = __atomic_fetch_add(&w->sh->next, 1, __ATOMIC_RELAXED);
        if (i >= w->nruns)
            return;
        run_one(w, i);
        __atomic_fetch_add(&w->sh->done, 1, __ATOMIC_RELEASE);
    }
}

static void bar(int done, int total)
{
    int width = 40, fill = total ? done * width / total : width;
    fprintf(stderr, "\r[%.*s%*s] %d/%d runs", fill, "########################################",
            width - fill, "", done, total);
    fflush(stderr);
}

int sim_sweep(const sim_nodes_t *nodes, const sim_tasks_t *workloads, int nworkloads,
              const char *const *policies, int npolicies, const uint64_t *seeds, int nseeds,
              const sim_opts_t *base, int jobs, bool progress, sim_result_t *results,
              arb_err_t *err)
{
    sweep_t w = {nodes, workloads, policies, npolicies,
                 seeds, nseeds,    base,     nworkloads * npolicies * nseeds,
                 NULL,  NULL};
    size_t bytes = sizeof(sweep_shared_t) + (size_t)w.nruns * sizeof(sim_result_t);
    void *map;
    int nkids = 0, rc = 0;

    if (jobs > w.nruns)
        jobs = w.nruns;
    if (jobs > 64)
        jobs = 64;
    /* cppcheck-suppress invalidFunctionArg ; fd -1 is what MAP_ANONYMOUS takes */
    map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED)
        return arb_errf(err, -errno, "sweep: cannot map %zu bytes: %s", bytes, strerror(errno));
    memset(map, 0, bytes);
    w.sh = map;
    w.out = (sim_result_t *)((char *)map + sizeof(sweep_shared_t));
    for (int i = 0; i < w.nruns; i++)
        w.out[i].rc = -ECANCELED; /* overwritten by the run */

    if (jobs <= 1) {
        for (int i = 0; i < w.nruns; i++) {
            run_one(&w, i);
            if (progress)
                bar(i + 1, w.nruns);
        }
    } else {
        fflush(NULL);
        for (int k = 0; k < jobs; k++) {
            pid_t p = fork();
            if (p == 0) {
                work(&w);
                _exit(0);
            }
            if (p < 0) {
                rc = arb_errf(err, -errno, "sweep: fork failed: %s", strerror(errno));
                break;
            }
            nkids++;
        }
        if (nkids == 0) /* no worker could start: do it here */
            work(&w);
        for (int left = nkids; left > 0;) {
            int st;
            pid_t p = waitpid(-1, &st, progress ? WNOHANG : 0);
            if (p > 0) {
                left--;
                if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                    rc = rc ? rc : arb_errf(err, -ECHILD, "sweep: a worker died (status %d)", st);
            } else if (p == 0) {
                struct timespec ts = {0, 100 * 1000000};
                bar(__atomic_load_n(&w.sh->done, __ATOMIC_ACQUIRE), w.nruns);
                nanosleep(&ts, NULL);
            } else if (errno != EINTR) {
                break;
            }
        }
        if (progress)
            bar(__atomic_load_n(&w.sh->done, __ATOMIC_ACQUIRE), w.nruns);
    }
    if (progress)
        fputc('\n', stderr);
    memcpy(results, w.out, (size_t)w.nruns * sizeof *results);
    munmap(map, bytes);
    for (int i = 0; i < w.nruns && rc == 0; i++)
        if (results[i].rc < 0)
            rc = arb_errf(err, results[i].rc, "%s %s seed %llu: %s", results[i].workload,
                          results[i].policy, (unsigned long long)results[i].seed,
                          results[i].err[0] ? results[i].err : "the run did not finish");
    return rc;
}
