/*
 * quant — scalar reference kernels for every tensor element type.
 *
 * This file is the specification of each block format. Later SIMD kernels
 * are correct when they agree with it, and dequantize must agree with ggml
 * to the bit, because golden logits from llama.cpp are compared against
 * ours. For that reason each dequantizer does the same float operations, in
 * the same order, as ggml's dequantize_row_*: for Q4_K that is
 * (d*sc)*q - (dmin*m), for Q6_K (d*sc)*q, and so on. Reordering them would
 * change the last bit of some weights.
 *
 * How the file is laid out:
 *
 *   - fp16 / bf16 conversions, done on the bits (round to nearest even,
 *     subnormals, inf and NaN handled), so results do not depend on the CPU.
 *   - The legacy 32-value formats (Q4_0 .. Q8_0), each written out directly:
 *     one scale (plus a min for the _1 kinds) per block.
 *   - The K-quants (256-value super-blocks). These formats differ only in how
 *     the bits are packed. The arithmetic has two shapes:
 *       affine     y = (d*sc[j])*q - (dmin*mn[j])   Q2_K, Q4_K, Q5_K
 *       symmetric  y = (d*sc[j])*q                  Q3_K, Q6_K
 *     Each K format therefore has an unpack (block -> integer quants and
 *     sub-block scales) and a pack (the inverse). The unpack is where the bit
 *     layout lives. Dequantize, dot and quantize work on the unpacked form
 *     and are shared by every format of the same shape.
 *   - Q8_K (a float scale and int8 quants with 16-value sums). It is the
 *     activation format of the K-quant dot products, and its quantizer
 *     follows ggml exactly.
 *   - The traits table, indexed by GGUF type id, and the row dispatchers.
 *
 * Quantizers need not match llama-quantize bit for bit, but they produce
 * valid blocks with a small error. Every scale is rounded to fp16 first, and
 * values are then quantized against the rounded scale, so the stored scale is
 * the one that was optimized for. Scales are clamped to the fp16 range, so
 * finite input never yields inf or NaN. The K-quant sub-block fits search a
 * few candidate scales and refine each by least squares, in the spirit of
 * ggml's make_qkx2_quants / make_qx_quants (unweighted here).
 */
#include "quant.h"

#include <assert.h>
#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------------------
 * Scalar conversions
 * ------------------------------------------------------------------------- */

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float fp16_to_fp32(fp16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t mant = h & 0x3FFu;
    if (exp == 0) { /* zero or subnormal: mant * 2^-24, exact in float */
        float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    if (exp == 31) return f32_from_bits(sign | 0x7F800000u | (mant << 13));
    return f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
}

fp16_t fp32_to_fp16(float f) {
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7FFFFFFFu;
    /* NaN stays NaN, quieted, like F16C and ARM FCVT do; top payload kept. */
    if (ax > 0x7F800000u) return (fp16_t)(sign | 0x7E00u | ((ax >> 13) & 0x3FFu));
    /* 65520 is the tie between 65504 (odd mantissa) and 2^16: it rounds to inf. */
    if (ax >= 0x477FF000u) return (fp16_t)(sign | 0x7C00u);
    if (ax >= 0x38800000u) { /* a normal half: rebias 127 -> 15, round 13 bits */
        uint32_t r = ax - (112u << 23);
        uint32_t h = r >> 13, rem = r & 0x1FFFu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* may carry into exp */
        return (fp16_t)(sign | h);
    }
    if (ax < 0x33000000u) return (fp16_t)sign; /* below 2^-25: rounds to zero */
    /* a subnormal half: count units of 2^-24 */
    uint32_t e = ax >> 23, m = (ax & 0x7FFFFFu) | 0x800000u;
    uint32_t shift = 126u - e; /* 14..24 */
    assert(shift >= 14 && shift <= 24);
    uint32_t h = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u))) h++; /* 0x400 is the smallest normal */
    return (fp16_t)(sign | h);
}

float bf16_to_fp32(bf16_t h) {
    return f32_from_bits((uint32_t)h << 16);
}

bf16_t fp32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (bf16_t)((x >> 16) | 0x40u); /* quiet NaN */
    x += 0x7FFFu + ((x >> 16) & 1u);
    return (bf16_t)(x >> 16);
}

/* ---------------------------------------------------------------------------
 * Helpers shared by the quantizers
 * ------------------------------------------------------------------------- */

/* Round to nearest (ties to even in the default FP mode), clamped to
 * [lo, hi]. Clamping first means a huge or NaN input never reaches a
 * float-to-int conversion out of range. */
static int q_round(float v, int lo, int hi) {
    if (!(v > (float)lo)) return lo;
    if (v >= (float)hi) return hi;
    return (int)lrintf(v);
}

/* A scale as it will be stored: saturated to the fp16 range (so finite input
 * never gives an inf scale), then rounded to fp16. */
static fp16_t fp16_scale(float d) {
    if (d > 65504.0f) d = 65504.0f;
    if (d < -65504.0f) d = -65504.0f;
    return fp32_to_fp16(d);
}

/* Largest |x| and the signed value that attains it. */
static float abs_max(const float *x, int n, float *signed_max) {
    float amax = 0.0f, vmax = 0.0f;
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            vmax = x[i];
        }
    }
    if (signed_max) *signed_max = vmax;
    return amax;
}

/* ---------------------------------------------------------------------------
 * F32, F16, BF16
 * ------------------------------------------------------------------------- */

static void f32_dequantize(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

static void f32_quantize(const float *src, void *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

static float f32_dot(const void *w, const float *x, int64_t n) {
    const float *wf = w;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += wf[i] * x[i];
    return sum;
}

static void f16_dequantize(const void *src, float *dst, int64_t n) {
    const fp16_t *h = src;
    for (int64_t i = 0; i < n; i++) dst[i] = fp16_to_fp32(h[i]);
}

static void f16_quantize(const float *src, void *dst, int64_t n) {
    fp16_t *h = dst;
    for (int64_t i = 0; i < n; i++) h[i] = fp32_to_fp16(src[i]);
}

static float f16_dot(const void *w, const float *x, int64_t n) {
    const fp16_t *h = w;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += fp16_to_fp32(h[i]) * x[i];
    return sum;
}

static void bf16_dequantize(const void *src, float *dst, int64_t n) {
    const bf16_t *h = src;
    for (int64_t i = 0; i < n; i++) dst[i] = bf16_to_fp32(h[i]);
}

static void bf16_quantize(const float *src, void *dst, int64_t n) {
    bf16_t *h = dst;
    for (int64_t i = 0; i < n; i++) h[i] = fp32_to_bf16(src[i]);
}

static float bf16_dot(const void *w, const float *x, int64_t n) {
    const bf16_t *h = w;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += bf16_to_fp32(h[i]) * x[i];
    return sum;
}

/* ---------------------------------------------------------------------------
 * Q4_0: y = (q - 8) * d, q 4 bits. Byte j holds value j (low nibble) and
 * value j+16 (high nibble).
 * ------------------------------------------------------------------------- */

/* ---- importance-weighted scales for the 32-value types ----
 * Candidate scales around the plain one (the extreme value on the end
 * level), each refit by weighted least squares on the codes it gives, the
 * scale rounded to fp16 as stored; the one with the least weighted squared
 * error wins. The plain scale is a candidate, so the error never grows. */

static void minmax_scale(const float *x, int n, int levels, fp16_t *d16, fp16_t *m16, float *d, float *m);

/* Weighted squared error of x ~ d*L + m, L = round((x - m)/d) in [lo, hi]. */
static double block_wsse(const float *x, const float *w, int n, int lo, int hi, float d, float m) {
    double e = 0.0;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int i = 0; i < n; i++) {
        const double r = (double)d * q_round((x[i] - m) * id, lo, hi) + m - x[i];
        e += w[i] * r * r;
    }
    return e;
}

/* Symmetric: the fp16 scale for x ~ d*L, L in [lo, hi]. */
static fp16_t sym_scale_imp(const float *x, const float *w, int n, int lo, int hi) {
    float vmax;
    abs_max(x, n, &vmax);
    fp16_t best = fp16_scale(vmax / (float)lo);
    double best_e = block_wsse(x, w, n, lo, hi, fp16_to_fp32(best), 0.0f);
    for (int step = -10; step <= 10 && vmax != 0.0f; step++) {
        const float id = ((float)lo + 0.1f * (float)step) / vmax;
        double sxl = 0, sll = 0;
        for (int i = 0; i < n; i++) {
            const int l = q_round(x[i] * id, lo, hi);
            sxl += (double)w[i] * x[i] * l;
            sll += (double)w[i] * l * l;
        }
        if (!(sll > 0.0)) continue;
        const fp16_t d = fp16_scale((float)(sxl / sll));
        const double e = block_wsse(x, w, n, lo, hi, fp16_to_fp32(d), 0.0f);
        if (e < best_e) best_e = e, best = d;
    }
    return best;
}

/* Affine: fp16 step and minimum for x ~ d*L + m, L in [0, qmax]. */
static void affine_scale_imp(const float *x, const float *w, int n, int qmax, fp16_t *d16, fp16_t *m16) {
    float d, m;
    minmax_scale(x, n, qmax + 1, d16, m16, &d, &m);
    double best_e = block_wsse(x, w, n, 0, qmax, d, m);
    const float lo = m, range = d * (float)qmax;
    for (int step = -10; step <= 10 && range > 0.0f; step++) {
        const float id = ((float)qmax + 0.1f * (float)step) / range;
        double sw = 0, sl = 0, sll = 0, sx = 0, sxl = 0;
        for (int i = 0; i < n; i++) {
            const int l = q_round((x[i] - lo) * id, 0, qmax);
            sw += w[i], sl += w[i] * l, sll += (double)w[i] * l * l, sx += w[i] * x[i], sxl += (double)w[i] * x[i] * l;
        }
        const double det = sw * sll - sl * sl;
        if (!(det > 0.0)) continue;
        const double ds = (sw * sxl - sl * sx) / det, ms = (sll * sx - sl * sxl) / det;
        if (!(ds > 0.0)) continue;
        const fp16_t cd = fp16_scale((float)ds), cm = fp16_scale((float)ms);
        const double e = block_wsse(x, w, n, 0, qmax, fp16_to_fp32(cd), fp16_to_fp32(cm));
        if (e < best_e) best_e = e, *d16 = cd, *m16 = cm;
    }
}

static void q4_0_dequantize(const void *src, float *dst, int64_t n) {
    const block_q4_0 *b = src;
    for (int64_t i = 0; i < n / QK4_0; i++, dst += QK4_0) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            const int x0 = (b[i].qs[j] & 0x0F) - 8;
            const int x1 = (b[i].qs[j] >> 4) - 8;
            dst[j] = x0 * d;
            dst[j + QK4_0 / 2] = x1 * d;
        }
    }
}

/* ggml's scheme: the value of largest magnitude maps to -8, using all 16
 * levels; its opposite extreme clamps to +7. */
static void q4_0_quantize(const float *src, void *dst, int64_t n) {
    block_q4_0 *b = dst;
    for (int64_t i = 0; i < n / QK4_0; i++, src += QK4_0) {
        float vmax;
        abs_max(src, QK4_0, &vmax);
        b[i].d = fp16_scale(vmax / -8.0f);
        const float d = fp16_to_fp32(b[i].d);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int j = 0; j < QK4_0 / 2; j++) {
            const int q0 = q_round(src[j] * id, -8, 7) + 8;
            const int q1 = q_round(src[j + QK4_0 / 2] * id, -8, 7) + 8;
            b[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

static void q4_0_quantize_imp(const float *src, void *dst, int64_t n, const float *imp) {
    block_q4_0 *b = dst;
    for (int64_t i = 0; i < n / QK4_0; i++, src += QK4_0, imp += QK4_0) {
        b[i].d = sym_scale_imp(src, imp, QK4_0, -8, 7);
        const float d = fp16_to_fp32(b[i].d), id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int j = 0; j < QK4_0 / 2; j++)
            b[i].qs[j] = (uint8_t)((q_round(src[j] * id, -8, 7) + 8) | ((q_round(src[j + 16] * id, -8, 7) + 8) << 4));
    }
}

static float q4_0_dot(const void *w, const float *x, int64_t n) {
    const block_q4_0 *b = w;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK4_0; i++, x += QK4_0) {
        float s = 0.0f;
        for (int j = 0; j < QK4_0 / 2; j++) {
            s += (float)((b[i].qs[j] & 0x0F) - 8) * x[j];
            s += (float)((b[i].qs[j] >> 4) - 8) * x[j + QK4_0 / 2];
        }
        sum += s * fp16_to_fp32(b[i].d);
    }
    return sum;
}

/* ---------------------------------------------------------------------------
 * Q4_1: y = q * d + m, q 4 bits, same nibble order as Q4_0.
 * ------------------------------------------------------------------------- */

static void q4_1_dequantize(const void *src, float *dst, int64_t n) {
    const block_q4_1 *b = src;
    for (int64_t i = 0; i < n / QK4_1; i++, dst += QK4_1) {
        const float d = fp16_to_fp32(b[i].d), m = fp16_to_fp32(b[i].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            const int x0 = b[i].qs[j] & 0x0F;
            const int x1 = b[i].qs[j] >> 4;
            dst[j] = x0 * d + m;
            dst[j + QK4_1 / 2] = x1 * d + m;
        }
    }
}

/* Min/max of a block as (m, d) for 2^bits levels; m and d come back already
 * rounded to fp16 (as floats), along with their stored bits. */
static void minmax_scale(const float *x, int n, int levels, fp16_t *d16, fp16_t *m16,
                         float *d, float *m) {
    float lo = x[0], hi = x[0];
    for (int j = 1; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *m16 = fp16_scale(lo);
    *m = fp16_to_fp32(*m16);
    /* divide before subtracting so that hi - lo cannot overflow */
    const float step = hi / (float)(levels - 1) - *m / (float)(levels - 1);
    *d16 = fp16_scale(step > 0.0f ? step : 0.0f);
    *d = fp16_to_fp32(*d16);
}

static void q4_1_quantize(const float *src, void *dst, int64_t n) {
    block_q4_1 *b = dst;
    for (int64_t i = 0; i < n / QK4_1; i++, src += QK4_1) {
        float d, m;
        minmax_scale(src, QK4_1, 16, &b[i].d, &b[i].m, &d, &m);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int j = 0; j < QK4_1 / 2; j++) {
            const int q0 = q_round((src[j] - m) * id, 0, 15);
            const int q1 = q_round((src[j + QK4_1 / 2] - m) * id, 0, 15);
            b[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

static void q4_1_quantize_imp(const float *src, void *dst, int64_t n, const float *imp) {
    block_q4_1 *b = dst;
    for (int64_t i = 0; i < n / QK4_1; i++, src += QK4_1, imp += QK4_1) {
        affine_scale_imp(src, imp, QK4_1, 15, &b[i].d, &b[i].m);
        const float d = fp16_to_fp32(b[i].d), m = fp16_to_fp32(b[i].m), id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int j = 0; j < QK4_1 / 2; j++)
            b[i].qs[j] = (uint8_t)(q_round((src[j] - m) * id, 0, 15) | (q_round((src[j + 16] - m) * id, 0, 15) << 4));
    }
}

static float q4_1_dot(const void *w, const float *x, int64_t n) {
    const block_q4_1 *b = w;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK4_1; i++, x += QK4_1) {
        float sqx = 0.0f, sx = 0.0f;
        for (int j = 0; j < QK4_1 / 2; j++) {
            sqx += (float)(b[i].qs[j] & 0x0F) * x[j] + (float)(b[i].qs[j] >> 4) * x[j + QK4_1 / 2];
            sx += x[j] + x[j + QK4_1 / 2];
        }
        sum += sqx * fp16_to_fp32(b[i].d) + sx * fp16_to_fp32(b[i].m);
    }
    return sum;
}

/* ---------------------------------------------------------------------------
 * Q5_0 / Q5_1: Q4_0 / Q4_1 plus a fifth bit per value in qh, a little-endian
 * uint32: bit j belongs to value j, bit j+16 to value j+16.
 * ------------------------------------------------------------------------- */

static uint32_t qh_load(const uint8_t qh[4]) {
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

static void qh_store(uint8_t qh[4], uint32_t v) {
    for (int k = 0; k < 4; k++) qh[k] = (uint8_t)(v >> (8 * k));
}

/* The two 5-bit quants (0..31) held in byte j of a Q5 block. */
static void q5_pair(const uint8_t *qs, uint32_t qh, int j, int *x0, int *x1) {
    const int h0 = (int)((qh >> j) << 4) & 0x10;
    const int h1 = (int)(qh >> (j + 12)) & 0x10;
    *x0 = (qs[j] & 0x0F) | h0;
    *x1 = (qs[j] >> 4) | h1;
}

static void q5_0_dequantize(const void *src, float *dst, int64_t n) {
    const block_q5_0 *b = src;
    for (int64_t i = 0; i < n / QK5_0; i++, dst += QK5_0) {
        const float d = fp16_to_fp32(b[i].d);
        const uint32_t qh = qh_load(b[i].qh);
        for (int j = 0; j < QK5_0 / 2; j++) {
            int x0, x1;
            q5_pair(b[i].qs, qh, j, &x0, &x1);
            dst[j] = (x0 - 16) * d;
            dst[j + QK5_0 / 2] = (x1 - 16) * d;
        }
    }
}

/* 32 five-bit codes round((x - m) / d) + bias into qs and qh. */
static void q5_codes(const float *x, float d, float m, int lo, int hi, int bias, uint8_t *qs, uint8_t qh8[4]) {
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        const int q0 = q_round((x[j] - m) * id, lo, hi) + bias;
        const int q1 = q_round((x[j + 16] - m) * id, lo, hi) + bias;
        qs[j] = (uint8_t)((q0 & 0x0F) | ((q1 & 0x0F) << 4));
        qh |= (uint32_t)(q0 >> 4) << j;
        qh |= (uint32_t)(q1 >> 4) << (j + 16);
    }
    qh_store(qh8, qh);
}

static void q5_0_quantize(const float *src, void *dst, int64_t n) {
    block_q5_0 *b = dst;
    for (int64_t i = 0; i < n / QK5_0; i++, src += QK5_0) {
        float vmax;
        abs_max(src, QK5_0, &vmax);
        b[i].d = fp16_scale(vmax / -16.0f);
        q5_codes(src, fp16_to_fp32(b[i].d), 0.0f, -16, 15, 16, b[i].qs, b[i].qh);
    }
}

static void q5_0_quantize_imp(const float *src, void *dst, int64_t n, const float *imp) {
    block_q5_0 *b = dst;
    for (int64_t i = 0; i < n / QK5_0; i++, src += QK5_0, imp += QK5_0) {
        b[i].d = sym_scale_imp(src, imp, QK5_0, -16, 15);
        q5_codes(src, fp16_to_fp32(b[i].d), 0.0f, -16, 15, 16, b[i].qs, b[i].qh);
    }
}

static float q5_0_dot(const void *w, const float *x, int64_t n) {
    const block_q5_0 *b = w;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK5_0; i++, x += QK5_0) {
        const uint32_t qh = qh_load(b[i].qh);
        float s = 0.0f;
        for (int j = 0; j < QK5_0 / 2; j++) {
            int x0, x1;
            q5_pair(b[i].qs, qh, j, &x0, &x1);
            s += (float)(x0 - 16) * x[j] + (float)(x1 - 16) * x[j + QK5_0 / 2];
        }
        sum += s * fp16_to_fp32(b[i].d);
    }
    return sum;
}

static void q5_1_dequantize(const void *src, float *dst, int64_t n) {
    const block_q5_1 *b = src;
    for (int64_t i = 0; i < n / QK5_1; i++, dst += QK5_1) {
        const float d = fp16_to_fp32(b[i].d), m = fp16_to_fp32(b[i].m);
        const uint32_t qh = qh_load(b[i].qh);
        for (int j = 0; j < QK5_1 / 2; j++) {
            int x0, x1;
            q5_pair(b[i].qs, qh, j, &x0, &x1);
            dst[j] = x0 * d + m;
            dst[j + QK5_1 / 2] = x1 * d + m;
        }
    }
}

static void q5_1_quantize(const float *src, void *dst, int64_t n) {
    block_q5_1 *b = dst;
    for (int64_t i = 0; i < n / QK5_1; i++, src += QK5_1) {
        float d, m;
        minmax_scale(src, QK5_1, 32, &b[i].d, &b[i].m, &d, &m);
        q5_codes(src, d, m, 0, 31, 0, b[i].qs, b[i].qh);
    }
}

static void q5_1_quantize_imp(const float *src, void *dst, int64_t n, const float *imp) {
    block_q5_1 *b = dst;
    for (int64_t i = 0; i < n / QK5_1; i++, src += QK5_1, imp += QK5_1) {
        affine_scale_imp(src, imp, QK5_1, 31, &b[i].d, &b[i].m);
        q5_codes(src, fp16_to_fp32(b[i].d), fp16_to_fp32(b[i].m), 0, 31, 0, b[i].qs, b[i].qh);
    }
}

static float q5_1_dot(const void *w, const float *x, int64_t n) {
    const block_q5_1 *b = w;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK5_1; i++, x += QK5_1) {
        const uint32_t qh = qh_load(b[i].qh);
        float sqx = 0.0f, sx = 0.0f;
        for (int j = 0; j < QK5_1 / 2; j++) {
            int x0, x1;
            q5_pair(b[i].qs, qh, j, &x0, &x1);
            sqx += (float)x0 * x[j] + (float)x1 * x[j + QK5_1 / 2];
            sx += x[j] + x[j + QK5_1 / 2];
        }
        sum += sqx * fp16_to_fp32(b[i].d) + sx * fp16_to_fp32(b[i].m);
    }
    return sum;
}

/* ---------------------------------------------------------------------------
 * Q8_0: y = q * d, q int8.
 * ------------------------------------------------------------------------- */

static void q8_0_dequantize(const void *src, float *dst, int64_t n) {
    const block_q8_0 *b = src;
    for (int64_t i = 0; i < n / QK8_0; i++, dst += QK8_0) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < QK8_0; j++) dst[j] = b[i].qs[j] * d;
    }
}

static void q8_0_quantize(const float *src, void *dst, int64_t n) {
    block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / QK8_0; i++, src += QK8_0) {
        const float amax = abs_max(src, QK8_0, NULL);
        b[i].d = fp16_scale(amax / 127.0f);
        const float d = fp16_to_fp32(b[i].d);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        /* rounding d to fp16 moves amax/d by at most 2^-11 * 127 < 0.5: no clamp is hit */
        for (int j = 0; j < QK8_0; j++) b[i].qs[j] = (int8_t)q_round(src[j] * id, -127, 127);
    }
}

static float q8_0_dot(const void *w, const float *x, int64_t n) {
    const block_q8_0 *b = w;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        float s = 0.0f;
        for (int j = 0; j < QK8_0; j++) s += (float)b[i].qs[j] * x[j];
        sum += s * fp16_to_fp32(b[i].d);
    }
    return sum;
}

/* ---------------------------------------------------------------------------
 * K-quants, unpacked form and the arithmetic shared by all of them
 * ------------------------------------------------------------------------- */

/* Affine super-block (Q2_K, Q4_K, Q5_K): sub-block j of `sub` values is
 * y = (d*sc[j])*q - (dmin*mn[j]), q in [0, qmax], sc and mn in [0, smax]. */
typedef struct {
    float d, dmin; /* as stored (fp16 values) */
    uint8_t sc[QK_K / 16], mn[QK_K / 16];
    uint8_t q[QK_K];
} kq_affine;

/* Symmetric super-block (Q3_K, Q6_K): y = (d*sc[j])*q, signed sc and q. */
typedef struct {
    float d;
    int8_t sc[QK_K / 16];
    int8_t q[QK_K];
} kq_sym;

static void kq_affine_dequantize(const kq_affine *k, int sub, float *y) {
    for (int j = 0; j < QK_K / sub; j++) {
        const float dl = k->d * k->sc[j], ml = k->dmin * k->mn[j];
        for (int l = 0; l < sub; l++) y[j * sub + l] = dl * k->q[j * sub + l] - ml;
    }
}

static float kq_affine_dot(const kq_affine *k, int sub, const float *x) {
    float sum = 0.0f;
    for (int j = 0; j < QK_K / sub; j++) {
        float sqx = 0.0f, sx = 0.0f;
        for (int l = 0; l < sub; l++) {
            sqx += (float)k->q[j * sub + l] * x[j * sub + l];
            sx += x[j * sub + l];
        }
        sum += (k->d * k->sc[j]) * sqx - (k->dmin * k->mn[j]) * sx;
    }
    return sum;
}

static void kq_sym_dequantize(const kq_sym *k, int sub, float *y) {
    for (int j = 0; j < QK_K / sub; j++) {
        const float dl = k->d * k->sc[j];
        for (int l = 0; l < sub; l++) y[j * sub + l] = dl * k->q[j * sub + l];
    }
}

static float kq_sym_dot(const kq_sym *k, int sub, const float *x) {
    float sum = 0.0f;
    for (int j = 0; j < QK_K / sub; j++) {
        float sqx = 0.0f;
        for (int l = 0; l < sub; l++) sqx += (float)k->q[j * sub + l] * x[j * sub + l];
        sum += (k->d * k->sc[j]) * sqx;
    }
    return sum;
}

/* Squared error of x ~ scale*L + lo with L = round((x - lo)/scale) in [0, qmax]. */
static double kq_affine_sse(const float *x, const float *w, int n, int qmax, double scale, double lo) {
    double sse = 0.0;
    for (int i = 0; i < n; i++) {
        const int l = scale > 0.0 ? q_round((float)((x[i] - lo) / scale), 0, qmax) : 0;
        const double e = scale * l + lo - x[i];
        sse += (w ? w[i] : 1.0) * e * e;
    }
    return sse;
}

/* Fit one sub-block as x ~ scale*L - offset, L in [0, qmax], scale >= 0 and
 * offset >= 0 (the stored min is unsigned, so the grid always reaches down
 * to zero or below). Start from min/max; then, for a spread of candidate
 * inverse scales, quantize and refit (scale, offset) by least squares,
 * keeping the fit with the smallest squared error. */
static void kq_fit_affine(const float *x, const float *w, int n, int qmax, float *scale, float *offset) {
    float lo = 0.0f, hi = x[0];
    for (int i = 0; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
    }
    if (!(hi > lo)) { /* constant sub-block (all <= 0): the offset alone is exact */
        *scale = 0.0f;
        *offset = -lo;
        return;
    }
    const double range = (double)hi - (double)lo;
    double best_scale = range / qmax, best_lo = lo;
    double best_sse = kq_affine_sse(x, w, n, qmax, best_scale, best_lo);
    for (int step = -10; step <= 10; step++) {
        const double iscale = (qmax + 0.1 * step) / range;
        double sw = 0, sl = 0, sl2 = 0, sx = 0, sxl = 0;
        for (int i = 0; i < n; i++) { /* with no weights every w_i is 1: the plain least squares, exactly */
            const int l = q_round((float)(iscale * (x[i] - lo)), 0, qmax);
            const double wi = w ? w[i] : 1.0;
            sw += wi;
            sl += wi * l;
            sl2 += wi * l * l;
            sx += wi * x[i];
            sxl += wi * x[i] * l;
        }
        const double det = sw * sl2 - sl * sl;
        if (!(det > 0.0)) continue;
        double s = (sw * sxl - sl * sx) / det;
        double m = (sl2 * sx - sl * sxl) / det;
        if (m > 0.0) { /* the offset must stay >= 0: refit the scale alone */
            m = 0.0;
            s = sxl / sl2;
        }
        if (!(s > 0.0)) continue;
        const double sse = kq_affine_sse(x, w, n, qmax, s, m);
        if (sse < best_sse) {
            best_sse = sse;
            best_scale = s;
            best_lo = m;
        }
    }
    *scale = (float)best_scale;
    *offset = (float)-best_lo;
}

/* Quantize 256 values to the affine form: fit each sub-block, quantize the
 * sub-block scales and offsets to smax levels of the fp16 super-block
 * scales d and dmin, then quantize each value against the scale and offset
 * it will actually be dequantized with. */
static void kq_affine_quantize(const float *x, const float *w, int sub, int qmax, int smax, kq_affine *k) {
    const int nsub = QK_K / sub;
    float scale[QK_K / 16] = { 0 }, offset[QK_K / 16] = { 0 };
    float max_scale = 0.0f, max_offset = 0.0f;
    assert(nsub <= QK_K / 16);
    for (int j = 0; j < nsub; j++) {
        kq_fit_affine(x + j * sub, w ? w + j * sub : NULL, sub, qmax, &scale[j], &offset[j]);
        if (scale[j] > max_scale) max_scale = scale[j];
        if (offset[j] > max_offset) max_offset = offset[j];
    }
    k->d = fp16_to_fp32(fp16_scale(max_scale / smax));
    k->dmin = fp16_to_fp32(fp16_scale(max_offset / smax));
    for (int j = 0; j < nsub; j++) {
        k->sc[j] = (uint8_t)(k->d > 0.0f ? q_round(scale[j] / k->d, 0, smax) : 0);
        k->mn[j] = (uint8_t)(k->dmin > 0.0f ? q_round(offset[j] / k->dmin, 0, smax) : 0);
        const float dl = k->d * k->sc[j], ml = k->dmin * k->mn[j];
        const float il = dl > 0.0f ? 1.0f / dl : 0.0f;
        for (int l = 0; l < sub; l++)
            k->q[j * sub + l] = (uint8_t)q_round((x[j * sub + l] + ml) * il, 0, qmax);
    }
}

/* Squared error of x ~ scale*L with L = round(x/scale) in [qlo, qhi]. */
static double kq_sym_sse(const float *x, const float *w, int n, int qlo, int qhi, double scale) {
    double sse = 0.0;
    for (int i = 0; i < n; i++) {
        const int l = scale != 0.0 ? q_round((float)(x[i] / scale), qlo, qhi) : 0;
        const double e = scale * l - x[i];
        sse += (w ? w[i] : 1.0) * e * e;
    }
    return sse;
}

/* Fit one sub-block as x ~ scale*L, L in [qlo, qhi] (qlo = -qhi - 1). The
 * value of largest magnitude maps near qlo, which uses the extra negative
 * level; candidate inverse scales around that are each refit by least
 * squares. The scale may be negative. */
static float kq_fit_sym(const float *x, const float *w, int n, int qlo, int qhi) {
    float vmax;
    if (abs_max(x, n, &vmax) == 0.0f) return 0.0f;
    double best_scale = (double)vmax / qlo;
    double best_sse = kq_sym_sse(x, w, n, qlo, qhi, best_scale);
    for (int step = -9; step <= 9; step++) {
        const double iscale = (qlo - 0.1 * step) / vmax;
        double sl2 = 0, sxl = 0;
        for (int i = 0; i < n; i++) {
            const int l = q_round((float)(iscale * x[i]), qlo, qhi);
            const double wi = w ? w[i] : 1.0;
            sl2 += wi * l * l;
            sxl += wi * x[i] * l;
        }
        if (!(sl2 > 0.0)) continue;
        const double s = sxl / sl2;
        const double sse = kq_sym_sse(x, w, n, qlo, qhi, s);
        if (sse < best_sse) {
            best_sse = sse;
            best_scale = s;
        }
    }
    return (float)best_scale;
}

/* Quantize 256 values to the symmetric form; sub-block scales become signed
 * integers in [slo, shi] of the fp16 super-block scale d, with the largest
 * one mapped to slo (as ggml does). */
static void kq_sym_quantize(const float *x, const float *w, int sub, int qlo, int qhi, int slo, int shi,
                            kq_sym *k) {
    const int nsub = QK_K / sub;
    float scale[QK_K / 16] = { 0 };
    assert(nsub <= QK_K / 16);
    for (int j = 0; j < nsub; j++) scale[j] = kq_fit_sym(x + j * sub, w ? w + j * sub : NULL, sub, qlo, qhi);
    float vmax;
    abs_max(scale, nsub, &vmax);
    k->d = fp16_to_fp32(fp16_scale(vmax / slo));
    for (int j = 0; j < nsub; j++) {
        k->sc[j] = (int8_t)(k->d != 0.0f ? q_round(scale[j] / k->d, slo, shi) : 0);
        const float dl = k->d * k->sc[j];
        const float il = dl != 0.0f ? 1.0f / dl : 0.0f;
        for (int l = 0; l < sub; l++)
            k->q[j * sub + l] = (int8_t)q_round(x[j * sub + l] * il, qlo, qhi);
    }
}

/* ---------------------------------------------------------------------------
 * Q2_K: 16 sub-blocks of 16, affine, 2-bit quants, 4-bit scale | 4-bit min
 * per sub-block. Each 128-value half uses 32 bytes of qs; value
 * 128h + 32s + l (l < 32) is bits 2s..2s+1 of qs[32h + l], so sub-block
 * 8h + 2s + l/16.
 * ------------------------------------------------------------------------- */

static void q2_K_unpack(const block_q2_K *b, kq_affine *k) {
    k->d = fp16_to_fp32(b->d);
    k->dmin = fp16_to_fp32(b->dmin);
    for (int j = 0; j < QK_K / 16; j++) {
        k->sc[j] = b->scales[j] & 0x0F;
        k->mn[j] = b->scales[j] >> 4;
    }
    for (int h = 0; h < 2; h++)
        for (int s = 0; s < 4; s++)
            for (int l = 0; l < 32; l++)
                k->q[128 * h + 32 * s + l] = (b->qs[32 * h + l] >> (2 * s)) & 3;
}

static void q2_K_pack(const kq_affine *k, block_q2_K *b) {
    memset(b, 0, sizeof *b);
    b->d = fp32_to_fp16(k->d);
    b->dmin = fp32_to_fp16(k->dmin);
    for (int j = 0; j < QK_K / 16; j++) {
        assert(k->sc[j] < 16 && k->mn[j] < 16);
        b->scales[j] = (uint8_t)(k->sc[j] | (k->mn[j] << 4));
    }
    for (int h = 0; h < 2; h++)
        for (int s = 0; s < 4; s++)
            for (int l = 0; l < 32; l++) {
                assert(k->q[128 * h + 32 * s + l] < 4);
                b->qs[32 * h + l] |= (uint8_t)(k->q[128 * h + 32 * s + l] << (2 * s));
            }
}

static void q2_K_dequantize(const void *src, float *dst, int64_t n) {
    const block_q2_K *b = src;
    kq_affine k;
    for (int64_t i = 0; i < n / QK_K; i++) {
        q2_K_unpack(&b[i], &k);
        kq_affine_dequantize(&k, 16, dst + i * QK_K);
    }
}

static void q2_K_quantize_imp(const float *src, void *dst, int64_t n, const float *imp) {
    block_q2_K *b = dst;
    kq_affine k;
    for (int64_t i = 0; i < n / QK_K; i++) {
        kq_affine_quantize(src + i * QK_K, imp ? imp + i * QK_K : NULL, 16, 3, 15, &k);
        q2_K_pack(&k, &b[i]);
    }
}

static void q2_K_quantize(const float *src, void *dst, int64_t n) { q2_K_quantize_imp(src, dst, n, NULL); }

static float q2_K_dot(const void *w, const float *x, int64_t n) {
    const block_q2_K *b = w;
    kq_affine k;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        q2_K_unpack(&b[i], &k);
        sum += kq_affine_dot(&k, 16, x + i * QK_K);
    }
    return sum;
}

/* ---------------------------------------------------------------------------
 * Q3_K: 16 sub-blocks of 16, symmetric, 3-bit quants (low 2 bits in qs with
 * Q2_K's order, high bit in hmask), 6-bit scales stored +32. Value
 * 128h + 32s + l has its high bit in bit 4h+s of hmask[l]; a clear bit
 * means -4. Scale i: low 4 bits are the low nibble of scales[i] (i < 8) or
 * the high nibble of scales[i-8] (i >= 8); high 2 bits are bits 2(i/4)..
 * of scales[8 + i%4].
 * ------------------------------------------------------------------------- */

static void q3_K_unpack(const block_q3_K *b, kq_sym *k) {
    k->d = fp16_to_fp32(b->d);
    for (int i = 0; i < QK_K / 16; i++) {
        const int low = i < 8 ? (b->scales[i] & 0x0F) : (b->scales[i - 8] >> 4);
        const int high = (b->scales[8 + i % 4] >> (2 * (i / 4))) & 3;
        k->sc[i] = (int8_t)((low | (high << 4)) - 32);
    }
    for (int h = 0; h < 2; h++)
        for (int s = 0; s < 4; s++)
            for (int l = 0; l < 32; l++) {
                const int lo2 = (b->qs[32 * h + l] >> (2 * s)) & 3;
                const int hbit = (b->hmask[l] >> (4 * h + s)) & 1;
                k->q[128 * h + 32 * s + l] = (int8_t)(lo2 - (hbit ? 0 : 4));
            }
}

static void q3_K_pack(const kq_sym *k, block_q3_K *b) {
    memset(b, 0, sizeof *b);
    b->d = fp32_to_fp16(k->d);
    for (int i = 0; i < QK_K / 16; i++) {
        assert(k->sc[i] >= -32 && k->sc[i] <= 31);
        const int v = k->sc[i] + 32;
        if (i < 8) b->scales[i] |= (uint8_t)(v & 0x0F);
        else b->scales[i - 8] |= (uint8_t)((v & 0x0F) << 4);
        b->scales[8 + i % 4] |= (uint8_t)((v >> 4) << (2 * (i / 4)));
    }
    for (int h = 0; h < 2; h++)
        for (int s = 0; s < 4; s++)
            for (int l = 0; l < 32; l++) {
                const int q = k->q[128 * h + 32 * s + l] + 4; /* 0..7 */
                assert(q >= 0 && q < 8);
                b->qs[32 * h + l] |= (uint8_t)((q & 3) << (2 * s));
                b->hmask[l] |= (uint8_t)((q >> 2) << (4 * h + s));
            }
}

static void q3_K_dequantize(const void *src, float *dst, int64_t n) {
    const block_q3_K *b = src;
    kq_sym k;
    for (int64_t i = 0; i < n / QK_K; i++) {
        q3_K_unpack(&b[i], &k);
        kq_sym_dequantize(&k, 16, dst + i * QK_K);
    }
}

static void q3_K_quantize_imp(const float *src, void *dst, int64_t n, const float *imp) {
    block_q3_K *b = dst;
    kq_sym k;
    for (int64_t i = 0; i < n / QK_K; i++) {
        kq_sym_quantize(src + i * QK_K, imp ? imp + i * QK_K : NULL, 16, -4, 3, -32, 31, &k);
        q3_K_pack(&k, &b[i]);
    }
}

static void q3_K_quantize(const float *src, void *dst, int64_t n) { q3_K_quantize_imp(src, dst, n, NULL); }

static float q3_K_dot(const void *w, const float *x, int64_t n) {
    const block_q3_K *b = w;
    kq_sym k;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        q3_K_unpack(&b[i], &k);
        sum += kq_sym_dot(&k, 16, x + i * QK_K);
    }
    return sum;
}

/* ---------------------------------------------------------------------------
 * Q4_K / Q5_K: 8 sub-blocks of 32, affine, 6-bit scales and mins packed in
 * 12 bytes (ggml's get_scale_min_k4). Each 64 values use 32 bytes of qs:
 * the low nibbles are sub-block 2c, the high nibbles sub-block 2c+1. Q5_K's
 * fifth bit of value 32j + l is bit j of qh[l].
 * ------------------------------------------------------------------------- */

void quant_k4_scale_min(const uint8_t *q, int j, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

static void k4_scale_min_set(uint8_t *q, int j, int sc, int m) {
    assert(sc >= 0 && sc < 64 && m >= 0 && m < 64);
    if (j < 4) {
        q[j] |= (uint8_t)sc;
        q[j + 4] |= (uint8_t)m;
    } else {
        q[j + 4] |= (uint8_t)((sc & 0x0F) | ((m & 0x0F) << 4));
        q[j - 4] |= (uint8_t)((sc >> 4) << 6);
        q[j] |= (uint8_t)((m >> 4) << 6);
    }
}

static void q4_K_unpack(const block_q4_K *b, kq_affine *k) {
    k->d = fp16_to_fp32(b->d);
    k->dmin = fp16_to_fp32(b->dmin);
    for (int j = 0; j < 8; j++) quant_k4_scale_min(b->scales, j, &k->sc[j], &k->mn[j]);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            k->q[64 * c + l] = b->qs[32 * c + l] & 0x0F;
            k->q[64 * c + 32 + l] = b->qs[32 * c + l] >> 4;
        }
}

static void q4_K_pack(const kq_affine *k, block_q4_K *b) {
    memset(b, 0, sizeof *b);
    b->d = fp32_to_fp16(k->d);
    b->dmin = fp32_to_fp16(k->dmin);
    for (int j = 0; j < 8; j++) k4_scale_min_set(b->scales, j, k->sc[j], k->mn[j]);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            assert(k->q[64 * c + l] < 16 && k->q[64 * c + 32 + l] < 16);
            b->qs[32 * c + l] = (uint8_t)(k->q[64 * c + l] | (k->q[64 * c + 32 + l] << 4));
        }
}

static void q4_K_dequantize(const void *src, float *dst, int64_t n) {
    const block_q4_K *b = src;
    kq_affine k;
    for (int64_t i = 0; i < n / QK_K; i++) {
        q4_K_unpack(&b[i], &k);
        kq_affine_dequantize(&k, 32, dst + i * QK_K);
    }
}

static void q4_K_quantize_imp(const float *src, void *dst, int64_t n, const float *imp) {
    block_q4_K *b = dst;
    kq_affine k;
    for (int64_t i = 0; i < n / QK_K; i++) {
        kq_affine_quantize(src + i * QK_K, imp ? imp + i * QK_K : NULL, 32, 15, 63, &k);
        q4_K_pack(&k, &b[i]);
    }
}

static void q4_K_quantize(const float *src, void *dst, int64_t n) { q4_K_quantize_imp(src, dst, n, NULL); }

static float q4_K_dot(const void *w, const float *x, int64_t n) {
    const block_q4_K *b = w;
    kq_affine k;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        q4_K_unpack(&b[i], &k);
        sum += kq_affine_dot(&k, 32, x + i * QK_K);
    }
    return sum;
}

static void q5_K_unpack(const block_q5_K *b, kq_affine *k) {
    k->d = fp16_to_fp32(b->d);
    k->dmin = fp16_to_fp32(b->dmin);
    for (int j = 0; j < 8; j++) quant_k4_scale_min(b->scales, j, &k->sc[j], &k->mn[j]);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            const int h0 = (b->qh[l] >> (2 * c)) & 1, h1 = (b->qh[l] >> (2 * c + 1)) & 1;
            k->q[64 * c + l] = (uint8_t)((b->qs[32 * c + l] & 0x0F) | (h0 << 4));
            k->q[64 * c + 32 + l] = (uint8_t)((b->qs[32 * c + l] >> 4) | (h1 << 4));
        }
}

static void q5_K_pack(const kq_affine *k, block_q5_K *b) {
    memset(b, 0, sizeof *b);
    b->d = fp32_to_fp16(k->d);
    b->dmin = fp32_to_fp16(k->dmin);
    for (int j = 0; j < 8; j++) k4_scale_min_set(b->scales, j, k->sc[j], k->mn[j]);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            const int q0 = k->q[64 * c + l], q1 = k->q[64 * c + 32 + l];
            assert(q0 < 32 && q1 < 32);
            b->qs[32 * c + l] = (uint8_t)((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            b->qh[l] |= (uint8_t)(((q0 >> 4) << (2 * c)) | ((q1 >> 4) << (2 * c + 1)));
        }
}

static void q5_K_dequantize(const void *src, float *dst, int64_t n) {
    const block_q5_K *b = src;
    kq_affine k;
    for (int64_t i = 0; i < n / QK_K; i++) {
        q5_K_unpack(&b[i], &k);
        kq_affine_dequantize(&k, 32, dst + i * QK_K);
    }
}

static void q5_K_quantize_imp(const float *src, void *dst, int64_t n, const float *imp) {
    block_q5_K *b = dst;
    kq_affine k;
    for (int64_t i = 0; i < n / QK_K; i++) {
        kq_affine_quantize(src + i * QK_K, imp ? imp + i * QK_K : NULL, 32, 31, 63, &k);
        q5_K_pack(&k, &b[i]);
    }
}

static void q5_K_quantize(const float *src, void *dst, int64_t n) { q5_K_quantize_imp(src, dst, n, NULL); }

static float q5_K_dot(const void *w, const float *x, int64_t n) {
    const block_q5_K *b = w;
    kq_affine k;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        q5_K_unpack(&b[i], &k);
        sum += kq_affine_dot(&k, 32, x + i * QK_K);
    }
    return sum;
}

/* ---------------------------------------------------------------------------
 * Q6_K: 16 sub-blocks of 16, symmetric, 6-bit quants stored +32 (low 4 bits
 * in ql, high 2 in qh), int8 scales. In half h (ql + 64h, qh + 32h), value
 * 128h + 32r + l (r < 4, l < 32) takes the low (r = 0, 1) or high (r = 2, 3)
 * nibble of ql[l + 32*(r & 1)] and bits 2r..2r+1 of qh[l].
 * ------------------------------------------------------------------------- */

static void q6_K_unpack(const block_q6_K *b, kq_sym *k) {
    k->d = fp16_to_fp32(b->d);
    for (int i = 0; i < QK_K / 16; i++) k->sc[i] = b->scales[i];
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
        for (int r = 0; r < 4; r++)
            for (int l = 0; l < 32; l++) {
                const uint8_t byte = ql[l + 32 * (r & 1)];
                const int lo4 = r < 2 ? (byte & 0x0F) : (byte >> 4);
                const int hi2 = (qh[l] >> (2 * r)) & 3;
                k->q[128 * h + 32 * r + l] = (int8_t)((lo4 | (hi2 << 4)) - 32);
            }
    }
}

static void q6_K_pack(const kq_sym *k, block_q6_K *b) {
    memset(b, 0, sizeof *b);
    b->d = fp32_to_fp16(k->d);
    for (int i = 0; i < QK_K / 16; i++) b->scales[i] = k->sc[i];
    for (int h = 0; h < 2; h++) {
        uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
        for (int r = 0; r < 4; r++)
            for (int l = 0; l < 32; l++) {
                const int q = k->q[128 * h + 32 * r + l] + 32; /* 0..63 */
                assert(q >= 0 && q < 64);
                ql[l + 32 * (r & 1)] |= (uint8_t)((q & 0x0F) << (r < 2 ? 0 : 4));
                qh[l] |= (uint8_t)((q >> 4) << (2 * r));
            }
    }
}

static void q6_K_dequantize(const void *src, float *dst, int64_t n) {
    const block_q6_K *b = src;
    kq_sym k;
    for (int64_t i = 0; i < n / QK_K; i++) {
        q6_K_unpack(&b[i], &k);
        kq_sym_dequantize(&k, 16, dst + i * QK_K);
    }
}

static void q6_K_quantize_imp(const float *src, void *dst, int64_t n, const float *imp) {
    block_q6_K *b = dst;
    kq_sym k;
    for (int64_t i = 0; i < n / QK_K; i++) {
        kq_sym_quantize(src + i * QK_K, imp ? imp + i * QK_K : NULL, 16, -32, 31, -128, 127, &k);
        q6_K_pack(&k, &b[i]);
    }
}

static void q6_K_quantize(const float *src, void *dst, int64_t n) { q6_K_quantize_imp(src, dst, n, NULL); }

static float q6_K_dot(const void *w, const float *x, int64_t n) {
    const block_q6_K *b = w;
    kq_sym k;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        q6_K_unpack(&b[i], &k);
        sum += kq_sym_dot(&k, 16, x + i * QK_K);
    }
    return sum;
}

/* ---------------------------------------------------------------------------
 * Q8_K: float d, int8 qs, bsums = sum of each 16 qs (used by the integer dot
 * kernels of the other K-quants). Quantized exactly as ggml: the value of
 * largest magnitude m gives iscale = -127/m, q = min(127, round(iscale*x)),
 * d = 1/iscale.
 * ------------------------------------------------------------------------- */

static void q8_K_dequantize(const void *src, float *dst, int64_t n) {
    const block_q8_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K)
        for (int j = 0; j < QK_K; j++) dst[j] = b[i].d * b[i].qs[j];
}

static void q8_K_quantize(const float *src, void *dst, int64_t n) {
    block_q8_K *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        memset(&b[i], 0, sizeof b[i]);
        float vmax;
        abs_max(src, QK_K, &vmax);
        const float iscale = vmax != 0.0f ? -127.0f / vmax : 0.0f;
        if (!isfinite(iscale) || iscale == 0.0f) continue; /* zero (or subnormal-only) block */
        for (int j = 0; j < QK_K; j++) b[i].qs[j] = (int8_t)q_round(iscale * src[j], -128, 127);
        for (int g = 0; g < QK_K / 16; g++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) sum += b[i].qs[16 * g + l];
            b[i].bsums[g] = (int16_t)sum;
        }
        b[i].d = 1.0f / iscale;
    }
}

static float q8_K_dot(const void *w, const float *x, int64_t n) {
    const block_q8_K *b = w;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float s = 0.0f;
        for (int j = 0; j < QK_K; j++) s += (float)b[i].qs[j] * x[j];
        sum += s * b[i].d;
    }
    return sum;
}

/* ---------------------------------------------------------------------------
 * Traits table and dispatch
 * ------------------------------------------------------------------------- */

/* act: the activation format the weight type's kernels take (kernels.h),
 * ggml's vec_dot_type: Q8_0 for the 32-value formats with no min term, Q8_1
 * (which carries the block sum the min multiplies) for those with one, Q8_K
 * for the K-quants, F32 for the float types */
#define QUANT_ROW(id, nm, bs, ts, pfx, act) \
    [id] = { nm, bs, ts, pfx##_dequantize, pfx##_quantize, pfx##_dot, act, NULL }
#define QUANT_ROW_IMP(id, nm, bs, ts, pfx, act) \
    [id] = { nm, bs, ts, pfx##_dequantize, pfx##_quantize, pfx##_dot, act, pfx##_quantize_imp }

static const quant_traits quant_table[QT_COUNT] = {
    QUANT_ROW(QT_F32, "f32", 1, sizeof(float), f32, QT_F32),
    QUANT_ROW(QT_F16, "f16", 1, sizeof(fp16_t), f16, QT_F32),
    QUANT_ROW_IMP(QT_Q4_0, "q4_0", QK4_0, sizeof(block_q4_0), q4_0, QT_Q8_0),
    QUANT_ROW_IMP(QT_Q4_1, "q4_1", QK4_1, sizeof(block_q4_1), q4_1, QT_Q8_1),
    QUANT_ROW_IMP(QT_Q5_0, "q5_0", QK5_0, sizeof(block_q5_0), q5_0, QT_Q8_0),
    QUANT_ROW_IMP(QT_Q5_1, "q5_1", QK5_1, sizeof(block_q5_1), q5_1, QT_Q8_1),
    QUANT_ROW(QT_Q8_0, "q8_0", QK8_0, sizeof(block_q8_0), q8_0, QT_Q8_0),
    [QT_Q8_1] = { "q8_1", QK8_0, sizeof(block_q8_1), NULL, NULL, NULL, QT_Q8_1, NULL },
    QUANT_ROW_IMP(QT_Q2_K, "q2_K", QK_K, sizeof(block_q2_K), q2_K, QT_Q8_K),
    QUANT_ROW_IMP(QT_Q3_K, "q3_K", QK_K, sizeof(block_q3_K), q3_K, QT_Q8_K),
    QUANT_ROW_IMP(QT_Q4_K, "q4_K", QK_K, sizeof(block_q4_K), q4_K, QT_Q8_K),
    QUANT_ROW_IMP(QT_Q5_K, "q5_K", QK_K, sizeof(block_q5_K), q5_K, QT_Q8_K),
    QUANT_ROW_IMP(QT_Q6_K, "q6_K", QK_K, sizeof(block_q6_K), q6_K, QT_Q8_K),
    QUANT_ROW(QT_Q8_K, "q8_K", QK_K, sizeof(block_q8_K), q8_K, QT_Q8_K),
    QUANT_ROW(QT_BF16, "bf16", 1, sizeof(bf16_t), bf16, QT_F32),
};

#undef QUANT_ROW
#undef QUANT_ROW_IMP

const quant_traits *quant_traits_of(uint32_t type) {
    if (type >= QT_COUNT || quant_table[type].name == NULL) return NULL;
    return &quant_table[type];
}

bool quant_type_supported(uint32_t type) {
    const quant_traits *t = quant_traits_of(type);
    return t && t->dequantize && t->quantize && t->dot;
}

static int ascii_lower(int c) {
    return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

int quant_type_from_name(const char *name) {
    if (!name) return -1;
    for (int id = 0; id < QT_COUNT; id++) {
        const char *a = quant_table[id].name, *b = name;
        if (!a) continue;
        while (*a && *b && ascii_lower((unsigned char)*a) == ascii_lower((unsigned char)*b)) {
            a++;
            b++;
        }
        if (*a == '\0' && *b == '\0') return id;
    }
    return -1;
}

size_t quant_row_bytes(uint32_t type, int64_t n) {
    const quant_traits *t = quant_traits_of(type);
    assert(t != NULL);
    assert(n >= 0 && n % t->block_size == 0);
    if (!t || n < 0) return 0; /* only reachable with asserts compiled out */
    return (size_t)(n / t->block_size) * t->type_size;
}

/* The traits of a type the row kernels can run, with the row length checked.
 * Callers check the type when they load a tensor; a bad one here is a bug.
 * With asserts compiled out it yields NULL and the kernels do nothing. */
static const quant_traits *quant_row_traits(uint32_t type, int64_t n) {
    const quant_traits *t = quant_traits_of(type);
    assert(quant_type_supported(type));
    assert(n >= 0 && n % t->block_size == 0);
    if (!quant_type_supported(type) || n < 0 || n % t->block_size != 0) return NULL;
    return t;
}

void quant_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n) {
    const quant_traits *t = quant_row_traits(type, n);
    if (t) t->dequantize(src, dst, n);
}

void quant_quantize_row(uint32_t type, const float *src, void *dst, int64_t n) {
    const quant_traits *t = quant_row_traits(type, n);
    if (t) t->quantize(src, dst, n);
}

float quant_dot_row(uint32_t type, const void *w, const float *x, int64_t n) {
    const quant_traits *t = quant_row_traits(type, n);
    return t ? t->dot(w, x, n) : 0.0f;
}
