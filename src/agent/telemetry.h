/*
 * telemetry.h: one heartbeat's live sample of a node: per-GPU utilisation,
 * memory used and temperature (from the discovery's GPU source), CPU
 * utilisation (/proc/stat), memory (/proc/meminfo), load (/proc/loadavg),
 * network bytes/s (/proc/net/dev) and disk bytes/s and busy share
 * (/proc/diskstats).
 *
 * Rates are deltas between two samples over the time passed in (a
 * monotonic clock read at the edge), per device: an interface or disk seen
 * for the first time, or whose counter went backwards (reset, wrap),
 * contributes nothing to that interval rather than a spike. The first
 * sample has no rates (-1). What is counted: every interface but lo; whole
 * disks only (no partitions, loop, ram, zram, dm- or md devices, which
 * would count the same bytes twice).
 *
 * The /proc root is a field, so tests read fixture trees.
 */
#ifndef ARB_AGENT_TELEMETRY_H
#define ARB_AGENT_TELEMETRY_H

#include "agent/discovery.h"

#define TEL_MAX_DEVS 64

typedef struct agent_tel_sample {
    int64_t t_ns;        /* when (the caller's monotonic clock) */
    double interval_s;   /* since the previous sample; 0 for the first */
    double cpu_util_pct; /* all CPUs, busy share of the interval; -1 first */
    double load1;        /* /proc/loadavg; -1 unknown */
    int64_t mem_total_bytes, mem_available_bytes; /* -1 unknown */
    double net_rx_bps, net_tx_bps;                /* bytes/s; -1 first */
    double disk_read_bps, disk_write_bps;         /* bytes/s; -1 first */
    double disk_busy_pct; /* busiest disk's share of time doing I/O; -1 first */
    int ngpus;
    agent_gpu_sample_t gpu[ARB_MAX_GPUS];
    bool has_queue_len; /* queue_len was read (agent --queue-file) */
    int32_t queue_len;  /* work waiting on the node, for the least-loaded score */
} agent_tel_sample_t;

/* Counters of one device at the previous sample. */
typedef struct tel_dev {
    char name[32];
    uint64_t a, b, c; /* net: rx, tx; disk: sectors read, written, ms doing I/O */
    bool seen;        /* in the latest read */
} tel_dev_t;

/* The sampler: the previous counters. Plain data; zero it with agent_tel_init. */
typedef struct agent_tel {
    const char *proc_root; /* borrowed; "/proc" when NULL */
    bool have_prev;
    int64_t prev_ns;
    uint64_t cpu_busy, cpu_total;
    int nnet, ndisk;
    tel_dev_t net[TEL_MAX_DEVS], disk[TEL_MAX_DEVS];
} agent_tel_t;

void agent_tel_init(agent_tel_t *t, const char *proc_root);

/*
 * Take a sample at now_ns (monotonic, nanoseconds; must not go back). GPUs
 * come from d (may be NULL: none). A /proc file that cannot be read leaves
 * its fields unknown (-1), it is not an error: a report with what is known
 * beats none. -EINVAL when now_ns is before the previous sample.
 */
int agent_tel_sample(agent_tel_t *t, agent_disc_t *d, int64_t now_ns, agent_tel_sample_t *out,
                     arb_err_t *err);

#endif
