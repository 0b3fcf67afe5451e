/*
 * upcycle_eval — what the upcycled model costs, measured on held-out text:
 * its perplexity and the KL divergence of each next-token distribution
 * from the dense model's, and how its routers behave — the numbers an
 * expert cache lives on: how evenly the experts are loaded, how often a
 * token's experts repeat the previous token's, and how well layer l's
 * experts are predicted one layer ahead by applying l's router to layer
 * l-1's FFN input or to the residual leaving layer l-1 (after l's FFN norm).
 *
 * The routes are recomputed from the written router (F32, as the forward
 * pass reads it) on the FFN inputs the forward pass observes.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "convert/upcycle_internal.h"
#include "core/quant.h"
#include "model/forward.h"
#include "runtime/session.h"

#define CHUNK 256

typedef struct {
    int64_t tokens, repeat_hits, pairs, ffn_hits, resid_hits, predicted, flips;
    int64_t *load; /* [E] */
} layer_stats;

typedef struct {
    const upcycle_plan *p;
    const model *moe;
    int cap;           /* tokens per forward call, at most */
    int32_t *route;    /* [n_layer][cap][K] */
    int32_t *pred_ffn, *pred_resid; /* [n_layer][cap][K]: layer l's experts predicted from l-1 */
    int32_t *prev;     /* [n_layer][K] the last token's experts; prev_ok says whether there is one */
    bool *prev_ok;
    float *scores, *xn; /* [E], [n_embd] */
    int32_t *raw;      /* [K] */
    float *gates;      /* [K] */
    layer_stats *st;   /* [n_layer] */
} route_ctx;

static void scores_of(const route_ctx *c, int layer, const float *x) {
    const int n = c->p->dense->hp.n_embd;
    const float *W = c->p->layers[layer].router;
    for (int e = 0; e < c->p->E; e++) c->scores[e] = quant_dot_row(QT_F32, W + (size_t)e * n, x, n);
}

static int overlap(const int32_t *a, const int32_t *b, int k) {
    int n = 0;
    for (int i = 0; i < k; i++)
        for (int j = 0; j < k; j++) n += a[i] == b[j];
    return n;
}

/* The experts the forward pass picks (its gating, in float as it computes
 * it); a near-tie the softmax's rounding breaks otherwise than the scores'
 * order counts as a flip. */
static void route_token(route_ctx *c, int layer, int32_t *chosen) {
    const int E = c->p->E, K = c->p->K;
    fwd_top_k(c->scores, E, K, c->raw);
    fwd_route(c->scores, E, K, chosen, c->gates);
    c->st[layer].flips += overlap(c->raw, chosen, K) != K;
}

static void at_ffn(route_ctx *c, const fwd_tap *tap) {
    const int l = tap->layer, K = c->p->K, n = c->p->dense->hp.n_embd, L = c->p->dense->hp.n_layer;
    layer_stats *s = &c->st[l];
    for (int t = 0; t < tap->T; t++) {
        const size_t at = ((size_t)l * c->cap + t) * K;
        int32_t *chosen = c->route + at;
        scores_of(c, l, tap->x + (size_t)t * n);
        route_token(c, l, chosen);
        s->tokens++;
        for (int j = 0; j < K; j++) s->load[chosen[j]]++;
        if (c->prev_ok[l]) {
            s->repeat_hits += overlap(chosen, c->prev + (size_t)l * K, K);
            s->pairs++;
        }
        memcpy(c->prev + (size_t)l * K, chosen, sizeof(int32_t) * K);
        c->prev_ok[l] = true;
        if (l > 0) {
            s->ffn_hits += overlap(chosen, c->pred_ffn + at, K);
            s->resid_hits += overlap(chosen, c->pred_resid + at, K);
            s->predicted++;
        }
        if (l + 1 < L) { /* layer l+1's router on this FFN input */
            scores_of(c, l + 1, tap->x + (size_t)t * n);
            fwd_top_k(c->scores, c->p->E, K, c->pred_ffn + at + (size_t)c->cap * K);
        }
    }
}

static void at_layer_end(route_ctx *c, const fwd_tap *tap) {
    const model_hparams *hp = &c->moe->hp;
    const int l = tap->layer, K = c->p->K, n = hp->n_embd;
    if (l + 1 >= hp->n_layer) return;
    const float *w = c->moe->layers[l + 1].ffn_norm.data;
    for (int t = 0; t < tap->T; t++) {
        fwd_rmsnorm(c->xn, tap->x + (size_t)t * n, w, n, hp->rms_eps);
        scores_of(c, l + 1, c->xn);
        fwd_top_k(c->scores, c->p->E, K, c->pred_resid + ((size_t)(l + 1) * c->cap + t) * K);
    }
}

static void observe_routes(void *ctx, const fwd_tap *tap) {
    route_ctx *c = ctx;
    if (tap->at == FWD_AT_FFN) at_ffn(c, tap);
    else at_layer_end(c, tap);
}

/* ---------------------------------------------------------------- quality */

typedef struct {
    double nll_dense, nll_moe, kld;
    int64_t agree, n;
} quality;

static double log_sum_exp(const float *x, int n) {
    float m = x[0];
    for (int i = 1; i < n; i++) m = fmaxf(m, x[i]);
    double s = 0.0;
    for (int i = 0; i < n; i++) s += exp((double)x[i] - m);
    return m + log(s);
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* Row r of each predicts next (the token after it). */
static void compare_row(const float *d, const float *m, int V, int32_t next, quality *q) {
    const double ld = log_sum_exp(d, V), lm = log_sum_exp(m, V);
    double kl = 0.0;
    for (int v = 0; v < V; v++) {
        const double pd = (double)d[v] - ld;
        kl += exp(pd) * (pd - ((double)m[v] - lm));
    }
    q->kld += kl;
    q->nll_dense += ld - d[next];
    q->nll_moe += lm - m[next];
    q->agree += argmax(d, V) == argmax(m, V);
    q->n++;
}

typedef struct {
    session *dense, *moe;
    int32_t *buf;
    float *ld, *lm; /* [CHUNK + 1][V] */
} eval_bufs;

static err_code run_chunks(eval_bufs *b, route_ctx *rc_, const int32_t *tok, int n, int32_t bos, int chunk,
                           quality *q, err_t *err) {
    const int V = b->dense->m->hp.n_vocab, lead = bos >= 0;
    err_code rc = ERR_OK;
    for (int t0 = 0; t0 < n && !rc; t0 += chunk) {
        const int c = n - t0 < chunk ? n - t0 : chunk, len = c + lead;
        if (lead) b->buf[0] = bos;
        memcpy(b->buf + lead, tok + t0, sizeof(int32_t) * (size_t)c);
        session_reset(b->dense);
        session_reset(b->moe);
        memset(rc_->prev_ok, 0, sizeof(bool) * (size_t)b->moe->m->hp.n_layer);
        rc = session_eval(b->dense, b->buf, len, true, b->ld, err);
        if (!rc) rc = session_eval(b->moe, b->buf, len, true, b->lm, err);
        for (int r = 0; !rc && r + 1 < len; r++)
            compare_row(b->ld + (size_t)r * V, b->lm + (size_t)r * V, V, b->buf[r + 1], q);
    }
    return rc;
}

static void summarise(const route_ctx *c, const quality *q, upcycle_report *rep) {
    const int E = c->p->E, K = c->p->K;
    rep->dense_nll = q->n ? q->nll_dense / q->n : 0.0;
    rep->moe_nll = q->n ? q->nll_moe / q->n : 0.0;
    rep->kld_mean = q->n ? q->kld / q->n : 0.0;
    rep->top1 = q->n ? (double)q->agree / q->n : 0.0;
    int64_t flips = 0, routed = 0;
    for (int l = 0; l < c->p->dense->hp.n_layer; l++) {
        const layer_stats *s = &c->st[l];
        const double mean = (double)s->tokens * K / E;
        double var = 0.0, mx = 0.0;
        for (int e = 0; e < E; e++) {
            var += (s->load[e] - mean) * (s->load[e] - mean) / E;
            mx = fmax(mx, (double)s->load[e]);
        }
        rep->layer[l].load_max = mean > 0 ? mx / mean : 0.0;
        rep->layer[l].load_cv = mean > 0 ? sqrt(var) / mean : 0.0;
        rep->layer[l].repeat = s->pairs ? (double)s->repeat_hits / ((double)s->pairs * K) : 0.0;
        rep->layer[l].recall_ffn = s->predicted ? (double)s->ffn_hits / ((double)s->predicted * K) : 0.0;
        rep->layer[l].recall_resid = s->predicted ? (double)s->resid_hits / ((double)s->predicted * K) : 0.0;
        flips += s->flips;
        routed += s->tokens;
    }
    rep->tie_flips = routed ? (double)flips / routed : 0.0;
}

static err_code route_ctx_init(route_ctx *c, const upcycle_plan *p, const model *moe, int cap, err_t *err) {
    const int L = p->dense->hp.n_layer, K = p->K;
    memset(c, 0, sizeof *c);
    c->p = p;
    c->moe = moe;
    c->cap = cap;
    const size_t per = (size_t)L * cap * K;
    c->route = malloc(sizeof(int32_t) * per);
    c->pred_ffn = calloc(per, sizeof(int32_t));
    c->pred_resid = calloc(per, sizeof(int32_t));
    c->prev = malloc(sizeof(int32_t) * (size_t)L * K);
    c->prev_ok = calloc((size_t)L, sizeof(bool));
    c->scores = malloc(sizeof(float) * (size_t)p->E);
    c->xn = malloc(sizeof(float) * (size_t)p->dense->hp.n_embd);
    c->raw = malloc(sizeof(int32_t) * (size_t)K);
    c->gates = malloc(sizeof(float) * (size_t)K);
    c->st = calloc((size_t)L, sizeof *c->st);
    bool ok = c->route && c->pred_ffn && c->pred_resid && c->prev && c->prev_ok && c->scores && c->xn && c->raw && c->gates && c->st;
    for (int l = 0; ok && l < L; l++) ok = (c->st[l].load = calloc((size_t)p->E, sizeof(int64_t))) != NULL;
    return ok ? ERR_OK : err_set(err, ERR_NOMEM, "out of memory");
}

static void route_ctx_free(route_ctx *c) {
    for (int l = 0; c->st && l < c->p->dense->hp.n_layer; l++) free(c->st[l].load);
    free(c->route), free(c->pred_ffn), free(c->pred_resid), free(c->prev), free(c->prev_ok);
    free(c->scores), free(c->xn), free(c->raw), free(c->gates), free(c->st);
}

err_code upcycle_measure(const upcycle_plan *p, const model *moe, const int32_t *tok, int n, int32_t bos,
                         int n_threads, upcycle_report *rep, err_t *err) {
    const model *dense = p->dense;
    const int chunk = dense->hp.n_ctx_train - 1 < CHUNK ? dense->hp.n_ctx_train - 1 : CHUNK, V = dense->hp.n_vocab;
    eval_bufs b = {0};
    route_ctx c = {0};
    quality q = {0};
    err_code rc = session_new(dense, chunk + 1, QT_F32, n_threads, &b.dense, err);
    if (!rc) rc = session_new(moe, chunk + 1, QT_F32, n_threads, &b.moe, err);
    if (!rc) rc = route_ctx_init(&c, p, moe, chunk + 1, err);
    b.buf = malloc(sizeof(int32_t) * (size_t)(chunk + 1));
    b.ld = malloc(sizeof(float) * (size_t)(chunk + 1) * V);
    b.lm = malloc(sizeof(float) * (size_t)(chunk + 1) * V);
    if (!rc && (!b.buf || !b.ld || !b.lm)) rc = err_set(err, ERR_NOMEM, "out of memory");
    if (!rc) {
        fwd_set_observer(b.moe->fwd, observe_routes, &c);
        rc = run_chunks(&b, &c, tok, n, bos, chunk, &q, err);
    }
    if (!rc) summarise(&c, &q, rep);
    if (c.p) route_ctx_free(&c);
    session_free(b.dense), session_free(b.moe);
    free(b.buf), free(b.ld), free(b.lm);
    return rc;
}
