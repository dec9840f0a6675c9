/*
 * sbatch_job.c: a batch script's options as an Arbiter job (sbatch.c
 * read them), and the launcher that runs the script.
 *
 * The job: one task per Slurm node (a heterogeneous job: one group per
 * component, all one gang), each task asking for that node's share: CPUs
 * (tasks per node x cpus-per-task, or cpus-per-gpu x GPUs), memory (--mem
 * per node, --mem-per-cpu, --mem-per-gpu), GPUs (--gpus-per-node, --gres,
 * --gpus-per-task x tasks, --gpus spread over the nodes) and other GRES
 * (as extended resources gres/NAME). Nodes and tasks derive as sbatch
 * derives them: -N from --nodelist's hosts, or from -n / --ntasks-per-node;
 * -n from -N x --ntasks-per-node. Partition is the queue, a typed GPU the
 * allowed model, --constraint features node labels, --time the time limit.
 * An array is one job per element.
 *
 * The launcher (`/bin/sh -c`, the script as its first argument) sets the
 * SLURM_* variables from Arbiter's (SLURM_JOB_ID, SLURM_NODEID,
 * SLURM_PROCID, SLURM_NTASKS, SLURM_JOB_NODELIST, ...), puts shims for srun
 * (a step's tasks for this node, SLURM_PROCID each) and `scontrol show
 * hostnames` first in PATH, applies --chdir, --output/--error with their %
 * patterns, and runs the script. On a multi-node job the script runs on
 * every node (srun in it starts that node's share of the tasks), which
 * docs/compat.md says.
 */
#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spec/depend.h"
#include "spec/sbatch_int.h"
#include "spec/scenario.h"

#define SB_MAX_ARRAY 10000

static const char srun_shim[] =
    "#!/bin/sh\n"
    "# srun (arbiter): a job step's tasks that fall on this node\n"
    "n=; per=\n"
    "while [ $# -gt 0 ]; do\n"
    "  case \"$1\" in\n"
    "  -n|--ntasks) n=$2; shift 2 ;;\n"
    "  --ntasks=*) n=${1#*=}; shift ;;\n"
    "  -n[0-9]*) n=${1#-n}; shift ;;\n"
    "  --ntasks-per-node) per=$2; shift 2 ;;\n"
    "  --ntasks-per-node=*) per=${1#*=}; shift ;;\n"
    "  -N|-c|-G|-p|-t|-J|-o|-e|-i|-w|-x|-m|-D|-A|-q|-C|-d|-B|-S|-r|-T|--nodes|--cpus-per-task|"
    "--gpus|--gres|--partition|--time|--job-name|--output|--error|--input|--nodelist|--exclude|"
    "--distribution|--chdir|--account|--qos|--constraint|--dependency|--mem|--mem-per-cpu|"
    "--mem-per-gpu|--gpus-per-task|--gpus-per-node|--cpus-per-gpu|--cpu-bind|--gpu-bind|--mpi|"
    "--export|--ntasks-per-gpu|--ntasks-per-socket|--hint|--mem-bind|--signal|--time-min|"
    "--relative|--nodefile|--reservation|--threads-per-core|--cores-per-socket|"
    "--sockets-per-node|--open-mode|--het-group|--wckey|--comment|--network|--switches) "
    "shift 2 ;;\n"
    "  --) shift; break ;;\n"
    "  -*) shift ;;\n"
    "  *) break ;;\n"
    "  esac\n"
    "done\n"
    "[ $# -gt 0 ] || { echo 'srun: no command to run' >&2; exit 1; }\n"
    "nn=${SLURM_NNODES:-1}; node=${SLURM_NODEID:-0}\n"
    "[ -n \"$n\" ] || n=${SLURM_NTASKS:-1}\n"
    "[ -n \"$per\" ] || per=$(( (n + nn - 1) / nn ))\n"
    "first=$((node * per)); last=$((first + per)); [ \"$last\" -gt \"$n\" ] && last=$n\n"
    "[ \"$first\" -lt \"$last\" ] || exit 0\n"
    "SLURM_STEP_ID=$(( ${SLURM_STEP_ID:--1} + 1 ))\n"
    "export SLURM_STEP_ID SLURM_STEPID=$SLURM_STEP_ID SLURM_STEP_NUM_TASKS=$n "
    "SLURM_STEP_NUM_NODES=$nn SLURM_STEP_NODELIST=$SLURM_JOB_NODELIST\n"
    "if [ $((last - first)) -eq 1 ]; then\n"
    "  export SLURM_PROCID=$first SLURM_LOCALID=0; exec \"$@\"\n"
    "fi\n"
    "pids=; p=$first; l=0\n"
    "while [ \"$p\" -lt \"$last\" ]; do\n"
    "  ( export SLURM_PROCID=$p SLURM_LOCALID=$l; exec \"$@\" ) & pids=\"$pids $!\"\n"
    "  p=$((p + 1)); l=$((l + 1))\n"
    "done\n"
    "rc=0\n"
    "for pid in $pids; do wait \"$pid\" || { r=$?; [ \"$rc\" -eq 0 ] && rc=$r; }; done\n"
    "exit $rc\n";

static const char scontrol_shim[] =
    "#!/bin/sh\n"
    "# scontrol (arbiter): show hostnames, inside a job\n"
    "if [ \"$1\" = show ] && [ \"$2\" = hostnames ]; then\n"
    "  echo \"${3:-$SLURM_JOB_NODELIST}\" | tr ',' '\\n'; exit 0\n"
    "fi\n"
    "echo \"scontrol (arbiter): only 'scontrol show hostnames' works in a job; use arbiter job "
    "$SLURM_JOB_ID\" >&2\n"
    "exit 1\n";

/* A component's per-node request, derived as sbatch derives it. */
typedef struct comp_req {
    int nodes, ntasks, tpn, cpt;
    int64_t cpus;   /* per node */
    int64_t gpus;   /* per node */
    int64_t mem_mb; /* per node, 0 none */
} comp_req_t;

static int derive(sbx_t *s, const sb_opts_t *o, int ci, comp_req_t *r)
{
    wl_t *w = s->w;
    char at[40];

    snprintf(at, sizeof at, "%s%d", ci ? "component " : "", ci);
    memset(r, 0, sizeof *r);
    r->cpt = o->cpus_per_task > 0 ? o->cpus_per_task : 1;
    r->nodes = o->nodes;
    if (!r->nodes && o->nhosts)
        r->nodes = o->nhosts; /* -w node[1-4] alone asks for those 4 nodes */
    if (o->nhosts && r->nodes && o->nhosts > r->nodes)
        return arb_errf(w->err, -EINVAL,
                        "%s: --nodelist names %d hosts but --nodes asks for %d; give at least %d "
                        "nodes, or fewer hosts",
                        o->at_nodes.at[0] ? o->at_nodes.at : w->file, o->nhosts, r->nodes,
                        o->nhosts);
    if (!r->nodes && o->ntasks > 0 && o->ntasks_per_node > 0)
        r->nodes = (o->ntasks + o->ntasks_per_node - 1) / o->ntasks_per_node;
    if (!r->nodes) {
        r->nodes = 1;
        if (o->ntasks > 1)
            wl_warn(w,
                    "%s: --ntasks %d without --nodes: the tasks are placed on one node (give "
                    "--nodes or --ntasks-per-node to spread them)",
                    w->file, o->ntasks);
    }
    r->ntasks = o->ntasks > 0            ? o->ntasks
                : o->ntasks_per_node > 0 ? r->nodes * o->ntasks_per_node
                                         : r->nodes;
    if (r->ntasks < r->nodes)
        return arb_errf(w->err, -EINVAL,
                        "%s: %d tasks on %d nodes; sbatch needs at least one task per node "
                        "(raise --ntasks or lower --nodes)",
                        w->file, r->ntasks, r->nodes);
    r->tpn = o->ntasks_per_node > 0 ? o->ntasks_per_node : (r->ntasks + r->nodes - 1) / r->nodes;
    if (o->ntasks_per_node > 0 && o->ntasks > 0 && o->ntasks > r->nodes * o->ntasks_per_node)
        return arb_errf(w->err, -EINVAL,
                        "%s: --ntasks %d is more than --nodes %d x --ntasks-per-node %d", w->file,
                        o->ntasks, r->nodes, o->ntasks_per_node);
    /* GPUs per node */
    if (o->gpus_per_node)
        r->gpus = o->gpus_per_node;
    else if (o->gpus_per_task)
        r->gpus = (int64_t)o->gpus_per_task * r->tpn;
    else if (o->gpus)
        r->gpus = (o->gpus + r->nodes - 1) / r->nodes;
    if (o->gpus && o->gpus % r->nodes && !o->gpus_per_node)
        wl_warn(w, "%s: --gpus %d over %d nodes: each node asks for %" PRId64, w->file, o->gpus,
                r->nodes, r->gpus);
    if (r->gpus > ARB_MAX_GPUS)
        return arb_errf(w->err, -EINVAL,
                        "%s: %" PRId64 " GPUs on one node; a node has at most %d (spread them with "
                        "--nodes)",
                        w->file, r->gpus, ARB_MAX_GPUS);
    r->cpus = (int64_t)r->tpn * r->cpt;
    if (o->cpus_per_gpu && r->gpus && (int64_t)o->cpus_per_gpu * r->gpus > r->cpus)
        r->cpus = (int64_t)o->cpus_per_gpu * r->gpus;
    if (o->mem_all)
        wl_warn(w,
                "%s: --mem=0 (all of a node's memory) is not honoured: no memory is reserved; "
                "give --mem=SIZE",
                w->file);
    else if (o->mem_mb)
        r->mem_mb = o->mem_mb;
    else if (o->mem_per_cpu_mb)
        r->mem_mb = o->mem_per_cpu_mb * r->cpus;
    else if (o->mem_per_gpu_mb) {
        if (!r->gpus)
            wl_warn(w, "%s: --mem-per-gpu without GPUs asks for no memory", w->file);
        r->mem_mb = o->mem_per_gpu_mb * r->gpus;
    }
    (void)at;
    return 0;
}

/* --constraint "a&b|c" -> required affinity terms on node labels: a plain
 * feature F matches nodes with a label F; F=V one with that value. */
static int constraint_terms(sbx_t *s, const sb_opts_t *o, json_t *terms)
{
    char buf[SB_STR], *save = NULL;
    const char *at = o->at_constraint.at;

    snprintf(buf, sizeof buf, "%s", o->constraint);
    if (strpbrk(buf, "*"))
        return arb_errf(s->w->err, -EINVAL,
                        "%s: --constraint '%s': counts (feature*N) cannot be honoured; drop the "
                        "count",
                        at, o->constraint);
    if (strpbrk(buf, "[]()")) {
        wl_warn(s->w,
                "%s: --constraint '%s': brackets are read as plain OR (each node may match "
                "another alternative)",
                at, o->constraint);
        for (char *c = buf; *c; c++)
            if (*c == '[' || *c == ']' || *c == '(' || *c == ')')
                *c = ' ';
    }
    for (char *alt = strtok_r(buf, "|", &save); alt; alt = strtok_r(NULL, "|", &save)) {
        json_t *term = json_array();
        char *s2 = NULL;
        for (char *f = strtok_r(alt, "&,", &s2); f; f = strtok_r(NULL, "&,", &s2)) {
            while (*f == ' ')
                f++;
            char *e = f + strlen(f);
            while (e > f && e[-1] == ' ')
                *--e = '\0';
            if (!*f)
                continue;
            char *eq = strchr(f, '=');
            if (eq) {
                *eq = '\0';
                json_array_append_new(term, json_pack("{s:s,s:s,s:[s]}", "key", f, "operator", "In",
                                                      "values", eq + 1));
            } else {
                json_array_append_new(term, json_pack("{s:s,s:s}", "key", f, "operator", "Exists"));
            }
        }
        if (json_array_size(term))
            json_array_append(terms, term);
        json_decref(term);
    }
    return 0;
}

/* %j %A %a %x %u %N %n %t %s %% (with a zero-pad width) as shell text. */
static void pattern(arb_buf_t *b, const char *pat, const char *name)
{
    arb_buf_puts(b, "\"");
    for (const char *p = pat; *p; p++) {
        if (*p != '%') {
            if (*p == '"' || *p == '\\' || *p == '$' || *p == '`')
                arb_buf_puts(b, "\\");
            char c[2] = {*p, 0};
            arb_buf_puts(b, c);
            continue;
        }
        int width = 0;
        const char *q = p + 1;
        while (isdigit((unsigned char)*q))
            width = width < 100 ? width * 10 + (*q++ - '0') : (q++, width);
        const char *var = NULL;
        switch (*q) {
        case '%':
            arb_buf_puts(b, "%");
            p = q;
            continue;
        case 'j':
        case 'J':
            var = "SLURM_JOB_ID";
            break;
        case 'A':
            var = "SLURM_ARRAY_JOB_ID";
            break;
        case 'a':
            var = "SLURM_ARRAY_TASK_ID";
            break;
        case 'u':
            var = "USER";
            break;
        case 'N':
            var = "SLURMD_NODENAME";
            break;
        case 'n':
            var = "SLURM_NODEID";
            break;
        case 't':
            var = "SLURM_PROCID";
            break;
        case 's':
            arb_buf_puts(b, "batch");
            p = q;
            continue;
        case 'x':
            for (const char *c = name; *c; c++) {
                char cc[2] = {*c, 0};
                if (*c == '"' || *c == '\\' || *c == '$' || *c == '`')
                    arb_buf_puts(b, "\\");
                arb_buf_puts(b, cc);
            }
            p = q;
            continue;
        default: /* not a pattern: literal, as Slurm leaves it */
            arb_buf_puts(b, "%");
            continue;
        }
        if (width)
            arb_buf_printf(b, "$(printf %%0%dd \"${%s:-0}\")", width > 10 ? 10 : width, var);
        else
            arb_buf_printf(b, "${%s}", var);
        p = q;
    }
    arb_buf_puts(b, "\"");
}

static void export_kv(arb_buf_t *b, const char *k, const char *v)
{
    arb_buf_printf(b, "export %s=", k);
    wl_buf_shq(b, v);
    arb_buf_puts(b, "\n");
}

/* The launcher text for job j (comps[] derived). */
static char *launcher(sbx_t *s, const comp_req_t *comps, const char *name, const char *cwd,
                      bool has_array)
{
    sb_job_t *j = s->job;
    arb_buf_t b = {0};
    int first = 0, total_nodes = 0;

    for (int c = 0; c < j->ncomp; c++)
        total_nodes += comps[c].nodes;
    arb_buf_puts(&b, "script=$1; shift\n"
                     "d=$(mktemp -d \"${TMPDIR:-/tmp}/arbiter-slurm.XXXXXX\") || exit 1\n"
                     "trap 'rm -rf \"$d\"' EXIT\n"
                     "printf '%s' \"$script\" > \"$d/script\" && chmod 700 \"$d/script\"\n"
                     "cat > \"$d/srun\" <<'ARBITER_SHIM_EOF'\n");
    arb_buf_puts(&b, srun_shim);
    arb_buf_puts(&b, "ARBITER_SHIM_EOF\ncat > \"$d/scontrol\" <<'ARBITER_SHIM_EOF'\n");
    arb_buf_puts(&b, scontrol_shim);
    arb_buf_puts(&b, "ARBITER_SHIM_EOF\n"
                     "chmod 755 \"$d/srun\" \"$d/scontrol\"\n"
                     "PATH=\"$d:$PATH\"; export PATH\n"
                     "i=${ARBITER_TASK_INDEX:-0}\n"
                     "export SLURM_JOB_ID=\"$ARBITER_JOB_ID\" SLURM_JOBID=\"$ARBITER_JOB_ID\"\n"
                     "export SLURMD_NODENAME=\"${ARBITER_NODE:-$(hostname)}\"\n"
                     "export SLURM_TOPOLOGY_ADDR=\"$SLURMD_NODENAME\" SLURM_CLUSTER_NAME=arbiter\n"
                     "export SLURM_JOB_GPUS=\"$CUDA_VISIBLE_DEVICES\" "
                     "SLURM_STEP_GPUS=\"$CUDA_VISIBLE_DEVICES\"\n"
                     "export SLURM_JOB_USER=\"${USER:-$(id -un)}\" SLURM_JOB_UID=\"$(id -u)\"\n");
    export_kv(&b, "SLURM_JOB_NAME", name);
    if (j->partition[0])
        export_kv(&b, "SLURM_JOB_PARTITION", j->partition);
    if (j->account[0])
        export_kv(&b, "SLURM_JOB_ACCOUNT", j->account);
    if (j->qos[0])
        export_kv(&b, "SLURM_JOB_QOS", j->qos);
    if (cwd) {
        export_kv(&b, "SLURM_SUBMIT_DIR", cwd);
        char host[256] = "";
        gethostname(host, sizeof host - 1);
        export_kv(&b, "SLURM_SUBMIT_HOST", host);
    }
    if (has_array)
        arb_buf_puts(&b, "export SLURM_ARRAY_JOB_ID=\"${SLURM_ARRAY_JOB_ID:-$SLURM_JOB_ID}\"\n");
    if (j->ncomp > 1)
        arb_buf_printf(&b, "export SLURM_HET_SIZE=%d\n", j->ncomp);
    for (int c = 0; c < j->ncomp; c++) {
        const comp_req_t *r = &comps[c];
        bool last = c == j->ncomp - 1;
        if (!last)
            arb_buf_printf(&b, "if [ \"$i\" -lt %d ]; then\n", first + r->nodes);
        else if (c)
            arb_buf_puts(&b, "if true; then\n");
        arb_buf_printf(&b,
                       "export SLURM_NODEID=$((i - %d)) SLURM_NNODES=%d SLURM_JOB_NUM_NODES=%d "
                       "SLURM_NTASKS=%d SLURM_NPROCS=%d SLURM_NTASKS_PER_NODE=%d "
                       "SLURM_TASKS_PER_NODE='%d(x%d)' SLURM_CPUS_PER_TASK=%d "
                       "SLURM_CPUS_ON_NODE=%" PRId64 " SLURM_JOB_CPUS_PER_NODE='%" PRId64
                       "(x%d)'\n",
                       first, r->nodes, r->nodes, r->ntasks, r->ntasks, r->tpn, r->tpn, r->nodes,
                       r->cpt, r->cpus, r->cpus, r->nodes);
        arb_buf_printf(&b, "export SLURM_PROCID=$((SLURM_NODEID * %d)) SLURM_LOCALID=0\n", r->tpn);
        if (r->gpus)
            arb_buf_printf(
                &b, "export SLURM_GPUS_ON_NODE=%" PRId64 " SLURM_GPUS_PER_NODE=%" PRId64 "\n",
                r->gpus, r->gpus);
        if (r->mem_mb)
            arb_buf_printf(&b, "export SLURM_MEM_PER_NODE=%" PRId64 "\n", r->mem_mb);
        if (j->ncomp > 1)
            arb_buf_printf(&b, "export SLURM_HET_JOB_OFFSET=%d\n", c);
        if (c || !last)
            arb_buf_puts(&b, "fi\n");
        first += r->nodes;
    }
    /* Hosts: this node for a one-node job; else every node's address in
     * node order (the controller's ARBITER_TASK_HOSTS, up to 256 tasks),
     * else the master's. */
    if (total_nodes == 1)
        arb_buf_puts(&b, "export SLURM_JOB_NODELIST=\"$SLURMD_NODENAME\"\n");
    else
        arb_buf_puts(&b, "export SLURM_JOB_NODELIST=\"${ARBITER_TASK_HOSTS:-${MASTER_ADDR:-"
                         "$SLURMD_NODENAME}}\"\n");
    arb_buf_puts(&b, "export SLURM_NODELIST=\"$SLURM_JOB_NODELIST\"\n");
    const char *dir = j->chdir[0] ? j->chdir : cwd;
    if (dir) {
        arb_buf_puts(&b, "cd ");
        wl_buf_shq(&b, dir);
        arb_buf_puts(&b, " 2>/dev/null || echo \"arbiter: cannot enter ");
        arb_buf_puts(&b, j->chdir[0] ? "--chdir" : "the submit directory");
        arb_buf_puts(&b, " on $SLURMD_NODENAME; running in $PWD\" >&2\n");
    }
    if (j->output[0] || j->error[0] || j->input[0]) {
        arb_buf_puts(&b, "if [ \"$SLURM_NODEID\" = 0 ] && [ \"${SLURM_HET_JOB_OFFSET:-0}\" = 0 ]; "
                         "then\n");
        if (j->input[0]) {
            arb_buf_puts(&b, "  exec <");
            pattern(&b, j->input, name);
            arb_buf_puts(&b, "\n");
        }
        if (j->output[0]) {
            arb_buf_puts(&b, "  exec >");
            pattern(&b, j->output, name);
            arb_buf_puts(&b, "\n");
        }
        if (j->error[0]) {
            arb_buf_puts(&b, "  exec 2>");
            pattern(&b, j->error, name);
            arb_buf_puts(&b, "\n");
        } else if (j->output[0]) {
            arb_buf_puts(&b, "  exec 2>&1\n");
        }
        arb_buf_puts(&b, "fi\n");
    }
    arb_buf_puts(&b, "\"$d/script\" \"$@\"\n");
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

/* Priority classes a QoS may name (the built-ins: the controller's own
 * table may differ, so only these are passed on). */
static bool builtin_class(const char *name)
{
    int32_t p;
    return spec_priority_class(name, &p) == 0;
}

/* --dependency: read (an error names the bad part) and kept on the spec
 * as text; the controller holds the job until it is met (src/state/depend.c). */
static int check_dependency(sbx_t *s)
{
    const sb_job_t *j = s->job;
    spec_dep_t d;
    arb_err_t e = {{0}};

    if (!j->dependency[0])
        return 0;
    if (spec_dep_parse(j->dependency, &d, &e) < 0)
        return arb_errf(s->w->err, -EINVAL, "%s: --%s", j->at_dep.at, e.msg);
    for (int i = 0; i < d.n; i++)
        if (d.t[i].type == SPEC_DEP_CORR || d.t[i].type == SPEC_DEP_BURST) {
            wl_warn(s->w, "%s: --dependency %s: %s is read as %s", j->at_dep.at, j->dependency,
                    spec_dep_type_name(d.t[i].type),
                    d.t[i].type == SPEC_DEP_CORR ? "afterok of the whole array (every element "
                                                   "succeeded)"
                                                 : "afterany (there are no burst buffers)");
            break;
        }
    return 0;
}

int sb_build(sbx_t *s, const char *file, const char *script, size_t len, const wl_sbatch_cli_t *cli)
{
    sb_job_t *j = s->job;
    wl_t *w = s->w;
    comp_req_t comps[SB_MAX_HET];
    char name[96], cwd[1024];
    const char *base = strrchr(file, '/');
    int rc = 0, nids = 1, throttle = 0;
    int *ids = NULL;
    json_t *spec = NULL;
    char *launch = NULL;

    for (int c = 0; c < j->ncomp; c++)
        if ((rc = derive(s, &j->comp[c], c, &comps[c])) < 0)
            return rc;
    wl_job_name(name, sizeof name, j->name[0] ? j->name : base ? base + 1 : file);
    if ((rc = check_dependency(s)) < 0)
        return rc;
    if (j->array[0]) {
        if (!(ids = calloc(SB_MAX_ARRAY, sizeof *ids)))
            return arb_errf(w->err, -ENOMEM, "out of memory");
        nids = sb_array(j->array, ids, SB_MAX_ARRAY, &throttle);
        if (nids < 0) {
            rc = arb_errf(w->err, -EINVAL, "%s: --array '%s': %s", j->at_array.at, j->array,
                          nids == -ENOSPC ? "more than 10000 elements"
                                          : "use ranges and lists like 0-15, 1,3,5, 0-20:2, "
                                            "with %N to limit how many run at once");
            goto out;
        }
    }
    if (j->ncomp > 1)
        for (int c = 1; c < j->ncomp; c++)
            if (j->comp[c].gpu_type[0] && strcmp(j->comp[c].gpu_type, j->comp[0].gpu_type)) {
                rc = arb_errf(w->err, -EINVAL,
                              "%s: hetjob components ask for different GPU types (%s, %s); "
                              "Arbiter allows one set of GPU models per job",
                              file, j->comp[0].gpu_type[0] ? j->comp[0].gpu_type : "any",
                              j->comp[c].gpu_type);
                goto out;
            }
    spec = json_pack("{s:s}", "name", name);
    if (j->dependency[0])
        json_object_set_new(spec, "dependency", json_string(j->dependency));
    if (j->partition[0]) {
        char q[SB_STR];
        snprintf(q, sizeof q, "%s", j->partition);
        char *comma = strchr(q, ',');
        if (comma) {
            *comma = '\0';
            wl_warn(w, "%s: --partition %s: the job goes to the first, '%s'", file, j->partition,
                    q);
        }
        json_object_set_new(spec, "queue", json_string(q));
    }
    if (j->qos[0]) {
        if (builtin_class(j->qos))
            json_object_set_new(spec, "priorityClassName", json_string(j->qos));
        else
            wl_warn(w,
                    "%s: --qos %s is not a priority class Arbiter knows (best-effort, low, "
                    "normal, high, critical); ignored",
                    file, j->qos);
    }
    if (j->priority != INT_MIN && !j->qos[0])
        json_object_set_new(spec, "priority", json_integer(j->priority));
    if (j->account[0])
        wl_warn(w, "%s: --account %s is not charged (Arbiter's teams come from tokens)", file,
                j->account);
    if (j->time_s > 0) /* Slurm's resolution is a minute: seconds round up to the next */
        json_object_set_new(spec, "timeLimit", json_integer((j->time_s + 59) / 60 * 60));
    if (j->no_requeue)
        json_object_set_new(spec, "restartable", json_false());
    for (int c = 0; c < j->ncomp; c++)
        if (j->comp[c].exclusive) { /* whole nodes: no other job's task shares them */
            json_object_set_new(spec, "exclusive", json_true());
            if (j->comp[c].exclusive_how[0])
                wl_warn(w, "%s: --exclusive=%s is read as --exclusive (no sharing at all)", file,
                        j->comp[c].exclusive_how);
            break;
        }
    if (j->export_[0] && strcasecmp(j->export_, "NONE") && strcasecmp(j->export_, "ALL")) {
        json_t *env = json_object();
        char buf[1024], *save = NULL;
        snprintf(buf, sizeof buf, "%s", j->export_);
        for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(t, '=');
            if (!strcmp(t, "ALL") || !strcmp(t, "NIL") || !strcmp(t, "NONE"))
                continue;
            if (eq) {
                *eq = '\0';
                json_object_set_new(env, t, json_string(eq + 1));
            } else if (getenv(t)) {
                json_object_set_new(env, t, json_string(getenv(t)));
            }
        }
        if (json_object_size(env))
            json_object_set(spec, "env", env);
        json_decref(env);
    } else if (!j->export_[0] || !strcasecmp(j->export_, "ALL")) {
        wl_warn(w,
                "%s: the submit environment is not copied into the job (sbatch's "
                "--export=ALL); pass what it needs with --export=VAR or VAR=value",
                file);
    }
    /* where: typed GPUs, features, hosts; one set for the job */
    const sb_opts_t *c0 = &j->comp[0];
    if (c0->gpu_type[0])
        json_object_set_new(spec, "gpuModels", json_pack("[s]", c0->gpu_type));
    json_t *terms = json_array();
    for (int c = 0; c < j->ncomp && rc == 0; c++)
        if (j->comp[c].constraint[0]) {
            if (c && strcmp(j->comp[c].constraint, c0->constraint)) {
                rc = arb_errf(w->err, -EINVAL,
                              "%s: hetjob components ask for different --constraint; Arbiter "
                              "applies one to the whole job",
                              j->comp[c].at_constraint.at);
                break;
            }
            if (c == 0)
                rc = constraint_terms(s, &j->comp[c], terms);
        }
    json_t *hostx = json_array(); /* expressions every term gets: hosts, exclusions */
    for (int c = 0; c < j->ncomp && rc == 0; c++) {
        const sb_opts_t *o = &j->comp[c];
        if (o->nhosts) {
            json_t *vals = json_array();
            for (int h = 0; h < o->nhosts; h++)
                json_array_append_new(vals, json_string(o->hosts[h]));
            json_array_append_new(hostx, json_pack("{s:s,s:s,s:o}", "key", "kubernetes.io/hostname",
                                                   "operator", "In", "values", vals));
        }
        if (o->nexclude) {
            json_t *vals = json_array();
            for (int h = 0; h < o->nexclude; h++)
                json_array_append_new(vals, json_string(o->exclude[h]));
            json_array_append_new(hostx, json_pack("{s:s,s:s,s:o}", "key", "kubernetes.io/hostname",
                                                   "operator", "NotIn", "values", vals));
        }
    }
    if (rc == 0 && json_array_size(hostx)) {
        if (!json_array_size(terms))
            json_array_append_new(terms, json_array());
        size_t ti;
        json_t *t;
        json_array_foreach(terms, ti, t) json_array_extend(t, hostx);
        wl_warn(w,
                "%s: --nodelist/--exclude match nodes by their kubernetes.io/hostname label "
                "(give agents that label)",
                file);
    }
    json_decref(hostx);
    if (json_array_size(terms))
        json_object_set_new(spec, "affinity", json_pack("{s:O}", "required", terms));
    json_decref(terms);
    if (rc < 0)
        goto out;
    /* the groups: one task per node */
    json_t *groups = json_array();
    for (int c = 0; c < j->ncomp; c++) {
        const comp_req_t *r = &comps[c];
        const sb_opts_t *o = &j->comp[c];
        json_t *req = json_object();
        char buf[64], gname[32];
        arb_qty_format(r->cpus * 1000, ARB_QTY_MILLI, buf, sizeof buf);
        json_object_set_new(req, "cpu", json_string(buf));
        if (r->mem_mb) {
            snprintf(buf, sizeof buf, "%" PRId64 "Mi", r->mem_mb);
            json_object_set_new(req, "memory", json_string(buf));
        }
        if (r->gpus)
            json_object_set_new(req, "nvidia.com/gpu", json_integer(r->gpus));
        for (int g = 0; g < o->ngres; g++)
            json_object_set_new(req, o->gres_name[g], json_integer(o->gres_count[g]));
        if (j->ncomp > 1)
            snprintf(gname, sizeof gname, "het-%d", c);
        else
            snprintf(gname, sizeof gname, "node");
        json_t *grp = json_pack("{s:s,s:i,s:{s:o}}", "name", gname, "replicas", r->nodes,
                                "resources", "requests", req);
        if (o->switches == 1 && r->nodes > 1) {
            json_object_set_new(grp, "topology",
                                json_pack("{s:s,s:s}", "level", "rack", "mode", "required"));
            wl_warn(w, "%s: --switches=1 is read as: all nodes in one rack", file);
        } else if (o->switches > 1) {
            wl_warn(w, "%s: --switches=%d is not honoured (one rack is the only level)", file,
                    o->switches);
        }
        json_array_append_new(groups, grp);
    }
    json_object_set_new(spec, "groups", groups);
    int total_nodes = 0;
    for (int c = 0; c < j->ncomp; c++)
        total_nodes += comps[c].nodes;
    if (total_nodes > 1)
        wl_warn(w,
                "%s: the script runs on each of the %d nodes (srun in it starts that node's "
                "share of the tasks); lines outside srun run %d times",
                file, total_nodes, total_nodes);
    if (!getcwd(cwd, sizeof cwd))
        cwd[0] = '\0';
    launch = launcher(s, comps, name, cwd[0] ? cwd : NULL, j->array[0] != '\0');
    if (!launch) {
        rc = arb_errf(w->err, -ENOMEM, "out of memory");
        goto out;
    }
    json_t *cmd = json_pack("[s,s,s,s]", "/bin/sh", "-c", launch, "sbatch");
    json_array_append_new(cmd, json_stringn(script, len));
    for (int a = 0; cli && a < cli->nargs; a++)
        json_array_append_new(cmd, json_string(cli->args[a]));
    json_object_set_new(spec, "command", cmd);
    for (int k = 0; k < nids && rc == 0; k++) {
        json_t *one = json_deep_copy(spec);
        if (j->array[0]) {
            json_t *env = json_object_get(one, "env");
            if (!env) {
                env = json_object();
                json_object_set_new(one, "env", env);
            }
            char v[24];
            snprintf(v, sizeof v, "%d", ids[k]);
            json_object_set_new(env, "SLURM_ARRAY_TASK_ID", json_string(v));
            snprintf(v, sizeof v, "%d", nids);
            json_object_set_new(env, "SLURM_ARRAY_TASK_COUNT", json_string(v));
            snprintf(v, sizeof v, "%d", ids[0]);
            json_object_set_new(env, "SLURM_ARRAY_TASK_MIN", json_string(v));
            snprintf(v, sizeof v, "%d", ids[nids - 1]);
            json_object_set_new(env, "SLURM_ARRAY_TASK_MAX", json_string(v));
            snprintf(v, sizeof v, "%d", nids > 1 ? ids[1] - ids[0] : 1);
            json_object_set_new(env, "SLURM_ARRAY_TASK_STEP", json_string(v));
            /* the controller's: which array, its throttle (the submitter adds "job", the
               first element's id, to the others: wlsubmit.c) */
            json_t *arr = json_pack("{s:i,s:i}", "task", ids[k], "count", nids);
            if (throttle)
                json_object_set_new(arr, "throttle", json_integer(throttle));
            json_object_set_new(one, "array", arr);
        }
        json_t *src = json_pack("{s:s,s:i,s:i,s:i}", "kind", "sbatch", "nodes", total_nodes,
                                "ntasks", comps[0].ntasks, "cpus_per_task", comps[0].cpt);
        int nt = 0;
        for (int c = 0; c < j->ncomp; c++)
            nt += comps[c].ntasks;
        json_object_set_new(src, "ntasks", json_integer(nt));
        json_object_set_new(src, "ntasks_per_node", json_integer(comps[0].tpn));
        if (j->ncomp > 1)
            json_object_set_new(src, "components", json_integer(j->ncomp));
        if (j->array[0])
            json_object_set_new(src, "array_task_id", json_integer(ids[k]));
        rc = wl_add_job(w, one, src);
    }
out:
    free(ids);
    free(launch);
    json_decref(spec);
    return rc;
}
