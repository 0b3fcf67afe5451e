/*
 * test_sampler — the transforms, the draw, and the statistics of both.
 *
 *   1. reproducibility: the same seed gives the same 1000 tokens, another
 *      seed does not;
 *   2. greedy: argmax, ties to the lowest id, one-hot, penalties first;
 *   3. each transform on hand-made logits against exact expected values, and
 *      their order (temperature before top-p, top-k renormalised before top-p,
 *      top-p before min-p), and random vocabularies with ties against a
 *      sort-based reference;
 *   4. statistics: a chi-square goodness-of-fit test of 200k draws per
 *      configuration against sampler_distribution, with its false-failure
 *      probability stated and bounded, a check that excluded tokens are never
 *      drawn, and deliberately wrong samplers that the same test must reject;
 *   5. sampler_check / sampler_new reject each invalid parameter by name;
 *   6. a 150k vocabulary: top-k + top-p for 200 tokens, top-p alone, ties.
 *
 * Set T_VERBOSE=1 to print the measured chi-square values.
 */
#include "model/sampler.h"
#include "t.h"
#include "util.h"

#include <float.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

static bool verbose;

/* ---------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------- */

/* Test-side random numbers: rng_t from util.h, independent of the sampler's RNG. */

/* Every transform off, temperature 1: the plain softmax. */
static sampler_params params_off(void) {
    sampler_params p = sampler_defaults();
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.presence_penalty = 0.0f;
    p.repeat_last_n = 0;
    p.seed = 1;
    return p;
}

static sampler *make(const sampler_params *p, int n_vocab) {
    sampler *s = NULL;
    err_t e = {0};
    const err_code rc = sampler_new(p, n_vocab, &s, &e);
    T_CHECKF(rc == ERR_OK && s, "sampler_new: %s", e.msg);
    if (!s) {
        printf("cannot continue without a sampler\n");
        exit(1);
    }
    return s;
}

/* softmax(x / t) in double, the reference. */
static void ref_softmax(const double *x, int n, double t, double *out) {
    double m = -INFINITY, sum = 0.0;
    for (int i = 0; i < n; i++) if (x[i] > m) m = x[i];
    for (int i = 0; i < n; i++) sum += (out[i] = exp((x[i] - m) / t));
    for (int i = 0; i < n; i++) out[i] /= sum;
}

/* Distribution of s on logits, compared entry by entry with want (tol 1e-6;
 * zeros must be exact zeros). */
static void check_dist(sampler *s, const float *logits, const double *want, int n,
                       const char *what) {
    float probs[64];
    sampler_distribution(s, logits, probs);
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        sum += probs[i];
        if (want[i] == 0.0)
            T_CHECKF(probs[i] == 0.0f, "%s: token %d: p = %.9g, want exactly 0", what, i,
                     (double)probs[i]);
        else
            T_CHECKF(fabs(probs[i] - want[i]) <= 1e-6, "%s: token %d: p = %.9g, want %.9g",
                     what, i, (double)probs[i], want[i]);
    }
    T_CHECKF(fabs(sum - 1.0) <= 1e-6, "%s: sum = %.12g", what, sum);
}

/* ---------------------------------------------------------------------------
 * 1. Reproducibility
 * ------------------------------------------------------------------------- */

static void gen_sequence(uint64_t seed, int32_t *out, int n_tokens) {
    enum { V = 50 };
    sampler_params p = sampler_defaults(); /* every transform on, penalties too */
    p.seed = seed;
    p.repeat_penalty = 1.1f;
    p.presence_penalty = 0.1f;
    sampler *s = make(&p, V);
    rng_t r = {12345}; /* the logits are the same for every seed */
    float logits[V];
    for (int i = 0; i < n_tokens; i++) {
        for (int j = 0; j < V; j++) logits[j] = (float)rng_gauss(&r);
        out[i] = sampler_sample(s, logits);
        sampler_accept(s, out[i]);
    }
    sampler_free(s);
}

static void test_reproducible(void) {
    enum { N = 1000 };
    static int32_t a[N], b[N], c[N];
    gen_sequence(7, a, N);
    gen_sequence(7, b, N);
    gen_sequence(8, c, N);
    int same_ab = 0, same_ac = 0, in_range = 0;
    for (int i = 0; i < N; i++) {
        same_ab += a[i] == b[i];
        same_ac += a[i] == c[i];
        in_range += a[i] >= 0 && a[i] < 50;
    }
    T_EQ_INT(same_ab, N);
    T_EQ_INT(in_range, N);
    /* Independent draws from these distributions (50 Gaussian logits,
     * temperature 0.8, top-k 40) agree with probability ~0.1 per token, so
     * ~100 of 1000 positions match; 500 is far outside that. */
    T_CHECKF(same_ac < 500, "seeds 7 and 8 agree at %d of %d positions", same_ac, N);

    /* seed 0 is a seed like any other: reproducible */
    sampler_params p = params_off();
    p.seed = 0;
    sampler *s1 = make(&p, 4), *s2 = make(&p, 4);
    int same = 0;
    for (int i = 0; i < 100; i++) {
        const double u1 = sampler_uniform(s1), u2 = sampler_uniform(s2);
        same += u1 == u2 && u1 >= 0.0 && u1 < 1.0;
    }
    T_EQ_INT(same, 100);
    /* reset_history keeps the RNG: the streams stay in step */
    sampler_reset_history(s1);
    T_CHECK(sampler_uniform(s1) == sampler_uniform(s2));
    sampler_free(s1);
    sampler_free(s2);
}

/* ---------------------------------------------------------------------------
 * 2. Greedy
 * ------------------------------------------------------------------------- */

static void test_greedy(void) {
    sampler_params p = params_off();
    p.temperature = 0.0f;
    p.top_k = 2; /* the other transforms cannot change the argmax */
    p.top_p = 0.5f;
    p.min_p = 0.1f;
    sampler *s = make(&p, 6);
    T_CHECK(sampler_is_greedy(s));
    const float logits[6] = {1.0f, 3.0f, 2.0f, 3.0f, -INFINITY, NAN};
    const double want[6] = {0, 1, 0, 0, 0, 0};
    check_dist(s, logits, want, 6, "greedy tie");
    int ok = 0;
    for (int i = 0; i < 50; i++) ok += sampler_sample(s, logits) == 1;
    T_EQ_INT(ok, 50);
    sampler_free(s);

    /* penalties apply before the argmax: 3 / 2 = 1.5 < 2 (and token 3 too) */
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = 8;
    s = make(&p, 6);
    sampler_accept(s, 1);
    sampler_accept(s, 3);
    const double want_pen[6] = {0, 0, 1, 0, 0, 0};
    check_dist(s, logits, want_pen, 6, "greedy after repetition penalty");
    T_EQ_INT(sampler_sample(s, logits), 2);
    sampler_free(s);

    /* all masked: token 0, still one-hot */
    p = params_off();
    p.temperature = 0.0f;
    s = make(&p, 3);
    const float masked[3] = {-INFINITY, -INFINITY, -INFINITY};
    const double want_m[3] = {1, 0, 0};
    check_dist(s, masked, want_m, 3, "greedy all masked");
    sampler_free(s);

    sampler_params q = params_off();
    s = make(&q, 3);
    T_CHECK(!sampler_is_greedy(s));
    sampler_free(s);
}

/* ---------------------------------------------------------------------------
 * 3. Transforms, exact
 * ------------------------------------------------------------------------- */

static void only_1_and_2(void *ctx, float *l) {
    (void)ctx;
    l[0] = l[3] = -INFINITY;
}
static bool allows_1_and_2(void *ctx, int32_t t) {
    (void)ctx;
    return t == 1 || t == 2;
}

/* A constraint allowing the tokens whose hash falls in 1 of every `every`. */
typedef struct {
    int every, masks;
} hash_con;
static bool hash_allows(void *ctx, int32_t t) {
    const int every = ((hash_con *)ctx)->every;
    return ((uint32_t)t * 2654435761u >> 7) % (uint32_t)every == 0;
}
static void hash_mask(void *ctx, float *l) {
    ((hash_con *)ctx)->masks++;
    for (int32_t t = 0; t < 1000; t++)
        if (!hash_allows(ctx, t)) l[t] = -INFINITY;
}

/* With top-k, or min-p alone, the sampler checks the best tokens one by one
 * instead of masking them all: the distribution is the same to the bit. */
static void test_lazy_constraint(void) {
    const int V = 1000;
    float *l = malloc(sizeof *l * V), *a = malloc(sizeof *a * V), *b = malloc(sizeof *b * V);
    rng_t r = {42};
    const struct { float t; int k; float p, min_p; } cases[] = {
        {0.8f, 40, 0.95f, 0.05f}, {1.0f, 0, 1.0f, 0.1f}, {1.5f, 5, 1.0f, 0.0f}, {0.7f, 0, 0.9f, 0.05f},
        {1.0f, 100, 1.0f, 0.0f}, {2.0f, 0, 1.0f, 0.01f}};
    const int every[] = {2, 3, 97, 400};
    int same = 0, runs = 0, lazy_masks = 0, lazy_wanted = 0;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (int e = 0; e < 4; e++) {
            for (int i = 0; i < V; i++) l[i] = (float)(4.0 * rng_uniform(&r) - 2.0);
            sampler_params p = params_off();
            p.temperature = cases[c].t, p.top_k = cases[c].k, p.top_p = cases[c].p, p.min_p = cases[c].min_p;
            sampler *lazy = make(&p, V), *whole = make(&p, V);
            hash_con hl = {every[e], 0}, hw = {every[e], 0};
            sampler_constrain(lazy, &(sampler_constraint){&hl, hash_mask, hash_allows, NULL, NULL});
            sampler_constrain(whole, &(sampler_constraint){&hw, hash_mask, NULL, NULL, NULL});
            sampler_distribution(lazy, l, a);
            sampler_distribution(whole, l, b);
            int n_allowed_mass = 0;
            for (int i = 0; i < V; i++) n_allowed_mass += a[i] > 0.0f && !hash_allows(&hl, i);
            same += !memcmp(a, b, sizeof *a * (size_t)V) && n_allowed_mass == 0 && hw.masks == 1;
            runs++;
            /* dense allowed sets with a small top-k: never the whole mask (a wide min-p, or top-k 100 of
             * one token in 3, reaches past the best 256 tokens and takes the whole mask) */
            if (every[e] <= 3 && cases[c].k > 0 && cases[c].k <= 40) lazy_masks += hl.masks, lazy_wanted++;
            sampler_free(lazy), sampler_free(whole);
        }
    T_EQ_INT(same, runs);
    T_EQ_INT(lazy_masks, 0);
    T_EQ_INT(lazy_wanted, 4);
    free(l), free(a), free(b);
}

static void test_transforms(void) {
    /* logits = log p for p = {0.5, 0.3, 0.15, 0.05} */
    const float lp[4] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)};
    sampler_params p;
    sampler *s;

    /* plain softmax at temperature 1 recovers p */
    p = params_off();
    s = make(&p, 4);
    check_dist(s, lp, (const double[]){0.5, 0.3, 0.15, 0.05}, 4, "plain");
    sampler_free(s);

    /* top-p 0.8: {0.5, 0.3} reach 0.8 -> renormalised {0.625, 0.375} */
    p = params_off();
    p.top_p = 0.8f;
    s = make(&p, 4);
    check_dist(s, lp, (const double[]){0.625, 0.375, 0, 0}, 4, "top-p 0.8");
    sampler_free(s);

    /* min-p 0.35: threshold 0.35 * 0.5 = 0.175 keeps {0.5, 0.3} */
    p = params_off();
    p.min_p = 0.35f;
    s = make(&p, 4);
    check_dist(s, lp, (const double[]){0.625, 0.375, 0, 0}, 4, "min-p 0.35");
    sampler_free(s);

    /* top-k 2 keeps exactly the two largest: ids 1 and 3 */
    {
        const float l5[5] = {0.1f, 2.0f, -1.0f, 1.5f, 0.7f};
        const double a = exp(2.0), b = exp(1.5);
        p = params_off();
        p.top_k = 2;
        s = make(&p, 5);
        check_dist(s, l5, (const double[]){0, a / (a + b), 0, b / (a + b), 0}, 5, "top-k 2");
        sampler_free(s);
    }

    /* top-k 2 with a three-way tie at the boundary: lower ids win */
    {
        const float l5[5] = {2.0f, 1.0f, 3.0f, 2.0f, 2.0f};
        const double a = exp(3.0), b = exp(2.0);
        p = params_off();
        p.top_k = 2;
        s = make(&p, 5);
        check_dist(s, l5, (const double[]){b / (a + b), 0, a / (a + b), 0, 0}, 5, "top-k tie");
        p.top_k = 3;
        sampler_free(s);
        s = make(&p, 5);
        check_dist(s, l5, (const double[]){b / (a + 2 * b), 0, a / (a + 2 * b), b / (a + 2 * b), 0},
                   5, "top-k 3 tie");
        sampler_free(s);
    }

    /* temperature 2 == softmax(logits / 2) */
    {
        const float l4[4] = {1.0f, 2.0f, 3.0f, 0.5f};
        const double x[4] = {1.0, 2.0, 3.0, 0.5};
        double want[4];
        ref_softmax(x, 4, 2.0, want);
        p = params_off();
        p.temperature = 2.0f;
        s = make(&p, 4);
        check_dist(s, l4, want, 4, "temperature 2");
        sampler_free(s);
    }

    /* repetition penalty 2 on a positive and a negative logit; token 0 is
     * accepted twice but penalised once; token 3 (logit 0) is unaffected. */
    {
        const float l4[4] = {2.0f, -1.0f, 0.5f, 0.0f};
        const double x[4] = {1.0, -2.0, 0.5, 0.0};
        double want[4];
        ref_softmax(x, 4, 1.0, want);
        p = params_off();
        p.repeat_penalty = 2.0f;
        p.repeat_last_n = 8;
        s = make(&p, 4);
        sampler_accept(s, 0);
        sampler_accept(s, 1);
        sampler_accept(s, 0);
        sampler_accept(s, 3);
        sampler_accept(s, 99); /* out of range: ignored */
        check_dist(s, l4, want, 4, "repetition penalty 2");
        /* forgetting the history removes the penalty */
        sampler_reset_history(s);
        const double y[4] = {2.0, -1.0, 0.5, 0.0};
        ref_softmax(y, 4, 1.0, want);
        check_dist(s, l4, want, 4, "after reset_history");
        sampler_free(s);
    }

    /* presence penalty 0.5: subtracted once per distinct token */
    {
        const float l4[4] = {2.0f, -1.0f, 0.5f, 0.0f};
        const double x[4] = {1.5, -1.0, 0.0, 0.0};
        double want[4];
        ref_softmax(x, 4, 1.0, want);
        p = params_off();
        p.presence_penalty = 0.5f;
        p.repeat_last_n = 8;
        s = make(&p, 4);
        sampler_accept(s, 0);
        sampler_accept(s, 0);
        sampler_accept(s, 2);
        check_dist(s, l4, want, 4, "presence penalty 0.5");
        sampler_free(s);
    }

    /* frequency penalty 0.5 beside presence 0.25: each seen token loses 0.25 + 0.5 per time seen in
     * the window (the first 0 has left it) */
    {
        const float l4[4] = {2.0f, -1.0f, 0.5f, 0.0f};
        double want[4];
        p = params_off();
        p.frequency_penalty = 0.5f;
        p.presence_penalty = 0.25f;
        p.repeat_last_n = 5;
        s = make(&p, 4);
        const int32_t seen[] = {0, 0, 1, 0, 2, 0};
        for (int i = 0; i < 6; i++) sampler_accept(s, seen[i]);
        /* the window of 5: 0, 1, 0, 2, 0 -> 0 three times, 1 once, 2 once */
        const double y[4] = {2.0 - 0.25 - 1.5, -1.0 - 0.25 - 0.5, 0.5 - 0.25 - 0.5, 0.0};
        ref_softmax(y, 4, 1.0, want);
        check_dist(s, l4, want, 4, "frequency penalty 0.5, presence 0.25");
        sampler_free(s);
    }

    /* a constraint: tokens it forbids get nothing, the rest keep their ratios; a
     * greedy pick it forbids gives way to the best it allows */
    {
        const float l4[4] = {2.0f, -1.0f, 0.5f, 0.0f};
        const double x[4] = {-INFINITY, -1.0, 0.5, -INFINITY};
        double want[4];
        ref_softmax(x, 4, 1.0, want);
        p = params_off();
        s = make(&p, 4);
        sampler_constrain(s, &(sampler_constraint){NULL, only_1_and_2, allows_1_and_2, NULL, NULL});
        check_dist(s, l4, want, 4, "a constraint allowing 1 and 2");
        sampler_free(s);
        p.temperature = 0.0f;
        s = make(&p, 4);
        sampler_constrain(s, &(sampler_constraint){NULL, only_1_and_2, allows_1_and_2, NULL, NULL});
        T_EQ_INT(sampler_sample(s, l4), 2);
        sampler_constrain(s, NULL);
        T_EQ_INT(sampler_sample(s, l4), 0);
        sampler_free(s);
    }

    /* the window: repeat_last_n 2 after 0, 1, 2 penalises only 1 and 2 */
    {
        const float l4[4] = {2.0f, -1.0f, 0.5f, 0.0f};
        const double x[4] = {2.0, -2.0, 0.25, 0.0};
        double want[4];
        ref_softmax(x, 4, 1.0, want);
        p = params_off();
        p.repeat_penalty = 2.0f;
        p.repeat_last_n = 2;
        s = make(&p, 4);
        sampler_accept(s, 0);
        sampler_accept(s, 1);
        sampler_accept(s, 2);
        check_dist(s, l4, want, 4, "window of 2");
        sampler_free(s);
    }

    /* masked tokens, all-equal logits, huge logits, +inf */
    {
        p = params_off();
        s = make(&p, 4);
        const float m4[4] = {0.0f, -INFINITY, 0.0f, NAN};
        check_dist(s, m4, (const double[]){0.5, 0, 0.5, 0}, 4, "-inf and NaN masked");
        const float big[4] = {1000.0f, 999.0f, -1000.0f, -INFINITY};
        const double e = exp(-1.0);
        check_dist(s, big, (const double[]){1 / (1 + e), e / (1 + e), exp(-2000.0), 0}, 4,
                   "large logits");
        const float pinf[4] = {INFINITY, 3.0f, INFINITY, 1.0f};
        check_dist(s, pinf, (const double[]){0.5, 0, 0.5, 0}, 4, "+inf logits");
        const float none[4] = {-INFINITY, -INFINITY, NAN, -INFINITY};
        check_dist(s, none, (const double[]){0.25, 0.25, 0.25, 0.25}, 4, "all masked");
        sampler_free(s);

        s = make(&p, 7);
        const float eq[7] = {0.3f, 0.3f, 0.3f, 0.3f, 0.3f, 0.3f, 0.3f};
        const double u = 1.0 / 7.0;
        check_dist(s, eq, (const double[]){u, u, u, u, u, u, u}, 7, "all equal");
        sampler_free(s);
    }

    /* order: temperature before top-p. At T = 1, top-p 0.6 keeps {0.5, 0.3};
     * at T = 0.5 the probabilities are {0.685, 0.247, ...} so only token 0. */
    p = params_off();
    p.temperature = 0.5f;
    p.top_p = 0.6f;
    s = make(&p, 4);
    check_dist(s, lp, (const double[]){1, 0, 0, 0}, 4, "temperature before top-p");
    sampler_free(s);

    /* order: top-k renormalises before top-p. Without top-k, top-p 0.84 needs
     * three tokens (0.5, 0.8, 0.95); after top-k 3 the probabilities are
     * {0.526, 0.316, 0.158}, and two reach 0.842 >= 0.84. */
    p = params_off();
    p.top_p = 0.84f;
    s = make(&p, 4);
    check_dist(s, lp, (const double[]){0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0}, 4,
               "top-p 0.84 alone");
    sampler_free(s);
    p.top_k = 3;
    s = make(&p, 4);
    check_dist(s, lp, (const double[]){0.625, 0.375, 0, 0}, 4, "top-k 3 then top-p 0.84");
    sampler_free(s);

    /* order: top-p before min-p. min-p 0.2 alone keeps three; top-p 0.84
     * first keeps three too and then min-p keeps them. (min-p first would
     * renormalise to {0.526, 0.316, 0.158} and top-p would keep two.) */
    p = params_off();
    p.top_p = 0.84f;
    p.min_p = 0.2f;
    s = make(&p, 4);
    check_dist(s, lp, (const double[]){0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0}, 4,
               "top-p then min-p");
    sampler_free(s);

    /* min-p 1 keeps only the maximum (and its ties) */
    p = params_off();
    p.min_p = 1.0f;
    s = make(&p, 4);
    const float tie[4] = {1.0f, 2.0f, 2.0f, 0.0f};
    check_dist(s, tie, (const double[]){0, 0.5, 0.5, 0}, 4, "min-p 1");
    sampler_free(s);
}

/* The same pipeline written the obvious way: sort everything, then cut.
 * The sampler never sorts (quickselect, weighted for top-p), so this checks
 * it on random vocabularies with many ties, both below and above the size at
 * which its selection switches to a sampled pivot. */
typedef struct { float l; int32_t id; } ref_item;

static int ref_cmp(const void *pa, const void *pb) {
    const ref_item *a = pa, *b = pb;
    if (a->l != b->l) return a->l > b->l ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static void ref_distribution(const sampler_params *p, const float *logits, int n, ref_item *it,
                             double *out) {
    int m = 0;
    for (int i = 0; i < n; i++) {
        out[i] = 0.0;
        if (logits[i] > -INFINITY) it[m++] = (ref_item){logits[i], i};
    }
    qsort(it, (size_t)m, sizeof *it, ref_cmp);
    if (p->top_k > 0 && p->top_k < m) m = p->top_k;
    double sum = 0.0;
    for (int i = 0; i < m; i++)
        sum += (out[it[i].id] = exp(((double)it[i].l - it[0].l) / p->temperature));
    if (p->top_p < 1.0f) { /* the sampler's contract: within 1e-6 of top_p counts */
        const double target = ((double)p->top_p - 1e-6) * sum;
        double cum = 0.0;
        int keep = m;
        for (int i = 0; i < m; i++)
            if ((cum += out[it[i].id]) >= target) { keep = i + 1; break; }
        for (int i = keep; i < m; i++) out[it[i].id] = 0.0;
        m = keep;
    }
    for (int i = 0; i < m; i++)
        if (out[it[i].id] < (double)p->min_p) out[it[i].id] = 0.0;
    sum = 0.0;
    for (int i = 0; i < n; i++) sum += out[i];
    for (int i = 0; i < n; i++) out[i] /= sum;
}

static void test_against_reference(void) {
    enum { VMAX = 5000, TRIALS = 300 };
    float *logits = malloc(VMAX * sizeof *logits), *probs = malloc(VMAX * sizeof *probs);
    double *want = malloc(VMAX * sizeof *want);
    ref_item *it = malloc(VMAX * sizeof *it);
    T_CHECK(logits && probs && want && it);
    if (!logits || !probs || !want || !it) goto done;
    rng_t r = {2024};
    int same_support = 0, close = 0;
    for (int trial = 0; trial < TRIALS; trial++) {
        const int n = 1 + (int)(rng_next(&r) % (trial % 3 == 0 ? VMAX : 300));
        const int levels = 2 + (int)(rng_next(&r) % 40); /* few levels: many ties */
        for (int i = 0; i < n; i++) {
            logits[i] = (float)(rng_next(&r) % (uint64_t)levels) * 0.25f;
            if (rng_next(&r) % 50 == 0) logits[i] = -INFINITY;
        }
        sampler_params p = params_off();
        p.temperature = (float)(0.2 + 2.0 * rng_uniform(&r));
        p.top_k = rng_next(&r) % 3 == 0 ? 0 : 1 + (int)(rng_next(&r) % 100);
        p.top_p = rng_next(&r) % 3 == 0 ? 1.0f : (float)(0.05 + 0.95 * rng_uniform(&r));
        p.min_p = rng_next(&r) % 3 == 0 ? 0.0f : (float)(0.3 * rng_uniform(&r));
        sampler *s = make(&p, n);
        sampler_distribution(s, logits, probs);
        ref_distribution(&p, logits, n, it, want);
        int support_ok = 1, close_ok = 1;
        for (int i = 0; i < n; i++) {
            if ((probs[i] > 0.0f) != (want[i] > 0.0)) support_ok = 0;
            if (fabs(probs[i] - want[i]) > 1e-6) close_ok = 0;
        }
        if (!support_ok)
            fprintf(stderr, "trial %d: n %d T %g k %d p %g min-p %g: support differs\n", trial,
                    n, (double)p.temperature, p.top_k, (double)p.top_p, (double)p.min_p);
        same_support += support_ok;
        close += close_ok;
        sampler_free(s);
    }
    T_EQ_INT(same_support, TRIALS);
    T_EQ_INT(close, TRIALS);
done:
    free(logits);
    free(probs);
    free(want);
    free(it);
}

/* sampler_draw on hand-made distributions. */
static void test_draw(void) {
    sampler_params p = params_off();
    sampler *s = make(&p, 6);
    const float probs[6] = {0.0f, 0.25f, 0.0f, 0.0f, 0.75f, 0.0f};
    int c[6] = {0};
    for (int i = 0; i < 4000; i++) {
        const int32_t t = sampler_draw(s, probs);
        if (t >= 0 && t < 6) c[t]++;
    }
    T_EQ_INT(c[0] + c[2] + c[3] + c[5], 0);
    T_EQ_INT(c[1] + c[4], 4000);
    /* 4000 * 0.25 = 1000, sd 27: 6 sd either way */
    T_CHECKF(c[1] > 835 && c[1] < 1165, "c[1] = %d", c[1]);

    const float one[6] = {0, 0, 0, 0, 0, 1.0f};
    int ok = 0;
    for (int i = 0; i < 100; i++) ok += sampler_draw(s, one) == 5;
    T_EQ_INT(ok, 100);
    /* a vector whose sum is not exactly 1 is drawn from after scaling */
    const float loose[6] = {0, 0.5f, 0, 0, 0.5000001f, -0.1f};
    ok = 0;
    for (int i = 0; i < 100; i++) {
        const int32_t t = sampler_draw(s, loose);
        ok += t == 1 || t == 4;
    }
    T_EQ_INT(ok, 100);
    const float zero[6] = {0};
    T_EQ_INT(sampler_draw(s, zero), -1);
    sampler_free(s);
}

/* ---------------------------------------------------------------------------
 * 4. Statistics
 *
 * Chi-square goodness of fit: draw N tokens, count them, and compute
 * X2 = sum over tokens with q > 0 of (count - N q)^2 / (N q), where q is
 * sampler_distribution's output. If the draws really come from q, X2 follows
 * (asymptotically) a chi-square distribution with K - 1 degrees of freedom,
 * K = the number of tokens with q > 0. Here N = 200000 and every expected
 * count N q is >= 50, so the asymptotic law is accurate.
 *
 * Critical value: we reject when X2 > c(K - 1), where c(df) is the
 * chi-square quantile with upper tail 1e-7, computed below exactly (the
 * regularised upper incomplete gamma function, inverted by bisection) and
 * checked against the closed forms for df = 1 (erfc) and df = 2 (exp). For
 * reference: c(2) = 32.24, c(5) = 40.86, c(9) = 50.17. So each test fails a
 * correct sampler with probability 1e-7, and with N_CONFIGS = 6 tests the
 * union bound puts the probability of any false failure at 6e-7 < 1e-6.
 * (The draws are seeded, so a given build either passes or fails every time;
 * the bound is over the choice of seed.)
 *
 * Power: the deliberately wrong samplers below must make X2 exceed the same
 * critical value. The tests run on sampler_sample, i.e. the full path.
 * ------------------------------------------------------------------------- */


/* The x with tu_chi2_sf(x, df) == tail (bisection; sf is decreasing). */
static double chi2_isf(double tail, int df) {
    double lo = 0.0, hi = 1000.0;
    for (int i = 0; i < 200; i++) {
        const double mid = 0.5 * (lo + hi);
        if (tu_chi2_sf(mid, df) > tail) lo = mid;
        else hi = mid;
    }
    return 0.5 * (lo + hi);
}

#define TAIL_PER_TEST 1e-7
#define N_CONFIGS 6
#define N_DRAWS 200000

static void test_chi2_quantiles(void) {
    /* df = 2: sf(x) = exp(-x / 2), so the quantile is -2 ln(tail) */
    T_NEAR(chi2_isf(TAIL_PER_TEST, 2), -2.0 * log(TAIL_PER_TEST), 1e-6);
    /* df = 1: sf(x) = erfc(sqrt(x / 2)) */
    const double c1 = chi2_isf(TAIL_PER_TEST, 1);
    T_NEAR(erfc(sqrt(c1 / 2.0)), TAIL_PER_TEST, 1e-12);
    /* df = 4: sf(x) = exp(-x/2) (1 + x/2) */
    const double c4 = chi2_isf(TAIL_PER_TEST, 4);
    T_NEAR(exp(-c4 / 2) * (1 + c4 / 2), TAIL_PER_TEST, 1e-12);
    /* Wilson-Hilferty is an approximation, but within a few percent at df 9 */
    const double z = 5.199337582, k = 9.0, h = 2.0 / (9.0 * k);
    const double wh = k * pow(1.0 - h + z * sqrt(h), 3.0);
    const double c9 = chi2_isf(TAIL_PER_TEST, 9);
    T_CHECKF(fabs(wh - c9) / c9 < 0.05, "Wilson-Hilferty %.3f vs %.3f", wh, c9);
    /* the tail of the bound: N_CONFIGS tests at TAIL_PER_TEST each */
    T_CHECK(N_CONFIGS * TAIL_PER_TEST < 1e-6);
    if (verbose)
        printf("chi2 critical values (tail %g): df1 %.3f df2 %.3f df4 %.3f df9 %.3f (WH %.3f)\n",
               TAIL_PER_TEST, c1, chi2_isf(TAIL_PER_TEST, 2), c4, c9, wh);
}

/* X2 of counts against q over q's support; *outside = draws where q == 0. */
static double chi2_stat(const long *counts, const float *q, int n, long n_draws, int *df,
                        long *outside) {
    double x2 = 0.0;
    int k = 0;
    *outside = 0;
    for (int i = 0; i < n; i++) {
        if (q[i] > 0.0f) {
            const double e = (double)n_draws * q[i];
            x2 += (counts[i] - e) * (counts[i] - e) / e;
            k++;
        } else {
            *outside += counts[i];
        }
    }
    *df = k - 1;
    return x2;
}

enum { SV = 10 };
/* Unequal probabilities with a tail: p = {0.348, 0.211, 0.156, 0.105, 0.078,
 * 0.047, 0.029, 0.017, 0.006, 0.002} at temperature 1. */
static const float stat_logits[SV] = {2.0f, 1.5f, 1.2f, 0.8f, 0.5f,
                                      0.0f, -0.5f, -1.0f, -2.0f, -3.0f};
static const int32_t stat_history[] = {0, 3, 3, 7};

typedef struct {
    const char *name;
    float temperature;
    int top_k;
    float top_p, min_p, repeat_penalty, presence_penalty;
    int expect_support; /* tokens with q > 0, to be sure the transform acted */
} stat_config;

static sampler *make_stat(const stat_config *c, uint64_t seed) {
    sampler_params p = params_off();
    p.temperature = c->temperature;
    p.top_k = c->top_k;
    p.top_p = c->top_p;
    p.min_p = c->min_p;
    p.repeat_penalty = c->repeat_penalty;
    p.presence_penalty = c->presence_penalty;
    p.repeat_last_n = 16;
    p.seed = seed;
    sampler *s = make(&p, SV);
    for (size_t i = 0; i < sizeof stat_history / sizeof stat_history[0]; i++)
        sampler_accept(s, stat_history[i]);
    return s;
}

/* The check: X2 against the critical value for its df; returns X2. */
static double chi2_check(const long *counts, const float *q, int *df, long *outside) {
    return chi2_stat(counts, q, SV, N_DRAWS, df, outside);
}

static void test_statistics(void) {
    static const stat_config configs[N_CONFIGS] = {
        {"temperature 1", 1.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f, SV},
        {"temperature 0.7", 0.7f, 0, 1.0f, 0.0f, 1.0f, 0.0f, SV},
        {"top-k 3", 1.0f, 3, 1.0f, 0.0f, 1.0f, 0.0f, 3},
        {"top-p 0.9", 1.0f, 0, 0.9f, 0.0f, 1.0f, 0.0f, 6},
        {"min-p 0.1", 1.0f, 0, 1.0f, 0.1f, 1.0f, 0.0f, 6},
        {"T 0.8 k 7 p 0.95 min-p 0.02 rep 1.3 pres 0.2", 0.8f, 7, 0.95f, 0.02f, 1.3f, 0.2f, 0},
    };
    for (int ci = 0; ci < N_CONFIGS; ci++) {
        const stat_config *c = &configs[ci];
        sampler *s = make_stat(c, 1000 + (uint64_t)ci);
        float q[SV];
        sampler_distribution(s, stat_logits, q);
        int support = 0;
        double min_expected = INFINITY;
        for (int i = 0; i < SV; i++)
            if (q[i] > 0.0f) {
                support++;
                if (N_DRAWS * (double)q[i] < min_expected) min_expected = N_DRAWS * (double)q[i];
            }
        if (c->expect_support) T_EQ_INT(support, c->expect_support);
        T_CHECKF(min_expected >= 50.0, "%s: smallest expected count %.1f", c->name, min_expected);

        long counts[SV] = {0};
        int bad = 0;
        for (long i = 0; i < N_DRAWS; i++) {
            const int32_t t = sampler_sample(s, stat_logits);
            if (t >= 0 && t < SV) counts[t]++;
            else bad++;
        }
        T_EQ_INT(bad, 0);
        int df;
        long outside;
        const double x2 = chi2_check(counts, q, &df, &outside);
        const double crit = chi2_isf(TAIL_PER_TEST, df);
        T_CHECKF(outside == 0, "%s: %ld draws of excluded tokens", c->name, outside);
        T_CHECKF(x2 <= crit, "%s: X2 = %.2f > %.2f (df %d)", c->name, x2, crit, df);
        if (verbose)
            printf("%-46s support %2d df %d  X2 = %7.2f  critical %.2f\n", c->name, support, df,
                   x2, crit);
        sampler_free(s);
    }
}

/* A wrong sampler: draws (with sampler_draw) from the distribution `wrong`
 * and is checked against the distribution `right`. It must fail. */
static void expect_rejected(const char *name, const stat_config *right, const stat_config *wrong) {
    sampler *sr = make_stat(right, 77), *sw = make_stat(wrong, 78);
    float q_right[SV], q_wrong[SV];
    sampler_distribution(sr, stat_logits, q_right);
    sampler_distribution(sw, stat_logits, q_wrong);
    long counts[SV] = {0};
    for (long i = 0; i < N_DRAWS; i++) {
        const int32_t t = sampler_draw(sw, q_wrong);
        if (t >= 0 && t < SV) counts[t]++;
    }
    int df;
    long outside;
    const double x2 = chi2_check(counts, q_right, &df, &outside);
    const double crit = chi2_isf(TAIL_PER_TEST, df);
    T_CHECKF(x2 > crit, "wrong sampler (%s) passed: X2 = %.2f <= %.2f", name, x2, crit);
    if (verbose)
        printf("wrong: %-39s df %d  X2 = %9.2f  critical %.2f  excluded drawn %ld\n", name, df,
               x2, crit, outside);
    sampler_free(sr);
    sampler_free(sw);
}

static void test_power(void) {
    const stat_config top_p = {"top-p 0.9", 1.0f, 0, 0.9f, 0.0f, 1.0f, 0.0f, 0};
    const stat_config no_top_p = {"no top-p", 1.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f, 0};
    expect_rejected("top-p ignored", &top_p, &no_top_p);

    const stat_config t07 = {"T 0.7", 0.7f, 0, 1.0f, 0.0f, 1.0f, 0.0f, 0};
    const stat_config t1 = {"T 1", 1.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f, 0};
    expect_rejected("temperature ignored", &t07, &t1);

    /* subtler: top-k 3 without renormalising */
    const stat_config top_k = {"top-k 3", 1.0f, 3, 1.0f, 0.0f, 1.0f, 0.0f, 0};
    const stat_config top_k4 = {"top-k 4", 1.0f, 4, 1.0f, 0.0f, 1.0f, 0.0f, 0};
    expect_rejected("top-k off by one", &top_k, &top_k4);

    /* subtle: temperature 0.7 drawn at 0.75 */
    const stat_config t075 = {"T 0.75", 0.75f, 0, 1.0f, 0.0f, 1.0f, 0.0f, 0};
    expect_rejected("temperature 0.75 for 0.7", &t07, &t075);

    /* penalties ignored */
    const stat_config pen = {"rep 1.3", 1.0f, 0, 1.0f, 0.0f, 1.3f, 0.0f, 0};
    expect_rejected("repetition penalty ignored", &pen, &t1);
}

/* ---------------------------------------------------------------------------
 * 5. Parameter checks
 * ------------------------------------------------------------------------- */

static void expect_invalid(sampler_params p, const char *name) {
    err_t e = {0};
    const err_code rc = sampler_check(&p, &e);
    T_CHECKF(rc == ERR_INVALID_ARG && e.code == ERR_INVALID_ARG, "%s: rc %d", name, (int)rc);
    T_CHECKF(strstr(e.msg, name) != NULL, "message \"%s\" does not name %s", e.msg, name);
    /* sampler_new refuses too, and sets *out to NULL */
    sampler_params ok = sampler_defaults();
    sampler *keep = make(&ok, 10), *s = keep;
    err_t e2 = {0};
    T_EQ_INT(sampler_new(&p, 10, &s, &e2), ERR_INVALID_ARG);
    T_CHECK(s == NULL);
    T_CHECK(strstr(e2.msg, name) != NULL);
    sampler_free(keep);
}

static void test_check(void) {
    const sampler_params d = sampler_defaults();
    T_NEAR(d.temperature, 0.8, 1e-7);
    T_EQ_INT(d.top_k, 40);
    T_NEAR(d.top_p, 0.95, 1e-7);
    T_NEAR(d.min_p, 0.05, 1e-7);
    T_NEAR(d.repeat_penalty, 1.0, 0);
    T_NEAR(d.presence_penalty, 0.0, 0);
    T_EQ_INT(d.repeat_last_n, 64);
    T_EQ_INT(d.seed, 0);
    err_t e = {0};
    T_EQ_INT(sampler_check(&d, &e), ERR_OK);

    sampler_params p;
    p = d; p.temperature = -0.1f;       expect_invalid(p, "temperature");
    p = d; p.temperature = NAN;         expect_invalid(p, "temperature");
    p = d; p.temperature = INFINITY;    expect_invalid(p, "temperature");
    p = d; p.top_k = -1;                expect_invalid(p, "top_k");
    p = d; p.top_p = 1.5f;              expect_invalid(p, "top_p");
    p = d; p.top_p = 0.0f;              expect_invalid(p, "top_p");
    p = d; p.top_p = NAN;               expect_invalid(p, "top_p");
    p = d; p.min_p = -0.01f;            expect_invalid(p, "min_p");
    p = d; p.min_p = 1.01f;             expect_invalid(p, "min_p");
    p = d; p.min_p = NAN;               expect_invalid(p, "min_p");
    p = d; p.repeat_penalty = 0.0f;     expect_invalid(p, "repeat_penalty");
    p = d; p.repeat_penalty = -1.0f;    expect_invalid(p, "repeat_penalty");
    p = d; p.repeat_penalty = NAN;      expect_invalid(p, "repeat_penalty");
    p = d; p.repeat_penalty = INFINITY; expect_invalid(p, "repeat_penalty");
    p = d; p.presence_penalty = NAN;    expect_invalid(p, "presence_penalty");
    p = d; p.repeat_last_n = -1;        expect_invalid(p, "repeat_last_n");

    /* the boundaries that are allowed */
    p = d; p.temperature = 0.0f; p.top_k = 0; p.top_p = 1.0f; p.min_p = 0.0f;
    p.repeat_last_n = 0; p.presence_penalty = -2.0f;
    T_EQ_INT(sampler_check(&p, &e), ERR_OK);
    p.min_p = 1.0f;
    T_EQ_INT(sampler_check(&p, &e), ERR_OK);
    T_EQ_INT(sampler_check(NULL, &e), ERR_INVALID_ARG);

    /* n_vocab */
    sampler *keep = make(&d, 10), *s = keep;
    T_EQ_INT(sampler_new(&d, 0, &s, &e), ERR_INVALID_ARG);
    T_CHECK(s == NULL && strstr(e.msg, "n_vocab"));
    T_EQ_INT(sampler_new(&d, -5, &s, &e), ERR_INVALID_ARG);
    T_CHECK(s == NULL && strstr(e.msg, "n_vocab"));
    T_EQ_INT(sampler_new(&d, 1, &s, &e), ERR_OK);
    T_CHECK(s != NULL);
    if (s) {
        const float l1[1] = {-3.0f};
        T_EQ_INT(sampler_sample(s, l1), 0);
    }
    sampler_free(s);
    sampler_free(keep);
    sampler_free(NULL);
}

/* ---------------------------------------------------------------------------
 * 6. A 150k vocabulary
 * ------------------------------------------------------------------------- */

static void test_large(void) {
    enum { V = 150000 };
    float *logits = malloc(V * sizeof *logits), *probs = malloc(V * sizeof *probs);
    float *base = malloc(V * sizeof *base);
    T_CHECK(logits && probs && base);
    if (!logits || !probs || !base) { free(logits); free(probs); free(base); return; }
    rng_t r = {99};

    /* defaults: top-k 40, top-p 0.95, min-p 0.05, 200 tokens */
    sampler_params p = sampler_defaults();
    p.seed = 5;
    p.repeat_penalty = 1.1f;
    sampler *s = make(&p, V);
    int in_range = 0, dist_ok = 0;
    /* a new permutation of the same Gaussian logits every step: a different
     * argmax and history each time without 30M Gaussian draws under ASan */
    for (int i = 0; i < V; i++) base[i] = (float)(3.0 * rng_gauss(&r));
    for (int step = 0; step < 200; step++) {
        const int shift = (int)(rng_next(&r) % V), stride = 7919; /* prime, coprime to V */
        for (int i = 0; i < V; i++) logits[i] = base[(int)(((long)i * stride + shift) % V)];
        if (step % 20 == 0) {
            sampler_distribution(s, logits, probs);
            double sum = 0.0;
            int support = 0;
            for (int i = 0; i < V; i++) {
                sum += probs[i];
                support += probs[i] > 0.0f;
            }
            dist_ok += fabs(sum - 1.0) <= 1e-6 && support >= 1 && support <= 40;
        }
        const int32_t t = sampler_sample(s, logits);
        in_range += t >= 0 && t < V;
        sampler_accept(s, t);
    }
    T_EQ_INT(in_range, 200);
    T_EQ_INT(dist_ok, 10);
    sampler_free(s);

    /* top-p alone over a flat-ish 150k: the support is the shortest prefix */
    p = params_off();
    p.top_p = 0.5f;
    s = make(&p, V);
    for (int i = 0; i < V; i++) logits[i] = (float)(0.5 * rng_gauss(&r));
    sampler_distribution(s, logits, probs);
    {
        /* reference: sort the softmax in double, count the prefix */
        double *w = malloc(V * sizeof *w);
        T_CHECK(w != NULL);
        if (w) {
            double m = -INFINITY, sum = 0.0, kept_min = INFINITY, dropped_max = 0.0, psum = 0.0;
            for (int i = 0; i < V; i++) if (logits[i] > m) m = logits[i];
            for (int i = 0; i < V; i++) sum += (w[i] = exp(logits[i] - m));
            int support = 0;
            for (int i = 0; i < V; i++) {
                psum += probs[i];
                if (probs[i] > 0.0f) {
                    support++;
                    if (w[i] < kept_min) kept_min = w[i];
                } else if (w[i] > dropped_max) {
                    dropped_max = w[i];
                }
            }
            double kept = 0.0;
            for (int i = 0; i < V; i++) if (probs[i] > 0.0f) kept += w[i] / sum;
            T_NEAR(psum, 1.0, 1e-6);
            T_CHECKF(kept_min >= dropped_max, "kept %.9g < dropped %.9g", kept_min, dropped_max);
            T_CHECKF(kept >= 0.5 - 1e-6, "kept mass %.9g", kept);
            T_CHECKF(kept - kept_min / sum < 0.5, "kept mass minus its smallest %.9g",
                     kept - kept_min / sum);
            T_CHECKF(support > 1000, "support %d", support);
            free(w);
        }
    }
    sampler_free(s);

    /* all-equal logits, top-p 0.95: exactly the lowest 142500 ids survive */
    p = params_off();
    p.top_p = 0.95f;
    s = make(&p, V);
    for (int i = 0; i < V; i++) logits[i] = 1.25f;
    sampler_distribution(s, logits, probs);
    int first = 0, rest = 0;
    double sum = 0.0;
    for (int i = 0; i < V; i++) {
        sum += probs[i];
        if (i < 142500) first += fabs(probs[i] - 1.0 / 142500) < 1e-12;
        else rest += probs[i] == 0.0f;
    }
    T_EQ_INT(first, 142500);
    T_EQ_INT(rest, V - 142500);
    T_NEAR(sum, 1.0, 1e-6);

    /* plain softmax over 150k sums to 1 */
    sampler_free(s);
    p = params_off();
    s = make(&p, V);
    for (int i = 0; i < V; i++) logits[i] = (float)(4.0 * rng_gauss(&r));
    logits[17] = -INFINITY;
    sampler_distribution(s, logits, probs);
    sum = 0.0;
    for (int i = 0; i < V; i++) sum += probs[i];
    T_NEAR(sum, 1.0, 1e-6);
    T_CHECK(probs[17] == 0.0f);
    sampler_free(s);
    free(logits);
    free(probs);
    free(base);
}

/* sampler_rewind: after tentative accepts are rewound, the penalties see
 * exactly the window they saw before (also once the ring has wrapped, and
 * for the largest rewind). */
/* The penalties' tests: a window of 3 that changes every distribution, over 40 tokens. */
enum { WV = 40 };
static sampler_params window_params(float *logits) {
    sampler_params p = sampler_defaults();
    p.temperature = 1.0f, p.top_k = 0, p.top_p = 1.0f, p.min_p = 0.0f;
    p.repeat_penalty = 2.0f, p.presence_penalty = 0.5f, p.repeat_last_n = 3;
    for (int i = 0; i < WV; i++) logits[i] = (float)((i * 7) % 11) * 0.3f - 1.0f;
    return p;
}

static void test_rewind(void) {
    enum { V = WV };
    float logits[V], pa[V], pb[V];
    const sampler_params p = window_params(logits);
    const int lens[] = {2, 5, 30};
    const int rewinds[] = {1, 2, SAMPLER_REWIND_MAX};
    for (int li = 0; li < 3; li++)
        for (int ri = 0; ri < 3; ri++) {
            sampler *a, *b;
            err_t err = {0};
            T_CHECK(sampler_new(&p, V, &a, &err) == ERR_OK && sampler_new(&p, V, &b, &err) == ERR_OK);
            for (int i = 0; i < lens[li]; i++) sampler_accept(a, i % V), sampler_accept(b, i % V);
            for (int i = 0; i < rewinds[ri]; i++) sampler_accept(a, (i * 13 + 5) % V);
            sampler_distribution(a, logits, pa);
            sampler_distribution(b, logits, pb);
            T_CHECKF(memcmp(pa, pb, sizeof pa) != 0, "tentative accepts must change the penalties (len %d)", lens[li]);
            sampler_rewind(a, rewinds[ri]);
            sampler_distribution(a, logits, pa);
            T_CHECKF(memcmp(pa, pb, sizeof pa) == 0, "after %d accepts, %d rewound: the window differs", lens[li],
                     rewinds[ri]);
            sampler_free(a), sampler_free(b);
        }
}

/* sampler_copy_history: a second sampler with another seed sees the same
 * window (before and after both accept the same token), and draws from its
 * own stream. */
static void test_copy_history(void) {
    enum { V = WV };
    float logits[V], pa[V], pb[V];
    const sampler_params p = window_params(logits);
    const int lens[] = {0, 2, 5, 30};
    for (int li = 0; li < 4; li++) {
        sampler *a, *b;
        err_t err = {0};
        sampler_params q = p;
        q.seed = p.seed + 1;
        T_CHECK(sampler_new(&p, V, &a, &err) == ERR_OK && sampler_new(&q, V, &b, &err) == ERR_OK);
        for (int i = 0; i < 7; i++) sampler_accept(b, (i * 5 + 3) % V); /* b's own window, to be replaced */
        for (int i = 0; i < lens[li]; i++) sampler_accept(a, (i * 11) % V);
        sampler_copy_history(b, a);
        sampler_distribution(a, logits, pa);
        sampler_distribution(b, logits, pb);
        T_CHECKF(memcmp(pa, pb, sizeof pa) == 0, "copied window of %d accepts differs", lens[li]);
        sampler_accept(a, 17), sampler_accept(b, 17);
        sampler_distribution(a, logits, pa);
        sampler_distribution(b, logits, pb);
        T_CHECKF(memcmp(pa, pb, sizeof pa) == 0, "after one more accept, the window of %d differs", lens[li]);
        T_CHECK(sampler_uniform(a) != sampler_uniform(b));
        sampler_free(a), sampler_free(b);
    }
}

int main(void) {
    test_rewind();
    test_copy_history();
    const char *v = getenv("T_VERBOSE");
    verbose = v && *v && *v != '0';
    test_reproducible();
    test_greedy();
    test_transforms();
    test_lazy_constraint();
    test_against_reference();
    test_draw();
    test_chi2_quantiles();
    test_statistics();
    test_power();
    test_check();
    test_large();
    T_DONE();
}
