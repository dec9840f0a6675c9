/*
 * codec.c: JSON in and out of the resource manager: job specs (JSON or
 * YAML) into core jobs, a task's assignment out to its agent, and a node's
 * store record (a job's store record is jobrec.c's; the jobs the API shows
 * are jobview.c's typed views).
 *
 * Job specs reuse the scenario loader's job reader (src/spec), so a job
 * posted as JSON, a job posted as YAML and a job in a scenario file accept
 * exactly the same fields and give the same messages. JSON is YAML 1.2, so
 * the same bytes go to both parsers: jansson first, for strict JSON syntax
 * with line and column (400), unless src/util/jsonstrict.c is sure it
 * would accept the text (no tree made); then the spec reader, whose
 * messages point into the same text (422). Two fields belong to the controller and are
 * taken out before the spec reader sees the mapping: "command" (a list of
 * strings), "env" (a map of names to strings, or to {value, secret: true}
 * for a secret: see st_may_see_secrets) and "restartable" (a bool, default true: a
 * task lost with its node requeues the job; false fails it).
 *
 * What the state holds (a job's command and env) goes into an assignment as
 * a deep copy, never shared by reference:
 * the reply is encoded and freed by the API's thread after the state lock
 * is released, and jansson's reference counts are not safe to share across
 * threads (its decrement releases without an acquire before the free; a
 * TSan report of a node's telemetry freed under a reply being read).
 */
#include <libfyaml.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/job_json.h"
#include "spec/scenario.h"
#include "spec/sval.h"
#include "spec/wl.h"
#include "state/jv.h"
#include "state/service.h"
#include "state/state_int.h"
#include "util/jsonstrict.h"

/* ---- specs in ------------------------------------------------------------------ */

static bool env_name_ok(const char *k)
{
    if (!k[0] || (k[0] >= '0' && k[0] <= '9'))
        return false;
    for (; *k; k++)
        if (!((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9') ||
              *k == '_'))
            return false;
    return true;
}

/* libfyaml 0.7 exports this but leaves it out of its header; removing a
 * pair from a mapping does not free it. */
void fy_node_pair_free(struct fy_node_pair *fynp);

static void remove_key(struct fy_node *map, const char *key)
{
    struct fy_node_pair *p = fy_node_mapping_lookup_pair_by_string(map, key, FY_NT);
    if (p && fy_node_mapping_remove(map, p) == 0)
        fy_node_pair_free(p);
}

/* A command argument or env value: any text but NUL and control characters
 * other than newline, tab and carriage return (a script is an argument). */
static int arg_text(sx_t *x, const sval_t *v, char *buf, size_t n)
{
    size_t len = 0;
    const char *s;

    buf[0] = '\0';
    if (sv_null(v))
        return 0;
    if (!v->n || !fy_node_is_scalar(v->n) || fy_node_is_alias(v->n))
        return sv_fail(x, v, -EINVAL, "expected a string, got %s", sv_kind(v->n));
    if (!(s = sv_scalar(v->n, &len))) /* not fy_node_get_scalar: see sval.c */
        return sv_oom(x, v);
    if (len >= n)
        return sv_fail(x, v, -EINVAL, "is too long (%zu bytes; the most is %zu)", len, n - 1);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 && s[i] != '\n' && s[i] != '\t' && s[i] != '\r')
            return sv_fail(x, v, -EINVAL, "contains a control character at offset %zu", i);
    memcpy(buf, s, len);
    buf[len] = '\0';
    return 0;
}

/* Take "command", "env" and "restartable" out of the root mapping. */
static int take_extras(sx_t *x, struct fy_node *root, json_t **command, json_t **env,
                       bool *restartable)
{
    sval_t rv, v;
    static _Thread_local char buf[WL_MAX_SCRIPT + 1]; /* a batch script is one argument */
    int rc = 0, cnt = 0;

    sv_root(&rv, root, "");
    if (sv_get(&rv, "restartable", &v)) {
        if ((rc = sv_bool(x, &v, restartable)) < 0)
            return rc;
        remove_key(root, "restartable");
    }
    if (sv_get(&rv, "command", &v)) {
        json_t *arr = json_array();
        if ((rc = sv_seq(x, &v, 4096, &cnt)) < 0) {
            json_decref(arr);
            return rc;
        }
        for (int i = 0; i < cnt; i++) {
            sval_t iv;
            sv_item(&iv, &v, fy_node_sequence_get_by_index(v.n, i), i);
            if ((rc = arg_text(x, &iv, buf, sizeof buf)) < 0) {
                json_decref(arr);
                return rc;
            }
            json_array_append_new(arr, json_string(buf));
        }
        *command = arr;
        remove_key(root, "command");
    }
    if (sv_get(&rv, "env", &v)) {
        bool is = false;
        json_t *obj = json_object();
        void *it = NULL;
        struct fy_node_pair *p;
        if ((rc = sv_map(x, &v, &is)) < 0) {
            json_decref(obj);
            return rc;
        }
        while (is && (p = fy_node_mapping_iterate(v.n, &it)) != NULL) {
            sval_t pv;
            size_t klen = 0;
            const char *k = sv_key_text(fy_node_pair_key(p), &klen);
            char key[256];
            sv_pair(&pv, &v, p);
            if (!k || klen >= sizeof key) {
                json_decref(obj);
                return sv_fail(x, &pv, -EINVAL, "environment variable names are plain strings");
            }
            memcpy(key, k, klen);
            key[klen] = '\0';
            if (!env_name_ok(key)) {
                json_decref(obj);
                return sv_fail(x, &pv, -EINVAL,
                               "'%s' is not a variable name; use letters, digits and _", key);
            }
            bool secret = false;
            if (pv.n && fy_node_is_mapping(pv.n)) { /* {value: TEXT, secret: true} */
                static const char *const keys[] = {"value", "secret", NULL};
                sval_t vv, sv;
                if ((rc = sv_check_keys(x, &pv, keys)) < 0 ||
                    (sv_get(&pv, "secret", &sv) && (rc = sv_bool(x, &sv, &secret)) < 0)) {
                    json_decref(obj);
                    return rc;
                }
                if (!sv_get(&pv, "value", &vv)) {
                    json_decref(obj);
                    return sv_fail(x, &pv, -EINVAL,
                                   "give the value: {value: TEXT, secret: true}, or a string");
                }
                pv = vv;
            }
            if ((rc = arg_text(x, &pv, buf, sizeof buf)) < 0) {
                json_decref(obj);
                return rc;
            }
            json_object_set_new(obj, key,
                                secret ? json_pack("{s:s,s:b}", "value", buf, "secret", 1)
                                       : json_string(buf));
            memset(buf, 0, strlen(buf)); /* a secret does not stay in this buffer */
        }
        *env = obj;
        remove_key(root, "env");
    }
    return 0;
}

/* The class table a stored job's spec is read with: the config's (or the
 * built-ins), plus the job's own priorityClassName when the table no
 * longer has it, resolving to the value it was given at submission (its
 * name into kept->gone). Into *bufp (allocated here, at most max rows, only
 * for a spec that names a class: the caller frees it); NULL: use the
 * config's as it is. */
static const spec_prio_table_t *kept_table(st_t *s, struct fy_node *root, st_prio_kept_t *kept,
                                           spec_prio_class_t **bufp, int max, spec_prio_table_t *t)
{
    struct fy_node *pc = fy_node_mapping_lookup_by_string(root, "priorityClassName", -1);
    char name[sizeof(*bufp)[0].name];
    size_t len = 0;
    const char *text =
        pc && fy_node_is_scalar(pc) && !fy_node_is_alias(pc) ? sv_scalar(pc, &len) : NULL;
    int n = 0;

    if (!text || len == 0 || len >= sizeof name || memchr(text, '\0', len))
        return NULL;
    spec_prio_class_t *buf = *bufp = calloc((size_t)max, sizeof *buf);
    if (!buf)
        return NULL;
    memcpy(name, text, len);
    name[len] = '\0';
    if (s->conf.nclasses) {
        for (int i = 0; i < s->conf.nclasses && n < max - 1; i++)
            buf[n++] = s->conf.classes[i];
    } else {
        n = spec_priority_builtins(buf, max - 1);
    }
    for (int i = 0; i < n; i++)
        if (strcmp(buf[i].name, name) == 0)
            return NULL; /* still defined */
    memset(&buf[n], 0, sizeof buf[n]);
    snprintf(buf[n].name, sizeof buf[n].name, "%s", name);
    buf[n].value = kept->priority;
    buf[n].preemptible = kept->preemptible;
    snprintf(buf[n].description, sizeof buf[n].description, "gone from the config");
    snprintf(kept->gone, sizeof kept->gone, "%s", name);
    t->v = buf;
    t->n = n + 1;
    return t;
}

/* The priorityClassName a spec names, into buf ("" none or not a plain name). */
static void spec_pclass(struct fy_node *root, char *buf, size_t max)
{
    struct fy_node *pc = fy_node_mapping_lookup_by_string(root, "priorityClassName", -1);
    size_t len = 0;
    const char *text =
        pc && fy_node_is_scalar(pc) && !fy_node_is_alias(pc) ? sv_scalar(pc, &len) : NULL;

    buf[0] = '\0';
    if (text && len > 0 && len < max && !memchr(text, '\0', len)) {
        memcpy(buf, text, len);
        buf[len] = '\0';
    }
}

bool st_prio_class_known(const st_t *s, const char *name)
{
    spec_prio_class_t buf[32];
    int n = s->conf.nclasses;

    for (int i = 0; i < n; i++)
        if (strcmp(s->conf.classes[i].name, name) == 0)
            return true;
    if (n)
        return false;
    n = spec_priority_builtins(buf, (int)(sizeof buf / sizeof buf[0]));
    for (int i = 0; i < n; i++)
        if (strcmp(buf[i].name, name) == 0)
            return true;
    return false;
}

/* A spec read as far as it can be without the state (st_spec_read). */
struct st_spec_read {
    sv_doc_t d;       /* the document, the controller's keys taken out */
    char *alt;        /* the text d reads when libfyaml read the JSON differently */
    const char *name; /* "job.json" or "job.yaml", for messages */
    json_t *command, *env;
    bool restartable;
    st_dep_t *dep;
    st_svc_conf_t svc;
    char pclass[ST_PCLASS_MAX];
};

void st_spec_read_free(st_spec_read_t *r)
{
    if (!r)
        return;
    sv_doc_close(&r->d);
    free(r->alt);
    json_decref(r->command);
    json_decref(r->env);
    st_dep_free(r->dep);
    free(r);
}

/* stored: a spec from the store, whose JSON was checked (strictly) when it
 * was submitted: it goes straight to the YAML reader, the JSON check (a
 * fifth of a recovered job's cost) only where that reader refuses it. */
int st_spec_read(const char *body, size_t n, bool yaml, bool stored, st_spec_read_t **out,
                 arb_err_t *err)
{
    st_spec_read_t *r = calloc(1, sizeof *r);
    int rc;

    *out = NULL;
    if (!r)
        return arb_errf(err, -ENOMEM, "out of memory");
    r->name = yaml ? "job.yaml" : "job.json";
    r->restartable = true;
    if (!yaml && stored && sv_doc_open(r->name, body, n, &r->d, NULL) == 0) {
        /* read as it was at submission (a mapping: sv_doc_open checks) */
    } else if (!yaml && arb_json_sure_object(body, n) &&
               sv_doc_open(r->name, body, n, &r->d, NULL) == 0) {
        /* strict JSON, an object, surely (jsonstrict.h): jansson's tree
         * would be made only to be thrown away; it reads what is not sure */
    } else if (!yaml) {
        json_error_t je;
        json_t *v = json_loadb(body, n, JSON_REJECT_DUPLICATES, &je);
        if (!v) {
            rc = arb_errf(err, -EBADMSG, "%s:%d:%d: malformed JSON: %s", r->name, je.line,
                          je.column, je.text);
            goto out;
        }
        bool obj = json_is_object(v);
        if (obj && sv_doc_open(r->name, body, n, &r->d, NULL) < 0) {
            /* Valid JSON that libfyaml reads differently (tabs as
             * indentation): give it a canonical layout. */
            r->alt = json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        }
        json_decref(v);
        if (!obj) {
            rc = arb_errf(err, -EINVAL, "body: a job spec is a JSON object ({\"name\": ...})");
            goto out;
        }
        if (r->alt && sv_doc_open(r->name, r->alt, strlen(r->alt), &r->d, err) < 0) {
            rc = -EBADMSG;
            goto out;
        }
    } else if (sv_doc_open(r->name, body, n, &r->d, err) < 0) {
        rc = -EBADMSG;
        goto out;
    }
    struct fy_node *root = fy_document_root(r->d.doc);
    sx_t x = {.file = r->name, .err = err, .lone_job = true}; /* no cluster: nothing interned */
    spec_pclass(root, r->pclass, sizeof r->pclass);           /* kept beside the job (jobcore.c) */
    rc = take_extras(&x, root, &r->command, &r->env, &r->restartable);
    if (rc == 0)
        rc = st_dep_take(&x, root, &r->dep); /* dependency, array (depend.c) */
    if (rc == 0)
        rc = spec_service_take(&x, root, &r->svc); /* kind: service and its keys (service.c) */
    if (rc < 0 && rc != -ENOMEM)
        rc = -EINVAL;
out:
    if (rc < 0)
        st_spec_read_free(r);
    else
        *out = r;
    return rc;
}

int st_spec_job(st_t *s, st_spec_read_t *r, st_prio_kept_t *kept, arb_job_t **job, json_t **command,
                json_t **env, bool *restartable, st_dep_t **dep, st_svc_conf_t *svc, char *pclass,
                arb_err_t *err)
{
    struct fy_node *root = fy_document_root(r->d.doc);
    spec_prio_table_t classes = {s->conf.classes, s->conf.nclasses}, kt;
    const spec_prio_table_t *use = s->conf.nclasses ? &classes : NULL;
    spec_prio_class_t *buf = NULL;
    int max = s->conf.nclasses + 17, rc;

    *command = *env = NULL;
    if (kept && kept_table(s, root, kept, &buf, max, &kt))
        use = &kt;
    rc = spec_job_from_node_classes(r->name, root, "", &s->cluster, use, job, err);
    if (rc == 0 && kept) { /* what it was given at submission, whatever the table says now */
        (*job)->priority = kept->priority;
        (*job)->preemptible = kept->preemptible;
    }
    free(buf);
    if (rc < 0 && err && strstr(err->msg, "unknown field") &&
        strlen(err->msg) + 72 < sizeof err->msg)
        strcat(err->msg,
               " (and the controller's: command, env, restartable, kind, dependency, array)");
    if (rc < 0)
        return rc == -ENOMEM ? rc : -EINVAL;
    if (restartable)
        *restartable = r->restartable;
    if (svc) /* the service settings, read once (st_service_check) */
        *svc = r->svc;
    if (pclass)
        memcpy(pclass, r->pclass, sizeof r->pclass);
    if (dep) {
        *dep = r->dep;
        r->dep = NULL;
    }
    *command = r->command;
    *env = r->env;
    r->command = r->env = NULL;
    return 0;
}

/* Both steps at once, the caller holding s->mu. */
static int spec_parse(st_t *s, const char *body, size_t n, bool yaml, bool stored,
                      st_prio_kept_t *kept, arb_job_t **job, json_t **command, json_t **env,
                      bool *restartable, st_dep_t **dep, st_svc_conf_t *svc, char *pclass,
                      arb_err_t *err)
{
    st_spec_read_t *r = NULL;
    int rc;

    *command = *env = NULL;
    if ((rc = st_spec_read(body, n, yaml, stored, &r, err)) < 0)
        return rc;
    rc = st_spec_job(s, r, kept, job, command, env, restartable, dep, svc, pclass, err);
    st_spec_read_free(r);
    return rc;
}

int st_spec_parse(st_t *s, const char *body, size_t n, bool yaml, arb_job_t **job, json_t **command,
                  json_t **env, bool *restartable, st_dep_t **dep, arb_err_t *err)
{
    return spec_parse(s, body, n, yaml, false, NULL, job, command, env, restartable, dep, NULL,
                      NULL, err);
}

int st_spec_parse_kept(st_t *s, const char *body, size_t n, bool yaml, st_prio_kept_t *kept,
                       arb_job_t **job, json_t **command, json_t **env, bool *restartable,
                       st_dep_t **dep, char *pclass, arb_err_t *err)
{
    if (kept)
        kept->gone[0] = '\0';
    return spec_parse(s, body, n, yaml, true, kept, job, command, env, restartable, dep, NULL,
                      pclass, err);
}

/* ---- jobs out -------------------------------------------------------------------- */

/* Set key in an assignment's env: in place when it is there (as a JSON
 * object keeps a key's place), else at the end. key is static or the
 * caller's; value copied. */
static int env_set(st_assignment_t *o, const char *key, const char *value)
{
    for (int i = 0; i < o->nenv; i++)
        if (strcmp(o->env[i].key, key) == 0) {
            char *v = strdup(value);
            if (!v)
                return -ENOMEM;
            free(o->env[i].value);
            o->env[i].value = v;
            return 0;
        }
    st_env_pair_t *e = realloc(o->env, ((size_t)o->nenv + 1) * sizeof *e);
    if (!e)
        return -ENOMEM;
    o->env = e;
    e[o->nenv].key = strdup(key);
    e[o->nenv].value = strdup(value);
    if (!e[o->nenv].key || !e[o->nenv].value) {
        free(e[o->nenv].key);
        free(e[o->nenv].value);
        return -ENOMEM;
    }
    o->nenv++;
    return 0;
}

/* The job's env with secrets as plain values ({"value": TEXT} -> TEXT). */
static int env_plain(st_assignment_t *o, const json_t *env)
{
    const char *k;
    json_t *v;

    if (json_object_size(env) && !(o->env = calloc(json_object_size(env), sizeof *o->env)))
        return -ENOMEM;
    json_object_foreach((json_t *)env, k, v)
    {
        json_t *val = json_is_object(v) ? json_object_get(v, "value") : v;
        const char *txt = json_string_value(val) ? json_string_value(val) : "";
        st_env_pair_t *e = &o->env[o->nenv];
        e->key = strdup(k);
        e->value = strdup(txt);
        if (!e->key || !e->value) {
            free(e->key);
            free(e->value);
            return -ENOMEM;
        }
        o->nenv++;
    }
    return 0;
}

static int strs_of(const json_t *arr, char ***out, int *n)
{
    size_t i;
    json_t *v;

    *out = NULL;
    *n = 0;
    if (!json_array_size(arr))
        return 0;
    if (!(*out = calloc(json_array_size(arr), sizeof **out)))
        return -ENOMEM;
    json_array_foreach(arr, i, v)
    {
        if (!((*out)[i] = strdup(json_string_value(v) ? json_string_value(v) : "")))
            return -ENOMEM;
        (*n)++;
    }
    return 0;
}

void st_assignment_free(st_assignment_t *a)
{
    for (int i = 0; i < a->ncommand; i++)
        free(a->command[i]);
    free(a->command);
    for (int i = 0; i < a->nenv; i++) {
        free(a->env[i].key);
        free(a->env[i].value);
    }
    free(a->env);
    for (int i = 0; i < a->nhosts; i++)
        free(a->hosts[i]);
    free(a->hosts);
    free(a->master_addr);
    memset(a, 0, sizeof *a);
}

/* The rendezvous port of a gang's attempt: derived from the job id and
 * attempt, so every member computes the same one, in 20000..59999. */
static int master_port(const st_job_t *sj)
{
    uint64_t h = (sj->id * 0x9E3779B97F4A7C15ULL) ^ (sj->attempt * 0xC2B2AE3D27D4EB4FULL);
    return 20000 + (int)((h >> 17) % 40000);
}

/* The GPU memory task t may use on each of its GPUs, MiB: what it asked
 * for with a share (nvidia.com/gpu-memory), else its share of the
 * smallest of its devices, else (whole GPUs) that device's memory. Nothing
 * enforces it in hardware: the task is told (ARBITER_GPU_MEMORY_MIB). */
static int64_t granted_gpu_mib(st_t *s, const arb_job_t *j, int t)
{
    const arb_task_alloc_t *a = &j->alloc[t];
    const arb_node_t *n = &s->cluster.nodes[a->node];
    int64_t dev = INT64_MAX;

    if (!a->gpu_mask)
        return 0;
    if (a->gpu_mem_mib > 0)
        return a->gpu_mem_mib;
    for (int g = 0; g < n->ngpus; g++)
        if ((a->gpu_mask & (1u << g)) && n->gpu[g].mem_mib > 0 && n->gpu[g].mem_mib < dev)
            dev = n->gpu[g].mem_mib;
    if (dev == INT64_MAX)
        return 0; /* devices of unknown size */
    return a->gpu_milli >= 1000 ? dev : dev * a->gpu_milli / 1000;
}

int st_task_assignment(st_t *s, st_job_t *sj, int t, st_assignment_t *o)
{
    const arb_job_t *j = sj->j;
    const arb_task_alloc_t *a = &j->alloc[t];
    const arb_tgroup_t *g = arb_job_task_group(j, t, NULL);
    char mib[32];
    int64_t cpu_cap = g->lim.cpu_milli, mem_cap = g->lim.mem_bytes, gmib = granted_gpu_mib(s, j, t);

    memset(o, 0, sizeof *o);
    /* Kubernetes' rule: requests are what the scheduler reserves; limits
     * are the caps (cgroups on the agent). A request without a limit is no
     * cap, unless resources.capRequests says so. */
    if (s->conf.cap_requests) {
        cpu_cap = cpu_cap ? cpu_cap : g->req.cpu_milli;
        mem_cap = mem_cap ? mem_cap : g->req.mem_bytes;
    }
    if (env_plain(o, sj->env) < 0 || strs_of(sj->command, &o->command, &o->ncommand) < 0)
        goto oom;
    snprintf(mib, sizeof mib, "%lld", (long long)gmib);
    if (gmib > 0 && env_set(o, "ARBITER_GPU_MEMORY_MIB", mib) < 0)
        goto oom;
    o->job = sj->id;
    snprintf(o->name, sizeof o->name, "%s", j->name);
    o->task = t;
    o->ntasks = arb_job_partial_gang(j) ? j->ntasks : j->nalloc;
    o->attempt = sj->attempt;
    o->epoch = sj->epoch;
    o->gpus = a->gpu_mask;
    o->gpu_milli = a->gpu_milli;
    o->gpu_memory_mib = a->gpu_mem_mib;
    o->state = st_task_state_names[sj->tasks[t].state];
    o->stop = st_task_stop(sj, t);
    if (cpu_cap) /* the caps: absent, none */
        arb_qty_format(cpu_cap, ARB_QTY_MILLI, o->cpu, sizeof o->cpu);
    if (mem_cap)
        arb_qty_format(mem_cap, ARB_QTY_BYTES, o->memory, sizeof o->memory);
    if (j->grace_s >= 0) { /* SIGTERM -> SIGKILL for this job (else the agent's) */
        o->has_grace = true;
        o->grace_s = j->grace_s;
    }
    if (j->time_limit_s > 0) {
        /* What is left of its time limit: the agent stops it then by
         * itself, on its own clock, should the controller be out of reach. */
        int64_t left = j->start_ns + j->time_limit_s * 1000000000LL - st_now_ns(s);
        o->has_time_limit = true;
        o->time_limit_ms = left > 0 ? left / 1000000 : 0;
    }
    if (j->elastic) {
        /* The resize notice: a new generation makes the agent rewrite the
         * task's ARBITER_RESIZE_FILE and send it SIGUSR1 (resize.c). Hosts
         * for up to 64 ranks (a reply stays O(tasks)); larger jobs find
         * their peers through the MASTER_ADDR rendezvous. */
        o->elastic = true;
        o->generation = j->resize_gen;
        if (j->nalloc <= 64 && j->nalloc > 0 &&
            !(o->hosts = calloc((size_t)j->nalloc, sizeof(char *))))
            goto oom;
        for (int k = 0; k < j->nalloc && j->nalloc <= 64; k++) {
            const arb_node_t *hn = &s->cluster.nodes[j->alloc[k].node];
            const st_node_t *hx = st_node_ext(s, hn);
            if (!(o->hosts[k] = strdup(hx->addr[0] ? hx->addr : arb_node_name(&s->cluster, hn))))
                goto oom;
            o->nhosts++;
        }
    }
    /* A gang: what distributed launchers rendezvous with (task 0 is the master). */
    if (j->nalloc > 1 || j->elastic || arb_job_partial_gang(j)) {
        int mt = 0; /* the master: task 0, or the first still holding (task 0 ended) */
        while (mt < j->nalloc - 1 && j->alloc[mt].node == ARB_NO_NODE)
            mt++;
        const arb_node_t *m = &s->cluster.nodes[j->alloc[mt].node];
        const st_node_t *mx = st_node_ext(s, m);
        o->gang = true;
        o->rank = t;
        o->world_size = arb_job_partial_gang(j) ? j->ntasks : j->nalloc; /* all of a growing gang */
        if (!(o->master_addr = strdup(mx->addr[0] ? mx->addr : arb_node_name(&s->cluster, m))))
            goto oom;
        o->master_port = master_port(sj);
        /* Every task's host, in task order, for launchers that list their
         * peers (TF_CONFIG, an MPI hostfile: src/spec/k8s.c); up to 256
         * tasks, so a reply stays O(tasks). A task not holding: empty.
         * Only for a gang that starts whole: the hosts of one that grows
         * (partial gang, elastic) change under a running task, and its
         * assignment must not. */
        if (j->nalloc <= 256 && !arb_job_partial_gang(j) && !j->elastic) {
            arb_buf_t hb = {0};
            for (int k = 0; k < j->nalloc; k++) {
                if (k)
                    arb_buf_puts(&hb, ",");
                if (j->alloc[k].node == ARB_NO_NODE)
                    continue;
                const arb_node_t *hn = &s->cluster.nodes[j->alloc[k].node];
                const st_node_t *hx = st_node_ext(s, hn);
                arb_buf_puts(&hb, hx->addr[0] ? hx->addr : arb_node_name(&s->cluster, hn));
            }
            int rc = !hb.oom && hb.p ? env_set(o, "ARBITER_TASK_HOSTS", hb.p) : 0;
            free(hb.p);
            if (rc < 0)
                goto oom;
        }
    }
    return 0;
oom:
    st_assignment_free(o);
    return -ENOMEM;
}

/* ---- node records ------------------------------------------------------------------- */

char *st_node_record(st_t *s, arb_node_t *n)
{
    st_node_t *x = st_node_ext(s, n);
    json_t *o =
        json_pack("{s:s,s:i,s:I,s:b,s:O}", "name", arb_node_name(&s->cluster, n), "idx", (int)n->id,
                  "version", (json_int_t)x->version, "drained", n->state == ARB_NODE_DRAINING,
                  "inventory", x->inventory ? x->inventory : json_null());
    if (o && x->op) /* what operators set outlives agents' restarts (nodeops.c) */
        json_object_set(o, "operator", x->op);
    if (o && x->reason[0])
        json_object_set_new(o, "reason", json_string(x->reason));
    char *txt = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return txt;
}
