/*
 * fuzz_supervise.c: libFuzzer target for what the per-task supervisors
 * read (src/agent/supervise.c, exec.c): the `arbiter supervise` arguments,
 * the exit records they write, a task's file (its records as lines, a torn
 * tail passed over), and the task records a restarted agent adopts them by, and the start record
 * the agent hands a supervisor (the task's command, environment, user, fds: sup_start.c). The first
 * byte picks which; the rest is the input (for the arguments, split at newlines; the start record
 * as raw bytes, NULs and all).
 *
 * Checked: no crash, hang or sanitizer report on any input; a parsed
 * argument set has exactly one of a task pid above 1 or a start record fd
 * above 2 (--start: the supervisor forks the task), one of an exit path or
 * a record file (with --start), at most two cgroup directories; a parsed
 * exit record names a known reason; a task file's task line has no newline
 * and fits; a parsed task
 * record has a job id that can name files and pids above 1; a parsed start
 * record has a program, a directory, an argv ending in NULL, fds above 2
 * and at most two cgroup files, and encodes back to bytes that parse the
 * same.
 *
 * Seed corpus: fuzz/seeds/fuzz_supervise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/exec.h"

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_supervise: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text;

    if (size < 1 || size > 4096)
        return 0;
    if (!(text = malloc(size)))
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    switch (data[0] % 4) {
    case 0: {
        agent_sup_exit_t e;
        char line[512], *copy = strdup(text);
        bool have = false;
        if (agent_sup_exit_parse(text, &e) == 0)
            check(e.why <= AGENT_SUP_STOPPED, "an exit record with an unknown reason");
        if (!copy)
            break;
        agent_sup_file_parse(copy, line, sizeof line, &e, &have);
        check(strlen(line) < sizeof line && !strchr(line, '\n'), "a task line with its newline");
        check(!have || e.why <= AGENT_SUP_STOPPED, "a task file's exit with an unknown reason");
        free(copy);
        break;
    }
    case 1: {
        agent_task_record_t r;
        pid_t sup = 0;
        uint64_t ticks = 0;
        if (agent_task_record_parse(text, &r, &sup, &ticks) == 0)
            check(agent_job_id_ok(r.job) && r.pid > 1 && sup > 1 && r.task >= 0,
                  "a task record with a bad job, task or pid");
        break;
    }
    case 3: {
        agent_sup_start_t st, again;
        arb_err_t err;
        char *copy = malloc(size - 1 ? size - 1 : 1), *enc = NULL;
        size_t n = 0;
        if (!copy)
            break;
        memcpy(copy, data + 1, size - 1);
        if (agent_sup_start_parse(copy, size - 1, &st, &err) == 0) {
            int argc = 0;
            while (st.argv[argc])
                argc++;
            check(st.path && st.cwd && argc > 0 && st.envv && st.report_fd > 2 && st.out_fd > 2 &&
                      st.err_fd > 2 && st.ncg <= 2 && st.ngroups <= AGENT_SUP_MAX_GROUPS,
                  "a start record without its program, directory or fds");
            check(agent_sup_start_encode(&st, &enc, &n) == 0,
                  "a start record that does not encode");
            check(agent_sup_start_parse(enc, n, &again, &err) == 0 &&
                      strcmp(again.path, st.path) == 0 && strcmp(again.cwd, st.cwd) == 0 &&
                      again.ncg == st.ncg && again.drop == st.drop,
                  "a start record that does not parse back the same");
            agent_sup_start_free(&again);
            free(enc);
            agent_sup_start_free(&st);
        }
        free(copy);
        break;
    }
    default: {
        char *argv[64];
        int argc = 0;
        agent_sup_args_t a;
        arb_err_t err;
        argv[argc++] = "supervise";
        for (char *p = text, *nl; p && argc < 63; p = nl ? nl + 1 : NULL) {
            nl = strchr(p, '\n');
            if (nl)
                *nl = '\0';
            argv[argc++] = p;
        }
        argv[argc] = NULL;
        if (agent_sup_parse(argc, argv, &a, &err) == 0)
            check((a.task > 1) != (a.start_fd > 2) && !a.exit_path != !a.record &&
                      (!a.record || (a.start_fd > 2 && a.record_fields)) && a.ncg <= 2,
                  "arguments without one of a task pid or start record, or one of an exit or "
                  "a record file");
        break;
    }
    }
    free(text);
    return 0;
}
