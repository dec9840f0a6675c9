/*
 * wl_dry.c: `arbiter submit --dry-run`: every job a file would become,
 * read by the same spec reader the controller uses (scenario.c) and
 * printed as the controller would print it back (job_json.c), with no
 * controller. Extended resources are taken as offered (no cluster to
 * ask), and a priority class that is not a built-in is left to the
 * controller's table (a warning says so).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libfyaml.h>

#include "spec/depend.h"
#include "spec/job_json.h"
#include "spec/scenario.h"
#include "spec/service_spec.h"
#include "spec/sval.h"
#include "spec/wl.h"

void fy_node_pair_free(struct fy_node_pair *fynp);

static void drop(struct fy_node *map, const char *key)
{
    struct fy_node_pair *p = fy_node_mapping_lookup_pair_by_string(map, key, FY_NT);
    if (p && fy_node_mapping_remove(map, p) == 0)
        fy_node_pair_free(p);
}

/* Declare every extended resource the spec's requests name. */
static void declare_ext(arb_cluster_t *c, struct fy_node *n, int depth)
{
    void *it = NULL;
    struct fy_node_pair *p;
    struct fy_node *item;

    if (!n || depth > 12)
        return;
    if (fy_node_is_sequence(n)) {
        while ((item = fy_node_sequence_iterate(n, &it)))
            declare_ext(c, item, depth + 1);
        return;
    }
    if (!fy_node_is_mapping(n))
        return;
    while ((p = fy_node_mapping_iterate(n, &it))) {
        size_t len = 0;
        const char *k = sv_key_text(fy_node_pair_key(p), &len);
        char name[ARB_EXT_NAME_MAX];
        if (k && (len == 8 && !memcmp(k, "requests", 8)) | (len == 6 && !memcmp(k, "limits", 6))) {
            void *it2 = NULL;
            struct fy_node_pair *r;
            struct fy_node *m = fy_node_pair_value(p);
            while (m && fy_node_is_mapping(m) && (r = fy_node_mapping_iterate(m, &it2))) {
                size_t rl = 0;
                const char *rk = sv_key_text(fy_node_pair_key(r), &rl);
                if (!rk || rl >= sizeof name || !memchr(rk, '/', rl))
                    continue;
                memcpy(name, rk, rl);
                name[rl] = '\0';
                if (strcmp(name, "nvidia.com/gpu") && strcmp(name, "nvidia.com/gpu-memory") &&
                    strcmp(name, "arbiter.io/gpu-share"))
                    arb_extnames_index(&c->ext, name, true);
            }
            continue;
        }
        declare_ext(c, fy_node_pair_value(p), depth + 1);
    }
}

int wl_dry_one(const char *name, const char *text, size_t n, json_t *warnings, json_t **out,
               arb_err_t *err)
{
    arb_cluster_t c;
    sv_doc_t d;
    arb_job_t *j = NULL;
    spec_service_t svc;
    json_t *cmd = NULL, *env = NULL, *o = NULL, *dep = NULL, *arr = NULL;
    char *alt = NULL;
    int rc;

    *out = NULL;
    arb_cluster_init(&c);
    /* JSON in a canonical layout (tabs are not YAML indentation). */
    json_t *v = json_loadb(text, n, 0, NULL);
    if (v && json_is_object(v)) {
        cmd = json_incref(json_object_get(v, "command"));
        env = json_incref(json_object_get(v, "env"));
        dep = json_incref(json_object_get(v, "dependency")); /* the controller's (depend.c) */
        arr = json_incref(json_object_get(v, "array"));
        const char *pc = json_string_value(json_object_get(v, "priorityClassName"));
        int32_t p;
        if (pc && spec_priority_class(pc, &p) < 0) {
            char w[320];
            snprintf(w, sizeof w,
                     "%s: priorityClassName '%s' is not a built-in class; the controller "
                     "resolves it from its priorityClasses (GET /v1/priorityclasses), or refuses "
                     "it",
                     name, pc);
            json_array_append_new(warnings, json_string(w));
            json_object_del(v, "priorityClassName");
        }
        alt = json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (alt) {
            text = alt;
            n = strlen(alt);
        }
    }
    json_decref(v);
    if ((rc = sv_doc_open(name, text, n, &d, err)) < 0)
        goto out;
    struct fy_node *root = fy_document_root(d.doc);
    sx_t x = {.file = name, .err = err, .c = &c, .lone_job = true};
    if (!cmd) { /* YAML: command and env as the controller reads them */
        sval_t rv, f;
        sv_root(&rv, root, "");
        cmd = json_array();
        if (sv_get(&rv, "command", &f) && f.n && fy_node_is_sequence(f.n)) {
            void *it = NULL;
            struct fy_node *item;
            while ((item = fy_node_sequence_iterate(f.n, &it)))
                if (fy_node_is_scalar(item))
                    json_array_append_new(cmd, json_string(fy_node_get_scalar0(item)));
        }
    }
    drop(root, "command");
    drop(root, "env");
    drop(root, "restartable");
    if (!dep) { /* YAML */
        sval_t rv, f;
        sv_root(&rv, root, "");
        if (sv_get(&rv, "dependency", &f) && f.n && fy_node_is_scalar(f.n))
            dep = json_string(fy_node_get_scalar0(f.n));
    }
    drop(root, "dependency");
    drop(root, "array");
    if (dep) {
        spec_dep_t dd;
        if (!json_is_string(dep)) {
            rc = arb_errf(err, -EINVAL, "%s: dependency: give it as text, e.g. \"afterok:12\"",
                          name);
            sv_doc_close(&d);
            goto out;
        }
        if ((rc = spec_dep_parse(json_string_value(dep), &dd, err)) < 0) {
            sv_doc_close(&d);
            goto out;
        }
    }
    declare_ext(&c, root, 0);
    if ((rc = spec_service_take(&x, root, &svc)) == 0)
        rc = spec_job_from_node(name, root, "", &c, &j, err);
    sv_doc_close(&d);
    if (rc < 0)
        goto out;
    if (svc.is && j->ntasks != 1) {
        rc = arb_errf(err, -EINVAL,
                      "%s: groups: a service replica is one task; give its resources at the top "
                      "level and the count as replicas: N",
                      name);
        goto out;
    }
    o = json_pack("{s:s,s:s,s:s,s:i}", "name", j->name, "kind", svc.is ? "service" : "batch",
                  "queue", j->queue ? arb_str(&c.strs, j->queue) : "default", "priority",
                  (int)j->priority);
    json_t *spec = spec_job_json(&c, j);
    json_object_update(o, spec);
    json_decref(spec);
    if (svc.is) {
        json_t *s =
            json_pack("{s:i,s:i,s:i}", "replicas", svc.replicas, "port", svc.port, "min", svc.min);
        if (svc.health[0])
            json_object_set_new(s, "health", json_string(svc.health));
        if (svc.autoscale)
            json_object_set_new(s, "max", json_integer(svc.as.max));
        json_object_set_new(o, "service", s);
    }
    json_object_set_new(o, "command", cmd ? cmd : json_array());
    cmd = NULL;
    if (env) {
        json_object_set_new(o, "env", env);
        env = NULL;
    }
    if (dep)
        json_object_set(o, "dependency", dep);
    if (arr)
        json_object_set(o, "array", arr);
    *out = o;
out:
    arb_job_free(j);
    arb_cluster_free(&c);
    json_decref(cmd);
    json_decref(env);
    json_decref(dep);
    json_decref(arr);
    free(alt);
    return rc;
}

int wl_dry(wl_t *w, json_t **out)
{
    json_t *jobs = json_array(), *spec;
    size_t i;
    int rc = 0;

    json_array_foreach(w->jobs, i, spec)
    {
        char *text = json_dumps(spec, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        char name[300];
        json_t *o;
        snprintf(name, sizeof name, "%s (job %zu, %s)", w->file, i + 1,
                 json_string_value(json_object_get(spec, "name")));
        if (!text) {
            rc = arb_errf(w->err, -ENOMEM, "out of memory");
            break;
        }
        rc = wl_dry_one(name, text, strlen(text), w->warnings, &o, w->err);
        free(text);
        if (rc < 0)
            break;
        json_t *src = json_array_get(w->sources, i);
        if (src && json_object_size(src))
            json_object_set(o, "source", src);
        json_array_append_new(jobs, o);
    }
    if (rc < 0) {
        json_decref(jobs);
        return rc;
    }
    if (w->nwarn_lost) {
        char m[96];
        snprintf(m, sizeof m, "(%d more warnings)", w->nwarn_lost);
        json_array_append_new(w->warnings, json_string(m));
    }
    *out = json_pack("{s:o,s:O}", "jobs", jobs, "warnings", w->warnings);
    return 0;
}
