/*
 * submit_wl.c: POST /v1/jobs with a Kubernetes manifest or a Slurm batch
 * script as the body (any non-JSON Content-Type; the body tells which).
 * The file is translated (src/spec/wl.h) and each job it became submitted
 * as Arbiter's own JSON spec, which is what is stored: a restart re-reads
 * the native spec, not the manifest. The jobs are submitted together: every
 * one is checked before any is made, so one refused job leaves nothing
 * behind (not even a job that ran for a moment); should a later one still be
 * refused (the config changed in between), those already made are
 * cancelled.
 * With an Idempotency-Key KEY, job i gets KEY-i, so a retry answers the
 * same jobs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_int.h"
#include "spec/wl.h"

bool api_is_workload(const api_req_t *r)
{
    if (!r->yaml)
        return false;
    wl_kind_t k = wl_detect(r->body, r->n);
    return k == WL_K8S || k == WL_SBATCH;
}

int api_submit_workload(api_req_t *r)
{
    arb_err_t err = {{0}};
    wl_t w;
    json_t *jobs = json_array();
    const char *key = api_header(r, "Idempotency-Key");
    int64_t t = 0;
    int rc;
    size_t i;
    json_t *spec;
    bool created_any = false;

    if ((rc = wl_init(&w, "job.yaml", &err)) < 0) {
        json_decref(jobs);
        return api_error(r, 500, "%s", err.msg);
    }
    rc = wl_translate(&w, r->body, r->n, NULL);
    if (rc < 0) {
        json_decref(jobs);
        wl_free(&w);
        return api_finish(r, rc == -ENOMEM ? rc : -EINVAL, NULL, 0, &err, 201);
    }
    json_array_foreach(w.jobs, i, spec)
    { /* all or nothing: check every job before making any */
        char *body = json_dumps(spec, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        rc = body ? st_job_submit_check(r->st, &r->who, body, strlen(body), false, &err)
                  : arb_errf(&err, -ENOMEM, "out of memory");
        free(body);
        if (rc < 0) {
            arb_err_prefix(&err, "job %zu of %zu ('%.96s'): ", i + 1, json_array_size(w.jobs),
                           json_string_value(json_object_get(spec, "name")));
            json_decref(jobs);
            wl_free(&w);
            return api_finish(r, rc, NULL, 0, &err, 201);
        }
    }
    json_array_foreach(w.jobs, i, spec)
    {
        char *body = json_dumps(spec, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        char k[200];
        st_job_view_t one;
        bool created = false;
        if (key)
            snprintf(k, sizeof k, "%.150s-%zu", key, i);
        rc = body ? st_job_submit_key(r->st, &r->who, key ? k : NULL, body, strlen(body), false,
                                      &one, &created, &t, &err)
                  : arb_errf(&err, -ENOMEM, "out of memory");
        free(body);
        if (rc < 0) {
            arb_err_prefix(&err, "job %zu of %zu ('%.96s'): ", i + 1, json_array_size(w.jobs),
                           json_string_value(json_object_get(spec, "name")));
            break;
        }
        created_any |= created;
        json_array_append_new(jobs, api_job_json(&one));
        st_job_view_free(&one);
    }
    if (rc < 0) { /* together or not at all: take back what this request made */
        size_t k2;
        json_t *j;
        json_array_foreach(jobs, k2, j)
        {
            st_job_view_t c;
            arb_err_t e2 = {{0}};
            int64_t t2 = 0;
            st_job_cancel(r->st, &r->who, (uint64_t)json_integer_value(json_object_get(j, "id")),
                          -1, &c, &t2, &e2);
            st_job_view_free(&c);
            if (t2 > t)
                t = t2;
        }
        json_decref(jobs);
        wl_free(&w);
        return api_finish(r, rc, NULL, t, &err, 201);
    }
    json_t *out;
    if (json_array_size(jobs) == 1) {
        out = json_incref(json_array_get(jobs, 0));
        if (json_array_size(w.warnings))
            json_object_set(out, "warnings", w.warnings);
    } else {
        out = json_pack("{s:O,s:O}", "jobs", jobs, "warnings", w.warnings);
    }
    json_decref(jobs);
    wl_free(&w);
    return api_finish(r, 0, out, t, &err, created_any ? 201 : 200);
}
