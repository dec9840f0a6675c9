/*
 * api_fixture.h: what the tests that read the state as a client does share
 * (the state's typed views through src/api's encoders, so a check reads the
 * bytes a client reads): job_explain(). Header-only; included after
 * "api/api.h" and "state/state_int.h" by tests linked with arbapi
 * (test_state, test_resize, tests/dst/dst.c).
 */
#ifndef ARB_TEST_API_FIXTURE_H
#define ARB_TEST_API_FIXTURE_H

/* st_job_explain with its reply as the API encodes it (src/api/enc_explain.c;
 * *out NULL on failure). */
static __attribute__((unused)) int job_explain(st_t *s, const st_who_t *who, uint64_t id,
                                               json_t **out, int64_t *t, arb_err_t *err)
{
    st_explain_view_t v;
    int rc = st_job_explain(s, who, id, &v, t, err);
    *out = rc == 0 ? api_explain_json(&v) : NULL;
    st_explain_view_free(&v);
    return rc;
}

#endif
