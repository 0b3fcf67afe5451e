/* none — the full cache: nothing is evicted, no budget applies. */
#include "policy.h"

static double rank_none(float score, bool scored, int32_t pos) {
    (void)score, (void)scored;
    return pos;
}

const kv_policy kv_policy_none = {"none", false, POLICY_OBSERVE_NEVER, 0, NULL, rank_none};
