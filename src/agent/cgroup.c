/*
 * cgroup.c: per-task cgroups for the executor (see cgroup.h): v2 where the
 * memory and cpu controllers can be delegated to the agent, v1 where only
 * the v1 memory and cpu hierarchies are writable, none otherwise.
 */
#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <stdint.h>
#include <stdarg.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/cgroup.h"
#include "util/hash.h"

#define CPU_PERIOD_US 100000

/* snprintf for paths and messages that may be cut short (never overflowed). */
static void fmt(char *dst, size_t n, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void fmt(char *dst, size_t n, const char *f, ...)
{
    va_list ap;

    va_start(ap, f);
    vsnprintf(dst, n, f, ap);
    va_end(ap);
}

const char *agent_cg_mode_name(agent_cg_mode_t m)
{
    switch (m) {
    case AGENT_CG_V2:
        return "v2";
    case AGENT_CG_V1:
        return "v1";
    case AGENT_CG_NONE:
        return "none";
    }
    return "?";
}

/* Write s to dir/file (no O_CREAT: cgroup files exist or the feature is
 * missing). 0 or -errno. */
static int put(const char *dir, const char *file, const char *s)
{
    char path[PATH_MAX + 64];
    size_t len = strlen(s);
    int fd, rc = 0;

    snprintf(path, sizeof path, "%s/%s", dir, file);
    fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (write(fd, s, len) != (ssize_t)len)
        rc = errno ? -errno : -EIO;
    close(fd);
    return rc;
}

/* Read dir/file into buf; bytes or -errno. */
static int get(const char *dir, const char *file, char *buf, size_t n)
{
    char path[PATH_MAX + 64];
    ssize_t got;
    int fd;

    snprintf(path, sizeof path, "%s/%s", dir, file);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    got = read(fd, buf, n - 1);
    close(fd);
    if (got < 0)
        return -errno;
    buf[got] = '\0';
    return (int)got;
}

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool has_word(const char *list, const char *w)
{
    size_t n = strlen(w);

    for (const char *p = list; (p = strstr(p, w)); p += n)
        if ((p == list || p[-1] == ' ' || p[-1] == ',' || p[-1] == '+') &&
            (p[n] == '\0' || p[n] == ' ' || p[n] == '\n' || p[n] == ','))
            return true;
    return false;
}

/* The path of the cgroup self is in for controller ctl ("" for v2's line). */
static int own_path(const char *self, const char *ctl, char *out, size_t n)
{
    const char *line = self;

    while (line && *line) {
        const char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (c2 && c2 < line + len) {
            char ctls[256];
            snprintf(ctls, sizeof ctls, "%.*s", (int)(c2 - c1 - 1), c1 + 1);
            if ((!ctl[0] && !ctls[0] && strncmp(line, "0:", 2) == 0) ||
                (ctl[0] && has_word(ctls, ctl))) {
                snprintf(out, n, "%.*s", (int)(line + len - c2 - 1), c2 + 1);
                return 0;
            }
        }
        line = end ? end + 1 : NULL;
    }
    return -ENOENT;
}

/* mkdir that takes an existing directory as success. */
static int mkdir_ok(const char *p)
{
    if (mkdir(p, 0755) == 0 || (errno == EEXIST && is_dir(p)))
        return 0;
    return -errno;
}

static int try_v2(agent_cg_t *cg, const char *root, const char *self, char *why, size_t nwhy)
{
    char own[PATH_MAX], base[PATH_MAX], buf[512], tmp[PATH_MAX + 16];
    int rc;

    fmt(tmp, sizeof tmp, "%s/cgroup.controllers", root);
    if (access(tmp, F_OK) != 0) {
        fmt(why, nwhy, "%s is not a cgroup v2 mount", root);
        return -ENOENT;
    }
    if (own_path(self, "", own, sizeof own) < 0)
        own[0] = '\0';
    fmt(base, sizeof base, "%s%s", root, own);
    if (!is_dir(base))
        fmt(base, sizeof base, "%s", root);
    if ((rc = get(base, "cgroup.controllers", buf, sizeof buf)) < 0 || !has_word(buf, "memory") ||
        !has_word(buf, "cpu")) {
        buf[strcspn(buf, "\n")] = '\0';
        fmt(why, nwhy, "cgroup v2 at %s lacks the memory or cpu controller (has: %s)", base,
            rc < 0   ? "?"
            : buf[0] ? buf
                     : "none");
        return -ENOTSUP;
    }
    if ((rc = get(base, "cgroup.subtree_control", buf, sizeof buf)) < 0 ||
        !has_word(buf, "memory") || !has_word(buf, "cpu")) {
        rc = put(base, "cgroup.subtree_control", "+memory +cpu");
        if (rc == -EBUSY) {
            /* "No internal processes": move the agent into a leaf first. */
            fmt(tmp, sizeof tmp, "%s/agent", base);
            if (mkdir_ok(tmp) == 0 && put(tmp, "cgroup.procs", "0") == 0)
                rc = put(base, "cgroup.subtree_control", "+memory +cpu");
        }
        if (rc < 0) {
            fmt(why, nwhy, "cannot enable memory and cpu in %s/cgroup.subtree_control: %s", base,
                strerror(-rc));
            return rc;
        }
    }
    fmt(cg->base[0], sizeof cg->base[0], "%s/arbiter", base);
    if ((rc = mkdir_ok(cg->base[0])) < 0 ||
        (rc = put(cg->base[0], "cgroup.subtree_control", "+memory +cpu")) < 0) {
        fmt(why, nwhy, "cannot set up %s: %s", cg->base[0], strerror(-rc));
        return rc;
    }
    cg->mode = AGENT_CG_V2;
    return 0;
}

static int try_v1(agent_cg_t *cg, const char *root, const char *self, char *why, size_t nwhy)
{
    static const char *const ctl[2] = {"memory", "cpu"};
    static const char *const probe[2] = {"memory.limit_in_bytes", "cpu.cfs_quota_us"};

    for (int i = 0; i < 2; i++) {
        char mnt[PATH_MAX], own[PATH_MAX], base[PATH_MAX], tmp[PATH_MAX + 32];
        int rc;

        fmt(mnt, sizeof mnt, "%s/%s", root, ctl[i]);
        if (i == 1 && !is_dir(mnt))
            fmt(mnt, sizeof mnt, "%s/cpu,cpuacct", root);
        fmt(tmp, sizeof tmp, "%s/%s", mnt, probe[i]);
        if (!is_dir(mnt) || access(tmp, F_OK) != 0) {
            fmt(why, nwhy, "no cgroup v1 %s hierarchy at %s/%s", ctl[i], root, ctl[i]);
            return -ENOENT;
        }
        if (own_path(self, ctl[i], own, sizeof own) < 0)
            own[0] = '\0';
        fmt(base, sizeof base, "%s%s", mnt, own);
        if (!is_dir(base))
            fmt(base, sizeof base, "%s", mnt);
        fmt(cg->base[i], sizeof cg->base[i], "%s/arbiter", base);
        if ((rc = mkdir_ok(cg->base[i])) < 0) {
            fmt(why, nwhy, "cannot create %s: %s", cg->base[i], strerror(-rc));
            return rc;
        }
    }
    cg->mode = AGENT_CG_V1;
    return 0;
}

int agent_cg_init(agent_cg_t *cg, const char *root, const char *mode, const char *self,
                  arb_err_t *err)
{
    char why2[256] = "", why1[256] = "", selfbuf[4096] = "";
    bool any = !mode || !strcmp(mode, "auto");
    int rc;

    memset(cg, 0, sizeof *cg);
    root = root ? root : "/sys/fs/cgroup";
    if (mode && strcmp(mode, "auto") && strcmp(mode, "v2") && strcmp(mode, "v1") &&
        strcmp(mode, "none"))
        return arb_errf(err, -EINVAL, "unknown cgroup mode '%s'; use auto, v2, v1 or none", mode);
    if (mode && !strcmp(mode, "none")) {
        fmt(cg->warning, sizeof cg->warning,
            "cgroups off (--cgroups none): tasks run without memory and CPU limits");
        return 0;
    }
    if (!self) {
        int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            ssize_t got = read(fd, selfbuf, sizeof selfbuf - 1);
            selfbuf[got > 0 ? got : 0] = '\0';
            close(fd);
        }
        self = selfbuf;
    }
    if (any || !strcmp(mode, "v2")) {
        rc = try_v2(cg, root, self, why2, sizeof why2);
        if (rc == 0)
            return 0;
        memset(cg->base, 0, sizeof cg->base);
        if (!any)
            return arb_errf(err, rc, "cgroup v2: %s", why2);
    }
    if (any || !strcmp(mode, "v1")) {
        rc = try_v1(cg, root, self, why1, sizeof why1);
        if (rc == 0)
            return 0;
        memset(cg->base, 0, sizeof cg->base);
        if (!any)
            return arb_errf(err, rc, "cgroup v1: %s", why1);
    }
    cg->mode = AGENT_CG_NONE;
    fmt(cg->warning, sizeof cg->warning,
        "no usable cgroups (v2: %.200s; v1: %.200s): tasks run WITHOUT memory and CPU "
        "limits",
        why2, why1);
    return 0;
}

void agent_cg_scope_name(const char *node, const char *log_dir, char *out, size_t n)
{
    char abs[PATH_MAX], name[65];
    const char *p = log_dir && realpath(log_dir, abs) ? abs : log_dir ? log_dir : "";
    uint64_t h64 = arb_hash_str(ARB_HASH_SEED, p);
    uint32_t h = (uint32_t)(h64 ^ (h64 >> 32));
    size_t k = 0;

    for (const char *c = node ? node : ""; *c && k < sizeof name - 1; c++)
        name[k++] = (isalnum((unsigned char)*c) || *c == '.' || *c == '_' || *c == '-') ? *c : '_';
    name[k] = '\0';
    if (!k || name[0] == '.') /* never ".", "..", or hidden */
        snprintf(name, sizeof name, "agent");
    fmt(out, n, "%s-%08x", name, (unsigned)h);
}

int agent_cg_scope(agent_cg_t *cg, const char *scope, arb_err_t *err)
{
    int n = cg->mode == AGENT_CG_V2 ? 1 : cg->mode == AGENT_CG_V1 ? 2 : 0, rc;

    for (int i = 0; i < n; i++) {
        char dir[PATH_MAX];
        fmt(dir, sizeof dir, "%s/%s", cg->base[i], scope);
        if ((rc = mkdir_ok(dir)) < 0)
            return arb_errf(err, rc, "cgroup: cannot create %s: %s", dir, strerror(-rc));
        if (cg->mode == AGENT_CG_V2 &&
            (rc = put(dir, "cgroup.subtree_control", "+memory +cpu")) < 0)
            return arb_errf(err, rc, "cgroup: %s/cgroup.subtree_control: %s", dir, strerror(-rc));
        fmt(cg->base[i], sizeof cg->base[i], "%s", dir);
    }
    cg->scoped = n > 0;
    return 0;
}

void agent_cg_scope_remove(agent_cg_t *cg)
{
    int n = cg->mode == AGENT_CG_V2 ? 1 : cg->mode == AGENT_CG_V1 ? 2 : 0;

    for (int i = 0; cg->scoped && i < n; i++)
        (void)rmdir(cg->base[i]); /* EBUSY: tasks kept running still hold it */
}

int agent_cg_task_create(agent_cg_t *cg, const char *name, int64_t mem_bytes, int64_t cpu_milli,
                         agent_cg_task_t *t, arb_err_t *err)
{
    char val[64];
    int64_t quota = cpu_milli > 0 ? cpu_milli * (CPU_PERIOD_US / 1000) : -1;
    int rc = 0, n = cg->mode == AGENT_CG_V2 ? 1 : cg->mode == AGENT_CG_V1 ? 2 : 0;

    memset(t, 0, sizeof *t);
    t->procs_fd[0] = t->procs_fd[1] = -1;
    if (quota > 0 && quota < 1000)
        quota = 1000; /* the kernel's smallest quota, 1 ms */
    for (int i = 0; i < n; i++) {
        fmt(t->dir[i], sizeof t->dir[i], "%s/%s", cg->base[i], name);
        if ((rc = mkdir_ok(t->dir[i])) < 0) {
            arb_errf(err, rc, "cgroup: cannot create %s: %s", t->dir[i], strerror(-rc));
            goto fail;
        }
        t->n = i + 1;
    }
    if (cg->mode == AGENT_CG_V2) {
        if (mem_bytes > 0)
            snprintf(val, sizeof val, "%lld", (long long)mem_bytes);
        else
            snprintf(val, sizeof val, "max");
        if ((rc = put(t->dir[0], "memory.max", val)) < 0) {
            arb_errf(err, rc, "cgroup: %s/memory.max: %s", t->dir[0], strerror(-rc));
            goto fail;
        }
        if (quota > 0)
            snprintf(val, sizeof val, "%lld %d", (long long)quota, CPU_PERIOD_US);
        else
            snprintf(val, sizeof val, "max %d", CPU_PERIOD_US);
        if ((rc = put(t->dir[0], "cpu.max", val)) < 0) {
            arb_errf(err, rc, "cgroup: %s/cpu.max: %s", t->dir[0], strerror(-rc));
            goto fail;
        }
    } else if (cg->mode == AGENT_CG_V1) {
        snprintf(val, sizeof val, "%lld", (long long)(mem_bytes > 0 ? mem_bytes : -1));
        if ((rc = put(t->dir[0], "memory.limit_in_bytes", val)) < 0) {
            arb_errf(err, rc, "cgroup: %s/memory.limit_in_bytes: %s", t->dir[0], strerror(-rc));
            goto fail;
        }
        snprintf(val, sizeof val, "%d", CPU_PERIOD_US);
        if ((rc = put(t->dir[1], "cpu.cfs_period_us", val)) < 0) {
            arb_errf(err, rc, "cgroup: %s/cpu.cfs_period_us: %s", t->dir[1], strerror(-rc));
            goto fail;
        }
        snprintf(val, sizeof val, "%lld", (long long)quota);
        if ((rc = put(t->dir[1], "cpu.cfs_quota_us", val)) < 0) {
            arb_errf(err, rc, "cgroup: %s/cpu.cfs_quota_us: %s", t->dir[1], strerror(-rc));
            goto fail;
        }
    }
    for (int i = 0; i < t->n; i++) {
        char path[PATH_MAX + 16];
        snprintf(path, sizeof path, "%s/cgroup.procs", t->dir[i]);
        t->procs_fd[i] = open(path, O_WRONLY | O_CLOEXEC);
        if (t->procs_fd[i] < 0) {
            rc = -errno;
            arb_errf(err, rc, "cgroup: %s: %s", path, strerror(errno));
            goto fail;
        }
    }
    return 0;
fail:
    agent_cg_task_close_fds(t);
    agent_cg_task_remove(t);
    return rc;
}

int agent_cg_enter(const agent_cg_task_t *t)
{
    for (int i = 0; i < t->n; i++)
        if (t->procs_fd[i] >= 0 && write(t->procs_fd[i], "0", 1) != 1)
            return -1;
    return 0;
}

void agent_cg_task_close_fds(agent_cg_task_t *t)
{
    for (int i = 0; i < 2; i++) {
        if (t->procs_fd[i] >= 0)
            close(t->procs_fd[i]);
        t->procs_fd[i] = -1;
    }
}

/* SIGKILL each pid listed in dir/cgroup.procs; how many. */
static int kill_listed(const char *dir)
{
    char path[PATH_MAX + 16], line[32];
    FILE *f;
    int n = 0;

    snprintf(path, sizeof path, "%s/cgroup.procs", dir);
    if (!(f = fopen(path, "re")))
        return 0;
    while (fgets(line, sizeof line, f)) {
        long pid = strtol(line, NULL, 10);
        if (pid > 1 && pid != getpid() && kill((pid_t)pid, SIGKILL) == 0)
            n++;
    }
    fclose(f);
    return n;
}

int agent_cg_task_kill(agent_cg_t *cg, agent_cg_task_t *t)
{
    int total = 0;

    if (t->n == 0)
        return 0;
    if (cg->mode == AGENT_CG_V2 && put(t->dir[0], "cgroup.kill", "1") == 0)
        return 0;
    /* v1 (or v2 before 5.14): walk the list; a few rounds catch fork races. */
    for (int round = 0; round < 4; round++) {
        int n = 0;
        for (int i = 0; i < t->n; i++)
            n += kill_listed(t->dir[i]);
        total += n;
        if (n == 0)
            break;
    }
    return total;
}

int agent_cg_task_procs(const agent_cg_task_t *t)
{
    char path[PATH_MAX + 16], line[32];
    FILE *f;
    int n = 0;

    if (t->n == 0)
        return 0;
    snprintf(path, sizeof path, "%s/cgroup.procs", t->dir[0]);
    if (!(f = fopen(path, "re")))
        return -errno;
    while (fgets(line, sizeof line, f))
        n += line[0] >= '0' && line[0] <= '9';
    fclose(f);
    return n;
}

int agent_cg_task_remove(agent_cg_task_t *t)
{
    int rc = 0;

    for (int i = t->n - 1; i >= 0; i--) {
        if (rmdir(t->dir[i]) == 0 || errno == ENOENT) {
            t->n = i; /* removed: forget it */
            continue;
        }
        rc = -errno;
        break;
    }
    return rc;
}
