/*
 * fuzz_log_request.c: libFuzzer target for the agent's log server request
 * parser (src/agent/logserve.c, agent_log_request_parse): the input is
 * split at the first two NUL bytes into the URL path, the stream and the
 * offset query values.
 *
 * Checked: no crash or sanitizer report on any input; an accepted request
 * names a positive job, a task, a stream of "out" or "err", and a path that
 * is exactly "/v1/logs/" digits "/" digits (so the file the server opens is
 * always LOG_DIR/<digits>/<digits>.<out|err>); a refusal is 400 or 404 with
 * a message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/logserve.h"

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_log_request: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf, *parts[3] = {NULL, NULL, NULL}, msg[512];
    agent_log_req_t q;
    size_t k = 0;

    if (size > 4096)
        return 0;
    buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    parts[0] = buf;
    for (size_t i = 0; i < size && k < 2; i++)
        if (buf[i] == '\0')
            parts[++k] = buf + i + 1;
    msg[0] = '\0';
    int rc = agent_log_request_parse(parts[0], parts[1], parts[2], &q, msg, sizeof msg);
    if (rc == 0) {
        const char *p = parts[0] + strlen("/v1/logs/");
        check(q.job >= 1, "job 0 accepted");
        check(!strcmp(q.stream, "out") || !strcmp(q.stream, "err"), "stream");
        check(strncmp(parts[0], "/v1/logs/", 9) == 0, "prefix");
        size_t a = strspn(p, "0123456789");
        check(a > 0 && p[a] == '/', "job digits");
        size_t b = strspn(p + a + 1, "0123456789");
        check(b > 0 && p[a + 1 + b] == '\0', "task digits");
    } else {
        check(rc == 400 || rc == 404, "status");
        check(msg[0] != '\0', "no message");
    }
    free(buf);
    return 0;
}
