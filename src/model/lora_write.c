/*
 * lora_write — a new adapter to train, and an adapter written back in
 * llama.cpp's format (model/lora.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/gguf.h"
#include "core/mix.h"
#include "core/quant.h"
#include "model/lora.h"
#include "model/lora_internal.h"

lora_init_opts lora_init_defaults(void) {
    return (lora_init_opts){.rank = 16, .alpha = 32.0f, .kinds = LORA_KINDS_DEFAULT, .seed = 1};
}

/* Each base tensor one of whose kinds is in the set kinds, with its layer and kinds. */
typedef void (*pair_fn)(void *user, const gguf_tensor *t, int layer, const lora_kind *kinds, int n_kind);

static void each_target(const model *m, unsigned kinds, pair_fn fn, void *user) {
    for (uint64_t i = 0; i < m->gguf->n_tensors; i++) {
        const gguf_tensor *t = &m->gguf->tensors[i];
        lora_kind k[3];
        int layer;
        const int nk = lora_targets(m, t->name, &layer, k);
        bool asked = false; /* a fused tensor's pair serves all its parts: asked for when one of them is */
        for (int j = 0; j < nk; j++) asked |= (kinds >> k[j]) & 1u;
        if (asked) fn(user, t, layer, k, nk);
    }
}

typedef struct {
    lora_adapter *ad;
    const model *m;
    int rank;
    uint64_t floats, seed;
    float *at;  /* NULL: counting */
} create_ctx;

/* A ~ U(-1/sqrt(n_in), 1/sqrt(n_in)) (PEFT's Kaiming-uniform start), B = 0: the base's function exactly. */
static void create_pair(void *user, const gguf_tensor *t, int layer, const lora_kind *kinds, int n_kind) {
    create_ctx *c = user;
    const uint64_t n_a = (uint64_t)t->ne[0] * (uint64_t)c->rank * (uint64_t)t->ne[2];
    const uint64_t n_b = (uint64_t)c->rank * (uint64_t)t->ne[1] * (uint64_t)t->ne[2];
    if (!c->at) {
        c->floats += n_a + n_b;
        return;
    }
    float *a = c->at, *bt = a + n_a;
    const float bound = 1.0f / sqrtf((float)t->ne[0]);
    uint64_t s = mix64(c->seed ^ mix64((uint64_t)(layer + 1) * 64 + (uint64_t)kinds[0]));
    for (uint64_t i = 0; i < n_a; i++) {
        s = mix64(s);
        a[i] = bound * (float)((double)(s >> 11) * 0x1p-52 - 1.0);
    }
    memset(bt, 0, sizeof(float) * (size_t)n_b);
    lora_place(c->ad, c->m, layer, kinds, n_kind, a, bt, c->rank, t->ne[1]);
    c->at = bt + n_b;
}

typedef struct {
    const lora_adapter *a;
    lora_pair_fn fn;
    void *user;
} each_ctx;

static void each_pair(void *user, const gguf_tensor *t, int layer, const lora_kind *kinds, int n_kind) {
    (void)n_kind;
    const each_ctx *c = user;
    const lora_tensor *lt = lora_find(c->a, layer, kinds[0]);
    if (lt) c->fn(c->user, t, layer, lt);
}

void lora_each_pair(const model *m, const lora_adapter *a, lora_pair_fn fn, void *user) {
    each_ctx c = {a, fn, user};
    each_target(m, ~0u, each_pair, &c);
}

uint64_t lora_count(const model *m, const lora_init_opts *o) {
    create_ctx c = {.m = m, .rank = o->rank, .seed = o->seed};
    each_target(m, o->kinds, create_pair, &c);
    return c.floats;
}

err_code lora_create(const model *m, const lora_init_opts *o, lora_adapter **out, err_t *err) {
    *out = NULL;
    if (o->rank < 1 || o->rank > 65536) return err_set(err, ERR_INVALID_ARG, "rank %d (1..65536)", o->rank);
    if (!isfinite(o->alpha) || o->alpha < 0.0f) return err_set(err, ERR_INVALID_ARG, "alpha %g", (double)o->alpha);
    if (!m->gguf) return err_set(err, ERR_INVALID_ARG, "the model has no tensor names to adapt");
    create_ctx c = {.m = m, .rank = o->rank, .seed = o->seed, .floats = lora_count(m, o)};
    if (!c.floats) return err_set(err, ERR_INVALID_ARG, "the model has none of the matrices asked for");
    if (c.floats > SIZE_MAX / sizeof(float) / 2)
        return err_set(err, ERR_NOMEM, "an adapter of %llu values", (unsigned long long)c.floats);
    if (!(c.ad = lora_alloc(m, o->alpha)) || !(c.ad->mem = malloc((size_t)c.floats * sizeof(float)))) {
        lora_free(c.ad);
        return err_set(err, ERR_NOMEM, "out of memory for an adapter of %llu values", (unsigned long long)c.floats);
    }
    c.ad->bytes = c.floats * sizeof(float);
    c.at = c.ad->mem;
    each_target(m, o->kinds, create_pair, &c);
    *out = c.ad;
    return ERR_OK;
}

/* ---------------------------------------------------------------- writing */

typedef struct {
    const lora_adapter *ad;
    gguf_writer *w;
    uint32_t type;
    const lora_tensor **pairs; /* [tensor / 2] each pair's first part */
    int64_t *rows;             /* [tensor / 2] its base tensor's rows (every part's) */
    int n;
    err_code rc;
    err_t *err;
} write_ctx;

static void add_pair(void *user, const gguf_tensor *t, int layer, const lora_kind *kinds, int n_kind) {
    (void)n_kind;
    write_ctx *c = user;
    const lora_tensor *lt = lora_find(c->ad, layer, kinds[0]);
    if (!lt || c->rc) return;
    char name[256];
    const int64_t a_ne[3] = {t->ne[0], lt->rank, t->ne[2]}, b_ne[3] = {lt->rank, t->ne[1], t->ne[2]};
    const uint32_t dims = t->ne[2] > 1 ? 3 : 2;
    snprintf(name, sizeof name, "%s.lora_a", t->name);
    c->rc = gguf_writer_add_tensor(c->w, name, c->type, dims, a_ne, NULL, c->err);
    snprintf(name, sizeof name, "%s.lora_b", t->name);
    if (!c->rc) c->rc = gguf_writer_add_tensor(c->w, name, c->type, dims, b_ne, NULL, c->err);
    if (c->type == QT_Q8_0 && !c->rc && (t->ne[0] % 32 || lt->rank % 32))
        c->rc = err_set(c->err, ERR_INVALID_ARG, "a q8_0 adapter needs rows that are multiples of 32 ('%s': %lld and "
                        "rank %d)", t->name, (long long)t->ne[0], lt->rank);
    c->pairs[c->n] = lt, c->rows[c->n] = t->ne[1];
    c->n++;
}

/* Tensor i: pair i / 2's A (rows of n_in) or B (rows of rank: B^T read down its columns). */
static err_code fill(void *user, uint64_t i, void *buf, uint64_t n_bytes, err_t *err) {
    (void)n_bytes;
    const write_ctx *c = user;
    const lora_tensor *lt = c->pairs[i / 2];
    const int64_t rows = c->rows[i / 2], r = lt->rank;
    const int64_t n0 = i % 2 ? r : lt->n_in, n_rows = i % 2 ? rows * lt->n_mat : r * lt->n_mat;
    float *row = malloc(sizeof(float) * (size_t)n0);
    if (!row) return err_set(err, ERR_NOMEM, "out of memory");
    const size_t rb = quant_row_bytes(c->type, n0);
    for (int64_t j = 0; j < n_rows; j++) {
        if (i % 2 == 0) memcpy(row, lt->a + (size_t)j * (size_t)n0, sizeof(float) * (size_t)n0);
        else {
            const int64_t e = j / rows, o = j % rows; /* B_e's row o: element k is B^T_e's row k, column o */
            for (int64_t k = 0; k < r; k++) row[k] = lt->bt[((size_t)e * (size_t)r + (size_t)k) * lt->bt_stride + (size_t)o];
        }
        quant_quantize_row(c->type, row, (uint8_t *)buf + (size_t)j * rb, n0);
    }
    free(row);
    return ERR_OK;
}

err_code lora_write(const model *m, const lora_adapter *a, uint32_t type, lora_keys_fn keys, void *user,
                    const char *path, err_t *err) {
    if (type != QT_F32 && type != QT_F16 && type != QT_BF16 && type != QT_Q8_0)
        return err_set(err, ERR_INVALID_ARG, "adapters are written as f32, f16, bf16 or q8_0");
    const size_t cap = m->gguf->n_tensors + 1;
    write_ctx c = {.ad = a, .w = gguf_writer_new(), .type = type, .pairs = calloc(cap, sizeof(void *)),
                   .rows = calloc(cap, sizeof(int64_t)), .err = err};
    if (!c.w || !c.pairs || !c.rows) c.rc = err_set(err, ERR_NOMEM, "out of memory");
    if (!c.rc && (gguf_writer_set_str(c.w, "general.type", "adapter") ||
                  gguf_writer_set_str(c.w, "general.architecture", m->hp.arch_name) ||
                  gguf_writer_set_str(c.w, "adapter.type", "lora") ||
                  (a->alpha != 0.0f && gguf_writer_set_f32(c.w, "adapter.lora.alpha", a->alpha))))
        c.rc = err_set(err, ERR_NOMEM, "out of memory");
    if (!c.rc && keys && keys(user, c.w)) c.rc = err_set(err, ERR_NOMEM, "out of memory");
    if (!c.rc) each_target(m, ~0u, add_pair, &c);
    if (!c.rc) c.rc = gguf_writer_write(c.w, path, fill, &c, err);
    gguf_writer_free(c.w);
    free(c.pairs), free(c.rows);
    return c.rc;
}
