/*
 * agent.c: `arbiter agent`, the node agent (src/agent).
 *
 *   arbiter agent --name NODE [--controller URL[,URL...] [--token-file F]]
 *                 [--inventory FILE | --fake-gpus N[:MODEL] | --nvml-lib PATH]
 *                 [--once] [-o text|json] [--heartbeat 1s] [--lease 10s] [--count N]
 *                 [--log-dir DIR] [--stderr merged|separate] [--run-as USER] [--allow-root]
 *                 [--cgroups auto|v2|v1|none]
 *                 [--grace 10s] [--address ADDR] [--state FILE] [--keep-tasks]
 *                 [--emulate K [--threads T] [--duration 60s] [--emulate-tasks real|timed]]
 *                 [--fake-busy PCT]
 *                 [--proc DIR] [--sys DIR] [--hwloc-xml FILE] [--logs-listen ADDR|off]
 *
 * --logs-listen serves the task logs over HTTP to `arbiter logs` on other
 * hosts, for holders of a ticket the controller issues (src/agent/logserve.h).
 * Default with --controller: 127.0.0.1:0, a free loopback port: on, so that
 * `arbiter logs` works on this node even where its user cannot read the log
 * directory, but reachable from this machine only, since a port open to
 * the network is the operator's decision; give 0.0.0.0:PORT (with
 * --address for the name others reach) to serve other hosts, or off.
 * Without --controller (no one issues tickets) and with --emulate: off.
 *
 * --once discovers the node, samples it twice a short moment apart (rates
 * need two samples) and prints what it would report: the report body of
 * docs/api.md with -o json, a summary for people otherwise. Without it the
 * agent runs its heartbeat loop (agent_step): with --controller, through
 * the http transport (POST URL/v1/nodes/NAME/report to whichever of the comma-separated
 * URLs leads, src/client/failover.c; the bearer token from
 * --token-file or ARBITER_TOKEN); without, the stdout row prints one report
 * body per line. Between heartbeats it reaps tasks and fences the moment
 * its lease runs out (agent_tick, every 50 ms). SIGINT/SIGTERM stop it; its
 * tasks are killed unless --keep-tasks (then they run on under their
 * supervisors for at most the lease, and a restart with the same --log-dir
 * adopts them, with or without --state). Each task runs under a supervisor,
 * this binary as `arbiter supervise` (src/agent/supervise.h), which kills
 * it when the lease passes whatever becomes of the agent.
 *
 * --emulate K plays K nodes NAME-1 .. NAME-K in this one process
 * (src/agent/emulate.h) and prints report rates and round trips; their
 * tasks are real processes, or with --emulate-tasks timed no processes at
 * all (`sleep N` lasts N seconds, anything else ends at once, exit 0), so
 * that thousands of nodes' tasks cost no forks; with
 * -o json the totals go to stdout as one JSON object at the end; SIGUSR1
 * starts the totals again (what `arbiter bench agents` measures is the
 * window after every node has registered).
 *
 * Exit status: 0 done, 1 the node could not be discovered or the agent could
 * not start (message on stderr), 2 bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "agent/emulate.h"
#include "agent/logserve.h"
#include "cli/cli.h"
#include "cli/flags.h"
#include "tls/tls.h"
#include "util/duration.h"
#include "util/log.h"

/* set by the signal handler, read by the heartbeat loop and the emulator's
 * threads: lock-free atomics, safe in a handler and across threads */
static atomic_int stop_flag, reset_flag;

static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

/* SIGCHLD: a task's supervisor ended; the loop wakes to reap and report it
 * at once rather than at its next 50 ms look. */
static int chld_pipe[2] = {-1, -1};

#define AGENT_POLL_STARTS 256 /* start pipes watched at once; more are looked at every 5 ms */

#define URGENT_GAP_NS 10000000LL /* 10 ms between reports that say a task ended */
/* a report that says only that tasks started waits up to 100 ms after the last one: a short
 * task's exit, which follows within milliseconds, then goes in it too (one commit and one
 * cycle at the controller instead of two) */
#define STARTED_GAP_NS 100000000LL

static void on_chld(int sig)
{
    int e = errno;
    char b = 1;
    (void)sig;
    if (write(chld_pipe[1], &b, 1) < 0) { /* full: readable already */
    }
    errno = e;
}

static void on_usr1(int sig)
{
    (void)sig;
    reset_flag = 1;
}

static void human_bytes(double b, char *buf, size_t n)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;

    while (b >= 1024 && i < 4)
        b /= 1024, i++;
    snprintf(buf, n, i ? "%.1f %s" : "%.0f %s", b, u[i]);
}

static void print_text(const agent_disc_t *d, const agent_tel_sample_t *s)
{
    const agent_inv_t *inv = &d->inv;
    char a[32], b[32], c[32];

    human_bytes((double)inv->mem_bytes, a, sizeof a);
    printf("node %s: %d CPUs", inv->name, inv->cpus);
    if (inv->cores)
        printf(" (%d cores, %d package%s)", inv->cores, inv->packages,
               inv->packages == 1 ? "" : "s");
    printf(", %d NUMA node%s, %s memory\n", inv->numa_nodes, inv->numa_nodes == 1 ? "" : "s", a);
    if (inv->cpu_model[0])
        printf("cpu: %s\n", inv->cpu_model);
    for (int i = 0; i < inv->nlabels; i++)
        printf("%s%s=%s%s", i ? " " : "labels: ", inv->labels[i].key, inv->labels[i].val,
               i + 1 == inv->nlabels ? "\n" : "");
    printf("GPUs (%s): %d\n", inv->gpu_source, inv->ngpus);
    for (int i = 0; i < inv->ngpus; i++) {
        const agent_gpu_info_t *g = &inv->gpu[i];
        const agent_gpu_sample_t *x = &s->gpu[i];
        printf("  %2d  %-20s %7d MiB  nvlink %2d  pcie %2d  numa %2d", g->index, g->model,
               g->mem_mib, g->nvlink, g->pcie, g->numa);
        if (x->util_pct >= 0)
            printf("  util %3d%%", x->util_pct);
        if (x->mem_used_mib >= 0)
            printf("  used %d MiB", x->mem_used_mib);
        if (x->temp_c >= 0)
            printf("  %d C", x->temp_c);
        printf("%s%s%s%s\n", g->uuid[0] ? "  " : "", g->uuid, g->pci_bus_id[0] ? "  pci " : "",
               g->pci_bus_id);
    }
    printf("telemetry over %.2f s:", s->interval_s);
    if (s->cpu_util_pct >= 0)
        printf(" cpu %.1f%%", s->cpu_util_pct);
    if (s->load1 >= 0)
        printf(" load %.2f", s->load1);
    if (s->mem_total_bytes >= 0 && s->mem_available_bytes >= 0) {
        human_bytes((double)(s->mem_total_bytes - s->mem_available_bytes), a, sizeof a);
        human_bytes((double)s->mem_total_bytes, b, sizeof b);
        printf(" memory %s of %s", a, b);
    }
    printf("\n");
    if (s->net_rx_bps >= 0) {
        human_bytes(s->net_rx_bps, a, sizeof a);
        human_bytes(s->net_tx_bps, b, sizeof b);
        printf("  net rx %s/s tx %s/s", a, b);
    }
    if (s->disk_read_bps >= 0) {
        human_bytes(s->disk_read_bps, a, sizeof a);
        human_bytes(s->disk_write_bps, b, sizeof b);
        snprintf(c, sizeof c, "%.0f%%", s->disk_busy_pct);
        printf("  disk read %s/s write %s/s busy %s", a, b, c);
    }
    printf("\n");
    if (d->note[0])
        printf("note: %s\n", d->note);
}

static int once(const agent_disc_opts_t *o, bool json)
{
    agent_disc_t d;
    agent_tel_t tel;
    agent_tel_sample_t s;
    arb_err_t err = {{0}};
    int rc;

    if ((rc = agent_disc_open(&d, o, &err)) < 0) {
        fprintf(stderr, "arbiter agent: %s\n", err.msg);
        return 1;
    }
    agent_tel_init(&tel, o->proc_root);
    agent_tel_sample(&tel, &d, agent_mono_ns(NULL), &s, NULL);
    nanosleep(&(struct timespec){0, 250000000}, NULL);
    agent_tel_sample(&tel, &d, agent_mono_ns(NULL), &s, NULL);
    if (json) {
        agent_report_in_t in = {.lamport = 1, .inv = &d.inv, .tel = &s};
        char *body = agent_report_json(&in);
        if (!body) {
            fprintf(stderr, "arbiter agent: out of memory\n");
            agent_disc_close(&d);
            return 1;
        }
        printf("%s\n", body);
        free(body);
        if (d.note[0])
            fprintf(stderr, "arbiter agent: %s\n", d.note);
    } else {
        print_text(&d, &s);
    }
    agent_disc_close(&d);
    return 0;
}

/* The first word of a token file (a file only its owner reads, ideally). */
static int read_token(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "re");
    int k;

    if (!f) {
        fprintf(stderr, "arbiter agent: --token-file %s: %s\n", path, strerror(errno));
        return -1;
    }
    k = fscanf(f, "%511s", buf);
    fclose(f);
    if (k != 1 || !buf[0] || n < 512) {
        fprintf(stderr, "arbiter agent: --token-file %s: no token in it\n", path);
        return -1;
    }
    return 0;
}

static int emulate(agent_conf_t *c, long nodes, long threads, int64_t duration, bool json)
{
    agent_emu_conf_t ec;
    agent_emu_stats_t st;
    arb_err_t err = {{0}};

    memset(&ec, 0, sizeof ec);
    ec.base = *c;
    ec.nodes = (int)nodes;
    ec.threads = (int)threads;
    ec.duration_ns = duration;
    ec.stop = &stop_flag;
    ec.reset = &reset_flag;
    if (agent_emulate(&ec, &st, &err) < 0) {
        fprintf(stderr, "arbiter agent: %s\n", err.msg);
        return 1;
    }
    if (json)
        printf("{\"nodes\": %d, \"threads\": %d, \"seconds\": %.1f, \"reports\": %llu, "
               "\"reports_per_s\": %.1f, \"failures\": %llu, \"registered\": %d, "
               "\"fences\": %llu, \"round_trip_ms\": {\"p50\": %.3f, \"p90\": %.3f, "
               "\"p99\": %.3f, \"max\": %.3f}}\n",
               st.nodes, st.threads, st.seconds, (unsigned long long)st.reports, st.per_s,
               (unsigned long long)st.failures, st.registered, (unsigned long long)st.fences,
               st.p50_ms, st.p90_ms, st.p99_ms, st.max_ms);
    else
        fprintf(stderr,
                "emulate: total %.1f s: %llu reports (%.0f/s), %llu failed | round trip p50 "
                "%.2f ms, p90 %.2f ms, p99 %.2f ms, max %.1f ms\n",
                st.seconds, (unsigned long long)st.reports, st.per_s,
                (unsigned long long)st.failures, st.p50_ms, st.p90_ms, st.p99_ms, st.max_ms);
    return 0;
}

/* A DNS-1123 label: what the controller takes as a node name. */
static bool dns_label(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > 63 || s[0] == '-' || s[n - 1] == '-')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return false;
    return true;
}

/* The agent's flags: into its conf where they belong, the rest beside it. */
typedef struct agent_flags {
    agent_conf_t c;
    tls_client_t tls;
    bool once, keep, plain_ok;
    int out;
    const char *emulate_tasks;
    int stderr_mode; /* 0 merged into the .out file, 1 a .err file of its own */
    long long count, emulate, threads, fake_busy;
    int64_t duration;
    const char *token_file, *logs_listen, *push_wait;
} agent_flags_t;

#define AF(FIELD, LONG, KIND, META, HELP, ...)                                                     \
    FL_OPT(agent_flags_t, FIELD, LONG, NULL, KIND, META, HELP, __VA_ARGS__)
#define AF_DURATION(FIELD, LONG, HELP)                                                             \
    AF(FIELD, LONG, FL_DURATION, "D", HELP, .min = 1, .max = ARB_DURATION_MAX_NS)

static const fl_flag_t agent_flag_table[] = {
    AF(c.disc.node_name, "--name", FL_STR, "NODE", "the node's name (required; a DNS-1123 label)"),
    AF(c.target, "--controller", FL_STR, "URL[,URL...]", "the controllers to report to"),
    AF(token_file, "--token-file", FL_STR, "F", "the agent's bearer token (else $ARBITER_TOKEN)"),
    AF(c.disc.inventory, "--inventory", FL_STR, "FILE", "the node's GPUs from a file"),
    AF(c.disc.fake, "--fake-gpus", FL_STR, "N[:MODEL]", "fake GPUs (tests, demos)"),
    AF(c.disc.nvml_path, "--nvml-lib", FL_STR, "PATH",
       "the NVML library to load (--gpu-source nvml)"),
    AF(c.disc.gpu_source, "--gpu-source", FL_STR, "auto|nvml|inventory|fake",
       "where GPUs come from"),
    AF(once, "--once", FL_BOOL, NULL, "print the discovered inventory and exit"),
    FL_OPT(agent_flags_t, out, NULL, "-o", FL_CHOICE, NULL, "reports as text or JSON lines",
           .def = "text", .choices = "text|json"),
    AF_DURATION(c.heartbeat_ns, "--heartbeat", "how often to report (default 1s)"),
    AF_DURATION(c.lease_ns, "--lease",
                "tasks are fenced when the controller is silent this long "
                "(default 10s)"),
    AF(count, "--count", FL_INT, "N", "stop after N heartbeats", .min = 1),
    AF(c.exec.log_dir, "--log-dir", FL_STR, "DIR", "the tasks' output", .def = "/var/log/arbiter"),
    FL_OPT(agent_flags_t, stderr_mode, "--stderr", NULL, FL_CHOICE, NULL,
           "a task's stderr: in its log (LOG_DIR/JOB.TASK.out) or a .err of its own",
           .def = "merged", .choices = "merged|separate"),
    AF(c.exec.run_as, "--run-as", FL_STR, "USER", "the tasks' user when the agent is root"),
    AF(c.exec.allow_root, "--allow-root", FL_BOOL, NULL, "let tasks run as root"),
    AF_DURATION(c.exec.grace_ns, "--grace", "SIGTERM to SIGKILL (default 10s)"),
    AF(c.exec.cgroup_mode, "--cgroups", FL_STR, "auto|v2|v1|none", "task cgroups"),
    AF(c.address, "--address", FL_STR, "ADDR", "the address replicas are reached at"),
    AF(c.state_file, "--state", FL_STR, "FILE", "what the agent keeps across restarts"),
    AF(keep, "--keep-tasks", FL_BOOL, NULL, "leave tasks running when the agent stops"),
    AF(emulate, "--emulate", FL_INT, "K", "emulate K nodes in this process", .min = 1,
       .max = 100000),
    AF(threads, "--threads", FL_INT, "T", "with --emulate: threads reporting", .min = 1,
       .max = 100000),
    AF_DURATION(duration, "--duration", "with --emulate: run this long"),
    AF(emulate_tasks, "--emulate-tasks", FL_STR, "real|timed",
       "with --emulate: real processes, or timed (no processes; `sleep N` lasts N s)",
       .def = "real"),
    AF(fake_busy, "--fake-busy", FL_INT, "PCT", "fake GPUs' utilization", .min = 0, .max = 100),
    AF(c.disc.proc_root, "--proc", FL_STR, "DIR", "read /proc from DIR (tests)"),
    AF(c.disc.sys_root, "--sys", FL_STR, "DIR", "read /sys from DIR (tests)"),
    AF(c.disc.hwloc_xml, "--hwloc-xml", FL_STR, "FILE", "the topology from an hwloc XML file"),
    AF(logs_listen, "--logs-listen", FL_STR, "127.0.0.1:0|0.0.0.0:PORT|off",
       "the task log server's address", .def = "127.0.0.1:0"),
    AF(c.queue_file, "--queue-file", FL_STR, "FILE",
       "one integer: the node's queue length, read per report"),
    AF(tls.cacert, "--cacert", FL_STR, "FILE", "check an https:// controller against this CA"),
    AF(tls.cert_file, "--cert-file", FL_STR, "FILE", "the node's certificate (arbiter init node)"),
    AF(tls.key_file, "--key-file", FL_STR, "FILE", "its key"),
    AF(plain_ok, "--insecure-plain-http", FL_BOOL, NULL,
       "a log server beyond loopback without TLS"),
    AF(push_wait, "--push-wait", FL_STR, "25s|off",
       "the assignments channel's long poll: how long each waits (1s..60s), or off"),
    FL_END,
};
static const fl_verb_t agent_verb = {
    .name = "agent",
    .summary = "the node agent: discovery, telemetry, task execution, self-fencing",
    .flags = agent_flag_table,
    .more = "An https:// controller is checked against --cacert (or ARBITER_CACERT: the cluster's\n"
            "ca.crt); --cert-file/--key-file (arbiter init node NAME DIR) are the node's identity\n"
            "(it may report as NAME only) and make the log server HTTPS; a log server beyond\n"
            "loopback without them needs --insecure-plain-http.",
};

/* What the flags say together; 0, or 2 with the message printed. */
static int agent_check(agent_flags_t *f)
{
    agent_conf_t *c = &f->c;

    if (!c->disc.node_name) {
        fprintf(stderr, "arbiter agent: --name NODE is required; run 'arbiter agent --help'\n");
        return 2;
    }
    if (!dns_label(c->disc.node_name)) { /* the controller would refuse every report */
        fprintf(stderr,
                "arbiter agent: --name '%s': node names are DNS-1123 labels, as Kubernetes has "
                "them: 1..63 lowercase letters, digits and '-', starting and ending with a "
                "letter or digit (with --emulate, the names get -1, -2, ... added)\n",
                c->disc.node_name);
        return 2;
    }
    if (c->disc.inventory && c->disc.fake) {
        fprintf(stderr, "arbiter agent: give --inventory or --fake-gpus, not both\n");
        return 2;
    }
    if (strcmp(f->emulate_tasks, "real") && strcmp(f->emulate_tasks, "timed")) {
        fprintf(stderr,
                "arbiter agent: --emulate-tasks %s: use real (processes) or timed (no "
                "processes; `sleep N` lasts N s)\n",
                f->emulate_tasks);
        return 2;
    }
    c->exec.timed = !strcmp(f->emulate_tasks, "timed");
    c->exec.split_stderr = f->stderr_mode == 1;
    if ((f->threads || f->duration || c->exec.timed) && !f->emulate) {
        fprintf(stderr,
                "arbiter agent: --threads, --duration and --emulate-tasks go with --emulate K\n");
        return 2;
    }
    if (f->emulate && c->disc.inventory) {
        fprintf(stderr, "arbiter agent: --emulate nodes have fake GPUs (--fake-gpus), not "
                        "an inventory\n");
        return 2;
    }
    if (c->disc.nvml_path && !c->disc.gpu_source)
        c->disc.gpu_source = "nvml";
    if (c->target)
        c->transport = &agent_transport_http;
    if (f->fake_busy >= 0)
        c->fake_busy_pct = f->fake_busy ? (int)f->fake_busy : -1;
    if (f->push_wait) {
        int64_t ns = 0;
        arb_err_t e = {{0}};
        if (strcmp(f->push_wait, "off") != 0 && (arb_duration_parse(f->push_wait, &ns, &e) < 0 ||
                                                 ns < 1000000000LL || ns > 60000000000LL)) {
            fprintf(stderr,
                    "arbiter agent: --push-wait '%s': give 1s..60s (how long each long poll "
                    "of the assignments channel waits), or off\n",
                    f->push_wait);
            return 2;
        }
        c->push_wait_ns = ns;
    } else if (c->target) {
        c->push_wait_ns = 25000000000LL; /* the assignments channel: on with a controller */
    }
    return 0;
}

/* The token, the TLS files, the supervisor: what a running agent needs. */
static int agent_prepare(agent_flags_t *f, char *token, size_t n)
{
    arb_err_t err = {{0}};

    if (strcmp(f->logs_listen, "off") != 0 &&
        agent_logserve_check_listen(f->logs_listen, &err) < 0) {
        fprintf(stderr, "arbiter agent: %s\n", err.msg);
        return 2;
    }
    if (f->token_file) {
        if (read_token(f->token_file, token, n) < 0)
            return 2;
        f->c.token = token;
    } else if (getenv("ARBITER_TOKEN") && getenv("ARBITER_TOKEN")[0]) {
        snprintf(token, n, "%s", getenv("ARBITER_TOKEN"));
        f->c.token = token;
    }
    tls_client_from_env(&f->tls);
    if (tls_client_check(&f->tls, &err) < 0) {
        fprintf(stderr, "arbiter agent: %s\n", err.msg);
        return 2;
    }
    f->c.tls = &f->tls;
    /* Each task under a supervisor (this binary, `arbiter supervise`) that
     * holds the lease: a task never outlives it, whatever becomes of us. */
    f->c.exec.supervisor = "/proc/self/exe";
    /* arbiter-supervise beside this binary: the same code in a program of
     * libc alone, a millisecond per task instead of ~12 (src/supervise/main.c) */
    static char sup_path[PATH_MAX];
    ssize_t el = readlink("/proc/self/exe", sup_path, sizeof sup_path - 32);
    if (el > 0) {
        sup_path[el] = '\0';
        char *slash = strrchr(sup_path, '/');
        if (slash) {
            snprintf(slash + 1, sizeof sup_path - (size_t)(slash + 1 - sup_path),
                     "arbiter-supervise");
            if (access(sup_path, X_OK) == 0)
                f->c.exec.supervisor = sup_path;
        }
    }
    f->c.exec.leased = true;
    /* tests only: every task's start slowed down by this much (a slow exec) */
    const char *delay = getenv("ARBITER_AGENT_START_DELAY_MS");
    if (delay && delay[0]) {
        char *end;
        long long ms = strtoll(delay, &end, 10);
        if (*end || ms < 0 || ms > 600000) {
            fprintf(stderr,
                    "arbiter agent: ARBITER_AGENT_START_DELAY_MS='%s': give milliseconds, "
                    "0..600000, or unset it\n",
                    delay);
            return 2;
        }
        f->c.exec.start_delay_ns = ms * 1000000LL;
    }
    return 0;
}

/* The task log server, before the first report (which carries its URL). */
static int agent_logs(agent_flags_t *f, agent_t *a, agent_logserve_t **ls)
{
    arb_err_t err = {{0}};
    agent_logserve_conf_t lc = {.listen = f->logs_listen,
                                .log_dir = a->log_dir,
                                .controller = f->c.target,
                                .token = f->c.token,
                                .node = f->c.disc.node_name,
                                .advertise = f->c.address,
                                .tls = &f->tls,
                                .insecure_plain = f->plain_ok};

    if (!f->c.target || strcmp(f->logs_listen, "off") == 0)
        return 0;
    if (agent_logserve_start(&lc, ls, &err) < 0) {
        fprintf(stderr, "arbiter agent: %s\n", err.msg);
        return -1;
    }
    a->conf.logs_url = agent_logserve_url(*ls);
    fprintf(stderr, "arbiter agent %s: task logs served at %s (for ticket holders)\n",
            f->c.disc.node_name, a->conf.logs_url);
    return 0;
}

/* SIGCHLD wakes the loop (through chld_pipe) to reap and report at once. */
static void watch_children(void)
{
    if (pipe2(chld_pipe, O_CLOEXEC | O_NONBLOCK) == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_chld;
        sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGCHLD, &sa, NULL);
    }
}

/* Report every heartbeat (at once when a task started or ended) until a signal or --count. */
static void agent_loop(agent_t *a, long long count)
{
    arb_err_t err = {{0}};

    for (long long n = 0; !stop_flag && (count < 0 || n < count); n++) {
        int64_t start = agent_mono_ns(NULL), next = start + a->conf.heartbeat_ns;
        if (agent_step(a, &err) < 0)
            fprintf(stderr, "arbiter agent: %s\n", err.msg);
        if (count >= 0 && n + 1 >= count)
            break;
        while (!stop_flag) {
            int64_t t = agent_mono_ns(NULL), left = next - t;
            /* a task ended: report it now (at most every URGENT_GAP_NS, so that the
             * tasks ending together go in one report); one started: soon */
            int64_t gap = a->urgent ? URGENT_GAP_NS : a->started ? STARTED_GAP_NS : 0;
            if (left <= 0 || (gap && t - start >= gap))
                break;
            if (gap && start + gap - t < left)
                left = start + gap - t;
            if (left > 50000000)
                left = 50000000; /* see signals, reap, and fence on time */
            /* asleep until then, a task's end (SIGCHLD), a pushed list, or
             * a task's start settling (its start pipe) */
            struct pollfd pf[2 + AGENT_POLL_STARTS] = {{.fd = chld_pipe[0], .events = POLLIN},
                                                       {.fd = agent_push_fd(a), .events = POLLIN}};
            int starting = agent_poll_fds(a, pf + 2, AGENT_POLL_STARTS);
            int npf = 2 + (starting < AGENT_POLL_STARTS ? starting : AGENT_POLL_STARTS);
            int ms = (int)((left + 999999) / 1000000);
            if (starting > AGENT_POLL_STARTS && ms > 5)
                ms = 5; /* more starts than watched: look again soon */
            if (poll(pf, (nfds_t)npf, ms) > 0 && (pf[0].revents & POLLIN)) {
                char buf[64];
                while (read(chld_pipe[0], buf, sizeof buf) > 0) {
                }
            }
            agent_tick(a);
            if (pf[1].fd >= 0 && (pf[1].revents & POLLIN))
                agent_push(a);
        }
    }
}

int cli_agent(int argc, char **argv)
{
    agent_flags_t f = {.count = -1, .fake_busy = -1};
    agent_t a;
    arb_err_t err = {{0}};
    agent_logserve_t *ls = NULL;
    char token[600];
    int rc;

    f.c.exec.subreaper = true;
    f.c.exec.cgroup_scoped = true; /* never share a task's cgroup with another agent here */
    if (!fl_run(&agent_verb, argc, argv, &f, &(fl_args_t){0}, &rc) || (rc = agent_check(&f)))
        return rc;
    if (arb_log_init("agent", f.c.disc.node_name, &err) < 0) { /* its lines name the node */
        fprintf(stderr, "arbiter agent: %s\n", err.msg);
        return 2;
    }
    if (f.once)
        return once(&f.c.disc, f.out == 1);
    if ((rc = agent_prepare(&f, token, sizeof token)))
        return rc;
    curl_global_init(CURL_GLOBAL_DEFAULT); /* before any thread */
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);
    if (f.emulate) {
        signal(SIGUSR1, on_usr1); /* restart the totals (bench agents' window) */
        if (!f.c.disc.fake)
            f.c.disc.fake = "8:H100";
        rc = emulate(&f.c, f.emulate, f.threads, f.duration, f.out == 1);
    } else if (watch_children(), agent_open(&a, &f.c, &err) < 0) {
        fprintf(stderr, "arbiter agent: %s\n", err.msg);
        rc = 1;
    } else if (agent_logs(&f, &a, &ls) < 0) {
        agent_close(&a, true);
        rc = 1;
    } else {
        agent_loop(&a, f.count);
        agent_close(&a, !f.keep);
        agent_logserve_stop(ls);
        rc = 0;
    }
    curl_global_cleanup();
    return rc;
}
