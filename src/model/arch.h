/*
 * arch — the hyperparameters of each supported architecture, read from the
 * GGUF metadata into model_hparams (see arch.c for the list and what each
 * one reads).
 */
#ifndef OCTO_MODEL_ARCH_H
#define OCTO_MODEL_ARCH_H

#include "core/err.h"
#include "core/gguf.h"
#include "model/model.h"

/* general.architecture, then the common keys, then the architecture's own. */
err_code arch_read_hparams(const gguf_ctx *g, model_hparams *hp, err_t *err);

#endif
