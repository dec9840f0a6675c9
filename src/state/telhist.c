/*
 * telhist.c: each node's telemetry over the last minutes, for the console's
 * small charts (GET /v1/nodes/{name}/telemetry). Agents report every
 * heartbeat; a sample is kept when ST_TEL_EVERY_NS passed since the last
 * one kept, in a ring of ST_TEL_SAMPLES per node (5 s x 60: five minutes).
 *
 * Volatile like the telemetry it samples: not stored, empty after a
 * restart or a failover. The ring is allocated at a node's first sample,
 * sized to its GPUs (96 bytes a sample for 8 GPUs: about 6 KiB a node),
 * and freed with the node table (st_close) or when the node's GPU count
 * changes (a new inventory starts a new history).
 *
 * Unknown values (an agent that cannot read a counter leaves it out of its
 * report) are kept as unknown. A read is a typed view (st_telhist_view,
 * st_node_telemetry), which src/api/enc_telemetry.c writes as JSON (an
 * unknown value as null).
 */
#include <stdlib.h>
#include <string.h>

#include "state/state_int.h"

#define ST_TEL_SAMPLES 60
#define ST_TEL_EVERY_NS 5000000000LL

typedef struct tel_gpu {
    uint8_t util;     /* percent; 255 unknown */
    int8_t temp_c;    /* -128 unknown */
    uint8_t healthy;  /* 0, 1 */
    uint32_t mem_mib; /* UINT32_MAX unknown */
} tel_gpu_t;

typedef struct tel_node {
    int64_t mono;                                   /* CLOCK_MONOTONIC ns of the report */
    float cpu_util, net_rx, net_tx, disk_r, disk_w; /* < 0 unknown */
    double mem_used;                                /* bytes; < 0 unknown */
} tel_node_t;

struct st_telhist {
    int ngpus, head, n; /* head: the next slot to write */
    tel_node_t node[ST_TEL_SAMPLES];
    tel_gpu_t gpu[]; /* ST_TEL_SAMPLES x ngpus */
};

static float num_or(const json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? (float)json_number_value(v) : -1.0f;
}

void st_telhist_note(st_node_t *x, int ngpus, const json_t *tel, int64_t now)
{
    st_telhist_t *h = x->hist;
    arb_err_t err = {{0}};
    json_t *g, *v;
    size_t i;

    if (!tel || ngpus < 0 || ngpus > ARB_MAX_GPUS)
        return;
    if (h && h->ngpus != ngpus) {
        free(h);
        h = x->hist = NULL;
    }
    if (!h) {
        h = calloc(1, sizeof *h + (size_t)ST_TEL_SAMPLES * (size_t)ngpus * sizeof(tel_gpu_t));
        if (!h)
            return; /* charts are a convenience: no history rather than no report */
        h->ngpus = ngpus;
        x->hist = h;
    }
    if (h->n > 0) {
        int last = (h->head + ST_TEL_SAMPLES - 1) % ST_TEL_SAMPLES;
        if (now - h->node[last].mono < ST_TEL_EVERY_NS)
            return;
    }
    tel_node_t *s = &h->node[h->head];
    tel_gpu_t *sg = &h->gpu[(size_t)h->head * (size_t)ngpus];
    s->mono = now;
    s->cpu_util = num_or(tel, "cpu_util");
    s->net_rx = num_or(tel, "net_rx_bps");
    s->net_tx = num_or(tel, "net_tx_bps");
    s->disk_r = num_or(tel, "disk_read_bps");
    s->disk_w = num_or(tel, "disk_write_bps");
    s->mem_used = -1;
    const char *mu = json_string_value(json_object_get(tel, "memory_used"));
    int64_t bytes;
    if (mu && arb_qty_parse(mu, ARB_QTY_BYTES, "memory_used", &bytes, &err) == 0)
        s->mem_used = (double)bytes;
    for (int k = 0; k < ngpus; k++)
        sg[k] = (tel_gpu_t){.util = 255, .temp_c = -128, .healthy = 1, .mem_mib = UINT32_MAX};
    g = json_object_get(tel, "gpus");
    json_array_foreach(g, i, v)
    {
        json_int_t ix = json_integer_value(json_object_get(v, "index"));
        json_t *f;
        if (ix < 0 || ix >= ngpus)
            continue;
        if (json_is_integer(f = json_object_get(v, "util")))
            sg[ix].util = (uint8_t)json_integer_value(f);
        if (json_is_integer(f = json_object_get(v, "temp_c")))
            sg[ix].temp_c = (int8_t)(json_integer_value(f) > 127 ? 127 : json_integer_value(f));
        if (json_is_integer(f = json_object_get(v, "memory_used_mib")))
            sg[ix].mem_mib = (uint32_t)json_integer_value(f);
        if (json_is_boolean(f = json_object_get(v, "healthy")))
            sg[ix].healthy = json_is_true(f);
    }
    h->head = (h->head + 1) % ST_TEL_SAMPLES;
    if (h->n < ST_TEL_SAMPLES)
        h->n++;
}

void st_telhist_free(st_node_t *x)
{
    free(x->hist);
    x->hist = NULL;
}

void st_telemetry_view_free(st_telemetry_view_t *v)
{
    free(v->samples);
    free(v->gpus);
    memset(v, 0, sizeof *v);
}

int st_telhist_view(const st_node_t *x, int64_t now, st_telemetry_view_t *v)
{
    const st_telhist_t *h = x->hist;

    memset(v, 0, sizeof *v);
    v->interval_s = (double)ST_TEL_EVERY_NS / 1e9;
    v->capacity = ST_TEL_SAMPLES;
    if (!h || h->n == 0)
        return 0;
    v->ngpus = h->ngpus;
    v->samples = calloc((size_t)h->n, sizeof *v->samples);
    v->gpus = h->ngpus ? calloc((size_t)h->n * (size_t)h->ngpus, sizeof *v->gpus) : NULL;
    if (!v->samples || (h->ngpus && !v->gpus)) {
        st_telemetry_view_free(v);
        return -ENOMEM;
    }
    v->nsamples = h->n;
    for (int k = 0; k < h->n; k++) {
        int slot = (h->head + ST_TEL_SAMPLES - h->n + k) % ST_TEL_SAMPLES;
        const tel_node_t *s = &h->node[slot];
        const tel_gpu_t *sg = &h->gpu[(size_t)slot * (size_t)h->ngpus];
        st_tel_gpu_t *og = v->gpus ? &v->gpus[(size_t)k * (size_t)h->ngpus] : NULL;
        for (int i = 0; i < h->ngpus; i++)
            og[i] = (st_tel_gpu_t){.has_util = sg[i].util != 255,
                                   .util = sg[i].util,
                                   .has_mem = sg[i].mem_mib != UINT32_MAX,
                                   .memory_used_mib = sg[i].mem_mib,
                                   .has_temp = sg[i].temp_c != -128,
                                   .temp_c = sg[i].temp_c,
                                   .healthy = sg[i].healthy};
        v->samples[k] = (st_tel_sample_t){.age_s = (double)(now - s->mono) / 1e9,
                                          .cpu_util = s->cpu_util,
                                          .memory_used_bytes = s->mem_used,
                                          .net_rx_bps = s->net_rx,
                                          .net_tx_bps = s->net_tx,
                                          .disk_read_bps = s->disk_r,
                                          .disk_write_bps = s->disk_w,
                                          .gpus = og};
    }
    return 0;
}

int st_node_telemetry(st_t *s, const char *name, st_telemetry_view_t *out, int64_t *ticket,
                      arb_err_t *err)
{
    int rc = 0;

    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->mu);
    arb_node_t *n = arb_cluster_find_node(&s->cluster, name);
    if (!n) {
        rc = arb_errf(err, -ENOENT, "node '%s': no such node", name);
    } else if (st_telhist_view(st_node_ext(s, n), st_now_ns(s), out) < 0) {
        rc = arb_errf(err, -ENOMEM, "out of memory for node '%s''s telemetry", name);
    } else {
        out->node = arb_node_name(&s->cluster, n);
    }
    *ticket = st_seen(s);
    pthread_mutex_unlock(&s->mu);
    return rc;
}
