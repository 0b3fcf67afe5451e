/*
 * forward_lora — the adapters' low-rank terms beside the base's products
 * (model/lora.h). Each run of rows with one set takes, per adapter of that
 * set adapting the matrix, u = A·x (rank values a row) and y += s · B·u,
 * both through core/matmul's F32 kernels: a row's result depends on its own
 * input only, so decode, verify and batched rows agree bit for bit.
 */
#include "forward_internal.h"

#include <stdlib.h>

#include "core/quant.h"

static err_code room(float **p, size_t *cap, size_t n, err_t *err) {
    if (n <= *cap) return ERR_OK;
    float *q = realloc(*p, sizeof(float) * n);
    if (!q) return err_set(err, ERR_NOMEM, "out of memory for an adapter's product of %zu values", n);
    *p = q;
    *cap = n;
    return ERR_OK;
}

/* rows [0, n) of x (n_in apart) through one adapter's matrix into y (n_out apart). */
static err_code add_one(fwd_state *st, const lora_tensor *t, float s, int expert, const float *x, int n, float *y,
                        err_t *err) {
    const matmul_weight a = {.data = t->a + (size_t)expert * (size_t)t->rank * (size_t)t->n_in, .type = QT_F32,
                             .n_in = t->n_in, .n_out = t->rank, .row_bytes = sizeof(float) * (size_t)t->n_in};
    const matmul_weight b = {.data = t->b + (size_t)expert * t->b_stride, .type = QT_F32, .n_in = t->rank,
                             .n_out = t->n_out, .row_bytes = sizeof(float) * (size_t)t->rank};
    const size_t ny = (size_t)n * (size_t)t->n_out;
    err_code rc = room(&st->lora_u, &st->lora_u_cap, (size_t)n * (size_t)t->rank, err);
    if (rc || (rc = room(&st->lora_y, &st->lora_y_cap, ny, err))) return rc;
    if ((rc = matmul(st->mm, &a, x, n, st->lora_u, err)) || (rc = matmul(st->mm, &b, st->lora_u, n, st->lora_y, err)))
        return rc;
    for (size_t i = 0; i < ny; i++) y[i] += s * st->lora_y[i];
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
