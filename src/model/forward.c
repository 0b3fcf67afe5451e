/*
 * forward — the forward pass, top to bottom.
 *
 * x = embedding(token) * embd_scale; for each layer:
 *     x += rs * post_norm(Wo · attention(RoPE(Wq·n(x)), RoPE(Wk·n(x)), Wv·n(x)))
 *     x += rs * post_norm(FFN(n(x)))        n = RMSNorm with the layer's weight
 * logits = softcap(logit_scale * Wout · n(x)).
 * The architecture's features are data in model_hparams (model/arch.c):
 * biases, q/k norms, the attention scale, soft-cap and sliding window, the
 * residual scale rs, post-norms (identity when absent). Latent attention is
 * forward_mla.c; the FFN, dense or a mixture of experts, forward_ffn.c.
 *
 * Every matrix product goes to core/matmul (which schedules it over the
 * model's threads, dispatching on the weight's own type); these files only
 * name the matrices. Attention runs its (token, head) pairs across the
 * threads. State buffers live in fwd_state and grow with the batch.
 */
#include "forward_internal.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/kernels/kernels.h"
#include "core/quant.h"

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
    /* each thread's attention working memory, here rather than in thread-local storage (attn.h) */
    st->attn_scratch = aligned_alloc(ATTN_SCRATCH_ALIGN, (size_t)(st->nth > 0 ? st->nth : 1) * ATTN_SCRATCH_BYTES);
    if (!st->router || !st->mm || !st->attn_scratch) {
        fwd_state_free(st);
        return NULL;
    }
    /* resident from the start (a conversation's fixed cost), not a page at a time as threads first use it */
    memset(st->attn_scratch, 0, (size_t)(st->nth > 0 ? st->nth : 1) * ATTN_SCRATCH_BYTES);
    return st;
}

void fwd_state_free(fwd_state *st) {
    if (!st) return;
    float *bufs[] = {st->x,        st->xn,      st->q,       st->k,        st->v,  st->att, st->ffn_out,
                     st->hg,       st->hu,      st->rope_cs, st->router,   st->observed, st->route_w,
                     st->member_w, st->xe,      st->eo,      st->qa,       st->lat, st->low, st->oh};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    matmul_ctx_free(st->mm);
    free(st->attn_scratch);
    free(st->runs);
    free(st->fa_parts);
    free(st->parts);
    free(st->pos);
    free(st->out);
    free(st->route);
    free(st->route_next);
    free(st->members);
    free(st->row_lora);
    free(st->lora_rows);
    free(st->lora_u);
    free(st);
}

void fwd_set_lora(fwd_state *st, const lora_set *set) { st->lora = set; }

void fwd_set_observer(fwd_state *st, fwd_observer fn, void *ctx) {
    st->observer = fn;
    st->observer_ctx = ctx;
}

static void observe(fwd_state *st, int layer, fwd_point at, int T, const float *x, const float *act) {
    if (!st->observer) return;
    const fwd_tap tap = {layer, at, T, x, act};
    st->observer(st->observer_ctx, &tap);
}

static size_t max3(size_t a, size_t b, size_t c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

static err_code reserve(fwd_state *st, int n, err_t *err) {
    if (n <= st->cap) return ERR_OK;
    const model_hparams *hp = &st->m->hp;
    size_t T = (size_t)n;
    const size_t ff = max3((size_t)hp->n_ff, (size_t)hp->n_ff_shexp, (size_t)hp->n_ff_dense);
    const size_t kvl = (size_t)hp->kv_lora_rank, mla = kvl > 0, lat_row = kvl + (size_t)hp->n_rot;
    struct { float **p; size_t per_token; } b[] = {
        {&st->x, (size_t)hp->n_embd},
        {&st->xn, (size_t)hp->n_embd},
        {&st->q, (size_t)hp->n_head * hp->head_dim},
        {&st->k, max3((size_t)hp->n_head_kv * hp->head_dim, lat_row, 1)},
        {&st->v, max3((size_t)hp->n_head_kv * hp->head_dim_v, kvl, 1)},
        {&st->qa, mla ? (size_t)hp->n_head * lat_row : 1},
        {&st->lat, mla ? (size_t)hp->n_head * kvl : 1},
        {&st->low, mla ? max3((size_t)hp->q_lora_rank, kvl, 1) : 1},
        {&st->oh, mla ? (size_t)hp->head_dim_v : 1},
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
        free(*b[i].p); /* nothing in them outlives a pass */
        *b[i].p = aligned_alloc(64, (sizeof(float) * T * b[i].per_token + 63) & ~(size_t)63);
        if (!*b[i].p) {
            st->cap = 0; /* the buffers freed before it are reserved again by the next pass */
            return err_set(err, ERR_NOMEM, "out of memory for a batch of %d tokens", n);
        }
    }
    const size_t per = (size_t)(hp->n_expert_used > 0 ? hp->n_expert_used : 1);
    int32_t *r = xrealloc(st->route, sizeof(int32_t) * T * per);
    if (r) st->route = r;
    int32_t *mb = xrealloc(st->members, sizeof(int32_t) * T);
    if (mb) st->members = mb;
    int32_t *ps = xrealloc(st->pos, sizeof(int32_t) * T);
    if (ps) st->pos = ps;
    int32_t *lr = xrealloc(st->lora_rows, sizeof(int32_t) * T);
    if (lr) st->lora_rows = lr;
    const lora_set **rl = xrealloc(st->row_lora, sizeof(*rl) * T);
    if (rl) st->row_lora = rl;
    if (!r || !mb || !ps || !lr || !rl) return err_set(err, ERR_NOMEM, "out of memory for a batch of %d tokens", n);
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

err_code fwd_mat_mul(fwd_state *st, const model_mat *w, const float *x, int T, float *y, err_t *err) {
    const matmul_weight v = weight_view(w);
    return matmul(st->mm, &v, x, T, y, err);
}

err_code fwd_mat_mul_set(fwd_state *st, const model_mat *const *ws, int n, const float *x, int T, float *const *ys,
                         err_t *err) {
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

void fwd_norm_rows(fwd_state *st, float *out, const float *x, const float *weight, int n, int T, float eps) {
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

/* cos/sin of every rotated pair for one position (YaRN: model/arch.c). */
void fwd_rope_angles(const model *m, int32_t pos, float *cs) {
    const model_hparams *hp = &m->hp;
    const float *freq_div = m->rope_freqs.data;
    for (int i = 0; i < hp->n_rot / 2; i++) {
        double theta = (double)pos * pow(hp->rope_freq_base, -2.0 * i / hp->n_rot);
        if (freq_div) theta /= freq_div[i];
        if (hp->rope_yarn) {
            const double y = (i - hp->yarn_corr[0]) / fmax(0.001, hp->yarn_corr[1] - hp->yarn_corr[0]);
            const double keep = 1.0 - fmin(1.0, fmax(0.0, y)); /* the share of the original angle */
            theta = theta * hp->rope_freq_scale * (1.0 - keep) + theta * keep;
        } else {
            theta *= hp->rope_freq_scale;
        }
        cs[2 * i] = (float)cos(theta) * hp->rope_attn_factor;
        cs[2 * i + 1] = (float)sin(theta) * hp->rope_attn_factor;
    }
}

void fwd_rope_apply(float *vec, int n_heads, int head_dim, int n_rot, bool neox, const float *cs) {
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

/* Attention runs on the attn kernel (core/kernels/attn.h) in units of
 * (sequence, KV head, tile of 16 queries), the queries of a KV head ordered
 * (token, head in its group), so a tile holds the query heads that read the
 * same keys; a tile never mixes sequences, so a query's output is the same
 * whatever else is in the batch. */
typedef struct fa_part {
    int unit0, n_tiles;      /* its first unit; tiles per KV head */
    int row0, T;
    int32_t pos0;
    const kv_span *spans;    /* its cache's view */
    int n_spans;
    size_t runs0;            /* its runs in st->runs: n_head_kv lists of n_spans */
    size_t n_entries, obs0;  /* its entries; the observed sums of its units from st->observed + obs0 */
    int tile_from, tile_to;  /* the tiles whose queries report their weights (per KV head), a row each */
    int observe_from;        /* tokens from here on report their weights; T = none */
    int observe_to;          /* ... and before this one (T, or a tree batch's trunk) */
    const uint64_t *anc;     /* a tree batch's ancestry, or NULL */
} fa_part;

typedef struct {
    fwd_state *st;
    const fwd_attn_shape *sh;
    attn_fn fn;
    const fa_part *parts;
    int n_parts, n_units;
    atomic_int next;
} fa_job;

/* A unit's row of observed sums: one per (KV head, observed tile), so the
 * sums are added up in one fixed order afterwards (report_observed) whatever
 * thread ran the unit and whatever else shared the pass. */
static float *unit_obs(const fa_job *j, const fa_part *p, int kvh, int tile) {
    const int n = p->tile_to - p->tile_from;
    return j->st->observed + p->obs0 + ((size_t)kvh * n + (size_t)(tile - p->tile_from)) * p->n_entries;
}

static void fa_unit(fa_job *j, const fa_part *p, int unit, void *scratch) {
    const fwd_attn_shape *sh = j->sh;
    const int group = sh->n_head / sh->n_head_kv, local = unit - p->unit0;
    const int kvh = local / p->n_tiles, u0 = local % p->n_tiles * ATTN_LANES;
    const int u1 = u0 + ATTN_LANES < p->T * group ? u0 + ATTN_LANES : p->T * group;
    attn_queries q = {.hd = sh->hd, .hdv = sh->hdv, .scale = sh->scale, .softcap = sh->softcap,
                      .window = sh->window, .n_q = u1 - u0, .tree = p->anc != NULL, .tree_pos0 = p->pos0};
    for (int u = u0; u < u1; u++) {
        const int t = u / group, h = kvh * group + u % group;
        const size_t row = (size_t)(p->row0 + t);
        q.q[u - u0] = sh->q + (row * sh->n_head + h) * sh->hd;
        q.qpos[u - u0] = p->pos0 + t;
        q.out[u - u0] = sh->out + (row * sh->n_head + h) * sh->hdv;
        if (p->anc) q.anc[u - u0] = p->anc[t];
        if (t >= p->observe_from && t < p->observe_to) q.obs_lanes |= 1u << (u - u0);
    }
    if (q.obs_lanes) q.obs = unit_obs(j, p, kvh, local % p->n_tiles);
    j->fn(&q, j->st->runs + p->runs0 + (size_t)kvh * p->n_spans, p->n_spans, scratch);
}

static void fa_work(void *ctx, int ith, int nth) {
    fa_job *j = ctx;
    (void)nth;
    void *scratch = j->st->attn_scratch + (size_t)ith * ATTN_SCRATCH_BYTES; /* ith < the pool's size */
    int at = 0; /* units are taken in increasing order: the part only moves on */
    for (;;) {
        const int unit = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (unit >= j->n_units) break;
        while (at + 1 < j->n_parts && unit >= j->parts[at + 1].unit0) at++;
        fa_unit(j, &j->parts[at], unit, scratch);
    }
}

static err_code grow_runs(fwd_state *st, size_t need, err_t *err) {
    if (need <= st->runs_cap) return ERR_OK;
    attn_keys *r = xrealloc(st->runs, sizeof *r * need);
    if (!r) return err_set(err, ERR_NOMEM, "out of memory for attention");
    st->runs = r;
    st->runs_cap = need;
    return ERR_OK;
}

/* A part's view as the kernel's runs, one list per KV head, from p->runs0. */
static void view_runs(fwd_state *st, const fa_part *p, const fwd_attn_shape *sh) {
    for (int h = 0; h < sh->n_head_kv; h++)
        for (int s = 0; s < p->n_spans; s++) {
            const kv_span *sp = &p->spans[s];
            st->runs[p->runs0 + (size_t)h * p->n_spans + s] = (attn_keys){
                .k_type = sp->k_type, .v_type = sp->v_type, .n = sp->n_tokens, .pos = sp->pos, .k = sp->k, .v = sp->v,
                .k_off = h * sh->hd, .v_off = h * sh->hdv, .k_stride = sp->k_row_bytes, .v_stride = sp->v_row_bytes};
        }
}

/* Each part's view (fa_part: spans, entries, units, runs0, obs0); *runs and
 * *obs: the runs and the observed floats they take in all. */
static err_code plan_parts(const fwd_rows *r, int layer, const fwd_attn_shape *sh, fa_part *fp, size_t *runs,
                           size_t *obs, err_t *err) {
    const int group = sh->n_head / sh->n_head_kv;
    int units = 0;
    *runs = *obs = 0;
    for (int i = 0; i < r->n_parts; i++) {
        const fwd_part *rp = &r->part[i];
        const kv_iface *kv = rp->kv;
        fa_part *p = &fp[i];
        *p = (fa_part){.unit0 = units, .n_tiles = (rp->n * group + ATTN_LANES - 1) / ATTN_LANES, .row0 = rp->row0,
                       .T = rp->n, .pos0 = rp->pos0, .runs0 = *runs, .observe_from = rp->n, .observe_to = rp->n,
                       .anc = rp->anc};
        p->n_spans = kv->view(kv->self, layer, &p->spans);
        for (int s = 0; s < p->n_spans; s++) {
            p->n_entries += (size_t)p->spans[s].n_tokens;
            if (!attn_type_supported(p->spans[s].k_type) || !attn_type_supported(p->spans[s].v_type))
                return err_set(err, ERR_UNSUPPORTED, "KV cache rows of type %u/%u", p->spans[s].k_type,
                               p->spans[s].v_type);
        }
        units += p->n_tiles * sh->n_head_kv;
        *runs += (size_t)p->n_spans * (size_t)sh->n_head_kv;
        if (!kv->observe) continue;
        /* a tree batch reports its trunk only: the branches are guesses, gone after the pass */
        const int U = rp->anc ? rp->trunk : rp->n;
        p->observe_to = U;
        p->observe_from = kv->observe_last > 0 && kv->observe_last < U ? U - kv->observe_last : 0;
        p->tile_from = p->observe_from * group / ATTN_LANES;
        p->tile_to = (p->observe_to * group + ATTN_LANES - 1) / ATTN_LANES;
        if (p->tile_to <= p->tile_from) p->tile_to = p->tile_from + 1; /* a row of zeros when none report */
        p->obs0 = *obs;
        *obs += (size_t)(p->tile_to - p->tile_from) * (size_t)sh->n_head_kv * p->n_entries;
    }
    return ERR_OK;
}

static err_code grow_fa_parts(fwd_state *st, int n, err_t *err) {
    if (n <= st->fa_parts_cap) return ERR_OK;
    fa_part *p = xrealloc(st->fa_parts, sizeof *p * (size_t)n);
    if (!p) return err_set(err, ERR_NOMEM, "out of memory for attention");
    st->fa_parts = p;
    st->fa_parts_cap = n;
    return ERR_OK;
}

/* Each observing part's weights, its units' sums added in unit order, to its cache. */
static void report_observed(fwd_state *st, const fwd_rows *r, int layer, const fa_part *fp, int kv_heads) {
    for (int i = 0; i < r->n_parts; i++) {
        const kv_iface *kv = r->part[i].kv;
        if (!kv->observe) continue;
        const size_t n = fp[i].n_entries, rows = (size_t)(fp[i].tile_to - fp[i].tile_from) * (size_t)kv_heads;
        float *sum = st->observed + fp[i].obs0;
        for (size_t u = 1; u < rows; u++)
            for (size_t e = 0; e < n; e++) sum[e] += sum[u * n + e];
        kv->observe(kv->self, layer, fp[i].observe_to - fp[i].observe_from, (int)n, sum);
    }
}

err_code fwd_attend(fwd_state *st, const fwd_rows *r, int layer, const fwd_attn_shape *sh, err_t *err) {
    err_code rc = grow_fa_parts(st, r->n_parts, err);
    if (rc) return rc;
    fa_part *fp = st->fa_parts;
    size_t n_runs, n_obs;
    if ((rc = plan_parts(r, layer, sh, fp, &n_runs, &n_obs, err)) || (rc = grow_runs(st, n_runs, err))) return rc;
    int64_t macs = 0;
    for (int i = 0; i < r->n_parts; i++) {
        view_runs(st, &fp[i], sh);
        macs += (int64_t)fp[i].T * sh->n_head * (int64_t)fp[i].n_entries * (sh->hd + sh->hdv);
    }
    const fa_part *last = &fp[r->n_parts - 1];
    fa_job j = {.st = st, .sh = sh, .fn = attn_get(), .parts = fp, .n_parts = r->n_parts,
                .n_units = last->unit0 + last->n_tiles * sh->n_head_kv};
    if (n_obs) {
        if ((rc = grow(&st->observed, &st->observed_cap, n_obs, err))) return rc;
        memset(st->observed, 0, sizeof(float) * n_obs);
    }
    atomic_init(&j.next, 0);
    if (macs < MIN_PARALLEL_MACS) fa_work(&j, 0, 1);
    else tpool_run(st->pool, fa_work, &j);
    if (n_obs) report_observed(st, r, layer, fp, sh->n_head_kv);
    return ERR_OK;
}

/* q and k normed over the whole projected row, or per head (qk_norm). */
static void qk_norm(const model_mat *w, float *v, int n_heads, int hd, float eps) {
    const int per = (int)w->n_in, parts = n_heads * hd / per;
    for (int i = 0; i < parts; i++) fwd_rmsnorm(v + (size_t)i * per, v + (size_t)i * per, w->data, per, eps);
}

static bool any_non_finite(const float *x, size_t n);

err_code fwd_check_qk(const float *q, size_t nq, const float *k, size_t nk, int layer, int32_t pos0, err_t *err) {
    if (!any_non_finite(q, nq) && !any_non_finite(k, nk)) return ERR_OK;
    return err_set(err, ERR_BAD_VALUE,
                   "layer %d computed non-finite attention queries or keys (NaN or Inf) at positions from %d: "
                   "attn_q, attn_k (attn_kv_a_mqa, attn_kv_b) or their norms hold values that are not finite numbers",
                   layer, (int)pos0);
}

/* Multi-head (grouped-query) attention of st->xn into st->ffn_out: q/k/v
 * projections (biases, q/k norms), RoPE, each part's cache, the kernel,
 * attn_output. The projections take every row of the batch at once. */
static err_code attn_heads(fwd_state *st, const fwd_rows *r, int l, err_t *err) {
    const model_hparams *hp = &st->m->hp;
    const model_layer *L = &st->m->layers[l];
    const int n = r->n;
    const size_t q_dim = (size_t)hp->n_head * hp->head_dim, k_dim = (size_t)hp->n_head_kv * hp->head_dim;
    const size_t v_dim = (size_t)hp->n_head_kv * hp->head_dim_v;
    err_code rc = fwd_mat_mul_set(st, (const model_mat *[]){&L->wq, &L->wk, &L->wv}, 3, st->xn, n,
                                  (float *[]){st->q, st->k, st->v}, err);
    if (rc || (rc = fwd_lora(st, l, LORA_Q, 0, st->xn, n, NULL, st->q, err)) ||
        (rc = fwd_lora(st, l, LORA_K, 0, st->xn, n, NULL, st->k, err)) ||
        (rc = fwd_lora(st, l, LORA_V, 0, st->xn, n, NULL, st->v, err)))
        return rc;
    add_bias(st->q, &L->bq, n);
    add_bias(st->k, &L->bk, n);
    add_bias(st->v, &L->bv, n);
    for (int t = 0; t < n; t++) {
        float *q = st->q + (size_t)t * q_dim, *k = st->k + (size_t)t * k_dim;
        if (L->q_norm.data) qk_norm(&L->q_norm, q, hp->n_head, hp->head_dim, hp->rms_eps);
        if (L->k_norm.data) qk_norm(&L->k_norm, k, hp->n_head_kv, hp->head_dim, hp->rms_eps);
        const float *cs = st->rope_cs + (size_t)t * hp->n_rot;
        fwd_rope_apply(q, hp->n_head, hp->head_dim, hp->n_rot, hp->rope_neox, cs);
        fwd_rope_apply(k, hp->n_head_kv, hp->head_dim, hp->n_rot, hp->rope_neox, cs);
    }
    if ((rc = fwd_check_qk(st->q, (size_t)n * q_dim, st->k, (size_t)n * k_dim, l, r->pos[0], err))) return rc;
    for (int i = 0; i < r->n_parts; i++) {
        const fwd_part *p = &r->part[i];
        const size_t at = (size_t)p->row0;
        if ((rc = p->kv->append(p->kv->self, l, p->n, r->pos + at, st->k + at * k_dim, st->v + at * v_dim, err)))
            return rc;
        if (p->kv->queries) p->kv->queries(p->kv->self, l, p->n, st->q + at * q_dim);
    }
    const fwd_attn_shape sh = {.n_head = hp->n_head, .n_head_kv = hp->n_head_kv, .hd = hp->head_dim,
                               .hdv = hp->head_dim_v, .q = st->q, .out = st->att, .scale = hp->attn_scale,
                               .softcap = hp->attn_softcap, .window = model_layer_swa(hp, l) ? hp->swa_window : 0};
    if ((rc = fwd_attend(st, r, l, &sh, err)) || (rc = fwd_mat_mul(st, &L->wo, st->att, n, st->ffn_out, err)))
        return rc;
    return fwd_lora(st, l, LORA_O, 0, st->att, n, NULL, st->ffn_out, err);
}

/* x += residual_scale * (post_norm ? rmsnorm(out, post_norm) : out) */
static void residual_add(fwd_state *st, const model_mat *post_norm, int n) {
    const model_hparams *hp = &st->m->hp;
    const size_t total = (size_t)n * hp->n_embd;
    if (post_norm->data) fwd_norm_rows(st, st->ffn_out, st->ffn_out, post_norm->data, hp->n_embd, n, hp->rms_eps);
    if (hp->residual_scale != 1.0f)
        for (size_t i = 0; i < total; i++) st->x[i] += hp->residual_scale * st->ffn_out[i];
    else
        for (size_t i = 0; i < total; i++) st->x[i] += st->ffn_out[i];
}

/* One layer: attention, then the FFN, each added to the residual stream. */
static err_code layer(fwd_state *st, const experts_iface *experts, int l, const fwd_rows *r, err_t *err) {
    const model_hparams *hp = &st->m->hp;
    const model_layer *L = &st->m->layers[l];
    const int E = hp->n_embd, n = r->n;
    fwd_norm_rows(st, st->xn, st->x, L->attn_norm.data, E, n, hp->rms_eps);
    err_code rc = hp->kv_lora_rank > 0 ? fwd_attn_mla(st, r, l, err) : attn_heads(st, r, l, err);
    if (rc) return rc;
    observe(st, l, FWD_AT_ATTN, n, st->xn, st->att);
    residual_add(st, &L->post_attn_norm, n);

    fwd_norm_rows(st, st->xn, st->x, L->ffn_norm.data, E, n, hp->rms_eps);
    if ((rc = fwd_ffn(st, experts, l, n, err))) return rc;
    observe(st, l, FWD_AT_FFN, n, st->xn, L->gate_inp.data ? NULL : st->hg);
    residual_add(st, &L->post_ffn_norm, n);
    observe(st, l, FWD_AT_LAYER_END, n, st->x, NULL);
    /* the prediction again from the layer's output: later, but closer (the next attention still overlaps) */
    if (experts && experts->hint_next && l + 1 < hp->n_layer && st->m->layers[l + 1].gate_inp.data)
        rc = fwd_predict_next(st, experts, l, n, err);
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

/* Does any of the n floats have the all-ones exponent of NaN and Inf? On the
 * bits, so it vectorizes: n_embd integer ops a token per layer. */
static bool any_non_finite(const float *x, size_t n) {
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        bad |= (uint32_t)((u & 0x7f800000u) == 0x7f800000u);
    }
    return bad != 0;
}

/* The residual stream after layer l, checked where a non-finite value arises:
 * a NaN step (scale) in a quantized block, or a NaN or Inf weight, makes its
 * layer's output non-finite. Left alone, it would not always reach the logits:
 * the next matmul's activation quantizer zeroes a non-finite block, so the
 * logits can come out finite and flat (token 0 forever, with success). */
static err_code check_layer(const float *x, size_t n, int layer, int32_t pos0, err_t *err) {
    if (!any_non_finite(x, n)) return ERR_OK;
    return err_set(err, ERR_BAD_VALUE,
                   "layer %d computed non-finite values (NaN or Inf) at positions from %d: the model's weights or "
                   "their quantization scales hold values that are not finite numbers",
                   layer, (int)pos0);
}

err_code forward(fwd_state *st, const kv_iface *kv, const experts_iface *experts, const int32_t *tokens, int n,
                 int32_t pos0, const int32_t *out_rows, int n_out, float *logits, err_t *err) {
    return forward_tree(st, kv, experts, tokens, n, pos0, NULL, out_rows, n_out, logits, err);
}

/* A sequence's arguments, as forward() checks them. */
static err_code check_seq(const model_hparams *hp, const fwd_seq *q, err_t *err) {
    if (q->n <= 0) return err_set(err, ERR_INVALID_ARG, "forward of %d tokens", q->n);
    if (!q->kv) return err_set(err, ERR_INVALID_ARG, "a sequence without a cache");
    if (q->pos0 < 0 || q->pos0 > INT32_MAX - q->n) return err_set(err, ERR_INVALID_ARG, "position %d out of range", q->pos0);
    if (q->n_out < 0 || q->n_out > q->n)
        return err_set(err, ERR_INVALID_ARG, "%d logit rows asked of %d tokens", q->n_out, q->n);
    for (int i = 0; q->out_rows && i < q->n_out; i++)
        if (q->out_rows[i] < 0 || q->out_rows[i] >= q->n)
            return err_set(err, ERR_INVALID_ARG, "logit row %d is outside the %d tokens", q->out_rows[i], q->n);
    for (int t = 0; t < q->n; t++)
        if (q->tokens[t] < 0 || q->tokens[t] >= hp->n_vocab)
            return err_set(err, ERR_INVALID_ARG, "token id %d is outside the vocabulary of %d", q->tokens[t], hp->n_vocab);
    return ERR_OK;
}

/* A tree batch's leading tokens in a line, into *trunk, once its ancestry is checked. */
static err_code check_tree(const uint64_t *anc, int n, int *trunk, err_t *err) {
    if (n > ATTN_TREE_MAX) return err_set(err, ERR_INVALID_ARG, "a tree batch of %d tokens (%d at most)", n, ATTN_TREE_MAX);
    *trunk = 0;
    for (int t = 0; t < n; t++) {
        const uint64_t self = 1ull << t, upto = self | (self - 1);
        if (!(anc[t] & self) || (anc[t] & ~upto))
            return err_set(err, ERR_INVALID_ARG, "tree token %d: its ancestry must hold itself and earlier tokens only", t);
        if (*trunk == t && anc[t] == upto) *trunk = t + 1;
    }
    return ERR_OK;
}

/* The parts and row positions of a batch (reserve() made room for its rows);
 * a tree sequence's ancestry is checked here. */
static err_code lay_out(fwd_state *st, const fwd_seq *seqs, int n_seqs, fwd_rows *r, err_t *err) {
    if (n_seqs > st->parts_cap) {
        fwd_part *p = xrealloc(st->parts, sizeof *p * (size_t)n_seqs);
        if (!p) return err_set(err, ERR_NOMEM, "out of memory for a batch of %d sequences", n_seqs);
        st->parts = p;
        st->parts_cap = n_seqs;
    }
    int row = 0;
    st->lora_on = false;
    for (int i = 0; i < n_seqs; i++) {
        fwd_part *p = &st->parts[i];
        *p = (fwd_part){.kv = seqs[i].kv, .row0 = row, .n = seqs[i].n, .pos0 = seqs[i].pos0, .anc = seqs[i].anc,
                        .trunk = seqs[i].n};
        err_code rc = p->anc ? check_tree(p->anc, p->n, &p->trunk, err) : ERR_OK;
        if (rc) return rc;
        for (int t = 0; t < seqs[i].n; t++) {
            st->pos[row + t] = seqs[i].pos0 + t;
            st->row_lora[row + t] = lora_set_active(seqs[i].lora) ? seqs[i].lora : NULL;
        }
        st->lora_on |= lora_set_active(seqs[i].lora);
        row += seqs[i].n;
    }
    r->part = st->parts;
    r->n_parts = n_seqs;
    r->pos = st->pos;
    return ERR_OK;
}

/* Token embeddings, and the RoPE angles of each row's position (a tree
 * token's is its depth: pos0 + the number of its ancestors). */
static void embed(fwd_state *st, const fwd_seq *seqs, const fwd_rows *r) {
    const model *m = st->m;
    const model_hparams *hp = &m->hp;
    const int E = hp->n_embd;
    for (int i = 0; i < r->n_parts; i++)
        for (int t = 0; t < seqs[i].n; t++) {
            const size_t row = (size_t)(r->part[i].row0 + t);
            const uint8_t *e = (const uint8_t *)m->tok_embd.data + (size_t)seqs[i].tokens[t] * m->tok_embd.row_bytes;
            float *x = st->x + row * E;
            quant_dequantize_row(m->tok_embd.type, e, x, E);
            if (hp->embd_scale != 1.0f)
                for (int k = 0; k < E; k++) x[k] *= hp->embd_scale;
            const uint64_t *anc = r->part[i].anc;
            const int depth = anc ? __builtin_popcountll(anc[t]) - 1 : t;
            fwd_rope_angles(m, seqs[i].pos0 + depth, st->rope_cs + row * hp->n_rot);
        }
}

/* Logits of every sequence's rows: final norm, the output projection of
 * all of them in one matmul, then each sequence's share to its buffer. */
static err_code output(fwd_state *st, const fwd_seq *seqs, const fwd_rows *r, err_t *err) {
    const model *m = st->m;
    const model_hparams *hp = &m->hp;
    const int E = hp->n_embd;
    int n_out = 0;
    for (int i = 0; i < r->n_parts; i++)
        for (int k = 0; k < seqs[i].n_out; k++, n_out++) {
            const fwd_seq *q = &seqs[i];
            const int t = q->out_rows ? q->out_rows[k] : (q->n_out == q->n ? k : q->n - q->n_out + k);
            st->lora_rows[n_out] = r->part[i].row0 + t;
            fwd_rmsnorm(st->xn + (size_t)n_out * E, st->x + (size_t)(r->part[i].row0 + t) * E, m->output_norm.data, E,
                        hp->rms_eps);
        }
    if (!n_out) return ERR_OK;
    const size_t V = (size_t)hp->n_vocab, total = (size_t)n_out * V;
    float *logits = seqs[0].logits;
    err_code rc = r->n_parts > 1 ? grow(&st->out, &st->out_cap, total, err) : ERR_OK;
    if (r->n_parts > 1) logits = st->out;
    if (rc || (rc = fwd_mat_mul(st, &m->output, st->xn, n_out, logits, err)) ||
        (rc = fwd_lora(st, -1, LORA_OUTPUT, 0, st->xn, n_out, st->lora_rows, logits, err)))
        return rc;
    if (hp->logit_scale != 1.0f)
        for (size_t i = 0; i < total; i++) logits[i] *= hp->logit_scale;
    if (hp->final_softcap > 0.0f)
        for (size_t i = 0; i < total; i++) logits[i] = hp->final_softcap * tanhf(logits[i] / hp->final_softcap);
    if ((rc = check_finite(logits, total, seqs[0].pos0, err)) || r->n_parts == 1) return rc;
    for (int i = 0, at = 0; i < r->n_parts; at += seqs[i].n_out, i++)
        if (seqs[i].n_out) memcpy(seqs[i].logits, logits + (size_t)at * V, sizeof(float) * V * (size_t)seqs[i].n_out);
    return ERR_OK;
}

/* The pass over every sequence's rows. */
static err_code run(fwd_state *st, const experts_iface *experts, const fwd_seq *seqs, int n_seqs, err_t *err) {
    const model_hparams *hp = &st->m->hp;
    if (n_seqs <= 0) return err_set(err, ERR_INVALID_ARG, "a batch of %d sequences", n_seqs);
    if (n_seqs > 1 && !forward_batches(st->m))
        return err_set(err, ERR_UNSUPPORTED, "latent attention (MLA) runs one sequence per pass");
    fwd_rows r = {0};
    for (int i = 0; i < n_seqs; i++) {
        err_code rc = check_seq(hp, &seqs[i], err);
        if (rc) return rc;
        if (seqs[i].n > INT32_MAX / 2 - r.n) return err_set(err, ERR_INVALID_ARG, "a batch of too many tokens");
        r.n += seqs[i].n;
    }
    err_code rc = reserve(st, r.n, err);
    if (rc || (rc = lay_out(st, seqs, n_seqs, &r, err))) return rc;
    embed(st, seqs, &r);
    for (int l = 0; l < hp->n_layer && !rc; l++) {
        rc = layer(st, experts, l, &r, err);
        if (!rc) rc = check_layer(st->x, (size_t)r.n * hp->n_embd, l, seqs[0].pos0, err);
    }
    return rc ? rc : output(st, seqs, &r, err);
}

bool forward_batches(const model *m) { return m->hp.kv_lora_rank == 0; }

bool forward_batch_invariant(const model *m) {
    const matmul_weight out = weight_view(&m->output); /* the embedding, when tied */
    if (!matmul_batch_invariant(&out)) return false;
    const model_mat *mats[12];
    for (int l = -1; l < m->hp.n_layer; l++) {
        const int n = model_matrices(m, l, mats);
        for (int i = 0; i < n; i++) {
            const matmul_weight w = weight_view(mats[i]);
            if (mats[i]->data && !matmul_batch_invariant(&w)) return false;
        }
    }
    return true;
}

err_code forward_batch(fwd_state *st, const experts_iface *experts, const fwd_seq *seqs, int n_seqs, err_t *err) {
    return run(st, experts, seqs, n_seqs, err);
}

err_code forward_tree(fwd_state *st, const kv_iface *kv, const experts_iface *experts, const int32_t *tokens, int n,
                      int32_t pos0, const uint64_t *anc, const int32_t *out_rows, int n_out, float *logits,
                      err_t *err) {
    const fwd_seq q = {.kv = kv, .tokens = tokens, .n = n, .pos0 = pos0, .anc = anc, .out_rows = out_rows,
                       .n_out = n_out, .logits = logits, .lora = st->lora};
    return run(st, experts, &q, 1, err);
}
