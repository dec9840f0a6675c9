/* test_auth.c: who is calling (src/api/auth.c): the tokens file (an agent's
 * fourth column is its node; digests only), token lookup (whole, any
 * length), and api_authenticate's choice between a bearer token, a client
 * certificate and no authentication at all, with the 401s and 403s. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"

static char path[64];

static void write_tokens(const char *text)
{
    snprintf(path, sizeof path, "/tmp/arb_test_auth.XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

#define TOKS                                                                                       \
    "# comment\n"                                                                                  \
    "admin-token-0123456789 admin ops root\n"                                                      \
    "alice-token-0123456789 user team-a alice\n"                                                   \
    "n1-agent-token-0123456 agent nodes n1\n"                                                      \
    "lb-agent-token-0123456 agent nodes\n"

static void test_tokens_file(void **unused)
{
    api_tokens_t t = {0};
    arb_err_t err = {{0}};
    (void)unused;

    write_tokens(TOKS);
    assert_int_equal(api_tokens_load(path, &t, &err), 0);
    unlink(path);
    assert_int_equal(t.n, 4);
    const api_token_t *a = api_tokens_find(&t, "n1-agent-token-0123456");
    assert_non_null(a);
    assert_int_equal(a->role, ST_ROLE_AGENT);
    assert_string_equal(a->node, "n1");
    const api_token_t *lb = api_tokens_find(&t, "lb-agent-token-0123456");
    assert_non_null(lb);
    assert_string_equal(lb->node, ""); /* bound to no node */
    assert_string_equal(api_tokens_find(&t, "alice-token-0123456789")->name, "alice");
    assert_string_equal(api_tokens_find(&t, "alice-token-0123456789")->node, "");
    /* prefixes, extensions and near misses are not tokens */
    assert_null(api_tokens_find(&t, "alice-token-012345678"));
    assert_null(api_tokens_find(&t, "alice-token-01234567890"));
    assert_null(api_tokens_find(&t, "alice-token-0123456780"));
    assert_null(api_tokens_find(&t, ""));
    /* the text is not kept: only digests */
    for (int i = 0; i < t.n; i++)
        assert_null(memmem(&t.v[i], sizeof t.v[i], "token-0123", 10));
    api_tokens_free(&t);

    write_tokens("short agent nodes n1\n");
    assert_int_equal(api_tokens_load(path, &t, &err), -EINVAL);
    assert_non_null(strstr(err.msg, ":1: a token must be 16..127 characters"));
    unlink(path);
    write_tokens("admin-token-0123456789 admin ops\nadmin-token-0123456789 user a b\n");
    assert_int_equal(api_tokens_load(path, &t, &err), -EINVAL);
    assert_non_null(strstr(err.msg, ":2: this token is already"));
    unlink(path);
    write_tokens("admin-token-0123456789 root ops\n");
    assert_int_equal(api_tokens_load(path, &t, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "use admin, user or agent"));
    unlink(path);
}

static void test_authenticate(void **unused)
{
    api_tokens_t t = {0};
    arb_err_t err = {{0}};
    api_principal_t p;
    char msg[512];
    (void)unused;

    write_tokens(TOKS);
    assert_int_equal(api_tokens_load(path, &t, &err), 0);
    unlink(path);

    api_auth_conf_t none = {0};
    assert_int_equal(api_authenticate(&none, NULL, NULL, &p, msg, sizeof msg), 0);
    assert_int_equal(p.role, ST_ROLE_ADMIN); /* no authentication: loopback admin */

    api_auth_conf_t tok = {.tokens = &t};
    assert_int_equal(api_authenticate(&tok, NULL, NULL, &p, msg, sizeof msg), 401);
    assert_non_null(strstr(msg, "bearer token"));
    assert_int_equal(
        api_authenticate(&tok, "Bearer wrong-token-01234567", NULL, &p, msg, sizeof msg), 401);
    assert_int_equal(
        api_authenticate(&tok, "Basic n1-agent-token-0123456", NULL, &p, msg, sizeof msg), 401);
    assert_int_equal(
        api_authenticate(&tok, "Bearer n1-agent-token-0123456", NULL, &p, msg, sizeof msg), 0);
    assert_int_equal(p.role, ST_ROLE_AGENT);
    assert_string_equal(p.node, "n1");
    assert_int_equal(
        api_authenticate(&tok, "bearer lb-agent-token-0123456", NULL, &p, msg, sizeof msg), 0);
    assert_null(p.node);

    /* certificates: CN the name, O the role, OU the team */
    api_auth_conf_t cert = {.tokens = &t, .certs = true};
    api_cert_t node = {.state = API_CERT_OK};
    snprintf(node.peer.cn, sizeof node.peer.cn, "gpu-7");
    snprintf(node.peer.o, sizeof node.peer.o, "agent");
    snprintf(node.peer.ou, sizeof node.peer.ou, "nodes");
    assert_int_equal(api_authenticate(&cert, NULL, &node, &p, msg, sizeof msg), 0);
    assert_int_equal(p.role, ST_ROLE_AGENT);
    assert_string_equal(p.node, "gpu-7");
    api_cert_t user = {.state = API_CERT_OK};
    snprintf(user.peer.cn, sizeof user.peer.cn, "bob");
    snprintf(user.peer.o, sizeof user.peer.o, "user");
    snprintf(user.peer.ou, sizeof user.peer.ou, "team-b");
    assert_int_equal(api_authenticate(&cert, NULL, &user, &p, msg, sizeof msg), 0);
    assert_int_equal(p.role, ST_ROLE_USER);
    assert_string_equal(p.team, "team-b");
    assert_null(p.node);
    /* a token, when given, is the principal */
    assert_int_equal(
        api_authenticate(&cert, "Bearer alice-token-0123456789", &node, &p, msg, sizeof msg), 0);
    assert_string_equal(p.name, "alice");
    api_cert_t odd = {.state = API_CERT_OK};
    snprintf(odd.peer.cn, sizeof odd.peer.cn, "controller");
    assert_int_equal(api_authenticate(&cert, NULL, &odd, &p, msg, sizeof msg), 403);
    assert_non_null(strstr(msg, "not a role"));
    api_cert_t bad = {.state = API_CERT_BAD};
    snprintf(bad.why, sizeof bad.why, "client certificate refused: issuer unknown");
    assert_int_equal(api_authenticate(&cert, NULL, &bad, &p, msg, sizeof msg), 401);
    assert_non_null(strstr(msg, "issuer unknown"));
    api_cert_t absent = {.state = API_CERT_NONE};
    assert_int_equal(api_authenticate(&cert, NULL, &absent, &p, msg, sizeof msg), 401);
    assert_non_null(strstr(msg, "or client certificate"));

    /* --client-cert-auth: a token alone is not enough */
    api_auth_conf_t req = {.tokens = &t, .certs = true, .require_cert = true};
    assert_int_equal(
        api_authenticate(&req, "Bearer admin-token-0123456789", &absent, &p, msg, sizeof msg), 401);
    assert_non_null(strstr(msg, "--client-cert-auth"));
    assert_int_equal(
        api_authenticate(&req, "Bearer admin-token-0123456789", &node, &p, msg, sizeof msg), 0);
    assert_int_equal(p.role, ST_ROLE_ADMIN);
    api_tokens_free(&t);
}

static void test_secret_equal(void **unused)
{
    (void)unused;
    assert_true(
        tls_secret_equal("0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcdef"));
    assert_false(
        tls_secret_equal("0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcdee"));
    assert_false(tls_secret_equal("0123456789abcdef", "0123456789abcdef0"));
    assert_false(tls_secret_equal("", "x"));
    assert_true(tls_secret_equal("", ""));
    assert_true(tls_is_loopback("127.0.0.1"));
    assert_true(tls_is_loopback("127.9.8.7"));
    assert_false(tls_is_loopback("0.0.0.0"));
    assert_false(tls_is_loopback("10.0.0.1"));
    assert_false(tls_is_loopback("localhost"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokens_file),
        cmocka_unit_test(test_authenticate),
        cmocka_unit_test(test_secret_equal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
