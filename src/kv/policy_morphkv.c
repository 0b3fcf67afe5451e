/* morphkv — after MorphKV (Ghadia et al., 2025): keep a recent window plus
 * the older entries that the recent window's queries attend to most,
 * re-ranked at every step, so the cache keeps a constant size. The weight a
 * query gives an entry fades by a factor (1 - 1/recent) per later query,
 * which approximates "attention from the last `recent` queries" with one
 * number per entry instead of a window of attention rows. In a long batch
 * (a prompt) only the last 4 x recent queries are observed: the fade leaves
 * earlier ones less than 2 % of their weight. */
#include "policy.h"

#include <math.h>

static float update_morphkv(float score, float w, int n_queries, int recent_tokens) {
    const float keep = recent_tokens > 1 ? powf(1.0f - 1.0f / (float)recent_tokens, (float)n_queries) : 0.0f;
    return score * keep + w;
}

static double rank_morphkv(float score, bool scored, int32_t pos) {
    (void)scored;
    return (double)score + 1e-12 * pos;
}

const kv_policy kv_policy_morphkv = {"morphkv", true, POLICY_OBSERVE_ALWAYS, 4, update_morphkv, rank_morphkv};
