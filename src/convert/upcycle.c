/*
 * upcycle — the tool's steps: check, read the text, learn the split and the
 * router from the dense model's activations, write, measure.
 */
#include "convert/upcycle.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/upcycle_internal.h"
#include "core/atomic_write.h"
#include "core/quant.h"
#include "model/forward.h"
#include "model/tokenizer.h"
#include "runtime/session.h"

#define DEFAULT_CALIB 16384
#define DEFAULT_HELDOUT 4096
#define MIN_CALIB 256          /* calibration tokens the cluster split and the fitted router need */
#define MIN_HELDOUT 64         /* held-out tokens worth measuring on */
#define CHUNK 256              /* tokens per sequence fed from BOS, as reference perplexities are scored */
#define FEATURE_BYTES (512u << 20) /* the cluster split's activation patterns, all layers */
#define SUM_SPREAD 1e-4        /* the sum combination's router: scores spread by about this much */

static const char *const split_names[] = {"cluster", "random", "contiguous"};
static const char *const router_names[] = {"fit", "uniform"};
static const char *const combine_names[] = {"sum", "weighted"};

static int index_of(const char *const *names, int n, const char *name) {
    for (int i = 0; name && i < n; i++)
        if (!strcmp(names[i], name)) return i;
    return -1;
}
const char *upcycle_split_name(upcycle_split s) { return split_names[s]; }
const char *upcycle_router_name(upcycle_router r) { return router_names[r]; }
const char *upcycle_combine_name(upcycle_combine c) { return combine_names[c]; }
int upcycle_split_from_name(const char *name) { return index_of(split_names, 3, name); }
int upcycle_router_from_name(const char *name) { return index_of(router_names, 2, name); }
int upcycle_combine_from_name(const char *name) { return index_of(combine_names, 2, name); }

upcycle_opts upcycle_defaults(void) {
    return (upcycle_opts){.n_expert = 8, .n_expert_used = 2, .split = UPCYCLE_SPLIT_CLUSTER,
                          .router = UPCYCLE_ROUTER_FIT, .combine = UPCYCLE_COMBINE_SUM, .seed = 1};
}

static void progress(const upcycle_opts *o, const char *what, int done, int total) {
    if (o->progress) o->progress(o->progress_ctx, what, done, total);
}

/* ---------------------------------------------------------------- checks */

static err_code check_opts(const upcycle_opts *o, err_t *err) {
    if (!o->input || !o->output) return err_set(err, ERR_INVALID_ARG, "upcycle needs an input and an output model");
    if (o->n_expert < 1 || o->n_expert > 4096)
        return err_set(err, ERR_INVALID_ARG, "--experts %d: give 1 to 4096 experts", o->n_expert);
    if (o->n_expert_used < 1 || o->n_expert_used > o->n_expert)
        return err_set(err, ERR_INVALID_ARG, "--experts-used %d: give 1 to the number of experts (%d)",
                       o->n_expert_used, o->n_expert);
    if ((unsigned)o->split > UPCYCLE_SPLIT_CONTIGUOUS || (unsigned)o->router > UPCYCLE_ROUTER_UNIFORM ||
        (unsigned)o->combine > UPCYCLE_COMBINE_WEIGHTED)
        return err_set(err, ERR_INVALID_ARG, "unknown split, router or combination");
    if (o->calib_tokens < 0 || o->heldout_tokens < 0 || o->n_shared < 0)
        return err_set(err, ERR_INVALID_ARG, "token and neuron counts must not be negative");
    return ERR_OK;
}

static err_code check_model(const model *m, const upcycle_opts *o, err_t *err) {
    const model_hparams *hp = &m->hp;
    if (m->prepacked) /* its matrices are read from the file below, which holds them re-laid */
        return err_set(err, ERR_INVALID_ARG, "%s is a deploy bundle's packed file: upcycle the GGUF model", o->input);
    if (hp->n_expert > 0)
        return err_set(err, ERR_INVALID_ARG, "%s is already a Mixture-of-Experts model (%d experts): upcycle takes a dense one",
                       o->input, hp->n_expert);
    if (hp->arch != ARCH_LLAMA && hp->arch != ARCH_QWEN2)
        return err_set(err, ERR_UNSUPPORTED_ARCH, "upcycle supports llama and qwen2 models, not '%s'", hp->arch_name);
    if (o->n_expert > hp->n_ff)
        return err_set(err, ERR_INVALID_ARG, "--experts %d is more than the %d FFN neurons per layer", o->n_expert,
                       hp->n_ff);
    if (o->n_shared > hp->n_ff - o->n_expert)
        return err_set(err, ERR_INVALID_ARG, "--shared %d leaves fewer than one neuron per expert of the %d", o->n_shared,
                       hp->n_ff);
    if (hp->n_layer > UPCYCLE_MAX_LAYERS)
        return err_set(err, ERR_UNSUPPORTED, "%d layers (upcycle handles %d)", hp->n_layer, UPCYCLE_MAX_LAYERS);
    return ERR_OK;
}

/* ------------------------------------------------------------------ text */

typedef struct {
    int32_t *ids;
    int n_calib, n_held; /* calibration = ids[0, n_calib); held-out = ids[n_total - n_held, n_total) */
    int n_total;
    int32_t bos;
} text_tokens;

static bool needs_patterns(const upcycle_opts *o) { return o->split == UPCYCLE_SPLIT_CLUSTER || o->n_shared > 0; }
static bool needs_text(const upcycle_opts *o) { return needs_patterns(o) || o->router == UPCYCLE_ROUTER_FIT; }

static err_code read_text(const model *m, const upcycle_opts *o, text_tokens *tt, err_t *err) {
    memset(tt, 0, sizeof *tt);
    tokenizer *tk = NULL;
    err_code rc = tokenizer_load(m->gguf, &tk, err);
    if (rc) return rc;
    tt->bos = tokenizer_bos(tk);
    tok_list l = {0};
    if (o->text) rc = tokenizer_encode(tk, o->text, o->text_len, false, false, &l, err);
    tokenizer_free(tk);
    if (rc) {
        tok_list_free(&l);
        return rc;
    }
    tt->ids = l.ids;
    tt->n_total = l.n;
    const int held = o->heldout_tokens ? o->heldout_tokens : DEFAULT_HELDOUT;
    tt->n_held = l.n / 5 < held ? l.n / 5 : held;
    const int calib = o->calib_tokens ? o->calib_tokens : DEFAULT_CALIB, room = l.n - tt->n_held;
    tt->n_calib = room < calib ? room : calib;
    const char *what = o->split == UPCYCLE_SPLIT_CLUSTER ? "the cluster split"
                       : o->n_shared                     ? "the shared expert's choice"
                                                         : "the fitted router";
    if (needs_text(o) && !o->text)
        return err_set(err, ERR_INVALID_ARG,
                       "%s learns from a calibration text and none was given (at least %d tokens after a fifth "
                       "is held out); a random or contiguous split with a uniform router needs none",
                       what, MIN_CALIB);
    if (needs_text(o) && tt->n_calib < MIN_CALIB)
        return err_set(err, ERR_INVALID_ARG,
                       "too short: the calibration text gives %d tokens; %s needs at least %d (a fifth of the text, "
                       "up to %d tokens, is held out to measure on)",
                       tt->n_calib, what, MIN_CALIB, held);
    if (tt->n_held < MIN_HELDOUT) tt->n_held = 0;
    return ERR_OK;
}

/* ----------------------------------------------------------- calibration */

typedef struct {
    const upcycle_plan *p;
    const float *coln;   /* [n_layer][n_ff] |down column| */
    float *feat;         /* pass 1: [n_layer][S][n_ff] */
    int S, *seen;        /* pass 1: rows filled per layer */
    upcycle_lsq **lsq;   /* pass 2: per layer */
    float *y;            /* pass 2: [CHUNK + 1][E] the batch's expert contributions */
} calib_ctx;

static void observe_patterns(void *ctx, const fwd_tap *tap) {
    calib_ctx *c = ctx;
    if (tap->at != FWD_AT_FFN || !tap->act) return;
    const int n_ff = c->p->dense->hp.n_ff, l = tap->layer;
    const float *coln = c->coln + (size_t)l * n_ff;
    for (int t = 0; t < tap->T && c->seen[l] < c->S; t++) {
        float *f = c->feat + ((size_t)l * c->S + (size_t)c->seen[l]++) * n_ff;
        const float *a = tap->act + (size_t)t * n_ff;
        for (int i = 0; i < n_ff; i++) f[i] = fabsf(a[i]) * coln[i];
    }
}

static void observe_router(void *ctx, const fwd_tap *tap) {
    calib_ctx *c = ctx;
    if (tap->at != FWD_AT_FFN || !tap->act) return;
    const upcycle_plan *p = c->p;
    const int n_ff = p->dense->hp.n_ff, l = tap->layer;
    const int32_t *slot = p->layers[l].slot;
    const float *coln = c->coln + (size_t)l * n_ff;
    for (int t = 0; t < tap->T; t++) {
        const float *a = tap->act + (size_t)t * n_ff;
        for (int e = 0; e < p->E; e++) {
            float s = 0.0f;
            for (int j = 0; j < p->m; j++) {
                const int32_t i = slot[(size_t)e * p->m + j];
                if (i >= 0) s += fabsf(a[i]) * coln[i];
            }
            c->y[(size_t)t * p->E + e] = s;
        }
    }
    upcycle_lsq_add(c->lsq[l], tap->x, c->y, tap->T);
}

/* Feed the calibration tokens through the dense model, CHUNK at a time from
 * BOS, with fn watching. */
static err_code calib_pass(const upcycle_opts *o, const model *m, const text_tokens *tt, fwd_observer fn,
                           void *ctx, const char *what, err_t *err) {
    const int chunk = m->hp.n_ctx_train - 1 < CHUNK ? m->hp.n_ctx_train - 1 : CHUNK;
    session *s = NULL;
    err_code rc = session_new(m, chunk + 1, QT_F32, o->n_threads, &s, err);
    int32_t *buf = malloc(sizeof(int32_t) * (size_t)(chunk + 1));
    float *logits = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
    if (!rc && (!buf || !logits)) rc = err_set(err, ERR_NOMEM, "out of memory");
    if (!rc) fwd_set_observer(s->fwd, fn, ctx);
    for (int t0 = 0; !rc && t0 < tt->n_calib; t0 += chunk) {
        const int n = tt->n_calib - t0 < chunk ? tt->n_calib - t0 : chunk, lead = tt->bos >= 0;
        if (lead) buf[0] = tt->bos;
        memcpy(buf + lead, tt->ids + t0, sizeof(int32_t) * (size_t)n);
        session_reset(s);
        rc = session_eval(s, buf, n + lead, false, logits, err);
        progress(o, what, t0 + n, tt->n_calib);
    }
    session_free(s);
    free(buf), free(logits);
    return rc;
}

/* |column i| of each layer's dense down projection (n_embd rows of n_ff),
 * read from the file as written (the loaded model may hold it re-laid). */
static err_code column_norms(const upcycle_plan *p, float *coln, err_t *err) {
    const model_hparams *hp = &p->dense->hp;
    float *row = malloc(sizeof(float) * (size_t)hp->n_ff);
    if (!row) return err_set(err, ERR_NOMEM, "out of memory");
    err_code rc = ERR_OK;
    for (int l = 0; l < hp->n_layer && !rc; l++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", l);
        const gguf_tensor *t = gguf_find_tensor(p->src, name);
        if (!t) {
            rc = err_set(err, ERR_MISSING_TENSOR, "tensor '%s' is missing", name);
            break;
        }
        double *acc = calloc((size_t)hp->n_ff, sizeof(double));
        if (!acc) rc = err_set(err, ERR_NOMEM, "out of memory");
        const size_t rb = quant_row_bytes(t->type, hp->n_ff);
        for (int r = 0; !rc && r < hp->n_embd; r++) {
            quant_dequantize_row(t->type, (const uint8_t *)t->data + (size_t)r * rb, row, hp->n_ff);
            for (int i = 0; i < hp->n_ff; i++) acc[i] += (double)row[i] * row[i];
        }
        for (int i = 0; !rc && i < hp->n_ff; i++) coln[(size_t)l * hp->n_ff + i] = (float)sqrt(acc[i]);
        free(acc);
    }
    free(row);
    return rc;
}

/* Layer l's split of the neurons the shared expert leaves (all when none):
 * their patterns gathered, split, mapped back to dense indices. */
static err_code split_layer(const upcycle_opts *o, upcycle_plan *p, const calib_ctx *c, int l, err_t *err) {
    const int n_ff = p->dense->hp.n_ff, S = c->seen ? c->seen[l] : 0, n = n_ff - p->n_shared;
    const float *feat = c->feat ? c->feat + (size_t)l * c->S * n_ff : NULL;
    upcycle_layer *L = &p->layers[l];
    if (p->n_shared) upcycle_pick_shared(feat, S, n_ff, p->n_shared, L->shared);
    int32_t *rest = malloc(sizeof(int32_t) * (size_t)n);
    float *sub = feat && o->split == UPCYCLE_SPLIT_CLUSTER ? malloc(sizeof(float) * (size_t)S * n + 1) : NULL;
    if (!rest || (feat && o->split == UPCYCLE_SPLIT_CLUSTER && !sub)) {
        free(rest), free(sub);
        return err_set(err, ERR_NOMEM, "out of memory");
    }
    for (int i = 0, k = 0, j = 0; i < n_ff; i++) { /* both lists ascending */
        if (k < p->n_shared && L->shared[k] == i) k++;
        else rest[j++] = i;
    }
    for (int s = 0; sub && s < S; s++)
        for (int j = 0; j < n; j++) sub[(size_t)s * n + j] = feat[(size_t)s * n_ff + rest[j]];
    err_code rc = upcycle_split_layer(o->split, sub, S, n, p->E, p->m, o->seed + (uint64_t)l, L->slot, err);
    for (size_t q = 0; !rc && q < (size_t)p->E * p->m; q++)
        if (L->slot[q] >= 0) L->slot[q] = rest[L->slot[q]];
    free(rest), free(sub);
    return rc;
}

static err_code learn_split(const upcycle_opts *o, upcycle_plan *p, const text_tokens *tt, calib_ctx *c,
                            err_t *err) {
    const model_hparams *hp = &p->dense->hp;
    err_code rc = ERR_OK;
    if (needs_patterns(o)) {
        const uint64_t per_token = (uint64_t)hp->n_ff * hp->n_layer * sizeof(float);
        const int calib_rows = tt->n_calib + (tt->n_calib + CHUNK - 1) / CHUNK; /* each chunk's BOS too */
        c->S = FEATURE_BYTES / per_token < (uint64_t)calib_rows ? (int)(FEATURE_BYTES / per_token) : calib_rows;
        c->feat = malloc((size_t)c->S * per_token);
        c->seen = calloc((size_t)hp->n_layer, sizeof(int));
        if (!c->feat || !c->seen) return err_set(err, ERR_NOMEM, "out of memory");
        rc = calib_pass(o, p->dense, tt, observe_patterns, c, "activation patterns", err);
    }
    for (int l = 0; l < hp->n_layer && !rc; l++) {
        rc = split_layer(o, p, c, l, err);
        progress(o, "split", l + 1, hp->n_layer);
    }
    return rc;
}

/* The router as written: sum scales the fit so its scores spread by about
 * SUM_SPREAD (gates 1/K to that precision); weighted to a spread of 1. */
static void scale_router(const upcycle_opts *o, float *W, int n, double spread) {
    const double target = o->combine == UPCYCLE_COMBINE_SUM ? SUM_SPREAD : 1.0;
    const float scale = spread > 0.0 ? (float)(target / spread) : 1.0f;
    for (int i = 0; i < n; i++) W[i] *= scale;
}

static err_code learn_router(const upcycle_opts *o, upcycle_plan *p, const text_tokens *tt, calib_ctx *c,
                             err_t *err) {
    const model_hparams *hp = &p->dense->hp;
    if (o->router == UPCYCLE_ROUTER_UNIFORM) return ERR_OK; /* the routers stay 0 */
    c->lsq = calloc((size_t)hp->n_layer, sizeof *c->lsq);
    c->y = malloc(sizeof(float) * (size_t)(CHUNK + 1) * p->E);
    if (!c->lsq || !c->y) return err_set(err, ERR_NOMEM, "out of memory");
    for (int l = 0; l < hp->n_layer; l++)
        if (!(c->lsq[l] = upcycle_lsq_new(hp->n_embd, p->E))) return err_set(err, ERR_NOMEM, "out of memory");
    err_code rc = calib_pass(o, p->dense, tt, observe_router, c, "router fit", err);
    for (int l = 0; l < hp->n_layer && !rc; l++) {
        float *W = p->layers[l].router;
        if ((rc = upcycle_lsq_solve(c->lsq[l], W, err))) break;
        scale_router(o, W, p->E * hp->n_embd, upcycle_lsq_spread(c->lsq[l], W));
    }
    return rc;
}

static void calib_free(calib_ctx *c, int n_layer) {
    for (int l = 0; c->lsq && l < n_layer; l++) upcycle_lsq_free(c->lsq[l]);
    free(c->lsq), free(c->y), free(c->feat), free(c->seen);
}

/* ------------------------------------------------------------------ plan */

static err_code plan_new(const upcycle_opts *o, const model *dense, upcycle_plan *p, err_t *err) {
    const model_hparams *hp = &dense->hp;
    memset(p, 0, sizeof *p);
    p->dense = dense;
    p->E = o->n_expert;
    p->K = o->n_expert_used;
    p->n_shared = o->n_shared;
    p->m = (hp->n_ff - p->n_shared + p->E - 1) / p->E;
    p->down_scale = (float)p->K;
    err_code rc = gguf_open(o->input, &p->src, err);
    if (rc) return rc;
    if (!(p->layers = calloc((size_t)hp->n_layer, sizeof *p->layers))) return err_set(err, ERR_NOMEM, "out of memory");
    for (int l = 0; l < hp->n_layer; l++) {
        p->layers[l].slot = malloc(sizeof(int32_t) * (size_t)p->E * p->m);
        p->layers[l].router = calloc((size_t)p->E * hp->n_embd, sizeof(float));
        p->layers[l].shared = malloc(sizeof(int32_t) * (size_t)(p->n_shared + 1));
        if (!p->layers[l].slot || !p->layers[l].router || !p->layers[l].shared)
            return err_set(err, ERR_NOMEM, "out of memory");
    }
    return ERR_OK;
}

static void plan_free(upcycle_plan *p) {
    for (int l = 0; p->layers && l < p->dense->hp.n_layer; l++) {
        free(p->layers[l].slot);
        free(p->layers[l].router);
        free(p->layers[l].shared);
    }
    free(p->layers);
    if (p->src) gguf_close(p->src);
}

static err_code build(const upcycle_opts *o, upcycle_plan *p, const text_tokens *tt, err_t *err) {
    const model_hparams *hp = &p->dense->hp;
    calib_ctx c = {.p = p};
    float *coln = malloc(sizeof(float) * (size_t)hp->n_ff * hp->n_layer);
    c.coln = coln;
    err_code rc = coln ? column_norms(p, coln, err) : err_set(err, ERR_NOMEM, "out of memory");
    if (!rc) rc = learn_split(o, p, tt, &c, err);
    if (!rc) rc = learn_router(o, p, tt, &c, err);
    calib_free(&c, hp->n_layer);
    free(coln);
    return rc;
}

static void report_shape(const upcycle_plan *p, const text_tokens *tt, upcycle_report *rep) {
    const model_hparams *hp = &p->dense->hp;
    memset(rep, 0, sizeof *rep);
    rep->n_layer = hp->n_layer;
    rep->n_ff = hp->n_ff;
    rep->n_ff_expert = p->m;
    rep->n_shared = p->n_shared;
    rep->n_pad = p->E * p->m + p->n_shared - hp->n_ff;
    rep->calib_tokens = tt->n_calib;
    rep->heldout_tokens = tt->n_held;
    const gguf_tensor *gate = gguf_find_tensor(p->src, "blk.0.ffn_gate.weight");
    rep->gate_type = gate ? gate->type : 0;
    for (int l = hp->n_layer - 1; l >= 0; l--) { /* the first layer whose down rows change type, else layer 0's */
        char name[64];
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", l);
        const gguf_tensor *down = gguf_find_tensor(p->src, name);
        const uint32_t in = down ? down->type : 0, out = down ? upcycle_down_type(in, p->m) : 0;
        rep->n_retyped += in != out;
        if (in != out || (l == 0 && !rep->n_retyped)) rep->down_type_in = in, rep->down_type_out = out;
    }
}

/* The plan a measurement needs from an MoE: its experts, how many a token uses, and each layer's router
 * in F32 (the routing statistics score with it). */
static err_code measured_plan(const model *dense, const model *moe, const char *moe_path, upcycle_plan *p, err_t *err) {
    err_code rc = ERR_OK;
    const model_hparams *hp = &moe->hp;
    bool ok = hp->n_expert && hp->n_vocab == dense->hp.n_vocab && hp->n_layer == dense->hp.n_layer &&
              hp->n_embd == dense->hp.n_embd && hp->n_layer <= UPCYCLE_MAX_LAYERS;
    for (int l = 0; ok && l < hp->n_layer; l++) ok = moe->layers[l].gate_inp.data != NULL;
    if (!ok)
        rc = err_set(err, ERR_INVALID_ARG, "%s is not a mixture of experts in every layer of %s's shape (vocabulary "
                     "%d, %d layers, width %d)", moe_path, dense->hp.arch_name, dense->hp.n_vocab, dense->hp.n_layer,
                     dense->hp.n_embd);
    p->E = hp->n_expert, p->K = hp->n_expert_used;
    if (!rc && !(p->layers = calloc((size_t)hp->n_layer, sizeof *p->layers))) rc = err_set(err, ERR_NOMEM, "out of memory");
    for (int l = 0; !rc && l < hp->n_layer; l++) {
        const model_mat *r = &moe->layers[l].gate_inp;
        if (!(p->layers[l].router = malloc(sizeof(float) * (size_t)(r->n_in * r->n_out)))) {
            rc = err_set(err, ERR_NOMEM, "out of memory");
            break;
        }
        for (int64_t e = 0; e < r->n_out; e++)
            quant_dequantize_row(r->type, (const uint8_t *)r->data + (size_t)e * r->row_bytes,
                                 p->layers[l].router + e * r->n_in, r->n_in);
    }
    return rc;
}

err_code upcycle_measure_file(const upcycle_opts *o, const char *moe_path, upcycle_report *rep, err_t *err) {
    memset(rep, 0, sizeof *rep);
    model *dense = NULL, *moe = NULL;
    err_code rc = o->text ? model_load(o->input, &dense, err) : err_set(err, ERR_INVALID_ARG, "no text to measure on");
    if (!rc) rc = model_load(moe_path, &moe, err);
    upcycle_plan p = {.dense = dense};
    text_tokens tt = {0};
    if (!rc) rc = measured_plan(dense, moe, moe_path, &p, err);
    if (!rc) rc = read_text(dense, o, &tt, err);
    if (!rc && !tt.n_held) rc = err_set(err, ERR_INVALID_ARG, "the text is too short to hold out tokens");
    if (!rc) {
        rep->n_layer = dense->hp.n_layer, rep->heldout_tokens = tt.n_held;
        rc = upcycle_measure(&p, moe, tt.ids + tt.n_total - tt.n_held, tt.n_held, tt.bos, o->n_threads, rep, err);
    }
    plan_free(&p);
    free(tt.ids);
    model_free(moe), model_free(dense);
    return rc;
}

err_code upcycle_run(const upcycle_opts *o, upcycle_report *rep, err_t *err) {
    err_code rc = check_opts(o, err);
    if (rc) return rc;
    model *dense = NULL;
    if ((rc = model_load(o->input, &dense, err))) return rc;
    upcycle_plan p = {.dense = dense};
    text_tokens tt = {0};
    rc = check_model(dense, o, err);
    if (!rc) rc = atomic_file_check(o->output, err); /* before the work: the output must not be the input */
    if (!rc) rc = read_text(dense, o, &tt, err);
    if (!rc) rc = plan_new(o, dense, &p, err);
    if (!rc) {
        report_shape(&p, &tt, rep);
        rc = build(o, &p, &tt, err);
    }
    if (!rc) rc = upcycle_write(&p, o, tt.n_calib, o->output, err);
    model *moe = NULL;
    if (!rc && tt.n_held && !(rc = model_load(o->output, &moe, err)))
        rc = upcycle_measure(&p, moe, tt.ids + tt.n_total - tt.n_held, tt.n_held, tt.bos, o->n_threads, rep, err);
    model_free(moe);
    plan_free(&p);
    free(tt.ids);
    model_free(dense);
    return rc;
}
