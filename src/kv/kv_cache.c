/*
 * kv_cache — the cache itself (kv_cache.h says what it does): its
 * configuration, creation, the interface the forward pass uses (append,
 * view, observe), commit (scores, tiers, budget), rollback and truncation,
 * and the stats. Its other ideas live beside it (kv_internal.h lists them).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_internal.h"

kv_config kv_config_default(void) {
    return (kv_config){
        .hot_type = QT_F16, .warm_type = QT_Q8_0, .cold_type = QT_Q4_1,
        .hot_tokens = 128, .warm_tokens = 512, .anchor_tokens = 64, .recent_tokens = 128,
        .policy = KV_POLICY_MORPHKV, .budget_bytes = 0, .snap_window = 32, .key_channels = 1,
    };
}

kv_config kv_config_plain(uint32_t type) {
    kv_config c = kv_config_default();
    c.hot_type = c.warm_type = c.cold_type = type;
    c.policy = KV_POLICY_NONE;
    return c;
}

/* ---------------------------------------------------------------- create */

err_code kv_cache_new(kv_shape shape, const kv_config *cfg, kv_cache **out, err_t *err) {
    *out = NULL;
    if (shape.n_layer < 1 || shape.n_head_kv < 1 || shape.head_dim < 1 || shape.head_dim_v < 1 ||
        shape.n_head < shape.n_head_kv || shape.n_head % shape.n_head_kv ||
        (shape.values_in_keys && (shape.n_head_kv != 1 || shape.head_dim_v > shape.head_dim)))
        return err_set(err, ERR_INVALID_ARG, "bad KV cache shape: %d layers, %d query / %d key-value heads, head sizes %d / %d",
                       shape.n_layer, shape.n_head, shape.n_head_kv, shape.head_dim, shape.head_dim_v);
    kv_config k = cfg ? *cfg : kv_config_default();
    const int k_dim = shape.n_head_kv * shape.head_dim, v_dim = kv_shape_v_dim(shape);
    if (shape.values_in_keys) k.key_channels = 0; /* values are read from the key rows: keys stay per token */
    if (k.hot_type != QT_F16 && k.hot_type != QT_F32)
        return err_set(err, ERR_INVALID_ARG, "the hot KV tier must be f16 or f32");
    const uint32_t ok_q[] = {QT_F32, QT_F16, QT_Q8_0, QT_Q4_0, QT_Q4_1};
    for (int t = 0; t < 2; t++) {
        const uint32_t ty = t ? k.cold_type : k.warm_type;
        bool ok = false;
        for (size_t i = 0; i < sizeof ok_q / sizeof *ok_q; i++) ok |= ty == ok_q[i];
        if (!ok) return err_set(err, ERR_INVALID_ARG, "KV tier type %u is not f32, f16, q8_0, q4_0 or q4_1", ty);
    }
    /* quantized tiers need rows of whole blocks of 32; otherwise stay at hot_type */
    if (k_dim % 32 || v_dim % 32) k.warm_type = k.cold_type = k.hot_type;
    if (k.budget_tokens < 0) return err_set(err, ERR_INVALID_ARG, "a KV budget of %d entries", k.budget_tokens);
    if (k.hot_tokens < 0 || k.warm_tokens < k.hot_tokens || k.anchor_tokens < 0 || k.recent_tokens < 0 ||
        k.snap_window < 0)
        return err_set(err, ERR_INVALID_ARG, "KV tier windows must satisfy 0 <= hot <= warm (got hot %d, warm %d)",
                       k.hot_tokens, k.warm_tokens);
    const kv_policy *pol = kv_policy_get(k.policy);
    if (!pol) return err_set(err, ERR_INVALID_ARG, "unknown KV eviction policy %d", (int)k.policy);
    if (!pol->evicts) k.budget_bytes = 0, k.budget_tokens = 0;
    if (k.budget_tokens && k.budget_tokens < k.anchor_tokens + k.recent_tokens + 1)
        return err_set(err, ERR_INVALID_ARG, "a KV budget of %d entries cannot hold %d anchor and %d recent tokens and a new one",
                       k.budget_tokens, k.anchor_tokens, k.recent_tokens);
    const uint64_t floor = kv_budget_floor(shape, &k);
    if (k.budget_bytes) {
        if (k.budget_bytes < floor)
            return err_set(err, ERR_INVALID_ARG,
                           "a KV budget of %llu bytes cannot hold %d anchor and %d recent tokens (%llu bytes needed)",
                           (unsigned long long)k.budget_bytes, k.anchor_tokens, k.recent_tokens,
                           (unsigned long long)floor);
    }
    kv_cache *c = calloc(1, sizeof *c);
    if (!c) return err_set(err, ERR_NOMEM, "out of memory");
    c->cfg = k;
    c->floor = floor;
    c->planned_warm = k.warm_tokens;
    c->policy = pol;
    c->n_layer = shape.n_layer;
    c->k_dim = k_dim;
    c->v_dim = v_dim;
    c->n_head = shape.n_head;
    c->head_dim = shape.head_dim;
    c->layers = calloc((size_t)shape.n_layer, sizeof *c->layers);
    c->f32 = malloc(sizeof(float) * KV_BLOCK * (size_t)(k_dim > v_dim ? k_dim : v_dim));
    if (!c->layers || !c->f32) {
        kv_cache_free(c);
        return err_set(err, ERR_NOMEM, "out of memory");
    }
    for (int l = 0; l < shape.n_layer; l++) {
        if (kv_shape_windowed(shape, l)) c->layers[l].window = shape.window;
        c->layers[l].limit_bytes = k.budget_bytes / (uint64_t)shape.n_layer; /* the even share until a commit */
    }
    /* spill: only with a budget to keep; a directory that cannot take the
     * file leaves the cache working, evicting instead (the stats say why) */
    if (k.spill_dir && k.budget_bytes) {
        uint32_t kt, vt;
        kv_tier_types(c, 2, &kt, &vt);
        err_t e = {0};
        if (spill_open(k.spill_dir, kv_block_mem_bytes(c, kt, vt), k.spill_max_bytes, &c->spill, &e)) kv_spill_failed(c, &e);
        for (int l = 0; c->spill && l < c->n_layer; l++) {
            c->layers[l].prefetched = -1;
            if (!(c->layers[l].last_q = malloc(sizeof(float) * (size_t)c->n_head * (size_t)c->head_dim))) {
                kv_cache_free(c);
                return err_set(err, ERR_NOMEM, "out of memory");
            }
        }
    }
    c->cfg.spill_dir = NULL; /* the caller's string is not kept */
    *out = c;
    return ERR_OK;
}

void kv_cache_free(kv_cache *c) {
    if (!c) return;
    for (int l = 0; c->layers && l < c->n_layer; l++) {
        kv_layer *L = &c->layers[l];
        for (int i = 0; i < L->n_blocks; i++) kv_block_free(L->blocks[i]);
        free(L->blocks);
        free(L->spans);
        free(L->pending);
        free(L->last_q);
    }
    spill_close(c->spill);
    free(c->layers);
    free(c->f32);
    free(c);
}

const kv_config *kv_cache_config(const kv_cache *c) { return &c->cfg; }

int kv_cache_spill_fd(const kv_cache *c) { return c->spill ? spill_fd(c->spill) : -1; }

/* ---------------------------------------------------------------- iface */

static err_code cache_append(void *self, int layer, int n, const int32_t *pos, const float *k, const float *v,
                             err_t *err) {
    kv_cache *c = self;
    kv_layer *L = &c->layers[layer];
    const int n0 = n;
    while (n > 0) {
        kv_block *b = L->n_blocks ? L->blocks[L->n_blocks - 1] : NULL;
        if (!b || !b->open || b->n == KV_BLOCK) {
            if (b) b->open = false;
            if (!(b = kv_block_new(c, c->cfg.hot_type, c->cfg.hot_type))) /* the caller rolls the tentative entries back */
                return err_set(err, ERR_NOMEM, "out of memory for the KV cache");
            b->open = true;
            err_code rc = kv_push_block(L, b, err);
            if (rc) {
                kv_block_free(b);
                return rc;
            }
        }
        const int take = KV_BLOCK - b->n < n ? KV_BLOCK - b->n : n;
        const int done = n0 - n;
        kv_store_rows(b->k_type, k + (size_t)done * c->k_dim, take, c->k_dim, kv_krow(c, b, b->n));
        kv_store_rows(b->v_type, v + (size_t)done * c->v_dim, take, c->v_dim, kv_vrow(c, b, b->n));
        memcpy(b->pos + b->n, pos + done, sizeof(int32_t) * (size_t)take);
        memset(b->score + b->n, 0, sizeof(float) * (size_t)take);
        memset(b->scored + b->n, 0, sizeof(bool) * (size_t)take);
        b->n += take;
        if (b->n == take) kv_mark_anchor(c, b); /* a new block */
        n -= take;
    }
    return ERR_OK;
}

static int cache_view(void *self, int layer, const kv_span **spans) {
    kv_cache *c = self;
    kv_layer *L = &c->layers[layer];
    int n = 0; /* L->spans has room for every block (push_block) */
    for (int i = 0; i < L->n_blocks; i++) {
        const kv_block *b = L->blocks[i];
        if (!b->n || b->spilled) continue;
        L->spans[n++] = (kv_span){
            .n_tokens = b->n, .pos = b->pos, .k_type = b->k_type, .v_type = c->v_dim ? b->v_type : b->k_type, .k = b->mem,
            .v = c->v_dim ? kv_vrow(c, b, 0) : b->mem, .k_row_bytes = kv_k_stride(c, b->k_type),
            .v_row_bytes = c->v_dim ? kv_row_bytes(b->v_type, c->v_dim) : kv_k_stride(c, b->k_type),
        };
    }
    *spans = L->spans;
    return n;
}

static void cache_observe(void *self, int layer, int n_queries, int n_entries, const float *w) {
    kv_cache *c = self;
    kv_layer *L = &c->layers[layer];
    if (n_entries > L->cap_pending) {
        float *p = realloc(L->pending, sizeof(float) * (size_t)n_entries);
        if (!p) return; /* scores are advice: a lost observation only makes eviction less informed */
        L->pending = p;
        L->cap_pending = n_entries;
    }
    memcpy(L->pending, w, sizeof(float) * (size_t)n_entries);
    L->n_pending = n_entries;
    L->pending_queries = n_queries;
}

/* fold the pending weights into the scores of the committed entries */
static void apply_pending(kv_cache *c, kv_layer *L) {
    int e = 0;
    for (int i = 0; i < L->n_blocks && e < L->n_pending; i++) {
        kv_block *b = L->blocks[i];
        if (b->spilled) continue; /* not in the view */
        for (int j = 0; j < b->n && e < L->n_pending; j++, e++) {
            if (b->pos[j] >= c->commit_pos) continue;
            b->score[j] = c->policy->update(b->score[j], L->pending[e], L->pending_queries, c->cfg.recent_tokens);
            b->scored[j] = true;
        }
    }
    L->n_pending = 0;
}

/* Far enough from the budget (bytes and entries) that nothing will be evicted soon. */
static bool below_half_budget(const kv_cache *c) {
    const kv_stats st = kv_cache_stats(c);
    return (!c->cfg.budget_bytes || st.bytes < c->cfg.budget_bytes / 2) &&
           (!c->cfg.budget_tokens || st.tokens < c->cfg.budget_tokens / 2);
}

kv_iface kv_cache_iface(kv_cache *c) {
    kv_iface k = {.self = c, .append = cache_append, .view = cache_view};
    if (c->spill) k.queries = kv_spill_queries;
    bool observe = c->policy->observe == POLICY_OBSERVE_ALWAYS ||
                   (c->policy->observe == POLICY_OBSERVE_PREFILL && !c->prefill_observed);
    /* Scores only matter once eviction can happen: not at all without a
     * budget, and for a policy whose scores fade (morphkv) only from half
     * the budget on, long enough before the first eviction to be ranked. */
    if (observe && ((!c->cfg.budget_bytes && !c->cfg.budget_tokens) || c->held)) observe = false;
    if (observe && c->policy->recent_multiple && below_half_budget(c)) observe = false;
    if (observe) {
        k.observe = cache_observe;
        k.observe_last = c->policy->observe == POLICY_OBSERVE_PREFILL ? c->cfg.snap_window
                                                                       : c->policy->recent_multiple * c->cfg.recent_tokens;
    }
    return k;
}

/* ---------------------------------------------------------------- commit */

/* A sliding-window layer's blocks that no later query sees: every entry at
 * or below the next position - window, all committed, and a block's worth
 * older still (so that taking back up to KV_BLOCK tokens, as speculation and
 * a chat's unused tokens do, never needs a dropped entry). The oldest go
 * first (blocks hold ascending positions). */
static void drop_unseen(kv_cache *c, kv_layer *L) {
    const int32_t lowest_seen = c->commit_pos - L->window + 1 - KV_BLOCK;
    while (L->n_blocks > 1) {
        const kv_block *b = L->blocks[0];
        if (b->open || b->n == 0 || b->pos[b->n - 1] >= lowest_seen) break;
        if (b->pos[b->n - 1] + 1 > L->window_floor) L->window_floor = b->pos[b->n - 1] + 1;
        c->windowed += b->n;
        kv_remove_block(c, L, 0);
    }
}

/* One layer's commit: the last forward's weights into the scores, its
 * window, tiers by age, the budget (spill, then eviction), then a read-ahead
 * of what may come back. */
static err_code commit_layer(kv_cache *c, kv_layer *L, uint64_t limit, err_t *err) {
    L->limit_bytes = limit;
    if (L->n_pending) apply_pending(c, L);
    if (L->window) drop_unseen(c, L);
    err_code rc = kv_retier_layer(c, L, err);
    if (rc) return rc;
    if (!c->held && (limit || c->cfg.budget_tokens) && (rc = kv_evict(c, L, limit ? limit : UINT64_MAX, err)))
        return rc;
    kv_spill_prefetch_next(c, L);
    kv_layer_check(c, L);
    return ERR_OK;
}

static err_code apply_budget(kv_cache *c, err_t *err);

/* The budget is shared evenly, except that sliding-window layers (which
 * keep little) go first and what they leave of their share goes to the
 * others. */
err_code kv_cache_commit(kv_cache *c, int n, err_t *err) {
    if (n <= 0) return ERR_OK;
    c->commit_pos += n;
    if (c->policy->observe == POLICY_OBSERVE_PREFILL && !c->held) c->prefill_observed = true;
    return apply_budget(c, err);
}

void kv_cache_hold(kv_cache *c) { c->held = true; }

err_code kv_cache_release(kv_cache *c, const float *votes, int n_pos, int n_queries, err_t *err) {
    if (!c->held) return ERR_OK;
    c->held = false;
    c->prefill_observed = true; /* these were the prompt's votes */
    for (int l = 0; votes && l < c->n_layer; l++) {
        kv_layer *L = &c->layers[l];
        const float *v = votes + (size_t)l * (size_t)n_pos;
        for (int i = 0; i < L->n_blocks; i++) {
            kv_block *b = L->blocks[i];
            for (int j = 0; j < b->n && !b->spilled; j++) {
                const int32_t p = b->pos[j];
                if (p >= c->commit_pos || p >= n_pos) continue;
                b->score[j] = c->policy->update(b->score[j], v[p], n_queries, c->cfg.recent_tokens);
                b->scored[j] = true;
            }
        }
    }
    return apply_budget(c, err);
}

/* Every layer's commit (the budget shared as said above kv_cache_commit). */
static err_code apply_budget(kv_cache *c, err_t *err) {
    const uint64_t budget = c->cfg.budget_bytes, share = budget / (uint64_t)c->n_layer;
    uint64_t windowed = 0;
    int n_full = 0;
    for (int l = 0; l < c->n_layer; l++) {
        kv_layer *L = &c->layers[l];
        if (!L->window) {
            n_full++;
            continue;
        }
        err_code rc = commit_layer(c, L, share, err);
        if (rc) return rc;
        windowed += kv_layer_bytes(c, L);
    }
    const uint64_t rest = n_full && budget ? (budget - (windowed < budget ? windowed : budget)) / (uint64_t)n_full : 0;
    for (int l = 0; l < c->n_layer; l++) {
        if (c->layers[l].window) continue;
        err_code rc = commit_layer(c, &c->layers[l], budget ? (rest > share ? rest : share) : 0, err);
        if (rc) return rc;
    }
    return ERR_OK;
}

uint64_t kv_cache_set_budget(kv_cache *c, uint64_t bytes, err_t *err) {
    if (!c->policy->evicts) return 0;
    if (bytes && bytes < c->floor) bytes = c->floor;
    const bool smaller = bytes && (!c->cfg.budget_bytes || bytes < c->cfg.budget_bytes);
    c->cfg.budget_bytes = bytes;
    if (smaller && !c->held && c->commit_pos > 0) apply_budget(c, err); /* a spill that failed: err says why */
    return c->cfg.budget_bytes;
}

err_code kv_cache_set_cold(kv_cache *c, bool cold, err_t *err) {
    c->cfg.warm_tokens = cold ? c->cfg.hot_tokens : c->planned_warm;
    return cold && !c->held && c->commit_pos > 0 ? apply_budget(c, err) : ERR_OK;
}

/* ---------------------------------------------------------------- rollback */

static void drop_from(kv_cache *c, int32_t pos) {
    for (int l = 0; l < c->n_layer; l++) {
        kv_layer *L = &c->layers[l];
        if (L->window_floor > pos) L->window_floor = pos; /* what a window dropped above pos is truncated anyway */
        for (int i = 0; i < L->n_blocks; i++) {
            kv_block *b = L->blocks[i];
            if (b->spilled) {
                int keep = 0;
                for (int j = 0; j < b->n; j++) keep += b->pos[j] < pos;
                if (keep == b->n) continue;
                err_t e = {0};
                if (keep == 0) { /* all of it goes: no need to read it */
                    kv_remove_block(c, L, i--);
                    continue;
                }
                if (kv_restore_block(c, L, b, &e)) {
                    kv_drop_spilled(c, L, i--, &e);
                    continue;
                }
            }
            int w = 0;
            for (int j = 0; j < b->n; j++) {
                if (b->pos[j] >= pos) continue;
                if (w != j) kv_move_entry(c, b, w, j);
                w++;
            }
            if (w != b->n) {
                kv_block_touched(c, b);
                b->n = w;
                if (b->kmin && w) kv_block_bounds(c, b, NULL); /* allocates nothing: cannot fail */
            }
        }
        while (L->n_blocks && L->blocks[L->n_blocks - 1]->n == 0) kv_remove_block(c, L, L->n_blocks - 1);
        int held = 0; /* dropped entries were the newest: the end of the view order */
        for (int i = 0; i < L->n_blocks; i++) held += L->blocks[i]->n;
        if (L->n_pending > held) L->n_pending = held;
        /* the newest block takes appends again if it can */
        if (L->n_blocks) {
            kv_block *b = L->blocks[L->n_blocks - 1];
            b->open = kv_tier_of(c, b) == 0 && b->n < KV_BLOCK;
        }
        kv_layer_check(c, L);
    }
}

void kv_cache_rollback(kv_cache *c, int n) {
    if (n <= 0) return;
    /* tentative entries are the newest: positions from the highest one down */
    int32_t top = INT32_MIN;
    for (int i = 0; i < c->layers[0].n_blocks; i++) {
        const kv_block *b = c->layers[0].blocks[i];
        for (int j = 0; j < b->n; j++)
            if (b->pos[j] > top) top = b->pos[j];
    }
    int32_t from = top - n + 1;
    if (from < c->commit_pos) from = c->commit_pos;
    drop_from(c, from);
}

/* The entry of layer L at position pos, searched from the newest block. */
static bool find_entry(kv_layer *L, int32_t pos, kv_block **bo, int *jo) {
    for (int i = L->n_blocks - 1; i >= 0; i--) {
        kv_block *b = L->blocks[i];
        if (b->spilled) continue;
        for (int j = b->n - 1; j >= 0; j--)
            if (b->pos[j] == pos) return *bo = b, *jo = j, true;
    }
    return false;
}

/* Tentative entries sit in blocks at the hot type, rows by token: one moves
 * into another's place, which keeps its position. */
static void copy_entry(const kv_cache *c, kv_block *to, int tj, const kv_block *from, int fj) {
    memcpy(kv_krow(c, to, tj), kv_krow(c, from, fj), kv_row_bytes(to->k_type, c->k_dim));
    memcpy(kv_vrow(c, to, tj), kv_vrow(c, from, fj), kv_row_bytes(to->v_type, c->v_dim));
    to->score[tj] = from->score[fj];
    to->scored[tj] = from->scored[fj];
}

/* The weights the pass observed move with their entries: the tentative ones
 * are the view's last, slot by slot. */
static void keep_pending(const kv_cache *c, kv_layer *L, const int *slots, int m) {
    int in_view = 0, tentative = 0;
    for (int i = 0; i < L->n_blocks; i++) {
        const kv_block *b = L->blocks[i];
        if (b->spilled) continue;
        in_view += b->n;
        for (int j = 0; j < b->n; j++) tentative += b->pos[j] >= c->commit_pos;
    }
    if (L->n_pending != in_view) return; /* nothing observed this pass */
    for (int j = 0; j < m; j++) L->pending[in_view - tentative + j] = L->pending[in_view - tentative + slots[j]];
}

void kv_cache_keep_tentative(kv_cache *c, const int *slots, int m) {
    for (int l = 0; l < c->n_layer; l++) {
        kv_layer *L = &c->layers[l];
        keep_pending(c, L, slots, m);
        for (int j = 0; j < m; j++) {
            kv_block *tb, *fb;
            int tj, fj;
            if (slots[j] == j || !find_entry(L, c->commit_pos + j, &tb, &tj) ||
                !find_entry(L, c->commit_pos + slots[j], &fb, &fj))
                continue;
            copy_entry(c, tb, tj, fb, fj);
        }
    }
    drop_from(c, c->commit_pos + m);
}

uint32_t kv_cache_append_phases(const kv_cache *c, int tile) {
    uint32_t phases = 0;
    for (int l = 0; l < c->n_layer; l++) {
        const kv_layer *L = &c->layers[l];
        const kv_block *b = L->n_blocks ? L->blocks[L->n_blocks - 1] : NULL;
        const int next = b && b->open && b->n < KV_BLOCK ? b->n : 0; /* cache_append's rule */
        phases |= 1u << (next % tile);
    }
    return phases;
}

bool kv_cache_window_lost(const kv_cache *c, int32_t n) {
    for (int l = 0; l < c->n_layer; l++) {
        const kv_layer *L = &c->layers[l];
        if (L->window && L->window_floor > n - L->window + 1 && L->window_floor > 0) return true;
    }
    return false;
}

void kv_cache_truncate(kv_cache *c, int32_t pos) {
    if (pos < 0) pos = 0;
    drop_from(c, pos);
    if (c->commit_pos > pos) c->commit_pos = pos;
}

uint64_t kv_cache_bytes_with(const kv_cache *c, int n) {
    const uint64_t row = (uint64_t)c->n_layer * (kv_row_bytes(c->cfg.hot_type, c->k_dim) + kv_row_bytes(c->cfg.hot_type, c->v_dim));
    return kv_cache_stats(c).bytes + (uint64_t)n * row;
}

int kv_cache_exact_rows(const kv_cache *c) {
    const int64_t at = kv_tier_next_change(c), rows = at == INT64_MAX ? INT_MAX : at - c->commit_pos;
    return rows < 1 ? 1 : rows > INT_MAX ? INT_MAX : (int)rows;
}

bool kv_cache_fits(const kv_cache *c, int n) {
    if (c->cfg.budget_tokens && kv_cache_stats(c).tokens + n > c->cfg.budget_tokens) return false;
    return !c->cfg.budget_bytes || kv_cache_bytes_with(c, n) <= c->cfg.budget_bytes;
}

kv_stats kv_cache_stats(const kv_cache *c) {
    kv_stats s = {.budget = c->cfg.budget_bytes, .tokens_evicted = c->evicted / c->n_layer, .tokens_windowed = c->windowed,
                  .requantized = c->requantized, .spill_on = c->spill != NULL, .spill_clean = c->spill_clean,
                  .spill_hits = c->spill_hits, .spill_errors = c->spill_errors, .spill_dropped = c->spill_dropped, .spill_prefetch_hits = c->spill_prefetch_hits};
    snprintf(s.spill_note, sizeof s.spill_note, "%s", c->spill_note);
    if (c->spill) {
        const spill_stats ss = spill_get_stats(c->spill);
        s.spill_writes = ss.writes;
        s.spill_reads = ss.reads;
        s.spill_prefetches = ss.prefetches;
        s.spill_read_ns = ss.read_ns;
        s.spill_file_bytes = ss.file_bytes;
    }
    for (int l = 0; l < c->n_layer; l++) {
        const kv_layer *L = &c->layers[l];
        int64_t held = 0;
        for (int i = 0; i < L->n_blocks; i++) {
            const kv_block *b = L->blocks[i];
            int n = 0;
            for (int j = 0; j < b->n; j++) {
                if (b->pos[j] < c->commit_pos) n++;
                else if (l == 0) s.tentative++;
            }
            const uint64_t bytes = kv_block_cost(c, b, n);
            s.bytes += bytes;
            s.entry_bytes += b->spilled ? 0 : kv_block_bytes(c, b->k_type, b->v_type, n);
            if (!b->spilled) s.mapped_bytes += b->mem_bytes;
            s.blocks_spilled += b->spilled;
            const int t = kv_tier_of(c, b);
            if (t == 0) s.bytes_hot += bytes;
            else if (t == 1) s.bytes_warm += bytes;
            else s.bytes_cold += bytes;
            held += n;
        }
        if (held > s.tokens) s.tokens = held;
    }
    return s;
}
