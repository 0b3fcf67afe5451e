/* window — anchors plus the most recent entries: the oldest go first
 * (StreamingLLM's attention sinks + sliding window). */
#include "policy.h"

static double rank_window(float score, bool scored, int32_t pos) {
    (void)score, (void)scored;
    return pos;
}

const kv_policy kv_policy_window = {"window", true, POLICY_OBSERVE_NEVER, 0, NULL, rank_window};
