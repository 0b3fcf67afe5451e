/*
 * kv_spill_rank — which cold blocks the KV cache moves to its spill file
 * (spill.h stores them) and which come back. Over budget, the block whose
 * keys the layer's latest query can score least goes first: Quest's bound,
 * from each key channel's minimum and maximum over the block, kept in memory
 * (before any query, the policy's mean rank of its entries). Before each
 * attention, when a spilled block's bound under the new query beats the
 * lowest resident cold block's, the two trade places: one read, and one
 * write unless the leaving block is still on file unchanged. The block the
 * query bounds highest is read ahead in the background for the next one.
 * Failures degrade: a failed write means eviction from then on, a failed
 * read drops the block as evicted.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kv_internal.h"

void kv_spill_failed(kv_cache *c, const err_t *e) {
    c->spill_errors++;
    snprintf(c->spill_note, sizeof c->spill_note, "%.159s", e->msg);
}

err_code kv_block_bounds(kv_cache *c, kv_block *b, err_t *err) {
    if (!b->kmin) {
        b->kmin = malloc(sizeof(fp16_t) * (size_t)c->k_dim);
        b->kmax = malloc(sizeof(fp16_t) * (size_t)c->k_dim);
        if (!b->kmin || !b->kmax) {
            free(b->kmin), free(b->kmax);
            b->kmin = b->kmax = NULL;
            return err_set(err, ERR_NOMEM, "out of memory for KV block bounds");
        }
    }
    b->stale = false;
    float *lo = c->f32 + (size_t)c->k_dim, *hi = lo + c->k_dim; /* (f32 holds a block of rows: room) */
    for (int d = 0; d < c->k_dim; d++) lo[d] = INFINITY, hi[d] = -INFINITY;
    for (int j = 0; j < b->n; j++) {
        kv_key_f32(c, b, j, c->f32);
        for (int d = 0; d < c->k_dim; d++) {
            lo[d] = fminf(lo[d], c->f32[d]);
            hi[d] = fmaxf(hi[d], c->f32[d]);
        }
    }
    for (int d = 0; d < c->k_dim; d++) b->kmin[d] = fp32_to_fp16(lo[d]), b->kmax[d] = fp32_to_fp16(hi[d]);
    return ERR_OK;
}

/* Quest's upper bound on the score any key of b can get from query row q:
 * per head, sum over its channels of max(q*min, q*max); the best head. */
static float block_bound(const kv_cache *c, const kv_block *b, const float *q) {
    const int group = c->n_head / (c->k_dim / c->head_dim);
    float best = -INFINITY;
    for (int h = 0; h < c->n_head; h++) {
        const float *qh = q + (size_t)h * c->head_dim;
        const fp16_t *lo = b->kmin + (size_t)(h / group) * c->head_dim, *hi = b->kmax + (size_t)(h / group) * c->head_dim;
        float s = 0.0f;
        for (int i = 0; i < c->head_dim; i++) s += fmaxf(qh[i] * fp16_to_fp32(lo[i]), qh[i] * fp16_to_fp32(hi[i]));
        best = fmaxf(best, s);
    }
    return best;
}

/* The best score q gives any key of resident block b (the bound's truth). */
static float block_best(kv_cache *c, const kv_block *b, const float *q) {
    const int group = c->n_head / (c->k_dim / c->head_dim);
    float best = -INFINITY;
    for (int j = 0; j < b->n; j++) {
        kv_key_f32(c, b, j, c->f32);
        for (int h = 0; h < c->n_head; h++) {
            const float *qh = q + (size_t)h * c->head_dim, *k = c->f32 + (size_t)(h / group) * c->head_dim;
            float s = 0.0f;
            for (int i = 0; i < c->head_dim; i++) s += qh[i] * k[i];
            best = fmaxf(best, s);
        }
    }
    return best;
}

/* A resident block that may go to the file: cold, closed, committed, and
 * holding no anchor and no entry of the recent window. */
static bool spillable(const kv_cache *c, const kv_block *b) {
    if (b->spilled || b->open || !b->n || !b->kmin) return false;
    for (int j = 0; j < b->n; j++) {
        const int32_t p = b->pos[j];
        if (p < c->cfg.anchor_tokens || p >= c->commit_pos || c->commit_pos - 1 - p < c->cfg.recent_tokens) return false;
    }
    return true;
}

/* The bound under the layer's newest query, or before any query the
 * policy's mean rank of the entries. */
double kv_spill_rank(const kv_cache *c, const kv_layer *L, const kv_block *b) {
    if (L->have_q) return block_bound(c, b, L->last_q);
    double s = 0.0;
    for (int j = 0; j < b->n; j++) s += c->policy->rank(b->score[j], b->scored[j], b->pos[j]);
    return s / b->n;
}

/* Resident b to the file: written unless its slot still holds it. */
static err_code spill_block(kv_cache *c, kv_layer *L, kv_block *b, err_t *err) {
    if (b->slot < 0) {
        err_code rc = spill_put(c->spill, b->mem, b->mem_bytes, &b->slot, err);
        if (rc) return rc;
    } else c->spill_clean++;
    munmap(b->mem, b->mem_bytes);
    b->mem = NULL;
    b->spilled = true;
    L->n_spilled++;
    return ERR_OK;
}

err_code kv_restore_block(kv_cache *c, kv_layer *L, kv_block *b, err_t *err) {
    void *p = mmap(NULL, b->mem_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return err_set(err, ERR_NOMEM, "out of memory reading a KV block back");
    err_code rc = spill_get(c->spill, b->slot, p, b->mem_bytes, err);
    if (rc) {
        munmap(p, b->mem_bytes);
        return rc;
    }
    b->mem = p;
    b->spilled = false;
    L->n_spilled--;
    return ERR_OK;
}

void kv_drop_spilled(kv_cache *c, kv_layer *L, int i, const err_t *e) {
    kv_spill_failed(c, e);
    c->spill_dropped++;
    c->evicted += L->blocks[i]->n;
    kv_remove_block(c, L, i);
}

void kv_spill_over(kv_cache *c, kv_layer *L, uint64_t limit) {
    uint64_t bytes = kv_layer_bytes(c, L);
    while (bytes > limit && c->spill && !c->spill_full) {
        int pick = -1;
        double low = INFINITY;
        for (int i = 0; i < L->n_blocks; i++) {
            const kv_block *b = L->blocks[i];
            if (!spillable(c, b)) continue;
            const double r = kv_spill_rank(c, L, b);
            if (pick < 0 || r < low) pick = i, low = r;
        }
        if (pick < 0) return;
        err_t e = {0};
        if (spill_block(c, L, L->blocks[pick], &e)) {
            kv_spill_failed(c, &e); /* a full disk or a write error: eviction from now on */
            c->spill_full = true;
            return;
        }
        bytes = kv_layer_bytes(c, L);
    }
}

/* The layer's queries, before its attention: keep the newest row (it ranks
 * blocks for spilling), and when a spilled block's bound beats the lowest
 * resident cold block's, trade them. At most one trade per layer and
 * forward; failures degrade (a failed read drops the block). */
void kv_spill_queries(void *self, int layer, int n, const float *q) {
    kv_cache *c = self;
    kv_layer *L = &c->layers[layer];
    const size_t q_dim = (size_t)c->n_head * (size_t)c->head_dim;
    memcpy(L->last_q, q + (size_t)(n - 1) * q_dim, sizeof(float) * q_dim);
    L->have_q = true;
    if (!L->n_spilled) return;
    int s = -1, r = -1;
    float bs = -INFINITY, br = INFINITY;
    for (int i = 0; i < L->n_blocks; i++) {
        const kv_block *b = L->blocks[i];
        if (b->spilled) {
            const float f = block_bound(c, b, L->last_q);
            if (s < 0 || f > bs) s = i, bs = f;
        } else if (spillable(c, b)) {
            const float f = block_bound(c, b, L->last_q);
            if (r < 0 || f < br) r = i, br = f;
        }
    }
    const uint64_t limit = L->limit_bytes; /* the commit's share: one rule for both (kv_cache.c: apply_budget) */
    kv_block *S = L->blocks[s], *R = r >= 0 ? L->blocks[r] : NULL;
    if (R ? !(bs > br) : kv_layer_bytes(c, L) + kv_block_bytes(c, S->k_type, S->v_type, S->n) > limit) return;
    if (R && c->spill_full && R->slot < 0) return; /* R could not leave */
    err_t e = {0};
    c->spill_prefetch_hits += S->slot == L->prefetched;
    if (kv_restore_block(c, L, S, &e)) {
        kv_drop_spilled(c, L, s, &e);
        return;
    }
    if (R) {
        if (block_best(c, S, L->last_q) > block_best(c, R, L->last_q)) c->spill_hits++;
        if (spill_block(c, L, R, &e)) {
            kv_spill_failed(c, &e);
            c->spill_full = true;
        }
    }
    if (kv_layer_bytes(c, L) > limit) kv_evict(c, L, limit, &e); /* S larger than R, or R stayed */
}

/* Queries move slowly from one token to the next: the spilled block the
 * newest query bounds highest is the likeliest to be read back at the next
 * forward. Its read starts now, in the background (the system's read-ahead
 * into the page cache), so the trade before that attention finds it there. */
void kv_spill_prefetch_next(kv_cache *c, kv_layer *L) {
    if (!L->n_spilled || !L->have_q) return;
    int best = -1;
    float hi = -INFINITY;
    for (int i = 0; i < L->n_blocks; i++)
        if (L->blocks[i]->spilled) {
            const float f = block_bound(c, L->blocks[i], L->last_q);
            if (best < 0 || f > hi) best = i, hi = f;
        }
    if (best >= 0 && L->blocks[best]->slot != L->prefetched) {
        spill_prefetch(c->spill, L->blocks[best]->slot);
        L->prefetched = L->blocks[best]->slot;
    }
}
