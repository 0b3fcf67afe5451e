/*
 * arch — the hyperparameters of each supported architecture, read from the
 * GGUF metadata into model_hparams (see arch.c for the list and what each
 * one reads).
 */
#ifndef OCTO_MODEL_ARCH_H
#define OCTO_MODEL_ARCH_H

#include <stdbool.h>

#include "core/err.h"
#include "core/gguf.h"
#include "model/model.h"

/* general.architecture, then the common keys, then the architecture's own. */
err_code arch_read_hparams(const gguf_ctx *g, model_hparams *hp, err_t *err);
/* "llama, qwen2, ..." */
const char *arch_supported_list(void);

/* "<arch>.<name>" as an integer in [min, max] (a uniform per-layer array
 * counts as its value, a bool as 0/1); absent: def, or ERR_MISSING_KEY. */
err_code arch_get_int(const gguf_ctx *g, const char *arch, const char *name, bool required, int def, int min, int max,
                      int *out, err_t *err);
/* "<arch>.<name>" as a finite float >= 0; absent: def. */
err_code arch_get_float(const gguf_ctx *g, const char *arch, const char *name, float def, float *out, err_t *err);

#endif
