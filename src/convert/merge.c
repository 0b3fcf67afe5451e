/*
 * merge — adapters folded into their base (convert/merge.h).
 */
#include "convert/merge.h"

#include <stdlib.h>
#include <string.h>

#include "core/atomic_write.h"
#include "core/gguf.h"
#include "core/quant.h"
#include "model/lora.h"
#include "model/model.h"

typedef struct {
    const model *m;
    const gguf_ctx *g;
    lora_adapter **ad;
    const float *scales;
    int n;
    uint32_t *to;     /* [n_tensors] the type written; UINT32_MAX: copied */
    int *layer;       /* [n_tensors] */
    lora_kind *kind;  /* [n_tensors] the first part's */
} merge_ctx;

/* row += s · B_row · A, for row r of expert e of one adapted tensor (r counts the rows of a
 * fused tensor's later parts too: its first part's B^T holds them all). */
static void add_delta(const lora_tensor *t, float s, int64_t e, int64_t r, float *row) {
    const float *a = t->a + (size_t)e * (size_t)t->rank * (size_t)t->n_in;
    const float *bt = t->bt + (size_t)e * (size_t)t->rank * t->bt_stride + (size_t)r;
    for (int64_t j = 0; j < t->n_in; j++) {
        float d = 0.0f;
        for (int k = 0; k < t->rank; k++) d += bt[(size_t)k * t->bt_stride] * a[(size_t)k * (size_t)t->n_in + (size_t)j];
        row[j] += s * d;
    }
}

static err_code fill(void *user, uint64_t i, void *buf, uint64_t n_bytes, err_t *err) {
    merge_ctx *c = user;
    const gguf_tensor *t = &c->g->tensors[i];
    if (c->to[i] == UINT32_MAX) {
        memcpy(buf, t->data, n_bytes);
        return ERR_OK;
    }
    const int64_t n0 = t->ne[0], rows = t->ne[1], mats = t->ne[2];
    float *row = malloc(sizeof(float) * (size_t)n0);
    if (!row) return err_set(err, ERR_NOMEM, "out of memory");
    const size_t in_rb = quant_row_bytes(t->type, n0), out_rb = quant_row_bytes(c->to[i], n0);
    for (int64_t e = 0; e < mats; e++)
        for (int64_t r = 0; r < rows; r++) {
            const size_t at = (size_t)(e * rows + r);
            quant_dequantize_row(t->type, (const uint8_t *)t->data + at * in_rb, row, n0);
            for (int k = 0; k < c->n; k++) {
                const lora_tensor *lt = lora_find(c->ad[k], c->layer[i], c->kind[i]);
                if (lt && c->scales[k] != 0.0f) add_delta(lt, lora_scale(c->ad[k], lt, c->scales[k]), e, r, row);
            }
            quant_quantize_row(c->to[i], row, (uint8_t *)buf + at * out_rb, n0);
        }
    free(row);
    return ERR_OK;
}

/* Which tensors change, and their types. */
static void plan(merge_ctx *c, merge_report *rep) {
    for (uint64_t i = 0; i < c->g->n_tensors; i++) {
        const gguf_tensor *t = &c->g->tensors[i];
        lora_kind kinds[3];
        int layer = 0, n = lora_targets(c->m, t->name, &layer, kinds);
        bool any = false;
        for (int k = 0; n && k < c->n; k++) any |= lora_find(c->ad[k], layer, kinds[0]) != NULL;
        c->to[i] = any ? (t->type == QT_F32 ? QT_F32 : QT_F16) : UINT32_MAX;
        c->layer[i] = layer, c->kind[i] = kinds[0];
        if (any) rep->merged++;
        else rep->copied++;
    }
}

static err_code write_merged(merge_ctx *c, const char *out, err_t *err) {
    gguf_writer *w = gguf_writer_new();
    if (!w) return err_set(err, ERR_NOMEM, "out of memory");
    err_code rc = ERR_OK;
    uint32_t align;
    if (gguf_get_u32(c->g, "general.alignment", &align)) gguf_writer_set_alignment(w, align);
    for (uint64_t i = 0; i < c->g->n_kv && !rc; i++)
        if (strcmp(c->g->kv[i].key, "general.alignment")) rc = gguf_writer_set_value(w, c->g->kv[i].key, &c->g->kv[i].value);
    if (rc) rc = err_set(err, rc, "out of memory");
    for (uint64_t i = 0; i < c->g->n_tensors && !rc; i++) {
        const gguf_tensor *t = &c->g->tensors[i];
        rc = gguf_writer_add_tensor(w, t->name, c->to[i] == UINT32_MAX ? t->type : c->to[i], t->n_dims, t->ne, NULL, err);
    }
    if (!rc) rc = gguf_writer_write(w, out, fill, c, err);
    gguf_writer_free(w);
    return rc;
}

err_code merge_run(const merge_opts *o, merge_report *rep, err_t *err) {
    memset(rep, 0, sizeof *rep);
    if (!o->base || !o->output || o->n < 1 || o->n > LORA_MAX_STACK)
        return err_set(err, ERR_INVALID_ARG, "merge needs a base, an output and 1 to %d adapters", LORA_MAX_STACK);
    model *m = NULL;
    err_code rc = atomic_file_check(o->output, err);
    if (!rc && (rc = model_open(o->base, &m, err))) err_prefix(err, "%s", o->base);
    if (!rc && m->prepacked)
        rc = err_set(err, ERR_UNSUPPORTED, "%s is a deploy bundle's packed file: merge into the GGUF it was made from",
                     o->base);
    merge_ctx c = {.m = m, .g = m ? m->gguf : NULL, .n = o->n};
    lora_adapter *ad[LORA_MAX_STACK] = {0};
    float ones[LORA_MAX_STACK];
    for (int i = 0; i < LORA_MAX_STACK; i++) ones[i] = 1.0f;
    c.ad = ad, c.scales = o->scales ? o->scales : ones;
    for (int i = 0; i < o->n && !rc; i++)
        if ((rc = lora_open(m, o->adapters[i], &ad[i], err))) err_prefix(err, "adapter %s", o->adapters[i]);
    if (!rc) {
        const size_t n = c.g->n_tensors ? c.g->n_tensors : 1;
        c.to = malloc(n * sizeof *c.to), c.layer = malloc(n * sizeof *c.layer), c.kind = malloc(n * sizeof *c.kind);
        if (!c.to || !c.layer || !c.kind) rc = err_set(err, ERR_NOMEM, "out of memory");
    }
    if (!rc) {
        plan(&c, rep);
        rc = write_merged(&c, o->output, err);
    }
    free(c.to), free(c.layer), free(c.kind);
    for (int i = 0; i < o->n; i++) lora_free(ad[i]);
    model_free(m);
    return rc;
}
