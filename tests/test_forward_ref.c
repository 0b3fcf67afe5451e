/*
 * test_forward_ref — "same logits as math": octo's forward pass against an
 * independent float64 reference.
 *
 * The reference here is written from the architecture description in
 * shared/golden/README.md ("How the logits were produced"), not from
 * src/model/forward.c, and shares no code with octo's model layer: it reads
 * an F32 GGUF through gguf_open / gguf_find_tensor / gguf_get_* only, takes
 * every hyperparameter from the metadata itself, and computes every step in
 * double, layer by layer over the whole sequence in one causal pass:
 *
 *   x = token_embd[tok]
 *   per layer:  h = rmsnorm(x) * attn_norm
 *               q, k, v = Wq h (+bq), Wk h (+bk), Wv h (+bv)   (biases: qwen2)
 *               RoPE on q, k: "norm" rotates (2i, 2i+1), NeoX (qwen2) rotates
 *                 (i, i + n_rot/2); theta_i = pos * freq_scale * base^(-2i/n_rot)
 *               query head h attends with KV head h / (n_head / n_head_kv),
 *                 causally, scores scaled by 1/sqrt(head_dim)
 *               x += Wo attn
 *               h = rmsnorm(x) * ffn_norm
 *               x += down(silu(gate h) * up h)                 (dense)
 *               x += sum_{e in top-k} p_e / sum p * expert_e(h) (MoE, p = softmax
 *                 over all router logits)
 *   logits = output (or token_embd when tied) * rmsnorm(x) * output_norm
 *
 * Models are synthesized per case (synth_write) into OCTO_TMP (or /tmp).
 * octo must agree with the reference to 1e-4 relative (max |octo - ref| over
 * the whole logit matrix divided by max |ref|), element-wise to
 * 1e-4 * max(1, |ref|), with the same argmax on every row — whether the
 * sequence is fed in one batch, token by token, or in chunks of 5. Each case
 * also runs the reference with deliberate mistakes, one at a time (NeoX
 * instead of normal RoPE, the wrong GQA mapping, no bias, ...), and requires
 * octo to be far from each, which shows that the comparison can fail and that the feature the
 * case is about is actually exercised.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/gguf.h"
#include "core/quant.h"
#include "model/model.h"
#include "model/synth.h"
#include "runtime/session.h"
#include "t.h"

#define REL_TOL 1e-4      /* the requirement */
#define NEG_MIN_DIFF 1e-2 /* a wrong reference must be at least this far off */

/* Deliberate mistakes for the negative checks (bit flags). */
enum {
    PERT_NONE = 0,
    PERT_ROPE_FLIP = 1 << 0,    /* NeoX pairs on llama, adjacent pairs on qwen2 */
    PERT_GQA_MOD = 1 << 1,      /* KV head h % n_head_kv instead of h / group */
    PERT_NO_BIAS = 1 << 2,      /* qwen2 without its q/k/v biases */
    PERT_NO_RENORM = 1 << 3,    /* MoE: top-k probabilities not renormalized */
    PERT_NO_ROPE_SCALE = 1 << 4,/* ignore linear RoPE scaling */
    PERT_BASE_10K = 1 << 5,     /* ignore the file's rope.freq_base, use 10000 */
    PERT_SCALE_EMBD = 1 << 6,   /* scale by 1/sqrt(n_embd/n_head), not 1/sqrt(head_dim) */
};

/* ------------------------------------------------------------------ */
/* The reference model: hyperparameters and F32 weight pointers.        */

typedef struct {
    const float *attn_norm;          /* [E] */
    const float *wq, *wk, *wv;       /* [n_head*hd][E], [n_kv*hd][E], [n_kv*hdv][E] */
    const float *bq, *bk, *bv;       /* qwen2 biases or NULL */
    const float *wo;                 /* [E][n_head*hdv] */
    const float *ffn_norm;           /* [E] */
    const float *gate, *up, *down;   /* dense [F][E],[F][E],[E][F]; MoE stacks of n_expert */
    const float *router;             /* [n_expert][E] or NULL */
} ref_layer;

typedef struct {
    gguf_ctx *g;
    bool neox, has_bias;
    int n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, head_dim_v, n_rot, n_ff;
    int n_expert, n_expert_used;
    double freq_base, freq_scale, eps;
    const float *tok_embd;    /* [V][E] */
    const float *output_norm; /* [E] */
    const float *output;      /* [V][E]; tok_embd when tied */
    ref_layer *layers;
    double min_route_gap;     /* smallest p(k-th chosen) - p(best unchosen) seen */
} ref_model;

static uint64_t meta_u(const gguf_ctx *g, const char *arch, const char *suffix, uint64_t def) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    uint64_t v;
    return gguf_get_u64(g, key, &v) ? v : def;
}

static double meta_f(const gguf_ctx *g, const char *arch, const char *suffix, double def) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    float v;
    return gguf_get_f32(g, key, &v) ? (double)v : def;
}

/* An F32 tensor of exactly the given shape (ne2 = 1 for matrices), or NULL. */
static const float *ref_tensor(const gguf_ctx *g, const char *name, int64_t ne0, int64_t ne1, int64_t ne2,
                               bool required) {
    const gguf_tensor *t = gguf_find_tensor(g, name);
    if (!t) {
        if (required) T_CHECKF(0, "reference: tensor %s missing", name);
        return NULL;
    }
    bool ok = t->type == QT_F32 && t->ne[0] == ne0 && t->ne[1] == ne1 && t->ne[2] == ne2 && t->ne[3] == 1 &&
              ((uintptr_t)t->data % sizeof(float)) == 0;
    T_CHECKF(ok, "reference: tensor %s type %u [%lld,%lld,%lld], want F32 [%lld,%lld,%lld]", name, t->type,
             (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)ne0, (long long)ne1,
             (long long)ne2);
    return ok ? (const float *)t->data : NULL;
}

static void ref_close(ref_model *rm) {
    free(rm->layers);
    gguf_close(rm->g);
    memset(rm, 0, sizeof *rm);
}

static bool ref_open(const char *path, ref_model *rm) {
    memset(rm, 0, sizeof *rm);
    err_t err = {0};
    if (gguf_open(path, &rm->g, &err)) {
        T_CHECKF(0, "reference: gguf_open(%s): %s", path, err.msg);
        return false;
    }
    const gguf_ctx *g = rm->g;
    gguf_str as;
    char arch[32] = "";
    if (gguf_get_str(g, "general.architecture", &as) && as.len < sizeof arch) memcpy(arch, as.ptr, as.len);
    bool qwen = !strcmp(arch, "qwen2");
    T_CHECKF(qwen || !strcmp(arch, "llama"), "reference: architecture '%s'", arch);
    rm->neox = qwen;
    rm->has_bias = qwen;
    rm->n_embd = (int)meta_u(g, arch, "embedding_length", 0);
    rm->n_layer = (int)meta_u(g, arch, "block_count", 0);
    rm->n_head = (int)meta_u(g, arch, "attention.head_count", 0);
    rm->n_head_kv = (int)meta_u(g, arch, "attention.head_count_kv", (uint64_t)rm->n_head);
    rm->n_ff = (int)meta_u(g, arch, "feed_forward_length", 0);
    rm->n_expert = (int)meta_u(g, arch, "expert_count", 0);
    rm->n_expert_used = (int)meta_u(g, arch, "expert_used_count", 0);
    if (rm->n_embd <= 0 || rm->n_layer <= 0 || rm->n_head <= 0 || rm->n_head_kv <= 0 || rm->n_ff <= 0 ||
        rm->n_head % rm->n_head_kv) {
        T_CHECKF(0, "reference: bad shape in %s", path);
        return false;
    }
    rm->head_dim = (int)meta_u(g, arch, "attention.key_length", (uint64_t)(rm->n_embd / rm->n_head));
    rm->head_dim_v = (int)meta_u(g, arch, "attention.value_length", (uint64_t)rm->head_dim);
    rm->n_rot = (int)meta_u(g, arch, "rope.dimension_count", (uint64_t)rm->head_dim);
    rm->freq_base = meta_f(g, arch, "rope.freq_base", 10000.0);
    rm->eps = meta_f(g, arch, "attention.layer_norm_rms_epsilon", 1e-5);
    rm->freq_scale = 1.0;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    gguf_str st;
    if (gguf_get_str(g, key, &st)) {
        T_CHECKF(gguf_str_eq(st, "linear") || gguf_str_eq(st, "none"), "reference: rope scaling '%.*s'",
                 (int)st.len, st.ptr);
        double factor = meta_f(g, arch, "rope.scaling.factor", 0.0);
        if (gguf_str_eq(st, "linear") && factor > 0.0) rm->freq_scale = 1.0 / factor;
    }
    const gguf_tensor *te = gguf_find_tensor(g, "token_embd.weight");
    if (!te) {
        T_CHECKF(0, "reference: no token_embd.weight");
        return false;
    }
    rm->n_vocab = (int)te->ne[1];

    const int64_t E = rm->n_embd, F = rm->n_ff, X = rm->n_expert;
    const int64_t Q = (int64_t)rm->n_head * rm->head_dim, K = (int64_t)rm->n_head_kv * rm->head_dim;
    const int64_t Vd = (int64_t)rm->n_head_kv * rm->head_dim_v, O = (int64_t)rm->n_head * rm->head_dim_v;
    bool ok = true;
#define NEED(dst, name, a, b, c)                                   \
    do {                                                           \
        (dst) = ref_tensor(g, name, a, b, c, true);                \
        ok = ok && (dst) != NULL;                                  \
    } while (0)
    NEED(rm->tok_embd, "token_embd.weight", E, rm->n_vocab, 1);
    NEED(rm->output_norm, "output_norm.weight", E, 1, 1);
    rm->output = ref_tensor(g, "output.weight", E, rm->n_vocab, 1, false);
    if (!rm->output) rm->output = rm->tok_embd; /* tied */
    rm->layers = calloc((size_t)rm->n_layer, sizeof *rm->layers);
    if (!rm->layers) return false;
    char name[96];
    for (int l = 0; ok && l < rm->n_layer; l++) {
        ref_layer *L = &rm->layers[l];
#define LNAME(suffix) (snprintf(name, sizeof name, "blk.%d.%s", l, suffix), name)
        NEED(L->attn_norm, LNAME("attn_norm.weight"), E, 1, 1);
        NEED(L->wq, LNAME("attn_q.weight"), E, Q, 1);
        NEED(L->wk, LNAME("attn_k.weight"), E, K, 1);
        NEED(L->wv, LNAME("attn_v.weight"), E, Vd, 1);
        if (rm->has_bias) {
            NEED(L->bq, LNAME("attn_q.bias"), Q, 1, 1);
            NEED(L->bk, LNAME("attn_k.bias"), K, 1, 1);
            NEED(L->bv, LNAME("attn_v.bias"), Vd, 1, 1);
        }
        NEED(L->wo, LNAME("attn_output.weight"), O, E, 1);
        NEED(L->ffn_norm, LNAME("ffn_norm.weight"), E, 1, 1);
        if (X == 0) {
            NEED(L->gate, LNAME("ffn_gate.weight"), E, F, 1);
            NEED(L->up, LNAME("ffn_up.weight"), E, F, 1);
            NEED(L->down, LNAME("ffn_down.weight"), F, E, 1);
        } else {
            NEED(L->router, LNAME("ffn_gate_inp.weight"), E, X, 1);
            NEED(L->gate, LNAME("ffn_gate_exps.weight"), E, F, X);
            NEED(L->up, LNAME("ffn_up_exps.weight"), E, F, X);
            NEED(L->down, LNAME("ffn_down_exps.weight"), F, E, X);
        }
#undef LNAME
    }
#undef NEED
    return ok;
}

/* ------------------------------------------------------------------ */
/* The reference forward pass, all in double.                          */

/* y[n_out] = W x, W = n_out rows of n_in floats. */
static void matvec(const float *w, int n_in, int n_out, const double *x, double *y) {
    for (int r = 0; r < n_out; r++) {
        const float *row = w + (size_t)r * (size_t)n_in;
        double acc = 0.0;
        for (int i = 0; i < n_in; i++) acc += (double)row[i] * x[i];
        y[r] = acc;
    }
}

static void rmsnorm(const double *x, const float *w, int n, double eps, double *y) {
    double ss = 0.0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    double inv = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) y[i] = x[i] * inv * (double)w[i];
}

/* Rotate the first n_rot dims of one head vector for position pos. */
static void rope(double *v, int n_rot, int pos, double base, double scale, bool neox) {
    for (int i = 0; i < n_rot / 2; i++) {
        double theta = (double)pos * scale * pow(base, -2.0 * i / n_rot);
        double c = cos(theta), s = sin(theta);
        int a = neox ? i : 2 * i, b = neox ? i + n_rot / 2 : 2 * i + 1;
        double x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
    }
}

static double silu(double x) { return x / (1.0 + exp(-x)); }

/* down(silu(gate h) * up h) into out[E]; tmp holds 2 * F doubles. */
static void swiglu(const float *gate, const float *up, const float *down, int E, int F, const double *h, double *tmp,
                   double *out) {
    double *g = tmp, *u = tmp + F;
    matvec(gate, E, F, h, g);
    matvec(up, E, F, h, u);
    for (int i = 0; i < F; i++) g[i] = silu(g[i]) * u[i];
    matvec(down, F, E, g, out);
}

/* Logits [T][n_vocab] of tokens at positions 0..T-1 (causal). */
static bool ref_forward(ref_model *rm, const int32_t *tok, int T, unsigned pert, double *logits) {
    const int E = rm->n_embd, F = rm->n_ff, V = rm->n_vocab, X = rm->n_expert;
    const int nh = rm->n_head, nkv = rm->n_head_kv, hd = rm->head_dim, hdv = rm->head_dim_v;
    const int Q = nh * hd, K = nkv * hd, Vd = nkv * hdv, O = nh * hdv;
    const bool neox = (pert & PERT_ROPE_FLIP) ? !rm->neox : rm->neox;
    const double base = (pert & PERT_BASE_10K) ? 10000.0 : rm->freq_base;
    const double fscale = (pert & PERT_NO_ROPE_SCALE) ? 1.0 : rm->freq_scale;
    const double att_scale = 1.0 / sqrt((pert & PERT_SCALE_EMBD) ? (double)(E / nh) : (double)hd);
    const bool bias = rm->has_bias && !(pert & PERT_NO_BIAS);

    double *x = calloc((size_t)T * E, sizeof(double));      /* (T, E) residual stream */
    double *h = calloc((size_t)E, sizeof(double));          /* (E) normed row */
    double *q = calloc((size_t)T * Q, sizeof(double));      /* (T, n_head*hd) */
    double *k = calloc((size_t)T * K, sizeof(double));      /* (T, n_kv*hd) */
    double *v = calloc((size_t)T * Vd, sizeof(double));     /* (T, n_kv*hdv) */
    double *att = calloc((size_t)O, sizeof(double));        /* (n_head*hdv) one row */
    double *sc = calloc((size_t)T, sizeof(double));         /* (T) scores */
    double *tmp = calloc((size_t)2 * F, sizeof(double));    /* (2F) FFN hidden */
    double *y = calloc((size_t)E, sizeof(double));          /* (E) block output */
    double *ye = calloc((size_t)E, sizeof(double));         /* (E) one expert's output */
    double *pr = calloc((size_t)(X > 0 ? X : 1), sizeof(double)); /* (n_expert) router probs */
    bool *chosen = calloc((size_t)(X > 0 ? X : 1), sizeof(bool));
    bool ok = x && h && q && k && v && att && sc && tmp && y && ye && pr && chosen;
    T_CHECKF(ok, "reference: out of memory");

    /* token embeddings */
    for (int t = 0; ok && t < T; t++) {
        T_CHECKF(tok[t] >= 0 && tok[t] < V, "token %d", tok[t]);
        for (int i = 0; i < E; i++) x[(size_t)t * E + i] = rm->tok_embd[(size_t)tok[t] * E + i];
    }
    for (int l = 0; ok && l < rm->n_layer; l++) {
        const ref_layer *L = &rm->layers[l];
        /* attention: q, k, v of every row, then RoPE at the row's position */
        for (int t = 0; t < T; t++) {
            double *qt = q + (size_t)t * Q, *kt = k + (size_t)t * K, *vt = v + (size_t)t * Vd;
            rmsnorm(x + (size_t)t * E, L->attn_norm, E, rm->eps, h);
            matvec(L->wq, E, Q, h, qt);
            matvec(L->wk, E, K, h, kt);
            matvec(L->wv, E, Vd, h, vt);
            if (bias) {
                for (int i = 0; i < Q; i++) qt[i] += L->bq[i];
                for (int i = 0; i < K; i++) kt[i] += L->bk[i];
                for (int i = 0; i < Vd; i++) vt[i] += L->bv[i];
            }
            for (int hh = 0; hh < nh; hh++) rope(qt + (size_t)hh * hd, rm->n_rot, t, base, fscale, neox);
            for (int hh = 0; hh < nkv; hh++) rope(kt + (size_t)hh * hd, rm->n_rot, t, base, fscale, neox);
        }
        /* causal attention per row and head, then the output projection */
        for (int t = 0; t < T; t++) {
            for (int hh = 0; hh < nh; hh++) {
                int kh = (pert & PERT_GQA_MOD) ? hh % nkv : hh / (nh / nkv);
                const double *qh = q + (size_t)t * Q + (size_t)hh * hd;
                double mx = -INFINITY;
                for (int u = 0; u <= t; u++) {
                    const double *ku = k + (size_t)u * K + (size_t)kh * hd;
                    double d = 0.0;
                    for (int i = 0; i < hd; i++) d += qh[i] * ku[i];
                    sc[u] = d * att_scale;
                    if (sc[u] > mx) mx = sc[u];
                }
                double sum = 0.0;
                for (int u = 0; u <= t; u++) sum += (sc[u] = exp(sc[u] - mx));
                double *ah = att + (size_t)hh * hdv;
                for (int i = 0; i < hdv; i++) ah[i] = 0.0;
                for (int u = 0; u <= t; u++) {
                    const double *vu = v + (size_t)u * Vd + (size_t)kh * hdv;
                    for (int i = 0; i < hdv; i++) ah[i] += sc[u] / sum * vu[i];
                }
            }
            matvec(L->wo, O, E, att, y);
            for (int i = 0; i < E; i++) x[(size_t)t * E + i] += y[i];
        }
        /* feed-forward */
        for (int t = 0; t < T; t++) {
            double *xt = x + (size_t)t * E;
            rmsnorm(xt, L->ffn_norm, E, rm->eps, h);
            if (X == 0) {
                swiglu(L->gate, L->up, L->down, E, F, h, tmp, y);
            } else {
                /* router: softmax over all experts, top-k, renormalize */
                matvec(L->router, E, X, h, pr);
                double mx = -INFINITY, sum = 0.0;
                for (int e = 0; e < X; e++) mx = pr[e] > mx ? pr[e] : mx;
                for (int e = 0; e < X; e++) sum += (pr[e] = exp(pr[e] - mx));
                for (int e = 0; e < X; e++) pr[e] /= sum, chosen[e] = false;
                double psel = 0.0, plast = 0.0;
                for (int j = 0; j < rm->n_expert_used; j++) {
                    int best = -1;
                    for (int e = 0; e < X; e++)
                        if (!chosen[e] && (best < 0 || pr[e] > pr[best])) best = e;
                    chosen[best] = true;
                    psel += pr[best];
                    plast = pr[best];
                }
                double prest = 0.0;
                for (int e = 0; e < X; e++)
                    if (!chosen[e] && pr[e] > prest) prest = pr[e];
                if (rm->n_expert_used < X && plast - prest < rm->min_route_gap) rm->min_route_gap = plast - prest;
                for (int i = 0; i < E; i++) y[i] = 0.0;
                for (int e = 0; e < X; e++) {
                    if (!chosen[e]) continue;
                    size_t off = (size_t)e * (size_t)F * (size_t)E;
                    swiglu(L->gate + off, L->up + off, L->down + off, E, F, h, tmp, ye);
                    double w = (pert & PERT_NO_RENORM) ? pr[e] : pr[e] / psel;
                    for (int i = 0; i < E; i++) y[i] += w * ye[i];
                }
            }
            for (int i = 0; i < E; i++) xt[i] += y[i];
        }
    }
    /* final norm and output projection */
    for (int t = 0; ok && t < T; t++) {
        rmsnorm(x + (size_t)t * E, rm->output_norm, E, rm->eps, h);
        matvec(rm->output, E, V, h, logits + (size_t)t * V);
    }
    free(x), free(h), free(q), free(k), free(v), free(att), free(sc), free(tmp), free(y), free(ye), free(pr);
    free(chosen);
    return ok;
}

/* ------------------------------------------------------------------ */
/* Comparison.                                                          */

typedef struct {
    double max_abs;   /* max |octo - ref| */
    double max_ref;   /* max |ref| */
    double rel;       /* max_abs / max_ref */
    int n_bad;        /* elements with |octo - ref| > tol * max(1, |ref|), or not finite */
    int n_argmax_mismatch;
} cmp_result;

static int argmax_f(const float *r, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (r[i] > r[b]) b = i;
    return b;
}

static int argmax_d(const double *r, int n, double *margin) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (r[i] > r[b]) b = i;
    double second = -INFINITY;
    for (int i = 0; i < n; i++)
        if (i != b && r[i] > second) second = r[i];
    *margin = r[b] - second;
    return b;
}

static cmp_result compare(const float *octo, const double *ref, int T, int V, double tol) {
    cmp_result c = {0, 0, 0, 0, 0};
    for (size_t i = 0; i < (size_t)T * V; i++) {
        double d = fabs((double)octo[i] - ref[i]);
        if (!isfinite(d)) d = INFINITY;
        if (d > c.max_abs) c.max_abs = d;
        if (fabs(ref[i]) > c.max_ref) c.max_ref = fabs(ref[i]);
        if (!(d <= tol * fmax(1.0, fabs(ref[i])))) c.n_bad++;
    }
    c.rel = c.max_ref > 0 ? c.max_abs / c.max_ref : c.max_abs;
    for (int t = 0; t < T; t++) {
        double margin;
        int rb = argmax_d(ref + (size_t)t * V, V, &margin);
        if (argmax_f(octo + (size_t)t * V, V) != rb) c.n_argmax_mismatch++;
    }
    return c;
}

/* ------------------------------------------------------------------ */
/* octo's side: the same tokens through session_eval, fed three ways.   */

typedef enum { FEED_BATCH, FEED_ONE_BY_ONE, FEED_CHUNKS_5, FEED_COUNT } feed_mode;
static const char *const feed_names[FEED_COUNT] = {"one batch", "token by token", "chunks of 5"};

static bool octo_logits(const model *m, const int32_t *tok, int T, feed_mode mode, float *logits) {
    err_t err = {0};
    session *s = NULL;
    if (session_new(m, 0, QT_F32, 0, &s, &err)) {
        T_CHECKF(0, "session_new: %s", err.msg);
        return false;
    }
    const int V = m->hp.n_vocab;
    int step = mode == FEED_BATCH ? T : mode == FEED_ONE_BY_ONE ? 1 : 5;
    bool ok = true;
    for (int i = 0; ok && i < T; i += step) {
        int n = T - i < step ? T - i : step;
        err_code rc = session_eval(s, tok + i, n, true, logits + (size_t)i * V, &err);
        T_CHECKF(rc == ERR_OK, "session_eval(%s, at %d, n %d): %s", feed_names[mode], i, n, err.msg);
        ok = rc == ERR_OK;
    }
    if (ok) T_EQ_INT(s->n_past, T);
    session_free(s);
    return ok;
}

/* ------------------------------------------------------------------ */
/* Cases.                                                               */

typedef struct {
    const char *name;
    synth_opts o;
    int n_tokens;
    unsigned perts[3]; /* deliberate mistakes that must be detected; 0 ends */
} ref_case;

static const char *pert_name(unsigned p) {
    switch (p) {
    case PERT_ROPE_FLIP: return "RoPE pairs flipped (NeoX <-> adjacent)";
    case PERT_GQA_MOD: return "GQA head h % n_head_kv";
    case PERT_NO_BIAS: return "no q/k/v bias";
    case PERT_NO_RENORM: return "MoE weights not renormalized";
    case PERT_NO_ROPE_SCALE: return "linear RoPE scaling ignored";
    case PERT_BASE_10K: return "rope.freq_base ignored (10000)";
    case PERT_SCALE_EMBD: return "scale 1/sqrt(n_embd/n_head)";
    default: return "?";
    }
}

/* Deterministic ids spread over the whole vocabulary, BOS first. */
static void make_tokens(int32_t *tok, int T, int V, uint32_t salt) {
    uint32_t s = 2166136261u ^ salt;
    tok[0] = 1;
    for (int i = 1; i < T; i++) {
        s = s * 1664525u + 1013904223u;
        tok[i] = (int32_t)((s >> 8) % (uint32_t)V);
    }
}

static void run_case(const ref_case *c, const char *dir, int idx) {
    char path[512];
    snprintf(path, sizeof path, "%s/octo_fwdref_%ld_%d.gguf", dir, (long)getpid(), idx);
    err_t err = {0};
    if (synth_write(&c->o, path, &err)) {
        T_CHECKF(0, "[%s] synth_write(%s): %s", c->name, path, err.msg);
        return;
    }
    ref_model rm;
    model *m = NULL;
    const int T = c->n_tokens;
    int32_t tok[64];
    double *ref = NULL, *bad = NULL;
    float *out[FEED_COUNT] = {NULL, NULL, NULL}, *last = NULL;
    if (!ref_open(path, &rm)) goto done;
    rm.min_route_gap = INFINITY;
    const int V = rm.n_vocab;
    make_tokens(tok, T, V, (uint32_t)idx);

    ref = malloc(sizeof(double) * (size_t)T * V);
    bad = malloc(sizeof(double) * (size_t)T * V);
    last = calloc((size_t)V, sizeof(float));
    for (int f = 0; f < FEED_COUNT; f++) out[f] = calloc((size_t)T * V, sizeof(float));
    T_CHECK(ref && bad && last && out[0] && out[1] && out[2]);
    if (!ref || !bad || !last || !out[0] || !out[1] || !out[2]) goto done;
    if (!ref_forward(&rm, tok, T, PERT_NONE, ref)) goto done;

    if (model_load(path, &m, &err)) {
        T_CHECKF(0, "[%s] model_load: %s", c->name, err.msg);
        goto done;
    }
    /* octo read the same shape the reference did */
    T_EQ_INT(m->hp.n_vocab, V);
    if (m->hp.n_vocab != V) goto done;
    T_EQ_INT(m->hp.head_dim, rm.head_dim);
    T_EQ_INT(m->hp.n_expert, rm.n_expert);
    T_EQ_INT(m->hp.rope_neox, rm.neox);
    T_NEAR(m->hp.rope_freq_scale, rm.freq_scale, 1e-7);

    double max_ref = 0.0, min_margin = INFINITY;
    for (int t = 0; t < T; t++) {
        double margin;
        argmax_d(ref + (size_t)t * V, V, &margin);
        min_margin = fmin(min_margin, margin);
        for (int i = 0; i < V; i++) max_ref = fmax(max_ref, fabs(ref[(size_t)t * V + i]));
    }
    printf("[%s] %d tokens, max|ref| %.4f, min top-1 margin %.3g", c->name, T, max_ref, min_margin);
    if (rm.n_expert) printf(", min routing gap %.3g", rm.min_route_gap);
    printf("\n");
    for (int f = 0; f < FEED_COUNT; f++) {
        if (!octo_logits(m, tok, T, (feed_mode)f, out[f])) continue;
        cmp_result r = compare(out[f], ref, T, V, REL_TOL);
        printf("    %-15s max abs diff %.3e  rel %.3e\n", feed_names[f], r.max_abs, r.rel);
        T_CHECKF(r.rel <= REL_TOL, "[%s, %s] relative diff %.3e", c->name, feed_names[f], r.rel);
        T_CHECKF(r.n_bad == 0, "[%s, %s] %d of %d logits off by more than 1e-4 * max(1, |ref|) (max abs %.3e)",
                 c->name, feed_names[f], r.n_bad, T * V, r.max_abs);
        T_CHECKF(r.n_argmax_mismatch == 0, "[%s, %s] argmax differs on %d of %d rows", c->name, feed_names[f],
                 r.n_argmax_mismatch, T);
    }
    /* all_rows = false: only the last row, equal to the reference's last row */
    session *s = NULL;
    if (session_new(m, 0, QT_F32, 0, &s, &err) == ERR_OK) {
        err_code rc = session_eval(s, tok, T, false, last, &err);
        cmp_result r = compare(last, ref + (size_t)(T - 1) * V, 1, V, REL_TOL);
        T_CHECKF(rc == ERR_OK && r.n_bad == 0 && r.n_argmax_mismatch == 0,
                 "[%s] last row only: %s, max abs diff %.3e", c->name, rc ? err.msg : "ok", r.max_abs);
        session_free(s);
    } else {
        T_CHECKF(0, "session_new: %s", err.msg);
    }
    /* the sensitivity of the comparison: a wrong reference is far from octo */
    for (int p = 0; p < 3 && c->perts[p]; p++) {
        if (!ref_forward(&rm, tok, T, c->perts[p], bad)) continue;
        cmp_result r = compare(out[FEED_BATCH], bad, T, V, REL_TOL);
        printf("    negative: %-40s max abs diff %.3e\n", pert_name(c->perts[p]), r.max_abs);
        T_CHECKF(r.max_abs > NEG_MIN_DIFF, "[%s] reference with '%s' is only %.3e from octo", c->name,
                 pert_name(c->perts[p]), r.max_abs);
        T_CHECKF(r.n_bad > 0, "[%s] reference with '%s' passes the element-wise check", c->name,
                 pert_name(c->perts[p]));
    }
done:
    model_free(m);
    ref_close(&rm);
    free(ref);
    free(bad);
    free(last);
    for (int f = 0; f < FEED_COUNT; f++) free(out[f]);
    T_CHECKF(remove(path) == 0, "remove(%s)", path);
}

int main(void) {
    const char *dir = getenv("OCTO_TMP");
    if (!dir || !*dir) dir = "/tmp";

    ref_case cases[6];
    int n = 0;
    synth_opts o;

    /* 1. dense llama, GQA 4/2 */
    o = synth_defaults();
    o.weight_std = 0.08f;
    o.seed = 101;
    cases[n++] = (ref_case){"dense llama GQA 4/2", o, 17, {PERT_ROPE_FLIP, PERT_GQA_MOD, 0}};

    /* 2. dense llama, no GQA, tied output */
    o = synth_defaults();
    o.n_head_kv = o.n_head;
    o.tied_output = true;
    o.weight_std = 0.08f;
    o.seed = 102;
    cases[n++] = (ref_case){"dense llama MHA tied", o, 16, {PERT_ROPE_FLIP, 0, 0}};

    /* 3. MoE llama, 4 experts, top 2, GQA */
    o = synth_defaults();
    o.n_expert = 4;
    o.n_expert_used = 2;
    o.weight_std = 0.08f;
    o.seed = 103;
    cases[n++] = (ref_case){"moe llama 4x2 GQA", o, 18, {PERT_NO_RENORM, PERT_GQA_MOD, 0}};

    /* 4. qwen2: q/k/v biases, NeoX RoPE */
    o = synth_defaults();
    o.arch = "qwen2";
    o.weight_std = 0.08f;
    o.seed = 104;
    cases[n++] = (ref_case){"qwen2", o, 15, {PERT_ROPE_FLIP, PERT_NO_BIAS, 0}};

    /* 5. linear RoPE scaling x4, freq_base 500000 */
    o = synth_defaults();
    o.rope_scale_linear = 4.0f;
    o.rope_freq_base = 500000.0f;
    o.weight_std = 0.08f;
    o.seed = 105;
    cases[n++] = (ref_case){"rope linear x4 base 5e5", o, 20, {PERT_NO_ROPE_SCALE, PERT_BASE_10K, 0}};

    /* 6. head_dim 32 != n_embd / n_head = 16 */
    o = synth_defaults();
    o.head_dim = 32;
    o.weight_std = 0.08f;
    o.seed = 106;
    cases[n++] = (ref_case){"head_dim 32 (n_embd/n_head 16)", o, 14, {PERT_SCALE_EMBD, PERT_ROPE_FLIP, 0}};

    for (int i = 0; i < n; i++) run_case(&cases[i], dir, i);
    T_DONE();
}
