/*
 * linear — training's products through a frozen matrix and a LoRA pair (train/linear.h).
 */
#include "train/linear.h"

#include <stdlib.h>
#include <string.h>

#include "core/kernels/kernels.h"
#include "core/kernels/matmul.h"
#include "core/quant.h"
#include "core/threadpool.h"

#define ROWS 64 /* W's rows dequantized at once by a thread of the transposed product */
#define COLS 64 /* and the columns of them every token's sum takes in one call */

struct train_ctx {
    tpool *pool;        /* NULL: the calling thread alone */
    bool owns_pool;
    int n_threads;
    matmul_ctx *mm;
    lowrank_fn lowrank;
    lowrank4_fn lowrank4;
    float **scratch;    /* [n_threads] each thread's buffer */
    size_t scratch_cap; /* floats in each */
    float *u, *bu;      /* (n, rank): A x and B^T dy */
    size_t u_cap;
};

static err_code ctx_new(int n_threads, tpool *shared, train_ctx **out, err_t *err) {
    *out = NULL;
    train_ctx *c = calloc(1, sizeof *c);
    if (!c) return err_set(err, ERR_NOMEM, "out of memory");
    c->n_threads = shared ? tpool_size(shared) : n_threads > 0 ? n_threads : tpool_default_threads();
    err_code rc = ERR_OK;
    if (shared) c->pool = shared;
    else if (c->n_threads > 1) rc = tpool_new(c->n_threads, &c->pool, err), c->owns_pool = true;
    if (!rc && (!(c->mm = matmul_ctx_new(c->pool)) || !(c->scratch = calloc((size_t)c->n_threads, sizeof(float *)))))
        rc = err_set(err, ERR_NOMEM, "out of memory");
    c->lowrank = kernel_lowrank();
    c->lowrank4 = kernel_lowrank4();
    if (rc) {
        train_ctx_free(c);
        return rc;
    }
    *out = c;
    return ERR_OK;
}

err_code train_ctx_new(int n_threads, train_ctx **out, err_t *err) { return ctx_new(n_threads, NULL, out, err); }

err_code train_ctx_new_on(tpool *pool, train_ctx **out, err_t *err) { return ctx_new(0, pool, out, err); }

void train_ctx_free(train_ctx *c) {
    if (!c) return;
    for (int i = 0; c->scratch && i < c->n_threads; i++) free(c->scratch[i]);
    free(c->scratch);
    free(c->u), free(c->bu);
    matmul_ctx_free(c->mm);
    if (c->owns_pool) tpool_free(c->pool);
    free(c);
}

int train_ctx_threads(const train_ctx *c) { return c->n_threads; }

tpool *train_ctx_pool(train_ctx *c) { return c->pool; }

float *train_ctx_buffer(train_ctx *c, int ith) { return c->scratch[ith]; }

err_code train_ctx_reserve(train_ctx *c, size_t n, err_t *err) {
    if (n <= c->scratch_cap) return ERR_OK;
    for (int i = 0; i < c->n_threads; i++) {
        float *p = realloc(c->scratch[i], n * sizeof(float));
        if (!p) return err_set(err, ERR_NOMEM, "out of memory for training's products");
        c->scratch[i] = p;
    }
    c->scratch_cap = n;
    return ERR_OK;
}

void train_ctx_run(train_ctx *c, void (*fn)(void *job, int ith, int nth), void *job) {
    if (c->pool) tpool_run(c->pool, fn, job);
    else fn(job, 0, 1);
}

/* acc[i] += sum over k < r of u[k] bt[k stride + i], for i < n: kernel_lowrank's sum (written to tmp, n
 * floats) added, so an element's value does not depend on how the rows of a whole are split. */
static void lowrank_add(const train_ctx *c, const float *u, int r, const float *bt, size_t stride, size_t n,
                        float *acc, float *tmp) {
    c->lowrank(u, r, bt, stride, n, tmp);
    for (size_t i = 0; i < n; i++) acc[i] += tmp[i];
}

static matmul_weight weight_of(const model_mat *w) {
    return (matmul_weight){.data = w->data, .type = w->type, .n_in = w->n_in, .n_out = w->n_out,
                           .row_bytes = w->row_bytes, .packed = w->packed};
}

/* An F32 matrix of rows floats apart (A: n_in; B^T: bt_stride) as a product's weight. */
static matmul_weight f32_weight(const float *p, int64_t n_in, int64_t n_out, size_t stride) {
    return (matmul_weight){.data = p, .type = QT_F32, .n_in = n_in, .n_out = n_out, .row_bytes = stride * sizeof(float)};
}

/* ---------------------------------------------------------------- W^T dy */

typedef struct {
    train_ctx *c;
    const model_mat *w;
    const float *dy;
    float *dx;
    int n;
} tprod;

/* Thread ith's slice of W's columns (whole blocks), each token's dx slice += sum over rows of dy[i] W_i. */
static void tprod_slice(void *job, int ith, int nth) {
    const tprod *j = job;
    const model_mat *w = j->w;
    const quant_traits *qt = quant_traits_of(w->type);
    const int64_t blk = qt->block_size, blocks = w->n_in / blk;
    const int64_t b0 = blocks * ith / nth, b1 = blocks * (ith + 1) / nth;
    const int64_t j0 = b0 * blk, width = (b1 - b0) * blk;
    if (width <= 0) return;
    float *buf = j->c->scratch[ith];
    for (int64_t i0 = 0; i0 < w->n_out; i0 += ROWS) {
        const int r = (int)(w->n_out - i0 < ROWS ? w->n_out - i0 : ROWS);
        for (int k = 0; k < r; k++)
            quant_dequantize_row(w->type, (const uint8_t *)w->data + (size_t)(i0 + k) * w->row_bytes + (size_t)b0 * qt->type_size,
                                 buf + (size_t)k * (size_t)width, width);
        /* 64 columns of the 64 rows at a time (16 KiB: they stay in L1 while every token reads them),
         * four tokens a pass (each load of them used four times) */
        float *sum = buf + (size_t)ROWS * (size_t)width;
        for (int64_t c0 = 0; c0 < width; c0 += COLS) {
            const size_t cols = (size_t)(width - c0 < COLS ? width - c0 : COLS);
            for (int t = 0; t < j->n; t += 4) {
                const int T = j->n - t < 4 ? j->n - t : 4;
                j->c->lowrank4(j->dy + (size_t)t * (size_t)w->n_out + (size_t)i0, (size_t)w->n_out, T, r, buf + c0,
                               (size_t)width, cols, sum, COLS);
                for (int q = 0; q < T; q++) {
                    float *dx = j->dx + (size_t)(t + q) * (size_t)w->n_in + (size_t)(j0 + c0);
                    for (size_t i = 0; i < cols; i++) dx[i] += sum[(size_t)q * COLS + i];
                }
            }
        }
    }
}

static err_code transposed(train_ctx *c, const model_mat *w, const float *dy, int n, float *dx, err_t *err) {
    const quant_traits *qt = quant_traits_of(w->type);
    if (!qt || !qt->dequantize || w->n_in % qt->block_size)
        return err_set(err, ERR_UNSUPPORTED, "training cannot read a matrix of type %s", qt ? qt->name : "?");
    err_code rc = train_ctx_reserve(c, (size_t)ROWS * (size_t)w->n_in + 4 * COLS, err); /* 64 rows, 4 sums */
    if (rc) return rc;
    tprod j = {c, w, dy, dx, n};
    train_ctx_run(c, tprod_slice, &j);
    return ERR_OK;
}

/* ---------------------------------------------------------------- the LoRA pair */

static err_code pair_buffers(train_ctx *c, size_t n, err_t *err) {
    if (n <= c->u_cap) return ERR_OK;
    float *u = realloc(c->u, n * sizeof(float)), *bu = u ? realloc(c->bu, n * sizeof(float)) : NULL;
    if (u) c->u = u;
    if (!bu) return err_set(err, ERR_NOMEM, "out of memory for an adapter's products");
    c->bu = bu, c->u_cap = n;
    return ERR_OK;
}

/* U (n, rank) = A x; s folded in when scaled. */
static err_code pair_u(train_ctx *c, const lin_lora *l, const float *x, int n, bool scaled, err_t *err) {
    const lora_tensor *t = l->t;
    const matmul_weight a = f32_weight(t->a, t->n_in, t->rank, (size_t)t->n_in);
    err_code rc = pair_buffers(c, (size_t)n * (size_t)t->rank, err);
    if (!rc) rc = matmul(c->mm, &a, x, n, c->u, err);
    for (size_t i = 0; !rc && scaled && i < (size_t)n * (size_t)t->rank; i++) c->u[i] *= l->s;
    return rc;
}

typedef struct {
    train_ctx *c;
    const lin_lora *l;
    const float *x, *dy;
    int n;
} pair_job;

/* Thread ith's ranks k: dB^T[k] += sum_t (s U[t][k]) dy[t], dA[k] += sum_t (s BU[t][k]) x[t]. */
static void pair_grads(void *job, int ith, int nth) {
    const pair_job *j = job;
    const lora_tensor *t = j->l->t;
    float *col = j->c->scratch[ith], *tmp = col + j->n;
    for (int k = ith; k < t->rank; k += nth) {
        for (int s = 0; s < j->n; s++) col[s] = j->c->u[(size_t)s * (size_t)t->rank + (size_t)k];
        lowrank_add(j->c, col, j->n, j->dy, (size_t)t->n_out, (size_t)t->n_out, j->l->gb + (size_t)k * t->bt_stride, tmp);
        for (int s = 0; s < j->n; s++) col[s] = j->c->bu[(size_t)s * (size_t)t->rank + (size_t)k];
        lowrank_add(j->c, col, j->n, j->x, (size_t)t->n_in, (size_t)t->n_in, j->l->ga + (size_t)k * (size_t)t->n_in, tmp);
    }
}

static err_code pair_backward(train_ctx *c, const lin_lora *l, const float *x, const float *dy, int n, float *dx,
                              err_t *err) {
    const lora_tensor *t = l->t;
    const matmul_weight bt = f32_weight(t->bt, t->n_out, t->rank, t->bt_stride);
    const size_t wide = (size_t)(t->n_in > t->n_out ? t->n_in : t->n_out);
    err_code rc = pair_u(c, l, x, n, true, err);
    if (!rc) rc = matmul(c->mm, &bt, dy, n, c->bu, err);
    if (!rc) rc = train_ctx_reserve(c, (size_t)n + wide, err);
    if (rc) return rc;
    for (size_t i = 0; i < (size_t)n * (size_t)t->rank; i++) c->bu[i] *= l->s;
    for (int s = 0; s < n; s++) /* dx += A^T (s B^T dy) */
        lowrank_add(c, c->bu + (size_t)s * (size_t)t->rank, t->rank, t->a, (size_t)t->n_in, (size_t)t->n_in,
                    dx + (size_t)s * (size_t)t->n_in, c->scratch[0]);
    if (!l->ga) return ERR_OK;
    pair_job j = {c, l, x, dy, n};
    train_ctx_run(c, pair_grads, &j);
    return ERR_OK;
}

/* ---------------------------------------------------------------- the whole */

err_code lin_forward(train_ctx *c, const model_mat *w, const lin_lora *l, const float *x, int n, float *y,
                     err_t *err) {
    const matmul_weight mw = weight_of(w);
    err_code rc = matmul(c->mm, &mw, x, n, y, err);
    if (rc || !l || !l->t) return rc;
    if ((rc = pair_u(c, l, x, n, true, err)) || (rc = train_ctx_reserve(c, (size_t)w->n_out, err))) return rc;
    for (int s = 0; s < n; s++) /* y += B (s A x) */
        lowrank_add(c, c->u + (size_t)s * (size_t)l->t->rank, l->t->rank, l->t->bt, l->t->bt_stride,
                    (size_t)w->n_out, y + (size_t)s * (size_t)w->n_out, c->scratch[0]);
    return ERR_OK;
}

err_code lin_backward(train_ctx *c, const model_mat *w, const lin_lora *l, const float *x, const float *dy, int n,
                      float *dx, err_t *err) {
    err_code rc = transposed(c, w, dy, n, dx, err);
    if (rc || !l || !l->t) return rc;
    return pair_backward(c, l, x, dy, n, dx, err);
}

typedef struct {
    const float *x, *dy;
    int n;
    int64_t n_in, n_out;
    float *gw;
} wgrad_job;

/* Rows ith, ith + nth, ... of gw: each a sum over the tokens in order (the same for any thread count). */
static void wgrad_rows(void *job, int ith, int nth) {
    const wgrad_job *j = job;
    for (int64_t o = ith; o < j->n_out; o += nth) {
        float *g = j->gw + o * j->n_in;
        for (int t = 0; t < j->n; t++) {
            const float d = j->dy[(size_t)t * (size_t)j->n_out + (size_t)o];
            const float *xt = j->x + (size_t)t * (size_t)j->n_in;
            if (d != 0.0f)
                for (int64_t i = 0; i < j->n_in; i++) g[i] += d * xt[i];
        }
    }
}

void lin_weight_grad(train_ctx *c, const float *x, const float *dy, int n, int64_t n_in, int64_t n_out, float *gw) {
    wgrad_job j = {x, dy, n, n_in, n_out, gw};
    train_ctx_run(c, wgrad_rows, &j);
}
