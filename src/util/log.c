/*
 * log.c: the one logger (log.h): a line built whole in a stack buffer,
 * then written with one fwrite; JSON strings escaped here (no JSON library
 * in the base layer).
 */
#include "util/log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct {
    char daemon[32], name[64];
    _Atomic int level; /* arb_log_level_t */
    _Atomic bool json;
    FILE *_Atomic out;
} lg = {.daemon = "", .level = ARB_LOG_INFO};

static const char *const level_names[] = {"debug", "info", "warn", "error"};

static int level_of(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(s, level_names[i]) == 0)
            return i;
    if (strcmp(s, "warning") == 0)
        return ARB_LOG_WARN;
    return -1;
}

int arb_log_configure(const char *level, const char *format, arb_err_t *err)
{
    int lv = ARB_LOG_INFO;
    bool json = false;

    if (level && (lv = level_of(level)) < 0)
        return arb_errf(err, -EINVAL,
                        "log level '%.40s' is not one of debug, info, warn, error "
                        "(e.g. ARBITER_LOG_LEVEL=warn)",
                        level);
    if (format) {
        if (strcmp(format, "json") == 0)
            json = true;
        else if (strcmp(format, "text") != 0)
            return arb_errf(err, -EINVAL,
                            "log format '%.40s' is not text or json (e.g. ARBITER_LOG_FORMAT=json)",
                            format);
    }
    if (level)
        atomic_store(&lg.level, lv);
    if (format)
        atomic_store(&lg.json, json);
    return 0;
}

int arb_log_init(const char *daemon, const char *name, arb_err_t *err)
{
    const char *lv = getenv("ARBITER_LOG_LEVEL"), *fmt = getenv("ARBITER_LOG_FORMAT");
    int rc = arb_log_configure(lv && *lv ? lv : NULL, fmt && *fmt ? fmt : NULL, err);
    if (rc < 0)
        return rc;
    snprintf(lg.daemon, sizeof lg.daemon, "%s", daemon ? daemon : "");
    snprintf(lg.name, sizeof lg.name, "%s", name ? name : "");
    return 0;
}

void arb_log_set_stream(FILE *f)
{
    atomic_store(&lg.out, f);
}

int arb_log_enabled(arb_log_level_t lv)
{
    return (int)lv >= atomic_load(&lg.level);
}

/* Append s to out[*k..n) as the inside of a JSON string. */
static void json_str(char *out, size_t n, size_t *k, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    for (; *s && *k + 7 < n; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            out[(*k)++] = '\\';
            out[(*k)++] = (char)c;
        } else if (c == '\n') {
            out[(*k)++] = '\\';
            out[(*k)++] = 'n';
        } else if (c < 0x20) {
            memcpy(out + *k, "\\u00", 4);
            out[*k + 4] = hex[c >> 4];
            out[*k + 5] = hex[c & 15];
            *k += 6;
        } else {
            out[(*k)++] = (char)c;
        }
    }
}

static void json_field(char *out, size_t n, size_t *k, const char *key, const char *v, bool comma)
{
    int w = snprintf(out + *k, n - *k, "%s\"%s\":\"", comma ? "," : "", key);
    if (w > 0 && (size_t)w < n - *k)
        *k += (size_t)w;
    json_str(out, n, k, v);
    if (*k + 1 < n)
        out[(*k)++] = '"';
}

void arb_vlog(arb_log_level_t lv, const char *subsys, const char *fmt, va_list ap)
{
    char msg[1024], line[2600];
    size_t k = 0;
    FILE *out = atomic_load(&lg.out);

    if (!arb_log_enabled(lv))
        return;
    if ((unsigned)lv > ARB_LOG_ERROR)
        lv = ARB_LOG_ERROR;
    vsnprintf(msg, sizeof msg, fmt, ap);
    subsys = subsys && *subsys ? subsys : NULL;
    if (atomic_load(&lg.json)) {
        struct timespec ts;
        struct tm tm;
        char tb[40];
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        size_t t = strftime(tb, sizeof tb, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(tb + t, sizeof tb - t, ".%03ldZ", ts.tv_nsec / 1000000);
        line[k++] = '{';
        json_field(line, sizeof line, &k, "ts", tb, false);
        json_field(line, sizeof line, &k, "level", level_names[lv], true);
        json_field(line, sizeof line, &k, "daemon", lg.daemon, true);
        if (lg.name[0])
            json_field(line, sizeof line, &k, "name", lg.name, true);
        if (subsys)
            json_field(line, sizeof line, &k, "subsys", subsys, true);
        json_field(line, sizeof line, &k, "msg", msg, true);
        if (k + 2 < sizeof line)
            line[k++] = '}';
    } else {
        int w = snprintf(line, sizeof line, "arbiter%s%s%s%s%s%s: %s%s", lg.daemon[0] ? " " : "",
                         lg.daemon, lg.name[0] ? " " : "", lg.name, subsys ? " " : "",
                         subsys ? subsys : "",
                         lv == ARB_LOG_INFO    ? ""
                         : lv == ARB_LOG_DEBUG ? "debug: "
                         : lv == ARB_LOG_WARN  ? "warning: "
                                               : "error: ",
                         msg);
        k = w < 0 ? 0 : (size_t)w < sizeof line - 1 ? (size_t)w : sizeof line - 2;
    }
    line[k++] = '\n';
    fwrite(line, 1, k, out ? out : stderr);
}

void arb_log(arb_log_level_t lv, const char *subsys, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    arb_vlog(lv, subsys, fmt, ap);
    va_end(ap);
}
