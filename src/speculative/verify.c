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

int spec_verify(sampler *smp, const float *rows, int n_vocab, const int32_t *draft, const float *q, int k,
                float *scratch, int32_t *next) {
    int a;
    if (sampler_is_greedy(smp)) {
        a = verify_greedy(smp, rows, n_vocab, draft, k, next);
    } else {
        float *p = scratch, *r = scratch + n_vocab;
        for (a = 0;; a++) {
            sampler_distribution(smp, rows + (size_t)a * n_vocab, p);
            if (a == k) {
                *next = sampler_draw(smp, p);
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
