/*
 * controller_ha.c: the controller as one of several over an etcd cluster.
 *
 * It listens at once and answers as a follower (GET /v1/leader, /healthz;
 * 307 to the leader for the rest) while src/ha campaigns. When it wins, it
 * opens the resource manager over the etcd store fenced by its term
 * (etcd://MEMBERS/PREFIX?fence=TERM): recovery loads jobs, nodes,
 * allocations, quotas, the clock and the event log from etcd and bumps the
 * epoch; then the scheduler starts and the API serves the state.
 *
 * Step-down is final: when the election says this process lost its lease
 * (it was paused, or cut off from etcd) the process stops serving and
 * exits 3 with a log line saying why; whatever supervises it may start it
 * again, as a follower. Its writes were fenced all along, so nothing it
 * tried after losing the lease reached etcd. A SIGTERM makes a leader
 * resign (revoke its lease) so a follower takes over without waiting a TTL.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/controller_ha.h"
#include "ha/election.h"

static int leader_cb(void *arg, char *name, size_t nn, char *url, size_t un, int64_t *term)
{
    ha_elect_t *h = __atomic_load_n((ha_elect_t **)arg, __ATOMIC_ACQUIRE);
    return h ? ha_leader(h, name, nn, url, un, term) : -ENOENT;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int cli_controller_ha(const ctl_ha_args_t *a)
{
    char members[1024], prefix[256], adv[300], uri[1600], why[800];
    const char *m = a->store + strlen("etcd://");
    size_t ml = strcspn(m, "/?");
    ha_elect_t *h = NULL;
    api_server_t *api = NULL;
    st_t *st = NULL;
    arb_err_t err = {{0}};
    int rc = 1;

    if (ml == 0 || ml >= sizeof members) {
        fprintf(stderr, "arbiter controller: --store '%s': use etcd://HOST:PORT[,HOST:PORT...]\n",
                a->store);
        return 2;
    }
    memcpy(members, m, ml);
    members[ml] = '\0';
    if (a->prefix)
        snprintf(prefix, sizeof prefix, "%s", a->prefix);
    else if (m[ml] == '/' && m[ml + 1])
        snprintf(prefix, sizeof prefix, "%.*s", (int)strcspn(m + ml, "?"), m + ml);
    else
        snprintf(prefix, sizeof prefix, "/arbiter");
    if (prefix[0] != '/' || strchr(prefix, '?') || strlen(prefix) < 2) {
        fprintf(stderr, "arbiter controller: --store-prefix '%s': a key prefix such as /arbiter\n",
                prefix);
        return 2;
    }
    if (!a->name) {
        fprintf(stderr, "arbiter controller: --store etcd://... needs --name NAME, unique among "
                        "the controllers sharing the etcd cluster\n");
        return 2;
    }

    ha_elect_t *hv = NULL; /* what the API reads: set once the election exists */
    api_ha_t ha = {leader_cb, &hv};
    api_opts_t ao = {.host = a->host,
                     .port = a->port,
                     .tokens = a->tokens,
                     .ha = &ha,
                     .name = a->name,
                     .tls = a->tls,
                     .max_conns = a->max_conns,
                     .max_conns_per_client = a->max_conns_per_client};
    const char *scheme = a->tls && a->tls->cert ? "https" : "http";
    if (api_server_start(NULL, &ao, &api, &err) < 0) {
        fprintf(stderr, "arbiter controller: %s\n", err.msg);
        return 1;
    }
    if (a->advertise)
        snprintf(adv, sizeof adv, "%s", a->advertise);
    else
        snprintf(adv, sizeof adv, "%s://%s:%d", scheme, a->host, api_server_port(api));
    ha_conf_t hc = {.members = members,
                    .prefix = prefix,
                    .name = a->name,
                    .url = adv,
                    .ttl_s = a->ttl_s,
                    .poll_ms = 200};
    if (ha_start(&hc, &h, &err) < 0) {
        fprintf(stderr, "arbiter controller: %s\n", err.msg);
        api_server_stop(api);
        return 2;
    }
    __atomic_store_n(&hv, h, __ATOMIC_RELEASE);
    fprintf(stderr,
            "arbiter controller %s: follower, listening on %s://%s:%d (advertised as %s); "
            "etcd %s, prefix %s, lease TTL %d s (%s)\n",
            a->name, scheme, a->host, api_server_port(api), adv, members, prefix, a->ttl_s,
            a->tokens                            ? "bearer tokens required"
            : a->tls && a->tls->client_cert_auth ? "client certificates required"
                                                 : "NO authentication: loopback only");

    for (;;) {
        struct timespec to = {0, 100 * 1000000L};
        int sig = sigtimedwait(a->sigs, NULL, &to);
        if (sig > 0) {
            fprintf(stderr, "arbiter controller %s: signal %d: stopping\n", a->name, sig);
            rc = 0;
            break;
        }
        ha_role_t role = ha_role(h);
        if (role == HA_LEADER && !st) {
            int64_t t0 = now_ms(), term = ha_term(h);
            snprintf(uri, sizeof uri, "etcd://%s%s?fence=%lld&max-ops=%d", members, prefix,
                     (long long)term, a->max_ops);
            if (st_open(uri, a->conf, &st, &err) < 0 || st_start(st, &err) < 0) {
                st_close(st);
                st = NULL;
                snprintf(why, sizeof why, "cannot take over the state: %s", err.msg);
                ha_step_down(h, why);
                continue;
            }
            api_server_set_state(api, st);
            json_t *s = st_status(st);
            ha_log(h,
                   "serving as leader (term %lld): epoch %lld, %lld jobs and %lld nodes "
                   "recovered from etcd in %lld ms",
                   (long long)term, (long long)json_integer_value(json_object_get(s, "epoch")),
                   (long long)json_integer_value(json_object_get(s, "jobs")),
                   (long long)json_integer_value(json_object_get(s, "nodes")),
                   (long long)(now_ms() - t0));
            json_decref(s);
        }
        if (role == HA_LEADER && st && st_store_status(st, &err) < 0) {
            /* A commit failed (fenced, or etcd unreachable for longer than the
             * client retries): this state can no longer be trusted to be
             * etcd's. Step down; the next leader loads what etcd holds. */
            snprintf(why, sizeof why, "%s", err.msg);
            ha_step_down(h, why);
            role = HA_STEPPED_DOWN;
        }
        if (role == HA_STEPPED_DOWN) {
            ha_why(h, why, sizeof why);
            ha_log(h, "stepped down (%s); exiting 3: nothing more is written by this process", why);
            rc = 3;
            break;
        }
    }
    if (st)
        st_quiesce(st); /* long polls answer now; the API drains what is in flight */
    api_server_stop(api);
    st_close(st);
    ha_stop(h);
    return rc;
}
