/*
 * kv_plain — see kv_plain.h. Storage is allocated once for n_ctx tokens;
 * append converts the forward pass's F32 rows to the cache's element type.
 */
#include "kv_plain.h"

#include <stdlib.h>
#include <string.h>

#include "core/quant.h"

typedef struct {
    uint8_t *k, *v;  /* (n_ctx, kv_dim) rows of elem bytes each */
    int32_t *pos;    /* (n_ctx) */
    int n;           /* entries held */
    kv_span span;
} kv_layer;

struct kv_plain {
    int n_layer, n_ctx, k_dim, v_dim;
    uint32_t type;
    size_t elem;
    kv_layer *layers;
};

err_code kv_plain_new(const model_hparams *hp, int n_ctx, uint32_t type, kv_plain **out, err_t *err) {
    *out = NULL;
    if (type != QT_F32 && type != QT_F16) return err_set(err, ERR_INVALID_ARG, "plain KV cache type must be f32 or f16");
    if (n_ctx <= 0) return err_set(err, ERR_INVALID_ARG, "KV cache of %d tokens", n_ctx);
    kv_plain *c = calloc(1, sizeof *c);
    if (!c) return err_set(err, ERR_NOMEM, "out of memory");
    c->n_layer = hp->n_layer;
    c->n_ctx = n_ctx;
    c->k_dim = hp->n_head_kv * hp->head_dim;
    c->v_dim = hp->n_head_kv * hp->head_dim_v;
    c->type = type;
    c->elem = type == QT_F16 ? 2 : 4;
    c->layers = calloc((size_t)c->n_layer, sizeof *c->layers);
    if (!c->layers) goto oom;
    for (int l = 0; l < c->n_layer; l++) {
        kv_layer *L = &c->layers[l];
        L->k = malloc((size_t)n_ctx * c->k_dim * c->elem);
        L->v = malloc((size_t)n_ctx * c->v_dim * c->elem);
        L->pos = malloc(sizeof(int32_t) * (size_t)n_ctx);
        if (!L->k || !L->v || !L->pos) goto oom;
    }
    *out = c;
    return ERR_OK;
oom:
    kv_plain_free(c);
    return err_set(err, ERR_NOMEM, "out of memory for a KV cache of %d tokens", n_ctx);
}

void kv_plain_free(kv_plain *c) {
    if (!c) return;
    for (int l = 0; c->layers && l < c->n_layer; l++) {
        free(c->layers[l].k);
        free(c->layers[l].v);
        free(c->layers[l].pos);
    }
    free(c->layers);
    free(c);
}

static void store_rows(uint8_t *dst, const float *src, size_t n, uint32_t type) {
    if (type == QT_F32) {
        memcpy(dst, src, n * sizeof(float));
        return;
    }
    fp16_t *h = (fp16_t *)dst;
    for (size_t i = 0; i < n; i++) h[i] = fp32_to_fp16(src[i]);
}

static err_code plain_append(void *self, int layer, int n, const int32_t *pos, const float *k, const float *v,
                             err_t *err) {
    kv_plain *c = self;
    kv_layer *L = &c->layers[layer];
    if (L->n + n > c->n_ctx)
        return err_set(err, ERR_CONTEXT_FULL, "KV cache full: %d + %d tokens > %d", L->n, n, c->n_ctx);
    store_rows(L->k + (size_t)L->n * c->k_dim * c->elem, k, (size_t)n * c->k_dim, c->type);
    store_rows(L->v + (size_t)L->n * c->v_dim * c->elem, v, (size_t)n * c->v_dim, c->type);
    memcpy(L->pos + L->n, pos, sizeof(int32_t) * (size_t)n);
    L->n += n;
    return ERR_OK;
}

static int plain_view(void *self, int layer, const kv_span **spans) {
    kv_plain *c = self;
    kv_layer *L = &c->layers[layer];
    L->span = (kv_span){
        .n_tokens = L->n, .pos = L->pos, .type = c->type, .k = L->k, .v = L->v,
        .k_row_bytes = (size_t)c->k_dim * c->elem, .v_row_bytes = (size_t)c->v_dim * c->elem,
    };
    *spans = &L->span;
    return 1;
}

kv_iface kv_plain_iface(kv_plain *c) {
    return (kv_iface){.self = c, .append = plain_append, .view = plain_view, .observe = NULL};
}

void kv_plain_truncate(kv_plain *c, int n) {
    for (int l = 0; l < c->n_layer; l++)
        if (c->layers[l].n > n) c->layers[l].n = n < 0 ? 0 : n;
}
