/*
 * upcycle's parts (convert/upcycle.h is the tool): the split of a layer's
 * neurons into experts, the router fit, the writer and the measurements.
 */
#ifndef OCTO_CONVERT_UPCYCLE_INTERNAL_H
#define OCTO_CONVERT_UPCYCLE_INTERNAL_H

#include <stdint.h>

#include "convert/upcycle.h"
#include "core/err.h"
#include "model/model.h"

/* One layer's experts: slot[e * m + j] is the dense neuron in expert e's
 * j-th place, or -1 for a zero (padding) neuron; router[e * n_embd + i] the
 * router row of expert e as written (F32); shared the neurons every token
 * runs. */
typedef struct {
    int32_t *slot;   /* [E * m] */
    float *router;   /* [E * n_embd] */
    int32_t *shared; /* [n_shared] the shared expert's neurons */
} upcycle_layer;

typedef struct {
    const model *dense;
    gguf_ctx *src;          /* the dense file opened again: its tensors as written (the model may re-lay them) */
    int E, K, m;            /* experts, used, neurons per expert (E * m + n_shared >= n_ff) */
    int n_shared;           /* neurons of the shared expert (0: none) */
    float down_scale;       /* K: the renormalised gates are 1/K */
    upcycle_layer *layers;  /* [n_layer] */
} upcycle_plan;

/* --- split (upcycle_split.c) -------------------------------------------
 * Partition n_ff neurons into E groups of m places (E * m >= n_ff; the
 * places left over hold -1). feat: [S][n_ff] non-negative contributions of
 * each neuron on S calibration tokens (cluster only; NULL otherwise). */
/* The n neurons active (in the token's top quarter of contributions) on the
 * most of S tokens, ties to the lower index, into shared[0..n) ascending. */
void upcycle_pick_shared(const float *feat, int S, int n_ff, int n, int32_t *shared);
err_code upcycle_split_layer(upcycle_split kind, const float *feat, int S, int n_ff, int E, int m, uint64_t seed,
                             int32_t *slot, err_t *err);

/* --- router (upcycle_router.c) -----------------------------------------
 * The least-squares problem min_W sum_t |W x_t - y_t|^2 (+ ridge), x the FFN
 * input (n_embd), y the experts' contributions (E), accumulated a batch at
 * a time. */
typedef struct upcycle_lsq upcycle_lsq;
upcycle_lsq *upcycle_lsq_new(int n_in, int n_out);
void upcycle_lsq_free(upcycle_lsq *q);
void upcycle_lsq_add(upcycle_lsq *q, const float *x, const float *y, int T);
/* W [n_out][n_in]; ERR_BAD_VALUE when no rows were added. */
err_code upcycle_lsq_solve(const upcycle_lsq *q, float *W, err_t *err);
/* The root mean square, over the rows added, of the largest pairwise
 * difference of W's outputs (the spread of the router's scores). */
double upcycle_lsq_spread(const upcycle_lsq *q, const float *W);

/* --- writer (upcycle_write.c) ------------------------------------------ */
err_code upcycle_write(const upcycle_plan *p, const upcycle_opts *o, int calib_tokens, const char *path,
                       err_t *err);
/* The type an expert's down rows (m values) use: the dense type when m is a
 * multiple of its block, else the nearest type that holds m. */
uint32_t upcycle_down_type(uint32_t dense_type, int m);

/* --- measurements (upcycle_eval.c) --------------------------------------
 * Dense and upcycled models over the held-out tokens, in chunks from BOS. */
err_code upcycle_measure(const upcycle_plan *p, const model *moe, const int32_t *tok, int n, int32_t bos,
                         int n_threads, upcycle_report *rep, err_t *err);

#endif
