/*
 * lbtest.c: the tool the `arbiter lb` integration tests drive: tiny HTTP
 * backends and a load generator, on 127.0.0.1 only. Built by CMake as
 * tests/arb_lbtest; it reuses the proxy's own HTTP parser (src/lb/http.c).
 *
 *   arb_lbtest backend --id NAME (--port-file F | --port P) [--delay-ms D] [--health-file H]
 *       [--die-after N] [--http10] [--cert-file F --key-file K [--client-ca CA]] [--key-update]
 *       A keep-alive HTTP/1.1 server, one thread per connection, on an
 *       ephemeral port (written to F), or on port P (a service replica's $PORT). Every response
 * carries "X-Backend: NAME" and "X-Arbiter-Load: q=<waiting>,inflight=<n>". /healthz answers 200
 * while file H exists (always, without H), else 503. /echo answers the request body's length.
 * /chunked answers with a chunked body. /max answers the most requests it ever had in
 * flight at once. --http10 answers HTTP/1.0 (a Content-Length, then it closes the
 * connection: an old server behind the proxy). Anything else answers "NAME\n" after D ms. With
 *       --die-after, the request after the Nth is never answered: the
 *       backend SIGKILLs itself (a crash in the middle of a load run,
 *       whatever the machine's speed). /sse streams 5 server-sent events, 150 ms
 *       apart, chunked. /conns answers "NAME max-per-conn K accepted N": the most
 *       requests one connection carried, the connections accepted. /metrics answers vLLM's gauges
 * (waiting 2, running 1, KV 0.25). With --cert-file it serves HTTPS (GnuTLS; a certificate of
 * `arbiter init server NAME DIR`); with --client-ca every client must present a certificate that
 * chains to CA (mTLS). A failed handshake is said on stderr ("handshake failed: REASON").
 * --key-update: a TLS 1.3 KeyUpdate right before every response (a message of TLS's own,
 * which the client's GnuTLS takes silently, with the response behind it).
 *   arb_lbtest load --port P [--conns C] [--requests N | --duration-ms D]
 *       [--keys K] [--header NAME] [--map-out FILE] [--path P]
 *       C keep-alive connections, GET PATH, one request at a time each.
 *       With --keys, request i carries "NAME: key-<i % K>". Prints one JSON
 *       line: ok, errors, per-backend counts, p50/p99 ms, keys seen on more
 *       than one backend; --map-out writes "key backend" per key.
 *   arb_lbtest req --port P [--method M] [--path P] [--body-bytes N] [--chunked]
 *       One request; prints the status line's code and the body.
 *   arb_lbtest llm --port P [--chat] [--conns C] [--requests N] [--tenants K]
 *       [--context-bytes B] [--question-bytes Q] [--max-tokens M] [--model NAME]
 *       [--stream] [--body TEXT] [--tenant-prefix S] [--error-out FILE]
 *       OpenAI requests (a completion, or a chat with the context as the system
 *       message), C threads, one new connection per request; request i is of
 *       tenant i % K (X-Tenant: S<k>), whose context is B bytes of its own
 *       text, then a question of Q bytes of its own. --body sends TEXT as is.
 *       Prints one JSON line: counts by status class (429 apart), the last
 *       Retry-After seen, tokens received (streamed: "data: {" events), cached
 *       prompt tokens the replicas reported (usage, not streamed), and for
 *       streams the smallest spread between a request's first and last token.
 *       --error-out: the body of the last answer that was not 2xx goes to FILE.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/gnutls.h>

#include "lb/http.h"

static const char *opt(int argc, char **argv, const char *name, const char *def)
{
    for (int i = 0; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return argv[i + 1];
    return def;
}

static bool flag(int argc, char **argv, const char *name)
{
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return true;
    return false;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0) {
            if (k < 0 && errno == EINTR)
                continue;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* ---- backend -------------------------------------------------------------- */

static const char *b_id = "b";

/* A backend connection: plain, or a TLS session over the socket (blocking). */
typedef struct bconn {
    int fd;
    gnutls_session_t tls;
} bconn_t;

static gnutls_certificate_credentials_t b_cred; /* --cert-file: HTTPS */
static gnutls_priority_t b_prio;
static bool b_mtls, b_key_update;

static ssize_t b_recv(bconn_t *c, void *buf, size_t n)
{
    if (!c->tls)
        return recv(c->fd, buf, n, 0);
    ssize_t r;
    do
        r = gnutls_record_recv(c->tls, buf, n);
    while (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED);
    return r < 0 ? -1 : r;
}

static int b_write_all(bconn_t *c, const char *p, size_t n)
{
    if (!c->tls)
        return write_all(c->fd, p, n);
    if (b_key_update && gnutls_protocol_get_version(c->tls) == GNUTLS_TLS1_3 &&
        gnutls_session_key_update(c->tls, 0) < 0)
        return -1;
    while (n > 0) {
        ssize_t k = gnutls_record_send(c->tls, p, n);
        if (k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* The server side of a TLS handshake; false (said on stderr) when it fails. */
static bool b_tls_accept(bconn_t *c)
{
    int rc;

    if (gnutls_init(&c->tls, GNUTLS_SERVER) < 0) {
        c->tls = NULL;
        return false;
    }
    if (gnutls_priority_set(c->tls, b_prio) < 0 ||
        gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, b_cred) < 0)
        goto fail;
    if (b_mtls) {
        gnutls_certificate_server_set_request(c->tls, GNUTLS_CERT_REQUIRE);
        gnutls_session_set_verify_cert(c->tls, NULL, 0);
    }
    gnutls_transport_set_int(c->tls, c->fd);
    do
        rc = gnutls_handshake(c->tls);
    while (rc < 0 && !gnutls_error_is_fatal(rc));
    if (rc < 0) {
        fprintf(stderr, "%s: handshake failed: %s\n", b_id, gnutls_strerror(rc));
        goto fail;
    }
    return true;
fail:
    gnutls_deinit(c->tls);
    c->tls = NULL;
    return false;
}

static atomic_long b_accepted, b_max_per_conn;

static int b_delay_ms;
static const char *b_health_file;
static atomic_int b_inflight, b_max_inflight;
static bool b_http10;
static long b_die_after; /* 0: never */
static atomic_long b_served;

static void *b_conn(void *arg)
{
    bconn_t conn = {.fd = (int)(intptr_t)arg}, *c = &conn;
    char *buf = malloc(1 << 16);
    size_t len = 0;
    long served = 0;

    if (b_cred && !b_tls_accept(c))
        goto done;
    while (buf) {
        http_head_t h;
        int rc = http_parse_request(buf, len, NULL, &h);
        if (rc == 0) {
            if (len == (1 << 16))
                break;
            ssize_t n = b_recv(c, buf + len, (1 << 16) - len);
            if (n <= 0)
                break;
            len += (size_t)n;
            continue;
        }
        if (rc < 0)
            break;
        served++;
        for (long m = atomic_load(&b_max_per_conn);
             served > m && !atomic_compare_exchange_weak(&b_max_per_conn, &m, served);)
            ;
        if (b_die_after > 0 && atomic_fetch_add(&b_served, 1) >= b_die_after)
            kill(getpid(), SIGKILL);
        int now_in = atomic_fetch_add(&b_inflight, 1) + 1;
        for (int m = atomic_load(&b_max_inflight);
             now_in > m && !atomic_compare_exchange_weak(&b_max_inflight, &m, now_in);)
            ;
        /* read and count the body */
        http_body_t body;
        uint64_t blen = 0;
        size_t off = h.len;
        char target[256];
        snprintf(target, sizeof target, "%.*s", (int)(h.tlen < 255 ? h.tlen : 255), h.target);
        bool keep = http_keepalive(&h), head = h.method == HTTP_HEAD;
        http_body_request(&body, &h);
        for (;;) {
            ssize_t k = http_body_feed(&body, buf + off, len - off);
            if (k < 0)
                goto done;
            blen += (uint64_t)k; /* chunked: bytes on the wire, framing included */
            off += (size_t)k;
            if (body.done)
                break;
            len = off = 0;
            ssize_t n = b_recv(c, buf, 1 << 16);
            if (n <= 0)
                goto done;
            len = (size_t)n;
        }
        memmove(buf, buf + off, len - off);
        len -= off;

        char resp[1024], bodytxt[256];
        int q = atomic_load(&b_inflight);
        int code = 200, n;
        const char *reason = "OK";
        if (strcmp(target, "/healthz") == 0) {
            if (b_health_file && access(b_health_file, F_OK) != 0) {
                code = 503;
                reason = "Service Unavailable";
            }
            snprintf(bodytxt, sizeof bodytxt, "%s\n", code == 200 ? "ok" : "down");
        } else if (strcmp(target, "/max") == 0) {
            snprintf(bodytxt, sizeof bodytxt, "max-inflight %d\n", atomic_load(&b_max_inflight));
        } else if (strcmp(target, "/conns") == 0) {
            snprintf(bodytxt, sizeof bodytxt, "%s max-per-conn %ld accepted %ld\n", b_id,
                     atomic_load(&b_max_per_conn), atomic_load(&b_accepted));
        } else if (strcmp(target, "/metrics") == 0) {
            snprintf(bodytxt, sizeof bodytxt,
                     "vllm:num_requests_waiting 2\nvllm:num_requests_running 1\n"
                     "vllm:gpu_cache_usage_perc 0.25\n");
        } else if (strcmp(target, "/echo") == 0) {
            snprintf(bodytxt, sizeof bodytxt, "%s got %llu\n", b_id, (unsigned long long)blen);
        } else {
            if (b_delay_ms > 0)
                usleep((useconds_t)b_delay_ms * 1000);
            snprintf(bodytxt, sizeof bodytxt, "%s\n", b_id);
        }
        if (strcmp(target, "/sse") == 0) { /* five events, 150 ms apart, each its own chunk */
            n = snprintf(resp, sizeof resp,
                         "HTTP/1.1 200 OK\r\nX-Backend: %s\r\nContent-Type: text/event-stream\r\n"
                         "Transfer-Encoding: chunked\r\n\r\n",
                         b_id);
            atomic_fetch_sub(&b_inflight, 1);
            if (b_write_all(c, resp, (size_t)n) < 0)
                break;
            for (int i = 0; i < 5; i++) {
                char ev[64];
                int k = snprintf(ev, sizeof ev, "data: tok-%d\n\n", i);
                n = snprintf(resp, sizeof resp, "%x\r\n%s\r\n", k, ev);
                if (i > 0)
                    usleep(150000);
                if (b_write_all(c, resp, (size_t)n) < 0)
                    goto done;
            }
            if (b_write_all(c, "0\r\n\r\n", 5) < 0 || !keep)
                break;
            continue;
        }
        if (strcmp(target, "/chunked") == 0) {
            n = snprintf(resp, sizeof resp,
                         "HTTP/1.1 200 OK\r\nX-Backend: %s\r\nTransfer-Encoding: chunked\r\n\r\n"
                         "3\r\nabc\r\n%zx\r\n%s\r\n0\r\n\r\n",
                         b_id, strlen(bodytxt), bodytxt);
        } else if (b_http10) { /* no keep-alive in HTTP/1.0 unless asked: it closes */
            n = snprintf(resp, sizeof resp,
                         "HTTP/1.0 %d %s\r\nX-Backend: %s\r\nContent-Length: %zu\r\n\r\n%s", code,
                         reason, b_id, strlen(bodytxt), head ? "" : bodytxt);
            keep = false;
        } else {
            n = snprintf(resp, sizeof resp,
                         "HTTP/1.1 %d %s\r\nX-Backend: %s\r\nX-Arbiter-Load: q=%d,inflight=%d\r\n"
                         "Content-Length: %zu\r\n%s\r\n%s",
                         code, reason, b_id, q > 1 ? q - 1 : 0, q, strlen(bodytxt),
                         keep ? "" : "Connection: close\r\n", head ? "" : bodytxt);
        }
        atomic_fetch_sub(&b_inflight, 1);
        if (b_write_all(c, resp, (size_t)n) < 0 || !keep)
            break;
    }
done:
    free(buf);
    if (c->tls) {
        gnutls_bye(c->tls, GNUTLS_SHUT_WR);
        gnutls_deinit(c->tls);
    }
    close(c->fd);
    return NULL;
}

/* --cert-file F --key-file K [--client-ca CA]: serve HTTPS. */
static int b_tls_setup(int argc, char **argv)
{
    const char *cert = opt(argc, argv, "--cert-file", NULL),
               *key = opt(argc, argv, "--key-file", NULL);
    const char *ca = opt(argc, argv, "--client-ca", NULL);
    int rc;

    if (!cert)
        return 0;
    if ((rc = gnutls_certificate_allocate_credentials(&b_cred)) < 0 ||
        (rc = gnutls_certificate_set_x509_key_file2(b_cred, cert, key ? key : cert,
                                                    GNUTLS_X509_FMT_PEM, NULL, 0)) < 0 ||
        (rc = gnutls_priority_init(&b_prio, "NORMAL", NULL)) < 0) {
        fprintf(stderr, "backend: --cert-file %s: %s\n", cert, gnutls_strerror(rc));
        return -1;
    }
    if (ca) {
        if (gnutls_certificate_set_x509_trust_file(b_cred, ca, GNUTLS_X509_FMT_PEM) <= 0) {
            fprintf(stderr, "backend: --client-ca %s: no certificate\n", ca);
            return -1;
        }
        b_mtls = true;
    }
    return 0;
}

static int listen_any(int *port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                             .sin_port = htons((uint16_t)*port)};
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 1024) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

static int run_backend(int argc, char **argv)
{
    const char *pf = opt(argc, argv, "--port-file", NULL);
    int port = atoi(opt(argc, argv, "--port", "0")), lfd;

    b_id = opt(argc, argv, "--id", "b");
    b_delay_ms = atoi(opt(argc, argv, "--delay-ms", "0"));
    b_health_file = opt(argc, argv, "--health-file", NULL);
    b_die_after = atol(opt(argc, argv, "--die-after", "0"));
    b_http10 = flag(argc, argv, "--http10");
    b_key_update = flag(argc, argv, "--key-update");
    signal(SIGPIPE, SIG_IGN);
    if (b_tls_setup(argc, argv) < 0)
        return 1;
    lfd = listen_any(&port);
    if (lfd < 0) {
        perror("listen");
        return 1;
    }
    if (pf) {
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%s.tmp", pf);
        FILE *f = fopen(tmp, "w");
        if (!f)
            return 1;
        fprintf(f, "%d\n", port);
        fclose(f);
        rename(tmp, pf);
    }
    for (;;) {
        int fd = accept(lfd, NULL, NULL), one = 1;
        pthread_t t;
        if (fd < 0)
            continue;
        atomic_fetch_add(&b_accepted, 1);
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (pthread_create(&t, NULL, b_conn, (void *)(intptr_t)fd) != 0) {
            close(fd);
            continue;
        }
        pthread_detach(t);
    }
}

/* ---- client ---------------------------------------------------------------- */

static long dial_timeout_s = 10; /* llm: 600 (a request may wait in a queue) */

static int dial(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct timeval tv = {.tv_sec = dial_timeout_s};
    if (fd < 0)
        return -1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Read one response on fd (buffer carried across calls). Returns the status
 * and fills the backend id and body; -1 on a connection error. */
typedef struct rbuf {
    char d[1 << 16];
    size_t len;
} rbuf_t;

static int read_response(int fd, rbuf_t *rb, bool head_req, char *backend, size_t blen, char *body,
                         size_t bodylen)
{
    http_head_t h;
    int rc;

    backend[0] = '\0';
    if (body)
        body[0] = '\0';
    for (;;) {
        rc = http_parse_response(rb->d, rb->len, &h);
        if (rc < 0)
            return -1;
        if (rc > 0)
            break;
        ssize_t n = recv(fd, rb->d + rb->len, sizeof rb->d - rb->len, 0);
        if (n <= 0)
            return -1;
        rb->len += (size_t)n;
    }
    /* X-Backend */
    const char *x = memmem(rb->d, h.len, "X-Backend: ", 11);
    if (x) {
        size_t k = strcspn(x + 11, "\r");
        snprintf(backend, blen, "%.*s", (int)k, x + 11);
    }
    http_body_t b;
    http_body_response(&b, &h, head_req);
    size_t off = h.len, bo = 0;
    for (;;) {
        ssize_t k = http_body_feed(&b, rb->d + off, rb->len - off);
        if (k < 0)
            return -1;
        if (body) {
            size_t c = (size_t)k < bodylen - 1 - bo ? (size_t)k : bodylen - 1 - bo;
            memcpy(body + bo, rb->d + off, c);
            bo += c;
            body[bo] = '\0';
        }
        off += (size_t)k;
        if (b.done)
            break;
        memmove(rb->d, rb->d + off, rb->len - off);
        rb->len -= off;
        off = 0;
        ssize_t n = recv(fd, rb->d + rb->len, sizeof rb->d - rb->len, 0);
        if (n == 0 && b.mode == HTTP_BODY_CLOSE)
            break;
        if (n <= 0)
            return -1;
        rb->len += (size_t)n;
    }
    memmove(rb->d, rb->d + off, rb->len - off);
    rb->len -= off;
    return h.status;
}

/* ---- load ------------------------------------------------------------------ */

#define MAXB 16
#define MAXKEYS 4096

static int l_port, l_keys;
static const char *l_header, *l_path;
static atomic_long l_next, l_limit, l_ok, l_err;
static double l_deadline;
static pthread_mutex_t l_mu = PTHREAD_MUTEX_INITIALIZER;
static char l_names[MAXB][64];
static long l_count[MAXB];
static int l_nb;
static signed char l_keymap[MAXKEYS]; /* key -> backend index, -1 none */
static bool l_keysplit[MAXKEYS];
static double *l_lat;
static long l_nlat, l_caplat;

static int backend_index(const char *name)
{
    for (int i = 0; i < l_nb; i++)
        if (strcmp(l_names[i], name) == 0)
            return i;
    if (l_nb == MAXB)
        return MAXB - 1;
    snprintf(l_names[l_nb], sizeof l_names[0], "%s", name);
    return l_nb++;
}

static void *l_worker(void *arg)
{
    rbuf_t *rb = malloc(sizeof *rb);
    int fd = -1;

    while (rb) {
        long i = atomic_fetch_add(&l_next, 1);
        if ((l_limit > 0 && i >= l_limit) || (l_deadline > 0 && now_ms() >= l_deadline))
            break;
        if (fd < 0) {
            fd = dial(l_port);
            rb->len = 0;
            if (fd < 0) {
                atomic_fetch_add(&l_err, 1);
                usleep(10000);
                continue;
            }
        }
        char req[512], be[64];
        int key = l_keys > 0 ? (int)(i % l_keys) : -1, n;
        if (key >= 0)
            n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\n%s: key-%d\r\n\r\n",
                         l_path, l_header, key);
        else
            n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", l_path);
        double t0 = now_ms();
        int st = write_all(fd, req, (size_t)n) < 0
                     ? -1
                     : read_response(fd, rb, false, be, sizeof be, NULL, 0);
        double dt = now_ms() - t0;
        if (st < 200 || st >= 300) {
            atomic_fetch_add(&l_err, 1);
            if (st < 0) {
                close(fd);
                fd = -1;
            }
            continue;
        }
        atomic_fetch_add(&l_ok, 1);
        pthread_mutex_lock(&l_mu);
        int bi = backend_index(be);
        l_count[bi]++;
        if (key >= 0 && key < MAXKEYS) {
            if (l_keymap[key] >= 0 && l_keymap[key] != bi)
                l_keysplit[key] = true;
            l_keymap[key] = (signed char)bi;
        }
        if (l_nlat == l_caplat) {
            l_caplat = l_caplat ? l_caplat * 2 : 4096;
            double *grown = realloc(l_lat, (size_t)l_caplat * sizeof *l_lat);
            if (!grown) /* keep what was measured; stop recording */
                l_caplat = l_nlat;
            else
                l_lat = grown;
        }
        if (l_lat && l_nlat < l_caplat)
            l_lat[l_nlat++] = dt;
        pthread_mutex_unlock(&l_mu);
    }
    if (fd >= 0)
        close(fd);
    free(rb);
    return NULL;
}

static int dcmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int run_load(int argc, char **argv)
{
    int conns = atoi(opt(argc, argv, "--conns", "4"));
    pthread_t th[256];
    const char *mapout = opt(argc, argv, "--map-out", NULL);
    int dur = atoi(opt(argc, argv, "--duration-ms", "0"));

    l_port = atoi(opt(argc, argv, "--port", "0"));
    l_limit = atol(opt(argc, argv, "--requests", "0"));
    l_keys = atoi(opt(argc, argv, "--keys", "0"));
    l_header = opt(argc, argv, "--header", "X-User");
    l_path = opt(argc, argv, "--path", "/");
    if (l_keys > MAXKEYS)
        l_keys = MAXKEYS;
    memset(l_keymap, -1, sizeof l_keymap);
    if (conns < 1 || conns > 256 || l_port <= 0 || (l_limit <= 0 && dur <= 0)) {
        fprintf(stderr, "load: give --port, --conns 1..256, --requests N or --duration-ms D\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    if (dur > 0)
        l_deadline = now_ms() + dur;
    for (int i = 0; i < conns; i++)
        pthread_create(&th[i], NULL, l_worker, NULL);
    for (int i = 0; i < conns; i++)
        pthread_join(th[i], NULL);
    qsort(l_lat, (size_t)l_nlat, sizeof *l_lat, dcmp);
    int split = 0;
    for (int k = 0; k < l_keys; k++)
        split += l_keysplit[k];
    printf("{\"ok\":%ld,\"errors\":%ld,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"keys_split\":%d,"
           "\"by\":{",
           (long)l_ok, (long)l_err, l_nlat ? l_lat[l_nlat / 2] : 0,
           l_nlat ? l_lat[(long)(l_nlat * 0.99)] : 0, split);
    for (int i = 0; i < l_nb; i++)
        printf("%s\"%s\":%ld", i ? "," : "", l_names[i], l_count[i]);
    printf("}}\n");
    if (mapout) {
        FILE *f = fopen(mapout, "w");
        for (int k = 0; f && k < l_keys; k++)
            if (l_keymap[k] >= 0)
                fprintf(f, "key-%d %s\n", k, l_names[(int)l_keymap[k]]);
        if (f)
            fclose(f);
    }
    free(l_lat);
    return 0;
}

/* ---- one request ----------------------------------------------------------- */

static int run_req(int argc, char **argv)
{
    int port = atoi(opt(argc, argv, "--port", "0"));
    const char *method = opt(argc, argv, "--method", "GET"), *path = opt(argc, argv, "--path", "/");
    long nbody = atol(opt(argc, argv, "--body-bytes", "0"));
    bool chunked = flag(argc, argv, "--chunked");
    static rbuf_t rb;
    static char body[1 << 16];
    char hdr[512], be[64];
    int fd, n, st;

    signal(SIGPIPE, SIG_IGN);
    fd = dial(port);
    if (fd < 0) {
        printf("connect failed\n");
        return 1;
    }
    if (chunked)
        n = snprintf(hdr, sizeof hdr,
                     "%s %s HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n", method,
                     path);
    else
        n = snprintf(hdr, sizeof hdr, "%s %s HTTP/1.1\r\nHost: t\r\nContent-Length: %ld\r\n\r\n",
                     method, path, nbody);
    if (write_all(fd, hdr, (size_t)n) < 0)
        return 1;
    char chunk[8192];
    memset(chunk, 'x', sizeof chunk);
    for (long left = nbody; left > 0;) {
        size_t c = left < (long)sizeof chunk ? (size_t)left : sizeof chunk;
        if (chunked) {
            n = snprintf(hdr, sizeof hdr, "%zx\r\n", c);
            if (write_all(fd, hdr, (size_t)n) < 0)
                return 1;
        }
        if (write_all(fd, chunk, c) < 0 || (chunked && write_all(fd, "\r\n", 2) < 0))
            return 1;
        left -= (long)c;
    }
    if (chunked && write_all(fd, "0\r\n\r\n", 5) < 0)
        return 1;
    st = read_response(fd, &rb, strcmp(method, "HEAD") == 0, be, sizeof be, body, sizeof body);
    printf("%d\n%s", st, body);
    close(fd);
    return st > 0 ? 0 : 1;
}

/* ---- OpenAI requests ---------------------------------------------------------- */

static int m_port, m_tenants, m_maxtok;
static long m_ctx, m_q;
static bool m_chat, m_stream;
static const char *m_model, *m_body, *m_tprefix, *m_errout;
static pthread_mutex_t m_errmu = PTHREAD_MUTEX_INITIALIZER;
static atomic_long m_next, m_limit, m_ok, m_429, m_4xx, m_5xx, m_err, m_tokens, m_cached;
static atomic_long m_retry, m_spread_min = 1L << 40, m_ttft_max;

static void filler(char *out, long n, unsigned seed)
{
    for (long i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        out[i] = (seed >> 16) % 7 == 0 ? ' ' : (char)('a' + (seed >> 16) % 26);
    }
}

/* One request on a new connection; returns 0 or -1 (connection error). */
static int m_one(long i)
{
    int t = (int)(i % m_tenants), fd, n;
    char *body = NULL, *msg = NULL, *ctx = NULL, *q = NULL;
    static __thread char buf[1 << 16];
    size_t len = 0, blen;
    int rc = -1;

    if (m_body) {
        body = strdup(m_body);
    } else {
        ctx = malloc((size_t)m_ctx + 64);
        q = malloc((size_t)m_q + 64);
        if (!ctx || !q)
            goto out;
        int k = snprintf(ctx, 64, "tenant %d context ", t);
        filler(ctx + k, m_ctx > k ? m_ctx - k : 0, (unsigned)t * 7919u + 1);
        ctx[m_ctx > k ? m_ctx : k] = '\0';
        k = snprintf(q, 64, "question %ld ", i);
        filler(q + k, m_q > k ? m_q - k : 0, (unsigned)i * 104729u + 7);
        q[m_q > k ? m_q : k] = '\0';
        blen = strlen(ctx) + strlen(q) + 512;
        body = malloc(blen);
        if (!body)
            goto out;
        if (m_chat)
            snprintf(body, blen,
                     "{\"model\":\"%s\",\"stream\":%s,\"max_tokens\":%d,\"messages\":[{\"role\":"
                     "\"system\",\"content\":\"%s\"},{\"role\":\"user\",\"content\":\"%s\"}]}",
                     m_model, m_stream ? "true" : "false", m_maxtok, ctx, q);
        else
            snprintf(body, blen,
                     "{\"model\":\"%s\",\"stream\":%s,\"max_tokens\":%d,\"prompt\":\"%s %s\"}",
                     m_model, m_stream ? "true" : "false", m_maxtok, ctx, q);
    }
    if (!body)
        goto out;
    blen = strlen(body) + 512;
    msg = malloc(blen);
    if (!msg)
        goto out;
    n = snprintf(
        msg, blen,
        "POST %s HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nX-Tenant: %s%d\r\n"
        "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
        m_chat ? "/v1/chat/completions" : "/v1/completions", m_tprefix, t, strlen(body), body);
    fd = dial(m_port);
    if (fd < 0)
        goto out;
    double t0 = now_ms(), first = 0, last = 0;
    if (write_all(fd, msg, (size_t)n) < 0) {
        close(fd);
        goto out;
    }
    http_head_t h;
    int hl = 0;
    for (;;) {
        hl = http_parse_response(buf, len, &h);
        if (hl > 0 && h.status >= 100 && h.status < 200) {
            memmove(buf, buf + hl, len - (size_t)hl);
            len -= (size_t)hl;
            continue;
        }
        if (hl != 0)
            break;
        ssize_t k = recv(fd, buf + len, sizeof buf - len, 0);
        if (k <= 0)
            break;
        len += (size_t)k;
    }
    if (hl <= 0) {
        close(fd);
        goto out;
    }
    const char *ra = memmem(buf, (size_t)hl, "Retry-After: ", 13);
    if (ra)
        atomic_store(&m_retry, atol(ra + 13));
    http_body_t b;
    http_body_response(&b, &h, false);
    size_t off = (size_t)hl;
    int match = 0, toks = 0;
    static const char pat[] = "data: {";
    static __thread char whole[8192];
    size_t wl = 0;
    whole[0] = '\0';
    for (;;) {
        ssize_t used = http_body_feed(&b, buf + off, len - off);
        if (used < 0)
            break;
        double now = now_ms();
        for (ssize_t j = 0; j < used; j++) {
            char c = buf[off + (size_t)j];
            match = c == pat[match] ? match + 1 : c == 'd';
            if (match == 7) {
                match = 0;
                if (toks++ == 0)
                    first = now;
                last = now;
            }
        }
        /* keep the start of the body: a whole answer's usage is in it */
        size_t take = (size_t)used < sizeof whole - 1 - wl ? (size_t)used : sizeof whole - 1 - wl;
        memcpy(whole + wl, buf + off, take);
        wl += take;
        whole[wl] = '\0';
        if (b.done)
            break;
        off = len = 0;
        ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k <= 0)
            break;
        len = (size_t)k;
    }
    close(fd);
    if (!b.done && b.mode != HTTP_BODY_CLOSE)
        goto out;
    rc = 0;
    const char *ct = strstr(whole, "\"cached_tokens\":");
    if (ct)
        atomic_fetch_add(&m_cached, atol(ct + 16));
    atomic_fetch_add(&m_tokens, toks);
    if (m_errout && (h.status < 200 || h.status >= 300)) {
        pthread_mutex_lock(&m_errmu);
        FILE *f = fopen(m_errout, "w");
        if (f) {
            fprintf(f, "%d %s\n", h.status, whole);
            fclose(f);
        }
        pthread_mutex_unlock(&m_errmu);
    }
    if (h.status >= 200 && h.status < 300)
        atomic_fetch_add(&m_ok, 1);
    else if (h.status == 429)
        atomic_fetch_add(&m_429, 1);
    else if (h.status < 500)
        atomic_fetch_add(&m_4xx, 1);
    else
        atomic_fetch_add(&m_5xx, 1);
    if (toks > 0) {
        long ttft = (long)(first - t0), sp = (long)(last - first);
        if (ttft > atomic_load(&m_ttft_max))
            atomic_store(&m_ttft_max, ttft);
        if (toks > 1 && sp < atomic_load(&m_spread_min))
            atomic_store(&m_spread_min, sp);
    }
out:
    free(ctx);
    free(q);
    free(body);
    free(msg);
    return rc;
}

static void *m_thread(void *arg)
{
    (void)arg;
    for (;;) {
        long i = atomic_fetch_add(&m_next, 1);
        if (i >= m_limit)
            break;
        if (m_one(i) < 0)
            atomic_fetch_add(&m_err, 1);
    }
    return NULL;
}

static int run_llm(int argc, char **argv)
{
    int conns = atoi(opt(argc, argv, "--conns", "1"));
    pthread_t th[256];

    m_port = atoi(opt(argc, argv, "--port", "0"));
    m_chat = flag(argc, argv, "--chat");
    m_stream = flag(argc, argv, "--stream");
    m_limit = atol(opt(argc, argv, "--requests", "1"));
    m_tenants = atoi(opt(argc, argv, "--tenants", "1"));
    m_ctx = atol(opt(argc, argv, "--context-bytes", "4000"));
    m_q = atol(opt(argc, argv, "--question-bytes", "200"));
    m_maxtok = atoi(opt(argc, argv, "--max-tokens", "4"));
    m_model = opt(argc, argv, "--model", "emu-7b");
    m_body = opt(argc, argv, "--body", NULL);
    m_tprefix = opt(argc, argv, "--tenant-prefix", "t");
    m_errout = opt(argc, argv, "--error-out", NULL);
    if (conns < 1 || conns > 256 || m_tenants < 1 || m_ctx < 0 || m_q < 0 || m_ctx > (64 << 20)) {
        fprintf(stderr, "arb_lbtest llm: a value out of range\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    dial_timeout_s = 600;
    for (int i = 0; i < conns; i++)
        pthread_create(&th[i], NULL, m_thread, NULL);
    for (int i = 0; i < conns; i++)
        pthread_join(th[i], NULL);
    long sp = atomic_load(&m_spread_min);
    printf("{\"ok\":%ld,\"s429\":%ld,\"s4xx\":%ld,\"s5xx\":%ld,\"errors\":%ld,"
           "\"retry_after\":%ld,\"tokens\":%ld,\"cached\":%ld,\"spread_min_ms\":%ld,"
           "\"ttft_max_ms\":%ld}\n",
           (long)m_ok, (long)m_429, (long)m_4xx, (long)m_5xx, (long)m_err, (long)m_retry,
           (long)m_tokens, (long)m_cached, sp == 1L << 40 ? -1 : sp, (long)m_ttft_max);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "llm") == 0)
        return run_llm(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "backend") == 0)
        return run_backend(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "load") == 0)
        return run_load(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "req") == 0)
        return run_req(argc - 1, argv + 1);
    fprintf(stderr, "usage: arb_lbtest backend|load|req|llm ...\n");
    return 2;
}
