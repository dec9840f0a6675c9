/*
 * bench_proc.c: CPU time and resident memory of a benchmark's processes
 * (bench_proc.h).
 */
#include "cli/bench_proc.h"

#include <stdio.h>
#include <string.h>

long long bench_cpu_ticks(pid_t pid, bool children)
{
    char p[64], buf[2048], *s;
    unsigned long long ut, st, cut, cst;
    FILE *f;
    size_t k;

    snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
    if (!(f = fopen(p, "re")))
        return -1;
    k = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[k] = '\0';
    /* after the command name (which may hold spaces and parentheses):
     * utime, stime, cutime, cstime are the 14th to 17th fields */
    if (!(s = strrchr(buf, ')')) ||
        sscanf(s + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu", &ut, &st,
               &cut, &cst) != 4)
        return -1;
    return (long long)(ut + st + (children ? cut + cst : 0));
}

long long bench_rss_kb(pid_t pid)
{
    char p[64], line[256];
    long long kb = -1;
    FILE *f;

    snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
    if (!(f = fopen(p, "re")))
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %lld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}
