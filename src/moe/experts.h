/*
 * experts — the runtime's expert store behind model/experts_iface.h.
 *
 * Today every expert is read straight from the model's mapping (as with no
 * interface at all); what this room adds is the bookkeeping the expert cache
 * will be judged by: lookups, and how often the next-layer prediction
 * (forward.c: the next layer's router on this layer's FFN input) names the
 * experts the next layer's tokens are then routed to. The MoE offloading work
 * puts the budgeted cache, its eviction policies (one file each, as
 * src/kv/policy_*.c), the flash reads and the prefetch behind these same
 * calls; the forward pass does not change.
 */
#ifndef OCTO_MOE_EXPERTS_H
#define OCTO_MOE_EXPERTS_H

#include "core/err.h"
#include "model/experts_iface.h"

typedef struct moe_experts moe_experts;

/* A store for a model with n_expert > 0 (ERR_INVALID_ARG otherwise). */
err_code moe_experts_new(const model *m, moe_experts **out, err_t *err);
void moe_experts_free(moe_experts *x);
/* The interface to hand the forward pass (valid while x lives). */
const experts_iface *moe_experts_iface(moe_experts *x);

#endif
