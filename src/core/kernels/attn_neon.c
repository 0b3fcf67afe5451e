/*
 * attn_neon — the attention inner loop on AArch64 NEON (see attn.h): the tile
 * algorithm of attn_tiles.h, each 16-lane vector held as four 4-lane quarters
 * (lane i is query i), with the row loops (widening keys and values, p * V)
 * 4 floats at a time. Every AArch64 CPU has NEON, so nothing here needs a
 * compiler flag. e^x is exp8's polynomial of simd_x86.h (the AVX2 path's),
 * lane for lane, so the two paths' scores round alike.
 */
#include "attn.h"
#include "kernels.h"

#if defined(__aarch64__)

#include <arm_neon.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "simd_neon.h"
#include "core/quant.h"

typedef struct {
    float32x4_t h[4];
} v16; /* lanes 0-3, 4-7, 8-11, 12-15; also a mask (all ones where true) */
typedef struct {
    int32x4_t h[4];
} vi16;

#define V_EACH(expr) {{expr(0), expr(1), expr(2), expr(3)}}

NEON_INLINE vi16 vi_load(const int32_t *p) {
#define L(k) vld1q_s32(p + 4 * k)
    return (vi16)V_EACH(L);
#undef L
}
NEON_INLINE v16 v_set1(float x) {
    const float32x4_t v = vdupq_n_f32(x);
    return (v16){{v, v, v, v}};
}
NEON_INLINE v16 v_load(const float *p) {
#define L(k) vld1q_f32(p + 4 * k)
    return (v16)V_EACH(L);
#undef L
}
NEON_INLINE void v_store(float *p, v16 a) {
    for (int k = 0; k < 4; k++) vst1q_f32(p + 4 * k, a.h[k]);
}
#define V_OP2(name, op)                                                                                     \
    NEON_INLINE v16 name(v16 a, v16 b) {                                                                    \
        return (v16){{op(a.h[0], b.h[0]), op(a.h[1], b.h[1]), op(a.h[2], b.h[2]), op(a.h[3], b.h[3])}};     \
    }
NEON_INLINE float32x4_t and_f32(float32x4_t a, float32x4_t b) {
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(a), vreinterpretq_u32_f32(b)));
}
NEON_INLINE float32x4_t gt_f32(float32x4_t a, float32x4_t b) { return vreinterpretq_f32_u32(vcgtq_f32(a, b)); }
V_OP2(v_add, vaddq_f32)
V_OP2(v_sub, vsubq_f32)
V_OP2(v_mul, vmulq_f32)
V_OP2(v_div, vdivq_f32)
V_OP2(v_max, vmaxq_f32)
V_OP2(v_and, and_f32)
V_OP2(v_gt, gt_f32)
/* a * b + c, fused */
NEON_INLINE v16 v_fmadd(v16 a, v16 b, v16 c) {
    v16 r;
    for (int k = 0; k < 4; k++) r.h[k] = vfmaq_f32(c.h[k], a.h[k], b.h[k]);
    return r;
}
/* where mask: b, else a */
NEON_INLINE v16 v_blend(v16 a, v16 b, v16 mask) {
    v16 r;
    for (int k = 0; k < 4; k++) r.h[k] = vbslq_f32(vreinterpretq_u32_f32(mask.h[k]), b.h[k], a.h[k]);
    return r;
}
NEON_INLINE int v_bits(v16 mask) {
    static const int32_t shift[4] = {0, 1, 2, 3};
    const int32x4_t sh = vld1q_s32(shift);
    int bits = 0;
    for (int k = 0; k < 4; k++)
        bits |= (int)vaddvq_u32(vshlq_u32(vshrq_n_u32(vreinterpretq_u32_f32(mask.h[k]), 31), sh)) << (4 * k);
    return bits;
}

/* e^x, 4 lanes: exp8's steps (simd_x86.h) with NEON's fused multiply-adds */
NEON_INLINE float32x4_t exp4(float32x4_t x) {
    x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-87.0f)), vdupq_n_f32(88.0f));
    const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.0f / 720);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 120), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 24), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 6), p, r);
    p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vmulq_f32(p, vreinterpretq_f32_s32(e));
}
NEON_INLINE v16 v_exp(v16 a) { return (v16){{exp4(a.h[0]), exp4(a.h[1]), exp4(a.h[2]), exp4(a.h[3])}}; }

/* n rows (entries j0 ..) of a run, elements [off, off + dim) of each, as F32 rows of dim */
static void widen_rows(const attn_keys *ks, bool key, int j0, int n, int dim, float *dst) {
    const uint8_t *base = (const uint8_t *)(key ? ks->k : ks->v);
    const size_t stride = key ? ks->k_stride : ks->v_stride;
    const int off = key ? ks->k_off : ks->v_off;
    const uint32_t type = key ? ks->k_type : ks->v_type;
    for (int j = 0; j < n; j++) {
        const uint8_t *row = base + (size_t)(j0 + j) * stride;
        float *out = dst + (size_t)j * dim;
        if (type == QT_F16 && dim % 4 == 0) {
            const uint16_t *h = (const uint16_t *)row + off;
            for (int d = 0; d < dim; d += 4) vst1q_f32(out + d, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h + d))));
        } else {
            attn_widen(type, row, off, dim, out); /* F32, the quantized tiers, odd sizes */
        }
    }
}

/* keys j0 .. j0 + 15 of channels k_off .. k_off + hd - 1, transposed:
 * dst[d * 16 + j] (the 16 quants of a channel for 16 entries are adjacent) */
static void widen_channels(const attn_keys *ks, int j0, int hd, float *dst) {
    for (int d = 0; d < hd; d++) {
        const uint8_t *ch = (const uint8_t *)ks->k + (size_t)(ks->k_off + d) * ks->k_stride;
        uint16_t d16, m16;
        memcpy(&d16, ch, 2);
        memcpy(&m16, ch + 2, 2);
        uint8x16_t q;
        if (ks->k_type == ATTN_KC8) q = vld1q_u8(ch + 4 + j0);
        else { /* entry j in the low nibble of byte j/2 when j is even, else the high one */
            const uint8x8_t v = vld1_u8(ch + 4 + j0 / 2);
            const uint8x8x2_t z = vzip_u8(vand_u8(v, vdup_n_u8(0x0F)), vshr_n_u8(v, 4));
            q = vcombine_u8(z.val[0], z.val[1]);
        }
        const float sd = vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(d16))), 0);
        const float sm = vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(m16))), 0);
        const uint16x8_t lo = vmovl_u8(vget_low_u8(q)), hi = vmovl_u8(vget_high_u8(q));
        const uint32x4_t u[4] = {vmovl_u16(vget_low_u16(lo)), vmovl_u16(vget_high_u16(lo)), vmovl_u16(vget_low_u16(hi)),
                                 vmovl_u16(vget_high_u16(hi))};
        for (int k = 0; k < 4; k++)
            vst1q_f32(dst + (size_t)d * ATTN_LANES + 4 * k, vfmaq_f32(vdupq_n_f32(sm), vdupq_n_f32(sd), vcvtq_f32_u32(u[k])));
    }
}

/* o = o * c + sum_j p[j * 16] * V[j] over hdv values: 4 at a time, up to 16
 * groups of 4 side by side (same order of operations per value either way) */
static void pv_row(float *o, int hdv, float c, const float *p, int n, const float *v, size_t vst) {
    const int full = hdv / 4 * 4;
    for (int k0 = 0; k0 < full; k0 += 64) {
        const int nc = (full - k0) / 4 < 16 ? (full - k0) / 4 : 16;
        float32x4_t acc[16];
        for (int k = 0; k < nc; k++) acc[k] = vmulq_n_f32(vld1q_f32(o + k0 + 4 * k), c);
        for (int j = 0; j < n; j++) {
            const float32x4_t pj = vdupq_n_f32(p[j * ATTN_LANES]);
            for (int k = 0; k < nc; k++) acc[k] = vfmaq_f32(acc[k], pj, vld1q_f32(v + (size_t)j * vst + k0 + 4 * k));
        }
        for (int k = 0; k < nc; k++) vst1q_f32(o + k0 + 4 * k, acc[k]);
    }
    for (int d = full; d < hdv; d++) { /* a head size not a multiple of 4 */
        float a = o[d] * c;
        for (int j = 0; j < n; j++) a = fmaf(p[j * ATTN_LANES], v[(size_t)j * vst + d], a);
        o[d] = a;
    }
}

/* lanes whose bit is set in bits, as a mask */
NEON_INLINE v16 lanes_of(uint32_t bits) {
    static const uint32_t one[4] = {1, 2, 4, 8};
    const uint32x4_t b = vdupq_n_u32(bits), lo = vld1q_u32(one);
    v16 r;
    for (int k = 0; k < 4; k++) r.h[k] = vreinterpretq_f32_u32(vtstq_u32(b, vshlq_u32(lo, vdupq_n_s32(4 * k))));
    return r;
}

/* The lanes that see a key at position p: the causal rule (p <= the lane's
 * position), narrowed in a tree batch to the lanes whose ancestry holds it,
 * and by a sliding window to the lanes whose lowest visible position (qlo) is <= p. */
NEON_INLINE v16 visible(const attn_queries *q, const uint32_t *tree_lanes, vi16 qpos, vi16 qlo, int32_t p) {
    const int32x4_t pp = vdupq_n_s32(p);
    v16 v;
    for (int k = 0; k < 4; k++) v.h[k] = vreinterpretq_f32_u32(vcleq_s32(pp, qpos.h[k]));
    if (q->window)
        for (int k = 0; k < 4; k++)
            v.h[k] = and_f32(v.h[k], vreinterpretq_f32_u32(vcleq_s32(qlo.h[k], pp)));
    if (q->tree && p >= q->tree_pos0 && p - q->tree_pos0 < ATTN_TREE_MAX) v = v_and(v, lanes_of(tree_lanes[p - q->tree_pos0]));
    return v;
}

#define ATTN_ALIGN __attribute__((aligned(16)))
#include "attn_tiles.h"

attn_fn attn_neon(void) { return attn_tiles; }

#else

attn_fn attn_neon(void) { return NULL; }

#endif
