/*
 * experts_iface — how the MoE FFN reaches expert weights without knowing
 * which experts are resident.
 *
 * get() returns the three matrices (gate, up, down) of one expert of one
 * layer; it may block while the expert is read from flash, and may hand back
 * a lower-precision copy (the matrices carry their own type). hint() names
 * the experts a coming layer is likely to use so they can be prefetched.
 * With no interface (NULL) the forward pass reads experts straight from the
 * model's mapping; src/moe/ supplies a budgeted cache behind the same calls.
 */
#ifndef OCTO_MODEL_EXPERTS_IFACE_H
#define OCTO_MODEL_EXPERTS_IFACE_H

#include <stdint.h>

#include "core/err.h"
#include "model/model.h"

typedef struct {
    void *self;
    /* mats[0] gate (n_embd -> n_ff), mats[1] up, mats[2] down (n_ff -> n_embd); n_mat = 1. */
    err_code (*get)(void *self, int layer, int expert, model_mat mats[3], err_t *err);
    /* Optional (may be NULL): the experts one token of this layer was routed
     * to, best first; called for every token before any get() of the layer,
     * so a cache can prefetch (and a test can read the routing). */
    void (*hint)(void *self, int layer, const int32_t *experts, int n);
} experts_iface;

/* The matrices of one expert straight from the model's mapping. */
void model_expert_mats(const model *m, int layer, int expert, model_mat mats[3]);

#endif
