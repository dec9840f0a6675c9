/*
 * bench_proc.c: a benchmark's processes (bench_proc.h): its own binary and
 * scratch directory, spawn, wait for a controller's URL, stop, CPU time,
 * resident memory, load average.
 */
#include "cli/bench_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/mtime.h"

int bench_self_exe(const char *verb, char *exe, size_t n)
{
    ssize_t k = readlink("/proc/self/exe", exe, n - 1);

    if (k <= 0) {
        fprintf(stderr, "arbiter bench %s: cannot find this binary (/proc/self/exe): %s\n", verb,
                strerror(errno));
        return -1;
    }
    exe[k] = '\0';
    return 0;
}

int bench_tmpdir(const char *verb, char *dir, size_t n)
{
    snprintf(dir, n, "/tmp/arb_bench_%s.XXXXXX", verb);
    if (!mkdtemp(dir)) {
        fprintf(stderr, "arbiter bench %s: cannot make %s: %s\n", verb, dir, strerror(errno));
        return -1;
    }
    return 0;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb, (void)flag, (void)f;
    remove(p);
    return 0;
}

void bench_rmtree(const char *dir)
{
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

void bench_sleep_ms(long ms)
{
    if (ms > 0)
        nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL);
}

pid_t bench_spawn(const char *exe, char *const argv[], const char *dir, const char *out,
                  const char *err, bool append)
{
    int mode = O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC);
    char o[PATH_MAX], e[PATH_MAX];
    pid_t pid;

    snprintf(o, sizeof o, "%s/%s", dir, out ? out : "");
    snprintf(e, sizeof e, "%s/%s", dir, err ? err : "");
    fflush(NULL);
    if ((pid = fork()) != 0)
        return pid;
    /* the child: dies with the benchmark, whatever happens to it */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int fo = open(out ? o : "/dev/null", mode, 0600);
    int fe = err && out && strcmp(err, out) == 0 ? fo : open(err ? e : "/dev/null", mode, 0600);
    if (in < 0 || fo < 0 || fe < 0 || dup2(in, 0) < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0)
        _exit(127);
    execvp(exe, argv);
    _exit(127);
}

bool bench_alive(pid_t pid)
{
    int st;
    return pid > 0 && waitpid(pid, &st, WNOHANG) == 0;
}

int bench_stop(pid_t pid, long timeout_ms)
{
    int st = 0;
    int64_t end = arb_mono_ns() + timeout_ms * 1000000LL;

    if (pid <= 0)
        return 0;
    kill(pid, SIGTERM);
    do {
        if (waitpid(pid, &st, WNOHANG) == pid)
            return st;
        bench_sleep_ms(20);
    } while (arb_mono_ns() < end);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return st;
}

int bench_read_url(const char *path, char *url, size_t n)
{
    FILE *f = fopen(path, "re");

    url[0] = '\0';
    if (!f)
        return -1;
    if (!fgets(url, (int)n, f))
        url[0] = '\0';
    fclose(f);
    url[strcspn(url, "\r\n")] = '\0';
    return url[0] ? 0 : -1;
}

int bench_wait_url(pid_t pid, const char *path, char *url, size_t n, long timeout_ms)
{
    int64_t end = arb_mono_ns() + timeout_ms * 1000000LL;

    for (;;) {
        if (bench_read_url(path, url, n) == 0)
            return 0;
        if (!bench_alive(pid) || arb_mono_ns() >= end)
            return -1;
        bench_sleep_ms(20);
    }
}

static long long stat_ticks(const char *p, bool children)
{
    char buf[2048], *s;
    unsigned long long ut, st, cut, cst;
    FILE *f;
    size_t k;

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

long long bench_cpu_ticks(pid_t pid, bool children)
{
    char p[64];

    snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
    return stat_ticks(p, children);
}

long long bench_thread_cpu_ticks(pid_t pid, pid_t tid)
{
    char p[96];

    snprintf(p, sizeof p, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    return stat_ticks(p, false);
}

double bench_load1(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "re");

    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
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
