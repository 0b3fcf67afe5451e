/*
 * predict — which of the next layer's experts to read ahead for a token,
 * given the next layer's router logits for it (forward.c hands them over
 * through experts_iface.hint_next while this layer computes).
 *
 * The top k are always named. Up to MOE_PREDICT_EXTRA more are named when
 * their logit lies within `margin` of the k-th's, the margin counted in
 * standard deviations of the token's logits so that it means the same for
 * any router scale (an upcycled model's router is scaled down by ~1e4): a
 * close call costs one more read, a clear one none.
 */
#ifndef OCTO_MOE_PREDICT_H
#define OCTO_MOE_PREDICT_H

#include <stdint.h>

#define MOE_PREDICT_EXTRA 2
#define MOE_PREDICT_MARGIN 0.25 /* the default margin, in standard deviations (docs/moe.md) */

/* Writes the named experts, best first, to out (room for k + MOE_PREDICT_EXTRA)
 * and returns how many (k..k + MOE_PREDICT_EXTRA, at most n_expert). */
int moe_predict(const float *logits, int n_expert, int k, double margin, int32_t *out);

#endif
