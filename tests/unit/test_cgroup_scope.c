/* test_cgroup_scope.c: the name of an agent's own cgroup subtree
 * (agent_cg_scope_name): the same for an agent that restarts (same node
 * name, same log directory, however it is spelled), different for two
 * agents that can run at once on one machine (another name, or the same
 * name with another log directory: two clusters' node-1), and always one
 * safe path component. Then agent_cg_scope on a fake v1 tree: the task
 * cgroups of two scoped executors running job 1 task 0 are two
 * directories. (tests/cli/cluster_cgroups.sh runs it on real cgroups.) */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/cgroup.h"

static char tmp[64] = "/tmp/arb_cgscope.XXXXXX";

static void test_names(void **unused)
{
    char a[96], b[96], c[96], d[96], dir1[128], dir2[128], dir1b[160];

    (void)unused;
    snprintf(dir1, sizeof dir1, "%s/logs1", tmp);
    snprintf(dir2, sizeof dir2, "%s/logs2", tmp);
    snprintf(dir1b, sizeof dir1b, "%s/./logs2/../logs1", tmp);
    assert_int_equal(mkdir(dir1, 0755), 0);
    assert_int_equal(mkdir(dir2, 0755), 0);

    agent_cg_scope_name("node-1", dir1, a, sizeof a);
    agent_cg_scope_name("node-1", dir1b, b, sizeof b); /* the same directory */
    assert_string_equal(a, b);
    assert_int_equal(strncmp(a, "node-1-", 7), 0);
    agent_cg_scope_name("node-1", dir2, c, sizeof c); /* another cluster's node-1 */
    assert_string_not_equal(a, c);
    agent_cg_scope_name("node-2", dir1, d, sizeof d);
    assert_string_not_equal(a, d);

    /* one path component, never hidden, whatever the node is called */
    agent_cg_scope_name("../../etc/x y", dir1, a, sizeof a);
    assert_null(strchr(a, '/'));
    assert_null(strchr(a, ' '));
    assert_true(a[0] != '.');
    agent_cg_scope_name("..", dir1, a, sizeof a);
    assert_int_equal(strncmp(a, "agent-", 6), 0);
    agent_cg_scope_name("", dir1, a, sizeof a);
    assert_int_equal(strncmp(a, "agent-", 6), 0);
    char longname[300];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    agent_cg_scope_name(longname, dir1, a, sizeof a);
    assert_true(strlen(a) <= 64 + 9);
}

/* A fake v1 tree with the memory and cpu hierarchies (plain directories). */
static void fake_v1(const char *root)
{
    char p[256];
    const char *dirs[] = {"", "/memory", "/cpu"};
    const char *files[] = {"/memory/memory.limit_in_bytes", "/cpu/cpu.cfs_quota_us"};

    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s%s", root, dirs[i]);
        assert_int_equal(mkdir(p, 0755), 0);
    }
    for (size_t i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s%s", root, files[i]);
        FILE *f = fopen(p, "w");
        assert_non_null(f);
        fclose(f);
    }
}

static void test_two_scopes_two_dirs(void **unused)
{
    char root[128], s1[96], s2[96];
    agent_cg_t x, y;
    arb_err_t err = {{0}};

    (void)unused;
    snprintf(root, sizeof root, "%s/cg", tmp);
    fake_v1(root);
    assert_int_equal(agent_cg_init(&x, root, "v1", "", &err), 0);
    assert_int_equal(agent_cg_init(&y, root, "v1", "", &err), 0);
    agent_cg_scope_name("node-1", "/a/logs", s1, sizeof s1);
    agent_cg_scope_name("node-1", "/b/logs", s2, sizeof s2);
    assert_int_equal(agent_cg_scope(&x, s1, &err), 0);
    assert_int_equal(agent_cg_scope(&y, s2, &err), 0);
    for (int i = 0; i < 2; i++) {
        assert_string_not_equal(x.base[i], y.base[i]);
        struct stat st;
        assert_int_equal(stat(x.base[i], &st), 0);
        assert_true(S_ISDIR(st.st_mode));
    }
    char want[256];
    snprintf(want, sizeof want, "%s/memory/arbiter/%s", root, s1);
    assert_string_equal(x.base[0], want);
    agent_cg_scope_remove(&x);
    agent_cg_scope_remove(&y);
    assert_int_equal(access(want, F_OK), -1); /* removed at exit */
}

static int setup(void **unused)
{
    (void)unused;
    assert_non_null(mkdtemp(tmp));
    return 0;
}

static int teardown(void **unused)
{
    char cmd[128];
    (void)unused;
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_two_scopes_two_dirs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
