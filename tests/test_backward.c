/*
 * test_backward — the gradient of a sequence's loss with respect to a LoRA
 * adapter and to every weight (train/backward.h, train/weights.h), on
 * stories260K (the copy in models/).
 *
 * - The training forward's loss equals the loss of the inference forward's
 *   logits (model/forward.c through a session) on the same tokens, with
 *   the adapter on: the two computations agree before any gradient is
 *   trusted.
 * - Central finite differences of the loss: for 64 values spread over every
 *   adapted matrix's A and B of every layer, (L(v + h) - L(v - h)) / 2h
 *   against the analytic gradient g: |g - fd| <= 0.02 (|fd| + 2.5e-3), a
 *   2 % relative bound with an absolute floor of 5e-5 (the F32 passes'
 *   noise in the loss over 2h).
 * - AdamW (train/adamw.h): a step's numbers against the formula by hand;
 *   the schedule's warm-up and cosine; 40 steps on one sequence, from an
 *   adapter whose B is zero (LoRA's start: the base's output exactly),
 *   lower its loss by more than half.
 * - Every weight trained, the loss a KL divergence from a teacher's
 *   distributions: KL to the model's own is 0 with a zero gradient, and the
 *   gradient at 4 values of each kind of tensor (the embedding row of a
 *   token read, the norms, every matrix of a layer, the output) against
 *   central finite differences with the same bound; the whole GGUF written
 *   holds the values.
 * - A mask with no position counting is refused; the base alone (no
 *   adapter) has a loss and nothing to differentiate.
 * - A Mixtral-gated MoE (synthetic, 8 experts, 2 a token): the training
 *   forward's loss equals inference's with an adapter of the experts and
 *   the router; that adapter's gradient and every weight's (the routers,
 *   the expert stacks) against central differences with the same bound
 *   (a value whose ±h moves a route is skipped: the top-k has no
 *   derivative there); each layer counts 2 experts a token; an expert no
 *   token reached has a gradient of exactly 0.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/adapter_synth.h"
#include "core/quant.h"
#include "model/lora.h"
#include "model/model.h"
#include "model/experts_iface.h"
#include "model/synth.h"
#include "runtime/session.h"
#include "t.h"
#include "train/adamw.h"
#include "train/backward.h"
#include "util.h"

#define N_TOK 24

/* The loss of the inference forward's logits (every row), through a session with the adapter. */
static double inference_loss(const model *m, lora_adapter *a, float scale, const int32_t *tok) {
    err_t err = {0};
    session *s = NULL;
    const int V = m->hp.n_vocab;
    float *lg = malloc(sizeof(float) * (size_t)V * N_TOK);
    const lora_set set = {.n = 1, .a = {a}, .scale = {scale}};
    double loss = NAN;
    if (lg && session_new(m, 64, QT_F32, 1, &s, &err) == ERR_OK && session_set_lora(s, &set, &err) == ERR_OK &&
        session_eval(s, tok, N_TOK, true, lg, &err) == ERR_OK) {
        loss = 0.0;
        for (int t = 0; t + 1 < N_TOK; t++) {
            const float *z = lg + (size_t)t * V;
            double mx = -INFINITY, sum = 0.0;
            for (int i = 0; i < V; i++) mx = fmax(mx, z[i]);
            for (int i = 0; i < V; i++) sum += exp(z[i] - mx);
            loss += log(sum) + mx - z[tok[t + 1]];
        }
        loss /= N_TOK - 1;
    }
    T_CHECKF(!isnan(loss), "inference: %s", err.msg);
    session_free(s);
    free(lg);
    return loss;
}

static void test_adamw(void) {
    adamw_opts o = adamw_defaults();
    o.lr = 0.1f, o.lr_min = 0.01f, o.warmup = 2, o.steps = 6, o.weight_decay = 0.5f, o.clip = 1.0f;
    T_NEAR(adamw_lr(&o, 1), 0.05, 1e-7);
    T_NEAR(adamw_lr(&o, 2), 0.1, 1e-7);
    T_NEAR(adamw_lr(&o, 4), 0.01 + 0.09 * 0.5 * (1.0 + cos(3.14159265358979 * 0.5)), 1e-7);
    T_NEAR(adamw_lr(&o, 6), 0.01, 1e-7);
    adamw_state s;
    err_t err = {0};
    T_EQ_INT(adamw_init(&s, 2, &o, &err), ERR_OK);
    float p[2] = {1.0f, -2.0f};
    const float g[2] = {3.0f, 4.0f}; /* norm 5: clipped to (0.6, 0.8) */
    T_NEAR(adamw_step(&s, &o, p, g, NULL), 5.0, 1e-9);
    /* t = 1: m = 0.1 g', v = 0.001 g'^2, m^ = g', v^ = g'^2: the update is lr (sign(g') + wd p) */
    T_NEAR(p[0], 1.0 - 0.05 * (0.6 / (0.6 + 1e-8) + 0.5 * 1.0), 1e-6);
    T_NEAR(p[1], -2.0 - 0.05 * (0.8 / (0.8 + 1e-8) + 0.5 * -2.0), 1e-6);
    /* a frozen value: neither it (weight decay included) nor its moments move; the other steps on */
    const uint8_t frozen[2] = {1, 0};
    const float p0 = p[0], p1 = p[1], m0 = s.m[0], v0 = s.v[0];
    adamw_step(&s, &o, p, (const float[]){0.0f, 1.0f}, frozen);
    T_CHECKF(p[0] == p0 && s.m[0] == m0 && s.v[0] == v0 && p[1] != p1, "frozen: %g -> %g, the other %g -> %g",
             (double)p0, (double)p[0], (double)p1, (double)p[1]);
    adamw_free(&s);
    o.lr = -1.0f;
    T_EQ_INT(adamw_init(&s, 2, &o, &err), ERR_INVALID_ARG);
}

/* From B = 0 (the base's output), steps of AdamW on one sequence lower its loss. */
static void test_descent(const model *m, lora_adapter *a, const int32_t *tok) {
    size_t nv = 0;
    float *v = lora_values(a, &nv), *g = calloc(nv, sizeof(float));
    size_t n_b = 0;
    for (int l = 0; l < m->hp.n_layer; l++)
        for (int k = 0; k < LORA_KINDS; k++) {
            const lora_tensor *t = lora_find(a, l, (lora_kind)k);
            if (!t) continue;
            float *bt = v + lora_index(a, t->bt);
            for (int r = 0; r < t->rank; r++)
                for (int64_t i = 0; i < t->n_out; i++) bt[(size_t)r * t->bt_stride + (size_t)i] = 0.0f, n_b++;
        }
    adamw_opts o = adamw_defaults();
    o.lr = 2e-2f, o.lr_min = 2e-3f, o.warmup = 4, o.steps = 40, o.weight_decay = 0.0f;
    adamw_state s;
    err_t err = {0};
    double first_loss = 0.0, loss = 0.0, base = 0.0;
    train_loss_grad(NULL, m, &(train_spec){.a = NULL, .scale = 0.0f}, tok, N_TOK, NULL, &base, NULL, &err);
    bool ok = g && n_b > 0 && adamw_init(&s, nv, &o, &err) == ERR_OK;
    for (int step = 0; ok && step < o.steps; step++) {
        memset(g, 0, sizeof(float) * nv);
        ok = train_loss_grad(NULL, m, &(train_spec){.a = a, .scale = 1.0f}, tok, N_TOK, NULL, &loss, g, &err) == ERR_OK;
        if (step == 0) first_loss = loss;
        if (ok) adamw_step(&s, &o, v, g, NULL);
    }
    if (ok) train_loss_grad(NULL, m, &(train_spec){.a = a, .scale = 1.0f}, tok, N_TOK, NULL, &loss, NULL, &err);
    printf("descent: the base's loss %.4f, with B = 0 %.4f, after %d steps %.4f\n", base, first_loss, o.steps, loss);
    T_CHECKF(ok, "%s", err.msg);
    T_NEAR(first_loss, base, 1e-6 * base);
    T_CHECKF(loss < 0.5 * first_loss, "40 steps took the loss from %.4f to %.4f only", first_loss, loss);
    adamw_free(&s);
    free(g);
}

/* The model's own next-token distributions over tok (the inference forward), into p (N_TOK, V). */
static bool own_probs(const model *m, const int32_t *tok, float *p) {
    err_t err = {0};
    session *s = NULL;
    const int V = m->hp.n_vocab;
    const bool ok = session_new(m, 64, QT_F32, 1, &s, &err) == ERR_OK && session_eval(s, tok, N_TOK, true, p, &err) == ERR_OK;
    for (int t = 0; ok && t < N_TOK; t++) {
        float *z = p + (size_t)t * V;
        double mx = -INFINITY, sum = 0.0;
        for (int i = 0; i < V; i++) mx = fmax(mx, z[i]);
        for (int i = 0; i < V; i++) sum += exp(z[i] - mx);
        for (int i = 0; i < V; i++) z[i] = (float)(exp(z[i] - mx) / sum);
    }
    session_free(s);
    return ok;
}

/* Every weight trained (train/weights.h), against a teacher's distributions (KL): the view computes
 * the base's loss; KL to the model's own distributions is 0 with a zero gradient; the analytic
 * gradient of KL to other distributions against central finite differences at values of every
 * kind of tensor (embedding row, norms, each matrix, the output); the written GGUF loads with the
 * values. */
static void test_full(const model *m, const int32_t *tok) {
    err_t err = {0};
    train_weights *w = NULL;
    T_CHECKF(train_weights_new(m, &w, &err) == ERR_OK, "%s", err.msg);
    if (!w) return;
    const model *mv = train_weights_model(w);
    size_t nv = 0;
    float *v = train_weights_values(w, &nv), *g = calloc(nv, sizeof(float));
    const int V = m->hp.n_vocab;
    float *soft = malloc(sizeof(float) * (size_t)N_TOK * V);
    double base = 0.0, loss = 0.0;
    T_CHECK(g && soft && own_probs(m, tok, soft));
    if (!g || !soft) return;
    train_loss_grad(NULL, m, NULL, tok, N_TOK, NULL, &base, NULL, &err);
    T_CHECKF(train_loss_grad(NULL, mv, NULL, tok, N_TOK, NULL, &loss, NULL, &err) == ERR_OK && loss == base,
             "the view's loss %.9f, the model's %.9f", loss, base);
    const train_spec self = {.w = w, .soft = soft};
    T_CHECKF(train_loss_grad(NULL, mv, &self, tok, N_TOK, NULL, &loss, g, &err) == ERR_OK, "%s", err.msg);
    double gn = 0.0;
    for (size_t i = 0; i < nv; i++) gn += (double)g[i] * g[i];
    printf("full: %zu values in %d tensors; KL to its own distributions %.3g, gradient norm %.3g\n", nv,
           train_weights_tensors(w), loss, sqrt(gn));
    T_CHECKF(fabs(loss) < 1e-5 && sqrt(gn) < 1e-3, "KL to itself %.3g, |g| %.3g", loss, sqrt(gn));
    /* a teacher that is not the model: its distributions sharpened (squared and renormalised) */
    for (int t = 0; t < N_TOK; t++) {
        float *p = soft + (size_t)t * V;
        double sum = 0.0;
        for (int i = 0; i < V; i++) sum += (p[i] = p[i] * p[i]);
        for (int i = 0; i < V; i++) p[i] = (float)(p[i] / sum);
    }
    memset(g, 0, sizeof(float) * nv);
    T_CHECKF(train_loss_grad(NULL, mv, &self, tok, N_TOK, NULL, &loss, g, &err) == ERR_OK, "%s", err.msg);
    const model_layer *L0 = &mv->layers[0], *L4 = &mv->layers[mv->hp.n_layer - 1];
    const model_mat *mats[] = {&mv->tok_embd, &mv->output_norm, &mv->output, &L0->attn_norm, &L0->wq, &L0->wk,
                               &L0->wv, &L0->wo, &L0->ffn_norm, &L0->w_gate, &L0->w_up, &L0->w_down, &L4->w_down};
    const double h = 1e-2;
    double worst = 0.0;
    int compared = 0;
    for (size_t k = 0; k < sizeof mats / sizeof *mats; k++) {
        const float *gk = train_weights_grad(w, g, mats[k]);
        T_CHECKF(gk != NULL, "tensor %zu is not trained", k);
        if (!gk) continue;
        const size_t off = (size_t)(gk - g), len = (size_t)(mats[k]->n_in * mats[k]->n_out);
        for (int j = 0; j < 4; j++) {
            /* the embedding: a row the sequence reads; elsewhere spread over the tensor */
            const size_t at = off + (k == 0 ? (size_t)tok[3 + j] * (size_t)mats[k]->n_in + (size_t)(j * 13) % (size_t)mats[k]->n_in
                                            : (size_t)(j * 2654435761u) % len);
            const float keep = v[at];
            double up = 0.0, down = 0.0;
            v[at] = keep + (float)h;
            train_loss_grad(NULL, mv, &self, tok, N_TOK, NULL, &up, NULL, &err);
            v[at] = keep - (float)h;
            train_loss_grad(NULL, mv, &self, tok, N_TOK, NULL, &down, NULL, &err);
            v[at] = keep;
            const double fd = (up - down) / (2.0 * h), e = fabs(fd - g[at]) / (fabs(fd) + 2.5e-3);
            worst = e > worst ? e : worst, compared++;
            T_CHECKF(e <= 0.02, "tensor %zu value %zu: analytic %.6g, finite difference %.6g", k, at - off, (double)g[at], fd);
        }
    }
    printf("full, KL to a sharpened teacher %.4f: %d values of %zu tensors, worst |analytic - fd| / (|fd| + 2.5e-3) = "
           "%.3g (bound 0.02)\n", loss, compared, sizeof mats / sizeof *mats, worst);
    /* written and read back: every trained tensor's bytes are the values */
    char path[512];
    tu_tmp_path(path, sizeof path, "full.gguf");
    v[5] += 0.25f;
    model *back = NULL;
    T_CHECKF(train_weights_write(w, NULL, path, &err) == ERR_OK && model_open(path, &back, &err) == ERR_OK, "%s", err.msg);
    if (back) {
        T_EQ_INT(back->tok_embd.type, QT_F32);
        T_CHECK(!memcmp(back->tok_embd.data, mv->tok_embd.data, sizeof(float) * (size_t)(mv->tok_embd.n_in * mv->tok_embd.n_out)));
        T_CHECK(!memcmp(back->layers[0].w_down.data, L0->w_down.data, sizeof(float) * (size_t)(L0->w_down.n_in * L0->w_down.n_out)));
        T_EQ_INT((int)back->gguf->n_kv, (int)m->gguf->n_kv);
    }
    model_free(back);
    remove(path);
    train_weights_free(w);
    free(g), free(soft);
}

/* ---------------------------------------------------------------- a mixture of experts */

/* Central differences at value at of v (each ±h pass's routes the same as the unmoved pass's, else
 * skipped: a route that flips has no derivative); true when compared, the relative error in *e. */
static bool fd_moe(const model *m, const train_spec *sp, const int32_t *tok, float *v, size_t at, float g,
                   const int64_t *routes, double *e) {
    const double h = 1e-2;
    const int n_counts = m->hp.n_layer * m->hp.n_expert;
    int64_t up_r[64] = {0}, down_r[64] = {0};
    double up = 0.0, down = 0.0;
    err_t err = {0};
    const float keep = v[at];
    train_spec s = *sp;
    v[at] = keep + (float)h, s.expert_tokens = up_r;
    train_loss_grad(NULL, m, &s, tok, N_TOK, NULL, &up, NULL, &err);
    v[at] = keep - (float)h, s.expert_tokens = down_r;
    train_loss_grad(NULL, m, &s, tok, N_TOK, NULL, &down, NULL, &err);
    v[at] = keep;
    if (memcmp(up_r, routes, sizeof(int64_t) * (size_t)n_counts) || memcmp(down_r, routes, sizeof(int64_t) * (size_t)n_counts))
        return false;
    const double fd = (up - down) / (2.0 * h);
    *e = fabs(fd - g) / (fabs(fd) + 2.5e-3);
    T_CHECKF(*e <= 0.02, "value %zu: analytic %.6g, finite difference %.6g", at, (double)g, fd);
    return true;
}

/* n values spread over [off, off + len) against central differences; returns the worst error. */
static double fd_spread(const model *m, const train_spec *sp, const int32_t *tok, float *v, const float *g, size_t off,
                        size_t len, int n, const int64_t *routes, int *compared, int *skipped) {
    double worst = 0.0, e = 0.0;
    for (int i = 0; i < n; i++) {
        const size_t at = off + ((size_t)i * 2654435761u + 17u * (size_t)i) % len;
        if (fd_moe(m, sp, tok, v, at, g[at], routes, &e)) worst = e > worst ? e : worst, ++*compared;
        else ++*skipped;
    }
    return worst;
}

/* A Mixtral-gated MoE (8 experts, 2 a token): the training forward's loss equals inference's, with an
 * adapter of every expert's gate, up and down and the router; the gradient of those adapters and of
 * every weight (the routers, the expert stacks) against central differences; the tokens counted per
 * expert; an expert no token reached has a gradient of exactly 0. */
static void test_moe(void) {
    synth_opts so = synth_defaults();
    so.n_expert = 8, so.n_expert_used = 2, so.weight_std = 0.1f, so.seed = 5;
    char path[512];
    tu_tmp_path(path, sizeof path, "grad-moe.gguf");
    err_t err = {0};
    model *m = NULL;
    lora_adapter *a = NULL;
    lora_init_opts lo = lora_init_defaults();
    lo.rank = 3, lo.alpha = 3.0f, lo.kinds = (1u << LORA_GATE) | (1u << LORA_UP) | (1u << LORA_DOWN) | (1u << LORA_ROUTER);
    const bool ok = synth_write(&so, path, &err) == ERR_OK && model_open(path, &m, &err) == ERR_OK &&
                    lora_create(m, &lo, &a, &err) == ERR_OK;
    T_CHECKF(ok, "moe setup: %s", err.msg);
    if (!ok) return;
    int32_t tok[N_TOK];
    for (int t = 0; t < N_TOK; t++) tok[t] = t == 0 ? 1 : (int32_t)((t * 53 + 7) % m->hp.n_vocab);
    size_t nv = 0;
    float *v = lora_values(a, &nv), *g = calloc(nv, sizeof(float));
    uint64_t s = 99;
    for (size_t i = 0; i < nv; i++) s = s * 6364136223846793005ull + 1442695040888963407ull, v[i] = ((float)(s >> 40) / 16777216.0f - 0.5f) * 0.2f;
    int64_t routes[64] = {0};
    const train_spec sp = {.a = a, .scale = 1.0f, .expert_tokens = routes};
    double loss = 0.0;
    T_CHECKF(g && train_loss_grad(NULL, m, &sp, tok, N_TOK, NULL, &loss, g, &err) == ERR_OK, "%s", err.msg);
    const double ref = inference_loss(m, a, 1.0f, tok);
    printf("moe: training forward %.7f, inference forward %.7f\n", loss, ref);
    T_NEAR(loss, ref, 2e-4 * fabs(ref));
    for (int l = 0; l < m->hp.n_layer; l++) {
        int64_t sum = 0;
        for (int e = 0; e < 8; e++) sum += routes[l * 8 + e];
        T_CHECKF(sum == N_TOK * 2, "layer %d: %lld routed pairs", l, (long long)sum);
    }
    int compared = 0, skipped = 0;
    const double worst = fd_spread(m, &sp, tok, v, g, 0, nv, tu_quick() || tu_emulated() ? 16 : 48, routes, &compared, &skipped);
    printf("moe adapter (experts and router): %d values against central differences (%d skipped: a route moved), "
           "worst %.3g (bound 0.02)\n", compared, skipped, worst);
    T_CHECKF(compared >= 12, "only %d values compared", compared);
    /* the router's pair of each layer on its own (2 % of the values: the spread above meets few) */
    int rc_ = 0, rs_ = 0;
    double rw = 0.0;
    for (int l = 0; l < m->hp.n_layer; l++) {
        const lora_tensor *t = lora_find(a, l, LORA_ROUTER);
        T_CHECKF(t != NULL, "layer %d: no router pair", l);
        if (!t) continue;
        const double ea = fd_spread(m, &sp, tok, v, g, lora_index(a, t->a), (size_t)t->rank * (size_t)t->n_in, 6,
                                    routes, &rc_, &rs_);
        const double eb = fd_spread(m, &sp, tok, v, g, lora_index(a, t->bt), (size_t)t->rank * t->bt_stride, 6,
                                    routes, &rc_, &rs_);
        rw = fmax(rw, fmax(ea, eb));
    }
    printf("moe router pairs: %d values against central differences (%d skipped), worst %.3g\n", rc_, rs_, rw);
    T_CHECKF(rc_ >= 12, "only %d router values compared", rc_);
    /* each layer computed again in the backward: the same loss and gradient to the bit, the same counts */
    float *gr = calloc(nv, sizeof(float));
    int64_t rr[64] = {0};
    double lossr = 0.0;
    train_spec spr = sp;
    spr.recompute = true, spr.expert_tokens = rr;
    T_CHECK(gr && train_loss_grad(NULL, m, &spr, tok, N_TOK, NULL, &lossr, gr, &err) == ERR_OK);
    T_CHECKF(gr && lossr == loss && !memcmp(gr, g, nv * sizeof(float)) && !memcmp(rr, routes, sizeof rr),
             "moe recomputed: loss %.9f vs %.9f", lossr, loss);
    free(gr);
    /* every weight: the routers and expert stacks */
    train_weights *w = NULL;
    T_CHECKF(train_weights_new(m, &w, &err) == ERR_OK, "%s", err.msg);
    if (w) {
        const model *mv = train_weights_model(w);
        size_t nw = 0;
        float *wv = train_weights_values(w, &nw), *gw = calloc(nw, sizeof(float));
        int64_t r2[64] = {0};
        const train_spec sw = {.w = w, .expert_tokens = r2};
        T_CHECK(gw && train_loss_grad(NULL, mv, &sw, tok, N_TOK, NULL, &loss, gw, &err) == ERR_OK);
        int c2 = 0, s2 = 0;
        double w2 = 0.0;
        const model_layer *L = &mv->layers[1];
        const model_mat *mats[] = {&L->gate_inp, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t k = 0; gw && k < 4; k++) {
            const float *gk = train_weights_grad(w, gw, mats[k]);
            T_CHECKF(gk != NULL, "moe tensor %zu not trained", k);
            if (!gk) continue;
            const size_t len = (size_t)(mats[k]->n_in * mats[k]->n_out * mats[k]->n_mat);
            const double e = fd_spread(mv, &sw, tok, wv, gw, (size_t)(gk - gw), len, tu_quick() ? 4 : 12, r2, &c2, &s2);
            w2 = e > w2 ? e : w2;
        }
        printf("moe, every weight (router, gate, up, down stacks): %d values against central differences (%d skipped), "
               "worst %.3g\n", c2, s2, w2);
        T_CHECKF(c2 >= 8, "only %d values compared", c2);
        /* two tokens reach at most 4 experts of 8 a layer: the others' slices of the gradient are 0 */
        memset(gw, 0, sizeof(float) * nw);
        int64_t r3[64] = {0};
        const train_spec s3 = {.w = w, .expert_tokens = r3};
        T_CHECK(train_loss_grad(NULL, mv, &s3, tok, 2, NULL, &loss, gw, &err) == ERR_OK);
        int unreached = 0, bad = 0, moved = 0; /* moved: reached with a gradient (token 1's output reaches no loss) */
        for (int l = 0; l < mv->hp.n_layer; l++)
            for (int e = 0; e < 8; e++) {
                model_mat em[3];
                model_expert_mats(mv, l, e, em);
                double sq = 0.0;
                for (int i = 0; i < 3; i++) {
                    const float *ge = train_weights_grad(w, gw, &em[i]);
                    for (int64_t j = 0; ge && j < em[i].n_in * em[i].n_out; j++) sq += (double)ge[j] * ge[j];
                }
                unreached += r3[l * 8 + e] == 0;
                bad += r3[l * 8 + e] == 0 && sq != 0.0;
                moved += r3[l * 8 + e] > 0 && sq > 0.0;
            }
        T_CHECKF(unreached >= 8 && bad == 0 && moved >= 2, "%d experts unreached, %d of them with a gradient; %d reached "
                 "with one", unreached, bad, moved);
        free(gw);
    }
    train_weights_free(w);
    free(g);
    lora_free(a);
    model_free(m);
    remove(path);
}

/* OCTO_GRAD_DUMP=DIR: the case for scripts/torch_grad_check.py (an independent gradient in PyTorch):
 * DIR/adapter.gguf, DIR/grad.f32 (lora_values' layout) and DIR/case.txt (the scale, the loss, the tokens). */
static void dump_case(const model *m, const lora_adapter *a, const int32_t *tok, double loss, const float *g, size_t nv) {
    const char *dir = getenv("OCTO_GRAD_DUMP");
    if (!dir || !*dir) return;
    char path[512];
    err_t err = {0};
    snprintf(path, sizeof path, "%s/adapter.gguf", dir);
    T_CHECKF(lora_write(m, a, QT_F32, NULL, NULL, path, &err) == ERR_OK, "%s", err.msg);
    snprintf(path, sizeof path, "%s/grad.f32", dir);
    T_CHECK(tu_write_file(path, g, nv * sizeof(float)));
    snprintf(path, sizeof path, "%s/case.txt", dir);
    FILE *f = fopen(path, "w");
    T_CHECK(f != NULL);
    if (!f) return;
    fprintf(f, "scale 1.5\nloss %.9f\ntokens", loss);
    for (int t = 0; t < N_TOK; t++) fprintf(f, " %d", tok[t]);
    fprintf(f, "\n");
    fclose(f);
    printf("dumped the case to %s\n", dir);
}

int main(void) {
    test_adamw();
    char mpath[512], apath[512];
    tu_tmp_path(apath, sizeof apath, "grad-adapter.gguf");
    err_t err = {0};
    model *m = NULL;
    lora_adapter *a = NULL;
    adapter_synth_opts o = adapter_synth_defaults();
    o.rank = 4, o.alpha = 4.0f, o.std = 0.2f, o.seed = 3;
    const bool ok = tu_repo_model(mpath, sizeof mpath) && model_open(mpath, &m, &err) == ERR_OK &&
                    adapter_synth(mpath, &o, apath, &err) == ERR_OK && lora_open(m, apath, &a, &err) == ERR_OK;
    T_CHECKF(ok, "setup: %s", err.msg);
    if (!ok) T_DONE();
    int32_t tok[N_TOK];
    for (int t = 0; t < N_TOK; t++) tok[t] = t == 0 ? 1 : (int32_t)((t * 37 + 11) % m->hp.n_vocab);
    size_t nv = 0;
    float *v = lora_values(a, &nv), *g = calloc(nv, sizeof(float));
    double loss = 0.0;
    T_CHECKF(train_loss_grad(NULL, m, &(train_spec){.a = a, .scale = 1.5f}, tok, N_TOK, NULL, &loss, g, &err) == ERR_OK, "%s", err.msg);
    dump_case(m, a, tok, loss, g, nv);
    const double ref = inference_loss(m, a, 1.5f, tok);
    printf("loss: training forward %.7f, inference forward %.7f\n", loss, ref);
    T_NEAR(loss, ref, 2e-4 * fabs(ref));
    /* finite differences: 64 values, a spread over the whole block (every layer's A and B^T) */
    const double h = 1e-2;
    double worst = 0.0;
    int compared = 0;
    const int n_fd = tu_quick() || tu_emulated() ? 16 : 64; /* sanitizers, qemu: fewer */
    for (int i = 0; i < n_fd; i++) {
        const size_t at = (size_t)((double)i / n_fd * (double)nv + 7.0 * i) % nv;
        const float keep = v[at];
        double up = 0.0, down = 0.0;
        v[at] = keep + (float)h;
        train_loss_grad(NULL, m, &(train_spec){.a = a, .scale = 1.5f}, tok, N_TOK, NULL, &up, NULL, &err);
        v[at] = keep - (float)h;
        train_loss_grad(NULL, m, &(train_spec){.a = a, .scale = 1.5f}, tok, N_TOK, NULL, &down, NULL, &err);
        v[at] = keep;
        /* relative, with an absolute floor of 5e-5: the F32 passes' noise in L (about 1e-6 of ~20) over 2h */
        const double fd = (up - down) / (2.0 * h), e = fabs(fd - g[at]) / (fabs(fd) + 2.5e-3);
        if (e > worst) worst = e;
        compared++;
        T_CHECKF(e <= 0.02, "value %zu: analytic %.6g, finite difference %.6g", at, (double)g[at], fd);
    }
    printf("finite differences: %d values, worst |analytic - fd| / (|fd| + 2.5e-3) = %.3g (bound 0.02; h %.0e)\n",
           compared, worst, h);
    double norm = 0.0;
    for (size_t i = 0; i < nv; i++) norm += (double)g[i] * g[i];
    T_CHECKF(norm > 1e-8, "the gradient is zero");
    /* on 3 threads: the same loss and gradient to the bit (each value is one thread's, in one order) */
    train_ctx *tc = NULL;
    float *g3 = calloc(nv, sizeof(float));
    double loss3 = 0.0;
    T_CHECK(g3 && train_ctx_new(3, &tc, &err) == ERR_OK &&
            train_loss_grad(tc, m, &(train_spec){.a = a, .scale = 1.5f}, tok, N_TOK, NULL, &loss3, g3, &err) == ERR_OK);
    T_CHECKF(loss3 == loss && g3 && !memcmp(g3, g, nv * sizeof(float)), "3 threads: loss %.9f vs %.9f", loss3, loss);
    train_ctx_free(tc);
    free(g3);
    /* each layer computed again in the backward (activation checkpointing): the same to the bit, in less memory */
    float *gr = calloc(nv, sizeof(float));
    double lossr = 0.0;
    T_CHECK(gr && train_loss_grad(NULL, m, &(train_spec){.a = a, .scale = 1.5f, .recompute = true}, tok, N_TOK, NULL,
                                  &lossr, gr, &err) == ERR_OK);
    T_CHECKF(lossr == loss && gr && !memcmp(gr, g, nv * sizeof(float)), "recomputed: loss %.9f vs %.9f", lossr, loss);
    free(gr);
    const uint64_t kept = train_activation_bytes(m, 256, true, false), again = train_activation_bytes(m, 256, true, true);
    printf("activations of 256 tokens: %.2f MiB kept, %.2f MiB recomputing each layer\n", kept / 1048576.0,
           again / 1048576.0);
    T_CHECK(again < kept / 2 && train_activation_bytes(m, 256, false, false) < kept);
    /* refusals */
    uint8_t none[N_TOK] = {0};
    T_EQ_INT(train_loss_grad(NULL, m, &(train_spec){.a = a, .scale = 1.0f}, tok, N_TOK, none, &loss, g, &err), ERR_INVALID_ARG);
    T_EQ_INT(train_loss_grad(NULL, m, &(train_spec){.a = a, .scale = 1.0f}, tok, 1, NULL, &loss, g, &err), ERR_INVALID_ARG);
    T_EQ_INT(train_loss_grad(NULL, m, &(train_spec){.a = NULL, .scale = 0.0f}, tok, N_TOK, NULL, &loss, NULL, &err), ERR_OK);
    T_NEAR(loss, inference_loss(m, a, 0.0f, tok), 2e-4 * loss);
    T_EQ_INT(train_loss_grad(NULL, m, &(train_spec){.a = a, .scale = 1.0f, .w = (train_weights *)1}, tok, N_TOK, NULL,
                             &loss, NULL, &err), ERR_INVALID_ARG);
    test_descent(m, a, tok);
    test_full(m, tok);
    test_moe();
    free(g);
    lora_free(a);
    model_free(m);
    remove(apath);
    T_DONE();
}
