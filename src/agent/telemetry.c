/*
 * telemetry.c: the per-heartbeat sample of a node (see telemetry.h): /proc
 * counters turned into shares and rates by per-device deltas, plus the GPU
 * source's live values.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "agent/telemetry.h"

void agent_tel_init(agent_tel_t *t, const char *proc_root)
{
    memset(t, 0, sizeof *t);
    t->proc_root = proc_root;
}

static FILE *open_proc(const agent_tel_t *t, const char *rel)
{
    char path[512];

    snprintf(path, sizeof path, "%s/%s", t->proc_root ? t->proc_root : "/proc", rel);
    return fopen(path, "re");
}

/* c - p, or 0 when the counter went backwards (reset, wrap). */
static uint64_t delta(uint64_t c, uint64_t p)
{
    return c >= p ? c - p : 0;
}

/*
 * Record a device's counters; returns the deltas since its previous record
 * in d[0..2], all 0 when the device is new (no spike from a whole counter).
 */
static void dev_update(tel_dev_t *tab, int *n, const char *name, uint64_t a, uint64_t b, uint64_t c,
                       uint64_t d[3])
{
    int i;

    d[0] = d[1] = d[2] = 0;
    for (i = 0; i < *n && strcmp(tab[i].name, name) != 0; i++)
        ;
    if (i == *n) {
        if (*n == TEL_MAX_DEVS)
            return;
        (*n)++;
        snprintf(tab[i].name, sizeof tab[i].name, "%s", name);
    } else {
        d[0] = delta(a, tab[i].a);
        d[1] = delta(b, tab[i].b);
        d[2] = delta(c, tab[i].c);
    }
    tab[i].a = a, tab[i].b = b, tab[i].c = c;
    tab[i].seen = true;
}

/* Forget devices that were not in the latest read (so a device that comes
 * back starts afresh). */
static void dev_sweep(tel_dev_t *tab, int *n)
{
    int k = 0;

    for (int i = 0; i < *n; i++) {
        if (tab[i].seen) {
            tab[i].seen = false;
            tab[k++] = tab[i];
        }
    }
    *n = k;
}

static int read_cpu(agent_tel_t *t, uint64_t *busy, uint64_t *total)
{
    unsigned long long v[8] = {0};
    FILE *f = open_proc(t, "stat");
    int k;

    if (!f)
        return -1;
    /* user nice system idle iowait irq softirq steal (guest is inside user) */
    k = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
               &v[5], &v[6], &v[7]);
    fclose(f);
    if (k < 4)
        return -1;
    *total = 0;
    for (int i = 0; i < 8; i++)
        *total += v[i];
    *busy = *total - v[3] - v[4];
    return 0;
}

static void read_mem(agent_tel_t *t, agent_tel_sample_t *out)
{
    char line[256];
    FILE *f = open_proc(t, "meminfo");
    long long kb;

    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemTotal: %lld kB", &kb) == 1)
            out->mem_total_bytes = kb * 1024;
        else if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
            out->mem_available_bytes = kb * 1024;
    }
    fclose(f);
}

static void read_load(agent_tel_t *t, agent_tel_sample_t *out)
{
    FILE *f = open_proc(t, "loadavg");

    if (!f)
        return;
    if (fscanf(f, "%lf", &out->load1) != 1)
        out->load1 = -1;
    fclose(f);
}

/* Sum of rx and tx byte deltas over every interface but lo; -1 unreadable. */
static int read_net(agent_tel_t *t, uint64_t *rx, uint64_t *tx)
{
    char line[512];
    FILE *f = open_proc(t, "net/dev");

    if (!f)
        return -1;
    *rx = *tx = 0;
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':'), *name = line;
        unsigned long long v[9];
        uint64_t d[3];

        if (!colon)
            continue; /* the two header lines */
        *colon = '\0';
        while (isspace((unsigned char)*name))
            name++;
        if (strcmp(name, "lo") == 0)
            continue;
        /* rx: bytes packets errs drop fifo frame compressed multicast; tx: bytes ... */
        if (sscanf(colon + 1, "%llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                   &v[3], &v[4], &v[5], &v[6], &v[7], &v[8]) != 9)
            continue;
        dev_update(t->net, &t->nnet, name, v[0], v[8], 0, d);
        *rx += d[0];
        *tx += d[1];
    }
    fclose(f);
    dev_sweep(t->net, &t->nnet);
    return 0;
}

/* A whole disk, not a partition or a device stacked on others. */
static bool whole_disk(const char *name)
{
    static const char *const skip[] = {"loop", "ram", "zram", "dm-", "md", "sr", "fd", NULL};
    size_t len = strlen(name);
    const char *p;

    for (int i = 0; skip[i]; i++)
        if (strncmp(name, skip[i], strlen(skip[i])) == 0)
            return false;
    if (len == 0)
        return false;
    /* nvme0n1p2, mmcblk0p1: a 'p' and digits after a digit */
    p = name + len;
    while (p > name && isdigit((unsigned char)p[-1]))
        p--;
    if (p < name + len && p > name + 1 && p[-1] == 'p' && isdigit((unsigned char)p[-2]))
        return false;
    /* sda1, vdb2, xvda1, hdc3: letters then digits */
    if (p < name + len && (!strncmp(name, "sd", 2) || !strncmp(name, "vd", 2) ||
                           !strncmp(name, "xvd", 3) || !strncmp(name, "hd", 2)))
        return false;
    return true;
}

static int read_disk(agent_tel_t *t, uint64_t *rd, uint64_t *wr, uint64_t *busy_ms_max)
{
    char line[512];
    FILE *f = open_proc(t, "diskstats");

    if (!f)
        return -1;
    *rd = *wr = *busy_ms_max = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned maj, min;
        char name[64];
        unsigned long long v[10];
        uint64_t d[3];

        /* major minor name reads merged sectors ms writes merged sectors ms inflight io_ms */
        if (sscanf(line, " %u %u %63s %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &maj,
                   &min, name, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8],
                   &v[9]) != 13)
            continue;
        if (!whole_disk(name))
            continue;
        dev_update(t->disk, &t->ndisk, name, v[2], v[6], v[9], d);
        *rd += d[0] * 512; /* diskstats sectors are always 512 bytes */
        *wr += d[1] * 512;
        if (d[2] > *busy_ms_max)
            *busy_ms_max = d[2];
    }
    fclose(f);
    dev_sweep(t->disk, &t->ndisk);
    return 0;
}

int agent_tel_sample(agent_tel_t *t, agent_disc_t *d, int64_t now_ns, agent_tel_sample_t *out,
                     arb_err_t *err)
{
    uint64_t busy, total, rx, tx, rd, wr, io_ms;
    bool rates = t->have_prev;
    double secs;

    if (t->have_prev && now_ns < t->prev_ns)
        return arb_errf(err, -EINVAL,
                        "telemetry: the clock went back (%lld ns before the "
                        "previous sample); pass a monotonic clock",
                        (long long)(t->prev_ns - now_ns));
    memset(out, 0, sizeof *out);
    out->t_ns = now_ns;
    secs = rates ? (double)(now_ns - t->prev_ns) / 1e9 : 0.0;
    out->interval_s = secs;
    out->cpu_util_pct = out->load1 = -1;
    out->mem_total_bytes = out->mem_available_bytes = -1;
    out->net_rx_bps = out->net_tx_bps = -1;
    out->disk_read_bps = out->disk_write_bps = out->disk_busy_pct = -1;
    if (rates && secs <= 0)
        rates = false; /* two samples at one instant: no rate to give */

    if (read_cpu(t, &busy, &total) == 0) {
        if (rates && total > t->cpu_total) {
            uint64_t db = delta(busy, t->cpu_busy), dt = total - t->cpu_total;
            out->cpu_util_pct = 100.0 * (double)(db > dt ? dt : db) / (double)dt;
        }
        t->cpu_busy = busy;
        t->cpu_total = total;
    }
    read_mem(t, out);
    read_load(t, out);
    if (read_net(t, &rx, &tx) == 0 && rates) {
        out->net_rx_bps = (double)rx / secs;
        out->net_tx_bps = (double)tx / secs;
    }
    if (read_disk(t, &rd, &wr, &io_ms) == 0 && rates) {
        double pct = 100.0 * ((double)io_ms / 1000.0) / secs;
        out->disk_read_bps = (double)rd / secs;
        out->disk_write_bps = (double)wr / secs;
        out->disk_busy_pct = pct > 100.0 ? 100.0 : pct;
    }
    if (d) {
        arb_err_t e2;
        out->ngpus = d->inv.ngpus;
        if (agent_disc_sample(d, out->gpu, &e2) < 0)
            for (int i = 0; i < out->ngpus; i++)
                out->gpu[i] = (agent_gpu_sample_t){-1, -1, -1, false};
    }
    t->have_prev = true;
    t->prev_ns = now_ns;
    return 0;
}
