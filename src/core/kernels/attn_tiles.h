/*
 * attn_tiles — the attention tile algorithm of attn.h over a 16-lane vector
 * that a path defines, shared by the paths whose vectors are narrower than 16
 * lanes (attn_avx2.c: two halves of 8; attn_neon.c: four quarters of 4).
 * AVX-512 holds a tile in one register and masks natively: attn_avx512.c.
 *
 * Per block of 16 keys: the scores of every key for all queries (the
 * transposed queries times a broadcast key element), masked to -inf where the
 * key is invisible; the running max, the rescale factor, the exponentials and
 * the sums lane-wise; then each query's output row takes p(key, query) *
 * V[key]. Every lane's arithmetic is its own, so a query's output does not
 * depend on the tile it shares.
 *
 * The including file defines, before including this one:
 *   v16, vi16           16 floats / 16 int32 (a float vector is also a mask:
 *                       all ones where true)
 *   v_set1 v_load v_store v_add v_sub v_mul v_div v_max v_and v_fmadd
 *   v_blend(a, b, mask) (b where mask), v_gt, v_bits (a mask as 16 bits),
 *   v_exp, vi_load, lanes_of(bits), visible(q, tree_lanes, qpos, qlo, p)
 *   pv_row, widen_rows, widen_channels (the row loops of its width)
 *   ATTN_ALIGN          the alignment v_load and v_store need
 */
#ifndef OCTO_CORE_KERNELS_ATTN_TILES_H
#define OCTO_CORE_KERNELS_ATTN_TILES_H

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

/* scaled scores, soft-capped when asked: c * tanh(s / c), tanh(x) = 1 - 2 / (exp(2x) + 1) */
static inline __attribute__((always_inline)) v16 final_score(v16 s, float scale, float softcap) {
    s = v_mul(s, v_set1(scale));
    if (softcap <= 0.0f) return s;
    const v16 one = v_set1(1.0f), e = v_exp(v_mul(s, v_set1(2.0f / softcap))), d = v_add(e, one);
    return v_mul(v_set1(softcap), v_sub(one, v_div(v_set1(2.0f), d)));
}

typedef struct {
    ATTN_ALIGN float qt[ATTN_MAX_HEAD_DIM][ATTN_LANES];
    ATTN_ALIGN float o[ATTN_LANES][ATTN_MAX_HEAD_DIM];
    ATTN_ALIGN float pm[ATTN_LANES][ATTN_LANES];
    ATTN_ALIGN float corr[ATTN_LANES];
    float kb[ATTN_LANES * ATTN_MAX_HEAD_DIM], vb[ATTN_LANES * ATTN_MAX_HEAD_DIM];
    vi16 qpos, qlo;
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
    st->qpos = vi_load(qp);
    st->qlo = vi_load(ql);
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
    const v16 inv_l = v_and(lanes, v_div(v_set1(1.0f), st->l));
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
                ATTN_ALIGN float w[ATTN_LANES];
                v_store(w, p);
                float t = 0.0f;
                for (int i = 0; i < ATTN_LANES; i++) t += w[i];
                obs[j0 + j] += t;
            }
        }
        obs += ks->n;
    }
}

_Static_assert(sizeof(attn_state) <= ATTN_SCRATCH_BYTES, "attention scratch");

static void attn_tiles(const attn_queries *q, const attn_keys *runs, int n_runs, void *scratch) {
    if (q->tree && q->window) { /* depths counted per lane: the portable loops */
        attn_portable(q, runs, n_runs, scratch);
        return;
    }
    attn_state *const stp = scratch; /* 150 KiB at the largest head size: the caller's (attn.h) */
#define st (*stp)
    setup(&st, q);
    for (int r = 0; r < n_runs; r++)
        for (int j0 = 0; j0 < runs[r].n; j0 += ATTN_LANES) {
            const int n = runs[r].n - j0 < ATTN_LANES ? runs[r].n - j0 : ATTN_LANES;
            if (!attn_block_hidden(runs[r].pos + j0, n, st.max_qpos)) block(&st, q, &runs[r], j0, n);
        }
    ATTN_ALIGN float ls[ATTN_LANES];
    v_store(ls, st.l);
    for (int i = 0; i < q->n_q; i++) {
        const float inv = ls[i] > 0.0f ? 1.0f / ls[i] : 0.0f;
        for (int d = 0; d < q->hdv; d++) q->out[i][d] = st.o[i][d] * inv;
    }
    if (q->obs) observe(&st, q, runs, n_runs);
#undef st
}

#endif
