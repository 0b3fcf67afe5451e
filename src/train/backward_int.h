/*
 * backward_int — what the backward pass's files share (train/backward.c, the
 * pass and the dense layers; train/backward_moe.c, an MoE layer's FFN): the
 * pass's context, a layer's saved values and its backward's scratch. Not an
 * interface of train/: only these two files include it.
 */
#ifndef OCTO_TRAIN_BACKWARD_INT_H
#define OCTO_TRAIN_BACKWARD_INT_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "model/lora.h"
#include "model/model.h"
#include "train/linear.h"
#include "train/weights.h"

/* What one layer's forward keeps for its backward. */
typedef struct {
    float *x;        /* (n, E) the residual entering the layer */
    float *r1, *r2;  /* (n) the two norms' 1 / rms */
    float *mid;      /* (n, E) the residual after the attention */
    float *q, *k, *v; /* after RoPE: (n, Q), (n, K), (n, K) */
    float *p;        /* (H, n, n) attention probabilities (row t: keys 0..t) */
    float *att;      /* (n, Q) the heads' output before attn_output */
    float *g, *u;    /* (n, F) gate and up; an MoE layer's (n k, F), its routed pairs grouped by expert */
    /* an MoE layer: the routed pairs (token t's j-th choice is pair t k + j) */
    int32_t *route;  /* (n, k) the experts each token chose, best first */
    float *route_w;  /* (n, k) their weights */
    int32_t *off;    /* (n_expert + 1) where each expert's grouped rows start (rows of g, u, eo) */
    int32_t *pair;   /* (n k) the pair of each grouped row (tokens ascending within an expert) */
    float *eo;       /* (n k, E) each grouped row's expert output, before its weight */
} saved;

typedef struct {
    const model *m;
    const lora_adapter *a;
    float scale;
    const train_weights *w; /* trained weights (m is their view), or NULL */
    const float *soft;      /* (n, V) a teacher's distributions, or NULL */
    float *grad;     /* NULL: the loss alone */
    int n, E, H, KV, hd, Q, K, F, V;
    int X, XK;       /* MoE: experts, and experts a token runs (0, 0: dense) */
    saved *L;        /* [n_layer] (recompute: only each one's x) */
    bool recompute;  /* activation checkpointing: a layer's values computed again for its backward, in work
                        (a pass without a gradient runs every layer in work: nothing is read back) */
    saved work;
    float *xr;       /* (n, E): the layer input a recomputation runs on */
    float *cs;       /* (n, n_rot) RoPE angles per position */
    float *xe, *fo, *z; /* MoE forward scratch: (n, E) an expert's inputs, (n, E) the FFN's sum, (n, X) router */
    int64_t *counts; /* [n_layer][X] tokens routed to each expert, added to while counting (or NULL) */
    bool counting;   /* the pass's own forward (not a recomputation) */
    train_ctx *tc;   /* the products' threads */
    err_code rc;     /* the first failure (every later step is skipped) */
    err_t *err;
} tctx;

/* Scratch of the backward of a layer. */
typedef struct {
    float *xn, *act, *dact, *dg, *du, *dxn, *datt, *dq, *dk, *dv;
    float *xe, *dO, *dxe, *dz, *dw; /* MoE: (n, E) x 3, (n, X), (n k) */
} bscratch;

static inline float sigm(float x) { return 1.0f / (1.0f + expf(-x)); }

/* The adapter's tensor of kind k in layer l, when it is applied. */
const lora_tensor *adapted(const tctx *c, int layer, lora_kind k);
/* y[t] = W x[t] (+ s B A x[t]) for n rows; its backward: dx[t] += W^T dy[t] (+ the pair's), the
 * adapter's and the trained weight's gradients added. The first failure is kept in c->rc. */
void lin_fwd(tctx *c, const model_mat *w, const lora_tensor *lt, const float *x, int n, float *y);
void lin_bwd(tctx *c, const model_mat *w, const lora_tensor *lt, const float *x, const float *dy, int n, float *dx);

/* An MoE layer's FFN (train/backward_moe.c): xn (n, E) the normed residual, its output added to x;
 * act: (n, F) scratch. Its backward: b->xn holds xn again, dx the gradient of the layer's output;
 * the gradient of xn added to b->dxn. */
void moe_ffn_fwd(tctx *c, int l, saved *S, const float *xn, float *x, float *act);
void moe_ffn_bwd(tctx *c, int l, const saved *S, const float *dx, const bscratch *b);

#endif
