/*
 * channel.c: the assignments channel (see channel.h): one thread, its own
 * libcurl handle and copy of the controllers' list (src/client/failover.c:
 * a follower's 307 is followed to the leader, a dead URL skipped), a
 * mailbox under a lock, and a pipe the agent's loop polls.
 */
#include <curl/curl.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/channel.h"
#include "client/failover.h"
#include "util/mtime.h"

#define CHAN_PAUSE_MS 1000 /* after a failed poll */

struct agent_chan {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC: set() and close() */
    pthread_t th;
    bool quit; /* read by libcurl's progress callback too (atomic) */
    bool active;
    uint64_t epoch, version;
    bool have;       /* the mailbox holds box */
    bool refused;    /* a 409 the agent has not taken yet: it reports */
    int64_t hold_ms; /* after a 409 or a failure: no poll before (CLOCK_MONOTONIC ms) */
    agent_reply_t box;
    uint64_t lists, failures;
    int pfd[2];
    CURL *h;
    fo_urls_t urls;
    char base[1024]; /* /v1/nodes/NAME/assignments */
    struct curl_slist *hdr;
    int64_t wait_s;
    char cacert[PATH_MAX], cert[PATH_MAX], key[PATH_MAX];
    tls_client_t tls;
};

static void poke(agent_chan_t *ch)
{
    char b = 1;
    if (write(ch->pfd[1], &b, 1) < 0) { /* full: it is readable already */
    }
}

/* Wait on the channel's condition up to ms (or until quit / a set()). */
static void pause_ms(agent_chan_t *ch, int64_t ms)
{
    struct timespec dl = arb_deadline_ms(ms);
    arb_cond_wait_until(&ch->cv, &ch->mu, &dl);
}

static void *chan_main(void *arg)
{
    agent_chan_t *ch = arg;
    char path[1200];

    pthread_mutex_lock(&ch->mu);
    while (!ch->quit) {
        int64_t now = arb_mono_ms();
        if (!ch->active || now < ch->hold_ms) {
            pause_ms(ch, ch->active ? ch->hold_ms - now : CHAN_PAUSE_MS);
            continue;
        }
        snprintf(path, sizeof path, "%s?wait=%lld&version=%llu&epoch=%llu", ch->base,
                 (long long)ch->wait_s, (unsigned long long)ch->version,
                 (unsigned long long)ch->epoch);
        pthread_mutex_unlock(&ch->mu);
        fo_resp_t r;
        arb_err_t err = {{0}};
        fo_req_t rq = {.method = "GET",
                       .path = path,
                       .hdr = ch->hdr,
                       .connect_ms = 2000,
                       .attempt_ms = ch->wait_s * 1000 + 5000, /* its wait, and a margin */
                       .hard_budget = true,
                       .tls = &ch->tls,
                       .cancel = &ch->quit};
        int rc = fo_do(&ch->urls, ch->h, &rq, &r, &err);
        agent_reply_t rep;
        arb_err_t perr = {{0}};
        int prc = -1;
        memset(&rep, 0, sizeof rep);
        if (rc == 0 && r.status == 200)
            prc = agent_reply_parse(r.body ? r.body : "", r.n, &rep, &perr);
        int status = rc == 0 ? (int)r.status : 0;
        if (rc == 0) /* parsed (the reply is a copy): every path is done with it */
            free(r.body);
        pthread_mutex_lock(&ch->mu);
        if (prc == 0 && rep.have_assignments) {
            if (ch->have)
                agent_reply_free(&ch->box);
            ch->box = rep;
            ch->have = true;
            ch->lists++;
            if (rep.version)
                ch->version = rep.version; /* the next poll waits for a change from it */
            poke(ch);
            continue;
        }
        if (prc == 0)
            agent_reply_free(&rep);
        ch->failures++;
        /* Either way a pause: the reports carry the lists meanwhile, and a
         * controller that keeps refusing (a deposed one, still answering)
         * costs a poll and a report a second, not a storm of them. */
        ch->hold_ms = arb_mono_ms() + CHAN_PAUSE_MS;
        if (status == 409) { /* another epoch, or the node lost: report now */
            ch->refused = true;
            poke(ch);
        }
    }
    pthread_mutex_unlock(&ch->mu);
    return NULL;
}

int agent_chan_open(agent_chan_t **out, const agent_transport_conf_t *c, int64_t wait_ns,
                    arb_err_t *err)
{
    agent_chan_t *ch = calloc(1, sizeof *ch);
    char *esc = NULL, auth[700];
    int rc = 0;

    if (!ch)
        return arb_errf(err, -ENOMEM, "out of memory");
    ch->pfd[0] = ch->pfd[1] = -1;
    pthread_mutex_init(&ch->mu, NULL);
    arb_cond_init(&ch->cv);
    ch->wait_s = wait_ns / 1000000000LL;
    if (ch->wait_s < 1)
        ch->wait_s = 1;
    if (ch->wait_s > 60)
        ch->wait_s = 60;
    if ((rc = fo_urls_parse(c->target, "--controller", &ch->urls, err)) < 0)
        goto fail;
    if (!(ch->h = curl_easy_init()) || !(esc = curl_easy_escape(ch->h, c->node, 0))) {
        rc = arb_errf(err, -ENOMEM, "cannot make a libcurl handle");
        goto fail;
    }
    if (snprintf(ch->base, sizeof ch->base, "/v1/nodes/%s/assignments", esc) >=
        (int)sizeof ch->base) {
        rc = arb_errf(err, -ENAMETOOLONG, "--name: too long for a URL");
        goto fail;
    }
    ch->hdr = curl_slist_append(NULL, "Accept: application/json");
    if (ch->hdr && c->token && c->token[0]) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->token);
        ch->hdr = curl_slist_append(ch->hdr, auth);
    }
    if (!ch->hdr) {
        rc = arb_errf(err, -ENOMEM, "out of memory");
        goto fail;
    }
    if (c->tls) {
        snprintf(ch->cacert, sizeof ch->cacert, "%s", c->tls->cacert ? c->tls->cacert : "");
        snprintf(ch->cert, sizeof ch->cert, "%s", c->tls->cert_file ? c->tls->cert_file : "");
        snprintf(ch->key, sizeof ch->key, "%s", c->tls->key_file ? c->tls->key_file : "");
        ch->tls.cacert = ch->cacert[0] ? ch->cacert : NULL;
        ch->tls.cert_file = ch->cert[0] ? ch->cert : NULL;
        ch->tls.key_file = ch->key[0] ? ch->key : NULL;
    }
    if (pipe2(ch->pfd, O_CLOEXEC | O_NONBLOCK) < 0) {
        rc = arb_errf(err, -errno, "the assignments channel: pipe: %s", strerror(errno));
        goto fail;
    }
    if (pthread_create(&ch->th, NULL, chan_main, ch) != 0) {
        rc = arb_errf(err, -EAGAIN, "cannot start the assignments channel's thread");
        goto fail;
    }
    curl_free(esc);
    *out = ch;
    return 0;
fail:
    curl_free(esc);
    curl_slist_free_all(ch->hdr);
    if (ch->h)
        curl_easy_cleanup(ch->h);
    if (ch->pfd[0] >= 0)
        close(ch->pfd[0]), close(ch->pfd[1]);
    pthread_cond_destroy(&ch->cv);
    pthread_mutex_destroy(&ch->mu);
    free(ch);
    return rc;
}

void agent_chan_set(agent_chan_t *ch, bool active, uint64_t epoch, uint64_t version)
{
    pthread_mutex_lock(&ch->mu);
    bool wake = active != ch->active || epoch != ch->epoch;
    if (active && epoch != ch->epoch)
        ch->hold_ms = 0; /* registered under a new epoch: poll at once */
    ch->active = active;
    ch->epoch = epoch;
    if (version)
        ch->version = version;
    if (wake)
        pthread_cond_signal(&ch->cv);
    pthread_mutex_unlock(&ch->mu);
}

int agent_chan_fd(const agent_chan_t *ch)
{
    return ch->pfd[0];
}

int agent_chan_take(agent_chan_t *ch, agent_reply_t *out)
{
    char buf[64];
    int rc = 0;

    while (read(ch->pfd[0], buf, sizeof buf) > 0) {
    }
    pthread_mutex_lock(&ch->mu);
    if (ch->have) {
        *out = ch->box;
        memset(&ch->box, 0, sizeof ch->box);
        ch->have = false;
        rc = 1;
    } else if (ch->refused) {
        ch->refused = false;
        rc = -ESTALE;
    }
    pthread_mutex_unlock(&ch->mu);
    return rc;
}

void agent_chan_counts(agent_chan_t *ch, uint64_t *lists, uint64_t *failures)
{
    pthread_mutex_lock(&ch->mu);
    *lists = ch->lists;
    *failures = ch->failures;
    pthread_mutex_unlock(&ch->mu);
}

void agent_chan_close(agent_chan_t *ch)
{
    if (!ch)
        return;
    pthread_mutex_lock(&ch->mu);
    __atomic_store_n(&ch->quit, true, __ATOMIC_RELEASE); /* a poll under way ends within ~1 s */
    pthread_cond_signal(&ch->cv);
    pthread_mutex_unlock(&ch->mu);
    pthread_join(ch->th, NULL);
    if (ch->have)
        agent_reply_free(&ch->box);
    curl_slist_free_all(ch->hdr);
    curl_easy_cleanup(ch->h);
    close(ch->pfd[0]);
    close(ch->pfd[1]);
    pthread_cond_destroy(&ch->cv);
    pthread_mutex_destroy(&ch->mu);
    free(ch);
}
