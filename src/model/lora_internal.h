/*
 * lora_internal — what the adapter's reader (model/lora.c) and its creator
 * and writer (model/lora_write.c) share: the adapter's layout.
 */
#ifndef OCTO_MODEL_LORA_INTERNAL_H
#define OCTO_MODEL_LORA_INTERNAL_H

#include "model/lora.h"

struct lora_adapter {
    float alpha;
    int n_layer;
    lora_tensor *t;   /* [(n_layer + 1) * LORA_KINDS]: the output's first, then each layer's */
    float *mem;       /* every A and B */
    uint64_t bytes;
    int n_matrices;
};

static inline size_t lora_slot(int layer, lora_kind k) {
    return (size_t)(layer + 1) * LORA_KINDS + k;
}

/* The matrix of a layer a kind names (data NULL when the layer has none). */
const model_mat *lora_mat_of(const model *m, int layer, lora_kind k);

/* An empty adapter for m (its slots, no values), alpha set. */
lora_adapter *lora_alloc(const model *m, float alpha);

/* One pair's A (a) and B^T (bt, rows wide: the base tensor's rows, every part's) placed in the
 * slots of the n_kind matrices its base tensor feeds, in row order. */
void lora_place(lora_adapter *ad, const model *m, int layer, const lora_kind *kinds, int n_kind, float *a,
                float *bt, int rank, int64_t rows);

#endif
