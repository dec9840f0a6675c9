/* test_failover.c: the pure parts of src/client/failover.c: the list of
 * controller URLs (what is accepted, how it is normalised, what each
 * refusal says) and Retry-After. The requests themselves are tested with
 * real processes in tests/cli/failover.sh. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "client/failover.h"

static void test_one_and_several(void **state)
{
    fo_urls_t u;
    arb_err_t err = {{0}};

    (void)state;
    assert_int_equal(fo_urls_parse("http://127.0.0.1:7070", "ARBITER_URL", &u, &err), 0);
    assert_int_equal(u.n, 1);
    assert_int_equal(u.cur, 0);
    assert_string_equal(u.url[0], "http://127.0.0.1:7070");

    assert_int_equal(fo_urls_parse(" http://a:1/, https://b:2// ,http://c", "X", &u, &err), 0);
    assert_int_equal(u.n, 3);
    assert_string_equal(u.url[0], "http://a:1");
    assert_string_equal(u.url[1], "https://b:2");
    assert_string_equal(u.url[2], "http://c");
}

static void test_refusals(void **state)
{
    static const struct {
        const char *in, *msg;
    } bad[] = {
        {"", "ARBITER_URL: empty"},
        {"http://a,,http://b", "an empty URL in the list"},
        {"http://a,", "a trailing comma; drop it"},
        {"ftp://a", "'ftp://a' is not an http:// or https:// URL"},
        {"http://", "'http:' is not an http:// or https:// URL"},
        {"127.0.0.1:7070", "is not an http:// or https:// URL; give e.g. http://127.0.0.1:7070"},
        {"http://a?x=1", "a base URL has no spaces, query or fragment"},
        {"http://a b", "a base URL has no spaces"},
        {"http://1,http://2,http://3,http://4,http://5,http://6,http://7,http://8,http://9",
         "more than 8 URLs"},
    };
    fo_urls_t u;

    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        arb_err_t err = {{0}};
        int rc = fo_urls_parse(bad[i].in, "ARBITER_URL", &u, &err);
        if (rc != -EINVAL || !strstr(err.msg, bad[i].msg))
            fail_msg("'%s': rc %d, message '%s', want '%s'", bad[i].in, rc, err.msg, bad[i].msg);
        assert_non_null(strstr(err.msg, "ARBITER_URL"));
    }
    {
        char big[400];
        arb_err_t err = {{0}};
        memset(big, 'a', sizeof big);
        memcpy(big, "http://", 7);
        big[sizeof big - 1] = '\0';
        assert_int_equal(fo_urls_parse(big, "--controller", &u, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "--controller: URL 1 is longer than"));
    }
}

static void test_retry_after(void **state)
{
    (void)state;
    assert_int_equal(fo_retry_after_ms(" 1\r\n"), 1000);
    assert_int_equal(fo_retry_after_ms("0"), 0);
    assert_int_equal(fo_retry_after_ms("30"), 30000);
    assert_int_equal(fo_retry_after_ms("Wed, 21 Oct 2015 07:28:00 GMT"), -1);
    assert_int_equal(fo_retry_after_ms("-1"), -1);
    assert_int_equal(fo_retry_after_ms("5x"), -1);
    assert_int_equal(fo_retry_after_ms(""), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_and_several),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_retry_after),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
