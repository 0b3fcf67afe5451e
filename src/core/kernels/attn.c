/*
 * attn — portable implementation and dispatch. See attn.h.
 *
 * The same algorithm as the SIMD versions, in plain loops: per block of 16
 * keys, the scores of every (key, query), the new running max per query, the
 * rescale of the query's sum and output, then the probabilities times the
 * value rows.
 */
#include "attn.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels.h"
#include "core/quant.h"

int attn_type_supported(uint32_t type) {
    return type == QT_F32 || type == QT_F16 || type == QT_Q8_0 || type == QT_Q4_0 || type == QT_Q4_1 ||
           type == ATTN_KC8 || type == ATTN_KC4;
}

size_t attn_kc_channel_bytes(uint32_t type, int cap) { return 4 + (size_t)(type == ATTN_KC8 ? cap : cap / 2); }

void attn_kc_quantize(uint32_t type, const float *rows, int n, int dim, int cap, uint8_t *dst) {
    const size_t cb = attn_kc_channel_bytes(type, cap);
    const float levels = type == ATTN_KC8 ? 255.0f : 15.0f;
    for (int c = 0; c < dim; c++) {
        uint8_t *ch = dst + (size_t)c * cb;
        float mn = INFINITY, mx = -INFINITY;
        for (int j = 0; j < n; j++) {
            const float x = rows[(size_t)j * dim + c];
            mn = x < mn ? x : mn;
            mx = x > mx ? x : mx;
        }
        if (n == 0) mn = mx = 0.0f;
        const fp16_t d16 = fp32_to_fp16((mx - mn) / levels), m16 = fp32_to_fp16(mn);
        memcpy(ch, &d16, 2);
        memcpy(ch + 2, &m16, 2);
        const float d = fp16_to_fp32(d16), m = fp16_to_fp32(m16), id = d > 0.0f ? 1.0f / d : 0.0f;
        memset(ch + 4, 0, cb - 4);
        for (int j = 0; j < n; j++) {
            float q = nearbyintf((rows[(size_t)j * dim + c] - m) * id);
            q = q < 0.0f ? 0.0f : q > levels ? levels : q;
            if (type == ATTN_KC8) ch[4 + j] = (uint8_t)q;
            else ch[4 + j / 2] |= (uint8_t)((int)q << (j % 2 ? 4 : 0));
        }
    }
}

float attn_kc_value(uint32_t type, const uint8_t *base, size_t channel_bytes, int c, int j) {
    const uint8_t *ch = base + (size_t)c * channel_bytes;
    fp16_t d16, m16;
    memcpy(&d16, ch, 2);
    memcpy(&m16, ch + 2, 2);
    const int q = type == ATTN_KC8 ? ch[4 + j] : (ch[4 + j / 2] >> (j % 2 ? 4 : 0)) & 15;
    return fp16_to_fp32(m16) + fp16_to_fp32(d16) * (float)q;
}

void attn_widen(uint32_t type, const void *row, int off, int dim, float *dst) {
    if (type == QT_F32) {
        memcpy(dst, (const float *)row + off, sizeof(float) * (size_t)dim);
        return;
    }
    if (type == QT_F16) {
        for (int d = 0; d < dim; d++) dst[d] = fp16_to_fp32(((const fp16_t *)row)[off + d]);
        return;
    }
    const size_t bb = quant_row_bytes(type, 32);
    float tmp[32];
    for (int e = off; e < off + dim;) {
        const int b = e / 32, in = e % 32, take = 32 - in < off + dim - e ? 32 - in : off + dim - e;
        quant_dequantize_row(type, (const uint8_t *)row + (size_t)b * bb, tmp, 32);
        memcpy(dst + (e - off), tmp + in, sizeof(float) * (size_t)take);
        e += take;
    }
}

static void load_rows(const attn_keys *ks, bool key, int j0, int n, int dim, float *dst) {
    const uint8_t *base = (const uint8_t *)(key ? ks->k : ks->v);
    const size_t stride = key ? ks->k_stride : ks->v_stride;
    const uint32_t type = key ? ks->k_type : ks->v_type;
    if (type == ATTN_KC8 || type == ATTN_KC4) {
        for (int j = 0; j < n; j++)
            for (int d = 0; d < dim; d++) dst[(size_t)j * dim + d] = attn_kc_value(type, base, stride, ks->k_off + d, j0 + j);
        return;
    }
    for (int j = 0; j < n; j++)
        attn_widen(type, base + (size_t)(j0 + j) * stride, key ? ks->k_off : ks->v_off, dim, dst + (size_t)j * dim);
}

/* q.k * scale (soft-capped) for query i and the block's keys (-inf when invisible) */
static void block_scores(const attn_queries *q, int i, const attn_keys *ks, int j0, int n, const float *kb, float *s) {
    for (int j = 0; j < n; j++) {
        if (ks->pos[j0 + j] > q->qpos[i] || !attn_tree_sees(q, i, ks->pos[j0 + j]) ||
            !attn_window_sees(q, i, ks->pos[j0 + j])) {
            s[j] = -INFINITY;
            continue;
        }
        float acc = 0.0f;
        for (int d = 0; d < q->hd; d++) acc = fmaf(q->q[i][d], kb[j * q->hd + d], acc);
        s[j] = acc * q->scale;
        if (q->softcap > 0.0f) s[j] = q->softcap * tanhf(s[j] / q->softcap);
    }
}

/* attn_portable's working memory: 110 KiB at the largest head size, the caller's (attn.h) */
typedef struct {
    float kb[ATTN_LANES * ATTN_MAX_HEAD_DIM], vb[ATTN_LANES * ATTN_MAX_HEAD_DIM];
    float o[ATTN_LANES][ATTN_MAX_HEAD_DIM];
} portable_scratch;
_Static_assert(sizeof(portable_scratch) <= ATTN_SCRATCH_BYTES, "attention scratch");

void attn_portable(const attn_queries *q, const attn_keys *runs, int n_runs, void *scratch) {
    const int hd = q->hd, hdv = q->hdv, nq = q->n_q;
    portable_scratch *sc = scratch;
    float *kb = sc->kb, *vb = sc->vb;
    float(*o)[ATTN_MAX_HEAD_DIM] = sc->o;
    float m[ATTN_LANES], l[ATTN_LANES];
    int32_t max_qpos = INT32_MIN;
    for (int i = 0; i < nq; i++) {
        if (q->qpos[i] > max_qpos) max_qpos = q->qpos[i];
        m[i] = -INFINITY;
        l[i] = 0.0f;
        memset(o[i], 0, sizeof(float) * (size_t)hdv);
    }
    for (int r = 0; r < n_runs; r++) {
        const attn_keys *ks = &runs[r];
        for (int j0 = 0; j0 < ks->n; j0 += ATTN_LANES) {
            const int n = ks->n - j0 < ATTN_LANES ? ks->n - j0 : ATTN_LANES;
            if (attn_block_hidden(ks->pos + j0, n, max_qpos)) continue;
            load_rows(ks, true, j0, n, hd, kb);
            load_rows(ks, false, j0, n, hdv, vb);
            for (int i = 0; i < nq; i++) {
                float s[ATTN_LANES], bmax = -INFINITY;
                block_scores(q, i, ks, j0, n, kb, s);
                for (int j = 0; j < n; j++) bmax = fmaxf(bmax, s[j]);
                if (bmax == -INFINITY) continue; /* nothing visible: no change */
                const float mn = fmaxf(m[i], bmax), corr = expf(m[i] - mn);
                float sum = 0.0f;
                for (int d = 0; d < hdv; d++) o[i][d] *= corr;
                for (int j = 0; j < n; j++) {
                    const float p = s[j] == -INFINITY ? 0.0f : expf(s[j] - mn);
                    sum += p;
                    for (int d = 0; d < hdv; d++) o[i][d] = fmaf(p, vb[j * hdv + d], o[i][d]);
                }
                l[i] = l[i] * corr + sum;
                m[i] = mn;
            }
        }
    }
    for (int i = 0; i < nq; i++) {
        const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
        for (int d = 0; d < hdv; d++) q->out[i][d] = o[i][d] * inv;
    }
    if (!q->obs) return;
    /* the weights themselves, now that each query's max and sum are known */
    float *obs = q->obs;
    for (int r = 0; r < n_runs; r++) {
        const attn_keys *ks = &runs[r];
        for (int j0 = 0; j0 < ks->n; j0 += ATTN_LANES) {
            const int n = ks->n - j0 < ATTN_LANES ? ks->n - j0 : ATTN_LANES;
            if (attn_block_hidden(ks->pos + j0, n, max_qpos)) continue;
            load_rows(ks, true, j0, n, hd, kb);
            for (int i = 0; i < nq; i++) {
                if (!((q->obs_lanes >> i) & 1) || l[i] <= 0.0f) continue;
                float s[ATTN_LANES];
                block_scores(q, i, ks, j0, n, kb, s);
                for (int j = 0; j < n; j++)
                    if (s[j] != -INFINITY) obs[j0 + j] += expf(s[j] - m[i]) / l[i];
            }
        }
        obs += ks->n;
    }
}

attn_fn attn_get(void) {
    const cpu_path p = kernels_path();
    attn_fn f = p == CPU_AVX512 ? attn_avx512() : p == CPU_AVX2 ? attn_avx2() : p == CPU_NEON ? attn_neon() : NULL;
    return f ? f : attn_portable;
}
