/*
 * upcycle_write — the upcycled model as a Mixtral-layout GGUF.
 *
 * Every tensor and metadata value of the dense file is kept, except that
 * each layer's ffn_gate / ffn_up / ffn_down become ffn_gate_inp (the router,
 * F32 [n_embd, E]) and the expert stacks ffn_{gate,up}_exps [n_embd, m, E]
 * and ffn_down_exps [m, n_embd, E]. Gate and up rows are the dense rows,
 * copied byte for byte (a padding neuron is a zero row); down rows are
 * gathered from the dense columns, multiplied by K and quantized again to
 * the dense type, or to the nearest type whose blocks fit in m values.
 * With a shared expert of N neurons, ffn_{gate,up}_shexp [n_embd, N] and
 * ffn_down_shexp [N, n_embd] hold them (down not scaled: it is not gated)
 * and {arch}.expert_shared_feed_forward_length says N: octo runs such a
 * file; llama.cpp's llama architecture has no shared expert and refuses it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/upcycle_internal.h"
#include "core/gguf.h"
#include "core/quant.h"

typedef enum { JOB_COPY, JOB_ROUTER, JOB_GATE, JOB_UP, JOB_DOWN, JOB_GATE_SH, JOB_UP_SH, JOB_DOWN_SH } job_kind;
typedef struct {
    job_kind kind;
    int layer;
    const gguf_tensor *src;
} job;

typedef struct {
    const upcycle_plan *p;
    job *jobs; /* one per tensor written, in order */
    int n_jobs;
} writer_ctx;

uint32_t upcycle_down_type(uint32_t dense_type, int m) {
    const quant_traits *tr = quant_traits_of(dense_type);
    if (tr && m % tr->block_size == 0) return dense_type;
    uint32_t t; /* llama.cpp's fallback for rows the K-quants' 256 cannot divide */
    switch (dense_type) {
    case QT_Q2_K:
    case QT_Q3_K: t = QT_Q4_0; break;
    case QT_Q4_K: t = QT_Q5_0; break;
    case QT_Q5_K: t = QT_Q5_1; break;
    default: t = QT_Q8_0; break;
    }
    return m % quant_traits_of(t)->block_size == 0 ? t : QT_F16;
}

/* Rows ids[0..n) of a matrix of n_embd-long rows (gate, up), byte for byte; -1 a zero row. */
static void fill_rows(const gguf_tensor *src, int n_embd, const int32_t *ids, size_t n, uint8_t *dst) {
    const size_t rb = quant_row_bytes(src->type, n_embd);
    for (size_t s = 0; s < n; s++, dst += rb) {
        if (ids[s] < 0) memset(dst, 0, rb);
        else memcpy(dst, (const uint8_t *)src->data + (size_t)ids[s] * rb, rb);
    }
}

/* groups down projections of len columns each, column j of group g the dense
 * column ids[g * len + j] (-1: zero) times scale, as type. */
static err_code fill_down(const upcycle_plan *p, const gguf_tensor *src, const int32_t *ids, int groups, int len,
                          float scale, uint32_t type, uint8_t *dst, err_t *err) {
    const int n_embd = p->dense->hp.n_embd, n_ff = p->dense->hp.n_ff;
    const size_t in_rb = quant_row_bytes(src->type, n_ff), out_rb = quant_row_bytes(type, len);
    float *dense = malloc(sizeof(float) * (size_t)n_embd * n_ff), *row = malloc(sizeof(float) * (size_t)len);
    if (!dense || !row) {
        free(dense), free(row);
        return err_set(err, ERR_NOMEM, "out of memory");
    }
    for (int r = 0; r < n_embd; r++)
        quant_dequantize_row(src->type, (const uint8_t *)src->data + (size_t)r * in_rb, dense + (size_t)r * n_ff, n_ff);
    for (int g = 0; g < groups; g++)
        for (int r = 0; r < n_embd; r++, dst += out_rb) {
            for (int i = 0; i < len; i++) {
                const int32_t s = ids[(size_t)g * len + i];
                row[i] = s < 0 ? 0.0f : dense[(size_t)r * n_ff + s] * scale;
            }
            quant_quantize_row(type, row, dst, len);
        }
    free(dense), free(row);
    return ERR_OK;
}

static err_code fill(void *user, uint64_t index, void *buf, uint64_t n_bytes, err_t *err) {
    const writer_ctx *w = user;
    const job *j = &w->jobs[index];
    const upcycle_plan *p = w->p;
    const upcycle_layer *L = j->layer >= 0 ? &p->layers[j->layer] : NULL;
    const int n_embd = p->dense->hp.n_embd;
    switch (j->kind) {
    case JOB_COPY: memcpy(buf, j->src->data, n_bytes); return ERR_OK;
    case JOB_ROUTER: memcpy(buf, L->router, n_bytes); return ERR_OK;
    case JOB_GATE:
    case JOB_UP: fill_rows(j->src, n_embd, L->slot, (size_t)p->E * p->m, buf); return ERR_OK;
    case JOB_GATE_SH:
    case JOB_UP_SH: fill_rows(j->src, n_embd, L->shared, (size_t)p->n_shared, buf); return ERR_OK;
    case JOB_DOWN:
        return fill_down(p, j->src, L->slot, p->E, p->m, p->down_scale, upcycle_down_type(j->src->type, p->m), buf,
                         err);
    case JOB_DOWN_SH:
        return fill_down(p, j->src, L->shared, 1, p->n_shared, 1.0f, upcycle_down_type(j->src->type, p->n_shared), buf,
                         err);
    }
    return err_set(err, ERR_INVALID_ARG, "no such tensor job");
}

/* The FFN tensor a dense name stands for in layer *layer, or JOB_COPY. */
static job_kind kind_of(const char *name, int *layer) {
    char rest[32];
    if (sscanf(name, "blk.%d.%31s", layer, rest) != 2) return JOB_COPY;
    if (!strcmp(rest, "ffn_gate.weight")) return JOB_GATE;
    if (!strcmp(rest, "ffn_up.weight")) return JOB_UP;
    if (!strcmp(rest, "ffn_down.weight")) return JOB_DOWN;
    return JOB_COPY;
}

static err_code add(gguf_writer *g, writer_ctx *w, job j, const char *name, uint32_t type, uint32_t n_dims,
                    const int64_t *ne, err_t *err) {
    w->jobs[w->n_jobs++] = j;
    return gguf_writer_add_tensor(g, name, type, n_dims, ne, NULL, err);
}

static err_code add_tensors(gguf_writer *g, writer_ctx *w, err_t *err) {
    const upcycle_plan *p = w->p;
    const int64_t n_embd = p->dense->hp.n_embd, m = p->m, E = p->E, sh = p->n_shared;
    err_code rc = ERR_OK;
    for (uint64_t i = 0; i < p->src->n_tensors && !rc; i++) {
        const gguf_tensor *t = &p->src->tensors[i];
        int l = -1;
        const job_kind kind = kind_of(t->name, &l);
        char name[96];
        const job j = {kind, l, t};
        if (kind != JOB_COPY && (l < 0 || l >= p->dense->hp.n_layer))
            return err_set(err, ERR_BAD_SHAPE, "tensor '%s': no such layer", t->name);
        switch (kind) {
        case JOB_COPY: rc = add(g, w, j, t->name, t->type, t->n_dims, t->ne, err); break;
        case JOB_GATE:
            snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.weight", l);
            rc = add(g, w, (job){JOB_ROUTER, l, t}, name, QT_F32, 2, (int64_t[]){n_embd, E}, err);
            snprintf(name, sizeof name, "blk.%d.ffn_gate_exps.weight", l);
            if (!rc) rc = add(g, w, j, name, t->type, 3, (int64_t[]){n_embd, m, E}, err);
            snprintf(name, sizeof name, "blk.%d.ffn_gate_shexp.weight", l);
            if (!rc && sh) rc = add(g, w, (job){JOB_GATE_SH, l, t}, name, t->type, 2, (int64_t[]){n_embd, sh}, err);
            break;
        case JOB_UP:
            snprintf(name, sizeof name, "blk.%d.ffn_up_exps.weight", l);
            rc = add(g, w, j, name, t->type, 3, (int64_t[]){n_embd, m, E}, err);
            snprintf(name, sizeof name, "blk.%d.ffn_up_shexp.weight", l);
            if (!rc && sh) rc = add(g, w, (job){JOB_UP_SH, l, t}, name, t->type, 2, (int64_t[]){n_embd, sh}, err);
            break;
        case JOB_DOWN:
            snprintf(name, sizeof name, "blk.%d.ffn_down_exps.weight", l);
            rc = add(g, w, j, name, upcycle_down_type(t->type, (int)m), 3, (int64_t[]){m, n_embd, E}, err);
            snprintf(name, sizeof name, "blk.%d.ffn_down_shexp.weight", l);
            if (!rc && sh)
                rc = add(g, w, (job){JOB_DOWN_SH, l, t}, name, upcycle_down_type(t->type, (int)sh), 2,
                         (int64_t[]){sh, n_embd}, err);
            break;
        default: break;
        }
    }
    return rc;
}

static err_code add_metadata(gguf_writer *g, const upcycle_plan *p, const upcycle_opts *o, int calib,
                             err_t *err) {
    const gguf_ctx *src = p->src;
    err_code rc = ERR_OK;
    for (uint64_t i = 0; i < src->n_kv && !rc; i++) rc = gguf_writer_set_value(g, src->kv[i].key, &src->kv[i].value);
    const char *arch = p->dense->hp.arch_name;
    char key[96], name[320], source[256];
    gguf_str gname = {0, NULL};
    const bool named = gguf_get_str(src, "general.name", &gname);
    const char *base = strrchr(o->input, '/') ? strrchr(o->input, '/') + 1 : o->input;
    snprintf(source, sizeof source, "%.*s", named ? (int)gname.len : (int)strlen(base), named ? gname.ptr : base);
    snprintf(name, sizeof name, "%s upcycled %dx%d", source, p->E, p->K);
#define SET(kind, k, v) (snprintf(key, sizeof key, k, arch), rc = rc ? rc : gguf_writer_set_##kind(g, key, v))
    SET(u32, "%s.expert_count", (uint32_t)p->E);
    SET(u32, "%s.expert_used_count", (uint32_t)p->K);
    SET(u32, "%s.feed_forward_length", (uint32_t)p->m);
    if (p->n_shared) SET(u32, "%s.expert_shared_feed_forward_length", (uint32_t)p->n_shared);
#undef SET
    if (!rc) rc = gguf_writer_set_str(g, "general.name", name);
    if (!rc) rc = gguf_writer_set_str(g, "octo.upcycle.source", source);
    if (!rc) rc = gguf_writer_set_u32(g, "octo.upcycle.experts", (uint32_t)p->E);
    if (!rc) rc = gguf_writer_set_u32(g, "octo.upcycle.experts_used", (uint32_t)p->K);
    if (!rc) rc = gguf_writer_set_str(g, "octo.upcycle.split", upcycle_split_name(o->split));
    if (!rc) rc = gguf_writer_set_str(g, "octo.upcycle.router", upcycle_router_name(o->router));
    if (!rc) rc = gguf_writer_set_str(g, "octo.upcycle.combine", upcycle_combine_name(o->combine));
    if (!rc) rc = gguf_writer_set_u32(g, "octo.upcycle.calibration_tokens", (uint32_t)calib);
    if (!rc) rc = gguf_writer_set_u32(g, "octo.upcycle.shared", (uint32_t)p->n_shared);
    if (!rc) rc = gguf_writer_set_u32(g, "octo.upcycle.padding",
                                      (uint32_t)(p->E * p->m + p->n_shared - p->dense->hp.n_ff));
    if (!rc) rc = gguf_writer_set_u64(g, "octo.upcycle.seed", o->seed);
    return rc ? err_set(err, rc, "out of memory") : ERR_OK;
}

err_code upcycle_write(const upcycle_plan *p, const upcycle_opts *o, int calib_tokens, const char *path,
                       err_t *err) {
    gguf_writer *g = gguf_writer_new();
    writer_ctx w = {p, calloc(p->src->n_tensors + 4 * (size_t)p->dense->hp.n_layer + 1, sizeof(job)), 0};
    if (!g || !w.jobs) {
        gguf_writer_free(g);
        free(w.jobs);
        return err_set(err, ERR_NOMEM, "out of memory");
    }
    gguf_writer_set_version(g, 3);
    err_code rc = add_metadata(g, p, o, calib_tokens, err);
    if (!rc) rc = add_tensors(g, &w, err);
    if (!rc) rc = gguf_writer_write(g, path, fill, &w, err);
    gguf_writer_free(g);
    free(w.jobs);
    return rc;
}
