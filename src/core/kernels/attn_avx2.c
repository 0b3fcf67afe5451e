/*
 * attn_avx2 — the attention inner loop with AVX2 + FMA + F16C (see attn.h),
 * the same algorithm as attn_avx512.c with each 16-lane vector held as two
 * 8-lane halves (lane i is query i): per block of 16 keys the scores of every
 * key for all queries (the transposed queries times a broadcast key
 * element), masked to -inf where the key is invisible; the running max, the
 * rescale factor, the exponentials and the sums lane-wise; then each query's
 * output row takes p(key, query) * V[key]. Every lane's arithmetic is its
 * own, so a query's output does not depend on the tile it shares.
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

/* scores of the block's keys for the 16 lanes, before scaling and masking;
 * key j's element d at kr[j * kst + d * dst]. Four keys side by side (eight
 * chains of FMAs hide their latency); each key's chain is the same whatever
 * runs beside it. */
static void block_scores(const float (*qt)[ATTN_LANES], int hd, const float *kr, size_t kst, size_t dst, int n,
                         v16 *s) {
    int j = 0;
    for (; j + 4 <= n; j += 4) {
        v16 acc[4];
        for (int u = 0; u < 4; u++) acc[u] = v_set1(0.0f);
        for (int d = 0; d < hd; d++) {
            const v16 qd = v_load(qt[d]);
            for (int u = 0; u < 4; u++) acc[u] = v_fmadd(qd, v_set1(kr[(size_t)(j + u) * kst + d * dst]), acc[u]);
        }
        for (int u = 0; u < 4; u++) s[j + u] = acc[u];
    }
    for (; j < n; j++) {
        v16 acc = v_set1(0.0f);
        for (int d = 0; d < hd; d++) acc = v_fmadd(v_load(qt[d]), v_set1(kr[(size_t)j * kst + d * dst]), acc);
        s[j] = acc;
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

/* the block's keys and values as F32: in place for F32 rows, else widened
 * into kb / vb; key j's element d is at kr[j * kst + d * kds] */
static void keys_of(const attn_keys *ks, int j0, int n, int hd, int hdv, float *kb, float *vb, const float **kr,
                    size_t *kst, size_t *kds, const float **vr, size_t *vst) {
    *kds = 1;
    if (ks->k_type == QT_F32) {
        *kr = (const float *)((const uint8_t *)ks->k + (size_t)j0 * ks->k_stride) + ks->k_off;
        *kst = ks->k_stride / sizeof(float);
    } else if (ks->k_type == ATTN_KC8 || ks->k_type == ATTN_KC4) {
        widen_channels(ks, j0, hd, kb);
        *kr = kb, *kst = 1, *kds = ATTN_LANES;
    } else {
        widen_rows(ks, true, j0, n, hd, kb);
        *kr = kb, *kst = (size_t)hd;
    }
    if (!vb) return;
    if (ks->v_type == QT_F32) {
        *vr = (const float *)((const uint8_t *)ks->v + (size_t)j0 * ks->v_stride) + ks->v_off;
        *vst = ks->v_stride / sizeof(float);
    } else {
        widen_rows(ks, false, j0, n, hdv, vb);
        *vr = vb, *vst = (size_t)hdv;
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
ALWAYS_INLINE v16 visible(const attn_queries *q, const uint32_t *tree_lanes, const __m256i qpos[2],
                          const __m256i qlo[2], int32_t p) {
    const __m256i pp = _mm256_set1_epi32(p), ones = _mm256_set1_epi32(-1);
    v16 v = {{_mm256_castsi256_ps(_mm256_xor_si256(_mm256_cmpgt_epi32(pp, qpos[0]), ones)),
              _mm256_castsi256_ps(_mm256_xor_si256(_mm256_cmpgt_epi32(pp, qpos[1]), ones))}};
    if (q->window)
        v = v_and(v, (v16){{_mm256_castsi256_ps(_mm256_xor_si256(_mm256_cmpgt_epi32(qlo[0], pp), ones)),
                            _mm256_castsi256_ps(_mm256_xor_si256(_mm256_cmpgt_epi32(qlo[1], pp), ones))}});
    if (q->tree && p >= q->tree_pos0 && p - q->tree_pos0 < ATTN_TREE_MAX) v = v_and(v, lanes_of(tree_lanes[p - q->tree_pos0]));
    return v;
}

/* scaled scores, soft-capped when asked: c * tanh(s / c), tanh(x) = 1 - 2 / (exp(2x) + 1) */
ALWAYS_INLINE v16 final_score(v16 s, float scale, float softcap) {
    s = v_mul(s, v_set1(scale));
    if (softcap <= 0.0f) return s;
    const v16 one = v_set1(1.0f), e = v_exp(v_mul(s, v_set1(2.0f / softcap))), d = v_add(e, one);
    const v16 r = {{_mm256_div_ps(_mm256_set1_ps(2.0f), d.h[0]), _mm256_div_ps(_mm256_set1_ps(2.0f), d.h[1])}};
    return v_mul(v_set1(softcap), v_sub(one, r));
}

typedef struct {
    __attribute__((aligned(32))) float qt[ATTN_MAX_HEAD_DIM][ATTN_LANES];
    __attribute__((aligned(32))) float o[ATTN_LANES][ATTN_MAX_HEAD_DIM];
    __attribute__((aligned(32))) float pm[ATTN_LANES][ATTN_LANES];
    __attribute__((aligned(32))) float corr[ATTN_LANES];
    float kb[ATTN_LANES * ATTN_MAX_HEAD_DIM], vb[ATTN_LANES * ATTN_MAX_HEAD_DIM];
    __m256i qpos[2], qlo[2];
    uint32_t tree_lanes[ATTN_TREE_MAX];
    int32_t max_qpos;
    v16 m, l; /* running max and sum per lane */
} attn_state;

static void setup(attn_state *st, const attn_queries *q) {
    int32_t qp[ATTN_LANES], ql[ATTN_LANES];
    st->max_qpos = INT32_MIN;
    for (int i = 0; i < ATTN_LANES; i++) {
        qp[i] = i < q->n_q ? q->qpos[i] : INT32_MIN; /* empty lanes see nothing */
        ql[i] = q->window && i < q->n_q ? q->qpos[i] - q->window + 1 : INT32_MIN;
        if (qp[i] > st->max_qpos) st->max_qpos = qp[i];
        for (int d = 0; d < q->hd; d++) st->qt[d][i] = i < q->n_q ? q->q[i][d] : 0.0f;
        if (i < q->n_q) memset(st->o[i], 0, sizeof(float) * (size_t)q->hdv);
    }
    st->qpos[0] = _mm256_loadu_si256((const __m256i *)qp);
    st->qpos[1] = _mm256_loadu_si256((const __m256i *)(qp + 8));
    st->qlo[0] = _mm256_loadu_si256((const __m256i *)ql);
    st->qlo[1] = _mm256_loadu_si256((const __m256i *)(ql + 8));
    if (q->tree) /* a tree batch: the lanes that see each of its entries */
        for (int s = 0; s < ATTN_TREE_MAX; s++) {
            st->tree_lanes[s] = 0;
            for (int i = 0; i < q->n_q; i++) st->tree_lanes[s] |= (uint32_t)((q->anc[i] >> s) & 1u) << i;
        }
    st->m = v_set1(-INFINITY), st->l = v_set1(0.0f);
}

/* One block of n keys (j0 .. of run ks): the lanes that see any of them
 * rescale and take them in. */
static void block(attn_state *st, const attn_queries *q, const attn_keys *ks, int j0, int n) {
    const float *kr = NULL, *vr = NULL;
    size_t kst = 0, kds = 1, vst = 0;
    keys_of(ks, j0, n, q->hd, q->hdv, st->kb, st->vb, &kr, &kst, &kds, &vr, &vst);
    v16 s[ATTN_LANES], vis[ATTN_LANES];
    const v16 ninf = v_set1(-INFINITY);
    v16 bmax = ninf;
    block_scores((const float(*)[ATTN_LANES])st->qt, q->hd, kr, kst, kds, n, s);
    for (int j = 0; j < n; j++) {
        vis[j] = visible(q, st->tree_lanes, st->qpos, st->qlo, ks->pos[j0 + j]);
        s[j] = v_blend(ninf, final_score(s[j], q->scale, q->softcap), vis[j]);
        bmax = v_max(bmax, s[j]);
    }
    const v16 anyv = v_gt(bmax, ninf);
    const int any = v_bits(anyv);
    if (!any) return;
    const v16 mn = v_blend(st->m, v_max(st->m, bmax), anyv);
    const v16 c = v_blend(v_set1(1.0f), v_exp(v_sub(st->m, mn)), anyv);
    v16 sum = v_set1(0.0f);
    for (int j = 0; j < n; j++) {
        const v16 p = v_and(v_exp(v_sub(s[j], mn)), vis[j]);
        sum = v_add(sum, p);
        v_store(st->pm[j], p);
    }
    st->l = v_blend(st->l, v_fmadd(st->l, c, sum), anyv);
    st->m = mn;
    v_store(st->corr, c);
    for (int i = 0; i < q->n_q; i++)
        if ((any >> i) & 1) pv_row(st->o[i], q->hdv, st->corr[i], &st->pm[0][i], n, vr, vst);
}

/* obs[e] += the weight of entry e for the lanes of obs_lanes, once the max and sum are final */
static void observe(attn_state *st, const attn_queries *q, const attn_keys *runs, int n_runs) {
    const v16 lanes = v_and(lanes_of(q->obs_lanes & ((1u << q->n_q) - 1)), v_gt(st->l, v_set1(0.0f)));
    if (!v_bits(lanes)) return;
    const v16 inv_l = v_and(lanes, (v16){{_mm256_div_ps(_mm256_set1_ps(1.0f), st->l.h[0]),
                                          _mm256_div_ps(_mm256_set1_ps(1.0f), st->l.h[1])}});
    float *obs = q->obs;
    for (int r = 0; r < n_runs; r++) {
        const attn_keys *ks = &runs[r];
        for (int j0 = 0; j0 < ks->n; j0 += ATTN_LANES) {
            const int n = ks->n - j0 < ATTN_LANES ? ks->n - j0 : ATTN_LANES;
            if (attn_block_hidden(ks->pos + j0, n, st->max_qpos)) continue;
            const float *kr = NULL, *vr = NULL;
            size_t kst = 0, kds = 1, vst = 0;
            keys_of(ks, j0, n, q->hd, q->hdv, st->kb, NULL, &kr, &kst, &kds, &vr, &vst);
            v16 s[ATTN_LANES];
            block_scores((const float(*)[ATTN_LANES])st->qt, q->hd, kr, kst, kds, n, s);
            for (int j = 0; j < n; j++) {
                const v16 vis = v_and(visible(q, st->tree_lanes, st->qpos, st->qlo, ks->pos[j0 + j]), lanes);
                const v16 p = v_and(v_mul(v_exp(v_sub(final_score(s[j], q->scale, q->softcap), st->m)), inv_l), vis);
                __attribute__((aligned(32))) float w[ATTN_LANES];
                v_store(w, p);
                float t = 0.0f;
                for (int i = 0; i < ATTN_LANES; i++) t += w[i];
                obs[j0 + j] += t;
            }
        }
        obs += ks->n;
    }
}

static void attn_256(const attn_queries *q, const attn_keys *runs, int n_runs) {
    if (q->tree && q->window) { /* depths counted per lane: the portable loops */
        attn_portable(q, runs, n_runs);
        return;
    }
    static __thread attn_state st; /* 150 KiB at the largest head size: off the stack of the pool's threads */
    setup(&st, q);
    for (int r = 0; r < n_runs; r++)
        for (int j0 = 0; j0 < runs[r].n; j0 += ATTN_LANES) {
            const int n = runs[r].n - j0 < ATTN_LANES ? runs[r].n - j0 : ATTN_LANES;
            if (!attn_block_hidden(runs[r].pos + j0, n, st.max_qpos)) block(&st, q, &runs[r], j0, n);
        }
    __attribute__((aligned(32))) float ls[ATTN_LANES];
    v_store(ls, st.l);
    for (int i = 0; i < q->n_q; i++) {
        const float inv = ls[i] > 0.0f ? 1.0f / ls[i] : 0.0f;
        for (int d = 0; d < q->hdv; d++) q->out[i][d] = st.o[i][d] * inv;
    }
    if (q->obs) observe(&st, q, runs, n_runs);
}

attn_fn attn_avx2(void) { return cpu_path_supported(CPU_AVX2) ? attn_256 : NULL; }

#else

attn_fn attn_avx2(void) { return NULL; }

#endif
