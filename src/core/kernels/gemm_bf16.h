/*
 * gemm_bf16 — prefill batches of F16 and BF16 matrices (GGUF layout) on a
 * CPU with a bf16 dot-product instruction, which does twice (AVX512-BF16's
 * vdpbf16ps: 32 multiply-adds where an FMA does 16) or four times (ARM's
 * BFMMLA: 16 where a NEON FMA does 4) the work of an F32 instruction.
 *
 * Weights and activations are rounded to bf16 (round to nearest even, F32
 * denormals as zero; F16 weights through F32, BF16 weights as they are);
 * products of two bf16 values are exact in F32. Each output is summed in one
 * fixed order of its own, so a token's outputs depend on its own row and the
 * weights only, never on the batch, the tile or the thread that computed
 * them. They differ from the F32 kernels' (decode, verification) by the bf16
 * rounding, which is why only batches of PACKED_BF16_MIN_TOKENS or more take
 * this path, as with AMX's bf16 kernel (core/kernels/packed.h).
 *
 * The sums are the instruction's, so there is one arithmetic per instruction set:
 * - vdpbf16ps (gemm_bf16_avx512.c): over the row's pairs of values in order,
 *   each pair's odd product then its even one added to the sum, each addition
 *   an F32 addition rounded to nearest even (products exact, so an FMA's).
 * - BFMMLA (gemm_bf16_neon.c), as the Arm ARM defines it when FPCR.EBF is 0
 *   (every CPU before FEAT_EBF16, and the reset value on those with it; octo
 *   never sets it): over the row's pairs in order, the pair's two products
 *   added rounded to odd, that sum added to the running one rounded to odd,
 *   denormal inputs and results flushed to zero, an overflow going to infinity.
 * gemm_bf16_ref_dot is that arithmetic in plain C for whichever runs here.
 */
#ifndef OCTO_CORE_KERNELS_GEMM_BF16_H
#define OCTO_CORE_KERNELS_GEMM_BF16_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GEMM_BF16_ROWS 32 /* rows re-laid and computed together */

/* Can this machine run it for a weight type (F16 or BF16)? The AVX-512 path with AVX512-BF16, or the NEON
 * path with ARM's BF16; OCTO_BF16=0 declines it. */
bool gemm_bf16_supported(uint32_t type);
/* The kernel that runs ("avx512-bf16", "neon-bfmmla"), NULL where none does. */
const char *gemm_bf16_name(void);

/* Values of an activation row: n rounded up to even. */
static inline int64_t gemm_bf16_row_len(int64_t n) { return (n + 1) & ~(int64_t)1; }

/* x (n floats) to bf16 (gemm_bf16_row_len(n) values, a zero after an odd n). */
void gemm_bf16_act(const float *x, uint16_t *dst, int64_t n);

/* Bytes of the scratch one call of gemm_bf16_rows needs for rows of n values. */
size_t gemm_bf16_scratch_bytes(int64_t n);

/* y[t * y_stride + r] = W[r] · x[t] for rows r0 <= r < r1 (r1 - r0 <= GEMM_BF16_ROWS) and tokens
 * t < T; W's row r at w + r * row_bytes in the GGUF layout of type; act: T rows of bf16 from
 * gemm_bf16_act, act_stride values apart. Only where gemm_bf16_supported. */
void gemm_bf16_rows(const void *w, uint32_t type, size_t row_bytes, int64_t n, int r0, int r1, const uint16_t *act,
                    size_t act_stride, int T, float *y, size_t y_stride, void *scratch);

/* The arithmetic above, one output at a time, in plain C: the tests' reference. */
float gemm_bf16_ref_dot(const uint16_t *w_bf16, const uint16_t *x_bf16, int64_t n_pairs);
/* F32 -> bf16 as the kernels round (nearest even, denormals as zero), for the reference. */
uint16_t gemm_bf16_round(float x);

/* ---- one implementation per instruction set; gemm_bf16.c picks the CPU's */
typedef enum { GEMM_BF16_SUM_NEAREST, GEMM_BF16_SUM_PAIRS_ODD } gemm_bf16_sum;
typedef struct {
    const char *name;
    gemm_bf16_sum sum; /* the order and rounding of its sums (above) */
    void (*act)(const float *x, uint16_t *dst, int64_t n); /* NULL: gemm_bf16_round value by value */
    size_t (*scratch_bytes)(int64_t n);
    void (*rows)(const void *w, uint32_t type, size_t row_bytes, int64_t n, int r0, int r1, const uint16_t *act,
                 size_t act_stride, int T, float *y, size_t y_stride, void *scratch);
} gemm_bf16_impl;
/* NULL where this build has no such kernel. */
const gemm_bf16_impl *gemm_bf16_avx512(void);
const gemm_bf16_impl *gemm_bf16_neon(void);

#endif
