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
#include <string.h>

#include "kernels.h"
#include "quant.h"

static void load_rows(uint32_t type, const void *base, size_t stride, int n, int dim, float *dst) {
    for (int j = 0; j < n; j++) {
        const uint8_t *row = (const uint8_t *)base + (size_t)j * stride;
        if (type == QT_F16)
            for (int d = 0; d < dim; d++) dst[j * dim + d] = fp16_to_fp32(((const fp16_t *)row)[d]);
        else memcpy(dst + (size_t)j * dim, row, sizeof(float) * (size_t)dim);
    }
}

void attn_portable(const attn_queries *q, const attn_keys *runs, int n_runs) {
    const int hd = q->hd, hdv = q->hdv, nq = q->n_q;
    float kb[ATTN_LANES * ATTN_MAX_HEAD_DIM], vb[ATTN_LANES * ATTN_MAX_HEAD_DIM];
    float o[ATTN_LANES][ATTN_MAX_HEAD_DIM], m[ATTN_LANES], l[ATTN_LANES];
    for (int i = 0; i < nq; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
        memset(o[i], 0, sizeof(float) * (size_t)hdv);
    }
    for (int r = 0; r < n_runs; r++) {
        const attn_keys *ks = &runs[r];
        for (int j0 = 0; j0 < ks->n; j0 += ATTN_LANES) {
            const int n = ks->n - j0 < ATTN_LANES ? ks->n - j0 : ATTN_LANES;
            load_rows(ks->type, (const uint8_t *)ks->k + (size_t)j0 * ks->k_stride, ks->k_stride, n, hd, kb);
            load_rows(ks->type, (const uint8_t *)ks->v + (size_t)j0 * ks->v_stride, ks->v_stride, n, hdv, vb);
            for (int i = 0; i < nq; i++) {
                float s[ATTN_LANES], bmax = -INFINITY;
                for (int j = 0; j < n; j++) {
                    if (ks->pos[j0 + j] > q->qpos[i]) {
                        s[j] = -INFINITY;
                        continue;
                    }
                    float acc = 0.0f;
                    for (int d = 0; d < hd; d++) acc = fmaf(q->q[i][d], kb[j * hd + d], acc);
                    s[j] = acc * q->scale;
                    bmax = fmaxf(bmax, s[j]);
                }
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
}

attn_fn attn_get(void) {
    attn_fn f = kernels_path() == CPU_AVX512 ? attn_avx512() : NULL;
    return f ? f : attn_portable;
}
