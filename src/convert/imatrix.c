/*
 * imatrix — see imatrix.h.
 */
#include "imatrix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/quant.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "runtime/session.h"

#define CHUNK 512

/* The four points per layer a matrix reads its input from, plus the output's. */
enum { AT_ATTN_IN, AT_ATTN_OUT, AT_FFN_IN, AT_FFN_ACT, N_POINTS };

typedef struct {
    double *sum[N_POINTS]; /* per column: sum of squares */
    int width[N_POINTS];
    int64_t rows[N_POINTS];
} layer_sums;

struct imatrix {
    const model *m;        /* only while collecting */
    int n_layer;
    layer_sums *layers;
    double *out_sum;       /* the output matrix's input: the final normed residual */
    int64_t out_rows;
    int out_width;
    float *norm_tmp;
    float *mean;           /* imatrix_of's result */
    int mean_cap;
};

static void accumulate(double **sum, int *width, int64_t *rows, const float *x, int T, int n) {
    if (!*sum && !(*sum = calloc((size_t)n, sizeof **sum))) return;
    if (*width && *width != n) return;
    *width = n;
    for (int t = 0; t < T; t++)
        for (int j = 0; j < n; j++) (*sum)[j] += (double)x[(size_t)t * n + j] * x[(size_t)t * n + j];
    *rows += T;
}

static void observe(void *ctx, const fwd_tap *tap) {
    imatrix *im = ctx;
    const model_hparams *hp = &im->m->hp;
    layer_sums *L = &im->layers[tap->layer];
    const model_layer *ml = &im->m->layers[tap->layer];
    const int E = hp->n_embd;
    if (tap->at == FWD_AT_ATTN) {
        accumulate(&L->sum[AT_ATTN_IN], &L->width[AT_ATTN_IN], &L->rows[AT_ATTN_IN], tap->x, tap->T, E);
        accumulate(&L->sum[AT_ATTN_OUT], &L->width[AT_ATTN_OUT], &L->rows[AT_ATTN_OUT], tap->act, tap->T,
                   (int)ml->wo.n_in);
    } else if (tap->at == FWD_AT_FFN) {
        accumulate(&L->sum[AT_FFN_IN], &L->width[AT_FFN_IN], &L->rows[AT_FFN_IN], tap->x, tap->T, E);
        if (tap->act)
            accumulate(&L->sum[AT_FFN_ACT], &L->width[AT_FFN_ACT], &L->rows[AT_FFN_ACT], tap->act, tap->T,
                       (int)ml->w_down.n_in); /* this layer's width (a dense lead layer of an MoE model has its own) */
    } else if (tap->at == FWD_AT_LAYER_END && tap->layer == hp->n_layer - 1 && im->norm_tmp) {
        for (int t = 0; t < tap->T; t++) {
            fwd_rmsnorm(im->norm_tmp, tap->x + (size_t)t * E, im->m->output_norm.data, E, hp->rms_eps);
            accumulate(&im->out_sum, &im->out_width, &im->out_rows, im->norm_tmp, 1, E);
        }
    }
}

static err_code feed(imatrix *im, const model *m, const int32_t *ids, int n, int bos, int n_threads, err_t *err) {
    const int chunk = m->hp.n_ctx_train - 1 < CHUNK ? m->hp.n_ctx_train - 1 : CHUNK;
    if (chunk < 1) return err_set(err, ERR_UNSUPPORTED, "a context of %d tokens leaves no room after BOS", m->hp.n_ctx_train);
    session *s = NULL;
    err_code rc = session_new(m, chunk + 1, QT_F32, n_threads, &s, err);
    int32_t *buf = malloc(sizeof(int32_t) * (size_t)(chunk + 1));
    float *logits = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
    if (!rc && (!buf || !logits)) rc = err_set(err, ERR_NOMEM, "out of memory");
    if (!rc) fwd_set_observer(s->fwd, observe, im);
    for (int t0 = 0; !rc && t0 < n; t0 += chunk) {
        const int k = n - t0 < chunk ? n - t0 : chunk, lead = bos >= 0;
        if (lead) buf[0] = bos;
        memcpy(buf + lead, ids + t0, sizeof(int32_t) * (size_t)k);
        session_reset(s);
        rc = session_eval(s, buf, k + lead, false, logits, err);
    }
    session_free(s);
    free(buf), free(logits);
    return rc;
}

err_code imatrix_collect(const char *model_path, const char *text, size_t len, int max_tokens, int n_threads,
                         imatrix **out, int *n_tokens, err_t *err) {
    *out = NULL;
    model *m = NULL;
    tokenizer *tk = NULL;
    tok_list l = {0};
    err_code rc = model_load(model_path, &m, err);
    if (!rc) rc = tokenizer_load(m->gguf, &tk, err);
    if (!rc) rc = tokenizer_encode(tk, text, len, false, false, &l, err);
    if (!rc && l.n < 1) rc = err_set(err, ERR_INVALID_ARG, "the calibration text has no tokens");
    imatrix *im = rc ? NULL : calloc(1, sizeof *im);
    if (!rc && !im) rc = err_set(err, ERR_NOMEM, "out of memory");
    if (!rc) {
        im->m = m;
        im->n_layer = m->hp.n_layer;
        im->layers = calloc((size_t)im->n_layer, sizeof *im->layers);
        im->norm_tmp = malloc(sizeof(float) * (size_t)m->hp.n_embd);
        if (!im->layers || !im->norm_tmp) rc = err_set(err, ERR_NOMEM, "out of memory");
    }
    const int n = l.n < max_tokens || max_tokens <= 0 ? l.n : max_tokens;
    if (!rc) rc = feed(im, m, l.ids, n, tokenizer_bos(tk), n_threads, err);
    tok_list_free(&l);
    tokenizer_free(tk);
    model_free(m);
    if (im) im->m = NULL;
    if (rc) {
        imatrix_free(im);
        return rc;
    }
    *n_tokens = n;
    *out = im;
    return ERR_OK;
}

/* Which point a tensor reads from: by its name's last part. */
static int point_of(const char *what) {
    static const struct {
        const char *name;
        int at;
    } map[] = {{"attn_q", AT_ATTN_IN},        {"attn_k", AT_ATTN_IN},         {"attn_v", AT_ATTN_IN},
               {"attn_qkv", AT_ATTN_IN},      {"attn_q_a", AT_ATTN_IN},       {"attn_kv_a_mqa", AT_ATTN_IN},
               {"attn_output", AT_ATTN_OUT},  {"ffn_gate", AT_FFN_IN},        {"ffn_up", AT_FFN_IN},
               {"ffn_gate_up", AT_FFN_IN},    {"ffn_gate_exps", AT_FFN_IN},   {"ffn_up_exps", AT_FFN_IN},
               {"ffn_gate_shexp", AT_FFN_IN}, {"ffn_up_shexp", AT_FFN_IN},    {"ffn_down", AT_FFN_ACT}};
    for (size_t i = 0; i < sizeof map / sizeof *map; i++)
        if (!strcmp(what, map[i].name)) return map[i].at;
    return -1;
}

static const float *mean_of(imatrix *im, const double *sum, int64_t rows, int width) {
    if (width > im->mean_cap) {
        float *p = realloc(im->mean, sizeof(float) * (size_t)width);
        if (!p) return NULL;
        im->mean = p;
        im->mean_cap = width;
    }
    for (int j = 0; j < width; j++) im->mean[j] = (float)(sum[j] / (double)rows);
    return im->mean;
}

const float *imatrix_of(const imatrix *cim, const char *name, int64_t n_in) {
    imatrix *im = (imatrix *)cim; /* only its scratch row changes */
    int layer = -1, end = 0;
    char what[64];
    if (!strcmp(name, "output.weight"))
        return im->out_sum && im->out_width == n_in ? mean_of(im, im->out_sum, im->out_rows, im->out_width) : NULL;
    if (sscanf(name, "blk.%d.%63[^.].weight%n", &layer, what, &end) != 2 || name[end] || layer < 0 ||
        layer >= im->n_layer)
        return NULL;
    const int at = point_of(what);
    const layer_sums *L = &im->layers[layer];
    if (at < 0 || !L->sum[at] || L->width[at] != n_in || !L->rows[at]) return NULL;
    return mean_of(im, L->sum[at], L->rows[at], L->width[at]);
}

void imatrix_free(imatrix *im) {
    if (!im) return;
    for (int l = 0; im->layers && l < im->n_layer; l++)
        for (int p = 0; p < N_POINTS; p++) free(im->layers[l].sum[p]);
    free(im->layers);
    free(im->out_sum);
    free(im->norm_tmp);
    free(im->mean);
    free(im);
}
