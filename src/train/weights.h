/*
 * weights — every weight of a small model (a draft) as trainable F32
 * values: full training, where an adapter would be as large as the model.
 *
 * train_weights_new copies the model's embedding, norms, attention and FFN
 * matrices (and qwen2's biases; an MoE's expert stacks and routers), dequantized, into one array of values and
 * makes a view of the model whose tensors point at them (F32, the file's
 * row layout). Training runs through the view (train/backward.h: a
 * train_spec with w), the optimizer updates the values in place, and
 * train_weights_write writes the source file again with the trained
 * tensors in F32 and everything else (metadata, vocabulary, RoPE factors)
 * as it was: a GGUF that octo and llama.cpp load like the original.
 */
#ifndef OCTO_TRAIN_WEIGHTS_H
#define OCTO_TRAIN_WEIGHTS_H

#include <stddef.h>

#include "core/err.h"
#include "core/gguf.h"
#include "model/model.h"

typedef struct train_weights train_weights;

/* m: opened without packing (model_open), a model train_supported accepts; it must outlive w. */
err_code train_weights_new(const model *m, train_weights **out, err_t *err);
void train_weights_free(train_weights *w);

/* The model to train through: m with its trained tensors at the values. */
const model *train_weights_model(const train_weights *w);
/* The values (n of them): the optimizer's parameters, and the gradient's layout. */
float *train_weights_values(train_weights *w, size_t *n);
/* Tensors trained. */
int train_weights_tensors(const train_weights *w);
/* Where mat's gradient lives in grad (the values' layout): NULL when mat's
 * data is not one of the trained tensors (a tied output shares the
 * embedding's slice; one expert of a stack, model_expert_mats', is its part). */
float *train_weights_grad(const train_weights *w, float *grad, const model_mat *mat);

/* The source GGUF again, the trained tensors replaced by the values in F32, to path (atomically);
 * extra: one more key (NULL: none; it replaces a key of that name). */
err_code train_weights_write(const train_weights *w, const gguf_i32_array *extra, const char *path, err_t *err);

#endif
