/*
 * kernels_scalar — the reference matrix-vector kernels, in portable C11.
 *
 * Every other path (AVX2, AVX-512, NEON) is tested against this file, and
 * this file is tested against quant.c (dequantize-then-dot), so it is written
 * for clarity: one activation quantizer per activation format and one integer
 * dot product per weight type, each a direct reading of the block layout.
 *
 * The arithmetic is ggml's. An activation row is rounded once to the weight
 * type's "vec_dot type"; a dot product is then an exact integer sum inside
 * each block, scaled by the block's float scales and accumulated in float:
 *
 *   Q4_0, Q5_0, Q8_0   sum += (dw*da) * sum_i qw_i*qa_i
 *   Q4_1, Q5_1         sum += (dw*da) * sum_i qw_i*qa_i + mw*sa
 *   Q2_K, Q4_K, Q5_K   sum += (da*dw) * sum_j sc_j*sum_i qw_i*qa_i
 *                           - (da*dminw) * sum_j mn_j*bsum_j
 *   Q3_K, Q6_K         sum += (dw*da) * sum_j sc_j*sum_i qw_i*qa_i
 *
 * The integer parts are exact (int32 cannot overflow within a block), so a
 * SIMD kernel must reproduce them bit for bit; only the float summation order
 * of the per-block terms may differ. F32/F16/BF16 weights take F32
 * activations and accumulate in double here (the most accurate order, which
 * SIMD float accumulators are within ~1e-6 relative of).
 *
 * Activation formats (the bytes must be identical on every path):
 *
 *   Q8_0  per 32 values: amax = max|x|, d = amax/127 stored as fp16, and
 *         q = round_half_even(x * (127/amax)). This is what ggml's x86 code
 *         computes (the README's golden data came from it); ggml's generic C
 *         uses roundf and 1/d, which differ only in rare ties. When fp16(d)
 *         is zero (amax < ~5e-6, or 0) every q is 0: the block contributes
 *         nothing either way, and this keeps 127/amax finite.
 *   Q8_1  Q8_0's d and q, plus s = fp16(d * sum(q)) with the unrounded d
 *         (ggml's quantize_row_q8_1), for the min term of Q4_1/Q5_1.
 *   Q8_K  ggml's quantize_row_q8_K: m = the value of largest magnitude (first
 *         one on ties), iscale = -127/m, q = min(127, round_half_even(iscale*x)),
 *         d = 1/iscale (f32), bsums = sums of 16 q. Equal to quant.c's Q8_K.
 *
 * Non-finite activations give unspecified (but memory-safe) bytes.
 */
#include "kernels.h"

#include <math.h>
#include <string.h>

#include "core/quant.h"

/* ---------------------------------------------------------------------------
 * Activation quantizers
 * ------------------------------------------------------------------------- */

/* round_half_even(v) for |v| <= ~128, and no undefined behaviour otherwise. */
static int act_round(float v) {
    if (!(v > -128.5f)) return -128; /* also NaN */
    if (v > 127.5f) return 127;
    return (int)lrintf(v);
}

/* One Q8_0 block: returns sum(q) (Q8_1 needs it) and the unrounded d. */
static int act_q8_0_block(const float *x, fp16_t *d16, int8_t *qs, float *d_out) {
    float amax = 0.0f;
    for (int j = 0; j < QK8_0; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    const float d = amax / 127.0f;
    *d16 = fp32_to_fp16(d);
    *d_out = d;
    const float id = *d16 != 0 ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < QK8_0; j++) {
        qs[j] = (int8_t)act_round(x[j] * id);
        sum += qs[j];
    }
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
        y[i].s = fp32_to_fp16(d * (float)sum);
    }
}

static void act_quantize_q8_K(const float *x, void *dst, int64_t n) {
    block_q8_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        memset(&y[i], 0, sizeof y[i]);
        float amax = 0.0f, m = 0.0f;
        for (int j = 0; j < QK_K; j++)
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                m = x[j];
            }
        const float iscale = amax != 0.0f ? -127.0f / m : 0.0f;
        if (!isfinite(iscale) || iscale == 0.0f) continue; /* zero, subnormal-only or inf block */
        for (int j = 0; j < QK_K; j++) y[i].qs[j] = (int8_t)act_round(iscale * x[j]);
        for (int g = 0; g < QK_K / 16; g++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) sum += y[i].qs[16 * g + l];
            y[i].bsums[g] = (int16_t)sum;
        }
        y[i].d = 1.0f / iscale;
    }
}

/* ---------------------------------------------------------------------------
 * Legacy 32-value formats x Q8_0 / Q8_1
 * ------------------------------------------------------------------------- */

static uint32_t qh_u32(const uint8_t qh[4]) {
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

static float dot_q4_0(const void *vw, const void *va, int64_t n) {
    const block_q4_0 *w = vw;
    const block_q8_0 *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK4_0; i++) {
        int sumi = 0;
        for (int j = 0; j < QK4_0 / 2; j++) {
            sumi += ((w[i].qs[j] & 0x0F) - 8) * a[i].qs[j];
            sumi += ((w[i].qs[j] >> 4) - 8) * a[i].qs[j + QK4_0 / 2];
        }
        sum += (fp16_to_fp32(w[i].d) * fp16_to_fp32(a[i].d)) * (float)sumi;
    }
    return sum;
}

static float dot_q4_1(const void *vw, const void *va, int64_t n) {
    const block_q4_1 *w = vw;
    const block_q8_1 *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK4_1; i++) {
        int sumi = 0;
        for (int j = 0; j < QK4_1 / 2; j++) {
            sumi += (w[i].qs[j] & 0x0F) * a[i].qs[j];
            sumi += (w[i].qs[j] >> 4) * a[i].qs[j + QK4_1 / 2];
        }
        sum += (fp16_to_fp32(w[i].d) * fp16_to_fp32(a[i].d)) * (float)sumi +
               fp16_to_fp32(w[i].m) * fp16_to_fp32(a[i].s);
    }
    return sum;
}

static float dot_q5_0(const void *vw, const void *va, int64_t n) {
    const block_q5_0 *w = vw;
    const block_q8_0 *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK5_0; i++) {
        const uint32_t qh = qh_u32(w[i].qh);
        int sumi = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            const int x0 = (w[i].qs[j] & 0x0F) | (int)(((qh >> j) & 1u) << 4);
            const int x1 = (w[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
            sumi += (x0 - 16) * a[i].qs[j] + (x1 - 16) * a[i].qs[j + QK5_0 / 2];
        }
        sum += (fp16_to_fp32(w[i].d) * fp16_to_fp32(a[i].d)) * (float)sumi;
    }
    return sum;
}

static float dot_q5_1(const void *vw, const void *va, int64_t n) {
    const block_q5_1 *w = vw;
    const block_q8_1 *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK5_1; i++) {
        const uint32_t qh = qh_u32(w[i].qh);
        int sumi = 0;
        for (int j = 0; j < QK5_1 / 2; j++) {
            const int x0 = (w[i].qs[j] & 0x0F) | (int)(((qh >> j) & 1u) << 4);
            const int x1 = (w[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
            sumi += x0 * a[i].qs[j] + x1 * a[i].qs[j + QK5_1 / 2];
        }
        sum += (fp16_to_fp32(w[i].d) * fp16_to_fp32(a[i].d)) * (float)sumi +
               fp16_to_fp32(w[i].m) * fp16_to_fp32(a[i].s);
    }
    return sum;
}

static float dot_q8_0(const void *vw, const void *va, int64_t n) {
    const block_q8_0 *w = vw;
    const block_q8_0 *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        int sumi = 0;
        for (int j = 0; j < QK8_0; j++) sumi += w[i].qs[j] * a[i].qs[j];
        sum += (fp16_to_fp32(w[i].d) * fp16_to_fp32(a[i].d)) * (float)sumi;
    }
    return sum;
}

/* ---------------------------------------------------------------------------
 * K-quants x Q8_K. Each kernel unpacks the integer quants of one super-block
 * (the layouts are described in quant.c), sums q*qa per sub-block, weights
 * the sub-block sums by the integer scales, and applies the float scales once.
 * ------------------------------------------------------------------------- */

static float dot_q2_K(const void *vw, const void *va, int64_t n) {
    const block_q2_K *w = vw;
    const block_q8_K *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int isum = 0, summs = 0;
        for (int h = 0; h < 2; h++)
            for (int s = 0; s < 4; s++)
                for (int half = 0; half < 2; half++) {
                    const int sub = 8 * h + 2 * s + half; /* values 16*sub .. */
                    int si = 0;
                    for (int l = 16 * half; l < 16 * half + 16; l++)
                        si += ((w[i].qs[32 * h + l] >> (2 * s)) & 3) * a[i].qs[128 * h + 32 * s + l];
                    isum += (w[i].scales[sub] & 0x0F) * si;
                }
        for (int j = 0; j < QK_K / 16; j++) summs += (w[i].scales[j] >> 4) * a[i].bsums[j];
        const float dall = a[i].d * fp16_to_fp32(w[i].d);
        const float dmin = a[i].d * fp16_to_fp32(w[i].dmin);
        sum += dall * (float)isum - dmin * (float)summs;
    }
    return sum;
}

static int q3_K_scale(const uint8_t *sc, int i) {
    const int low = i < 8 ? (sc[i] & 0x0F) : (sc[i - 8] >> 4);
    const int high = (sc[8 + i % 4] >> (2 * (i / 4))) & 3;
    return (low | (high << 4)) - 32;
}

static float dot_q3_K(const void *vw, const void *va, int64_t n) {
    const block_q3_K *w = vw;
    const block_q8_K *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int isum = 0;
        for (int h = 0; h < 2; h++)
            for (int s = 0; s < 4; s++)
                for (int half = 0; half < 2; half++) {
                    const int sub = 8 * h + 2 * s + half;
                    int si = 0;
                    for (int l = 16 * half; l < 16 * half + 16; l++) {
                        const int lo2 = (w[i].qs[32 * h + l] >> (2 * s)) & 3;
                        const int hbit = (w[i].hmask[l] >> (4 * h + s)) & 1;
                        si += (lo2 - (hbit ? 0 : 4)) * a[i].qs[128 * h + 32 * s + l];
                    }
                    isum += q3_K_scale(w[i].scales, sub) * si;
                }
        sum += (fp16_to_fp32(w[i].d) * a[i].d) * (float)isum;
    }
    return sum;
}

/* ggml's get_scale_min_k4: 6-bit scale and min of sub-block j. */
static void k4_scale_min(const uint8_t *q, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Q4_K and Q5_K: qh is NULL for Q4_K. */
static float dot_q45_K(const block_q4_K *w4, const block_q5_K *w5, const void *va, int64_t n) {
    const block_q8_K *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *scales = w4 ? w4[i].scales : w5[i].scales;
        const uint8_t *qs = w4 ? w4[i].qs : w5[i].qs;
        const uint8_t *qh = w4 ? NULL : w5[i].qh;
        int isum = 0, summs = 0;
        for (int j = 0; j < 8; j++) {
            int sc, m;
            k4_scale_min(scales, j, &sc, &m);
            const int c = j / 2, shift = 4 * (j & 1);
            int si = 0;
            for (int l = 0; l < 32; l++) {
                int q = (qs[32 * c + l] >> shift) & 0x0F;
                if (qh) q |= ((qh[l] >> j) & 1) << 4;
                si += q * a[i].qs[32 * j + l];
            }
            isum += sc * si;
            summs += m * (a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]);
        }
        const fp16_t wd = w4 ? w4[i].d : w5[i].d, wdmin = w4 ? w4[i].dmin : w5[i].dmin;
        const float d = a[i].d * fp16_to_fp32(wd);
        const float dmin = a[i].d * fp16_to_fp32(wdmin);
        sum += d * (float)isum - dmin * (float)summs;
    }
    return sum;
}

static float dot_q4_K(const void *vw, const void *va, int64_t n) {
    return dot_q45_K(vw, NULL, va, n);
}

static float dot_q5_K(const void *vw, const void *va, int64_t n) {
    return dot_q45_K(NULL, vw, va, n);
}

static float dot_q6_K(const void *vw, const void *va, int64_t n) {
    const block_q6_K *w = vw;
    const block_q8_K *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int isum = 0;
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w[i].ql + 64 * h, *qh = w[i].qh + 32 * h;
            for (int r = 0; r < 4; r++)
                for (int half = 0; half < 2; half++) {
                    const int sub = 8 * h + 2 * r + half;
                    int si = 0;
                    for (int l = 16 * half; l < 16 * half + 16; l++) {
                        const uint8_t byte = ql[l + 32 * (r & 1)];
                        const int lo4 = r < 2 ? (byte & 0x0F) : (byte >> 4);
                        const int hi2 = (qh[l] >> (2 * r)) & 3;
                        si += ((lo4 | (hi2 << 4)) - 32) * a[i].qs[128 * h + 32 * r + l];
                    }
                    isum += w[i].scales[sub] * si;
                }
        }
        sum += (fp16_to_fp32(w[i].d) * a[i].d) * (float)isum;
    }
    return sum;
}

/* ---------------------------------------------------------------------------
 * Float weights x F32 activations
 * ------------------------------------------------------------------------- */

static float dot_f32(const void *vw, const void *va, int64_t n) {
    const float *w = vw, *x = va;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)w[i] * x[i];
    return (float)sum;
}

static float dot_f16(const void *vw, const void *va, int64_t n) {
    const fp16_t *w = vw;
    const float *x = va;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)fp16_to_fp32(w[i]) * x[i];
    return (float)sum;
}

static float dot_bf16(const void *vw, const void *va, int64_t n) {
    const bf16_t *w = vw;
    const float *x = va;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)bf16_to_fp32(w[i]) * x[i];
    return (float)sum;
}

/* ---------------------------------------------------------------------------
 * Table
 * ------------------------------------------------------------------------- */

void kernels_fill_scalar(kernel_entry table[], int n_types) {
    const kernel_quantizers quantizers = {act_quantize_q8_0, act_quantize_q8_1, act_quantize_q8_K};
    const kernel_dots rows[] = {
        {QT_F32, dot_f32, NULL, NO_TILES},
        {QT_F16, dot_f16, NULL, NO_TILES},
        {QT_BF16, dot_bf16, NULL, NO_TILES},
        {QT_Q4_0, dot_q4_0, NULL, NO_TILES},
        {QT_Q5_0, dot_q5_0, NULL, NO_TILES},
        {QT_Q8_0, dot_q8_0, NULL, NO_TILES},
        {QT_Q4_1, dot_q4_1, NULL, NO_TILES},
        {QT_Q5_1, dot_q5_1, NULL, NO_TILES},
        {QT_Q2_K, dot_q2_K, NULL, NO_TILES},
        {QT_Q3_K, dot_q3_K, NULL, NO_TILES},
        {QT_Q4_K, dot_q4_K, NULL, NO_TILES},
        {QT_Q5_K, dot_q5_K, NULL, NO_TILES},
        {QT_Q6_K, dot_q6_K, NULL, NO_TILES},
    };
    kernels_set(table, n_types, &quantizers, rows, sizeof rows / sizeof rows[0]);
}
