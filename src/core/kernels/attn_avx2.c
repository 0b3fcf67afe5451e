/*
 * attn_avx2 — the attention inner loop with AVX2 + FMA + F16C (see attn.h):
 * the tile algorithm of attn_tiles.h, each 16-lane vector held as two 8-lane
 * halves (lane i is query i), with the row loops (widening keys and values,
 * p * V) 8 floats at a time.
 */
#include "attn.h"
#include "kernels.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "simd_x86.h"
#include "core/quant.h"

typedef struct {
    __m256 h[2];
} v16; /* lanes 0-7, 8-15; also a mask (all ones where true) */
typedef struct {
    __m256i h[2];
} vi16;

ALWAYS_INLINE vi16 vi_load(const int32_t *p) {
    return (vi16){{_mm256_loadu_si256((const __m256i *)p), _mm256_loadu_si256((const __m256i *)(p + 8))}};
}

ALWAYS_INLINE v16 v_set1(float x) { return (v16){{_mm256_set1_ps(x), _mm256_set1_ps(x)}}; }
ALWAYS_INLINE v16 v_load(const float *p) { return (v16){{_mm256_load_ps(p), _mm256_load_ps(p + 8)}}; }
ALWAYS_INLINE void v_store(float *p, v16 a) { _mm256_store_ps(p, a.h[0]), _mm256_store_ps(p + 8, a.h[1]); }
#define V_OP2(name, op)                                                                                    \
    ALWAYS_INLINE v16 name(v16 a, v16 b) { return (v16){{op(a.h[0], b.h[0]), op(a.h[1], b.h[1])}}; }
V_OP2(v_add, _mm256_add_ps)
V_OP2(v_sub, _mm256_sub_ps)
V_OP2(v_mul, _mm256_mul_ps)
V_OP2(v_max, _mm256_max_ps)
V_OP2(v_and, _mm256_and_ps)
V_OP2(v_div, _mm256_div_ps)
ALWAYS_INLINE v16 v_fmadd(v16 a, v16 b, v16 c) {
    return (v16){{_mm256_fmadd_ps(a.h[0], b.h[0], c.h[0]), _mm256_fmadd_ps(a.h[1], b.h[1], c.h[1])}};
}
/* where mask: b, else a */
ALWAYS_INLINE v16 v_blend(v16 a, v16 b, v16 mask) {
    return (v16){{_mm256_blendv_ps(a.h[0], b.h[0], mask.h[0]), _mm256_blendv_ps(a.h[1], b.h[1], mask.h[1])}};
}
ALWAYS_INLINE v16 v_gt(v16 a, v16 b) {
    return (v16){{_mm256_cmp_ps(a.h[0], b.h[0], _CMP_GT_OQ), _mm256_cmp_ps(a.h[1], b.h[1], _CMP_GT_OQ)}};
}
ALWAYS_INLINE int v_bits(v16 mask) { return _mm256_movemask_ps(mask.h[0]) | _mm256_movemask_ps(mask.h[1]) << 8; }

ALWAYS_INLINE v16 v_exp(v16 a) { return (v16){{exp8(a.h[0]), exp8(a.h[1])}}; }

/* 8 values of a Q8_0 / Q4_0 / Q4_1 block, from value k0 (0, 8, 16, 24) */
ALWAYS_INLINE __m256 block8(uint32_t type, const uint8_t *b, int k0) {
    if (type == QT_Q8_0) {
        const block_q8_0 *q = (const block_q8_0 *)b;
        const __m256 x = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q->qs + k0))));
        return _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(q->d)), x);
    }
    const uint8_t *qs = type == QT_Q4_0 ? ((const block_q4_0 *)b)->qs : ((const block_q4_1 *)b)->qs;
    __m256i u = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(qs + k0 % 16)));
    u = k0 < 16 ? _mm256_and_si256(u, _mm256_set1_epi32(15)) : _mm256_srli_epi32(u, 4);
    const __m256 x = _mm256_cvtepi32_ps(u);
    if (type == QT_Q4_0)
        return _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(((const block_q4_0 *)b)->d)), _mm256_sub_ps(x, _mm256_set1_ps(8.0f)));
    const block_q4_1 *q = (const block_q4_1 *)b;
    return _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(q->d)), x, _mm256_set1_ps(_cvtsh_ss(q->m)));
}

/* n rows (entries j0 ..) of a run, elements [off, off + dim) of each, as F32 rows of dim */
static void widen_rows(const attn_keys *ks, bool key, int j0, int n, int dim, float *dst) {
    const uint8_t *base = (const uint8_t *)(key ? ks->k : ks->v);
    const size_t stride = key ? ks->k_stride : ks->v_stride;
    const int off = key ? ks->k_off : ks->v_off;
    const uint32_t type = key ? ks->k_type : ks->v_type;
    for (int j = 0; j < n; j++) {
        const uint8_t *row = base + (size_t)(j0 + j) * stride;
        float *out = dst + (size_t)j * dim;
        if (type == QT_F16 && dim % 8 == 0) {
            for (int d = 0; d < dim; d += 8)
                _mm256_storeu_ps(out + d, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const fp16_t *)row + off + d))));
        } else if (type != QT_F32 && type != QT_F16 && off % 32 == 0 && dim % 32 == 0) {
            const size_t bb = quant_row_bytes(type, 32);
            for (int d = 0; d < dim; d += 8) _mm256_storeu_ps(out + d, block8(type, row + (size_t)((off + d) / 32) * bb, d % 32));
        } else {
            attn_widen(type, row, off, dim, out); /* F32, odd sizes, heads smaller than a block */
        }
    }
}

/* keys j0 .. j0 + 15 of channels k_off .. k_off + hd - 1, transposed:
 * dst[d * 16 + j] (the 16 quants of a channel for 16 entries are adjacent) */
static void widen_channels(const attn_keys *ks, int j0, int hd, float *dst) {
    for (int d = 0; d < hd; d++) {
        const uint8_t *ch = (const uint8_t *)ks->k + (size_t)(ks->k_off + d) * ks->k_stride;
        fp16_t d16, m16;
        memcpy(&d16, ch, 2);
        memcpy(&m16, ch + 2, 2);
        __m128i q;
        if (ks->k_type == ATTN_KC8) q = _mm_loadu_si128((const __m128i *)(ch + 4 + j0));
        else {
            const __m128i v = _mm_loadl_epi64((const __m128i *)(ch + 4 + j0 / 2)), m4 = _mm_set1_epi8(0x0F);
            q = _mm_unpacklo_epi8(_mm_and_si128(v, m4), _mm_and_si128(_mm_srli_epi16(v, 4), m4));
        }
        const __m256 sd = _mm256_set1_ps(_cvtsh_ss(d16)), sm = _mm256_set1_ps(_cvtsh_ss(m16));
        const __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q));
        const __m256 hi = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(q, 8)));
        _mm256_storeu_ps(dst + (size_t)d * ATTN_LANES, _mm256_fmadd_ps(sd, lo, sm));
        _mm256_storeu_ps(dst + (size_t)d * ATTN_LANES + 8, _mm256_fmadd_ps(sd, hi, sm));
    }
}

/* o = o * c + sum_j p[j * 16] * V[j] over hdv values: 8 at a time, up to 8
 * groups of 8 side by side (same order of operations per value either way) */
static void pv_row(float *o, int hdv, float c, const float *p, int n, const float *v, size_t vst) {
    const int full = hdv / 8 * 8;
    for (int k0 = 0; k0 < full; k0 += 64) {
        const int nc = (full - k0) / 8 < 8 ? (full - k0) / 8 : 8;
        __m256 acc[8];
        for (int k = 0; k < nc; k++) acc[k] = _mm256_mul_ps(_mm256_loadu_ps(o + k0 + 8 * k), _mm256_set1_ps(c));
        for (int j = 0; j < n; j++) {
            const __m256 pj = _mm256_set1_ps(p[j * ATTN_LANES]);
            for (int k = 0; k < nc; k++) acc[k] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + (size_t)j * vst + k0 + 8 * k), acc[k]);
        }
        for (int k = 0; k < nc; k++) _mm256_storeu_ps(o + k0 + 8 * k, acc[k]);
    }
    for (int d = full; d < hdv; d++) { /* a head size not a multiple of 8 */
        float a = o[d] * c;
        for (int j = 0; j < n; j++) a = fmaf(p[j * ATTN_LANES], v[(size_t)j * vst + d], a);
        o[d] = a;
    }
}

/* lanes whose bit is set in bits, as a mask */
ALWAYS_INLINE v16 lanes_of(uint32_t bits) {
    const __m256i b = _mm256_set1_epi32((int)bits), lo = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128),
                  hi = _mm256_slli_epi32(lo, 8);
    return (v16){{_mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(b, lo), lo)),
                  _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(b, hi), hi))}};
}

/* The lanes that see a key at position p: the causal rule (p <= the lane's
 * position), narrowed in a tree batch to the lanes whose ancestry holds it,
 * and by a sliding window to the lanes whose lowest visible position (qlo) is <= p. */
ALWAYS_INLINE v16 visible(const attn_queries *q, const uint32_t *tree_lanes, vi16 qpos, vi16 qlo, int32_t p) {
    const __m256i pp = _mm256_set1_epi32(p), ones = _mm256_set1_epi32(-1);
    v16 v = {{_mm256_castsi256_ps(_mm256_xor_si256(_mm256_cmpgt_epi32(pp, qpos.h[0]), ones)),
              _mm256_castsi256_ps(_mm256_xor_si256(_mm256_cmpgt_epi32(pp, qpos.h[1]), ones))}};
    if (q->window)
        v = v_and(v, (v16){{_mm256_castsi256_ps(_mm256_xor_si256(_mm256_cmpgt_epi32(qlo.h[0], pp), ones)),
                            _mm256_castsi256_ps(_mm256_xor_si256(_mm256_cmpgt_epi32(qlo.h[1], pp), ones))}});
    if (q->tree && p >= q->tree_pos0 && p - q->tree_pos0 < ATTN_TREE_MAX) v = v_and(v, lanes_of(tree_lanes[p - q->tree_pos0]));
    return v;
}

#define ATTN_ALIGN __attribute__((aligned(32)))
#include "attn_tiles.h"

attn_fn attn_avx2(void) { return cpu_path_supported(CPU_AVX2) ? attn_tiles : NULL; }

#else

attn_fn attn_avx2(void) { return NULL; }

#endif
