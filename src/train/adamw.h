/*
 * adamw — the optimizer `octo finetune` steps with (issue 56): Adam with
 * decoupled weight decay (Loshchilov and Hutter), a learning rate that
 * warms up linearly and then follows a cosine to its floor, and the
 * gradient clipped to a global norm.
 *
 *     g      = grad * min(1, clip / |grad|)            (clip 0: none)
 *     m      = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
 *     p     -= lr(t) (m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps) + wd p)
 *     lr(t)  = lr t / warmup for t <= warmup, else
 *              lr_min + (lr - lr_min) (1 + cos(pi (t - warmup) / (steps - warmup))) / 2
 *
 * Its state (the step, m and v) is plain arrays a checkpoint writes and
 * reads back as they are: a resumed run steps exactly as an unbroken one.
 */
#ifndef OCTO_TRAIN_ADAMW_H
#define OCTO_TRAIN_ADAMW_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

typedef struct {
    float lr, lr_min;     /* the peak and the floor of the schedule */
    int warmup, steps;    /* steps of warm-up; all steps (the cosine ends there) */
    float beta1, beta2, eps, weight_decay;
    float clip;           /* the gradient's largest global norm (0: no clipping) */
} adamw_opts;

/* lr 1e-4 to 1e-5, warm-up 10 of 100 steps, betas 0.9 / 0.999, eps 1e-8, weight decay 0.01, clip 1. */
adamw_opts adamw_defaults(void);

typedef struct {
    size_t n;
    int64_t step;         /* steps taken */
    float *m, *v;         /* [n] the moments */
} adamw_state;

/* ERR_NOMEM, or ERR_INVALID_ARG for options out of range (named). */
err_code adamw_init(adamw_state *s, size_t n, const adamw_opts *o, err_t *err);
void adamw_free(adamw_state *s);
/* The learning rate of step t (1-based). */
float adamw_lr(const adamw_opts *o, int64_t t);
/* One step of p[0..n) by grad (read only); returns the norm before clipping of the gradient of what
 * moves. frozen: [n] non-zero where a value takes no part in this step (neither its moments nor its
 * decay move, nor does its gradient count in the norm: an expert no token reached, a shared A), or NULL. */
double adamw_step(adamw_state *s, const adamw_opts *o, float *p, const float *grad, const uint8_t *frozen);

#endif
