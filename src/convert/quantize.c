/*
 * quantize — see quantize.h. The type of each tensor (tensor_type, with the
 * mixes in mix_type) is decided once, up front; the data is then converted
 * tensor by tensor while the file is written, its rows split over a thread
 * pool, so the output never has to fit in memory.
 */
#include "quantize.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/atomic_write.h"
#include "core/gguf.h"
#include "core/quant.h"
#include "model/model.h"
#include "core/threadpool.h"
#include "imatrix.h"

/* ---------------------------------------------------------------- names */

typedef enum { MIX_NONE, MIX_Q3_K_M, MIX_Q4_K_S, MIX_Q4_K_M, MIX_Q5_K_S, MIX_Q5_K_M } mix_kind;

typedef struct {
    const char *name;
    uint32_t type;   /* the base type */
    mix_kind mix;
    uint32_t ftype;  /* llama.cpp's general.file_type */
} type_row;

static const type_row TYPES[] = {
    {"f32", QT_F32, MIX_NONE, 0},        {"f16", QT_F16, MIX_NONE, 1},        {"bf16", QT_BF16, MIX_NONE, 32},
    {"q4_0", QT_Q4_0, MIX_NONE, 2},      {"q4_1", QT_Q4_1, MIX_NONE, 3},      {"q8_0", QT_Q8_0, MIX_NONE, 7},
    {"q5_0", QT_Q5_0, MIX_NONE, 8},      {"q5_1", QT_Q5_1, MIX_NONE, 9},      {"q2_k", QT_Q2_K, MIX_NONE, 10},
    {"q3_k", QT_Q3_K, MIX_NONE, 11},     {"q3_k_m", QT_Q3_K, MIX_Q3_K_M, 12}, {"q4_k", QT_Q4_K, MIX_NONE, 14},
    {"q4_k_s", QT_Q4_K, MIX_Q4_K_S, 14}, {"q4_k_m", QT_Q4_K, MIX_Q4_K_M, 15}, {"q5_k", QT_Q5_K, MIX_NONE, 16},
    {"q5_k_s", QT_Q5_K, MIX_Q5_K_S, 16}, {"q5_k_m", QT_Q5_K, MIX_Q5_K_M, 17}, {"q6_k", QT_Q6_K, MIX_NONE, 18},
};

static const type_row *find_type(const char *name) {
    for (size_t i = 0; name && i < sizeof TYPES / sizeof *TYPES; i++) {
        const char *a = TYPES[i].name, *b = name;
        while (*a && (*b == *a || *b == *a - 32)) a++, b++; /* either case */
        if (!*a && !*b) return &TYPES[i];
    }
    return NULL;
}

int quantize_type_of(const char *name) {
    const type_row *t = find_type(name);
    return t ? (int)t->type : -1;
}

/* ---------------------------------------------------------------- which type */

static bool ends_with(const char *s, const char *suffix) {
    const size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* "blk.N." -> N, else -1 */
static int layer_of(const char *name) {
    int l = -1;
    return sscanf(name, "blk.%d.", &l) == 1 ? l : -1;
}

/* llama.cpp's layers that get more bits in its _M mixes: the first and last
 * eighth, and every third layer between. */
static bool more_bits(int l, int n_layer) {
    return l < n_layer / 8 || l >= 7 * n_layer / 8 || (l - n_layer / 8) % 3 == 2;
}

/* The type a mix gives a matrix (its base type where it says nothing). */
static uint32_t mix_type(mix_kind mix, uint32_t base, const char *name, int n_layer) {
    if (mix == MIX_NONE) return base;
    if (!strcmp(name, "output.weight")) return QT_Q6_K;
    const int l = layer_of(name);
    const bool v = strstr(name, "attn_v.weight") != NULL, down = strstr(name, "ffn_down") != NULL;
    switch (mix) {
    case MIX_Q3_K_M:
        if (v) return l < 2 ? QT_Q5_K : QT_Q4_K;
        if (down) return l < n_layer / 16 ? QT_Q5_K : QT_Q4_K;
        if (strstr(name, "attn_output.weight")) return QT_Q4_K;
        return base;
    case MIX_Q4_K_S:
        return down && l < n_layer / 8 ? QT_Q5_K : base;
    case MIX_Q4_K_M:
    case MIX_Q5_K_M:
        return (v || down) && more_bits(l, n_layer) ? QT_Q6_K : base;
    case MIX_Q5_K_S:
    default:
        return base;
    }
}

/* The nearest type that holds rows of n values, starting from t. */
static uint32_t holding(uint32_t t, int64_t n) {
    for (int guard = 0; guard < 4; guard++) {
        const quant_traits *tr = quant_traits_of(t);
        if (tr && n % tr->block_size == 0) return t;
        switch (t) {
        case QT_Q4_K: t = QT_Q5_0; break;
        case QT_Q5_K: t = QT_Q5_1; break;
        case QT_Q6_K: t = QT_Q8_0; break;
        case QT_Q2_K:
        case QT_Q3_K: t = QT_Q4_0; break;
        default: t = QT_F16; break;
        }
    }
    return QT_F32;
}

/* A tensor stays as it is (1-D: norms, biases, RoPE factors; the routers). */
static bool kept(const gguf_tensor *t) {
    return t->n_dims < 2 || ends_with(t->name, "ffn_gate_inp.weight") || ends_with(t->name, "ffn_gate_inp_shexp.weight");
}

/* ---------------------------------------------------------------- conversion */

typedef struct {
    const gguf_ctx *src;
    uint32_t *to;      /* [n_tensors] */
    tpool *pool;
    float **rows;      /* per thread, one row of the widest tensor */
    const quantize_opts *o;
    imatrix *im;       /* NULL: no calibration text */
    quantize_report *rep;
} qctx;

typedef struct {
    const gguf_tensor *t;
    uint32_t to;
    uint8_t *dst;
    float **rows;
    const float *imp;  /* the importance of each input column, or NULL */
} row_job;

static void convert_rows(void *ctx, int ith, int nth) {
    const row_job *j = ctx;
    const int64_t n = j->t->ne[0], rows = (int64_t)(j->t->n_elements / (uint64_t)n);
    const size_t rb_in = quant_row_bytes(j->t->type, n), rb_out = quant_row_bytes(j->to, n);
    float *f = j->rows[ith];
    for (int64_t r = rows * ith / nth; r < rows * (ith + 1) / nth; r++) {
        quant_dequantize_row(j->t->type, (const uint8_t *)j->t->data + (size_t)r * rb_in, f, n);
        if (j->imp) quant_traits_of(j->to)->quantize_imp(f, j->dst + (size_t)r * rb_out, n, j->imp);
        else quant_quantize_row(j->to, f, j->dst + (size_t)r * rb_out, n);
    }
}

static err_code fill(void *user, uint64_t index, void *buf, uint64_t n_bytes, err_t *err) {
    qctx *c = user;
    const gguf_tensor *t = &c->src->tensors[index];
    (void)err;
    if (c->o->progress) c->o->progress(c->o->progress_ctx, (int)index, (int)c->src->n_tensors, t->name, t->type, c->to[index]);
    if (c->to[index] == t->type) {
        memcpy(buf, t->data, n_bytes);
        return ERR_OK;
    }
    row_job j = {t, c->to[index], buf, c->rows, NULL};
    if (c->im && quant_traits_of(j.to)->quantize_imp && (j.imp = imatrix_of(c->im, t->name, t->ne[0])))
        c->rep->n_weighted++;
    tpool_run(c->pool, convert_rows, &j);
    return ERR_OK;
}

/* Every tensor's type, and the report's counts. */
static void plan_types(const gguf_ctx *g, const gguf_ctx *ref, const type_row *tr, uint32_t *to,
                       quantize_report *rep) {
    int n_layer = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (layer_of(g->tensors[i].name) + 1 > n_layer) n_layer = layer_of(g->tensors[i].name) + 1;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        uint32_t want = kept(t) ? t->type : mix_type(tr->mix, tr->type, t->name, n_layer);
        const gguf_tensor *r = ref ? gguf_find_tensor(ref, t->name) : NULL;
        if (r && r->ne[0] == t->ne[0] && quant_type_supported(r->type)) want = r->type; /* --types-from */
        to[i] = holding(want, t->ne[0]);
        if (to[i] != want) {
            if (!rep->n_fallback)
                snprintf(rep->fallback, sizeof rep->fallback, "%s: rows of %lld cannot hold %s, written as %s", t->name,
                         (long long)t->ne[0], quant_traits_of(want)->name, quant_traits_of(to[i])->name);
            rep->n_fallback++;
        }
        rep->n_converted += to[i] != t->type;
        rep->bytes_in += t->n_bytes;
        rep->bytes_out += quant_row_bytes(to[i], t->ne[0]) * (t->n_elements / (uint64_t)t->ne[0]);
    }
    rep->n_tensors = (int)g->n_tensors;
}

static err_code check_input(const gguf_ctx *g, err_t *err) {
    if (gguf_find_kv(g, MODEL_LAYOUT_KEY))
        return err_set(err, ERR_UNSUPPORTED, "its matrices are in a deploy bundle's packed layout: quantize the GGUF "
                                             "model it was made from");
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        const quant_traits *tr = quant_traits_of(t->type);
        if (!tr || !tr->dequantize)
            return err_set(err, ERR_UNSUPPORTED, "tensor '%s' has type %s, which octo cannot read", t->name,
                           tr ? tr->name : "?");
    }
    return ERR_OK;
}

/* Metadata: the source's, with the new file type (alignment as the source's). */
static err_code write_metadata(gguf_writer *w, const gguf_ctx *g, const type_row *tr, err_t *err) {
    err_code rc = ERR_OK;
    uint32_t align;
    if (gguf_get_u32(g, "general.alignment", &align)) gguf_writer_set_alignment(w, align);
    for (uint64_t i = 0; i < g->n_kv && !rc; i++) {
        const char *k = g->kv[i].key;
        if (strcmp(k, "general.alignment") && strcmp(k, "general.file_type") && strcmp(k, "general.quantization_version"))
            rc = gguf_writer_set_value(w, k, &g->kv[i].value);
    }
    if (!rc) rc = gguf_writer_set_u32(w, "general.file_type", tr->ftype);
    if (!rc) rc = gguf_writer_set_u32(w, "general.quantization_version", 2);
    if (!rc) rc = gguf_writer_set_str(w, "octo.quantize.type", tr->name);
    return rc ? err_set(err, rc, "out of memory") : ERR_OK;
}

static err_code run(const quantize_opts *o, const gguf_ctx *g, const gguf_ctx *ref, const type_row *tr,
                    quantize_report *rep, err_t *err) {
    qctx c = {.src = g, .o = o, .rep = rep};
    int64_t widest = 1;
    for (uint64_t i = 0; i < g->n_tensors; i++) widest = g->tensors[i].ne[0] > widest ? g->tensors[i].ne[0] : widest;
    c.to = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *c.to);
    const int want = o->n_threads > 0 ? o->n_threads : tpool_default_threads();
    err_code rc = c.to ? tpool_new(want, &c.pool, err) : err_set(err, ERR_NOMEM, "out of memory");
    const int nth = c.pool ? tpool_size(c.pool) : 0;
    if (!rc && !(c.rows = calloc((size_t)nth, sizeof *c.rows))) rc = err_set(err, ERR_NOMEM, "out of memory");
    for (int t = 0; !rc && t < nth; t++)
        if (!(c.rows[t] = malloc(sizeof(float) * (size_t)widest))) rc = err_set(err, ERR_NOMEM, "out of memory");
    gguf_writer *w = rc ? NULL : gguf_writer_new();
    if (!rc && !w) rc = err_set(err, ERR_NOMEM, "out of memory");
    if (!rc && o->calib_text) {
        const int want_tokens = o->calib_tokens > 0 ? o->calib_tokens : QUANTIZE_CALIB_TOKENS;
        rc = imatrix_collect(o->input, o->calib_text, o->calib_len, want_tokens, o->n_threads, &c.im,
                             &rep->calib_tokens, err);
        if (rc) err_prefix(err, "importance matrix");
    }
    if (!rc) {
        plan_types(g, ref, tr, c.to, rep);
        gguf_writer_set_version(w, 3);
        rc = write_metadata(w, g, tr, err);
    }
    for (uint64_t i = 0; !rc && i < g->n_tensors; i++)
        rc = gguf_writer_add_tensor(w, g->tensors[i].name, c.to[i], g->tensors[i].n_dims, g->tensors[i].ne, NULL, err);
    if (!rc) rc = gguf_writer_write(w, o->output, fill, &c, err);
    gguf_writer_free(w);
    for (int t = 0; c.rows && t < nth; t++) free(c.rows[t]);
    free(c.rows);
    tpool_free(c.pool);
    free(c.to);
    imatrix_free(c.im);
    return rc;
}

err_code quantize_run(const quantize_opts *o, quantize_report *rep, err_t *err) {
    memset(rep, 0, sizeof *rep);
    const type_row *tr = find_type(o->type);
    if (!tr) {
        char names[400] = "";
        for (size_t i = 0; i < sizeof TYPES / sizeof *TYPES; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? " " : "", TYPES[i].name);
        return err_set(err, ERR_INVALID_ARG, "unknown type '%s' (%s)", o->type ? o->type : "", names);
    }
    if (!o->input || !o->output) return err_set(err, ERR_INVALID_ARG, "quantize needs an input and an output");
    gguf_ctx *g = NULL, *ref = NULL;
    err_code rc = gguf_open(o->input, &g, err);
    if (rc) return err_prefix(err, "%s", o->input), rc;
    rc = atomic_file_check(o->output, err); /* before the work: the output must not be the input */
    if (!rc && o->types_from && (rc = gguf_open(o->types_from, &ref, err))) err_prefix(err, "%s", o->types_from);
    if (!rc && !(rc = check_input(g, err))) rc = run(o, g, ref, tr, rep, err);
    gguf_close(ref);
    gguf_close(g);
    return rc;
}
