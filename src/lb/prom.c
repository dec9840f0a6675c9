/*
 * prom.c: the Prometheus text format as a model server writes it, and the
 * one table of model-server metric names the balancer understands (prom.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lb/prom.h"

typedef enum pm_field { PM_WAITING, PM_RUNNING, PM_KV, PM_LORA } pm_field_t;

/* The table: one row per (server, metric). Add a server by adding rows. */
static const struct pm_row {
    const char *name;
    pm_field_t field;
    const char *engine;
} pm_table[] = {
    {"vllm:num_requests_waiting", PM_WAITING, "vllm"},
    {"vllm:num_requests_running", PM_RUNNING, "vllm"},
    {"vllm:kv_cache_usage_perc", PM_KV, "vllm"},  /* V1; a fraction, despite the name */
    {"vllm:gpu_cache_usage_perc", PM_KV, "vllm"}, /* V0 */
    {"vllm:lora_requests_info", PM_LORA, "vllm"},
    {"sglang:num_queue_reqs", PM_WAITING, "sglang"},
    {"sglang:num_running_reqs", PM_RUNNING, "sglang"},
    {"sglang:token_usage", PM_KV, "sglang"},
    {"llamacpp:requests_deferred", PM_WAITING, "llamacpp"},
    {"llamacpp:requests_processing", PM_RUNNING, "llamacpp"},
    {"llamacpp:kv_cache_usage_ratio", PM_KV, "llamacpp"},
};

static bool name_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}

static bool name_char(char c)
{
    return name_start(c) || (c >= '0' && c <= '9');
}

/* Skip one quoted label value starting at p (at the opening quote); the
 * position after the closing quote, or NULL. */
static const char *skip_quoted(const char *p, const char *end)
{
    if (p >= end || *p != '"')
        return NULL;
    for (p++; p < end; p++) {
        if (*p == '\\') {
            if (++p >= end)
                return NULL;
        } else if (*p == '"') {
            return p + 1;
        }
    }
    return NULL;
}

static const char *skip_sp(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    return p;
}

/* One line [p, end): 1 parsed (fn called), 0 skipped (comment, blank), -1 malformed. */
static int parse_line(const char *p, const char *end, prom_series_fn fn, void *arg)
{
    const char *name, *labels = "", *lend;
    size_t nlen, llen = 0;
    char num[64];
    double v;

    p = skip_sp(p, end);
    if (p == end || *p == '#')
        return 0;
    if (!name_start(*p))
        return -1;
    name = p;
    while (p < end && name_char(*p))
        p++;
    nlen = (size_t)(p - name);
    p = skip_sp(p, end);
    if (p < end && *p == '{') {
        labels = ++p;
        for (;;) {
            p = skip_sp(p, end);
            if (p < end && *p == '}')
                break;
            if (p >= end || !name_start(*p) || *p == ':')
                return -1;
            while (p < end && name_char(*p) && *p != ':')
                p++;
            p = skip_sp(p, end);
            if (p >= end || *p != '=')
                return -1;
            p = skip_quoted(skip_sp(p + 1, end), end);
            if (!p)
                return -1;
            p = skip_sp(p, end);
            if (p < end && *p == ',')
                p++;
            else if (p >= end || *p != '}')
                return -1;
        }
        lend = p;
        llen = (size_t)(lend - labels);
        p++;
    }
    p = skip_sp(p, end);
    const char *vs = p;
    while (p < end && *p != ' ' && *p != '\t')
        p++;
    if (p == vs || (size_t)(p - vs) >= sizeof num)
        return -1;
    memcpy(num, vs, (size_t)(p - vs));
    num[p - vs] = '\0';
    char *e;
    v = strtod(num, &e);
    if (*e)
        return -1;
    fn(name, nlen, labels, llen, v, arg);
    return 1;
}

int prom_parse(const char *txt, size_t n, prom_series_fn fn, void *arg)
{
    const char *p = txt, *end = txt + n;
    int bad = 0;

    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p)), *le = nl ? nl : end;
        const char *e = le > p && le[-1] == '\r' ? le - 1 : le;
        if (parse_line(p, e, fn, arg) < 0)
            bad++;
        p = nl ? nl + 1 : end;
    }
    return bad;
}

bool prom_label(const char *labels, size_t llen, const char *key, char *out, size_t outsz)
{
    const char *p = labels, *end = labels + llen;
    size_t kl = strlen(key);

    while (p < end) {
        p = skip_sp(p, end);
        const char *k = p;
        while (p < end && name_char(*p))
            p++;
        size_t this_kl = (size_t)(p - k);
        p = skip_sp(p, end);
        if (p >= end || *p != '=')
            return false;
        p = skip_sp(p + 1, end);
        const char *q = skip_quoted(p, end);
        if (!q)
            return false;
        if (this_kl == kl && memcmp(k, key, kl) == 0) {
            size_t o = 0;
            for (const char *s = p + 1; s < q - 1 && o + 1 < outsz; s++) {
                char c = *s;
                if (c == '\\' && s + 1 < q - 1) {
                    c = *++s;
                    if (c == 'n')
                        c = '\n';
                }
                out[o++] = c;
            }
            if (outsz)
                out[o < outsz ? o : outsz - 1] = '\0';
            return true;
        }
        p = skip_sp(q, end);
        if (p < end && *p == ',')
            p++;
    }
    return false;
}

typedef struct eng_acc {
    lb_engine_t *e;
    prom_result_t *res;
    double kv, lora_ts;
    bool have_kv, have_lora;
} eng_acc_t;

/* "a, b,c" -> hashes of a, b, c into e->lora (up to LB_MAX_LORA). */
static void lora_list(lb_engine_t *e, const char *s)
{
    while (*s && e->nlora < LB_MAX_LORA) {
        while (*s == ' ' || *s == ',')
            s++;
        const char *b = s;
        while (*s && *s != ',')
            s++;
        const char *t = s;
        while (t > b && t[-1] == ' ')
            t--;
        if (t > b)
            e->lora[e->nlora++] = lb_hash64(b, (size_t)(t - b), 0);
    }
}

static void on_series(const char *name, size_t nlen, const char *labels, size_t llen, double v,
                      void *arg)
{
    eng_acc_t *a = arg;
    const struct pm_row *row = NULL;

    for (size_t i = 0; i < sizeof pm_table / sizeof pm_table[0] && !row; i++)
        if (strlen(pm_table[i].name) == nlen && memcmp(pm_table[i].name, name, nlen) == 0)
            row = &pm_table[i];
    if (!row || isnan(v) || isinf(v) || v < 0)
        return;
    if (a->res->known++ == 0)
        strncpy(a->res->engine, row->engine, sizeof a->res->engine - 1);
    switch (row->field) {
    case PM_WAITING:
        a->e->waiting += v;
        break;
    case PM_RUNNING:
        a->e->running += v;
        break;
    case PM_KV:
        if (v > 1 && v <= 100)
            v /= 100; /* a percentage after all */
        if (!a->have_kv || v > a->kv)
            a->kv = v > 1 ? 1 : v;
        a->have_kv = true;
        break;
    case PM_LORA: {
        char buf[1024], ml[16];
        if (a->have_lora && v < a->lora_ts)
            break; /* an older series */
        a->have_lora = true;
        a->lora_ts = v;
        a->e->nlora = 0;
        a->e->max_lora = 0;
        if (prom_label(labels, llen, "max_lora", ml, sizeof ml))
            a->e->max_lora = atoi(ml) > 0 && atoi(ml) < 1 << 20 ? atoi(ml) : 0;
        if (prom_label(labels, llen, "running_lora_adapters", buf, sizeof buf))
            lora_list(a->e, buf);
        break;
    }
    }
}

int prom_engine_parse(const char *txt, size_t n, lb_engine_t *e, prom_result_t *res)
{
    eng_acc_t a = {.e = e, .res = res};

    memset(res, 0, sizeof *res);
    e->waiting = e->running = 0;
    e->kv = -1;
    e->max_lora = e->nlora = 0;
    res->malformed = prom_parse(txt, n, on_series, &a);
    if (a.have_kv)
        e->kv = a.kv;
    return res->known;
}
