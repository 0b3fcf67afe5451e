/*
 * gemm_bf16 — prefill batches of F16 and BF16 matrices (GGUF layout) on
 * AVX512-BF16 (Zen 4, Intel from Cooper Lake / Sapphire Rapids), whose
 * vdpbf16ps does 32 multiply-adds an instruction where an FMA does 16.
 *
 * Weights and activations are rounded to bf16 (round to nearest even; F16
 * weights through F32, BF16 weights as they are), products are exact in F32
 * and summed in F32 in one fixed order per output: over the row's pairs of
 * values in order, each pair's odd value first, as the instruction does.
 * A token's outputs therefore depend on its own row and the weights only,
 * never on the batch, the tile or the thread that computed them. They differ
 * from the F32 kernels' (decode, verification) by the bf16 rounding, which
 * is why only batches of PACKED_BF16_MIN_TOKENS or more take this path, as
 * with AMX's bf16 kernel (core/kernels/packed.h).
 *
 * The kernel: 32 weight rows are re-laid (16 x 16 word transposes) as two panels whose
 * vector p holds the pair (2p, 2p + 1) of 16 rows; each vector serves 12
 * tokens, whose pairs are broadcast: 24 accumulators in registers.
 */
#ifndef OCTO_CORE_KERNELS_GEMM_BF16_H
#define OCTO_CORE_KERNELS_GEMM_BF16_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GEMM_BF16_ROWS 32 /* rows re-laid and computed together */

/* Can this machine run it for a weight type (F16 or BF16)? The AVX-512 path with AVX512-BF16;
 * OCTO_BF16=0 declines it. */
bool gemm_bf16_supported(uint32_t type);

/* Values of an activation row: n rounded up to even. */
static inline int64_t gemm_bf16_row_len(int64_t n) { return (n + 1) & ~(int64_t)1; }

/* x (n floats) to bf16 (gemm_bf16_row_len(n) values, a zero after an odd n). */
void gemm_bf16_act(const float *x, uint16_t *dst, int64_t n);

/* Bytes of the scratch one call of gemm_bf16_rows needs for rows of n values. */
size_t gemm_bf16_scratch_bytes(int64_t n);

/* y[t * y_stride + r] = W[r] · x[t] for rows r0 <= r < r1 (r1 - r0 <= GEMM_BF16_ROWS) and tokens
 * t < T; W's row r at w + r * row_bytes in the GGUF layout of type; act: T rows of bf16 from
 * gemm_bf16_act, act_stride values apart. */
void gemm_bf16_rows(const void *w, uint32_t type, size_t row_bytes, int64_t n, int r0, int r1, const uint16_t *act,
                    size_t act_stride, int T, float *y, size_t y_stride, void *scratch);

/* The arithmetic above, one output at a time, in plain C: the tests' reference. */
float gemm_bf16_ref_dot(const uint16_t *w_bf16, const uint16_t *x_bf16, int64_t n_pairs);
/* F32 -> bf16 as the instruction rounds (nearest even), for the reference. */
uint16_t gemm_bf16_round(float x);

#endif
