/* speckv — SpecKV (Galim et al., 2025): SnapKV's ranking, with votes cast
 * once, after the prompt, by the prompt's last snap_window queries and by a
 * lookahead the draft model wrote and the model ran tentatively (the
 * runtime casts them: runtime/prefill.c). Without a draft it is SnapKV.
 * Entries added later carry no vote and go only when no voted entry is
 * left, oldest first. */
#include "policy.h"

const kv_policy kv_policy_speckv = {"speckv", true, POLICY_OBSERVE_PREFILL, 0, policy_vote_update,
                                   policy_vote_rank}; /* SnapKV's (policy_snapkv.c) */
