/*
 * gemm_bf16 — see gemm_bf16.h: which implementation runs, and the plain-C
 * arithmetic of each, the tests' reference.
 */
#include "gemm_bf16.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "core/quant.h"

static const gemm_bf16_impl *impl(void) {
    if (!cpu_has_bf16_dot()) return NULL;
    switch (kernels_path()) {
    case CPU_AVX512: return gemm_bf16_avx512();
    case CPU_NEON: return gemm_bf16_neon();
    default: return NULL;
    }
}

bool gemm_bf16_supported(uint32_t type) {
    if (type != QT_F16 && type != QT_BF16) return false;
    if (!impl()) return false;
    const char *env = getenv("OCTO_BF16");
    return !(env && !strcmp(env, "0"));
}

const char *gemm_bf16_name(void) { return gemm_bf16_supported(QT_BF16) ? impl()->name : NULL; }

uint16_t gemm_bf16_round(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* NaN stays NaN (quiet) */
    if ((u & 0x7f800000u) == 0) u &= 0x80000000u;                            /* denormals as zero */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

void gemm_bf16_act(const float *x, uint16_t *dst, int64_t n) {
    const gemm_bf16_impl *k = impl();
    if (k && k->act) {
        k->act(x, dst, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) dst[i] = gemm_bf16_round(x[i]);
    if (n & 1) dst[n] = 0;
}

size_t gemm_bf16_scratch_bytes(int64_t n) {
    const gemm_bf16_impl *k = impl();
    return k ? k->scratch_bytes(n) : 0;
}

void gemm_bf16_rows(const void *w, uint32_t type, size_t row_bytes, int64_t n, int r0, int r1, const uint16_t *act,
                    size_t act_stride, int T, float *y, size_t y_stride, void *scratch) {
    const gemm_bf16_impl *k = impl();
    if (k) k->rows(w, type, row_bytes, n, r0, r1, act, act_stride, T, y, y_stride, scratch);
}

/* ---------------------------------------------------------------- the references */

static float f32_of_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t bits_of_f32(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bf16_f32(uint16_t h) { return f32_of_bits((uint32_t)h << 16); }

static float flush(float x) { return (bits_of_f32(x) & 0x7f800000u) ? x : f32_of_bits(bits_of_f32(x) & 0x80000000u); }

/* The references keep their order and roundings: GCC 12's loop vectorizer
 * at -O3 reorders a two-term reduction (even with plain SSE2: 744.5 instead
 * of 662.3 on 512 values near 1, tests/test_matmul), and a product fused
 * into the addition after it (GCC contracts by default) would not overflow
 * where the instructions' products do. */
#if defined(__GNUC__) && !defined(__clang__)
#define EXACT_ORDER __attribute__((optimize("no-tree-vectorize", "fp-contract=off")))
#else
#define EXACT_ORDER
#endif

/* vdpbf16ps: the odd product then the even one added to the sum, each addition fused with its product
 * (a product past F32's range does not overflow by itself: Zen 4, tests/test_matmul's edge values),
 * rounded to nearest even, denormal inputs and results as zero */
EXACT_ORDER static float sum_nearest(const uint16_t *w, const uint16_t *x, int64_t n_pairs) {
    float acc = 0.0f;
    for (int64_t p = 0; p < n_pairs; p++)
        for (int k = 1; k >= 0; k--) acc = flush(fmaf(flush(bf16_f32(w[2 * p + k])), flush(bf16_f32(x[2 * p + k])), acc));
    return acc;
}

EXACT_ORDER static float add_odd(float a, float b) {
    a = flush(a), b = flush(b);
    const float s = a + b;
    if (!isfinite(s)) return s; /* an overflow rounds to infinity in this mode too */
    const float bb = s - a, e = (a - (s - bb)) + (b - bb);
    if (e == 0.0f || (bits_of_f32(s) & 1u)) return flush(s);
    return flush(f32_of_bits(bits_of_f32(s) + ((s > 0.0f) == (e > 0.0f) ? 1u : (uint32_t)-1)));
}

EXACT_ORDER static float sum_pairs_odd(const uint16_t *w, const uint16_t *x, int64_t n_pairs) {
    float acc = 0.0f;
    for (int64_t p = 0; p < n_pairs; p++) {
        const float a = flush(flush(bf16_f32(w[2 * p])) * flush(bf16_f32(x[2 * p])));
        const float b = flush(flush(bf16_f32(w[2 * p + 1])) * flush(bf16_f32(x[2 * p + 1])));
        acc = add_odd(acc, add_odd(a, b));
    }
    return acc;
}

float gemm_bf16_ref_dot(const uint16_t *w, const uint16_t *x, int64_t n_pairs) {
    const gemm_bf16_impl *k = impl();
    return k && k->sum == GEMM_BF16_SUM_PAIRS_ODD ? sum_pairs_odd(w, x, n_pairs) : sum_nearest(w, x, n_pairs);
}
