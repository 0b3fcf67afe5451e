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

#include "quant.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* ---------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------- */

ALWAYS_INLINE float h2f(fp16_t h) { return _cvtsh_ss(h); }

ALWAYS_INLINE float hsum256_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

ALWAYS_INLINE __m256i load256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* Two 32-byte rows (from two blocks) in one zmm. */
ALWAYS_INLINE __m512i load2x256(const void *lo, const void *hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(load256(lo)), load256(hi), 1);
}

/* Weight rows are streamed once per token: ask for the bytes PREFETCH_BYTES
 * ahead of those being read (usually the next row), which keeps a single
 * core close to DRAM bandwidth. Prefetches never fault, and the address is
 * formed as an integer so no pointer leaves its object. */
#define PREFETCH_BYTES 2048
ALWAYS_INLINE void prefetch_ahead(const void *p, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64)
        _mm_prefetch((const char *)(uintptr_t)((uintptr_t)p + PREFETCH_BYTES + o), _MM_HINT_T0);
}

/* acc + sum of 4 (unsigned u * signed s) products per int32 lane. Exact when
 * the 16-bit pair sums of maddubs cannot saturate (u <= 128 here). */
ALWAYS_INLINE __m512i dpbusd(__m512i acc, __m512i u, __m512i s, const bool vnni) {
    if (vnni) return _mm512_dpbusd_epi32(acc, u, s);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)));
}

/* acc + pairwise int16 products (p * scale) per int32 lane. */
ALWAYS_INLINE __m512i dpwssd(__m512i acc, __m512i p, __m512i sc, const bool vnni) {
    if (vnni) return _mm512_dpwssd_epi32(acc, p, sc);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(p, sc));
}

/* Four fp16 values at a byte stride, packed in a uint64 (integer loads and
 * shifts: cheaper here than vector inserts or gathers, whose ports the dot
 * products need). */
ALWAYS_INLINE uint64_t fp16x4(const uint8_t *p, size_t stride) {
    uint16_t h[4];
    for (int k = 0; k < 4; k++) memcpy(&h[k], p + k * stride, 2);
    return (uint64_t)h[0] | (uint64_t)h[1] << 16 | (uint64_t)h[2] << 32 | (uint64_t)h[3] << 48;
}

/* dw*da of 8 consecutive blocks: the fp16 at byte offset off of each weight
 * block (size wsize) times the one at the same offset of each activation
 * block (d at 0; the m of Q4_1/Q5_1 and the s of Q8_1 at 2). */
ALWAYS_INLINE __m256 scales8(const void *w, size_t wsize, const void *a, size_t asize, size_t off) {
    const uint8_t *pw = (const uint8_t *)w + off, *pa = (const uint8_t *)a + off;
    const __m128i hw = _mm_set_epi64x((long long)fp16x4(pw + 4 * wsize, wsize), (long long)fp16x4(pw, wsize));
    const __m128i ha = _mm_set_epi64x((long long)fp16x4(pa + 4 * asize, asize), (long long)fp16x4(pa, asize));
    return _mm256_mul_ps(_mm256_cvtph_ps(hw), _mm256_cvtph_ps(ha));
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

ALWAYS_INLINE int act_q8_0_block(const float *x, fp16_t *d16, int8_t *qs, float *d_out) {
    const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float d = amax / 127.0f;
    *d16 = _cvtss_sh(d, 0);
    *d_out = d;
    const __m512 id = _mm512_set1_ps(*d16 != 0 ? 127.0f / amax : 0.0f);
    const __m512i i0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, id));
    const __m512i i1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, id));
    _mm_storeu_si128((__m128i *)qs, _mm512_cvtsepi32_epi8(i0));
    _mm_storeu_si128((__m128i *)(qs + 16), _mm512_cvtsepi32_epi8(i1));
    return _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
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

/* With VNNI, the high nibbles stay in place and the offset is 8 or 8*16. */
ALWAYS_INLINE __m512i q4_0_pair(const block_q4_0 *w0, const block_q4_0 *w1, const block_q8_0 *a0,
                                const block_q8_0 *a1, const bool vnni) {
    const __m512i qa = load2x256(a0->qs, a1->qs);
    if (vnni) {
        const long long o1 = 0x0808080808080808LL, o16 = (long long)0x8080808080808080ULL;
        const __m512i off = _mm512_set_epi64(o16, o16, o1, o1, o16, o16, o1, o1);
        return _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), nibbles16_x2(w0->qs, w1->qs), qa),
                                _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, qa));
    }
    return dot_offset(nibbles_x2(w0->qs, w1->qs), qa, 8, vnni);
}

ALWAYS_INLINE __m512i q5_0_pair(const block_q5_0 *w0, const block_q5_0 *w1, const block_q8_0 *a0,
                                const block_q8_0 *a1, const bool vnni) {
    const __m512i q = _mm512_or_si512(nibbles_x2(w0->qs, w1->qs), bit5_x2(w0->qh, w1->qh));
    return dot_offset(q, load2x256(a0->qs, a1->qs), 16, vnni);
}

ALWAYS_INLINE __m512i q4_1_pair(const block_q4_1 *w0, const block_q4_1 *w1, const block_q8_1 *a0,
                                const block_q8_1 *a1, const bool vnni) {
    if (vnni)
        return _mm512_dpbusd_epi32(_mm512_setzero_si512(), nibbles16_x2(w0->qs, w1->qs), load2x256(a0->qs, a1->qs));
    return dpbusd(_mm512_setzero_si512(), nibbles_x2(w0->qs, w1->qs), load2x256(a0->qs, a1->qs), vnni);
}

ALWAYS_INLINE __m512i q5_1_pair(const block_q5_1 *w0, const block_q5_1 *w1, const block_q8_1 *a0,
                                const block_q8_1 *a1, const bool vnni) {
    const __m512i q = _mm512_or_si512(nibbles_x2(w0->qs, w1->qs), bit5_x2(w0->qh, w1->qh));
    return dpbusd(_mm512_setzero_si512(), q, load2x256(a0->qs, a1->qs), vnni);
}

/* Q8_0 weights are signed: VNNI takes w + 128 (unsigned) and removes
 * 128*sum a; without VNNI, |w| times a with w's sign (maddubs of 128*127
 * pairs cannot saturate). */
ALWAYS_INLINE __m512i q8_0_pair(const block_q8_0 *w0, const block_q8_0 *w1, const block_q8_0 *a0,
                                const block_q8_0 *a1, const bool vnni) {
    const __m512i qw = load2x256(w0->qs, w1->qs), qa = load2x256(a0->qs, a1->qs);
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    if (vnni)
        return _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_xor_si512(qw, bias), qa),
                                _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, qa));
    const __m512i sa = _mm512_mask_sub_epi8(qa, _mm512_movepi8_mask(qw), _mm512_setzero_si512(), qa);
    return _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_abs_epi8(qw), sa), _mm512_set1_epi16(1));
}

/* Blocks 2k, 2k+1 of the 8 at wi/ai into acc (k a constant). */
#define LEGACY_STEP(PAIR, HI16, k, acc)                                                           \
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(PAIR(wi + 2 * k, wi + 2 * k + 1, ai + 2 * k, ai + 2 * k + 1, vnni)), \
                          HI16 ? scale_pair_hi16(d8, d8s, k) : scale_pair(d8, k), acc)

/* The loop. PAIR gives the int32 lanes of two blocks; MIN is WITH_MIN for
 * Q4_1/Q5_1 (adds the m*s terms) or NO_MIN; HI16 says PAIR leaves the high
 * nibbles 16x (nibbles16_x2). */
#define LEGACY_LOOP(WT, AT, PAIR, MIN, HI16)                                                      \
    const WT *w = vw;                                                                             \
    const AT *a = va;                                                                             \
    const int64_t nb = n / 32;                                                                    \
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();                                \
    __m256 accm = _mm256_setzero_ps();                                                            \
    int64_t i = 0;                                                                                \
    for (; i + 8 <= nb; i += 8) {                                                                 \
        const WT *wi = w + i;                                                                     \
        const AT *ai = a + i;                                                                     \
        prefetch_ahead(wi, 8 * sizeof(WT));                                                       \
        const __m256 d8 = scales8(wi, sizeof(WT), ai, sizeof(AT), 0);                            \
        const __m256 d8s = _mm256_mul_ps(d8, _mm256_set1_ps(0.0625f));                            \
        if (MIN##_ON) accm = _mm256_add_ps(accm, scales8(wi, sizeof(WT), ai, sizeof(AT), 2)); \
        LEGACY_STEP(PAIR, HI16, 0, acc0);                                                         \
        LEGACY_STEP(PAIR, HI16, 1, acc1);                                                         \
        LEGACY_STEP(PAIR, HI16, 2, acc0);                                                         \
        LEGACY_STEP(PAIR, HI16, 3, acc1);                                                         \
    }                                                                                             \
    float tail = MIN##_ON ? hsum256_ps(accm) : 0.0f;                                              \
    for (; i < nb; i += 2) {                                                                      \
        const int64_t j = i + 1 < nb ? i + 1 : i;                                                 \
        const float d0 = h2f(w[i].d) * h2f(a[i].d), d1 = j > i ? h2f(w[j].d) * h2f(a[j].d) : 0.0f; \
        const __m512 d = HI16 ? scale_pair_scalar_hi16(d0, d1) : scale_pair_scalar(d0, d1);       \
        acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(PAIR(w + i, w + j, a + i, a + j, vnni)), d, acc0); \
        MIN(i, j);                                                                                \
    }                                                                                             \
    return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + tail

/* the m*s terms of blocks i and j (once when j == i), for Q4_1/Q5_1 */
#define WITH_MIN(i, j) tail += h2f(w[i].m) * h2f(a[i].s) + (j > i ? h2f(w[j].m) * h2f(a[j].s) : 0.0f)
#define WITH_MIN_ON 1
#define NO_MIN(i, j) (void)0
#define NO_MIN_ON 0

ALWAYS_INLINE float dot_q4_0_impl(const void *vw, const void *va, int64_t n, const bool vnni) {
    LEGACY_LOOP(block_q4_0, block_q8_0, q4_0_pair, NO_MIN, vnni);
}
ALWAYS_INLINE float dot_q5_0_impl(const void *vw, const void *va, int64_t n, const bool vnni) {
    LEGACY_LOOP(block_q5_0, block_q8_0, q5_0_pair, NO_MIN, false);
}
ALWAYS_INLINE float dot_q8_0_impl(const void *vw, const void *va, int64_t n, const bool vnni) {
    LEGACY_LOOP(block_q8_0, block_q8_0, q8_0_pair, NO_MIN, false);
}
ALWAYS_INLINE float dot_q4_1_impl(const void *vw, const void *va, int64_t n, const bool vnni) {
    LEGACY_LOOP(block_q4_1, block_q8_1, q4_1_pair, WITH_MIN, vnni);
}
ALWAYS_INLINE float dot_q5_1_impl(const void *vw, const void *va, int64_t n, const bool vnni) {
    LEGACY_LOOP(block_q5_1, block_q8_1, q5_1_pair, WITH_MIN, false);
}
#undef WITH_MIN
#undef WITH_MIN_ON
#undef NO_MIN
#undef NO_MIN_ON
#undef LEGACY_LOOP
#undef LEGACY_STEP

/* ---------------------------------------------------------------------------
 * K-quants x Q8_K
 * ------------------------------------------------------------------------- */

/* Q4_K / Q5_K 6-bit scales and mins (ggml's get_scale_min_k4, done on
 * whole words): the 8 scales and the 8 mins, one byte each. */
ALWAYS_INLINE void k4_scales_mins(const uint8_t *s12, uint64_t *sc8, uint64_t *mn8) {
    uint32_t u0, u1, u2;
    memcpy(&u0, s12, 4);
    memcpy(&u1, s12 + 4, 4);
    memcpy(&u2, s12 + 8, 4);
    const uint32_t s_lo = u0 & 0x3F3F3F3F, m_lo = u1 & 0x3F3F3F3F;
    const uint32_t s_hi = (u2 & 0x0F0F0F0F) | (((u0 >> 6) & 0x03030303) << 4);
    const uint32_t m_hi = ((u2 >> 4) & 0x0F0F0F0F) | (((u1 >> 6) & 0x03030303) << 4);
    *sc8 = s_lo | (uint64_t)s_hi << 32;
    *mn8 = m_lo | (uint64_t)m_hi << 32;
}

/* pshufb mask turning 8 bytes (repeated in each 64-bit element) into int16
 * lanes: byte j in the low 256 bits, byte k in the high 256 bits */
ALWAYS_INLINE __m512i pick_u8_to_i16(int j, int k) {
    const __m256i lo = _mm256_set1_epi16((short)(0x8000 | j));
    const __m256i hi = _mm256_set1_epi16((short)(0x8000 | k));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* Q4_K and Q5_K. Per 128 values (c2 = 0, 1): 64 bytes of qs hold
 * sub-blocks 4c2 (low nibbles, bytes 0..31), 4c2+1 (high), 4c2+2 (low,
 * bytes 32..63), 4c2+3 (high). The activations are loaded to match:
 * [sub 4c2 | sub 4c2+2] and [sub 4c2+1 | sub 4c2+3]. The mins term is
 * sum_j mn_j * (bsum_2j + bsum_2j+1), one madd. */
ALWAYS_INLINE float dot_q45_K_impl(const void *vw, const void *va, int64_t n, const bool q5, const bool vnni) {
    const block_q8_K *a = va;
    const int64_t nb = n / QK_K;
    const size_t bsize = q5 ? sizeof(block_q5_K) : sizeof(block_q4_K);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i pick[4] = {pick_u8_to_i16(0, 2), pick_u8_to_i16(1, 3), pick_u8_to_i16(4, 6), pick_u8_to_i16(5, 7)};
    /* bsum lane 2k, 2k+1 take min k */
    const __m256i pick_mn = _mm256_setr_epi8(0, -128, 0, -128, 1, -128, 1, -128, 2, -128, 2, -128, 3, -128, 3, -128,
                                             4, -128, 4, -128, 5, -128, 5, -128, 6, -128, 6, -128, 7, -128, 7, -128);
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *blk = (const uint8_t *)vw + (size_t)i * bsize;
        const block_q4_K *b4 = (const block_q4_K *)blk;
        const block_q5_K *b5 = (const block_q5_K *)blk;
        const uint8_t *qs = q5 ? b5->qs : b4->qs;
        prefetch_ahead(blk, bsize);
        uint64_t sc8, mn8;
        k4_scales_mins(q5 ? b5->scales : b4->scales, &sc8, &mn8);
        const __m256i mn16 = _mm256_shuffle_epi8(_mm256_set1_epi64x((long long)mn8), pick_mn);
        const __m256i mprod = _mm256_madd_epi16(mn16, load256(a[i].bsums));
        const __m512i sc = _mm512_set1_epi64((long long)sc8);
        __m512i hb = _mm512_setzero_si512();
        if (q5) hb = _mm512_broadcast_i64x4(load256(b5->qh));
        __m512i sumi = _mm512_setzero_si512();
        for (int c2 = 0; c2 < 2; c2++) {
            const __m512i q = _mm512_loadu_si512((const void *)(qs + 64 * c2));
            __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
            if (q5) {
                /* bit j of qh[l] is the fifth bit of sub-block j: the low 256
                 * bits take bits 4c2 (lo) / 4c2+1 (hi), the high ones 4c2+2 / 4c2+3 */
                const __m512i one = _mm512_set1_epi8(1);
                const __m512i h = _mm512_srlv_epi64(hb, _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2));
                lo = _mm512_or_si512(lo, _mm512_slli_epi16(_mm512_and_si512(h, one), 4));
                hi = _mm512_or_si512(hi, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 1), one), 4));
                hb = _mm512_srli_epi16(hb, 4);
            }
            const int8_t *qa = a[i].qs + 128 * c2;
            const __m512i a_lo = load2x256(qa, qa + 64), a_hi = load2x256(qa + 32, qa + 96);
            sumi = dpwssd(sumi, _mm512_maddubs_epi16(lo, a_lo), _mm512_shuffle_epi8(sc, pick[2 * c2]), vnni);
            sumi = dpwssd(sumi, _mm512_maddubs_epi16(hi, a_hi), _mm512_shuffle_epi8(sc, pick[2 * c2 + 1]), vnni);
        }
        const __m256i s256 = _mm256_add_epi32(_mm512_castsi512_si256(sumi), _mm512_extracti64x4_epi64(sumi, 1));
        /* d and dmin are adjacent fp16s at the start of the block */
        uint32_t dd;
        memcpy(&dd, blk, 4);
        const __m128 f = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)dd)), _mm_set1_ps(a[i].d));
        acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(f), _mm256_cvtepi32_ps(s256), acc);
        accm = _mm256_fmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(f)), _mm256_cvtepi32_ps(mprod), accm);
    }
    return hsum256_ps(_mm256_sub_ps(acc, accm));
}

ALWAYS_INLINE float dot_q4_K_impl(const void *vw, const void *va, int64_t n, const bool vnni) {
    return dot_q45_K_impl(vw, va, n, false, vnni);
}
ALWAYS_INLINE float dot_q5_K_impl(const void *vw, const void *va, int64_t n, const bool vnni) {
    return dot_q45_K_impl(vw, va, n, true, vnni);
}

/* Q6_K: per half h, ql[64h..] = [l0 | l1] gives r = 0, 1 (low nibbles) and
 * r = 2, 3 (high nibbles); qh[32h..] broadcast to both 256-bit halves gives
 * the two high bits (shifted by r). q + 32 is unsigned (0..63); the -32 is
 * applied as 32 * sum_j sc_j*bsum_j. Scales: 128-bit lane k of the r-pair
 * (r, r+1) is sub-block 8h + 2r + k. */
ALWAYS_INLINE float dot_q6_K_impl(const void *vw, const void *va, int64_t n, const bool vnni) {
    const block_q6_K *w = vw;
    const block_q8_K *a = va;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m3 = _mm512_set1_epi8(0x30);
    const __m512i sh01 = _mm512_setr_epi64(4, 4, 4, 4, 2, 2, 2, 2); /* left: bits 0-1 / 2-3 -> 4-5 */
    const __m512i sh23 = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2); /* right: bits 4-5 / 6-7 -> 4-5 */
    /* lane k picks int16 scale k (even group) or 4 + k (odd group) of its 8 */
    const __m512i pick_even = _mm512_set_epi64(0x0706070607060706, 0x0706070607060706, 0x0504050405040504,
                                               0x0504050405040504, 0x0302030203020302, 0x0302030203020302,
                                               0x0100010001000100, 0x0100010001000100);
    const __m512i pick_odd = _mm512_add_epi8(pick_even, _mm512_set1_epi8(8));
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        prefetch_ahead(w + i, sizeof *w);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w[i].scales));
        const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(sc16, load256(a[i].bsums)), 5);
        const __m512i sc_lo = _mm512_broadcast_i32x4(_mm256_castsi256_si128(sc16)); /* scales 0-7 */
        const __m512i sc_hi = _mm512_broadcast_i32x4(_mm256_extracti128_si256(sc16, 1)); /* 8-15 */
        __m512i sumi = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) {
            const __m512i l = _mm512_loadu_si512((const void *)(w[i].ql + 64 * h));
            const __m512i qh = _mm512_broadcast_i64x4(load256(w[i].qh + 32 * h));
            const __m512i q01 = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_and_si512(_mm512_sllv_epi64(qh, sh01), m3));
            const __m512i q23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                                _mm512_and_si512(_mm512_srlv_epi64(qh, sh23), m3));
            const int8_t *qa = a[i].qs + 128 * h;
            const __m512i sc = h ? sc_hi : sc_lo;
            sumi = dpwssd(sumi, _mm512_maddubs_epi16(q01, _mm512_loadu_si512((const void *)qa)),
                          _mm512_shuffle_epi8(sc, pick_even), vnni);
            sumi = dpwssd(sumi, _mm512_maddubs_epi16(q23, _mm512_loadu_si512((const void *)(qa + 64))),
                          _mm512_shuffle_epi8(sc, pick_odd), vnni);
        }
        __m256i s256 = _mm256_add_epi32(_mm512_castsi512_si256(sumi), _mm512_extracti64x4_epi64(sumi, 1));
        s256 = _mm256_sub_epi32(s256, corr);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w[i].d) * a[i].d), _mm256_cvtepi32_ps(s256), acc);
    }
    return hsum256_ps(acc);
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

/* Q3_K: q + 4 = low 2 bits, plus 4 where the hmask bit is set (a mask
 * register test and a masked add), in 0..7; the -4 is applied as
 * 4 * sum_j sc_j*bsum_j. */
ALWAYS_INLINE float dot_q3_K_impl(const void *vw, const void *va, int64_t n, const bool vnni) {
    const block_q3_K *w = vw;
    const block_q8_K *a = va;
    const __m512i m3 = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        prefetch_ahead(w + i, sizeof *w);
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
        const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(sc16, load256(a[i].bsums)), 2);
        const __m512i hm = _mm512_broadcast_i64x4(load256(w[i].hmask));
        __m512i sumi = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) {
            const __m512i q2 = _mm512_broadcast_i64x4(load256(w[i].qs + 32 * h));
            const __m512i sc = _mm512_broadcast_i32x4(h ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
            for (int t = 0; t < 2; t++) {
                const int k = 4 * h + 2 * t; /* hmask bit of plane 2t; 2t+1 in the high half */
                const __m512i sel = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << k)),
                                                       _mm256_set1_epi8((char)(1 << (k + 1))), 1);
                __m512i q = _mm512_and_si512(_mm512_srlv_epi64(q2, plane_shift(t)), m3);
                q = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(hm, sel), q, four);
                const __m512i qa = _mm512_loadu_si512((const void *)(a[i].qs + 128 * h + 64 * t));
                sumi = dpwssd(sumi, _mm512_maddubs_epi16(q, qa), _mm512_shuffle_epi8(sc, pick_lane_scale(t)), vnni);
            }
        }
        __m256i s256 = _mm256_add_epi32(_mm512_castsi512_si256(sumi), _mm512_extracti64x4_epi64(sumi, 1));
        s256 = _mm256_sub_epi32(s256, corr);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w[i].d) * a[i].d), _mm256_cvtepi32_ps(s256), acc);
    }
    return hsum256_ps(acc);
}

/* Q2_K: 2-bit q in 0..3, scale | min nibbles per 16 values; the mins term
 * is sum_j mn_j*bsum_j, one madd. */
ALWAYS_INLINE float dot_q2_K_impl(const void *vw, const void *va, int64_t n, const bool vnni) {
    const block_q2_K *w = vw;
    const block_q8_K *a = va;
    const __m512i m3 = _mm512_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        prefetch_ahead(w + i, sizeof *w);
        const __m128i sb = _mm_loadu_si128((const __m128i *)w[i].scales);
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sb, 4), _mm_set1_epi8(0x0F)));
        const __m256i mprod = _mm256_madd_epi16(mins, load256(a[i].bsums));
        const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sb, _mm_set1_epi8(0x0F)));
        __m512i sumi = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) {
            const __m512i q2 = _mm512_broadcast_i64x4(load256(w[i].qs + 32 * h));
            const __m512i sc = _mm512_broadcast_i32x4(h ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
            for (int t = 0; t < 2; t++) {
                const __m512i q = _mm512_and_si512(_mm512_srlv_epi64(q2, plane_shift(t)), m3);
                const __m512i qa = _mm512_loadu_si512((const void *)(a[i].qs + 128 * h + 64 * t));
                sumi = dpwssd(sumi, _mm512_maddubs_epi16(q, qa), _mm512_shuffle_epi8(sc, pick_lane_scale(t)), vnni);
            }
        }
        const __m256i s256 = _mm256_add_epi32(_mm512_castsi512_si256(sumi), _mm512_extracti64x4_epi64(sumi, 1));
        /* d and dmin are the adjacent fp16s at the end of the block */
        uint32_t dd;
        memcpy(&dd, &w[i].d, 4);
        const __m128 f = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)dd)), _mm_set1_ps(a[i].d));
        acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(f), _mm256_cvtepi32_ps(s256), acc);
        acc = _mm256_fnmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(f)), _mm256_cvtepi32_ps(mprod), acc);
    }
    return hsum256_ps(acc);
}

/* ---------------------------------------------------------------------------
 * Float weights x F32 activations
 * ------------------------------------------------------------------------- */

ALWAYS_INLINE __m512 load16_f32(const float *p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
ALWAYS_INLINE __m512 load16_f16(const fp16_t *p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}
ALWAYS_INLINE __m512 load16_bf16(const bf16_t *p, __mmask16 m) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}

#define FLOAT_DOT(name, WT, LOAD)                                                               \
    static float name(const void *vw, const void *va, int64_t n) {                              \
        const WT *w = vw;                                                                       \
        const float *x = va;                                                                    \
        __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();                              \
        __m512 s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();                              \
        int64_t i = 0;                                                                          \
        for (; i + 64 <= n; i += 64) {                                                          \
            prefetch_ahead(w + i, 64 * sizeof(WT));                                             \
            s0 = _mm512_fmadd_ps(LOAD(w + i, 0xFFFF), _mm512_loadu_ps(x + i), s0);              \
            s1 = _mm512_fmadd_ps(LOAD(w + i + 16, 0xFFFF), _mm512_loadu_ps(x + i + 16), s1);    \
            s2 = _mm512_fmadd_ps(LOAD(w + i + 32, 0xFFFF), _mm512_loadu_ps(x + i + 32), s2);    \
            s3 = _mm512_fmadd_ps(LOAD(w + i + 48, 0xFFFF), _mm512_loadu_ps(x + i + 48), s3);    \
        }                                                                                       \
        for (; i < n; i += 16) {                                                                \
            const __mmask16 m = n - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n - i)) - 1);        \
            s0 = _mm512_fmadd_ps(LOAD(w + i, m), _mm512_maskz_loadu_ps(m, x + i), s0);          \
        }                                                                                       \
        return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3))); \
    }

FLOAT_DOT(dot_f32, float, load16_f32)
FLOAT_DOT(dot_f16, fp16_t, load16_f16)
FLOAT_DOT(dot_bf16, bf16_t, load16_bf16)
#undef FLOAT_DOT

/* ---------------------------------------------------------------------------
 * The two variants of each integer kernel (VNNI or not) and the table
 * ------------------------------------------------------------------------- */

#define VARIANTS(name)                                                                            \
    static float name##_vnni(const void *w, const void *a, int64_t n) { return name##_impl(w, a, n, true); } \
    static float name##_novnni(const void *w, const void *a, int64_t n) { return name##_impl(w, a, n, false); }

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

void kernels_fill_avx512(kernel_entry table[], int n_types, bool int8_dot) {
    /* every AVX-512 CPU this path runs on has AVX2+FMA+F16C: start from those */
    kernels_fill_avx2(table, n_types);
#define K(vnni_fn) (int8_dot ? vnni_fn##_vnni : vnni_fn##_novnni)
    const struct {
        uint32_t type;
        kernel_entry e;
    } rows[] = {
        {QT_F32, {QT_F32, NULL, dot_f32, NULL}},
        {QT_F16, {QT_F32, NULL, dot_f16, NULL}},
        {QT_BF16, {QT_F32, NULL, dot_bf16, NULL}},
        {QT_Q4_0, {QT_Q8_0, act_quantize_q8_0, K(dot_q4_0), NULL}},
        {QT_Q5_0, {QT_Q8_0, act_quantize_q8_0, K(dot_q5_0), NULL}},
        {QT_Q8_0, {QT_Q8_0, act_quantize_q8_0, K(dot_q8_0), NULL}},
        {QT_Q4_1, {QT_Q8_1, act_quantize_q8_1, K(dot_q4_1), NULL}},
        {QT_Q5_1, {QT_Q8_1, act_quantize_q8_1, K(dot_q5_1), NULL}},
        {QT_Q4_K, {QT_Q8_K, act_quantize_q8_K, K(dot_q4_K), NULL}},
        {QT_Q5_K, {QT_Q8_K, act_quantize_q8_K, K(dot_q5_K), NULL}},
        {QT_Q6_K, {QT_Q8_K, act_quantize_q8_K, K(dot_q6_K), NULL}},
        {QT_Q2_K, {QT_Q8_K, act_quantize_q8_K, K(dot_q2_K), NULL}},
        {QT_Q3_K, {QT_Q8_K, act_quantize_q8_K, K(dot_q3_K), NULL}},
    };
#undef K
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
        if ((int)rows[r].type < n_types) table[rows[r].type] = rows[r].e;
}

#else /* x86-64 built without the AVX-512 flags: every type uses the scalar kernel */

void kernels_fill_avx512(kernel_entry table[], int n_types, bool int8_dot) {
    (void)table;
    (void)n_types;
    (void)int8_dot;
}

#endif

#else /* not x86-64: nothing here */

typedef int kernels_avx512_unused;

#endif
