/*
 * forward — the LLaMA-family forward pass, top to bottom.
 *
 * For each layer:   x += Wo · attention(RoPE(Wq·n(x)), RoPE(Wk·n(x)), Wv·n(x))
 *                   x += FFN(n(x))          n = RMSNorm with the layer's weight
 * FFN is SwiGLU, down(silu(gate(h)) * up(h)); for MoE it is the weighted sum
 * of the top-k experts' SwiGLU outputs, weights = softmax over all router
 * logits, renormalised over the k chosen (Mixtral). Logits = Wout · n(x).
 *
 * Every matrix product goes to core/matmul (which schedules it over the
 * model's threads, dispatching on the weight's own type); this file only
 * names the matrices. Attention runs its (token, head) pairs across the
 * threads. MoE tokens are grouped by expert so that each chosen expert's
 * weights are read once per batch.
 *
 * State buffers live in fwd_state and grow with the batch.
 */
#include "forward.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/attn.h"
#include "core/kernels.h"
#include "core/matmul.h"
#include "core/quant.h"

/* Below this many multiply-adds a job runs on the calling thread, as matmul's do. */
#define MIN_PARALLEL_MACS MATMUL_MIN_PARALLEL_MACS

struct fwd_state {
    const model *m;
    tpool *pool;      /* borrowed; NULL runs on the calling thread */
    int nth;
    int cap;          /* tokens the buffers hold */
    float *x;         /* (cap, n_embd) residual stream */
    float *xn;        /* (cap, n_embd) normed input of a sublayer */
    float *q;         /* (cap, n_head * head_dim) */
    float *k, *v;     /* (cap, n_head_kv * head_dim[_v]) */
    float *att;       /* (cap, n_head * head_dim_v) attention output */
    float *ffn_out;   /* (cap, n_embd) */
    float *hg, *hu;   /* (cap, n_ff) gate / up activations (dense), or one token's (MoE) */
    float *rope_cs;   /* (cap, n_rot) cos/sin pairs per token */
    float *router;    /* (n_expert) */
    float *observed;  /* (nth, n_entries) attention weights for kv->observe, per thread */
    size_t observed_cap;
    attn_keys *runs;  /* (n_head_kv, n_spans) the view's spans, offset to each KV head */
    size_t runs_cap;
    matmul_ctx *mm;   /* the matrix products' scheduler and activation buffer */
    /* MoE routing of the batch */
    int32_t *route;   /* (cap, n_expert_used) chosen experts */
    float *route_next; /* (cap, n_expert) the next layer's router logits (experts_iface.hint_next) */
    float *route_w;   /* (cap, n_expert_used) their renormalised weights */
    int32_t *members; /* (cap) tokens routed to the expert at hand */
    float *member_w;  /* (cap) their weights */
    float *xe;        /* (cap, n_embd) gathered inputs of one expert */
    float *eo;        /* (cap, n_embd) its outputs */
    fwd_observer observer; /* NULL: none */
    void *observer_ctx;
};

static void *xrealloc(void *p, size_t n) { return realloc(p, n ? n : 1); }

fwd_state *fwd_state_new(const model *m, tpool *pool) {
    fwd_state *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->m = m;
    st->pool = pool;
    st->nth = tpool_size(pool);
    const model_hparams *hp = &m->hp;
    st->router = malloc(sizeof(float) * (size_t)(hp->n_expert > 0 ? hp->n_expert : 1));
    st->mm = matmul_ctx_new(pool);
    if (!st->router || !st->mm) {
        fwd_state_free(st);
        return NULL;
    }
    return st;
}

void fwd_state_free(fwd_state *st) {
    if (!st) return;
    float *bufs[] = {st->x, st->xn, st->q, st->k, st->v, st->att, st->ffn_out, st->hg, st->hu,
                     st->rope_cs, st->router, st->observed, st->route_w, st->member_w, st->xe, st->eo};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    matmul_ctx_free(st->mm);
    free(st->runs);
    free(st->route);
    free(st->route_next);
    free(st->members);
    free(st);
}

void fwd_set_observer(fwd_state *st, fwd_observer fn, void *ctx) {
    st->observer = fn;
    st->observer_ctx = ctx;
}

static void observe(fwd_state *st, int layer, fwd_point at, int T, const float *x, const float *act) {
    if (!st->observer) return;
    const fwd_tap tap = {layer, at, T, x, act};
    st->observer(st->observer_ctx, &tap);
}

static err_code reserve(fwd_state *st, int n, err_t *err) {
    if (n <= st->cap) return ERR_OK;
    const model_hparams *hp = &st->m->hp;
    size_t T = (size_t)n;
    const size_t ff = (size_t)(hp->n_ff > hp->n_ff_shexp ? hp->n_ff : hp->n_ff_shexp);
    struct { float **p; size_t per_token; } b[] = {
        {&st->x, (size_t)hp->n_embd},
        {&st->xn, (size_t)hp->n_embd},
        {&st->q, (size_t)hp->n_head * hp->head_dim},
        {&st->k, (size_t)hp->n_head_kv * hp->head_dim},
        {&st->v, (size_t)hp->n_head_kv * hp->head_dim_v},
        {&st->att, (size_t)hp->n_head * hp->head_dim_v},
        {&st->ffn_out, (size_t)hp->n_embd},
        {&st->hg, ff},
        {&st->hu, ff},
        {&st->rope_cs, (size_t)hp->n_rot > 0 ? (size_t)hp->n_rot : 1},
        {&st->route_w, (size_t)(hp->n_expert_used > 0 ? hp->n_expert_used : 1)},
        {&st->member_w, 1},
        {&st->xe, hp->n_expert > 0 ? (size_t)hp->n_embd : 1},
        {&st->route_next, hp->n_expert > 0 ? (size_t)hp->n_expert : 1},
        {&st->eo, hp->n_expert > 0 ? (size_t)hp->n_embd : 1},
    };
    for (size_t i = 0; i < sizeof b / sizeof *b; i++) {
        float *p = xrealloc(*b[i].p, sizeof(float) * T * b[i].per_token);
        if (!p) return err_set(err, ERR_NOMEM, "out of memory for a batch of %d tokens", n);
        *b[i].p = p;
    }
    const size_t per = (size_t)(hp->n_expert_used > 0 ? hp->n_expert_used : 1);
    int32_t *r = xrealloc(st->route, sizeof(int32_t) * T * per);
    if (r) st->route = r;
    int32_t *mb = xrealloc(st->members, sizeof(int32_t) * T);
    if (mb) st->members = mb;
    if (!r || !mb) return err_set(err, ERR_NOMEM, "out of memory for a batch of %d tokens", n);
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

/* ---------------------------------------------------------------- matmul */

static matmul_weight weight_view(const model_mat *w) {
    return (matmul_weight){.data = w->data, .type = w->type, .n_in = w->n_in, .n_out = w->n_out,
                           .row_bytes = w->row_bytes, .packed = w->packed};
}

/* y[t] = W · x[t] for t < T. x rows are W->n_in long, y rows W->n_out. */
static err_code mat_mul(fwd_state *st, const model_mat *w, const float *x, int T, float *y, err_t *err) {
    const matmul_weight v = weight_view(w);
    return matmul(st->mm, &v, x, T, y, err);
}

/* ys[i] = W_i · x[t] for n (at most MATMUL_MAX_SET) matrices of the same input */
static err_code mat_mul_set(fwd_state *st, const model_mat *const *ws, int n, const float *x, int T,
                            float *const *ys, err_t *err) {
    matmul_weight v[MATMUL_MAX_SET];
    for (int i = 0; i < n; i++) v[i] = weight_view(ws[i]);
    return matmul_set(st->mm, v, n, x, T, ys, err);
}

/* ---------------------------------------------------------------- norm, bias, RoPE */

void fwd_rmsnorm(float *out, const float *x, const float *weight, int n, float eps) {
    double ss = 0.0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float scale = 1.0f / sqrtf((float)(ss / n) + eps);
    for (int i = 0; i < n; i++) out[i] = x[i] * scale * weight[i];
}

typedef struct {
    float *out;
    const float *x, *weight;
    int n, T;
    float eps;
} norm_job;

static void norm_work(void *ctx, int ith, int nth) {
    norm_job *j = ctx;
    for (int t = j->T * ith / nth; t < j->T * (ith + 1) / nth; t++)
        fwd_rmsnorm(j->out + (size_t)t * j->n, j->x + (size_t)t * j->n, j->weight, j->n, j->eps);
}

/* RMSNorm of T rows of n */
static void rmsnorm_rows(fwd_state *st, float *out, const float *x, const float *weight, int n, int T, float eps) {
    norm_job j = {out, x, weight, n, T, eps};
    if (T < 8) norm_work(&j, 0, 1);
    else tpool_run(st->pool, norm_work, &j);
}

static void add_bias(float *y, const model_mat *b, int T) {
    if (!b->data) return;
    const float *bias = b->data;
    for (int t = 0; t < T; t++)
        for (int64_t i = 0; i < b->n_in; i++) y[(size_t)t * b->n_in + i] += bias[i];
}

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

/* ---------------------------------------------------------------- attention */

/* Attention runs on the attn kernel (core/attn.h) in units of (KV head, tile
 * of 16 queries), the queries of a KV head ordered (token, head in its
 * group), so a tile holds the query heads that read the same keys. */
typedef struct {
    fwd_state *st;
    int n_spans, T, n_tiles; /* tiles per KV head */
    int32_t pos0;
    attn_fn fn;
    size_t n_entries;
    int observe_from;        /* tokens from here on report their weights; T = none */
    int observe_to;          /* ... and before this one (T, or a tree batch's trunk) */
    const uint64_t *anc;     /* a tree batch's ancestry (forward_tree), or NULL */
    atomic_int next;
} fa_job;

static void fa_work(void *ctx, int ith, int nth) {
    fa_job *j = ctx;
    fwd_state *st = j->st;
    const model_hparams *hp = &st->m->hp;
    const int group = hp->n_head / hp->n_head_kv;
    (void)nth;
    for (;;) {
        const int unit = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (unit >= j->n_tiles * hp->n_head_kv) break;
        const int kvh = unit / j->n_tiles, u0 = unit % j->n_tiles * ATTN_LANES;
        const int u1 = u0 + ATTN_LANES < j->T * group ? u0 + ATTN_LANES : j->T * group;
        attn_queries q = {.hd = hp->head_dim, .hdv = hp->head_dim_v, .scale = 1.0f / sqrtf((float)hp->head_dim),
                          .n_q = u1 - u0, .tree = j->anc != NULL, .tree_pos0 = j->pos0};
        for (int u = u0; u < u1; u++) {
            const int t = u / group, h = kvh * group + u % group;
            q.q[u - u0] = st->q + ((size_t)t * hp->n_head + h) * hp->head_dim;
            q.qpos[u - u0] = j->pos0 + t;
            q.out[u - u0] = st->att + ((size_t)t * hp->n_head + h) * hp->head_dim_v;
            if (j->anc) q.anc[u - u0] = j->anc[t];
            if (t >= j->observe_from && t < j->observe_to) q.obs_lanes |= 1u << (u - u0);
        }
        if (q.obs_lanes) q.obs = st->observed + (size_t)ith * j->n_entries;
        j->fn(&q, st->runs + (size_t)kvh * j->n_spans, j->n_spans);
    }
}

/* Causal multi-head attention of T queries over the cache's view; anc: a
 * tree batch's ancestry (trunk: its leading tokens in a line), or NULL. */
static err_code attention(fwd_state *st, const kv_iface *kv, int layer, int T, int32_t pos0, const uint64_t *anc,
                          int trunk, err_t *err) {
    const kv_span *spans;
    const int n_spans = kv->view(kv->self, layer, &spans);
    const model_hparams *hp = &st->m->hp;
    size_t n_entries = 0;
    for (int s = 0; s < n_spans; s++) {
        n_entries += (size_t)spans[s].n_tokens;
        if (!attn_type_supported(spans[s].k_type) || !attn_type_supported(spans[s].v_type))
            return err_set(err, ERR_UNSUPPORTED, "KV cache rows of type %u/%u", spans[s].k_type, spans[s].v_type);
    }
    const size_t need = (size_t)n_spans * (size_t)hp->n_head_kv;
    if (need > st->runs_cap) {
        attn_keys *r = xrealloc(st->runs, sizeof *r * need);
        if (!r) return err_set(err, ERR_NOMEM, "out of memory for attention");
        st->runs = r;
        st->runs_cap = need;
    }
    for (int h = 0; h < hp->n_head_kv; h++)
        for (int s = 0; s < n_spans; s++) {
            const kv_span *sp = &spans[s];
            st->runs[(size_t)h * n_spans + s] = (attn_keys){
                .k_type = sp->k_type, .v_type = sp->v_type, .n = sp->n_tokens, .pos = sp->pos, .k = sp->k, .v = sp->v,
                .k_off = h * hp->head_dim, .v_off = h * hp->head_dim_v,
                .k_stride = sp->k_row_bytes, .v_stride = sp->v_row_bytes};
        }
    const int group = hp->n_head / hp->n_head_kv;
    fa_job j = {.st = st, .n_spans = n_spans, .T = T, .pos0 = pos0, .fn = attn_get(), .n_entries = n_entries,
                .n_tiles = (T * group + ATTN_LANES - 1) / ATTN_LANES, .observe_from = T, .observe_to = T, .anc = anc};
    const size_t nth = (size_t)st->nth;
    if (kv->observe) {
        err_code rc = grow(&st->observed, &st->observed_cap, n_entries * nth, err);
        if (rc) return rc;
        memset(st->observed, 0, sizeof(float) * n_entries * nth);
        /* a tree batch reports its trunk only: the branches are guesses, gone after the pass */
        const int U = anc ? trunk : T;
        j.observe_to = U;
        j.observe_from = kv->observe_last > 0 && kv->observe_last < U ? U - kv->observe_last : 0;
    }
    atomic_init(&j.next, 0);
    const int64_t macs = (int64_t)T * hp->n_head * (int64_t)n_entries * (hp->head_dim + hp->head_dim_v);
    if (macs < MIN_PARALLEL_MACS) fa_work(&j, 0, 1);
    else tpool_run(st->pool, fa_work, &j);
    if (kv->observe) {
        /* the threads' sums, into thread 0's buffer */
        for (size_t th = 1; th < nth; th++)
            for (size_t i = 0; i < n_entries; i++) st->observed[i] += st->observed[th * n_entries + i];
        kv->observe(kv->self, layer, j.observe_to - j.observe_from, (int)n_entries, st->observed);
    }
    return ERR_OK;
}

/* ---------------------------------------------------------------- FFN */

typedef struct {
    float *g;
    const float *u;
    size_t n;
} swiglu_job;

static void swiglu_work(void *ctx, int ith, int nth) {
    swiglu_job *j = ctx;
    const size_t lo = j->n * ith / nth, hi = j->n * (ith + 1) / nth;
    kernel_swiglu()(j->g + lo, j->u + lo, hi - lo);
}

/* g = silu(g) * u, over the pool when there is enough of it */
static void swiglu(fwd_state *st, float *g, const float *u, size_t n) {
    swiglu_job j = {g, u, n};
    if (n < (size_t)MIN_PARALLEL_MACS / 4) swiglu_work(&j, 0, 1);
    else tpool_run(st->pool, swiglu_work, &j);
}

static err_code ffn_dense(fwd_state *st, const model_layer *L, int T, err_t *err) {
    const model_hparams *hp = &st->m->hp;
    err_code rc = mat_mul_set(st, (const model_mat *[]){&L->w_gate, &L->w_up}, 2, st->xn, T,
                              (float *[]){st->hg, st->hu}, err);
    if (rc) return rc;
    swiglu(st, st->hg, st->hu, (size_t)T * hp->n_ff);
    return mat_mul(st, &L->w_down, st->hg, T, st->ffn_out, err);
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
    float max = scores[0], sum = 0.0f;
    for (int e = 1; e < n; e++) max = fmaxf(max, scores[e]);
    for (int e = 0; e < n; e++) sum += scores[e] = expf(scores[e] - max);
    for (int e = 0; e < n; e++) scores[e] /= sum;
    fwd_top_k(scores, n, k, chosen);
    float wsum = 0.0f;
    for (int j = 0; j < k; j++) wsum += w[j] = scores[chosen[j]];
    for (int j = 0; j < k; j++) w[j] /= wsum;
}

/* The next layer's router logits for each token, from this layer's hidden
 * state under the next layer's FFN norm. Called twice per layer: with the
 * residual entering this FFN (what the next layer would route to if this
 * FFN changed nothing: the store reads ahead while the FFN computes), and
 * with the layer's output (closer, read while the next attention computes). */
static err_code predict_next(fwd_state *st, const experts_iface *ex, int layer, int T, err_t *err) {
    const model_hparams *hp = &st->m->hp;
    const int E = hp->n_embd;
    const model_layer *N = &st->m->layers[layer + 1];
    for (int t = 0; t < T; t++)
        fwd_rmsnorm(st->xe + (size_t)t * E, st->x + (size_t)t * E, N->ffn_norm.data, E, hp->rms_eps);
    err_code rc = mat_mul(st, &N->gate_inp, st->xe, T, st->route_next, err);
    if (!rc) ex->hint_next(ex->self, layer + 1, st->route_next, T, hp->n_expert);
    return rc;
}

/* The shared expert, added to ffn_out for every token (upcycled models). */
static err_code ffn_shared(fwd_state *st, const model_layer *L, int T, err_t *err) {
    const int E = st->m->hp.n_embd;
    err_code rc = mat_mul_set(st, (const model_mat *[]){&L->w_gate_sh, &L->w_up_sh}, 2, st->xn, T,
                              (float *[]){st->hg, st->hu}, err);
    if (rc) return rc;
    swiglu(st, st->hg, st->hu, (size_t)T * st->m->hp.n_ff_shexp);
    if ((rc = mat_mul(st, &L->w_down_sh, st->hg, T, st->eo, err))) return rc;
    for (size_t i = 0; i < (size_t)T * E; i++) st->ffn_out[i] += st->eo[i];
    return ERR_OK;
}

/* Mixtral FFN: route every token, then run each chosen expert once over its
 * tokens; then the shared expert, where there is one. */
static err_code ffn_moe(fwd_state *st, const experts_iface *ex, int layer, int T, err_t *err) {
    const model *m = st->m;
    const model_hparams *hp = &m->hp;
    const model_layer *L = &m->layers[layer];
    const int E = hp->n_embd, k = hp->n_expert_used;
    err_code rc = ERR_OK;
    /* router: softmax over all experts, top-k, renormalise the chosen */
    for (int t = 0; t < T && !rc; t++) {
        int32_t *chosen = st->route + (size_t)t * k;
        float *w = st->route_w + (size_t)t * k;
        rc = mat_mul(st, &L->gate_inp, st->xn + (size_t)t * E, 1, st->router, err);
        fwd_route(st->router, hp->n_expert, k, chosen, w);
        if (ex && ex->hint) ex->hint(ex->self, layer, chosen, k);
    }
    if (!rc && ex && ex->hint_next && layer + 1 < hp->n_layer) rc = predict_next(st, ex, layer, T, err);
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
        rc = mat_mul_set(st, (const model_mat *[]){&w[0], &w[1]}, 2, st->xe, n, (float *[]){st->hg, st->hu}, err);
        if (rc) break;
        swiglu(st, st->hg, st->hu, (size_t)n * hp->n_ff);
        if ((rc = mat_mul(st, &w[2], st->hg, n, st->eo, err))) break;
        for (int i = 0; i < n; i++) {
            float *out = st->ffn_out + (size_t)st->members[i] * E;
            const float *eo = st->eo + (size_t)i * E;
            for (int d = 0; d < E; d++) out[d] += st->member_w[i] * eo[d];
        }
    }
    if (!rc && L->w_gate_sh.data) rc = ffn_shared(st, L, T, err);
    return rc;
}

/* ---------------------------------------------------------------- forward */

/* NaN or Inf logits (a weight or hyperparameter that is not a finite number)
 * would be sampled as token 0 forever: stop with an error instead. One pass
 * over the rows, next to the output matmul's n_embd x n_vocab. */
static err_code check_finite(const float *logits, size_t n, int32_t pos0, err_t *err) {
    float acc = 0.0f;
    for (size_t i = 0; i < n; i++) acc += logits[i] * 0.0f; /* stays 0 unless some logit is NaN or Inf */
    if (acc == 0.0f) return ERR_OK;
    return err_set(err, ERR_BAD_VALUE,
                   "the model computed non-finite logits (NaN or Inf) at position %d: its weights hold values "
                   "that are not finite numbers",
                   (int)pos0);
}

err_code forward(fwd_state *st, const kv_iface *kv, const experts_iface *experts, const int32_t *tokens, int n,
                 int32_t pos0, const int32_t *out_rows, int n_out, float *logits, err_t *err) {
    return forward_tree(st, kv, experts, tokens, n, pos0, NULL, out_rows, n_out, logits, err);
}

err_code forward_tree(fwd_state *st, const kv_iface *kv, const experts_iface *experts, const int32_t *tokens, int n,
                      int32_t pos0, const uint64_t *anc, const int32_t *out_rows, int n_out, float *logits,
                      err_t *err) {
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
    for (int t = 0; t < n; t++)
        if (tokens[t] < 0 || tokens[t] >= hp->n_vocab)
            return err_set(err, ERR_INVALID_ARG, "token id %d is outside the vocabulary of %d", tokens[t], hp->n_vocab);
    int trunk = n; /* a tree batch's leading tokens that form a line */
    if (anc) {
        if (n > ATTN_TREE_MAX) return err_set(err, ERR_INVALID_ARG, "a tree batch of %d tokens (%d at most)", n, ATTN_TREE_MAX);
        trunk = 0;
        for (int t = 0; t < n; t++) {
            const uint64_t self = 1ull << t, upto = self | (self - 1);
            if (!(anc[t] & self) || (anc[t] & ~upto))
                return err_set(err, ERR_INVALID_ARG, "tree token %d: its ancestry must hold itself and earlier tokens only", t);
            if (trunk == t && anc[t] == upto) trunk = t + 1;
        }
    }
    err_code rc = reserve(st, n, err);
    if (rc) return rc;

    /* token embeddings, and the RoPE angles of each position (a tree token's
     * is its depth: pos0 + the number of its ancestors) */
    for (int t = 0; t < n; t++) {
        const uint8_t *row = (const uint8_t *)m->tok_embd.data + (size_t)tokens[t] * m->tok_embd.row_bytes;
        quant_dequantize_row(m->tok_embd.type, row, st->x + (size_t)t * E, E);
        const int depth = anc ? __builtin_popcountll(anc[t]) - 1 : t;
        rope_angles(m, pos0 + depth, st->rope_cs + (size_t)t * hp->n_rot);
    }
    int32_t pos_buf[256], *pos = n <= 256 ? pos_buf : malloc(sizeof(int32_t) * (size_t)n);
    if (!pos) return err_set(err, ERR_NOMEM, "out of memory");
    for (int t = 0; t < n; t++) pos[t] = pos0 + t;

    for (int l = 0; l < hp->n_layer && !rc; l++) {
        const model_layer *L = &m->layers[l];
        /* attention: norm, q/k/v projections, RoPE, cache, attend, output projection */
        rmsnorm_rows(st, st->xn, st->x, L->attn_norm.data, E, n, hp->rms_eps);
        if ((rc = mat_mul_set(st, (const model_mat *[]){&L->wq, &L->wk, &L->wv}, 3, st->xn, n,
                              (float *[]){st->q, st->k, st->v}, err)))
            break;
        add_bias(st->q, &L->bq, n);
        add_bias(st->k, &L->bk, n);
        add_bias(st->v, &L->bv, n);
        for (int t = 0; t < n; t++) {
            const float *cs = st->rope_cs + (size_t)t * hp->n_rot;
            rope_apply(st->q + (size_t)t * q_dim, hp->n_head, hp->head_dim, hp->n_rot, hp->rope_neox, cs);
            rope_apply(st->k + (size_t)t * k_dim, hp->n_head_kv, hp->head_dim, hp->n_rot, hp->rope_neox, cs);
        }
        if ((rc = kv->append(kv->self, l, n, pos, st->k, st->v, err))) break;
        if (kv->queries) kv->queries(kv->self, l, n, st->q);
        if ((rc = attention(st, kv, l, n, pos0, anc, trunk, err))) break;
        if ((rc = mat_mul(st, &L->wo, st->att, n, st->ffn_out, err))) break;
        for (size_t i = 0; i < (size_t)n * E; i++) st->x[i] += st->ffn_out[i];

        /* FFN: norm, SwiGLU (dense or mixture of experts), residual */
        rmsnorm_rows(st, st->xn, st->x, L->ffn_norm.data, E, n, hp->rms_eps);
        rc = hp->n_expert > 0 ? ffn_moe(st, experts, l, n, err) : ffn_dense(st, L, n, err);
        if (rc) break;
        observe(st, l, FWD_AT_FFN, n, st->xn, hp->n_expert > 0 ? NULL : st->hg);
        for (size_t i = 0; i < (size_t)n * E; i++) st->x[i] += st->ffn_out[i];
        observe(st, l, FWD_AT_LAYER_END, n, st->x, NULL);
        /* the prediction again from the layer's output: later, but closer (the next attention still overlaps) */
        if (hp->n_expert > 0 && experts && experts->hint_next && l + 1 < hp->n_layer &&
            (rc = predict_next(st, experts, l, n, err)))
            break;
    }
    if (pos != pos_buf) free(pos);
    if (rc) return rc;

    /* logits of the requested rows: final norm, output projection (all rows in one matmul) */
    for (int i = 0; i < n_out; i++) {
        int t = out_rows ? out_rows[i] : (n_out == n ? i : n - n_out + i);
        fwd_rmsnorm(st->xn + (size_t)i * E, st->x + (size_t)t * E, m->output_norm.data, E, hp->rms_eps);
    }
    if (!n_out) return ERR_OK;
    rc = mat_mul(st, &m->output, st->xn, n_out, logits, err);
    return rc ? rc : check_finite(logits, (size_t)n_out * (size_t)m->hp.n_vocab, pos0, err);
}
