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
 * report) are kept as unknown and written as null.
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

static json_t *num_json(double v)
{
    return v < 0 ? json_null() : json_real(v);
}

/* {"interval_s", "samples": [{"age_s", "cpu_util", "memory_used_bytes",
 * "net_rx_bps", "net_tx_bps", "disk_read_bps", "disk_write_bps", "gpus":
 * [{"util", "memory_used_mib", "temp_c", "healthy"}]}]}, oldest first. */
json_t *st_telhist_json(const st_node_t *x, int64_t now)
{
    const st_telhist_t *h = x->hist;
    json_t *arr = json_array();

    for (int k = 0; h && k < h->n; k++) {
        int slot = (h->head + ST_TEL_SAMPLES - h->n + k) % ST_TEL_SAMPLES;
        const tel_node_t *s = &h->node[slot];
        const tel_gpu_t *sg = &h->gpu[(size_t)slot * (size_t)h->ngpus];
        json_t *gpus = json_array();
        for (int i = 0; i < h->ngpus; i++) {
            json_t *e = json_object();
            json_object_set_new(e, "util",
                                sg[i].util == 255 ? json_null() : json_integer(sg[i].util));
            json_object_set_new(e, "memory_used_mib",
                                sg[i].mem_mib == UINT32_MAX ? json_null()
                                                            : json_integer(sg[i].mem_mib));
            json_object_set_new(e, "temp_c",
                                sg[i].temp_c == -128 ? json_null() : json_integer(sg[i].temp_c));
            json_object_set_new(e, "healthy", json_boolean(sg[i].healthy));
            json_array_append_new(gpus, e);
        }
        json_t *o = json_object();
        json_object_set_new(o, "age_s", json_real((double)(now - s->mono) / 1e9));
        json_object_set_new(o, "cpu_util", num_json(s->cpu_util));
        json_object_set_new(o, "memory_used_bytes", num_json(s->mem_used));
        json_object_set_new(o, "net_rx_bps", num_json(s->net_rx));
        json_object_set_new(o, "net_tx_bps", num_json(s->net_tx));
        json_object_set_new(o, "disk_read_bps", num_json(s->disk_r));
        json_object_set_new(o, "disk_write_bps", num_json(s->disk_w));
        json_object_set_new(o, "gpus", gpus);
        json_array_append_new(arr, o);
    }
    return json_pack("{s:f,s:i,s:o}", "interval_s", (double)ST_TEL_EVERY_NS / 1e9, "capacity",
                     ST_TEL_SAMPLES, "samples", arr);
}

int st_node_telemetry(st_t *s, const char *name, json_t **out, int64_t *ticket, arb_err_t *err)
{
    int rc = 0;

    pthread_mutex_lock(&s->mu);
    arb_node_t *n = arb_cluster_find_node(&s->cluster, name);
    if (!n) {
        rc = arb_errf(err, -ENOENT, "node '%s': no such node", name);
    } else {
        *out = st_telhist_json(st_node_ext(s, n), st_now_ns(s));
        json_object_set_new(*out, "node", json_string(name));
    }
    *ticket = st_seen(s);
    pthread_mutex_unlock(&s->mu);
    return rc;
}
