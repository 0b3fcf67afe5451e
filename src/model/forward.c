/*
 * forward — the LLaMA-family forward pass, top to bottom.
 *
 * For each layer:   x += Wo · attention(RoPE(Wq·n(x)), RoPE(Wk·n(x)), Wv·n(x))
 *                   x += FFN(n(x))          n = RMSNorm with the layer's weight
 * FFN is SwiGLU, down(silu(gate(h)) * up(h)); for MoE it is the weighted sum
 * of the top-k experts' SwiGLU outputs, weights = softmax over all router
 * logits, renormalised over the k chosen (Mixtral). Logits = Wout · n(x).
 *
 * Every matrix product goes through mat_mul(), which dispatches on the
 * weight's own type (a GGUF file mixes types per tensor). Activations stay
 * float32 throughout; the scalar dot product of the weight type is the
 * arithmetic. State buffers live in fwd_state and grow with the batch.
 */
#include "forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/quant.h"

struct fwd_state {
    const model *m;
    int cap;          /* tokens the buffers hold */
    float *x;         /* (cap, n_embd) residual stream */
    float *xn;        /* (cap, n_embd) normed input of a sublayer */
    float *q;         /* (cap, n_head * head_dim) */
    float *k, *v;     /* (cap, n_head_kv * head_dim[_v]) */
    float *att;       /* (cap, n_head * head_dim_v) attention output */
    float *ffn_out;   /* (cap, n_embd) */
    float *hg, *hu;   /* (cap, n_ff) gate / up activations (dense), or one token's (MoE) */
    float *e_out;     /* (n_embd) one expert's output */
    float *rope_cs;   /* (cap, n_rot) cos/sin pairs per token */
    float *router;    /* (n_expert) */
    float *scores;    /* (scores_cap) attention scores over the view */
    float *observed;  /* (n_queries, n_entries) weights for kv->observe */
    size_t scores_cap, observed_cap;
};

static void *xrealloc(void *p, size_t n) { return realloc(p, n ? n : 1); }

fwd_state *fwd_state_new(const model *m) {
    fwd_state *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->m = m;
    const model_hparams *hp = &m->hp;
    st->e_out = malloc(sizeof(float) * (size_t)hp->n_embd);
    st->router = malloc(sizeof(float) * (size_t)(hp->n_expert > 0 ? hp->n_expert : 1));
    if (!st->e_out || !st->router) {
        fwd_state_free(st);
        return NULL;
    }
    return st;
}

void fwd_state_free(fwd_state *st) {
    if (!st) return;
    float *bufs[] = {st->x, st->xn, st->q, st->k, st->v, st->att, st->ffn_out, st->hg, st->hu,
                     st->e_out, st->rope_cs, st->router, st->scores, st->observed};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    free(st);
}

static err_code reserve(fwd_state *st, int n, err_t *err) {
    if (n <= st->cap) return ERR_OK;
    const model_hparams *hp = &st->m->hp;
    size_t T = (size_t)n;
    struct { float **p; size_t per_token; } b[] = {
        {&st->x, (size_t)hp->n_embd},
        {&st->xn, (size_t)hp->n_embd},
        {&st->q, (size_t)hp->n_head * hp->head_dim},
        {&st->k, (size_t)hp->n_head_kv * hp->head_dim},
        {&st->v, (size_t)hp->n_head_kv * hp->head_dim_v},
        {&st->att, (size_t)hp->n_head * hp->head_dim_v},
        {&st->ffn_out, (size_t)hp->n_embd},
        {&st->hg, (size_t)hp->n_ff},
        {&st->hu, (size_t)hp->n_ff},
        {&st->rope_cs, (size_t)hp->n_rot > 0 ? (size_t)hp->n_rot : 1},
    };
    for (size_t i = 0; i < sizeof b / sizeof *b; i++) {
        float *p = xrealloc(*b[i].p, sizeof(float) * T * b[i].per_token);
        if (!p) return err_set(err, ERR_NOMEM, "out of memory for a batch of %d tokens", n);
        *b[i].p = p;
    }
    st->cap = n;
    return ERR_OK;
}

static err_code grow(float **p, size_t *cap, size_t n, err_t *err) {
    if (n <= *cap) return ERR_OK;
    float *q = xrealloc(*p, sizeof(float) * n);
    if (!q) return err_set(err, ERR_NOMEM, "out of memory for %zu attention scores", n);
    *p = q;
    *cap = n;
    return ERR_OK;
}

/* ---------------------------------------------------------------- kernels */

/* y[t] = W[e] · x[t] for t < T. x rows are W->n_in long, y rows W->n_out.
 * Loop rows outside, tokens inside: each weight row is read once per call. */
static void mat_mul(const model_mat *w, int e, const float *x, int T, float *y) {
    const quant_traits *tr = quant_traits_of(w->type);
    const uint8_t *base = (const uint8_t *)w->data + (size_t)e * (size_t)w->n_out * w->row_bytes;
    const int64_t n_in = w->n_in, n_out = w->n_out;
    for (int64_t o = 0; o < n_out; o++) {
        const void *row = base + (size_t)o * w->row_bytes;
        for (int t = 0; t < T; t++) y[(size_t)t * n_out + o] = tr->dot(row, x + (size_t)t * n_in, n_in);
    }
}

static void rmsnorm(float *out, const float *x, const float *weight, int n, float eps) {
    double ss = 0.0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float scale = 1.0f / sqrtf((float)(ss / n) + eps);
    for (int i = 0; i < n; i++) out[i] = x[i] * scale * weight[i];
}

static void add_bias(float *y, const model_mat *b, int T) {
    if (!b->data) return;
    const float *bias = b->data;
    for (int t = 0; t < T; t++)
        for (int64_t i = 0; i < b->n_in; i++) y[(size_t)t * b->n_in + i] += bias[i];
}

static float silu(float x) { return x / (1.0f + expf(-x)); }

/* cos/sin of every rotated pair for one position. */
static void rope_angles(const model *m, int32_t pos, float *cs) {
    const model_hparams *hp = &m->hp;
    const float *freq_div = m->rope_freqs.data;
    for (int i = 0; i < hp->n_rot / 2; i++) {
        double theta = (double)pos * hp->rope_freq_scale * pow(hp->rope_freq_base, -2.0 * i / hp->n_rot);
        if (freq_div) theta /= freq_div[i];
        cs[2 * i] = (float)cos(theta);
        cs[2 * i + 1] = (float)sin(theta);
    }
}

/* Rotate the first n_rot dims of each of n_heads heads of one token. */
static void rope_apply(float *vec, int n_heads, int head_dim, int n_rot, bool neox, const float *cs) {
    for (int h = 0; h < n_heads; h++) {
        float *x = vec + (size_t)h * head_dim;
        for (int i = 0; i < n_rot / 2; i++) {
            int a = neox ? i : 2 * i, b = neox ? i + n_rot / 2 : 2 * i + 1;
            float c = cs[2 * i], s = cs[2 * i + 1], x0 = x[a], x1 = x[b];
            x[a] = x0 * c - x1 * s;
            x[b] = x0 * s + x1 * c;
        }
    }
}

static float kv_elem(const kv_span *s, const void *rows, size_t row_bytes, int j, int i) {
    const uint8_t *r = (const uint8_t *)rows + (size_t)j * row_bytes;
    return s->type == QT_F16 ? fp16_to_fp32(((const fp16_t *)r)[i]) : ((const float *)r)[i];
}

/* ---------------------------------------------------------------- attention */

/* Causal multi-head attention of T queries over the cache's view. */
static err_code attention(fwd_state *st, const kv_iface *kv, int layer, int T, int32_t pos0, err_t *err) {
    const model_hparams *hp = &st->m->hp;
    const int hd = hp->head_dim, hdv = hp->head_dim_v, group = hp->n_head / hp->n_head_kv;
    const float scale = 1.0f / sqrtf((float)hd);
    const kv_span *spans;
    int n_spans = kv->view(kv->self, layer, &spans);
    size_t n_entries = 0;
    for (int s = 0; s < n_spans; s++) n_entries += (size_t)spans[s].n_tokens;
    err_code rc = grow(&st->scores, &st->scores_cap, n_entries, err);
    if (!rc && kv->observe) rc = grow(&st->observed, &st->observed_cap, n_entries * (size_t)T, err);
    if (rc) return rc;
    if (kv->observe) memset(st->observed, 0, sizeof(float) * n_entries * (size_t)T);

    for (int t = 0; t < T; t++) {
        const int32_t qpos = pos0 + t;
        for (int h = 0; h < hp->n_head; h++) {
            const float *q = st->q + ((size_t)t * hp->n_head + h) * hd;
            const int kvh = h / group; /* grouped-query attention: query head h reads KV head h / group */
            float *sc = st->scores;
            /* scores = q·k / sqrt(hd) over visible entries, -inf elsewhere */
            float max = -INFINITY;
            size_t e = 0;
            for (int s = 0; s < n_spans; s++) {
                const kv_span *sp = &spans[s];
                for (int j = 0; j < sp->n_tokens; j++, e++) {
                    if (sp->pos[j] > qpos) { sc[e] = -INFINITY; continue; }
                    float d = 0.0f;
                    for (int i = 0; i < hd; i++) d += q[i] * kv_elem(sp, sp->k, sp->k_row_bytes, j, kvh * hd + i);
                    sc[e] = d * scale;
                    if (sc[e] > max) max = sc[e];
                }
            }
            /* softmax */
            float sum = 0.0f;
            for (size_t i = 0; i < n_entries; i++) {
                sc[i] = sc[i] == -INFINITY ? 0.0f : expf(sc[i] - max);
                sum += sc[i];
            }
            const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
            /* out = sum_e w_e v_e */
            float *out = st->att + ((size_t)t * hp->n_head + h) * hdv;
            memset(out, 0, sizeof(float) * (size_t)hdv);
            e = 0;
            for (int s = 0; s < n_spans; s++) {
                const kv_span *sp = &spans[s];
                for (int j = 0; j < sp->n_tokens; j++, e++) {
                    float w = sc[e] * inv;
                    if (w == 0.0f) continue;
                    if (kv->observe) st->observed[(size_t)t * n_entries + e] += w;
                    for (int i = 0; i < hdv; i++) out[i] += w * kv_elem(sp, sp->v, sp->v_row_bytes, j, kvh * hdv + i);
                }
            }
        }
    }
    if (kv->observe) kv->observe(kv->self, layer, T, (int)n_entries, st->observed);
    return ERR_OK;
}

/* ---------------------------------------------------------------- FFN */

static void swiglu(float *g, const float *u, size_t n) {
    for (size_t i = 0; i < n; i++) g[i] = silu(g[i]) * u[i];
}

static void ffn_dense(fwd_state *st, const model_layer *L, int T) {
    const model_hparams *hp = &st->m->hp;
    mat_mul(&L->w_gate, 0, st->xn, T, st->hg);
    mat_mul(&L->w_up, 0, st->xn, T, st->hu);
    swiglu(st->hg, st->hu, (size_t)T * hp->n_ff);
    mat_mul(&L->w_down, 0, st->hg, T, st->ffn_out);
}

void model_expert_mats(const model *m, int layer, int expert, model_mat mats[3]) {
    const model_layer *L = &m->layers[layer];
    const model_mat *src[3] = {&L->w_gate, &L->w_up, &L->w_down};
    for (int i = 0; i < 3; i++) {
        mats[i] = *src[i];
        mats[i].data = (const uint8_t *)src[i]->data + (size_t)expert * (size_t)src[i]->n_out * src[i]->row_bytes;
        mats[i].n_mat = 1;
    }
}

/* Top-k of p[0..n) by value, ties to the lower index; idx sorted best first. */
static void top_k(const float *p, int n, int k, int *idx) {
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

static err_code ffn_moe(fwd_state *st, const experts_iface *ex, int layer, int T, err_t *err) {
    const model *m = st->m;
    const model_hparams *hp = &m->hp;
    const model_layer *L = &m->layers[layer];
    const int E = hp->n_embd, k = hp->n_expert_used;
    int chosen[64];
    float weight[64];
    if (k > 64) return err_set(err, ERR_UNSUPPORTED, "expert_used_count %d > 64", k);
    for (int t = 0; t < T; t++) {
        const float *xt = st->xn + (size_t)t * E;
        float *out = st->ffn_out + (size_t)t * E;
        /* router: softmax over all experts, top-k, renormalise the chosen */
        mat_mul(&L->gate_inp, 0, xt, 1, st->router);
        float max = st->router[0], sum = 0.0f;
        for (int e = 1; e < hp->n_expert; e++) max = fmaxf(max, st->router[e]);
        for (int e = 0; e < hp->n_expert; e++) sum += st->router[e] = expf(st->router[e] - max);
        for (int e = 0; e < hp->n_expert; e++) st->router[e] /= sum;
        top_k(st->router, hp->n_expert, k, chosen);
        float wsum = 0.0f;
        for (int j = 0; j < k; j++) wsum += weight[j] = st->router[chosen[j]];
        memset(out, 0, sizeof(float) * (size_t)E);
        for (int j = 0; j < k; j++) {
            model_mat w[3];
            if (ex) {
                err_code rc = ex->get(ex->self, layer, chosen[j], w, err);
                if (rc) return rc;
            } else {
                model_expert_mats(m, layer, chosen[j], w);
            }
            mat_mul(&w[0], 0, xt, 1, st->hg);
            mat_mul(&w[1], 0, xt, 1, st->hu);
            swiglu(st->hg, st->hu, (size_t)hp->n_ff);
            mat_mul(&w[2], 0, st->hg, 1, st->e_out);
            const float wj = weight[j] / wsum;
            for (int i = 0; i < E; i++) out[i] += wj * st->e_out[i];
        }
    }
    return ERR_OK;
}

/* ---------------------------------------------------------------- forward */

err_code forward(fwd_state *st, const kv_iface *kv, const experts_iface *experts, const int32_t *tokens, int n,
                 int32_t pos0, const int32_t *out_rows, int n_out, float *logits, err_t *err) {
    const model *m = st->m;
    const model_hparams *hp = &m->hp;
    const int E = hp->n_embd;
    const int q_dim = hp->n_head * hp->head_dim;
    const int k_dim = hp->n_head_kv * hp->head_dim;
    if (n <= 0) return err_set(err, ERR_INVALID_ARG, "forward of %d tokens", n);
    if (pos0 < 0 || pos0 > INT32_MAX - n) return err_set(err, ERR_INVALID_ARG, "position %d out of range", pos0);
    if (n_out < 0 || n_out > n) return err_set(err, ERR_INVALID_ARG, "%d logit rows asked of %d tokens", n_out, n);
    for (int i = 0; out_rows && i < n_out; i++)
        if (out_rows[i] < 0 || out_rows[i] >= n)
            return err_set(err, ERR_INVALID_ARG, "logit row %d is outside the %d tokens", out_rows[i], n);
    err_code rc = reserve(st, n, err);
    if (rc) return rc;

    /* token embeddings */
    for (int t = 0; t < n; t++) {
        if (tokens[t] < 0 || tokens[t] >= hp->n_vocab)
            return err_set(err, ERR_INVALID_ARG, "token id %d is outside the vocabulary of %d", tokens[t], hp->n_vocab);
        const uint8_t *row = (const uint8_t *)m->tok_embd.data + (size_t)tokens[t] * m->tok_embd.row_bytes;
        quant_dequantize_row(m->tok_embd.type, row, st->x + (size_t)t * E, E);
        rope_angles(m, pos0 + t, st->rope_cs + (size_t)t * hp->n_rot);
    }
    int32_t pos_buf[256], *pos = n <= 256 ? pos_buf : malloc(sizeof(int32_t) * (size_t)n);
    if (!pos) return err_set(err, ERR_NOMEM, "out of memory");
    for (int t = 0; t < n; t++) pos[t] = pos0 + t;

    for (int l = 0; l < hp->n_layer && !rc; l++) {
        const model_layer *L = &m->layers[l];
        /* attention: norm, q/k/v projections, RoPE, cache, attend, output projection */
        for (int t = 0; t < n; t++)
            rmsnorm(st->xn + (size_t)t * E, st->x + (size_t)t * E, L->attn_norm.data, E, hp->rms_eps);
        mat_mul(&L->wq, 0, st->xn, n, st->q);
        mat_mul(&L->wk, 0, st->xn, n, st->k);
        mat_mul(&L->wv, 0, st->xn, n, st->v);
        add_bias(st->q, &L->bq, n);
        add_bias(st->k, &L->bk, n);
        add_bias(st->v, &L->bv, n);
        for (int t = 0; t < n; t++) {
            const float *cs = st->rope_cs + (size_t)t * hp->n_rot;
            rope_apply(st->q + (size_t)t * q_dim, hp->n_head, hp->head_dim, hp->n_rot, hp->rope_neox, cs);
            rope_apply(st->k + (size_t)t * k_dim, hp->n_head_kv, hp->head_dim, hp->n_rot, hp->rope_neox, cs);
        }
        if ((rc = kv->append(kv->self, l, n, pos, st->k, st->v, err))) break;
        if ((rc = attention(st, kv, l, n, pos0, err))) break;
        mat_mul(&L->wo, 0, st->att, n, st->ffn_out);
        for (size_t i = 0; i < (size_t)n * E; i++) st->x[i] += st->ffn_out[i];

        /* FFN: norm, SwiGLU (dense or mixture of experts), residual */
        for (int t = 0; t < n; t++)
            rmsnorm(st->xn + (size_t)t * E, st->x + (size_t)t * E, L->ffn_norm.data, E, hp->rms_eps);
        if (hp->n_expert > 0) {
            if ((rc = ffn_moe(st, experts, l, n, err))) break;
        } else {
            ffn_dense(st, L, n);
        }
        for (size_t i = 0; i < (size_t)n * E; i++) st->x[i] += st->ffn_out[i];
    }
    if (pos != pos_buf) free(pos);
    if (rc) return rc;

    /* logits of the requested rows: final norm, output projection */
    for (int i = 0; i < n_out; i++) {
        int t = out_rows ? out_rows[i] : (n_out == n ? i : n - n_out + i);
        rmsnorm(st->xn, st->x + (size_t)t * E, m->output_norm.data, E, hp->rms_eps);
        mat_mul(&m->output, 0, st->xn, 1, logits + (size_t)i * hp->n_vocab);
    }
    return ERR_OK;
}
