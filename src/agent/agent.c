/*
 * agent.c: the node agent's heartbeat (see agent.h): the glue between
 * discovery, telemetry, the executor, the lease and a transport. Decisions
 * live in lease.c (pure); this file only carries them out.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "util/log.h"
#include "util/mtime.h"

int64_t agent_mono_ns(void *ignored)
{
    (void)ignored;
    return arb_mono_ns();
}

static int64_t now(agent_t *a)
{
    return a->conf.now(a->conf.now_ctx);
}

static void say(agent_t *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(agent_t *a, const char *fmt, ...)
{
    char msg[768];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (a->conf.log)
        a->conf.log(a->conf.log_ctx, msg);
    else
        arb_log(ARB_LOG_INFO, NULL, "%s", msg); /* "arbiter agent NODE: ..." (cli/agent.c) */
}

/*
 * Tell every supervisor the lease as it stands (supervise.h): the expiry
 * while ACTIVE, the old expiry covering adopted tasks until the agent has
 * registered again, else 0 (kill now). Called after every change of the
 * lease, and before any task starts under it. Supervisors read
 * CLOCK_MONOTONIC; a test's clock (conf.now) is mapped by what is left.
 */
static void publish_lease(agent_t *a)
{
    const agent_lease_t *l = &a->lease;
    int64_t dl = 0;

    if (l->state == AGENT_LEASE_ACTIVE ||
        (l->state == AGENT_LEASE_UNREGISTERED && l->expires_ns != 0))
        dl = l->expires_ns;
    if (dl > 0 && a->conf.now != agent_mono_ns) {
        int64_t left = dl - now(a);
        dl = left > 0 ? agent_mono_ns(NULL) + left : 0;
    }
    agent_exec_set_deadline(&a->exec, dl);
}

static void note_ended(agent_t *a);

static void fence(agent_t *a, int64_t t)
{
    /* Collect first what already ended: a task its supervisor killed while
     * this agent was stopped is told as such, not counted as killed here
     * (whichever of the loop's paths fences first after a resume). */
    if (agent_exec_poll(&a->exec, t) > 0)
        note_ended(a);
    int n = agent_exec_fence(&a->exec, t); /* publishes 0: every supervisor kills too */
    /* SIGKILL is on its way; reap now, so that nothing of them is left, not
     * even a zombie, by the time the controller may place them elsewhere. */
    if (n > 0 && agent_exec_wait(&a->exec, 1000000000LL) < 0)
        say(a, "fence: %d task%s not gone after 1 s (stuck in the kernel?)",
            agent_exec_live(&a->exec), agent_exec_live(&a->exec) == 1 ? "" : "s");
    say(a, "FENCED: %s; killed %d task%s, assignments refused until registered again", a->lease.why,
        n, n == 1 ? "" : "s");
    a->inventory_acked = false; /* register anew, inventory and all */
    if (a->chan)                /* nothing through the channel until registered again */
        agent_chan_set(a->chan, false, a->lease.epoch, 0);
}

/* Say once how each task ended; above all, which ones a supervisor killed
 * because the lease had passed while this agent did not run (it was
 * stopped, hung or dead), so that the log tells what really happened. */
static void note_ended(agent_t *a)
{
    for (int i = 0; i < a->exec.ntasks; i++) {
        agent_task_t *k = a->exec.tasks[i];
        if (k->state != AGENT_TASK_EXITED || k->noted)
            continue;
        k->noted = true;
        if (k->start_failed) /* reported as an exit, as a shell would: 127 not found, 126 else */
            say(a, "%s", k->start_err);
        else if (k->fenced_by_sup)
            say(a,
                "job %s task %d (attempt %llu): killed by its supervisor %.1f ms after the lease "
                "ran out unrenewed; this agent learnt so %.1f s after it",
                k->job, k->task, (unsigned long long)k->attempt, (double)k->late_ns / 1e6,
                (double)k->seen_late_ns / 1e9);
        else if (k->exit_code >= 0)
            say(a, "job %s task %d (attempt %llu) ended: exit code %d (%s)", k->job, k->task,
                (unsigned long long)k->attempt, k->exit_code, k->reason);
        else
            say(a, "job %s task %d (attempt %llu) ended: %s%s%s (%s)", k->job, k->task,
                (unsigned long long)k->attempt, k->signal ? "signal " : "no exit status",
                k->signal ? strsignal(k->signal) : "", "", k->reason);
    }
}

int agent_tick(agent_t *a)
{
    int64_t t = now(a);

    if (agent_exec_poll(&a->exec, t) > 0) {
        a->urgent = true;
        note_ended(a);
    }
    if (agent_lease_tick(&a->lease, t) == AGENT_LEASE_FENCE)
        fence(a, t);
    return agent_exec_live(&a->exec);
}

/* ---- restart state -------------------------------------------------------------------- */

static void lease_path(const agent_t *a, char *buf, size_t n)
{
    snprintf(buf, n, "%s.lease", a->conf.state_file);
}

static void save_state(agent_t *a)
{
    char path[4200], tmp[4300];
    arb_err_t err;
    FILE *f;

    publish_lease(a);
    if (!a->conf.state_file)
        return;
    if (agent_exec_save(&a->exec, a->conf.state_file, &err) < 0)
        say(a, "%s", err.msg);
    lease_path(a, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if ((f = fopen(tmp, "we"))) {
        /* An expiry of 0 (not registered): survivors are fenced at once. */
        fprintf(f, "%llu %lld\n", (unsigned long long)a->lease.epoch,
                (long long)(a->lease.state == AGENT_LEASE_ACTIVE ? a->lease.expires_ns : 0));
        if (fclose(f) == 0)
            rename(tmp, path);
    }
}

/*
 * A restarted agent takes over what its previous run left: every task
 * whose supervisor still runs (found through the supervisors' task records
 * in the log directory, with or without --state), the ended ones to
 * report, and tasks of an old state file that had no supervisor. They are
 * covered by the lease the previous run last published (the supervisors
 * hold it) until this agent registers again; past it they are fenced.
 */
static void adopt_survivors(agent_t *a, int64_t t)
{
    agent_task_record_t rec[256];
    char path[4200];
    unsigned long long epoch = 0;
    long long expires = 0;
    arb_err_t err;
    int n = 0, adopted, ended = 0;
    FILE *f;

    adopted = agent_exec_adopt_all(&a->exec, t, &ended);
    if (a->conf.state_file) {
        n = agent_exec_load(a->conf.state_file, rec, 256, &err);
        if (n < 0)
            say(a, "%s; starting without the previous run's state file", err.msg);
        for (int i = 0; i < n; i++) /* already adopted through a supervisor: -EEXIST */
            if (agent_exec_adopt(&a->exec, &rec[i], t, &err) == 0)
                adopted++;
        lease_path(a, path, sizeof path);
        if ((f = fopen(path, "re"))) {
            if (fscanf(f, "%llu %lld", &epoch, &expires) != 2)
                epoch = 0, expires = 0;
            fclose(f);
        }
    }
    if (ended) {
        note_ended(a);
        a->urgent = true;
    }
    if (!adopted)
        return;
    /* The deadline the supervisors hold is the previous run's last word
     * (CLOCK_MONOTONIC is the machine's: it survives the restart). */
    int64_t dl = agent_exec_deadline(&a->exec);
    if (dl > 0 && a->conf.now != agent_mono_ns)
        dl = t + (dl - agent_mono_ns(NULL));
    if (dl <= 0)
        dl = expires > 0 ? expires : t; /* nothing covers them: the first tick fences */
    agent_lease_restore(&a->lease, epoch, dl);
    say(a,
        "adopted %d task%s of the previous run through %s; they are killed unless the "
        "controller confirms them within the old lease (%.1f s left)",
        adopted, adopted == 1 ? "" : "s",
        n > 0 ? "their supervisors and the state file" : "their supervisors",
        dl > t ? (double)(dl - t) / 1e9 : 0.0);
}

/* ---- open / close ------------------------------------------------------------------------- */

int agent_open(agent_t *a, const agent_conf_t *c, arb_err_t *err)
{
    int rc;

    memset(a, 0, sizeof *a);
    a->conf = *c;
    if (!a->conf.heartbeat_ns)
        a->conf.heartbeat_ns = AGENT_DEFAULT_HEARTBEAT_NS;
    if (!a->conf.lease_ns)
        a->conf.lease_ns = AGENT_DEFAULT_LEASE_NS;
    if (!a->conf.now)
        a->conf.now = agent_mono_ns;
    if (a->conf.lease_ns <= a->conf.heartbeat_ns)
        return arb_errf(err, -EINVAL,
                        "the lease (%lld ms) must be longer than the heartbeat "
                        "(%lld ms)",
                        (long long)(a->conf.lease_ns / 1000000),
                        (long long)(a->conf.heartbeat_ns / 1000000));
    a->incarnation = a->conf.incarnation > 0 ? a->conf.incarnation : arb_wall_ms();
    if (a->incarnation <= 0)
        a->incarnation = 1;
    a->tr = a->conf.transport ? a->conf.transport : &agent_transport_stdout;
    if ((rc = agent_disc_open(&a->disc, &a->conf.disc, err)) < 0)
        return rc;
    a->conf.exec.node_name = a->disc.inv.name;
    if ((rc = agent_exec_init(&a->exec, &a->conf.exec, err)) < 0)
        goto fail_disc;
    if (!realpath(a->conf.exec.log_dir, a->log_dir))
        snprintf(a->log_dir, sizeof a->log_dir, "%s", a->conf.exec.log_dir);
    if (gethostname(a->hostname, sizeof a->hostname - 1) != 0)
        a->hostname[0] = '\0';
    if (!a->conf.fake_busy_pct)
        a->conf.fake_busy_pct = 90;
    agent_tel_init(&a->tel, a->conf.tel_proc_root ? a->conf.tel_proc_root : a->conf.disc.proc_root);
    agent_tel_sample(&a->tel, &a->disc, now(a), &a->last, NULL); /* primes the deltas */
    agent_lease_init(&a->lease, a->conf.lease_ns);
    {
        agent_transport_conf_t tc = {.target = a->conf.target,
                                     .node = a->disc.inv.name,
                                     .token = a->conf.token,
                                     .conn = a->conf.conn,
                                     .tls = a->conf.tls};
        if ((rc = a->tr->open(&tc, &a->tstate, err)) < 0)
            goto fail_exec;
        if (a->conf.push_wait_ns > 0 && a->tr == &agent_transport_http && !a->conf.conn &&
            (rc = agent_chan_open(&a->chan, &tc, a->conf.push_wait_ns, err)) < 0) {
            a->tr->close(a->tstate);
            a->tstate = NULL;
            goto fail_exec;
        }
    }
    if (a->disc.note[0])
        say(a, "%s", a->disc.note);
    if (a->exec.warning[0])
        say(a, "%s", a->exec.warning);
    adopt_survivors(a, now(a));
    publish_lease(a); /* 0 unless adopted tasks are covered: strays of this log dir die */
    return 0;
fail_exec:
    agent_exec_free(&a->exec);
fail_disc:
    agent_disc_close(&a->disc);
    return rc;
}

void agent_close(agent_t *a, bool kill_tasks)
{
    uint64_t lists = 0, cfail = 0;
    if (a->chan)
        agent_chan_counts(a->chan, &lists, &cfail);
    if (a->reports && a->tr != &agent_transport_stdout)
        say(a,
            "%llu reports (%.2f ms each), %llu lists pushed through the channel, %llu tasks "
            "started (%.2f ms each); %llu of the lists pushed were the one applied already; "
            "%llu lists from the channel were older than the one applied or of another lease, "
            "%llu polls answered in all, %llu failed",
            (unsigned long long)a->reports, (double)a->report_ns / 1e6 / (double)a->reports,
            (unsigned long long)a->pushes, (unsigned long long)a->starts,
            a->starts ? (double)a->start_ns / 1e6 / (double)a->starts : 0.0,
            (unsigned long long)a->pushes_same, (unsigned long long)a->pushes_older,
            (unsigned long long)lists, (unsigned long long)cfail);
    if (kill_tasks && agent_exec_live(&a->exec) > 0) {
        agent_exec_fence(&a->exec, now(a));
        agent_exec_wait(&a->exec, 5000000000LL);
        /* What this stop killed is no task's own ending: its records go, so
         * that a next run does not report it failed (SIGKILL); the
         * controller, no longer hearing of it, counts it lost and requeues
         * it. Tasks that ended by themselves keep theirs, to be reported. */
        for (int i = 0; i < a->exec.ntasks; i++)
            if (a->exec.tasks[i]->state == AGENT_TASK_EXITED &&
                strcmp(a->exec.tasks[i]->reason, "fenced") == 0 &&
                agent_exec_forget(&a->exec, a->exec.tasks[i]->job, a->exec.tasks[i]->task) == 0)
                i--;
    }
    save_state(a);
    if (kill_tasks) /* a deliberate stop: nothing may live on under this lease */
        agent_exec_set_deadline(&a->exec, 0);
    agent_chan_close(a->chan);
    a->chan = NULL;
    if (a->tr && a->tstate)
        a->tr->close(a->tstate);
    agent_exec_free(&a->exec);
    agent_disc_close(&a->disc);
}

/* ---- applying the controller's list ---------------------------------------------------- */

static const agent_assignment_t *listed(const agent_reply_t *r, const agent_task_t *t)
{
    for (int i = 0; i < r->nassign; i++)
        if (r->assign[i].ref.task == t->task && strcmp(r->assign[i].ref.job, t->job) == 0)
            return &r->assign[i];
    return NULL;
}

/* A task being stopped that still holds one of as's GPUs, or NULL. */
static const agent_task_t *stopping_on(const agent_t *a, const agent_assignment_t *as, int *gpu)
{
    for (int i = 0; i < a->exec.ntasks; i++) {
        const agent_task_t *k = a->exec.tasks[i];
        if (k->state != AGENT_TASK_STOPPING)
            continue;
        for (int x = 0; x < k->ngpus; x++)
            for (int y = 0; y < as->ngpus; y++)
                if (k->gpus[x] == as->gpus[y]) {
                    *gpu = k->gpus[x];
                    return k;
                }
    }
    return NULL;
}

static void apply(agent_t *a, const agent_reply_t *r, int64_t t)
{
    /* Stop what is not ours any more; forget ended tasks no longer listed. */
    for (int i = 0; i < a->exec.ntasks; i++) {
        agent_task_t *k = a->exec.tasks[i];
        const agent_assignment_t *as = listed(r, k);
        bool ours = as && as->ref.attempt == k->attempt && !as->ref.stop;

        bool live = k->state == AGENT_TASK_RUNNING || k->state == AGENT_TASK_STARTING;
        if (live && ours && as->elastic) {
            arb_err_t rerr;
            int rc = agent_exec_resize(&a->exec, k->job, k->task, as->generation, as->world_size,
                                       as->rank, as->hosts, &rerr);
            if (rc > 0)
                say(a,
                    "job %s task %d: resized: world size %d, rank %d (generation %u); "
                    "SIGUSR1 sent",
                    k->job, k->task, as->world_size, as->rank, as->generation);
            else if (rc < 0)
                say(a, "job %s task %d: resize notice failed: %s", k->job, k->task, rerr.msg);
        }
        if (live && !ours) {
            a->urgent = true;
            say(a, "job %s task %d: %s; stopping it", k->job, k->task,
                !as            ? "no longer assigned here"
                : as->ref.stop ? "stop requested"
                               : "requeued as another attempt");
            agent_exec_cancel(&a->exec, k->job, k->task, t);
        } else if (k->state == AGENT_TASK_EXITED && !as) {
            agent_exec_forget(&a->exec, k->job, k->task);
            i--;
        }
    }
    /* Start what is new. */
    for (int i = 0; i < r->nassign; i++) {
        const agent_assignment_t *as = &r->assign[i];
        agent_task_t *k = agent_exec_find(&a->exec, as->ref.job, as->ref.task);
        agent_task_spec_t s;
        arb_err_t err;

        if (as->ref.stop || (k && (k->attempt == as->ref.attempt || k->state != AGENT_TASK_EXITED)))
            continue; /* running, done, or an old attempt still stopping */
        if (agent_lease_check_assignment(&a->lease, as->ref.epoch, t, NULL, &err) < 0) {
            say(a, "job %s task %d: %s", as->ref.job, as->ref.task, err.msg);
            continue;
        }
        /* A GPU passes from a task being stopped (preempted, cancelled,
         * requeued) to a new one only once the old one has exited: until
         * its SIGKILL it may still hold the GPU's memory. The assignment
         * comes again with the reply to the report that says it exited,
         * which goes at once (a->urgent). */
        int held = -1;
        const agent_task_t *old = stopping_on(a, as, &held);
        if (old) {
            say(a, "job %s task %d waits for job %s task %d to stop: it still holds GPU %d",
                as->ref.job, as->ref.task, old->job, old->task, held);
            continue;
        }
        memset(&s, 0, sizeof s);
        s.job = as->ref.job;
        s.task = as->ref.task;
        s.attempt = as->ref.attempt;
        s.epoch = as->ref.epoch;
        s.argv = as->argv;
        s.env = as->env;
        s.ngpus = as->ngpus;
        memcpy(s.gpus, as->gpus, sizeof s.gpus);
        s.mem_bytes = as->mem_bytes;
        s.cpu_milli = as->cpu_milli;
        s.has_grace = as->grace_ns >= 0;
        s.grace_ns = as->grace_ns;
        /* its time limit, counted on this agent's clock from now (the
         * controller sent what was left of it) */
        s.deadline_ns = as->limit_ns >= 0 ? t + (as->limit_ns > 0 ? as->limit_ns : 1) : 0;
        s.elastic = as->elastic;
        s.generation = as->generation;
        s.hosts = as->hosts;
        if (as->world_size > 1 || as->elastic) {
            s.world_size = as->world_size;
            s.rank = as->rank;
            s.master_addr = as->master_addr;
            s.master_port = as->master_port;
        }
        /* Not waiting for its execs: it is STARTING, reported running, and
         * the loop settles its start when its pipe says (agent_poll_fds). */
        int64_t s0 = agent_mono_ns(NULL);
        int rc = agent_exec_begin(&a->exec, &s, t, NULL, &err);
        a->start_ns += agent_mono_ns(NULL) - s0;
        a->starts++;
        if (rc < 0) {
            a->urgent = true;
            /* Reported as an exit, as a shell would: 127 not found, 126 else. */
            say(a, "%s", err.msg);
            agent_exec_record_failed(&a->exec, &s, rc == -ENOENT ? 127 : 126, t);
        } else {
            a->started = true; /* say so soon: the job counts as running from the report */
            char gl[64] = "";
            for (int g = 0, used = 0; g < s.ngpus && used < (int)sizeof gl; g++)
                used +=
                    snprintf(gl + used, sizeof gl - (size_t)used, "%s%d", g ? "," : "", s.gpus[g]);
            say(a, "job %s task %d (attempt %llu, epoch %llu) started on GPUs [%s]", s.job, s.task,
                (unsigned long long)s.attempt, (unsigned long long)s.epoch, gl);
        }
    }
}

/* ---- pushed assignments ----------------------------------------------------------------- */

int agent_push_fd(const agent_t *a)
{
    return a->chan ? agent_chan_fd(a->chan) : -1;
}

int agent_poll_fds(const agent_t *a, struct pollfd *pf, int max)
{
    return agent_exec_start_fds(&a->exec, pf, max);
}

/*
 * A list from the channel counts only as a report's reply would: under an
 * active lease, of the lease's epoch (a list of another epoch waits for
 * the report that registers under it), and newer than the last list
 * applied: a poll answered before a report whose reply this agent already
 * applied must not undo it (stop a task that reply started).
 */
int agent_push(agent_t *a)
{
    agent_reply_t r;
    int64_t t;
    int rc;

    if (!a->chan || (rc = agent_chan_take(a->chan, &r)) == 0)
        return 0;
    if (rc < 0) { /* refused: another epoch, or the node lost; the report says */
        a->urgent = true;
        return 0;
    }
    t = now(a);
    agent_tick(a); /* the lease as it stands now */
    rc = 0;
    if (a->lease.state != AGENT_LEASE_ACTIVE || r.epoch != a->lease.epoch) {
        a->urgent = true; /* the report sorts it out */
        a->pushes_older++;
    } else if (r.lamport < a->list_lamport && r.epoch == a->list_epoch) {
        /* older than the list applied: the next poll brings the news */
        a->pushes_older++;
    } else {
        if (r.version && r.version == a->list_version && r.epoch == a->list_epoch)
            a->pushes_same++;
        apply(a, &r, t);
        a->list_epoch = r.epoch;
        a->list_lamport = r.lamport;
        a->list_version = r.version;
        a->pushes++;
        rc = 1;
    }
    agent_reply_free(&r);
    if (rc)
        save_state(a);
    return rc;
}

/* ---- one heartbeat ---------------------------------------------------------------------- */

/* Fake GPUs look busy while a task holds them (straggler checks, demos). */
static void fake_load(agent_t *a)
{
    uint32_t busy = 0;

    if (a->disc.ops != &agent_gpu_fake || a->conf.fake_busy_pct < 0)
        return;
    for (int i = 0; i < a->exec.ntasks; i++) {
        const agent_task_t *k = a->exec.tasks[i];
        if (k->state == AGENT_TASK_EXITED)
            continue;
        for (int g = 0; g < k->ngpus; g++)
            busy |= 1u << k->gpus[g];
    }
    agent_fake_load(&a->disc, busy, a->conf.fake_busy_pct > 100 ? 100 : a->conf.fake_busy_pct);
}

int agent_step(agent_t *a, arb_err_t *err)
{
    int64_t t = now(a), sent, timeout;
    agent_report_in_t in;
    agent_reply_t reply;
    arb_err_t terr;
    char *body;
    int rc;

    agent_tick(a);
    a->urgent = a->started = false; /* this report says it */
    fake_load(a);
    /* Telemetry once a heartbeat: a report sent early because a task
     * started or ended (a->urgent) carries its tasks only, which keeps
     * short tasks from costing a /proc walk here and a telemetry parse at
     * the controller each. */
    bool sample = !a->tel_at || t - a->tel_at >= a->conf.heartbeat_ns - a->conf.heartbeat_ns / 8 ||
                  !a->inventory_acked || a->last.cpu_util_pct < 0; /* no rates yet: again */
    if (sample) {
        agent_tel_sample(&a->tel, &a->disc, t, &a->last, NULL);
        a->tel_at = t;
    }
    if (a->conf.queue_file) { /* missing or unreadable: not reported this time */
        FILE *qf = fopen(a->conf.queue_file, "re");
        long long q = -1;
        a->last.has_queue_len = qf && fscanf(qf, "%lld", &q) == 1 && q >= 0 && q <= INT32_MAX;
        a->last.queue_len = a->last.has_queue_len ? (int32_t)q : 0;
        if (qf)
            fclose(qf);
    }
    memset(&in, 0, sizeof in);
    in.lamport = agent_lamport_tick(&a->clock);
    in.incarnation = a->incarnation;
    in.inv = a->inventory_acked ? NULL : &a->disc.inv;
    in.tel = sample ? &a->last : NULL;
    in.exec = &a->exec;
    in.address = a->conf.address;
    in.hostname = a->hostname;
    in.log_dir = a->log_dir;
    in.logs_url = a->conf.logs_url;
    if (!(body = agent_report_json(&in)))
        return arb_errf(err, -ENOMEM, "out of memory building the report");
    /* A hung controller must not hold the fence back: the report gets at
     * most what is left of the lease. */
    timeout = a->lease.lease_ns;
    if (a->lease.expires_ns > t && a->lease.expires_ns - t < timeout)
        timeout = a->lease.expires_ns - t; /* active, or adopted tasks' old lease */
    if (a->conf.report_timeout_ns > 0 && a->conf.report_timeout_ns < timeout)
        timeout = a->conf.report_timeout_ns;
    /* nor a task's time limit (or the SIGKILL after its grace): they are
     * kept here, controller or not */
    int64_t due = agent_exec_next_deadline(&a->exec);
    if (due > 0 && due - t < timeout)
        timeout = due - t > 1000000 ? due - t : 1000000;
    sent = t;
    memset(&terr, 0, sizeof terr);
    memset(&reply, 0, sizeof reply);
    int64_t r0 = agent_mono_ns(NULL);
    rc = a->tr->report(a->tstate, body, strlen(body), timeout, &reply, &terr);
    a->report_ns += agent_mono_ns(NULL) - r0;
    free(body);
    t = now(a);
    a->reports++;
    if (rc == -ERANGE) {
        /* Our clock ran ahead of the controller's by more than it takes
         * (its store was rewound or renumbered, or reports went unanswered
         * for very long): take its time and register again, which resets
         * what the controller holds as our last report. */
        say(a, "%s; taking the controller's clock (%llu) and registering again", terr.msg,
            (unsigned long long)reply.lamport);
        a->clock.t = reply.lamport;
        a->inventory_acked = false;
        a->urgent = true;
    }
    if (rc < 0) {
        a->failures++;
        if (!a->failing)
            say(a, "report not acknowledged: %s (lease left: %lld ms)", terr.msg,
                (long long)(agent_lease_remaining(&a->lease, t) / 1000000));
        a->failing = true;
        if (agent_lease_tick(&a->lease, t) == AGENT_LEASE_FENCE)
            fence(a, t);
        save_state(a);
        return 0;
    }
    if (reply.stale) {
        /* Ignored as a replay (an older report of this node was applied
         * after it was sent): not an acknowledgement. Nothing is forgotten
         * and the lease is not renewed; the next report says it all again,
         * with the controller's clock taken in. */
        say(a, "report ignored by the controller: %s", reply.message);
        agent_lamport_recv(&a->clock, reply.lamport);
        if (reply.reregister) {
            /* Not a life the controller knows (it restarted, or this agent's
             * clock stepped back): a higher number, and the inventory again
             * at once. Nothing is fenced: the tasks go on and are listed. */
            if (reply.incarnation >= a->incarnation)
                a->incarnation = reply.incarnation + 1;
            a->inventory_acked = false;
            a->urgent = true;
        }
        agent_reply_free(&reply);
        if (agent_lease_tick(&a->lease, t) == AGENT_LEASE_FENCE)
            fence(a, t);
        save_state(a);
        return 0;
    }
    if (a->failing)
        say(a, "reports acknowledged again");
    a->failing = false;
    agent_lamport_recv(&a->clock, reply.lamport);
    if (reply.lease_ns > 0) {
        agent_lease_set_length(&a->lease, a->conf.lease_ns, reply.lease_ns);
        publish_lease(a); /* a shorter lease reaches the supervisors at once */
        if (reply.lease_ns <= a->conf.heartbeat_ns && !a->warned_lease) {
            say(a,
                "the controller's lease (%lld ms) is not longer than the heartbeat (%lld ms): "
                "this node will fence between heartbeats; lower --heartbeat",
                (long long)(reply.lease_ns / 1000000), (long long)(a->conf.heartbeat_ns / 1000000));
            a->warned_lease = true;
        }
    }
    if (reply.lost) {
        if (agent_lease_lost(&a->lease, t,
                             "the controller declared this node lost or does not know it") ==
            AGENT_LEASE_FENCE)
            fence(a, t);
        else if (a->inventory_acked)
            say(a, "the controller does not know this node: %s; registering again",
                reply.message[0] ? reply.message : "(no word)");
        a->inventory_acked = false; /* register again, inventory and all */
        agent_reply_free(&reply);
        save_state(a);
        return 0;
    }
    if (a->lease.state != AGENT_LEASE_ACTIVE) {
        bool had_tasks = agent_exec_live(&a->exec) > 0;
        if (agent_lease_registered(&a->lease, reply.epoch, sent, t, &terr) == 0) {
            a->inventory_acked = true;
            say(a, "registered (epoch %llu, lease %lld ms)", (unsigned long long)reply.epoch,
                (long long)(a->lease.lease_ns / 1000000));
            if (had_tasks && !reply.have_assignments)
                say(a, "the transport has no assignment list: adopted tasks keep running");
        } else {
            say(a, "%s", terr.msg);
        }
    } else {
        int hrc;
        if (agent_lease_heartbeat_ok(&a->lease, reply.epoch, sent, t, &hrc) == AGENT_LEASE_FENCE)
            fence(a, t);
        else
            a->inventory_acked = true;
    }
    publish_lease(a); /* before any task starts under this lease */
    if (reply.have_assignments && a->lease.state == AGENT_LEASE_ACTIVE) {
        apply(a, &reply, t);
        a->list_epoch = reply.epoch;
        a->list_lamport = reply.lamport;
        a->list_version = reply.version;
    }
    if (a->chan) /* the channel polls only under an active lease, with its epoch */
        agent_chan_set(a->chan, a->lease.state == AGENT_LEASE_ACTIVE, a->lease.epoch,
                       a->lease.state == AGENT_LEASE_ACTIVE ? a->list_version : 0);
    else if (!reply.have_assignments)
        for (int i = 0; i < a->exec.ntasks; i++) /* reported and acknowledged: done */
            if (a->exec.tasks[i]->state == AGENT_TASK_EXITED &&
                agent_exec_forget(&a->exec, a->exec.tasks[i]->job, a->exec.tasks[i]->task) == 0)
                i--;
    agent_reply_free(&reply);
    save_state(a);
    return 0;
}
