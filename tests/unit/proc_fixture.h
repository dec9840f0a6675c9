/*
 * proc_fixture.h: what the agent's process tests share: a file's whole
 * text (a task's out, a record) and whether a process is alive (not a
 * zombie), read from /proc. Header-only (static inline), so each test
 * executable stays one file plus this. Time comes from util/mtime.h
 * (arb_mono_ns), as in the code under test.
 */
#ifndef ARB_TESTS_PROC_FIXTURE_H
#define ARB_TESTS_PROC_FIXTURE_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

/* The whole of a file (its first 16 KiB), or "" when it cannot be read
 * (a static buffer: the next call overwrites it). */
static inline const char *fx_slurp(const char *path)
{
    static char buf[16384];
    FILE *f = fopen(path, "re");
    size_t n = 0;

    if (f) {
        n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
    }
    buf[n] = '\0';
    return buf;
}

/* A live process: it exists and is not a zombie (/proc/PID/stat's state). */
static inline bool fx_alive(pid_t pid)
{
    char path[64], buf[512], *p, st = 'X';
    FILE *f;

    if (kill(pid, 0) != 0)
        return false;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (!(f = fopen(path, "re")))
        return false;
    buf[fread(buf, 1, sizeof buf - 1, f)] = '\0';
    fclose(f);
    if ((p = strrchr(buf, ')')))
        sscanf(p + 1, " %c", &st);
    return st != 'Z' && st != 'X';
}

#endif
