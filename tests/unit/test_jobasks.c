/* test_jobasks.c: what a job asks for, as the API shows it (the job view's
 * spec_asks_t, copied under the state's lock in src/state/jobview.c and
 * written later by src/spec's spec_asks_json), held to the dry run's
 * object for the same job (spec_job_json, less its "gpus"), byte for byte, over jobs a real
 * controller (SQLite store) took of every kind: plain, several groups, a gang, elastic, a selector,
 * required and preferred affinity (In, NotIn, Exists, Gt, Lt), tolerations
 * (Equal, Exists, every key), GPU models, a dataset, topology, a GPU share
 * and GPU memory, limits, ephemeral storage, extended resources, a grace,
 * gpuSharing, exclusive, a time limit, an array, a service and its
 * replica. One job's bytes are pinned; a service's block in its job is its
 * service view's (api_service_json), as GET /v1/services/{name} shows it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_int.h"
#include "spec/job_json.h"
#include "state/state_int.h"
#include "state_fixture.h"

static char *dump(json_t *o)
{
    char *t = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_non_null(t);
    json_decref(o);
    return t;
}

/* The API's text of job id's asks, and the dry run's for the same job. */
static void both(st_t *s, uint64_t id, char **api, char **dry)
{
    st_job_view_t v;
    int64_t t;
    arb_err_t err = {{0}};

    assert_int_equal(st_job_get(s, &admin, id, &v, &t, &err), 0);
    assert_true(v.full);
    *api = dump(spec_asks_json(&v.asks));
    st_job_view_free(&v);
    pthread_mutex_lock(&s->mu);
    st_job_t *sj = st_job_find(s, id);
    assert_non_null(sj);
    json_t *o = spec_job_json(&s->cluster, sj->j);
    pthread_mutex_unlock(&s->mu);
    assert_non_null(o);
    assert_int_equal(json_object_del(o, "gpus"), 0);
    *dry = dump(o);
}

static void test_asks_as_dry_run(void **unused)
{
    (void)unused;
    st_t *s = sf_open(NULL, -1);
    sf_report(s, "n1",
              "{\"lamport\": 3, \"inventory\": {\"cpu\": 64, \"memory\": \"512Gi\", "
              "\"address\": \"10.0.0.1\", \"extended\": {\"example.com/fpga\": 2}, \"gpus\": "
              "[{\"model\": \"H100\", \"memory\": \"80Gi\", \"nvlink\": 0}]}}");
    static const char *const specs[] = {
        "name: plain\nresources: {requests: {nvidia.com/gpu: 1}}\n",
        "name: rich\npriorityClassName: low\ntimeLimit: 1h30m\ndataset: imagenet\n"
        "gangMin: 2\nterminationGracePeriodSeconds: 30\ngpuSharing: deny\n"
        "nodeSelector: {rack: r1, zone: z1}\ngpuModels: [H100, A100-80G]\n"
        "affinity:\n"
        "  required: [[{key: zone, operator: In, values: [z1, z2]}, {key: ssd, operator: "
        "Exists}], [{key: gen, operator: Gt, values: ['3']}]]\n"
        "  preferred: [{weight: 50, match: [{key: rack, operator: NotIn, values: [r9]}]}, "
        "{weight: 7, match: [{key: age, operator: Lt, values: ['10']}, {key: old, operator: "
        "DoesNotExist}]}]\n"
        "tolerations: [{key: dedicated, operator: Equal, value: infer, effect: NoSchedule}, "
        "{key: gpu, operator: Exists}, {operator: Exists, effect: NoExecute}]\n"
        "groups:\n  - name: launcher\n    resources: {requests: {cpu: 500m, memory: 1Gi, "
        "ephemeral-storage: 10Gi}, limits: {cpu: 2, memory: 4Gi}}\n"
        "  - name: worker\n    replicas: 2\n    topology: {level: nvlink, mode: required}\n"
        "    resources:\n      requests: {nvidia.com/gpu: 2, cpu: 8, memory: 64Gi, "
        "example.com/fpga: 1}\n",
        "name: share\ngpuSharing: allow\ntopology: node\n"
        "resources: {requests: {arbiter.io/gpu-share: 250m, nvidia.com/gpu-memory: 20Gi}}\n",
        "name: el\nreplicas: {min: 1, max: 4}\nresources: {requests: {nvidia.com/gpu: 1}}\n",
        "name: ex\nexclusive: true\npreemptible: true\nresources: {requests: {nvidia.com/gpu: "
        "8}}\n",
        "name: arr\narray: {count: 3, throttle: 1}\nresources: {requests: {nvidia.com/gpu: 8}}\n",
        "name: web\nkind: service\nreplicas: 2\nport: 18000\nhealth: /healthz\n"
        "resources: {requests: {cpu: 1}}\ncommand: [serve]\n",
    };
    enum { N = sizeof specs / sizeof specs[0] };
    for (int i = 0; i < N; i++)
        sf_submit_yaml(s, specs[i]);
    int64_t t;
    assert_int_equal(st_cycle(s, NULL, &t), 0);
    assert_int_equal(st_wait(s, t, NULL), 0);
    /* every job the store holds, the array's elements and the service's replicas too */
    st_job_list_t l;
    arb_err_t err = {{0}};
    assert_int_equal(st_jobs_list(s, &admin, NULL, NULL, 0, 0, &l, &t, &err), 0);
    assert_true(l.n >= N + 2);
    bool replica = false, service = false;
    for (int i = 0; i < l.n; i++) {
        char *api, *dry;
        both(s, l.v[i].id, &api, &dry);
        if (strcmp(api, dry) != 0)
            fail_msg("job %s:\napi %s\ndry %s", l.v[i].name, api, dry);
        if (strcmp(l.v[i].name, "rich") == 0)
            assert_string_equal(
                api,
                "{\"ntasks\":3,\"groups\":[{\"name\":\"launcher\",\"replicas\":1,\"gpus\":0,"
                "\"cpu\":\"500m\",\"memory\":\"1Gi\",\"cpu_limit\":\"2\",\"memory_limit\":"
                "\"4Gi\",\"ephemeral_storage\":\"10Gi\"},{\"name\":\"worker\",\"replicas\":2,"
                "\"gpus\":2,\"cpu\":\"8\",\"memory\":\"64Gi\",\"extended\":{\"example.com/"
                "fpga\":1},\"topology\":{\"level\":\"nvlink\",\"mode\":\"required\"}}],"
                "\"gang_min\":2,\"termination_grace_s\":30,\"gpu_sharing\":\"deny\","
                "\"preemptible\":true,\"time_limit_s\":5400,\"node_selector\":{\"rack\":"
                "\"r1\",\"zone\":\"z1\"},\"affinity\":{\"required\":[[{\"key\":\"zone\","
                "\"operator\":\"In\",\"values\":[\"z1\",\"z2\"]},{\"key\":\"ssd\",\"operator\":"
                "\"Exists\"}],[{\"key\":\"gen\",\"operator\":\"Gt\",\"values\":[\"3\"]}]],"
                "\"preferred\":[{\"weight\":50,\"match\":[{\"key\":\"rack\",\"operator\":"
                "\"NotIn\",\"values\":[\"r9\"]}]},{\"weight\":7,\"match\":[{\"key\":\"age\","
                "\"operator\":\"Lt\",\"values\":[\"10\"]},{\"key\":\"old\",\"operator\":"
                "\"DoesNotExist\"}]}]},\"tolerations\":[{\"operator\":\"Equal\",\"key\":"
                "\"dedicated\",\"value\":\"infer\",\"effect\":\"NoSchedule\"},{\"operator\":"
                "\"Exists\",\"key\":\"gpu\"},{\"operator\":\"Exists\",\"effect\":"
                "\"NoExecute\"}],\"gpu_models\":[\"H100\",\"A100-80G\"],\"dataset\":"
                "\"imagenet\"}");
        free(api);
        free(dry);
        /* a service's block is its service view's */
        st_job_view_t v;
        assert_int_equal(st_job_get(s, &admin, l.v[i].id, &v, &t, &err), 0);
        if (v.kind && strcmp(v.kind, "service") == 0) {
            st_service_view_t sv;
            service = true;
            assert_int_equal(st_service_endpoints(s, &admin, "web", 0, 0, &sv, &t, &err), 0);
            json_t *o = api_job_json(&v);
            char *in_job = dump(json_incref(json_object_get(o, "service")));
            char *own = dump(api_service_json(&sv));
            assert_string_equal(in_job, own);
            free(in_job);
            free(own);
            json_decref(o);
            st_service_view_free(&sv);
        } else if (v.kind) {
            replica = true;
            assert_string_equal(v.replica_of_name, "web");
        }
        st_job_view_free(&v);
    }
    assert_true(service && replica);
    st_job_list_free(&l);
    st_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_asks_as_dry_run, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
