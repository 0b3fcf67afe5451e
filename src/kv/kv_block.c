/*
 * kv_block — the KV cache's storage: a block of up to KV_BLOCK entries is one
 * native mapping holding its keys (KV_BLOCK rows, or k_dim channels when keys
 * are quantized by channel) then KV_BLOCK value rows, each entry with its
 * position and score. Here: a block's bytes and rows, moving entries within
 * and between blocks, a layer's list of blocks, and what they cost the
 * budget (whole page-rounded mappings and their bookkeeping).
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kv_internal.h"
#include "platform/file.h"

uint64_t kv_token_bytes(kv_shape shape, uint32_t type) {
    return (uint64_t)shape.n_layer *
           (kv_row_bytes(type, shape.n_head_kv * shape.head_dim) + kv_row_bytes(type, kv_shape_v_dim(shape)));
}

uint64_t kv_context_bytes(kv_shape shape, uint32_t type, int n_ctx) {
    const uint64_t per_layer = kv_token_bytes(shape, type) / (uint64_t)shape.n_layer;
    uint64_t bytes = 0;
    for (int l = 0; l < shape.n_layer; l++) {
        const int kept = kv_shape_windowed(shape, l) && shape.window + 2 * KV_BLOCK < n_ctx ? shape.window + 2 * KV_BLOCK : n_ctx;
        bytes += per_layer * (uint64_t)kept;
    }
    return bytes;
}

uint64_t kv_block_bytes(const kv_cache *c, uint32_t kt, uint32_t vt, int n) {
    if (n == 0) return 0;
    /* keys by channel: each channel's step and minimum, then n quants (KC4: half a byte each; k_dim is even) */
    const uint64_t k = kv_by_channel(kt) ? (uint64_t)c->k_dim * 4 + (uint64_t)n * c->k_dim / (kt == ATTN_KC8 ? 1 : 2)
                                         : (uint64_t)n * kv_row_bytes(kt, c->k_dim);
    return k + (uint64_t)n * kv_row_bytes(vt, c->v_dim);
}

uint64_t kv_budget_floor(kv_shape shape, const kv_config *cfg) {
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    const int k_dim = shape.n_head_kv * shape.head_dim, v_dim = kv_shape_v_dim(shape);
    const uint64_t block = ((uint64_t)KV_BLOCK * (kv_row_bytes(cfg->hot_type, k_dim) + kv_row_bytes(cfg->hot_type, v_dim)) +
                            page - 1) / page * page + sizeof(kv_block); /* what kv_block_cost charges */
    const uint64_t anchors = ((uint64_t)cfg->anchor_tokens + KV_BLOCK - 1) / KV_BLOCK;
    const uint64_t recent = ((uint64_t)cfg->recent_tokens + KV_BLOCK - 1) / KV_BLOCK;
    return (uint64_t)shape.n_layer * (anchors + recent + 1) * block;
}

size_t kv_block_mem_bytes(const kv_cache *c, uint32_t kt, uint32_t vt) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (kv_k_area(c, kt) + KV_BLOCK * kv_row_bytes(vt, c->v_dim) + page - 1) / page * page;
}

kv_block *kv_block_new(const kv_cache *c, uint32_t kt, uint32_t vt) {
    kv_block *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->mem_bytes = kv_block_mem_bytes(c, kt, vt);
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

void kv_block_free(kv_block *b) {
    if (!b) return;
    if (b->mem) munmap(b->mem, b->mem_bytes); /* the pages go back to the system at once */
    free(b->kmin);
    free(b->kmax);
    free(b);
}

/* A block holding anchors lives as long as the cache: offer its pages to
 * the kernel's same-page merging (KSM), which shares them between processes
 * running the same prompt prefix (where the system has it on; advice only). */
void kv_mark_anchor(const kv_cache *c, kv_block *b) {
    if (b->n && b->mem && b->pos[0] < c->cfg.anchor_tokens) plat_advise_mem(b->mem, b->mem_bytes, PLAT_ADVICE_MERGE);
}

void kv_block_touched(kv_cache *c, kv_block *b) {
    if (b->slot >= 0 && c->spill) spill_release(c->spill, b->slot);
    b->slot = -1;
}

void kv_store_rows(uint32_t type, const float *src, int n, int dim, uint8_t *dst) {
    if (dim == 0) return; /* values read from the keys */
    const size_t rb = kv_row_bytes(type, dim);
    for (int i = 0; i < n; i++) {
        const float *x = src + (size_t)i * dim;
        uint8_t *d = dst + (size_t)i * rb;
        if (type == QT_F32) memcpy(d, x, sizeof(float) * (size_t)dim);
        else if (type == QT_F16)
            for (int j = 0; j < dim; j++) ((fp16_t *)d)[j] = fp32_to_fp16(x[j]);
        else quant_quantize_row(type, x, d, dim);
    }
}

void kv_key_f32(const kv_cache *c, const kv_block *b, int i, float *out) {
    if (kv_by_channel(b->k_type))
        for (int d = 0; d < c->k_dim; d++) out[d] = attn_kc_value(b->k_type, b->mem, kv_k_stride(c, b->k_type), d, i);
    else quant_dequantize_row(b->k_type, kv_krow(c, b, i), out, c->k_dim);
}

void kv_move_entry(const kv_cache *c, kv_block *b, int to, int from) {
    b->pos[to] = b->pos[from];
    b->score[to] = b->score[from];
    b->scored[to] = b->scored[from];
    memcpy(kv_vrow(c, b, to), kv_vrow(c, b, from), kv_row_bytes(b->v_type, c->v_dim));
    if (!kv_by_channel(b->k_type)) {
        memcpy(kv_krow(c, b, to), kv_krow(c, b, from), kv_row_bytes(b->k_type, c->k_dim));
        return;
    }
    const size_t cb = kv_k_stride(c, b->k_type);
    for (int d = 0; d < c->k_dim; d++) {
        uint8_t *q = b->mem + (size_t)d * cb + 4;
        if (b->k_type == ATTN_KC8) q[to] = q[from];
        else {
            const uint8_t v = (q[from / 2] >> (from % 2 ? 4 : 0)) & 15;
            q[to / 2] = (uint8_t)((q[to / 2] & (to % 2 ? 0x0F : 0xF0)) | v << (to % 2 ? 4 : 0));
        }
    }
}

/* Keys by channel share a scale per channel over their block, so merged
 * ones are quantized again over the union, from their values (c->f32 holds
 * KV_BLOCK rows). */
void kv_append_entries(const kv_cache *c, kv_block *dst, const kv_block *src) {
    const int n = dst->n + src->n;
    if (kv_by_channel(dst->k_type)) {
        for (int j = 0; j < dst->n; j++) kv_key_f32(c, dst, j, c->f32 + (size_t)j * c->k_dim);
        for (int j = 0; j < src->n; j++) kv_key_f32(c, src, j, c->f32 + (size_t)(dst->n + j) * c->k_dim);
        attn_kc_quantize(dst->k_type, c->f32, n, c->k_dim, KV_BLOCK, dst->mem);
    } else {
        memcpy(kv_krow(c, dst, dst->n), kv_krow(c, src, 0), (size_t)src->n * kv_row_bytes(src->k_type, c->k_dim));
    }
    memcpy(dst->pos + dst->n, src->pos, sizeof(int32_t) * (size_t)src->n);
    memcpy(dst->score + dst->n, src->score, sizeof(float) * (size_t)src->n);
    memcpy(dst->scored + dst->n, src->scored, sizeof(bool) * (size_t)src->n);
    memcpy(kv_vrow(c, dst, dst->n), kv_vrow(c, src, 0), (size_t)src->n * kv_row_bytes(src->v_type, c->v_dim));
    dst->n = n;
}

void kv_take_front(const kv_cache *c, kv_block *dst, kv_block *src, int k) {
    const size_t kb = kv_row_bytes(src->k_type, c->k_dim), vb = kv_row_bytes(src->v_type, c->v_dim);
    const int rest = src->n - k;
    memcpy(kv_krow(c, dst, dst->n), kv_krow(c, src, 0), (size_t)k * kb);
    memcpy(kv_vrow(c, dst, dst->n), kv_vrow(c, src, 0), (size_t)k * vb);
    memcpy(dst->pos + dst->n, src->pos, sizeof(int32_t) * (size_t)k);
    memcpy(dst->score + dst->n, src->score, sizeof(float) * (size_t)k);
    memcpy(dst->scored + dst->n, src->scored, sizeof(bool) * (size_t)k);
    dst->n += k;
    memmove(kv_krow(c, src, 0), kv_krow(c, src, k), (size_t)rest * kb);
    memmove(kv_vrow(c, src, 0), kv_vrow(c, src, k), (size_t)rest * vb);
    memmove(src->pos, src->pos + k, sizeof(int32_t) * (size_t)rest);
    memmove(src->score, src->score + k, sizeof(float) * (size_t)rest);
    memmove(src->scored, src->scored + k, sizeof(bool) * (size_t)rest);
    src->n = rest;
}

err_code kv_push_block(kv_layer *L, kv_block *b, err_t *err) {
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

void kv_remove_block(kv_cache *c, kv_layer *L, int i) {
    kv_block *b = L->blocks[i];
    if (b->spilled) L->n_spilled--;
    kv_block_touched(c, b);
    kv_block_free(b);
    memmove(L->blocks + i, L->blocks + i + 1, sizeof *L->blocks * (size_t)(L->n_blocks - i - 1));
    L->n_blocks--;
}

/* In memory, a block's whole mapping of KV_BLOCK entries, in pages (they
 * stay resident however few entries are left: the budget bounds memory, not
 * a count), its own bookkeeping, and its key bounds (cold blocks, with
 * spill). A block of tentative entries only costs nothing until they are
 * committed. */
uint64_t kv_block_cost(const kv_cache *c, const kv_block *b, int n) {
    return (b->spilled || !n ? 0 : b->mem_bytes) + (n ? sizeof *b : 0) +
           (b->kmin ? 2ull * (uint64_t)c->k_dim * sizeof(fp16_t) : 0);
}

bool kv_mergeable(const kv_block *b, const kv_block *nx) {
    return !b->open && !nx->open && !b->spilled && !nx->spilled && nx->k_type == b->k_type && nx->v_type == b->v_type;
}

int kv_committed_in(const kv_cache *c, const kv_block *b) {
    int n = 0;
    for (int j = 0; j < b->n; j++) n += b->pos[j] < c->commit_pos;
    return n;
}

uint64_t kv_layer_bytes(const kv_cache *c, const kv_layer *L) {
    uint64_t s = 0;
    for (int i = 0; i < L->n_blocks; i++) s += kv_block_cost(c, L->blocks[i], kv_committed_in(c, L->blocks[i]));
    return s;
}

void kv_layer_check(const kv_cache *c, const kv_layer *L) {
    (void)c;
    assert(L->n_blocks >= 0 && L->n_blocks <= L->cap_blocks);
    int spilled = 0;
    int32_t last = -1;
    for (int i = 0; i < L->n_blocks; i++) {
        const kv_block *b = L->blocks[i];
        assert(b && b->n >= 0 && b->n <= KV_BLOCK);
        assert(!b->open || i == L->n_blocks - 1);
        assert(b->spilled ? b->slot >= 0 && !b->mem : b->mem != NULL);
        spilled += b->spilled;
        if (b->n) { /* a block's first and last entries only: O(blocks) on the per-token path, not O(context) */
            assert(b->pos[0] > last && b->pos[b->n - 1] >= b->pos[0]);
            last = b->pos[b->n - 1];
        }
    }
    assert(spilled == L->n_spilled);
}
