/*
 * lease.c: the agent's lease with the controller and self-fencing (see
 * lease.h). Pure logic: every time is passed in.
 *
 *                        agent_lease_registered(E >= newest)
 *   UNREGISTERED ------------------------------------------> ACTIVE
 *     |   ^ (start; agent_lease_restore after a restart)    |  ^    |
 *     |                                                      |  |    | heartbeat_ok(E >= newest,
 *     | tick: restored tasks' old lease ran out              |  +----+   sent): expires =
 *     v                                                      |         max(expires, sent + lease)
 *   FENCED <-------------------------------------------------+
 *     |     tick: now >= expires            (every arrow into FENCED
 *     |     lost(): the controller says     returns AGENT_LEASE_FENCE:
 *     |       the node is lost/unknown       kill every task now)
 *     |
 *     +------ agent_lease_registered(E >= newest) -------------> ACTIVE
 *
 * newest = the newest controller epoch seen (replies, assignments). An
 * acknowledgement under an older epoch renews nothing; assignments
 * (agent_lease_check_assignment) are accepted only in ACTIVE and only from
 * an epoch not older than newest.
 *
 * Invariants (tests/unit/test_agent_lease.c checks each):
 *  1. No entry point that takes now returns with state ACTIVE and
 *     now >= expires: each runs the expiry check (tick) first.
 *  2. expires <= send time of the last acknowledged heartbeat + lease. The
 *     controller received that heartbeat after it was sent, so its own lease
 *     for the node ends later than ours: the agent has fenced before the
 *     controller may declare the node lost, and the controller adds a margin
 *     for clock rate differences before it places the tasks elsewhere. No
 *     two live copies of a task (DESIGN.md invariant 4).
 *  3. newest never goes down, and nothing from an older epoch (a
 *     controller since restarted or deposed) renews the lease or starts a
 *     task.
 *  4. Every arrow out of ACTIVE leads to FENCED and asks for the fence:
 *     there is no way to stop being registered without killing the tasks.
 *  5. Only a registration leads into ACTIVE; a heartbeat reply never
 *     revives a lost lease, however late it arrives.
 */
#include <stdio.h>
#include <string.h>

#include "agent/lease.h"

void agent_lease_init(agent_lease_t *l, int64_t lease_ns)
{
    memset(l, 0, sizeof *l);
    l->state = AGENT_LEASE_UNREGISTERED;
    l->lease_ns = lease_ns;
}

void agent_lease_restore(agent_lease_t *l, uint64_t epoch, int64_t expires_ns)
{
    l->state = AGENT_LEASE_UNREGISTERED;
    l->epoch = epoch;
    l->expires_ns = expires_ns;
}

const char *agent_lease_state_name(agent_lease_state_t s)
{
    switch (s) {
    case AGENT_LEASE_UNREGISTERED:
        return "unregistered";
    case AGENT_LEASE_ACTIVE:
        return "active";
    case AGENT_LEASE_FENCED:
        return "fenced";
    }
    return "?";
}

static agent_lease_action_t fence(agent_lease_t *l, int64_t now_ns, const char *why)
{
    l->state = AGENT_LEASE_FENCED;
    l->expires_ns = 0;
    l->fences++;
    l->fenced_ns = now_ns;
    snprintf(l->why, sizeof l->why, "%s", why);
    return AGENT_LEASE_FENCE;
}

agent_lease_action_t agent_lease_tick(agent_lease_t *l, int64_t now_ns)
{
    bool covered = l->state == AGENT_LEASE_ACTIVE ||
                   (l->state == AGENT_LEASE_UNREGISTERED && l->expires_ns != 0);

    if (covered && now_ns >= l->expires_ns)
        return fence(l, now_ns,
                     l->state == AGENT_LEASE_ACTIVE
                         ? "no acknowledged heartbeat for longer than the lease"
                         : "restarted and not registered again within the lease");
    return AGENT_LEASE_NONE;
}

int agent_lease_registered(agent_lease_t *l, uint64_t epoch, int64_t sent_ns, int64_t now_ns,
                           arb_err_t *err)
{
    if (l->state == AGENT_LEASE_ACTIVE)
        return arb_errf(err, -EPERM, "lease: already registered (epoch %llu)",
                        (unsigned long long)l->epoch);
    if (epoch == 0 || epoch < l->epoch)
        return arb_errf(err, -ESTALE,
                        "lease: registration under epoch %llu, older than %llu; "
                        "a reply from a controller since restarted?",
                        (unsigned long long)epoch, (unsigned long long)l->epoch);
    if (sent_ns + l->lease_ns <= now_ns)
        return arb_errf(err, -ETIMEDOUT,
                        "lease: the registration reply came after the lease "
                        "it grants had run out; register again");
    l->state = AGENT_LEASE_ACTIVE;
    l->epoch = epoch;
    l->expires_ns = sent_ns + l->lease_ns;
    l->last_ok_ns = sent_ns;
    return 0;
}

agent_lease_action_t agent_lease_heartbeat_ok(agent_lease_t *l, uint64_t epoch, int64_t sent_ns,
                                              int64_t now_ns, int *rc)
{
    agent_lease_action_t act = agent_lease_tick(l, now_ns);
    int r = 0;

    if (act != AGENT_LEASE_NONE || l->state != AGENT_LEASE_ACTIVE) {
        r = -EPERM;
    } else if (epoch < l->epoch) {
        r = -ESTALE; /* a deposed controller's word renews nothing */
    } else {
        l->epoch = epoch;
        if (sent_ns + l->lease_ns > l->expires_ns) {
            l->expires_ns = sent_ns + l->lease_ns;
            l->last_ok_ns = sent_ns;
        }
    }
    if (rc)
        *rc = r;
    return act;
}

agent_lease_action_t agent_lease_lost(agent_lease_t *l, int64_t now_ns, const char *why)
{
    agent_lease_action_t act = agent_lease_tick(l, now_ns);

    if (act == AGENT_LEASE_NONE && l->state == AGENT_LEASE_ACTIVE)
        act = fence(l, now_ns, why ? why : "the controller declared this node lost");
    return act;
}

int agent_lease_check_assignment(agent_lease_t *l, uint64_t epoch, int64_t now_ns,
                                 agent_lease_action_t *act, arb_err_t *err)
{
    agent_lease_action_t a = agent_lease_tick(l, now_ns);

    if (act)
        *act = a;
    if (l->state != AGENT_LEASE_ACTIVE)
        return arb_errf(err, -EPERM,
                        "assignment refused: the agent is %s; it takes work again "
                        "once registered",
                        agent_lease_state_name(l->state));
    if (epoch < l->epoch)
        return arb_errf(err, -ESTALE,
                        "assignment refused: made under epoch %llu, older than "
                        "the controller's epoch %llu",
                        (unsigned long long)epoch, (unsigned long long)l->epoch);
    l->epoch = epoch;
    return 0;
}

void agent_lease_set_length(agent_lease_t *l, int64_t configured_ns, int64_t controller_ns)
{
    int64_t len = configured_ns;

    if (controller_ns > 0 && controller_ns < len)
        len = controller_ns;
    if (len <= 0 || len == l->lease_ns)
        return;
    l->lease_ns = len;
    if (l->state == AGENT_LEASE_ACTIVE && l->last_ok_ns + len < l->expires_ns)
        l->expires_ns = l->last_ok_ns + len; /* invariant 2 holds for the new length */
}

int64_t agent_lease_remaining(const agent_lease_t *l, int64_t now_ns)
{
    if (l->state != AGENT_LEASE_ACTIVE || now_ns >= l->expires_ns)
        return 0;
    return l->expires_ns - now_ns;
}

void agent_reconcile(const agent_task_ref_t *local, int nlocal, const agent_task_ref_t *assigned,
                     int nassigned, agent_recon_verdict_t *verdict, int *missing, int *nmissing)
{
    *nmissing = 0;
    for (int i = 0; i < nlocal; i++) {
        verdict[i] = AGENT_RECON_KILL;
        for (int j = 0; j < nassigned; j++)
            if (assigned[j].task == local[i].task && assigned[j].attempt == local[i].attempt &&
                !assigned[j].stop && strcmp(assigned[j].job, local[i].job) == 0) {
                verdict[i] = AGENT_RECON_ADOPT;
                break;
            }
    }
    for (int j = 0; j < nassigned; j++) {
        bool found = assigned[j].stop;
        for (int i = 0; i < nlocal && !found; i++)
            found = assigned[j].task == local[i].task && assigned[j].attempt == local[i].attempt &&
                    strcmp(assigned[j].job, local[i].job) == 0;
        if (!found)
            missing[(*nmissing)++] = j;
    }
}
