/*
 * sampler — see sampler.h for the interface; this file explains the policy.
 *
 * One call of sampler_distribution runs the pipeline below over the n_vocab
 * logits. Every scratch buffer is allocated once in sampler_new, so the
 * per-token path never allocates, and the work is expected O(n_vocab): nothing
 * is ever sorted, because every transform keeps a SET, never an order.
 *
 *   1. penalties  The last repeat_last_n accepted tokens live in a ring buffer.
 *                 Each DISTINCT token in the window is penalised once
 *                 (llama.cpp semantics): repetition  l > 0 ? l / r : l * r,
 *                 then presence and frequency  l - presence - count * freq.
 *                 Distinctness and counts use an epoch-stamped mark per
 *                 token, so this costs O(window), not O(window^2) and not
 *                 O(n_vocab).
 *   1b. mask      A constraint (a grammar) sets forbidden tokens to -inf: all of
 *                 them, or with top-k (or min-p alone) only what is needed to
 *                 give the same distribution (see the constraint's section).
 *   2. greedy     temperature == 0: one-hot at the argmax of the penalised
 *                 logits, ties to the lowest id. The other transforms cannot
 *                 remove the argmax, so they are skipped.
 *   3. candidates Tokens whose logit is -inf (masked) or NaN are excluded and
 *                 never get probability. If some logits are +inf, only those
 *                 survive, with equal weight (the limit of the softmax).
 *   4. top-k      Keep the k largest logits, ties broken by the lower id, via
 *                 quickselect with a sampled pivot (about one pass over n_vocab
 *                 for a small k).
 *   5. softmax    w = exp((l - l_max) / temperature) in double, so the largest
 *                 weight is exactly 1 and nothing overflows. Temperature acts
 *                 on the logits before top-p and min-p, as in llama.cpp.
 *   6. top-p      Keep the shortest prefix of the candidates in descending
 *                 order (ties: lower id first) whose probability is >= top_p.
 *                 The prefix is found by quickselect weighted by probability
 *                 (partition, then continue on the side where the cumulative
 *                 sum crosses top_p): expected O(n), no sort, even when top-p
 *                 keeps most of a 150k vocabulary. top_p is a float and the
 *                 sum carries rounding, so the sum counts as reaching top_p
 *                 when it is within TOP_P_SLACK of it; this keeps e.g.
 *                 {0.5, 0.3} for top_p 0.8 (0.8f is 0.800000012).
 *                 The probabilities used are those after top-k, renormalised.
 *   7. min-p      Keep tokens with p >= min_p * p_max (a ratio, so it does not
 *                 matter that the set was renormalised by top-k or top-p).
 *   8. renormalise over the survivors and write probs, 0 everywhere else.
 *
 * Edge cases that have no right answer are made well-defined instead of
 * crashing: if every logit is -inf or NaN, the distribution is uniform over
 * the vocabulary (greedy picks token 0). sampler_accept ignores tokens outside
 * [0, n_vocab).
 *
 * Randomness: xoshiro256** (Blackman & Vigna), its state seeded by four
 * outputs of splitmix64(params.seed). Seed 0 is an ordinary fixed seed, not
 * "pick a random seed": the same seed always gives the same sequence, which is
 * the point (tests, reproducible runs, speculative decoding). A caller who
 * wants variety must pass a varying seed. Each sampler owns its state, so
 * streams with their own sampler never share randomness or need locks.
 * Quickselect's pivots come from a separate splitmix64 counter so that
 * computing a distribution never consumes the draw stream. Because the
 * candidate order is total, the pivots cannot change which tokens survive,
 * except through how top-p's sums are grouped for rounding (~1e-16 relative,
 * far below TOP_P_SLACK); and they are deterministic anyway.
 *
 * sampler_draw is an inverse CDF over the given probs with one uniform
 * double. It scales the uniform by the actual sum of the positive entries, so
 * a vector that sums to 1 only up to rounding is drawn from exactly; entries
 * <= 0 (or NaN) are never returned, and a uniform that rounds to the very end
 * of the CDF returns the last positive entry. A vector with no positive entry
 * is not a distribution: sampler_draw returns -1. In greedy mode
 * sampler_sample returns the argmax without consuming the RNG.
 */
#include "model/sampler.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Cumulative probabilities within this much of top_p count as reaching it. */
#define TOP_P_SLACK 1e-6

struct sampler {
    sampler_params p;
    int n_vocab;

    uint64_t rng[4];      /* xoshiro256** state: the draw stream */
    uint64_t pivot_state; /* splitmix64 counter for quickselect pivots only */

    int32_t *hist;        /* (hist_cap) ring buffer of accepted tokens */
    int hist_cap;         /* repeat_last_n + SAMPLER_REWIND_MAX, so a rewind finds the window intact */
    int hist_len;         /* how many of hist are valid, <= hist_cap */
    int hist_pos;         /* where the next accepted token goes */

    uint32_t *mark;       /* (n_vocab) epoch stamps: token seen in this window */
    uint32_t *count;      /* (n_vocab) times seen in the window, valid where mark is this epoch */
    uint32_t epoch;
    sampler_constraint con; /* con.mask NULL: none */

    float *logit;         /* (n_vocab) penalised logits */
    double *weight;       /* (n_vocab) unnormalised probability, by token id */
    int32_t *cand;        /* (n_vocab) candidate token ids */
    float *probs;         /* (n_vocab) sampler_sample's distribution */
};

/* ---------------------------------------------------------------------------
 * Random numbers
 * ------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(uint64_t s[4]) {
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double sampler_uniform(sampler *s) {
    return (double)(xoshiro_next(s->rng) >> 11) * 0x1p-53; /* 53 bits: [0, 1) */
}

/* ---------------------------------------------------------------------------
 * Parameters and lifetime
 * ------------------------------------------------------------------------- */

sampler_params sampler_defaults(void) {
    sampler_params p = {
        .temperature = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .repeat_penalty = 1.0f,
        .presence_penalty = 0.0f,
        .frequency_penalty = 0.0f,
        .repeat_last_n = 64,
        .seed = 0, /* a fixed seed like any other: reproducible by default */
    };
    return p;
}

err_code sampler_check(const sampler_params *p, err_t *err) {
    if (!p) return err_set(err, ERR_INVALID_ARG, "sampler: no parameters");
    /* Written as !(ok) so that NaN, which fails every comparison, is rejected. */
    if (!(p->temperature >= 0.0f && isfinite(p->temperature))) /* inf: every logit / inf, a flat NaN-prone draw */
        return err_set(err, ERR_INVALID_ARG, "sampler: temperature must be finite and >= 0 (got %g)",
                       (double)p->temperature);
    if (p->top_k < 0)
        return err_set(err, ERR_INVALID_ARG, "sampler: top_k must be >= 0 (got %d)", p->top_k);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return err_set(err, ERR_INVALID_ARG, "sampler: top_p must be in (0, 1] (got %g)",
                       (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return err_set(err, ERR_INVALID_ARG, "sampler: min_p must be in [0, 1] (got %g)",
                       (double)p->min_p);
    /* +inf would turn a zero logit into NaN (0 * inf), so it is rejected too. */
    if (!(p->repeat_penalty > 0.0f && isfinite(p->repeat_penalty)))
        return err_set(err, ERR_INVALID_ARG,
                       "sampler: repeat_penalty must be finite and > 0 (got %g)",
                       (double)p->repeat_penalty);
    if (isnan(p->presence_penalty))
        return err_set(err, ERR_INVALID_ARG, "sampler: presence_penalty must be a number (got %g)",
                       (double)p->presence_penalty);
    if (!isfinite(p->frequency_penalty))
        return err_set(err, ERR_INVALID_ARG, "sampler: frequency_penalty must be finite (got %g)",
                       (double)p->frequency_penalty);
    if (p->repeat_last_n < 0 || p->repeat_last_n > SAMPLER_MAX_HISTORY)
        return err_set(err, ERR_INVALID_ARG, "sampler: repeat_last_n must be in 0..%d (got %d)",
                       SAMPLER_MAX_HISTORY, p->repeat_last_n);
    return ERR_OK;
}

err_code sampler_new(const sampler_params *p, int n_vocab, sampler **out, err_t *err) {
    if (!out) return err_set(err, ERR_INVALID_ARG, "sampler: no output pointer");
    *out = NULL;
    err_code rc = sampler_check(p, err);
    if (rc != ERR_OK) return rc;
    if (n_vocab <= 0)
        return err_set(err, ERR_INVALID_ARG, "sampler: n_vocab must be > 0 (got %d)", n_vocab);
    if ((size_t)n_vocab > SIZE_MAX / sizeof(double))
        return err_set(err, ERR_OVERFLOW, "sampler: n_vocab %d is too large", n_vocab);

    sampler *s = calloc(1, sizeof *s);
    if (!s) return err_set(err, ERR_NOMEM, "sampler: out of memory");
    s->p = *p;
    s->n_vocab = n_vocab;
    const size_t n = (size_t)n_vocab;
    /* repeat_last_n <= SAMPLER_MAX_HISTORY (checked above), so the sum fits an int */
    s->hist_cap = p->repeat_last_n > 0 ? p->repeat_last_n + SAMPLER_REWIND_MAX : 0;
    s->hist = malloc(sizeof *s->hist * (s->hist_cap > 0 ? (size_t)s->hist_cap : 1));
    s->mark = calloc(n, sizeof *s->mark);
    s->count = calloc(n, sizeof *s->count);
    s->logit = malloc(n * sizeof *s->logit);
    s->weight = malloc(n * sizeof *s->weight);
    s->cand = malloc(n * sizeof *s->cand);
    s->probs = malloc(n * sizeof *s->probs);
    if (!s->hist || !s->mark || !s->count || !s->logit || !s->weight || !s->cand || !s->probs) {
        sampler_free(s);
        return err_set(err, ERR_NOMEM, "sampler: out of memory for n_vocab %d", n_vocab);
    }
    sampler_seed(s, p->seed);
    *out = s;
    return ERR_OK;
}

void sampler_seed(sampler *s, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
    s->pivot_state = 0x5EEDC0FFEEull;
}

void sampler_free(sampler *s) {
    if (!s) return;
    free(s->hist);
    free(s->mark);
    free(s->count);
    free(s->logit);
    free(s->weight);
    free(s->cand);
    free(s->probs);
    free(s);
}

bool sampler_is_greedy(const sampler *s) { return s->p.temperature == 0.0f; }
const sampler_params *sampler_params_of(const sampler *s) { return &s->p; }

/* ---------------------------------------------------------------------------
 * History and penalties
 * ------------------------------------------------------------------------- */

static bool penalised(const sampler_params *p) {
    return p->repeat_penalty != 1.0f || p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f;
}

void sampler_constrain(sampler *s, const sampler_constraint *c) {
    s->con = c ? *c : (sampler_constraint){0};
}

void sampler_accept(sampler *s, int32_t token) {
    const int cap = s->hist_cap;
    if (token < 0 || token >= s->n_vocab) return;
    if (s->con.accept) s->con.accept(s->con.ctx, token);
    if (cap == 0) return;
    s->hist[s->hist_pos] = token;
    s->hist_pos = (s->hist_pos + 1) % cap;
    if (s->hist_len < cap) s->hist_len++;
}

/* The ring holds SAMPLER_REWIND_MAX entries beyond the window, so undoing n
 * of the latest accepts only moves the write position back: the entries
 * that slide back into the window were never overwritten. hist_len may
 * undercount what is still there, never overcount. */
void sampler_rewind(sampler *s, int n) {
    if (n > 0 && s->con.rewind) s->con.rewind(s->con.ctx, n);
    if (s->hist_cap == 0 || n <= 0) return;
    if (n > s->hist_len) n = s->hist_len;
    s->hist_pos = (s->hist_pos - n % s->hist_cap + s->hist_cap) % s->hist_cap;
    s->hist_len -= n;
}

void sampler_reset_history(sampler *s) {
    s->hist_len = 0;
    s->hist_pos = 0;
}

void sampler_copy_history(sampler *dst, const sampler *src) {
    sampler_reset_history(dst);
    if (src->hist_cap == 0 || dst->hist_cap == 0 || !penalised(&src->p)) return;
    int n = src->hist_len < dst->hist_cap ? src->hist_len : dst->hist_cap;
    for (int i = n; i >= 1; i--) sampler_accept(dst, src->hist[(src->hist_pos - i + src->hist_cap) % src->hist_cap]);
}

static void apply_penalties(sampler *s, float *l) {
    const float rep = s->p.repeat_penalty, pres = s->p.presence_penalty, freq = s->p.frequency_penalty;
    if (s->hist_len == 0 || !penalised(&s->p)) return;
    if (++s->epoch == 0) { /* stamps wrapped: forget them all, once per 2^32 calls */
        memset(s->mark, 0, (size_t)s->n_vocab * sizeof *s->mark);
        s->epoch = 1;
    }
    const int n = s->hist_len < s->p.repeat_last_n ? s->hist_len : s->p.repeat_last_n;
    for (int i = 1; i <= n; i++) { /* the window: the latest repeat_last_n accepts, counted */
        const int32_t t = s->hist[(s->hist_pos - i + s->hist_cap) % s->hist_cap];
        s->count[t] = s->mark[t] == s->epoch ? s->count[t] + 1 : 1;
        s->mark[t] = s->epoch;
    }
    for (int i = 1; i <= n; i++) { /* once per distinct token: its count is then cleared */
        const int32_t t = s->hist[(s->hist_pos - i + s->hist_cap) % s->hist_cap];
        if (s->count[t] == 0) continue;
        float v = l[t];
        v = v > 0.0f ? v / rep : v * rep;
        l[t] = v - pres - (float)s->count[t] * freq;
        s->count[t] = 0;
    }
}

static void constrain_logits(sampler *s, float *l);

/* Penalties, then the constraint's mask: the logits every transform starts from. */
static void prepare(sampler *s, const float *logits) {
    memcpy(s->logit, logits, (size_t)s->n_vocab * sizeof *s->logit);
    apply_penalties(s, s->logit);
    constrain_logits(s, s->logit);
}

/* ---------------------------------------------------------------------------
 * Ordering: a strict total order on token ids — larger logit first, then the
 * lower id — so which tokens a selection keeps does not depend on the pivots.
 * ------------------------------------------------------------------------- */

static inline bool before(const float *l, int32_t a, int32_t b) {
    return l[a] > l[b] || (l[a] == l[b] && a < b);
}

static inline void swap_i32(int32_t *a, int32_t *b) {
    const int32_t t = *a;
    *a = *b;
    *b = t;
}

/* Partition a[lo..hi] around the token at a[pi]: returns the pivot's new
 * position p, with a[lo..p) before it and a(p..hi] after it (Lomuto). *before_w
 * (if not NULL) receives the sum of w over a[lo..p). */
static int partition(const float *l, const double *w, int32_t *a, int lo, int hi, int pi,
                     double *before_w) {
    swap_i32(&a[pi], &a[hi]);
    const int32_t pivot = a[hi];
    int store = lo;
    double sum = 0.0;
    for (int i = lo; i < hi; i++)
        if (before(l, a[i], pivot)) {
            if (w) sum += w[a[i]];
            swap_i32(&a[i], &a[store++]);
        }
    swap_i32(&a[store], &a[hi]);
    if (before_w) *before_w = sum;
    return store;
}

static int random_index(uint64_t *state, int lo, int hi) { /* in [lo, hi] */
    return lo + (int)(splitmix64(state) % (uint64_t)(hi - lo + 1));
}

enum { SELECT_SAMPLE = 128, SELECT_SAMPLE_MIN = 1024 };

/* Rearrange a[0..n) so that a[nth] is the nth (0-based) in the order and
 * a[0..nth) are the ones before it. Quickselect, expected O(n). On a large
 * range the pivot is not random but estimated from a sample of 128 (as in
 * Floyd-Rivest): the sample element a little past the target's relative rank,
 * so that one pass shrinks 150k to about nth + n/16, and top-k with a small k
 * costs little more than one pass. */
static void select_nth(const float *l, int32_t *a, int n, int nth, uint64_t *rs) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        const int m = hi - lo + 1;
        int pi;
        if (m >= SELECT_SAMPLE_MIN) {
            int pos[SELECT_SAMPLE];
            int32_t tok[SELECT_SAMPLE];
            for (int j = 0; j < SELECT_SAMPLE; j++) {
                pos[j] = random_index(rs, lo, hi);
                tok[j] = a[pos[j]];
            }
            /* ~3 standard deviations of the sample rank past the estimate */
            int rank = (int)((double)(nth - lo) * SELECT_SAMPLE / m) + 16;
            if (rank > SELECT_SAMPLE - 1) rank = SELECT_SAMPLE - 1;
            select_nth(l, tok, SELECT_SAMPLE, rank, rs); /* small: random pivots */
            pi = pos[0];
            for (int j = 0; j < SELECT_SAMPLE; j++)
                if (a[pos[j]] == tok[rank]) { pi = pos[j]; break; }
        } else {
            pi = random_index(rs, lo, hi);
        }
        const int p = partition(l, NULL, a, lo, hi, pi, NULL);
        if (p == nth) return;
        if (p < nth) lo = p + 1;
        else hi = p - 1;
    }
}

/* top-p: the smallest m such that the first m of cand[0..n) in the order weigh
 * >= target (> 0), arranged so that cand[0..m) are exactly those. Only the set
 * matters, not its order, so nothing is sorted: this is quickselect where the
 * side to continue in is chosen by weight instead of by count. Expected O(n).
 * Invariant: cand[0..lo) are the first lo, weighing cum < target; m is in
 * (lo, hi + 1]. */
static int top_p_cut(const float *l, const double *w, int32_t *cand, int n, double target,
                     uint64_t *rs) {
    int lo = 0, hi = n - 1;
    double cum = 0.0;
    while (lo <= hi) {
        double before_w;
        const int p = partition(l, w, cand, lo, hi, random_index(rs, lo, hi), &before_w);
        if (cum + before_w >= target) {
            hi = p - 1; /* the cut is before the pivot */
        } else if (cum + before_w + w[cand[p]] >= target) {
            return p + 1; /* the pivot completes the set */
        } else {
            cum += before_w + w[cand[p]];
            lo = p + 1;
        }
    }
    /* only reached through rounding (sums grouped differently) or when even
     * all n fall short of target: cand[0..lo) are the first lo */
    return lo > 0 ? lo : 1;
}

/* ---------------------------------------------------------------------------
 * The constraint's mask, lazily where the transforms allow it
 *
 * A whole mask walks every token the constraint allows (a grammar inside a
 * JSON string allows most of the vocabulary). When top-k is on, only the k
 * best allowed tokens can survive, so the tokens are checked one by one in
 * the order (best logit first, ties to the lower id) until k are found; with
 * min-p alone (top-k and top-p off), until the logits fall below min-p's
 * threshold from the best allowed one. Every other token is set to -inf:
 * the same tokens keep the same weights as with the whole mask, since the
 * transforms would drop the others anyway and nothing else depends on them
 * (the sums run in another order: equal up to rounding, to the bit in
 * test_sampler's cases). If the best
 * LAZY_MAX tokens do not settle it (a structural step where few tokens are
 * allowed: the whole mask is cheap there), the whole mask is made.
 * ------------------------------------------------------------------------- */

enum { LAZY_FIRST = 64, LAZY_MAX = 256 };

/* cand[0..m) in the order (insertion: m is small). */
static void order_small(const float *l, int32_t *cand, int m) {
    for (int i = 1; i < m; i++) {
        const int32_t t = cand[i];
        int j = i;
        for (; j > 0 && before(l, t, cand[j - 1]); j--) cand[j] = cand[j - 1];
        cand[j] = t;
    }
}

/* The allowed tokens the transforms can keep, found among the best m of
 * cand[0..n); their count, or -1 when the best m do not settle it. */
static int lazy_pick(sampler *s, const float *l, int32_t *cand, int n, int m, int32_t *kept) {
    const int k = s->p.top_k;
    const bool by_min_p = k == 0;
    const float drop = s->p.temperature * logf(s->p.min_p); /* min-p's threshold below the best logit */
    select_nth(l, cand, n, m - 1, &s->pivot_state);
    order_small(l, cand, m);
    int n_kept = 0;
    for (int i = 0; i < m; i++) {
        const int32_t t = cand[i];
        /* below the threshold with room for rounding (min-p itself, in double, drops any extra) */
        if (by_min_p && n_kept > 0 && l[t] < l[kept[0]] + drop - 1e-3f * (1.0f - drop)) return n_kept;
        if (!s->con.allows(s->con.ctx, t)) continue;
        kept[n_kept++] = t;
        if (!by_min_p && n_kept == k) return n_kept;
    }
    return m == n && n_kept > 0 ? n_kept : -1;
}

static bool lazy_mask(sampler *s, float *l) {
    const sampler_params *p = &s->p;
    if (p->temperature == 0.0f || !s->con.allows || !(p->top_k > 0 ? p->top_k <= LAZY_MAX / 2
                                                                       : p->top_p >= 1.0f && p->min_p > 0.0f))
        return false;
    int32_t *cand = s->cand, kept[LAZY_MAX];
    int n = 0;
    for (int32_t i = 0; i < s->n_vocab; i++) {
        if (l[i] == INFINITY) return false; /* the softmax limit: left to the whole mask */
        if (l[i] > -INFINITY) cand[n++] = i;
    }
    int n_kept = -1;
    for (int m = LAZY_FIRST; n_kept < 0; m *= 4) {
        n_kept = lazy_pick(s, l, cand, n, m < n ? m : n, kept);
        if (n_kept < 0 && (m >= LAZY_MAX || m >= n)) return false;
    }
    float v[LAZY_MAX];
    for (int i = 0; i < n_kept; i++) v[i] = l[kept[i]];
    for (int32_t i = 0; i < s->n_vocab; i++) l[i] = -INFINITY;
    for (int i = 0; i < n_kept; i++) l[kept[i]] = v[i];
    return true;
}

static void constrain_logits(sampler *s, float *l) {
    if (s->con.mask && !lazy_mask(s, l)) s->con.mask(s->con.ctx, l);
}

/* ---------------------------------------------------------------------------
 * The pipeline
 * ------------------------------------------------------------------------- */

/* Lowest id among the largest non-NaN logits; 0 if all are -inf or NaN. */
static int32_t argmax(const float *l, int n) {
    int32_t best = -1;
    for (int32_t i = 0; i < n; i++)
        if (l[i] > -INFINITY && (best < 0 || l[i] > l[best])) best = i;
    return best < 0 ? 0 : best;
}

void sampler_distribution(sampler *s, const float *logits, float *probs) {
    const int n_vocab = s->n_vocab;
    float *l = s->logit;
    double *w = s->weight;
    int32_t *cand = s->cand;

    prepare(s, logits);
    memset(probs, 0, (size_t)n_vocab * sizeof *probs);

    if (sampler_is_greedy(s)) {
        probs[argmax(l, n_vocab)] = 1.0f;
        return;
    }

    /* candidates: finite or +inf logits (NaN fails the comparison) */
    int n = 0;
    float l_max = -INFINITY;
    for (int32_t i = 0; i < n_vocab; i++) {
        if (l[i] > -INFINITY) {
            cand[n++] = i;
            if (l[i] > l_max) l_max = l[i];
        }
    }
    if (n == 0) { /* nothing left to choose from: uniform, see the header */
        for (int i = 0; i < n_vocab; i++) probs[i] = 1.0f / (float)n_vocab;
        return;
    }
    if (l_max == INFINITY) { /* the softmax limit: equal weight on the +inf tokens */
        int m = 0;
        for (int i = 0; i < n; i++)
            if (l[cand[i]] == INFINITY) {
                l[cand[i]] = 0.0f;
                cand[m++] = cand[i];
            }
        n = m;
        l_max = 0.0f;
    }

    /* top-k */
    if (s->p.top_k > 0 && s->p.top_k < n) {
        select_nth(l, cand, n, s->p.top_k - 1, &s->pivot_state);
        n = s->p.top_k;
    }

    /* softmax with temperature; the argmax survives top-k, so max weight is 1 */
    const double inv_t = 1.0 / (double)s->p.temperature;
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        const int32_t t = cand[i];
        w[t] = exp(((double)l[t] - (double)l_max) * inv_t);
        sum += w[t];
    }

    /* top-p on the renormalised probabilities w / sum */
    if (s->p.top_p < 1.0f) {
        double target = ((double)s->p.top_p - TOP_P_SLACK) * sum;
        if (!(target > 0.0)) target = DBL_MIN; /* a tiny top_p keeps one token */
        n = top_p_cut(l, w, cand, n, target, &s->pivot_state);
    }

    /* min-p: p >= min_p * p_max  <=>  w >= min_p * w_max, and w_max == 1 */
    if (s->p.min_p > 0.0f) {
        const double threshold = (double)s->p.min_p;
        int m = 0;
        for (int i = 0; i < n; i++)
            if (w[cand[i]] >= threshold) cand[m++] = cand[i];
        n = m; /* never empty: the argmax has w == 1 >= min_p */
    }

    /* renormalise */
    sum = 0.0;
    for (int i = 0; i < n; i++) sum += w[cand[i]];
    const double inv_sum = 1.0 / sum;
    for (int i = 0; i < n; i++) probs[cand[i]] = (float)(w[cand[i]] * inv_sum);
}

/* ---------------------------------------------------------------------------
 * Drawing
 * ------------------------------------------------------------------------- */

int32_t sampler_draw(sampler *s, const float *probs) {
    const int n = s->n_vocab;
    double total = 0.0;
    int32_t last = -1;
    for (int32_t i = 0; i < n; i++)
        if (probs[i] > 0.0f) {
            total += probs[i];
            last = i;
        }
    const double u = sampler_uniform(s);
    if (last < 0) return -1; /* no positive entry: not a distribution */
    const double target = u * total;
    double cum = 0.0;
    for (int32_t i = 0; i < last; i++)
        if (probs[i] > 0.0f) {
            cum += probs[i];
            if (target < cum) return i;
        }
    return last; /* also catches u * total rounding up to total */
}

int32_t sampler_sample(sampler *s, const float *logits) {
    if (sampler_is_greedy(s)) { /* one-hot anyway: skip the O(n) passes and the RNG */
        memcpy(s->logit, logits, (size_t)s->n_vocab * sizeof *s->logit);
        apply_penalties(s, s->logit);
        int32_t t = argmax(s->logit, s->n_vocab);
        /* the constraint's mask only removes tokens: an allowed argmax stays the argmax */
        if (s->con.mask && (!s->con.allows || !s->con.allows(s->con.ctx, t))) {
            s->con.mask(s->con.ctx, s->logit);
            t = argmax(s->logit, s->n_vocab);
        }
        return t;
    }
    sampler_distribution(s, logits, s->probs);
    return sampler_draw(s, s->probs);
}
