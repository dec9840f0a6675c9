/*
 * paper.h: the FGD paper's placement policies as core score plugins
 * (Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads
 * with Fragmentation Gradient Descent", USENIX ATC'23), and the
 * fragmentation measure they share with the simulator's metrics.
 *
 * score_fgd.c    fgd: fragmentation gradient descent, with its GPU picker
 * score_paper.c  random, dotprod, gpu-clustering, gpu-packing, bestfit
 * score_fgdla.c  fgd-la: Arbiter's own refinement of FGD (not the paper's)
 *
 * Every plugin reproduces the paper's artifact (the Kubernetes scheduler
 * simulator): raw scores are the artifact's integers 0..100, kept as they
 * are (BestFit alone is min-max rescaled with integer arithmetic, as there),
 * so that ties are the artifact's ties. The artifact's scheduler gives a tie
 * to the first node in a per-run random order; the paper's profiles break
 * ties by the lowest node id and the simulator numbers nodes in a seeded
 * random order (docs/sim.md, "Ties"). Random alone draws among ties.
 * Private to src/core and src/sim; not a public API.
 */
#ifndef ARB_PAPER_H
#define ARB_PAPER_H

#include "arbiter/sched.h"

extern const arb_score_ops_t arb_score_fgd;
extern const arb_score_ops_t arb_score_random;
extern const arb_score_ops_t arb_score_dotprod;
extern const arb_score_ops_t arb_score_gpu_clustering;
extern const arb_score_ops_t arb_score_gpu_packing;
extern const arb_score_ops_t arb_score_bestfit;
/* Arbiter's own: FGD with look-ahead tie-breaking (score_fgdla.c). */
extern const arb_score_ops_t arb_score_fgd_la;

/* ---- the fragmentation measure (score_fgd.c) ----------------------------
 *
 * A table of task shapes with their popularity. Counting tasks into it and
 * then building it keeps the most popular shapes that together cover 95% of
 * the tasks counted (the artifact's "typical pods"), with renormalised
 * popularity p_m. A node's fragmentation is then
 *
 *   F_n = sum_m p_m * f_n(m)   (GPU milli)
 *
 * where f_n(m) is all of n's idle GPU milli when m needs no GPU, cannot use
 * n's GPU model, lacks CPU on n or does not fit n's GPUs; otherwise only the
 * idle milli of the GPUs whose free share is below m's per-GPU request.
 */
typedef struct fgd_table fgd_table_t;

/* A new, empty table; strs (borrowed, must outlive it) names GPU models for
 * the artifact's ordering of equally popular shapes. NULL on -ENOMEM. Free
 * with fgd_table_free. */
fgd_table_t *fgd_table_new(const arb_strtab_t *strs);
void fgd_table_free(fgd_table_t *t);
/* Count every task of j (replicas included). 0 or -ENOMEM. */
int fgd_table_count(fgd_table_t *t, const arb_job_t *j);
/* Choose the shapes covering 95% of the tasks counted so far. 0 or -ENOMEM. */
int fgd_table_build(fgd_table_t *t);
/* Number of shapes kept by the last build, and tasks counted. */
int fgd_table_kept(const fgd_table_t *t);
double fgd_table_tasks(const fgd_table_t *t);
/* F_n of node n as it is now (0 before the first build). */
double fgd_node_frag(const fgd_table_t *t, const arb_node_t *n);

/* Every shape counted so far (also those outside the 95%), by index
 * 0..nshapes-1: its request and how many tasks had it. A shape's memory is
 * the mean of its tasks' (memory is not part of the artifact's shape). */
typedef struct fgd_shape_info {
    int64_t cpu_milli; /* never 0: kube-scheduler's default of 100 */
    int32_t gpu_milli; /* per GPU: 1000 whole, 1..999 a share, 0 none */
    int32_t gpus;
    int32_t nmodels; /* allowed GPU models; 0 any */
    uint32_t models[8];
    double count;
    double mem_bytes;
} fgd_shape_info_t;

int fgd_table_nshapes(const fgd_table_t *t);
void fgd_table_shape(const fgd_table_t *t, int i, fgd_shape_info_t *out);

/* For plugins built on FGD (score_fgdla.c): FGD's integer score (0..99) of
 * placing the task of pc on n, -1 when it does not fit; for a GPU share
 * also each GPU's score in gpu_scores (-1 where the share cannot go).
 * pc->state must be an FGD state (arb_score_fgd.init). */
int fgd_gpu_scores(const arb_pctx_t *pc, const arb_node_t *n, int8_t gpu_scores[ARB_MAX_GPUS]);
/* For the task of pc (state as above): F_after - F_before on n, in GPU
 * milli, of its share on GPU gpu, or of its whole GPUs (gpu ignored); NAN
 * when it does not fit there. FGD's score is int(100 sigmoid(-delta/1000)). */
double fgd_delta(const arb_pctx_t *pc, const arb_node_t *n, int gpu);
/* For the task of pc (state as above): a number bumped whenever FGD's
 * scores may change for an unchanged node (its table was rebuilt), for
 * caches of them to key on. */
uint32_t fgd_generation(const arb_pctx_t *pc);

#endif
