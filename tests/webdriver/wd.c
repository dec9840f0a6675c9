/*
 * wd.c: arb_wd, a tiny W3C WebDriver client for the browser tests
 * (tests/cli/ui.sh): one command a call against ChromeDriver's HTTP
 * endpoint, so a shell test can drive Debian's chromium step by step.
 *
 *   arb_wd http://127.0.0.1:PORT new PROFILE_DIR WIDTH HEIGHT
 *                                  start a headless browser; prints the session URL
 *                                  and, on a second line, the browser's pid
 *   arb_wd SESSION go URL           navigate and wait for the load event
 *   arb_wd SESSION js SCRIPT [ARG]...
 *                                  run SCRIPT (a function body; ARGs are
 *                                  strings in `arguments`); prints the value:
 *                                  a string as it is, anything else as JSON
 *   arb_wd SESSION wait SECS SCRIPT [ARG]...
 *                                  run SCRIPT every 50 ms until it returns a
 *                                  truthy value (printed); exit 1 after SECS
 *   arb_wd SESSION shot FILE.png    a screenshot of the window
 *   arb_wd SESSION log              the browser's console log since the last
 *                                  call, one "LEVEL message" a line
 *   arb_wd SESSION quit             close the browser
 *
 * Exit: 0 done, 1 wait timed out, 2 WebDriver refused (its message on
 * stderr), 3 ChromeDriver unreachable, 64 usage.
 *
 * Why WebDriver and not Playwright: chromium-driver is built from the same
 * Debian source as chromium, so the two always match; Playwright drives
 * Chromium over its DevTools protocol from an npm package whose version
 * must be kept in step with a browser Debian updates on its own. The W3C
 * protocol is plain JSON over HTTP: libcurl and jansson, already used
 * everywhere here, are all this needs.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct buf {
    char *p;
    size_t n;
} buf_t;

static size_t on_data(char *d, size_t sz, size_t nm, void *u)
{
    buf_t *b = u;
    size_t k = sz * nm;
    char *q = realloc(b->p, b->n + k + 1);
    if (!q)
        return 0;
    memcpy(q + b->n, d, k);
    b->p = q;
    b->n += k;
    b->p[b->n] = '\0';
    return k;
}

/* METHOD url with body (NULL: none); the reply's "value" (owned), or NULL
 * with *rc set (2 refused, 3 unreachable). */
static json_t *wd(const char *method, const char *url, json_t *body, int *rc)
{
    CURL *c = curl_easy_init();
    buf_t b = {0};
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    char *txt = body ? json_dumps(body, JSON_COMPACT) : NULL;
    long status = 0;
    json_t *out = NULL;

    *rc = 0;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    if (txt)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, txt);
    else if (strcmp(method, "POST") == 0)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, "{}");
    CURLcode cc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (cc != CURLE_OK) {
        fprintf(stderr, "arb_wd: %s %s: %s\n", method, url, curl_easy_strerror(cc));
        *rc = 3;
        goto out;
    }
    json_t *r = b.p ? json_loads(b.p, 0, NULL) : NULL;
    json_t *v = json_object_get(r, "value");
    if (status != 200 || !r) {
        const char *m = json_string_value(json_object_get(v, "message"));
        fprintf(stderr, "arb_wd: %s %s: %ld: %s\n", method, url, status,
                m ? m : (b.p ? b.p : "(no reply)"));
        *rc = 2;
    } else {
        out = json_incref(v ? v : json_null());
    }
    json_decref(r);
out:
    free(txt);
    free(b.p);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return out;
}

static void print_value(json_t *v)
{
    if (json_is_string(v)) {
        fputs(json_string_value(v), stdout);
        fputc('\n', stdout);
    } else if (!json_is_null(v)) {
        char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (t)
            puts(t);
        free(t);
    }
}

static bool truthy(json_t *v)
{
    return v && !json_is_null(v) && !json_is_false(v) &&
           !(json_is_string(v) && !json_string_length(v)) &&
           !(json_is_number(v) && json_number_value(v) == 0);
}

static json_t *run_js(const char *sess, const char *script, int argc, char **argv, int *rc)
{
    char url[1024];
    json_t *args = json_array();
    for (int i = 0; i < argc; i++)
        json_array_append_new(args, json_string(argv[i]));
    json_t *body = json_pack("{s:s,s:o}", "script", script, "args", args);
    snprintf(url, sizeof url, "%s/execute/sync", sess);
    json_t *v = wd("POST", url, body, rc);
    json_decref(body);
    return v;
}

static int b64val(int c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

static int write_b64(const char *s, const char *path)
{
    FILE *f = fopen(path, "wb");
    unsigned acc = 0;
    int bits = 0;

    if (!f) {
        perror(path);
        return 2;
    }
    for (; *s; s++) {
        int v = b64val((unsigned char)*s);
        if (v < 0)
            continue; /* '=' padding, newlines */
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            fputc((int)((acc >> bits) & 0xff), f);
        }
    }
    return fclose(f) == 0 ? 0 : 2;
}

static int usage(void)
{
    fprintf(stderr, "usage: arb_wd ENDPOINT new PROFILE W H | arb_wd SESSION go URL | js SCRIPT "
                    "[ARG..] | wait SECS SCRIPT [ARG..] | shot FILE | log | quit\n");
    return 64;
}

int main(int argc, char **argv)
{
    char url[2048];
    int rc = 0;
    json_t *v = NULL;

    if (argc < 3)
        return usage();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const char *ep = argv[1], *cmd = argv[2];
    if (strcmp(cmd, "new") == 0 && argc == 6) {
        char ud[1200], ws[64];
        snprintf(ud, sizeof ud, "--user-data-dir=%s", argv[3]);
        snprintf(ws, sizeof ws, "--window-size=%s,%s", argv[4], argv[5]);
        /* As root in a closed network: no sandbox, no GPU, nothing fetched. */
        json_t *args =
            json_pack("[s,s,s,s,s,s,s,s,s,s,s,s]", "--headless", "--no-sandbox", "--disable-gpu",
                      "--disable-quic", "--no-first-run", "--disable-background-networking",
                      "--disable-component-update", "--disable-sync", "--disable-extensions",
                      "--disable-dev-shm-usage", ud, ws);
        json_t *body =
            json_pack("{s:{s:{s:s,s:{s:s,s:o},s:{s:s}}}}", "capabilities", "alwaysMatch",
                      "browserName", "chrome", "goog:chromeOptions", "binary",
                      getenv("ARB_CHROMIUM") ? getenv("ARB_CHROMIUM") : "/usr/bin/chromium", "args",
                      args, "goog:loggingPrefs", "browser", "ALL");
        snprintf(url, sizeof url, "%s/session", ep);
        v = wd("POST", url, body, &rc);
        json_decref(body);
        const char *id = json_string_value(json_object_get(v, "sessionId"));
        json_int_t pid = json_integer_value(
            json_object_get(json_object_get(v, "capabilities"), "goog:processID"));
        if (!rc && id)
            printf("%s/session/%s\n%lld\n", ep, id, (long long)pid);
        else if (!rc)
            rc = 2;
    } else if (strcmp(cmd, "go") == 0 && argc == 4) {
        json_t *body = json_pack("{s:s}", "url", argv[3]);
        snprintf(url, sizeof url, "%s/url", ep);
        v = wd("POST", url, body, &rc);
        json_decref(body);
    } else if (strcmp(cmd, "js") == 0 && argc >= 4) {
        v = run_js(ep, argv[3], argc - 4, argv + 4, &rc);
        if (!rc)
            print_value(v);
    } else if (strcmp(cmd, "wait") == 0 && argc >= 5) {
        double secs = atof(argv[3]);
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (;;) {
            json_decref(v);
            v = run_js(ep, argv[4], argc - 5, argv + 5, &rc);
            if (rc || truthy(v))
                break;
            clock_gettime(CLOCK_MONOTONIC, &t);
            if ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 > secs) {
                char *last = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
                fprintf(stderr, "arb_wd: wait: still %s after %.1f s: %s\n", last ? last : "null",
                        secs, argv[4]);
                free(last);
                rc = 1;
                break;
            }
            usleep(50000);
        }
        if (!rc)
            print_value(v);
    } else if (strcmp(cmd, "shot") == 0 && argc == 4) {
        snprintf(url, sizeof url, "%s/screenshot", ep);
        v = wd("GET", url, NULL, &rc);
        if (!rc)
            rc = json_is_string(v) ? write_b64(json_string_value(v), argv[3]) : 2;
    } else if (strcmp(cmd, "log") == 0 && argc == 3) {
        /* ChromeDriver's log endpoint (not in W3C WebDriver, which has none). */
        json_t *body = json_pack("{s:s}", "type", "browser");
        snprintf(url, sizeof url, "%s/se/log", ep);
        v = wd("POST", url, body, &rc);
        json_decref(body);
        json_t *e;
        size_t i;
        json_array_foreach(v, i, e)
            printf("%s %s\n", json_string_value(json_object_get(e, "level")),
                   json_string_value(json_object_get(e, "message")));
    } else if (strcmp(cmd, "quit") == 0 && argc == 3) {
        v = wd("DELETE", ep, NULL, &rc);
    } else {
        rc = usage();
    }
    json_decref(v);
    curl_global_cleanup();
    return rc;
}
