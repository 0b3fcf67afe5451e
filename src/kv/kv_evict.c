/*
 * kv_evict — the KV budget: after each commit, while a layer's committed
 * blocks cost more than its share of budget_bytes, first spill whole cold
 * blocks (kv_spill_rank.c), then evict the entries the policy ranks lowest
 * (never anchors, never the recent_tokens newest) until the layer, packed
 * into as few blocks as hold it, fits, and holds no more than budget_tokens
 * entries in memory. Per-token rows move forward; blocks
 * with keys by channel merge whole (keys quantized again over the union);
 * freed blocks are unmapped. Should that not do (the bounds of spilled
 * blocks are all that is left), spilled blocks go whole, lowest rank first.
 */
#include <math.h>
#include <stdlib.h>

#include "kv_internal.h"

typedef struct {
    double rank;
    int block, slot;
} victim;

static int by_rank(const void *a, const void *b) {
    const victim *x = a, *y = b;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* The layer's cost once kv_evict() has compacted its blocks to left[i]
 * committed entries each and merged neighbours that fit together. */
static uint64_t merged_cost(const kv_cache *c, const kv_layer *L, const int *left) {
    uint64_t s = 0;
    for (int i = 0; i < L->n_blocks;) {
        const kv_block *b = L->blocks[i];
        int64_t n = left[i];
        int j = i + 1;
        if (kv_by_channel(b->k_type)) { /* whole neighbours, while they fit */
            for (; j < L->n_blocks && kv_mergeable(b, L->blocks[j]) && n + left[j] <= KV_BLOCK; j++) n += left[j];
            s += n ? kv_block_cost(c, b, (int)n) : 0; /* an emptied block goes */
        } else { /* a run of one per-token type is packed densely */
            for (; j < L->n_blocks && kv_mergeable(b, L->blocks[j]); j++) n += left[j];
            s += (uint64_t)((n + KV_BLOCK - 1) / KV_BLOCK) * kv_block_cost(c, b, 1);
        }
        i = j;
    }
    return s;
}

/* After eviction: drop the marked entries, then pack each run of blocks of
 * one type into as few as hold it (merged_cost's arithmetic): per-token
 * rows move forward; blocks with keys by channel merge whole when they fit
 * (their keys quantized again over the union); emptied blocks are unmapped. */
static void compact_layer(kv_cache *c, kv_layer *L) {
    for (int i = 0; i < L->n_blocks; i++) {
        kv_block *b = L->blocks[i];
        if (b->spilled) continue;
        int w = 0;
        for (int j = 0; j < b->n; j++) {
            if (b->pos[j] == INT32_MIN) continue;
            if (w != j) kv_move_entry(c, b, w, j);
            w++;
        }
        if (w != b->n) kv_block_touched(c, b), b->stale = true;
        b->n = w;
    }
    for (int i = 0; i < L->n_blocks;) {
        kv_block *b = L->blocks[i];
        if (b->n == 0 && !b->open) {
            kv_remove_block(c, L, i);
            continue;
        }
        kv_block *nx = i + 1 < L->n_blocks ? L->blocks[i + 1] : NULL;
        if (!nx || b->n == KV_BLOCK || !kv_mergeable(b, nx) || (kv_by_channel(b->k_type) && b->n + nx->n > KV_BLOCK)) {
            i++;
            continue;
        }
        if (kv_by_channel(b->k_type)) kv_append_entries(c, b, nx);
        else kv_take_front(c, b, nx, KV_BLOCK - b->n < nx->n ? KV_BLOCK - b->n : nx->n);
        kv_block_touched(c, b), b->stale = true;
        if (kv_by_channel(b->k_type) || nx->n == 0) kv_remove_block(c, L, i + 1); /* all of it moved */
        else kv_block_touched(c, nx), nx->stale = true;
    }
}

/* Committed entries held in memory (a spilled block's are on file). */
static int resident_entries(const kv_cache *c, const kv_layer *L) {
    int n = 0;
    for (int i = 0; i < L->n_blocks; i++)
        if (!L->blocks[i]->spilled) n += kv_committed_in(c, L->blocks[i]);
    return n;
}

err_code kv_evict(kv_cache *c, kv_layer *L, uint64_t limit, err_t *err) {
    kv_spill_over(c, L, limit);
    uint64_t bytes = kv_layer_bytes(c, L);
    const int cap = c->cfg.budget_tokens ? c->cfg.budget_tokens : INT32_MAX;
    int held = resident_entries(c, L);
    if (bytes <= limit && held <= cap) return ERR_OK;
    int n = 0;
    for (int i = 0; i < L->n_blocks; i++) n += L->blocks[i]->n;
    victim *v = malloc(sizeof *v * (size_t)(n ? n : 1));
    if (!v) return err_set(err, ERR_NOMEM, "out of memory choosing KV entries to evict");
    int nv = 0;
    for (int i = 0; i < L->n_blocks; i++) {
        const kv_block *b = L->blocks[i];
        for (int j = 0; j < b->n && !b->spilled; j++) {
            const int32_t p = b->pos[j];
            if (p < c->cfg.anchor_tokens || p >= c->commit_pos || c->commit_pos - 1 - p < c->cfg.recent_tokens) continue;
            v[nv++] = (victim){c->policy->rank(b->score[j], b->scored[j], p), i, j};
        }
    }
    qsort(v, (size_t)nv, sizeof *v, by_rank);
    /* evict in rank order until the layer, compacted and merged as below, fits */
    int *left = malloc(sizeof *left * (size_t)L->n_blocks);
    if (!left) {
        free(v);
        return err_set(err, ERR_NOMEM, "out of memory choosing KV entries to evict");
    }
    for (int i = 0; i < L->n_blocks; i++) left[i] = kv_committed_in(c, L->blocks[i]);
    int k = 0;
    for (; k < nv && (bytes > limit || held > cap); k++, held--) {
        kv_block *b = L->blocks[v[k].block];
        b->pos[v[k].slot] = INT32_MIN; /* marked; removed below */
        left[v[k].block]--;
        bytes = merged_cost(c, L, left);
    }
    free(left);
    free(v);
    /* still over: the bounds of spilled blocks are what is left; the
     * blocks the newest query bounds lowest go */
    while (bytes > limit && L->n_spilled) {
        int pick = -1;
        double low = INFINITY;
        for (int i = 0; i < L->n_blocks; i++)
            if (L->blocks[i]->spilled) {
                const double r = kv_spill_rank(c, L, L->blocks[i]);
                if (pick < 0 || r < low) pick = i, low = r;
            }
        bytes -= kv_block_cost(c, L->blocks[pick], L->blocks[pick]->n);
        c->evicted += L->blocks[pick]->n;
        kv_remove_block(c, L, pick);
    }
    if (bytes > limit) /* cannot happen when kv_cache_new checked the budget */
        return err_set(err, ERR_CONTEXT_FULL, "the KV budget cannot hold the anchors and the recent window");
    c->evicted += k;
    compact_layer(c, L);
    /* bounds of changed cold blocks: a bound over fewer entries is tighter */
    for (int i = 0; i < L->n_blocks; i++) {
        kv_block *b = L->blocks[i];
        if (b->kmin && b->stale && !b->spilled) {
            err_code rc = kv_block_bounds(c, b, err);
            if (rc) return rc;
        }
    }
    return ERR_OK;
}
