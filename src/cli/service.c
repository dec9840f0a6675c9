/*
 * service.c: `arbiter service [NAME] [-o json]`: a service's replicas as
 * the controller publishes them (GET /v1/services/NAME), the endpoints a
 * balancer follows; without NAME, every running service.
 *
 *   service web (job 7): 3 replicas (min 1), port 18000, health /healthz, endpoints v12
 *   autoscale 1..4, target 2.0 in flight per replica: load 9.0 ... recommend 4
 *   INDEX  JOB  STATE    NODE  ADDRESS          READY  DRAINING  INFLIGHT  RESTARTS
 *   0      8    running  n1    127.0.0.1:18000  yes    no        2         0
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "cli/flags.h"

static void show_one(json_t *o)
{
    json_t *reps = json_object_get(o, "replicas"), *r, *a = json_object_get(o, "autoscale");
    size_t i;

    printf(
        "service %s (job %lld): %lld replicas (min %lld), port %lld, health %s, endpoints v%lld\n",
        json_string_value(json_object_get(o, "service")),
        (long long)json_integer_value(json_object_get(o, "job")),
        (long long)json_integer_value(json_object_get(o, "desired")),
        (long long)json_integer_value(json_object_get(o, "min")),
        (long long)json_integer_value(json_object_get(o, "port")),
        json_string_value(json_object_get(o, "health"))[0]
            ? json_string_value(json_object_get(o, "health"))
            : "-",
        (long long)json_integer_value(json_object_get(o, "version")));
    if (a)
        printf("autoscale %lld..%lld, target %.2f in flight per replica%s%s\n",
               (long long)json_integer_value(json_object_get(a, "min")),
               (long long)json_integer_value(json_object_get(a, "max")),
               json_real_value(json_object_get(a, "target_inflight")),
               json_object_get(a, "last") ? ": " : "",
               json_object_get(a, "last") ? json_string_value(json_object_get(a, "last")) : "");
    printf("%-6s %-6s %-10s %-10s %-22s %-6s %-9s %-9s %s\n", "INDEX", "JOB", "STATE", "NODE",
           "ADDRESS", "READY", "DRAINING", "INFLIGHT", "RESTARTS");
    json_array_foreach(reps, i, r)
    {
        json_t *inf = json_object_get(r, "inflight");
        char infl[32] = "-";
        if (json_is_number(inf))
            snprintf(infl, sizeof infl, "%.0f", json_number_value(inf));
        printf("%-6lld %-6lld %-10s %-10s %-22s %-6s %-9s %-9s %lld\n",
               (long long)json_integer_value(json_object_get(r, "index")),
               (long long)json_integer_value(json_object_get(r, "job")),
               json_string_value(json_object_get(r, "state")),
               json_string_value(json_object_get(r, "node")) ?: "-",
               json_string_value(json_object_get(r, "address")) ?: "-",
               json_is_true(json_object_get(r, "ready")) ? "yes" : "no",
               json_is_true(json_object_get(r, "draining")) ? "yes" : "no", infl,
               (long long)json_integer_value(json_object_get(r, "restarts")));
    }
}

typedef struct service_opts {
    int out;
} service_opts_t;

static const fl_flag_t service_flags[] = {
    FL_OPT(service_opts_t, out, NULL, "-o", FL_CHOICE, NULL, "a table, or the controller's JSON",
           .def = "text", .choices = "text|json"),
    FL_END,
};
static const fl_verb_t service_verb = {
    .name = "service",
    .args = "[NAME]",
    .summary = "a service job's replicas (every service's without NAME): address, ready, "
               "draining, in-flight load",
    .flags = service_flags,
    .max_pos = 1};

int cli_service(int argc, char **argv)
{
    service_opts_t o = {0};
    fl_args_t a = {0};
    char path[256];
    json_t *reply = NULL;
    int rc = 0;

    if (!fl_run(&service_verb, argc, argv, &o, &a, &rc))
        return rc;
    const char *name = a.npos ? a.pos[0] : NULL;
    bool want_json = o.out == 1;
    if (name && (strlen(name) > 128 || strpbrk(name, "/?&# "))) {
        fprintf(stderr, "arbiter service: '%s' is not a service name\n", name);
        return EXIT_USAGE;
    }
    snprintf(path, sizeof path, name ? "/v1/services/%s" : "/v1/services", name ? name : "");
    long st = cli_http("GET", path, NULL, 0, NULL, &reply, NULL);
    if (st < 0)
        return EXIT_UNREACHABLE;
    if (st >= 300) {
        rc = cli_refused(st, reply);
    } else if (want_json) {
        json_dumpf(reply, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        putchar('\n');
    } else if (name) {
        show_one(reply);
    } else {
        json_t *s;
        size_t i;
        json_array_foreach(json_object_get(reply, "services"), i, s)
        {
            if (i)
                putchar('\n');
            show_one(s);
        }
    }
    json_decref(reply);
    return rc;
}
