/*
 * quant — tensor element types and their block formats.
 *
 * One place per format, as in ggml: every quantized type is a block struct
 * whose layout is bit-identical to GGUF's (sizes checked at compile time), with
 * one scalar reference dequantize, quantize (from F32) and dot product. The
 * scalar code is the specification and the oracle for the SIMD paths that come
 * later: a fast kernel is correct when it matches these.
 *
 * Type ids are GGUF's (ggml_type) numbers, so a tensor's type field indexes
 * straight into this table.
 *
 * The reference dot product takes F32 activations and computes
 * sum_i dequant(w)_i * x_i block by block in float, which equals
 * dequantize-then-dot up to float summation order.
 */
#ifndef OCTO_CORE_QUANT_H
#define OCTO_CORE_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    QT_F32 = 0,
    QT_F16 = 1,
    QT_Q4_0 = 2,
    QT_Q4_1 = 3,
    QT_Q5_0 = 6,
    QT_Q5_1 = 7,
    QT_Q8_0 = 8,
    QT_Q8_1 = 9, /* known (for sizes) but not supported for compute */
    QT_Q2_K = 10,
    QT_Q3_K = 11,
    QT_Q4_K = 12,
    QT_Q5_K = 13,
    QT_Q6_K = 14,
    QT_Q8_K = 15,
    QT_BF16 = 30,
    QT_COUNT = 40 /* upper bound for tables indexed by type id */
} quant_type;

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK_K 256
#define K_SCALE_SIZE 12

typedef uint16_t fp16_t; /* IEEE half, stored as bits */
typedef uint16_t bf16_t; /* bfloat16, stored as bits */

typedef struct { fp16_t d; uint8_t qs[QK4_0 / 2]; } block_q4_0;
typedef struct { fp16_t d, m; uint8_t qs[QK4_1 / 2]; } block_q4_1;
typedef struct { fp16_t d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; } block_q5_0;
typedef struct { fp16_t d, m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; } block_q5_1;
typedef struct { fp16_t d; int8_t qs[QK8_0]; } block_q8_0;
typedef struct { fp16_t d, s; int8_t qs[QK8_0]; } block_q8_1;

/* K-quants: super-blocks of 256 values. */
typedef struct {
    uint8_t scales[QK_K / 16]; /* 4-bit scale | 4-bit min per 16 values */
    uint8_t qs[QK_K / 4];      /* 2-bit quants */
    fp16_t d, dmin;
} block_q2_K;
typedef struct {
    uint8_t hmask[QK_K / 8]; /* high bit of each 3-bit quant */
    uint8_t qs[QK_K / 4];    /* low 2 bits */
    uint8_t scales[12];      /* 16 signed 6-bit scales, packed */
    fp16_t d;
} block_q3_K;
typedef struct {
    fp16_t d, dmin;
    uint8_t scales[K_SCALE_SIZE]; /* 8 6-bit scales and 8 6-bit mins, packed */
    uint8_t qs[QK_K / 2];
} block_q4_K;
typedef struct {
    fp16_t d, dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} block_q5_K;
typedef struct {
    uint8_t ql[QK_K / 2];     /* low 4 bits */
    uint8_t qh[QK_K / 4];     /* high 2 bits */
    int8_t scales[QK_K / 16]; /* 8-bit scale per 16 values */
    fp16_t d;
} block_q6_K;
typedef struct {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16]; /* sum of qs per 16 values */
} block_q8_K;

_Static_assert(sizeof(block_q4_0) == 18, "block_q4_0 layout");
_Static_assert(sizeof(block_q4_1) == 20, "block_q4_1 layout");
_Static_assert(sizeof(block_q5_0) == 22, "block_q5_0 layout");
_Static_assert(sizeof(block_q5_1) == 24, "block_q5_1 layout");
_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0 layout");
_Static_assert(sizeof(block_q8_1) == 36, "block_q8_1 layout");
_Static_assert(sizeof(block_q2_K) == 84, "block_q2_K layout");
_Static_assert(sizeof(block_q3_K) == 110, "block_q3_K layout");
_Static_assert(sizeof(block_q4_K) == 144, "block_q4_K layout");
_Static_assert(sizeof(block_q5_K) == 176, "block_q5_K layout");
_Static_assert(sizeof(block_q6_K) == 210, "block_q6_K layout");
_Static_assert(sizeof(block_q8_K) == 292, "block_q8_K layout");

typedef void (*quant_dequantize_fn)(const void *src, float *dst, int64_t n);
typedef void (*quant_quantize_fn)(const float *src, void *dst, int64_t n);
typedef float (*quant_dot_fn)(const void *w, const float *x, int64_t n);
/* imp: n non-negative importances, one per value (an importance matrix's
 * E[x_j^2] for the row's input columns): the scales are chosen to minimise
 * sum_j imp_j (w_j - w'_j)^2 rather than the plain squared error. */
typedef void (*quant_quantize_imp_fn)(const float *src, void *dst, int64_t n, const float *imp);

typedef struct {
    const char *name;         /* GGUF/ggml name: "q4_0", "f16", ... */
    int block_size;           /* values per block */
    size_t type_size;         /* bytes per block */
    quant_dequantize_fn dequantize; /* NULL when not computable */
    quant_quantize_fn quantize;
    quant_dot_fn dot;
    uint32_t act_type;        /* the activation format its integer kernels take (core/kernels/kernels.h):
                                 Q8_0, Q8_1 (with the block sum), Q8_K, or F32 for float types */
    quant_quantize_imp_fn quantize_imp; /* NULL: importance does not apply (Q8_0, float types) */
} quant_traits;

/* Traits of a type id, or NULL when the id is not a type GGUF defines that we know. */
const quant_traits *quant_traits_of(uint32_t type);

/* true when we can dequantize, quantize and dot this type. */
bool quant_type_supported(uint32_t type);

/* Type by name ("q4_k", "Q4_K", "f32", ...); -1 when unknown. */
int quant_type_from_name(const char *name);

/* Bytes of a row of n values (n must be a multiple of the block size). */
size_t quant_row_bytes(uint32_t type, int64_t n);

/* Reference kernels on whole rows; n must be a multiple of the block size. */
void quant_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n);
void quant_quantize_row(uint32_t type, const float *src, void *dst, int64_t n);
float quant_dot_row(uint32_t type, const void *w, const float *x, int64_t n);

/* Q4_K / Q5_K: the 6-bit scale and min of sub-block j (0..7) from the
 * block's 12 scale bytes (ggml's get_scale_min_k4). */
void quant_k4_scale_min(const uint8_t *scales, int j, uint8_t *sc, uint8_t *m);

/* Scalar conversions (round to nearest even). */
float fp16_to_fp32(fp16_t h);
fp16_t fp32_to_fp16(float f);
float bf16_to_fp32(bf16_t h);
bf16_t fp32_to_bf16(float f);

#endif
