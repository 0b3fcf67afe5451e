/*
 * adaptive — see adaptive.h.
 */
#include "adaptive.h"

#include <string.h>

void spec_length_init(spec_length *l, int fixed_k) {
    memset(l, 0, sizeof *l);
    l->fixed = fixed_k;
    l->k = fixed_k ? fixed_k : 4;
}

void spec_length_update(spec_length *l, int proposed, int accepted) {
    for (int i = 0; i < proposed; i++) {
        memmove(l->hist, l->hist + 1, SPEC_WINDOW - 1);
        l->hist[SPEC_WINDOW - 1] = i < accepted;
        if (l->n_hist < SPEC_WINDOW) l->n_hist++;
    }
    if (l->fixed || l->n_hist < SPEC_WINDOW) return;
    int acc = 0;
    for (int i = 0; i < SPEC_WINDOW; i++) acc += l->hist[i];
    if (acc * 10 > SPEC_WINDOW * 8 && l->k < SPEC_MAX_K) l->k++, l->n_hist = 0;
    else if (acc * 2 < SPEC_WINDOW && l->k > SPEC_MIN_K) l->k--, l->n_hist = 0;
}

bool spec_probe_plain(const spec_timing *t, int passes) { return t->plain_passes < 2 && passes % 3 == 2; }

bool spec_stop(const spec_timing *t, int min_passes, double *spec_ms_per_token, double *plain_ms_per_token) {
    const bool barren = t->proposing_passes >= 3 && t->accepted == 0;
    if (!barren && (t->verify_passes < min_passes || t->plain_passes < 2)) return false;
    const double spec = t->spec_ms / (t->accepted + t->verify_passes);
    const double plain = t->plain_passes ? t->plain_ms / t->plain_passes : 0.0;
    if (!barren && spec <= plain) return false;
    *spec_ms_per_token = spec;
    *plain_ms_per_token = plain;
    return true;
}

/* ---------------------------------------------------------------- tree budget */

#define BUDGET_EMA 0.3   /* the newest measurement's weight */
#define TRY_SLOPE 0.02   /* a size not yet measured: +2 % per token over the nearest smaller one that is */

void spec_budget_init(spec_budget *b, int fixed) {
    memset(b, 0, sizeof *b);
    b->fixed = fixed;
    b->depth = 2; /* the first tree drafts 4 deep, as a first line does */
}

bool spec_trees_pay(int spec_tree, int spec_k, bool sampled) {
    return spec_k == 0 && (spec_tree > 0 || (spec_tree == 0 && !sampled));
}

static double ema(double old, double x, bool first) { return first ? x : old + BUDGET_EMA * (x - old); }

/* A size past the largest measured one (lo): the slope from the measured
 * size below lo to lo, at least TRY_SLOPE of lo's time a token. Where a
 * pass's rows cost compute (a verify pass of 8 tokens of the 1.1B F16 model
 * on the Xeon: 1.8x one token), +2 % a token alone made the budget try ever
 * larger trees, each measured dear once more: a 128-token generation spent
 * most of its passes finding where the cost rose. */
static double cost_beyond(const spec_budget *b, int lo, int n) {
    double slope = TRY_SLOPE * b->ms[lo];
    int lo2 = lo - 1;
    while (lo2 >= 1 && !b->seen[lo2]) lo2--;
    if (lo2 >= 1) {
        const double measured = (b->ms[lo] - b->ms[lo2]) / (lo - lo2);
        if (measured > slope) slope = measured;
    }
    return b->ms[lo] + slope * (n - lo);
}

/* A verify pass of n tokens, in ms (relative units while nothing is measured). */
static double cost_of(const spec_budget *b, int n) {
    if (b->seen[n]) return b->ms[n];
    int lo = n - 1, hi = n + 1;
    while (lo >= 1 && !b->seen[lo]) lo--;
    while (hi <= SPEC_TREE_MAX && !b->seen[hi]) hi++;
    if (lo >= 1 && hi <= SPEC_TREE_MAX) return b->ms[lo] + (b->ms[hi] - b->ms[lo]) * (n - lo) / (hi - lo);
    if (lo >= 1) return cost_beyond(b, lo, n);
    if (hi <= SPEC_TREE_MAX) return b->ms[hi];
    return 1.0 + TRY_SLOPE * (n - 1);
}

int spec_budget_depth(const spec_budget *b) {
    const int d = b->fixed ? b->fixed : b->depth + 2;
    return d < SPEC_MAX_K ? d : SPEC_MAX_K;
}

bool spec_budget_deeper(const spec_budget *b, float value) {
    return b->fixed || b->rate <= 0.0 || value >= b->rate * b->step_ms;
}

int spec_budget_choose(spec_budget *b, const spec_tree *t) {
    int best = t->n - 1;
    if (b->fixed) {
        if (best > b->fixed) best = b->fixed;
    } else {
        double sum = 1.0, best_rate = -1.0;
        for (int k = 1; k < t->n; k++) {
            sum += t->value[k];
            const double r = sum / cost_of(b, k + 1);
            if (r > best_rate) best_rate = r, best = k;
        }
    }
    b->depth = 0;
    for (int k = 1; k <= best; k++)
        if (t->depth[k] > b->depth) b->depth = t->depth[k];
    return best;
}

void spec_budget_measured(spec_budget *b, int n, double verify_ms, int draft_steps, double draft_ms, double wait_ms,
                          int tokens) {
    if (n < 1 || n > SPEC_TREE_MAX) return;
    b->ms[n] = ema(b->ms[n], verify_ms, !b->seen[n]);
    b->seen[n] = true;
    if (draft_steps > 0) b->step_ms = ema(b->step_ms, draft_ms / draft_steps, b->step_ms <= 0.0);
    const double all = verify_ms + draft_ms + wait_ms;
    if (n > 1 && all > 0.0) b->rate = ema(b->rate, tokens / all, b->rate <= 0.0);
}
