/*
 * kernels_neon — the AArch64 Advanced SIMD (NEON) path.
 *
 * The same arithmetic as kernels_scalar.c, sixteen bytes at a time. Every
 * AArch64 CPU has NEON, so nothing here needs a compiler flag; the one
 * optional piece is the int8 dot-product instruction (SDOT, ARMv8.2
 * "dotprod"), which sums four int8 products into each int32 lane in one step.
 * Without it the same sums take a widening multiply (SMULL) and a pairwise
 * add-accumulate (SADALP). Each integer dot kernel is therefore written once,
 * as an always-inline body taking `dp`, and instantiated twice: a plain
 * function, and one compiled for dotprod (a target attribute on just that
 * function, so the binary still runs on a CPU without the extension, which
 * kernels.c detects from HWCAP_ASIMDDP before choosing the table).
 *
 * What must match the scalar reference, and how:
 *
 *   - Activation quantizers produce identical bytes. Max |x| is exact in any
 *     order (vmaxnm ignores NaN as fmaxf does), x*id is the same float
 *     multiply, FCVTNS rounds half to even as lrintf does, and the saturating
 *     narrows clamp as act_round does. Q8_K's "first value of largest
 *     magnitude" is found by a vector scan for the first lane equal to max|x|.
 *   - Integer block sums are exact (both SDOT and SMULL+SADALP), and the
 *     per-block float terms are formed and accumulated in the same order as
 *     the scalar code, so integer kernels usually agree to the bit.
 *   - F32/F16/BF16 dots accumulate in four float32x4 registers with FMA
 *     (the scalar code uses double): they differ by ~1e-7 of sum |w*x|.
 *
 * scripts/test-arm.sh cross-builds this file and runs the tests under qemu
 * with and without the dot-product extension.
 */
#include "kernels.h"

#if defined(__aarch64__)

#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "simd_neon.h"
#include "core/quant.h"

/* NEON_DOTPROD, NEON_SDOT_ASM and NEON_INLINE: simd_neon.h */

/* ---------------------------------------------------------------------------
 * Small helpers
 * ------------------------------------------------------------------------- */

/* fp16 <-> fp32 by FCVT: round to nearest even, subnormals exact, as quant.c. */
static inline float h2f_neon(fp16_t h) {
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

static inline fp16_t f2h_neon(float f) {
    return vget_lane_u16(vreinterpret_u16_f16(vcvt_f16_f32(vdupq_n_f32(f))), 0);
}

/* acc += four-way sums of int8 products, without dotprod. Each SMULL product
 * fits int16 (|-128 * -128| = 16384) and SADALP widens before adding. */
static inline int32x4_t dot_i8_widen(int32x4_t acc, int8x16_t a, int8x16_t b) {
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
}

/* The same with SDOT (lanes hold different partial sums; totals agree). */
NEON_DOTPROD static inline int32x4_t dot_i8_sdot(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(NEON_SDOT_ASM)
    __asm__("sdot %0.4s, %1.16b, %2.16b" : "+w"(acc) : "w"(a), "w"(b));
    return acc;
#else
    return vdotq_s32(acc, a, b);
#endif
}

/* dp is a constant in every instantiation, so the branch folds away. */
NEON_INLINE int32x4_t dot_i8(bool dp, int32x4_t acc, int8x16_t a, int8x16_t b) {
    return dp ? dot_i8_sdot(acc, a, b) : dot_i8_widen(acc, a, b);
}

/* Sum of 32 int8 products, a[0..32) . b[0..32). */
NEON_INLINE int32_t dot32_i8(bool dp, int8x16_t a0, int8x16_t a1, const int8_t *b) {
    int32x4_t acc = dot_i8(dp, vdupq_n_s32(0), a0, vld1q_s8(b));
    return vaddvq_s32(dot_i8(dp, acc, a1, vld1q_s8(b + 16)));
}

/* acc += scale * (a . b) over 16 values, kept as a vector (summed once per
 * super-block: integer, so the order does not matter). */
NEON_INLINE int32x4_t dot16_scaled(bool dp, int32x4_t acc, int8x16_t a, const int8_t *b, int scale) {
    return vmlaq_n_s32(acc, dot_i8(dp, vdupq_n_s32(0), a, vld1q_s8(b)), scale);
}

/* Four float32x4 to int8x16: round half to even, saturate to [-128, 127]. */
static inline int8x16_t f32x16_to_i8(float32x4_t a, float32x4_t b, float32x4_t c, float32x4_t d) {
    const int16x8_t lo = vcombine_s16(vqmovn_s32(vcvtnq_s32_f32(a)), vqmovn_s32(vcvtnq_s32_f32(b)));
    const int16x8_t hi = vcombine_s16(vqmovn_s32(vcvtnq_s32_f32(c)), vqmovn_s32(vcvtnq_s32_f32(d)));
    return vcombine_s8(vqmovn_s16(lo), vqmovn_s16(hi));
}

/* Expand 32 bits (little-endian qh[4]) into bytes 0 / 0x10: bit j of the
 * word goes to byte j of lo (j < 16) or byte j-16 of hi. */
static inline void q5_high_bits(const uint8_t qh[4], uint8x16_t *lo, uint8x16_t *hi) {
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t mask = vld1q_u8(bit), h10 = vdupq_n_u8(0x10);
    *lo = vandq_u8(vtstq_u8(vcombine_u8(vdup_n_u8(qh[0]), vdup_n_u8(qh[1])), mask), h10);
    *hi = vandq_u8(vtstq_u8(vcombine_u8(vdup_n_u8(qh[2]), vdup_n_u8(qh[3])), mask), h10);
}

/* ---------------------------------------------------------------------------
 * Activation quantizers
 * ------------------------------------------------------------------------- */

/* One Q8_0 block (see kernels_scalar.c): returns sum(q); *d_out = unrounded d. */
static int act_q8_0_block(const float *x, fp16_t *d16, int8_t *qs, float *d_out) {
    float32x4_t v[8];
    float32x4_t amaxv = vdupq_n_f32(0.0f);
    for (int j = 0; j < 8; j++) {
        v[j] = vld1q_f32(x + 4 * j);
        amaxv = vmaxnmq_f32(amaxv, vabsq_f32(v[j]));
    }
    const float amax = vmaxnmvq_f32(amaxv);
    const float d = amax / 127.0f;
    *d16 = f2h_neon(d);
    *d_out = d;
    const float id = *d16 != 0 ? 127.0f / amax : 0.0f;
    const int8x16_t q0 = f32x16_to_i8(vmulq_n_f32(v[0], id), vmulq_n_f32(v[1], id),
                                      vmulq_n_f32(v[2], id), vmulq_n_f32(v[3], id));
    const int8x16_t q1 = f32x16_to_i8(vmulq_n_f32(v[4], id), vmulq_n_f32(v[5], id),
                                      vmulq_n_f32(v[6], id), vmulq_n_f32(v[7], id));
    vst1q_s8(qs, q0);
    vst1q_s8(qs + 16, q1);
    return vaddlvq_s8(q0) + vaddlvq_s8(q1);
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
        y[i].s = f2h_neon(d * (float)sum);
    }
}

static void act_quantize_q8_K(const float *x, void *dst, int64_t n) {
    block_q8_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float32x4_t amaxv = vdupq_n_f32(0.0f);
        for (int j = 0; j < QK_K; j += 4) amaxv = vmaxnmq_f32(amaxv, vabsq_f32(vld1q_f32(x + j)));
        const float amax = vmaxnmvq_f32(amaxv);
        /* m: the first value whose magnitude is amax */
        float m = 0.0f;
        if (amax != 0.0f) {
            const float32x4_t target = vdupq_n_f32(amax);
            int j = 0;
            while (j < QK_K && vmaxvq_u32(vceqq_f32(vabsq_f32(vld1q_f32(x + j)), target)) == 0) j += 4;
            while (j < QK_K && fabsf(x[j]) != amax) j++;
            if (j < QK_K) m = x[j];
        }
        const float iscale = amax != 0.0f ? -127.0f / m : 0.0f;
        if (!isfinite(iscale) || iscale == 0.0f) { /* zero, subnormal-only or inf block */
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        for (int g = 0; g < QK_K / 16; g++) {
            const float *xg = x + 16 * g;
            const int8x16_t q = f32x16_to_i8(vmulq_n_f32(vld1q_f32(xg), iscale),
                                             vmulq_n_f32(vld1q_f32(xg + 4), iscale),
                                             vmulq_n_f32(vld1q_f32(xg + 8), iscale),
                                             vmulq_n_f32(vld1q_f32(xg + 12), iscale));
            vst1q_s8(y[i].qs + 16 * g, q);
            y[i].bsums[g] = vaddlvq_s8(q);
        }
        y[i].d = 1.0f / iscale;
    }
}

/* ---------------------------------------------------------------------------
 * Legacy 32-value formats x Q8_0 / Q8_1
 * ------------------------------------------------------------------------- */

NEON_INLINE float q4_0_body(const void *vw, const void *va, int64_t n, bool dp) {
    const block_q4_0 *w = vw;
    const block_q8_0 *a = va;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    const int8x16_t s8 = vdupq_n_s8(8);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK4_0; i++) {
        const uint8x16_t q = vld1q_u8(w[i].qs);
        const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, m4)), s8);
        const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), s8);
        const int32_t sumi = dot32_i8(dp, lo, hi, a[i].qs);
        sum += (h2f_neon(w[i].d) * h2f_neon(a[i].d)) * (float)sumi;
    }
    return sum;
}

NEON_INLINE float q4_1_body(const void *vw, const void *va, int64_t n, bool dp) {
    const block_q4_1 *w = vw;
    const block_q8_1 *a = va;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK4_1; i++) {
        const uint8x16_t q = vld1q_u8(w[i].qs);
        const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(q, m4));
        const int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(q, 4));
        const int32_t sumi = dot32_i8(dp, lo, hi, a[i].qs);
        sum += (h2f_neon(w[i].d) * h2f_neon(a[i].d)) * (float)sumi + h2f_neon(w[i].m) * h2f_neon(a[i].s);
    }
    return sum;
}

NEON_INLINE float q5_0_body(const void *vw, const void *va, int64_t n, bool dp) {
    const block_q5_0 *w = vw;
    const block_q8_0 *a = va;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    const int8x16_t s16 = vdupq_n_s8(16);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK5_0; i++) {
        uint8x16_t hlo, hhi;
        q5_high_bits(w[i].qh, &hlo, &hhi);
        const uint8x16_t q = vld1q_u8(w[i].qs);
        const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q, m4), hlo)), s16);
        const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q, 4), hhi)), s16);
        const int32_t sumi = dot32_i8(dp, lo, hi, a[i].qs);
        sum += (h2f_neon(w[i].d) * h2f_neon(a[i].d)) * (float)sumi;
    }
    return sum;
}

NEON_INLINE float q5_1_body(const void *vw, const void *va, int64_t n, bool dp) {
    const block_q5_1 *w = vw;
    const block_q8_1 *a = va;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK5_1; i++) {
        uint8x16_t hlo, hhi;
        q5_high_bits(w[i].qh, &hlo, &hhi);
        const uint8x16_t q = vld1q_u8(w[i].qs);
        const int8x16_t lo = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q, m4), hlo));
        const int8x16_t hi = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q, 4), hhi));
        const int32_t sumi = dot32_i8(dp, lo, hi, a[i].qs);
        sum += (h2f_neon(w[i].d) * h2f_neon(a[i].d)) * (float)sumi + h2f_neon(w[i].m) * h2f_neon(a[i].s);
    }
    return sum;
}

NEON_INLINE float q8_0_body(const void *vw, const void *va, int64_t n, bool dp) {
    const block_q8_0 *w = vw;
    const block_q8_0 *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const int32_t sumi = dot32_i8(dp, vld1q_s8(w[i].qs), vld1q_s8(w[i].qs + 16), a[i].qs);
        sum += (h2f_neon(w[i].d) * h2f_neon(a[i].d)) * (float)sumi;
    }
    return sum;
}

/* ---------------------------------------------------------------------------
 * K-quants x Q8_K (layouts in quant.c). Sub-block sums are weighted by their
 * integer scales in an int32x4 and reduced once per super-block.
 * ------------------------------------------------------------------------- */

/* sum_j mins[j] * bsums[j] over 16 sub-blocks of 16 (mins as bytes). */
static inline int32_t mins_dot_bsums16(uint8x16_t mins, const int16_t *bsums) {
    const int16x8_t m0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mins)));
    const int16x8_t m1 = vreinterpretq_s16_u16(vmovl_high_u8(mins));
    int32x4_t acc = vmull_s16(vget_low_s16(m0), vld1_s16(bsums));
    acc = vmlal_high_s16(acc, m0, vld1q_s16(bsums));
    acc = vmlal_s16(acc, vget_low_s16(m1), vld1_s16(bsums + 8));
    acc = vmlal_high_s16(acc, m1, vld1q_s16(bsums + 8));
    return vaddvq_s32(acc);
}

NEON_INLINE float q2_K_body(const void *vw, const void *va, int64_t n, bool dp) {
    const block_q2_K *w = vw;
    const block_q8_K *a = va;
    const uint8x16_t m3 = vdupq_n_u8(3);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *sc = w[i].scales;
        const int32_t summs = mins_dot_bsums16(vshrq_n_u8(vld1q_u8(sc), 4), a[i].bsums);
        int32x4_t acc = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            uint8x16_t q0 = vld1q_u8(w[i].qs + 32 * h), q1 = vld1q_u8(w[i].qs + 32 * h + 16);
            for (int s = 0; s < 4; s++) {
                const int sub = 8 * h + 2 * s;
                const int8_t *qa = a[i].qs + 128 * h + 32 * s;
                acc = dot16_scaled(dp, acc, vreinterpretq_s8_u8(vandq_u8(q0, m3)), qa, sc[sub] & 0x0F);
                acc = dot16_scaled(dp, acc, vreinterpretq_s8_u8(vandq_u8(q1, m3)), qa + 16, sc[sub + 1] & 0x0F);
                q0 = vshrq_n_u8(q0, 2);
                q1 = vshrq_n_u8(q1, 2);
            }
        }
        const int32_t isum = vaddvq_s32(acc);
        const float dall = a[i].d * h2f_neon(w[i].d);
        const float dmin = a[i].d * h2f_neon(w[i].dmin);
        sum += dall * (float)isum - dmin * (float)summs;
    }
    return sum;
}

/* The 16 signed 6-bit scales of a Q3_K block. */
static inline void q3_K_scales(const uint8_t *sc, int8_t out[16]) {
    for (int i = 0; i < 16; i++) {
        const int low = i < 8 ? (sc[i] & 0x0F) : (sc[i - 8] >> 4);
        const int high = (sc[8 + i % 4] >> (2 * (i / 4))) & 3;
        out[i] = (int8_t)((low | (high << 4)) - 32);
    }
}

NEON_INLINE float q3_K_body(const void *vw, const void *va, int64_t n, bool dp) {
    const block_q3_K *w = vw;
    const block_q8_K *a = va;
    const uint8x16_t m3 = vdupq_n_u8(3), m1 = vdupq_n_u8(1);
    const int8x16_t s4 = vdupq_n_s8(4);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8_t scale[16];
        q3_K_scales(w[i].scales, scale);
        /* hmask bit 4h+s belongs to (h, s): consumed in order, one shift per step */
        uint8x16_t hm0 = vld1q_u8(w[i].hmask), hm1 = vld1q_u8(w[i].hmask + 16);
        int32x4_t acc = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            uint8x16_t q0 = vld1q_u8(w[i].qs + 32 * h), q1 = vld1q_u8(w[i].qs + 32 * h + 16);
            for (int s = 0; s < 4; s++) {
                const int sub = 8 * h + 2 * s;
                const int8_t *qa = a[i].qs + 128 * h + 32 * s;
                const uint8x16_t u0 = vorrq_u8(vandq_u8(q0, m3), vshlq_n_u8(vandq_u8(hm0, m1), 2));
                const uint8x16_t u1 = vorrq_u8(vandq_u8(q1, m3), vshlq_n_u8(vandq_u8(hm1, m1), 2));
                acc = dot16_scaled(dp, acc, vsubq_s8(vreinterpretq_s8_u8(u0), s4), qa, scale[sub]);
                acc = dot16_scaled(dp, acc, vsubq_s8(vreinterpretq_s8_u8(u1), s4), qa + 16, scale[sub + 1]);
                q0 = vshrq_n_u8(q0, 2);
                q1 = vshrq_n_u8(q1, 2);
                hm0 = vshrq_n_u8(hm0, 1);
                hm1 = vshrq_n_u8(hm1, 1);
            }
        }
        sum += (h2f_neon(w[i].d) * a[i].d) * (float)vaddvq_s32(acc);
    }
    return sum;
}

/* ggml's get_scale_min_k4, all 8 sub-blocks: 6-bit scales and mins. */
static inline void k4_scales_mins_u8(const uint8_t *q, uint8_t sc[8], uint8_t mn[8]) {
    for (int j = 0; j < 4; j++) {
        sc[j] = q[j] & 63;
        mn[j] = q[j + 4] & 63;
        sc[j + 4] = (uint8_t)((q[j + 8] & 0x0F) | ((q[j] >> 6) << 4));
        mn[j + 4] = (uint8_t)((q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4));
    }
}

/* sum_j mins[j] * (bsums[2j] + bsums[2j+1]) over 8 sub-blocks of 32. */
static inline int32_t mins_dot_bsums8(const uint8_t mn[8], const int16_t *bsums) {
    const int16x8_t pairs = vpaddq_s16(vld1q_s16(bsums), vld1q_s16(bsums + 8));
    const int16x8_t m = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(mn)));
    int32x4_t acc = vmull_s16(vget_low_s16(m), vget_low_s16(pairs));
    acc = vmlal_high_s16(acc, m, pairs);
    return vaddvq_s32(acc);
}

/* Q4_K and Q5_K; qh is NULL for Q4_K. */
NEON_INLINE float q45_K_superblock(const uint8_t *scales, const uint8_t *qs, const uint8_t *qh,
                                   fp16_t wd, fp16_t wdmin, const block_q8_K *a, bool dp) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m1 = vdupq_n_u8(1), m2 = vdupq_n_u8(2);
    uint8_t sc[8], mn[8];
    k4_scales_mins_u8(scales, sc, mn);
    const int32_t summs = mins_dot_bsums8(mn, a->bsums);
    uint8x16_t h0 = vdupq_n_u8(0), h1 = vdupq_n_u8(0);
    if (qh) {
        h0 = vld1q_u8(qh);
        h1 = vld1q_u8(qh + 16);
    }
    int32x4_t acc = vdupq_n_s32(0);
    for (int c = 0; c < 4; c++) {
        const uint8x16_t q0 = vld1q_u8(qs + 32 * c), q1 = vld1q_u8(qs + 32 * c + 16);
        uint8x16_t l0 = vandq_u8(q0, m4), l1 = vandq_u8(q1, m4);
        uint8x16_t u0 = vshrq_n_u8(q0, 4), u1 = vshrq_n_u8(q1, 4);
        if (qh) { /* bit 2c of qh[l] tops the low nibble, bit 2c+1 the high one */
            l0 = vorrq_u8(l0, vshlq_n_u8(vandq_u8(h0, m1), 4));
            l1 = vorrq_u8(l1, vshlq_n_u8(vandq_u8(h1, m1), 4));
            u0 = vorrq_u8(u0, vshlq_n_u8(vandq_u8(h0, m2), 3));
            u1 = vorrq_u8(u1, vshlq_n_u8(vandq_u8(h1, m2), 3));
            h0 = vshrq_n_u8(h0, 2);
            h1 = vshrq_n_u8(h1, 2);
        }
        const int8_t *qa = a->qs + 64 * c;
        int32x4_t p = dot_i8(dp, vdupq_n_s32(0), vreinterpretq_s8_u8(l0), vld1q_s8(qa));
        p = dot_i8(dp, p, vreinterpretq_s8_u8(l1), vld1q_s8(qa + 16));
        acc = vmlaq_n_s32(acc, p, sc[2 * c]);
        p = dot_i8(dp, vdupq_n_s32(0), vreinterpretq_s8_u8(u0), vld1q_s8(qa + 32));
        p = dot_i8(dp, p, vreinterpretq_s8_u8(u1), vld1q_s8(qa + 48));
        acc = vmlaq_n_s32(acc, p, sc[2 * c + 1]);
    }
    const int32_t isum = vaddvq_s32(acc);
    const float d = a->d * h2f_neon(wd);
    const float dmin = a->d * h2f_neon(wdmin);
    return d * (float)isum - dmin * (float)summs;
}

NEON_INLINE float q4_K_body(const void *vw, const void *va, int64_t n, bool dp) {
    const block_q4_K *w = vw;
    const block_q8_K *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++)
        sum += q45_K_superblock(w[i].scales, w[i].qs, NULL, w[i].d, w[i].dmin, &a[i], dp);
    return sum;
}

NEON_INLINE float q5_K_body(const void *vw, const void *va, int64_t n, bool dp) {
    const block_q5_K *w = vw;
    const block_q8_K *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++)
        sum += q45_K_superblock(w[i].scales, w[i].qs, w[i].qh, w[i].d, w[i].dmin, &a[i], dp);
    return sum;
}

NEON_INLINE float q6_K_body(const void *vw, const void *va, int64_t n, bool dp) {
    const block_q6_K *w = vw;
    const block_q8_K *a = va;
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m30 = vdupq_n_u8(0x30);
    const int8x16_t s32 = vdupq_n_s8(32);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int32x4_t acc = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w[i].ql + 64 * h, *qhp = w[i].qh + 32 * h;
            const int8_t *sc = w[i].scales + 8 * h;
            const int8_t *qa = a[i].qs + 128 * h;
            const uint8x16_t qh0 = vld1q_u8(qhp), qh1 = vld1q_u8(qhp + 16);
            const uint8x16_t ql0 = vld1q_u8(ql), ql1 = vld1q_u8(ql + 16);
            const uint8x16_t ql2 = vld1q_u8(ql + 32), ql3 = vld1q_u8(ql + 48);
            /* value 32r + l: nibble of ql[l + 32(r&1)] (low for r < 2), bits 2r.. of qh[l] */
            uint8x16_t v[8];
            v[0] = vorrq_u8(vandq_u8(ql0, m4), vandq_u8(vshlq_n_u8(qh0, 4), m30));
            v[1] = vorrq_u8(vandq_u8(ql1, m4), vandq_u8(vshlq_n_u8(qh1, 4), m30));
            v[2] = vorrq_u8(vandq_u8(ql2, m4), vandq_u8(vshlq_n_u8(qh0, 2), m30));
            v[3] = vorrq_u8(vandq_u8(ql3, m4), vandq_u8(vshlq_n_u8(qh1, 2), m30));
            v[4] = vorrq_u8(vshrq_n_u8(ql0, 4), vandq_u8(qh0, m30));
            v[5] = vorrq_u8(vshrq_n_u8(ql1, 4), vandq_u8(qh1, m30));
            v[6] = vorrq_u8(vshrq_n_u8(ql2, 4), vandq_u8(vshrq_n_u8(qh0, 2), m30));
            v[7] = vorrq_u8(vshrq_n_u8(ql3, 4), vandq_u8(vshrq_n_u8(qh1, 2), m30));
            for (int k = 0; k < 8; k++) /* k = 2r + half: sub-block 8h + k */
                acc = dot16_scaled(dp, acc, vsubq_s8(vreinterpretq_s8_u8(v[k]), s32), qa + 16 * k, sc[k]);
        }
        sum += (h2f_neon(w[i].d) * a[i].d) * (float)vaddvq_s32(acc);
    }
    return sum;
}

/* Each integer kernel: a plain instantiation and a dotprod one. */
#define NEON_DOT_PAIR(name)                                                        \
    static float name##_dot(const void *w, const void *a, int64_t n) {          \
        return name##_body(w, a, n, false);                                        \
    }                                                                              \
    NEON_DOTPROD static float name##_dot_dp(const void *w, const void *a, int64_t n) { \
        return name##_body(w, a, n, true);                                         \
    }

NEON_DOT_PAIR(q4_0)
NEON_DOT_PAIR(q4_1)
NEON_DOT_PAIR(q5_0)
NEON_DOT_PAIR(q5_1)
NEON_DOT_PAIR(q8_0)
NEON_DOT_PAIR(q2_K)
NEON_DOT_PAIR(q3_K)
NEON_DOT_PAIR(q4_K)
NEON_DOT_PAIR(q5_K)
NEON_DOT_PAIR(q6_K)

/* ---------------------------------------------------------------------------
 * Float weights x F32 activations: 16 products per step in four FMA chains.
 * Rows of float types may have any length; the tail goes one at a time.
 * ------------------------------------------------------------------------- */

static float f32_dot(const void *vw, const void *va, int64_t n) {
    const float *w = vw, *x = va;
    float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 4; k++) acc[k] = vfmaq_f32(acc[k], vld1q_f32(w + i + 4 * k), vld1q_f32(x + i + 4 * k));
    for (; i + 4 <= n; i += 4) acc[0] = vfmaq_f32(acc[0], vld1q_f32(w + i), vld1q_f32(x + i));
    float sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
    for (; i < n; i++) sum += w[i] * x[i];
    return sum;
}

static inline float32x4_t f16x4_to_f32(uint16x4_t h) {
    return vcvt_f32_f16(vreinterpret_f16_u16(h));
}

/* bf16 is the top half of an f32: widen by shifting left 16. */
static inline float32x4_t bf16x4_to_f32(uint16x4_t h) {
    return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
}

/* ---------------------------------------------------------------------------
 * F16 and BF16: dot (f16_dot, bf16_dot) and the batch tile, 2 rows x up to 3
 * tokens, are one function: each (row, token) pair sums in four chains over
 * each 16 values, a last 4-value chunk into the first, (a0 + a1) + (a2 + a3),
 * the tail one by one. So the tile gives dot's bits, with each weight chunk converted
 * once for the tokens and each activation chunk loaded once for the rows
 * (24 sums in the 32 registers). Prefill batches (PACKED_BF16_MIN_TOKENS
 * tokens or more) take a 4 x 4 tile with one sum a pair, 4-value chunks in
 * order: 8 loads and 4 conversions for 16 FMAs, F32 sums as dot's in another
 * order (kernels.h: kernel_entry.prefill), as AVX2's.
 * ------------------------------------------------------------------------- */

#define NEON_UNROLL _Pragma("GCC unroll 4")

#define NEON_FLOAT_TILES(name, wtype, cvt4, scalar)                                              \
    static inline __attribute__((always_inline)) void name##_tile_n(                             \
        const void *vw, size_t w_stride, const void *va, size_t stride, int64_t n, float *out, const int NR, \
        const int NA) {                                                                           \
        const wtype *w[2];                                                                        \
        const float *x[3];                                                                        \
        NEON_UNROLL for (int r = 0; r < NR; r++) w[r] = (const wtype *)((const uint8_t *)vw + (size_t)r * w_stride); \
        NEON_UNROLL for (int t = 0; t < NA; t++) x[t] = (const float *)((const uint8_t *)va + (size_t)t * stride); \
        float32x4_t acc[2][3][4];                                                                 \
        NEON_UNROLL for (int r = 0; r < NR; r++) NEON_UNROLL for (int t = 0; t < NA; t++)         \
            NEON_UNROLL for (int c = 0; c < 4; c++) acc[r][t][c] = vdupq_n_f32(0.0f);             \
        int64_t i = 0;                                                                            \
        for (; i + 16 <= n; i += 16)                                                              \
            NEON_UNROLL for (int c = 0; c < 4; c++) {                                             \
                float32x4_t wv[2];                                                                \
                NEON_UNROLL for (int r = 0; r < NR; r++) wv[r] = cvt4(vld1_u16(w[r] + i + 4 * c)); \
                NEON_UNROLL for (int t = 0; t < NA; t++) {                                        \
                    const float32x4_t xv = vld1q_f32(x[t] + i + 4 * c);                           \
                    NEON_UNROLL for (int r = 0; r < NR; r++) acc[r][t][c] = vfmaq_f32(acc[r][t][c], wv[r], xv); \
                }                                                                                 \
            }                                                                                     \
        for (; i + 4 <= n; i += 4) {                                                              \
            float32x4_t wv[2];                                                                    \
            NEON_UNROLL for (int r = 0; r < NR; r++) wv[r] = cvt4(vld1_u16(w[r] + i));            \
            NEON_UNROLL for (int t = 0; t < NA; t++) {                                            \
                const float32x4_t xv = vld1q_f32(x[t] + i);                                       \
                NEON_UNROLL for (int r = 0; r < NR; r++) acc[r][t][0] = vfmaq_f32(acc[r][t][0], wv[r], xv); \
            }                                                                                     \
        }                                                                                         \
        NEON_UNROLL for (int r = 0; r < NR; r++) NEON_UNROLL for (int t = 0; t < NA; t++) {       \
            const float32x4_t *a4 = acc[r][t];                                                    \
            float sum = vaddvq_f32(vaddq_f32(vaddq_f32(a4[0], a4[1]), vaddq_f32(a4[2], a4[3])));  \
            for (int64_t k = i; k < n; k++) sum += scalar(w[r][k]) * x[t][k];                     \
            out[r * NA + t] = sum;                                                                \
        }                                                                                         \
    }                                                                                             \
    static float name##_dot(const void *w, const void *a, int64_t n) {                         \
        float o[1];                                                                               \
        name##_tile_n(w, 0, a, 0, n, o, 1, 1);                                                    \
        return o[0];                                                                              \
    }                                                                                             \
    static void name##_2xn(const void *w, size_t ws, const void *a, size_t s, int64_t n, int na, float *out) { \
        switch (na) {                                                                             \
        case 1: name##_tile_n(w, ws, a, s, n, out, 2, 1); break;                                  \
        case 2: name##_tile_n(w, ws, a, s, n, out, 2, 2); break;                                  \
        default: name##_tile_n(w, ws, a, s, n, out, 2, 3); break;                                 \
        }                                                                                         \
    }                                                                                             \
    static void name##_4x4(const void *vw, size_t w_stride, const void *va, size_t stride, int64_t n, int na, \
                           float *out) {                                                          \
        enum { NR = 4, NA = 4 };                                                                  \
        const wtype *w[NR];                                                                       \
        const float *x[NA];                                                                       \
        NEON_UNROLL for (int r = 0; r < NR; r++) w[r] = (const wtype *)((const uint8_t *)vw + (size_t)r * w_stride); \
        /* a short call repeats its first token */                                               \
        NEON_UNROLL for (int t = 0; t < NA; t++) x[t] = (const float *)((const uint8_t *)va + (size_t)(t < na ? t : 0) * stride); \
        float32x4_t acc[NR][NA];                                                                  \
        NEON_UNROLL for (int r = 0; r < NR; r++) NEON_UNROLL for (int t = 0; t < NA; t++) acc[r][t] = vdupq_n_f32(0.0f); \
        int64_t i = 0;                                                                            \
        for (; i + 4 <= n; i += 4) {                                                              \
            float32x4_t wv[NR];                                                                   \
            NEON_UNROLL for (int r = 0; r < NR; r++) wv[r] = cvt4(vld1_u16(w[r] + i));            \
            NEON_UNROLL for (int t = 0; t < NA; t++) {                                            \
                const float32x4_t xv = vld1q_f32(x[t] + i);                                       \
                NEON_UNROLL for (int r = 0; r < NR; r++) acc[r][t] = vfmaq_f32(acc[r][t], wv[r], xv); \
            }                                                                                     \
        }                                                                                         \
        NEON_UNROLL for (int r = 0; r < NR; r++) NEON_UNROLL for (int t = 0; t < NA; t++) {       \
            if (t >= na) continue; /* t constant: the sums stay in registers */                   \
            float sum = vaddvq_f32(acc[r][t]);                                                    \
            for (int64_t k = i; k < n; k++) sum += scalar(w[r][k]) * x[t][k];                     \
            out[r * na + t] = sum;                                                                \
        }                                                                                         \
    }

NEON_FLOAT_TILES(f16, fp16_t, f16x4_to_f32, h2f_neon)
NEON_FLOAT_TILES(bf16, bf16_t, bf16x4_to_f32, bf16_to_fp32)
#undef NEON_FLOAT_TILES

/* ---------------------------------------------------------------------------
 * Table
 * ------------------------------------------------------------------------- */

void kernels_fill_neon(kernel_entry table[], int n_types, bool int8_dot) {
    const kernel_quantizers quantizers = {act_quantize_q8_0, act_quantize_q8_1, act_quantize_q8_K};
#define INT8_DOT(name) (int8_dot ? name##_dot_dp : name##_dot)
    const kernel_dots rows[] = {
        {QT_F32, f32_dot, NULL, NO_TILES},
        {QT_F16, f16_dot, NULL, {f16_2xn, 2, 3}, {f16_4x4, 4, 4}},
        {QT_BF16, bf16_dot, NULL, {bf16_2xn, 2, 3}, {bf16_4x4, 4, 4}},
        {QT_Q4_0, INT8_DOT(q4_0), NULL, NO_TILES},
        {QT_Q5_0, INT8_DOT(q5_0), NULL, NO_TILES},
        {QT_Q8_0, INT8_DOT(q8_0), NULL, NO_TILES},
        {QT_Q4_1, INT8_DOT(q4_1), NULL, NO_TILES},
        {QT_Q5_1, INT8_DOT(q5_1), NULL, NO_TILES},
        {QT_Q2_K, INT8_DOT(q2_K), NULL, NO_TILES},
        {QT_Q3_K, INT8_DOT(q3_K), NULL, NO_TILES},
        {QT_Q4_K, INT8_DOT(q4_K), NULL, NO_TILES},
        {QT_Q5_K, INT8_DOT(q5_K), NULL, NO_TILES},
        {QT_Q6_K, INT8_DOT(q6_K), NULL, NO_TILES},
    };
#undef INT8_DOT
    kernels_set(table, n_types, &quantizers, rows, sizeof rows / sizeof rows[0]);
}

#else /* not AArch64: the path is not compiled in (kernels.c never calls this) */

void kernels_fill_neon(kernel_entry table[], int n_types, bool int8_dot) {
    (void)table;
    (void)n_types;
    (void)int8_dot;
}

#endif
