/*
 * packed — weight matrices re-laid for the SIMD path, and their GEMM.
 *
 * A GGUF Q4_0 matrix stores each row's blocks one after another. A dot
 * product in that layout ends in a horizontal sum per row, and its scale
 * arithmetic is per (row, block). octo's x86 path re-lays such a matrix once,
 * at load, in place (same bytes, same size), into groups of PACK_ROWS rows:
 *
 *   group g, block b:  16 fp16 scales (rows 16g .. 16g+15)     32 bytes
 *                      4 x 64 bytes of quants                 256 bytes
 *
 * Quant vector j (0..3) holds, for each row r in turn, that row's GGUF bytes
 * qs[4j .. 4j+3]: its low nibbles are the weights 4j .. 4j+3 of row r, its
 * high nibbles the weights 16+4j .. 16+4j+3. One 64-byte vector thus holds
 * four consecutive weights of each of 16 rows, which is exactly the operand
 * layout of the int8 dot-product instructions (VNNI's vpdpbusd multiplies
 * four byte pairs per 32-bit lane and adds them), and of AMX's B tiles.
 *
 * With the 16 rows in the 16 lanes, a block's 16 exact integer dot products
 * come out of 8 instructions with no horizontal sum, the scales of 16 rows
 * are one vector, and the weights unpacked once serve every token of a batch.
 *
 * Arithmetic (identical in every implementation, so results are bit-equal
 * across them and across batch sizes): activations are quantized per block
 * of 32 as ggml's Q8_0 (d = max|x| / 127 rounded to fp16, q = x * 127/max
 * rounded half to even), with off = -8 * sum(q) added (Q4_0's offset:
 * weight = d_w * (nibble - 8)). Then
 *
 *   acc(r, t) = sum over blocks b, in order, of
 *               fma((float)(off + sum_k nibble_k * q_k), d_w(r, b) * d(t, b), acc)
 *
 * with the integer sum exact. A token's output therefore never depends on
 * which other tokens share its batch: verifying k draft tokens gives the
 * logits that decoding them one by one gives.
 *
 * The scalar path keeps the GGUF layout (it is the reference for the file's
 * arithmetic); gemm_q4_0p_ref is the reference for this one.
 */
#ifndef OCTO_CORE_PACKED_H
#define OCTO_CORE_PACKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

#define PACK_ROWS 16

/* Activation block of the packed kernels (32 values). */
typedef struct {
    float d;
    int32_t off; /* -8 * sum(qs) */
    int8_t qs[32];
} block_q8p;

/* y[t * y_stride + r] = row r of the group . activation row t, for r < 16 and
 * t < n_tok. w: the group's packed bytes; n: row length (multiple of 32);
 * act: n_tok rows of n/32 block_q8p, act_stride bytes apart. */
typedef void (*packed_gemm_fn)(const void *w, int64_t n, const void *act, size_t act_stride, int n_tok, float *y,
                               size_t y_stride);

typedef struct {
    uint32_t weight_type;
    act_quantize_fn quantize; /* F32 -> block_q8p rows */
    packed_gemm_fn gemm;
    const char *name;         /* "avx512-vnni", "amx", ... for inspect and bench */
} packed_entry;

/* Can a (rows x n) matrix of this type be packed? (rows a multiple of 16, a
 * type with a packed layout, n a multiple of its block.) */
bool packed_supported(uint32_t type, int64_t rows, int64_t n);
/* Re-lay a whole (rows x n) matrix in place. tmp: PACK_ROWS rows' bytes. */
void packed_pack(uint32_t type, void *w, int64_t rows, int64_t n, void *tmp);
/* ... and back (tests; a model never unpacks). */
void packed_unpack(uint32_t type, void *w, int64_t rows, int64_t n, void *tmp);

/* The active path's packed kernels for a type; NULL when the path computes
 * from the GGUF layout (scalar, AVX2, NEON today). */
const packed_entry *packed_get(uint32_t type);
/* The reference implementation (any machine). */
const packed_entry *packed_ref(uint32_t type);
/* All implementations this machine runs for a type (tests compare them). */
int packed_all(uint32_t type, const packed_entry **out, int max);

/* Q8P rows of n values from a path's Q8_0 activation quantizer k (so the
 * rounding is the GGUF-layout kernels', ggml's), plus the offset term. */
void packed_q8p_from(const kernel_entry *k, const float *x, void *dst, int64_t n);

/* Filled by packed_avx512.c / packed_amx.c: NULL when not compiled in or
 * (AMX) when the CPU or the OS does not offer it. */
const packed_entry *packed_avx512(uint32_t type, bool vnni);
const packed_entry *packed_amx(uint32_t type);

#endif
