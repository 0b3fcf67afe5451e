/*
 * kv_tier — the KV cache's tiers by age: a block's types follow the age of
 * its newest committed entry (hot_type, then the warm type, then the cold
 * one; keys by channel in the quantized tiers with key_channels). A full
 * block that ages is laid out again at its new tier's types from its values
 * as floats (INT8 -> INT4 from the INT8 values); the open block waits until
 * it is full. And the other way: which blocks a truncation leaves colder
 * than a cache that never saw the rest.
 */
#include <string.h>

#include "kv_internal.h"

void kv_tier_types(const kv_cache *c, int t, uint32_t *kt, uint32_t *vt) {
    const uint32_t v = t == 0 ? c->cfg.hot_type : t == 1 ? c->cfg.warm_type : c->cfg.cold_type;
    *vt = v;
    *kt = v;
    if (c->cfg.key_channels && v != c->cfg.hot_type) *kt = v == QT_Q8_0 ? ATTN_KC8 : ATTN_KC4;
}

static int tier_for_age(const kv_cache *c, int64_t age) {
    return age < c->cfg.hot_tokens ? 0 : age < c->cfg.warm_tokens ? 1 : 2;
}

int kv_tier_of(const kv_cache *c, const kv_block *b) {
    for (int t = 0; t < 3; t++) {
        uint32_t kt, vt;
        kv_tier_types(c, t, &kt, &vt);
        if (kt == b->k_type && vt == b->v_type) return t;
    }
    return 2;
}

/* Re-lay block i at the types of tier t, from its values as floats. */
static err_code requantize(kv_cache *c, kv_layer *L, int i, int t, err_t *err) {
    kv_block *old = L->blocks[i], *b;
    uint32_t kt, vt;
    kv_tier_types(c, t, &kt, &vt);
    if (!(b = kv_block_new(c, kt, vt))) return err_set(err, ERR_NOMEM, "out of memory re-quantizing the KV cache");
    const int n = old->n;
    for (int j = 0; j < n; j++) kv_key_f32(c, old, j, c->f32 + (size_t)j * c->k_dim);
    if (kv_by_channel(kt)) attn_kc_quantize(kt, c->f32, n, c->k_dim, KV_BLOCK, b->mem);
    else kv_store_rows(kt, c->f32, n, c->k_dim, kv_krow(c, b, 0));
    for (int j = 0; j < n; j++)
        quant_dequantize_row(old->v_type, kv_vrow(c, old, j), c->f32 + (size_t)j * c->v_dim, c->v_dim);
    kv_store_rows(vt, c->f32, n, c->v_dim, kv_vrow(c, b, 0));
    memcpy(b->pos, old->pos, sizeof(int32_t) * (size_t)n);
    memcpy(b->score, old->score, sizeof(float) * (size_t)n);
    memcpy(b->scored, old->scored, sizeof(bool) * (size_t)n);
    b->n = n;
    b->open = false;
    kv_mark_anchor(c, b);
    L->blocks[i] = b;
    kv_block_touched(c, old);
    kv_block_free(old);
    c->requantized++;
    if (t == 2 && c->spill) return kv_block_bounds(c, b, err);
    return ERR_OK;
}

/* tiers by the age of each block's newest committed entry */
err_code kv_retier_layer(kv_cache *c, kv_layer *L, err_t *err) {
    for (int i = 0; i < L->n_blocks; i++) {
        kv_block *b = L->blocks[i];
        if (!b->n) continue;
        int32_t newest = INT32_MIN;
        bool tentative = false;
        for (int j = 0; j < b->n; j++) {
            if (b->pos[j] >= c->commit_pos) tentative = true;
            else if (b->pos[j] > newest) newest = b->pos[j];
        }
        if (tentative || (b->open && b->n < KV_BLOCK)) continue; /* the open block fills up first */
        const int want = tier_for_age(c, (int64_t)c->commit_pos - 1 - newest);
        uint32_t kt, vt;
        kv_tier_types(c, want, &kt, &vt);
        if (want > kv_tier_of(c, b) && (kt != b->k_type || vt != b->v_type)) { /* two tiers of one type: as it is */
            err_code rc = requantize(c, L, i, want, err);
            if (rc) return rc;
        }
    }
    return ERR_OK;
}

/* The commit count at which kv_retier_layer would next re-lay block b at
 * other types (INT64_MAX: never; a tier of the types it has is no change).
 * Blocks hold ascending positions. The open block waits until it is full:
 * its newest entry will then be at least the position that fills it, a
 * lower bound, which is the safe side. */
static int64_t relaid_at(const kv_cache *c, const kv_block *b) {
    int64_t newest = b->pos[b->n - 1];
    const int64_t fills = (int64_t)c->commit_pos + (KV_BLOCK - b->n) - 1;
    if (b->open && b->n < KV_BLOCK && fills > newest) newest = fills;
    for (int t = kv_tier_of(c, b) + 1; t <= 2; t++) {
        uint32_t kt, vt;
        kv_tier_types(c, t, &kt, &vt);
        const int64_t age = t == 1 ? c->cfg.hot_tokens : c->cfg.hot_tokens > c->cfg.warm_tokens ? c->cfg.hot_tokens
                                                                                                 : c->cfg.warm_tokens;
        if (kt != b->k_type || vt != b->v_type) return newest + 1 + age;
    }
    return INT64_MAX;
}

int64_t kv_tier_next_change(const kv_cache *c) {
    int64_t first = INT64_MAX;
    for (int l = 0; l < c->n_layer; l++)
        for (int i = 0; i < c->layers[l].n_blocks; i++) {
            const kv_block *b = c->layers[l].blocks[i];
            const int64_t at = b->n ? relaid_at(c, b) : INT64_MAX;
            if (at < first) first = at;
        }
    return first;
}

int32_t kv_cache_stale_from(const kv_cache *c, int32_t n) {
    int32_t from = n;
    for (int l = 0; l < c->n_layer; l++) {
        const kv_layer *L = &c->layers[l];
        /* a window that dropped positions the next query after n would see */
        const int32_t needed = n - L->window + 1 > 0 ? n - L->window + 1 : 0;
        if (L->window && L->window_floor > needed && needed < from) from = needed;
        for (int i = 0; i < L->n_blocks; i++) {
            const kv_block *b = L->blocks[i];
            int32_t newest = INT32_MIN; /* of the entries that would stay */
            for (int j = 0; j < b->n; j++)
                if (b->pos[j] < n && b->pos[j] > newest) newest = b->pos[j];
            if (newest == INT32_MIN) continue;
            if (kv_tier_of(c, b) > tier_for_age(c, (int64_t)n - 1 - newest)) {
                if (b->pos[0] < from) from = b->pos[0]; /* blocks hold ascending positions */
                break;
            }
        }
    }
    return from;
}
