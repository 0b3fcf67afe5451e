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
#include "train/backward.h"
#include "train/linear.h"
#include "train/weights.h"

/* A teacher (distillation): the next-token distributions (n, n_vocab), each summing to 1, of its
 * model over tokens[0..n) read from position 0. */
typedef err_code (*finetune_teacher)(void *user, const int32_t *tokens, int n, float *probs, err_t *err);

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
    finetune_teacher teacher; /* distillation: the loss is the KL to its distributions (NULL: next tokens) */
    void *teacher_user;
    uint64_t teacher_id;    /* the teacher's identity, for the checkpoint */
    /* Memory for a sequence's activations (and a teacher's distributions): every activation is kept
     * when that fits in keep_bytes; else each layer is computed again in the backward when that fits in
     * limit_bytes; else the run is refused (ERR_NOMEM, saying which --seq-len would fit). 0: no limit. */
    uint64_t keep_bytes, limit_bytes;
    /* Asked before each sequence: true while memory is pressed (the memory watcher says so); that
     * sequence then computes each layer again, holding the least (NULL: never). */
    bool (*pressed)(void *user);
    void *pressed_user;
    /* Called before each sequence, to follow the CPU there is (runtime/cpu_adapt.h: the threads of
     * tc's pool); the results do not depend on it (NULL: nothing). */
    void (*adapt)(void *user);
    void *adapt_user;
    /* An MoE: [n_layer][n_expert], the tokens routed to each expert over the whole run (a resumed run's
     * earlier steps included), written at its end (NULL: not wanted). Whatever it is asked, an expert
     * no token of a step reached takes no part in that step's update (train/adamw.h: frozen), so one
     * never reached ends as it began, bit for bit. */
    int64_t *expert_tokens;
    /* An adapter's A matrices keep their values (federated learning: every device shares them, so the
     * average of the products B·A is the product of the averaged B: train/fed.h); B alone learns. */
    bool freeze_a;
    /* The adapter's start when it is not lora_create's (a federation's global: its values' hash), for the
     * checkpoint's identity (0: lora_create's, which the identity's options make). */
    uint64_t start_id;
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
    bool recompute;                /* each layer computed again in the backward (the budget asked for it) */
    uint64_t activation_bytes;     /* a longest sequence's activations (and a teacher's distributions) */
    int64_t pressed;               /* sequences computed again for memory pressure (pressed said so) */
    int64_t positions;             /* the positions every step of the run (a resumed one's too) went through */
} finetune_result;

/* Trains a, or w (m's weights: train/weights.h), one of them, its values in place, on d. m: opened
 * without packing (train/backward.h). ERR_CANCELLED when progress asked to stop (the checkpoint
 * written, named in err). */
err_code finetune_run(const model *m, lora_adapter *a, train_weights *w, const train_data *d,
                      const finetune_opts *o, finetune_fn progress, void *user, finetune_result *res, err_t *err);

/* A model's identity for a checkpoint: its tensors' names, types, shapes and first 4 KiB each. */
uint64_t finetune_model_fingerprint(const model *m);

/* The mean of the per-sequence losses of d (at most max_seq of them, 0: all) under sp, on o's threads
 * and against o's teacher when it has one. */
err_code finetune_eval(const model *m, const train_spec *sp, const train_data *d, const finetune_opts *o,
                       int max_seq, double *loss, err_t *err);

#endif
