/*
 * verify — see verify.h.
 */
#include "verify.h"

#include <string.h>

static int verify_greedy(sampler *smp, const float *rows, int n_vocab, const int32_t *draft, int k, int32_t *next) {
    for (int a = 0;; a++) {
        const int32_t t = sampler_sample(smp, rows + (size_t)a * n_vocab);
        if (a == k || t != draft[a]) {
            *next = t;
            return a;
        }
        sampler_accept(smp, t);
    }
}

/* One rejection step's fallback: draw from the normalised max(0, p - q). With
 * q one-hot at x (q == NULL) that is p without x. If rounding left nothing
 * positive (p and q equal up to it, so the draft was all but certain to be
 * accepted), p itself is the distribution that remains. */
static int32_t draw_residual(sampler *smp, const float *p, const float *q, int32_t x, int n_vocab, float *r) {
    for (int j = 0; j < n_vocab; j++) {
        const float d = q ? p[j] - q[j] : p[j];
        r[j] = d > 0.0f ? d : 0.0f;
    }
    if (!q) r[x] = 0.0f;
    const int32_t t = sampler_draw(smp, r);
    return t >= 0 ? t : sampler_draw(smp, p);
}

/* The token after every draft was accepted: p's own, or coupled to a guess. */
static int32_t draw_after(sampler *smp, const float *p, const spec_guess *g, int n_vocab, float *r) {
    if (!g || !g->q || g->token < 0 || g->token >= n_vocab) return sampler_draw(smp, p);
    const double px = p[g->token], qx = g->q[g->token];
    if (qx > 0.0 && sampler_uniform(smp) * qx < px) return g->token;
    return draw_residual(smp, p, g->q, g->token, n_vocab, r);
}

int spec_verify(sampler *smp, const float *rows, int n_vocab, const int32_t *draft, const float *q, int k,
                float *scratch, int32_t *next) {
    return spec_verify_guess(smp, rows, n_vocab, draft, q, k, NULL, scratch, next);
}

/* Sampled, a deterministic proposer's line (q one-hot): at each row the target's own draw, the one
 * plain decoding makes there with the same random number; the draft is accepted while it equals it. */
static int verify_own_draws(sampler *smp, const float *rows, int n_vocab, const int32_t *draft, int k, float *p,
                            int32_t *next) {
    for (int a = 0;; a++) {
        sampler_distribution(smp, rows + (size_t)a * n_vocab, p);
        const int32_t t = sampler_draw(smp, p);
        if (a == k || t != draft[a]) {
            *next = t;
            return a;
        }
        sampler_accept(smp, t);
    }
}

int spec_verify_guess(sampler *smp, const float *rows, int n_vocab, const int32_t *draft, const float *q, int k,
                      const spec_guess *guess, float *scratch, int32_t *next) {
    int a;
    if (sampler_is_greedy(smp)) {
        a = verify_greedy(smp, rows, n_vocab, draft, k, next);
    } else if (!q) {
        a = verify_own_draws(smp, rows, n_vocab, draft, k, scratch, next);
    } else {
        float *p = scratch, *r = scratch + n_vocab;
        for (a = 0;; a++) {
            sampler_distribution(smp, rows + (size_t)a * n_vocab, p);
            if (a == k) {
                *next = draw_after(smp, p, guess, n_vocab, r);
                break;
            }
            const int32_t x = draft[a];
            const float *qa = q ? q + (size_t)a * n_vocab : NULL;
            const double px = p[x], qx = qa ? qa[x] : 1.0;
            /* accept with probability min(1, px / qx); qx > 0 since x was drawn from qa */
            if (qx > 0.0 && sampler_uniform(smp) * qx < px) {
                sampler_accept(smp, x);
                continue;
            }
            *next = draw_residual(smp, p, qa, x, n_vocab, r);
            break;
        }
    }
    sampler_rewind(smp, a);
    return a;
}

/* ---------------------------------------------------------------- trees */

/* The children of node u in rank order; returns how many. */
static int children_of(const spec_tree *t, int u, int *ch) {
    int m = 0;
    for (int v = u + 1; v < t->n; v++) {
        if (t->parent[v] != u) continue;
        int i = m++;
        for (; i > 0 && t->rank[ch[i - 1]] > t->rank[v]; i--) ch[i] = ch[i - 1];
        ch[i] = v;
    }
    return m;
}

/* p (sum psum) loses q (sum qsum) as max(0, p - q), into r; returns r's sum.
 * Nothing left means p and q were equal but for rounding, an acceptance
 * that was certain: p without x then stands for what remains. */
static double subtract_q(float *p, double psum, const float *q, double qsum, float *r, int32_t x, int V) {
    double s = 0.0;
    for (int j = 0; j < V; j++) {
        const double d = p[j] / psum - q[j] / qsum;
        r[j] = d > 0.0 ? (float)d : 0.0f;
        s += r[j];
    }
    if (s > 0.0) return s;
    memcpy(r, p, sizeof(float) * (size_t)V);
    r[x] = 0.0f;
    return psum - p[x];
}

/* Multi-candidate rejection sampling over one node's children ch[0..m):
 * the child accepted, or -1 with *next drawn from what is left of p (the
 * node's distribution, summing to 1). s: 3 * V floats, p first. */
static int try_children(sampler *smp, const spec_tree *t, const int *ch, int m, int V, float *s, int32_t *next) {
    float *p = s, *qc = s + V, *r = s + 2 * (size_t)V;
    double psum = 1.0, qsum = 1.0;
    for (int i = 0; i < m; i++) {
        const int v = ch[i];
        const int32_t x = t->token[v];
        if (!t->q[v]) { /* chosen deterministically: q is one-hot at x */
            if (sampler_uniform(smp) * psum < p[x]) return v;
            psum -= p[x];
            p[x] = 0.0f;
            continue;
        }
        if (i == 0 || t->q[ch[i - 1]] != t->q[v]) {
            memcpy(qc, t->q[v], sizeof(float) * (size_t)V);
            qsum = 1.0;
        }
        const double px = p[x] / psum, qx = qc[x] / qsum;
        if (qx > 0.0 && sampler_uniform(smp) * qx < px) return v;
        psum = subtract_q(p, psum, qc, qsum, r, x, V);
        float *tmp = p;
        p = r, r = tmp;
        qsum -= qc[x];
        qc[x] = 0.0f;
        if (qsum <= 0.0) qsum = 1.0; /* every candidate drawn: no later sibling can be drawn from it */
    }
    *next = sampler_draw(smp, p);
    /* nothing left but for rounding (the candidates held all of p, the last
     * rejected by a hair): that last one had what remained */
    if (*next < 0) *next = m > 0 ? t->token[ch[m - 1]] : 0;
    return -1;
}

int spec_verify_tree(sampler *smp, const float *rows, int n_vocab, const spec_tree *t, float *scratch, int *path,
                     int32_t *next) {
    const bool greedy = sampler_is_greedy(smp);
    int a = 0;
    path[0] = 0;
    for (int u = 0;;) {
        int ch[SPEC_TREE_MAX];
        const int m = children_of(t, u, ch);
        const float *row = rows + (size_t)u * n_vocab;
        int v = -1;
        if (greedy) {
            const int32_t tok = sampler_sample(smp, row);
            for (int i = 0; i < m && v < 0; i++)
                if (t->token[ch[i]] == tok) v = ch[i];
            if (v < 0) *next = tok;
        } else {
            sampler_distribution(smp, row, scratch);
            v = try_children(smp, t, ch, m, n_vocab, scratch, next);
        }
        if (v < 0) break;
        sampler_accept(smp, t->token[v]);
        path[++a] = u = v;
    }
    sampler_rewind(smp, a);
    return a;
}
