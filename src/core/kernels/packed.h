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
 * One exception, by design: a prefill batch (PACKED_BF16_MIN_TOKENS tokens
 * or more) may take AMX's bf16 kernel (packed_amx.c), which rounds weights
 * and activations to bf16 instead of activations to Q8_0 (closer to the
 * exact product: test_packed measures both) and 1.4-2.7x faster there. It is
 * exact across its own batch sizes and groupings, so a prompt's logits do
 * not depend on what else is in the batch either; they differ from decode's
 * by rounding only. Decode and verification batches stay below it.
 *
 * Q8_0 is laid out the same way (8 vectors of signed bytes per block).
 *
 * Q4_K (256 values per super-block, per row: fp16 d and dmin, 12 bytes of
 * 6-bit scales and mins, 128 bytes of nibbles) follows the same rule with
 * two fp16 fields:
 *
 *   group g, super-block i:  16 d, then 16 dmin (fp16)          64 bytes
 *                            3 x 64: scale bytes 4v..4v+3      192 bytes
 *                            32 x 64: qs bytes 4k..4k+3       2048 bytes
 *
 * so lane r of scale vector v holds row r's scale word v, and the 8
 * sub-block scales and mins of 16 rows are unpacked with 16-lane integer
 * ops. Its activations are Q8_K (ggml's rounding) with the sub-block sums
 * the mins multiply (block_q8kp). Per super-block, with exact integers
 *   isum = sum_j sc_j * sum_k nibble_k * q_k,  msum = sum_j m_j * sum_k q_k
 * the row accumulates acc = fma(isum, d * d_a, acc) and
 * accm = fma(msum, dmin * d_a, accm), and y = acc - accm.
 *
 * In general: a GGUF block of B bytes whose first H bytes are fp16 fields
 * is laid out as the H/2 fields of 16 rows (32 bytes each), then the rest
 * of the block as 4-byte words, 16 rows' word w in vector w.
 *
 * The scalar path keeps the GGUF layout (it is the reference for the file's
 * arithmetic); the gemm_*_ref kernels are the reference for this one.
 */
#ifndef OCTO_CORE_KERNELS_PACKED_H
#define OCTO_CORE_KERNELS_PACKED_H

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
/* Activation block of the packed Q4_K kernels (256 values): Q8_K's d and
 * quants, and the 8 sub-block sums s_j (32 quants each) as int16 pairs in the
 * order the kernels take them: msum[k] = s_a | s_b << 16 with (a, b) =
 * (0, 2), (1, 3), (4, 6), (5, 7). */
typedef struct {
    float d;
    int32_t msum[4];
    int8_t qs[256];
} block_q8kp;

typedef void (*packed_gemm_fn)(const void *w, int64_t n, const void *act, size_t act_stride, int n_tok, float *y,
                               size_t y_stride);

/* The same over n_groups consecutive groups, group_bytes apart, outputs of
 * group g at y + 16 g: for kernels that block over several groups. scratch:
 * the entry's scratch_bytes, 64-aligned, the calling thread's own (a
 * library's kernels keep no thread-local buffers: they would sit on every
 * thread of the host). */
typedef void (*packed_gemm_groups_fn)(const void *w, size_t group_bytes, int n_groups, int64_t n, const void *act,
                                      size_t act_stride, int n_tok, float *y, size_t y_stride, void *scratch);

typedef struct {
    uint32_t weight_type;
    act_quantize_fn quantize; /* F32 -> activation rows (block_q8p, block_q8kp or bf16) */
    packed_gemm_fn gemm;
    int act_block;            /* values per activation block: 32 (block_q8p) or 256 (block_q8kp) */
    size_t act_block_bytes;
    const char *name;         /* "avx512-vnni", "amx", ... for inspect and bench */
    packed_gemm_groups_fn gemm_groups; /* optional: a thread's whole slice of groups in one call */
    size_t act_row_pad;       /* bytes after each activation row (keeps rows off 4 KiB strides) */
    size_t scratch_bytes;     /* gemm_groups' working memory per thread (0: none) */
} packed_entry;

/* Batches of at least this many tokens (prefill) may take a kernel that is
 * not bit-identical to the one for smaller batches (AMX bf16, see
 * packed_amx.c); below it a token's outputs never depend on its batch. */
#define PACKED_BF16_MIN_TOKENS 64

/* Can a (rows x n) matrix of this type be packed? (rows a multiple of 16, a
 * type with a packed layout, n a multiple of its block: Q4_0, Q8_0, Q4_K.) */
bool packed_supported(uint32_t type, int64_t rows, int64_t n);
/* Re-lay a whole (rows x n) matrix in place. tmp: PACK_ROWS rows' bytes. */
void packed_pack(uint32_t type, void *w, int64_t rows, int64_t n, void *tmp);
/* ... and back (tests; a model never unpacks). */
void packed_unpack(uint32_t type, void *w, int64_t rows, int64_t n, void *tmp);

/* The active path's packed kernels for a type; NULL when the path computes
 * from the GGUF layout (the scalar path, or OCTO_PACK=0). */
const packed_entry *packed_get(uint32_t type);
/* The reference implementation (any machine). */
const packed_entry *packed_ref(uint32_t type);
/* The kernel for a batch of n_tok tokens: packed_get's, or for a prefill
 * batch (n_tok >= PACKED_BF16_MIN_TOKENS) the bf16 one where there is one. */
const packed_entry *packed_get_batch(uint32_t type, int n_tok);
/* All bit-identical implementations this machine runs for a type (tests
 * compare them); the bf16 prefill kernel is packed_amx_bf16's. */
int packed_all(uint32_t type, const packed_entry **out, int max);

/* What the active path computes with, for people: "avx2; packed q4_0 q8_0
 * q4_K: avx2" (the packed kernel of each type, types of one kernel together),
 * or "scalar; GGUF layout". */
void packed_describe(char *buf, size_t n);

/* Bytes of one activation row of n values for an entry's gemm. */
size_t packed_act_row_bytes(const packed_entry *e, int64_t n);

/* Q8P rows of n values from a path's Q8_0 activation quantizer k (so the
 * rounding is the GGUF-layout kernels', ggml's), plus the offset term. */
void packed_q8p_from(const kernel_entry *k, const float *x, void *dst, int64_t n);
/* Q8KP rows from a path's Q8_K quantizer k (ggml's rounding). */
void packed_q8kp_from(const kernel_entry *k, const float *x, void *dst, int64_t n);


/* Filled by packed_avx2.c, packed_neon.c, packed_avx512.c and packed_amx.c:
 * NULL when not compiled in or (AMX) when the CPU or the OS does not offer it.
 * packed_avx2's prefetch: decode asks for weights ahead in software (not on
 * AMD: cpu_prefers_hw_prefetch); dp: 0 vpmaddubsw, 1 AVX-VNNI's vpdpbusd,
 * 2 the same on AVX512-VNNI's EVEX form (Q4_0 and Q8_0: NULL for Q4_K). */
const packed_entry *packed_avx2(uint32_t type, bool prefetch, int dp);
const packed_entry *packed_neon(uint32_t type, bool dotprod);
const packed_entry *packed_neon_i8mm(uint32_t type); /* Q4_0, Q8_0 on SMMLA (i8mm) */
const packed_entry *packed_avx512(uint32_t type, bool vnni);
const packed_entry *packed_amx(uint32_t type);
const packed_entry *packed_amx_bf16(uint32_t type);

#endif
