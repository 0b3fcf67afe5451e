/*
 * linear — the products of training through a frozen matrix W (any type
 * its file has) with an optional LoRA pair beside it, forward and backward,
 * on a thread pool:
 *
 *     forward   y  = W x + s B (A x)
 *     backward  dx += W^T dy + s A^T (B^T dy)
 *               dB += s dy (A x)^T,  dA += s (B^T dy) x^T
 *
 * W x is inference's own product (core/kernels/matmul.h: the activations in
 * the format the weight's kernel takes, so the training forward computes
 * what generation computes). W^T dy is a transposed product over W's rows:
 * each thread takes a slice of W's columns (whole quantization blocks),
 * dequantizes 64 rows of its slice at a time and adds them, weighted by
 * dy, to its slice of every token's dx (core/kernels: kernel_lowrank, one
 * fused multiply-add per row and element). Every value is computed by one
 * thread in a fixed order: the results do not depend on the thread count.
 */
#ifndef OCTO_TRAIN_LINEAR_H
#define OCTO_TRAIN_LINEAR_H

#include "core/err.h"
#include "core/threadpool.h"
#include "model/lora.h"
#include "model/model.h"

/* The threads and scratch of training's products. */
typedef struct train_ctx train_ctx;

/* n_threads 0: tpool_default_threads(); 1: the calling thread alone. */
err_code train_ctx_new(int n_threads, train_ctx **out, err_t *err);
/* The same on a pool it borrows (another computation's, taking turns with it; it must outlive c). */
err_code train_ctx_new_on(tpool *pool, train_ctx **out, err_t *err);
void train_ctx_free(train_ctx *c);
int train_ctx_threads(const train_ctx *c);
/* Its pool (NULL: the calling thread alone); the threads in force may change between products
 * (tpool_set_active): every result is the same for any count. */
tpool *train_ctx_pool(train_ctx *c);
/* Each thread's buffer of at least n floats (ERR_NOMEM), thread ith's while no product runs. */
err_code train_ctx_reserve(train_ctx *c, size_t n, err_t *err);
float *train_ctx_buffer(train_ctx *c, int ith);
/* fn(job, ith, nth) on each of c's threads (the caller is thread 0), as core/threadpool's tpool_run. */
void train_ctx_run(train_ctx *c, void (*fn)(void *job, int ith, int nth), void *job);

/* A LoRA pair beside W: its tensor, its scale, and where its gradients go (NULL: none). */
typedef struct {
    const lora_tensor *t;
    float s;
    float *ga, *gb; /* lora_values' layout: A's [rank][n_in], B^T's rows bt_stride apart */
} lin_lora;

/* y[t] = W x[t] (+ the pair) for n rows. ERR_NOMEM, ERR_UNSUPPORTED (a type with no kernel). */
err_code lin_forward(train_ctx *c, const model_mat *w, const lin_lora *l, const float *x, int n, float *y,
                     err_t *err);
/* dx[t] += W^T dy[t] (+ the pair's), and the pair's gradients added. */
err_code lin_backward(train_ctx *c, const model_mat *w, const lin_lora *l, const float *x, const float *dy, int n,
                      float *dx, err_t *err);
/* gw[o][i] += sum over t of dy[t][o] x[t][i]: the gradient of a trained matrix (n_out, n_in) itself. */
void lin_weight_grad(train_ctx *c, const float *x, const float *dy, int n, int64_t n_in, int64_t n_out, float *gw);

#endif
