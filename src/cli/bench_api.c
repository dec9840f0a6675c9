/*
 * bench_api.c: `arbiter bench api`: durable job submissions per second
 * against a running controller (ARBITER_URL, ARBITER_TOKEN), from C client
 * threads on keep-alive connections. Every submission is acknowledged only
 * after it is committed to the store, so the figure is durable submits/s
 * (group commit lets concurrent clients share each fsync). Prints
 * submits_per_s and latency percentiles; -o json for scripts.
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/flags.h"
#include "client/failover.h"
#include "util/mtime.h"

typedef struct bclient {
    int jobs; /* to submit */
    int ok, failed;
    int64_t *lat;     /* ns per submission */
    const char *base; /* the controller measured: the first of ARBITER_URL's list */
} bclient_t;

static size_t sink(char *p, size_t s, size_t n, void *arg)
{
    (void)p;
    (void)arg;
    return s * n;
}

static void *run_client(void *arg)
{
    bclient_t *c = arg;
    CURL *h = curl_easy_init();
    struct curl_slist *hd = NULL;
    char url[1024], auth[512];
    const char *base = c->base, *tok = getenv("ARBITER_TOKEN");
    const char *body = "{\"name\": \"bench\", \"resources\": {\"requests\": "
                       "{\"nvidia.com/gpu\": 1, \"cpu\": \"1\", \"memory\": \"1Gi\"}}}";

    snprintf(url, sizeof url, "%s/v1/jobs", base);
    hd = curl_slist_append(hd, "Content-Type: application/json");
    hd = curl_slist_append(hd, "Expect:");
    if (tok && *tok) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", tok);
        hd = curl_slist_append(hd, auth);
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    for (int i = 0; i < c->jobs; i++) {
        long st = 0;
        int64_t t0 = arb_mono_ns();
        if (curl_easy_perform(h) == CURLE_OK)
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
        c->lat[i] = arb_mono_ns() - t0;
        if (st == 201)
            c->ok++;
        else
            c->failed++;
    }
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

typedef struct api_opts {
    long long clients, jobs;
    int json;
} api_opts_t;

static const fl_flag_t api_flags[] = {
    FL_OPT(api_opts_t, clients, "--clients", NULL, FL_INT, "N", "concurrent clients", .def = "32",
           .min = 1, .max = 1024),
    FL_OPT(api_opts_t, jobs, "--jobs", NULL, FL_INT, "M",
           "submissions in all, at least one a client", .def = "20000", .min = 1),
    FL_OPT(api_opts_t, json, NULL, "-o", FL_CHOICE, NULL, "output format", .def = "text",
           .choices = "text|json"),
    FL_END,
};
static const fl_verb_t api_verb = {
    .name = "bench api",
    .summary = "durable submissions/s against the controller at ARBITER_URL (the first of its "
               "list: point it at the leader)",
    .flags = api_flags};

int cli_bench_api(int argc, char **argv)
{
    api_opts_t o = {0};
    fl_args_t a;
    int frc;

    if (!fl_run(&api_verb, argc, argv, &o, &a, &frc))
        return frc;
    long clients = (long)o.clients, jobs = (long)o.jobs;
    bool json = o.json == 1;
    if (jobs < clients) {
        fprintf(stderr, "arbiter bench api: use 1..1024 clients and at least one job each\n");
        return 2;
    }
    /* Several controllers: the first is measured (point it at the leader). */
    fo_urls_t urls;
    arb_err_t uerr = {{0}};
    const char *env = getenv("ARBITER_URL");
    if (fo_urls_parse(env && *env ? env : "http://127.0.0.1:7070", "ARBITER_URL", &urls, &uerr) <
        0) {
        fprintf(stderr, "arbiter bench api: %s\n", uerr.msg);
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    bclient_t *c = calloc((size_t)clients, sizeof *c);
    pthread_t *t = calloc((size_t)clients, sizeof *t);
    int64_t *lat = calloc((size_t)jobs, sizeof *lat);
    if (!c || !t || !lat)
        return 1;
    long off = 0;
    for (long i = 0; i < clients; i++) {
        c[i].jobs = (int)(jobs / clients + (i < jobs % clients));
        c[i].lat = lat + off;
        c[i].base = urls.url[0];
        off += c[i].jobs;
    }
    int64_t t0 = arb_mono_ns();
    for (long i = 0; i < clients; i++)
        pthread_create(&t[i], NULL, run_client, &c[i]);
    int ok = 0, failed = 0;
    for (long i = 0; i < clients; i++) {
        pthread_join(t[i], NULL);
        ok += c[i].ok;
        failed += c[i].failed;
    }
    double secs = (double)(arb_mono_ns() - t0) / 1e9;
    qsort(lat, (size_t)jobs, sizeof *lat, cmp_i64);
    double p50 = (double)lat[jobs / 2] / 1e6, p99 = (double)lat[(jobs * 99) / 100] / 1e6;
    double rate = (double)ok / secs;
    if (json)
        printf("{\"clients\": %ld, \"jobs\": %ld, \"ok\": %d, \"failed\": %d, \"seconds\": %.3f, "
               "\"submits_per_s\": %.1f, \"p50_ms\": %.3f, \"p99_ms\": %.3f}\n",
               clients, jobs, ok, failed, secs, rate, p50, p99);
    else
        printf("%d durable submissions (%d failed) from %ld clients in %.2f s: %.0f submits/s, "
               "p50 %.2f ms, p99 %.2f ms\n",
               ok, failed, clients, secs, rate, p50, p99);
    free(c);
    free(t);
    free(lat);
    curl_global_cleanup();
    return failed ? 1 : 0;
}
