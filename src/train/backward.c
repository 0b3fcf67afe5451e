/*
 * backward — a sequence's loss and its gradient with respect to a LoRA
 * adapter (train/backward.h).
 */
#include "train/backward.h"
#include "train/backward_int.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/quant.h"
#include "model/forward.h"
#include "train/linear.h"
#include "train/weights.h"

/* ---------------------------------------------------------------- products */

const lora_tensor *adapted(const tctx *c, int layer, lora_kind k) {
    return c->a && c->scale != 0.0f ? lora_find(c->a, layer, k) : NULL;
}

static lin_lora pair(const tctx *c, const lora_tensor *lt, bool grads) {
    lin_lora l = {.t = lt};
    if (!lt) return l;
    l.s = lora_scale(c->a, lt, c->scale);
    if (grads && c->grad) l.ga = c->grad + lora_index(c->a, lt->a), l.gb = c->grad + lora_index(c->a, lt->bt);
    return l;
}

/* y[t] = W x[t] (+ s B A x[t]) for n rows (train/linear.h). */
void lin_fwd(tctx *c, const model_mat *w, const lora_tensor *lt, const float *x, int n, float *y) {
    const lin_lora l = pair(c, lt, false);
    if (!c->rc) c->rc = lin_forward(c->tc, w, &l, x, n, y, c->err);
}

/* The backward of lin_fwd: dx[t] += W^T dy[t] (+ s A^T B^T dy[t]); the adapter's gradients added. */
void lin_bwd(tctx *c, const model_mat *w, const lora_tensor *lt, const float *x, const float *dy, int n,
                    float *dx) {
    const lin_lora l = pair(c, lt, true);
    if (!c->rc) c->rc = lin_backward(c->tc, w, &l, x, dy, n, dx, c->err);
    float *gw = c->w && !c->rc ? train_weights_grad(c->w, c->grad, w) : NULL;
    if (gw) lin_weight_grad(c->tc, x, dy, n, w->n_in, w->n_out, gw);
}

/* A trained norm's or bias's gradient: g[i] += sum over t of dy[t][i] (x[t][i] r[t]), or of dy[t][i]
 * when x is NULL (a bias). */
static void vec_grad(const tctx *c, const model_mat *w, const float *x, const float *r, const float *dy, int n,
                     int E) {
    float *g = c->w && !c->rc ? train_weights_grad(c->w, c->grad, w) : NULL;
    if (!g) return;
    for (int t = 0; t < n; t++)
        for (int i = 0; i < E; i++) {
            const size_t at = (size_t)t * E + i;
            g[i] += x ? dy[at] * x[at] * r[t] : dy[at];
        }
}

/* ---------------------------------------------------------------- norms, RoPE, activations */

/* y = x / rms(x) * w for n rows of E; r[t] = 1 / rms. */
static void norm_fwd(const float *x, const float *w, int n, int E, float eps, float *y, float *r) {
    for (int t = 0; t < n; t++) {
        const float *xt = x + (size_t)t * E;
        double ss = 0.0;
        for (int i = 0; i < E; i++) ss += (double)xt[i] * xt[i];
        r[t] = 1.0f / sqrtf((float)(ss / E) + eps);
        for (int i = 0; i < E; i++) y[(size_t)t * E + i] = xt[i] * r[t] * w[i];
    }
}

/* dx += d/dx of norm_fwd given dy: r (w dy) - x r^3 / E * sum(w dy x). */
static void norm_bwd(const float *x, const float *w, const float *r, const float *dy, int n, int E, float *dx) {
    for (int t = 0; t < n; t++) {
        const float *xt = x + (size_t)t * E, *dyt = dy + (size_t)t * E;
        double dot = 0.0;
        for (int i = 0; i < E; i++) dot += (double)w[i] * dyt[i] * xt[i];
        const double rt = r[t], k = rt * rt * rt * dot / E;
        for (int i = 0; i < E; i++) dx[(size_t)t * E + i] += (float)(rt * w[i] * dyt[i] - xt[i] * k);
    }
}

/* RoPE on n rows of heads (transpose: the rotation back, for gradients). */
static void rope_rows(const tctx *c, float *v, int n, int heads, bool transpose) {
    const model_hparams *hp = &c->m->hp;
    float cs[512];
    for (int t = 0; t < n; t++) {
        memcpy(cs, c->cs + (size_t)t * hp->n_rot, sizeof(float) * (size_t)hp->n_rot);
        for (int i = 1; transpose && i < hp->n_rot; i += 2) cs[i] = -cs[i];
        fwd_rope_apply(v + (size_t)t * heads * c->hd, heads, c->hd, hp->n_rot, hp->rope_neox, cs);
    }
}

/* ---------------------------------------------------------------- attention */

typedef struct {
    tctx *c;
    saved *S;
    const float *datt;
    float *dq, *dk, *dv;
} attn_job;

/* The rows of one KV head of x ((n, stride) row-major) as columns: xT[i][s] = x[s][at + i], i < hd, s < n:
 * the per-key loops below then run along contiguous memory. */
static void head_columns(const float *x, int n, int stride, int at, int hd, float *xT) {
    for (int s = 0; s < n; s++)
        for (int i = 0; i < hd; i++) xT[(size_t)i * n + s] = x[(size_t)s * stride + at + i];
}

/* p[s] = sum over i of a[i] xT[i][s] for s < m (a key's score, or d p from d att and V). */
static void head_dots(const float *a, const float *xT, int n, int hd, int m, float *p) {
    for (int s = 0; s < m; s++) p[s] = 0.0f;
    for (int i = 0; i < hd; i++) {
        const float ai = a[i], *x = xT + (size_t)i * n;
        for (int s = 0; s < m; s++) p[s] += ai * x[s];
    }
}

/* att[t][h] = sum over s <= t of softmax_s(q[t][h] . k[s][h/g] * scale) v[s][h/g]; p keeps the weights.
 * Thread ith takes heads ith, ith + nth, ... */
static void attn_fwd_heads(void *job, int ith, int nth) {
    const attn_job *j = job;
    const tctx *c = j->c;
    saved *S = j->S;
    const int n = c->n, g = c->H / c->KV, hd = c->hd;
    const float scale = c->m->hp.attn_scale;
    float *kT = train_ctx_buffer(c->tc, ith), *qs = kT + (size_t)hd * n; /* attn_fwd reserved them */
    for (int h = ith; h < c->H; h += nth) {
        head_columns(S->k, n, c->K, (h / g) * hd, hd, kT);
        for (int t = 0; t < n; t++) {
            const float *q = S->q + (size_t)t * c->Q + (size_t)h * hd;
            float *p = S->p + ((size_t)h * n + t) * n;
            for (int i = 0; i < hd; i++) qs[i] = q[i] * scale;
            head_dots(qs, kT, n, hd, t + 1, p);
            float mx = -INFINITY;
            for (int s = 0; s <= t; s++) mx = p[s] > mx ? p[s] : mx;
            double sum = 0.0;
            for (int s = 0; s <= t; s++) sum += (p[s] = expf(p[s] - mx));
            const float inv = (float)(1.0 / sum);
            for (int s = 0; s <= t; s++) p[s] *= inv;
            float *o = S->att + (size_t)t * c->Q + (size_t)h * hd;
            for (int i = 0; i < hd; i++) o[i] = 0.0f;
            for (int s = 0; s <= t; s++) {
                const float *v = S->v + (size_t)s * c->K + (size_t)(h / g) * hd, ps = p[s];
                for (int i = 0; i < hd; i++) o[i] += ps * v[i];
            }
        }
    }
}

static void attn_fwd(tctx *c, saved *S) {
    attn_job j = {.c = c, .S = S};
    if (!c->rc) c->rc = train_ctx_reserve(c->tc, (size_t)(c->hd + 1) * (size_t)c->n + (size_t)c->hd, c->err);
    if (!c->rc) train_ctx_run(c->tc, attn_fwd_heads, &j);
}

/* One head's row t: dq[t], and dk, dv of keys 0..t added to, from d att[t] (do_); ds: t + 1 floats. */
static void attn_bwd_row(const attn_job *j, int h, int t, const float *vT, float *ds) {
    const tctx *c = j->c;
    const saved *S = j->S;
    const int n = c->n, hd = c->hd, at = (h / (c->H / c->KV)) * hd;
    const float scale = c->m->hp.attn_scale;
    const float *p = S->p + ((size_t)h * n + t) * n, *do_ = j->datt + (size_t)t * c->Q + (size_t)h * hd;
    head_dots(do_, vT, n, hd, t + 1, ds); /* d p */
    double pdp = 0.0;
    for (int s = 0; s <= t; s++) {
        float *dvs = j->dv + (size_t)s * c->K + at;
        const float ps = p[s];
        for (int i = 0; i < hd; i++) dvs[i] += ps * do_[i];
        pdp += (double)ps * ds[s];
    }
    const float *q = S->q + (size_t)t * c->Q + (size_t)h * hd;
    float *dqt = j->dq + (size_t)t * c->Q + (size_t)h * hd;
    for (int s = 0; s <= t; s++) {
        const float d = p[s] * (ds[s] - (float)pdp) * scale;
        const float *k = S->k + (size_t)s * c->K + at;
        float *dks = j->dk + (size_t)s * c->K + at;
        for (int i = 0; i < hd; i++) dqt[i] += d * k[i], dks[i] += d * q[i];
    }
}

/* From d att: dq, dk, dv (each added to). Thread ith takes the KV groups ith, ith + nth, ... (a
 * group's heads add to its dk and dv). */
static void attn_bwd_groups(void *job, int ith, int nth) {
    const attn_job *j = job;
    const tctx *c = j->c;
    const int n = c->n, g = c->H / c->KV, hd = c->hd;
    float *vT = train_ctx_buffer(c->tc, ith), *ds = vT + (size_t)hd * n; /* attn_bwd reserved them */
    for (int kv = ith; kv < c->KV; kv += nth) {
        head_columns(j->S->v, n, c->K, kv * hd, hd, vT);
        for (int h = kv * g; h < (kv + 1) * g; h++)
            for (int t = 0; t < n; t++) attn_bwd_row(j, h, t, vT, ds);
    }
}

static void attn_bwd(tctx *c, saved *S, const float *datt, float *dq, float *dk, float *dv) {
    attn_job j = {c, S, datt, dq, dk, dv};
    if (!c->rc) c->rc = train_ctx_reserve(c->tc, (size_t)(c->hd + 1) * (size_t)c->n + (size_t)c->hd, c->err);
    if (!c->rc) train_ctx_run(c->tc, attn_bwd_groups, &j);
}

/* ---------------------------------------------------------------- layers */

static void add_bias(float *y, const model_mat *b, int n, int dim) {
    if (!b->data) return;
    for (int t = 0; t < n; t++)
        for (int i = 0; i < dim; i++) y[(size_t)t * dim + i] += ((const float *)b->data)[i];
}

/* x (n, E) through layer l, into x; what the backward needs kept in S. tmp: (n, max(E, F)) scratch. */
static void layer_fwd(tctx *c, int l, saved *S, float *x, float *xn, float *tmp) {
    const model_layer *L = &c->m->layers[l];
    const int n = c->n, E = c->E;
    const float eps = c->m->hp.rms_eps;
    memcpy(S->x, x, sizeof(float) * (size_t)n * E);
    norm_fwd(x, L->attn_norm.data, n, E, eps, xn, S->r1);
    lin_fwd(c, &L->wq, adapted(c, l, LORA_Q), xn, n, S->q);
    lin_fwd(c, &L->wk, adapted(c, l, LORA_K), xn, n, S->k);
    lin_fwd(c, &L->wv, adapted(c, l, LORA_V), xn, n, S->v);
    add_bias(S->q, &L->bq, n, c->Q), add_bias(S->k, &L->bk, n, c->K), add_bias(S->v, &L->bv, n, c->K);
    rope_rows(c, S->q, n, c->H, false);
    rope_rows(c, S->k, n, c->KV, false);
    attn_fwd(c, S);
    lin_fwd(c, &L->wo, adapted(c, l, LORA_O), S->att, n, tmp);
    for (size_t i = 0; i < (size_t)n * E; i++) x[i] += tmp[i];
    memcpy(S->mid, x, sizeof(float) * (size_t)n * E);
    norm_fwd(x, L->ffn_norm.data, n, E, eps, xn, S->r2);
    if (c->X) {
        moe_ffn_fwd(c, l, S, xn, x, tmp);
        return;
    }
    lin_fwd(c, &L->w_gate, adapted(c, l, LORA_GATE), xn, n, S->g);
    lin_fwd(c, &L->w_up, adapted(c, l, LORA_UP), xn, n, S->u);
    float *act = tmp; /* (n, F): silu(g) u */
    for (size_t i = 0; i < (size_t)n * c->F; i++) act[i] = S->g[i] * sigm(S->g[i]) * S->u[i];
    float *down = xn; /* xn is free again: it is recomputed in the backward */
    lin_fwd(c, &L->w_down, adapted(c, l, LORA_DOWN), act, n, down);
    for (size_t i = 0; i < (size_t)n * E; i++) x[i] += down[i];
}

/* A dense FFN's backward: b->xn holds its normed input, dx the gradient of its output; the gradient
 * of its input added to b->dxn. */
static void dense_ffn_bwd(tctx *c, int l, const saved *S, const float *dx, const bscratch *b) {
    const model_layer *L = &c->m->layers[l];
    const int n = c->n;
    const size_t nf = (size_t)n * c->F;
    for (size_t i = 0; i < nf; i++) b->act[i] = S->g[i] * sigm(S->g[i]) * S->u[i];
    memset(b->dact, 0, sizeof(float) * nf);
    lin_bwd(c, &L->w_down, adapted(c, l, LORA_DOWN), b->act, dx, n, b->dact);
    for (size_t i = 0; i < nf; i++) {
        const float g = S->g[i], sg = sigm(g);
        b->du[i] = b->dact[i] * g * sg;
        b->dg[i] = b->dact[i] * S->u[i] * sg * (1.0f + g * (1.0f - sg));
    }
    lin_bwd(c, &L->w_gate, adapted(c, l, LORA_GATE), b->xn, b->dg, n, b->dxn);
    lin_bwd(c, &L->w_up, adapted(c, l, LORA_UP), b->xn, b->du, n, b->dxn);
}

/* dx (n, E): in, the gradient of the layer's output; out, of its input. */
static void layer_bwd(tctx *c, int l, saved *S, float *dx, const bscratch *b) {
    const model_layer *L = &c->m->layers[l];
    const int n = c->n, E = c->E;
    /* FFN: x_out = mid + down(silu(g) u), g/u from norm2(mid) */
    for (int t = 0; t < n; t++)
        for (int i = 0; i < E; i++) b->xn[(size_t)t * E + i] = S->mid[(size_t)t * E + i] * S->r2[t] * ((const float *)L->ffn_norm.data)[i];
    memset(b->dxn, 0, sizeof(float) * (size_t)n * E);
    if (c->X) moe_ffn_bwd(c, l, S, dx, b);
    else dense_ffn_bwd(c, l, S, dx, b);
    vec_grad(c, &L->ffn_norm, S->mid, S->r2, b->dxn, n, E);
    norm_bwd(S->mid, L->ffn_norm.data, S->r2, b->dxn, n, E, dx); /* dx now d mid (the residual kept it) */
    /* attention: mid = x + wo(att), att from norm1(x) */
    memset(b->datt, 0, sizeof(float) * (size_t)n * c->Q);
    lin_bwd(c, &L->wo, adapted(c, l, LORA_O), S->att, dx, n, b->datt);
    memset(b->dq, 0, sizeof(float) * (size_t)n * c->Q);
    memset(b->dk, 0, sizeof(float) * (size_t)n * c->K);
    memset(b->dv, 0, sizeof(float) * (size_t)n * c->K);
    attn_bwd(c, S, b->datt, b->dq, b->dk, b->dv);
    rope_rows(c, b->dq, n, c->H, true);
    rope_rows(c, b->dk, n, c->KV, true);
    vec_grad(c, &L->bq, NULL, NULL, b->dq, n, c->Q), vec_grad(c, &L->bk, NULL, NULL, b->dk, n, c->K);
    vec_grad(c, &L->bv, NULL, NULL, b->dv, n, c->K);
    for (int t = 0; t < n; t++)
        for (int i = 0; i < E; i++) b->xn[(size_t)t * E + i] = S->x[(size_t)t * E + i] * S->r1[t] * ((const float *)L->attn_norm.data)[i];
    memset(b->dxn, 0, sizeof(float) * (size_t)n * E);
    lin_bwd(c, &L->wq, adapted(c, l, LORA_Q), b->xn, b->dq, n, b->dxn);
    lin_bwd(c, &L->wk, adapted(c, l, LORA_K), b->xn, b->dk, n, b->dxn);
    lin_bwd(c, &L->wv, adapted(c, l, LORA_V), b->xn, b->dv, n, b->dxn);
    vec_grad(c, &L->attn_norm, S->x, S->r1, b->dxn, n, E);
    norm_bwd(S->x, L->attn_norm.data, S->r1, b->dxn, n, E, dx);
}

/* ---------------------------------------------------------------- the whole */

/* An MoE model's refusals: the gating training's backward covers, and experts in every layer. */
static err_code check_moe(const model *m, err_t *err) {
    const model_hparams *hp = &m->hp;
    if (!hp->n_expert) return ERR_OK;
    const moe_gating *g = &hp->gating;
    if (g->func != GATE_SOFTMAX || !g->norm || g->n_group > 1 || !(g->scale > 0.0f) || !isfinite(g->scale))
        return err_set(err, ERR_UNSUPPORTED, "training an MoE covers softmax gating with the chosen weights "
                                             "renormalised (Mixtral's) so far, not this %s model's", hp->arch_name);
    for (int l = 0; l < hp->n_layer; l++) {
        const model_layer *L = &m->layers[l];
        if (!L->gate_inp.data || L->expert_bias.data || L->w_gate_sh.data)
            return err_set(err, ERR_UNSUPPORTED, "training an MoE covers layers of routed experts alone so far; "
                                                 "layer %d has %s", l, !L->gate_inp.data ? "a dense FFN"
                                                 : L->expert_bias.data ? "a selection bias" : "a shared expert");
    }
    return ERR_OK;
}

static err_code check(const model *m, const lora_adapter *a, int n, err_t *err) {
    const model_hparams *hp = &m->hp;
    if (n < 2) return err_set(err, ERR_INVALID_ARG, "a training sequence needs 2 tokens or more, not %d", n);
    err_code rc = check_moe(m, err);
    if (rc) return rc;
    if (hp->kv_lora_rank || hp->post_norms || hp->qk_norm || hp->attn_softcap > 0 ||
        hp->final_softcap > 0 || hp->act != ACT_SILU || hp->embd_scale != 1.0f || hp->residual_scale != 1.0f ||
        hp->logit_scale != 1.0f || hp->swa_window || hp->n_rot > 512 || hp->fused_qkv || hp->fused_gate_up)
        return err_set(err, ERR_UNSUPPORTED, "training covers llama-family models so far, not this %s model",
                       hp->arch_name);
    if (a && lora_find(a, -1, LORA_OUTPUT))
        return err_set(err, ERR_UNSUPPORTED, "training an adapter of the output projection is not supported yet");
    const model_mat *mats[12];
    for (int l = -1; l < hp->n_layer; l++) {
        const int k = model_matrices(m, l, mats);
        for (int i = 0; i < k; i++)
            if (mats[i]->data && mats[i]->packed)
                return err_set(err, ERR_UNSUPPORTED, "training reads weights in the file's layout: open the model "
                                                     "without packing (model_open)");
    }
    return ERR_OK;
}

err_code train_supported(const model *m, const lora_adapter *a, err_t *err) { return check(m, a, 2, err); }

typedef struct {
    void **p;
    int n;
    bool dry;       /* count the bytes alone (train_activation_bytes) */
    uint64_t bytes;
} allocs;

#define OUT_ROWS 64 /* positions whose logits are held at once */

static float *take(allocs *al, size_t n) {
    al->bytes += sizeof(float) * (uint64_t)(n ? n : 1);
    if (al->dry) return (float *)al; /* not NULL: nothing is written through it */
    float *p = calloc(n ? n : 1, sizeof(float));
    if (p) al->p[al->n++] = p;
    return p;
}

/* Position t's loss against the teacher's distribution p: KL(p || softmax(z)), z becoming d/dz
 * (softmax(z) - p) / counted. */
static double kl_row(float *z, const float *p, int V, double mx, double sum, int counted) {
    double kl = 0.0;
    const double lz = mx + log(sum); /* log q_i = z_i - lz */
    for (int i = 0; i < V; i++) {
        const double lq = (double)z[i] - lz;
        if (p[i] > 0.0f) kl += p[i] * (log((double)p[i]) - lq);
        z[i] = (float)((exp(lq) - p[i]) / counted);
    }
    return kl;
}

/* The summed loss of positions r0..r0 + rows that count (cross entropy with the next tokens, or KL to soft;
 * divided by counted) and their gradient d logits (into logits' place: rows of V). */
static double loss_rows(float *logits, const int32_t *tokens, int r0, int rows, int n, int V, const uint8_t *mask,
                        const float *soft, int counted) {
    double loss = 0.0;
    for (int t = r0; t < r0 + rows; t++) {
        float *z = logits + (size_t)(t - r0) * V;
        if (t + 1 >= n || (mask && !mask[t])) {
            memset(z, 0, sizeof(float) * (size_t)V);
            continue;
        }
        double mx = -INFINITY, sum = 0.0;
        for (int i = 0; i < V; i++) mx = z[i] > mx ? z[i] : mx;
        for (int i = 0; i < V; i++) sum += exp((double)z[i] - mx);
        if (soft) {
            loss += kl_row(z, soft + (size_t)t * V, V, mx, sum, counted);
            continue;
        }
        loss += log(sum) + mx - z[tokens[t + 1]];
        for (int i = 0; i < V; i++) z[i] = (float)(exp((double)z[i] - mx) / sum / counted);
        z[tokens[t + 1]] -= 1.0f / (float)counted;
    }
    return loss / counted;
}

/* The whole pass's buffers: the residual and its scratch, logits, and each layer's saved values. */
typedef struct {
    float *x, *xn, *tmp, *logits, *dx, *rf;
    bscratch b;
} buffers;

/* A layer's saved values: all of them, or x alone (kept by a recomputing pass). */
static bool alloc_saved(const tctx *c, allocs *al, saved *S, bool all) {
    const size_t nn = (size_t)c->n, pairs = c->X ? nn * c->XK : nn; /* an MoE layer's g, u: one row a pair */
    if (!(S->x = take(al, nn * c->E)) || !all) return S->x != NULL;
    return (S->r1 = take(al, nn)) && (S->r2 = take(al, nn)) && (S->mid = take(al, nn * c->E)) &&
           (S->q = take(al, nn * c->Q)) && (S->k = take(al, nn * c->K)) && (S->v = take(al, nn * c->K)) &&
           (S->p = take(al, (size_t)c->H * nn * nn)) && (S->att = take(al, nn * c->Q)) &&
           (S->g = take(al, pairs * c->F)) && (S->u = take(al, pairs * c->F)) &&
           (!c->X || ((S->route = (int32_t *)take(al, pairs)) && (S->route_w = take(al, pairs)) &&
                      (S->off = (int32_t *)take(al, (size_t)c->X + 1)) && (S->pair = (int32_t *)take(al, pairs)) &&
                      (S->eo = take(al, pairs * c->E))));
}

static bool alloc_all(tctx *c, allocs *al, buffers *B) {
    const size_t nn = (size_t)c->n, wide = (size_t)(c->F > c->E ? c->F : c->E);
    const int n_rot = c->m->hp.n_rot > 0 ? c->m->hp.n_rot : 1;
    const size_t out_rows = nn < OUT_ROWS ? nn : OUT_ROWS;
    bool ok = (c->L = calloc((size_t)c->m->hp.n_layer, sizeof *c->L)) && (B->x = take(al, nn * c->E)) &&
              (B->xn = take(al, nn * wide)) && (B->tmp = take(al, nn * wide)) &&
              (B->logits = take(al, out_rows * c->V)) && (B->dx = take(al, nn * c->E)) && (B->rf = take(al, nn)) &&
              (c->cs = take(al, nn * (size_t)n_rot));
    if (ok && c->X) ok = (c->xe = take(al, nn * c->E)) && (c->fo = take(al, nn * c->E)) && (c->z = take(al, nn * c->X));
    for (int l = 0; ok && l < c->m->hp.n_layer; l++) ok = alloc_saved(c, al, &c->L[l], !c->recompute);
    if (ok && c->recompute) ok = alloc_saved(c, al, &c->work, true) && (c->xr = take(al, nn * c->E));
    bscratch *b = &B->b;
    if (ok && c->grad)
        ok = (b->xn = take(al, nn * c->E)) && (b->act = take(al, nn * c->F)) && (b->dact = take(al, nn * c->F)) &&
             (b->dg = take(al, nn * c->F)) && (b->du = take(al, nn * c->F)) && (b->dxn = take(al, nn * c->E)) &&
             (b->datt = take(al, nn * c->Q)) && (b->dq = take(al, nn * c->Q)) && (b->dk = take(al, nn * c->K)) &&
             (b->dv = take(al, nn * c->K));
    if (ok && c->grad && c->X)
        ok = (b->xe = take(al, nn * c->E)) && (b->dO = take(al, nn * c->E)) && (b->dxe = take(al, nn * c->E)) &&
             (b->dz = take(al, nn * c->X)) && (b->dw = take(al, nn * c->XK));
    return ok;
}

/* The final norm, the output projection and the loss, OUT_ROWS positions at a time (one chunk's logits
 * held at once); with a gradient, each chunk's backward added to dxn. */
static double head(tctx *c, const int32_t *tokens, const uint8_t *mask, buffers *B, int counted, float *dxn) {
    const model *m = c->m;
    const int n = c->n, E = c->E;
    double loss = 0.0;
    norm_fwd(B->x, m->output_norm.data, n, E, m->hp.rms_eps, B->xn, B->rf);
    for (int r0 = 0; r0 < n && !c->rc; r0 += OUT_ROWS) {
        const int rows = n - r0 < OUT_ROWS ? n - r0 : OUT_ROWS;
        lin_fwd(c, &m->output, NULL, B->xn + (size_t)r0 * E, rows, B->logits);
        if (c->rc) break;
        loss += loss_rows(B->logits, tokens, r0, rows, n, c->V, mask, c->soft, counted); /* logits now d logits */
        if (c->grad) lin_bwd(c, &m->output, NULL, B->xn + (size_t)r0 * E, B->logits, rows, dxn + (size_t)r0 * E);
    }
    return loss;
}

/* Layer l's saved values for its backward: kept, or computed again from its input (recompute). */
static saved *layer_values(tctx *c, int l, buffers *B) {
    if (!c->recompute) return &c->L[l];
    memcpy(c->xr, c->L[l].x, sizeof(float) * (size_t)c->n * c->E);
    layer_fwd(c, l, &c->work, c->xr, B->xn, B->tmp);
    return &c->work;
}

/* Forward, loss, and with a gradient asked for, the backward. */
static void pass(tctx *c, const int32_t *tokens, const uint8_t *mask, buffers *B, double *loss, int *counted) {
    const model *m = c->m;
    const int n = c->n;
    *counted = 0;
    for (int t = 0; t + 1 < n; t++) *counted += !mask || mask[t];
    if (!*counted) return;
    for (int t = 0; t < n; t++) {
        quant_dequantize_row(m->tok_embd.type, (const uint8_t *)m->tok_embd.data + (size_t)tokens[t] * m->tok_embd.row_bytes,
                             B->x + (size_t)t * c->E, c->E);
        fwd_rope_angles(m, t, c->cs + (size_t)t * m->hp.n_rot);
    }
    c->counting = true;
    for (int l = 0; !c->rc && l < m->hp.n_layer; l++) {
        if (c->recompute) memcpy(c->L[l].x, B->x, sizeof(float) * (size_t)n * c->E);
        layer_fwd(c, l, c->recompute ? &c->work : &c->L[l], B->x, B->xn, B->tmp);
    }
    c->counting = false;
    if (c->rc) return;
    float *dxn = B->tmp; /* free once the layers are done */
    memset(dxn, 0, sizeof(float) * (size_t)n * c->E);
    *loss = head(c, tokens, mask, B, *counted, dxn);
    if (c->rc || !c->grad) return;
    vec_grad(c, &m->output_norm, B->x, B->rf, dxn, n, c->E);
    norm_bwd(B->x, m->output_norm.data, B->rf, dxn, n, c->E, B->dx);
    for (int l = m->hp.n_layer - 1; !c->rc && l >= 0; l--) layer_bwd(c, l, layer_values(c, l, B), B->dx, &B->b);
    float *ge = c->w && !c->rc ? train_weights_grad(c->w, c->grad, &m->tok_embd) : NULL;
    for (int t = 0; ge && t < n; t++)
        for (int i = 0; i < c->E; i++) ge[(size_t)tokens[t] * c->E + i] += B->dx[(size_t)t * c->E + i];
}

static tctx setup(const model *m, const train_spec *sp, int n, float *grad, bool recompute) {
    const model_hparams *hp = &m->hp;
    tctx c = {.m = m, .a = sp->a, .scale = sp->scale, .w = sp->w, .soft = sp->soft, .grad = grad,
              .recompute = recompute || !grad, .n = n, .E = hp->n_embd, .H = hp->n_head, .KV = hp->n_head_kv,
              .hd = hp->head_dim, .F = hp->n_ff, .V = hp->n_vocab, .X = hp->n_expert, .XK = hp->n_expert_used,
              .counts = sp->expert_tokens};
    c.Q = c.H * c.hd, c.K = c.KV * c.hd;
    return c;
}

uint64_t train_activation_bytes(const model *m, int n, bool grad, bool recompute) {
    float one = 0.0f;
    tctx c = setup(m, &(train_spec){0}, n, grad ? &one : NULL, recompute);
    allocs al = {.dry = true};
    buffers B = {0};
    const bool ok = alloc_all(&c, &al, &B);
    free(c.L);
    return ok ? al.bytes : UINT64_MAX;
}

err_code train_loss_grad(train_ctx *tc, const model *m, const train_spec *sp, const int32_t *tokens, int n,
                         const uint8_t *mask, double *loss, float *grad, err_t *err) {
    const train_spec none = {0};
    if (!sp) sp = &none;
    if (sp->w && (sp->a || m != train_weights_model(sp->w)))
        return err_set(err, ERR_INVALID_ARG, "trained weights go through their own model view, without an adapter");
    err_code rc = check(m, sp->a, n, err);
    if (rc) return rc;
    const model_hparams *hp = &m->hp;
    for (int t = 0; t < n; t++)
        if (tokens[t] < 0 || tokens[t] >= hp->n_vocab)
            return err_set(err, ERR_INVALID_ARG, "token id %d is outside the vocabulary of %d", tokens[t], hp->n_vocab);
    if (hp->n_layer > 1024) return err_set(err, ERR_UNSUPPORTED, "%d layers", hp->n_layer);
    train_ctx *own = NULL;
    if (!tc && (rc = train_ctx_new(1, &own, err))) return rc;
    tctx c = setup(m, sp, n, grad, sp->recompute);
    c.tc = tc ? tc : own, c.err = err;
    void *slots[64 + 17 * 1024];
    allocs al = {.p = slots};
    buffers B = {0};
    int counted = 0;
    if (!alloc_all(&c, &al, &B)) rc = err_set(err, ERR_NOMEM, "out of memory for training %d tokens", n);
    if (!rc) pass(&c, tokens, mask, &B, loss, &counted);
    if (!rc) rc = c.rc;
    if (!rc && !counted) rc = err_set(err, ERR_INVALID_ARG, "no position of the sequence counts in the loss");
    for (int i = 0; i < al.n; i++) free(al.p[i]);
    free(c.L);
    train_ctx_free(own);
    return rc;
}
