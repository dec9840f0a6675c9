/*
 * logserve.c: the agent's log server (see logserve.h): libmicrohttpd, one
 * thread per connection, a small cache of tickets the controller accepted.
 *
 * A request's path: parse /v1/logs/JOB/TASK and the query strictly (digits
 * only), take the ticket from the Authorization header, find it in the
 * cache (same job and task, not expired) or ask the controller (one libcurl
 * request on this connection's thread, 5 s at most, through
 * src/client/failover.c: any of the controllers, over TLS when they are
 * https), then open
 * LOG_DIR/JOB.TASK.STREAM (agent_log_path) and answer from the offset: an
 * err stream the agent did not split off is said to be in out. The cache holds
 * LS_CACHE tickets; a new one replaces the one closest to expiry.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/exec.h"
#include "agent/logserve.h"
#include "client/failover.h"
#include "util/mtime.h"

#define LS_CACHE 64
#define LS_MAX_REPLY (1 << 20)

typedef struct ls_ticket {
    char id[80];
    uint64_t job, task;
    int64_t expires; /* CLOCK_MONOTONIC ns; 0: empty slot */
} ls_ticket_t;

struct agent_logserve {
    struct MHD_Daemon *d;
    char *log_dir, *controller, *token, *node;
    char url[300];
    pthread_mutex_t mu;
    ls_ticket_t cache[LS_CACHE];
    fo_urls_t urls; /* the controllers; its lock: mu */
    char cacert[PATH_MAX], cert[PATH_MAX], key[PATH_MAX];
    tls_client_t tls;   /* the ticket check's client side (into the three above) */
    tls_server_t serve; /* the node's certificate, served (cert NULL: plain HTTP) */
};

/* The console (the controller's /ui/, another origin) reads logs here with
 * fetch(): let any origin send the ticket and read the size. The ticket,
 * not the origin, is what grants access. */
static void cors(struct MHD_Response *r)
{
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    MHD_add_response_header(r, "Access-Control-Expose-Headers", "X-Arbiter-Log-Size");
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *o = json_pack("{s:{s:i,s:s}}", "error", "status", (int)status, "message", msg);
    char *txt = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    struct MHD_Response *r =
        MHD_create_response_from_buffer(txt ? strlen(txt) : 0, txt ? txt : (char *)"",
                                        txt ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(txt);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "application/json");
    cors(r);
    if (status == 401)
        MHD_add_response_header(r, "WWW-Authenticate", "Bearer realm=\"arbiter-logs\"");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

/* A decimal integer in [s, s+n) with nothing else; -1 otherwise. */
static int64_t digits(const char *s, size_t n)
{
    int64_t v = 0;
    if (n == 0 || n > 15)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/*
 * Is ticket id good for job/task here? 0 yes; 403 refused (why in msg);
 * 503 the controller could not be asked. Caches a yes.
 */
static int check(agent_logserve_t *l, const char *id, uint64_t job, uint64_t task, char *msg,
                 size_t n)
{
    int64_t now = arb_mono_ns();
    int slot = 0, rc = 503;

    pthread_mutex_lock(&l->mu);
    for (int i = 0; i < LS_CACHE; i++) {
        ls_ticket_t *e = &l->cache[i];
        if (e->expires > now && e->job == job && e->task == task && tls_secret_equal(e->id, id)) {
            pthread_mutex_unlock(&l->mu);
            return 0;
        }
    }
    pthread_mutex_unlock(&l->mu);

    CURL *h = curl_easy_init();
    char path[1024], auth[700], *body = NULL, *eid = NULL, *enode = NULL;
    struct curl_slist *hd = NULL;
    long st = 0;
    arb_err_t ferr = {{0}};
    fo_resp_t resp = {0};
    if (!h)
        goto out;
    eid = curl_easy_escape(h, id, 0);
    enode = curl_easy_escape(h, l->node, 0);
    if (!eid || !enode)
        goto out;
    snprintf(path, sizeof path, "/v1/logs/tickets/%s?job=%llu&task=%llu&node=%s", eid,
             (unsigned long long)job, (unsigned long long)task, enode);
    if (l->token) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", l->token);
        hd = curl_slist_append(hd, auth);
    }
    pthread_mutex_lock(&l->mu);
    fo_urls_t urls = l->urls; /* one pass over the controllers, from the one that answered */
    pthread_mutex_unlock(&l->mu);
    fo_req_t rq = {.method = "GET",
                   .path = path,
                   .hdr = hd,
                   .connect_ms = 2000,
                   .attempt_ms = 5000,
                   .max_reply = 4096,
                   .tls = &l->tls};
    if (fo_do(&urls, h, &rq, &resp, &ferr) < 0) {
        snprintf(msg, n, "cannot reach the controller to check the ticket (%.300s); try again",
                 ferr.msg);
        goto out;
    }
    pthread_mutex_lock(&l->mu);
    l->urls.cur = urls.cur;
    pthread_mutex_unlock(&l->mu);
    body = resp.body;
    st = resp.status;
    json_t *o = body ? json_loads(body, 0, NULL) : NULL;
    if (st == 200) {
        int64_t ttl = json_integer_value(json_object_get(o, "ttl_ms"));
        rc = 0;
        pthread_mutex_lock(&l->mu);
        for (int i = 1; i < LS_CACHE; i++)
            if (l->cache[i].expires < l->cache[slot].expires)
                slot = i;
        ls_ticket_t *e = &l->cache[slot];
        snprintf(e->id, sizeof e->id, "%s", id);
        e->job = job;
        e->task = task;
        e->expires = now + (ttl > 0 ? ttl : 0) * 1000000LL;
        pthread_mutex_unlock(&l->mu);
    } else if (st == 403 || st == 404) {
        const char *m = json_string_value(json_object_get(json_object_get(o, "error"), "message"));
        snprintf(msg, n, "ticket refused: %s", m ? m : "unknown ticket");
        rc = 403;
    } else {
        snprintf(msg, n,
                 "the controller answered %ld to the ticket check (is this agent's token "
                 "an agent's?)",
                 st);
    }
    json_decref(o);
out:
    curl_free(eid);
    curl_free(enode);
    curl_slist_free_all(hd);
    if (h)
        curl_easy_cleanup(h);
    free(body);
    if (rc == 503 && !msg[0])
        snprintf(msg, n, "cannot check the ticket with the controller");
    return rc;
}

int agent_log_request_parse(const char *url, const char *stream, const char *offset,
                            agent_log_req_t *out, char *msg, size_t n)
{
    const char *pre = "/v1/logs/";

    memset(out, 0, sizeof *out);
    if (!url || strncmp(url, pre, strlen(pre)) != 0) {
        snprintf(msg, n, "%.200s: not here; logs are at /v1/logs/JOB/TASK", url ? url : "");
        return 404;
    }
    const char *a = url + strlen(pre), *slash = strchr(a, '/');
    int64_t job = slash ? digits(a, (size_t)(slash - a)) : -1;
    int64_t task = slash ? digits(slash + 1, strlen(slash + 1)) : -1;
    if (job <= 0 || task < 0) {
        snprintf(msg, n, "%.200s: use /v1/logs/JOB/TASK with JOB and TASK as integers", url);
        return 400;
    }
    if (stream && strcmp(stream, "out") != 0 && strcmp(stream, "err") != 0) {
        snprintf(msg, n, "stream: '%.40s'; use out or err", stream);
        return 400;
    }
    int64_t off = offset ? digits(offset, strlen(offset)) : 0;
    if (off < 0) {
        snprintf(msg, n, "offset: '%.40s' is not a byte offset; use 0, 1, ...", offset);
        return 400;
    }
    out->job = (uint64_t)job;
    out->task = (uint64_t)task;
    out->stream = stream && !strcmp(stream, "err") ? "err" : "out";
    out->offset = (uint64_t)off;
    return 0;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_n, void **con_cls)
{
    agent_logserve_t *l = cls;
    char msg[512] = "", path[PATH_MAX + 64];
    agent_log_req_t q;
    (void)version, (void)upload;

    if (!*con_cls) { /* headers only so far */
        *con_cls = l;
        return MHD_YES;
    }
    if (*upload_n) /* a GET has no body: ignore one */
        return *upload_n = 0, MHD_YES;
    if (strcmp(method, "OPTIONS") == 0) { /* a browser's CORS preflight */
        struct MHD_Response *p =
            MHD_create_response_from_buffer(0, (char *)"", MHD_RESPMEM_PERSISTENT);
        if (!p)
            return MHD_NO;
        cors(p);
        MHD_add_response_header(p, "Access-Control-Allow-Methods", "GET");
        MHD_add_response_header(p, "Access-Control-Allow-Headers", "Authorization");
        MHD_add_response_header(p, "Access-Control-Max-Age", "600");
        enum MHD_Result ret = MHD_queue_response(c, 204, p);
        MHD_destroy_response(p);
        return ret;
    }
    if (strcmp(method, "GET") != 0)
        return reply(c, 405, "%s: only GET is served here", method);
    int st = agent_log_request_parse(
        url, MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "stream"),
        MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "offset"), &q, msg, sizeof msg);
    if (st)
        return reply(c, (unsigned)st, "%s", msg);
    int64_t job = (int64_t)q.job, task = (int64_t)q.task, off = (int64_t)q.offset;
    const char *stream = q.stream;
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!auth || strncmp(auth, "Bearer ", 7) != 0 || !auth[7] || strlen(auth + 7) >= 80)
        return reply(c, 401,
                     "no ticket: ask the controller for one (arbiter logs does: POST "
                     "/v1/jobs/%lld/logs-ticket) and send it as Authorization: Bearer",
                     (long long)job);
    int rc = check(l, auth + 7, (uint64_t)job, (uint64_t)task, msg, sizeof msg);
    if (rc)
        return reply(c, (unsigned)rc, "%s", msg);

    char jid[24];
    snprintf(jid, sizeof jid, "%lld", (long long)job);
    agent_log_find(path, sizeof path, l->log_dir, jid, (int)task, stream);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat sb;
    /* A symbolic link (O_NOFOLLOW) or a hard link planted in the log
     * directory must not lead this agent to other files. */
    if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_nlink > 1) {
        close(fd);
        return reply(c, 403,
                     "job %lld task %lld: the %s log has other names (a hard link); "
                     "not served",
                     (long long)job, (long long)task, stream);
    }
    if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        char out[PATH_MAX + 64];
        agent_log_path(out, sizeof out, l->log_dir, jid, (int)task, "out");
        if (fd < 0 && e == ENOENT && !strcmp(stream, "err") && access(out, F_OK) == 0)
            return reply(c, 404,
                         "job %lld task %lld: its stderr is in its out stream on node '%s' (the "
                         "agent writes both to one file unless it runs with --stderr separate)",
                         (long long)job, (long long)task, l->node);
        return reply(c, 404, "job %lld task %lld: no %s log on node '%s' (%s)", (long long)job,
                     (long long)task, stream, l->node, strerror(e));
    }
    int64_t len = sb.st_size > off ? sb.st_size - off : 0;
    if (len > LS_MAX_REPLY)
        len = LS_MAX_REPLY;
    struct MHD_Response *r;
    if (len > 0) { /* the response owns fd once made */
        r = MHD_create_response_from_fd_at_offset64((uint64_t)len, fd, (uint64_t)off);
        if (!r)
            close(fd);
    } else {
        close(fd);
        r = MHD_create_response_from_buffer(0, (char *)"", MHD_RESPMEM_PERSISTENT);
    }
    if (!r)
        return MHD_NO;
    char size[32];
    snprintf(size, sizeof size, "%lld", (long long)sb.st_size);
    MHD_add_response_header(r, "Content-Type", "application/octet-stream");
    MHD_add_response_header(r, "X-Arbiter-Log-Size", size);
    cors(r);
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}

/* "HOST:PORT" (IPv4) into sin and host; 0 or -EINVAL with the fix. */
static int parse_listen(const char *listen, struct sockaddr_in *sin, char *host, size_t hn,
                        arb_err_t *err)
{
    const char *colon = listen ? strrchr(listen, ':') : NULL;
    char *end;
    long port;

    if (!colon || (size_t)(colon - listen) >= hn)
        return arb_errf(err, -EINVAL, "--logs-listen '%s': give HOST:PORT (127.0.0.1:0), or off",
                        listen ? listen : "");
    memcpy(host, listen, (size_t)(colon - listen));
    host[colon - listen] = '\0';
    port = strtol(colon + 1, &end, 10);
    memset(sin, 0, sizeof *sin);
    sin->sin_family = AF_INET;
    if (*end || !colon[1] || port < 0 || port > 65535 ||
        inet_pton(AF_INET, host, &sin->sin_addr) != 1)
        return arb_errf(err, -EINVAL,
                        "--logs-listen '%s': give an IPv4 address and a port (127.0.0.1:0 for "
                        "any free loopback port, 0.0.0.0:7071 for every interface), or off",
                        listen);
    sin->sin_port = htons((uint16_t)port);
    return 0;
}

int agent_logserve_check_listen(const char *listen, arb_err_t *err)
{
    struct sockaddr_in sin;
    char host[64];
    return parse_listen(listen, &sin, host, sizeof host, err);
}

int agent_logserve_start(const agent_logserve_conf_t *c, agent_logserve_t **out, arb_err_t *err)
{
    char host[64];
    struct sockaddr_in sin;
    int rc;

    *out = NULL;
    if ((rc = parse_listen(c->listen, &sin, host, sizeof host, err)) < 0)
        return rc;
    if (!c->controller || !c->node)
        return arb_errf(err, -EINVAL,
                        "--logs-listen needs --controller (tickets are checked "
                        "there)");
    agent_logserve_t *l = calloc(1, sizeof *l);
    if (!l)
        return arb_errf(err, -ENOMEM, "out of memory");
    pthread_mutex_init(&l->mu, NULL);
    l->log_dir = strdup(c->log_dir);
    l->controller = strdup(c->controller);
    l->node = strdup(c->node);
    l->token = c->token ? strdup(c->token) : NULL;
    if (!l->log_dir || !l->controller || !l->node || (c->token && !l->token)) {
        agent_logserve_stop(l);
        return arb_errf(err, -ENOMEM, "out of memory");
    }
    if ((rc = fo_urls_parse(c->controller, "--controller", &l->urls, err)) < 0) {
        agent_logserve_stop(l);
        return rc;
    }
    if (c->tls) {
        snprintf(l->cacert, sizeof l->cacert, "%s", c->tls->cacert ? c->tls->cacert : "");
        snprintf(l->cert, sizeof l->cert, "%s", c->tls->cert_file ? c->tls->cert_file : "");
        snprintf(l->key, sizeof l->key, "%s", c->tls->key_file ? c->tls->key_file : "");
        l->tls.cacert = l->cacert[0] ? l->cacert : NULL;
        l->tls.cert_file = l->cert[0] ? l->cert : NULL;
        l->tls.key_file = l->key[0] ? l->key : NULL;
    }
    if (l->tls.cert_file) { /* the node's certificate: a TLS server too (arbiter init node) */
        tls_files_t tf = {.cert_file = l->tls.cert_file,
                          .key_file = l->tls.key_file ? l->tls.key_file : l->tls.cert_file};
        if ((rc = tls_server_load(&tf, &l->serve, err)) < 0) {
            agent_logserve_stop(l);
            return rc;
        }
    }
    if (!l->serve.cert && !tls_is_loopback(host) && !c->insecure_plain) {
        agent_logserve_stop(l);
        return arb_errf(err, -EPERM,
                        "--logs-listen %s without TLS: tickets and task logs would cross the "
                        "network in clear; give --cert-file and --key-file (the node's: arbiter "
                        "init node NAME DIR), or --insecure-plain-http to accept that",
                        c->listen);
    }
    /* no MHD_USE_ERROR_LOG: a failure is said below, in words that name the flag */
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     (l->serve.cert ? MHD_USE_TLS : 0);
    struct MHD_OptionItem opts[] = {
        {MHD_OPTION_SOCK_ADDR, 0, &sin},
        {MHD_OPTION_CONNECTION_TIMEOUT, 60, NULL},
        {MHD_OPTION_CONNECTION_LIMIT, 64, NULL},
        {MHD_OPTION_LISTENING_ADDRESS_REUSE, 1, NULL},
        /* TLS last: without a certificate the list ends here */
        {l->serve.cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, l->serve.cert},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, l->serve.key},
        {MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"},
        {MHD_OPTION_END, 0, NULL},
    };
    l->d =
        MHD_start_daemon(flags, 0, NULL, NULL, handler, l, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
    if (!l->d) {
        agent_logserve_stop(l);
        return arb_errf(err, -EADDRINUSE,
                        "--logs-listen %s: cannot listen there (in use, or not an address of "
                        "this machine); pick another port, or 127.0.0.1:0",
                        c->listen);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(l->d, MHD_DAEMON_INFO_BIND_PORT);
    char name[256] = "";
    const char *adv = host;
    if (sin.sin_addr.s_addr == htonl(INADDR_ANY)) {
        if (c->advertise && c->advertise[0])
            adv = c->advertise;
        else if (gethostname(name, sizeof name - 1) == 0 && name[0])
            adv = name;
    }
    snprintf(l->url, sizeof l->url, "%s://%s:%u", l->serve.cert ? "https" : "http", adv,
             di ? di->port : (unsigned)ntohs(sin.sin_port));
    *out = l;
    return 0;
}

const char *agent_logserve_url(const agent_logserve_t *l)
{
    return l ? l->url : NULL;
}

void agent_logserve_stop(agent_logserve_t *l)
{
    if (!l)
        return;
    if (l->d)
        MHD_stop_daemon(l->d);
    pthread_mutex_destroy(&l->mu);
    free(l->log_dir);
    free(l->controller);
    free(l->node);
    free(l->token);
    tls_server_free(&l->serve);
    free(l);
}
