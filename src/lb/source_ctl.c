/*
 * source_ctl.c: the controller backend source (lb_source_ops_t) behind
 * `arbiter lb --service NAME --controller URL`: the balancer's backends are
 * the ready, not draining replicas of a service job.
 *
 * Two threads of its own, so the proxy's epoll loop never blocks on the
 * controller:
 *   watch   long-polls GET /v1/services/NAME?version=V&wait=10; when the
 *           replica set it yields differs from the last one, it stores it
 *           and writes a byte to a pipe: the proxy sees the pipe readable
 *           (watch_fd) and reloads through load(), gracefully, as on SIGHUP.
 *           On an error it retries after a second, keeping the last set.
 *   report  once a second POSTs the in-flight counts the proxy noted
 *           (note) to /v1/services/NAME/load: the autoscaler's input; and
 *           GETs /v1/services/NAME (no wait) for the load each replica's
 *           agent last reported (replicas[].load: gpu_util, queue, age_ms),
 *           which the proxy takes through reports() for the feedback
 *           policy. The age becomes a time on this process's monotonic
 *           clock (now - age_ms), so the two hosts' clocks never meet.
 * ARBITER_TOKEN, when set, is sent as a bearer token; an https:// controller
 * is checked against --cacert or ARBITER_CACERT (the cluster's ca.crt), and the client
 * certificate of ARBITER_CERT_FILE and ARBITER_KEY_FILE, when set, is the
 * balancer's identity (arbiter init user). --controller takes one
 * URL or several, comma-separated (src/client/failover.h parses them): a
 * request goes to the one that last answered, and to the next after a
 * connect error, a timeout or a 503; a follower's 307 to the leader is
 * followed (libcurl keeps the method and body on a 307).
 */
#include <curl/curl.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/failover.h"
#include "lb/proxy_int.h"
#include "util/buf.h"
#include "util/mtime.h"

#define WAIT_S 10
#define FIRST_WAIT_S 30

typedef struct note {
    char addr[256];
    uint32_t inflight;
    double queue;
} note_t;

typedef struct ctl {
    fo_urls_t urls;                      /* the controllers; urls.cur answered last */
    char url[512], name[128], auth[600]; /* url: the list as given, for messages */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    lb_target_t *t; /* the last set (ready, not draining) */
    int n;
    bool have; /* a set came at least once */
    bool gone; /* the controller said 404: no such running service */
    uint64_t version;
    char why[256]; /* the last error, for messages */
    int pfd[2];
    pthread_t watch, report;
    bool started, stop;
    bool loaded; /* load() ran once: later calls never wait */
    int fails;   /* consecutive failed fetches (the first load gives up at 3) */
    note_t *notes;
    int nnotes;
    bool noted;
    lb_agent_load_t *loads; /* the agents' last reports, replica by replica */
    int nloads;
    tls_client_t tls; /* --cacert, else the environment (their strings live on) */
} ctl_t;

static int on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    ctl_t *x = arg;
    bool stop;
    (void)a, (void)b, (void)c, (void)d;
    pthread_mutex_lock(&x->mu);
    stop = x->stop;
    pthread_mutex_unlock(&x->mu);
    return stop; /* non-zero aborts the transfer */
}

/* One request to one controller; *status the HTTP status (0: none). */
static int call_one(ctl_t *x, const char *base, const char *method, const char *path,
                    const char *body, long timeout_s, long *status, arb_buf_t *out)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    char url[1024];
    CURLcode cc;

    *status = 0;
    if (!c)
        return -ENOMEM;
    snprintf(url, sizeof url, "%s%s", base, path);
    if (x->auth[0])
        h = curl_slist_append(h, x->auth);
    if (body)
        h = curl_slist_append(h, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, arb_buf_write_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_s);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 5L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L); /* a follower's 307 to the leader */
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 2L);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, x);
    tls_client_apply(&x->tls, c);
    if (body)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    cc = curl_easy_perform(c);
    if (cc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    else {
        pthread_mutex_lock(&x->mu);
        snprintf(x->why, sizeof x->why, "%.180s: %s", url, curl_easy_strerror(cc));
        pthread_mutex_unlock(&x->mu);
    }
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return cc == CURLE_OK ? 0 : -EIO;
}

/* One request, with failover over the controllers: from the one that last
 * answered, on to the next after no answer or a 503 (no leader yet). */
static int call(ctl_t *x, const char *method, const char *path, const char *body, long timeout_s,
                long *status, arb_buf_t *out)
{
    int rc = -EIO, cur;

    pthread_mutex_lock(&x->mu);
    cur = x->urls.cur;
    pthread_mutex_unlock(&x->mu);
    for (int k = 0; k < x->urls.n; k++) {
        int i = (cur + k) % x->urls.n;
        arb_buf_free(out);
        out->max = 8u << 20; /* a reply larger than this fails the transfer */
        rc = call_one(x, x->urls.url[i], method, path, body, timeout_s, status, out);
        if (rc == 0 && *status != 503) {
            pthread_mutex_lock(&x->mu);
            x->urls.cur = i; /* the next request, of either thread, starts here */
            pthread_mutex_unlock(&x->mu);
            return 0;
        }
    }
    return rc;
}

/* Wait up to ms, or until stopped: true when stopped. */
static bool nap(ctl_t *x, int ms)
{
    struct timespec ts = arb_deadline_ms(ms);
    bool stop;
    pthread_mutex_lock(&x->mu);
    if (!x->stop)
        arb_cond_wait_until(&x->cv, &x->mu, &ts);
    stop = x->stop;
    pthread_mutex_unlock(&x->mu);
    return stop;
}

static int cmp_target(const void *a, const void *b)
{
    return strcmp(((const lb_target_t *)a)->addr, ((const lb_target_t *)b)->addr);
}

/* The endpoints object into a sorted target list. */
static int parse_set(const char *txt, lb_target_t **out, int *n, uint64_t *version)
{
    json_t *o = json_loads(txt, 0, NULL), *reps, *e;
    size_t i;
    int k = 0;

    if (!o)
        return -EBADMSG;
    reps = json_object_get(o, "replicas");
    *version = (uint64_t)json_integer_value(json_object_get(o, "version"));
    *out = calloc(json_array_size(reps) + 1, sizeof **out);
    if (!*out) {
        json_decref(o);
        return -ENOMEM;
    }
    json_array_foreach(reps, i, e)
    {
        const char *a = json_string_value(json_object_get(e, "address"));
        if (!a || !json_is_true(json_object_get(e, "ready")) ||
            json_is_true(json_object_get(e, "draining")) || strlen(a) >= sizeof(*out)[k].addr)
            continue;
        snprintf((*out)[k].addr, sizeof(*out)[k].addr, "%s", a);
        (*out)[k].weight = 1;
        k++;
    }
    qsort(*out, (size_t)k, sizeof **out, cmp_target);
    *n = k;
    json_decref(o);
    return 0;
}

static void *watch_main(void *arg)
{
    ctl_t *x = arg;
    char path[512];

    for (;;) {
        arb_buf_t b = {0};
        long st = 0;
        uint64_t v;
        pthread_mutex_lock(&x->mu);
        bool stop = x->stop;
        v = x->version;
        pthread_mutex_unlock(&x->mu);
        if (stop)
            break;
        snprintf(path, sizeof path, "/v1/services/%s?version=%llu&wait=%d", x->name,
                 (unsigned long long)v, v ? WAIT_S : 0);
        int rc = call(x, "GET", path, NULL, WAIT_S + 10, &st, &b);
        lb_target_t *t = NULL;
        int n = 0;
        if (rc == 0 && st == 200 && parse_set(b.p ? b.p : "", &t, &n, &v) == 0) {
            pthread_mutex_lock(&x->mu);
            bool changed =
                !x->have || n != x->n || (n && memcmp(t, x->t, (size_t)n * sizeof *t) != 0);
            x->version = v;
            if (changed) {
                free(x->t);
                x->t = t;
                x->n = n;
                t = NULL;
            }
            x->have = true;
            x->gone = false;
            x->fails = 0;
            pthread_cond_broadcast(&x->cv);
            pthread_mutex_unlock(&x->mu);
            if (changed && write(x->pfd[1], "x", 1) < 0) {
                /* the pipe is full: a reload is pending anyway */
            }
            free(t);
            arb_buf_free(&b);
            continue;
        }
        if (rc == 0) {
            pthread_mutex_lock(&x->mu);
            snprintf(x->why, sizeof x->why, "GET /v1/services/%.40s: HTTP %ld: %.150s", x->name, st,
                     b.p ? b.p : "");
            /* 404: the service ended (or never was): after a set, the set is
             * empty now, so the proxy answers 503 rather than trying replicas
             * that are gone */
            bool emptied = st == 404 && x->have && x->n > 0;
            if (st == 404) {
                x->gone = true;
                if (emptied) {
                    free(x->t);
                    x->t = NULL;
                    x->n = 0;
                    x->version = 0;
                }
            }
            pthread_mutex_unlock(&x->mu);
            if (emptied && write(x->pfd[1], "x", 1) < 0) {
                /* the pipe is full: a reload is pending anyway */
            }
        }
        free(t);
        arb_buf_free(&b);
        pthread_mutex_lock(&x->mu);
        x->fails++;
        pthread_cond_broadcast(&x->cv);
        pthread_mutex_unlock(&x->mu);
        if (nap(x, 1000))
            break;
    }
    return NULL;
}

/* The replicas' agent-reported load from an endpoints object; NULL with *n
 * = 0 when there is none. */
static lb_agent_load_t *parse_loads(const char *txt, int *n)
{
    json_t *o = json_loads(txt, 0, NULL), *e;
    json_t *reps = json_object_get(o, "replicas");
    lb_agent_load_t *v = calloc(json_array_size(reps) + 1, sizeof *v);
    int64_t now = arb_mono_ms();
    size_t i;

    *n = 0;
    json_array_foreach(reps, i, e)
    {
        const char *a = json_string_value(json_object_get(e, "address"));
        json_t *l = json_object_get(e, "load");
        json_t *g = json_object_get(l, "gpu_util"), *q = json_object_get(l, "queue");
        json_t *age = json_object_get(l, "age_ms");
        if (!v || !a || strlen(a) >= sizeof v->addr || !json_is_number(g) || !json_is_number(q) ||
            !json_is_integer(age) || json_integer_value(age) < 0)
            continue;
        snprintf(v[*n].addr, sizeof v[*n].addr, "%s", a);
        v[*n].gpu_util = json_number_value(g);
        v[*n].queue = json_number_value(q);
        v[*n].at_ms = now - (int64_t)json_integer_value(age);
        if (v[*n].at_ms < 1)
            v[*n].at_ms = 1; /* 0 means no report */
        (*n)++;
    }
    json_decref(o);
    return v;
}

/* GET the endpoints now and keep the replicas' agent-reported load. */
static void fetch_loads(ctl_t *x)
{
    char path[256];
    arb_buf_t b = {0};
    long st = 0;
    int n = 0;

    snprintf(path, sizeof path, "/v1/services/%s", x->name);
    if (call(x, "GET", path, NULL, 5, &st, &b) == 0 && st == 200 && b.p) {
        lb_agent_load_t *v = parse_loads(b.p, &n);
        if (v) {
            pthread_mutex_lock(&x->mu);
            free(x->loads);
            x->loads = v;
            x->nloads = n;
            pthread_mutex_unlock(&x->mu);
        }
    }
    arb_buf_free(&b);
}

static void *report_main(void *arg)
{
    ctl_t *x = arg;
    char path[256];

    snprintf(path, sizeof path, "/v1/services/%s/load", x->name);
    while (!nap(x, 1000)) {
        json_t *arr = json_array();
        pthread_mutex_lock(&x->mu);
        bool any = x->noted;
        for (int i = 0; i < x->nnotes; i++)
            json_array_append_new(arr, json_pack("{s:s,s:i,s:f}", "address", x->notes[i].addr,
                                                 "inflight", (int)x->notes[i].inflight, "queue",
                                                 x->notes[i].queue));
        x->noted = false;
        pthread_mutex_unlock(&x->mu);
        if (any) {
            json_t *o = json_pack("{s:o}", "replicas", arr);
            char *txt = json_dumps(o, JSON_COMPACT);
            arb_buf_t b = {0};
            long st;
            if (txt)
                call(x, "POST", path, txt, 5, &st, &b);
            free(txt);
            arb_buf_free(&b);
            json_decref(o);
        } else {
            json_decref(arr);
        }
        fetch_loads(x);
    }
    return NULL;
}

static int ctl_load(void *st, lb_target_t **out, int *n, arb_err_t *err)
{
    ctl_t *x = st;
    struct timespec dl = arb_deadline_ms(FIRST_WAIT_S * 1000LL);
    int rc = 0;

    pthread_mutex_lock(&x->mu);
    /* The first time: wait for a ready replica (a service just submitted),
     * unless the controller fails to answer three times running or says
     * there is no such service. Then start with what there is: a service
     * with no ready replica yet gives an empty set (the proxy answers 503
     * until one is ready), like HAProxy with every server down. */
    while (!x->loaded && !(x->have && x->n > 0) && !x->stop && x->fails < 3 &&
           !(x->gone && !x->have))
        if (arb_cond_wait_until(&x->cv, &x->mu, &dl) != 0)
            break;
    if (!x->loaded && !x->have) {
        if (x->gone)
            rc = arb_errf(err, -ENOENT,
                          "service '%s' at %s: no such running service; check the name with "
                          "`arbiter service`",
                          x->name, x->url);
        else
            rc = arb_errf(err, -EAGAIN, "service '%s' at %s: no controller answered%s%s", x->name,
                          x->url, x->why[0] ? ": " : "", x->why);
        pthread_mutex_unlock(&x->mu);
        return rc;
    }
    x->loaded = true;
    if (x->n == 0) {
        *out = NULL; /* an empty set: every request gets 503 until a replica is ready */
        *n = 0;
    } else {
        *out = malloc((size_t)x->n * sizeof **out);
        if (!*out) {
            rc = arb_errf(err, -ENOMEM, "out of memory");
        } else {
            memcpy(*out, x->t, (size_t)x->n * sizeof **out);
            *n = x->n;
        }
    }
    pthread_mutex_unlock(&x->mu);
    return rc;
}

static int ctl_watch_fd(void *st)
{
    return ((ctl_t *)st)->pfd[0];
}

static void ctl_note(void *st, const char *const *addr, const uint32_t *inflight,
                     const double *queue, int n)
{
    ctl_t *x = st;
    note_t *v = calloc((size_t)n + 1, sizeof *v);

    if (!v)
        return;
    for (int i = 0; i < n; i++) {
        snprintf(v[i].addr, sizeof v[i].addr, "%s", addr[i]);
        v[i].inflight = inflight[i];
        v[i].queue = queue[i];
    }
    pthread_mutex_lock(&x->mu);
    free(x->notes);
    x->notes = v;
    x->nnotes = n;
    x->noted = true;
    pthread_mutex_unlock(&x->mu);
}

static int ctl_reports(void *st, lb_agent_load_t **out, int *n)
{
    ctl_t *x = st;
    int rc = 0;

    pthread_mutex_lock(&x->mu);
    *n = x->nloads;
    *out = malloc(((size_t)x->nloads + 1) * sizeof **out);
    if (!*out)
        rc = -ENOMEM;
    else if (x->nloads)
        memcpy(*out, x->loads, (size_t)x->nloads * sizeof **out);
    pthread_mutex_unlock(&x->mu);
    return rc;
}

static void ctl_fini(void *st)
{
    ctl_t *x = st;

    if (!x)
        return;
    pthread_mutex_lock(&x->mu);
    x->stop = true;
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
    if (x->started) {
        pthread_join(x->watch, NULL);
        pthread_join(x->report, NULL);
    }
    if (x->pfd[0] >= 0)
        close(x->pfd[0]);
    if (x->pfd[1] >= 0)
        close(x->pfd[1]);
    pthread_mutex_destroy(&x->mu);
    pthread_cond_destroy(&x->cv);
    free(x->t);
    free(x->notes);
    free(x->loads);
    free(x);
}

static const lb_source_ops_t ctl_ops = {"controller", ctl_load,    ctl_watch_fd, ctl_fini,
                                        ctl_note,     ctl_reports, true};

int lb_source_controller(lb_source_t *s, const char *url, const char *name, const tls_client_t *tls,
                         arb_err_t *err)
{
    ctl_t *x;
    const char *tok = getenv("ARBITER_TOKEN");
    size_t ul = strlen(url);

    fo_urls_t urls;
    int rc;

    memset(s, 0, sizeof *s);
    if ((rc = fo_urls_parse(url, "--controller", &urls, err)) < 0)
        return rc;
    if (ul >= sizeof x->url || !name[0] || strlen(name) >= sizeof x->name ||
        strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") !=
            strlen(name))
        return arb_errf(err, -EINVAL,
                        "--service '%s': a service name is letters, digits, '-', '_' and '.'",
                        name);
    x = calloc(1, sizeof *x);
    if (!x)
        return arb_errf(err, -ENOMEM, "out of memory");
    x->pfd[0] = x->pfd[1] = -1;
    x->urls = urls;
    snprintf(x->url, sizeof x->url, "%s", url);
    snprintf(x->name, sizeof x->name, "%s", name);
    if (tok && tok[0])
        snprintf(x->auth, sizeof x->auth, "Authorization: Bearer %.500s", tok);
    if (tls)
        x->tls = *tls;
    tls_client_from_env(&x->tls);
    if ((rc = tls_client_check(&x->tls, err)) < 0) {
        free(x);
        return rc;
    }
    pthread_mutex_init(&x->mu, NULL);
    arb_cond_init(&x->cv);
    if (pipe2(x->pfd, O_NONBLOCK | O_CLOEXEC) < 0) {
        ctl_fini(x);
        return arb_errf(err, -errno, "lb: pipe: %s", strerror(errno));
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    /* The threads block every signal: SIGTERM, SIGHUP and SIGINT are the proxy's
     * (its signalfd); a thread that left them unblocked would take SIGTERM and the
     * process would die by it instead of draining. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int werr = pthread_create(&x->watch, NULL, watch_main, x);
    int rerr = werr ? 0 : pthread_create(&x->report, NULL, report_main, x);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (werr != 0) {
        ctl_fini(x);
        return arb_errf(err, -EAGAIN, "lb: cannot start the watch thread");
    }
    if (rerr != 0) {
        pthread_mutex_lock(&x->mu);
        x->stop = true;
        pthread_mutex_unlock(&x->mu);
        pthread_join(x->watch, NULL);
        ctl_fini(x);
        return arb_errf(err, -EAGAIN, "lb: cannot start the report thread");
    }
    x->started = true;
    s->ops = &ctl_ops;
    s->st = x;
    return 0;
}
