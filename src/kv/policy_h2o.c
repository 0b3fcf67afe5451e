/* h2o — heavy hitters (Zhang et al., 2023): an entry's score is all the
 * attention it has received since it was added; the lowest go first, the
 * older of equal scores first. */
#include "policy.h"

static float update_h2o(float score, float w, int n_queries, int recent_tokens) {
    (void)n_queries, (void)recent_tokens;
    return score + w;
}

static double rank_h2o(float score, bool scored, int32_t pos) {
    (void)scored;
    return (double)score + 1e-12 * pos;
}

const kv_policy kv_policy_h2o = {"h2o", true, POLICY_OBSERVE_ALWAYS, 0, update_h2o, rank_h2o};
