/*
 * weights — a model's weights as trainable F32 values (train/weights.h).
 */
#include "train/weights.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/gguf.h"
#include "core/quant.h"

typedef struct {
    const void *src;  /* the tensor's bytes in the source mapping (its identity) */
    uint64_t tensor;  /* its index in the source GGUF */
    size_t off, n;    /* its values */
} entry;

struct train_weights {
    const model *src;
    model view;
    model_layer *layers;
    float *values;
    size_t n_values;
    entry *e;
    int n_e;
};

/* The trained matrices of the model, each once (a tied output is the embedding; an expert stack is one). */
static int collect(model *v, model_mat **out) {
    int k = 0;
    out[k++] = &v->tok_embd, out[k++] = &v->output_norm;
    if (!v->output_tied && v->output.data != v->tok_embd.data) out[k++] = &v->output;
    for (int l = 0; l < v->hp.n_layer; l++) {
        model_layer *L = &v->layers[l];
        model_mat *m[] = {&L->attn_norm, &L->wq, &L->wk, &L->wv, &L->wo, &L->bq,
                          &L->bk,        &L->bv, &L->ffn_norm, &L->w_gate, &L->w_up, &L->w_down, &L->gate_inp};
        for (size_t i = 0; i < sizeof m / sizeof *m; i++)
            if (m[i]->data) out[k++] = m[i];
    }
    return k;
}

static int64_t tensor_of(const gguf_ctx *g, const void *data) {
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].data == data) return (int64_t)i;
    return -1;
}

/* Each matrix's place among the values, and the source tensor it came from. */
static err_code place(train_weights *w, model_mat **mats, int k, err_t *err) {
    for (int i = 0; i < k; i++) {
        const model_mat *mt = mats[i];
        const int64_t t = tensor_of(w->src->gguf, mt->data);
        if (t < 0 || mt->packed)
            return err_set(err, ERR_UNSUPPORTED, "full training reads the file's own tensors: open the model unpacked");
        w->e[i] = (entry){.src = mt->data, .tensor = (uint64_t)t, .off = w->n_values,
                          .n = (size_t)(mt->n_in * mt->n_out * mt->n_mat)};
        w->n_values += w->e[i].n;
    }
    w->n_e = k;
    return ERR_OK;
}

/* The values filled from the source, the view's matrices pointed at them. */
static void fill(train_weights *w, model_mat **mats) {
    for (int i = 0; i < w->n_e; i++) {
        model_mat *mt = mats[i];
        float *dst = w->values + w->e[i].off;
        for (int64_t r = 0; r < mt->n_out * mt->n_mat; r++)
            quant_dequantize_row(mt->type, (const uint8_t *)mt->data + (size_t)r * mt->row_bytes, dst + r * mt->n_in,
                                 mt->n_in);
        const bool tied_output = mt == &w->view.tok_embd && w->view.output.data == mt->data;
        mt->data = dst, mt->type = QT_F32, mt->row_bytes = sizeof(float) * (size_t)mt->n_in;
        if (tied_output) w->view.output = *mt;
    }
}

err_code train_weights_new(const model *m, train_weights **out, err_t *err) {
    *out = NULL;
    train_weights *w = calloc(1, sizeof *w);
    const int cap = 3 + 13 * m->hp.n_layer;
    if (w) w->layers = calloc((size_t)m->hp.n_layer, sizeof *w->layers), w->e = calloc((size_t)cap, sizeof *w->e);
    model_mat **mats = calloc((size_t)cap, sizeof *mats);
    err_code rc = w && w->layers && w->e && mats ? ERR_OK : err_set(err, ERR_NOMEM, "out of memory");
    if (!rc) {
        w->src = m, w->view = *m;
        memcpy(w->layers, m->layers, sizeof *w->layers * (size_t)m->hp.n_layer);
        w->view.layers = w->layers, w->view.owned = NULL, w->view.packed_bytes = 0;
        rc = place(w, mats, collect(&w->view, mats), err);
    }
    if (!rc && !(w->values = malloc(sizeof(float) * (w->n_values ? w->n_values : 1))))
        rc = err_set(err, ERR_NOMEM, "out of memory for %zu trainable weights", w->n_values);
    if (!rc) fill(w, mats);
    free(mats);
    if (rc) return train_weights_free(w), rc;
    *out = w;
    return ERR_OK;
}

void train_weights_free(train_weights *w) {
    if (!w) return;
    free(w->values), free(w->layers), free(w->e);
    free(w);
}

const model *train_weights_model(const train_weights *w) { return &w->view; }

float *train_weights_values(train_weights *w, size_t *n) {
    *n = w->n_values;
    return w->values;
}

int train_weights_tensors(const train_weights *w) { return w->n_e; }

float *train_weights_grad(const train_weights *w, float *grad, const model_mat *mat) {
    if (!grad || !mat->data) return NULL;
    /* a matrix, or one expert of a stack: anywhere among the values (the entries lie end to end) */
    const uintptr_t p = (uintptr_t)mat->data, v = (uintptr_t)w->values;
    if (p < v || p >= v + sizeof(float) * w->n_values) return NULL;
    return grad + (p - v) / sizeof(float);
}

/* ---------------------------------------------------------------- writing */

static const entry *trained(const train_weights *w, uint64_t tensor) {
    for (int i = 0; i < w->n_e; i++)
        if (w->e[i].tensor == tensor) return &w->e[i];
    return NULL;
}

static err_code fill_tensor(void *user, uint64_t i, void *buf, uint64_t n_bytes, err_t *err) {
    (void)err;
    const train_weights *w = user;
    const entry *e = trained(w, i);
    memcpy(buf, e ? (const void *)(w->values + e->off) : w->src->gguf->tensors[i].data, n_bytes);
    return ERR_OK;
}

err_code train_weights_write(const train_weights *w, const gguf_i32_array *extra, const char *path, err_t *err) {
    const gguf_ctx *g = w->src->gguf;
    gguf_writer *gw = gguf_writer_new();
    if (!gw) return err_set(err, ERR_NOMEM, "out of memory");
    err_code rc = ERR_OK;
    uint32_t align;
    if (gguf_get_u32(g, "general.alignment", &align)) gguf_writer_set_alignment(gw, align);
    const char *own = extra && extra->key ? extra->key : "";
    for (uint64_t i = 0; i < g->n_kv && !rc; i++)
        if (strcmp(g->kv[i].key, "general.alignment") && strcmp(g->kv[i].key, own))
            rc = gguf_writer_set_value(gw, g->kv[i].key, &g->kv[i].value);
    if (!rc && *own) rc = gguf_writer_set_arr_i32(gw, own, extra->v, extra->n);
    if (rc) rc = err_set(err, rc, "out of memory");
    for (uint64_t i = 0; i < g->n_tensors && !rc; i++) {
        const gguf_tensor *t = &g->tensors[i];
        rc = gguf_writer_add_tensor(gw, t->name, trained(w, i) ? QT_F32 : t->type, t->n_dims, t->ne, NULL, err);
    }
    if (!rc) rc = gguf_writer_write(gw, path, fill_tensor, (void *)w, err);
    gguf_writer_free(gw);
    return rc;
}
