/* test_lb_infer.c: the inference side of the balancer, pure parts: the
 * prefix index (bounds, eviction from chain tails), the prefix, kv and
 * inference policies on hand-made peers with the clock and randomness
 * passed in, the OpenAI body reader (oai.c) and the model-server metrics
 * reader (prom.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lb/lb.h"
#include "lb/oai.h"
#include "lb/prom.h"

static void mk(lb_peer_t *p, int n)
{
    static char names[64][32];
    memset(p, 0, (size_t)n * sizeof *p);
    for (int i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "10.0.0.%d:8000", i + 1);
        p[i].name = names[i];
        p[i].weight = 1;
        p[i].eff = 16;
        p[i].eng.kv = -1;
    }
}

/* A chain of nb block hashes: the first `shared` depend on `tenant` only,
 * the rest on `tenant` and `q` (a tenant's context, then a question). */
static void chain(uint64_t *b, int nb, int shared, uint64_t tenant, uint64_t q)
{
    uint64_t h = 0x1234;
    for (int i = 0; i < nb; i++) {
        uint64_t x = i < shared ? tenant * 1000 + (uint64_t)i : tenant * 1000000 + q * 1000 + i;
        h = lb_hash64(&x, sizeof x, h);
        b[i] = h;
    }
}

static void test_pindex_match_and_bound(void **state)
{
    lb_pindex_t *x = lb_pindex_new(16);
    uint64_t a[20], b[20], ids[3] = {11, 22, 33};
    int m[3];

    assert_non_null(x);
    chain(a, 10, 6, 1, 1);
    chain(b, 10, 6, 1, 2); /* same tenant: shares 6 blocks with a */
    lb_pindex_record(x, a, 10, 22, 100);
    lb_pindex_match(x, b, 10, ids, 3, m);
    assert_int_equal(m[0], 0);
    assert_int_equal(m[1], 6);
    assert_int_equal(m[2], 0);
    lb_pindex_match(x, a, 10, ids, 3, m);
    assert_int_equal(m[1], 10);
    /* a second replica on the same chain: both match */
    lb_pindex_record(x, b, 10, 33, 200);
    lb_pindex_match(x, a, 10, ids, 3, m);
    assert_int_equal(m[1], 10);
    assert_int_equal(m[2], 6);
    /* bounded: 16 blocks; a 20-block chain keeps its first 16 (tails go first) */
    chain(a, 20, 20, 7, 0);
    lb_pindex_record(x, a, 20, 11, 300);
    assert_int_equal(lb_pindex_size(x), 16);
    lb_pindex_match(x, a, 20, ids, 3, m);
    assert_int_equal(m[0], 16);
    assert_int_equal(m[1], 0);
    lb_pindex_free(x);
}

/* Every way of a block is taken: the one sent to longest ago is replaced. */
static void test_pindex_ways(void **state)
{
    lb_pindex_t *x = lb_pindex_new(64);
    uint64_t a[4], ids[5] = {1, 2, 3, 4, 5};
    int m[5];

    chain(a, 4, 4, 3, 0);
    for (int i = 0; i < 5; i++)
        lb_pindex_record(x, a, 4, ids[i], 10 * (i + 1));
    lb_pindex_match(x, a, 4, ids, 5, m);
    assert_int_equal(m[0], 0); /* the oldest was replaced by the fifth */
    for (int i = 1; i < 5; i++)
        assert_int_equal(m[i], 4);
    lb_pindex_free(x);
}

/* prefix: each tenant sticks to one replica, whatever the load; the first
 * request of each goes to the least loaded, so tenants spread. */
static void test_prefix_sticky_and_spread(void **state)
{
    lb_peer_t p[4];
    lb_policy_t pol;
    uint64_t b[8];
    int home[8];
    int used[4] = {0};

    mk(p, 4);
    lb_policy_init(&pol, &lb_prefix_ops, NULL);
    assert_int_equal(lb_policy_set(&pol, p, 4), 0);
    for (int t = 0; t < 8; t++) {
        chain(b, 8, 6, (uint64_t)t + 1, 0);
        lb_req_t r = {.blocks = b, .nblocks = 8, .now_ms = 1000 + t};
        home[t] = lb_pick(&pol, &r);
        assert_true(home[t] >= 0);
        used[home[t]]++;
    }
    for (int i = 0; i < 4; i++)
        assert_int_equal(used[i], 2); /* all idle: round robin among ties */
    p[home[3]].inflight = 50;         /* busy, but it holds tenant 3's context */
    for (int q = 1; q < 40; q++) {
        int t = q % 8;
        chain(b, 8, 6, (uint64_t)t + 1, (uint64_t)q);
        lb_req_t r = {.blocks = b, .nblocks = 8, .now_ms = 2000 + q};
        assert_int_equal(lb_pick(&pol, &r), home[t]);
    }
    /* no blocks: least loaded */
    p[0].inflight = 3;
    p[1].inflight = 1;
    p[2].inflight = 2;
    p[3].inflight = 5;
    lb_req_t r = {.now_ms = 3000};
    assert_int_equal(lb_pick(&pol, &r), 1);
    lb_policy_fini(&pol);
}

/* kv: the engine's own queue and KV use, aged; what we sent since the scrape
 * counts as queued; a scrape past max_age says nothing. */
static void test_kv_costs(void **state)
{
    lb_peer_t p[3];
    lb_policy_t pol;
    lb_req_t r = {.now_ms = 10000};

    mk(p, 3);
    lb_policy_init(&pol, &lb_kv_ops, NULL);
    assert_int_equal(lb_policy_set(&pol, p, 3), 0);
    for (int i = 0; i < 3; i++)
        p[i].eng.at_ms = 10000;
    p[0].eng.waiting = 3;
    p[0].eng.running = 8;
    p[1].eng.running = 8;
    p[1].eng.kv = 0.85; /* a nearly full cache: 3.4 requests' worth */
    p[2].eng.running = 8;
    p[2].eng.kv = 0.2;
    assert_int_equal(lb_pick(&pol, &r), 2);
    p[2].inflight = 5; /* five sent since the scrape: queued there, as far as we know */
    assert_int_equal(lb_pick(&pol, &r), 1);
    /* the same scrape 20 s later is ignored: in flight only (1 and 0 have none) */
    r.now_ms = 30000;
    int k = lb_pick(&pol, &r);
    assert_true(k == 0 || k == 1);
    /* saturated (queue 3 > sat_queue 2): left out while another is not */
    pol.opt.sat_queue = 2;
    r.now_ms = 10000;
    p[2].inflight = 0;
    p[2].eng.kv = 0.95;
    p[2].eng.waiting = 1;                   /* a full cache saturates once requests wait for it */
    assert_int_equal(lb_pick(&pol, &r), 1); /* 0 saturated by queue, 2 by KV use */
    pol.opt.sat_kv = 0.9;
    r.admit = true;
    p[1].eng.kv = p[2].eng.kv = 0.99;
    assert_int_equal(lb_pick(&pol, &r), 1); /* full, but nothing waits there yet */
    p[1].eng.waiting = 1;
    assert_int_equal(lb_pick(&pol, &r), -EBUSY);
    r.admit = false;
    assert_true(lb_pick(&pol, &r) >= 0);
    lb_policy_fini(&pol);
}

/* What this balancer sent since a scrape is known, not aged with it: a late
 * scrape of a replica still being sent to does not make it look idle. */
static void test_engine_load_ageing(void **state)
{
    lb_peer_t p[1];
    lb_policy_t pol;
    double t, w;
    (void)state;

    mk(p, 1);
    lb_policy_init(&pol, &lb_inference_ops, NULL);
    assert_int_equal(lb_policy_set(&pol, p, 1), 0);
    p[0].eng.at_ms = 10000;
    p[0].eng.waiting = 4;
    p[0].eng.running = 1;
    p[0].eng.inflight_at = 5; /* all five ours at the scrape */
    p[0].inflight = 8;        /* three more sent since */
    lb_engine_load(&pol, 0, 10000, &t, &w);
    assert_float_equal(w, 7, 1e-9);
    /* one half-life later: the engine's 4 count 2, our 3 since count 3 */
    lb_engine_load(&pol, 0, 10000 + pol.opt.half_life_ms, &t, &w);
    assert_float_equal(w, 5, 1e-9);
    assert_true(lb_saturated(&pol, 0, 10000 + pol.opt.half_life_ms)); /* 5 > sat_queue 4 */
    /* past max_age the scrape says nothing: our in-flight count alone */
    lb_engine_load(&pol, 0, 10000 + pol.opt.max_age_ms + 1, &t, &w);
    assert_float_equal(w, 0, 1e-9);
    assert_float_equal(t, 8, 1e-9);
    lb_policy_fini(&pol);
}

/* inference: sticky until saturated, then released to the least loaded,
 * which then holds the prefix too; -EBUSY when all are saturated. */
static void test_inference_release(void **state)
{
    lb_peer_t p[4];
    lb_policy_t pol;
    uint64_t b[10];
    int home, second;

    mk(p, 4);
    lb_policy_init(&pol, &lb_inference_ops, NULL);
    assert_int_equal(lb_policy_set(&pol, p, 4), 0);
    chain(b, 10, 8, 5, 0);
    lb_req_t r = {.blocks = b, .nblocks = 10, .now_ms = 5000, .admit = true};
    home = lb_pick(&pol, &r);
    assert_true(home >= 0);
    /* loaded but unsaturated: the whole prefix (worth 8 requests) keeps it home */
    for (int i = 0; i < 4; i++)
        p[i].eng.at_ms = 5000;
    p[home].eng.running = 6;
    for (int q = 1; q < 10; q++) {
        chain(b, 10, 8, 5, (uint64_t)q);
        r.now_ms = 5000 + q;
        assert_int_equal(lb_pick(&pol, &r), home);
    }
    /* saturated: released */
    p[home].eng.waiting = 5; /* > sat_queue 4 */
    chain(b, 10, 8, 5, 99);
    second = lb_pick(&pol, &r);
    assert_true(second >= 0 && second != home);
    /* now both hold the context; with the first still saturated, the second keeps it */
    p[(second + 1) % 4 == home ? (second + 2) % 4 : (second + 1) % 4].eng.running = 0;
    p[second].eng.running = 3;
    chain(b, 10, 8, 5, 100);
    assert_int_equal(lb_pick(&pol, &r), second);
    /* every replica saturated: the caller queues */
    for (int i = 0; i < 4; i++)
        p[i].eng.waiting = 9;
    assert_int_equal(lb_pick(&pol, &r), -EBUSY);
    r.admit = false;
    assert_true(lb_pick(&pol, &r) >= 0);
    lb_policy_fini(&pol);
}

/* inference without prompts or metrics is least-conn: same choice of load. */
static void test_inference_is_leastconn_without_signals(void **state)
{
    lb_peer_t p[6];
    lb_policy_t pol;
    uint64_t s = 42;

    mk(p, 6);
    lb_policy_init(&pol, &lb_inference_ops, NULL);
    assert_int_equal(lb_policy_set(&pol, p, 6), 0);
    for (int k = 0; k < 500; k++) {
        uint32_t min = UINT32_MAX;
        for (int i = 0; i < 6; i++) {
            s = lb_mix64(s + (uint64_t)k);
            p[i].inflight = (uint32_t)(s % 7);
            if (p[i].inflight < min)
                min = p[i].inflight;
        }
        lb_req_t r = {.now_ms = k, .rnd = s};
        int i = lb_pick(&pol, &r);
        assert_true(i >= 0);
        assert_int_equal(p[i].inflight, min);
    }
    lb_policy_fini(&pol);
}

/* LoRA: the replica with the adapter loaded wins at equal load; then one
 * with a free slot; an adapter no replica lists changes nothing. */
static void test_inference_lora(void **state)
{
    lb_peer_t p[3];
    lb_policy_t pol;
    uint64_t ad = lb_hash64("sql-lora", 8, 0), other = lb_hash64("chat-lora", 9, 0);

    mk(p, 3);
    lb_policy_init(&pol, &lb_inference_ops, NULL);
    assert_int_equal(lb_policy_set(&pol, p, 3), 0);
    for (int i = 0; i < 3; i++) {
        p[i].eng.at_ms = 100;
        p[i].eng.max_lora = 2;
        p[i].eng.nlora = 2;
        p[i].eng.lora[0] = other;
        p[i].eng.lora[1] = lb_hash64("x", 1, (uint64_t)i);
    }
    p[2].eng.lora[1] = ad;
    p[2].eng.running = 2; /* busier, but it has the adapter (worth 4) */
    for (int k = 0; k < 10; k++) {
        lb_req_t r = {.model = ad, .now_ms = 100 + k};
        assert_int_equal(lb_pick(&pol, &r), 2);
    }
    /* unknown adapter: by load */
    lb_req_t r = {.model = lb_hash64("base", 4, 0), .now_ms = 110};
    int k = lb_pick(&pol, &r);
    assert_true(k == 0 || k == 1);
    lb_policy_fini(&pol);
}

/* Many tenants, two policies, the same arrivals: the inference policy sends
 * each tenant's requests to few replicas; round robin to all of them. */
static void test_inference_vs_rr_affinity(void **state)
{
    lb_peer_t p[8];
    lb_policy_t inf, rr;
    uint64_t b[12], s = 7;
    uint8_t seen_inf[32][8] = {{0}}, seen_rr[32][8] = {{0}};

    mk(p, 8);
    lb_policy_init(&inf, &lb_inference_ops, NULL);
    lb_policy_init(&rr, &lb_rr_ops, NULL);
    assert_int_equal(lb_policy_set(&inf, p, 8), 0);
    assert_int_equal(lb_policy_set(&rr, p, 8), 0);
    for (int k = 0; k < 2000; k++) {
        s = lb_mix64(s);
        int t = (int)(s % 32);
        chain(b, 12, 10, (uint64_t)t + 100, (uint64_t)k);
        lb_req_t r = {.blocks = b, .nblocks = 12, .now_ms = k, .rnd = s};
        seen_inf[t][lb_pick(&inf, &r)] = 1;
        seen_rr[t][lb_pick(&rr, &r)] = 1;
    }
    int homes_inf = 0, homes_rr = 0;
    for (int t = 0; t < 32; t++)
        for (int i = 0; i < 8; i++) {
            homes_inf += seen_inf[t][i];
            homes_rr += seen_rr[t][i];
        }
    assert_int_equal(homes_inf, 32); /* one replica per tenant (nothing saturates here) */
    assert_true(homes_rr >= 32 * 7);
    lb_policy_fini(&inf);
    lb_policy_fini(&rr);
}

/* ---- oai.c ---------------------------------------------------------------- */

static void test_oai_route(void **state)
{
    assert_int_equal(oai_route("/v1/completions", 15), OAI_COMPLETIONS);
    assert_int_equal(oai_route("/v1/completions?x=1", 19), OAI_COMPLETIONS);
    assert_int_equal(oai_route("/v1/chat/completions", 20), OAI_CHAT);
    assert_int_equal(oai_route("/v1/models", 10), OAI_NONE);
    assert_int_equal(oai_route("/v1/completionsX", 16), OAI_NONE);
}

static void test_oai_parse(void **state)
{
    uint64_t a[64], b[64], c[64];
    oai_req_t ra, rb, rc;
    arb_err_t err;
    char ctx[700], body[1200];

    memset(ctx, 'c', sizeof ctx - 1);
    ctx[sizeof ctx - 1] = '\0';
    snprintf(body, sizeof body,
             "{\"model\":\"llama\",\"stream\":true,\"max_tokens\":32,"
             "\"prompt\":\"%s question one\"}",
             ctx);
    assert_int_equal(oai_parse(body, strlen(body), OAI_COMPLETIONS, 64, a, 64, &ra, &err), 0);
    assert_string_equal(ra.model, "llama");
    assert_true(ra.stream);
    assert_int_equal(ra.max_tokens, 32);
    assert_int_equal(ra.prompt_bytes, 699 + 13);
    assert_int_equal(ra.nblocks, (699 + 13) / 64);
    snprintf(body, sizeof body, "{\"model\":\"llama\",\"prompt\":\"%s another question\"}", ctx);
    assert_int_equal(oai_parse(body, strlen(body), OAI_COMPLETIONS, 64, b, 64, &rb, &err), 0);
    assert_false(rb.stream);
    int same = 0;
    while (same < ra.nblocks && same < rb.nblocks && a[same] == b[same])
        same++;
    assert_int_equal(same, 699 / 64); /* the blocks before the questions differ */
    /* another model: another chain, the same text */
    snprintf(body, sizeof body, "{\"model\":\"qwen\",\"prompt\":\"%s question one\"}", ctx);
    assert_int_equal(oai_parse(body, strlen(body), OAI_COMPLETIONS, 64, c, 64, &rc, &err), 0);
    assert_true(c[0] != a[0]);
    /* chat: messages rendered, content as parts too */
    const char *chat1 = "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":"
                        "\"You are a helpful assistant for ACME's billing questions.\"},"
                        "{\"role\":\"user\",\"content\":\"why?\"}]}";
    const char *chat2 = "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":"
                        "[{\"type\":\"text\",\"text\":\"You are a helpful assistant for ACME's "
                        "billing questions.\"}]},{\"role\":\"user\",\"content\":\"how?\"}]}";
    assert_int_equal(oai_parse(chat1, strlen(chat1), OAI_CHAT, 16, a, 64, &ra, &err), 0);
    assert_int_equal(oai_parse(chat2, strlen(chat2), OAI_CHAT, 16, b, 64, &rb, &err), 0);
    assert_true(ra.nblocks >= 3);
    assert_memory_equal(a, b, 3 * sizeof a[0]);
    /* token ids, 4 bytes each */
    const char *tok = "{\"prompt\":[1,2,3,4,5,6,7,8,9]}";
    assert_int_equal(oai_parse(tok, strlen(tok), OAI_COMPLETIONS, 8, a, 64, &ra, &err), 0);
    assert_int_equal(ra.nblocks, 4);
    assert_int_equal(ra.prompt_bytes, 36);
    /* the cap */
    assert_int_equal(oai_parse(tok, strlen(tok), OAI_COMPLETIONS, 4, a, 3, &ra, &err), 0);
    assert_int_equal(ra.nblocks, 3);
    /* no prompt: fine, no blocks */
    assert_int_equal(oai_parse("{\"model\":\"x\"}", 13, OAI_COMPLETIONS, 64, a, 64, &ra, &err), 0);
    assert_int_equal(ra.nblocks, 0);
    /* not JSON, not an object: an error that says so */
    assert_int_equal(oai_parse("{\"model\":", 9, OAI_CHAT, 64, a, 64, &ra, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "not JSON"));
    assert_int_equal(oai_parse("[1]", 3, OAI_CHAT, 64, a, 64, &ra, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "JSON object"));
}

/* ---- prom.c --------------------------------------------------------------- */

static void test_prom_vllm(void **state)
{
    const char *txt =
        "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
        "# TYPE vllm:num_requests_running gauge\n"
        "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 7.0\n"
        "vllm:num_requests_running{engine=\"1\",model_name=\"m\"} 2.0\n"
        "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 3.0\r\n"
        "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.25\n"
        "vllm:kv_cache_usage_perc{engine=\"1\",model_name=\"m\"} 0.75\n"
        "vllm:lora_requests_info{max_lora=\"4\",running_lora_adapters=\"sql, chat\","
        "waiting_lora_adapters=\"\"} 1.7e9\n"
        "vllm:lora_requests_info{max_lora=\"4\",running_lora_adapters=\"old\","
        "waiting_lora_adapters=\"\"} 1.6e9\n"
        "vllm:prompt_tokens_total{model_name=\"m\"} 12345\n"
        "this is not a metric line\n"
        "vllm:num_requests_waiting{bad=\"unterminated} 1\n";
    lb_engine_t e = {0};
    prom_result_t res;

    assert_int_equal(prom_engine_parse(txt, strlen(txt), &e, &res), 7);
    assert_string_equal(res.engine, "vllm");
    assert_int_equal(res.malformed, 2);
    assert_true(e.running == 9);
    assert_true(e.waiting == 3);
    assert_true(e.kv == 0.75);
    assert_int_equal(e.max_lora, 4);
    assert_int_equal(e.nlora, 2);
    assert_true(e.lora[0] == lb_hash64("sql", 3, 0));
    assert_true(e.lora[1] == lb_hash64("chat", 4, 0));
}

static void test_prom_sglang_llamacpp(void **state)
{
    const char *sg = "sglang:num_queue_reqs{model_name=\"q\"} 4\n"
                     "sglang:num_running_reqs{model_name=\"q\"} 12\n"
                     "sglang:token_usage{model_name=\"q\"} 0.5\n";
    const char *ll = "# TYPE llamacpp:requests_processing gauge\n"
                     "llamacpp:requests_processing 2\n"
                     "llamacpp:requests_deferred 1\n"
                     "llamacpp:kv_cache_usage_ratio 0.63\n";
    const char *none = "process_cpu_seconds_total 3\n";
    lb_engine_t e = {0};
    prom_result_t res;

    assert_int_equal(prom_engine_parse(sg, strlen(sg), &e, &res), 3);
    assert_string_equal(res.engine, "sglang");
    assert_true(e.waiting == 4 && e.running == 12 && e.kv == 0.5);
    assert_int_equal(prom_engine_parse(ll, strlen(ll), &e, &res), 3);
    assert_string_equal(res.engine, "llamacpp");
    assert_true(e.waiting == 1 && e.running == 2 && e.kv == 0.63);
    assert_int_equal(prom_engine_parse(none, strlen(none), &e, &res), 0);
    assert_true(e.kv == -1);
    char v[32];
    const char *lab = "a=\"x\\\"y\", b=\"2\"";
    assert_true(prom_label(lab, strlen(lab), "a", v, sizeof v));
    assert_string_equal(v, "x\"y");
    assert_true(prom_label(lab, strlen(lab), "b", v, sizeof v));
    assert_string_equal(v, "2");
    assert_false(prom_label(lab, strlen(lab), "c", v, sizeof v));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pindex_match_and_bound),
        cmocka_unit_test(test_pindex_ways),
        cmocka_unit_test(test_prefix_sticky_and_spread),
        cmocka_unit_test(test_kv_costs),
        cmocka_unit_test(test_engine_load_ageing),
        cmocka_unit_test(test_inference_release),
        cmocka_unit_test(test_inference_is_leastconn_without_signals),
        cmocka_unit_test(test_inference_lora),
        cmocka_unit_test(test_inference_vs_rr_affinity),
        cmocka_unit_test(test_oai_route),
        cmocka_unit_test(test_oai_parse),
        cmocka_unit_test(test_prom_vllm),
        cmocka_unit_test(test_prom_sglang_llamacpp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
