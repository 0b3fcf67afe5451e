/*
 * backward_moe — an MoE layer's FFN in training, forward and backward
 * (train/backward_int.h), as the forward pass computes it
 * (model/forward_ffn.c): each token's router logits z = W_r xn (+ LoRA),
 * gating_route's top-k and weights, each expert run once over the tokens
 * routed to it (tokens ascending), their outputs weighed and summed into
 * the FFN's output expert by expert, then added to the residual.
 *
 * The backward of one routed pair (t, j) with expert e, weight w_j and
 * unweighted output f: the expert's own backward from w_j · dy[t]; the
 * weight's gradient dw_j = dy[t] · f; and through the gating (softmax over
 * the chosen experts, renormalised, times the gating's scale c: w_j = c
 * softmax_S(z)_j), dz_i = w_i (dw_i - sum over j of (w_j / c) dw_j) for a
 * chosen i and 0 for the others. Which experts are chosen is a constant of
 * the pass (no gradient crosses the top-k). dz then goes back through the
 * router like any product.
 */
#include <string.h>

#include "model/experts_iface.h"
#include "model/gating.h"
#include "train/backward_int.h"

/* Expert e's pair of an adapted stack (lora.h's layout), in v; NULL when t is. */
static const lora_tensor *expert_view(const lora_tensor *t, int e, lora_tensor *v) {
    if (!t) return NULL;
    *v = *t;
    v->a = t->a + (size_t)e * (size_t)t->rank * (size_t)t->n_in;
    v->bt = t->bt + (size_t)e * (size_t)t->rank * t->bt_stride;
    v->n_mat = 1;
    return v;
}

/* Route every token (S->route, S->route_w) and group the pairs by expert (S->off, S->pair). */
static void route(tctx *c, int l, saved *S, const float *xn) {
    const model_layer *L = &c->m->layers[l];
    const int n = c->n, X = c->X, k = c->XK;
    lin_fwd(c, &L->gate_inp, adapted(c, l, LORA_ROUTER), xn, n, c->z);
    if (c->rc) return;
    for (int t = 0; t < n; t++)
        gating_route(&c->m->hp.gating, c->z + (size_t)t * X, X, k, L->expert_bias.data, S->route + (size_t)t * k,
                     S->route_w + (size_t)t * k);
    int r = 0;
    for (int e = 0; e < X; e++) {
        S->off[e] = r;
        for (int p = 0; p < n * k; p++)
            if (S->route[p] == e) S->pair[r++] = p;
        if (c->counts && c->counting) c->counts[(size_t)l * X + e] += r - S->off[e];
    }
    S->off[X] = r;
}

/* The xn rows of expert e's grouped rows, into xe; their count. */
static int gather(const tctx *c, const saved *S, int e, const float *xn, float *xe) {
    const int n_rows = S->off[e + 1] - S->off[e];
    for (int i = 0; i < n_rows; i++)
        memcpy(xe + (size_t)i * c->E, xn + (size_t)(S->pair[S->off[e] + i] / c->XK) * c->E, sizeof(float) * c->E);
    return n_rows;
}

void moe_ffn_fwd(tctx *c, int l, saved *S, const float *xn, float *x, float *act) {
    const int n = c->n, E = c->E, F = c->F;
    route(c, l, S, xn);
    memset(c->fo, 0, sizeof(float) * (size_t)n * E);
    for (int e = 0; e < c->X && !c->rc; e++) {
        const int rows = gather(c, S, e, xn, c->xe), r0 = S->off[e];
        if (!rows) continue;
        model_mat w[3];
        lora_tensor v[3];
        model_expert_mats(c->m, l, e, w);
        float *g = S->g + (size_t)r0 * F, *u = S->u + (size_t)r0 * F, *eo = S->eo + (size_t)r0 * E;
        lin_fwd(c, &w[0], expert_view(adapted(c, l, LORA_GATE), e, &v[0]), c->xe, rows, g);
        lin_fwd(c, &w[1], expert_view(adapted(c, l, LORA_UP), e, &v[1]), c->xe, rows, u);
        for (size_t i = 0; i < (size_t)rows * F; i++) act[i] = g[i] * sigm(g[i]) * u[i];
        lin_fwd(c, &w[2], expert_view(adapted(c, l, LORA_DOWN), e, &v[2]), act, rows, eo);
        for (int i = 0; i < rows && !c->rc; i++) {
            const int p = S->pair[r0 + i];
            float *o = c->fo + (size_t)(p / c->XK) * E;
            for (int d = 0; d < E; d++) o[d] += S->route_w[p] * eo[(size_t)i * E + d];
        }
    }
    for (size_t i = 0; i < (size_t)n * E; i++) x[i] += c->fo[i];
}

/* Expert e's backward: from w_j dy[t] for each of its rows, the gradients of its matrices (and
 * adapter), and its inputs' added to dxn. */
static void expert_bwd(tctx *c, int l, const saved *S, int e, const float *dx, const bscratch *b) {
    const int E = c->E, F = c->F, r0 = S->off[e], rows = gather(c, S, e, b->xn, b->xe);
    if (!rows) return;
    for (int i = 0; i < rows; i++) {
        const int p = S->pair[r0 + i];
        const float *dy = dx + (size_t)(p / c->XK) * E;
        for (int d = 0; d < E; d++) b->dO[(size_t)i * E + d] = S->route_w[p] * dy[d];
    }
    const float *g = S->g + (size_t)r0 * F, *u = S->u + (size_t)r0 * F;
    const size_t nf = (size_t)rows * F;
    for (size_t i = 0; i < nf; i++) b->act[i] = g[i] * sigm(g[i]) * u[i];
    model_mat w[3];
    lora_tensor v[3];
    model_expert_mats(c->m, l, e, w);
    memset(b->dact, 0, sizeof(float) * nf);
    lin_bwd(c, &w[2], expert_view(adapted(c, l, LORA_DOWN), e, &v[2]), b->act, b->dO, rows, b->dact);
    for (size_t i = 0; i < nf; i++) {
        const float sg = sigm(g[i]);
        b->du[i] = b->dact[i] * g[i] * sg;
        b->dg[i] = b->dact[i] * u[i] * sg * (1.0f + g[i] * (1.0f - sg));
    }
    memset(b->dxe, 0, sizeof(float) * (size_t)rows * E);
    lin_bwd(c, &w[0], expert_view(adapted(c, l, LORA_GATE), e, &v[0]), b->xe, b->dg, rows, b->dxe);
    lin_bwd(c, &w[1], expert_view(adapted(c, l, LORA_UP), e, &v[1]), b->xe, b->du, rows, b->dxe);
    for (int i = 0; i < rows; i++) {
        float *to = b->dxn + (size_t)(S->pair[r0 + i] / c->XK) * E;
        for (int d = 0; d < E; d++) to[d] += b->dxe[(size_t)i * E + d];
    }
}

/* d router logits (n, X) from each pair's d weight: the renormalised softmax's backward. */
static void router_grad(const tctx *c, const saved *S, const bscratch *b) {
    const int n = c->n, k = c->XK;
    const float scale = c->m->hp.gating.scale;
    memset(b->dz, 0, sizeof(float) * (size_t)n * c->X);
    for (int t = 0; t < n; t++) {
        const float *w = S->route_w + (size_t)t * k, *dw = b->dw + (size_t)t * k;
        double mean = 0.0;
        for (int j = 0; j < k; j++) mean += (double)w[j] / scale * dw[j];
        for (int j = 0; j < k; j++) b->dz[(size_t)t * c->X + S->route[(size_t)t * k + j]] = (float)(w[j] * (dw[j] - mean));
    }
}

void moe_ffn_bwd(tctx *c, int l, const saved *S, const float *dx, const bscratch *b) {
    const int E = c->E;
    for (int r = 0; r < S->off[c->X]; r++) { /* each pair's d weight: dy[t] . f */
        const int p = S->pair[r];
        const float *dy = dx + (size_t)(p / c->XK) * E, *f = S->eo + (size_t)r * E;
        double dot = 0.0;
        for (int d = 0; d < E; d++) dot += (double)dy[d] * f[d];
        b->dw[p] = (float)dot;
    }
    for (int e = 0; e < c->X && !c->rc; e++) expert_bwd(c, l, S, e, dx, b);
    router_grad(c, S, b);
    lin_bwd(c, &c->m->layers[l].gate_inp, adapted(c, l, LORA_ROUTER), b->xn, b->dz, c->n, b->dxn);
}
