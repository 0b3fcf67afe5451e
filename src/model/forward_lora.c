/*
 * forward_lora — the adapters' low-rank terms beside the base's products
 * (model/lora.h). Each run of rows with one set takes, per adapter of that
 * set adapting the matrix, u = A·x (rank values a row, core/matmul's F32
 * kernels) and y += s · B·u, B·u as a sum of rank rows of B's transpose
 * (kernel_lowrank), in chunks of LORA_CHUNK outputs spread over the threads.
 * A row's result depends on its own input only, whatever the split: decode,
 * verify and batched rows agree bit for bit.
 */
#include "forward_internal.h"

#include <stdlib.h>

#include "core/kernels/kernels.h"
#include "core/quant.h"

#define LORA_CHUNK 256 /* outputs per work item (a multiple of every path's vector) */

static err_code room(float **p, size_t *cap, size_t n, err_t *err) {
    if (n <= *cap) return ERR_OK;
    float *q = realloc(*p, sizeof(float) * n);
    if (!q) return err_set(err, ERR_NOMEM, "out of memory for an adapter's product of %zu values", n);
    *p = q;
    *cap = n;
    return ERR_OK;
}

/* y[t] += s · B·u[t] for T rows: work items are (row, chunk of outputs). */
typedef struct {
    lowrank_fn fn;
    const float *u, *bt;
    size_t stride;
    int r, T;
    int64_t n_out;
    float s, *y;
} lowrank_job;

static void lowrank_work(void *ctx, int ith, int nth) {
    const lowrank_job *j = ctx;
    const int64_t chunks = (j->n_out + LORA_CHUNK - 1) / LORA_CHUNK, items = chunks * j->T;
    float acc[LORA_CHUNK];
    for (int64_t w = items * ith / nth; w < items * (ith + 1) / nth; w++) {
        const int64_t t = w / chunks, c0 = (w % chunks) * LORA_CHUNK;
        const int64_t len = j->n_out - c0 < LORA_CHUNK ? j->n_out - c0 : LORA_CHUNK;
        j->fn(j->u + (size_t)t * (size_t)j->r, j->r, j->bt + c0, j->stride, (size_t)len, acc);
        float *y = j->y + (size_t)t * (size_t)j->n_out + (size_t)c0;
        for (int64_t i = 0; i < len; i++) y[i] += j->s * acc[i];
    }
}

/* rows [0, n) of x (n_in apart) through one adapter's matrix into y (n_out apart). */
static err_code add_one(fwd_state *st, const lora_tensor *t, float s, int expert, const float *x, int n, float *y,
                        err_t *err) {
    const matmul_weight a = {.data = t->a + (size_t)expert * (size_t)t->rank * (size_t)t->n_in, .type = QT_F32,
                             .n_in = t->n_in, .n_out = t->rank, .row_bytes = sizeof(float) * (size_t)t->n_in};
    err_code rc = room(&st->lora_u, &st->lora_u_cap, (size_t)n * (size_t)t->rank, err);
    if (rc || (rc = matmul(st->mm, &a, x, n, st->lora_u, err))) return rc;
    lowrank_job j = {.fn = kernel_lowrank(), .u = st->lora_u, .r = t->rank, .T = n, .n_out = t->n_out, .s = s, .y = y,
                     .bt = t->bt + (size_t)expert * (size_t)t->rank * t->bt_stride, .stride = t->bt_stride};
    if ((int64_t)n * t->n_out * t->rank < MIN_PARALLEL_MACS) lowrank_work(&j, 0, 1);
    else tpool_run(st->pool, lowrank_work, &j);
    return ERR_OK;
}

err_code fwd_lora(fwd_state *st, int layer, lora_kind kind, int expert, const float *x, int T, const int32_t *rows,
                  float *y, err_t *err) {
    if (!st->lora_on) return ERR_OK;
    for (int t0 = 0, t1; t0 < T; t0 = t1) {
        const lora_set *set = st->row_lora[rows ? rows[t0] : t0];
        for (t1 = t0 + 1; t1 < T && st->row_lora[rows ? rows[t1] : t1] == set;) t1++;
        for (int i = 0; set && i < set->n; i++) {
            const lora_tensor *t = set->scale[i] != 0.0f ? lora_find(set->a[i], layer, kind) : NULL;
            if (!t) continue;
            err_code rc = add_one(st, t, lora_scale(set->a[i], t, set->scale[i]), expert, x + (size_t)t0 * t->n_in,
                                  t1 - t0, y + (size_t)t0 * t->n_out, err);
            if (rc) return rc;
        }
    }
    return ERR_OK;
}
