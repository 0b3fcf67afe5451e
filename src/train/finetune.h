/*
 * finetune — the training loop of `octo finetune`: a LoRA adapter of a base
 * model learns from token sequences (train/data.h), step by step.
 *
 * A step takes `batch` sequences, sums the gradients of their losses
 * (train/backward.h: each sequence's mean next-token loss over the positions
 * that count), divides by `batch` (gradient accumulation: the memory of one
 * sequence, the gradient of a batch) and takes one AdamW step
 * (train/adamw.h: warm-up, cosine, clipping). Sequences are taken in a
 * seeded order: each pass over the data (an epoch) is a fresh permutation,
 * and step s uses the s-th batch of that endless order, so the order is a
 * function of the seed and the step alone.
 *
 * Every `every` steps, and when the caller's progress callback asks to stop,
 * the state goes to the checkpoint (train/checkpoint.h); a run given an
 * existing checkpoint of the same identity resumes from it, and its adapter
 * ends bit for bit as an unbroken run's (every value is one thread's sum in
 * a fixed order, whatever the thread count: train/linear.h).
 */
#ifndef OCTO_TRAIN_FINETUNE_H
#define OCTO_TRAIN_FINETUNE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"
#include "model/lora.h"
#include "model/model.h"
#include "train/adamw.h"
#include "train/data.h"
#include "train/linear.h"

typedef struct {
    int steps;              /* optimizer steps (>= 1) */
    int batch;              /* sequences per step (>= 1) */
    adamw_opts opt;         /* its steps is set to steps */
    uint64_t seed;          /* the data order */
    float scale;            /* the adapter's user scale (1) */
    const char *checkpoint; /* NULL: no checkpoints */
    int every;              /* steps between checkpoints (>= 1) */
    bool resume;            /* resume from an existing checkpoint of the same identity */
    const train_data *valid;/* held-out sequences: their loss before and after (NULL: none) */
    train_ctx *tc;          /* the products' threads (borrowed; NULL: the calling thread) */
} finetune_opts;

/* 100 steps, batch 4, AdamW's defaults at lr 1e-3 (a LoRA's usual), seed 1, scale 1, every 10, resume. */
finetune_opts finetune_defaults(void);

typedef struct {
    int64_t step, steps;     /* steps done (this one included), all */
    double loss;             /* this step's mean loss */
    double lr, grad_norm;    /* its learning rate; its gradient's norm before clipping */
    int64_t tokens;          /* positions counted since this run started or resumed */
    double elapsed_s, tokens_per_s, eta_s;
    int64_t resumed_at;      /* the step a checkpoint gave (0: a fresh start) */
    double valid_before;     /* held-out loss before the first step (NAN: no held-out data, or resumed) */
} finetune_progress;

/* false: stop now (the state goes to the checkpoint first). */
typedef bool (*finetune_fn)(void *user, const finetune_progress *p);

typedef struct {
    int64_t resumed_at, steps_run; /* where it started; steps taken in this call */
    double first_loss, last_loss;  /* the first and last steps' losses of this call */
    double valid_before, valid_after; /* held-out mean losses (NAN: none, or not measured) */
    double seconds;
} finetune_result;

/* Trains a (its values, in place) on d. m: opened without packing (train/backward.h).
 * ERR_CANCELLED when progress asked to stop (the checkpoint written, named in err). */
err_code finetune_run(const model *m, lora_adapter *a, const train_data *d, const finetune_opts *o,
                      finetune_fn progress, void *user, finetune_result *res, err_t *err);

/* The mean of the per-sequence losses of d (at most max_seq of them, 0: all) with a at scale. */
err_code finetune_eval(train_ctx *tc, const model *m, const lora_adapter *a, float scale, const train_data *d,
                       int max_seq, double *loss, err_t *err);

#endif
