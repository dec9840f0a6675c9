/*
 * wl.c: what the workload translators share (wl.h): telling a file's kind
 * from its first lines, collecting warnings and jobs, shell quoting, and
 * the launcher command that lets one Arbiter job's task groups run
 * different commands with the environment their original system sets.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libfyaml.h>

#include "spec/sval.h"
#include "spec/wl.h"

/* Any YAML document of buf whose root has apiVersion: a manifest written in
 * flow style or indented, which a look at the lines misses. */
static bool yaml_has_api(const char *buf, size_t len)
{
    sv_doc_t d;
    bool found = false;
    int docs = 0;

    if (sv_docs_open("detect", buf, len, &d, NULL) < 0)
        return false;
    while (!found && docs++ < 64 && sv_docs_next(&d, "detect", NULL) > 0) {
        struct fy_node *root = fy_document_root(d.doc);
        found = root && fy_node_is_mapping(root) &&
                fy_node_mapping_lookup_by_string(root, "apiVersion", FY_NT) != NULL;
    }
    sv_doc_close(&d);
    return found;
}

/* ---- what a file is ------------------------------------------------------------ */

/* The line at p (up to len) without its newline: *n bytes; the next line's start. */
static const char *line_at(const char *p, const char *end, size_t *n)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    *n = (size_t)((nl ? nl : end) - p);
    return nl ? nl + 1 : end;
}

static bool starts(const char *p, size_t n, const char *pre)
{
    size_t k = strlen(pre);
    return n >= k && memcmp(p, pre, k) == 0;
}

/* A top-level YAML key "key:" at column 0 (or "key" in JSON, anywhere). */
static bool has_top_key(const char *buf, size_t len, const char *key)
{
    const char *p = buf, *end = buf + len;
    size_t k = strlen(key), n;
    char q[80];

    while (p < end) {
        const char *l = p;
        p = line_at(p, end, &n);
        if (n > k && memcmp(l, key, k) == 0 && (l[k] == ':' || l[k] == ' '))
            return true;
    }
    snprintf(q, sizeof q, "\"%s\"", key);
    return memmem(buf, len, q, strlen(q)) != NULL && memchr(buf, '{', len) != NULL;
}

wl_kind_t wl_detect(const char *buf, size_t len)
{
    const char *p = buf, *end = buf + len;
    size_t n;
    bool shebang = false;

    /* Slurm: a #! line, or #SBATCH among the leading comments. */
    while (p < end) {
        const char *l = p;
        p = line_at(p, end, &n);
        while (n && (l[n - 1] == '\r' || l[n - 1] == ' '))
            n--;
        size_t i = 0;
        while (i < n && (l[i] == ' ' || l[i] == '\t'))
            i++;
        if (i == n)
            continue;
        if (l == buf && starts(l, n, "#!")) {
            shebang = true;
            continue;
        }
        if (starts(l + i, n - i, "#SBATCH"))
            return WL_SBATCH;
        if (l[i] != '#')
            break;
    }
    if (shebang)
        return WL_SBATCH;
    if (has_top_key(buf, len, "apiVersion"))
        return WL_K8S;
    /* kind: with a Kubernetes kind name (capitalised) and no apiVersion: a
     * manifest missing its apiVersion, told so by k8s.c. */
    p = buf;
    while (p < end) {
        const char *l = p;
        p = line_at(p, end, &n);
        if (starts(l, n, "kind:")) {
            size_t i = 5;
            while (i < n && (l[i] == ' ' || l[i] == '"' || l[i] == '\''))
                i++;
            if (i < n && isupper((unsigned char)l[i]))
                return WL_K8S;
        }
    }
    /* Native: a YAML mapping or a JSON object. A shell script without #!
     * and without #SBATCH is neither. */
    p = buf;
    while (p < end) {
        const char *l = p;
        p = line_at(p, end, &n);
        size_t i = 0;
        while (i < n && (l[i] == ' ' || l[i] == '\t' || l[i] == '\r'))
            i++;
        if (i == n || l[i] == '#' || starts(l + i, n - i, "---"))
            continue;
        if (l[i] == '{')
            return yaml_has_api(buf, len) ? WL_K8S : WL_NATIVE;
        for (size_t k = i; k < n; k++) {
            if (l[k] == ':' && (k + 1 == n || l[k + 1] == ' ' || l[k + 1] == '\r'))
                return i > 0 && yaml_has_api(buf, len) ? WL_K8S : WL_NATIVE;
            if (l[k] == ' ' || l[k] == '=' || l[k] == '(' || l[k] == ';')
                break;
        }
        return WL_UNKNOWN;
    }
    return WL_NATIVE; /* empty: the native reader says so */
}

const char *wl_kind_name(wl_kind_t k)
{
    static const char *const names[] = {"an Arbiter job spec", "a Kubernetes manifest",
                                        "a Slurm batch script", "unknown"};
    return (unsigned)k < 4 ? names[k] : "unknown";
}

/* ---- jobs and warnings --------------------------------------------------------------- */

int wl_init(wl_t *w, const char *file, arb_err_t *err)
{
    memset(w, 0, sizeof *w);
    w->file = file ? file : "job";
    w->err = err;
    w->jobs = json_array();
    w->warnings = json_array();
    w->sources = json_array();
    if (!w->jobs || !w->warnings || !w->sources) {
        wl_free(w);
        return arb_errf(err, -ENOMEM, "out of memory");
    }
    return 0;
}

void wl_free(wl_t *w)
{
    json_decref(w->jobs);
    json_decref(w->warnings);
    json_decref(w->sources);
    w->jobs = w->warnings = w->sources = NULL;
}

void wl_warn(wl_t *w, const char *fmt, ...)
{
    char msg[640];
    va_list ap;
    size_t i;
    json_t *s;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_array_foreach(w->warnings, i, s) if (strcmp(json_string_value(s), msg) == 0) return;
    if (json_array_size(w->warnings) >= WL_MAX_WARNINGS) {
        w->nwarn_lost++;
        return;
    }
    json_array_append_new(w->warnings, json_string(msg));
}

int wl_add_job(wl_t *w, json_t *spec, json_t *src)
{
    if (!spec) {
        json_decref(src);
        return arb_errf(w->err, -ENOMEM, "out of memory");
    }
    json_array_append_new(w->sources, src ? src : json_object());
    if (json_array_size(w->jobs) >= WL_MAX_JOBS) {
        json_decref(spec);
        return arb_errf(w->err, -ENOSPC, "%s: more than %d jobs from one file; split it", w->file,
                        WL_MAX_JOBS);
    }
    json_array_append_new(w->jobs, spec);
    return 0;
}

int wl_translate(wl_t *w, const char *buf, size_t len, const wl_sbatch_cli_t *cli)
{
    switch (wl_detect(buf, len)) {
    case WL_K8S:
        return wl_k8s(w, buf, len);
    case WL_SBATCH:
        return wl_sbatch(w, buf, len, cli);
    case WL_NATIVE:
        return -ENOTSUP;
    default:
        return arb_errf(w->err, -EINVAL,
                        "%s: neither an Arbiter job spec (YAML or JSON keys), a Kubernetes "
                        "manifest (apiVersion: and kind:) nor a Slurm batch script (#! and "
                        "#SBATCH lines); its first line reads like a shell command: add "
                        "#!/bin/bash and #SBATCH options to submit it as a batch script",
                        w->file);
    }
}

/* ---- quoting ---------------------------------------------------------------------- */

void wl_buf_shq(arb_buf_t *b, const char *s)
{
    arb_buf_put(b, "'", 1);
    for (const char *q; (q = strchr(s, '\'')); s = q + 1) {
        arb_buf_put(b, s, (size_t)(q - s));
        arb_buf_put(b, "'\\''", 4);
    }
    arb_buf_put(b, s, strlen(s));
    arb_buf_put(b, "'", 1);
}

void wl_buf_dq(arb_buf_t *b, const char *s)
{
    arb_buf_put(b, "\"", 1);
    for (; *s; s++) {
        if (*s == WL_REF_OPEN) { /* a reference made by the translator: ${NAME} */
            const char *e = strchr(s, WL_REF_CLOSE);
            if (e && s[1] == '(') { /* a command's output: $(...) */
                arb_buf_put(b, "$", 1);
                arb_buf_put(b, s + 1, (size_t)(e - s - 1));
                s = e;
                continue;
            }
            if (e) {
                arb_buf_put(b, "${", 2);
                arb_buf_put(b, s + 1, (size_t)(e - s - 1));
                arb_buf_put(b, "}", 1);
                s = e;
                continue;
            }
        }
        if (*s == '"' || *s == '\\' || *s == '$' || *s == '`')
            arb_buf_put(b, "\\", 1);
        arb_buf_put(b, s, 1);
    }
    arb_buf_put(b, "\"", 1);
}

void wl_job_name(char *out, size_t n, const char *s)
{
    size_t k = 0;

    for (; s && *s && k + 1 < n && k < 80; s++)
        out[k++] = isalnum((unsigned char)*s) || *s == '-' || *s == '_' || *s == '.' ? *s : '-';
    if (k == 0 && n > 3)
        memcpy(out, "job", 3), k = 3;
    out[k < n ? k : n - 1] = '\0';
}

/* ---- the launcher ------------------------------------------------------------------- */

static bool simple(const wl_run_t *r)
{
    return !r->dir && !r->argv_expand && (!r->dyn || json_object_size(r->dyn) == 0);
}

static void run_body(arb_buf_t *b, const wl_run_t *r, const char *indent)
{
    const char *k;
    json_t *v;
    size_t i;

    json_object_foreach(r->env, k, v)
    {
        arb_buf_printf(b, "%sexport %s=", indent, k);
        wl_buf_shq(b, json_string_value(v) ? json_string_value(v) : "");
        arb_buf_puts(b, "\n");
    }
    json_object_foreach(r->dyn, k, v)
    {
        arb_buf_printf(b, "%sexport %s=", indent, k);
        wl_buf_dq(b, json_string_value(v) ? json_string_value(v) : "");
        arb_buf_puts(b, "\n");
    }
    if (r->dir) {
        arb_buf_printf(b, "%scd ", indent);
        wl_buf_shq(b, r->dir);
        arb_buf_puts(b, " || exit 1\n");
    }
    if (!r->argv || json_array_size(r->argv) == 0) {
        arb_buf_printf(b, "%secho 'arbiter: group ", indent);
        arb_buf_puts(b, r->group);
        arb_buf_puts(b, " has no command (images are not run: give command:)' >&2; exit 127\n");
        return;
    }
    arb_buf_printf(b, "%sexec", indent);
    json_array_foreach(r->argv, i, v)
    {
        arb_buf_puts(b, " ");
        if (r->argv_expand)
            wl_buf_dq(b, json_string_value(v));
        else
            wl_buf_shq(b, json_string_value(v));
    }
    arb_buf_puts(b, "\n");
}

int wl_command(json_t *spec, const wl_run_t *runs, int n, const char *prelude)
{
    arb_buf_t b = {0};
    int first = 0;

    if (n == 1 && simple(&runs[0]) && !prelude) {
        json_object_set(spec, "command", runs[0].argv ? runs[0].argv : json_array());
        if (runs[0].env && json_object_size(runs[0].env))
            json_object_set(spec, "env", runs[0].env);
        return 0;
    }
    if (prelude)
        arb_buf_puts(&b, prelude);
    arb_buf_puts(&b, "i=${ARBITER_TASK_INDEX:-0}\n");
    for (int g = 0; g < n; g++) {
        const wl_run_t *r = &runs[g];
        bool last = g == n - 1;
        if (!last)
            arb_buf_printf(&b, "if [ \"$i\" -lt %d ]; then\n", first + r->replicas);
        arb_buf_puts(&b, last ? "" : "  ");
        arb_buf_puts(&b, "export ARBITER_GROUP=");
        wl_buf_shq(&b, r->group);
        arb_buf_printf(&b, " ARBITER_GROUP_INDEX=$((i - %d)) ARBITER_GROUP_SIZE=%d\n", first,
                       r->replicas);
        run_body(&b, r, last ? "" : "  ");
        if (!last)
            arb_buf_puts(&b, "fi\n");
        first += r->replicas;
    }
    if (b.oom) {
        free(b.p);
        return -ENOMEM;
    }
    json_object_set_new(spec, "command",
                        json_pack("[s,s,s,s]", "/bin/sh", "-c", b.p, "arbiter-launch"));
    free(b.p);
    return 0;
}
