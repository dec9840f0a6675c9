/*
 * quantity.c: Kubernetes quantity strings ("500m", "16Gi", "2e3") to and from
 * the fixed integer units of arb_res_t, with no floating point anywhere.
 *
 * A quantity is read as  S x 10^e x 2^b  where S is the integer made of its
 * significant digits (leading and trailing zeros dropped), e gathers the
 * decimal point, a decimal SI suffix or exponent and the kind's own scale
 * (x1000 for milli), and b is a binary suffix (Ki = 10 ... Ei = 60). The
 * value is whole only when 10^-e divides S x 2^b; as S then ends in no zero,
 * that needs -e <= b and 5^-e | S, which qty_exact() checks by streaming the
 * digits through a long division. Any length of input is exact; sums are kept
 * in unsigned __int128 and saturate well above the largest valid result.
 *
 * Choices beside Kubernetes: ".5" and "5." are accepted as Kubernetes does;
 * a quantity must hold at least one digit ("Gi", "." and "+" are errors,
 * where Kubernetes reads some of them as 0); any '-' is rejected, "-0" too;
 * whitespace anywhere is an error. Exponents must fit an int32, as there.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "arbiter/resource.h"

__extension__ typedef unsigned __int128 qty_u128;

/* Sums saturate here: far above INT64_MAX MiB in bytes (2^83), far below
 * the u128 limit, so one more step (x10, + digit) cannot wrap. */
#define QTY_CAP ((qty_u128)1 << 100)

/* Longest piece of the user's value quoted back in a message. */
#define QTY_SHOW_MAX 48

#define QTY_UNITS "use Ki, Mi, Gi, Ti, Pi, Ei, or k, M, G, T, P, E, or m"

/* One suffix: its text and the power of 10 or of 2 it stands for. */
typedef struct qty_suffix {
    const char *name;
    int exp10;
    int exp2;
} qty_suffix_t;

static const qty_suffix_t qty_suffixes[] = {
    {"", 0, 0},    {"n", -9, 0},  {"u", -6, 0},  {"m", -3, 0},  {"k", 3, 0},   {"M", 6, 0},
    {"G", 9, 0},   {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0},  {"Ki", 0, 10}, {"Mi", 0, 20},
    {"Gi", 0, 30}, {"Ti", 0, 40}, {"Pi", 0, 50}, {"Ei", 0, 60},
};

/* Per kind: the decimal scale of its unit, an example for hints, and the
 * largest value it holds, for -ERANGE messages. */
typedef struct qty_kind_info {
    int exp10;
    const char *example;
    const char *most;
} qty_kind_info_t;

static const qty_kind_info_t qty_kinds[] = {
    [ARB_QTY_COUNT] = {0, "8", "9223372036854775807"},
    [ARB_QTY_MILLI] = {3, "500m", "9223372036854775807m"},
    [ARB_QTY_BYTES] = {0, "16Gi", "9223372036854775807 bytes (8Ei less one byte)"},
    [ARB_QTY_MIB] = {0, "16Gi", "9223372036854775807Mi"},
};

/* The parts of "[+]ddd.fff<suffix>", pointing into the caller's string. */
typedef struct qty_lex {
    const char *ip; /* integer digits */
    size_t nip;
    const char *fp; /* fraction digits */
    size_t nfp;
    const char *suffix; /* the rest, up to the NUL */
} qty_lex_t;

enum { QTY_OK, QTY_FRACTION, QTY_TOO_BIG };

/* Copy s into show for quoting: at most QTY_SHOW_MAX bytes, unprintable
 * bytes as '?', "..." when cut. */
static const char *qty_show(const char *s, char *show, size_t n)
{
    size_t len = strlen(s), i;

    for (i = 0; i < len && i < QTY_SHOW_MAX && i + 4 < n; i++)
        show[i] = isprint((unsigned char)s[i]) ? s[i] : '?';
    if (i < len) {
        memcpy(show + i, "...", 3);
        i += 3;
    }
    show[i] = '\0';
    return show;
}

/* Digit i of the concatenated integer and fraction digits. */
static int qty_digit(const qty_lex_t *lx, size_t i)
{
    return (i < lx->nip ? lx->ip[i] : lx->fp[i - lx->nip]) - '0';
}

/* Decimal exponent "e3", "E-2", "e+07": 0 and *exp, -1 when s is not one,
 * -2 when it does not fit an int32 (Kubernetes' limit too). */
static int qty_exponent(const char *s, int64_t *exp)
{
    bool neg = false;
    int64_t v = 0;

    if (*s != 'e' && *s != 'E')
        return -1;
    s++;
    if (*s == '+' || *s == '-')
        neg = *s++ == '-';
    if (!isdigit((unsigned char)*s))
        return -1;
    for (; isdigit((unsigned char)*s); s++) {
        v = v * 10 + (*s - '0');
        if (v > (int64_t)INT32_MAX + 1)
            v = (int64_t)INT32_MAX + 2; /* stays out of range, cannot wrap */
    }
    if (*s != '\0')
        return -1;
    if (v > (neg ? (int64_t)INT32_MAX + 1 : INT32_MAX))
        return -2;
    *exp = neg ? -v : v;
    return 0;
}

static qty_u128 qty_mul(qty_u128 a, qty_u128 m, bool *big)
{
    if (a > QTY_CAP / m) {
        *big = true;
        return QTY_CAP;
    }
    return a * m;
}

/*
 * The value digits[first..last) x 10^e x 2^b as a whole number in *x, where
 * the digits start and end with a nonzero one. Returns QTY_OK, QTY_FRACTION
 * when it is not whole, or QTY_TOO_BIG when it passes QTY_CAP.
 */
static int qty_exact(const qty_lex_t *lx, size_t first, size_t last, int64_t e, int b, qty_u128 *x)
{
    qty_u128 acc = 0, d1 = 1, d2 = 1, r1 = 0, r2 = 0;
    bool big = false;

    if (e < 0 && -e > b)
        return QTY_FRACTION;
    /* Divide by 5^-e (at most 5^60) in two chained stages of at most 5^30,
     * so each remainder x 10 stays far inside 128 bits. */
    for (int64_t k = 0; k < -e; k++)
        *(k < 30 ? &d1 : &d2) *= 5;
    for (size_t i = first; i < last; i++) {
        r1 = r1 * 10 + (qty_u128)qty_digit(lx, i);
        qty_u128 q1 = r1 / d1;
        r1 %= d1;
        r2 = r2 * 10 + q1;
        qty_u128 q2 = r2 / d2;
        r2 %= d2;
        acc = qty_mul(acc, 10, &big) + q2;
    }
    if (r1 != 0 || r2 != 0)
        return QTY_FRACTION;
    if (e < 0) {
        b += (int)e;
        e = 0;
    }
    for (int64_t k = 0; k < e && !big; k++)
        acc = qty_mul(acc, 10, &big);
    acc = qty_mul(acc, (qty_u128)1 << b, &big);
    *x = acc;
    return big ? QTY_TOO_BIG : QTY_OK;
}

/* The "not whole" message, worded for what the kind counts. */
static int qty_fraction_err(arb_err_t *err, arb_qty_kind_t kind, const char *field,
                            const char *show)
{
    switch (kind) {
    case ARB_QTY_COUNT:
        if (strstr(field, "gpu"))
            return arb_errf(err, -EINVAL,
                            "%s: '%s' is not a whole number; request whole GPUs here, or a "
                            "GPU share (e.g. arbiter.io/gpu-share: 500m) to share one device",
                            field, show);
        return arb_errf(err, -EINVAL,
                        "%s: '%s' is not a whole number; %s counts whole items, so use e.g. 1 "
                        "or 2",
                        field, show, field);
    case ARB_QTY_MILLI:
        return arb_errf(err, -EINVAL,
                        "%s: '%s' is finer than 1m (a thousandth); round it to whole m, e.g. "
                        "1m or 250m",
                        field, show);
    default:
        return arb_errf(err, -EINVAL,
                        "%s: '%s' is not a whole number of bytes; use whole bytes or a unit "
                        "that makes it whole, e.g. 1.5Gi",
                        field, show);
    }
}

/* Split s into number and suffix, or return -EINVAL with a message. */
static int qty_lex(const char *s, const char *field, const char *show, arb_qty_kind_t kind,
                   qty_lex_t *lx, arb_err_t *err)
{
    const char *p = s;
    const char *ex = qty_kinds[kind].example;

    if (*p == '\0')
        return arb_errf(err, -EINVAL, "%s: '' is empty; give a quantity, e.g. %s", field, ex);
    for (const char *q = s; *q; q++) {
        if (isspace((unsigned char)*q)) {
            char tight[QTY_SHOW_MAX + 1];
            size_t n = 0;
            for (const char *c = s; *c && n < QTY_SHOW_MAX; c++)
                if (!isspace((unsigned char)*c))
                    tight[n++] = isprint((unsigned char)*c) ? *c : '?';
            tight[n] = '\0';
            if (n == 0)
                return arb_errf(err, -EINVAL, "%s: '%s' is blank; give a quantity, e.g. %s", field,
                                show, ex);
            return arb_errf(err, -EINVAL,
                            "%s: '%s' has spaces in it; write it without them, e.g. '%s'", field,
                            show, tight);
        }
    }
    if (*p == '-')
        return arb_errf(err, -EINVAL, "%s: '%s' is negative; a quantity is 0 or more, e.g. %s",
                        field, show, ex);
    if (*p == '+')
        p++;
    lx->ip = p;
    while (isdigit((unsigned char)*p))
        p++;
    lx->nip = (size_t)(p - lx->ip);
    lx->fp = p;
    lx->nfp = 0;
    if (*p == '.') {
        lx->fp = ++p;
        while (isdigit((unsigned char)*p))
            p++;
        lx->nfp = (size_t)(p - lx->fp);
    }
    lx->suffix = p;
    if (lx->nip + lx->nfp == 0)
        return arb_errf(err, -EINVAL,
                        "%s: '%s' has no number; write digits, then an optional unit, e.g. %s",
                        field, show, ex);
    if (!isalpha((unsigned char)*p) && *p != '\0')
        return arb_errf(err, -EINVAL,
                        "%s: '%s' is not a quantity; write digits with at most one '.', then an "
                        "optional unit, e.g. 1.5Gi or 500m",
                        field, show);
    return 0;
}

int arb_qty_parse(const char *s, arb_qty_kind_t kind, const char *field, int64_t *out,
                  arb_err_t *err)
{
    char show[QTY_SHOW_MAX + 4];
    qty_lex_t lx = {0};
    const qty_suffix_t *suf = NULL;
    int64_t e = 0;
    int b = 0, rc;
    qty_u128 x = 0;

    if (!field)
        field = "quantity";
    if (!s)
        s = "";
    if ((unsigned)kind >= sizeof qty_kinds / sizeof qty_kinds[0])
        return arb_errf(err, -EINVAL, "%s: unknown quantity kind %d", field, (int)kind);
    qty_show(s, show, sizeof show);
    rc = qty_lex(s, field, show, kind, &lx, err);
    if (rc < 0)
        return rc;

    for (size_t i = 0; i < sizeof qty_suffixes / sizeof qty_suffixes[0]; i++)
        if (strcmp(lx.suffix, qty_suffixes[i].name) == 0)
            suf = &qty_suffixes[i];
    if (suf) {
        e = suf->exp10;
        b = suf->exp2;
    } else if ((rc = qty_exponent(lx.suffix, &e)) == -2) {
        return arb_errf(err, -EINVAL,
                        "%s: '%s': the exponent is out of range; use one from e-2147483648 to "
                        "e2147483647, e.g. 2e3",
                        field, show);
    } else if (rc < 0) {
        char unit[QTY_SHOW_MAX + 4];
        return arb_errf(err, -EINVAL, "%s: '%s': unknown unit '%s'; " QTY_UNITS, field, show,
                        qty_show(lx.suffix, unit, sizeof unit));
    }

    /* Drop leading and trailing zeros: S keeps only what matters, and each
     * trailing zero moves into the exponent. */
    size_t first = 0, last = lx.nip + lx.nfp;
    while (first < last && qty_digit(&lx, first) == 0)
        first++;
    while (last > first && qty_digit(&lx, last - 1) == 0)
        last--;
    if (first < last) {
        e += qty_kinds[kind].exp10 - (int64_t)lx.nfp + (int64_t)(lx.nip + lx.nfp - last);
        rc = qty_exact(&lx, first, last, e, b, &x);
        if (rc == QTY_FRACTION)
            return qty_fraction_err(err, kind, field, show);
        if (kind == ARB_QTY_MIB)
            x = (x + ((qty_u128)1 << 20) - 1) >> 20;
        if (rc == QTY_TOO_BIG || x > INT64_MAX)
            return arb_errf(err, -ERANGE, "%s: '%s' is too large; the most is %s", field, show,
                            qty_kinds[kind].most);
    }
    *out = (int64_t)x;
    return 0;
}

void arb_qty_format(int64_t v, arb_qty_kind_t kind, char *buf, size_t n)
{
    static const char *const bin[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    int unit = 0;

    if (n == 0)
        return;
    switch (kind) {
    case ARB_QTY_MILLI:
        if (v % 1000 == 0)
            snprintf(buf, n, "%" PRId64, v / 1000);
        else
            snprintf(buf, n, "%" PRId64 "m", v);
        return;
    case ARB_QTY_BYTES:
    case ARB_QTY_MIB:
        /* Climb binary units while v stays whole; a MiB count starts at Mi.
         * Division, not negation, so INT64_MIN is safe. */
        unit = kind == ARB_QTY_MIB ? 2 : 0;
        while (v != 0 && v % 1024 == 0 && unit < 6) {
            v /= 1024;
            unit++;
        }
        snprintf(buf, n, "%" PRId64 "%s", v, v == 0 ? "" : bin[unit]);
        return;
    default:
        snprintf(buf, n, "%" PRId64, v);
        return;
    }
}
