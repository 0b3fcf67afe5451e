/*
 * q8_avx512 — one block of 32 activations to ggml's Q8_0 for 16 lanes at a
 * time, for the AVX-512 files only (the GGUF-layout kernels' Q8_0 / Q8_1
 * activations, the packed kernels' Q8P): d = max|x| / 127 rounded to fp16,
 * q = x * 127 / max|x| rounded half to even (0 when d rounds to 0). Returns
 * sum(q); *d_out is d before rounding.
 */
#ifndef OCTO_CORE_KERNELS_Q8_AVX512_H
#define OCTO_CORE_KERNELS_Q8_AVX512_H

#include <immintrin.h>
#include <stdint.h>

#include "core/quant.h"

static inline __attribute__((always_inline)) int act_q8_0_block(const float *x, fp16_t *d16, int8_t *qs,
                                                                float *d_out) {
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
