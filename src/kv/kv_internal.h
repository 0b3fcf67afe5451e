/*
 * kv_internal — what the files of the KV cache share (kv_cache.h says what
 * the cache does): the cache's structs and the functions one idea lends to
 * another. Only src/kv includes it.
 *
 *   kv_block.c       block layout and bookkeeping: a block's bytes, rows and
 *                    entries, what it costs the budget
 *   kv_tier.c        tiers by age and re-quantization
 *   kv_evict.c       the budget: evicting by the policy's rank, packing the rest
 *   kv_spill_rank.c  which cold blocks go to the spill file and which come back
 *   kv_cache.c       the cache: creation, the forward's interface, commit,
 *                    rollback, stats
 *
 * Per layer, an array of blocks in append order. The newest block is "open"
 * (it takes appends) while it has room and is at hot_type. Entries are
 * committed when their position is below commit_pos; positions of tentative
 * entries are always the highest (they were appended last).
 */
#ifndef OCTO_KV_KV_INTERNAL_H
#define OCTO_KV_KV_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/kernels/attn.h"
#include "core/quant.h"
#include "kv_cache.h"
#include "policy.h"
#include "spill.h"

typedef struct {
    uint32_t k_type, v_type; /* per-token rows, or keys by channel (ATTN_KC8 / KC4) */
    int n;
    bool open;
    int32_t pos[KV_BLOCK];
    float score[KV_BLOCK];
    bool scored[KV_BLOCK];
    uint8_t *mem;       /* the keys (KV_BLOCK rows, or k_dim channels), then KV_BLOCK value rows; NULL when spilled */
    size_t mem_bytes;
    bool spilled;       /* mem is on file, in slot */
    int slot;           /* -1, or a spill slot holding mem exactly as it is */
    fp16_t *kmin, *kmax; /* per key channel over the entries (cold blocks, with spill): Quest's bound (a
                          * ranking, so fp16 rounding is harmless; the entries themselves are exact) */
    bool stale;         /* entries left since the bounds were taken */
} kv_block;

typedef struct {
    kv_block **blocks;
    int n_blocks, cap_blocks;
    kv_span *spans;     /* the view, cap_blocks long */
    /* attention weights observed during the last forward, in view order,
     * applied to the scores at commit (so tentative entries, and the entries
     * a rolled-back verify attended to, are scored only once committed) */
    float *pending;
    int n_pending, cap_pending, pending_queries;
    float *last_q;      /* the newest query row seen (spill), q_dim floats */
    bool have_q;
    int n_spilled;
    int prefetched;     /* the slot last asked for in the background */
    int window;         /* > 0: a sliding-window layer keeps the newest `window` positions only */
    int32_t window_floor; /* positions below may have been dropped by the window */
    uint64_t limit_bytes; /* what the layer may hold: its share of the budget as the last commit
                           * set it (apply_budget, the one rule), which a restore from spill keeps to */
} kv_layer;

struct kv_cache {
    kv_config cfg;
    const kv_policy *policy;
    int n_layer, k_dim, v_dim, n_head, head_dim; /* v_dim 0: values read from the keys (values_in_keys) */
    kv_layer *layers;
    int32_t commit_pos;    /* entries at positions below are committed */
    bool prefill_observed; /* SnapKV has voted */
    bool held;             /* kv_cache_hold: commits apply no budget, nothing is observed */
    uint64_t floor;        /* kv_budget_floor of its shape and config: the least budget it keeps */
    int planned_warm;      /* cfg.warm_tokens as made: kv_cache_set_cold puts it back */
    int64_t evicted, requantized, windowed;
    float *f32;            /* scratch: one block of rows as F32 */
    spill_store *spill;    /* NULL: no spill */
    bool spill_full;       /* a write found no space: no more writes until a slot frees */
    int64_t spill_clean, spill_hits, spill_errors, spill_dropped, spill_prefetch_hits;
    char spill_note[160];
};

/* ---------------------------------------------------------------- kv_block.c */

static inline size_t kv_row_bytes(uint32_t type, int dim) { return quant_row_bytes(type, dim); }

static inline bool kv_by_channel(uint32_t t) { return t == ATTN_KC8 || t == ATTN_KC4; }

/* bytes between entries (rows) or, for keys by channel, between channels */
static inline size_t kv_k_stride(const kv_cache *c, uint32_t t) {
    return kv_by_channel(t) ? attn_kc_channel_bytes(t, KV_BLOCK) : kv_row_bytes(t, c->k_dim);
}
static inline size_t kv_k_area(const kv_cache *c, uint32_t t) {
    return kv_by_channel(t) ? (size_t)c->k_dim * kv_k_stride(c, t) : KV_BLOCK * kv_k_stride(c, t);
}

static inline uint8_t *kv_krow(const kv_cache *c, const kv_block *b, int i) { /* per-token keys only */
    return b->mem + (size_t)i * kv_row_bytes(b->k_type, c->k_dim);
}
static inline uint8_t *kv_vrow(const kv_cache *c, const kv_block *b, int i) {
    return b->mem + kv_k_area(c, b->k_type) + (size_t)i * kv_row_bytes(b->v_type, c->v_dim);
}

/* The bytes n entries of a block take: what the budget counts. */
uint64_t kv_block_bytes(const kv_cache *c, uint32_t kt, uint32_t vt, int n);
/* A block's mapping: KV_BLOCK entries' keys and values, whole pages (also a spill slot's payload). */
size_t kv_block_mem_bytes(const kv_cache *c, uint32_t kt, uint32_t vt);
kv_block *kv_block_new(const kv_cache *c, uint32_t kt, uint32_t vt);
void kv_block_free(kv_block *b);
/* A block holding anchors: offered to the kernel's same-page merging. */
void kv_mark_anchor(const kv_cache *c, kv_block *b);
/* b's bytes change: a copy on file no longer matches */
void kv_block_touched(kv_cache *c, kv_block *b);
/* n rows of dim floats into rows of type */
void kv_store_rows(uint32_t type, const float *src, int n, int dim, uint8_t *dst);
/* entry i's key row as floats */
void kv_key_f32(const kv_cache *c, const kv_block *b, int i, float *out);
/* Move entry `from` to slot `to` of the same block (to < from). */
void kv_move_entry(const kv_cache *c, kv_block *b, int to, int from);
/* Append src's entries to dst (the same types: merging). */
void kv_append_entries(const kv_cache *c, kv_block *dst, const kv_block *src);
/* Move the first k entries of src to the end of dst (per-token rows of one type). */
void kv_take_front(const kv_cache *c, kv_block *dst, kv_block *src, int k);
/* Append a block; the view's span list grows with it, so view() never allocates. */
err_code kv_push_block(kv_layer *L, kv_block *b, err_t *err);
void kv_remove_block(kv_cache *c, kv_layer *L, int i);
/* What a block holding n committed entries costs the budget. */
uint64_t kv_block_cost(const kv_cache *c, const kv_block *b, int n);
/* Can neighbours b and nx merge (at rest in memory, of one layout)? */
bool kv_mergeable(const kv_block *b, const kv_block *nx);
int kv_committed_in(const kv_cache *c, const kv_block *b);
/* The lowest commit count past the current one at which kv_retier_layer
 * would re-lay some block at a colder tier (INT64_MAX: none would). */
int64_t kv_tier_next_change(const kv_cache *c);
/* What the layer's committed entries cost the budget now. */
uint64_t kv_layer_bytes(const kv_cache *c, const kv_layer *L);
/* The layer's invariants, asserted (after every commit and rollback): its
 * blocks within their array, each holding 0..KV_BLOCK entries in memory or
 * in a spill slot, only the newest open, the spilled ones counted, and its
 * positions rising from block to block (each block's first and last entry:
 * the check runs per token, so it costs O(blocks), not O(context)). */
void kv_layer_check(const kv_cache *c, const kv_layer *L);

/* ---------------------------------------------------------------- kv_tier.c */

/* the key and value types of tier t (0 hot, 1 warm, 2 cold) */
void kv_tier_types(const kv_cache *c, int t, uint32_t *kt, uint32_t *vt);
int kv_tier_of(const kv_cache *c, const kv_block *b);
/* Re-quantize the layer's blocks whose newest committed entry has aged into a colder tier. */
err_code kv_retier_layer(kv_cache *c, kv_layer *L, err_t *err);

/* ---------------------------------------------------------------- kv_evict.c */

/* Spill, then evict by the policy, until the layer's committed bytes fit limit. */
err_code kv_evict(kv_cache *c, kv_layer *L, uint64_t limit, err_t *err);

/* ---------------------------------------------------------------- kv_spill_rank.c */

/* A spill failure: counted, its message kept for the stats. */
void kv_spill_failed(kv_cache *c, const err_t *e);
/* Each key channel's minimum and maximum over the block's entries. */
err_code kv_block_bounds(kv_cache *c, kv_block *b, err_t *err);
/* Lower goes to the file first. */
double kv_spill_rank(const kv_cache *c, const kv_layer *L, const kv_block *b);
/* Spilled b back into memory (keeping its slot); on failure it stays spilled. */
err_code kv_restore_block(kv_cache *c, kv_layer *L, kv_block *b, err_t *err);
/* A spilled block whose read failed: its entries are evicted. */
void kv_drop_spilled(kv_cache *c, kv_layer *L, int i, const err_t *e);
/* While over limit, move the lowest-ranked spillable blocks to the file. */
void kv_spill_over(kv_cache *c, kv_layer *L, uint64_t limit);
/* kv_iface.queries: keep the newest query, trade a spilled block back in when it ranks higher. */
void kv_spill_queries(void *self, int layer, int n, const float *q);
/* Read ahead, in the background, the spilled block likeliest to come back next. */
void kv_spill_prefetch_next(kv_cache *c, kv_layer *L);

#endif
