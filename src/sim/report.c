/*
 * report.c: the simulator's outputs: one JSON object per run, CSV rows, a
 * Markdown comparison with the published means, and an SVG chart of
 * allocation against arrived demand (the paper's Fig. 9a), drawn here.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim/sim.h"

static void print_num(FILE *f, double v, int prec)
{
    if (isnan(v) || isinf(v))
        fputs("null", f);
    else
        fprintf(f, "%.*f", prec, v);
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void json_array(FILE *f, const char *key, const double *v, int prec)
{
    fprintf(f, ",\"%s\":[", key);
    for (int k = 0; k < SIM_NPCT; k++) {
        if (k)
            fputc(',', f);
        print_num(f, v[k], prec);
    }
    fputc(']', f);
}

static void json_dist(FILE *f, const char *key, const sim_dist_t *d)
{
    fprintf(f, ",\"%s\":{\"n\":%d,\"mean\":%.1f,\"p50\":%.1f,\"p99\":%.1f,\"max\":%.1f}", key, d->n,
            d->mean, d->p50, d->p99, d->max);
}

static void print_events_json(FILE *f, const sim_result_t *r)
{
    const sim_events_t *e = &r->ev;

    fputs("{\"mode\":\"events\",\"workload\":", f);
    json_str(f, r->workload);
    fputs(",\"policy\":", f);
    json_str(f, r->policy);
    fprintf(f,
            ",\"queue\":\"%s\",\"seed\":%llu,\"total_gpus\":%d,\"tasks_arrived\":%d,"
            "\"jobs\":%d,\"started\":%d,\"completed\":%d,\"abandoned\":%d,"
            "\"unschedulable\":%d,\"waiting_at_end\":%d,\"pending_max\":%d,\"cycles\":%d,"
            "\"span_s\":%.0f,\"gpu_util_pct\":%.2f,\"place_s\":%.3f,\"run_s\":%.3f",
            e->queue, (unsigned long long)r->seed, r->total_gpus, r->tasks_arrived, e->jobs,
            e->started, e->completed, e->abandoned, e->unschedulable, e->waiting_end,
            e->pending_max, e->cycles, e->span_s, e->gpu_util_pct, r->place_s, r->run_s);
    json_dist(f, "wait_s", &e->wait);
    json_dist(f, "jct_s", &e->jct);
    fprintf(f, ",\"gangs\":%d,\"gangs_started\":%d", e->gangs, e->gangs_started);
    json_dist(f, "gang_wait_s", &e->gang_wait);
    fprintf(f, ",\"gang_racks\":%.2f,\"gang_nodes\":%.2f,\"series\":{\"t_s\":[", e->gang_racks,
            e->gang_nodes);
    for (int k = 0; k < SIM_NSERIES; k++)
        fprintf(f, "%s%.0f", k ? "," : "", e->t_s[k]);
    fputs("],\"alloc_pct\":[", f);
    for (int k = 0; k < SIM_NSERIES; k++)
        fprintf(f, "%s%.2f", k ? "," : "", e->alloc_pct[k]);
    fputs("],\"pending\":[", f);
    for (int k = 0; k < SIM_NSERIES; k++)
        fprintf(f, "%s%d", k ? "," : "", e->pending[k]);
    fputs("]}}\n", f);
}

void sim_print_events_csv(FILE *f, const sim_result_t *r, bool header)
{
    const sim_events_t *e = &r->ev;

    if (header)
        fputs("workload,policy,queue,seed,jobs,started,completed,abandoned,unschedulable,"
              "waiting_at_end,pending_max,gpu_util_pct,wait_mean_s,wait_p50_s,wait_p99_s,"
              "jct_mean_s,jct_p50_s,jct_p99_s,gangs,gangs_started,gang_wait_mean_s,gang_racks\n",
              f);
    fprintf(
        f,
        "%s,%s,%s,%llu,%d,%d,%d,%d,%d,%d,%d,%.2f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%d,%d,%.1f,%.2f\n",
        r->workload, r->policy, e->queue, (unsigned long long)r->seed, e->jobs, e->started,
        e->completed, e->abandoned, e->unschedulable, e->waiting_end, e->pending_max,
        e->gpu_util_pct, e->wait.mean, e->wait.p50, e->wait.p99, e->jct.mean, e->jct.p50,
        e->jct.p99, e->gangs, e->gangs_started, e->gang_wait.mean, e->gang_racks);
}

void sim_print_json(FILE *f, const sim_result_t *r)
{
    if (r->mode == SIM_MODE_EVENTS) {
        print_events_json(f, r);
        return;
    }
    fputs("{\"workload\":", f);
    json_str(f, r->workload);
    fputs(",\"policy\":", f);
    json_str(f, r->policy);
    fprintf(f,
            ",\"seed\":%llu,\"inflate\":%.2f,\"total_gpus\":%d,\"tasks_arrived\":%d,"
            "\"tasks_failed\":%d,\"place_s\":%.3f,\"run_s\":%.3f",
            (unsigned long long)r->seed, r->inflate, r->total_gpus, r->tasks_arrived,
            r->tasks_failed, r->place_s, r->run_s);
    json_array(f, "alloc_pct", r->alloc_pct, 2);
    json_array(f, "frag_pct", r->frag_pct, 2);
    json_array(f, "frag_ratio_pct", r->frag_ratio_pct, 2);
    fputs("}\n", f);
}

void sim_print_csv(FILE *f, const sim_result_t *r, bool header)
{
    static const char *const metric[3] = {"alloc_pct", "frag_pct", "frag_ratio_pct"};
    const double *v[3] = {r->alloc_pct, r->frag_pct, r->frag_ratio_pct};

    if (header) {
        fputs("metric,workload,policy,seed,inflate,total_gpus,tasks_arrived,tasks_failed", f);
        for (int k = 0; k < SIM_NPCT; k++)
            fprintf(f, ",%d", k);
        fputc('\n', f);
    }
    for (int m = 0; m < 3; m++) {
        fprintf(f, "%s,%s,%s,%llu,%.2f,%d,%d,%d", metric[m], r->workload, r->policy,
                (unsigned long long)r->seed, r->inflate, r->total_gpus, r->tasks_arrived,
                r->tasks_failed);
        for (int k = 0; k < SIM_NPCT; k++) {
            fputc(',', f);
            if (!isnan(v[m][k]))
                fprintf(f, "%.2f", v[m][k]);
        }
        fputc('\n', f);
    }
}

/* ---- comparison with the published results ------------------------------------ */

/* Mean of alloc_pct[k] over our runs of (workload, policy). */
static double our_mean(const sim_result_t *r, int n, const char *wl, const char *pol, int k,
                       int *nseeds)
{
    double s = 0;
    int c = 0;
    for (int i = 0; i < n; i++)
        if (r[i].rc == 0 && strcmp(r[i].workload, wl) == 0 && strcmp(r[i].policy, pol) == 0 &&
            !isnan(r[i].alloc_pct[k])) {
            s += r[i].alloc_pct[k];
            c++;
        }
    if (nseeds)
        *nseeds = c;
    return c ? s / c : NAN;
}

static bool ran_seed(const sim_result_t *r, int n, uint64_t seed)
{
    for (int i = 0; i < n; i++)
        if (r[i].seed == seed)
            return true;
    return false;
}

/* The published mean over the seeds we ran (all of them if none match). */
static double paper_mean(const sim_expect_t *ex, const sim_result_t *r, int n, const char *wl,
                         const char *paper, int k)
{
    double s = 0;
    int c = 0;
    for (int pass = 0; pass < 2 && c == 0; pass++)
        for (int i = 0; i < ex->n; i++) {
            const sim_expect_row_t *e = &ex->v[i];
            if (strcmp(e->workload, wl) != 0 || strcmp(e->policy, paper) != 0 || isnan(e->v[k]) ||
                (pass == 0 && !ran_seed(r, n, (uint64_t)e->seed)))
                continue;
            s += e->v[k];
            c++;
        }
    return c ? s / c : NAN;
}

static const char *const paper_order[] = {"random",      "dotprod", "gpu-clustering",
                                          "gpu-packing", "bestfit", "fgd"};

void sim_print_compare(FILE *f, const sim_result_t *r, int n, const sim_expect_t *ex)
{
    fputs("| workload | policy | seeds | alloc@100 | published | delta | alloc@130 | published "
          "| delta |\n|---|---|---|---|---|---|---|---|---|\n",
          f);
    for (int i = 0; i < n; i++) {
        bool first = true;
        for (int k = 0; k < i && first; k++)
            first = strcmp(r[k].workload, r[i].workload) != 0;
        if (!first)
            continue;
        const char *wl = r[i].workload;
        for (size_t p = 0; p < sizeof paper_order / sizeof paper_order[0]; p++) {
            const char *pol = paper_order[p], *paper = sim_paper_policy(pol);
            int ns;
            double a100 = our_mean(r, n, wl, pol, 100, &ns),
                   a130 = our_mean(r, n, wl, pol, 130, NULL);
            double p100 = paper_mean(ex, r, n, wl, paper, 100),
                   p130 = paper_mean(ex, r, n, wl, paper, 130);
            if (ns == 0)
                continue;
            fprintf(f, "| %s | %s | %d | %.2f | %.2f | %+.2f%s | %.2f | %.2f | %+.2f%s |\n", wl,
                    pol, ns, a100, p100, a100 - p100, fabs(a100 - p100) <= 0.5 ? "" : " (!)", a130,
                    p130, a130 - p130, fabs(a130 - p130) <= 0.5 ? "" : " (!)");
        }
    }
    fputs("\nFGD's lead over BestFit at 100% arrived:\n\n| workload | ours | published | delta "
          "|\n|---|---|---|---|\n",
          f);
    for (int i = 0; i < n; i++) {
        bool first = true;
        for (int k = 0; k < i && first; k++)
            first = strcmp(r[k].workload, r[i].workload) != 0;
        if (!first)
            continue;
        const char *wl = r[i].workload;
        double of = our_mean(r, n, wl, "fgd", 100, NULL),
               ob = our_mean(r, n, wl, "bestfit", 100, NULL);
        double pf = paper_mean(ex, r, n, wl, "06-FGD", 100),
               pb = paper_mean(ex, r, n, wl, "05-BestFit", 100);
        if (isnan(of) || isnan(ob))
            continue;
        fprintf(f, "| %s | %+.2f | %+.2f | %+.2f%s |\n", wl, of - ob, pf - pb,
                (of - ob) - (pf - pb), fabs((of - ob) - (pf - pb)) <= 0.3 ? "" : " (!)");
    }
}

/* ---- the family table ------------------------------------------------------------ */

/* alloc@100 of (workload, policy, seed), NaN when not run. */
static double run_at(const sim_result_t *r, int n, const char *wl, const char *pol, uint64_t seed)
{
    for (int i = 0; i < n; i++)
        if (r[i].rc == 0 && r[i].seed == seed && strcmp(r[i].workload, wl) == 0 &&
            strcmp(r[i].policy, pol) == 0)
            return r[i].alloc_pct[100];
    return NAN;
}

void sim_print_table(FILE *f, const sim_result_t *r, int n)
{
    const char *pols[32] = {0}, *ref;
    int np = 0, nwl = 0;
    double sum_fewer[32] = {0}, sum_d[32] = {0}, min_d[32], sum_a[32] = {0};
    bool has_bound = false;

    for (int i = 0; i < n; i++) {
        bool seen = false;
        for (int k = 0; k < np && !seen; k++)
            seen = strcmp(pols[k], r[i].policy) == 0;
        if (strcmp(r[i].policy, SIM_BOUND_POLICY) == 0) {
            has_bound = true;
            continue;
        }
        if (!seen && np < 32)
            pols[np++] = r[i].policy;
    }
    if (np == 0)
        return;
    ref = pols[0];
    for (int k = 0; k < np; k++)
        min_d[k] = INFINITY;
    fprintf(f, "| workload | seeds | %s", ref);
    for (int k = 1; k < np; k++)
        fprintf(f, " | %s | delta | fewer unallocated | seeds better | worst seed", pols[k]);
    fputs(has_bound ? " | bound | headroom |\n|---|---:|---:" : " |\n|---|---:|---:", f);
    for (int k = 1; k < np; k++)
        fputs("|---:|---:|---:|---:|---:", f);
    fputs(has_bound ? "|---:|---:|\n" : "|\n", f);
    for (int i = 0; i < n; i++) {
        const char *wl = r[i].workload;
        bool first = true;
        int ns;
        double a0, best;
        for (int k = 0; k < i && first; k++)
            first = strcmp(r[k].workload, wl) != 0;
        if (!first)
            continue;
        a0 = our_mean(r, n, wl, ref, 100, &ns);
        if (ns == 0)
            continue;
        best = a0;
        nwl++;
        sum_a[0] += a0;
        fprintf(f, "| %s | %d | %.2f", wl, ns, a0);
        for (int k = 1; k < np; k++) {
            double a = our_mean(r, n, wl, pols[k], 100, NULL), worst = INFINITY;
            int better = 0, paired = 0;
            for (int s = 0; s < n; s++) {
                double x, y;
                if (strcmp(r[s].workload, wl) != 0 || strcmp(r[s].policy, ref) != 0)
                    continue;
                x = r[s].alloc_pct[100];
                y = run_at(r, n, wl, pols[k], r[s].seed);
                if (isnan(x) || isnan(y))
                    continue;
                paired++;
                better += y > x;
                worst = y - x < worst ? y - x : worst;
            }
            double fewer = 100 * (1 - (100 - a) / (100 - a0));
            sum_a[k] += a;
            sum_d[k] += a - a0;
            sum_fewer[k] += fewer;
            min_d[k] = a - a0 < min_d[k] ? a - a0 : min_d[k];
            best = a > best ? a : best;
            fprintf(f, " | %.2f | %+.2f | %.1f%% | %d/%d | %+.2f", a, a - a0, fewer, better, paired,
                    worst);
        }
        if (has_bound) {
            double b = our_mean(r, n, wl, SIM_BOUND_POLICY, 100, NULL);
            fprintf(f, " | %.2f | %.2f", b, b - best);
        }
        fputs(" |\n", f);
    }
    if (nwl > 1) {
        fprintf(f, "| mean of %d | | %.2f", nwl, sum_a[0] / nwl);
        for (int k = 1; k < np; k++)
            fprintf(f, " | %.2f | %+.2f | %.1f%% | | min %+.2f", sum_a[k] / nwl, sum_d[k] / nwl,
                    sum_fewer[k] / nwl, min_d[k]);
        fputs(has_bound ? " | | |\n" : " |\n", f);
    }
}

/* ---- SVG --------------------------------------------------------------------------- */

#define PW 720 /* panel size */
#define PH 440
#define ML 64 /* margins of the plot area inside a panel */
#define MR 24
#define MT 48
#define MB 56

static const char *const colours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            fputc(*s, f);
        }
    }
}

int sim_write_svg(const char *path, const sim_result_t *r, int n, arb_err_t *err)
{
    const char *wls[64], *pols[16];
    int nw = 0, np = 0;
    FILE *f;

    for (int i = 0; i < n; i++) {
        int k;
        for (k = 0; k < nw && strcmp(wls[k], r[i].workload) != 0; k++)
            ;
        if (k == nw && nw < 64)
            wls[nw++] = r[i].workload;
        for (k = 0; k < np && strcmp(pols[k], r[i].policy) != 0; k++)
            ;
        if (k == np && np < 16)
            pols[np++] = r[i].policy;
    }
    if (!(f = fopen(path, "w")))
        return arb_errf(err, -errno, "%s: cannot write: %s", path, strerror(errno));
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"Helvetica, Arial, sans-serif\" "
            "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            PW, PH * nw, PW, PH * nw);
    for (int w = 0; w < nw; w++) {
        int x0 = ML, y0 = w * PH + MT, pw = PW - ML - MR, ph = PH - MT - MB;
        fprintf(f,
                "<g>\n<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"15\" "
                "font-weight=\"bold\">GPU allocation vs arrived GPU demand: ",
                PW / 2, w * PH + 26);
        xml_text(f, wls[w]);
        fputs("</text>\n", f);
        /* Grid, ticks and labels. */
        for (int x = 0; x <= 130; x += 10) {
            double px = x0 + (double)pw * x / 130;
            fprintf(f,
                    "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#e6e6e6\"/>\n"
                    "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d</text>\n",
                    px, y0, px, y0 + ph, px, y0 + ph + 16, x);
        }
        for (int y = 0; y <= 100; y += 10) {
            double py = y0 + ph - (double)ph * y / 100;
            fprintf(f,
                    "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e6e6e6\"/>\n"
                    "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%d</text>\n",
                    x0, py, x0 + pw, py, x0 - 6, py + 4, y);
        }
        fprintf(f,
                "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
                "stroke=\"#333\"/>\n",
                x0, y0, pw, ph);
        fprintf(f,
                "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">Arrived GPU demand (%% of "
                "cluster GPUs)</text>\n",
                x0 + pw / 2, y0 + ph + 40);
        fprintf(f,
                "<text transform=\"translate(%d,%d) rotate(-90)\" text-anchor=\"middle\">"
                "GPUs allocated (%%)</text>\n",
                18, y0 + ph / 2);
        /* One line per policy: the mean over its seeds. */
        for (int p = 0; p < np; p++) {
            bool pen = false;
            int seeds = 0;
            fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\" points=\"",
                    colours[p % 10]);
            for (int k = 0; k < SIM_NPCT; k++) {
                double s = 0;
                int c = 0;
                for (int i = 0; i < n; i++)
                    if (strcmp(r[i].workload, wls[w]) == 0 && strcmp(r[i].policy, pols[p]) == 0 &&
                        r[i].rc == 0 && !isnan(r[i].alloc_pct[k])) {
                        s += r[i].alloc_pct[k];
                        c++;
                    }
                seeds = c > seeds ? c : seeds;
                if (!c)
                    continue;
                fprintf(f, "%s%.1f,%.1f", pen ? " " : "", x0 + (double)pw * k / 130,
                        y0 + ph - ph * (s / c) / 100);
                pen = true;
            }
            fputs("\"/>\n", f);
            /* Legend entry, top left inside the plot. */
            int ly = y0 + 16 + 18 * p;
            fprintf(f,
                    "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" "
                    "stroke-width=\"3\"/>\n<text x=\"%d\" y=\"%d\">",
                    x0 + 12, ly, x0 + 36, ly, colours[p % 10], x0 + 42, ly + 4);
            xml_text(f, pols[p]);
            fprintf(f, " (%d seed%s)</text>\n", seeds, seeds == 1 ? "" : "s");
        }
        fputs("</g>\n", f);
    }
    fputs("</svg>\n", f);
    if (fclose(f) != 0)
        return arb_errf(err, -EIO, "%s: write error", path);
    return 0;
}

/* ---- events mode SVG ------------------------------------------------------------------- */

int sim_write_events_svg(const char *path, const sim_result_t *r, int n, arb_err_t *err)
{
    const char *wls[64];
    int nw = 0;
    FILE *f;

    for (int i = 0; i < n; i++) {
        int k;
        for (k = 0; k < nw && strcmp(wls[k], r[i].workload) != 0; k++)
            ;
        if (k == nw && nw < 64)
            wls[nw++] = r[i].workload;
    }
    if (!(f = fopen(path, "w")))
        return arb_errf(err, -errno, "%s: cannot write: %s", path, strerror(errno));
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"Helvetica, Arial, sans-serif\" "
            "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            PW, 2 * PH * nw, PW, 2 * PH * nw);
    for (int w = 0; w < nw; w++) {
        for (int panel = 0; panel < 2; panel++) {
            int top = (2 * w + panel) * PH, x0 = ML, y0 = top + MT, pw = PW - ML - MR,
                ph = PH - MT - MB, line = 0;
            double span = 0, ymax = panel ? 1 : 100;
            for (int i = 0; i < n; i++)
                if (strcmp(r[i].workload, wls[w]) == 0 && r[i].rc == 0) {
                    span =
                        r[i].ev.t_s[SIM_NSERIES - 1] > span ? r[i].ev.t_s[SIM_NSERIES - 1] : span;
                    for (int k = 0; panel && k < SIM_NSERIES; k++)
                        ymax = r[i].ev.pending[k] > ymax ? r[i].ev.pending[k] : ymax;
                }
            fprintf(f,
                    "<g>\n<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"15\" "
                    "font-weight=\"bold\">%s over time: ",
                    PW / 2, top + 26, panel ? "Jobs waiting" : "GPU allocation");
            xml_text(f, wls[w]);
            fputs("</text>\n", f);
            for (int x = 0; x <= 10; x++) {
                double px = x0 + (double)pw * x / 10;
                fprintf(f,
                        "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#e6e6e6\"/>\n"
                        "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.1f</text>\n",
                        px, y0, px, y0 + ph, px, y0 + ph + 16, span * x / 10 / 86400);
            }
            for (int y = 0; y <= 10; y++) {
                double py = y0 + ph - (double)ph * y / 10;
                fprintf(f,
                        "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e6e6e6\"/>\n"
                        "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.0f</text>\n",
                        x0, py, x0 + pw, py, x0 - 6, py + 4, ymax * y / 10);
            }
            fprintf(f,
                    "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
                    "stroke=\"#333\"/>\n<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">Time "
                    "(days)</text>\n<text transform=\"translate(%d,%d) rotate(-90)\" "
                    "text-anchor=\"middle\">%s</text>\n",
                    x0, y0, pw, ph, x0 + pw / 2, y0 + ph + 40, 18, y0 + ph / 2,
                    panel ? "Jobs waiting" : "GPUs allocated (%)");
            /* One line per (policy, queue): its first seed. */
            for (int i = 0; i < n; i++) {
                bool first = true;
                int ly;
                if (strcmp(r[i].workload, wls[w]) != 0 || r[i].rc != 0)
                    continue;
                for (int k = 0; k < i && first; k++)
                    first = strcmp(r[k].workload, r[i].workload) != 0 ||
                            strcmp(r[k].policy, r[i].policy) != 0 ||
                            strcmp(r[k].ev.queue, r[i].ev.queue) != 0;
                if (!first)
                    continue;
                fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\" points=\"",
                        colours[line % 10]);
                for (int k = 0; k < SIM_NSERIES; k++) {
                    double v = panel ? r[i].ev.pending[k] : r[i].ev.alloc_pct[k];
                    fprintf(f, "%s%.1f,%.1f", k ? " " : "",
                            x0 + (span > 0 ? pw * r[i].ev.t_s[k] / span : 0),
                            y0 + ph - ph * v / ymax);
                }
                fputs("\"/>\n", f);
                ly = y0 + 16 + 18 * line;
                fprintf(f,
                        "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" "
                        "stroke-width=\"3\"/>\n<text x=\"%d\" y=\"%d\">",
                        x0 + 12, ly, x0 + 36, ly, colours[line % 10], x0 + 42, ly + 4);
                xml_text(f, r[i].policy);
                fprintf(f, ", %s queue</text>\n", r[i].ev.queue);
                line++;
            }
            fputs("</g>\n", f);
        }
    }
    fputs("</svg>\n", f);
    if (fclose(f) != 0)
        return arb_errf(err, -EIO, "%s: write error", path);
    return 0;
}
