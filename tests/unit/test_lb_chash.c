/* test_lb_chash.c: consistent hashing (ring and Maglev) with bounded loads,
 * and shard maps: spread, keys moved when a peer leaves, the load bound. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lb/lb.h"
#include "lb/shard.h"

enum { KEYS = 100000 };

static char names[64][32];

static void mk(lb_peer_t *p, int n)
{
    memset(p, 0, (size_t)n * sizeof *p);
    for (int i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "replica-%d:8000", i);
        p[i].name = names[i];
        p[i].weight = p[i].eff = 1;
    }
}

static uint64_t key(int k)
{
    char s[32];
    int n = snprintf(s, sizeof s, "user-%d", k);
    return lb_hash64(s, (size_t)n, 0);
}

/* Where each of KEYS keys goes, unbounded (no load held). */
static void map_keys(lb_hash_kind_t kind, lb_peer_t *p, int n, int *out)
{
    lb_opts_t o;
    lb_policy_t pol;

    lb_opts_default(&o);
    o.kind = kind;
    o.balance = 0;
    lb_policy_init(&pol, &lb_chash_ops, &o);
    assert_int_equal(lb_policy_set(&pol, p, n), 0);
    for (int k = 0; k < KEYS; k++) {
        lb_req_t r = {.key = key(k), .has_key = true};
        out[k] = lb_pick(&pol, &r);
        assert_true(out[k] >= 0 && out[k] < n);
    }
    lb_policy_fini(&pol);
}

static double max_over_mean(const int *owner, int n)
{
    int cnt[64] = {0}, mx = 0;
    for (int k = 0; k < KEYS; k++)
        cnt[owner[k]]++;
    for (int i = 0; i < n; i++)
        mx = cnt[i] > mx ? cnt[i] : mx;
    return (double)mx / ((double)KEYS / n);
}

/* Peer `gone` leaves (removed from the set): the fraction of keys whose
 * peer changed, compared by name. */
static double moved_when_leaving(lb_hash_kind_t kind, int n, int gone, double *spread)
{
    lb_peer_t all[64], rest[64];
    int *a = malloc(KEYS * sizeof *a), *b = malloc(KEYS * sizeof *b), m = 0, moved = 0;

    mk(all, n);
    map_keys(kind, all, n, a);
    *spread = max_over_mean(a, n);
    for (int i = 0; i < n; i++)
        if (i != gone)
            rest[m++] = all[i];
    map_keys(kind, rest, m, b);
    for (int k = 0; k < KEYS; k++) {
        moved += strcmp(all[a[k]].name, rest[b[k]].name) != 0;
        /* a key of a peer that stays either stays or (Maglev only) moves */
        if (kind == LB_HASH_RING && a[k] != gone)
            assert_string_equal(all[a[k]].name, rest[b[k]].name);
    }
    free(a);
    free(b);
    return (double)moved / KEYS;
}

static void test_ring_moves_one_nth(void **state)
{
    double spread;
    for (int n = 5; n <= 20; n += 5) {
        double f = moved_when_leaving(LB_HASH_RING, n, n / 2, &spread);
        print_message("ring n=%d: moved %.4f (1/n %.4f), max/mean %.3f\n", n, f, 1.0 / n, spread);
        assert_true(f > 0.5 / n && f < 1.6 / n);
        assert_true(spread < 1.35);
    }
}

static void test_maglev_within_2x(void **state)
{
    double spread;
    for (int n = 5; n <= 20; n += 5) {
        double f = moved_when_leaving(LB_HASH_MAGLEV, n, n / 2, &spread);
        print_message("maglev n=%d: moved %.4f (1/n %.4f), max/mean %.3f\n", n, f, 1.0 / n, spread);
        assert_true(f >= 0.9 / n && f <= 2.0 / n);
        assert_true(spread < 1.05); /* M/N slots each, to within one */
    }
}

/* Keys held (each pick adds one in flight): with bound c, max/mean <= c. */
static void test_bounded_loads(void **state)
{
    const double cs[3] = {1.25, 1.1, 1.5};
    for (int kind = 0; kind < 2; kind++) {
        for (int ci = 0; ci < 3; ci++) {
            lb_peer_t p[10];
            lb_opts_t o;
            lb_policy_t pol;
            int held = 20000;

            mk(p, 10);
            lb_opts_default(&o);
            o.kind = (lb_hash_kind_t)kind;
            o.balance = cs[ci];
            o.vnodes = 4; /* a lumpy ring, so the bound has work to do */
            lb_policy_init(&pol, &lb_chash_ops, &o);
            assert_int_equal(lb_policy_set(&pol, p, 10), 0);
            /* hot keys: 40% of requests on 5 keys */
            for (int k = 0; k < held; k++) {
                lb_req_t r = {.key = key(k % 5 == 0 ? k % 25 : k), .has_key = true};
                int e = lb_pick(&pol, &r);
                p[e].inflight++;
            }
            uint32_t mx = 0;
            for (int i = 0; i < 10; i++)
                mx = p[i].inflight > mx ? p[i].inflight : mx;
            double mm = mx / (held / 10.0);
            print_message("%s c=%.2f: max/mean %.3f\n", kind ? "maglev" : "ring", cs[ci], mm);
            assert_true(mm <= cs[ci] + 10.0 / held);
            lb_policy_fini(&pol);
        }
    }
}

/* A key stays on its peer while that peer is pickable and not full; when
 * it goes down the key moves, when it comes back the key returns. */
static void test_key_sticks(void **state)
{
    for (int kind = 0; kind < 2; kind++) {
        lb_peer_t p[6];
        lb_opts_t o;
        lb_policy_t pol;
        lb_req_t r = {.key = key(42), .has_key = true};

        mk(p, 6);
        lb_opts_default(&o);
        o.kind = (lb_hash_kind_t)kind;
        lb_policy_init(&pol, &lb_chash_ops, &o);
        assert_int_equal(lb_policy_set(&pol, p, 6), 0);
        int home = lb_pick(&pol, &r);
        for (int k = 0; k < 100; k++) {
            r.rnd = (uint64_t)k * 7919;
            assert_int_equal(lb_pick(&pol, &r), home);
        }
        p[home].eff = 0;
        int other = lb_pick(&pol, &r);
        assert_true(other >= 0 && other != home);
        p[home].eff = 1;
        assert_int_equal(lb_pick(&pol, &r), home);
        /* a retry skips the home peer */
        uint8_t skip[6] = {0};
        skip[home] = 1;
        r.skip = skip;
        assert_int_equal(lb_pick(&pol, &r), other);
        lb_policy_fini(&pol);
    }
}

static void test_weights(void **state)
{
    for (int kind = 0; kind < 2; kind++) {
        lb_peer_t p[3];
        int *o = malloc(KEYS * sizeof *o), cnt[3] = {0};
        mk(p, 3);
        p[0].weight = p[0].eff = 2;
        map_keys((lb_hash_kind_t)kind, p, 3, o);
        for (int k = 0; k < KEYS; k++)
            cnt[o[k]]++;
        double share = (double)cnt[0] / KEYS;
        print_message("%s weight 2 of 4: share %.3f\n", kind ? "maglev" : "ring", share);
        assert_true(share > 0.42 && share < 0.58);
        free(o);
    }
}

static void test_shard_map(void **state)
{
    const char *nodes[5] = {"a", "b", "c", "d", "e"}, *four[4] = {"a", "b", "d", "e"};
    const char *six[6] = {"a", "b", "c", "d", "e", "f"};
    lb_shard_map_t m, m4, m6;
    arb_err_t err;

    assert_int_equal(lb_shard_assign(nodes, 5, 1000, 3, NULL, &m, &err), 0);
    int mx = 0;
    for (int i = 0; i < 5; i++)
        mx = m.count[i] > mx ? m.count[i] : mx;
    assert_true(mx <= 1.25 * 3000 / 5 + 1);
    for (int s = 0; s < 1000; s++) /* replicas on distinct nodes */
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < a; b++)
                assert_int_not_equal(m.owner[s * 3 + a], m.owner[s * 3 + b]);
    /* "c" leaves: at least its 600 replicas move, not much more */
    assert_int_equal(lb_shard_assign(four, 4, 1000, 3, NULL, &m4, &err), 0);
    int moved = lb_shard_moved(&m, nodes, &m4, four);
    print_message("shard: c held %d, leaving moves %d\n", m.count[2], moved);
    assert_true(moved >= m.count[2] && moved <= 2 * m.count[2]);
    /* "f" joins: it takes about 1/6 of replicas */
    assert_int_equal(lb_shard_assign(six, 6, 1000, 3, NULL, &m6, &err), 0);
    moved = lb_shard_moved(&m, nodes, &m6, six);
    print_message("shard: f joins, takes %d, moves %d\n", m6.count[5], moved);
    assert_true(moved >= m6.count[5] && moved <= 2 * m6.count[5]);
    lb_shard_free(&m);
    lb_shard_free(&m4);
    lb_shard_free(&m6);
    /* errors say what to do */
    assert_int_equal(lb_shard_assign(nodes, 5, 10, 6, NULL, &m, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "give 1 to 5"));
    const char *dup[2] = {"a", "a"};
    assert_int_equal(lb_shard_assign(dup, 2, 10, 1, NULL, &m, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "twice"));
}

static void test_hash_stable(void **state)
{
    /* The hash is part of the shard map's meaning: it must not change. */
    assert_true(lb_hash64("", 0, 0) == lb_hash64("", 0, 0));
    assert_true(lb_hash64("abc", 3, 0) != lb_hash64("abd", 3, 0));
    assert_true(lb_hash64("abc", 3, 0) != lb_hash64("abc", 3, 1));
    assert_true(lb_hash64("0123456789abcdef", 16, 0) != lb_hash64("0123456789abcdeg", 16, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_moves_one_nth),
        cmocka_unit_test(test_maglev_within_2x),
        cmocka_unit_test(test_bounded_loads),
        cmocka_unit_test(test_key_sticks),
        cmocka_unit_test(test_weights),
        cmocka_unit_test(test_shard_map),
        cmocka_unit_test(test_hash_stable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
