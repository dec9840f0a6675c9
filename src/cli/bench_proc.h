/*
 * bench_proc.h: the processes a benchmark starts and watches (bench_agents.c,
 * bench_backlog.c, bench_e2e.c, bench_infer.c, bench_recover.c): start one
 * with its output in files, wait for a controller to say where it listens,
 * stop one (SIGTERM, then SIGKILL), and read what they cost: CPU time from
 * /proc/PID/stat in clock ticks (sysconf(_SC_CLK_TCK) a second), resident
 * memory from /proc/PID/status, and the machine's load average, which every
 * report prints beside its figures.
 */
#ifndef ARB_CLI_BENCH_PROC_H
#define ARB_CLI_BENCH_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* This binary's path (/proc/self/exe) into exe: 0, or -1 with the reason
 * printed as "arbiter bench VERB: ...". */
int bench_self_exe(const char *verb, char *exe, size_t n);

/* A fresh directory /tmp/arb_bench_VERB.XXXXXX into dir (n >= 64): 0, or
 * -1 with the reason printed. */
int bench_tmpdir(const char *verb, char *dir, size_t n);

/* Remove dir and everything under it (what the benchmark made there). */
void bench_rmtree(const char *dir);

/* Sleep ms milliseconds (nothing when ms <= 0). */
void bench_sleep_ms(long ms);

/* fork/exec exe (looked up on PATH when it has no '/') with argv; its stdin
 * /dev/null, stdout into file dir/out and stderr into dir/err (NULL:
 * /dev/null; the same name: one file for both), truncated or, with append,
 * added to. The child gets SIGTERM when the benchmark dies. Its pid, or -1
 * (fork failed; errno). A child that cannot open its files or exec exits
 * 127. */
pid_t bench_spawn(const char *exe, char *const argv[], const char *dir, const char *out,
                  const char *err, bool append);

/* Whether pid (a child not yet reaped) still runs. */
bool bench_alive(pid_t pid);

/* SIGTERM, up to timeout_ms for it to exit, then SIGKILL; its wait status
 * (0 for pid <= 0). */
int bench_stop(pid_t pid, long timeout_ms);

/* The first line of file path (a controller's DATA_DIR/url), without its
 * line end, into url: 0, or -1 when the file is missing or that line empty. */
int bench_read_url(const char *path, char *url, size_t n);

/* Wait up to timeout_ms for the controller pid to write its URL into path:
 * 0 with it in url, or -1 (the time ran out, or pid exited). */
int bench_wait_url(pid_t pid, const char *path, char *url, size_t n, long timeout_ms);

/* utime + stime of pid (and its reaped children's, with children), in
 * clock ticks; -1 when it cannot be read. */
long long bench_cpu_ticks(pid_t pid, bool children);
/* utime + stime of thread tid of pid alone (/proc/PID/task/TID/stat), in
 * clock ticks; -1 when it cannot be read. */
long long bench_thread_cpu_ticks(pid_t pid, pid_t tid);
/* pid's resident set (VmRSS) in KiB; -1 when it cannot be read. */
long long bench_rss_kb(pid_t pid);

/* The one-minute load average, or -1. */
double bench_load1(void);

#endif
