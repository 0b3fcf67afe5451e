/*
 * kv_iface — what the forward pass needs from a KV cache, and nothing more.
 *
 * The model layer must not know where KV entries live (plain arrays, tiers of
 * F16/INT8/INT4 blocks, a spill file). It appends the keys and values it has
 * just computed, asks for a view of what to attend over, and (optionally)
 * reports the attention weights so an eviction policy can score entries. The
 * view is a list of spans; every entry carries its original position, so the
 * causal rule is "attend to entries whose position <= the query's", which
 * stays true after eviction, and RoPE phases stay those of the position at
 * which the key was computed.
 *
 * The cache is implemented above this layer (src/kv/) and handed in by the
 * runtime; commit/rollback of speculative entries is the runtime's business
 * with the cache directly and never passes through here.
 */
#ifndef OCTO_MODEL_KV_IFACE_H
#define OCTO_MODEL_KV_IFACE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

typedef struct {
    int n_tokens;          /* entries in this span */
    const int32_t *pos;    /* [n_tokens] their positions */
    /* row types: QT_F32, QT_F16, or the quantized tiers QT_Q8_0, QT_Q4_0,
     * QT_Q4_1; keys may also be stored by channel (ATTN_KC8 / ATTN_KC4 of
     * core/kernels/attn.h), k_row_bytes then being the bytes of one channel */
    uint32_t k_type, v_type;
    const void *k, *v;     /* [n_tokens] rows of n_head_kv * head_dim elements */
    size_t k_row_bytes, v_row_bytes;
} kv_span;

typedef struct {
    void *self;
    /* Store n entries for one layer: k, v are [n][kv_dim] F32 (after RoPE). */
    err_code (*append)(void *self, int layer, int n, const int32_t *pos, const float *k, const float *v, err_t *err);
    /* Spans to attend over for layer (valid until the next append); returns their count. */
    int (*view)(void *self, int layer, const kv_span **spans);
    /* Optional (may be NULL): the attention weights of the batch's queries over
     * the n_entries entries of the last view, in view order, summed over heads
     * and over the batch's last observe_last queries (all of them when 0);
     * n_queries says how many queries that is. */
    void (*observe)(void *self, int layer, int n_queries, int n_entries, const float *weights);
    int observe_last;
    /* Optional (may be NULL): the layer's n query rows ([n][n_head * head_dim]
     * F32, after RoPE), before its view is asked for, so that a cache can bring
     * back entries these queries will need. Never fails the forward: a cache
     * that cannot act on them degrades by itself. */
    void (*queries)(void *self, int layer, int n, const float *q);
} kv_iface;

#endif
