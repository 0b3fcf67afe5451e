/*
 * backward — the gradient of a sequence's next-token loss with respect to a
 * LoRA adapter's factors, the base model frozen in whatever types its file
 * has (issue 56's first piece: `octo finetune` is built on it).
 *
 * The forward here is the inference forward's arithmetic for a dense llama
 * family model (llama, qwen2's biases; model/forward.c), over one sequence
 * from position 0, every activation the backward needs kept: the
 * embedding, per layer the two RMSNorms' inputs and scales, q, k, v after
 * RoPE, the attention's probabilities and output, the FFN's gate, up and
 * activation; then the final norm, the output projection and the loss
 *
 *     L = (1 / |T|) sum over t in T of -log softmax(logits[t])[tokens[t + 1]]
 *
 * over the positions T the mask marks (NULL: every position but the last).
 * The backward runs the chain rule through each step in reverse: cross
 * entropy, the output projection, RMSNorm, SwiGLU, attention with its
 * causal softmax, RoPE (the transposed rotation), grouped-query heads, and
 * through each frozen matrix W, dx = W^T dy, and through an adapted product
 * y = W x + s B (A x): dB += s dy (A x)^T, dA += s (B^T dy) x^T and
 * dx += s A^T (B^T dy) (train/linear.h: the products, on a thread pool).
 *
 * Values are F32; the sums a row reduces (norms, softmax's normaliser, the
 * loss) are accumulated in double. The logits are held 64 positions at a
 * time; every other activation is kept, or with recompute each layer's
 * input alone (the layer computed again in the backward). Attention is
 * O(n^2) whole.
 * tests/test_backward.c checks the gradient against central finite
 * differences of the loss (and of the KL to a teacher's distributions, and
 * with respect to every weight: train/weights.h).
 */
#ifndef OCTO_TRAIN_BACKWARD_H
#define OCTO_TRAIN_BACKWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"
#include "model/lora.h"
#include "model/model.h"
#include "train/linear.h"
#include "train/weights.h"

/* What a pass trains and against what: an adapter at a scale, or every
 * weight (train/weights.h; m must then be train_weights_model(w)), or
 * neither (the loss alone); with soft, the loss at position t is
 * KL(soft[t] || the model's softmax), a teacher's next-token distribution
 * (distillation), instead of the cross entropy with tokens[t + 1]. */
typedef struct {
    const lora_adapter *a;  /* NULL: none */
    float scale;            /* the adapter's user scale */
    const train_weights *w; /* NULL: none */
    const float *soft;      /* (n, n_vocab) probabilities, or NULL */
    /* activation checkpointing: keep each layer's input alone and compute the layer again for its
     * backward (one more forward; the same numbers, bit for bit) */
    bool recompute;
    /* an MoE model: [n_layer][n_expert] the tokens routed to each expert, added to (NULL: not counted);
     * an expert that no token reached has no gradient at all */
    int64_t *expert_tokens;
} train_spec;

/* The loss of tokens[0..n) (n >= 2) under sp (NULL: the base alone), its
 * products on tc's threads (NULL: the calling thread's; the results are the
 * same for any count), into *loss; with grad non-NULL, the loss's gradient
 * with respect to the adapter's values (lora_values' layout) or the trained
 * weights (train_weights_values' layout) added to grad. mask: [n] 1 where
 * position t counts (its last entry is ignored), NULL for all.
 * ERR_UNSUPPORTED for an architecture it does not cover yet (MoE gating other
 * than Mixtral's, shared experts, latent attention, fused tensors, soft-caps,
 * post-norms, q/k norms) or an adapter on the output. ERR_INVALID_ARG when no position counts. */
err_code train_loss_grad(train_ctx *tc, const model *m, const train_spec *sp, const int32_t *tokens, int n,
                         const uint8_t *mask, double *loss, float *grad, err_t *err);

/* The bytes train_loss_grad allocates for a sequence of n tokens (its activations and scratch: with
 * grad, a gradient's; with recompute, checkpointing each layer; without grad, a forward's, one layer's
 * values at a time); UINT64_MAX when it cannot tell (out of memory). */
uint64_t train_activation_bytes(const model *m, int n, bool grad, bool recompute);

/* The refusals of train_loss_grad that do not depend on the tokens (the model, the adapter):
 * for a caller to check before long work. */
err_code train_supported(const model *m, const lora_adapter *a, err_t *err);

#endif
