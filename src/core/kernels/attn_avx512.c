/*
 * attn_avx512 — the attention inner loop with AVX-512 (see attn.h).
 *
 * Lane i of every vector is query i. Per block of 16 keys: each key's scores
 * for all queries are hd FMAs (the transposed queries times a broadcast key
 * element), masked to -inf where the key's position is after the query's;
 * the running max, the rescale factor, the exponentials and the sums are
 * lane-wise; then each query's output row takes p(key, query) * V[key] for
 * the block's keys. F16 keys and values are widened once per block.
 * exp is exp512 (simd_x86.h).
 */
#include "attn.h"
#include "kernels.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__F16C__)

#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "simd_x86.h"
#include "core/quant.h"

/* 32 values of a Q8_0 / Q4_0 / Q4_1 block as two vectors */
ALWAYS_INLINE void block32(uint32_t type, const uint8_t *b, __m512 *lo, __m512 *hi) {
    if (type == QT_Q8_0) {
        const block_q8_0 *q = (const block_q8_0 *)b;
        const __m512 d = _mm512_set1_ps(_cvtsh_ss(q->d));
        *lo = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)q->qs))));
        *hi = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(q->qs + 16)))));
        return;
    }
    const uint8_t *qs = type == QT_Q4_0 ? ((const block_q4_0 *)b)->qs : ((const block_q4_1 *)b)->qs;
    const __m512i u = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)qs));
    const __m512 ql = _mm512_cvtepi32_ps(_mm512_and_si512(u, _mm512_set1_epi32(15)));
    const __m512 qh = _mm512_cvtepi32_ps(_mm512_srli_epi32(u, 4));
    if (type == QT_Q4_0) {
        const __m512 d = _mm512_set1_ps(_cvtsh_ss(((const block_q4_0 *)b)->d)), e8 = _mm512_set1_ps(8.0f);
        *lo = _mm512_mul_ps(d, _mm512_sub_ps(ql, e8));
        *hi = _mm512_mul_ps(d, _mm512_sub_ps(qh, e8));
    } else {
        const block_q4_1 *q = (const block_q4_1 *)b;
        const __m512 d = _mm512_set1_ps(_cvtsh_ss(q->d)), m = _mm512_set1_ps(_cvtsh_ss(q->m));
        *lo = _mm512_fmadd_ps(d, ql, m);
        *hi = _mm512_fmadd_ps(d, qh, m);
    }
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
        if (type == QT_F32 || type == QT_F16) {
            for (int d = 0; d < dim; d += 16) {
                const __mmask16 mk = mask16_first(dim - d);
                __m512 v;
                if (type == QT_F16) v = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mk, (const fp16_t *)row + off + d));
                else v = _mm512_maskz_loadu_ps(mk, (const float *)row + off + d);
                _mm512_mask_storeu_ps(out + d, mk, v);
            }
        } else if (off % 32 == 0 && dim % 32 == 0) {
            const size_t bb = quant_row_bytes(type, 32);
            for (int d = 0; d < dim; d += 32) {
                __m512 lo, hi;
                block32(type, row + (size_t)((off + d) / 32) * bb, &lo, &hi);
                _mm512_storeu_ps(out + d, lo);
                _mm512_storeu_ps(out + d + 16, hi);
            }
        } else {
            attn_widen(type, row, off, dim, out); /* heads smaller than a block */
        }
    }
}

/* keys j0 .. j0 + 15 of channels k_off .. k_off + hd - 1, transposed:
 * dst[d * 16 + j] (the 16 quants of a channel for 16 entries are adjacent) */
static void widen_channels(const attn_keys *ks, int j0, int hd, float *dst) {
    const uint8_t *base = ks->k;
    for (int d = 0; d < hd; d++) {
        const uint8_t *ch = base + (size_t)(ks->k_off + d) * ks->k_stride;
        fp16_t d16, m16;
        memcpy(&d16, ch, 2);
        memcpy(&m16, ch + 2, 2);
        __m128i q;
        if (ks->k_type == ATTN_KC8) q = _mm_loadu_si128((const __m128i *)(ch + 4 + j0));
        else {
            const __m128i v = _mm_loadl_epi64((const __m128i *)(ch + 4 + j0 / 2)), m4 = _mm_set1_epi8(0x0F);
            q = _mm_unpacklo_epi8(_mm_and_si128(v, m4), _mm_and_si128(_mm_srli_epi16(v, 4), m4));
        }
        const __m512 x = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(q));
        _mm512_storeu_ps(dst + (size_t)d * ATTN_LANES,
                         _mm512_fmadd_ps(_mm512_set1_ps(_cvtsh_ss(d16)), x, _mm512_set1_ps(_cvtsh_ss(m16))));
    }
}

/* scores of the block's keys for the 16 lanes, before scaling and masking;
 * key j's element d at kr[j * kst + d * dst] */
static void block_scores(const float (*qt)[ATTN_LANES], int hd, const float *kr, size_t kst, size_t dst, int n,
                         __m512 *s) {
    /* each key's chain of hd FMAs is the same however many keys run side by
     * side (8 chains hide the FMA latency) */
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        __m512 acc[8];
        for (int u = 0; u < 8; u++) acc[u] = _mm512_setzero_ps();
        for (int d = 0; d < hd; d++) {
            const __m512 qd = _mm512_load_ps(qt[d]);
            for (int u = 0; u < 8; u++) acc[u] = _mm512_fmadd_ps(qd, _mm512_set1_ps(kr[(size_t)(j + u) * kst + d * dst]), acc[u]);
        }
        for (int u = 0; u < 8; u++) s[j + u] = acc[u];
    }
    for (; j < n; j++) {
        __m512 acc = _mm512_setzero_ps();
        for (int d = 0; d < hd; d++) acc = _mm512_fmadd_ps(_mm512_load_ps(qt[d]), _mm512_set1_ps(kr[(size_t)j * kst + d * dst]), acc);
        s[j] = acc;
    }
}

/* o = o * c + sum_j p[j * 16] * V[j], NC chunks of 16 values side by side */
ALWAYS_INLINE void pv_chunks(float *o, int hdv, float c, const float *p, int n, const float *v, size_t vst, const int NC) {
    __m512 acc[16];
    for (int k = 0; k < NC; k++)
        acc[k] = _mm512_mul_ps(_mm512_maskz_load_ps(mask16_first(hdv - 16 * k), o + 16 * k), _mm512_set1_ps(c));
    for (int j = 0; j < n; j++) {
        const __m512 pj = _mm512_set1_ps(p[j * ATTN_LANES]);
        for (int k = 0; k < NC; k++)
            acc[k] = _mm512_fmadd_ps(pj, _mm512_maskz_loadu_ps(mask16_first(hdv - 16 * k), v + (size_t)j * vst + 16 * k), acc[k]);
    }
    for (int k = 0; k < NC; k++) _mm512_mask_store_ps(o + 16 * k, mask16_first(hdv - 16 * k), acc[k]);
}

static void pv_row(float *o, int hdv, float c, const float *p, int n, const float *v, size_t vst) {
    switch ((hdv + 15) / 16) {
    case 1: pv_chunks(o, hdv, c, p, n, v, vst, 1); break;
    case 2: pv_chunks(o, hdv, c, p, n, v, vst, 2); break;
    case 4: pv_chunks(o, hdv, c, p, n, v, vst, 4); break;
    case 8: pv_chunks(o, hdv, c, p, n, v, vst, 8); break;
    default:
        for (int k = 0; k < (hdv + 15) / 16; k++) { /* one chunk at a time, same order per value */
            const int w = hdv - 16 * k < 16 ? hdv - 16 * k : 16;
            pv_chunks(o + 16 * k, w, c, p, n, v + 16 * k, vst, 1);
        }
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
    } else if (kb && (ks->k_type == ATTN_KC8 || ks->k_type == ATTN_KC4)) {
        widen_channels(ks, j0, hd, kb);
        *kr = kb, *kst = 1, *kds = ATTN_LANES;
    } else if (kb) {
        widen_rows(ks, true, j0, n, hd, kb);
        *kr = kb, *kst = (size_t)hd;
    }
    if (ks->v_type == QT_F32) {
        *vr = (const float *)((const uint8_t *)ks->v + (size_t)j0 * ks->v_stride) + ks->v_off;
        *vst = ks->v_stride / sizeof(float);
    } else if (vb) {
        widen_rows(ks, false, j0, n, hdv, vb);
        *vr = vb, *vst = (size_t)hdv;
    }
}

/* The causal rule's lanes for a key at position p, narrowed in a tree batch
 * to the lanes whose ancestry holds it (tree_lanes: per batch entry) and by
 * a sliding window to the lanes whose lowest visible position (qlo) is <= p. */
ALWAYS_INLINE __mmask16 visible(const attn_queries *q, const __mmask16 *tree_lanes, __m512i qpos, __m512i qlo, int32_t p) {
    const __m512i pv = _mm512_set1_epi32(p);
    __mmask16 v = _mm512_cmp_epi32_mask(pv, qpos, _MM_CMPINT_LE);
    if (q->window) v &= _mm512_cmp_epi32_mask(qlo, pv, _MM_CMPINT_LE);
    if (q->tree && p >= q->tree_pos0 && p - q->tree_pos0 < ATTN_TREE_MAX) v &= tree_lanes[p - q->tree_pos0];
    return v;
}

/* scaled scores, soft-capped when asked: c * tanh(s / c), tanh(x) = 1 - 2 / (exp(2x) + 1) */
ALWAYS_INLINE __m512 final_score(__m512 s, __m512 scale, float softcap) {
    s = _mm512_mul_ps(s, scale);
    if (softcap <= 0.0f) return s;
    const __m512 c = _mm512_set1_ps(softcap), one = _mm512_set1_ps(1.0f);
    const __m512 e = exp512(_mm512_mul_ps(s, _mm512_set1_ps(2.0f / softcap)));
    return _mm512_mul_ps(c, _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, one))));
}

/* attn_512's working memory: 144 KiB at the largest head size, the caller's (attn.h), 64-aligned */
typedef struct {
    __attribute__((aligned(64))) float qt[ATTN_MAX_HEAD_DIM][ATTN_LANES];
    __attribute__((aligned(64))) float o[ATTN_LANES][ATTN_MAX_HEAD_DIM];
    float kb[ATTN_LANES * ATTN_MAX_HEAD_DIM], vb[ATTN_LANES * ATTN_MAX_HEAD_DIM];
} scratch512;
_Static_assert(sizeof(scratch512) <= ATTN_SCRATCH_BYTES, "attention scratch");

static void attn_512(const attn_queries *q, const attn_keys *runs, int n_runs, void *scratch) {
    if (q->tree && q->window) { /* depths counted per lane: the portable loops */
        attn_portable(q, runs, n_runs, scratch);
        return;
    }
    const int hd = q->hd, hdv = q->hdv, nq = q->n_q;
    scratch512 *sc = scratch;
    float(*qt)[ATTN_LANES] = sc->qt;
    float(*o)[ATTN_MAX_HEAD_DIM] = sc->o;
    __attribute__((aligned(64))) float pm[ATTN_LANES][ATTN_LANES], corr[ATTN_LANES];
    float *kb = sc->kb, *vb = sc->vb;
    int32_t qp[ATTN_LANES], ql[ATTN_LANES], max_qpos = INT32_MIN;
    for (int i = 0; i < ATTN_LANES; i++) {
        qp[i] = i < nq ? q->qpos[i] : INT32_MIN; /* empty lanes see nothing */
        ql[i] = q->window && i < nq ? q->qpos[i] - q->window + 1 : INT32_MIN;
        if (qp[i] > max_qpos) max_qpos = qp[i];
        for (int d = 0; d < hd; d++) qt[d][i] = i < nq ? q->q[i][d] : 0.0f;
        if (i < nq) memset(o[i], 0, sizeof(float) * (size_t)hdv);
    }
    const __m512i qpos = _mm512_loadu_si512(qp), qlo = _mm512_loadu_si512(ql);
    /* a tree batch: the lanes that see each of its entries */
    __mmask16 tree_lanes[ATTN_TREE_MAX];
    if (q->tree)
        for (int s = 0; s < ATTN_TREE_MAX; s++) {
            tree_lanes[s] = 0;
            for (int i = 0; i < nq; i++) tree_lanes[s] |= (__mmask16)(((q->anc[i] >> s) & 1u) << i);
        }
    const __m512 scale = _mm512_set1_ps(q->scale), ninf = _mm512_set1_ps(-INFINITY);
    __m512 m = ninf, l = _mm512_setzero_ps();
    for (int r = 0; r < n_runs; r++) {
        const attn_keys *ks = &runs[r];
        for (int j0 = 0; j0 < ks->n; j0 += ATTN_LANES) {
            const int n = ks->n - j0 < ATTN_LANES ? ks->n - j0 : ATTN_LANES;
            if (attn_block_hidden(ks->pos + j0, n, max_qpos)) continue;
            const float *kr = NULL, *vr = NULL;
            size_t kst = 0, kds = 1, vst = 0;
            keys_of(ks, j0, n, hd, hdv, kb, vb, &kr, &kst, &kds, &vr, &vst);
            __m512 s[ATTN_LANES];
            __mmask16 vis[ATTN_LANES];
            __m512 bmax = ninf;
            block_scores((const float(*)[ATTN_LANES])qt, hd, kr, kst, kds, n, s);
            for (int j = 0; j < n; j++) {
                vis[j] = visible(q, tree_lanes, qpos, qlo, ks->pos[j0 + j]);
                s[j] = _mm512_mask_mov_ps(ninf, vis[j], final_score(s[j], scale, q->softcap));
                bmax = _mm512_max_ps(bmax, s[j]);
            }
            const __mmask16 any = _mm512_cmp_ps_mask(bmax, ninf, _CMP_GT_OQ);
            if (!any) continue;
            const __m512 mn = _mm512_mask_max_ps(m, any, m, bmax);
            const __m512 c = _mm512_mask_blend_ps(any, _mm512_set1_ps(1.0f), exp512(_mm512_sub_ps(m, mn)));
            __m512 sum = _mm512_setzero_ps();
            for (int j = 0; j < n; j++) {
                const __m512 p = _mm512_maskz_mov_ps(vis[j], exp512(_mm512_sub_ps(s[j], mn)));
                sum = _mm512_add_ps(sum, p);
                _mm512_store_ps(pm[j], p);
            }
            l = _mm512_mask_fmadd_ps(l, any, c, sum);
            m = mn;
            _mm512_store_ps(corr, c);
            for (int i = 0; i < nq; i++)
                if ((any >> i) & 1) pv_row(o[i], hdv, corr[i], &pm[0][i], n, vr, vst);
        }
    }
    float ls[ATTN_LANES];
    _mm512_storeu_ps(ls, l);
    for (int i = 0; i < nq; i++) {
        const float inv = ls[i] > 0.0f ? 1.0f / ls[i] : 0.0f;
        for (int d = 0; d < hdv; d++) q->out[i][d] = o[i][d] * inv;
    }
    if (!q->obs) return;
    /* the weights themselves, now that each query's max and sum are known */
    const __mmask16 lanes = (__mmask16)(q->obs_lanes & ((1u << nq) - 1)) & _mm512_cmp_ps_mask(l, _mm512_setzero_ps(), _CMP_GT_OQ);
    const __m512 inv_l = _mm512_maskz_div_ps(lanes, _mm512_set1_ps(1.0f), l);
    float *obs = q->obs;
    for (int r = 0; r < n_runs; r++) {
        const attn_keys *ks = &runs[r];
        for (int j0 = 0; j0 < ks->n && lanes; j0 += ATTN_LANES) {
            const int n = ks->n - j0 < ATTN_LANES ? ks->n - j0 : ATTN_LANES;
            if (attn_block_hidden(ks->pos + j0, n, max_qpos)) continue;
            const float *kr = NULL, *vr = NULL;
            size_t kst = 0, kds = 1, vst = 0;
            keys_of(ks, j0, n, hd, hdv, kb, NULL, &kr, &kst, &kds, &vr, &vst);
            __m512 s[ATTN_LANES];
            block_scores((const float(*)[ATTN_LANES])qt, hd, kr, kst, kds, n, s);
            for (int j = 0; j < n; j++) {
                const __mmask16 vis = visible(q, tree_lanes, qpos, qlo, ks->pos[j0 + j]) & lanes;
                const __m512 p = _mm512_maskz_mul_ps(vis, exp512(_mm512_sub_ps(final_score(s[j], scale, q->softcap), m)), inv_l);
                obs[j0 + j] += _mm512_reduce_add_ps(p);
            }
        }
        obs += ks->n;
    }
}

attn_fn attn_avx512(void) { return cpu_path_supported(CPU_AVX512) ? attn_512 : NULL; }

#else

attn_fn attn_avx512(void) { return NULL; }

#endif
