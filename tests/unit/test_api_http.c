/* test_api_http.c: the API over real HTTP on 127.0.0.1 (an ephemeral port),
 * with a real store in a temp dir: auth and roles, limits and validation,
 * the status codes, metrics, long-poll events, concurrent submissions, and
 * the connection deadlines (a head, a body, an idle keep-alive connection:
 * each closed past its own, the request never run), an agent's
 * assignments long poll (answered at a change, at its deadline, at a stop,
 * without a hop through the housekeeping thread), and how many event loops
 * a server runs. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "api/api_int.h"

static char dir[256];
static st_t *st;
static api_server_t *srv;
static api_tokens_t toks;
static int port;

#define ADMIN_TOK "admin-token-0123456789"
#define ALICE_TOK "alice-token-0123456789"
#define BOB_TOK "bob-token-0123456789abc"
#define AGENT_TOK "agent-token-0123456789"

typedef struct resp {
    long status;
    char *body;
    size_t n;
} resp_t;

static size_t on_data(char *p, size_t sz, size_t nm, void *arg)
{
    resp_t *r = arg;
    size_t k = sz * nm;
    char *q = realloc(r->body, r->n + k + 1);
    if (!q)
        return 0;
    r->body = q;
    memcpy(q + r->n, p, k);
    r->n += k;
    q[r->n] = '\0';
    return k;
}

static resp_t req(const char *method, const char *path, const char *tok, const char *body, size_t n,
                  const char *ctype)
{
    resp_t r = {0};
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    char url[512], hdr[256];

    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (tok) {
        snprintf(hdr, sizeof hdr, "Authorization: Bearer %s", tok);
        h = curl_slist_append(h, hdr);
    }
    if (body) {
        snprintf(hdr, sizeof hdr, "Content-Type: %s", ctype ? ctype : "application/json");
        h = curl_slist_append(h, hdr);
        h = curl_slist_append(h, "Expect:");
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)n);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (!r.body)
        r.body = calloc(1, 1);
    return r;
}

static long call(const char *method, const char *path, const char *tok, const char *body,
                 const char *expect_text)
{
    resp_t r = req(method, path, tok, body, body ? strlen(body) : 0, NULL);
    if (expect_text && !strstr(r.body, expect_text))
        fail_msg("%s %s -> %ld: '%s' lacks '%s'", method, path, r.status, r.body, expect_text);
    free(r.body);
    return r.status;
}

static int setup(void **unused)
{
    char path[300];
    FILE *f;
    arb_err_t err = {{0}};
    st_conf_t c;

    (void)unused;
    snprintf(dir, sizeof dir, "/tmp/arb_test_api.XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/tokens", dir);
    f = fopen(path, "w");
    fprintf(f,
            "# test tokens\n%s admin ops root\n%s user team-a alice\n%s user team-b bob\n"
            "%s agent nodes n1\n",
            ADMIN_TOK, ALICE_TOK, BOB_TOK, AGENT_TOK);
    fclose(f);
    chmod(path, 0600);
    assert_int_equal(api_tokens_load(path, &toks, &err), 0);
    st_conf_init(&c);
    c.sync = STORE_SYNC_NORMAL;
    c.interval_ns = 50000000;
    snprintf(path, sizeof path, "%s/data", dir);
    if (st_open(path, &c, &st, &err) < 0 || st_start(st, &err) < 0)
        fail_msg("%s", err.msg);
    api_opts_t o = {.host = "127.0.0.1", .port = 0, .tokens = &toks};
    assert_int_equal(api_server_start(st, &o, &srv, &err), 0);
    port = api_server_port(srv);
    assert_true(port > 0);
    return 0;
}

static int teardown(void **unused)
{
    char cmd[300];
    (void)unused;
    api_server_stop(srv);
    st_close(st);
    api_tokens_free(&toks);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

#define NODE                                                                                       \
    "{\"inventory\": {\"cpu\": 64, \"memory\": \"512Gi\", \"gpus\": ["                             \
    "{\"model\": \"H100\", \"memory\": \"80Gi\"}, {\"model\": \"H100\", \"memory\": \"80Gi\"}]}}"
#define JOB "{\"name\": \"t\", \"resources\": {\"requests\": {\"nvidia.com/gpu\": 1}}}"

static void test_auth_and_codes(void **unused)
{
    (void)unused;
    assert_int_equal(call("GET", "/healthz", NULL, NULL, "ok"), 200);
    assert_int_equal(call("GET", "/v1/jobs", NULL, NULL, "bearer token"), 401);
    assert_int_equal(call("GET", "/v1/jobs", "wrong-token-0123456789", NULL, NULL), 401);
    assert_int_equal(call("POST", "/v1/jobs", AGENT_TOK, JOB, "role 'agent'"), 403);
    assert_int_equal(call("POST", "/v1/nodes/n1/report", ALICE_TOK, NODE, NULL), 403);
    assert_int_equal(call("POST", "/v1/nodes/n1/report", AGENT_TOK, NODE, "\"epoch\""), 200);
    /* node identity: n1's token acts as n1 only, and nothing of n2 is made */
    assert_int_equal(call("POST", "/v1/nodes/n2/report", AGENT_TOK, NODE, "as node 'n1' only"),
                     403);
    assert_int_equal(call("GET", "/v1/nodes/n2/assignments", AGENT_TOK, NULL, "not 'n2'"), 403);
    assert_int_equal(call("GET", "/v1/nodes/n1/assignments", AGENT_TOK, NULL, "\"node\""), 200);
    assert_int_equal(call("GET", "/v1/nodes/n2", ADMIN_TOK, NULL, NULL), 404);
    assert_int_equal(call("GET",
                          "/v1/logs/tickets/0123456789abcdef0123456789abcdef?job=1&task=0"
                          "&node=n2",
                          AGENT_TOK, NULL, "not 'n2'"),
                     403);
    assert_int_equal(call("GET", "/v1/status", AGENT_TOK, NULL, "\"node\":\"n1\""), 200);
    assert_int_equal(call("POST", "/v1/jobs", ALICE_TOK, JOB, "\"queue\":\"team-a\""), 201);
    assert_int_equal(call("GET", "/v1/jobs/1", BOB_TOK, NULL, "team-a"), 403);
    assert_int_equal(call("GET", "/v1/jobs/1", ALICE_TOK, NULL, "\"id\":1"), 200);
    assert_int_equal(call("GET", "/v1/jobs/99", ALICE_TOK, NULL, "no such job"), 404);
    assert_int_equal(call("GET", "/v1/jobs/abc", ALICE_TOK, NULL, NULL), 404);
    assert_int_equal(call("PUT", "/v1/jobs", ALICE_TOK, NULL, "method not allowed"), 405);
    assert_int_equal(call("GET", "/v1/nowhere", ALICE_TOK, NULL, NULL), 404);
    assert_int_equal(call("POST", "/v1/nodes/n1/drain", ALICE_TOK, "", NULL), 403);
    assert_int_equal(call("POST", "/v1/nodes/n1/drain", ADMIN_TOK, "", "Draining"), 200);
    assert_int_equal(call("POST", "/v1/nodes/n1/undrain", ADMIN_TOK, "", "Ready"), 200);
    assert_int_equal(call("GET", "/v1/jobs?state=bogus", ADMIN_TOK, NULL, "not a job state"), 400);
    assert_int_equal(call("GET", "/v1/status", BOB_TOK, NULL, "\"team\":\"team-b\""), 200);
    assert_int_equal(call("GET", "/v1/check", ADMIN_TOK, NULL, "\"ok\":true"), 200);
}

static void test_validation(void **unused)
{
    (void)unused;
    size_t big = (1u << 20) + 10;
    char *b = malloc(big);
    memset(b, ' ', big);
    b[0] = '{';
    b[big - 1] = '}';
    resp_t r = req("POST", "/v1/jobs", ADMIN_TOK, b, big, NULL);
    assert_int_equal(r.status, 413);
    free(r.body);
    free(b);
    /* Far bigger, sent without waiting for "100 Continue" (as the CLI does):
     * the client is still writing when the 413 is ready. The server reads
     * the body to the end first, so the 413 arrives rather than a reset. */
    big = 16u << 20;
    b = malloc(big);
    memset(b, ' ', big);
    b[0] = '{';
    b[big - 1] = '}';
    r = req("POST", "/v1/jobs", ADMIN_TOK, b, big, NULL);
    assert_int_equal(r.status, 413);
    assert_non_null(strstr(r.body, "1048576"));
    free(r.body);
    free(b);
    assert_int_equal(call("POST", "/v1/jobs", ADMIN_TOK, "{\"name\": \n\"x\",,}", "job.json:2:"),
                     400);
    assert_int_equal(call("POST", "/v1/jobs", ADMIN_TOK, "{\"name\": \"x\", \"gpus\": 2}",
                          "unknown field 'gpus'"),
                     422);
    assert_int_equal(
        call("POST", "/v1/jobs", ADMIN_TOK, "{\"name\": \"x\", \"replicas\": -2}", "replicas"),
        422);
    assert_int_equal(call("POST", "/v1/jobs", ADMIN_TOK, "", "empty body"), 400);
    r = req("POST", "/v1/jobs", ADMIN_TOK, "name: y\nreplicas: [\n", 20, "application/yaml");
    assert_int_equal(r.status, 400);
    free(r.body);
    assert_int_equal(call("POST", "/v1/nodes/n1/report", AGENT_TOK,
                          "{\"telemetry\": {\"gpus\": [{\"index\": 0, \"util\": \"hot\"}]}}",
                          "telemetry.gpus[0].util"),
                     422);
    /* nothing was applied */
    assert_int_equal(call("GET", "/v1/jobs", ADMIN_TOK, NULL, "{\"jobs\":[]}"), 200);
}

static void test_metrics_events(void **unused)
{
    (void)unused;
    assert_int_equal(call("POST", "/v1/nodes/n1/report", AGENT_TOK, NODE, NULL), 200);
    assert_int_equal(call("POST", "/v1/jobs", ADMIN_TOK, JOB, NULL), 201);
    usleep(200000);
    assert_int_equal(call("GET", "/metrics", ADMIN_TOK, NULL, "arbiter_gpu_allocation_ratio 0.5"),
                     200);
    assert_int_equal(call("GET", "/metrics", ADMIN_TOK, NULL,
                          "arbiter_scheduling_cycle_seconds_bucket{le=\"+Inf\"}"),
                     200);
    /* requests by route, each once, the scrapes themselves among them */
    assert_int_equal(call("GET", "/nope", ADMIN_TOK, NULL, NULL), 404);
    resp_t m = req("GET", "/metrics", ADMIN_TOK, NULL, 0, NULL);
    const char *want[] = {"arbiter_http_requests_total{route=\"POST /v1/jobs\"} 1\n",
                          "arbiter_http_requests_total{route=\"POST /v1/nodes/{name}/report\"} 1\n",
                          "arbiter_http_requests_total{route=\"GET /metrics\"} 3\n",
                          "arbiter_http_requests_total{route=\"none\"} 1\n",
                          "# TYPE arbiter_http_request_reruns_total counter\n"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        if (!strstr(m.body, want[i]))
            fail_msg("/metrics lacks '%s'", want[i]);
    /* (a reply held for its commit is counted there; one whose commit was
     * durable already, as may be, is not held) */
    assert_non_null(strstr(m.body, "\narbiter_http_request_reruns_total "));
    free(m.body);
    assert_int_equal(call("GET", "/v1/events?since=0", ADMIN_TOK, NULL, "job-placed"), 200);
    assert_int_equal(call("GET", "/v1/queues", ADMIN_TOK, NULL, "\"running\":1"), 200);
    assert_int_equal(call("GET", "/v1/nodes", ADMIN_TOK, NULL, "\"jobs\":[1]"), 200);
    assert_int_equal(call("GET", "/v1/jobs/1/explain", ADMIN_TOK, NULL, "not pending"), 200);
    assert_int_equal(call("DELETE", "/v1/jobs/1", ADMIN_TOK, NULL, "cancelled"), 200);
    assert_int_equal(call("DELETE", "/v1/jobs/1", ADMIN_TOK, NULL, "already ended"), 409);
}

/* A reply waits for its commit only while what it changed or saw is not
 * durable: a read of what was committed before it goes out at once, never
 * suspended (arbiter_replies_held_total counts the suspended ones, by
 * route). */
static void test_read_after_commit_not_held(void **unused)
{
    (void)unused;
    assert_int_equal(call("POST", "/v1/jobs", ADMIN_TOK, JOB, NULL), 201);
    /* the submission's reply went out after its commit: nothing is queued */
    for (int k = 0; k < 3; k++) {
        assert_int_equal(call("GET", "/v1/jobs/1", ADMIN_TOK, NULL, "\"id\":1"), 200);
        assert_int_equal(call("GET", "/v1/jobs", ADMIN_TOK, NULL, NULL), 200);
    }
    resp_t m = req("GET", "/metrics", ADMIN_TOK, NULL, 0, NULL);
    assert_int_equal(m.status, 200);
    assert_non_null(strstr(m.body, "# TYPE arbiter_replies_held_total counter"));
    if (strstr(m.body, "arbiter_replies_held_total{route=\"GET /v1/jobs"))
        fail_msg("a read of committed state was held for a commit:\n%s", m.body);
    free(m.body);
}

static void *late_submit(void *arg)
{
    (void)arg;
    usleep(300000);
    call("POST", "/v1/jobs", ADMIN_TOK, JOB, NULL);
    return NULL;
}

static void test_long_poll(void **unused)
{
    pthread_t t;
    char path[64];
    (void)unused;
    st_status_t stt;
    st_status(st, &stt);
    snprintf(path, sizeof path, "/v1/events?since=%lld&wait=5", (long long)stt.lamport);
    pthread_create(&t, NULL, late_submit, NULL);
    assert_int_equal(call("GET", path, ADMIN_TOK, NULL, "job-submitted"), 200);
    pthread_join(t, NULL);
}

/* An agent's assignments long poll (keyed by its node): what it got. */
typedef struct apoll {
    char path[160];
    long status;
    char body[4096];
    double took_s;
} apoll_t;

static double mono_s(void);

static void *assign_poll(void *arg)
{
    apoll_t *a = arg;
    double t0 = mono_s();
    resp_t r = req("GET", a->path, AGENT_TOK, NULL, 0, NULL);
    a->took_s = mono_s() - t0;
    a->status = r.status;
    snprintf(a->body, sizeof a->body, "%s", r.body);
    free(r.body);
    return NULL;
}

/* n1 registered; the path of a poll of its list as it is now (its version),
 * waiting up to wait_s. */
static void assign_path(apoll_t *a, int wait_s)
{
    resp_t r;
    const char *v;

    assert_int_equal(call("POST", "/v1/nodes/n1/report", AGENT_TOK, NODE, NULL), 200);
    r = req("GET", "/v1/nodes/n1/assignments", AGENT_TOK, NULL, 0, NULL);
    assert_int_equal(r.status, 200);
    v = strstr(r.body, "\"assignments_version\":");
    assert_non_null(v);
    snprintf(a->path, sizeof a->path, "/v1/nodes/n1/assignments?wait=%d&version=%llu", wait_s,
             strtoull(v + strlen("\"assignments_version\":"), NULL, 10));
    free(r.body);
}

/* A job placed on n1 answers n1's parked poll, resumed by the thread that
 * placed it: neither the parking nor the change wakes the housekeeping
 * thread (its deadline is seconds past the keeper's next look). */
static void test_assign_poll_change(void **unused)
{
    apoll_t a = {0};
    pthread_t t;
    (void)unused;

    assign_path(&a, 30);
    uint64_t sig0 = api_server_hk_signals(srv);
    pthread_create(&t, NULL, assign_poll, &a);
    usleep(300000); /* parked by now, most likely; if not, it answers at once all the same */
    assert_int_equal(call("POST", "/v1/jobs", ADMIN_TOK, JOB, NULL), 201);
    pthread_join(t, NULL);
    assert_int_equal(a.status, 200);
    if (!strstr(a.body, "\"job\":1,"))
        fail_msg("n1's poll answered without job 1: %s", a.body);
    assert_true(a.took_s < 20); /* the change, not the 30 s deadline */
    assert_int_equal(api_server_hk_signals(srv) - sig0, 0);
}

/* Nothing changes: the poll ends at its deadline (the keeper's own look
 * finds it, unwoken), and at a stop before its deadline. */
static void test_assign_poll_deadline_stop(void **unused)
{
    apoll_t a = {0};
    pthread_t t;
    arb_err_t err = {{0}};
    (void)unused;

    assign_path(&a, 1);
    uint64_t sig0 = api_server_hk_signals(srv);
    assign_poll(&a);
    assert_int_equal(a.status, 200);
    assert_true(a.took_s >= 0.9 && a.took_s < 10);
    assert_int_equal(api_server_hk_signals(srv) - sig0, 0);

    assign_path(&a, 30);
    pthread_create(&t, NULL, assign_poll, &a);
    usleep(300000);
    api_server_stop(srv);
    pthread_join(t, NULL);
    assert_int_equal(a.status, 200);
    assert_true(a.took_s < 20);
    api_opts_t o = {.host = "127.0.0.1", .port = 0, .tokens = &toks};
    assert_int_equal(api_server_start(st, &o, &srv, &err), 0); /* for teardown */
}

/* The reply to n1's report carried job 1 (placed there after its poll
 * began): the poll, asked with the list before it, has nothing new to
 * say and waits (before, it answered at once, a round trip for a list
 * the agent had), until a change or its deadline. */
static void test_assign_poll_told(void **unused)
{
    apoll_t a = {0};
    pthread_t t;
    (void)unused;

    assign_path(&a, 2);
    resp_t r = req("GET", "/v1/nodes/n1/assignments", AGENT_TOK, NULL, 0, NULL);
    const char *e = strstr(r.body, "\"epoch\":");
    assert_non_null(e);
    /* with its epoch: the agent's channel */
    size_t l = strlen(a.path);
    snprintf(a.path + l, sizeof a.path - l, "&epoch=%llu",
             strtoull(e + strlen("\"epoch\":"), NULL, 10));
    free(r.body);
    assert_int_equal(call("POST", "/v1/jobs", ADMIN_TOK, JOB, NULL), 201);
    usleep(300000); /* placed on n1 */
    assert_int_equal(call("POST", "/v1/nodes/n1/report", AGENT_TOK, NODE, "\"job\":1,"), 200);
    assign_poll(&a);
    assert_int_equal(a.status, 200);
    if (!strstr(a.body, "\"job\":1,"))
        fail_msg("n1's poll answered without job 1: %s", a.body);
    assert_true(a.took_s >= 1.5); /* its deadline, not at once */

    /* news the agent was not told answers at once, as before */
    char *w = strstr(a.path, "wait=2");
    assert_non_null(w);
    memcpy(w, "wait=9", 6);
    pthread_create(&t, NULL, assign_poll, &a);
    usleep(300000);
    assert_int_equal(call("POST", "/v1/jobs", ADMIN_TOK, JOB, NULL), 201);
    pthread_join(t, NULL);
    assert_int_equal(a.status, 200);
    if (!strstr(a.body, "\"job\":2,"))
        fail_msg("n1's poll answered without job 2: %s", a.body);
    assert_true(a.took_s < 5);
}

/* Event loops: one per CPU, at least 2 (a pool: libmicrohttpd's single
 * loop is not used) and at most 64, or as asked. */
static void test_loop_threads(void **unused)
{
    (void)unused;
    assert_int_equal(api_loop_threads(0, 1), 2);
    assert_int_equal(api_loop_threads(0, 2), 2);
    assert_int_equal(api_loop_threads(0, 8), 8);
    assert_int_equal(api_loop_threads(0, 200), 64);
    assert_int_equal(api_loop_threads(0, -1), 2);
    assert_int_equal(api_loop_threads(3, 2), 3);
    assert_int_equal(api_loop_threads(1000, 2), 256);
}

static void *submitter(void *arg)
{
    int *ok = arg;
    for (int i = 0; i < 25; i++)
        *ok += call("POST", "/v1/jobs", ALICE_TOK, JOB, NULL) == 201;
    return NULL;
}

static void test_concurrent_submits(void **unused)
{
    pthread_t t[8];
    int ok[8] = {0}, total = 0;
    (void)unused;
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, submitter, &ok[i]);
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        total += ok[i];
    }
    assert_int_equal(total, 200);
    st_status_t stt;
    st_status(st, &stt);
    assert_int_equal(stt.jobs, 200);
    assert_int_equal(call("GET", "/v1/check", ADMIN_TOK, NULL, "\"ok\":true"), 200);
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int raw_connect(int p)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)p),
                            .sin_addr.s_addr = htonl(0x7f000001)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

/* Send s on fd, then drip[] one byte every 100 ms (NULL: none) until the
 * server closes the connection or `limit` seconds pass; what it answered
 * goes to got (up to cap - 1 bytes, NUL-terminated). The seconds it took
 * to close, or -1 when it stayed open. */
static double until_closed(int fd, const char *s, const char *drip, double limit, char *got,
                           size_t cap)
{
    double t0 = mono_s();
    size_t n = 0, d = 0;

    assert_int_equal(send(fd, s, strlen(s), MSG_NOSIGNAL), (ssize_t)strlen(s));
    got[0] = '\0';
    while (mono_s() - t0 < limit) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, 100) > 0) {
            ssize_t k = recv(fd, got + n, cap - 1 - n, 0);
            if (k <= 0)
                return mono_s() - t0; /* closed (or reset) by the server */
            n += (size_t)k;
            got[n] = '\0';
            if (n == cap - 1)
                n = 0; /* keep reading; only the start is looked at */
            continue;
        }
        if (drip && drip[d] && send(fd, drip + d, 1, MSG_NOSIGNAL) == 1)
            d++;
    }
    return -1;
}

/* The deadlines (api_opts_t's head, body and idle timeouts, 1 s each
 * here): a head sent a line at a time, a body a byte at a time, and an
 * idle keep-alive connection are each closed past theirs (not before it,
 * and within a bound), the slow request never runs, and the server still
 * answers. */
static void test_deadlines(void **unused)
{
    arb_err_t err = {{0}};
    char got[4096], head[512], drip[256];
    (void)unused;
    api_server_stop(srv);
    api_opts_t o = {.host = "127.0.0.1",
                    .tokens = &toks,
                    .head_timeout_ms = 1000,
                    .body_timeout_ms = 1000,
                    .idle_timeout_ms = 1000};
    assert_int_equal(api_server_start(st, &o, &srv, &err), 0);
    port = api_server_port(srv);
    memset(drip, 'x', sizeof drip - 1);
    drip[sizeof drip - 1] = '\0';

    /* the head: header lines a byte every 100 ms, never ended */
    int fd = raw_connect(port);
    char lines[2048] = "";
    for (int i = 0; i < 100; i++)
        snprintf(lines + strlen(lines), sizeof lines - strlen(lines), "X-%d: y\r\n", i);
    double t =
        until_closed(fd, "GET /v1/status HTTP/1.1\r\nHost: x\r\n", lines, 15, got, sizeof got);
    close(fd);
    if (t < 0.5 || t > 15)
        fail_msg("a slow head: closed after %.2f s (-1: open 15 s on; its deadline: 1 s)", t);
    assert_null(strstr(got, "HTTP/1.1 200"));

    /* the body: the head whole, then one byte of the 200 every 100 ms */
    snprintf(head, sizeof head,
             "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
             "Content-Type: application/json\r\nContent-Length: 200\r\n\r\n",
             ADMIN_TOK);
    fd = raw_connect(port);
    t = until_closed(fd, head, drip, 15, got, sizeof got);
    close(fd);
    if (t < 0.5 || t > 15)
        fail_msg("a slow body: closed after %.2f s (-1: open 15 s on; its deadline: 1 s)", t);
    assert_null(strstr(got, "HTTP/1.1 2"));

    /* idle: one request answered, then nothing */
    fd = raw_connect(port);
    t = until_closed(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", NULL, 15, got, sizeof got);
    close(fd);
    assert_non_null(strstr(got, "HTTP/1.1 200"));
    if (t < 0.5 || t > 15)
        fail_msg("an idle connection: closed after %.2f s (-1: open 15 s on; its deadline: 1 s)",
                 t);

    /* nothing ran, and the server answers */
    assert_int_equal(call("GET", "/v1/jobs", ADMIN_TOK, NULL, "{\"jobs\":[]}"), 200);
    assert_int_equal(call("POST", "/v1/jobs", ADMIN_TOK, JOB, NULL), 201);
}

/* What the route table's rows say a request carries, read by the router
 * before the handler (api_route_run), in its order: the job id, If-Match,
 * the node name, the body; 405 names the methods the path has. */
static void test_router_rows(void **unused)
{
    (void)unused;
    assert_int_equal(call("POST", "/v1/nodes/n1/report", AGENT_TOK, NODE, NULL), 200);
    assert_int_equal(call("PUT", "/v1/jobs/1", ADMIN_TOK, NULL, "use GET, DELETE"), 405);
    assert_int_equal(call("PUT", "/v1/nodes/n1", ADMIN_TOK, NULL, "use GET, PATCH, DELETE"), 405);
    /* the job id before If-Match (no header can be sent by call(): the id) */
    assert_int_equal(call("DELETE", "/v1/jobs/0", ADMIN_TOK, NULL, "job ids are positive"), 404);
    assert_int_equal(call("GET", "/v1/jobs/x/explain", ADMIN_TOK, NULL, "job 'x'"), 404);
    /* the node name before the body; then the body, named by its kind */
    assert_int_equal(call("PATCH", "/v1/nodes/Bad_Name", ADMIN_TOK, "{,", "Bad_Name"), 404);
    assert_int_equal(call("PATCH", "/v1/nodes/n1", ADMIN_TOK, "{,", "node.json:1:"), 400);
    assert_int_equal(call("PATCH", "/v1/nodes/n1", ADMIN_TOK, "", "node.json:"), 400);
    assert_int_equal(call("POST", "/v1/nodes/n1/cordon", ADMIN_TOK, "[1,", "node.json:1:"), 400);
    assert_int_equal(call("POST", "/v1/nodes/n1/cordon", ADMIN_TOK, "", "Draining"), 200);
    assert_int_equal(
        call("POST", "/v1/nodes/n1/report", AGENT_TOK, "{\"a\": 1, \"a\": 2}", "report.json:1:"),
        400);
    assert_int_equal(call("POST", "/v1/services/web/load", ADMIN_TOK, "nope", "load.json:1:"), 400);
    assert_int_equal(call("POST", "/v1/jobs", ADMIN_TOK, "", "empty body"), 400);
    /* a body on a route that takes none is ignored, as before */
    assert_int_equal(call("GET", "/v1/queues", ADMIN_TOK, "{,", "\"queues\""), 200);
    /* nothing was applied by a refused request */
    assert_int_equal(call("GET", "/v1/jobs", ADMIN_TOK, NULL, "{\"jobs\":[]}"), 200);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_auth_and_codes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_validation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metrics_events, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_after_commit_not_held, setup, teardown),
        cmocka_unit_test_setup_teardown(test_long_poll, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_submits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_router_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deadlines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_assign_poll_change, setup, teardown),
        cmocka_unit_test_setup_teardown(test_assign_poll_deadline_stop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_assign_poll_told, setup, teardown),
        cmocka_unit_test(test_loop_threads),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
