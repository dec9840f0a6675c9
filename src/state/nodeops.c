/*
 * nodeops.c: what an operator does to a node, shaped after kubectl and
 * scontrol: cordon and uncordon (no new tasks; with a reason, as
 * `scontrol update state=drain reason=...`), drain (cordon, then evict what
 * runs there, as `kubectl drain`), labels and taints (`kubectl label`,
 * `kubectl taint`, NoExecute evicting what does not tolerate it), delete
 * (only once the node is NotReady and nothing of it may still run, or
 * Lost), and node names checked as DNS-1123 labels, as Kubernetes does.
 * Every function expects s->mu held, as liveness.c does.
 *
 * Where a node's labels and taints come from: its agent's inventory (the
 * inventory file, or discovery), overlaid by what operators set, which is
 * kept apart (st_node_t.op) and persisted in the node's record, so that an
 * agent restarting or changing its inventory never undoes an operator's
 * word:
 *
 *   op = {"labels": {"k": "v", "gone": null},    set, or removed (null)
 *         "taints": [{"key", "value", "effect"}], added
 *         "untaint": [{"key", "effect"}]}         inventory taints removed
 *                                                 (effect absent: all)
 *
 *   effective labels = inventory labels, minus op's nulls, plus op's values
 *   effective taints = inventory taints, minus op.untaint, plus op.taints
 *   datasets         = the inventory's
 *
 * Eviction (drain, a NoExecute taint) stops each job with a live task on
 * the node as a lost task's job is stopped (liveness.c): SIGTERM, its
 * grace, SIGKILL, its GPUs held until every task ended, then requeued
 * whole (failed when its spec says restartable: false); a job no agent has
 * fetched yet is requeued at once. The node is cordoned (drain) or the
 * taint keeps it off (NoExecute), so the new attempt goes elsewhere.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/jv.h"
#include "state/state_int.h"

static const char *const effect_names[] = {[ARB_TAINT_NO_SCHEDULE] = "NoSchedule",
                                           [ARB_TAINT_PREFER_NO_SCHEDULE] = "PreferNoSchedule",
                                           [ARB_TAINT_NO_EXECUTE] = "NoExecute"};

int st_nodes_live(st_t *s)
{
    int k = 0;
    for (uint32_t i = 0; i < s->cluster.nnodes; i++)
        k += s->cluster.nodes[i].state != ARB_NODE_LEFT;
    return k;
}

int st_taint_effect(const char *s)
{
    for (int e = ARB_TAINT_NO_SCHEDULE; s && e <= ARB_TAINT_NO_EXECUTE; e++)
        if (strcmp(s, effect_names[e]) == 0)
            return e;
    return 0;
}

const char *st_taint_effect_name(int e)
{
    return e >= ARB_TAINT_NO_SCHEDULE && e <= ARB_TAINT_NO_EXECUTE ? effect_names[e] : "?";
}

/* ---- names ------------------------------------------------------------------------ */

int st_node_name_check(const char *name, arb_err_t *err)
{
    size_t n = name ? strlen(name) : 0;
    bool ok =
        n >= 1 && n <= 63 && isalnum((unsigned char)name[0]) && isalnum((unsigned char)name[n - 1]);

    for (size_t i = 0; ok && i < n; i++)
        ok =
            (name[i] >= 'a' && name[i] <= 'z') || isdigit((unsigned char)name[i]) || name[i] == '-';
    if (!ok)
        return arb_errf(err, -EINVAL,
                        "node name '%.80s': not a DNS-1123 label: 1..63 lowercase letters, "
                        "digits and '-', starting and ending with a letter or digit (as "
                        "Kubernetes names nodes; e.g. gpu-node-7)",
                        name ? name : "");
    return 0;
}

/* ---- the effective labels and taints ------------------------------------------------ */

static bool untainted(const json_t *untaint, const char *key, const char *eff)
{
    size_t i;
    json_t *u;

    json_array_foreach(untaint, i, u)
    {
        const char *uk = json_string_value(json_object_get(u, "key"));
        const char *ue = json_string_value(json_object_get(u, "effect"));
        if (uk && strcmp(uk, key) == 0 && (!ue || strcmp(ue, eff) == 0))
            return true;
    }
    return false;
}

/* The taints as they apply, [{"key", "value", "effect"}] (new reference). */
static json_t *effective_taints(const st_node_t *x)
{
    json_t *out = json_array(), *t, *untaint = json_object_get(x->op, "untaint");
    size_t i;

    json_array_foreach(json_object_get(x->inventory, "taints"), i, t)
    {
        const char *k = json_string_value(json_object_get(t, "key"));
        const char *e = json_string_value(json_object_get(t, "effect"));
        if (k && e && !untainted(untaint, k, e))
            json_array_append(out, t);
    }
    json_array_foreach(json_object_get(x->op, "taints"), i, t) json_array_append(out, t);
    return out;
}

void st_node_apply_meta(st_t *s, arb_node_t *n)
{
    arb_cluster_t *c = &s->cluster;
    st_node_t *x = st_node_ext(s, n);
    json_t *labels = json_object_get(x->inventory, "labels"),
           *ol = json_object_get(x->op, "labels");
    json_t *taints = effective_taints(x), *v;
    const char *k;
    size_t i;

    n->nlabels = n->ntaints = n->ndatasets = 0;
    n->rack = n->block = n->zone = 0;
    /* the two sets are disjoint (an operator's key hides the inventory's):
     * added, not searched for */
    json_object_foreach(labels, k, v) if (json_is_string(v) && !json_object_get(ol, k))
        arb_node_add_label(c, n, k, json_string_value(v));
    json_object_foreach(ol, k, v) if (json_is_string(v))
        arb_node_add_label(c, n, k, json_string_value(v));
    json_array_foreach(taints, i, v)
    {
        const char *key = json_string_value(json_object_get(v, "key"));
        const char *val = json_string_value(json_object_get(v, "value"));
        int e = st_taint_effect(json_string_value(json_object_get(v, "effect")));
        if (e && key) /* (a damaged record's entry is skipped) */
            arb_node_add_taint(c, n, key, val ? val : "", (arb_taint_effect_t)e);
    }
    json_array_foreach(json_object_get(x->inventory, "datasets"), i, v) if (json_is_string(v))
        arb_node_add_dataset(c, n, json_string_value(v));
    json_decref(taints);
    arb_node_touch(c, n);
}

/* ---- eviction ------------------------------------------------------------------------- */

int st_node_evict(st_t *s, arb_node_t *n, bool all, const char *why)
{
    const char *name = arb_node_name(&s->cluster, n);
    int stopped = 0;

    /* Backwards: settling may retire a job, which moves the last one into its slot. */
    for (int i = s->nactive - 1; i >= 0; i--) {
        st_job_t *sj = s->active[i];
        arb_job_t *j = sj->j;
        int here = 0;
        if ((j->state != ARB_JOB_PLACED && j->state != ARB_JOB_RUNNING) || sj->stop)
            continue;
        for (int t = 0; t < j->nalloc; t++)
            here += j->alloc[t].node == n->id && sj->tasks[t].state < TK_SUCCEEDED;
        if (!here || (!all && arb_job_untolerated(j, n, ARB_TAINT_NO_EXECUTE) == 0))
            continue;
        sj->stop = true;
        sj->stop_then = sj->restartable ? ST_THEN_REQUEUE : ST_THEN_FAIL;
        st_job_say(sj, "evicted from node '%s': %.180s", name, why);
        uint64_t lam = st_event(
            s, "job-evicted", sj->id, name, "job %llu '%s': %s; stopping its %d task%s, then %s",
            (unsigned long long)sj->id, j->name, st_job_msg(sj), j->nalloc,
            j->nalloc == 1 ? "" : "s",
            sj->restartable ? "requeueing it whole" : "failing it (restartable: false)");
        st_job_save(s, sj, lam);
        char msg[256]; /* a copy: settling sets the message again */
        snprintf(msg, sizeof msg, "%s", st_job_msg(sj));
        st_job_settle(s, sj, msg); /* not fetched by any agent: requeued now */
        stopped++;
    }
    if (stopped) {
        st_kick(s);
    }
    return stopped;
}

/* Any NoExecute taint that n's effective taints carry and before did not:
 * evict what does not tolerate it. */
void st_node_noexecute(st_t *s, arb_node_t *n, const char *source)
{
    char why[200];
    bool any = false;

    for (int i = 0; i < n->ntaints && !any; i++)
        any = n->taints[i].effect == ARB_TAINT_NO_EXECUTE;
    if (!any)
        return;
    snprintf(why, sizeof why, "a NoExecute taint it does not tolerate (%s)", source);
    st_node_evict(s, n, false, why);
}

/* ---- the operator's calls ----------------------------------------------------------------- */

/* The node, or -ENOENT; -ESTALE when if_match is not its version. */
static int node_for(st_t *s, const char *name, int64_t if_match, arb_node_t **out, arb_err_t *err)
{
    arb_node_t *n = arb_cluster_find_node(&s->cluster, name);

    if (!n)
        return arb_errf(err, -ENOENT, "node '%.80s': no such node (arbiter nodes lists them)",
                        name);
    if (if_match >= 0 && (uint64_t)if_match != st_node_ext(s, n)->version)
        return arb_errf(err, -ESTALE,
                        "If-Match: node '%s' is at version %llu, not %lld; read it "
                        "again",
                        name, (unsigned long long)st_node_ext(s, n)->version, (long long)if_match);
    *out = n;
    return 0;
}

int st_node_cordon(st_t *s, const st_who_t *who, const char *name, st_cordon_t what,
                   const char *why_given, int64_t if_match, st_node_view_t *out, int64_t *ticket,
                   arb_err_t *err)
{
    char reason[ST_REASON_MAX];
    arb_node_t *n = NULL;
    int rc, evicted = 0;
    const char *by = who && who->name && who->name[0] ? who->name : "an admin";

    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->mu);
    snprintf(reason, sizeof reason, "%s", why_given ? why_given : "");
    if ((rc = node_for(s, name, if_match, &n, err)) < 0)
        goto out;
    st_node_t *x = st_node_ext(s, n);
    bool on = what != ST_UNCORDON;
    arb_node_state_t to = on ? ARB_NODE_DRAINING : ARB_NODE_READY;
    bool change = n->state != to;
    if (change && (rc = arb_node_transition(&s->cluster, n, to, err)) < 0)
        goto out;
    if (on)
        snprintf(x->reason, sizeof x->reason, "%s by %.40s%s%.100s",
                 what == ST_DRAIN ? "drained" : "cordoned", by, reason[0] ? ": " : "", reason);
    else
        x->reason[0] = '\0';
    if (what == ST_DRAIN) {
        char why[220];
        snprintf(why, sizeof why, "the node is %s", x->reason);
        evicted = st_node_evict(s, n, true, why);
    }
    if (change || on) {
        st_node_save(s, n);
        st_event(s,
                 what == ST_DRAIN    ? "node-drained"
                 : what == ST_CORDON ? "node-cordoned"
                                     : "node-uncordoned",
                 0, name, "node '%s' %s%s", name, on ? x->reason : "back in service",
                 what == ST_DRAIN && evicted ? "; its jobs evicted" : "");
        st_kick(s);
    }
    if (st_node_view_of(s, n, false, out) < 0) {
        rc = arb_errf(err, -ENOMEM, "out of memory for the reply (the change was made)");
        goto out;
    }
    out->has_evicted = true;
    out->evicted = evicted;
out:
    *ticket = st_flush(s);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static bool has_label(st_t *s, const arb_node_t *n, const char *k)
{
    for (int i = 0; i < n->nlabels; i++)
        if (strcmp(arb_str(&s->cluster.strs, n->labels[i].key), k) == 0)
            return true;
    return false;
}

/* What a patch removes must be there: a label (the node's, as it applies)
 * or a taint (as it applies: the inventory's not untainted, the operators'). */
static int patch_check(const st_node_t *x, const arb_node_t *n, st_t *s, const st_patch_t *p,
                       arb_err_t *err)
{
    for (int i = 0; i < p->nlabels; i++)
        if (!p->labels[i].value && !has_label(s, n, p->labels[i].key))
            return arb_errf(err, -ENOENT, "label '%s': node '%s' has no such label",
                            p->labels[i].key, arb_node_name(&s->cluster, n));
    for (int i = 0; i < p->nremove; i++) {
        const char *key = p->remove[i].key, *eff = p->remove[i].effect;
        bool found = false;
        json_t *t, *eff_t = effective_taints(x);
        size_t j;
        json_array_foreach(eff_t, j, t) found |=
            strcmp(json_string_value(json_object_get(t, "key")) ?: "", key) == 0 &&
            (!eff[0] || strcmp(json_string_value(json_object_get(t, "effect")) ?: "", eff) == 0);
        json_decref(eff_t);
        if (!found)
            return arb_errf(err, -ENOENT, "taint '%s%s%s': node '%s' has no such taint", key,
                            eff[0] ? ":" : "", eff, arb_node_name(&s->cluster, n));
    }
    return 0;
}

/* Drop from arr the entries with key (and effect, when given). */
static void drop_taints(json_t *arr, const char *key, const char *eff)
{
    for (size_t i = json_array_size(arr); i-- > 0;) {
        json_t *t = json_array_get(arr, i);
        const char *te = json_string_value(json_object_get(t, "effect"));
        const char *tk = json_string_value(json_object_get(t, "key"));
        if ((!tk || strcmp(tk, key) == 0) && (!eff || !te || strcmp(te, eff) == 0))
            json_array_remove(arr, i);
    }
}

int st_node_patch(st_t *s, const st_who_t *who, const char *name, const st_patch_t *p,
                  int64_t if_match, st_node_view_t *out, int64_t *ticket, arb_err_t *err)
{
    arb_node_t *n = NULL;
    int rc;
    char said[400] = "";
    size_t used = 0;

    (void)who;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->mu);
    if ((rc = node_for(s, name, if_match, &n, err)) < 0)
        goto out;
    st_node_t *x = st_node_ext(s, n);
    if ((rc = patch_check(x, n, s, p, err)) < 0)
        goto out;
    if (!x->op && !(x->op = json_object())) {
        rc = arb_errf(err, -ENOMEM, "out of memory");
        goto out;
    }
    json_t *ol = json_object_get(x->op, "labels"), *ot = json_object_get(x->op, "taints"),
           *ou = json_object_get(x->op, "untaint");
    if (!ol)
        json_object_set_new(x->op, "labels", ol = json_object());
    if (!ot)
        json_object_set_new(x->op, "taints", ot = json_array());
    if (!ou)
        json_object_set_new(x->op, "untaint", ou = json_array());
    bool noexec = false;
    for (int i = 0; i < p->nlabels; i++) {
        const char *k = p->labels[i].key, *val = p->labels[i].value;
        /* null: removed; an inventory label stays removed (null kept), an
         * operator's own goes */
        if (!val && !json_object_get(json_object_get(x->inventory, "labels"), k))
            json_object_del(ol, k);
        else
            json_object_set_new(ol, k, val ? json_string(val) : json_null());
        if (used < sizeof said)
            used += (size_t)snprintf(said + used, sizeof said - used, "%slabel %s%s%s",
                                     used ? ", " : "", k, !val ? " removed" : "=", val ? val : "");
    }
    for (int i = 0; i < p->nremove; i++) {
        const char *key = p->remove[i].key, *eff = p->remove[i].effect;
        drop_taints(ot, key, eff[0] ? eff : NULL);
        json_t *u = json_pack("{s:s}", "key", key);
        if (eff[0])
            json_object_set_new(u, "effect", json_string(eff));
        json_array_append_new(ou, u);
        if (used < sizeof said)
            used += (size_t)snprintf(said + used, sizeof said - used, "%staint %s%s%s removed",
                                     used ? ", " : "", key, eff[0] ? ":" : "", eff);
    }
    for (int i = 0; i < p->nadd; i++) {
        const char *key = p->add[i].key, *val = p->add[i].value, *eff = p->add[i].effect;
        drop_taints(ot, key, eff); /* one value per key and effect, as kubectl */
        drop_taints(ou, key, eff);
        json_array_append_new(ot,
                              json_pack("{s:s,s:s,s:s}", "key", key, "value", val, "effect", eff));
        noexec |= st_taint_effect(eff) == ARB_TAINT_NO_EXECUTE;
        if (used < sizeof said)
            used += (size_t)snprintf(said + used, sizeof said - used, "%staint %s=%s:%s",
                                     used ? ", " : "", key, val, eff);
    }
    st_node_apply_meta(s, n);
    st_node_save(s, n);
    st_event(s, "node-updated", 0, name,
             "node '%s': %s (by an operator; kept across agent "
             "restarts)",
             name, said[0] ? said : "nothing changed");
    if (noexec)
        st_node_noexecute(s, n, "set by an operator");
    st_kick(s);
    if (st_node_view_of(s, n, true, out) < 0)
        rc = arb_errf(err, -ENOMEM, "out of memory for the reply (the change was made)");
out:
    *ticket = st_flush(s);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int st_node_delete(st_t *s, const char *name, int64_t if_match, st_node_view_t *out,
                   int64_t *ticket, arb_err_t *err)
{
    arb_node_t *n = NULL;
    char key[300];
    int rc, live = 0;

    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->mu);
    if ((rc = node_for(s, name, if_match, &n, err)) < 0)
        goto out;
    st_node_t *x = st_node_ext(s, n);
    int64_t age = st_now_ns(s) - x->report_mono;
    for (int i = 0; i < s->nactive; i++) {
        const arb_job_t *j = s->active[i]->j;
        if (j->state == ARB_JOB_PLACED || j->state == ARB_JOB_RUNNING)
            for (int t = 0; t < j->nalloc; t++)
                live += j->alloc[t].node == n->id && s->active[i]->tasks[t].state < TK_SUCCEEDED;
    }
    if (!x->lost && n->state != ARB_NODE_NOT_READY) {
        rc = arb_errf(err, -EBUSY,
                      "node '%s' is %s: only a NotReady or Lost node is deleted (its agent "
                      "stopped); to empty it first: arbiter drain %s",
                      name, arb_node_state_name(n->state), name);
        goto out;
    }
    if (!x->lost && live) {
        /* Invariant 4: its tasks may be dying yet; they are lost, and placed
         * elsewhere, only at lease + grace. */
        int64_t left = s->conf.lease_ns + s->conf.grace_ns - age;
        rc = arb_errf(err, -EBUSY,
                      "node '%s' is NotReady with %d task%s that may still be stopping; it is "
                      "Lost (its tasks requeued) and can be deleted in %.1f s",
                      name, live, live == 1 ? "" : "s", left > 0 ? (double)left / 1e9 : 0.0);
        goto out;
    }
    if (st_node_view_of(s, n, false, out) < 0) {
        rc = arb_errf(err, -ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = arb_node_transition(&s->cluster, n, ARB_NODE_LEFT, err)) < 0) {
        st_node_view_free(out);
        goto out;
    }
    arb_node_touch(&s->cluster, n);
    snprintf(key, sizeof key, "nodes/%s", name);
    store_batch_del(&s->batch, key);
    st_event(s, "node-deleted", 0, name,
             "node '%s' deleted (%s); its %d GPUs left every total; an agent of that name "
             "registers as a new node",
             name, x->lost ? "Lost" : "NotReady", n->ngpus);
    st_kick(s);
out:
    *ticket = st_flush(s);
    pthread_mutex_unlock(&s->mu);
    return rc;
}
