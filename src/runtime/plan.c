/*
 * plan — see plan.h.
 */
#include "plan.h"

#include <stdio.h>

plan plan_make(const model *m, int n_ctx, const kv_config *cfg, uint64_t mem_available) {
    plan p = {.kv = *cfg};
    kv_config *k = &p.kv;
    const uint64_t full = (uint64_t)n_ctx * kv_token_bytes(&m->hp, k->hot_type);
    const uint64_t floor = (uint64_t)(k->anchor_tokens + k->recent_tokens) * kv_token_bytes(&m->hp, k->hot_type);
    if (k->policy == KV_POLICY_NONE) {
        k->budget_bytes = 0;
        snprintf(p.kv_reason, sizeof p.kv_reason, "policy none: every entry kept (%llu bytes at full context)",
                 (unsigned long long)full);
        return p;
    }
    if (k->budget_bytes) {
        snprintf(p.kv_reason, sizeof p.kv_reason, "budget given: %llu bytes", (unsigned long long)k->budget_bytes);
        return p;
    }
    const uint64_t reserved = m->weight_bytes + PLAN_SAFETY_MARGIN;
    const uint64_t avail = mem_available > reserved ? mem_available - reserved : 0;
    uint64_t b = avail / 10 * 6;
    const char *why = "0.6 x (free memory - weights - 256 MiB)";
    if (!mem_available) b = full, why = "free memory unknown: the full context";
    if (b >= full) b = 0, why = "0.6 x free memory holds the whole context: no budget needed";
    else if (b < floor) b = floor, why = "free memory is short: the anchors and recent window only";
    k->budget_bytes = b;
    snprintf(p.kv_reason, sizeof p.kv_reason, "%s (free %llu MiB, weights %llu MiB, full context %llu MiB)", why,
             (unsigned long long)(mem_available >> 20), (unsigned long long)(m->weight_bytes >> 20),
             (unsigned long long)(full >> 20));
    return p;
}
