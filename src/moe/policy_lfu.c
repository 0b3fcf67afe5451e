/* lfu — the expert used least often since it came in goes first (ties: the
 * older use). Counts never fade: an expert hot long ago stays. */
#include "policy.h"

static double rank(const moe_slot_use *u, uint64_t now) {
    (void)now;
    return (double)u->uses + (double)u->last_use / ((double)now + 1.0); /* the fraction breaks ties by recency */
}

const moe_policy moe_policy_lfu = {"lfu", false, rank};
