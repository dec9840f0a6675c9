/*
 * k8s_pod.c: one Kubernetes pod template as one Arbiter task (k8s_int.h):
 * its containers' requests and limits summed as the kubelet does (a limit
 * alone is the request; init containers count at their largest, sidecars
 * add up; overhead adds), where it may run (nodeSelector, node affinity
 * with its ORed terms, tolerations, Kueue's topology annotations), KAI's
 * GPU fraction and memory, and what it runs (the main container's command
 * and args with $(VAR) references, its env, valueFrom fieldRefs that have
 * a meaning here, workingDir).
 *
 * What would change where the pod may run and cannot be honoured (pod
 * affinity, nodeName, a hard topology spread, matchFields) is an error;
 * everything else that is not honoured is a warning naming the field.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libfyaml.h>

#include "spec/k8s_int.h"

#define RES_GPU "nvidia.com/gpu"

/* ---- small readers ---------------------------------------------------------------- */

int k8s_text(kx_t *k, const sval_t *v, char *buf, size_t n)
{
    return sv_text(&k->x, v, buf, n, true);
}

/* A command argument or env value: newlines and tabs are fine (scripts). */
static int arg_text(kx_t *k, const sval_t *v, char *buf, size_t n)
{
    size_t len = 0;
    const char *s;

    buf[0] = '\0';
    if (sv_null(v))
        return 0;
    if (!v->n || !fy_node_is_scalar(v->n) || fy_node_is_alias(v->n))
        return sv_fail(&k->x, v, -EINVAL, "expected a string, got %s", sv_kind(v->n));
    if (!(s = fy_node_get_scalar(v->n, &len)))
        return sv_oom(&k->x, v);
    if (len >= n)
        return sv_fail(&k->x, v, -EINVAL, "is too long (%zu bytes; the most is %zu)", len, n - 1);
    for (size_t i = 0; i < len; i++)
        if (((unsigned char)s[i] < 0x20 && s[i] != '\n' && s[i] != '\t' && s[i] != '\r') ||
            s[i] == WL_REF_OPEN || s[i] == WL_REF_CLOSE)
            return sv_fail(&k->x, v, -EINVAL, "contains a control character at offset %zu", i);
    memcpy(buf, s, len);
    buf[len] = '\0';
    return 0;
}

int k8s_int(kx_t *k, const sval_t *v, int64_t lo, int64_t hi, int64_t *out)
{
    char buf[64], *end;
    int rc = sv_text(&k->x, v, buf, sizeof buf, false);
    long long val;

    if (rc < 0)
        return rc;
    errno = 0;
    val = strtoll(buf, &end, 10);
    if (*end || end == buf || errno)
        return sv_fail(&k->x, v, -EINVAL, "'%s' is not an integer", buf);
    if (val < lo || val > hi)
        return sv_fail(&k->x, v, -EINVAL, "%s is out of range; use %" PRId64 "..%" PRId64, buf, lo,
                       hi);
    *out = val;
    return 0;
}

const char *k8s_meta(const sval_t *meta, const char *what, const char *key, char *buf, size_t n)
{
    sval_t m, f;
    size_t len = 0;
    const char *s;

    if (!sv_get(meta, what, &m) || !sv_get(&m, key, &f) || !f.n || !fy_node_is_scalar(f.n))
        return NULL;
    s = fy_node_get_scalar(f.n, &len);
    if (!s || len >= n)
        return NULL;
    memcpy(buf, s, len);
    buf[len] = '\0';
    return buf;
}

void kx_warn(kx_t *k, const sval_t *v, const char *fmt, ...)
{
    arb_err_t e = {{0}};
    arb_err_t *keep = k->x.err;
    char msg[400];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    k->x.err = &e;
    sv_fail(&k->x, v, 0, "%s", msg);
    k->x.err = keep;
    wl_warn(k->w, "%s", e.msg);
}

const char *k8s_topo_level(const char *key)
{
    static const struct {
        const char *sub, *level;
    } map[] = {
        {"hostname", "node"}, {"nvlink", "nvlink"}, {"nvl-domain", "nvlink"}, {"subblock", "rack"},
        {"rack", "rack"},     {"block", "block"},   {"spine", "block"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strstr(key, map[i].sub))
            return map[i].level;
    return NULL;
}

/* ---- resources ---------------------------------------------------------------------- */

typedef struct rsum { /* one container's or one pass's resources */
    int n;
    k8s_res_t r[K8S_MAX_RES];
} rsum_t;

static k8s_res_t *res_slot(rsum_t *s, const char *name, arb_qty_kind_t unit)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->r[i].name, name))
            return &s->r[i];
    if (s->n == K8S_MAX_RES)
        return NULL;
    k8s_res_t *r = &s->r[s->n++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->unit = unit;
    return r;
}

/* The unit of a resource name, or -1 (with the message) when not usable. */
static int res_unit(kx_t *k, const sval_t *key, const char *name, bool *skip)
{
    static const char *const known[] = {"cpu", "memory", RES_GPU, "ephemeral-storage", NULL};
    *skip = false;
    if (!strcmp(name, "cpu"))
        return ARB_QTY_MILLI;
    if (!strcmp(name, "memory") || !strcmp(name, "ephemeral-storage"))
        return ARB_QTY_BYTES;
    if (!strcmp(name, RES_GPU))
        return ARB_QTY_COUNT;
    if (!strncmp(name, "hugepages-", 10)) {
        kx_warn(k, key, "%s: huge pages are not scheduled on; the task gets ordinary memory", name);
        *skip = true;
        return ARB_QTY_BYTES;
    }
    const char *near = sv_suggest(name, strlen(name), known);
    if (near && strcmp(near, name))
        return sv_fail(&k->x, key, -EINVAL, "unknown resource '%s'; did you mean '%s'?", name,
                       near);
    if (strchr(name, '/'))
        return ARB_QTY_COUNT; /* an extended resource: a node must offer it */
    return sv_fail(&k->x, key, -EINVAL,
                   "unknown resource '%s'; use cpu, memory, ephemeral-storage, " RES_GPU
                   " or an extended resource with a domain (rdma/hca)",
                   name);
}

/*
 * A quantity as Kubernetes reads it: a byte quantity with a fraction of a
 * byte ("0.2Gi") is rounded up to the next byte, as Quantity.Value() does
 * (the API server accepts it); everything else as arb_qty_parse reads it.
 */
static int k8s_qty(const char *val, arb_qty_kind_t unit, const char *field, int64_t *q,
                   arb_err_t *err)
{
    int64_t milli;

    if (unit == ARB_QTY_BYTES && arb_qty_parse(val, unit, field, q, NULL) < 0 &&
        arb_qty_parse(val, ARB_QTY_MILLI, field, &milli, NULL) == 0) {
        *q = milli / 1000 + (milli % 1000 != 0);
        return 0;
    }
    return arb_qty_parse(val, unit, field, q, err);
}

/* requests or limits of one container into s (is_lim picks the side). */
static int read_rmap(kx_t *k, const sval_t *v, bool is_lim, rsum_t *s)
{
    void *it = NULL;
    struct fy_node_pair *p;
    bool is;
    int rc = sv_map(&k->x, v, &is);

    if (rc < 0 || !is)
        return rc;
    while ((p = fy_node_mapping_iterate(v->n, &it))) {
        size_t len = 0;
        const char *kt = sv_key_text(fy_node_pair_key(p), &len);
        char name[64], val[128];
        sval_t f, key;
        bool skip;
        int64_t q;

        sv_pair(&f, v, p);
        key = f;
        key.n = fy_node_pair_key(p);
        if (!kt || len >= sizeof name)
            return sv_fail(&k->x, &key, -EINVAL, "resource names are plain names under 64 bytes");
        memcpy(name, kt, len);
        name[len] = '\0';
        int unit = res_unit(k, &key, name, &skip);
        if (unit < 0)
            return unit;
        if ((rc = sv_text(&k->x, &f, val, sizeof val, false)) < 0)
            return rc;
        if (skip)
            continue;
        if ((rc = k8s_qty(val, (arb_qty_kind_t)unit, f.path, &q, k->x.err)) < 0)
            return sv_prefix(&k->x, &f, rc, false);
        k8s_res_t *r = res_slot(s, name, (arb_qty_kind_t)unit);
        if (!r)
            return sv_fail(&k->x, &f, -EINVAL, "more than %d resource names in one pod",
                           K8S_MAX_RES);
        if (is_lim)
            r->lim = q, r->has_lim = true;
        else
            r->req = q, r->has_req = true;
    }
    return 0;
}

/* One container's resources, limits-only defaulted as Kubernetes does. */
static int container_res(kx_t *k, const sval_t *c, rsum_t *out)
{
    sval_t rv, f;
    bool is;
    int rc;

    memset(out, 0, sizeof *out);
    if (!sv_get(c, "resources", &rv))
        return 0;
    if ((rc = sv_map(&k->x, &rv, &is)) < 0 || !is)
        return rc;
    if (sv_get(&rv, "limits", &f) && (rc = read_rmap(k, &f, true, out)) < 0)
        return rc;
    if (sv_get(&rv, "requests", &f) && (rc = read_rmap(k, &f, false, out)) < 0)
        return rc;
    for (int i = 0; i < out->n; i++) {
        k8s_res_t *r = &out->r[i];
        if (r->has_lim && !r->has_req)
            r->req = r->lim, r->has_req = true;
        if (!strcmp(r->name, RES_GPU) && r->has_req && r->has_lim && r->req != r->lim)
            return sv_fail(&k->x, &rv, -EINVAL,
                           "nvidia.com/gpu: request %" PRId64 " and limit %" PRId64
                           " differ; GPUs are not overcommitted (Kubernetes refuses it too)",
                           r->req, r->lim);
        if (!strcmp(r->name, RES_GPU) && !r->has_lim)
            r->lim = r->req, r->has_lim = true;
    }
    return 0;
}

static void sum_into(rsum_t *a, const rsum_t *b)
{
    for (int i = 0; i < b->n; i++) {
        k8s_res_t *r = res_slot(a, b->r[i].name, b->r[i].unit);
        if (!r)
            continue;
        r->req += b->r[i].has_req ? b->r[i].req : 0;
        r->lim += b->r[i].has_lim ? b->r[i].lim : 0;
        r->has_req |= b->r[i].has_req;
        r->has_lim |= b->r[i].has_lim;
    }
}

static void max_into(rsum_t *a, const rsum_t *b)
{
    for (int i = 0; i < b->n; i++) {
        k8s_res_t *r = res_slot(a, b->r[i].name, b->r[i].unit);
        if (!r)
            continue;
        if (b->r[i].has_req && b->r[i].req > r->req)
            r->req = b->r[i].req;
        if (b->r[i].has_lim && b->r[i].lim > r->lim)
            r->lim = b->r[i].lim;
        r->has_req |= b->r[i].has_req;
        r->has_lim |= b->r[i].has_lim;
    }
}

int64_t k8s_pod_gpus(const k8s_pod_t *p)
{
    for (int i = 0; i < p->nres; i++)
        if (!strcmp(p->res[i].name, RES_GPU))
            return p->res[i].req;
    return 0;
}

/* ---- where it may run ------------------------------------------------------------- */

static const char *const expr_keys[] = {"key", "operator", "values", NULL};

/* matchExpressions into a native term (array of expressions). */
static int read_exprs(kx_t *k, const sval_t *v, json_t *term)
{
    int n, rc = sv_seq(&k->x, v, 4096, &n);
    void *it = NULL;

    for (int i = 0; rc == 0 && i < n; i++) {
        sval_t e, f, iv;
        char key[256], op[32], val[256];
        int nv = 0;
        bool is;
        sv_item(&e, v, fy_node_sequence_iterate(v->n, &it), i);
        if ((rc = sv_map(&k->x, &e, &is)) < 0 || (rc = sv_check_keys(&k->x, &e, expr_keys)) < 0)
            return rc;
        if (!sv_get(&e, "key", &f) || (rc = k8s_text(k, &f, key, sizeof key)) < 0 || !key[0])
            return rc < 0 ? rc : sv_fail(&k->x, &e, -EINVAL, "missing key:");
        if (!sv_get(&e, "operator", &f) || (rc = k8s_text(k, &f, op, sizeof op)) < 0)
            return rc < 0 ? rc : sv_fail(&k->x, &e, -EINVAL, "missing operator:");
        json_t *vals = json_array(), *x = json_pack("{s:s,s:s}", "key", key, "operator", op);
        if (sv_get(&e, "values", &f) && (rc = sv_seq(&k->x, &f, 4096, &nv)) == 0) {
            void *vit = NULL;
            for (int j = 0; rc == 0 && j < nv; j++) {
                sv_item(&iv, &f, fy_node_sequence_iterate(f.n, &vit), j);
                if ((rc = k8s_text(k, &iv, val, sizeof val)) == 0)
                    json_array_append_new(vals, json_string(val));
            }
        }
        if (json_array_size(vals))
            json_object_set(x, "values", vals);
        json_decref(vals);
        json_array_append_new(term, x);
    }
    return rc;
}

static int read_node_affinity(kx_t *k, const sval_t *na, k8s_pod_t *p)
{
    sval_t req, terms, pref, t, f;
    int n, rc;
    void *it = NULL;

    if (sv_get(na, "requiredDuringSchedulingIgnoredDuringExecution", &req) &&
        sv_get(&req, "nodeSelectorTerms", &terms)) {
        if ((rc = sv_seq(&k->x, &terms, 4096, &n)) < 0)
            return rc;
        for (int i = 0; i < n; i++) {
            json_t *term = json_array();
            sv_item(&t, &terms, fy_node_sequence_iterate(terms.n, &it), i);
            if (sv_get(&t, "matchFields", &f) && !sv_null(&f)) {
                json_decref(term);
                return sv_fail(&k->x, &f, -EINVAL,
                               "matchFields selects nodes by their object fields, which Arbiter "
                               "nodes do not have; select by labels with matchExpressions");
            }
            if (sv_get(&t, "matchExpressions", &f) && (rc = read_exprs(k, &f, term)) < 0) {
                json_decref(term);
                return rc;
            }
            if (json_array_size(term))
                json_array_append(p->required, term);
            json_decref(term);
        }
    }
    it = NULL;
    if (sv_get(na, "preferredDuringSchedulingIgnoredDuringExecution", &pref)) {
        if ((rc = sv_seq(&k->x, &pref, 4096, &n)) < 0)
            return rc;
        for (int i = 0; i < n; i++) {
            sval_t w, pr;
            int64_t weight = 1;
            json_t *term = json_array();
            sv_item(&t, &pref, fy_node_sequence_iterate(pref.n, &it), i);
            if (sv_get(&t, "weight", &w) && (rc = k8s_int(k, &w, 1, 100, &weight)) < 0) {
                json_decref(term);
                return rc;
            }
            if (sv_get(&t, "preference", &pr) && sv_get(&pr, "matchExpressions", &f) &&
                (rc = read_exprs(k, &f, term)) < 0) {
                json_decref(term);
                return rc;
            }
            if (json_array_size(term))
                json_array_append_new(p->preferred, json_pack("{s:I,s:O}", "weight",
                                                              (json_int_t)weight, "match", term));
            json_decref(term);
        }
    }
    return 0;
}

static int read_affinity(kx_t *k, const sval_t *v, k8s_pod_t *p)
{
    static const char *const pods[] = {"podAffinity", "podAntiAffinity"};
    sval_t f, r;
    int rc;

    if (sv_get(v, "nodeAffinity", &f) && (rc = read_node_affinity(k, &f, p)) < 0)
        return rc;
    for (int i = 0; i < 2; i++) {
        if (!sv_get(v, pods[i], &f))
            continue;
        if (sv_get(&f, "requiredDuringSchedulingIgnoredDuringExecution", &r) && !sv_null(&r))
            return sv_fail(&k->x, &r, -EINVAL,
                           "%s places pods by the pods already on a node, which Arbiter cannot "
                           "honour; drop it, or keep a job's pods together with a topology "
                           "(Kueue's podset-required-topology annotation)",
                           pods[i]);
        kx_warn(k, &f, "%s preferences are not honoured (placement ignores other pods' labels)",
                pods[i]);
    }
    return 0;
}

static int read_tolerations(kx_t *k, const sval_t *v, k8s_pod_t *p)
{
    static const char *const keys[] = {"key",    "operator",          "value",
                                       "effect", "tolerationSeconds", NULL};
    int n, rc = sv_seq(&k->x, v, 4096, &n);
    void *it = NULL;

    for (int i = 0; rc == 0 && i < n; i++) {
        sval_t t, f;
        char buf[256];
        bool is;
        json_t *o = json_object();
        sv_item(&t, v, fy_node_sequence_iterate(v->n, &it), i);
        if ((rc = sv_map(&k->x, &t, &is)) < 0 || (rc = sv_check_keys(&k->x, &t, keys)) < 0) {
            json_decref(o);
            return rc;
        }
        for (int j = 0; j < 4; j++) {
            if (!sv_get(&t, keys[j], &f) || sv_null(&f))
                continue;
            if ((rc = k8s_text(k, &f, buf, sizeof buf)) < 0) {
                json_decref(o);
                return rc;
            }
            if (buf[0])
                json_object_set_new(o, keys[j], json_string(buf));
        }
        if (!json_object_get(o, "key") && !json_object_get(o, "operator"))
            json_object_set_new(o, "operator", json_string("Exists"));
        json_array_append_new(p->tolerations, o);
    }
    return rc;
}

/* ---- what it runs --------------------------------------------------------------------- */

/* Resolve $(NAME) in s against vars (name -> marked text): known names are
 * substituted, $$( is a literal $(, anything else stays as written
 * (Kubernetes' rules). *marked: a substitution left a start-time reference. */
static char *expand_refs(const char *s, const json_t *a, const json_t *b, bool *marked)
{
    arb_buf_t out = {0};

    arb_buf_puts(&out, "");
    for (; *s; s++) {
        if (s[0] == '$' && s[1] == '$' && s[2] == '(') {
            arb_buf_puts(&out, "$(");
            s += 2;
            continue;
        }
        if (s[0] == '$' && s[1] == '(') {
            const char *e = strchr(s + 2, ')');
            char name[128];
            if (e && (size_t)(e - s - 2) < sizeof name) {
                memcpy(name, s + 2, (size_t)(e - s - 2));
                name[e - s - 2] = '\0';
                json_t *v = json_object_get(b, name);
                if (!v)
                    v = json_object_get(a, name);
                if (v) {
                    const char *t = json_string_value(v);
                    if (strchr(t, WL_REF_OPEN))
                        *marked = true;
                    arb_buf_puts(&out, t);
                    s = e;
                    continue;
                }
            }
        }
        char c[2] = {*s, 0};
        arb_buf_puts(&out, c);
    }
    return out.p;
}

/* A fieldRef's value here (marked text), or NULL when it has none. */
static const char *field_ref(const char *path, const char *podname, char *buf, size_t n)
{
    static const struct {
        const char *path, *marked;
    } map[] = {
        {"spec.nodeName", "\x01"
                          "ARBITER_NODE\x02"},
        {"status.hostIP", "\x01(hostname -i 2>/dev/null | cut -d' ' -f1)\x02"},
        {"status.podIP", "\x01(hostname -i 2>/dev/null | cut -d' ' -f1)\x02"},
        {"status.podIPs", "\x01(hostname -i 2>/dev/null | cut -d' ' -f1)\x02"},
        {"metadata.uid", "\x01"
                         "ARBITER_JOB_ID\x02-\x01"
                         "ARBITER_TASK_INDEX\x02"},
        {"metadata.annotations['batch.kubernetes.io/job-completion-index']",
         "\x01"
         "JOB_COMPLETION_INDEX\x02"},
        {"metadata.labels['batch.kubernetes.io/job-completion-index']", "\x01"
                                                                        "JOB_COMPLETION_INDEX\x02"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(path, map[i].path))
            return map[i].marked;
    if (!strcmp(path, "metadata.name")) {
        snprintf(buf, n,
                 "%s-\x01"
                 "ARBITER_TASK_INDEX\x02",
                 podname[0] ? podname : "pod");
        return buf;
    }
    if (!strcmp(path, "metadata.namespace")) {
        snprintf(buf, n, "default");
        return buf;
    }
    return NULL;
}

static int read_env(kx_t *k, const sval_t *v, const json_t *ctx, k8s_pod_t *p, const sval_t *meta)
{
    int n, rc = sv_seq(&k->x, v, 4096, &n);
    void *it = NULL;
    json_t *vars = json_object(); /* everything so far, for $(VAR) */

    json_object_update(vars, (json_t *)ctx);
    for (int i = 0; rc == 0 && i < n; i++) {
        sval_t e, f, vf, fr;
        char name[256], path[256], buf[512];
        static char val[8192];
        const char *marked = NULL;
        sv_item(&e, v, fy_node_sequence_iterate(v->n, &it), i);
        if (!sv_get(&e, "name", &f) || (rc = k8s_text(k, &f, name, sizeof name)) < 0 || !name[0]) {
            rc = rc < 0 ? rc : sv_fail(&k->x, &e, -EINVAL, "an env entry needs name:");
            break;
        }
        if (sv_get(&e, "valueFrom", &vf)) {
            if (sv_get(&vf, "fieldRef", &fr) && sv_get(&fr, "fieldPath", &f) &&
                k8s_text(k, &f, path, sizeof path) == 0) {
                char lbuf[256];
                marked = field_ref(path, p->name, buf, sizeof buf);
                const char *lb = strstr(path, "['"), *rb = strstr(path, "']");
                if (!marked && !strncmp(path, "metadata.", 9) && lb && rb && rb > lb + 2 &&
                    (size_t)(rb - lb - 2) < sizeof lbuf) { /* a label or annotation */
                    char key[256], ck[300];
                    memcpy(key, lb + 2, (size_t)(rb - lb - 2));
                    key[rb - lb - 2] = '\0';
                    const char *what = !strncmp(path + 9, "labels", 6) ? "labels" : "annotations";
                    snprintf(ck, sizeof ck, "meta:%s", key);
                    json_t *cv = json_object_get(ctx, ck); /* set by the kind (JobSet, LWS) */
                    if (cv)
                        snprintf(buf, sizeof buf, "%s", json_string_value(cv));
                    if (cv || k8s_meta(meta, what, key, buf, sizeof buf))
                        marked = buf;
                }
                if (!marked) {
                    kx_warn(k, &f, "%s: fieldRef '%s' has no value here; %s is unset", name, path,
                            name);
                    continue;
                }
            } else {
                kx_warn(k, &vf,
                        "%s: valueFrom (a ConfigMap, Secret or resource field) is not read; %s "
                        "is unset",
                        name, name);
                continue;
            }
        } else if (sv_get(&e, "value", &f)) {
            if ((rc = arg_text(k, &f, val, sizeof val)) < 0)
                break;
            marked = val;
        } else {
            marked = "";
        }
        bool dyn = strchr(marked, WL_REF_OPEN) != NULL;
        char *x = expand_refs(marked, vars, NULL, &dyn);
        if (!x) {
            rc = sv_oom(&k->x, &e);
            break;
        }
        json_object_del(p->env, name);
        json_object_del(p->dyn, name);
        json_object_set_new(dyn ? p->dyn : p->env, name, json_string(x));
        json_object_set_new(vars, name, json_string(x));
        free(x);
    }
    json_decref(vars);
    return rc;
}

static int read_argv(kx_t *k, const sval_t *c, const json_t *ctx, k8s_pod_t *p)
{
    static const char *const parts[] = {"command", "args"};
    json_t *vars = json_object();
    int rc = 0;

    json_object_update(vars, (json_t *)ctx);
    json_object_update(vars, p->env);
    json_object_update(vars, p->dyn);
    for (int pi = 0; pi < 2 && rc == 0; pi++) {
        sval_t f, iv;
        int n;
        void *it = NULL;
        if (!sv_get(c, parts[pi], &f))
            continue;
        if ((rc = sv_seq(&k->x, &f, 4096, &n)) < 0)
            break;
        for (int i = 0; i < n; i++) {
            static char val[WL_MAX_SCRIPT];
            sv_item(&iv, &f, fy_node_sequence_iterate(f.n, &it), i);
            if ((rc = arg_text(k, &iv, val, sizeof val)) < 0)
                break;
            char *x = expand_refs(val, vars, NULL, &p->expand);
            if (!x) {
                rc = sv_oom(&k->x, &iv);
                break;
            }
            json_array_append_new(p->argv, json_string(x));
            free(x);
        }
    }
    json_decref(vars);
    return rc;
}

/* Fields of a container, and what becomes of those not read. */
static const char *const ctr_quiet[] = {"name",
                                        "image",
                                        "imagePullPolicy",
                                        "command",
                                        "args",
                                        "env",
                                        "resources",
                                        "workingDir",
                                        "ports",
                                        "readinessProbe",
                                        "stdin",
                                        "stdinOnce",
                                        "tty",
                                        "terminationMessagePath",
                                        "terminationMessagePolicy",
                                        "restartPolicy",
                                        "resizePolicy",
                                        NULL};

static bool in_list(const char *const *l, const char *s, size_t n)
{
    for (; *l; l++)
        if (strlen(*l) == n && !memcmp(*l, s, n))
            return true;
    return false;
}

static void warn_rest(kx_t *k, const sval_t *v, const char *const *quiet, const char *what)
{
    void *it = NULL;
    struct fy_node_pair *pr;

    while ((pr = fy_node_mapping_iterate(v->n, &it))) {
        size_t len = 0;
        const char *kt = sv_key_text(fy_node_pair_key(pr), &len);
        sval_t f;
        if (!kt || in_list(quiet, kt, len))
            continue;
        sv_pair(&f, v, pr);
        f.n = fy_node_pair_key(pr);
        kx_warn(k, &f, "not honoured by Arbiter (%s); ignored", what);
    }
}

/*
 * HAMi's vGPU resources (Project-HAMi): nvidia.com/gpu counts vGPUs, each on
 * its own device, nvidia.com/gpucores and nvidia.com/gpumem-percentage the
 * percent of that device's cores and memory, nvidia.com/gpumem its memory in
 * MiB (no nvidia.com/gpu: one vGPU, HAMi's default). One vGPU is an Arbiter GPU share (percent x 10
 * thousandths; memory in MiB alone shares by memory, as KAI's gpu-memory); a vGPU on several
 * devices is an error, as Arbiter shares one device per task. The names are taken out of the
 * extended resources (no node offers them).
 */
static int hami_share(kx_t *k, const sval_t *at, k8s_pod_t *p)
{
    static const char *const names[] = {"nvidia.com/gpucores", "nvidia.com/gpumem-percentage",
                                        "nvidia.com/gpumem"};
    int64_t v[3] = {0, 0, 0};
    bool any = false;
    int n = 0;

    for (int i = 0; i < p->nres; i++) {
        int which = -1;
        for (int w = 0; w < 3; w++)
            if (!strcmp(p->res[i].name, names[w]))
                which = w;
        if (which < 0) {
            p->res[n++] = p->res[i];
            continue;
        }
        v[which] = p->res[i].req;
        any = true;
    }
    if (!any)
        return 0;
    p->nres = n;
    int64_t gpus = k8s_pod_gpus(p);
    if (gpus > 1) /* none given: one vGPU, HAMi's default */
        return sv_fail(&k->x, at, -EINVAL,
                       "HAMi's nvidia.com/gpucores, gpumem and gpumem-percentage with "
                       "nvidia.com/gpu: %" PRId64
                       " ask for a share of each of several GPUs, and Arbiter shares one GPU per "
                       "task; ask for nvidia.com/gpu: 1 with them, or drop them for whole GPUs",
                       gpus);
    for (int w = 0; w < 2; w++)
        if (v[w] < 0 || v[w] > 100)
            return sv_fail(&k->x, at, -EINVAL, "%s: %" PRId64 " is not a percent (1..100)",
                           names[w], v[w]);
    if (p->share_milli || p->share_mib)
        return sv_fail(&k->x, at, -EINVAL,
                       "a GPU share is given twice (KAI's gpu-fraction or gpu-memory and HAMi's "
                       "nvidia.com/gpucores or gpumem); keep one");
    int64_t pct = v[0] > v[1] ? v[0] : v[1];
    if (pct >= 100) /* all of its cores or memory: the whole device */
        return 0;
    p->share_milli = (int)(pct * 10);
    p->share_mib = v[2];
    return 0;
}

/* The main container: the one named by a Kubeflow kind, else the first. */
static int main_container(kx_t *k, const sval_t *ctrs, int n, const sval_t *meta)
{
    /* the container the pod names (kubectl's default-container, or the one KAI gives the GPU
     * fraction to), else the operator's (pytorch, tensorflow, ...), else the first */
    char named[2][K8S_NAME] = {"", ""};
    const char *want[3] = {NULL, NULL, k->mainctr};
    if (meta && k8s_meta(meta, "annotations", "kubectl.kubernetes.io/default-container", named[0],
                         sizeof named[0]))
        want[0] = named[0];
    if (meta &&
        k8s_meta(meta, "annotations", "gpu-fraction-container-name", named[1], sizeof named[1]))
        want[1] = named[1];
    for (int w = 0; w < 3; w++) {
        void *it = NULL;
        for (int i = 0; want[w] && i < n; i++) {
            sval_t c, f;
            char name[128];
            sv_item(&c, ctrs, fy_node_sequence_iterate(ctrs->n, &it), i);
            if (sv_get(&c, "name", &f) && k8s_text(k, &f, name, sizeof name) == 0 &&
                !strcmp(name, want[w]))
                return i;
        }
    }
    return 0;
}

static int read_containers(kx_t *k, const sval_t *spec, const json_t *ctx, k8s_pod_t *p,
                           const sval_t *meta)
{
    sval_t ctrs, inits, c, f;
    int n = 0, ni = 0, rc, mainix;
    rsum_t total = {0}, one, initmax = {0};
    void *it = NULL;

    if (!sv_get(spec, "containers", &ctrs))
        return sv_fail(&k->x, spec, -EINVAL, "missing containers: (a pod runs at least one)");
    if ((rc = sv_seq(&k->x, &ctrs, 256, &n)) < 0)
        return rc;
    if (n == 0)
        return sv_fail(&k->x, &ctrs, -EINVAL, "containers: is empty; a pod runs at least one");
    mainix = main_container(k, &ctrs, n, meta);
    for (int i = 0; i < n; i++) {
        bool is;
        sv_item(&c, &ctrs, fy_node_sequence_iterate(ctrs.n, &it), i);
        if ((rc = sv_map(&k->x, &c, &is)) < 0)
            return rc;
        if ((rc = container_res(k, &c, &one)) < 0)
            return rc;
        sum_into(&total, &one);
        if (i != mainix) {
            kx_warn(k, &c,
                    "container %d is not run: an Arbiter task runs its pod's main container "
                    "(its resources are counted)",
                    i);
            continue;
        }
        if (sv_get(&c, "image", &f) && !sv_null(&f))
            wl_warn(k->w,
                    "%s: images are not pulled: each task runs its container's command on the "
                    "node as it is",
                    k->x.file);
        if ((rc = read_env(k, sv_get(&c, "env", &f) ? &f : &(sval_t){0}, ctx, p, meta)) < 0)
            return rc;
        if (sv_get(&c, "envFrom", &f))
            kx_warn(k, &f, "envFrom (ConfigMaps, Secrets) is not read");
        if ((rc = read_argv(k, &c, ctx, p)) < 0)
            return rc;
        if (!sv_get(&c, "command", &f) && json_array_size(p->argv))
            kx_warn(k, &c,
                    "args without command: the image's entrypoint is unknown here, so args run "
                    "as the command");
        if (sv_get(&c, "workingDir", &f) && (rc = k8s_text(k, &f, p->dir, sizeof p->dir)) < 0)
            return rc;
        if (sv_get(&c, "ports", &f) && fy_node_is_sequence(f.n)) {
            sval_t pv, cp;
            sv_item(&pv, &f, fy_node_sequence_get_by_index(f.n, 0), 0);
            int64_t port;
            if (sv_get(&pv, "containerPort", &cp) && k8s_int(k, &cp, 1, 65535, &port) == 0)
                p->port = (int)port;
        }
        if (sv_get(&c, "readinessProbe", &f)) {
            sval_t hg = {0}, hp;
            if (sv_get(&f, "httpGet", &hg) && sv_get(&hg, "path", &hp))
                k8s_text(k, &hp, p->health, sizeof p->health);
            int64_t port;
            if (sv_get(&hg, "port", &hp) && hp.n && fy_node_is_scalar(hp.n) &&
                k8s_int(k, &hp, 1, 65535, &port) == 0)
                p->probe_port = (int)port;
        }
        warn_rest(k, &c, ctr_quiet, "container fields other than command, args, env, resources");
    }
    it = NULL;
    if (sv_get(spec, "initContainers", &inits) && (rc = sv_seq(&k->x, &inits, 256, &ni)) < 0)
        return rc;
    for (int i = 0; i < ni; i++) {
        char rp[32] = "";
        sv_item(&c, &inits, fy_node_sequence_iterate(inits.n, &it), i);
        if ((rc = container_res(k, &c, &one)) < 0)
            return rc;
        if (sv_get(&c, "restartPolicy", &f))
            k8s_text(k, &f, rp, sizeof rp);
        if (!strcmp(rp, "Always")) /* a sidecar: runs beside the main containers */
            sum_into(&total, &one);
        else
            max_into(&initmax, &one);
    }
    if (ni)
        kx_warn(k, &inits, "init containers are not run (their resources are counted)");
    max_into(&total, &initmax);
    if (sv_get(spec, "overhead", &f) && (rc = read_rmap(k, &f, false, &one)) == 0)
        sum_into(&total, &one);
    p->nres = total.n;
    memcpy(p->res, total.r, sizeof total.r);
    return hami_share(k, &ctrs, p);
}

/* ---- the pod ------------------------------------------------------------------------- */

static const char *const spec_quiet[] = {"containers",
                                         "initContainers",
                                         "nodeSelector",
                                         "affinity",
                                         "tolerations",
                                         "priorityClassName",
                                         "priority",
                                         "terminationGracePeriodSeconds",
                                         "activeDeadlineSeconds",
                                         "restartPolicy",
                                         "schedulerName",
                                         "overhead",
                                         "serviceAccountName",
                                         "serviceAccount",
                                         "automountServiceAccountToken",
                                         "dnsPolicy",
                                         "dnsConfig",
                                         "enableServiceLinks",
                                         "imagePullSecrets",
                                         "hostname",
                                         "subdomain",
                                         "setHostnameAsFQDN",
                                         "preemptionPolicy",
                                         "runtimeClassName",
                                         "topologySpreadConstraints",
                                         "nodeName",
                                         "securityContext",
                                         NULL};

static int read_spec(kx_t *k, const sval_t *spec, const json_t *ctx, k8s_pod_t *p,
                     const sval_t *meta)
{
    sval_t f;
    int rc;
    int64_t n;

    if ((rc = read_containers(k, spec, ctx, p, meta)) < 0)
        return rc;
    if (sv_get(spec, "nodeName", &f) && !sv_null(&f))
        return sv_fail(&k->x, &f, -EINVAL,
                       "nodeName pins the pod to one node, bypassing the scheduler; drop it, or "
                       "use nodeSelector with a label that node carries");
    if (sv_get(spec, "resourceClaims", &f) && !sv_null(&f) &&
        !(fy_node_is_sequence(f.n) && fy_node_sequence_item_count(f.n) == 0))
        return sv_fail(&k->x, &f, -EINVAL,
                       "resourceClaims (dynamic resource allocation) cannot be honoured: Arbiter "
                       "places devices by their resource names; drop the claims and ask for the "
                       "devices in resources (nvidia.com/gpu: 1, or a MIG profile such as "
                       "nvidia.com/mig-1g.5gb: 1)");
    if (sv_get(spec, "nodeSelector", &f)) {
        void *it = NULL;
        struct fy_node_pair *pr;
        bool is;
        if ((rc = sv_map(&k->x, &f, &is)) < 0)
            return rc;
        while (is && (pr = fy_node_mapping_iterate(f.n, &it))) {
            size_t len = 0;
            const char *kt = sv_key_text(fy_node_pair_key(pr), &len);
            char key[256], val[256];
            sval_t iv;
            sv_pair(&iv, &f, pr);
            if (!kt || len >= sizeof key)
                return sv_fail(&k->x, &iv, -EINVAL, "label keys are plain names");
            memcpy(key, kt, len);
            key[len] = '\0';
            if ((rc = k8s_text(k, &iv, val, sizeof val)) < 0)
                return rc;
            json_object_set_new(p->selector, key, json_string(val));
        }
    }
    if (sv_get(spec, "affinity", &f) && (rc = read_affinity(k, &f, p)) < 0)
        return rc;
    if (sv_get(spec, "tolerations", &f) && (rc = read_tolerations(k, &f, p)) < 0)
        return rc;
    if (sv_get(spec, "topologySpreadConstraints", &f) && fy_node_is_sequence(f.n)) {
        int cnt = fy_node_sequence_item_count(f.n);
        for (int i = 0; i < cnt; i++) {
            sval_t t, w;
            char buf[64] = "";
            sv_item(&t, &f, fy_node_sequence_get_by_index(f.n, i), i);
            if (sv_get(&t, "whenUnsatisfiable", &w))
                k8s_text(k, &w, buf, sizeof buf);
            if (!strcmp(buf, "DoNotSchedule"))
                return sv_fail(&k->x, &t, -EINVAL,
                               "a topology spread with whenUnsatisfiable: DoNotSchedule cannot be "
                               "honoured (Arbiter does not spread by other pods); use "
                               "ScheduleAnyway or drop it");
            kx_warn(k, &t, "topology spread (ScheduleAnyway) is not honoured");
        }
    }
    if (sv_get(spec, "priorityClassName", &f) &&
        (rc = k8s_text(k, &f, p->prio, sizeof p->prio)) < 0)
        return rc;
    if (sv_get(spec, "terminationGracePeriodSeconds", &f)) {
        if ((rc = k8s_int(k, &f, 0, INT64_MAX, &n)) < 0)
            return rc;
        if (n > 3600) {
            kx_warn(k, &f, "terminationGracePeriodSeconds %" PRId64 " is capped at 3600", n);
            n = 3600;
        }
        p->grace = (int)n;
    }
    if (sv_get(spec, "activeDeadlineSeconds", &f) &&
        (rc = k8s_int(k, &f, 1, INT64_MAX, &p->deadline_s)) < 0)
        return rc;
    if (sv_get(spec, "securityContext", &f) && !sv_null(&f))
        kx_warn(k, &f, "securityContext is not applied (tasks run as the agent's task user)");
    warn_rest(k, spec, spec_quiet, "pod fields Arbiter does not model");
    return 0;
}

/* Template labels and annotations: Kueue, KAI, Volcano. */
static int read_meta(kx_t *k, const sval_t *meta, k8s_pod_t *p)
{
    char buf[K8S_NAME];
    sval_t f;
    int rc;

    if (sv_get(meta, "name", &f) && (rc = k8s_text(k, &f, p->name, sizeof p->name)) < 0)
        return rc;
    static const char *const qlabels[] = {"kueue.x-k8s.io/queue-name", "kai.scheduler/queue",
                                          "runai/queue", NULL};
    for (int i = 0; qlabels[i]; i++)
        if (k8s_meta(meta, "labels", qlabels[i], buf, sizeof buf) && buf[0]) {
            snprintf(p->queue, sizeof p->queue, "%s", buf);
            break;
        }
    if (!p->queue[0] &&
        k8s_meta(meta, "annotations", "scheduling.volcano.sh/queue-name", buf, sizeof buf))
        snprintf(p->queue, sizeof p->queue, "%s", buf);
    if (k8s_meta(meta, "annotations", "kueue.x-k8s.io/podset-required-topology", buf, sizeof buf))
        snprintf(p->topo_req, sizeof p->topo_req, "%s", buf);
    if (k8s_meta(meta, "annotations", "kueue.x-k8s.io/podset-preferred-topology", buf, sizeof buf))
        snprintf(p->topo_pref, sizeof p->topo_pref, "%s", buf);
    if (k8s_meta(meta, "annotations", "kueue.x-k8s.io/podset-slice-required-topology", buf,
                 sizeof buf)) {
        sv_get(meta, "annotations", &f);
        return sv_fail(&k->x, &f, -EINVAL,
                       "kueue.x-k8s.io/podset-slice-required-topology '%s' (each slice of "
                       "podset-slice-size pods within one domain) cannot be honoured: Arbiter "
                       "keeps a whole group within one domain; drop the slice annotations, or "
                       "give the group podset-required-topology at the slice's level",
                       buf);
    }
    if (k8s_meta(meta, "labels", "kueue.x-k8s.io/pod-group-name", buf, sizeof buf) ||
        k8s_meta(meta, "annotations", "scheduling.k8s.io/group-name", buf, sizeof buf))
        snprintf(p->podgroup, sizeof p->podgroup, "%s", buf);
    if (k8s_meta(meta, "annotations", "kueue.x-k8s.io/pod-group-total-count", buf, sizeof buf))
        p->podgroup_total = atoi(buf);
    if (k8s_meta(meta, "annotations", "gpu-fraction", buf, sizeof buf)) {
        int64_t m;
        sv_get(meta, "annotations", &f);
        if (arb_qty_parse(buf, ARB_QTY_MILLI, "gpu-fraction", &m, NULL) < 0 || m < 1 || m > 1000)
            return sv_fail(&k->x, &f, -EINVAL,
                           "gpu-fraction '%s': give a share of one GPU, 0 < x <= 1 (\"0.5\")", buf);
        p->share_milli = m == 1000 ? 0 : (int)m;
    }
    if (k8s_meta(meta, "annotations", "gpu-memory", buf, sizeof buf)) {
        int64_t mib;
        sv_get(meta, "annotations", &f);
        /* KAI: MiB as a bare number ("2000"), or a quantity ("20Gi"). */
        char q[K8S_NAME + 8];
        snprintf(q, sizeof q, "%s%s", buf, strspn(buf, "0123456789") == strlen(buf) ? "Mi" : "");
        if (arb_qty_parse(q, ARB_QTY_MIB, "gpu-memory", &mib, NULL) < 0 || mib < 1)
            return sv_fail(&k->x, &f, -EINVAL,
                           "gpu-memory '%s': give GPU memory in MiB (\"2000\") or a quantity "
                           "(\"20Gi\")",
                           buf);
        p->share_mib = mib;
    }
    /* KAI: the priorityClassName label (spec.priorityClassName, read later, wins) */
    if (k8s_meta(meta, "labels", "priorityClassName", buf, sizeof buf))
        snprintf(p->prio, sizeof p->prio, "%s", buf);
    /* HAMi: the GPU models the pod may get, or must not get */
    if (k8s_meta(meta, "annotations", "nvidia.com/use-gputype", buf, sizeof buf))
        snprintf(p->gpu_models, sizeof p->gpu_models, "%s", buf);
    if (k8s_meta(meta, "annotations", "nvidia.com/nouse-gputype", buf, sizeof buf)) {
        sv_get(meta, "annotations", &f);
        return sv_fail(&k->x, &f, -EINVAL,
                       "nvidia.com/nouse-gputype '%s' (GPU models to avoid) cannot be honoured: "
                       "Arbiter takes the models a pod may get; give them in "
                       "nvidia.com/use-gputype",
                       buf);
    }
    if (k8s_meta(meta, "annotations", "gpu-fraction-num-devices", buf, sizeof buf) &&
        atoi(buf) > 1) {
        sv_get(meta, "annotations", &f);
        return sv_fail(&k->x, &f, -EINVAL,
                       "gpu-fraction-num-devices %s: a fraction of several GPUs per pod is not "
                       "supported; ask for whole GPUs (nvidia.com/gpu) or one fraction",
                       buf);
    }
    return 0;
}

int k8s_pod_read(kx_t *k, const sval_t *v, const json_t *ctx, k8s_pod_t *p)
{
    sval_t meta = {0}, spec;
    bool is;
    int rc;

    memset(p, 0, sizeof *p);
    p->grace = -1;
    p->selector = json_object();
    p->required = json_array();
    p->preferred = json_array();
    p->tolerations = json_array();
    p->argv = json_array();
    p->env = json_object();
    p->dyn = json_object();
    if (!p->selector || !p->required || !p->preferred || !p->tolerations || !p->argv || !p->env ||
        !p->dyn)
        return sv_oom(&k->x, v);
    if ((rc = sv_map(&k->x, v, &is)) < 0)
        return rc;
    if (!is)
        return sv_fail(&k->x, v, -EINVAL, "a pod template needs spec.containers");
    if (sv_get(v, "metadata", &meta) && (rc = read_meta(k, &meta, p)) < 0)
        return rc;
    if (!sv_get(v, "spec", &spec))
        return sv_fail(&k->x, v, -EINVAL, "missing spec: (the pod's containers)");
    if ((rc = sv_map(&k->x, &spec, &is)) < 0)
        return rc;
    if (!is)
        return sv_fail(&k->x, &spec, -EINVAL, "spec: is empty; a pod needs containers");
    return read_spec(k, &spec, ctx, p, &meta);
}

void k8s_pod_free(k8s_pod_t *p)
{
    json_decref(p->selector);
    json_decref(p->required);
    json_decref(p->preferred);
    json_decref(p->tolerations);
    json_decref(p->argv);
    json_decref(p->env);
    json_decref(p->dyn);
    memset(p, 0, sizeof *p);
}

/* ---- native output --------------------------------------------------------------------- */

json_t *k8s_pod_resources(const k8s_pod_t *p)
{
    json_t *req = json_object(), *lim = json_object();
    char buf[64];

    for (int i = 0; i < p->nres; i++) {
        const k8s_res_t *r = &p->res[i];
        bool gpu = !strcmp(r->name, RES_GPU);
        if (gpu && p->share_milli) /* KAI's fraction replaces the whole GPU */
            continue;
        if (r->has_req && (r->req || gpu)) {
            arb_qty_format(r->req, r->unit, buf, sizeof buf);
            if (!(gpu && r->req == 0))
                json_object_set_new(req, r->name, json_string(buf));
        }
        /* limits above requests only for cpu and memory; the rest are not overcommitted */
        if (r->has_lim && r->lim >= r->req && r->lim &&
            (!strcmp(r->name, "cpu") || !strcmp(r->name, "memory") || gpu)) {
            arb_qty_format(r->lim, r->unit, buf, sizeof buf);
            json_object_set_new(lim, r->name, json_string(buf));
        }
    }
    if (p->share_milli || p->share_mib) {
        snprintf(buf, sizeof buf, "%dm", p->share_milli ? p->share_milli : 1);
        json_object_del(req, RES_GPU);
        json_object_del(lim, RES_GPU);
        json_object_set_new(req, "arbiter.io/gpu-share", json_string(buf));
        if (p->share_mib) {
            snprintf(buf, sizeof buf, "%" PRId64 "Mi", p->share_mib);
            json_object_set_new(req, "nvidia.com/gpu-memory", json_string(buf));
        }
    }
    return json_pack("{s:o,s:o}", "requests", req, "limits", lim);
}

json_t *k8s_pod_group(kx_t *k, const k8s_pod_t *p, const char *name, int replicas)
{
    json_t *g = json_pack("{s:s,s:i,s:o}", "name", name, "replicas", replicas, "resources",
                          k8s_pod_resources(p));
    const char *key = p->topo_req[0] ? p->topo_req : p->topo_pref;

    if (g && key[0]) {
        const char *level = k8s_topo_level(key);
        if (level)
            json_object_set_new(g, "topology",
                                json_pack("{s:s,s:s}", "level", level, "mode",
                                          p->topo_req[0] ? "required" : "preferred"));
    }
    (void)k;
    return g;
}
