/* snapkv — SnapKV (Li et al., 2024): once, at prefill, the prompt's last
 * snap_window queries vote for the prompt entries they attend to; the prompt
 * entries with the fewest votes go first. Entries added later carry no vote
 * and go only when no voted entry is left, oldest first. */
#include "policy.h"

float policy_vote_update(float score, float w, int n_queries, int recent_tokens) {
    (void)score, (void)n_queries, (void)recent_tokens;
    return w;
}

double policy_vote_rank(float score, bool scored, int32_t pos) {
    return scored ? (double)score + 1e-12 * pos : 1e30 + pos;
}

const kv_policy kv_policy_snapkv = {"snapkv", true, POLICY_OBSERVE_PREFILL, 0, policy_vote_update,
                                   policy_vote_rank};
