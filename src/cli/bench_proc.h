/*
 * bench_proc.h: what the benchmarks read of the processes they start
 * (bench_agents.c, bench_backlog.c, bench_e2e.c, bench_infer.c): CPU time
 * from /proc/PID/stat, in clock ticks (sysconf(_SC_CLK_TCK) a second), and
 * resident memory from /proc/PID/status.
 */
#ifndef ARB_CLI_BENCH_PROC_H
#define ARB_CLI_BENCH_PROC_H

#include <stdbool.h>
#include <sys/types.h>

/* utime + stime of pid (and its reaped children's, with children), in
 * clock ticks; -1 when it cannot be read. */
long long bench_cpu_ticks(pid_t pid, bool children);
/* pid's resident set (VmRSS) in KiB; -1 when it cannot be read. */
long long bench_rss_kb(pid_t pid);

#endif
