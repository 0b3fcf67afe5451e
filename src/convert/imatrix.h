/*
 * imatrix — an importance matrix from a calibration text (`octo quantize
 * -f TEXT`): for every weight matrix, the mean square of each of its input
 * columns over the text's tokens, E[x_j^2]. Quantizing a row w to w' changes
 * its output by sum_j (w_j - w'_j) x_j, whose expected square, with the
 * inputs taken as uncorrelated, is sum_j (w_j - w'_j)^2 E[x_j^2]: the
 * rounding search (core/quant.h: quantize_imp) minimises that weighted error
 * instead of the plain one, so the columns the model actually drives are
 * kept more exactly (llama.cpp's imatrix serves the same purpose).
 *
 * The text is run through the unquantized model (forward.h's observer) in
 * chunks of up to 512 tokens from BOS, at most max_tokens in all. A matrix
 * whose input no observer point sees (an MoE expert's down projection, an
 * MLA layer's second query projection, the embedding) gets none and is
 * quantized as without.
 */
#ifndef OCTO_CONVERT_IMATRIX_H
#define OCTO_CONVERT_IMATRIX_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

typedef struct imatrix imatrix;

/* Run text (len bytes) through the model at path; n_threads 0 = the cores.
 * *n_tokens: how many tokens it saw. */
err_code imatrix_collect(const char *model_path, const char *text, size_t len, int max_tokens, int n_threads,
                         imatrix **out, int *n_tokens, err_t *err);
/* E[x^2] of each of the n_in input columns of the tensor of that name; NULL
 * when none was seen for it (or its rows are not n_in long). */
const float *imatrix_of(const imatrix *im, const char *tensor_name, int64_t n_in);
void imatrix_free(imatrix *im);

#endif
