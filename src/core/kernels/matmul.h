/*
 * matmul — multiply a weight matrix by a batch of activation rows on the
 * thread pool.
 *
 * y[t] = W · x[t] for T rows x[t] of W's row length. The product dispatches
 * on the weight's own type (a GGUF file mixes types per tensor): the
 * activation rows are converted once to the format the type's integer kernel
 * consumes (core/kernels/kernels.h), then each of the pool's threads takes a
 * contiguous slice of the output rows and walks it in tiles of tokens, so a
 * weight row is read from memory once per tile, not once per token. Matrices
 * re-laid for the packed kernels (core/kernels/packed.h) take those instead, and
 * several packed matrices of one input (q, k and v; gate and up) share one
 * conversion and one wake of the pool.
 *
 * Results do not depend on the number of threads, nor (below
 * PACKED_BF16_MIN_TOKENS) on the other rows of the batch.
 */
#ifndef OCTO_CORE_KERNELS_MATMUL_H
#define OCTO_CORE_KERNELS_MATMUL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/threadpool.h"

/* Below this many multiply-adds a job runs on the calling thread: waking the
 * pool costs more than it saves (small models, routers, short attention). */
#define MATMUL_MIN_PARALLEL_MACS 32768

/* One weight matrix: n_out rows of n_in values, row r at data + r * row_bytes
 * in the GGUF layout, or in PACK_ROWS-row groups when packed. */
typedef struct {
    const void *data;
    uint32_t type;    /* quant_type */
    int64_t n_in;     /* row length */
    int64_t n_out;    /* rows */
    size_t row_bytes;
    bool packed;      /* laid out for the active path's packed kernels */
} matmul_weight;

/* Does a row's product with w never depend on how many rows share the call?
 * False where a batch of PACKED_BF16_MIN_TOKENS or more takes a kernel of its
 * own (F16/BF16 on AVX512-BF16 and AVX2's prefill tile, packed weights on AMX). */
bool matmul_batch_invariant(const matmul_weight *w);

/* The pool and the buffer of converted activation rows (grows with use). */
typedef struct matmul_ctx matmul_ctx;

/* pool: borrowed; NULL runs every product on the calling thread. NULL when out of memory. */
matmul_ctx *matmul_ctx_new(tpool *pool);
void matmul_ctx_free(matmul_ctx *c);

/* y[t] = W · x[t] for t < T: x rows are w->n_in long, y rows w->n_out.
 * ERR_UNSUPPORTED for a type with no kernel, ERR_NOMEM. */
err_code matmul(matmul_ctx *c, const matmul_weight *w, const float *x, int T, float *y, err_t *err);

/* ys[i][t] = W_i · x[t] for n matrices of the same input: in one packed job
 * when there are at most MATMUL_MAX_SET, all packed with one type and row
 * length (the usual q/k/v and gate/up), else one by one (the same results). */
#define MATMUL_MAX_SET 3
err_code matmul_set(matmul_ctx *c, const matmul_weight *ws, int n, const float *x, int T, float *const *ys,
                    err_t *err);

#endif
