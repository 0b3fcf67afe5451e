/*
 * experts — the runtime's expert store behind model/experts_iface.h.
 *
 * With the model's path it serves experts from a budgeted cache
 * (expert_cache.h: read from the file on a miss, eviction by a policy, one
 * file each in src/moe/policy_*.c); without one, straight from the model's
 * mapping. Either way it keeps the bookkeeping the cache is judged by:
 * lookups, hits, bytes read, time stalled, and how often the next-layer
 * prediction (forward.c: the next layer's router on this layer's FFN input)
 * names the experts the next layer's tokens are then routed to. Prefetch
 * and the 2-bit copies come behind these same calls; the forward pass does
 * not change.
 */
#ifndef OCTO_MOE_EXPERTS_H
#define OCTO_MOE_EXPERTS_H

#include "core/err.h"
#include "model/experts_iface.h"
#include "moe/expert_cache.h"

typedef struct moe_experts moe_experts;

/* A store for a model with n_expert > 0 (ERR_INVALID_ARG otherwise); path
 * NULL: every expert from the mapping, else a cache of config c over that file. */
err_code moe_experts_new(const model *m, const char *path, const moe_cache_config *c, moe_experts **out, err_t *err);
void moe_experts_free(moe_experts *x);
/* The interface to hand the forward pass (valid while x lives). */
const experts_iface *moe_experts_iface(moe_experts *x);

#endif
