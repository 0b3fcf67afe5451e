/*
 * spec_toy.h — what the speculation tests share (test_spec, test_ahead): a
 * toy target and draft with an exact distribution to compare against, and
 * the chi-square judgement.
 */
#ifndef OCTO_TEST_SPEC_TOY_H
#define OCTO_TEST_SPEC_TOY_H

#include <math.h>
#include <stdio.h>

#include "model/sampler.h"
#include "t.h"
#include "util.h"

/* Statistics. Nine chi-square tests must pass (test_spec: four on the toy
 * target, four end to end; test_ahead: one on the toy); each fails at
 * p < ALPHA = 2e-7, so by the union bound a correct build fails with
 * probability below 2e-6 over the choice of seeds. (The seeds are fixed: a
 * given build passes or fails every time.) */
#define ALPHA 2e-7

/* Goodness of fit: counts of n cells against probabilities, cells expected
 * fewer than 5 times pooled into one. Returns the p-value; *stat_out, *df_out. */
static double chi2_fit(const long *count, const double *prob, int n, long total, double *stat_out, int *df_out) {
    double stat = 0, pool_e = 0;
    long pool_c = 0;
    int cells = 0;
    for (int i = 0; i < n; i++) {
        const double e = prob[i] * (double)total;
        if (e < 5) {
            pool_e += e, pool_c += count[i];
            continue;
        }
        stat += (count[i] - e) * (count[i] - e) / e;
        cells++;
    }
    if (pool_e > 0) {
        stat += (pool_c - pool_e) * (pool_c - pool_e) / (pool_e > 1e-9 ? pool_e : 1e-9);
        cells++;
    }
    *stat_out = stat;
    *df_out = cells - 1;
    return tu_chi2_sf(stat, cells - 1);
}

/* ---- rejection sampling against the exact distribution ----
 *
 * A toy target whose next-token logits depend on the position only (P_pos),
 * and a draft likewise (Q_pos), over 6 tokens. Plain decoding would emit
 * t1 ~ p_0, t2 ~ p_1, t3 ~ p_2 independently, so the exact joint of the
 * first 3 tokens is a product. Speculation runs verify passes of k = 3 from
 * the current position until 3 tokens are out. */

#define TV 6
#define TPOS 8

/* The toy target and draft, after the sampler's transforms, and the exact
 * joint of plain decoding's first 3 tokens. */
typedef struct {
    sampler *smp;
    float P[TPOS][TV], Q[TPOS][TV], p[TPOS][TV], q[TPOS][TV];
    double prob[TV * TV * TV];
} toy_target;

static int toy_init(toy_target *t, uint64_t seed) {
    sampler_params sp = sampler_defaults();
    sp.temperature = 0.9f, sp.top_k = 5, sp.top_p = 0.97f, sp.min_p = 0.02f, sp.seed = seed;
    err_t err = {0};
    if (sampler_new(&sp, TV, &t->smp, &err)) return -1;
    for (int i = 0; i < TPOS; i++)
        for (int v = 0; v < TV; v++) {
            t->P[i][v] = (float)(1.3 * sin(1.7 * i + 2.1 * v) + 0.4 * v);
            t->Q[i][v] = (float)(1.5 * sin(1.1 * i + 1.9 * v + 0.5) + 0.2 * (TV - v)); /* close, not equal */
        }
    for (int i = 0; i < TPOS; i++)
        sampler_distribution(t->smp, t->P[i], t->p[i]), sampler_distribution(t->smp, t->Q[i], t->q[i]);
    for (int i = 0; i < TV * TV * TV; i++)
        t->prob[i] = (double)t->p[0][i / (TV * TV)] * t->p[1][i / TV % TV] * t->p[2][i % TV];
    return 0;
}

/* A rule's p-value: it must pass, or (a wrong rule) the test must see it. */
static void toy_judge(const char *what, const char *name, double pv, double stat, int df, long n, int must_pass) {
    printf("%s, %s: chi2 %.1f on %d df, p = %.3g over %ld runs\n", what, name, stat, df, pv, n);
    if (must_pass) T_CHECKF(pv > ALPHA, "%s: p = %g", name, pv);
    else T_CHECKF(pv >= 0 && pv < ALPHA, "%s: the test did not see the wrong rule (p = %g)", name, pv);
}

#endif
