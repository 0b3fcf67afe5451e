/* lru — the expert used longest ago goes first. */
#include "policy.h"

static double rank(const moe_slot_use *u, uint64_t now) {
    (void)now;
    return (double)u->last_use;
}

const moe_policy moe_policy_lru = {"lru", false, rank};
