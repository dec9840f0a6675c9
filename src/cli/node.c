/*
 * node.c: the node verbs, named and shaped after kubectl and scontrol:
 *
 *   arbiter node NAME [-o json]                     the node in detail (kubectl describe node)
 *   arbiter node delete NAME [-o json]              remove a NotReady or Lost node
 *   arbiter cordon NAME [--reason TEXT] [-o json]   no new tasks there
 *   arbiter uncordon NAME [-o json]                 back in service
 *   arbiter drain NAME [--reason TEXT] [-o json]    cordon, then evict what runs there
 *   arbiter taint NAME KEY[=VALUE]:EFFECT ... | KEY[:EFFECT]- ... [-o json]
 *   arbiter label NAME KEY=VALUE ... | KEY- ... [--overwrite] [-o json]
 *
 * Each change reads the node first and sends its version as If-Match, so
 * that a change made in between (another operator, the node's agent) is
 * never overwritten unseen: on 409 it reads again and retries, at most
 * three times. `label` refuses to change a label's value without
 * --overwrite, as kubectl does. Exit codes as the other client verbs
 * (client.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "cli/flags.h"

/* The node verbs' flags: one options struct, one table per verb. */
typedef struct node_opts {
    const char *reason;
    bool overwrite;
    int out;
} node_opts_t;

#define NODE_OUTPUT                                                                                \
    FL_OPT(node_opts_t, out, NULL, "-o", FL_CHOICE, NULL, "a summary, or the node's JSON",         \
           .def = "text", .choices = "text|json")
#define NODE_REASON                                                                                \
    FL_OPT(node_opts_t, reason, "--reason", NULL, FL_STR, "TEXT",                                  \
           "why (shown on the node and in its events)")

static const fl_flag_t out_flags[] = {NODE_OUTPUT, FL_END};
static const fl_flag_t reason_flags[] = {NODE_REASON, NODE_OUTPUT, FL_END};
static const fl_flag_t label_flags[] = {
    FL_OPT(node_opts_t, overwrite, "--overwrite", NULL, FL_BOOL, NULL,
           "change a label that has another value"),
    NODE_OUTPUT,
    FL_END,
};

static const fl_verb_t node_verb = {
    .name = "node",
    .args = "NAME | delete NAME",
    .summary = "one node in detail (labels, taints, telemetry, what runs); or delete it "
               "(NotReady or Lost only)",
    .flags = out_flags,
    .min_pos = 1,
    .max_pos = 2};
static const fl_verb_t cordon_v = {.name = "cordon",
                                   .args = "NAME",
                                   .summary = "stop placing tasks on a node",
                                   .flags = reason_flags,
                                   .min_pos = 1,
                                   .max_pos = 1};
static const fl_verb_t uncordon_v = {.name = "uncordon",
                                     .args = "NAME",
                                     .summary = "put a cordoned or drained node back in service",
                                     .flags = out_flags,
                                     .min_pos = 1,
                                     .max_pos = 1};
static const fl_verb_t drain_v = {
    .name = "drain",
    .args = "NAME",
    .summary = "cordon a node and evict its jobs (stopped with their grace, requeued elsewhere)",
    .flags = reason_flags,
    .min_pos = 1,
    .max_pos = 1};
static const fl_verb_t taint_v = {
    .name = "taint",
    .args = "NAME KEY[=VALUE]:NoSchedule|PreferNoSchedule|NoExecute ... | KEY[:EFFECT]- ...",
    .summary = "add or remove node taints (NoExecute evicts what does not tolerate it)",
    .flags = out_flags,
    .min_pos = 2,
    .max_pos = -1};
static const fl_verb_t label_v = {.name = "label",
                                  .args = "NAME KEY=VALUE ... | KEY- ...",
                                  .summary = "set or remove node labels",
                                  .flags = label_flags,
                                  .min_pos = 2,
                                  .max_pos = -1};

/* ---- the detail view --------------------------------------------------------------------- */

static const char *str(const json_t *o, const char *k)
{
    const char *v = json_string_value(json_object_get(o, k));
    return v ? v : "";
}

static int by_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void rate(const json_t *tel, const char *k, char *out, size_t n)
{
    json_t *v = json_object_get(tel, k);
    double b = json_number_value(v);
    const char *u[] = {"B/s", "KB/s", "MB/s", "GB/s"};
    int i = 0;

    if (!json_is_number(v)) {
        snprintf(out, n, "-");
        return;
    }
    while (b >= 1000 && i < 3)
        b /= 1000, i++;
    snprintf(out, n, "%.1f %s", b, u[i]);
}

static void show_node(json_t *o)
{
    json_t *tel = json_object_get(o, "telemetry"), *inv = json_object_get(o, "inventory");
    json_t *v, *g, *tg = json_object_get(tel, "gpus");
    const char *k;
    size_t i;
    char a[32], b[32], c[32], d[32];

    printf("Name:         %s\n", str(o, "name"));
    printf("State:        %s%s%s%s\n", str(o, "state"),
           json_is_true(json_object_get(o, "schedulable")) ? " (schedulable)"
                                                           : " (not schedulable)",
           json_object_get(o, "reason") ? ": " : "", str(o, "reason"));
    printf("Version:      %lld\n", (long long)json_integer_value(json_object_get(o, "version")));
    json_t *age = json_object_get(o, "report_age_s");
    if (json_is_number(age))
        printf("Last report:  %.1f s ago (%s, lamport %lld)\n", json_number_value(age),
               str(o, "last_report"),
               (long long)json_integer_value(json_object_get(o, "report_lamport")));
    else
        printf("Last report:  none since this controller started\n");
    if (inv && (str(inv, "hostname")[0] || str(inv, "address")[0]))
        printf("Host:         %s%s%s\n", str(inv, "hostname"), str(inv, "address")[0] ? " at " : "",
               str(inv, "address"));
    /* labels sorted by key, as kubectl shows them */
    json_t *lab = json_object_get(o, "labels");
    size_t nl = json_object_size(lab);
    const char **keys = calloc(nl + 1, sizeof *keys);
    i = 0;
    json_object_foreach(lab, k, v) if (keys) keys[i++] = k;
    if (keys)
        qsort(keys, nl, sizeof *keys, by_str);
    printf("Labels:       ");
    for (i = 0; keys && i < nl; i++)
        printf("%s%s=%s", i ? ", " : "", keys[i], str(lab, keys[i]));
    free(keys);
    printf("%s\nTaints:       ", nl ? "" : "none");
    json_array_foreach(json_object_get(o, "taints"), i, v)
        printf("%s%s%s%s:%s", i ? ", " : "", str(v, "key"), str(v, "value")[0] ? "=" : "",
               str(v, "value"), str(v, "effect"));
    printf("%s\nDatasets:     ", json_array_size(json_object_get(o, "taints")) ? "" : "none");
    json_array_foreach(json_object_get(o, "datasets"), i, v)
        printf("%s%s", i ? ", " : "", json_string_value(v));
    json_t *topo = json_object_get(o, "topology");
    printf("%s\nTopology:     rack %s, block %s, zone %s\n",
           json_array_size(json_object_get(o, "datasets")) ? "" : "none",
           str(topo, "rack")[0] ? str(topo, "rack") : "-",
           str(topo, "block")[0] ? str(topo, "block") : "-",
           str(topo, "zone")[0] ? str(topo, "zone") : "-");
    json_t *cap = json_object_get(o, "capacity"), *al = json_object_get(o, "allocated");
    printf("Capacity:     %lld GPUs, cpu %s, memory %s; allocated %.2f GPUs, cpu %s, memory %s\n",
           (long long)json_integer_value(json_object_get(cap, "gpus")), str(cap, "cpu"),
           str(cap, "memory"), json_number_value(json_object_get(al, "gpus")), str(al, "cpu"),
           str(al, "memory"));
    if (tel) {
        json_t *cu = json_object_get(tel, "cpu_util");
        rate(tel, "net_rx_bps", a, sizeof a);
        rate(tel, "net_tx_bps", b, sizeof b);
        rate(tel, "disk_read_bps", c, sizeof c);
        rate(tel, "disk_write_bps", d, sizeof d);
        printf("Telemetry:    cpu %s%.1f%%, memory used %s; network rx %s, tx %s; disk read %s, "
               "write %s\n",
               json_is_number(cu) ? "" : "?",
               json_is_number(cu) ? 100 * json_number_value(cu) : 0.0,
               str(tel, "memory_used")[0] ? str(tel, "memory_used") : "-", a, b, c, d);
    } else {
        printf("Telemetry:    none yet\n");
    }
    printf("GPUs:\n  %-3s %-14s %9s %6s %4s %4s %5s %10s %5s %-8s %s\n", "IDX", "MODEL", "MEMORY",
           "NVLINK", "PCIE", "NUMA", "UTIL", "MEM USED", "TEMP", "HEALTH", "JOBS");
    json_array_foreach(json_object_get(o, "gpus"), i, g)
    {
        json_t *t = NULL, *x;
        size_t q;
        char jobs[128] = "-", mu[32] = "-";
        json_array_foreach(tg, q, x) if (json_integer_value(json_object_get(x, "index")) ==
                                         json_integer_value(json_object_get(g, "index"))) t = x;
        if (json_is_integer(json_object_get(t, "memory_used_mib")))
            snprintf(mu, sizeof mu, "%lld MiB",
                     (long long)json_integer_value(json_object_get(t, "memory_used_mib")));
        size_t used = 0;
        json_array_foreach(json_object_get(g, "jobs"), q, x) used +=
            (size_t)snprintf(jobs + used, sizeof jobs - used, "%s%lld", q ? "," : "",
                             (long long)json_integer_value(x));
        printf("  %-3lld %-14.14s %5lld MiB %6lld %4lld %4lld %4lld%% %10s %3lldC %-8s %s\n",
               (long long)json_integer_value(json_object_get(g, "index")), str(g, "model"),
               (long long)json_integer_value(json_object_get(g, "memory_mib")),
               (long long)json_integer_value(json_object_get(g, "nvlink")),
               (long long)json_integer_value(json_object_get(g, "pcie")),
               (long long)json_integer_value(json_object_get(g, "numa")),
               (long long)json_integer_value(json_object_get(g, "util")), mu,
               (long long)json_integer_value(json_object_get(g, "temp_c")),
               json_is_true(json_object_get(g, "healthy")) ? "healthy" : "LOST", jobs);
    }
    json_t *run = json_object_get(o, "running");
    printf("Running:%s\n", json_array_size(run) ? "" : "      nothing");
    if (json_array_size(run))
        printf("  %-6s %-20s %-5s %-8s %-10s %s\n", "JOB", "NAME", "TASK", "ATTEMPT", "STATE",
               "GPUS");
    json_array_foreach(run, i, v)
    {
        char gl[64] = "";
        size_t used = 0, q;
        json_t *x;
        json_array_foreach(json_object_get(v, "gpus"), q, x) used += (size_t)snprintf(
            gl + used, sizeof gl - used, "%s%lld", q ? "," : "", (long long)json_integer_value(x));
        printf("  %-6lld %-20.20s %-5lld %-8lld %-10s %s%s\n",
               (long long)json_integer_value(json_object_get(v, "job")), str(v, "name"),
               (long long)json_integer_value(json_object_get(v, "task")),
               (long long)json_integer_value(json_object_get(v, "attempt")), str(v, "state"),
               gl[0] ? gl : "-", json_is_true(json_object_get(v, "stopping")) ? " (stopping)" : "");
    }
}

/* ---- requests ------------------------------------------------------------------------------ */

/* GET the node: its JSON (reference) or NULL with the exit code in *rc. */
static json_t *get_node(const char *name, int *rc)
{
    char path[300];
    json_t *reply = NULL;

    snprintf(path, sizeof path, "/v1/nodes/%s", name);
    long st = cli_http("GET", path, NULL, 0, NULL, &reply, NULL);
    if (st < 0) {
        *rc = EXIT_UNREACHABLE;
        return NULL;
    }
    if (st >= 300) {
        *rc = cli_refused(st, reply);
        json_decref(reply);
        return NULL;
    }
    return reply;
}

/* One change, conditional on the version read just before; body made by
 * make() from the node as read (NULL body: none; make may refuse with an
 * exit code in *rc). Retried on 409 after another writer's change. */
typedef json_t *(*make_fn)(const json_t *node, void *arg, int *rc);

static int change(const char *name, const char *method, const char *suffix, make_fn make, void *arg,
                  bool want_json, const char *done)
{
    char path[300], hdr[64];
    int rc = 0;

    snprintf(path, sizeof path, "/v1/nodes/%s%s", name, suffix);
    for (int tries = 0; tries < 3; tries++) {
        json_t *node = get_node(name, &rc), *body = NULL, *reply = NULL;
        char *txt = NULL;
        if (!node)
            return rc;
        if (make && !(body = make(node, arg, &rc)) && rc) {
            json_decref(node);
            return rc;
        }
        snprintf(hdr, sizeof hdr, "If-Match: %lld",
                 (long long)json_integer_value(json_object_get(node, "version")));
        json_decref(node);
        txt = body ? json_dumps(body, JSON_COMPACT) : NULL;
        json_decref(body);
        long st = cli_http_hdr(method, path, txt, txt ? strlen(txt) : 0,
                               txt ? "application/json" : NULL, hdr, &reply, NULL);
        free(txt);
        if (st < 0)
            return EXIT_UNREACHABLE;
        if (st == 409 && tries < 2 &&
            strstr(json_string_value(json_object_get(json_object_get(reply, "error"), "message"))
                       ?: "",
                   "If-Match")) {
            json_decref(reply); /* changed in between: read it again */
            continue;
        }
        if (st >= 300) {
            rc = cli_refused(st, reply);
        } else if (want_json) {
            json_dumpf(reply, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
            putchar('\n');
        } else {
            long long ev = json_integer_value(json_object_get(reply, "evicted"));
            printf("node/%s %s", name, done);
            if (ev)
                printf(" (%lld job%s evicted: stopped, then requeued)", ev, ev == 1 ? "" : "s");
            printf("\n");
        }
        json_decref(reply);
        return rc;
    }
    fprintf(stderr, "arbiter: node '%s' kept changing under this request; try again\n", name);
    return EXIT_REFUSED;
}

/* ---- cordon, uncordon, drain, delete ------------------------------------------------------- */

static json_t *reason_body(const json_t *node, void *arg, int *rc)
{
    (void)node, (void)rc;
    return arg ? json_pack("{s:s}", "reason", (const char *)arg) : NULL;
}

static int cordon_verb(const fl_verb_t *v, int argc, char **argv, const char *suffix,
                       const char *done)
{
    node_opts_t o = {0};
    fl_args_t a = {0};
    int rc;

    if (!fl_run(v, argc, argv, &o, &a, &rc))
        return rc;
    return change(a.pos[0], "POST", suffix, reason_body, (void *)o.reason, o.out == 1, done);
}

int cli_cordon(int argc, char **argv)
{
    return cordon_verb(&cordon_v, argc, argv, "/cordon", "cordoned");
}

int cli_uncordon(int argc, char **argv)
{
    return cordon_verb(&uncordon_v, argc, argv, "/uncordon", "uncordoned");
}

int cli_drain(int argc, char **argv)
{
    return cordon_verb(&drain_v, argc, argv, "/drain", "drained");
}

/* ---- taint ----------------------------------------------------------------------------------- */

typedef struct edits {
    int n;
    char **v;
} edits_t;

/* KEY[=VALUE]:EFFECT adds; KEY[:EFFECT]- removes (kubectl taint). */
static json_t *taint_body(const json_t *node, void *arg, int *rc)
{
    edits_t *e = arg;
    json_t *add = json_array(), *rm = json_array();

    (void)node;
    for (int i = 0; i < e->n; i++) {
        char buf[600], *s = buf, *colon, *eq;
        snprintf(buf, sizeof buf, "%s", e->v[i]);
        size_t len = strlen(s);
        bool remove = len && s[len - 1] == '-';
        if (remove)
            s[--len] = '\0';
        colon = strrchr(s, ':');
        if (colon)
            *colon++ = '\0';
        eq = strchr(s, '=');
        if (eq)
            *eq++ = '\0';
        if (!s[0] || (!remove && (!colon || !colon[0])) || (remove && eq)) {
            fprintf(stderr,
                    "arbiter taint: '%s': use KEY[=VALUE]:EFFECT to add, KEY[:EFFECT]- to "
                    "remove (EFFECT: NoSchedule, PreferNoSchedule or NoExecute)\n",
                    e->v[i]);
            json_decref(add), json_decref(rm);
            *rc = EXIT_USAGE;
            return NULL;
        }
        if (remove) {
            json_t *r = json_pack("{s:s}", "key", s);
            if (colon && colon[0])
                json_object_set_new(r, "effect", json_string(colon));
            json_array_append_new(rm, r);
        } else {
            json_array_append_new(
                add, json_pack("{s:s,s:s,s:s}", "key", s, "value", eq ? eq : "", "effect", colon));
        }
    }
    return json_pack("{s:{s:o,s:o}}", "taints", "add", add, "remove", rm);
}

/* ---- label ------------------------------------------------------------------------------------
 */

typedef struct label_args {
    edits_t e;
    bool overwrite;
} label_args_t;

/* KEY=VALUE sets (a different value only with --overwrite); KEY- removes. */
static json_t *label_body(const json_t *node, void *arg, int *rc)
{
    label_args_t *la = arg;
    json_t *labels = json_object(), *have = json_object_get(node, "labels");

    for (int i = 0; i < la->e.n; i++) {
        char buf[600], *eq;
        snprintf(buf, sizeof buf, "%s", la->e.v[i]);
        size_t len = strlen(buf);
        if (len > 1 && buf[len - 1] == '-' && !strchr(buf, '=')) {
            buf[len - 1] = '\0';
            json_object_set_new(labels, buf, json_null());
            continue;
        }
        if (!(eq = strchr(buf, '=')) || eq == buf) {
            fprintf(stderr, "arbiter label: '%s': use KEY=VALUE to set, KEY- to remove\n",
                    la->e.v[i]);
            json_decref(labels);
            *rc = EXIT_USAGE;
            return NULL;
        }
        *eq++ = '\0';
        const char *old = json_string_value(json_object_get(have, buf));
        if (old && strcmp(old, eq) != 0 && !la->overwrite) {
            fprintf(stderr,
                    "arbiter label: node '%s' already has label %s=%s; give --overwrite to "
                    "change it\n",
                    json_string_value(json_object_get(node, "name")), buf, old);
            json_decref(labels);
            *rc = EXIT_REFUSED;
            return NULL;
        }
        json_object_set_new(labels, buf, json_string(eq));
    }
    return json_pack("{s:o}", "labels", labels);
}

static int edits_verb(int argc, char **argv, bool label)
{
    node_opts_t o = {0};
    fl_args_t a = {0};
    int rc;

    if (!fl_run(label ? &label_v : &taint_v, argc, argv, &o, &a, &rc))
        return rc;
    label_args_t la = {{a.npos - 1, a.pos + 1}, o.overwrite};
    return label ? change(a.pos[0], "PATCH", "", label_body, &la, o.out == 1, "labeled")
                 : change(a.pos[0], "PATCH", "", taint_body, &la.e, o.out == 1, "tainted");
}

int cli_taint(int argc, char **argv)
{
    return edits_verb(argc, argv, false);
}

int cli_label(int argc, char **argv)
{
    return edits_verb(argc, argv, true);
}

/* ---- node NAME, node delete NAME ----------------------------------------------------------------
 */

int cli_node(int argc, char **argv)
{
    node_opts_t o = {0};
    fl_args_t a = {0};
    int rc;

    if (!fl_run(&node_verb, argc, argv, &o, &a, &rc))
        return rc;
    bool del = a.npos == 2, json = o.out == 1;
    if (del && strcmp(a.pos[0], "delete") != 0) {
        fprintf(stderr, "arbiter node: give one node name, or delete NAME\n");
        return EXIT_USAGE;
    }
    const char *name = a.pos[del ? 1 : 0];
    if (del)
        return change(name, "DELETE", "", NULL, NULL, json, "deleted");
    rc = 0;
    json_t *node = get_node(name, &rc);
    if (!node)
        return rc;
    if (json) {
        json_dumpf(node, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        putchar('\n');
    } else {
        show_node(node);
    }
    json_decref(node);
    return 0;
}
