/*
 * service_spec.c: the service keys of a job spec (`kind: service`,
 * replicas, port, health, minReplicas, autoscale): read, validated with
 * messages that name the field and the fix, and taken out of the mapping
 * before the job reader sees it (the rest of the spec is one replica's
 * template). What the controller does with them: src/state/service.c.
 */
#include <libfyaml.h>
#include <stdio.h>
#include <string.h>

#include "spec/service_spec.h"

/* libfyaml 0.7 exports this but leaves it out of its header. */
void fy_node_pair_free(struct fy_node_pair *fynp);

static void drop_key(struct fy_node *map, const char *key)
{
    struct fy_node_pair *p = fy_node_mapping_lookup_pair_by_string(map, key, FY_NT);
    if (p && fy_node_mapping_remove(map, p) == 0)
        fy_node_pair_free(p);
}

static int take_autoscale(sx_t *x, const sval_t *v, spec_service_t *c)
{
    static const char *const keys[] = {"maxReplicas", "targetInflight", "targetGpuUtil", "window",
                                       "cooldown",    "tolerance",      "drainTimeout",  NULL};
    sval_t f;
    bool is = false;
    int rc;

    if ((rc = sv_map(x, v, &is)) < 0)
        return rc;
    if (!is)
        return sv_fail(x, v, -EINVAL, "give a mapping: {maxReplicas: N, targetInflight: T}");
    if ((rc = sv_check_keys(x, v, keys)) < 0)
        return rc;
    c->autoscale = true;
    arb_as_conf_default(&c->as);
    c->as.target = 0;
    c->as.max = 0;
    if (!sv_get(v, "maxReplicas", &f))
        return sv_fail(x, v, -EINVAL, "maxReplicas is required (the most replicas to run)");
    if ((rc = sv_int32(x, &f, 1, 1000, &c->as.max)) < 0)
        return rc;
    if (sv_get(v, "targetInflight", &f) && (rc = sv_double(x, &f, 0.001, 1e6, &c->as.target)) < 0)
        return rc;
    if (sv_get(v, "targetGpuUtil", &f) && (rc = sv_double(x, &f, 0.01, 1, &c->as.gpu_target)) < 0)
        return rc;
    if (!(c->as.target > 0) && !(c->as.gpu_target > 0))
        return sv_fail(x, v, -EINVAL,
                       "give targetInflight (requests in flight per replica) or targetGpuUtil "
                       "(0..1)");
    if (sv_get(v, "tolerance", &f) && (rc = sv_double(x, &f, 0, 0.99, &c->as.tolerance)) < 0)
        return rc;
    if (sv_get(v, "window", &f)) {
        if ((rc = sv_duration_ns(x, &f, &c->as.window_ns)) < 0)
            return rc;
    }
    if (sv_get(v, "cooldown", &f)) {
        if ((rc = sv_duration_ns(x, &f, &c->as.cooldown_ns)) < 0)
            return rc;
    }
    if (sv_get(v, "drainTimeout", &f)) {
        if ((rc = sv_duration_ns(x, &f, &c->drain_ns)) < 0)
            return rc;
    }
    return 0;
}

int spec_service_take(sx_t *x, struct fy_node *root, spec_service_t *c)
{
    sval_t rv, v;
    char kind[32];
    int rc;

    memset(c, 0, sizeof *c);
    c->drain_ns = 30000000000LL;
    sv_root(&rv, root, "");
    if (!sv_get(&rv, "kind", &v)) {
        static const char *const svc_only[] = {"port", "health", "minReplicas", "autoscale", NULL};
        for (int i = 0; svc_only[i]; i++)
            if (sv_get(&rv, svc_only[i], &v))
                return sv_fail(x, &v, -EINVAL, "only a service has '%s'; add kind: service",
                               svc_only[i]);
        return 0;
    }
    if ((rc = sv_text(x, &v, kind, sizeof kind, false)) < 0) /* "service" in JSON too */
        return rc;
    if (strcmp(kind, "batch") == 0) {
        drop_key(root, "kind");
        return spec_service_take(x, root, c);
    }
    if (strcmp(kind, "service") != 0 && kind[0] >= 'A' && kind[0] <= 'Z')
        return sv_fail(x, &v, -EINVAL,
                       "kind '%s' is a Kubernetes kind: give the manifest with its apiVersion "
                       "(arbiter submit -f reads it as-is, docs/compat.md), or use kind: batch "
                       "(the default) or service for Arbiter's own spec",
                       kind);
    if (strcmp(kind, "service") != 0)
        return sv_fail(x, &v, -EINVAL, "kind '%s': use batch (the default) or service", kind);
    c->is = true;
    c->replicas = 1;
    if (sv_get(&rv, "replicas", &v) && v.n && fy_node_is_mapping(v.n)) /* elastic's form */
        return sv_fail(x, &v, -EINVAL,
                       "a service's replicas is a count (replicas: 2); for a range use "
                       "minReplicas: and autoscale: {maxReplicas: N, targetInflight: T}");
    if (sv_get(&rv, "replicas", &v) && (rc = sv_int32(x, &v, 1, 1000, &c->replicas)) < 0)
        return rc;
    if (!sv_get(&rv, "port", &v))
        return sv_fail(x, &rv, -EINVAL,
                       "a service needs port: N (replica i listens on N + i, given as PORT)");
    if ((rc = sv_int32(x, &v, 1, 65535, &c->port)) < 0)
        return rc;
    if (sv_get(&rv, "health", &v)) {
        if ((rc = sv_text(x, &v, c->health, sizeof c->health, false)) < 0)
            return rc;
        if (c->health[0] != '/' || strpbrk(c->health, " \r\n"))
            return sv_fail(x, &v, -EINVAL, "health '%s': give a path such as /healthz", c->health);
    }
    c->min = c->replicas;
    if (sv_get(&rv, "autoscale", &v) && (rc = take_autoscale(x, &v, c)) < 0)
        return rc;
    if (c->autoscale)
        c->min = 1;
    if (sv_get(&rv, "minReplicas", &v) && (rc = sv_int32(x, &v, 0, 1000, &c->min)) < 0)
        return rc;
    if (c->autoscale) {
        c->as.min = c->min > 0 ? c->min : 1;
        if (c->as.max < c->as.min)
            return sv_fail(x, &v, -EINVAL,
                           "minReplicas %d is above autoscale.maxReplicas %d; raise maxReplicas",
                           c->min, c->as.max);
        if (c->replicas < c->as.min)
            c->replicas = c->as.min;
        if (c->replicas > c->as.max)
            c->replicas = c->as.max;
    } else if (c->min > c->replicas) {
        return sv_fail(x, &v, -EINVAL, "minReplicas %d is above replicas %d; lower it", c->min,
                       c->replicas);
    }
    if (c->port + (c->autoscale ? c->as.max : c->replicas) - 1 > 65535)
        return sv_fail(x, &rv, -EINVAL, "port %d + replicas runs past 65535; pick a lower port",
                       c->port);
    static const char *const keys[] = {"kind",        "replicas",  "port", "health",
                                       "minReplicas", "autoscale", NULL};
    for (int i = 0; keys[i]; i++)
        drop_key(root, keys[i]);
    return 0;
}
