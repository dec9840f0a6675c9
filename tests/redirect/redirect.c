/*
 * redirect.c: arb_redirect, a stand-in for a follower controller in the
 * client failover tests (tests/cli/failover.sh). It speaks just enough
 * HTTP/1.1 on 127.0.0.1, one connection at a time, Connection: close:
 *
 *   arb_redirect --port-file F --log F (--to URL | --no-leader | --hang |
 *                                       --drop-reply URL)
 *
 *   --to URL     GET /v1/leader answers {"leader", "url": URL, "term": 7};
 *                every other request answers 307 with Location: URL + the
 *                request's path and query (what an HA follower does).
 *   --no-leader  GET /v1/leader and everything else answer 503 with
 *                Retry-After: 1 (an election in progress).
 *   --hang       accepts connections and never answers (a controller that
 *                is stopped, e.g. SIGSTOP: the kernel still accepts).
 *   --drop-reply URL  forwards each request to the controller at URL
 *                (http://IP:PORT), reads its reply and closes the client's
 *                connection without it: a leader that did the work and died
 *                before answering.
 *
 * Each request is appended to the --log file as "METHOD TARGET BODYBYTES
 * idem=KEY" (KEY "-" without an Idempotency-Key header), so a test can see
 * what a client sent it. SIGTERM/SIGINT stop it cleanly.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static const char *opt(int argc, char **argv, const char *name)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return argv[i + 1];
    return NULL;
}

static int has(int argc, char **argv, const char *name)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return 1;
    return 0;
}

/* A header's value in the head (NUL-terminated), copied to out. */
static int header(const char *head, const char *name, char *out, size_t n)
{
    size_t l = strlen(name);
    for (const char *p = strstr(head, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
        const char *h = p + 2;
        if (strncasecmp(h, name, l) == 0 && h[l] == ':') {
            h += l + 1;
            while (*h == ' ')
                h++;
            size_t k = strcspn(h, "\r\n");
            if (k >= n)
                k = n - 1;
            memcpy(out, h, k);
            out[k] = '\0';
            return 1;
        }
    }
    return 0;
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0)
            return;
        p += k;
        n -= (size_t)k;
    }
}

/* --drop-reply: send the request (req, n bytes) to the controller at base
 * (http://HOST:PORT), read its whole reply, and return its status line's
 * code; the caller then closes its client without a word. */
static int forward(const char *base, const char *req, size_t n, char *status, size_t sn)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    char host[64], buf[1 << 16], *end = NULL, cl[32];
    unsigned port;
    size_t got = 0;
    int fd;

    snprintf(status, sn, "none");
    if (sscanf(base, "http://%63[^:]:%u", host, &port) != 2 ||
        inet_pton(AF_INET, host, &a.sin_addr) != 1)
        return -1;
    a.sin_port = htons((uint16_t)port);
    if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    send_all(fd, req, n);
    while (got + 1 < sizeof buf && !(end = strstr(buf, "\r\n\r\n"))) {
        ssize_t k = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (k <= 0)
            break;
        got += (size_t)k;
        buf[got] = '\0';
    }
    if (end) {
        long want = 0;
        end[2] = '\0';
        if (header(buf, "Content-Length", cl, sizeof cl))
            want = strtol(cl, NULL, 10);
        size_t have = got - (size_t)(end + 4 - buf);
        while ((long)have < want) {
            ssize_t k = recv(fd, buf, sizeof buf, 0);
            if (k <= 0)
                break;
            have += (size_t)k;
        }
        snprintf(status, sn, "%.3s", buf + 9); /* "HTTP/1.1 201 ..." */
    }
    close(fd);
    return 0;
}

static void serve(int fd, const char *to, const char *drop, FILE *log)
{
    static char req[1 << 20]; /* the whole request: head and body */
    char head[1 << 16], method[16] = "", target[2048] = "", cl[32], idem[200], out[4096];
    size_t n = 0;
    char *end = NULL;
    long body = 0;

    req[0] = '\0'; /* static: clear the last request */
    while (n + 1 < sizeof head && !(end = strstr(req, "\r\n\r\n"))) {
        ssize_t k = recv(fd, req + n, sizeof head - 1 - n, 0);
        if (k <= 0)
            return;
        n += (size_t)k;
        req[n] = '\0';
    }
    if (!end)
        return;
    size_t hl = (size_t)(end + 2 - req); /* the head with its last header's CRLF */
    memcpy(head, req, hl);
    head[hl] = '\0';
    if (sscanf(head, "%15s %2047s", method, target) != 2)
        return;
    if (header(head, "Content-Length", cl, sizeof cl))
        body = strtol(cl, NULL, 10);
    if (body < 0 || (size_t)body > sizeof req - hl - 2)
        return;
    while (n < hl + 2 + (size_t)body) { /* the rest of the body */
        ssize_t k = recv(fd, req + n, sizeof req - n, 0);
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    if (!header(head, "Idempotency-Key", idem, sizeof idem))
        snprintf(idem, sizeof idem, "-");
    if (drop) {
        char status[16];
        forward(drop, req, n, status, sizeof status);
        fprintf(log, "%s %s %ld idem=%s forwarded=%s reply=dropped\n", method, target, body, idem,
                status);
        fflush(log);
        return; /* the caller closes: the client never hears back */
    }
    fprintf(log, "%s %s %ld idem=%s\n", method, target, body, idem);
    fflush(log);

    int leader = strcmp(method, "GET") == 0 && strncmp(target, "/v1/leader", 10) == 0;
    int len;
    if (!to) {
        const char *b = "{\"error\": {\"status\": 503, \"reason\": \"Service Unavailable\", "
                        "\"message\": \"no leader elected yet; retry\"}}";
        len = snprintf(out, sizeof out,
                       "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n"
                       "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                       "Connection: close\r\n\r\n%s",
                       strlen(b), b);
    } else if (leader) {
        char b[600];
        snprintf(b, sizeof b, "{\"leader\": \"test-leader\", \"url\": \"%s\", \"term\": 7}", to);
        len = snprintf(out, sizeof out,
                       "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                       "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                       strlen(b), b);
    } else {
        len = snprintf(out, sizeof out,
                       "HTTP/1.1 307 Temporary Redirect\r\nLocation: %s%s\r\n"
                       "Content-Length: 0\r\nConnection: close\r\n\r\n",
                       to, target);
    }
    if (len > 0 && (size_t)len < sizeof out)
        send_all(fd, out, (size_t)len);
}

int main(int argc, char **argv)
{
    const char *pf = opt(argc, argv, "--port-file"), *logf = opt(argc, argv, "--log");
    const char *to = opt(argc, argv, "--to"), *drop = opt(argc, argv, "--drop-reply");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    struct sigaction sa = {.sa_handler = on_signal};
    int one = 1, ls;
    FILE *log, *f;

    int hang = has(argc, argv, "--hang"), held[256], nheld = 0;
    if (!pf || !logf || (!to && !hang && !drop && !has(argc, argv, "--no-leader"))) {
        fprintf(stderr, "usage: arb_redirect --port-file F --log F (--to URL | --no-leader | "
                        "--hang | --drop-reply URL)\n");
        return 2;
    }
    sigaction(SIGTERM, &sa, NULL); /* no SA_RESTART: accept() returns EINTR */
    sigaction(SIGINT, &sa, NULL);
    if ((ls = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
        setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 64) < 0 ||
        getsockname(ls, (struct sockaddr *)&a, &al) < 0) {
        perror("arb_redirect: listen");
        if (ls >= 0)
            close(ls);
        return 1;
    }
    if (!(log = fopen(logf, "a"))) {
        perror(logf);
        close(ls);
        return 1;
    }
    /* Write the port file last and atomically: its presence means ready. */
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", pf);
    if (!(f = fopen(tmp, "w")) || fprintf(f, "%u\n", ntohs(a.sin_port)) < 0 || fclose(f) != 0 ||
        rename(tmp, pf) != 0) {
        perror(pf);
        close(ls);
        fclose(log);
        return 1;
    }
    while (!stop) {
        int fd = accept(ls, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (hang) {
            fprintf(log, "HELD connection\n");
            fflush(log);
            if (nheld < (int)(sizeof held / sizeof held[0]))
                held[nheld++] = fd;
            else
                close(fd);
            continue;
        }
        serve(fd, to, drop, log);
        close(fd);
    }
    for (int i = 0; i < nheld; i++)
        close(held[i]);
    close(ls);
    fclose(log);
    return 0;
}
