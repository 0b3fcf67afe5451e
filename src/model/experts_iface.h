/*
 * experts_iface — how the MoE FFN reaches expert weights without knowing
 * which experts are resident.
 *
 * get() returns the three matrices (gate, up, down) of one expert of one
 * layer; it may block while the expert is read from flash, and may hand back
 * a lower-precision copy (the matrices carry their own type). hint() names
 * the experts this layer's tokens were routed to, before any get();
 * hint_next() hands over the next layer's router scores for each token (its
 * router applied to this layer's hidden state after the next layer's norm),
 * while this layer still computes, so the store can predict and read ahead.
 * stats() reports what the store did. With no
 * interface (NULL) the forward pass reads experts straight from the model's
 * mapping; src/moe/ implements the interface for the runtime.
 */
#ifndef OCTO_MODEL_EXPERTS_IFACE_H
#define OCTO_MODEL_EXPERTS_IFACE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"
#include "model/model.h"

/* What an expert store reports (src/moe/). */
typedef struct {
    uint64_t lookups;          /* get() calls */
    bool cached;               /* a budgeted cache decides what is resident (else every expert is mapped) */
    uint64_t hits;             /* cached: lookups served from memory without a read */
    uint64_t bytes_read;       /* cached: expert bytes read from the model file */
    uint64_t stall_ns;         /* cached: time lookups waited on those reads */
    uint64_t cache_bytes;      /* cached: memory the cache's slots hold (allocated on first use) */
    uint64_t cache_capacity;   /* cached: the slots' bytes when all are in use */
    uint64_t expert_bytes;     /* the model's experts, all of them */
    uint64_t tokens;           /* tokens routed through the first MoE layer */
    uint64_t batch_tokens;     /* ... of them in passes of more than one token (prefill, speculative verification) */
    uint64_t batch_saved_bytes;/* expert bytes those passes did not fetch because their tokens share experts:
                                  (token, expert) pairs routed less lookups, in bytes */
    uint64_t predicted;        /* routed experts of layers that had a next-layer prediction */
    uint64_t predicted_right;  /* of those, named by the prediction */
    uint64_t predicted_named;  /* experts the predictions named, counted per token (precision's denominator) */
    uint64_t prefetched;       /* cached: experts read ahead on the I/O thread */
    uint64_t prefetch_bytes;   /* ... their bytes (part of bytes_read) */
    uint64_t prefetch_used;    /* ... of those, looked up before they left the cache */
    uint64_t prefetch_in_time; /* lookups a prefetch had already served (counted as hits) */
    uint64_t prefetch_late;    /* lookups that waited on a prefetch still reading (counted as misses) */
    bool prefetching;          /* an I/O thread reads ahead */
    uint64_t readahead_passes; /* single-token forward passes ... */
    uint64_t readahead_passes_on; /* ... and those that read the predicted experts ahead */
    bool trace_failed;         /* the expert trace could not be written whole */
    uint64_t int2_loads, int2_served, int2_promotions, int2_errors; /* cached: the 2-bit copies (moe/int2.h) */
    char int2_why[160];        /* whether they are used, and why ("" without a cache) */
} experts_stats;

typedef struct {
    void *self;
    /* mats[0] gate (n_embd -> n_ff), mats[1] up, mats[2] down (n_ff -> n_embd); n_mat = 1. */
    err_code (*get)(void *self, int layer, int expert, model_mat mats[3], err_t *err);
    /* Optional (may be NULL): the experts one token of this layer was routed
     * to, best first; called for every token before any get() of the layer,
     * so a cache can prefetch (and a test can read the routing). */
    void (*hint)(void *self, int layer, const int32_t *experts, int n);
    /* Optional: the next layer's router logits for a batch of n_tokens
     * ([n_tokens][n_expert]); called twice per MoE layer that has a next
     * one: after this layer's hint() calls and before its get()s (from the
     * residual entering the FFN), and after its FFN (from its output). */
    void (*hint_next)(void *self, int next_layer, const float *scores, int n_tokens, int n_expert);
    /* Optional: the memory the store may hold from now on (the runtime's
     * arbiter moves it between passes as the KV cache grows). */
    void (*set_budget)(void *self, uint64_t bytes);
    /* Optional: stop (paused true) or resume reading predicted experts
     * ahead (memory pressure: read-ahead fills slots the cache may lose). */
    void (*pause_readahead)(void *self, bool paused);
    /* Optional: what the store did since it was made. */
    void (*stats)(const void *self, experts_stats *out);
} experts_iface;

/* The matrices of one expert straight from the model's mapping (all zero for a dense layer; in the GGUF
 * layout: expert stacks are never packed in the mapping). */
void model_expert_mats(const model *m, int layer, int expert, model_mat mats[3]);

/* Where one expert's gate, up and down lie in the model file (byte offsets
 * from its start) and how many bytes each takes; pack: the kernels want that
 * matrix re-laid once read (core/kernels/packed.h). */
typedef struct {
    uint64_t offset[3];
    size_t bytes[3];
    bool pack[3];
} expert_extent;
void model_expert_extent(const model *m, int layer, int expert, expert_extent *out);
/* Re-lay an expert read into memory of its own (mats as model_expert_mats
 * gives them, data pointing at the copy) for the kernels, as the load lays
 * out every other matrix; tmp: scratch of PACK_ROWS rows of the largest. */
void model_expert_pack(const model *m, int layer, model_mat mats[3], void *tmp);

#endif
