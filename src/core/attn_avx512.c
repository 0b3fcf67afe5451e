/*
 * attn_avx512 — the attention inner loop with AVX-512 (see attn.h).
 *
 * Lane i of every vector is query i. Per block of 16 keys: each key's scores
 * for all queries are hd FMAs (the transposed queries times a broadcast key
 * element), masked to -inf where the key's position is after the query's;
 * the running max, the rescale factor, the exponentials and the sums are
 * lane-wise; then each query's output row takes p(key, query) * V[key] for
 * the block's keys. F16 keys and values are widened once per block.
 *
 * exp is computed as 2^n * e^r with |r| <= ln2/2 and a degree-6 polynomial
 * (relative error below 2e-7), scaled with vscalefps.
 */
#include "attn.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__F16C__)

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "quant.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

ALWAYS_INLINE __m512 exp512(__m512 x) {
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

ALWAYS_INLINE __mmask16 tail_mask(int n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1); }

/* n rows of dim F16/F32 values, widened to F32 rows of dim */
static void widen_rows(uint32_t type, const void *base, size_t stride, int n, int dim, float *dst) {
    for (int j = 0; j < n; j++) {
        const uint8_t *row = (const uint8_t *)base + (size_t)j * stride;
        for (int d = 0; d < dim; d += 16) {
            const __mmask16 mk = tail_mask(dim - d);
            __m512 v;
            if (type == QT_F16) v = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mk, (const fp16_t *)row + d));
            else v = _mm512_maskz_loadu_ps(mk, (const float *)row + d);
            _mm512_mask_storeu_ps(dst + (size_t)j * dim + d, mk, v);
        }
    }
}

/* o = o * c + sum_j p[j * 16] * V[j], NC chunks of 16 values side by side */
ALWAYS_INLINE void pv_chunks(float *o, int hdv, float c, const float *p, int n, const float *v, size_t vst, const int NC) {
    __m512 acc[16];
    for (int k = 0; k < NC; k++)
        acc[k] = _mm512_mul_ps(_mm512_maskz_load_ps(tail_mask(hdv - 16 * k), o + 16 * k), _mm512_set1_ps(c));
    for (int j = 0; j < n; j++) {
        const __m512 pj = _mm512_set1_ps(p[j * ATTN_LANES]);
        for (int k = 0; k < NC; k++)
            acc[k] = _mm512_fmadd_ps(pj, _mm512_maskz_loadu_ps(tail_mask(hdv - 16 * k), v + (size_t)j * vst + 16 * k), acc[k]);
    }
    for (int k = 0; k < NC; k++) _mm512_mask_store_ps(o + 16 * k, tail_mask(hdv - 16 * k), acc[k]);
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

static void attn_512(const attn_queries *q, const attn_keys *runs, int n_runs) {
    const int hd = q->hd, hdv = q->hdv, nq = q->n_q;
    __attribute__((aligned(64))) float qt[ATTN_MAX_HEAD_DIM][ATTN_LANES];
    __attribute__((aligned(64))) float o[ATTN_LANES][ATTN_MAX_HEAD_DIM];
    __attribute__((aligned(64))) float pm[ATTN_LANES][ATTN_LANES], corr[ATTN_LANES];
    static __thread float kb[ATTN_LANES * ATTN_MAX_HEAD_DIM], vb[ATTN_LANES * ATTN_MAX_HEAD_DIM];
    int32_t qp[ATTN_LANES];
    for (int i = 0; i < ATTN_LANES; i++) {
        qp[i] = i < nq ? q->qpos[i] : INT32_MIN; /* empty lanes see nothing */
        for (int d = 0; d < hd; d++) qt[d][i] = i < nq ? q->q[i][d] : 0.0f;
        if (i < nq) memset(o[i], 0, sizeof(float) * (size_t)hdv);
    }
    const __m512i qpos = _mm512_loadu_si512(qp);
    const __m512 scale = _mm512_set1_ps(q->scale), ninf = _mm512_set1_ps(-INFINITY);
    __m512 m = ninf, l = _mm512_setzero_ps();
    for (int r = 0; r < n_runs; r++) {
        const attn_keys *ks = &runs[r];
        for (int j0 = 0; j0 < ks->n; j0 += ATTN_LANES) {
            const int n = ks->n - j0 < ATTN_LANES ? ks->n - j0 : ATTN_LANES;
            const uint8_t *k0 = (const uint8_t *)ks->k + (size_t)j0 * ks->k_stride;
            const uint8_t *v0 = (const uint8_t *)ks->v + (size_t)j0 * ks->v_stride;
            const float *kr = (const float *)k0, *vr = (const float *)v0;
            size_t kst = ks->k_stride / sizeof(float), vst = ks->v_stride / sizeof(float);
            if (ks->type == QT_F16) {
                widen_rows(ks->type, k0, ks->k_stride, n, hd, kb);
                widen_rows(ks->type, v0, ks->v_stride, n, hdv, vb);
                kr = kb, vr = vb, kst = (size_t)hd, vst = (size_t)hdv;
            }
            __m512 s[ATTN_LANES];
            __mmask16 vis[ATTN_LANES];
            __m512 bmax = ninf;
            /* scores: each key's chain of hd FMAs is the same however many
             * keys run side by side (8 chains hide the FMA latency) */
            int j = 0;
            for (; j + 8 <= n; j += 8) {
                __m512 acc[8];
                for (int u = 0; u < 8; u++) acc[u] = _mm512_setzero_ps();
                for (int d = 0; d < hd; d++) {
                    const __m512 qd = _mm512_load_ps(qt[d]);
                    for (int u = 0; u < 8; u++)
                        acc[u] = _mm512_fmadd_ps(qd, _mm512_set1_ps(kr[(size_t)(j + u) * kst + d]), acc[u]);
                }
                for (int u = 0; u < 8; u++) s[j + u] = acc[u];
            }
            for (; j < n; j++) {
                __m512 acc = _mm512_setzero_ps();
                for (int d = 0; d < hd; d++)
                    acc = _mm512_fmadd_ps(_mm512_load_ps(qt[d]), _mm512_set1_ps(kr[(size_t)j * kst + d]), acc);
                s[j] = acc;
            }
            for (j = 0; j < n; j++) {
                vis[j] = _mm512_cmp_epi32_mask(_mm512_set1_epi32(ks->pos[j0 + j]), qpos, _MM_CMPINT_LE);
                s[j] = _mm512_mask_mov_ps(ninf, vis[j], _mm512_mul_ps(s[j], scale));
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
}

attn_fn attn_avx512(void) { return attn_512; }

#else

attn_fn attn_avx512(void) { return NULL; }

#endif
