/*
 * test_lb_agent_load.c: a backend's load from two sources (src/lb/backend.c):
 * the X-Arbiter-Load response header and the replica's agent report that
 * `arbiter lb --service` fetches from the controller. Field by field, the
 * newest value wins: a header without `gpu` keeps the agent's GPU figure,
 * an agent report older than the header's queue does not overwrite it, a
 * report no newer than the last one changes nothing, the peer the policy
 * reads follows the backend, and the queue forwarded to the autoscaler is
 * the header's alone.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "lb/proxy_int.h"

static void header(px_t *px, px_backend_t *b, const char *v, int64_t now_ms)
{
    http_head_t h;
    memset(&h, 0, sizeof h);
    h.load = v;
    h.llen = strlen(v);
    px->now_ms = now_ms;
    px_backend_load_report(px, b, &h);
}

static void agent(px_t *px, px_backend_t *b, double gpu, double queue, int64_t at_ms)
{
    lb_agent_load_t a;
    memset(&a, 0, sizeof a);
    snprintf(a.addr, sizeof a.addr, "%s", b->name);
    a.gpu_util = gpu;
    a.queue = queue;
    a.at_ms = at_ms;
    px_backend_agent_load(px, b, &a);
}

static void test_newest_wins(void **st)
{
    px_t px;
    px_backend_t b;
    lb_peer_t peer;
    (void)st;
    memset(&px, 0, sizeof px);
    memset(&b, 0, sizeof b);
    memset(&peer, 0, sizeof peer);
    snprintf(b.name, sizeof b.name, "127.0.0.1:9000");
    b.peer = 0;
    px.peers = &peer;
    px.npeers = 1;

    /* the agent first: GPU 95%, queue 2, reported at 1000 ms */
    agent(&px, &b, 0.95, 2, 1000);
    assert_true(b.load.gpu_util > 0.949 && b.load.gpu_util < 0.951);
    assert_true(b.load.queue == 2);
    assert_int_equal(b.load.at_ms, 1000);
    assert_true(peer.load.gpu_util > 0.949 && peer.load.at_ms == 1000);

    /* a header at 1500 without gpu: queue and inflight from it, GPU kept */
    header(&px, &b, "q=5,inflight=3", 1500);
    assert_true(b.load.queue == 5 && b.load.inflight == 3);
    assert_true(b.load.gpu_util > 0.949 && b.load.gpu_util < 0.951);
    assert_int_equal(b.load.at_ms, 1500);

    /* an agent report taken at 1200 (older than the header's queue, newer
     * than its own last): the GPU figure is taken, the queue is not */
    agent(&px, &b, 0.10, 9, 1200);
    assert_true(b.load.gpu_util > 0.099 && b.load.gpu_util < 0.101);
    assert_true(b.load.queue == 5);
    assert_int_equal(b.load.at_ms, 1500);
    assert_true(peer.load.gpu_util < 0.101);

    /* the same report again, or an older one: nothing changes */
    agent(&px, &b, 0.70, 7, 1200);
    agent(&px, &b, 0.70, 7, 900);
    assert_true(b.load.gpu_util < 0.101 && b.load.queue == 5);

    /* a newer agent report sets both and the age; what the balancer
     * forwards to the autoscaler stays the header's own queue */
    agent(&px, &b, 0.50, 1, 2000);
    assert_true(b.hdr_queue == 5);
    assert_int_equal(b.hdr_queue_at_ms, 1500);
    assert_true(b.load.gpu_util > 0.499 && b.load.gpu_util < 0.501 && b.load.queue == 1);
    assert_int_equal(b.load.at_ms, 2000);
    assert_int_equal(peer.load.at_ms, 2000);

    /* a header that carries gpu at 2500 wins over an agent report taken
     * at 2400; that report's queue is still the newest queue */
    header(&px, &b, "gpu=80", 2500);
    assert_true(b.load.gpu_util > 0.799 && b.load.gpu_util < 0.801);
    assert_true(b.load.queue == 1);
    agent(&px, &b, 0.20, 4, 2400);
    assert_true(b.load.gpu_util > 0.799 && b.load.queue == 4);
    assert_int_equal(b.load.at_ms, 2500);

    /* a removed backend (no peer) still keeps its load */
    b.peer = -1;
    agent(&px, &b, 0.30, 3, 3000);
    assert_true(b.load.gpu_util > 0.299 && b.load.gpu_util < 0.301);
    assert_true(peer.load.gpu_util > 0.799);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_newest_wins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
