/*
 * wlsubmit.c: submitting the files users already have (`arbiter submit -f`
 * of a Kubernetes manifest or a Slurm script, `arbiter sbatch`): the file
 * is translated here (src/spec/wl.h), its warnings printed, and each job
 * it became posted as Arbiter's own JSON spec, all with one
 * Idempotency-Key stem (KEY-0, KEY-1, ...) so a retried submission
 * creates each job once. --dry-run prints what the jobs would be, with no
 * controller.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/client.h"
#include "cli/wlsubmit.h"

static void print_warnings(const json_t *warnings)
{
    size_t i;
    json_t *w;

    json_array_foreach(warnings, i, w)
        fprintf(stderr, "arbiter: warning: %s\n", json_string_value(w));
}

/* A human summary of a dry run: one line per job and group. */
static void show_dry(const json_t *out)
{
    size_t i, k;
    json_t *j, *g;

    json_array_foreach(json_object_get(out, "jobs"), i, j)
    {
        printf("job '%s' (%s): queue %s, priority %lld, %lld tasks, %lld GPUs, gang of %lld\n",
               json_string_value(json_object_get(j, "name")),
               json_string_value(json_object_get(j, "kind")),
               json_string_value(json_object_get(j, "queue")),
               (long long)json_integer_value(json_object_get(j, "priority")),
               (long long)json_integer_value(json_object_get(j, "ntasks")),
               (long long)json_integer_value(json_object_get(j, "gpus")),
               (long long)json_integer_value(json_object_get(j, "gang_min")));
        json_array_foreach(json_object_get(j, "groups"), k, g)
        {
            printf("  group %-16s x%-5lld gpus %lld", json_string_value(json_object_get(g, "name")),
                   (long long)json_integer_value(json_object_get(g, "replicas")),
                   (long long)json_integer_value(json_object_get(g, "gpus")));
            if (json_is_integer(json_object_get(g, "gpu_share")))
                printf(" (share %lldm)",
                       (long long)json_integer_value(json_object_get(g, "gpu_share")));
            printf(" cpu %s memory %s\n", json_string_value(json_object_get(g, "cpu")),
                   json_string_value(json_object_get(g, "memory")));
        }
        if (json_is_integer(json_object_get(j, "time_limit_s")))
            printf("  time limit %llds\n",
                   (long long)json_integer_value(json_object_get(j, "time_limit_s")));
    }
}

int cli_wl_submit(const char *file, const char *buf, size_t n, const cli_wl_opts_t *o)
{
    arb_err_t err = {{0}};
    wl_t w;
    json_t *out = NULL;
    int rc = 0;
    wl_kind_t kind = o->force_sbatch ? WL_SBATCH : wl_detect(buf, n);

    if (wl_init(&w, file, &err) < 0) {
        fprintf(stderr, "arbiter: %s\n", err.msg);
        return 1;
    }
    if (kind == WL_NATIVE) { /* only a dry run comes here with one */
        json_t *one = NULL;
        if (wl_dry_one(file, buf, n, w.warnings, &one, &err) < 0) {
            fprintf(stderr, "arbiter: %s\n", err.msg);
            wl_free(&w);
            return EXIT_REFUSED;
        }
        json_array_append_new(w.jobs, json_null());
        out = json_pack("{s:[o],s:O}", "jobs", one, "warnings", w.warnings);
        goto print;
    }
    rc = kind == WL_SBATCH ? wl_sbatch(&w, buf, n, o->sbatch) : wl_translate(&w, buf, n, NULL);
    if (rc < 0) {
        fprintf(stderr, "arbiter: %s\n", err.msg);
        wl_free(&w);
        return EXIT_REFUSED;
    }
    if (o->dry_run) {
        if (wl_dry(&w, &out) < 0) {
            fprintf(stderr, "arbiter: %s\n", err.msg);
            wl_free(&w);
            return EXIT_REFUSED;
        }
        goto print;
    }
    print_warnings(w.warnings);
    if (w.nwarn_lost)
        fprintf(stderr, "arbiter: warning: (%d more warnings)\n", w.nwarn_lost);
    {
        size_t i;
        json_t *spec, *ids = json_array();
        long long array_id = 0;
        json_array_foreach(w.jobs, i, spec)
        {
            json_t *env = json_object_get(spec, "env");
            if (array_id && json_object_get(env, "SLURM_ARRAY_TASK_ID")) {
                char v[32];
                snprintf(v, sizeof v, "%lld", array_id);
                json_object_set_new(env, "SLURM_ARRAY_JOB_ID", json_string(v));
                json_t *arr = json_object_get(spec, "array"); /* its array: the first's id */
                if (json_is_object(arr))
                    json_object_set_new(arr, "job", json_integer(array_id));
            }
            char *body = json_dumps(spec, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
            char idem[200];
            json_t *reply = NULL;
            snprintf(idem, sizeof idem, "Idempotency-Key: %s-%zu", o->key, i);
            long st = body ? cli_http_hdr("POST", "/v1/jobs", body, strlen(body),
                                          "application/json", idem, &reply, NULL)
                           : -1;
            free(body);
            if (st < 0) {
                rc = EXIT_UNREACHABLE;
                break;
            }
            if (st >= 300) {
                const char *msg =
                    json_string_value(json_object_get(json_object_get(reply, "error"), "message"));
                fprintf(stderr, "arbiter: %ld: %s: job %zu ('%s'): %s\n", st, file, i + 1,
                        json_string_value(json_object_get(spec, "name")),
                        msg ? msg : "(no message)");
                json_decref(reply);
                rc = EXIT_REFUSED;
                break;
            }
            long long id = (long long)json_integer_value(json_object_get(reply, "id"));
            if (!array_id && json_object_get(env, "SLURM_ARRAY_TASK_ID"))
                array_id = id;
            json_array_append_new(ids, json_integer(id));
            bool later = o->sbatch_out && array_id && array_id != id; /* sbatch prints an
                                                                           array's id once */
            if (o->want_json)
                json_dumpf(reply, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER), putchar('\n');
            else if (later)
                ;
            else if (o->sbatch_out == 2)
                printf("Submitted batch job %lld\n", id);
            else
                printf("%lld\n", id);
            fflush(stdout);
            json_decref(reply);
        }
        if (o->ids)
            *o->ids = ids;
        else
            json_decref(ids);
    }
    wl_free(&w);
    return rc;
print:
    if (o->want_json) {
        json_dumpf(out, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        putchar('\n');
    } else {
        print_warnings(json_object_get(out, "warnings"));
        show_dry(out);
    }
    json_decref(out);
    wl_free(&w);
    return 0;
}
