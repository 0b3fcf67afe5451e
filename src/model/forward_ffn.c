/*
 * forward_ffn — the FFN sublayer: dense (SwiGLU or GeGLU), or a mixture of
 * experts routed by the layer's gating (model/gating.h), plus an optional
 * shared expert (gated by a sigmoid for qwen2moe). MoE tokens are grouped by
 * expert so that each chosen expert's weights are read once per batch.
 */
#include "forward_internal.h"

#include <math.h>
#include <string.h>

#include "core/kernels/kernels.h"
#include "model/gating.h"

typedef struct {
    swiglu_fn act; /* the path's SwiGLU or GeGLU kernel */
    float *g;
    const float *u;
    size_t n;
} act_job;

static void act_work(void *ctx, int ith, int nth) {
    act_job *j = ctx;
    const size_t lo = j->n * ith / nth, hi = j->n * (ith + 1) / nth;
    j->act(j->g + lo, j->u + lo, hi - lo);
}

/* g = act(g) * u, over the pool when there is enough of it */
static void gated_act(fwd_state *st, float *g, const float *u, size_t n) {
    act_job j = {st->m->hp.act == ACT_GELU ? kernel_geglu() : kernel_swiglu(), g, u, n};
    if (n < (size_t)MIN_PARALLEL_MACS / 4) act_work(&j, 0, 1);
    else tpool_run(st->pool, act_work, &j);
}

/* gate and up of T rows of x (rows: their batch rows, NULL: 0..T-1) into hg and hu, adapters
 * added; k0: LORA_GATE or LORA_GATE_SH (up and down follow it). */
static err_code gate_up(fwd_state *st, const model_mat *w, int layer, lora_kind k0, int e, const float *x, int T,
                        const int32_t *rows, err_t *err) {
    err_code rc = fwd_mat_mul_set(st, (const model_mat *[]){&w[0], &w[1]}, 2, x, T, (float *[]){st->hg, st->hu}, err);
    if (!rc) rc = fwd_lora(st, layer, k0, e, x, T, rows, st->hg, err);
    if (!rc) rc = fwd_lora(st, layer, k0 + 1, e, x, T, rows, st->hu, err);
    return rc;
}

/* down of the T rows of hg into y, adapters added */
static err_code down(fwd_state *st, const model_mat *w, int layer, lora_kind k, int e, int T, const int32_t *rows,
                     float *y, err_t *err) {
    err_code rc = fwd_mat_mul(st, w, st->hg, T, y, err);
    return rc ? rc : fwd_lora(st, layer, k, e, st->hg, T, rows, y, err);
}

static err_code ffn_dense(fwd_state *st, int layer, int T, err_t *err) {
    const model_layer *L = &st->m->layers[layer];
    err_code rc = gate_up(st, (const model_mat[]){L->w_gate, L->w_up}, layer, LORA_GATE, 0, st->xn, T, NULL, err);
    if (rc) return rc;
    gated_act(st, st->hg, st->hu, (size_t)T * (size_t)L->w_gate.n_out);
    return down(st, &L->w_down, layer, LORA_DOWN, 0, T, NULL, st->ffn_out, err);
}

void model_expert_mats(const model *m, int layer, int expert, model_mat mats[3]) {
    const model_layer *L = &m->layers[layer];
    if (!L->gate_inp.data) { /* a dense layer of an MoE model: no experts */
        memset(mats, 0, 3 * sizeof *mats);
        return;
    }
    const model_mat *src[3] = {&L->w_gate, &L->w_up, &L->w_down};
    for (int i = 0; i < 3; i++) {
        mats[i] = *src[i];
        mats[i].data = (const uint8_t *)src[i]->data + (size_t)expert * (size_t)src[i]->n_out * src[i]->row_bytes;
        mats[i].n_mat = 1;
    }
}

void fwd_top_k(const float *p, int n, int k, int32_t *idx) {
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < n; e++) {
            bool taken = false;
            for (int i = 0; i < j; i++) taken |= idx[i] == e;
            if (!taken && (best < 0 || p[e] > p[best])) best = e;
        }
        idx[j] = best;
    }
}

void fwd_route(float *scores, int n, int k, int32_t *chosen, float *w) {
    const moe_gating mixtral = {.func = GATE_SOFTMAX, .norm = true, .scale = 1.0f};
    gating_route(&mixtral, scores, n, k, NULL, chosen, w);
}

/* The next layer's router logits for each token, from this layer's hidden
 * state under the next layer's FFN norm. Called twice per layer: with the
 * residual entering this FFN (what the next layer would route to if this
 * FFN changed nothing: the store reads ahead while the FFN computes), and
 * with the layer's output (closer, read while the next attention computes). */
err_code fwd_predict_next(fwd_state *st, const experts_iface *ex, int layer, int T, err_t *err) {
    const model_hparams *hp = &st->m->hp;
    const int E = hp->n_embd;
    const model_layer *N = &st->m->layers[layer + 1];
    for (int t = 0; t < T; t++)
        fwd_rmsnorm(st->xe + (size_t)t * E, st->x + (size_t)t * E, N->ffn_norm.data, E, hp->rms_eps);
    err_code rc = fwd_mat_mul(st, &N->gate_inp, st->xe, T, st->route_next, err);
    if (!rc) ex->hint_next(ex->self, layer + 1, st->route_next, T, hp->n_expert);
    return rc;
}

/* The shared expert, added to ffn_out for every token; with gate_inp_sh
 * (qwen2moe) scaled per token by sigmoid(gate_inp_sh . h). */
static err_code ffn_shared(fwd_state *st, int layer, int T, err_t *err) {
    const model_layer *L = &st->m->layers[layer];
    const int E = st->m->hp.n_embd;
    err_code rc = gate_up(st, (const model_mat[]){L->w_gate_sh, L->w_up_sh}, layer, LORA_GATE_SH, 0, st->xn, T, NULL,
                          err);
    if (rc) return rc;
    gated_act(st, st->hg, st->hu, (size_t)T * st->m->hp.n_ff_shexp);
    if ((rc = down(st, &L->w_down_sh, layer, LORA_DOWN_SH, 0, T, NULL, st->eo, err))) return rc;
    const float *gw = L->gate_inp_sh.data;
    for (int t = 0; t < T; t++) {
        float g = 1.0f;
        if (gw) {
            float z = 0.0f;
            for (int d = 0; d < E; d++) z += gw[d] * st->xn[(size_t)t * E + d];
            g = 1.0f / (1.0f + expf(-z));
        }
        for (int d = 0; d < E; d++) st->ffn_out[(size_t)t * E + d] += g * st->eo[(size_t)t * E + d];
    }
    return ERR_OK;
}

/* MoE FFN: route every token, then run each chosen expert once over its
 * tokens; then the shared expert, where there is one. */
static err_code ffn_moe(fwd_state *st, const experts_iface *ex, int layer, int T, err_t *err) {
    const model *m = st->m;
    const model_hparams *hp = &m->hp;
    const model_layer *L = &m->layers[layer];
    const int E = hp->n_embd, k = hp->n_expert_used;
    err_code rc = ERR_OK;
    /* router: the gating's probabilities, top-k, their weights */
    for (int t = 0; t < T && !rc; t++) {
        int32_t *chosen = st->route + (size_t)t * k;
        float *w = st->route_w + (size_t)t * k;
        const int32_t row = t;
        rc = fwd_mat_mul(st, &L->gate_inp, st->xn + (size_t)t * E, 1, st->router, err);
        if (!rc) rc = fwd_lora(st, layer, LORA_ROUTER, 0, st->xn + (size_t)t * E, 1, &row, st->router, err);
        gating_route(&hp->gating, st->router, hp->n_expert, k, L->expert_bias.data, chosen, w);
        if (ex && ex->hint) ex->hint(ex->self, layer, chosen, k);
    }
    if (!rc && ex && ex->hint_next && layer + 1 < hp->n_layer && m->layers[layer + 1].gate_inp.data)
        rc = fwd_predict_next(st, ex, layer, T, err);
    memset(st->ffn_out, 0, sizeof(float) * (size_t)T * E);
    for (int e = 0; e < hp->n_expert && !rc; e++) {
        /* the tokens routed to expert e, and their weights */
        int n = 0;
        for (int t = 0; t < T; t++)
            for (int j = 0; j < k; j++)
                if (st->route[(size_t)t * k + j] == e) {
                    st->members[n] = t;
                    st->member_w[n++] = st->route_w[(size_t)t * k + j];
                }
        if (n == 0) continue;
        model_mat w[3];
        if (ex) rc = ex->get(ex->self, layer, e, w, err);
        else model_expert_mats(m, layer, e, w);
        if (rc) break;
        for (int i = 0; i < n; i++) memcpy(st->xe + (size_t)i * E, st->xn + (size_t)st->members[i] * E, sizeof(float) * E);
        if ((rc = gate_up(st, w, layer, LORA_GATE, e, st->xe, n, st->members, err))) break;
        gated_act(st, st->hg, st->hu, (size_t)n * hp->n_ff);
        if ((rc = down(st, &w[2], layer, LORA_DOWN, e, n, st->members, st->eo, err))) break;
        for (int i = 0; i < n; i++) {
            float *out = st->ffn_out + (size_t)st->members[i] * E;
            const float *eo = st->eo + (size_t)i * E;
            for (int d = 0; d < E; d++) out[d] += st->member_w[i] * eo[d];
        }
    }
    if (!rc && L->w_gate_sh.data) rc = ffn_shared(st, layer, T, err);
    return rc;
}

err_code fwd_ffn(fwd_state *st, const experts_iface *ex, int layer, int T, err_t *err) {
    const model_layer *L = &st->m->layers[layer];
    return L->gate_inp.data ? ffn_moe(st, ex, layer, T, err) : ffn_dense(st, layer, T, err);
}
