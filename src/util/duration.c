/*
 * duration.c: the duration grammar (duration.h). Integer arithmetic only:
 * "0.1s" is exactly 100,000,000 ns, and nothing overflows on the way to the
 * 100-year limit.
 */
#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "util/duration.h"

static const struct {
    const char *name;
    int64_t ns;
} units[] = {
    /* longest first where one is a prefix of another: "ms" before "m" */
    {"ns", 1},
    {"us", 1000},
    {"ms", 1000000},
    {"s", 1000000000LL},
    {"m", 60 * 1000000000LL},
    {"h", 3600 * 1000000000LL},
    {"d", 86400 * 1000000000LL},
};

int arb_duration_parse(const char *s, int64_t *ns, arb_err_t *err)
{
    const char *p = s;
    int64_t total = 0;

    if (!s || !*s)
        return arb_errf(err, -EINVAL, "empty duration; %s", ARB_DURATION_HELP);
    while (*p) {
        int64_t whole = 0, frac = 0, scale = 1;
        const char *start = p;
        if (!isdigit((unsigned char)*p))
            goto bad;
        while (isdigit((unsigned char)*p)) {
            int d = *p++ - '0';
            if (whole > (ARB_DURATION_MAX_NS - d) / 10) /* checked before it can overflow */
                goto range;
            whole = whole * 10 + d;
        }
        if (*p == '.') {
            p++;
            if (!isdigit((unsigned char)*p))
                goto bad;
            while (isdigit((unsigned char)*p)) {
                if (scale < 1000000000000000000LL / 10) { /* digits past 18 cannot matter */
                    frac = frac * 10 + (*p - '0');
                    scale *= 10;
                }
                p++;
            }
        }
        int64_t unit = 0;
        size_t ulen = 0;
        for (size_t i = 0; i < sizeof units / sizeof *units; i++) {
            size_t l = strlen(units[i].name);
            if (strncmp(p, units[i].name, l) == 0 && l > ulen) {
                unit = units[i].ns;
                ulen = l;
            }
        }
        if (!ulen) {
            if (*p || start != s || scale != 1)
                goto bad; /* bare seconds: one whole number alone */
            unit = 1000000000LL;
        }
        p += ulen;
        if (whole > ARB_DURATION_MAX_NS / unit)
            goto range;
        /* the fraction's share, rounded down to a nanosecond */
        int64_t part = whole * unit + (int64_t)((__int128)frac * unit / scale);
        if (part > ARB_DURATION_MAX_NS - total)
            goto range;
        total += part;
    }
    *ns = total;
    return 0;
bad:
    return arb_errf(err, -EINVAL, "'%s' is not a duration; %s", s, ARB_DURATION_HELP);
range:
    return arb_errf(err, -ERANGE, "'%s' is too long; the most is 100 years", s);
}
