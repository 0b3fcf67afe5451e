/*
 * gating — router logits to chosen experts and weights. See gating.h.
 */
#include "gating.h"

#include <math.h>
#include <stdbool.h>

#include "model/forward.h"

static void probabilities(gate_func f, float *x, int n) {
    if (f == GATE_SIGMOID) {
        for (int e = 0; e < n; e++) x[e] = 1.0f / (1.0f + expf(-x[e]));
        return;
    }
    float max = x[0], sum = 0.0f;
    for (int e = 1; e < n; e++) max = fmaxf(max, x[e]);
    for (int e = 0; e < n; e++) sum += x[e] = expf(x[e] - max);
    for (int e = 0; e < n; e++) x[e] /= sum;
}

/* Experts outside the n_group_used best groups get -inf in sel. */
static void mask_groups(const moe_gating *g, float *sel, int n) {
    const int per = n / g->n_group;
    float score[256];
    bool keep[256] = {false};
    for (int gi = 0; gi < g->n_group && gi < 256; gi++) {
        float a = -INFINITY, b = -INFINITY; /* the group's two best */
        for (int e = gi * per; e < (gi + 1) * per; e++) {
            if (sel[e] > a) b = a, a = sel[e];
            else if (sel[e] > b) b = sel[e];
        }
        score[gi] = per > 1 ? a + b : a;
    }
    int32_t best[256];
    fwd_top_k(score, g->n_group, g->n_group_used, best);
    for (int i = 0; i < g->n_group_used; i++) keep[best[i]] = true;
    for (int e = 0; e < n; e++)
        if (!keep[e / per]) sel[e] = -INFINITY;
}

void gating_route(const moe_gating *g, float *logits, int n, int k, const float *bias, int32_t *chosen, float *w) {
    probabilities(g->func, logits, n);
    if (bias || g->n_group > 1) {
        float sel[4096];
        for (int e = 0; e < n; e++) sel[e] = logits[e] + (bias ? bias[e] : 0.0f);
        if (g->n_group > 1 && g->n_group <= 256) mask_groups(g, sel, n);
        fwd_top_k(sel, n, k, chosen);
    } else {
        fwd_top_k(logits, n, k, chosen);
    }
    float sum = 0.0f;
    for (int j = 0; j < k; j++) sum += w[j] = logits[chosen[j]];
    for (int j = 0; j < k; j++) w[j] = (g->norm && sum > 0.0f ? w[j] / sum : w[j]) * g->scale;
}
