/*
 * kv_cache — see kv_cache.h.
 *
 * Per layer, an array of blocks in append order. The newest block is "open"
 * (it takes appends) while it has room and is at hot_type. Entries are
 * committed when their position is below commit_pos; positions of tentative
 * entries are always the highest (they were appended last).
 */
#include "kv_cache.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/attn.h"
#include "core/quant.h"
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
} kv_layer;

struct kv_cache {
    kv_config cfg;
    const kv_policy *policy;
    int n_layer, k_dim, v_dim, n_head, head_dim;
    kv_layer *layers;
    int32_t commit_pos;    /* entries at positions below are committed */
    bool prefill_observed; /* SnapKV has voted */
    int64_t evicted, requantized;
    float *f32;            /* scratch: one block of rows as F32 */
    spill_store *spill;    /* NULL: no spill */
    bool spill_full;       /* a write found no space: no more writes until a slot frees */
    int64_t spill_clean, spill_hits, spill_errors, spill_dropped, spill_prefetch_hits;
    char spill_note[160];
};

static const kv_policy *policy_of(kv_policy_id id) {
    switch (id) {
    case KV_POLICY_NONE: return &kv_policy_none;
    case KV_POLICY_WINDOW: return &kv_policy_window;
    case KV_POLICY_H2O: return &kv_policy_h2o;
    case KV_POLICY_SNAPKV: return &kv_policy_snapkv;
    case KV_POLICY_MORPHKV: return &kv_policy_morphkv;
    }
    return NULL;
}

const char *kv_policy_name(kv_policy_id p) {
    const kv_policy *k = policy_of(p);
    return k ? k->name : "?";
}

int kv_policy_from_name(const char *name) {
    for (int p = KV_POLICY_NONE; p <= KV_POLICY_MORPHKV; p++)
        if (!strcmp(name, kv_policy_name((kv_policy_id)p))) return p;
    return -1;
}

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

static size_t row_bytes(uint32_t type, int dim) { return quant_row_bytes(type, dim); }

uint64_t kv_token_bytes(const model_hparams *hp, uint32_t type) {
    return (uint64_t)hp->n_layer * (row_bytes(type, hp->n_head_kv * hp->head_dim) +
                                    row_bytes(type, hp->n_head_kv * hp->head_dim_v));
}

static bool by_channel(uint32_t t) { return t == ATTN_KC8 || t == ATTN_KC4; }

/* bytes between entries (rows) or, for keys by channel, between channels */
static size_t k_stride(const kv_cache *c, uint32_t t) {
    return by_channel(t) ? attn_kc_channel_bytes(t, KV_BLOCK) : row_bytes(t, c->k_dim);
}
static size_t k_area(const kv_cache *c, uint32_t t) {
    return by_channel(t) ? (size_t)c->k_dim * k_stride(c, t) : KV_BLOCK * k_stride(c, t);
}

/* The bytes n entries of a block take: what the budget counts. */
static uint64_t block_bytes(const kv_cache *c, uint32_t kt, uint32_t vt, int n) {
    if (n == 0) return 0;
    /* keys by channel: each channel's step and minimum, then n quants (KC4: half a byte each; k_dim is even) */
    const uint64_t k = by_channel(kt) ? (uint64_t)c->k_dim * 4 + (uint64_t)n * c->k_dim / (kt == ATTN_KC8 ? 1 : 2)
                                      : (uint64_t)n * row_bytes(kt, c->k_dim);
    return k + (uint64_t)n * row_bytes(vt, c->v_dim);
}

/* ---------------------------------------------------------------- blocks */

uint64_t kv_budget_floor(const model_hparams *hp, const kv_config *cfg) {
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    const int k_dim = hp->n_head_kv * hp->head_dim, v_dim = hp->n_head_kv * hp->head_dim_v;
    const uint64_t block = ((uint64_t)KV_BLOCK * (row_bytes(cfg->hot_type, k_dim) + row_bytes(cfg->hot_type, v_dim)) +
                            page - 1) / page * page + sizeof(kv_block); /* what block_cost charges */
    const uint64_t anchors = ((uint64_t)cfg->anchor_tokens + KV_BLOCK - 1) / KV_BLOCK;
    const uint64_t recent = ((uint64_t)cfg->recent_tokens + KV_BLOCK - 1) / KV_BLOCK;
    return (uint64_t)hp->n_layer * (anchors + recent + 1) * block;
}

/* A block's mapping: KV_BLOCK entries' keys and values, whole pages (also a spill slot's payload). */
static size_t block_mem_bytes(const kv_cache *c, uint32_t kt, uint32_t vt) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (k_area(c, kt) + KV_BLOCK * row_bytes(vt, c->v_dim) + page - 1) / page * page;
}

static kv_block *block_new(const kv_cache *c, uint32_t kt, uint32_t vt) {
    kv_block *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->mem_bytes = block_mem_bytes(c, kt, vt);
    void *p = mmap(NULL, b->mem_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        free(b);
        return NULL;
    }
    b->mem = p;
    b->k_type = kt;
    b->v_type = vt;
    b->slot = -1;
    return b;
}

static void block_free(kv_block *b) {
    if (!b) return;
    if (b->mem) munmap(b->mem, b->mem_bytes); /* the pages go back to the system at once */
    free(b->kmin);
    free(b->kmax);
    free(b);
}

/* A block holding anchors lives as long as the cache: offer its pages to
 * the kernel's same-page merging (KSM), which shares them between processes
 * running the same prompt prefix (where the system has it on; advice only). */
static void mark_anchor(const kv_cache *c, kv_block *b) {
#ifdef MADV_MERGEABLE
    if (b->n && b->mem && b->pos[0] < c->cfg.anchor_tokens) madvise(b->mem, b->mem_bytes, MADV_MERGEABLE);
#else
    (void)c, (void)b;
#endif
}

/* b's bytes change: a copy on file no longer matches */
static void block_touched(kv_cache *c, kv_block *b) {
    if (b->slot >= 0 && c->spill) spill_release(c->spill, b->slot);
    b->slot = -1;
}

static uint8_t *krow(const kv_cache *c, const kv_block *b, int i) { /* per-token keys only */
    return b->mem + (size_t)i * row_bytes(b->k_type, c->k_dim);
}
static uint8_t *vrow(const kv_cache *c, const kv_block *b, int i) {
    return b->mem + k_area(c, b->k_type) + (size_t)i * row_bytes(b->v_type, c->v_dim);
}

/* n rows of dim floats into rows of type */
static void store_rows(uint32_t type, const float *src, int n, int dim, uint8_t *dst) {
    const size_t rb = row_bytes(type, dim);
    for (int i = 0; i < n; i++) {
        const float *x = src + (size_t)i * dim;
        uint8_t *d = dst + (size_t)i * rb;
        if (type == QT_F32) memcpy(d, x, sizeof(float) * (size_t)dim);
        else if (type == QT_F16)
            for (int j = 0; j < dim; j++) ((fp16_t *)d)[j] = fp32_to_fp16(x[j]);
        else quant_quantize_row(type, x, d, dim);
    }
}

/* entry i's key row as floats */
static void key_f32(const kv_cache *c, const kv_block *b, int i, float *out) {
    if (by_channel(b->k_type))
        for (int d = 0; d < c->k_dim; d++) out[d] = attn_kc_value(b->k_type, b->mem, k_stride(c, b->k_type), d, i);
    else quant_dequantize_row(b->k_type, krow(c, b, i), out, c->k_dim);
}

/* Move entry `from` to slot `to` of the same block (to < from). */
static void move_entry(const kv_cache *c, kv_block *b, int to, int from) {
    b->pos[to] = b->pos[from];
    b->score[to] = b->score[from];
    b->scored[to] = b->scored[from];
    memcpy(vrow(c, b, to), vrow(c, b, from), row_bytes(b->v_type, c->v_dim));
    if (!by_channel(b->k_type)) {
        memcpy(krow(c, b, to), krow(c, b, from), row_bytes(b->k_type, c->k_dim));
        return;
    }
    const size_t cb = k_stride(c, b->k_type);
    for (int d = 0; d < c->k_dim; d++) {
        uint8_t *q = b->mem + (size_t)d * cb + 4;
        if (b->k_type == ATTN_KC8) q[to] = q[from];
        else {
            const uint8_t v = (q[from / 2] >> (from % 2 ? 4 : 0)) & 15;
            q[to / 2] = (uint8_t)((q[to / 2] & (to % 2 ? 0x0F : 0xF0)) | v << (to % 2 ? 4 : 0));
        }
    }
}

/* Append src's entries to dst (the same types: merging). Keys by channel
 * share a scale per channel over their block, so merged ones are quantized
 * again over the union, from their values (c->f32 holds KV_BLOCK rows). */
static void append_entries(const kv_cache *c, kv_block *dst, const kv_block *src) {
    const int n = dst->n + src->n;
    if (by_channel(dst->k_type)) {
        for (int j = 0; j < dst->n; j++) key_f32(c, dst, j, c->f32 + (size_t)j * c->k_dim);
        for (int j = 0; j < src->n; j++) key_f32(c, src, j, c->f32 + (size_t)(dst->n + j) * c->k_dim);
        attn_kc_quantize(dst->k_type, c->f32, n, c->k_dim, KV_BLOCK, dst->mem);
    } else {
        memcpy(krow(c, dst, dst->n), krow(c, src, 0), (size_t)src->n * row_bytes(src->k_type, c->k_dim));
    }
    memcpy(dst->pos + dst->n, src->pos, sizeof(int32_t) * (size_t)src->n);
    memcpy(dst->score + dst->n, src->score, sizeof(float) * (size_t)src->n);
    memcpy(dst->scored + dst->n, src->scored, sizeof(bool) * (size_t)src->n);
    memcpy(vrow(c, dst, dst->n), vrow(c, src, 0), (size_t)src->n * row_bytes(src->v_type, c->v_dim));
    dst->n = n;
}

/* Append a block; the view's span list grows with it, so view() never allocates. */
static err_code push_block(kv_layer *L, kv_block *b, err_t *err) {
    if (L->n_blocks == L->cap_blocks) {
        int cap = L->cap_blocks ? 2 * L->cap_blocks : 16;
        kv_block **p = realloc(L->blocks, sizeof *p * (size_t)cap);
        kv_span *sp = p ? realloc(L->spans, sizeof *sp * (size_t)cap) : NULL;
        if (p) L->blocks = p;
        if (!sp) return err_set(err, ERR_NOMEM, "out of memory for the KV cache");
        L->spans = sp;
        L->cap_blocks = cap;
    }
    L->blocks[L->n_blocks++] = b;
    return ERR_OK;
}

static void remove_block(kv_cache *c, kv_layer *L, int i) {
    kv_block *b = L->blocks[i];
    if (b->spilled) L->n_spilled--;
    block_touched(c, b);
    block_free(b);
    memmove(L->blocks + i, L->blocks + i + 1, sizeof *L->blocks * (size_t)(L->n_blocks - i - 1));
    L->n_blocks--;
}

/* What a block holding n committed entries costs the budget: in memory, its
 * whole mapping of KV_BLOCK entries, in pages (they stay resident
 * however few entries are left: the budget bounds memory, not a count), its
 * own bookkeeping, and its key bounds (cold blocks, with spill). A block of tentative entries
 * only costs nothing until they are committed. */
static uint64_t block_cost(const kv_cache *c, const kv_block *b, int n) {
    return (b->spilled || !n ? 0 : b->mem_bytes) + (n ? sizeof *b : 0) +
           (b->kmin ? 2ull * (uint64_t)c->k_dim * sizeof(fp16_t) : 0);
}

/* Can evict() merge nx into b (neighbours at rest in memory, of one layout)? */
static bool mergeable(const kv_block *b, const kv_block *nx) {
    return !b->open && !nx->open && !b->spilled && !nx->spilled && nx->k_type == b->k_type && nx->v_type == b->v_type;
}

static int committed_in(const kv_cache *c, const kv_block *b) {
    int n = 0;
    for (int j = 0; j < b->n; j++) n += b->pos[j] < c->commit_pos;
    return n;
}

/* What the layer's committed entries cost the budget now. */
static uint64_t layer_bytes(const kv_cache *c, const kv_layer *L) {
    uint64_t s = 0;
    for (int i = 0; i < L->n_blocks; i++) s += block_cost(c, L->blocks[i], committed_in(c, L->blocks[i]));
    return s;
}

/* ---------------------------------------------------------------- spill */

static void spill_failed(kv_cache *c, const err_t *e) {
    c->spill_errors++;
    snprintf(c->spill_note, sizeof c->spill_note, "%.159s", e->msg);
}

/* Each key channel's minimum and maximum over the block's entries. */
static err_code block_bounds(kv_cache *c, kv_block *b, err_t *err) {
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
        key_f32(c, b, j, c->f32);
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
        key_f32(c, b, j, c->f32);
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

/* Lower goes to the file first: the bound under the layer's newest query,
 * or before any query the policy's mean rank of the entries. */
static double spill_rank(const kv_cache *c, const kv_layer *L, const kv_block *b) {
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

/* Spilled b back into memory (keeping its slot); on failure it stays spilled. */
static err_code restore_block(kv_cache *c, kv_layer *L, kv_block *b, err_t *err) {
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

/* A spilled block whose read failed: its entries are evicted. */
static void drop_spilled(kv_cache *c, kv_layer *L, int i, const err_t *e) {
    spill_failed(c, e);
    c->spill_dropped++;
    c->evicted += L->blocks[i]->n;
    remove_block(c, L, i);
}

/* While over limit, move the lowest-ranked spillable blocks to the file. */
static void spill_over(kv_cache *c, kv_layer *L, uint64_t limit) {
    uint64_t bytes = layer_bytes(c, L);
    while (bytes > limit && c->spill && !c->spill_full) {
        int pick = -1;
        double low = INFINITY;
        for (int i = 0; i < L->n_blocks; i++) {
            const kv_block *b = L->blocks[i];
            if (!spillable(c, b)) continue;
            const double r = spill_rank(c, L, b);
            if (pick < 0 || r < low) pick = i, low = r;
        }
        if (pick < 0) return;
        err_t e = {0};
        if (spill_block(c, L, L->blocks[pick], &e)) {
            spill_failed(c, &e); /* a full disk or a write error: eviction from now on */
            c->spill_full = true;
            return;
        }
        bytes = layer_bytes(c, L);
    }
}

/* ---------------------------------------------------------------- create */

static void tier_types(const kv_cache *c, int t, uint32_t *kt, uint32_t *vt);

err_code kv_cache_new(const model_hparams *hp, const kv_config *cfg, kv_cache **out, err_t *err) {
    *out = NULL;
    kv_config k = cfg ? *cfg : kv_config_default();
    const int k_dim = hp->n_head_kv * hp->head_dim, v_dim = hp->n_head_kv * hp->head_dim_v;
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
    if (k.hot_tokens < 0 || k.warm_tokens < k.hot_tokens || k.anchor_tokens < 0 || k.recent_tokens < 0 ||
        k.snap_window < 0)
        return err_set(err, ERR_INVALID_ARG, "KV tier windows must satisfy 0 <= hot <= warm (got hot %d, warm %d)",
                       k.hot_tokens, k.warm_tokens);
    const kv_policy *pol = policy_of(k.policy);
    if (!pol) return err_set(err, ERR_INVALID_ARG, "unknown KV eviction policy %d", (int)k.policy);
    if (!pol->evicts) k.budget_bytes = 0;
    if (k.budget_bytes) {
        const uint64_t floor = kv_budget_floor(hp, &k);
        if (k.budget_bytes < floor)
            return err_set(err, ERR_INVALID_ARG,
                           "a KV budget of %llu bytes cannot hold %d anchor and %d recent tokens (%llu bytes needed)",
                           (unsigned long long)k.budget_bytes, k.anchor_tokens, k.recent_tokens,
                           (unsigned long long)floor);
    }
    kv_cache *c = calloc(1, sizeof *c);
    if (!c) return err_set(err, ERR_NOMEM, "out of memory");
    c->cfg = k;
    c->policy = pol;
    c->n_layer = hp->n_layer;
    c->k_dim = k_dim;
    c->v_dim = v_dim;
    c->n_head = hp->n_head;
    c->head_dim = hp->head_dim;
    c->layers = calloc((size_t)hp->n_layer, sizeof *c->layers);
    c->f32 = malloc(sizeof(float) * KV_BLOCK * (size_t)(k_dim > v_dim ? k_dim : v_dim));
    if (!c->layers || !c->f32) {
        kv_cache_free(c);
        return err_set(err, ERR_NOMEM, "out of memory");
    }
    /* spill: only with a budget to keep; a directory that cannot take the
     * file leaves the cache working, evicting instead (the stats say why) */
    if (k.spill_dir && k.budget_bytes) {
        uint32_t kt, vt;
        tier_types(c, 2, &kt, &vt);
        err_t e = {0};
        if (spill_open(k.spill_dir, block_mem_bytes(c, kt, vt), k.spill_max_bytes, &c->spill, &e)) spill_failed(c, &e);
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
        for (int i = 0; i < L->n_blocks; i++) block_free(L->blocks[i]);
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
            if (!(b = block_new(c, c->cfg.hot_type, c->cfg.hot_type))) /* the caller rolls the tentative entries back */
                return err_set(err, ERR_NOMEM, "out of memory for the KV cache");
            b->open = true;
            err_code rc = push_block(L, b, err);
            if (rc) {
                block_free(b);
                return rc;
            }
        }
        const int take = KV_BLOCK - b->n < n ? KV_BLOCK - b->n : n;
        const int done = n0 - n;
        store_rows(b->k_type, k + (size_t)done * c->k_dim, take, c->k_dim, krow(c, b, b->n));
        store_rows(b->v_type, v + (size_t)done * c->v_dim, take, c->v_dim, vrow(c, b, b->n));
        memcpy(b->pos + b->n, pos + done, sizeof(int32_t) * (size_t)take);
        memset(b->score + b->n, 0, sizeof(float) * (size_t)take);
        memset(b->scored + b->n, 0, sizeof(bool) * (size_t)take);
        b->n += take;
        if (b->n == take) mark_anchor(c, b); /* a new block */
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
            .n_tokens = b->n, .pos = b->pos, .k_type = b->k_type, .v_type = b->v_type, .k = b->mem,
            .v = vrow(c, b, 0), .k_row_bytes = k_stride(c, b->k_type), .v_row_bytes = row_bytes(b->v_type, c->v_dim),
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

static void cache_queries(void *self, int layer, int n, const float *q);

kv_iface kv_cache_iface(kv_cache *c) {
    kv_iface k = {.self = c, .append = cache_append, .view = cache_view};
    if (c->spill) k.queries = cache_queries;
    bool observe = c->policy->observe == POLICY_OBSERVE_ALWAYS ||
                   (c->policy->observe == POLICY_OBSERVE_PREFILL && !c->prefill_observed);
    /* Scores only matter once eviction can happen: not at all without a
     * budget, and for a policy whose scores fade (morphkv) only from half
     * the budget on, long enough before the first eviction to be ranked. */
    if (observe && !c->cfg.budget_bytes) observe = false;
    if (observe && c->policy->recent_multiple && kv_cache_stats(c).bytes < c->cfg.budget_bytes / 2) observe = false;
    if (observe) {
        k.observe = cache_observe;
        k.observe_last = c->policy->observe == POLICY_OBSERVE_PREFILL ? c->cfg.snap_window
                                                                       : c->policy->recent_multiple * c->cfg.recent_tokens;
    }
    return k;
}

/* ---------------------------------------------------------------- commit */

/* the key and value types of tier t (0 hot, 1 warm, 2 cold) */
static void tier_types(const kv_cache *c, int t, uint32_t *kt, uint32_t *vt) {
    const uint32_t v = t == 0 ? c->cfg.hot_type : t == 1 ? c->cfg.warm_type : c->cfg.cold_type;
    *vt = v;
    *kt = v;
    if (c->cfg.key_channels && v != c->cfg.hot_type) *kt = v == QT_Q8_0 ? ATTN_KC8 : ATTN_KC4;
}

static int tier_for_age(const kv_cache *c, int64_t age) {
    return age < c->cfg.hot_tokens ? 0 : age < c->cfg.warm_tokens ? 1 : 2;
}

static int tier_of(const kv_cache *c, const kv_block *b) {
    for (int t = 0; t < 3; t++) {
        uint32_t kt, vt;
        tier_types(c, t, &kt, &vt);
        if (kt == b->k_type && vt == b->v_type) return t;
    }
    return 2;
}

/* Re-lay block i at the types of tier t, from its values as floats. */
static err_code requantize(kv_cache *c, kv_layer *L, int i, int t, err_t *err) {
    kv_block *old = L->blocks[i], *b;
    uint32_t kt, vt;
    tier_types(c, t, &kt, &vt);
    if (!(b = block_new(c, kt, vt))) return err_set(err, ERR_NOMEM, "out of memory re-quantizing the KV cache");
    const int n = old->n;
    for (int j = 0; j < n; j++) key_f32(c, old, j, c->f32 + (size_t)j * c->k_dim);
    if (by_channel(kt)) attn_kc_quantize(kt, c->f32, n, c->k_dim, KV_BLOCK, b->mem);
    else store_rows(kt, c->f32, n, c->k_dim, krow(c, b, 0));
    for (int j = 0; j < n; j++) quant_dequantize_row(old->v_type, vrow(c, old, j), c->f32 + (size_t)j * c->v_dim, c->v_dim);
    store_rows(vt, c->f32, n, c->v_dim, vrow(c, b, 0));
    memcpy(b->pos, old->pos, sizeof(int32_t) * (size_t)n);
    memcpy(b->score, old->score, sizeof(float) * (size_t)n);
    memcpy(b->scored, old->scored, sizeof(bool) * (size_t)n);
    b->n = n;
    b->open = false;
    mark_anchor(c, b);
    L->blocks[i] = b;
    block_touched(c, old);
    block_free(old);
    c->requantized++;
    if (t == 2 && c->spill) return block_bounds(c, b, err);
    return ERR_OK;
}

typedef struct {
    double rank;
    int block, slot;
} victim;

static int by_rank(const void *a, const void *b) {
    const victim *x = a, *y = b;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* The layer's cost once evict() has compacted its blocks to left[i]
 * committed entries each and merged neighbours that fit together. */
static uint64_t merged_cost(const kv_cache *c, const kv_layer *L, const int *left) {
    uint64_t s = 0;
    for (int i = 0; i < L->n_blocks;) {
        const kv_block *b = L->blocks[i];
        int64_t n = left[i];
        int j = i + 1;
        if (by_channel(b->k_type)) { /* whole neighbours, while they fit */
            for (; j < L->n_blocks && mergeable(b, L->blocks[j]) && n + left[j] <= KV_BLOCK; j++) n += left[j];
            s += n ? block_cost(c, b, (int)n) : 0; /* an emptied block goes */
        } else { /* a run of one per-token type is packed densely */
            for (; j < L->n_blocks && mergeable(b, L->blocks[j]); j++) n += left[j];
            s += (uint64_t)((n + KV_BLOCK - 1) / KV_BLOCK) * block_cost(c, b, 1);
        }
        i = j;
    }
    return s;
}

/* Move the first k entries of src to the end of dst (per-token rows of one type). */
static void take_front(const kv_cache *c, kv_block *dst, kv_block *src, int k) {
    const size_t kb = row_bytes(src->k_type, c->k_dim), vb = row_bytes(src->v_type, c->v_dim);
    const int rest = src->n - k;
    memcpy(krow(c, dst, dst->n), krow(c, src, 0), (size_t)k * kb);
    memcpy(vrow(c, dst, dst->n), vrow(c, src, 0), (size_t)k * vb);
    memcpy(dst->pos + dst->n, src->pos, sizeof(int32_t) * (size_t)k);
    memcpy(dst->score + dst->n, src->score, sizeof(float) * (size_t)k);
    memcpy(dst->scored + dst->n, src->scored, sizeof(bool) * (size_t)k);
    dst->n += k;
    memmove(krow(c, src, 0), krow(c, src, k), (size_t)rest * kb);
    memmove(vrow(c, src, 0), vrow(c, src, k), (size_t)rest * vb);
    memmove(src->pos, src->pos + k, sizeof(int32_t) * (size_t)rest);
    memmove(src->score, src->score + k, sizeof(float) * (size_t)rest);
    memmove(src->scored, src->scored + k, sizeof(bool) * (size_t)rest);
    src->n = rest;
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
            if (w != j) move_entry(c, b, w, j);
            w++;
        }
        if (w != b->n) block_touched(c, b), b->stale = true;
        b->n = w;
    }
    for (int i = 0; i < L->n_blocks;) {
        kv_block *b = L->blocks[i];
        if (b->n == 0 && !b->open) {
            remove_block(c, L, i);
            continue;
        }
        kv_block *nx = i + 1 < L->n_blocks ? L->blocks[i + 1] : NULL;
        if (!nx || b->n == KV_BLOCK || !mergeable(b, nx) || (by_channel(b->k_type) && b->n + nx->n > KV_BLOCK)) {
            i++;
            continue;
        }
        if (by_channel(b->k_type)) append_entries(c, b, nx);
        else take_front(c, b, nx, KV_BLOCK - b->n < nx->n ? KV_BLOCK - b->n : nx->n);
        block_touched(c, b), b->stale = true;
        if (by_channel(b->k_type) || nx->n == 0) remove_block(c, L, i + 1); /* all of it moved */
        else block_touched(c, nx), nx->stale = true;
    }
}

/* Spill, then evict by the policy, until the layer's committed bytes fit limit. */
static err_code evict(kv_cache *c, kv_layer *L, uint64_t limit, err_t *err) {
    spill_over(c, L, limit);
    uint64_t bytes = layer_bytes(c, L);
    if (bytes <= limit) return ERR_OK;
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
    for (int i = 0; i < L->n_blocks; i++) left[i] = committed_in(c, L->blocks[i]);
    int k = 0;
    for (; k < nv && bytes > limit; k++) {
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
                const double r = spill_rank(c, L, L->blocks[i]);
                if (pick < 0 || r < low) pick = i, low = r;
            }
        bytes -= block_cost(c, L->blocks[pick], L->blocks[pick]->n);
        c->evicted += L->blocks[pick]->n;
        remove_block(c, L, pick);
    }
    if (bytes > limit) /* cannot happen when kv_cache_new checked the budget */
        return err_set(err, ERR_CONTEXT_FULL, "the KV budget cannot hold the anchors and the recent window");
    c->evicted += k;
    compact_layer(c, L);
    /* bounds of changed cold blocks: a bound over fewer entries is tighter */
    for (int i = 0; i < L->n_blocks; i++) {
        kv_block *b = L->blocks[i];
        if (b->kmin && b->stale && !b->spilled) {
            err_code rc = block_bounds(c, b, err);
            if (rc) return rc;
        }
    }
    return ERR_OK;
}

/* The layer's queries, before its attention: keep the newest row (it ranks
 * blocks for spilling), and when a spilled block's bound beats the lowest
 * resident cold block's, trade them. At most one trade per layer and
 * forward; failures degrade (a failed read drops the block). */
static void cache_queries(void *self, int layer, int n, const float *q) {
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
    const uint64_t limit = c->cfg.budget_bytes / (uint64_t)c->n_layer;
    kv_block *S = L->blocks[s], *R = r >= 0 ? L->blocks[r] : NULL;
    if (R ? !(bs > br) : layer_bytes(c, L) + block_bytes(c, S->k_type, S->v_type, S->n) > limit) return;
    if (R && c->spill_full && R->slot < 0) return; /* R could not leave */
    err_t e = {0};
    c->spill_prefetch_hits += S->slot == L->prefetched;
    if (restore_block(c, L, S, &e)) {
        drop_spilled(c, L, s, &e);
        return;
    }
    if (R) {
        if (block_best(c, S, L->last_q) > block_best(c, R, L->last_q)) c->spill_hits++;
        if (spill_block(c, L, R, &e)) {
            spill_failed(c, &e);
            c->spill_full = true;
        }
    }
    if (layer_bytes(c, L) > limit) evict(c, L, limit, &e); /* S larger than R, or R stayed */
}

/* Queries move slowly from one token to the next: the spilled block the
 * newest query bounds highest is the likeliest to be read back at the next
 * forward. Its read starts now, in the background (the system's read-ahead
 * into the page cache), so the trade before that attention finds it there. */
static void prefetch_next(kv_cache *c, kv_layer *L) {
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

err_code kv_cache_commit(kv_cache *c, int n, err_t *err) {
    if (n <= 0) return ERR_OK;
    c->commit_pos += n;
    if (c->policy->observe == POLICY_OBSERVE_PREFILL) c->prefill_observed = true;
    const uint64_t limit = c->cfg.budget_bytes / (uint64_t)c->n_layer;
    for (int l = 0; l < c->n_layer; l++) {
        kv_layer *L = &c->layers[l];
        if (L->n_pending) apply_pending(c, L);
        /* tiers by the age of each block's newest committed entry */
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
            if (want > tier_of(c, b)) {
                err_code rc = requantize(c, L, i, want, err);
                if (rc) return rc;
            }
        }
        if (limit) {
            err_code rc = evict(c, L, limit, err);
            if (rc) return rc;
        }
        prefetch_next(c, L);
    }
    return ERR_OK;
}

/* ---------------------------------------------------------------- rollback */

static void drop_from(kv_cache *c, int32_t pos) {
    for (int l = 0; l < c->n_layer; l++) {
        kv_layer *L = &c->layers[l];
        for (int i = 0; i < L->n_blocks; i++) {
            kv_block *b = L->blocks[i];
            if (b->spilled) {
                int keep = 0;
                for (int j = 0; j < b->n; j++) keep += b->pos[j] < pos;
                if (keep == b->n) continue;
                err_t e = {0};
                if (keep == 0) { /* all of it goes: no need to read it */
                    remove_block(c, L, i--);
                    continue;
                }
                if (restore_block(c, L, b, &e)) {
                    drop_spilled(c, L, i--, &e);
                    continue;
                }
            }
            int w = 0;
            for (int j = 0; j < b->n; j++) {
                if (b->pos[j] >= pos) continue;
                if (w != j) move_entry(c, b, w, j);
                w++;
            }
            if (w != b->n) {
                block_touched(c, b);
                b->n = w;
                if (b->kmin && w) block_bounds(c, b, NULL); /* allocates nothing: cannot fail */
            }
        }
        while (L->n_blocks && L->blocks[L->n_blocks - 1]->n == 0) remove_block(c, L, L->n_blocks - 1);
        int held = 0; /* dropped entries were the newest: the end of the view order */
        for (int i = 0; i < L->n_blocks; i++) held += L->blocks[i]->n;
        if (L->n_pending > held) L->n_pending = held;
        /* the newest block takes appends again if it can */
        if (L->n_blocks) {
            kv_block *b = L->blocks[L->n_blocks - 1];
            b->open = tier_of(c, b) == 0 && b->n < KV_BLOCK;
        }
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

void kv_cache_truncate(kv_cache *c, int32_t pos) {
    if (pos < 0) pos = 0;
    drop_from(c, pos);
    if (c->commit_pos > pos) c->commit_pos = pos;
}

int32_t kv_cache_stale_from(const kv_cache *c, int32_t n) {
    int32_t from = n;
    for (int l = 0; l < c->n_layer; l++) {
        const kv_layer *L = &c->layers[l];
        for (int i = 0; i < L->n_blocks; i++) {
            const kv_block *b = L->blocks[i];
            int32_t newest = INT32_MIN; /* of the entries that would stay */
            for (int j = 0; j < b->n; j++)
                if (b->pos[j] < n && b->pos[j] > newest) newest = b->pos[j];
            if (newest == INT32_MIN) continue;
            if (tier_of(c, b) > tier_for_age(c, (int64_t)n - 1 - newest)) {
                if (b->pos[0] < from) from = b->pos[0]; /* blocks hold ascending positions */
                break;
            }
        }
    }
    return from;
}

kv_stats kv_cache_stats(const kv_cache *c) {
    kv_stats s = {.budget = c->cfg.budget_bytes, .tokens_evicted = c->evicted / c->n_layer,
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
        for (int i = 0; i < L->n_blocks; i++) {
            const kv_block *b = L->blocks[i];
            int n = 0;
            for (int j = 0; j < b->n; j++) {
                if (b->pos[j] < c->commit_pos) n++;
                else if (l == 0) s.tentative++;
            }
            const uint64_t bytes = block_cost(c, b, n);
            s.bytes += bytes;
            s.entry_bytes += b->spilled ? 0 : block_bytes(c, b->k_type, b->v_type, n);
            if (!b->spilled) s.mapped_bytes += b->mem_bytes;
            s.blocks_spilled += b->spilled;
            const int t = tier_of(c, b);
            if (t == 0) s.bytes_hot += bytes;
            else if (t == 1) s.bytes_warm += bytes;
            else s.bytes_cold += bytes;
            if (l == 0) s.tokens += n;
        }
    }
    return s;
}
