/*
 * lhu — least hit-used: the expert with the least heat goes first, heat
 * being its uses each fading by half every MOE_HEAT_HALF_LIFE lookups
 * (frequency with aging: a burst of use is remembered, then forgotten), and
 * a layer that holds no more than its share keeps its slots, so that the
 * early layers, which route every token first, cannot take the whole pool.
 */
#include <math.h>

#include "policy.h"

double moe_heat_now(const moe_slot_use *u, uint64_t now) {
    return u->heat * exp2(-(double)(now - u->last_use) / MOE_HEAT_HALF_LIFE);
}

static double rank(const moe_slot_use *u, uint64_t now) { return moe_heat_now(u, now); }

const moe_policy moe_policy_lhu = {"lhu", true, rank};
