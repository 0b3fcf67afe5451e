/*
 * kernels — the matrix-vector inner loops, one table per CPU path.
 *
 * A matmul converts each activation row once to the format the weight type's
 * integer kernel consumes (ggml's "vec_dot type", declared once per type as
 * quant_traits.act_type), then takes dot products of weight rows with it:
 *
 *   Q4_0, Q5_0, Q8_0        x  Q8_0 activations (32 per block, fp16 scale)
 *   Q4_1, Q5_1              x  Q8_1 activations (also the block sum, for the min term)
 *   Q2_K .. Q6_K            x  Q8_K activations (256 per block, f32 scale, 16-value sums)
 *   F32, F16, BF16          x  F32 activations (F16/BF16 widened to F32, FMA)
 *
 * Paths: scalar (the reference every other path is tested against), AVX2+FMA
 * (+F16C), AVX-512 (BW/VL, VNNI where present), NEON (dot-product extension
 * where present). The path is chosen once, from the CPU, or forced with
 * OCTO_CPU=scalar|avx2|avx512|neon; that choice is the one piece of global
 * state octo has. A path that lacks a kernel for a type uses the scalar one.
 */
#ifndef OCTO_CORE_KERNELS_KERNELS_H
#define OCTO_CORE_KERNELS_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

typedef enum { CPU_SCALAR = 0, CPU_AVX2, CPU_AVX512, CPU_NEON, CPU_PATH_COUNT } cpu_path;

/* Convert n F32 activations (n a multiple of the format's block) to the activation format. */
typedef void (*act_quantize_fn)(const float *x, void *dst, int64_t n);
/* Dot product of one weight row with one converted activation row, n values. */
typedef float (*vec_dot_fn)(const void *w, const void *act, int64_t n);

/* One weight row against 4 activation rows (act, act + act_stride, ...):
 * out[i] = dot(w, act_i). Prefill and verify batches use it so the weight
 * row's blocks are unpacked once for four tokens. */
typedef void (*vec_dot4_fn)(const void *w, const void *act, size_t act_stride, int64_t n, float out[4]);

/* A tile kernel: rows weight rows (w, w + w_stride, ...) against na
 * (1..tokens) activation rows: out[r * na + i] = W_r . act_i. */
typedef void (*vec_tile_fn)(const void *w, size_t w_stride, const void *act, size_t act_stride, int64_t n, int na,
                            float *out);
#define KERNEL_TILE_MAX_ROWS 4
#define KERNEL_TILE_MAX_TOKENS 4
typedef struct {
    vec_tile_fn fn; /* NULL: none */
    int rows;       /* 2..KERNEL_TILE_MAX_ROWS */
    int tokens;     /* 1..KERNEL_TILE_MAX_TOKENS */
} kernel_tile;
#define NO_TILE {NULL, 0, 0}
#define NO_TILES NO_TILE, NO_TILE

typedef struct {
    uint32_t act_type;        /* QT_Q8_0, QT_Q8_1, QT_Q8_K or QT_F32: the type's quant_traits.act_type */
    act_quantize_fn quantize; /* NULL when act_type is QT_F32 */
    vec_dot_fn dot;
    vec_dot4_fn dot4;         /* optional: NULL = four calls of dot */
    kernel_tile tile;         /* optional, batches: its outputs equal dot's bit for bit, as dot4's do */
    kernel_tile prefill;      /* optional, batches of PACKED_BF16_MIN_TOKENS or more (prefill): F32 sums as
                                 dot's, in its own order, so its outputs may differ from dot's in the last bits */
} kernel_entry;

/* g[i] = silu(g[i]) * u[i] = g[i] / (1 + e^-g[i]) * u[i], the gated FFN's
 * nonlinearity. Per path (the scalar one with libm's expf, AVX-512 with
 * simd_x86.h's exp512), the same for any n and any split of the array. */
typedef void (*swiglu_fn)(float *g, const float *u, size_t n);
swiglu_fn kernel_swiglu(void);
swiglu_fn kernel_swiglu_path(cpu_path p); /* NULL when p is not compiled in */
void swiglu_scalar(float *g, const float *u, size_t n);
swiglu_fn swiglu_avx512(void); /* NULL without the AVX-512 build */
/* g = gelu(g) * u (GeGLU, GELU's tanh form), same shape as swiglu */
swiglu_fn kernel_geglu(void);
swiglu_fn kernel_geglu_path(cpu_path p); /* NULL when p is not compiled in */
void geglu_scalar(float *g, const float *u, size_t n);
swiglu_fn geglu_avx512(void); /* NULL without the AVX-512 build */
swiglu_fn swiglu_avx2(void);  /* NULL without the AVX2 build */
swiglu_fn geglu_avx2(void);

/* acc[i] = sum over k < r, in order, of u[k] * bt[k * stride + i], for i < n:
 * a low-rank product B·u from B's transpose (LoRA adapters, model/lora.h),
 * one fused multiply-add per k and element, so each element is the same for
 * any n and any split of the rows (the AVX-512 and AVX2 kernels, the scalar
 * one with fmaf). */
typedef void (*lowrank_fn)(const float *u, int r, const float *bt, size_t stride, size_t n, float *acc);
lowrank_fn kernel_lowrank(void);
lowrank_fn kernel_lowrank_path(cpu_path p); /* NULL when p is not compiled in */
void lowrank_scalar(const float *u, int r, const float *bt, size_t stride, size_t n, float *acc);
lowrank_fn lowrank_avx512(void); /* NULL without the AVX-512 build */
lowrank_fn lowrank_avx2(void);   /* NULL without the AVX2 build */

/* acc[t * acc_stride + i], for T rows t < T (1 to 4) of u (u_stride apart): each row lowrank_fn's sum
 * of its u, to the bit, the T rows sharing each load of bt (the transposed products of training,
 * train/linear.c: four tokens per pass over a block of a matrix, where one would be bound by loads). */
typedef void (*lowrank4_fn)(const float *u, size_t u_stride, int T, int r, const float *bt, size_t stride, size_t n,
                            float *acc, size_t acc_stride);
lowrank4_fn kernel_lowrank4(void);
lowrank4_fn kernel_lowrank4_path(cpu_path p); /* NULL when p is not compiled in */
void lowrank4_scalar(const float *u, size_t u_stride, int T, int r, const float *bt, size_t stride, size_t n,
                     float *acc, size_t acc_stride);
lowrank4_fn lowrank4_avx512(void); /* NULL without the AVX-512 build */
lowrank4_fn lowrank4_avx2(void);   /* NULL without the AVX2 build */

/* The active path (decided on first use: OCTO_CPU, else the best the CPU runs). */
cpu_path kernels_path(void);
const char *cpu_path_name(cpu_path p);
/* Can this machine execute path p? */
bool cpu_path_supported(cpu_path p);
/* Was p compiled into this binary (an x86 build has no NEON kernels)? */
bool cpu_path_compiled(cpu_path p);
/* Does the CPU have the int8 dot-product extension the path can use (VNNI, ARM dotprod)? */
bool cpu_has_int8_dot(void);
/* AVX-VNNI: vpdpbusd on ymm in the VEX form (Intel from Alder Lake, AMD Zen 5)? */
bool cpu_has_avx_vnni(void);
/* Does the CPU have ARM's int8 matrix multiply (SMMLA, "i8mm"; with dotprod)? */
bool cpu_has_int8_matmul(void);
/* Is the CPU's hardware prefetcher better left alone on weight streams (AMD)? */
bool cpu_prefers_hw_prefetch(void);
/* A bf16 dot product: AVX512-BF16 (vdpbf16ps) or ARM's BF16 (BFMMLA): core/kernels/gemm_bf16.h */
bool cpu_has_bf16_dot(void);

/* Kernels for a weight type on the active path; NULL for types with none. */
const kernel_entry *kernel_get(uint32_t weight_type);
/* The same on a given path (tests compare paths); NULL when not compiled in. */
const kernel_entry *kernel_get_path(cpu_path p, uint32_t weight_type);

/* Bytes of n activations in act_type (F32: 4n). */
size_t kernel_act_row_bytes(uint32_t act_type, int64_t n);

/* What a path's file declares for one weight type: its dot products. */
typedef struct {
    uint32_t type;
    vec_dot_fn dot;
    vec_dot4_fn dot4;     /* optional */
    kernel_tile tile;     /* optional */
    kernel_tile prefill;  /* optional */
} kernel_dots;

/* A path's activation quantizers, one per format. */
typedef struct {
    act_quantize_fn q8_0, q8_1, q8_K;
} kernel_quantizers;

/* table[row.type] = rows[i]'s dot products, with the activation format the
 * type's quant traits name and the path's quantizer for it, for each of the
 * n_rows rows (a type the table or the quantizers cannot hold is skipped). */
void kernels_set(kernel_entry table[], int n_types, const kernel_quantizers *q, const kernel_dots *rows,
                 size_t n_rows);

/* Per-path tables, filled by kernels_<path>.c (entries left zero fall back to
 * scalar). int8_dot: the CPU has VNNI (x86) or the dot-product extension (ARM).
 * sw_prefetch: the AVX-512 row kernels ask for weight bytes ahead of use
 * (false on AMD, whose hardware prefetcher does better alone: kernels.c). */
void kernels_fill_scalar(kernel_entry table[], int n_types);
void kernels_fill_avx2(kernel_entry table[], int n_types);
void kernels_fill_avx512(kernel_entry table[], int n_types, bool int8_dot, bool sw_prefetch);
void kernels_fill_neon(kernel_entry table[], int n_types, bool int8_dot);

#endif
