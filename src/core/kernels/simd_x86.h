/*
 * simd_x86 — the small helpers the x86 kernel files share, each defined once.
 *
 * Each x86 kernel file is built for its own instruction sets (CMakeLists.txt
 * gives it -mavx2, -mavx512f ... alone), so a helper here is visible only
 * where the compiler has been given every instruction it uses:
 *
 *   any x86-64           fp16x4, k4_scales_mins (plain C); the prefetches
 *   F16C                 h2f
 *   AVX                  load256, hsum256_ps
 *   AVX2 + FMA           exp8
 *   AVX-512 F            mask16_first, exp512; with F16C act_q8_0_block512
 *   AVX-512 BW + VNNI    dpbusd, dpwssd (either instruction, or its
 *                        maddubs/madd equivalent when the CPU lacks VNNI)
 *
 * All are static inline and always inlined: they sit in the inner loops.
 * Names are unique across the sections, so a file built with more flags
 * (-march=native) sees them all without a clash. Elsewhere this header is
 * empty.
 */
#ifndef OCTO_CORE_KERNELS_SIMD_X86_H
#define OCTO_CORE_KERNELS_SIMD_X86_H

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/quant.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* ---- any x86-64 */

/* Four fp16 values at a byte stride, packed in a uint64 (integer loads and
 * shifts: cheaper than a vector insert per value, and than gathers, whose
 * ports the dot products need). */
ALWAYS_INLINE uint64_t fp16x4(const uint8_t *p, size_t stride) {
    uint16_t h[4];
    for (int k = 0; k < 4; k++) memcpy(&h[k], p + k * stride, 2);
    return (uint64_t)h[0] | (uint64_t)h[1] << 16 | (uint64_t)h[2] << 32 | (uint64_t)h[3] << 48;
}

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

/* Ask for the bytes [p + ahead, p + ahead + bytes), a line at a time, into
 * L1 (prefetch_l1, T0) or L2 (prefetch_l2, T1). Prefetches never fault, and
 * the address is formed as an integer so no pointer leaves its object. */
ALWAYS_INLINE void prefetch_l1(const void *p, size_t ahead, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64)
        _mm_prefetch((const char *)(uintptr_t)((uintptr_t)p + ahead + o), _MM_HINT_T0);
}
ALWAYS_INLINE void prefetch_l2(const void *p, size_t ahead, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64)
        _mm_prefetch((const char *)(uintptr_t)((uintptr_t)p + ahead + o), _MM_HINT_T1);
}

/* Weight rows are streamed once per token: ask for the bytes PREFETCH_BYTES
 * ahead of those being read (usually the next row), which keeps a single
 * Intel core close to DRAM bandwidth (the AVX-512 row kernels can turn it
 * off: kernels_avx512.c, maybe_prefetch_ahead). */
#define PREFETCH_BYTES 2048
ALWAYS_INLINE void prefetch_ahead(const void *p, size_t bytes) { prefetch_l1(p, PREFETCH_BYTES, bytes); }

/* A batch (several activation rows: verification, prefill) prefetches on
 * every CPU. Its FMAs keep the core busy, and the hardware prefetcher alone
 * then leaves the memory idle between bursts: on the AMD EPYC, a verify pass
 * of 5 tokens of the 1.1B F16 model went from 148-164 ms to 74-82, with one
 * token taking 50-92 ms. Into L2 (T1) 16 KiB ahead; T0 at 1-8 KiB gave
 * 114-137 ms, T1 at 8-64 KiB and T2 at 16 KiB 74-94. (The packed kernels
 * ask the same: on the EPYC 8 tokens of the 1.1B Q8_0 model went from
 * 45.0-47.2 ms to 38.8-41.4.) */
#define PREFETCH_BATCH_BYTES 16384
ALWAYS_INLINE void prefetch_batch(const void *p, size_t bytes) { prefetch_l2(p, PREFETCH_BATCH_BYTES, bytes); }

/* ---- F16C */
#if defined(__F16C__)

ALWAYS_INLINE float h2f(fp16_t h) { return _cvtsh_ss(h); }

#endif

/* ---- AVX */
#if defined(__AVX__)

ALWAYS_INLINE __m256i load256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

ALWAYS_INLINE float hsum256_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#endif

/* ---- AVX2 + FMA */
#if defined(__AVX2__) && defined(__FMA__)

/* e^x for 8 floats at once (attention's softmax, the FFN's SiLU and GELU):
 * 2^n e^r, |r| <= ln2/2, exp512's degree-6 polynomial; inputs clamped to
 * [-87, 88] (2^n stays a normal float: the smallest result, 1.6e-38, stands
 * for anything smaller). */
ALWAYS_INLINE __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 720);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

#endif

/* ---- AVX-512 F */
#if defined(__AVX512F__)

/* The first n of 16 lanes (all for n >= 16); n must not be negative (no
 * test for it here: in attention's loops one made GCC's code a third
 * bigger). */
ALWAYS_INLINE __mmask16 mask16_first(int64_t n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1); }

/* e^x for 16 floats at once (attention's softmax, the FFN's SiLU and GELU):
 * 2^n * e^r with |r| <= ln2/2 and a degree-6 polynomial (relative error
 * below 2e-7), scaled with vscalefps. Inputs are clamped to [-103, 88.7]:
 * below, the result is 0 or a denormal; above, it would overflow. A NaN
 * comes out as e^-103. */
ALWAYS_INLINE __m512 exp512(__m512 x) {
    /* max/min return their second operand for NaN: -inf - -inf lands at -103 */
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-103.0f)), _mm512_set1_ps(88.7f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

#if defined(__F16C__)

/* One block of 32 activations to ggml's Q8_0, 16 lanes at a time (the
 * GGUF-layout kernels' Q8_0 / Q8_1 activations, the packed kernels' Q8P):
 * d = max|x| / 127 rounded to fp16, q = x * 127 / max|x| rounded half to
 * even (0 when d rounds to 0). Returns sum(q); *d_out is d before rounding.
 * The bytes are kernels_scalar.c's, as those of the AVX2 path's own
 * act_q8_0_block (kernels_avx2.c). */
ALWAYS_INLINE int act_q8_0_block512(const float *x, fp16_t *d16, int8_t *qs, float *d_out) {
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

#endif

#if defined(__AVX512BW__) && defined(__AVX512VNNI__)

/* acc + sum of 4 (unsigned u * signed s) products per int32 lane: vpdpbusd,
 * or maddubs + madd without VNNI, exact when the 16-bit pair sums of maddubs
 * cannot saturate (u <= 128, or 15 * 127 * 2). */
ALWAYS_INLINE __m512i dpbusd(__m512i acc, __m512i u, __m512i s, const bool vnni) {
    if (vnni) return _mm512_dpbusd_epi32(acc, u, s);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)));
}

/* acc + pairwise int16 products (p * scale) per int32 lane: vpdpwssd, or madd + add. */
ALWAYS_INLINE __m512i dpwssd(__m512i acc, __m512i p, __m512i sc, const bool vnni) {
    if (vnni) return _mm512_dpwssd_epi32(acc, p, sc);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(p, sc));
}

#endif

#endif /* __AVX512F__ */

#endif /* x86 */

#endif
