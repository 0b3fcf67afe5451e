/*
 * sampler — from logits to the next token.
 *
 * The transforms, in this order: repetition, presence and frequency
 * penalties over the last repeat_last_n accepted tokens, a constraint's mask
 * (a grammar: tokens it forbids get no probability), temperature, top-k,
 * top-p, min-p; then
 * a draw from the resulting distribution with the sampler's own seeded RNG
 * (reproducible, and thread-safe because each stream owns its sampler).
 * Temperature 0 is greedy: the distribution is one-hot at the argmax (ties
 * to the lowest id).
 *
 * The final distribution is exposed (sampler_distribution) because
 * speculative decoding's rejection sampling needs p and q after exactly the
 * same transforms.
 */
#ifndef OCTO_MODEL_SAMPLER_H
#define OCTO_MODEL_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"

typedef struct {
    float temperature;      /* 0 = greedy; >= 0 */
    int top_k;              /* 0 = off; >= 0 */
    float top_p;            /* 1 = off; in (0, 1] */
    float min_p;            /* 0 = off; in [0, 1] */
    float repeat_penalty;   /* 1 = off; finite and > 0 (llama.cpp semantics: logit/p if > 0 else logit*p) */
    float presence_penalty; /* 0 = off; subtracted once from each token seen */
    float frequency_penalty; /* 0 = off; subtracted once per time each token was seen (OpenAI's) */
    int repeat_last_n;      /* window for both penalties; 0 = off */
    uint64_t seed;
} sampler_params;

sampler_params sampler_defaults(void);
/* ERR_INVALID_ARG with a message naming the parameter when out of range. */
err_code sampler_check(const sampler_params *p, err_t *err);

typedef struct sampler sampler;

err_code sampler_new(const sampler_params *p, int n_vocab, sampler **out, err_t *err);
void sampler_free(sampler *s);

/* Record an accepted token (for the penalties); sampler_sample does not.
 * Ids outside the vocabulary are ignored. */
void sampler_accept(sampler *s, int32_t token);
/* Undo the latest n accepts (n <= SAMPLER_REWIND_MAX, every one of them an id
 * in the vocabulary): speculation accepts draft tokens tentatively so that
 * each verified position sees the penalties of the drafts before it. */
#define SAMPLER_REWIND_MAX 16
/* The longest penalty window (octo.h's OCTO_MAX_REPEAT_LAST_N). */
#define SAMPLER_MAX_HISTORY (1 << 20)
void sampler_rewind(sampler *s, int n);
/* Start the RNG over from a seed, as sampler_new does. */
void sampler_seed(sampler *s, uint64_t seed);
/* Forget accepted tokens (keeps the RNG state). */
void sampler_reset_history(sampler *s);
/* dst's penalty window becomes src's (the same parameters; dst keeps its
 * own RNG): a second sampler drawing as src would, from its own stream. */
void sampler_copy_history(sampler *dst, const sampler *src);

/* The distribution after every transform: probs[n_vocab], zero where excluded,
 * sums to 1. Logits that are all -inf/NaN give a uniform distribution. */
void sampler_distribution(sampler *s, const float *logits, float *probs);
/*
 * A constraint on what may come next (model/grammar.h's matcher): mask sets
 * the logits of forbidden tokens to -inf; allows answers for one token (a
 * greedy pick is checked alone, and the whole mask made only when it is
 * forbidden); accept and rewind follow sampler_accept and sampler_rewind, so
 * speculation's tentative accepts move the constraint as they move the
 * penalties, and each verified row is masked by the state before it.
 */
typedef struct {
    void *ctx;
    void (*mask)(void *ctx, float *logits);
    bool (*allows)(void *ctx, int32_t token);
    void (*accept)(void *ctx, int32_t token);
    void (*rewind)(void *ctx, int n);
} sampler_constraint;
/* c is copied; NULL removes it. */
void sampler_constrain(sampler *s, const sampler_constraint *c);

/* Draw from a distribution with the sampler's RNG, in proportion to the
 * entries (they need not sum exactly to 1); -1 when no entry is positive. */
int32_t sampler_draw(sampler *s, const float *probs);
/* distribution + draw (greedy does not touch the RNG). */
int32_t sampler_sample(sampler *s, const float *logits);
/* A uniform number in [0, 1) from the sampler's RNG (for rejection sampling). */
double sampler_uniform(sampler *s);
bool sampler_is_greedy(const sampler *s);
const sampler_params *sampler_params_of(const sampler *s);

#endif
