/*
 * kernels_avx512 — the matrix-vector kernels for x86-64 with AVX-512 (F, BW,
 * VL), using VNNI where the CPU has it.
 *
 * The table starts as the AVX2 one (every CPU that runs this path also runs
 * AVX2+FMA+F16C, see kernels.c) and the hot types are replaced by 512-bit
 * versions: the activation quantizers, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K
 * .. Q6_K, F32, F16 and BF16 (so today every entry is replaced; starting
 * from AVX2 keeps any type added later working).
 *
 * How the 512-bit kernels are laid out (kernels_scalar.c has the arithmetic):
 *
 *   - Legacy 32-value formats: one zmm holds two blocks of 8-bit quants, in
 *     the activation's natural order. The nibbles of two Q4 blocks are
 *     broadcast into 128-bit lanes and shifted by lane (srlv), so no
 *     lane-crossing shuffle is needed; with VNNI the high nibbles are not
 *     even shifted: they count 16x, and those lanes take the block scale/16
 *     (exact). Products are summed to int32 per 4 bytes: VNNI's vpdpbusd
 *     (unsigned x signed), or maddubs + madd without it. Signed weights are
 *     made unsigned with an offset that is removed exactly:
 *     sum (q-o)*a = sum q*a - o*sum a.
 *   - The fp16 block scales of 8 blocks are packed with integer loads and
 *     shifts (gathers and vector inserts cost more: they compete with the dot
 *     products for ports) and converted at once; each pair of blocks then
 *     takes its two scales with one permute, and the int32 lanes are
 *     converted and accumulated with FMA (no horizontal sums inside the loop).
 *   - K-quants: a zmm covers 64 activation values; maddubs gives exact 16-bit
 *     pair sums, which are multiplied by the sub-block scales and summed to
 *     int32 by vpdpwssd (VNNI) or madd + add. Offsets (Q6_K's -32) and mins
 *     come from Q8_K's bsums.
 *   - F32/F16/BF16: 64 values per iteration in four accumulators, masked
 *     loads for the tail.
 *
 * Results equal the scalar kernels' integer sums exactly; only the float
 * summation order differs. The activation quantizers produce scalar's bytes.
 *
 * Only compiled with the AVX-512 flags on x86-64 (CMake sets them for this
 * file alone); kernels.c calls kernels_fill_avx512 only when the CPU has
 * AVX-512 F/BW/VL. Elsewhere this file is empty.
 */
#include "kernels.h"

#if defined(__x86_64__)

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "simd_x86.h"
#include "core/quant.h"

/* ---------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------- */

/* Two 32-byte rows (from two blocks) in one zmm. */
ALWAYS_INLINE __m512i load2x256(const void *lo, const void *hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(load256(lo)), load256(hi), 1);
}

/* The row kernels' prefetch of the weights (simd_x86.h: prefetch_ahead),
 * unless kernels_fill_avx512 was told sw_prefetch false (on AMD, whose
 * hardware prefetcher does better alone: kernels.c). A batch asks
 * prefetch_batch on every CPU. */
static bool sw_prefetch = true; /* set once, by kernels_fill_avx512 */
ALWAYS_INLINE void maybe_prefetch_ahead(const void *p, size_t bytes) {
    if (sw_prefetch) prefetch_ahead(p, bytes);
}

/* [d[2k] x 8, d[2k+1] x 8] from 8 scales. */
ALWAYS_INLINE __m512 scale_pair(__m256 d8, int k) {
    const __m512i idx = _mm512_set_epi32(2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1,
                                         2 * k + 1, 2 * k + 1, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k,
                                         2 * k, 2 * k);
    return _mm512_permutexvar_ps(idx, _mm512_castps256_ps512(d8));
}

/* The same for two blocks whose scales are computed one by one (row tails). */
ALWAYS_INLINE __m512 scale_pair_scalar(float d0, float d1) {
    return _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(d0), _mm512_set1_ps(d1));
}

/* Scales for the "high nibbles in place" layout (see nibbles16_x2): lanes
 * 4-7 and 12-15 hold 16x the true sums, so they take d/16 (exact: a power
 * of two). d8s = d8/16. */
ALWAYS_INLINE __m512 scale_pair_hi16(__m256 d8, __m256 d8s, int k) {
    const int a = 2 * k, b = 2 * k + 1;
    const __m512i idx = _mm512_set_epi32(16 + b, 16 + b, 16 + b, 16 + b, b, b, b, b, 16 + a, 16 + a, 16 + a,
                                         16 + a, a, a, a, a);
    return _mm512_permutex2var_ps(_mm512_castps256_ps512(d8), idx, _mm512_castps256_ps512(d8s));
}

ALWAYS_INLINE __m512 scale_pair_scalar_hi16(float d0, float d1) {
    const __m512 s = _mm512_set_ps(0.0625f, 0.0625f, 0.0625f, 0.0625f, 1, 1, 1, 1, 0.0625f, 0.0625f,
                                   0.0625f, 0.0625f, 1, 1, 1, 1);
    return _mm512_mul_ps(scale_pair_scalar(d0, d1), s);
}

/* ---------------------------------------------------------------------------
 * Activation quantizers (same operations as kernels_scalar.c, same bytes)
 * ------------------------------------------------------------------------- */

static void act_quantize_q8_0(const float *x, void *dst, int64_t n) {
    block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        float d;
        act_q8_0_block512(x, &y[i].d, y[i].qs, &d);
    }
}

static void act_quantize_q8_1(const float *x, void *dst, int64_t n) {
    block_q8_1 *y = dst;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        float d;
        const int sum = act_q8_0_block512(x, &y[i].d, y[i].qs, &d);
        y[i].s = _cvtss_sh(d * (float)sum, 0);
    }
}

static void act_quantize_q8_K(const float *x, void *dst, int64_t n) {
    block_q8_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        __m512 m = _mm512_setzero_ps();
        for (int j = 0; j < QK_K; j += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + j)));
        const float amax = _mm512_reduce_max_ps(m);
        memset(&y[i], 0, sizeof y[i]);
        if (amax == 0.0f) continue;
        /* the value of largest magnitude, first one on ties (as scalar) */
        const __m512 vmax = _mm512_set1_ps(amax);
        float mval = 0.0f;
        for (int j = 0; j < QK_K; j += 16) {
            const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + j)), vmax, _CMP_EQ_OQ);
            if (hit) {
                mval = x[j + __builtin_ctz((unsigned)hit)];
                break;
            }
        }
        const float iscale = -127.0f / mval;
        if (!isfinite(iscale) || iscale == 0.0f) continue; /* as scalar: zero the block */
        const __m512 is = _mm512_set1_ps(iscale);
        for (int j = 0; j < QK_K; j += 16) {
            const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(is, _mm512_loadu_ps(x + j)));
            _mm_storeu_si128((__m128i *)(y[i].qs + j), _mm512_cvtsepi32_epi8(q));
            y[i].bsums[j / 16] = (int16_t)_mm512_reduce_add_epi32(q);
        }
        y[i].d = 1.0f / iscale;
    }
}

/* ---------------------------------------------------------------------------
 * Legacy 32-value formats. A "pair" is two blocks in one zmm; each kernel
 * has a pair function giving the exact int32 lanes, and one loop
 * (LEGACY_LOOP) does 8 blocks per iteration with packed scales, then pairs
 * with scalar scales, then a last block paired with itself (its copy scaled
 * by 0).
 * ------------------------------------------------------------------------- */

/* The nibbles of two Q4 blocks: [lo0, hi0, lo1, hi1], 16 bytes each. */
ALWAYS_INLINE __m512i bcast_x2(const uint8_t *q0, const uint8_t *q1) {
    const __m512i b = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)q0));
    return _mm512_mask_broadcast_i32x4(b, 0xFF00, _mm_loadu_si128((const __m128i *)q1));
}

ALWAYS_INLINE __m512i nibbles_x2(const uint8_t *q0, const uint8_t *q1) {
    const __m512i b = bcast_x2(q0, q1);
    return _mm512_and_si512(_mm512_srlv_epi64(b, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4)), _mm512_set1_epi8(0x0F));
}

/* The same without the shift: the high nibbles stay in bits 4-7, i.e. 16x
 * their value (only for vpdpbusd, which sums 4 products of up to 240*127
 * without saturating). */
ALWAYS_INLINE __m512i nibbles16_x2(const uint8_t *q0, const uint8_t *q1) {
    const long long lo = 0x0F0F0F0F0F0F0F0FLL, hi = (long long)0xF0F0F0F0F0F0F0F0ULL;
    const __m512i m = _mm512_set_epi64(hi, hi, lo, lo, hi, hi, lo, lo);
    return _mm512_and_si512(bcast_x2(q0, q1), m);
}

/* 0x10 in each byte whose bit is set in qh0 (block 0) / qh1 (block 1). */
ALWAYS_INLINE __m512i bit5_x2(const uint8_t *qh0, const uint8_t *qh1) {
    uint32_t h0, h1;
    memcpy(&h0, qh0, 4);
    memcpy(&h1, qh1, 4);
    return _mm512_maskz_mov_epi8(_cvtu64_mask64((uint64_t)h1 << 32 | h0), _mm512_set1_epi8(0x10));
}

/* sum (u - o)*a per int32 lane, u unsigned (<= 31), o the offset */
ALWAYS_INLINE __m512i dot_offset(__m512i u, __m512i a, char o, const bool vnni) {
    const __m512i off = _mm512_set1_epi8(o);
    if (vnni)
        return _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), u, a),
                                _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, a));
    const __m512i p = _mm512_sub_epi16(_mm512_maddubs_epi16(u, a), _mm512_maddubs_epi16(off, a));
    return _mm512_madd_epi16(p, _mm512_set1_epi16(1));
}

/* Every kernel below is written once for NA activation rows (NA = 1 for dot,
 * 4 for dot4; a compile-time constant after inlining). The weight blocks are
 * unpacked once and used against each activation row, whose arithmetic is
 * exactly that of dot on it alone: dot4's outputs equal dot's bit for bit. */
#define UNROLL _Pragma("GCC unroll 4")

/* Activation row t of a dot4 call. */
#define ACT_ROWS(AT, a, va, stride, NA)                                                           \
    const AT *a[4];                                                                               \
    UNROLL for (int t = 0; t < NA; t++) a[t] = (const AT *)((const uint8_t *)(va) + (size_t)t * (stride))

/* Eight fp16s at byte offset off of 8 consecutive blocks of size bsize, as floats. */
ALWAYS_INLINE __m256 fp16x8(const void *b, size_t bsize, size_t off) {
    const uint8_t *p = (const uint8_t *)b + off;
    return _mm256_cvtph_ps(_mm_set_epi64x((long long)fp16x4(p + 4 * bsize, bsize), (long long)fp16x4(p, bsize)));
}

/* The same for 8 activation blocks (Q8_0: 34 bytes, Q8_1: 36), whose 8 fp16s
 * lie in the first 256 bytes: four loads and two word permutes instead of 8
 * scalar loads and shifts (this runs once per activation row, dot4 would
 * spend as much here as in the dot products). */
ALWAYS_INLINE __m256 act_fp16x8(const void *b, size_t bsize, size_t off) {
    const uint8_t *p = b;
    const __m512i A = _mm512_loadu_si512((const void *)p), B = _mm512_loadu_si512((const void *)(p + 64));
    const __m512i C = _mm512_loadu_si512((const void *)(p + 128)), D = _mm512_loadu_si512((const void *)(p + 192));
    /* word k of the result: word (k*bsize + off)/2 of A:B (k < 4) or C:D (k >= 4) */
#define W2(k0, k1) (int)((((k1) * bsize + off) / 2 % 64) << 16 | (((k0) * bsize + off) / 2 % 64))
    const __m512i i1 = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, W2(2, 3), W2(0, 1));
    const __m512i i2 = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, W2(6, 7), W2(4, 5), 0, 0);
#undef W2
    const __m512i r1 = _mm512_permutex2var_epi16(A, i1, B);
    const __m512i r2 = _mm512_permutex2var_epi16(C, i2, D);
    return _mm256_cvtph_ps(_mm512_castsi512_si128(_mm512_mask_blend_epi16(0xF0, r1, r2)));
}

/* A pair of weight blocks, unpacked once for every activation row: q the
 * weight bytes, c a per-pair int32 term, m a byte mask. */
typedef struct {
    __m512i q, c;
    __mmask64 m;
} wpair;

/* VNNI with signed weights s: sum s*a = sum s*(a + 128) - 128 * sum s, where
 * a + 128 = a ^ 0x80 is unsigned; c = -128 * sum s depends on the weights
 * only, so each activation row costs one xor and one vpdpbusd. */
ALWAYS_INLINE wpair signed_w(__m512i s) {
    wpair p;
    p.q = s;
    p.c = _mm512_sub_epi32(_mm512_setzero_si512(),
                           _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8((char)0x80), s));
    p.m = 0;
    return p;
}
ALWAYS_INLINE __m512i signed_w_dot(wpair p, __m512i qa) {
    return _mm512_dpbusd_epi32(p.c, _mm512_xor_si512(qa, _mm512_set1_epi8((char)0x80)), p.q);
}
ALWAYS_INLINE wpair plain_w(__m512i q) {
    wpair p;
    p.q = q;
    p.c = _mm512_setzero_si512();
    p.m = 0;
    return p;
}

/* Q4_0. With VNNI the high nibbles stay in place (16x, bytes 0..240) and
 * q - 8 is formed as a signed byte: lo - 8, and hi - 128 = 16 * (q - 8). */
ALWAYS_INLINE wpair q4_0_w(const block_q4_0 *w0, const block_q4_0 *w1, const bool vnni) {
    if (vnni) {
        const long long o1 = 0x0808080808080808LL, o16 = (long long)0x8080808080808080ULL;
        const __m512i off = _mm512_set_epi64(o16, o16, o1, o1, o16, o16, o1, o1);
        return signed_w(_mm512_sub_epi8(nibbles16_x2(w0->qs, w1->qs), off));
    }
    return plain_w(nibbles_x2(w0->qs, w1->qs));
}
ALWAYS_INLINE __m512i q4_0_a(wpair p, __m512i qa, const bool vnni) {
    return vnni ? signed_w_dot(p, qa) : dot_offset(p.q, qa, 8, false);
}

ALWAYS_INLINE wpair q5_0_w(const block_q5_0 *w0, const block_q5_0 *w1, const bool vnni) {
    const __m512i q = _mm512_or_si512(nibbles_x2(w0->qs, w1->qs), bit5_x2(w0->qh, w1->qh));
    return vnni ? signed_w(_mm512_sub_epi8(q, _mm512_set1_epi8(16))) : plain_w(q);
}
ALWAYS_INLINE __m512i q5_0_a(wpair p, __m512i qa, const bool vnni) {
    return vnni ? signed_w_dot(p, qa) : dot_offset(p.q, qa, 16, false);
}

/* Q8_0 weights are signed: with VNNI as above; without, |w| times a with
 * w's sign (maddubs of 128*127 pairs cannot saturate). */
ALWAYS_INLINE wpair q8_0_w(const block_q8_0 *w0, const block_q8_0 *w1, const bool vnni) {
    const __m512i qw = load2x256(w0->qs, w1->qs);
    if (vnni) return signed_w(qw);
    wpair p = plain_w(_mm512_abs_epi8(qw));
    p.m = _mm512_movepi8_mask(qw);
    return p;
}
ALWAYS_INLINE __m512i q8_0_a(wpair p, __m512i qa, const bool vnni) {
    if (vnni) return signed_w_dot(p, qa);
    const __m512i sa = _mm512_mask_sub_epi8(qa, p.m, _mm512_setzero_si512(), qa);
    return _mm512_madd_epi16(_mm512_maddubs_epi16(p.q, sa), _mm512_set1_epi16(1));
}

/* Q4_1 (high nibbles 16x with VNNI) and Q5_1: unsigned weights, no offset. */
ALWAYS_INLINE wpair q4_1_w(const block_q4_1 *w0, const block_q4_1 *w1, const bool vnni) {
    return plain_w(vnni ? nibbles16_x2(w0->qs, w1->qs) : nibbles_x2(w0->qs, w1->qs));
}
ALWAYS_INLINE wpair q5_1_w(const block_q5_1 *w0, const block_q5_1 *w1, const bool vnni) {
    (void)vnni;
    return plain_w(_mm512_or_si512(nibbles_x2(w0->qs, w1->qs), bit5_x2(w0->qh, w1->qh)));
}
ALWAYS_INLINE __m512i q4_1_a(wpair p, __m512i qa, const bool vnni) {
    return dpbusd(_mm512_setzero_si512(), p.q, qa, vnni);
}
#define q5_1_a q4_1_a

/* Blocks 2k, 2k+1 of the 8 at wi into acc[t] of every row (k a constant). */
#define LEGACY_STEP(PAIR, HI16, k, acc)                                                           \
    do {                                                                                          \
        const wpair p = PAIR##_w(wi + 2 * k, wi + 2 * k + 1, vnni);                               \
        UNROLL for (int t = 0; t < NA; t++) {                                                     \
            const __m512i qa = load2x256(a[t][i + 2 * k].qs, a[t][i + 2 * k + 1].qs);            \
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(PAIR##_a(p, qa, vnni)),                  \
                                     HI16 ? scale_pair_hi16(d8[t], d8s[t], k) : scale_pair(d8[t], k), acc[t]); \
        }                                                                                         \
    } while (0)

/* The loop: 8 blocks per iteration with packed scales, then pairs with
 * scalar scales, then a last block paired with itself (its copy scaled by
 * 0). PAIR##_w unpacks two weight blocks, PAIR##_a gives their exact int32
 * lanes against one activation pair; MIN is WITH_MIN for Q4_1/Q5_1 (adds the
 * m*s terms) or NO_MIN; HI16 says the high nibbles are left 16x. */
#define LEGACY_LOOP(WT, AT, PAIR, MIN, HI16)                                                      \
    const WT *w = vw;                                                                             \
    ACT_ROWS(AT, a, va, stride, NA);                                                              \
    const int64_t nb = n / 32;                                                                    \
    __m512 acc0[4], acc1[4];                                                                      \
    __m256 accm[4];                                                                               \
    UNROLL for (int t = 0; t < NA; t++) {                                                         \
        acc0[t] = acc1[t] = _mm512_setzero_ps();                                                  \
        accm[t] = _mm256_setzero_ps();                                                            \
    }                                                                                             \
    int64_t i = 0;                                                                                \
    for (; i + 8 <= nb; i += 8) {                                                                 \
        const WT *wi = w + i;                                                                     \
        maybe_prefetch_ahead(wi, 8 * sizeof(WT));                                                 \
        const __m256 dw8 = fp16x8(wi, sizeof(WT), 0);                                             \
        __m256 d8[4], d8s[4];                                                                     \
        UNROLL for (int t = 0; t < NA; t++) {                                                     \
            d8[t] = _mm256_mul_ps(dw8, act_fp16x8(a[t] + i, sizeof(AT), 0));                          \
            d8s[t] = _mm256_mul_ps(d8[t], _mm256_set1_ps(0.0625f));                               \
        }                                                                                         \
        if (MIN##_ON) {                                                                           \
            const __m256 m8 = fp16x8(wi, sizeof(WT), 2);                                          \
            UNROLL for (int t = 0; t < NA; t++)                                                   \
                accm[t] = _mm256_add_ps(accm[t], _mm256_mul_ps(m8, act_fp16x8(a[t] + i, sizeof(AT), 2))); \
        }                                                                                         \
        LEGACY_STEP(PAIR, HI16, 0, acc0);                                                         \
        LEGACY_STEP(PAIR, HI16, 1, acc1);                                                         \
        LEGACY_STEP(PAIR, HI16, 2, acc0);                                                         \
        LEGACY_STEP(PAIR, HI16, 3, acc1);                                                         \
    }                                                                                             \
    float tail[4];                                                                                \
    UNROLL for (int t = 0; t < NA; t++) tail[t] = MIN##_ON ? hsum256_ps(accm[t]) : 0.0f;         \
    for (; i < nb; i += 2) {                                                                      \
        const int64_t j = i + 1 < nb ? i + 1 : i;                                                 \
        const wpair p = PAIR##_w(w + i, w + j, vnni);                                             \
        UNROLL for (int t = 0; t < NA; t++) {                                                     \
            const float d0 = h2f(w[i].d) * h2f(a[t][i].d), d1 = j > i ? h2f(w[j].d) * h2f(a[t][j].d) : 0.0f; \
            const __m512 d = HI16 ? scale_pair_scalar_hi16(d0, d1) : scale_pair_scalar(d0, d1);   \
            const __m512i qa = load2x256(a[t][i].qs, a[t][j].qs);                                 \
            acc0[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(PAIR##_a(p, qa, vnni)), d, acc0[t]);    \
            MIN(i, j);                                                                            \
        }                                                                                         \
    }                                                                                             \
    UNROLL for (int t = 0; t < NA; t++) out[t] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[t], acc1[t])) + tail[t]

/* the m*s terms of blocks i and j (once when j == i), for Q4_1/Q5_1 */
#define WITH_MIN(i, j) tail[t] += h2f(w[i].m) * h2f(a[t][i].s) + (j > i ? h2f(w[j].m) * h2f(a[t][j].s) : 0.0f)
#define WITH_MIN_ON 1
#define NO_MIN(i, j) (void)0
#define NO_MIN_ON 0

#define KERNEL_ARGS const void *vw, const void *va, size_t stride, int64_t n, float *out, const bool vnni, const int NA

ALWAYS_INLINE void dot_q4_0_n(KERNEL_ARGS) { LEGACY_LOOP(block_q4_0, block_q8_0, q4_0, NO_MIN, vnni); }
ALWAYS_INLINE void dot_q5_0_n(KERNEL_ARGS) { LEGACY_LOOP(block_q5_0, block_q8_0, q5_0, NO_MIN, false); }
ALWAYS_INLINE void dot_q8_0_n(KERNEL_ARGS) { LEGACY_LOOP(block_q8_0, block_q8_0, q8_0, NO_MIN, false); }
ALWAYS_INLINE void dot_q4_1_n(KERNEL_ARGS) { LEGACY_LOOP(block_q4_1, block_q8_1, q4_1, WITH_MIN, vnni); }
ALWAYS_INLINE void dot_q5_1_n(KERNEL_ARGS) { LEGACY_LOOP(block_q5_1, block_q8_1, q5_1, WITH_MIN, false); }
#undef WITH_MIN
#undef WITH_MIN_ON
#undef NO_MIN
#undef NO_MIN_ON
#undef LEGACY_LOOP
#undef LEGACY_STEP
#undef q5_1_a

/* ---------------------------------------------------------------------------
 * K-quants x Q8_K
 * ------------------------------------------------------------------------- */

/* pshufb mask turning 8 bytes (repeated in each 64-bit element) into int16
 * lanes: byte j in the low 256 bits, byte k in the high 256 bits */
ALWAYS_INLINE __m512i pick_u8_to_i16(int j, int k) {
    const __m256i lo = _mm256_set1_epi16((short)(0x8000 | j));
    const __m256i hi = _mm256_set1_epi16((short)(0x8000 | k));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* Sum of the two 256-bit halves of the int32 lanes. */
ALWAYS_INLINE __m256i fold256(__m512i v) {
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

/* Q4_K and Q5_K. Per 128 values (c2 = 0, 1): 64 bytes of qs hold
 * sub-blocks 4c2 (low nibbles, bytes 0..31), 4c2+1 (high), 4c2+2 (low,
 * bytes 32..63), 4c2+3 (high). The activations are loaded to match:
 * [sub 4c2 | sub 4c2+2] and [sub 4c2+1 | sub 4c2+3]. The mins term is
 * sum_j mn_j * (bsum_2j + bsum_2j+1), one madd. */
ALWAYS_INLINE void dot_q45_K_n(const void *vw, const void *va, size_t stride, int64_t n, float *out, const bool q5,
                               const bool vnni, const int NA) {
    ACT_ROWS(block_q8_K, a, va, stride, NA);
    const int64_t nb = n / QK_K;
    const size_t bsize = q5 ? sizeof(block_q5_K) : sizeof(block_q4_K);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i pick[4] = {pick_u8_to_i16(0, 2), pick_u8_to_i16(1, 3), pick_u8_to_i16(4, 6), pick_u8_to_i16(5, 7)};
    /* bsum lane 2k, 2k+1 take min k */
    const __m256i pick_mn = _mm256_setr_epi8(0, -128, 0, -128, 1, -128, 1, -128, 2, -128, 2, -128, 3, -128, 3, -128,
                                             4, -128, 4, -128, 5, -128, 5, -128, 6, -128, 6, -128, 7, -128, 7, -128);
    __m256 acc[4], accm[4];
    UNROLL for (int t = 0; t < NA; t++) acc[t] = accm[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *blk = (const uint8_t *)vw + (size_t)i * bsize;
        const block_q4_K *b4 = (const block_q4_K *)blk;
        const block_q5_K *b5 = (const block_q5_K *)blk;
        const uint8_t *qs = q5 ? b5->qs : b4->qs;
        maybe_prefetch_ahead(blk, bsize);
        uint64_t sc8, mn8;
        k4_scales_mins(q5 ? b5->scales : b4->scales, &sc8, &mn8);
        const __m256i mn16 = _mm256_shuffle_epi8(_mm256_set1_epi64x((long long)mn8), pick_mn);
        const __m512i sc = _mm512_set1_epi64((long long)sc8);
        __m512i hb = _mm512_setzero_si512();
        if (q5) hb = _mm512_broadcast_i64x4(load256(b5->qh));
        __m512i lo[2], hi[2], scv[4];
        for (int c2 = 0; c2 < 2; c2++) {
            const __m512i q = _mm512_loadu_si512((const void *)(qs + 64 * c2));
            lo[c2] = _mm512_and_si512(q, m4);
            hi[c2] = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
            if (q5) {
                /* bit j of qh[l] is the fifth bit of sub-block j: the low 256
                 * bits take bits 4c2 (lo) / 4c2+1 (hi), the high ones 4c2+2 / 4c2+3 */
                const __m512i one = _mm512_set1_epi8(1);
                const __m512i h = _mm512_srlv_epi64(hb, _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2));
                lo[c2] = _mm512_or_si512(lo[c2], _mm512_slli_epi16(_mm512_and_si512(h, one), 4));
                hi[c2] = _mm512_or_si512(hi[c2], _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 1), one), 4));
                hb = _mm512_srli_epi16(hb, 4);
            }
            scv[2 * c2] = _mm512_shuffle_epi8(sc, pick[2 * c2]);
            scv[2 * c2 + 1] = _mm512_shuffle_epi8(sc, pick[2 * c2 + 1]);
        }
        /* d and dmin are adjacent fp16s at the start of the block */
        uint32_t dd;
        memcpy(&dd, blk, 4);
        const __m128 fw = _mm_cvtph_ps(_mm_cvtsi32_si128((int)dd));
        UNROLL for (int t = 0; t < NA; t++) {
            const block_q8_K *at = a[t] + i;
            const __m256i mprod = _mm256_madd_epi16(mn16, load256(at->bsums));
            __m512i sumi = _mm512_setzero_si512();
            for (int c2 = 0; c2 < 2; c2++) {
                const int8_t *qa = at->qs + 128 * c2;
                const __m512i a_lo = load2x256(qa, qa + 64), a_hi = load2x256(qa + 32, qa + 96);
                sumi = dpwssd(sumi, _mm512_maddubs_epi16(lo[c2], a_lo), scv[2 * c2], vnni);
                sumi = dpwssd(sumi, _mm512_maddubs_epi16(hi[c2], a_hi), scv[2 * c2 + 1], vnni);
            }
            const __m128 f = _mm_mul_ps(fw, _mm_set1_ps(at->d));
            acc[t] = _mm256_fmadd_ps(_mm256_broadcastss_ps(f), _mm256_cvtepi32_ps(fold256(sumi)), acc[t]);
            accm[t] = _mm256_fmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(f)), _mm256_cvtepi32_ps(mprod), accm[t]);
        }
    }
    UNROLL for (int t = 0; t < NA; t++) out[t] = hsum256_ps(_mm256_sub_ps(acc[t], accm[t]));
}

ALWAYS_INLINE void dot_q4_K_n(KERNEL_ARGS) { dot_q45_K_n(vw, va, stride, n, out, false, vnni, NA); }
ALWAYS_INLINE void dot_q5_K_n(KERNEL_ARGS) { dot_q45_K_n(vw, va, stride, n, out, true, vnni, NA); }

/* Q6_K: per half h, ql[64h..] = [l0 | l1] gives r = 0, 1 (low nibbles) and
 * r = 2, 3 (high nibbles); qh[32h..] broadcast to both 256-bit halves gives
 * the two high bits (shifted by r). q + 32 is unsigned (0..63); the -32 is
 * applied as 32 * sum_j sc_j*bsum_j. Scales: 128-bit lane k of the r-pair
 * (r, r+1) is sub-block 8h + 2r + k. */
ALWAYS_INLINE void dot_q6_K_n(KERNEL_ARGS) {
    const block_q6_K *w = vw;
    ACT_ROWS(block_q8_K, a, va, stride, NA);
    const __m512i m4 = _mm512_set1_epi8(0x0F), m3 = _mm512_set1_epi8(0x30);
    const __m512i sh01 = _mm512_setr_epi64(4, 4, 4, 4, 2, 2, 2, 2); /* left: bits 0-1 / 2-3 -> 4-5 */
    const __m512i sh23 = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2); /* right: bits 4-5 / 6-7 -> 4-5 */
    /* lane k picks int16 scale k (even group) or 4 + k (odd group) of its 8 */
    const __m512i pick_even = _mm512_set_epi64(0x0706070607060706, 0x0706070607060706, 0x0504050405040504,
                                               0x0504050405040504, 0x0302030203020302, 0x0302030203020302,
                                               0x0100010001000100, 0x0100010001000100);
    const __m512i pick_odd = _mm512_add_epi8(pick_even, _mm512_set1_epi8(8));
    __m256 acc[4];
    UNROLL for (int t = 0; t < NA; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        maybe_prefetch_ahead(w + i, sizeof *w);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w[i].scales));
        const __m512i sc_lo = _mm512_broadcast_i32x4(_mm256_castsi256_si128(sc16)); /* scales 0-7 */
        const __m512i sc_hi = _mm512_broadcast_i32x4(_mm256_extracti128_si256(sc16, 1)); /* 8-15 */
        __m512i q01[2], q23[2], se[2], so[2];
        for (int h = 0; h < 2; h++) {
            const __m512i l = _mm512_loadu_si512((const void *)(w[i].ql + 64 * h));
            const __m512i qh = _mm512_broadcast_i64x4(load256(w[i].qh + 32 * h));
            q01[h] = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_and_si512(_mm512_sllv_epi64(qh, sh01), m3));
            q23[h] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                     _mm512_and_si512(_mm512_srlv_epi64(qh, sh23), m3));
            const __m512i sc = h ? sc_hi : sc_lo;
            se[h] = _mm512_shuffle_epi8(sc, pick_even);
            so[h] = _mm512_shuffle_epi8(sc, pick_odd);
        }
        const float dw = h2f(w[i].d);
        UNROLL for (int t = 0; t < NA; t++) {
            const block_q8_K *at = a[t] + i;
            const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(sc16, load256(at->bsums)), 5);
            __m512i sumi = _mm512_setzero_si512();
            for (int h = 0; h < 2; h++) {
                const int8_t *qa = at->qs + 128 * h;
                sumi = dpwssd(sumi, _mm512_maddubs_epi16(q01[h], _mm512_loadu_si512((const void *)qa)), se[h], vnni);
                sumi = dpwssd(sumi, _mm512_maddubs_epi16(q23[h], _mm512_loadu_si512((const void *)(qa + 64))), so[h], vnni);
            }
            const __m256i s256 = _mm256_sub_epi32(fold256(sumi), corr);
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * at->d), _mm256_cvtepi32_ps(s256), acc[t]);
        }
    }
    UNROLL for (int t = 0; t < NA; t++) out[t] = hsum256_ps(acc[t]);
}

/* Q2_K and Q3_K: the 2-bit planes of 128 values (32 bytes of qs) are
 * broadcast to both 256-bit halves and shifted per half, so each zmm holds
 * values 64t..64t+63 of a half h in the activation's order (the low half is
 * plane 2t, the high half plane 2t+1). Sub-block scales as in Q6_K. */
ALWAYS_INLINE __m512i plane_shift(int t) { /* right shifts: planes 2t (low half), 2t+1 (high) */
    return _mm512_setr_epi64(4 * t, 4 * t, 4 * t, 4 * t, 4 * t + 2, 4 * t + 2, 4 * t + 2, 4 * t + 2);
}

/* pshufb masks: 128-bit lane k picks int16 scale k (t = 0) or 4 + k (t = 1)
 * of the 8 broadcast in every lane */
ALWAYS_INLINE __m512i pick_lane_scale(int t) {
    const __m512i even = _mm512_set_epi64(0x0706070607060706, 0x0706070607060706, 0x0504050405040504,
                                          0x0504050405040504, 0x0302030203020302, 0x0302030203020302,
                                          0x0100010001000100, 0x0100010001000100);
    return t ? _mm512_add_epi8(even, _mm512_set1_epi8(8)) : even;
}

/* The four 64-value pieces (h, t) of a Q2_K/Q3_K super-block against one
 * activation row: sum of maddubs * sub-block scales. */
ALWAYS_INLINE __m256i k23_sumi(const __m512i q[4], const __m512i scv[4], const block_q8_K *at, const bool vnni) {
    __m512i sumi = _mm512_setzero_si512();
    for (int k = 0; k < 4; k++) {
        const __m512i qa = _mm512_loadu_si512((const void *)(at->qs + 64 * k));
        sumi = dpwssd(sumi, _mm512_maddubs_epi16(q[k], qa), scv[k], vnni);
    }
    return fold256(sumi);
}

/* Q3_K: q + 4 = low 2 bits, plus 4 where the hmask bit is set (a mask
 * register test and a masked add), in 0..7; the -4 is applied as
 * 4 * sum_j sc_j*bsum_j. */
ALWAYS_INLINE void dot_q3_K_n(KERNEL_ARGS) {
    const block_q3_K *w = vw;
    ACT_ROWS(block_q8_K, a, va, stride, NA);
    const __m512i m3 = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
    __m256 acc[4];
    UNROLL for (int t = 0; t < NA; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        maybe_prefetch_ahead(w + i, sizeof *w);
        uint32_t a0, a1, a2;
        memcpy(&a0, w[i].scales, 4);
        memcpy(&a1, w[i].scales + 4, 4);
        memcpy(&a2, w[i].scales + 8, 4);
        const __m128i sc8 = _mm_sub_epi8(
            _mm_set_epi32((int)(((a1 >> 4) & 0x0F0F0F0F) | (((a2 >> 6) & 0x03030303) << 4)),
                          (int)(((a0 >> 4) & 0x0F0F0F0F) | (((a2 >> 4) & 0x03030303) << 4)),
                          (int)((a1 & 0x0F0F0F0F) | (((a2 >> 2) & 0x03030303) << 4)),
                          (int)((a0 & 0x0F0F0F0F) | ((a2 & 0x03030303) << 4))),
            _mm_set1_epi8(32));
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        const __m512i hm = _mm512_broadcast_i64x4(load256(w[i].hmask));
        __m512i q[4], scv[4];
        for (int h = 0; h < 2; h++) {
            const __m512i q2 = _mm512_broadcast_i64x4(load256(w[i].qs + 32 * h));
            const __m512i sc = _mm512_broadcast_i32x4(h ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
            for (int p = 0; p < 2; p++) {
                const int k = 4 * h + 2 * p; /* hmask bit of plane 2p; 2p+1 in the high half */
                const __m512i sel = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << k)),
                                                       _mm256_set1_epi8((char)(1 << (k + 1))), 1);
                __m512i v = _mm512_and_si512(_mm512_srlv_epi64(q2, plane_shift(p)), m3);
                q[2 * h + p] = _mm512_mask_add_epi8(v, _mm512_test_epi8_mask(hm, sel), v, four);
                scv[2 * h + p] = _mm512_shuffle_epi8(sc, pick_lane_scale(p));
            }
        }
        const float dw = h2f(w[i].d);
        UNROLL for (int t = 0; t < NA; t++) {
            const block_q8_K *at = a[t] + i;
            const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(sc16, load256(at->bsums)), 2);
            const __m256i s256 = _mm256_sub_epi32(k23_sumi(q, scv, at, vnni), corr);
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * at->d), _mm256_cvtepi32_ps(s256), acc[t]);
        }
    }
    UNROLL for (int t = 0; t < NA; t++) out[t] = hsum256_ps(acc[t]);
}

/* Q2_K: 2-bit q in 0..3, scale | min nibbles per 16 values; the mins term
 * is sum_j mn_j*bsum_j, one madd. */
ALWAYS_INLINE void dot_q2_K_n(KERNEL_ARGS) {
    const block_q2_K *w = vw;
    ACT_ROWS(block_q8_K, a, va, stride, NA);
    const __m512i m3 = _mm512_set1_epi8(3);
    __m256 acc[4];
    UNROLL for (int t = 0; t < NA; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        maybe_prefetch_ahead(w + i, sizeof *w);
        const __m128i sb = _mm_loadu_si128((const __m128i *)w[i].scales);
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sb, 4), _mm_set1_epi8(0x0F)));
        const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sb, _mm_set1_epi8(0x0F)));
        __m512i q[4], scv[4];
        for (int h = 0; h < 2; h++) {
            const __m512i q2 = _mm512_broadcast_i64x4(load256(w[i].qs + 32 * h));
            const __m512i sc = _mm512_broadcast_i32x4(h ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
            for (int p = 0; p < 2; p++) {
                q[2 * h + p] = _mm512_and_si512(_mm512_srlv_epi64(q2, plane_shift(p)), m3);
                scv[2 * h + p] = _mm512_shuffle_epi8(sc, pick_lane_scale(p));
            }
        }
        /* d and dmin are the adjacent fp16s at the end of the block */
        uint32_t dd;
        memcpy(&dd, &w[i].d, 4);
        const __m128 fw = _mm_cvtph_ps(_mm_cvtsi32_si128((int)dd));
        UNROLL for (int t = 0; t < NA; t++) {
            const block_q8_K *at = a[t] + i;
            const __m256i mprod = _mm256_madd_epi16(mins, load256(at->bsums));
            const __m256i s256 = k23_sumi(q, scv, at, vnni);
            const __m128 f = _mm_mul_ps(fw, _mm_set1_ps(at->d));
            acc[t] = _mm256_fmadd_ps(_mm256_broadcastss_ps(f), _mm256_cvtepi32_ps(s256), acc[t]);
            acc[t] = _mm256_fnmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(f)), _mm256_cvtepi32_ps(mprod), acc[t]);
        }
    }
    UNROLL for (int t = 0; t < NA; t++) out[t] = hsum256_ps(acc[t]);
}

/* ---------------------------------------------------------------------------
 * Float weights x F32 activations, written once for NR weight rows (1 or 2)
 * and NA activation rows (1 or 4). Each (row, activation) pair sums in two
 * accumulators, the 16-value chunks of every 32 taking turns, so a chunk's
 * arithmetic is the same whatever else the call computes: dot, dot4 and
 * the tile (dot2xn) agree bit for bit. The tile is the batch kernel: a weight chunk is
 * converted once for up to 4 activation rows and an activation chunk loaded
 * once for 2 weight rows, 12 loads for 16 FMAs where one row against 4 takes
 * 20 (the loads, not the FMAs, bound a verify batch's float matmul); with 2
 * or 3 tokens its independent sums also hide the FMA latency that a lone
 * dot per token, two chains deep, would wait on. The loop is unrolled twice:
 * on the AMD EPYC (Zen 4) 2 rows x 4 tokens from L1 went from 10.2 to 15.1
 * MACs per cycle (of 16), 2 x 2 and 2 x 3 to 14.5; the order of each sum is
 * unchanged.
 * ------------------------------------------------------------------------- */

ALWAYS_INLINE __m512 load16_f32(const float *p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
ALWAYS_INLINE __m512 load16_f16(const fp16_t *p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}
ALWAYS_INLINE __m512 load16_bf16(const bf16_t *p, __mmask16 m) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}

#define FLOAT_DOT(name, WT, LOAD)                                                                 \
    ALWAYS_INLINE void name(const void *vw, size_t w_stride, const void *va, size_t stride, int64_t n, float *out, \
                            const int NR, const int NA) {                                         \
        const WT *w[2];                                                                           \
        UNROLL for (int r = 0; r < NR; r++) w[r] = (const WT *)((const uint8_t *)vw + (size_t)r * w_stride); \
        ACT_ROWS(float, x, va, stride, NA);                                                       \
        __m512 s0[2][4], s1[2][4];                                                                \
        UNROLL for (int r = 0; r < NR; r++) UNROLL for (int t = 0; t < NA; t++) s0[r][t] = s1[r][t] = _mm512_setzero_ps(); \
        int64_t i = 0;                                                                            \
        _Pragma("GCC unroll 2") for (; i + 32 <= n; i += 32) {                                   \
            __m512 wa[2], wb[2];                                                                  \
            UNROLL for (int r = 0; r < NR; r++) {                                                 \
                if (NA > 1) prefetch_batch(w[r] + i, 32 * sizeof(WT));                            \
                else maybe_prefetch_ahead(w[r] + i, 32 * sizeof(WT));                             \
                wa[r] = LOAD(w[r] + i, 0xFFFF);                                                   \
                wb[r] = LOAD(w[r] + i + 16, 0xFFFF);                                              \
            }                                                                                     \
            UNROLL for (int t = 0; t < NA; t++) {                                                 \
                const __m512 xa = _mm512_loadu_ps(x[t] + i), xb = _mm512_loadu_ps(x[t] + i + 16); \
                UNROLL for (int r = 0; r < NR; r++) {                                             \
                    s0[r][t] = _mm512_fmadd_ps(wa[r], xa, s0[r][t]);                              \
                    s1[r][t] = _mm512_fmadd_ps(wb[r], xb, s1[r][t]);                              \
                }                                                                                 \
            }                                                                                     \
        }                                                                                         \
        /* the last 1..31 values: the first chunk to s0, the second to s1, as above */           \
        for (int c = 0; i < n; i += 16, c++) {                                                    \
            const __mmask16 m = mask16_first(n - i);                                              \
            __m512 wv[2];                                                                         \
            UNROLL for (int r = 0; r < NR; r++) wv[r] = LOAD(w[r] + i, m);                        \
            UNROLL for (int t = 0; t < NA; t++) {                                                 \
                const __m512 xv = _mm512_maskz_loadu_ps(m, x[t] + i);                             \
                UNROLL for (int r = 0; r < NR; r++) {                                             \
                    if (c == 0) s0[r][t] = _mm512_fmadd_ps(wv[r], xv, s0[r][t]);                  \
                    else s1[r][t] = _mm512_fmadd_ps(wv[r], xv, s1[r][t]);                         \
                }                                                                                 \
            }                                                                                     \
        }                                                                                         \
        UNROLL for (int r = 0; r < NR; r++) UNROLL for (int t = 0; t < NA; t++)                   \
            out[r * NA + t] = _mm512_reduce_add_ps(_mm512_add_ps(s0[r][t], s1[r][t]));            \
    }

FLOAT_DOT(dot_f32_n, float, load16_f32)
FLOAT_DOT(dot_f16_n, fp16_t, load16_f16)
FLOAT_DOT(dot_bf16_n, bf16_t, load16_bf16)
#undef FLOAT_DOT

/* ---------------------------------------------------------------------------
 * dot (one activation row) and dot4 (four) of each kernel, with and without
 * VNNI for the integer ones, and the table
 * ------------------------------------------------------------------------- */

#define FLOAT_VARIANTS(name)                                                                      \
    static float name(const void *w, const void *a, int64_t n) {                                  \
        float o[1];                                                                               \
        name##_n(w, 0, a, 0, n, o, 1, 1);                                                         \
        return o[0];                                                                              \
    }                                                                                             \
    static void name##4(const void *w, const void *a, size_t s, int64_t n, float out[4]) {        \
        name##_n(w, 0, a, s, n, out, 1, 4);                                                       \
    }                                                                                             \
    static void name##2xn(const void *w, size_t ws, const void *a, size_t s, int64_t n, int na, float *out) { \
        switch (na) {                                                                             \
        case 1: name##_n(w, ws, a, s, n, out, 2, 1); break;                                       \
        case 2: name##_n(w, ws, a, s, n, out, 2, 2); break;                                       \
        case 3: name##_n(w, ws, a, s, n, out, 2, 3); break;                                       \
        default: name##_n(w, ws, a, s, n, out, 2, 4); break;                                      \
        }                                                                                         \
    }

FLOAT_VARIANTS(dot_f32)
FLOAT_VARIANTS(dot_f16)
FLOAT_VARIANTS(dot_bf16)
#undef FLOAT_VARIANTS

#define VARIANTS(name)                                                                            \
    static float name##_vnni(const void *w, const void *a, int64_t n) {                           \
        float o[1];                                                                               \
        name##_n(w, a, 0, n, o, true, 1);                                                         \
        return o[0];                                                                              \
    }                                                                                             \
    static float name##_novnni(const void *w, const void *a, int64_t n) {                         \
        float o[1];                                                                               \
        name##_n(w, a, 0, n, o, false, 1);                                                        \
        return o[0];                                                                              \
    }                                                                                             \
    static void name##4_vnni(const void *w, const void *a, size_t s, int64_t n, float out[4]) {   \
        name##_n(w, a, s, n, out, true, 4);                                                       \
    }                                                                                             \
    static void name##4_novnni(const void *w, const void *a, size_t s, int64_t n, float out[4]) { \
        name##_n(w, a, s, n, out, false, 4);                                                      \
    }

VARIANTS(dot_q4_0)
VARIANTS(dot_q5_0)
VARIANTS(dot_q8_0)
VARIANTS(dot_q4_1)
VARIANTS(dot_q5_1)
VARIANTS(dot_q4_K)
VARIANTS(dot_q5_K)
VARIANTS(dot_q6_K)
VARIANTS(dot_q2_K)
VARIANTS(dot_q3_K)
#undef VARIANTS

void kernels_fill_avx512(kernel_entry table[], int n_types, bool int8_dot, bool prefetch) {
    const kernel_quantizers quantizers = {act_quantize_q8_0, act_quantize_q8_1, act_quantize_q8_K};
    sw_prefetch = prefetch;
    /* every AVX-512 CPU this path runs on has AVX2+FMA+F16C: start from those */
    kernels_fill_avx2(table, n_types);
#define K(fn) (int8_dot ? fn##_vnni : fn##_novnni)
#define K4(fn) (int8_dot ? fn##4_vnni : fn##4_novnni)
    const kernel_dots rows[] = {
        {QT_F32, dot_f32, dot_f324, {dot_f322xn, 2, 4}, NO_TILE},
        {QT_F16, dot_f16, dot_f164, {dot_f162xn, 2, 4}, NO_TILE},
        {QT_BF16, dot_bf16, dot_bf164, {dot_bf162xn, 2, 4}, NO_TILE},
        {QT_Q4_0, K(dot_q4_0), K4(dot_q4_0), NO_TILES},
        {QT_Q5_0, K(dot_q5_0), K4(dot_q5_0), NO_TILES},
        {QT_Q8_0, K(dot_q8_0), K4(dot_q8_0), NO_TILES},
        {QT_Q4_1, K(dot_q4_1), K4(dot_q4_1), NO_TILES},
        {QT_Q5_1, K(dot_q5_1), K4(dot_q5_1), NO_TILES},
        {QT_Q4_K, K(dot_q4_K), K4(dot_q4_K), NO_TILES},
        {QT_Q5_K, K(dot_q5_K), K4(dot_q5_K), NO_TILES},
        {QT_Q6_K, K(dot_q6_K), K4(dot_q6_K), NO_TILES},
        {QT_Q2_K, K(dot_q2_K), K4(dot_q2_K), NO_TILES},
        {QT_Q3_K, K(dot_q3_K), K4(dot_q3_K), NO_TILES},
    };
#undef K
#undef K4
    kernels_set(table, n_types, &quantizers, rows, sizeof rows / sizeof rows[0]);
}

/* silu(g) * u, 16 at a time; the tail through a mask (the same arithmetic) */
static void swiglu_512(float *g, const float *u, size_t n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = mask16_first((int64_t)(n - i));
        const __m512 x = _mm512_maskz_loadu_ps(m, g + i);
        const __m512 s = _mm512_div_ps(x, _mm512_add_ps(one, exp512(_mm512_sub_ps(_mm512_setzero_ps(), x))));
        _mm512_mask_storeu_ps(g + i, m, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, u + i)));
    }
}

swiglu_fn swiglu_avx512(void) { return swiglu_512; }

/* gelu(g) * u as x / (1 + exp(-2z)) (kernels.c: geglu_scalar), 16 at a time */
static void geglu_512(float *g, const float *u, size_t n) {
    const __m512 one = _mm512_set1_ps(1.0f), c = _mm512_set1_ps(-1.5957691216057308f), k = _mm512_set1_ps(0.044715f);
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = mask16_first((int64_t)(n - i));
        const __m512 x = _mm512_maskz_loadu_ps(m, g + i);
        const __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
        const __m512 nz2 = _mm512_mul_ps(c, _mm512_fmadd_ps(k, x3, x));
        const __m512 s = _mm512_div_ps(x, _mm512_add_ps(one, exp512(nz2)));
        _mm512_mask_storeu_ps(g + i, m, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, u + i)));
    }
}

swiglu_fn geglu_avx512(void) { return geglu_512; }

/* kernels.h: lowrank_fn, 64 outputs a step in four independent chains; the tail through masks */
static void lowrank_512(const float *u, int r, const float *bt, size_t stride, size_t n, float *acc) {
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int k = 0; k < r; k++) {
            const __m512 uk = _mm512_set1_ps(u[k]);
            const float *row = bt + (size_t)k * stride + i;
            a0 = _mm512_fmadd_ps(uk, _mm512_loadu_ps(row), a0);
            a1 = _mm512_fmadd_ps(uk, _mm512_loadu_ps(row + 16), a1);
            a2 = _mm512_fmadd_ps(uk, _mm512_loadu_ps(row + 32), a2);
            a3 = _mm512_fmadd_ps(uk, _mm512_loadu_ps(row + 48), a3);
        }
        _mm512_storeu_ps(acc + i, a0), _mm512_storeu_ps(acc + i + 16, a1);
        _mm512_storeu_ps(acc + i + 32, a2), _mm512_storeu_ps(acc + i + 48, a3);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = mask16_first((int64_t)(n - i));
        __m512 a = _mm512_setzero_ps();
        for (int k = 0; k < r; k++)
            a = _mm512_fmadd_ps(_mm512_set1_ps(u[k]), _mm512_maskz_loadu_ps(m, bt + (size_t)k * stride + i), a);
        _mm512_mask_storeu_ps(acc + i, m, a);
    }
}

lowrank_fn lowrank_avx512(void) { return lowrank_512; }

/* kernels.h: lowrank4_fn, four rows of u against 32 outputs a step (eight independent chains, each
 * bt load used four times); fewer rows than four go through lowrank_512, the same sums */
static void lowrank4_512(const float *u, size_t us, int T, int r, const float *bt, size_t stride, size_t n,
                         float *acc, size_t as) {
    if (T < 4) {
        for (int t = 0; t < T; t++) lowrank_512(u + (size_t)t * us, r, bt, stride, n, acc + (size_t)t * as);
        return;
    }
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 a[4][2];
        for (int t = 0; t < 4; t++) a[t][0] = a[t][1] = _mm512_setzero_ps();
        for (int k = 0; k < r; k++) {
            const float *row = bt + (size_t)k * stride + i;
            const __m512 b0 = _mm512_loadu_ps(row), b1 = _mm512_loadu_ps(row + 16);
            for (int t = 0; t < 4; t++) {
                const __m512 ut = _mm512_set1_ps(u[(size_t)t * us + (size_t)k]);
                a[t][0] = _mm512_fmadd_ps(ut, b0, a[t][0]);
                a[t][1] = _mm512_fmadd_ps(ut, b1, a[t][1]);
            }
        }
        for (int t = 0; t < 4; t++)
            _mm512_storeu_ps(acc + (size_t)t * as + i, a[t][0]), _mm512_storeu_ps(acc + (size_t)t * as + i + 16, a[t][1]);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = mask16_first((int64_t)(n - i));
        __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
        for (int k = 0; k < r; k++) {
            const __m512 b = _mm512_maskz_loadu_ps(m, bt + (size_t)k * stride + i);
            for (int t = 0; t < 4; t++) a[t] = _mm512_fmadd_ps(_mm512_set1_ps(u[(size_t)t * us + (size_t)k]), b, a[t]);
        }
        for (int t = 0; t < 4; t++) _mm512_mask_storeu_ps(acc + (size_t)t * as + i, m, a[t]);
    }
}

lowrank4_fn lowrank4_avx512(void) { return lowrank4_512; }

#else /* x86-64 built without the AVX-512 flags: every type uses the scalar kernel */

void kernels_fill_avx512(kernel_entry table[], int n_types, bool int8_dot, bool prefetch) {
    (void)table;
    (void)n_types;
    (void)int8_dot;
    (void)prefetch;
}

swiglu_fn swiglu_avx512(void) { return NULL; }
swiglu_fn geglu_avx512(void) { return NULL; }
lowrank_fn lowrank_avx512(void) { return NULL; }
lowrank4_fn lowrank4_avx512(void) { return NULL; }

#endif

#else /* not x86-64 */

swiglu_fn swiglu_avx512(void) { return NULL; }
swiglu_fn geglu_avx512(void) { return NULL; }
lowrank_fn lowrank_avx512(void) { return NULL; }
lowrank4_fn lowrank4_avx512(void) { return NULL; }

typedef int kernels_avx512_unused;

#endif
