/*
 * packed_avx512 — the packed Q4_0, Q8_0 and Q4_K GEMMs and their activation
 * quantizers for AVX-512 (BW), with VNNI where the CPU has it. See packed.h.
 *
 * Per block of a 16-row group: four 64-byte loads hold the group's 512
 * nibbles; masking and shifting gives eight vectors W0..W7, vector j holding
 * weights 4j..4j+3 of each of the 16 rows. Per token, the int32 lanes start
 * at the activation block's offset term and take eight vpdpbusd (W_j against
 * the token's four activation bytes 4j..4j+3, broadcast): lane r is then the
 * exact integer dot product of row r with the block. Converted to float, it is
 * multiplied-added with the 16 rows' scales times the token's scale.
 * Without VNNI the dot products are maddubs + madd (no saturation: 15*127*2
 * fits in int16), giving the same integers.
 *
 * The weights unpacked once serve up to 8 tokens (24 of the 32 registers:
 * W0..W7, 8 integer sums, 8 accumulators).
 */
#include "packed.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__) && \
    defined(__F16C__)

#include <immintrin.h>
#include <string.h>

#include "simd_x86.h"
#include "core/quant.h"

#define GROUP_BLOCK_BYTES (PACK_ROWS * 18)
#define MAX_TILE 8
/* bytes ahead to prefetch in decode: 4 KiB measured 23.0-23.7 tok/s on the
 * 1B Q4_0 model, against 18.5-19.5 without and 19.9-20.5 at 1 KiB. A batch
 * asks 16 KiB ahead into L2 instead, as the float kernels do
 * (simd_x86.h: prefetch_batch); decode did not gain from that. */
#define PREFETCH 4096
ALWAYS_INLINE void prefetch_group(const uint8_t *g, size_t bytes, const int NT) {
    if (NT > 1) prefetch_batch(g, bytes);
    else prefetch_l1(g, PREFETCH, bytes);
}

/* four activation bytes in every lane, broadcast straight from memory (the
 * kernels without VNNI; dp_bcast below for VNNI). A copy of the block into
 * integer registers first cost a move and a register-to-vector broadcast per
 * instruction, more than the dot product itself on AMD Zen 4. */
typedef int32_t __attribute__((may_alias, aligned(1))) i32_any;
ALWAYS_INLINE __m512i bcast4(const int8_t *p) { return _mm512_set1_epi32(*(const i32_any *)p); }

/* acc += u . (the four bytes at p, in every lane), VNNI with the broadcast
 * folded into the instruction (GCC 12 does not fold it itself) */
ALWAYS_INLINE __m512i dp_bcast(__m512i acc, __m512i u, const int8_t *p) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*(const i32_any *)p));
    return acc;
}

/* acc += u . (the four signed bytes at p, in every lane) */
ALWAYS_INLINE __m512i dp_at(__m512i acc, __m512i u, const int8_t *p, const bool vnni) {
    return vnni ? dp_bcast(acc, u, p) : dpbusd(acc, u, bcast4(p), false);
}

/* Q8_0: signed weights, read from the group (8 vectors of 64 bytes).
 * vpdpbusd multiplies unsigned by signed bytes, and only its signed operand
 * can be a broadcast from memory: the weights go in as w + 128 (w xor 0x80,
 * once per block for every token) and the activations as they are, so each
 * token's sum starts at -128 * sum(q) = 16 * off: the result is sum(w * q)
 * exactly, the integer the reference and the AMX kernel compute. (Only the
 * VNNI kernel takes Q8_0: maddubs would saturate on bytes up to 255.) */
#define GROUP_BLOCK_BYTES_Q8 (PACK_ROWS * 34)

/* NT tokens against one group: Q4_0 (q8 false) or Q8_0 (q8 true), both
 * compile-time constants after inlining */
ALWAYS_INLINE void tile(const void *vw, int64_t nb, const uint8_t *act, size_t as, float *y, size_t ys,
                        const int NT, const bool q8, const bool vnni) {
    const uint8_t *w = vw;
    const size_t gbb = q8 ? GROUP_BLOCK_BYTES_Q8 : GROUP_BLOCK_BYTES;
    __m512 acc[MAX_TILE];
    const block_q8p *a[MAX_TILE];
    for (int t = 0; t < NT; t++) {
        acc[t] = _mm512_setzero_ps();
        a[t] = (const block_q8p *)(act + (size_t)t * as);
    }
    const __m512i lo = _mm512_set1_epi8(0x0F), flip = _mm512_set1_epi8((char)0x80);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *g = w + (size_t)b * gbb;
        prefetch_group(g, gbb, NT); /* the weights stream from memory */
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)g));
        __m512i W[8];
        if (q8) {
            for (int j = 0; j < 8; j++) W[j] = _mm512_xor_si512(_mm512_loadu_si512((const void *)(g + 32 + 64 * j)), flip);
        } else {
            for (int j = 0; j < 4; j++) {
                const __m512i p = _mm512_loadu_si512((const void *)(g + 32 + 64 * j));
                W[j] = _mm512_and_si512(p, lo);
                W[j + 4] = _mm512_and_si512(_mm512_srli_epi16(p, 4), lo);
            }
        }
        for (int t = 0; t < NT; t++) {
            const block_q8p *ab = a[t] + b;
            __m512i s = _mm512_set1_epi32(ab->off);
            if (q8) s = _mm512_slli_epi32(s, 4);
            for (int j = 0; j < 8; j++) s = dp_at(s, W[j], ab->qs + 4 * j, vnni);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_set1_ps(ab->d)), acc[t]);
        }
    }
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(y + (size_t)t * ys, acc[t]);
}

/* n_tok tokens in tiles of up to 8 (the tile width a compile-time constant) */
ALWAYS_INLINE void gemm(const void *w, int64_t n, const void *act, size_t as, int n_tok, float *y, size_t ys,
                        const bool q8, const bool vnni) {
    const int64_t nb = n / 32;
    for (int t0 = 0; t0 < n_tok; t0 += MAX_TILE) {
        const uint8_t *a = (const uint8_t *)act + (size_t)t0 * as;
        float *yt = y + (size_t)t0 * ys;
        switch (n_tok - t0 < MAX_TILE ? n_tok - t0 : MAX_TILE) {
        case 1: tile(w, nb, a, as, yt, ys, 1, q8, vnni); break;
        case 2: tile(w, nb, a, as, yt, ys, 2, q8, vnni); break;
        case 3: tile(w, nb, a, as, yt, ys, 3, q8, vnni); break;
        case 4: tile(w, nb, a, as, yt, ys, 4, q8, vnni); break;
        case 5: tile(w, nb, a, as, yt, ys, 5, q8, vnni); break;
        case 6: tile(w, nb, a, as, yt, ys, 6, q8, vnni); break;
        case 7: tile(w, nb, a, as, yt, ys, 7, q8, vnni); break;
        default: tile(w, nb, a, as, yt, ys, 8, q8, vnni); break;
        }
    }
}

static void gemm_vnni(const void *w, int64_t n, const void *act, size_t as, int n_tok, float *y, size_t ys) {
    gemm(w, n, act, as, n_tok, y, ys, false, true);
}
static void gemm_novnni(const void *w, int64_t n, const void *act, size_t as, int n_tok, float *y, size_t ys) {
    gemm(w, n, act, as, n_tok, y, ys, false, false);
}
static void gemm_q8_vnni(const void *w, int64_t n, const void *act, size_t as, int n_tok, float *y, size_t ys) {
    gemm(w, n, act, as, n_tok, y, ys, true, true);
}

/* Q4_K (packed.h). Per super-block of a group: the three scale vectors give,
 * with 16-lane word ops (ggml's get_scale_min_k4 on all rows at once), the
 * scale bytes sc0..3 | sc4..7 and the min bytes m0..3 | m4..7 of each row;
 * the mins, spread to int16 pairs (m0, m2), (m1, m3), ..., meet the
 * activation's sub-block sums in four vpdpwssd. Per 64 values (chunk c,
 * sub-blocks 2c and 2c+1: the low and the high nibbles of 8 vectors), two
 * chains of 8 vpdpbusd give each row's two exact sub-block sums, multiplied
 * by their scales (vpmulld) into isum. Nibbles are unsigned, as vpdpbusd
 * wants them: no offset term. Up to 4 tokens share the unpacked weights. */
#define GROUP_SB_BYTES_Q4K (PACK_ROWS * 144)
#define MAX_TILE_K 4

ALWAYS_INLINE void tile_q4k(const void *vw, int64_t nsb, const uint8_t *act, size_t as, float *y, size_t ys,
                            const int NT, const bool vnni) {
    const uint8_t *w = vw;
    __m512 acc[MAX_TILE_K], accm[MAX_TILE_K];
    const block_q8kp *a[MAX_TILE_K];
    for (int t = 0; t < NT; t++) {
        acc[t] = accm[t] = _mm512_setzero_ps();
        a[t] = (const block_q8kp *)(act + (size_t)t * as);
    }
    const __m512i lo = _mm512_set1_epi8(0x0F), m6 = _mm512_set1_epi8(0x3F), m2 = _mm512_set1_epi8(0x03);
    const __m512i byte0 = _mm512_set1_epi32(0xFF), pairs = _mm512_set1_epi32(0x00FF00FF);
    for (int64_t i = 0; i < nsb; i++) {
        const uint8_t *g = w + (size_t)i * GROUP_SB_BYTES_Q4K;
        prefetch_group(g, GROUP_SB_BYTES_Q4K, NT);
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)g));
        const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(g + 32)));
        const __m512i u0 = _mm512_loadu_si512((const void *)(g + 64));
        const __m512i u1 = _mm512_loadu_si512((const void *)(g + 128));
        const __m512i u2 = _mm512_loadu_si512((const void *)(g + 192));
        /* byte k of a lane: scale k (s_lo), scale 4+k (s_hi), min k, min 4+k */
        const __m512i s_lo = _mm512_and_si512(u0, m6), m_lo = _mm512_and_si512(u1, m6);
        const __m512i s_hi =
            _mm512_or_si512(_mm512_and_si512(u2, lo), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u0, 6), m2), 4));
        const __m512i m_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 4), lo),
                                             _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u1, 6), m2), 4));
        const __m512i M[4] = {_mm512_and_si512(m_lo, pairs), _mm512_and_si512(_mm512_srli_epi32(m_lo, 8), pairs),
                              _mm512_and_si512(m_hi, pairs), _mm512_and_si512(_mm512_srli_epi32(m_hi, 8), pairs)};
        __m512i isum[MAX_TILE_K];
        for (int t = 0; t < NT; t++) {
            const block_q8kp *ab = a[t] + i;
            __m512i ms = _mm512_setzero_si512();
            for (int k = 0; k < 4; k++) ms = dpwssd(ms, M[k], _mm512_set1_epi32(ab->msum[k]), vnni);
            accm[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ms), _mm512_mul_ps(dmin, _mm512_set1_ps(ab->d)), accm[t]);
            isum[t] = _mm512_setzero_si512();
        }
        for (int c = 0; c < 4; c++) {
            const __m512i S = c < 2 ? s_lo : s_hi;
            const __m512i sc0 = _mm512_and_si512(_mm512_srli_epi32(S, 16 * (c & 1)), byte0);
            const __m512i sc1 = _mm512_and_si512(_mm512_srli_epi32(S, 16 * (c & 1) + 8), byte0);
            __m512i WL[8], WH[8];
            for (int j = 0; j < 8; j++) {
                const __m512i p = _mm512_loadu_si512((const void *)(g + 256 + 64 * (8 * c + j)));
                WL[j] = _mm512_and_si512(p, lo);
                WH[j] = _mm512_and_si512(_mm512_srli_epi16(p, 4), lo);
            }
            for (int t = 0; t < NT; t++) {
                const int8_t *q = a[t][i].qs + 64 * c;
                __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
                for (int j = 0; j < 8; j++) {
                    s0 = dp_at(s0, WL[j], q + 4 * j, vnni);
                    s1 = dp_at(s1, WH[j], q + 32 + 4 * j, vnni);
                }
                isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(_mm512_mullo_epi32(s0, sc0), _mm512_mullo_epi32(s1, sc1)));
            }
        }
        for (int t = 0; t < NT; t++)
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(dw, _mm512_set1_ps(a[t][i].d)), acc[t]);
    }
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(y + (size_t)t * ys, _mm512_sub_ps(acc[t], accm[t]));
}

ALWAYS_INLINE void gemm_k(const void *w, int64_t n, const void *act, size_t as, int n_tok, float *y, size_t ys,
                          const bool vnni) {
    const int64_t nsb = n / 256;
    for (int t0 = 0; t0 < n_tok; t0 += MAX_TILE_K) {
        const uint8_t *a = (const uint8_t *)act + (size_t)t0 * as;
        float *yt = y + (size_t)t0 * ys;
        switch (n_tok - t0 < MAX_TILE_K ? n_tok - t0 : MAX_TILE_K) {
        case 1: tile_q4k(w, nsb, a, as, yt, ys, 1, vnni); break;
        case 2: tile_q4k(w, nsb, a, as, yt, ys, 2, vnni); break;
        case 3: tile_q4k(w, nsb, a, as, yt, ys, 3, vnni); break;
        default: tile_q4k(w, nsb, a, as, yt, ys, 4, vnni); break;
        }
    }
}

static void gemm_q4k_vnni(const void *w, int64_t n, const void *act, size_t as, int n_tok, float *y, size_t ys) {
    gemm_k(w, n, act, as, n_tok, y, ys, true);
}
static void gemm_q4k_novnni(const void *w, int64_t n, const void *act, size_t as, int n_tok, float *y, size_t ys) {
    gemm_k(w, n, act, as, n_tok, y, ys, false);
}

/* ggml's Q8_K activation rounding, from this path's own Q8_K quantizer */
static void quantize_q8kp(const float *x, void *dst, int64_t n) {
    packed_q8kp_from(kernel_get_path(CPU_AVX512, QT_Q4_K), x, dst, n);
}

/* ggml's Q8_0 activation rounding, from this path's own Q8_0 quantizer */
/* Q8P rows: the AVX-512 path's Q8_0 rounding (simd_x86.h: act_q8_0_block512),
 * d widened once and the offset term from the same sum; the same bytes
 * packed_q8p_from gives with the path's quantizer, without a call and a copy
 * per block */
static void quantize_q8p(const float *x, void *dst, int64_t n) {
    block_q8p *y = dst;
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        fp16_t d16;
        float d;
        /* unsigned: with a NaN or Inf lane the sum is garbage (d is not finite then, and so is every
         * product), and must not be signed overflow */
        y[b].off = (int32_t)(0u - 8u * (uint32_t)act_q8_0_block512(x, &d16, y[b].qs, &d));
        y[b].d = _cvtsh_ss(d16);
    }
}

#define Q8P 32, sizeof(block_q8p)
#define Q8KP 256, sizeof(block_q8kp)
static const packed_entry VNNI_Q4_0 = {QT_Q4_0, quantize_q8p, gemm_vnni, Q8P, "avx512-vnni", NULL, 0, 0};
static const packed_entry NOVNNI_Q4_0 = {QT_Q4_0, quantize_q8p, gemm_novnni, Q8P, "avx512", NULL, 0, 0};
static const packed_entry VNNI_Q8_0 = {QT_Q8_0, quantize_q8p, gemm_q8_vnni, Q8P, "avx512-vnni", NULL, 0, 0};
static const packed_entry VNNI_Q4_K = {QT_Q4_K, quantize_q8kp, gemm_q4k_vnni, Q8KP, "avx512-vnni", NULL, 0, 0};
static const packed_entry NOVNNI_Q4_K = {QT_Q4_K, quantize_q8kp, gemm_q4k_novnni, Q8KP, "avx512", NULL, 0, 0};
/* (without VNNI, maddubs of (q + 128) * w could saturate its 16-bit pair sums:
 * Q8_0 keeps the GGUF layout there) */

const packed_entry *packed_avx512(uint32_t type, bool vnni) {
    if (type == QT_Q4_0) return vnni ? &VNNI_Q4_0 : &NOVNNI_Q4_0;
    if (type == QT_Q8_0) return vnni ? &VNNI_Q8_0 : NULL;
    if (type == QT_Q4_K) return vnni ? &VNNI_Q4_K : &NOVNNI_Q4_K;
    return NULL;
}

#else

const packed_entry *packed_avx512(uint32_t type, bool vnni) {
    (void)type;
    (void)vnni;
    return NULL;
}

#endif
