/*
 * gemm_bf16_avx512 — gemm_bf16.h's kernel on AVX512-BF16 (vdpbf16ps). Built
 * with -mavx512bf16; called only where gemm_bf16_supported says the CPU has it.
 *
 * 32 weight rows are re-laid (16 x 16 word transposes) as two panels whose
 * vector p holds the pair (2p, 2p + 1) of 16 rows; each vector serves 12
 * tokens, whose pairs are broadcast: 24 accumulators in registers.
 */
#include "gemm_bf16.h"

#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "simd_x86.h"
#include "core/quant.h"

#define GB_TOKENS 12 /* tokens per register tile: 2 x 12 accumulators */

#if defined(__x86_64__) && defined(__AVX512BF16__)
#include <immintrin.h>

static void act_bf16(const float *x, uint16_t *dst, int64_t n) {
    const int64_t len = gemm_bf16_row_len(n);
    for (int64_t i = 0; i < len; i += 32) {
        const int64_t a = n - i, b = n - i - 16;
        const __mmask16 ma = a > 0 ? mask16_first(a) : 0;
        const __mmask16 mb = b > 0 ? mask16_first(b) : 0;
        const __m512 lo = _mm512_maskz_loadu_ps(ma, x + i), hi = _mm512_maskz_loadu_ps(mb, x + i + 16);
        const __m512i v = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
        const int64_t left = len - i;
        _mm512_mask_storeu_epi16(dst + i, left >= 32 ? 0xffffffffu : (__mmask32)((1ull << left) - 1), v);
    }
}

/* One weight row as bf16 pairs (32-bit words) into out, zero-padded to n_pairs. */
static void row_pairs(const void *row, uint32_t type, int64_t n, uint32_t *out) {
    const int64_t n_pairs = gemm_bf16_row_len(n) / 2;
    if (type == QT_BF16) {
        memcpy(out, row, (size_t)n * 2);
        if (n & 1) ((uint16_t *)out)[n] = 0;
        return;
    }
    const uint16_t *h = row;
    for (int64_t i = 0; i < 2 * n_pairs; i += 32) {
        const int64_t a = n - i, b = n - i - 16;
        const __mmask16 ma = a > 0 ? mask16_first(a) : 0;
        const __mmask16 mb = b > 0 ? mask16_first(b) : 0;
        const __m512 lo = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(ma, h + i));
        const __m512 hi = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mb, h + i + 16));
        const int64_t left = 2 * n_pairs - i;
        _mm512_mask_storeu_epi16((uint16_t *)out + i, left >= 32 ? 0xffffffffu : (__mmask32)((1ull << left) - 1),
                                 (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
}

/* Pairs rounded up to whole 16 x 16 blocks (the transposes' unit). */
static int64_t pairs16(int64_t n) { return (gemm_bf16_row_len(n) / 2 + 15) & ~(int64_t)15; }

/* dst[16 p + i] = src[i * stride + p] for 16 rows i and 16 words p: a 16 x 16 transpose of 32-bit words. */
static void transpose16(const uint32_t *src, size_t stride, uint32_t *dst) {
    __m512i r[16], t[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_si512(src + (size_t)i * stride);
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xdd);
        t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xdd);
    }
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
    }
    for (int j = 0; j < 16; j++) _mm512_storeu_si512(dst + 16 * j, r[j]);
}

/* Rows r0.. (up to 32) re-laid as two panels: panel[q][p * 16 + i] = row (16q + i)'s pair p, each
 * panel pairs16(n) pairs long. rows: 16 rows of pairs16(n) words, the rows converted first. */
static void make_panels(const uint8_t *w, uint32_t type, size_t row_bytes, int64_t n, int rows, uint32_t *panel,
                        uint32_t *rowbuf) {
    const int64_t np = gemm_bf16_row_len(n) / 2, np16 = pairs16(n);
    for (int q = 0; q < 2; q++) {
        for (int i = 0; i < 16; i++) {
            uint32_t *dst = rowbuf + (size_t)i * (size_t)np16;
            const int r = 16 * q + i;
            if (r < rows) row_pairs(w + (size_t)r * row_bytes, type, n, dst);
            memset(dst + (r < rows ? np : 0), 0, sizeof(uint32_t) * (size_t)(np16 - (r < rows ? np : 0)));
        }
        uint32_t *pq = panel + (size_t)q * (size_t)np16 * 16;
        for (int64_t p = 0; p < np16; p += 16) transpose16(rowbuf + p, (size_t)np16, pq + (size_t)p * 16);
    }
}

/* nt (1..GB_TOKENS) tokens against both panels. */
static inline __attribute__((always_inline)) void tile(const uint32_t *p0, const uint32_t *p1, int64_t n_pairs,
                                                        const uint16_t *act, size_t act_stride, int nt, float *y,
                                                        size_t y_stride, __mmask16 m0, __mmask16 m1) {
    __m512 a0[GB_TOKENS], a1[GB_TOKENS];
    for (int t = 0; t < nt; t++) a0[t] = a1[t] = _mm512_setzero_ps();
    for (int64_t p = 0; p < n_pairs; p++) {
        const __m512bh w0 = (__m512bh)_mm512_loadu_si512(p0 + p * 16), w1 = (__m512bh)_mm512_loadu_si512(p1 + p * 16);
        for (int t = 0; t < nt; t++) {
            uint32_t pair;
            memcpy(&pair, act + (size_t)t * act_stride + 2 * p, 4);
            const __m512bh x = (__m512bh)_mm512_set1_epi32((int)pair);
            a0[t] = _mm512_dpbf16_ps(a0[t], w0, x);
            a1[t] = _mm512_dpbf16_ps(a1[t], w1, x);
        }
    }
    for (int t = 0; t < nt; t++) {
        _mm512_mask_storeu_ps(y + (size_t)t * y_stride, m0, a0[t]);
        if (m1) _mm512_mask_storeu_ps(y + (size_t)t * y_stride + 16, m1, a1[t]);
    }
}

static void tile_any(const uint32_t *p0, const uint32_t *p1, int64_t n_pairs, const uint16_t *act, size_t act_stride,
                     int nt, float *y, size_t y_stride, __mmask16 m0, __mmask16 m1) {
    switch (nt) { /* a constant count per case: the tile's loops unroll into registers */
#define CASE(k) \
    case k: tile(p0, p1, n_pairs, act, act_stride, k, y, y_stride, m0, m1); break;
        CASE(1) CASE(2) CASE(3) CASE(4) CASE(5) CASE(6) CASE(7) CASE(8) CASE(9) CASE(10) CASE(11) CASE(12)
#undef CASE
    default: break;
    }
}

static size_t scratch_bytes(int64_t n) { return (GEMM_BF16_ROWS + 16) * (size_t)pairs16(n) * 4 + 64; }

static void rows_bf16(const void *w, uint32_t type, size_t row_bytes, int64_t n, int r0, int r1, const uint16_t *act,
                      size_t act_stride, int T, float *y, size_t y_stride, void *scratch) {
    const int64_t n_pairs = gemm_bf16_row_len(n) / 2, np16 = pairs16(n);
    uint32_t *panel = (uint32_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63), *rowbuf = panel + GEMM_BF16_ROWS * np16;
    const int rows = r1 - r0;
    make_panels((const uint8_t *)w + (size_t)r0 * row_bytes, type, row_bytes, n, rows, panel, rowbuf);
    const __mmask16 m0 = mask16_first(rows);
    const __mmask16 m1 = rows > 16 ? mask16_first(rows - 16) : 0;
    for (int t = 0; t < T; t += GB_TOKENS) {
        const int nt = T - t < GB_TOKENS ? T - t : GB_TOKENS;
        tile_any(panel, panel + 16 * np16, n_pairs, act + (size_t)t * act_stride, act_stride, nt,
                 y + (size_t)t * y_stride + r0, y_stride, m0, m1);
    }
}

static const gemm_bf16_impl IMPL = {"avx512-bf16", GEMM_BF16_SUM_NEAREST, act_bf16, scratch_bytes, rows_bf16};
const gemm_bf16_impl *gemm_bf16_avx512(void) { return &IMPL; }

#else /* no AVX512-BF16 in this build */

const gemm_bf16_impl *gemm_bf16_avx512(void) { return NULL; }

#endif
