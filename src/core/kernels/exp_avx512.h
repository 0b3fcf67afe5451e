/*
 * exp_avx512 — e^x for 16 floats at once, for the AVX-512 files only
 * (attention's softmax, the FFN's SiLU): 2^n * e^r with |r| <= ln2/2 and a
 * degree-6 polynomial (relative error below 2e-7), scaled with vscalefps.
 * Inputs are clamped to [-103, 88.7]: below, the result is 0 or a denormal;
 * above, it would overflow. A NaN comes out as e^-103.
 */
#ifndef OCTO_CORE_KERNELS_EXP_AVX512_H
#define OCTO_CORE_KERNELS_EXP_AVX512_H

#include <immintrin.h>

static inline __attribute__((always_inline)) __m512 exp512(__m512 x) {
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

#endif
