/*
 * hostile.c: arb_hostile, the hostile clients of tests/cli/hostile*.sh: real
 * sockets on loopback doing what a careless or malicious client does.
 *
 *   arb_hostile slowloris --to HOST:PORT --conns N [--from 127.0.0.2[:K]]
 *                         [--every MS] [--for S]
 *       N connections (from K source addresses starting at --from, so that
 *       a per-address cap can be told from a global one), each sending the
 *       start of a request head and one more header line every MS (default
 *       1000), never ending it; for at most S seconds (default 30). Prints
 *       one JSON line: how many connected, were refused or reset at once,
 *       were closed by the server (and when, after connecting), and were
 *       still open at the end.
 *   arb_hostile hold --to HOST:PORT --conns N [--from ...] [--for S]
 *       The same with nothing sent at all (a TLS handshake never begun, a
 *       keep-alive connection left idle).
 *   arb_hostile agents --to HOST:PORT --conns N [--from ...] [--every MS] [--for S]
 *       N well-behaved agents, each on its own keep-alive connection: node
 *       ka-I registers (a report with an inventory), then reports every MS
 *       (default 5000, the first ones spread over that interval), for S
 *       seconds; --token-fmt F (a printf format with one %d, the index) sends
 *       each node's bearer token. Prints one JSON line: connections that reported, requests
 *       answered 200, failures (another status, a closed connection), the
 *       registrations' p50 and p99, and the heartbeats' p50, p99 and max in
 *       ms (`make bench-conns`).
 *   arb_hostile send --to HOST:PORT [--wait MS] [--half-close]
 *       Bytes from stdin sent as they are on one connection (then its write
 *       side shut with --half-close); what comes back (until the server
 *       closes, or MS of silence, default 2000) goes to stdout; then it
 *       closes. For framing tests: the bytes no client library would send.
 *
 * Exit 0 when it ran (the test judges the figures), 2 on usage errors.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct hconn {
    int fd;
    bool up, gone, refused;
    double t_up, t_gone;
    double next_send;
} hconn_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int usage(void)
{
    fprintf(stderr, "usage: arb_hostile slowloris|hold|agents --to HOST:PORT --conns N "
                    "[--from ADDR[:K]] [--token-fmt F] "
                    "[--every MS] [--for S]\n"
                    "       arb_hostile send --to HOST:PORT [--wait MS] [--half-close]\n");
    return 2;
}

static int parse_addr(const char *s, struct sockaddr_in *sin)
{
    char host[64];
    const char *c = strrchr(s, ':');
    if (!c || (size_t)(c - s) >= sizeof host)
        return -1;
    memcpy(host, s, (size_t)(c - s));
    host[c - s] = '\0';
    memset(sin, 0, sizeof *sin);
    sin->sin_family = AF_INET;
    sin->sin_port = htons((uint16_t)atoi(c + 1));
    return inet_pton(AF_INET, host, &sin->sin_addr) == 1 ? 0 : -1;
}

static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static int run_send(const struct sockaddr_in *to, int wait_ms, bool half_close)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    char buf[65536];
    ssize_t n;

    if (fd < 0 || connect(fd, (const struct sockaddr *)to, sizeof *to) < 0) {
        perror("arb_hostile send: connect");
        return 1;
    }
    while ((n = read(0, buf, sizeof buf)) > 0)
        for (ssize_t off = 0; off < n;) {
            ssize_t k = write(fd, buf + off, (size_t)(n - off));
            if (k <= 0)
                goto rd;
            off += k;
        }
    if (half_close)
        shutdown(fd, SHUT_WR); /* all sent; the server may still answer */
rd:
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, wait_ms) <= 0)
            break;
        n = read(fd, buf, sizeof buf);
        if (n <= 0)
            break;
        fwrite(buf, 1, (size_t)n, stdout);
    }
    close(fd);
    return 0;
}

/* ---- agents: keep-alive reporters -------------------------------------------------------- */

typedef struct rep {
    int fd;
    int state; /* 0 connecting, 1 idle, 2 writing, 3 reading, 4 dead */
    bool registered;
    double due, sent;
    char out[1024];
    size_t on, off;
    char in[8192];
    size_t inn;
} rep_t;

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* A whole response in r->in? Its status, and how many bytes it took; 0 none yet. */
static int response(const rep_t *r, size_t *used)
{
    const char *end = memmem(r->in, r->inn, "\r\n\r\n", 4);
    if (!end)
        return 0;
    size_t head = (size_t)(end - r->in) + 4, cl = 0;
    const char *p = memmem(r->in, head, "Content-Length:", 15);
    if (!p)
        p = memmem(r->in, head, "content-length:", 15);
    if (p)
        cl = (size_t)strtoul(p + 15, NULL, 10);
    if (r->inn < head + cl)
        return 0;
    *used = head + cl;
    return atoi(r->in + 9);
}

static int run_agents(const struct sockaddr_in *to, const struct sockaddr_in *from, int nfrom,
                      int conns, int every_ms, double for_s, const char *token_fmt)
{
    rep_t *c = calloc((size_t)conns, sizeof *c);
    struct pollfd *pf = calloc((size_t)conns, sizeof *pf);
    int *ix = calloc((size_t)conns, sizeof *ix);
    size_t lcap = 1 << 16, ln = 0, rcap = 1 << 14, rn = 0;
    double *lat = malloc(lcap * sizeof *lat), t0 = now_s(), every = every_ms / 1000.0;
    double *rlat = malloc(rcap * sizeof *rlat); /* registrations, apart */
    long ok = 0, bad = 0;
    int reported = 0;

    for (int i = 0; i < conns; i++) {
        c[i].fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (from) {
            struct sockaddr_in src = *from;
            src.sin_addr.s_addr = htonl(ntohl(from->sin_addr.s_addr) + (uint32_t)(i % nfrom));
            if (bind(c[i].fd, (struct sockaddr *)&src, sizeof src) < 0) {
                perror("arb_hostile: bind --from");
                return 1;
            }
        }
        if (c[i].fd < 0 || (connect(c[i].fd, (const struct sockaddr *)to, sizeof *to) < 0 &&
                            errno != EINPROGRESS)) {
            c[i].state = 4;
            bad++;
        }
        c[i].due = t0 + every * i / conns; /* spread over one interval */
    }
    while (now_s() - t0 < for_s) {
        double t = now_s();
        int n = 0;
        for (int i = 0; i < conns; i++) {
            rep_t *r = &c[i];
            if (r->state == 4)
                continue;
            if (r->state == 1 && t >= r->due) {
                char body[160];
                int bl = r->registered ? snprintf(body, sizeof body, "{\"tasks\": []}")
                                       : snprintf(body, sizeof body,
                                                  "{\"inventory\": {\"cpu\": 4, \"memory\": "
                                                  "\"8Gi\", \"gpus\": []}, \"tasks\": []}");
                char auth[300] = "";
                if (token_fmt) {
                    int k = snprintf(auth, sizeof auth, "Authorization: Bearer ");
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
                    k += snprintf(auth + k, sizeof auth - (size_t)k - 2, token_fmt, i);
#pragma GCC diagnostic pop
                    snprintf(auth + k, sizeof auth - (size_t)k, "\r\n");
                }
                r->on = (size_t)snprintf(r->out, sizeof r->out,
                                         "POST /v1/nodes/ka-%d/report HTTP/1.1\r\nHost: x\r\n"
                                         "%sContent-Type: application/json\r\n"
                                         "Content-Length: %d\r\n\r\n%s",
                                         i, auth, bl, body);
                r->off = 0;
                r->state = 2;
                r->sent = t;
            }
            if (r->state == 1)
                continue;
            pf[n].fd = r->fd;
            pf[n].events = r->state == 0 || r->state == 2 ? POLLOUT : POLLIN;
            pf[n].revents = 0;
            ix[n++] = i;
        }
        poll(pf, (nfds_t)n, 20);
        t = now_s();
        for (int k = 0; k < n; k++) {
            rep_t *r = &c[ix[k]];
            short re = pf[k].revents;
            if (!re)
                continue;
            if (re & (POLLERR | POLLHUP) && r->state != 3) {
                r->state = 4;
                bad++;
                close(r->fd);
                continue;
            }
            if (r->state == 0) {
                r->state = 1;
            } else if (r->state == 2) {
                ssize_t w = write(r->fd, r->out + r->off, r->on - r->off);
                if (w < 0 && errno != EAGAIN) {
                    r->state = 4;
                    bad++;
                    close(r->fd);
                } else if (w > 0 && (r->off += (size_t)w) == r->on) {
                    r->state = 3;
                }
            } else if (r->state == 3) {
                ssize_t got = read(r->fd, r->in + r->inn, sizeof r->in - r->inn);
                if (got <= 0 && !(got < 0 && errno == EAGAIN)) {
                    r->state = 4;
                    bad++;
                    close(r->fd);
                    continue;
                }
                if (got > 0)
                    r->inn += (size_t)got;
                size_t used = 0;
                int st = response(r, &used);
                if (!st)
                    continue;
                memmove(r->in, r->in + used, r->inn - used);
                r->inn -= used;
                bool reg = !r->registered;
                if (st == 200) {
                    ok++;
                    if (!r->registered)
                        reported++;
                    r->registered = true;
                } else {
                    bad++;
                }
                if (reg) {
                    if (rn == rcap) {
                        rcap *= 2;
                        rlat = realloc(rlat, rcap * sizeof *rlat);
                    }
                    rlat[rn++] = (t - r->sent) * 1000.0;
                } else {
                    if (ln == lcap) {
                        lcap *= 2;
                        lat = realloc(lat, lcap * sizeof *lat);
                    }
                    lat[ln++] = (t - r->sent) * 1000.0;
                }
                r->due = r->sent + every;
                r->state = 1;
            }
        }
    }
    qsort(lat, ln, sizeof *lat, cmp_d);
    qsort(rlat, rn, sizeof *rlat, cmp_d);
    int open_end = 0;
    for (int i = 0; i < conns; i++)
        if (c[i].state != 4) {
            open_end++;
            close(c[i].fd);
        }
    printf("{\"conns\": %d, \"reported\": %d, \"open_at_end\": %d, \"ok\": %ld, "
           "\"failed\": %ld, \"register_p50_ms\": %.2f, \"register_p99_ms\": %.2f, "
           "\"p50_ms\": %.2f, \"p99_ms\": %.2f, \"max_ms\": %.2f, \"ran_s\": %.1f}\n",
           conns, reported, open_end, ok, bad, rn ? rlat[rn / 2] : -1.0,
           rn ? rlat[(size_t)(rn * 0.99)] : -1.0, ln ? lat[ln / 2] : -1.0,
           ln ? lat[(size_t)(ln * 0.99)] : -1.0, ln ? lat[ln - 1] : -1.0, now_s() - t0);
    free(rlat);
    free(c);
    free(pf);
    free(ix);
    free(lat);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "", *to_s = NULL, *from_s = NULL, *token_fmt = NULL;
    int conns = 0, every_ms = 0, wait_ms = 2000, nfrom = 1;
    bool half_close = false;
    double for_s = 30;
    struct sockaddr_in to, from;

    for (int i = 2; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--half-close")) { /* the one flag without a value */
            half_close = true;
            continue;
        }
        if (!v)
            return usage();
        if (!strcmp(argv[i], "--to"))
            to_s = v;
        else if (!strcmp(argv[i], "--conns"))
            conns = atoi(v);
        else if (!strcmp(argv[i], "--from"))
            from_s = v;
        else if (!strcmp(argv[i], "--every"))
            every_ms = atoi(v);
        else if (!strcmp(argv[i], "--for"))
            for_s = atof(v);
        else if (!strcmp(argv[i], "--wait"))
            wait_ms = atoi(v);
        else if (!strcmp(argv[i], "--token-fmt"))
            token_fmt = v;

        else
            return usage();
        i++;
    }
    if (!to_s || parse_addr(to_s, &to) < 0)
        return usage();
    if (!strcmp(mode, "send"))
        return run_send(&to, wait_ms, half_close);
    bool talk = !strcmp(mode, "slowloris"), agents = !strcmp(mode, "agents");
    if (every_ms == 0)
        every_ms = agents ? 5000 : 1000;
    if ((!talk && !agents && strcmp(mode, "hold")) || conns < 1 || every_ms < 1)
        return usage();
    if (from_s) {
        char tmp[80];
        snprintf(tmp, sizeof tmp, "%s%s", from_s, strchr(from_s, ':') ? "" : ":1");
        if (parse_addr(tmp, &from) < 0)
            return usage();
        nfrom = ntohs(from.sin_port);
        from.sin_port = 0;
        if (nfrom < 1)
            nfrom = 1;
    }
    raise_nofile();
    signal(SIGPIPE, SIG_IGN);
    if (agents)
        return run_agents(&to, from_s ? &from : NULL, nfrom, conns, every_ms, for_s, token_fmt);
    hconn_t *c = calloc((size_t)conns, sizeof *c);
    struct pollfd *pf = calloc((size_t)conns, sizeof *pf);
    double t0 = now_s();
    for (int i = 0; i < conns; i++) {
        c[i].fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (c[i].fd < 0) {
            c[i].refused = c[i].gone = true;
            continue;
        }
        if (from_s) {
            struct sockaddr_in src = from;
            src.sin_addr.s_addr = htonl(ntohl(from.sin_addr.s_addr) + (uint32_t)(i % nfrom));
            if (bind(c[i].fd, (struct sockaddr *)&src, sizeof src) < 0) {
                perror("arb_hostile: bind --from");
                return 1;
            }
        }
        if (connect(c[i].fd, (struct sockaddr *)&to, sizeof to) < 0 && errno != EINPROGRESS) {
            c[i].refused = c[i].gone = true;
            close(c[i].fd);
            c[i].fd = -1;
        }
    }
    int seq = 0;
    for (;;) {
        double t = now_s();
        int live = 0, n = 0;
        if (t - t0 > for_s)
            break;
        for (int i = 0; i < conns; i++) {
            hconn_t *h = &c[i];
            if (h->gone)
                continue;
            live++;
            if (h->up && talk && t >= h->next_send) {
                char line[128];
                int k = h->next_send == 0
                            ? snprintf(line, sizeof line, "GET /v1/status HTTP/1.1\r\nHost: x\r\n")
                            : snprintf(line, sizeof line, "X-Slow-%d: %d\r\n", seq++, i);
                if (write(h->fd, line, (size_t)k) < 0 && errno != EAGAIN) {
                    h->gone = true;
                    h->t_gone = t - h->t_up;
                    close(h->fd);
                    continue;
                }
                h->next_send = t + every_ms / 1000.0;
            }
            pf[n].fd = h->fd;
            pf[n].events = h->up ? POLLIN : POLLOUT;
            pf[n].revents = 0;
            n++;
        }
        if (!live)
            break;
        poll(pf, (nfds_t)n, 50);
        t = now_s();
        for (int i = 0, k = 0; i < conns; i++) {
            hconn_t *h = &c[i];
            if (h->gone)
                continue;
            short re = pf[k++].revents;
            if (!h->up && (re & (POLLOUT | POLLERR | POLLHUP))) {
                int e = 0;
                socklen_t el = sizeof e;
                getsockopt(h->fd, SOL_SOCKET, SO_ERROR, &e, &el);
                if (e) {
                    h->refused = h->gone = true;
                    close(h->fd);
                    continue;
                }
                h->up = true;
                h->t_up = t;
                continue;
            }
            if (h->up && (re & (POLLIN | POLLERR | POLLHUP))) {
                char buf[4096];
                ssize_t r = read(h->fd, buf, sizeof buf);
                if (r <= 0 && !(r < 0 && errno == EAGAIN)) {
                    h->gone = true;
                    h->t_gone = t - h->t_up;
                    /* reset or closed within 0.5 s of connecting: refused by a cap */
                    if (h->t_gone < 0.5)
                        h->refused = true;
                    close(h->fd);
                }
            }
        }
    }
    int opened = 0, refused = 0, closed = 0, open_end = 0;
    double first = -1, last = -1;
    for (int i = 0; i < conns; i++) {
        if (c[i].refused) {
            refused++;
            continue;
        }
        if (c[i].up)
            opened++;
        if (c[i].gone) {
            closed++;
            if (first < 0 || c[i].t_gone < first)
                first = c[i].t_gone;
            if (c[i].t_gone > last)
                last = c[i].t_gone;
        } else if (c[i].up) {
            open_end++;
        }
        if (!c[i].gone && c[i].fd >= 0)
            close(c[i].fd);
    }
    printf("{\"conns\": %d, \"opened\": %d, \"refused\": %d, \"closed_by_server\": %d, "
           "\"open_at_end\": %d, \"first_close_s\": %.2f, \"last_close_s\": %.2f, "
           "\"ran_s\": %.2f}\n",
           conns, opened, refused, closed, open_end, first, last, now_s() - t0);
    free(c);
    free(pf);
    return 0;
}
