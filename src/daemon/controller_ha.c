/*
 * controller_ha.c: the controller as one of several over an etcd cluster
 * (dmn_ctl_run_ha; the plan, with the members and prefix, in controller.c).
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

#include "daemon/controller.h"
#include "ha/election.h"
#include "util/log.h"
#include "util/mtime.h"

static int leader_cb(void *arg, char *name, size_t nn, char *url, size_t un, int64_t *term)
{
    ha_elect_t *h = __atomic_load_n((ha_elect_t **)arg, __ATOMIC_ACQUIRE);
    return h ? ha_leader(h, name, nn, url, un, term) : -ENOENT;
}

int dmn_ctl_run_ha(dmn_ctl_plan_t *p, const sigset_t *sigs)
{
    char adv[300], uri[1600], why[800];
    const char *members = p->members, *prefix = p->prefix;
    ha_elect_t *h = NULL;
    api_server_t *api = NULL;
    st_t *st = NULL;
    arb_err_t err = {{0}};
    int rc = 1;
    const api_tokens_t *tokens = p->has_tokens ? &p->tokens : NULL;

    ha_elect_t *hv = NULL; /* what the API reads: set once the election exists */
    api_ha_t ha = {leader_cb, &hv};
    api_opts_t ao = {.host = p->host,
                     .port = p->port,
                     .tokens = tokens,
                     .ha = &ha,
                     .name = p->name,
                     .tls = &p->tls,
                     .max_conns = p->max_conns,
                     .max_conns_per_client = p->max_conns_per_client};
    const char *scheme = p->scheme;
    /* every line of this member says its name (the settings were read once already) */
    if (arb_log_init("controller", p->name, &err) < 0 ||
        api_server_start(NULL, &ao, &api, &err) < 0) {
        arb_log(ARB_LOG_ERROR, NULL, "%s", err.msg);
        return 1;
    }
    if (p->advertise)
        snprintf(adv, sizeof adv, "%s", p->advertise);
    else
        snprintf(adv, sizeof adv, "%s://%s:%d", scheme, p->host, api_server_port(api));
    ha_conf_t hc = {.members = members,
                    .prefix = prefix,
                    .name = p->name,
                    .url = adv,
                    .ttl_s = p->ttl_s,
                    .poll_ms = 200};
    if (ha_start(&hc, &h, &err) < 0) {
        arb_log(ARB_LOG_ERROR, NULL, "%s", err.msg);
        api_server_stop(api);
        return 2;
    }
    __atomic_store_n(&hv, h, __ATOMIC_RELEASE);
    arb_log(ARB_LOG_INFO, NULL,
            "follower, listening on %s://%s:%d (advertised as %s); etcd %s, prefix %s, lease TTL "
            "%d s (%s)",
            scheme, p->host, api_server_port(api), adv, members, prefix, p->ttl_s,
            tokens                    ? "bearer tokens required"
            : p->tls.client_cert_auth ? "client certificates required"
                                      : "NO authentication: loopback only");

    for (;;) {
        struct timespec to = {0, 100 * 1000000L};
        int sig = sigtimedwait(sigs, NULL, &to);
        if (sig > 0) {
            arb_log(ARB_LOG_INFO, NULL, "signal %d: stopping", sig);
            rc = 0;
            break;
        }
        ha_role_t role = ha_role(h);
        if (role == HA_LEADER && !st) {
            int64_t t0 = arb_mono_ms(), term = ha_term(h);
            snprintf(uri, sizeof uri, "etcd://%s%s?fence=%lld&max-ops=%d", members, prefix,
                     (long long)term, p->max_ops);
            if (st_open(uri, &p->conf, &st, &err) < 0 || st_start(st, &err) < 0) {
                st_close(st);
                st = NULL;
                snprintf(why, sizeof why, "cannot take over the state: %s", err.msg);
                ha_step_down(h, why);
                continue;
            }
            api_server_set_state(api, st);
            st_status_t ss;
            st_status(st, &ss);
            ha_log(h,
                   "serving as leader (term %lld): epoch %lld, %lld jobs and %lld nodes "
                   "recovered from etcd in %lld ms",
                   (long long)term, (long long)ss.epoch, (long long)ss.jobs, (long long)ss.nodes,
                   (long long)(arb_mono_ms() - t0));
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
