/*
 * kernels_avx2 — the matrix-vector kernels for x86-64 with AVX2, FMA and F16C.
 *
 * Same activation quantizers and dot products as kernels_scalar.c (which
 * explains the arithmetic), written so that a decode step is limited by
 * memory bandwidth rather than by instructions:
 *
 *   - one 256-bit register holds one 32-value block (or 32 values of a
 *     K-quant super-block) of 8-bit quants, unpacked from nibbles / bit
 *     planes with shifts and masks;
 *   - _mm256_maddubs_epi16(unsigned weight quants, signed activations) gives
 *     exact 16-bit pair sums (weights are made unsigned, 0..63, so no pair
 *     can saturate); _mm256_madd_epi16 then widens to int32, multiplying by
 *     the K-quant sub-block scales on the way;
 *   - signed weight formats are handled as unsigned quants minus an offset:
 *     sum (q - o)*a = sum q*a - o*sum a, where sum a comes from a second
 *     maddubs (Q4_0, Q5_0) or from Q8_K's bsums (Q3_K, Q6_K) for free;
 *   - per block, the int32 lanes are converted to float and multiplied by
 *     the block's float scale into a float accumulator (FMA); horizontal
 *     sums happen once per row. The fp16 scales of 4 legacy blocks are
 *     packed with integer loads and shifts and converted together;
 *   - weight rows are prefetched 2 KiB ahead (the next row, usually).
 *
 * The integer part of each block is exactly the scalar kernel's; only the
 * float summation order differs. Activation quantization produces the same
 * bytes as scalar (same float operations, same round-half-even).
 *
 * Only compiled with -mavx2 -mfma -mf16c on x86-64 (CMake sets the flags for
 * this file alone); kernels.c calls kernels_fill_avx2 only when the CPU has
 * the features. Elsewhere this file is empty.
 */
#include "kernels.h"

#if defined(__x86_64__)

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "simd_x86.h"
#include "core/quant.h"

/* ---------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------- */

static inline int hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

static inline float hmax_ps(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* 16 bytes of nibbles -> 32 bytes: the low nibbles, then the high nibbles
 * (broadcast to both lanes and shifted per lane: no lane-crossing shuffle). */
static inline __m256i nibbles32(const uint8_t *p) {
    const __m256i t = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
    return _mm256_and_si256(_mm256_srlv_epi64(t, _mm256_setr_epi64x(0, 0, 4, 4)), _mm256_set1_epi8(0x0F));
}

/* dw*da of 4 consecutive blocks: the fp16 at byte offset off of each weight
 * block times the one at the same offset of each activation block (d at 0;
 * the m of Q4_1/Q5_1 and the s of Q8_1 at 2). */
static inline __m128 scales4(const void *w, size_t wsize, const void *a, size_t asize, size_t off) {
    const uint8_t *pw = (const uint8_t *)w + off, *pa = (const uint8_t *)a + off;
    const __m256 f = _mm256_cvtph_ps(_mm_set_epi64x((long long)fp16x4(pa, asize), (long long)fp16x4(pw, wsize)));
    return _mm_mul_ps(_mm256_castps256_ps128(f), _mm256_extractf128_ps(f, 1));
}

/* lane k of v in all 8 lanes */
static inline __m256 lane8(__m128 v, int k) {
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(v), _mm256_set1_epi32(k));
}

/* The 32 bits of qh -> 32 bytes, 0x10 where bit k of qh is set. */
static inline __m256i bits32_to_0x10(const uint8_t *qh) {
    uint32_t v;
    memcpy(&v, qh, 4);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                           0x0101010101010101, 0x0000000000000000);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)v), shuf);
    b = _mm256_or_si256(b, _mm256_set1_epi64x(0x7FBFDFEFF7FBFDFE)); /* all bits but bit k%8 */
    b = _mm256_cmpeq_epi8(b, _mm256_set1_epi64x(-1));
    return _mm256_and_si256(b, _mm256_set1_epi8(0x10));
}

/* sum of (u*s) over each 4 bytes, as 8 int32 (u unsigned <= 63, so exact) */
static inline __m256i dot_u8s8_i32(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* ---------------------------------------------------------------------------
 * Activation quantizers
 * ------------------------------------------------------------------------- */

/* Round 32 floats (4 vectors, already scaled) to int8 in order; stores the
 * sum of the 32 integers in *sum when sum is not NULL. */
static inline __m256i round_pack32(__m256 v0, __m256 v1, __m256 v2, __m256 v3, int *sum) {
    __m256i i0 = _mm256_cvtps_epi32(v0), i1 = _mm256_cvtps_epi32(v1);
    __m256i i2 = _mm256_cvtps_epi32(v2), i3 = _mm256_cvtps_epi32(v3);
    if (sum) *sum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3)));
    i0 = _mm256_packs_epi32(i0, i1); /* lanes interleave: fixed by the permute */
    i2 = _mm256_packs_epi32(i2, i3);
    i0 = _mm256_packs_epi16(i0, i2);
    return _mm256_permutevar8x32_epi32(i0, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* One Q8_0 block (see kernels_scalar.c); returns sum(q) and the unrounded d. */
static inline int act_q8_0_block(const float *x, fp16_t *d16, int8_t *qs, float *d_out) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
    __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
    const __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                                   _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
    const float amax = hmax_ps(m);
    const float d = amax / 127.0f;
    *d16 = _cvtss_sh(d, 0);
    *d_out = d;
    const __m256 id = _mm256_set1_ps(*d16 != 0 ? 127.0f / amax : 0.0f);
    int sum = 0;
    const __m256i q = round_pack32(_mm256_mul_ps(v0, id), _mm256_mul_ps(v1, id), _mm256_mul_ps(v2, id),
                                   _mm256_mul_ps(v3, id), &sum);
    _mm256_storeu_si256((__m256i *)qs, q);
    return sum;
}

static void act_quantize_q8_0(const float *x, void *dst, int64_t n) {
    block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        float d;
        act_q8_0_block(x, &y[i].d, y[i].qs, &d);
    }
}

static void act_quantize_q8_1(const float *x, void *dst, int64_t n) {
    block_q8_1 *y = dst;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        float d;
        const int sum = act_q8_0_block(x, &y[i].d, y[i].qs, &d);
        y[i].s = _cvtss_sh(d * (float)sum, 0);
    }
}

static void act_quantize_q8_K(const float *x, void *dst, int64_t n) {
    block_q8_K *y = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < QK_K; j += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)));
        const float amax = hmax_ps(m);
        memset(&y[i], 0, sizeof y[i]);
        if (amax == 0.0f) continue;
        /* the value of largest magnitude, first one on ties (as scalar) */
        const __m256 vmax = _mm256_set1_ps(amax);
        float mval = 0.0f;
        for (int j = 0; j < QK_K; j += 8) {
            const int hit = _mm256_movemask_ps(
                _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)), vmax, _CMP_EQ_OQ));
            if (hit) {
                mval = x[j + __builtin_ctz((unsigned)hit)];
                break;
            }
        }
        const float iscale = -127.0f / mval;
        if (!isfinite(iscale) || iscale == 0.0f) continue; /* as scalar: zero the block */
        const __m256 is = _mm256_set1_ps(iscale);
        for (int j = 0; j < QK_K; j += 32) {
            const __m256 v0 = _mm256_mul_ps(is, _mm256_loadu_ps(x + j));
            const __m256 v1 = _mm256_mul_ps(is, _mm256_loadu_ps(x + j + 8));
            const __m256 v2 = _mm256_mul_ps(is, _mm256_loadu_ps(x + j + 16));
            const __m256 v3 = _mm256_mul_ps(is, _mm256_loadu_ps(x + j + 24));
            const __m256i q = round_pack32(v0, v1, v2, v3, NULL);
            _mm256_storeu_si256((__m256i *)(y[i].qs + j), q);
            /* bsums: pair sums, quad sums, then the two 16-byte halves */
            const __m256i s4 = dot_u8s8_i32(_mm256_set1_epi8(1), q);
            const __m128i s8 = _mm_hadd_epi32(_mm256_castsi256_si128(s4), _mm256_extracti128_si256(s4, 1));
            const __m128i s16 = _mm_hadd_epi32(s8, s8); /* [lo half, hi half, ..] */
            y[i].bsums[j / 16] = (int16_t)_mm_cvtsi128_si32(s16);
            y[i].bsums[j / 16 + 1] = (int16_t)_mm_extract_epi32(s16, 1);
        }
        y[i].d = 1.0f / iscale;
    }
}

/* ---------------------------------------------------------------------------
 * Legacy 32-value formats. Each block's 32 products as 8 int32 lanes, scaled
 * by dw*da.
 * ------------------------------------------------------------------------- */

/* Every kernel with a dot4 is written once for NA activation rows (NA = 1
 * for dot, 4 for dot4, a constant after inlining): the weight blocks are
 * unpacked once and used against each row, with exactly the arithmetic of
 * dot on that row alone, so dot4's outputs equal dot's bit for bit. */
#define UNROLL _Pragma("GCC unroll 4")
#define ACT_ROWS(AT, a, va, stride, NA)                                                           \
    const AT *a[4];                                                                               \
    UNROLL for (int t = 0; t < NA; t++) a[t] = (const AT *)((const uint8_t *)(va) + (size_t)t * (stride))

/* One weight block unpacked: q the bytes (|w| for Q8_0), s the signs (Q8_0). */
typedef struct {
    __m256i q, s;
} wblock;

static inline wblock q4_0_w(const block_q4_0 *w) { return (wblock){nibbles32(w->qs), _mm256_setzero_si256()}; }
static inline wblock q5_0_w(const block_q5_0 *w) {
    return (wblock){_mm256_or_si256(nibbles32(w->qs), bits32_to_0x10(w->qh)), _mm256_setzero_si256()};
}
static inline wblock q8_0_w(const block_q8_0 *w) {
    const __m256i qw = load256(w->qs);
    return (wblock){_mm256_sign_epi8(qw, qw), qw};
}
static inline wblock q4_1_w(const block_q4_1 *w) { return (wblock){nibbles32(w->qs), _mm256_setzero_si256()}; }
static inline wblock q5_1_w(const block_q5_1 *w) {
    return (wblock){_mm256_or_si256(nibbles32(w->qs), bits32_to_0x10(w->qh)), _mm256_setzero_si256()};
}

/* sum (q - o)*a: maddubs of the unsigned q, minus o*sum a */
static inline __m256 offset_block(__m256i q, __m256i qa, char o) {
    const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, qa), _mm256_maddubs_epi16(_mm256_set1_epi8(o), qa));
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}
static inline __m256 q4_0_a(wblock w, __m256i qa) { return offset_block(w.q, qa, 8); }
static inline __m256 q5_0_a(wblock w, __m256i qa) { return offset_block(w.q, qa, 16); }
/* Q8_0 weights: signed x signed, via |w| and sign(a, w) */
static inline __m256 q8_0_a(wblock w, __m256i qa) { return _mm256_cvtepi32_ps(dot_u8s8_i32(w.q, _mm256_sign_epi8(qa, w.s))); }
static inline __m256 q4_1_a(wblock w, __m256i qa) { return _mm256_cvtepi32_ps(dot_u8s8_i32(w.q, qa)); }
#define q5_1_a q4_1_a

#define LEGACY_STEP(BLK, k, acc)                                                                  \
    do {                                                                                          \
        const wblock wb = BLK##_w(w + i + k);                                                     \
        UNROLL for (int t = 0; t < NA; t++)                                                       \
            acc[t] = _mm256_fmadd_ps(lane8(d4[t], k), BLK##_a(wb, load256(a[t][i + k].qs)), acc[t]); \
    } while (0)

/* The loop shared by the legacy formats: 4 blocks per iteration with packed
 * scales and two accumulators, then single blocks. MIN is WITH_MIN for
 * Q4_1/Q5_1 (adds the m*s terms) or NO_MIN. */
#define LEGACY_LOOP(WT, AT, BLK, MIN)                                                             \
    const WT *w = vw;                                                                             \
    ACT_ROWS(AT, a, va, stride, NA);                                                              \
    const int64_t nb = n / 32;                                                                    \
    __m256 acc0[4], acc1[4];                                                                      \
    __m128 accm[4];                                                                               \
    UNROLL for (int t = 0; t < NA; t++) {                                                         \
        acc0[t] = acc1[t] = _mm256_setzero_ps();                                                  \
        accm[t] = _mm_setzero_ps();                                                               \
    }                                                                                             \
    int64_t i = 0;                                                                                \
    for (; i + 4 <= nb; i += 4) {                                                                 \
        prefetch_ahead(w + i, 4 * sizeof(WT));                                                    \
        __m128 d4[4];                                                                             \
        UNROLL for (int t = 0; t < NA; t++) {                                                     \
            d4[t] = scales4(w + i, sizeof(WT), a[t] + i, sizeof(AT), 0);                          \
            if (MIN##_ON) accm[t] = _mm_add_ps(accm[t], scales4(w + i, sizeof(WT), a[t] + i, sizeof(AT), 2)); \
        }                                                                                         \
        LEGACY_STEP(BLK, 0, acc0);                                                                \
        LEGACY_STEP(BLK, 1, acc1);                                                                \
        LEGACY_STEP(BLK, 2, acc0);                                                                \
        LEGACY_STEP(BLK, 3, acc1);                                                                \
    }                                                                                             \
    float tail[4];                                                                                \
    UNROLL for (int t = 0; t < NA; t++) {                                                         \
        tail[t] = 0.0f;                                                                           \
        if (MIN##_ON) {                                                                           \
            const __m128 m = _mm_add_ps(accm[t], _mm_movehl_ps(accm[t], accm[t]));                \
            tail[t] = _mm_cvtss_f32(_mm_add_ss(m, _mm_movehdup_ps(m)));                           \
        }                                                                                         \
    }                                                                                             \
    for (; i < nb; i++) {                                                                         \
        const wblock wb = BLK##_w(w + i);                                                         \
        UNROLL for (int t = 0; t < NA; t++) {                                                     \
            acc0[t] = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w[i].d) * h2f(a[t][i].d)), BLK##_a(wb, load256(a[t][i].qs)), acc0[t]); \
            MIN(i);                                                                               \
        }                                                                                         \
    }                                                                                             \
    UNROLL for (int t = 0; t < NA; t++) out[t] = hsum256_ps(_mm256_add_ps(acc0[t], acc1[t])) + tail[t]

#define WITH_MIN(i) tail[t] += h2f(w[i].m) * h2f(a[t][i].s)
#define WITH_MIN_ON 1
#define NO_MIN(i) (void)0
#define NO_MIN_ON 0

#define KERNEL_ARGS const void *vw, const void *va, size_t stride, int64_t n, float *out, const int NA
#define INLINE static inline __attribute__((always_inline))

INLINE void dot_q4_0_n(KERNEL_ARGS) { LEGACY_LOOP(block_q4_0, block_q8_0, q4_0, NO_MIN); }
INLINE void dot_q5_0_n(KERNEL_ARGS) { LEGACY_LOOP(block_q5_0, block_q8_0, q5_0, NO_MIN); }
INLINE void dot_q8_0_n(KERNEL_ARGS) { LEGACY_LOOP(block_q8_0, block_q8_0, q8_0, NO_MIN); }
INLINE void dot_q4_1_n(KERNEL_ARGS) { LEGACY_LOOP(block_q4_1, block_q8_1, q4_1, WITH_MIN); }
INLINE void dot_q5_1_n(KERNEL_ARGS) { LEGACY_LOOP(block_q5_1, block_q8_1, q5_1, WITH_MIN); }

#undef WITH_MIN
#undef WITH_MIN_ON
#undef NO_MIN
#undef NO_MIN_ON
#undef LEGACY_LOOP
#undef LEGACY_STEP
#undef q5_1_a

/* ---------------------------------------------------------------------------
 * K-quants x Q8_K. Per super-block the integer sum stays in 8 int32 lanes:
 * maddubs gives 16-bit pair sums of 32 values (two 16-value sub-blocks, one
 * per 128-bit lane, or one 32-value sub-block), madd multiplies them by the
 * sub-block scales. Min / offset terms come from Q8_K's bsums.
 * ------------------------------------------------------------------------- */

/* int16 scale vector for a 32-value piece of 16-value sub-blocks: scale k
 * in the low 128-bit lane, k+1 in the high one. sc16 holds the 16 int8
 * scales. */
static inline __m256i scale_pair16(__m128i sc16, int k) {
    const __m128i pick = _mm_set_epi64x(0x0101010101010101LL * (k + 1), 0x0101010101010101LL * k);
    return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc16, pick));
}

/* Q4_K and Q5_K (q5: the qh bits). Chunk c of 32 bytes holds sub-block 2c
 * (low nibbles) and 2c+1 (high), unpacked once per super-block; per row the
 * isum lanes and the mins term sum_j mn_j * (bsum_2j + bsum_2j+1) as 8 int32
 * lanes, then d*isum - dmin*mins (d and dmin the adjacent fp16s at blk). */
INLINE void dot_q45_K_n(const void *vw, const void *va, size_t stride, int64_t n, float *out, const bool q5, const int NA) {
    ACT_ROWS(block_q8_K, a, va, stride, NA);
    const size_t bsize = q5 ? sizeof(block_q5_K) : sizeof(block_q4_K);
    /* bsum lanes 2k, 2k+1 take min k (zero-extended to int16) */
    const __m256i pick_mn = _mm256_setr_epi8(0, -128, 0, -128, 1, -128, 1, -128, 2, -128, 2, -128, 3, -128, 3, -128,
                                             4, -128, 4, -128, 5, -128, 5, -128, 6, -128, 6, -128, 7, -128, 7, -128);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc[4];
    UNROLL for (int t = 0; t < NA; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *blk = (const uint8_t *)vw + (size_t)i * bsize;
        const block_q4_K *b4 = (const block_q4_K *)blk;
        const block_q5_K *b5 = (const block_q5_K *)blk;
        const uint8_t *qs = q5 ? b5->qs : b4->qs;
        prefetch_ahead(blk, bsize);
        uint64_t sc8, mn8;
        k4_scales_mins(q5 ? b5->scales : b4->scales, &sc8, &mn8);
        const __m256i mn16 = _mm256_shuffle_epi8(_mm256_set1_epi64x((long long)mn8), pick_mn);
        const __m256i sc = _mm256_set1_epi64x((long long)sc8);
        __m256i hb = q5 ? load256(b5->qh) : _mm256_setzero_si256();
        __m256i lo[4], hi[4];
        for (int c = 0; c < 4; c++) {
            const __m256i q = load256(qs + 32 * c);
            lo[c] = _mm256_and_si256(q, m4);
            hi[c] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (q5) {
                const __m256i one = _mm256_set1_epi8(1);
                lo[c] = _mm256_or_si256(lo[c], _mm256_slli_epi16(_mm256_and_si256(hb, one), 4));
                hi[c] = _mm256_or_si256(hi[c], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 1), one), 4));
                hb = _mm256_srli_epi16(hb, 2);
            }
        }
        uint32_t dd;
        memcpy(&dd, blk, 4);
        const __m128 fw = _mm_cvtph_ps(_mm_cvtsi32_si128((int)dd));
        UNROLL for (int t = 0; t < NA; t++) {
            const block_q8_K *at = a[t] + i;
            const __m256i mins = _mm256_madd_epi16(mn16, load256(at->bsums));
            __m256i sumi = _mm256_setzero_si256();
            for (int c = 0; c < 4; c++) {
                /* scale 2c / 2c+1, zero-extended, in all 16 int16 lanes */
                const __m256i s_lo = _mm256_shuffle_epi8(sc, _mm256_set1_epi16((short)(0x8000 | (2 * c))));
                const __m256i s_hi = _mm256_shuffle_epi8(sc, _mm256_set1_epi16((short)(0x8000 | (2 * c + 1))));
                const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo[c], load256(at->qs + 64 * c)), s_lo);
                const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi[c], load256(at->qs + 64 * c + 32)), s_hi);
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p_lo, p_hi));
            }
            const __m128 f = _mm_mul_ps(fw, _mm_set1_ps(at->d));
            acc[t] = _mm256_fmadd_ps(_mm256_broadcastss_ps(f), _mm256_cvtepi32_ps(sumi), acc[t]);
            acc[t] = _mm256_fnmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(f)), _mm256_cvtepi32_ps(mins), acc[t]);
        }
    }
    UNROLL for (int t = 0; t < NA; t++) out[t] = hsum256_ps(acc[t]);
}
INLINE void dot_q4_K_n(KERNEL_ARGS) { dot_q45_K_n(vw, va, stride, n, out, false, NA); }
INLINE void dot_q5_K_n(KERNEL_ARGS) { dot_q45_K_n(vw, va, stride, n, out, true, NA); }

/* Q6_K: q + 32 in 0..63 (unsigned), the -32 applied as 32 * sum_j sc_j*bsum_j. */
INLINE void dot_q6_K_n(KERNEL_ARGS) {
    const block_q6_K *w = vw;
    ACT_ROWS(block_q8_K, a, va, stride, NA);
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(0x30);
    __m256 acc[4];
    UNROLL for (int t = 0; t < NA; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        prefetch_ahead(w + i, sizeof *w);
        const __m128i sc = _mm_loadu_si128((const __m128i *)w[i].scales);
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc);
        __m256i q[8];
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w[i].ql + 64 * h;
            const __m256i l0 = load256(ql), l1 = load256(ql + 32), qh = load256(w[i].qh + 32 * h);
            q[4 * h] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m3));
            q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m3));
            q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(qh, m3));
            q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                           _mm256_and_si256(_mm256_srli_epi16(qh, 2), m3));
        }
        const float dw = h2f(w[i].d);
        UNROLL for (int t = 0; t < NA; t++) {
            const block_q8_K *at = a[t] + i;
            __m256i sumi = _mm256_slli_epi32(_mm256_madd_epi16(sc16, load256(at->bsums)), 5);
            sumi = _mm256_sub_epi32(_mm256_setzero_si256(), sumi);
            for (int h = 0; h < 2; h++) {
                const int8_t *qa = at->qs + 128 * h;
                const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(q[4 * h], load256(qa)), scale_pair16(sc, 8 * h));
                const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(q[4 * h + 1], load256(qa + 32)), scale_pair16(sc, 8 * h + 2));
                const __m256i p2 = _mm256_madd_epi16(_mm256_maddubs_epi16(q[4 * h + 2], load256(qa + 64)), scale_pair16(sc, 8 * h + 4));
                const __m256i p3 = _mm256_madd_epi16(_mm256_maddubs_epi16(q[4 * h + 3], load256(qa + 96)), scale_pair16(sc, 8 * h + 6));
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(_mm256_add_epi32(p0, p1), _mm256_add_epi32(p2, p3)));
            }
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * at->d), _mm256_cvtepi32_ps(sumi), acc[t]);
        }
    }
    UNROLL for (int t = 0; t < NA; t++) out[t] = hsum256_ps(acc[t]);
}

/* Q2_K: 2-bit q in 0..3, scale | min nibbles per 16 values. */
static float dot_q2_K(const void *vw, const void *va, int64_t n) {
    const block_q2_K *w = vw;
    const block_q8_K *a = va;
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const __m128i sb = _mm_loadu_si128((const __m128i *)w[i].scales);
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sb, 4), _mm_set1_epi8(0x0F)));
        const __m256i mprod = _mm256_madd_epi16(mins, load256(a[i].bsums));
        prefetch_ahead(w + i, sizeof *w);
        const __m128i sc = _mm_and_si128(sb, _mm_set1_epi8(0x0F));
        __m256i sumi = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i q2 = load256(w[i].qs + 32 * h);
            const int8_t *qa = a[i].qs + 128 * h;
            for (int s = 0; s < 4; s++) {
                const __m256i q = _mm256_and_si256(_mm256_srli_epi16(q2, 2 * s), m3);
                const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(q, load256(qa + 32 * s)),
                                                    scale_pair16(sc, 8 * h + 2 * s));
                sumi = _mm256_add_epi32(sumi, p);
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * h2f(w[i].d)), _mm256_cvtepi32_ps(sumi), acc);
        accm = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * h2f(w[i].dmin)), _mm256_cvtepi32_ps(mprod), accm);
    }
    return hsum256_ps(_mm256_sub_ps(acc, accm));
}

/* Q3_K's 16 signed 6-bit scales (ggml's unpacking). */
static inline __m128i q3_K_scales(const uint8_t *s12) {
    uint32_t a[3], u[4];
    memcpy(&a[0], s12, 4);
    memcpy(&a[1], s12 + 4, 4);
    memcpy(&a[2], s12 + 8, 4);
    u[0] = (a[0] & 0x0F0F0F0F) | ((a[2] & 0x03030303) << 4);
    u[1] = (a[1] & 0x0F0F0F0F) | (((a[2] >> 2) & 0x03030303) << 4);
    u[2] = ((a[0] >> 4) & 0x0F0F0F0F) | (((a[2] >> 4) & 0x03030303) << 4);
    u[3] = ((a[1] >> 4) & 0x0F0F0F0F) | (((a[2] >> 6) & 0x03030303) << 4);
    return _mm_sub_epi8(_mm_set_epi32((int)u[3], (int)u[2], (int)u[1], (int)u[0]), _mm_set1_epi8(32));
}

/* Q3_K: q + 4 = low 2 bits | hmask bit << 2, in 0..7; the -4 applied as
 * 4 * sum_j sc_j*bsum_j. */
static float dot_q3_K(const void *vw, const void *va, int64_t n) {
    const block_q3_K *w = vw;
    const block_q8_K *a = va;
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        prefetch_ahead(w + i, sizeof *w);
        const __m128i sc = q3_K_scales(w[i].scales);
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc);
        __m256i sumi = _mm256_slli_epi32(_mm256_madd_epi16(sc16, load256(a[i].bsums)), 2);
        sumi = _mm256_sub_epi32(_mm256_setzero_si256(), sumi);
        __m256i hm = load256(w[i].hmask);
        for (int h = 0; h < 2; h++) {
            const __m256i q2 = load256(w[i].qs + 32 * h);
            const int8_t *qa = a[i].qs + 128 * h;
            for (int s = 0; s < 4; s++) {
                const __m256i hb = _mm256_slli_epi16(_mm256_and_si256(hm, one), 2);
                hm = _mm256_srli_epi16(hm, 1);
                const __m256i q = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q2, 2 * s), m3), hb);
                const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(q, load256(qa + 32 * s)),
                                                    scale_pair16(sc, 8 * h + 2 * s));
                sumi = _mm256_add_epi32(sumi, p);
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w[i].d) * a[i].d), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum256_ps(acc);
}

/* ---------------------------------------------------------------------------
 * Float weights x F32 activations, written once for NR weight rows (1 or 2)
 * and NA activation rows (1..4). Each (row, activation) pair sums in two
 * accumulators, the 8-value chunks of every 16 taking turns (a last lone
 * chunk to the first), then horizontally (hsum256_ps of their sum), then the
 * last n % 8 values one by one: an order that does not depend on NR or NA,
 * so dot, dot4 and the tile agree bit for bit. The tile is 2 rows x 3
 * tokens: 12 sums, 2 converted weight chunks and an activation chunk in the
 * 16 ymm registers (the kernel before, one row against 4 tokens with four
 * sums each, spilled). A lone token keeps dot: one row at a time streams the
 * weights in order, where 3 rows side by side measured 20-30% slower decode
 * on the EPYC; two sums keep two FMA chains in flight (one measured 8%
 * slower decode there).
 *
 * F16 and BF16 prefill batches (PACKED_BF16_MIN_TOKENS tokens or more) take
 * their own tile, 3 rows x 4 tokens with one sum per pair (12 sums, 3 weight chunks,
 * an activation chunk): 7 loads for 12 FMAs, where 2 x 3 takes 10 for 24 and
 * streams half as many weight rows per activation chunk from L2. On the EPYC
 * it doubled F16 prefill (pp512 of the 1.1B model 47 -> 88 tokens/s); its
 * sums are F32 as dot's but in another order, so prefill's logits differ
 * from decode's in the last bits, as AVX-512's bf16 prefill's do. (F32
 * matrices, small models', keep dot's order, so the batcher may put their
 * prompts beside decode rows: runtime/batch.h.)
 * ------------------------------------------------------------------------- */

static inline __m256 load_f16x8(const fp16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

static inline __m256 load_bf16x8(const bf16_t *p) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

/* the 8-value chunk at k of every (row, activation) pair, into sums acc */
#define FLOAT_CHUNK(load8, k, acc)                                                                \
    do {                                                                                          \
        __m256 wv[3];                                                                             \
        UNROLL for (int r = 0; r < NR; r++) wv[r] = load8(w[r] + (k));                            \
        UNROLL for (int t = 0; t < NA; t++) {                                                     \
            const __m256 xv = _mm256_loadu_ps(x[t] + (k));                                        \
            UNROLL for (int r = 0; r < NR; r++) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]); \
        }                                                                                         \
    } while (0)

#define FLOAT_TILE(name, wtype, load8, scalar)                                                   \
    INLINE void name##_t(const void *vw, size_t w_stride, const void *va, size_t stride, int64_t n, float *out, \
                         const int NR, const int NA) {                                            \
        const wtype *w[2];                                                                        \
        UNROLL for (int r = 0; r < NR; r++) w[r] = (const wtype *)((const uint8_t *)vw + (size_t)r * w_stride); \
        ACT_ROWS(float, x, va, stride, NA);                                                       \
        __m256 s0[2][4], s1[2][4];                                                                \
        UNROLL for (int r = 0; r < NR; r++) UNROLL for (int t = 0; t < NA; t++) s0[r][t] = s1[r][t] = _mm256_setzero_ps(); \
        int64_t i = 0;                                                                            \
        for (; i + 32 <= n; i += 32) {                                                            \
            UNROLL for (int r = 0; r < NR; r++) {                                                 \
                if (NA > 1) prefetch_batch(w[r] + i, 32 * sizeof(wtype));                          \
                else prefetch_ahead(w[r] + i, 32 * sizeof(wtype));                                 \
            }                                                                                     \
            FLOAT_CHUNK(load8, i, s0);                                                            \
            FLOAT_CHUNK(load8, i + 8, s1);                                                        \
            FLOAT_CHUNK(load8, i + 16, s0);                                                       \
            FLOAT_CHUNK(load8, i + 24, s1);                                                       \
        }                                                                                         \
        for (int c = 0; i + 8 <= n; i += 8, c ^= 1) {                                             \
            if (c) FLOAT_CHUNK(load8, i, s1);                                                     \
            else FLOAT_CHUNK(load8, i, s0);                                                       \
        }                                                                                         \
        UNROLL for (int r = 0; r < NR; r++) UNROLL for (int t = 0; t < NA; t++) {                 \
            float sum = hsum256_ps(_mm256_add_ps(s0[r][t], s1[r][t]));                            \
            for (int64_t k = i; k < n; k++) sum += scalar(w[r] + k) * x[t][k];                      \
            out[r * NA + t] = sum;                                                                \
        }                                                                                         \
    }

/* the prefill tile: one sum per pair over the 8-value chunks in order */
#define FLOAT_PREFILL(name, wtype, load8, scalar)                                                \
    static void name##_3x4(const void *vw, size_t w_stride, const void *va, size_t stride, int64_t n, int na, \
                           float *out) {                                                          \
        enum { NR = 3, NA = 4 };                                                                  \
        const wtype *w[NR];                                                                       \
        UNROLL for (int r = 0; r < NR; r++) w[r] = (const wtype *)((const uint8_t *)vw + (size_t)r * w_stride); \
        ACT_ROWS(float, x, va, stride, NA);                                                       \
        UNROLL for (int t = na; t < NA; t++) x[t] = x[0]; /* a short call repeats its first token */ \
        __m256 s[NR][NA];                                                                         \
        UNROLL for (int r = 0; r < NR; r++) UNROLL for (int t = 0; t < NA; t++) s[r][t] = _mm256_setzero_ps(); \
        int64_t i = 0;                                                                            \
        for (; i + 32 <= n; i += 32) {                                                            \
            UNROLL for (int r = 0; r < NR; r++) prefetch_batch(w[r] + i, 32 * sizeof(wtype));      \
            UNROLL for (int c = 0; c < 32; c += 8) FLOAT_CHUNK(load8, i + c, s);                   \
        }                                                                                         \
        for (; i + 8 <= n; i += 8) FLOAT_CHUNK(load8, i, s);                                      \
        UNROLL for (int r = 0; r < NR; r++) UNROLL for (int t = 0; t < NA; t++) {                 \
            if (t >= na) continue; /* t constant: the sums stay in registers */                   \
            float sum = hsum256_ps(s[r][t]);                                                      \
            for (int64_t k = i; k < n; k++) sum += scalar(w[r] + k) * x[t][k];                      \
            out[r * na + t] = sum;                                                                \
        }                                                                                         \
    }

/* one value at p, for the tails (a row may start at any byte) */
static inline float f32_at(const float *p) {
    float v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline float f16_at(const fp16_t *p) {
    fp16_t v;
    memcpy(&v, p, sizeof v);
    return h2f(v);
}
static inline float bf16_at(const bf16_t *p) {
    bf16_t v;
    memcpy(&v, p, sizeof v);
    return bf16_to_fp32(v);
}
FLOAT_PREFILL(dot_f16, fp16_t, load_f16x8, f16_at)
FLOAT_PREFILL(dot_bf16, bf16_t, load_bf16x8, bf16_at)
FLOAT_TILE(dot_f32, float, _mm256_loadu_ps, f32_at)
FLOAT_TILE(dot_f16, fp16_t, load_f16x8, f16_at)
FLOAT_TILE(dot_bf16, bf16_t, load_bf16x8, bf16_at)
#undef FLOAT_TILE
#undef FLOAT_PREFILL
#undef FLOAT_CHUNK

/* dot, dot4 and the tile (2 rows x na <= 3 tokens) of each float kernel */
#define FLOAT_VARIANTS(name)                                                                      \
    static float name(const void *w, const void *a, int64_t n) {                                  \
        float o[1];                                                                               \
        name##_t(w, 0, a, 0, n, o, 1, 1);                                                         \
        return o[0];                                                                              \
    }                                                                                             \
    static void name##4(const void *w, const void *a, size_t s, int64_t n, float out[4]) {        \
        name##_t(w, 0, a, s, n, out, 1, 4);                                                       \
    }                                                                                             \
    static void name##2xn(const void *w, size_t ws, const void *a, size_t s, int64_t n, int na, float *out) { \
        switch (na) {                                                                             \
        case 1: name##_t(w, ws, a, s, n, out, 2, 1); break;                                       \
        case 2: name##_t(w, ws, a, s, n, out, 2, 2); break;                                       \
        default: name##_t(w, ws, a, s, n, out, 2, 3); break;                                      \
        }                                                                                         \
    }

FLOAT_VARIANTS(dot_f32)
FLOAT_VARIANTS(dot_f16)
FLOAT_VARIANTS(dot_bf16)
#undef FLOAT_VARIANTS

/* dot (one activation row) and dot4 (four) of each kernel written for NA rows */
#define VARIANTS(name)                                                                            \
    static float name(const void *w, const void *a, int64_t n) {                                  \
        float o[1];                                                                               \
        name##_n(w, a, 0, n, o, 1);                                                               \
        return o[0];                                                                              \
    }                                                                                             \
    static void name##4(const void *w, const void *a, size_t s, int64_t n, float out[4]) { name##_n(w, a, s, n, out, 4); }

VARIANTS(dot_q4_0)
VARIANTS(dot_q5_0)
VARIANTS(dot_q8_0)
VARIANTS(dot_q4_1)
VARIANTS(dot_q5_1)
VARIANTS(dot_q4_K)
VARIANTS(dot_q5_K)
VARIANTS(dot_q6_K)
#undef VARIANTS

/* ---------------------------------------------------------------------------
 * Gated activations: silu(g) * u and gelu(g) * u (kernels.c has the scalar
 * forms), 8 at a time, the tail through a mask (the same arithmetic)
 * ------------------------------------------------------------------------- */

static inline __m256i tail_mask8(size_t rest) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(rest >= 8 ? 8 : (int)rest), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static void swiglu_256(float *g, const float *u, size_t n) {
    const __m256 one = _mm256_set1_ps(1.0f);
    for (size_t i = 0; i < n; i += 8) {
        const __m256i m = tail_mask8(n - i);
        const __m256 x = _mm256_maskload_ps(g + i, m);
        const __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
        _mm256_maskstore_ps(g + i, m, _mm256_mul_ps(s, _mm256_maskload_ps(u + i, m)));
    }
}

static void geglu_256(float *g, const float *u, size_t n) {
    const __m256 one = _mm256_set1_ps(1.0f), c = _mm256_set1_ps(-1.5957691216057308f), k = _mm256_set1_ps(0.044715f);
    for (size_t i = 0; i < n; i += 8) {
        const __m256i m = tail_mask8(n - i);
        const __m256 x = _mm256_maskload_ps(g + i, m);
        const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
        const __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, exp8(_mm256_mul_ps(c, _mm256_fmadd_ps(k, x3, x)))));
        _mm256_maskstore_ps(g + i, m, _mm256_mul_ps(s, _mm256_maskload_ps(u + i, m)));
    }
}

swiglu_fn swiglu_avx2(void) { return swiglu_256; }
swiglu_fn geglu_avx2(void) { return geglu_256; }

/* kernels.h: lowrank_fn, 32 outputs a step in four independent chains; the tail through masks */
static void lowrank_256(const float *u, int r, const float *bt, size_t stride, size_t n, float *acc) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int k = 0; k < r; k++) {
            const __m256 uk = _mm256_set1_ps(u[k]);
            const float *row = bt + (size_t)k * stride + i;
            a0 = _mm256_fmadd_ps(uk, _mm256_loadu_ps(row), a0);
            a1 = _mm256_fmadd_ps(uk, _mm256_loadu_ps(row + 8), a1);
            a2 = _mm256_fmadd_ps(uk, _mm256_loadu_ps(row + 16), a2);
            a3 = _mm256_fmadd_ps(uk, _mm256_loadu_ps(row + 24), a3);
        }
        _mm256_storeu_ps(acc + i, a0), _mm256_storeu_ps(acc + i + 8, a1);
        _mm256_storeu_ps(acc + i + 16, a2), _mm256_storeu_ps(acc + i + 24, a3);
    }
    for (; i < n; i += 8) {
        const __m256i m = tail_mask8(n - i);
        __m256 a = _mm256_setzero_ps();
        for (int k = 0; k < r; k++)
            a = _mm256_fmadd_ps(_mm256_set1_ps(u[k]), _mm256_maskload_ps(bt + (size_t)k * stride + i, m), a);
        _mm256_maskstore_ps(acc + i, m, a);
    }
}

lowrank_fn lowrank_avx2(void) { return lowrank_256; }

/* kernels.h: lowrank4_fn, four rows of u against 16 outputs a step (eight independent chains, each
 * bt load used four times); fewer rows than four go through lowrank_256, the same sums */
static void lowrank4_256(const float *u, size_t us, int T, int r, const float *bt, size_t stride, size_t n,
                         float *acc, size_t as) {
    if (T < 4) {
        for (int t = 0; t < T; t++) lowrank_256(u + (size_t)t * us, r, bt, stride, n, acc + (size_t)t * as);
        return;
    }
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 a[4][2];
        for (int t = 0; t < 4; t++) a[t][0] = a[t][1] = _mm256_setzero_ps();
        for (int k = 0; k < r; k++) {
            const float *row = bt + (size_t)k * stride + i;
            const __m256 b0 = _mm256_loadu_ps(row), b1 = _mm256_loadu_ps(row + 8);
            for (int t = 0; t < 4; t++) {
                const __m256 ut = _mm256_set1_ps(u[(size_t)t * us + (size_t)k]);
                a[t][0] = _mm256_fmadd_ps(ut, b0, a[t][0]);
                a[t][1] = _mm256_fmadd_ps(ut, b1, a[t][1]);
            }
        }
        for (int t = 0; t < 4; t++)
            _mm256_storeu_ps(acc + (size_t)t * as + i, a[t][0]), _mm256_storeu_ps(acc + (size_t)t * as + i + 8, a[t][1]);
    }
    for (; i < n; i += 8) {
        const __m256i m = tail_mask8(n - i);
        __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int k = 0; k < r; k++) {
            const __m256 b = _mm256_maskload_ps(bt + (size_t)k * stride + i, m);
            for (int t = 0; t < 4; t++) a[t] = _mm256_fmadd_ps(_mm256_set1_ps(u[(size_t)t * us + (size_t)k]), b, a[t]);
        }
        for (int t = 0; t < 4; t++) _mm256_maskstore_ps(acc + (size_t)t * as + i, m, a[t]);
    }
}

lowrank4_fn lowrank4_avx2(void) { return lowrank4_256; }

/* ---------------------------------------------------------------------------
 * Table
 * ------------------------------------------------------------------------- */

void kernels_fill_avx2(kernel_entry table[], int n_types) {
    const kernel_quantizers quantizers = {act_quantize_q8_0, act_quantize_q8_1, act_quantize_q8_K};
    const kernel_dots rows[] = {
        {QT_F32, dot_f32, dot_f324, {dot_f322xn, 2, 3}, NO_TILE},
        {QT_F16, dot_f16, dot_f164, {dot_f162xn, 2, 3}, {dot_f16_3x4, 3, 4}},
        {QT_BF16, dot_bf16, dot_bf164, {dot_bf162xn, 2, 3}, {dot_bf16_3x4, 3, 4}},
        {QT_Q4_0, dot_q4_0, dot_q4_04, NO_TILES},
        {QT_Q5_0, dot_q5_0, dot_q5_04, NO_TILES},
        {QT_Q8_0, dot_q8_0, dot_q8_04, NO_TILES},
        {QT_Q4_1, dot_q4_1, dot_q4_14, NO_TILES},
        {QT_Q5_1, dot_q5_1, dot_q5_14, NO_TILES},
        {QT_Q2_K, dot_q2_K, NULL, NO_TILES},
        {QT_Q3_K, dot_q3_K, NULL, NO_TILES},
        {QT_Q4_K, dot_q4_K, dot_q4_K4, NO_TILES},
        {QT_Q5_K, dot_q5_K, dot_q5_K4, NO_TILES},
        {QT_Q6_K, dot_q6_K, dot_q6_K4, NO_TILES},
    };
    kernels_set(table, n_types, &quantizers, rows, sizeof rows / sizeof rows[0]);
}

#else /* x86-64 built without -mavx2 -mfma -mf16c: every type uses the scalar kernel */

void kernels_fill_avx2(kernel_entry table[], int n_types) {
    (void)table;
    (void)n_types;
}

swiglu_fn swiglu_avx2(void) { return NULL; }
swiglu_fn geglu_avx2(void) { return NULL; }
lowrank_fn lowrank_avx2(void) { return NULL; }
lowrank4_fn lowrank4_avx2(void) { return NULL; }

#endif

#else /* not x86-64: nothing here */

swiglu_fn swiglu_avx2(void) { return NULL; }
swiglu_fn geglu_avx2(void) { return NULL; }
lowrank_fn lowrank_avx2(void) { return NULL; }
lowrank4_fn lowrank4_avx2(void) { return NULL; }

#endif
