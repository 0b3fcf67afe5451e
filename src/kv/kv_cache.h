/*
 * kv_cache — the KV cache the runtime uses: paged, tiered by recency,
 * evicting by a policy's scores, never over its byte budget.
 *
 * Storage. Each layer holds blocks of up to KV_BLOCK (64) entries; a block is
 * one native mapping (mmap) holding its keys then its values, each entry
 * keeping its original position, so RoPE phases and the causal rule stay
 * right after eviction. Rows hold every KV head of a token.
 *
 * Tiers. A block's types follow the age of its newest committed entry:
 * younger than hot_tokens -> hot_type (F16), younger than warm_tokens ->
 * INT8, older -> INT4. Values are quantized per token in groups of 32 along
 * the row (warm_type Q8_0; cold_type Q4_1 with a minimum, or Q4_0); keys,
 * with key_channels, per channel over the block's entries (KIVI: a key
 * channel keeps its scale across tokens, so outlier channels cost nothing
 * to the others, and heads smaller than 32 do not share a scale). A block
 * is re-quantized when it ages (INT8 -> INT4 from the INT8 values) and only
 * once it is full. The attention kernel reads every tier directly
 * (core/kernels/attn.h). The first anchor_tokens entries are never evicted.
 *
 * Budget. The blocks holding committed entries never occupy more than
 * budget_bytes (0 = no limit), counted as resident: each block's whole
 * mapping, page-rounded, and its bookkeeping, however few entries it holds.
 * After each commit: re-quantize by age, then, while over budget, evict the
 * entries the policy ranks lowest (never anchors, never the recent_tokens
 * newest) until the layer, packed into as few blocks as hold it, fits;
 * blocks with keys by channel merge whole (keys quantized again over the
 * union); freed blocks are unmapped.
 *
 * Spill. With spill_dir set, over budget the cache first moves whole cold
 * blocks to a file there (spill.h) instead of evicting entries: the block
 * whose keys the layer's latest query can score least (Quest's bound, from
 * each channel's minimum and maximum over the block, kept in memory) goes
 * first. Before each attention the forward hands the queries in
 * (kv_iface.queries); when a spilled block's bound beats the lowest
 * resident cold block's, the two trade places: one read, and one write
 * unless the leaving block is still on file unchanged (a block read back
 * keeps its slot: a block that bounces costs no second write). Only the
 * bounds (two floats per key channel of each cold block) count against
 * the budget. A failed spill (no
 * directory, disk full, the spill_max_bytes limit) falls back to eviction; a
 * failed read (truncated or corrupted file: every record is checksummed)
 * drops the block as evicted. Each is counted in the stats.
 *
 * Windows. A layer with a sliding window (kv_shape.window) drops at commit
 * each block whose entries no later query can see (positions <= the next
 * position - window), keeping one block more than that so that taking back
 * up to KV_BLOCK tokens never needs a dropped entry: it never holds more
 * than window + 2 * KV_BLOCK entries, whatever the context. After a deeper
 * truncation the window misses entries its next query needs
 * (kv_cache_window_lost); the caller must compute them again
 * (kv_cache_stale_from says from where). Under a budget the windowed layers
 * take their even share first and the other layers split what they leave.
 *
 * Speculation. Appended entries are tentative: attended to, but not counted
 * against the budget, not scored, not re-quantized, until kv_cache_commit.
 * kv_cache_rollback(n) drops the newest n tentative entries, leaving the
 * cache exactly as before they were appended.
 */
#ifndef OCTO_KV_KV_CACHE_H
#define OCTO_KV_KV_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"
#include "model/kv_iface.h"

#define KV_BLOCK 64

/* The model's shape as far as its cache needs it, filled by the caller
 * (runtime/plan.h: plan_kv_shape): the cache knows no model. */
typedef struct {
    int n_layer;
    int n_head;     /* query heads (a spilled block's bound is taken per query head) */
    int n_head_kv;  /* key/value heads: a row holds all of them */
    int head_dim;   /* key (and query) head size */
    int head_dim_v; /* value head size */
    int window;     /* > 0: layer l with l % window_period == 0 attends to the newest `window`
                     * positions only (sliding-window attention), so it keeps no more */
    int window_period;
    bool values_in_keys; /* one KV head whose value is the first head_dim_v elements of its key
                          * (latent attention): only keys are stored, per token in every tier,
                          * and the view's values point into the key rows */
} kv_shape;

/* Does layer l of shape attend through a sliding window? */
static inline bool kv_shape_windowed(kv_shape s, int l) {
    return s.window > 0 && l % (s.window_period > 0 ? s.window_period : 1) == 0;
}

/* The value elements a token's row stores (0 when they are read from its keys). */
static inline int kv_shape_v_dim(kv_shape s) { return s.values_in_keys ? 0 : s.n_head_kv * s.head_dim_v; }

/* A policy is its row in the table of policies (policy_table.c): these are
 * the rows the runtime names; a policy added after them has a row, a name
 * and a public number (octo_kv_policy: the row + 1) but no constant here. */
typedef enum { KV_POLICY_NONE = 0, KV_POLICY_WINDOW, KV_POLICY_H2O, KV_POLICY_SNAPKV, KV_POLICY_MORPHKV,
               KV_POLICY_SPECKV } kv_policy_id;

typedef struct {
    uint32_t hot_type;   /* QT_F16 (default) or QT_F32 */
    uint32_t warm_type;  /* QT_Q8_0, or hot_type for no warm tier */
    uint32_t cold_type;  /* QT_Q4_1 (default), QT_Q4_0, or warm_type for no cold tier */
    int hot_tokens;      /* 128 */
    int warm_tokens;     /* 512 */
    int anchor_tokens;   /* 64 */
    int recent_tokens;   /* newest entries never evicted: 128 */
    kv_policy_id policy; /* KV_POLICY_MORPHKV */
    int key_channels;    /* 1 (default): quantized keys by channel within a block (KIVI), values by token */
    uint64_t budget_bytes; /* 0 = no limit */
    int budget_tokens;   /* 0 = no limit; else the committed entries a layer keeps resident, at most
                          * (evicted as over budget_bytes; the anchors and the recent window fit in it):
                          * the budget KV-eviction papers state, in entries */
    int snap_window;     /* SnapKV's observation window: 32 */
    const char *spill_dir;    /* NULL (default): no spill */
    uint64_t spill_max_bytes; /* the spill file's limit; 0 = what the disk holds */
} kv_config;

kv_config kv_config_default(void);
/* The smallest budget a cache of cfg can keep for a model of shape: per layer, whole hot
 * blocks (the budget counts mapped blocks, not entries) for the anchors, the
 * recent window and the block being filled. */
uint64_t kv_budget_floor(kv_shape shape, const kv_config *cfg);
/* A cache that keeps everything at one type (QT_F32 or QT_F16): the reference. */
kv_config kv_config_plain(uint32_t type);
/* The number of policies: ids 0 .. kv_policy_count() - 1. */
int kv_policy_count(void);
/* "?" when p is not a policy */
const char *kv_policy_name(kv_policy_id p);
/* -1 when name is not a policy */
int kv_policy_from_name(const char *name);

typedef struct {
    uint64_t bytes;            /* what the budget counts: the blocks holding committed entries, whole */
    uint64_t entry_bytes;      /* of those, the committed entries' own bytes */
    uint64_t budget;           /* 0 = none */
    uint64_t bytes_hot, bytes_warm, bytes_cold;
    uint64_t mapped_bytes;     /* what the block mappings occupy (page-rounded) */
    int64_t tokens;            /* committed entries per layer (the layer holding most) */
    int64_t tokens_windowed;   /* entries windowed layers dropped (summed over those layers), since creation */
    int64_t tokens_evicted;    /* per layer, since creation */
    int64_t requantized;       /* blocks re-quantized to a colder tier */
    int tentative;             /* entries appended and not yet committed */
    /* spill (all layers) */
    int spill_on;              /* a spill file is open */
    int64_t blocks_spilled;    /* blocks on file now */
    int64_t spill_writes, spill_clean; /* blocks written; blocks spilled again with no write (still on file) */
    int64_t spill_prefetches;  /* background read-aheads of the block likeliest to come back next */
    int64_t spill_prefetch_hits; /* reads of a block read ahead that way */
    int64_t spill_reads, spill_hits;   /* blocks read back; of those, the ones whose best key the query
                                        * scored above every key of the block they displaced */
    uint64_t spill_read_ns;    /* total time in reads */
    int64_t spill_errors;      /* failed opens, writes and reads (each degraded to eviction) */
    int64_t spill_dropped;     /* spilled blocks lost to a failed read */
    uint64_t spill_file_bytes;
    char spill_note[160];      /* why spill is off or failed, "" when fine */
} kv_stats;

typedef struct kv_cache kv_cache;

err_code kv_cache_new(kv_shape shape, const kv_config *cfg, kv_cache **out, err_t *err);
void kv_cache_free(kv_cache *c);

/* The interface the forward pass uses (append, view, observe). */
kv_iface kv_cache_iface(kv_cache *c);

/* The oldest n tentative entries become part of the cache; tiering and the
 * budget are applied. */
err_code kv_cache_commit(kv_cache *c, int n, err_t *err);
/* Scoring a prompt by queries that come after it (SpecKV's lookahead): from
 * kv_cache_hold, commits keep every entry (tiers still apply) and nothing
 * is observed; kv_cache_release folds votes[l * n_pos + p] (the attention
 * n_queries queries gave the entry at position p of layer l, summed over
 * heads; NULL: none) into
 * the committed entries' scores, as the policy folds what it observes, then
 * applies the budget. Until then the cache may hold more than its budget. */
void kv_cache_hold(kv_cache *c);
err_code kv_cache_release(kv_cache *c, const float *votes, int n_pos, int n_queries, err_t *err);
/* Drop the newest n tentative entries (n <= tentative). */
void kv_cache_rollback(kv_cache *c, int n);
/* Keep the tentative entries appended at offsets slots[0] < .. < slots[m-1]
 * from the oldest one, as though only they had been appended, in that order:
 * their rows move to the positions of the first m, the rest are dropped (a
 * tree pass whose accepted path left its leading line; its nodes' rows were
 * computed at the positions they move to). */
void kv_cache_keep_tentative(kv_cache *c, const int *slots, int m);
/* Where the next appended entry sits in its block, modulo tile, per layer:
 * bit p is set when some layer's next entry would be its block's p-th
 * modulo tile (the attention kernels take a block's keys in tiles). */
uint32_t kv_cache_append_phases(const kv_cache *c, int tile);
/* Drop every entry at position >= pos (committed or not). */
void kv_cache_truncate(kv_cache *c, int32_t pos);
/* Holding the first n positions, does a sliding-window layer miss an entry
 * the query at position n must see (one its window dropped)? */
bool kv_cache_window_lost(const kv_cache *c, int32_t n);
/* Were the cache truncated to its first n positions, the lowest position
 * whose block is held at a colder tier than a cache that never saw the rest
 * would hold it (the discarded tokens aged it), or n when none is: what must
 * be computed again for "as if never seen". Entries the budget evicted stay
 * evicted. */
int32_t kv_cache_stale_from(const kv_cache *c, int32_t n);
/* Rows a pass may compute ahead of the committed entries (its first at the
 * next position) and still see the cache exactly as decoding one token at a
 * time would: the commits before the next one that re-lays a block at a
 * colder tier (kv_tier.c). A verify pass of more rows would attend to
 * entries decoding would already have re-laid, and its accepted entries
 * would carry that into the cache. >= 1; INT_MAX when nothing changes with
 * age. (An eviction under a budget also changes the cache at a commit; that
 * is not counted here: speculation under an evicting budget is not plain
 * decoding's, docs/kv-cache.md.) */
int kv_cache_exact_rows(const kv_cache *c);
kv_stats kv_cache_stats(const kv_cache *c);
/* Would n more entries, at the hot tier, leave the cache within its budget (no eviction)? */
bool kv_cache_fits(const kv_cache *c, int n);
/* The bytes the cache would hold with n more entries at the hot tier, none evicted. */
uint64_t kv_cache_bytes_with(const kv_cache *c, int n);
const kv_config *kv_cache_config(const kv_cache *c);
/* The budget moved while the cache runs (memory pressure, runtime/adapt.h):
 * bytes (0: none) below the cache's floor (kv_budget_floor) is raised to
 * it; a smaller budget evicts now (spilling first where the cache spills),
 * a larger one lets the cache keep more from the next commit. Returns the
 * budget in force; a policy that never evicts keeps none (returns 0). */
uint64_t kv_cache_set_budget(kv_cache *c, uint64_t bytes, err_t *err);
/* Memory pressure's first KV step (runtime/adapt.h), lossy but evicting
 * nothing: cold, every committed entry older than the hot window goes to
 * the cold tier now (no warm tier); not cold, entries age as configured
 * again (what went cold stays cold). */
err_code kv_cache_set_cold(kv_cache *c, bool cold, err_t *err);
/* The spill file's descriptor, -1 without one (tests damage the file). */
int kv_cache_spill_fd(const kv_cache *c);

/* Row bytes of one token (all KV heads, K and V) at a type. */
uint64_t kv_token_bytes(kv_shape shape, uint32_t type);
/* Bytes of a cache of n_ctx tokens at type, a sliding-window layer counting
 * only the entries it keeps (window + two blocks at most). */
uint64_t kv_context_bytes(kv_shape shape, uint32_t type, int n_ctx);

#endif
