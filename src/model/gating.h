/*
 * gating — how an MoE layer turns a token's router logits into the experts
 * it runs and their weights, as data (moe_gating in model.h) rather than a
 * copy of the MoE FFN per architecture:
 *
 *   p       = softmax(logits) over all experts, or sigmoid(logits) each
 *   choose  = the k largest p (+ expert_bias when the layer has one), among
 *             the n_group_used best groups when experts are grouped (a
 *             group's score: the sum of its two best)
 *   weights = p of the chosen, renormalised to sum 1 when norm, times scale
 */
#ifndef OCTO_MODEL_GATING_H
#define OCTO_MODEL_GATING_H

#include <stdint.h>

#include "model/model.h"

/* logits: [n] (overwritten with p); bias: [n] or NULL; chosen/w: [k], best first. */
void gating_route(const moe_gating *g, float *logits, int n, int k, const float *bias, int32_t *chosen, float *w);

#endif
