/*
 * plan — what the runtime decides by itself for a model on this device.
 *
 * KV budget (DESIGN.md): available = free memory - the weights (they become
 * resident as they are touched) - a 256 MiB safety margin, and the cache gets
 * 0.6 of it; never more than the whole context at the hot type (a budget
 * that can never bind is no budget), never less than the anchors and the
 * recent window (below that the cache cannot work; the plan says so).
 */
#ifndef OCTO_RUNTIME_PLAN_H
#define OCTO_RUNTIME_PLAN_H

#include <stdint.h>

#include "kv/kv_cache.h"
#include "model/model.h"

#define PLAN_SAFETY_MARGIN (256ull << 20)

typedef struct {
    kv_config kv;
    char kv_reason[192]; /* how the budget was chosen, for inspect / stats */
} plan;

/* cfg.budget_bytes 0 = derive it from mem_available (bytes; 0 = unknown). */
plan plan_make(const model *m, int n_ctx, const kv_config *cfg, uint64_t mem_available);

#endif
