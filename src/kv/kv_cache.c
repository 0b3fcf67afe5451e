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
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/quant.h"
#include "policy.h"

typedef struct {
    uint32_t type;
    int n;
    bool open;
    int32_t pos[KV_BLOCK];
    float score[KV_BLOCK];
    bool scored[KV_BLOCK];
    uint8_t *mem;       /* KV_BLOCK key rows, then KV_BLOCK value rows */
    size_t mem_bytes;
} kv_block;

typedef struct {
    kv_block **blocks;
    int n_blocks, cap_blocks;
    kv_span *spans;
    int cap_spans;
    /* attention weights observed during the last forward, in view order,
     * applied to the scores at commit (so tentative entries, and the entries
     * a rolled-back verify attended to, are scored only once committed) */
    float *pending;
    int n_pending, cap_pending, pending_queries;
} kv_layer;

struct kv_cache {
    kv_config cfg;
    const kv_policy *policy;
    int n_layer, k_dim, v_dim;
    kv_layer *layers;
    int32_t commit_pos;    /* entries at positions below are committed */
    bool prefill_observed; /* SnapKV has voted */
    int64_t evicted, requantized;
    float *f32;            /* scratch: one block of rows as F32 */
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
        .policy = KV_POLICY_MORPHKV, .budget_bytes = 0, .snap_window = 32,
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

static size_t entry_bytes(const kv_cache *c, uint32_t type) {
    return row_bytes(type, c->k_dim) + row_bytes(type, c->v_dim);
}

/* ---------------------------------------------------------------- blocks */

static kv_block *block_new(const kv_cache *c, uint32_t type) {
    kv_block *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    b->mem_bytes = (KV_BLOCK * entry_bytes(c, type) + page - 1) / page * page;
    void *p = mmap(NULL, b->mem_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        free(b);
        return NULL;
    }
    b->mem = p;
    b->type = type;
    return b;
}

static void block_free(kv_block *b) {
    if (!b) return;
    munmap(b->mem, b->mem_bytes); /* the pages go back to the system at once */
    free(b);
}

static uint8_t *krow(const kv_cache *c, const kv_block *b, int i) {
    return b->mem + (size_t)i * row_bytes(b->type, c->k_dim);
}
static uint8_t *vrow(const kv_cache *c, const kv_block *b, int i) {
    return b->mem + KV_BLOCK * row_bytes(b->type, c->k_dim) + (size_t)i * row_bytes(b->type, c->v_dim);
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

/* Entries [from, from + n) of src into dst at slot `at` (types may differ). */
static void copy_entries(const kv_cache *c, kv_block *dst, int at, const kv_block *src, int from, int n) {
    memmove(dst->pos + at, src->pos + from, sizeof(int32_t) * (size_t)n);
    memmove(dst->score + at, src->score + from, sizeof(float) * (size_t)n);
    memmove(dst->scored + at, src->scored + from, sizeof(bool) * (size_t)n);
    if (dst->type == src->type) {
        memmove(krow(c, dst, at), krow(c, src, from), (size_t)n * row_bytes(src->type, c->k_dim));
        memmove(vrow(c, dst, at), vrow(c, src, from), (size_t)n * row_bytes(src->type, c->v_dim));
        return;
    }
    for (int pass = 0; pass < 2; pass++) {
        const int dim = pass ? c->v_dim : c->k_dim;
        for (int i = 0; i < n; i++)
            quant_dequantize_row(src->type, pass ? vrow(c, src, from + i) : krow(c, src, from + i), c->f32 + (size_t)i * dim, dim);
        store_rows(dst->type, c->f32, n, dim, pass ? vrow(c, dst, at) : krow(c, dst, at));
    }
}

static err_code push_block(kv_layer *L, kv_block *b, err_t *err) {
    if (L->n_blocks == L->cap_blocks) {
        int cap = L->cap_blocks ? 2 * L->cap_blocks : 16;
        kv_block **p = realloc(L->blocks, sizeof *p * (size_t)cap);
        if (!p) return err_set(err, ERR_NOMEM, "out of memory for the KV cache");
        L->blocks = p;
        L->cap_blocks = cap;
    }
    L->blocks[L->n_blocks++] = b;
    return ERR_OK;
}

static void remove_block(kv_layer *L, int i) {
    block_free(L->blocks[i]);
    memmove(L->blocks + i, L->blocks + i + 1, sizeof *L->blocks * (size_t)(L->n_blocks - i - 1));
    L->n_blocks--;
}

/* ---------------------------------------------------------------- create */

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
        /* the anchors and the recent window must fit at the hot type */
        const uint64_t floor = (uint64_t)(k.anchor_tokens + k.recent_tokens) * kv_token_bytes(hp, k.hot_type);
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
    c->layers = calloc((size_t)hp->n_layer, sizeof *c->layers);
    c->f32 = malloc(sizeof(float) * KV_BLOCK * (size_t)(k_dim > v_dim ? k_dim : v_dim));
    if (!c->layers || !c->f32) {
        kv_cache_free(c);
        return err_set(err, ERR_NOMEM, "out of memory");
    }
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
    }
    free(c->layers);
    free(c->f32);
    free(c);
}

const kv_config *kv_cache_config(const kv_cache *c) { return &c->cfg; }

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
            if (!(b = block_new(c, c->cfg.hot_type))) /* the caller rolls the tentative entries back */
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
        store_rows(b->type, k + (size_t)done * c->k_dim, take, c->k_dim, krow(c, b, b->n));
        store_rows(b->type, v + (size_t)done * c->v_dim, take, c->v_dim, vrow(c, b, b->n));
        memcpy(b->pos + b->n, pos + done, sizeof(int32_t) * (size_t)take);
        memset(b->score + b->n, 0, sizeof(float) * (size_t)take);
        memset(b->scored + b->n, 0, sizeof(bool) * (size_t)take);
        b->n += take;
        n -= take;
    }
    return ERR_OK;
}

static int cache_view(void *self, int layer, const kv_span **spans) {
    kv_cache *c = self;
    kv_layer *L = &c->layers[layer];
    if (L->n_blocks > L->cap_spans) {
        kv_span *p = realloc(L->spans, sizeof *p * (size_t)L->n_blocks);
        if (!p) { /* keep the old list: attention then sees fewer entries, never garbage */
            *spans = L->spans;
            return 0;
        }
        L->spans = p;
        L->cap_spans = L->n_blocks;
    }
    int n = 0;
    for (int i = 0; i < L->n_blocks; i++) {
        const kv_block *b = L->blocks[i];
        if (!b->n) continue;
        L->spans[n++] = (kv_span){
            .n_tokens = b->n, .pos = b->pos, .type = b->type, .k = krow(c, b, 0), .v = vrow(c, b, 0),
            .k_row_bytes = row_bytes(b->type, c->k_dim), .v_row_bytes = row_bytes(b->type, c->v_dim),
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
        for (int j = 0; j < b->n && e < L->n_pending; j++, e++) {
            if (b->pos[j] >= c->commit_pos) continue;
            b->score[j] = c->policy->update(b->score[j], L->pending[e], L->pending_queries, c->cfg.recent_tokens);
            b->scored[j] = true;
        }
    }
    L->n_pending = 0;
}

kv_iface kv_cache_iface(kv_cache *c) {
    kv_iface k = {.self = c, .append = cache_append, .view = cache_view};
    const bool observe = c->policy->observe == POLICY_OBSERVE_ALWAYS ||
                         (c->policy->observe == POLICY_OBSERVE_PREFILL && !c->prefill_observed);
    if (observe) {
        k.observe = cache_observe;
        k.observe_last = c->policy->observe == POLICY_OBSERVE_PREFILL ? c->cfg.snap_window : 0;
    }
    return k;
}

/* ---------------------------------------------------------------- commit */

static uint32_t tier_for_age(const kv_cache *c, int64_t age) {
    if (age < c->cfg.hot_tokens) return c->cfg.hot_type;
    if (age < c->cfg.warm_tokens) return c->cfg.warm_type;
    return c->cfg.cold_type;
}

static int tier_rank(const kv_cache *c, uint32_t type) {
    return type == c->cfg.hot_type ? 0 : type == c->cfg.warm_type ? 1 : 2;
}

static err_code requantize(kv_cache *c, kv_layer *L, int i, uint32_t type, err_t *err) {
    kv_block *old = L->blocks[i], *b = block_new(c, type);
    if (!b) return err_set(err, ERR_NOMEM, "out of memory re-quantizing the KV cache");
    copy_entries(c, b, 0, old, 0, old->n);
    b->n = old->n;
    b->open = false;
    L->blocks[i] = b;
    block_free(old);
    c->requantized++;
    return ERR_OK;
}

static uint64_t layer_bytes(const kv_cache *c, const kv_layer *L, bool committed_only) {
    uint64_t s = 0;
    for (int i = 0; i < L->n_blocks; i++) {
        const kv_block *b = L->blocks[i];
        int n = b->n;
        if (committed_only)
            for (int j = 0; j < b->n; j++) n -= b->pos[j] >= c->commit_pos;
        s += (uint64_t)n * entry_bytes(c, b->type);
    }
    return s;
}

typedef struct {
    double rank;
    int block, slot;
} victim;

static int by_rank(const void *a, const void *b) {
    const victim *x = a, *y = b;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* Evict by the policy until the layer's committed bytes fit limit. */
static err_code evict(kv_cache *c, kv_layer *L, uint64_t limit, err_t *err) {
    uint64_t bytes = layer_bytes(c, L, true);
    if (bytes <= limit) return ERR_OK;
    int n = 0;
    for (int i = 0; i < L->n_blocks; i++) n += L->blocks[i]->n;
    victim *v = malloc(sizeof *v * (size_t)(n ? n : 1));
    if (!v) return err_set(err, ERR_NOMEM, "out of memory choosing KV entries to evict");
    int nv = 0;
    for (int i = 0; i < L->n_blocks; i++) {
        const kv_block *b = L->blocks[i];
        for (int j = 0; j < b->n; j++) {
            const int32_t p = b->pos[j];
            if (p < c->cfg.anchor_tokens || p >= c->commit_pos || c->commit_pos - 1 - p < c->cfg.recent_tokens) continue;
            v[nv++] = (victim){c->policy->rank(b->score[j], b->scored[j], p), i, j};
        }
    }
    qsort(v, (size_t)nv, sizeof *v, by_rank);
    int k = 0;
    for (; k < nv && bytes > limit; k++) {
        kv_block *b = L->blocks[v[k].block];
        bytes -= entry_bytes(c, b->type);
        b->pos[v[k].slot] = INT32_MIN; /* marked; removed below */
    }
    free(v);
    if (bytes > limit) /* cannot happen when kv_cache_new checked the budget */
        return err_set(err, ERR_CONTEXT_FULL, "the KV budget cannot hold the anchors and the recent window");
    c->evicted += k;
    /* compact each block, then merge neighbours of one type that fit together */
    for (int i = 0; i < L->n_blocks; i++) {
        kv_block *b = L->blocks[i];
        int w = 0;
        for (int j = 0; j < b->n; j++) {
            if (b->pos[j] == INT32_MIN) continue;
            if (w != j) copy_entries(c, b, w, b, j, 1);
            w++;
        }
        b->n = w;
    }
    for (int i = 0; i < L->n_blocks;) {
        kv_block *b = L->blocks[i];
        if (b->n == 0 && !b->open) {
            remove_block(L, i);
            continue;
        }
        if (i + 1 < L->n_blocks) {
            kv_block *nx = L->blocks[i + 1];
            if (!b->open && !nx->open && nx->type == b->type && b->n + nx->n <= KV_BLOCK) {
                copy_entries(c, b, b->n, nx, 0, nx->n);
                b->n += nx->n;
                remove_block(L, i + 1);
                continue;
            }
        }
        i++;
    }
    return ERR_OK;
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
            if (tentative) continue;
            const uint32_t want = tier_for_age(c, (int64_t)c->commit_pos - 1 - newest);
            if (tier_rank(c, want) > tier_rank(c, b->type)) {
                err_code rc = requantize(c, L, i, want, err);
                if (rc) return rc;
            }
        }
        if (limit) {
            err_code rc = evict(c, L, limit, err);
            if (rc) return rc;
        }
    }
    return ERR_OK;
}

/* ---------------------------------------------------------------- rollback */

static void drop_from(kv_cache *c, int32_t pos) {
    for (int l = 0; l < c->n_layer; l++) {
        kv_layer *L = &c->layers[l];
        for (int i = 0; i < L->n_blocks; i++) {
            kv_block *b = L->blocks[i];
            int w = 0;
            for (int j = 0; j < b->n; j++) {
                if (b->pos[j] >= pos) continue;
                if (w != j) copy_entries(c, b, w, b, j, 1);
                w++;
            }
            b->n = w;
        }
        while (L->n_blocks && L->blocks[L->n_blocks - 1]->n == 0) remove_block(L, L->n_blocks - 1);
        int held = 0; /* dropped entries were the newest: the end of the view order */
        for (int i = 0; i < L->n_blocks; i++) held += L->blocks[i]->n;
        if (L->n_pending > held) L->n_pending = held;
        /* the newest block takes appends again if it can */
        if (L->n_blocks) {
            kv_block *b = L->blocks[L->n_blocks - 1];
            b->open = b->type == c->cfg.hot_type && b->n < KV_BLOCK;
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

kv_stats kv_cache_stats(const kv_cache *c) {
    kv_stats s = {.budget = c->cfg.budget_bytes, .tokens_evicted = c->evicted, .requantized = c->requantized};
    for (int l = 0; l < c->n_layer; l++) {
        const kv_layer *L = &c->layers[l];
        for (int i = 0; i < L->n_blocks; i++) {
            const kv_block *b = L->blocks[i];
            int n = 0;
            for (int j = 0; j < b->n; j++) {
                if (b->pos[j] < c->commit_pos) n++;
                else if (l == 0) s.tentative++;
            }
            const uint64_t bytes = (uint64_t)n * entry_bytes(c, b->type);
            s.bytes += bytes;
            s.mapped_bytes += b->mem_bytes;
            const int t = tier_rank(c, b->type);
            if (t == 0) s.bytes_hot += bytes;
            else if (t == 1) s.bytes_warm += bytes;
            else s.bytes_cold += bytes;
            if (l == 0) s.tokens += n;
        }
    }
    return s;
}
