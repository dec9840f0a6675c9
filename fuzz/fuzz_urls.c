/*
 * fuzz_urls.c: libFuzzer target for fo_urls_parse (ARBITER_URL, the
 * agent's and the load balancer's --controller) and fo_retry_after_ms.
 *
 * The input, as a NUL-terminated string. Checked: no crash or sanitizer
 * report; a failure is -EINVAL with a message naming the option; a success
 * holds 1..FO_MAX_URLS URLs, each http:// or https://, NUL-terminated within
 * its slot, without a trailing '/', and parsing the list joined again gives
 * the same list.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/failover.h"

static void check(bool ok, const char *what, const char *s)
{
    if (!ok) {
        fprintf(stderr, "fuzz_urls: %s for input '%s'\n", what, s);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1), joined[FO_MAX_URLS * (FO_URL_MAX + 1) + 1];
    fo_urls_t u, v;
    arb_err_t err = {{0}};

    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    (void)fo_retry_after_ms(s);
    int rc = fo_urls_parse(s, "FUZZ", &u, &err);
    if (rc < 0) {
        check(rc == -EINVAL, "an error other than -EINVAL", s);
        check(strstr(err.msg, "FUZZ") != NULL, "a message without the option's name", s);
    } else {
        size_t used = 0;
        check(u.n >= 1 && u.n <= FO_MAX_URLS, "a URL count out of range", s);
        for (int i = 0; i < u.n; i++) {
            size_t l = strnlen(u.url[i], FO_URL_MAX);
            check(l < FO_URL_MAX, "an unterminated URL", s);
            check(!strncmp(u.url[i], "http://", 7) || !strncmp(u.url[i], "https://", 8),
                  "a URL that is not http(s)", s);
            check(u.url[i][l - 1] != '/', "a trailing slash kept", s);
            used += (size_t)snprintf(joined + used, sizeof joined - used, "%s%s", i ? "," : "",
                                     u.url[i]);
        }
        check(fo_urls_parse(joined, "FUZZ", &v, &err) == 0 && v.n == u.n, "no round trip", s);
        for (int i = 0; i < u.n; i++)
            check(strcmp(u.url[i], v.url[i]) == 0, "a different URL on the round trip", s);
    }
    free(s);
    return 0;
}
