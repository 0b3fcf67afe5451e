/*
 * adapter_synth — a random adapter for a base (convert/adapter_synth.h).
 */
#include "convert/adapter_synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/gguf.h"
#include "core/mix.h"
#include "core/quant.h"
#include "model/model.h"

adapter_synth_opts adapter_synth_defaults(void) {
    return (adapter_synth_opts){.rank = 16, .alpha = 16.0f, .type = QT_F32, .kinds = LORA_KINDS_DEFAULT, .std = 0.05f,
                                .seed = 1};
}

typedef struct {
    const adapter_synth_opts *o;
    int64_t *ne0, *rows;     /* [tensor] each written tensor's row length and rows */
    int64_t *n_in;           /* [tensor] the row length of the base matrix (A's scale) */
    int n;
} synth_ctx;

static err_code fill(void *user, uint64_t i, void *buf, uint64_t n_bytes, err_t *err) {
    (void)n_bytes;
    synth_ctx *c = user;
    const int64_t n0 = c->ne0[i], rows = c->rows[i];
    const bool is_a = i % 2 == 0;
    const float amp = c->o->std * sqrtf(3.0f) / (is_a ? sqrtf((float)c->n_in[i]) : 1.0f);
    float *row = malloc(sizeof(float) * (size_t)n0);
    if (!row) return err_set(err, ERR_NOMEM, "out of memory");
    const size_t rb = quant_row_bytes(c->o->type, n0);
    uint64_t s = mix64(c->o->seed ^ mix64(i));
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t j = 0; j < n0; j++) {
            s = mix64(s);
            row[j] = amp * (float)((double)(s >> 11) * 0x1p-52 - 1.0);
        }
        quant_quantize_row(c->o->type, row, (uint8_t *)buf + (size_t)r * rb, n0);
    }
    free(row);
    return ERR_OK;
}

/* The pairs: A then B for every adapted matrix, in the base's order. */
static err_code add_pairs(const model *m, const adapter_synth_opts *o, gguf_writer *w, synth_ctx *c, err_t *err) {
    const gguf_ctx *g = m->gguf;
    err_code rc = ERR_OK;
    int *n = &c->n;
    *n = 0;
    for (uint64_t i = 0; i < g->n_tensors && !rc; i++) {
        const gguf_tensor *t = &g->tensors[i];
        lora_kind k[3];
        int layer;
        const int nk = lora_targets(m, t->name, &layer, k);
        if (!nk || !(o->kinds & (1u << k[0]))) continue;
        char name[256];
        const int64_t a_ne[3] = {t->ne[0], o->rank, t->ne[2]}, b_ne[3] = {o->rank, t->ne[1], t->ne[2]};
        const uint32_t dims = t->ne[2] > 1 ? 3 : 2;
        snprintf(name, sizeof name, "%s.lora_a", t->name);
        rc = gguf_writer_add_tensor(w, name, o->type, dims, a_ne, NULL, err);
        snprintf(name, sizeof name, "%s.lora_b", t->name);
        if (!rc) rc = gguf_writer_add_tensor(w, name, o->type, dims, b_ne, NULL, err);
        c->n_in[*n] = c->n_in[*n + 1] = t->ne[0];
        c->ne0[*n] = t->ne[0], c->rows[*n] = o->rank * t->ne[2];
        c->ne0[*n + 1] = o->rank, c->rows[*n + 1] = t->ne[1] * t->ne[2];
        *n += 2;
    }
    if (!rc && !*n) rc = err_set(err, ERR_INVALID_ARG, "the model has none of the matrices asked for");
    return rc;
}

err_code adapter_synth(const char *base, const adapter_synth_opts *o, const char *out, err_t *err) {
    if (o->rank < 1 || o->rank > 65536) return err_set(err, ERR_INVALID_ARG, "rank %d (1..65536)", o->rank);
    if (o->type != QT_F32 && o->type != QT_F16 && o->type != QT_BF16 && o->type != QT_Q8_0)
        return err_set(err, ERR_INVALID_ARG, "adapters are written as f32, f16, bf16 or q8_0");
    if (o->type == QT_Q8_0 && o->rank % 32)
        return err_set(err, ERR_INVALID_ARG, "a q8_0 adapter needs a rank that is a multiple of 32, not %d", o->rank);
    model *m = NULL;
    err_code rc = model_open(base, &m, err);
    if (rc) return err_prefix(err, "%s", base), rc;
    gguf_writer *w = gguf_writer_new();
    const size_t cap = 2 * (size_t)m->gguf->n_tensors + 1;
    synth_ctx c = {.o = o, .ne0 = malloc(cap * sizeof(int64_t)), .rows = malloc(cap * sizeof(int64_t)),
                   .n_in = malloc(cap * sizeof(int64_t))};
    if (!w || !c.ne0 || !c.rows || !c.n_in) rc = err_set(err, ERR_NOMEM, "out of memory");
    if (!rc) rc = gguf_writer_set_str(w, "general.type", "adapter");
    if (!rc) rc = gguf_writer_set_str(w, "general.architecture", m->hp.arch_name);
    if (!rc) rc = gguf_writer_set_str(w, "adapter.type", "lora");
    if (!rc && o->alpha != 0.0f) rc = gguf_writer_set_f32(w, "adapter.lora.alpha", o->alpha);
    if (rc) rc = err_set(err, rc, "out of memory");
    if (!rc) rc = add_pairs(m, o, w, &c, err);
    if (!rc) rc = gguf_writer_write(w, out, fill, &c, err);
    gguf_writer_free(w);
    free(c.ne0), free(c.rows), free(c.n_in);
    model_free(m);
    return rc;
}
