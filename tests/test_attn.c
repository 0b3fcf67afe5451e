/*
 * test_attn — the attention kernel (core/kernels/attn.h) against a double-precision
 * softmax(q.K) . V, on every implementation this machine runs:
 *
 *   - head sizes 8 .. 128 (and a value size unlike the key size), F32 and F16
 *     entries, keys split over several runs, positions with gaps and out of
 *     order (as after eviction), 1 .. 16 queries at different positions;
 *   - a query's output is bit-identical alone and in a tile of 16, and with
 *     future keys appended (what makes a verify batch equal plain decoding);
 *   - a query that sees no key gets zeros, and a wrong causal rule (seeing
 *     one future key) is caught by the comparison.
 */
#include <string.h>

#include "core/kernels/attn.h"
#include "core/quant.h"
#include "t.h"
#include "util.h"

/* the kernels' working memory (attn.h): the caller's, as the forward gives each thread its own */
static _Alignas(ATTN_SCRATCH_ALIGN) unsigned char g_scratch[ATTN_SCRATCH_BYTES];

static rng_t R = {0x51ed2701ULL};

typedef struct {
    int n;
    uint32_t type;
    int hd, hdv;
    int32_t *pos;
    float *kf, *vf;   /* F32 values (F16-rounded when type is F16) */
    void *k, *v;      /* storage in type, rows of row_dim elements, this head at offset off */
    int row_dim, off_k, off_v;
} keyset;

static void make_keys(keyset *ks, int n, uint32_t type, int hd, int hdv, int32_t first_pos) {
    ks->n = n, ks->type = type, ks->hd = hd, ks->hdv = hdv;
    ks->row_dim = 3 * (hd > hdv ? hd : hdv); /* three KV heads per row; ours is the middle one */
    ks->off_k = hd, ks->off_v = hdv;
    const size_t el = type == QT_F16 ? 2 : 4;
    ks->pos = malloc(sizeof(int32_t) * (size_t)n);
    ks->kf = malloc(sizeof(float) * (size_t)n * hd);
    ks->vf = malloc(sizeof(float) * (size_t)n * hdv);
    ks->k = calloc((size_t)n * ks->row_dim, el);
    ks->v = calloc((size_t)n * ks->row_dim, el);
    int32_t p = first_pos;
    for (int j = 0; j < n; j++) {
        p += 1 + (int32_t)(rng_next(&R) % 3); /* gaps, as after eviction */
        ks->pos[j] = p;
        for (int d = 0; d < hd + hdv; d++) {
            float x = (float)rng_gauss(&R) * (d < hd ? 1.5f : 1.0f);
            if (type == QT_F16) x = fp16_to_fp32(fp32_to_fp16(x));
            const int col = d < hd ? ks->off_k + d : ks->off_v + d - hd;
            void *base = d < hd ? ks->k : ks->v;
            if (d < hd) ks->kf[(size_t)j * hd + d] = x;
            else ks->vf[(size_t)j * hdv + d - hd] = x;
            if (type == QT_F16) ((fp16_t *)base)[(size_t)j * ks->row_dim + col] = fp32_to_fp16(x);
            else ((float *)base)[(size_t)j * ks->row_dim + col] = x;
        }
    }
    if (n > 3) { /* one out-of-order position */
        int32_t t = ks->pos[1];
        ks->pos[1] = ks->pos[2];
        ks->pos[2] = t;
    }
}

static attn_keys as_run(const keyset *ks, int from, int n) {
    const size_t el = ks->type == QT_F16 ? 2 : 4, row = el * (size_t)ks->row_dim;
    attn_keys r = {.k_type = ks->type, .v_type = ks->type, .n = n, .pos = ks->pos + from, .k_stride = row, .v_stride = row};
    r.k = (const uint8_t *)ks->k + (size_t)from * row + el * (size_t)ks->off_k;
    r.v = (const uint8_t *)ks->v + (size_t)from * row + el * (size_t)ks->off_v;
    return r;
}

static void free_keys(keyset *ks) {
    free(ks->pos), free(ks->kf), free(ks->vf), free(ks->k), free(ks->v);
}

/* double-precision reference; extra_future: also attend to keys up to qpos + 1 (a wrong rule);
 * seen: NULL, or which keys the query sees (instead of the causal rule) */
static void reference_seen(const keyset *ks, const float *q, int32_t qpos, float scale, int extra, const bool *seen,
                           double *out) {
    double m = -INFINITY, sum = 0.0;
    double *s = malloc(sizeof(double) * (size_t)ks->n);
    for (int j = 0; j < ks->n; j++) {
        s[j] = -INFINITY;
        if (seen ? !seen[j] : ks->pos[j] > qpos + extra) continue;
        double acc = 0.0;
        for (int d = 0; d < ks->hd; d++) acc += (double)q[d] * ks->kf[(size_t)j * ks->hd + d];
        s[j] = acc * scale;
        if (s[j] > m) m = s[j];
    }
    for (int d = 0; d < ks->hdv; d++) out[d] = 0.0;
    for (int j = 0; j < ks->n; j++) {
        if (s[j] == -INFINITY) continue;
        const double p = exp(s[j] - m);
        sum += p;
        for (int d = 0; d < ks->hdv; d++) out[d] += p * ks->vf[(size_t)j * ks->hdv + d];
    }
    for (int d = 0; d < ks->hdv; d++) out[d] = sum > 0 ? out[d] / sum : 0.0;
    free(s);
}

static void reference(const keyset *ks, const float *q, int32_t qpos, float scale, int extra, double *out) {
    reference_seen(ks, q, qpos, scale, extra, NULL, out);
}

/* A tree batch (lookahead decoding's): 40 cache entries, then 24 batch
 * entries whose ancestry is a random tree with a linear trunk of 5. Each
 * batch query is checked against the reference over the prefix and its
 * ancestors; a trunk query must equal, bit for bit, the causal query over
 * the keys up to its own (which is what keeps verification exact); and
 * ignoring the tree (seeing a sibling) is caught. */
static void tree_batch(attn_fn fn, const char *name) {
    enum { P = 40, B = 24, TRUNK = 5 };
    keyset ks;
    make_keys(&ks, P + B, QT_F16, 64, 64, 0);
    for (int j = 0; j < P + B; j++) ks.pos[j] = j;
    uint64_t anc[B];
    for (int t = 0; t < B; t++) {
        const int parent = t == 0 ? -1 : t < TRUNK ? t - 1 : (int)(rng_next(&R) % (uint64_t)t);
        anc[t] = (parent < 0 ? 0 : anc[parent]) | 1ull << t;
    }
    float qs[B][64], outs[B][64], one[64];
    double ref[64], err = 0.0, mag = 1e-30, bad = 0.0;
    attn_keys run = as_run(&ks, 0, P + B);
    for (int t0 = 0; t0 < B; t0 += 16) {
        attn_queries q = {.hd = 64, .hdv = 64, .scale = 0.125f, .n_q = B - t0 < 16 ? B - t0 : 16, .tree = 1,
                          .tree_pos0 = P};
        for (int i = 0; i < q.n_q; i++) {
            for (int d = 0; d < 64; d++) qs[t0 + i][d] = (float)rng_gauss(&R);
            q.q[i] = qs[t0 + i], q.out[i] = outs[t0 + i], q.qpos[i] = P + t0 + i, q.anc[i] = anc[t0 + i];
        }
        fn(&q, &run, 1, g_scratch);
    }
    for (int t = 0; t < B; t++) {
        bool seen[P + B];
        for (int j = 0; j < P + B; j++) seen[j] = j < P || (j - P <= t && ((anc[t] >> (j - P)) & 1));
        reference_seen(&ks, qs[t], P + t, 0.125f, 0, seen, ref);
        for (int d = 0; d < 64; d++) err = fmax(err, fabs(outs[t][d] - ref[d])), mag = fmax(mag, fabs(ref[d]));
        if (t >= TRUNK) { /* the causal rule would also show it the batch entries before it */
            reference(&ks, qs[t], P + t, 0.125f, 0, ref);
            for (int d = 0; d < 64; d++) bad = fmax(bad, fabs(outs[t][d] - ref[d]));
        }
    }
    T_CHECKF(err / mag < 2e-6, "%s: tree batch relative error %.3g", name, err / mag);
    T_CHECKF(bad / mag > 1e-3, "%s: a tree query seeing its siblings went unnoticed (%.3g)", name, bad / mag);
    int trunk_diff = 0;
    for (int t = 0; t < TRUNK; t++) {
        attn_queries q = {.hd = 64, .hdv = 64, .scale = 0.125f, .n_q = 1, .q = {qs[t]}, .qpos = {P + t}, .out = {one}};
        attn_keys part = as_run(&ks, 0, P + t + 1);
        fn(&q, &part, 1, g_scratch);
        trunk_diff += memcmp(one, outs[t], sizeof one) != 0;
    }
    T_CHECKF(trunk_diff == 0, "%s: %d of %d trunk queries differ from plain causal attention", name, trunk_diff, TRUNK);
    /* a branch query against the causal query over the prefix and its
     * ancestors laid end to end, as plain decoding would have them */
    int branch_diff = 0, same_diff = 0, same = 0;
    const size_t row = (ks.type == QT_F16 ? 2 : 4) * (size_t)ks.row_dim;
    for (int t = TRUNK; t < B; t++) {
        bool tiles_agree = true; /* each of its keys in the tile plain decoding would put it in */
        for (int j = 0, k = 0; j <= t; j++)
            if ((anc[t] >> j) & 1) tiles_agree &= (P + j) / ATTN_LANES == (P + k) / ATTN_LANES, k++;
        keyset line;
        make_keys(&line, P + B, QT_F16, 64, 64, 0);
        int n = 0;
        for (int j = 0; j < P + B; j++) {
            if (j >= P && !((anc[t] >> (j - P)) & 1)) continue;
            memcpy((uint8_t *)line.k + (size_t)n * row, (const uint8_t *)ks.k + (size_t)j * row, row);
            memcpy((uint8_t *)line.v + (size_t)n * row, (const uint8_t *)ks.v + (size_t)j * row, row);
            line.pos[n] = n;
            n++;
        }
        attn_queries q = {.hd = 64, .hdv = 64, .scale = 0.125f, .n_q = 1, .q = {qs[t]}, .qpos = {n - 1}, .out = {one}};
        attn_keys part = as_run(&line, 0, n);
        fn(&q, &part, 1, g_scratch);
        const int differ = memcmp(one, outs[t], sizeof one) != 0;
        branch_diff += differ;
        same += tiles_agree, same_diff += tiles_agree && differ;
        free_keys(&line);
    }
    printf("%s: branch queries against causal attention over their line laid end to end: %d of %d with their keys in "
           "the line's tiles differ, %d of %d others\n", name, same_diff, same, branch_diff - same_diff, B - TRUNK - same);
    T_CHECKF(same > 0 && same_diff == 0, "%s: %d of %d branch queries whose keys fall in the line's tiles differ", name,
             same_diff, same);
    free_keys(&ks);
}

int main(void) {
    attn_fn impl[4] = {attn_portable}, simd[3] = {attn_avx512(), attn_avx2(), attn_neon()};
    const char *names[4] = {"portable"}, *simd_names[3] = {"avx512", "avx2", "neon"};
    int n_impl = 1;
    for (int k = 0; k < 3; k++)
        if (simd[k]) impl[n_impl] = simd[k], names[n_impl++] = simd_names[k];
    printf("kernels compared with the float64 reference:");
    for (int f = 0; f < n_impl; f++) printf(" %s", names[f]);
    printf("\n");
    const struct {
        int hd, hdv, n;
        uint32_t type;
    } cases[] = {{8, 8, 37, QT_F32}, {64, 64, 200, QT_F32}, {64, 64, 200, QT_F16}, {80, 80, 50, QT_F16},
                 {128, 128, 90, QT_F32}, {64, 48, 33, QT_F32}, {16, 16, 1, QT_F16}};
    double worst[4] = {0, 0, 0, 0};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const int hd = cases[c].hd, hdv = cases[c].hdv, n = cases[c].n;
        keyset ks;
        make_keys(&ks, n, cases[c].type, hd, hdv, 0);
        /* three runs: [0, n/3), [n/3, n/2), [n/2, n) */
        attn_keys runs[3] = {as_run(&ks, 0, n / 3), as_run(&ks, n / 3, n / 2 - n / 3), as_run(&ks, n / 2, n - n / 2)};
        float qs[16][128], outs[16][128], one[128];
        double ref[128];
        attn_queries q = {.hd = hd, .hdv = hdv, .scale = 1.0f / sqrtf((float)hd), .n_q = 16};
        for (int i = 0; i < 16; i++) {
            for (int d = 0; d < hd; d++) qs[i][d] = (float)rng_gauss(&R);
            q.q[i] = qs[i];
            q.out[i] = outs[i];
            /* positions from before the first key to past the last */
            q.qpos[i] = i == 0 ? 0 : ks.pos[(n - 1) * i / 15] + (i % 3 == 0 ? 0 : 1);
        }
        for (int f = 0; f < n_impl; f++) {
            impl[f](&q, runs, 3, g_scratch);
            double err = 0.0, mag = 1e-30;
            for (int i = 0; i < 16; i++) {
                reference(&ks, qs[i], q.qpos[i], q.scale, 0, ref);
                for (int d = 0; d < hdv; d++) {
                    err = fmax(err, fabs(outs[i][d] - ref[d]));
                    mag = fmax(mag, fabs(ref[d]));
                }
            }
            const double rel = err / mag;
            worst[f] = fmax(worst[f], rel);
            T_CHECKF(rel < 2e-6, "%s hd %d hdv %d n %d type %u: relative error %.3g", names[f], hd, hdv, n,
                     cases[c].type, rel);
            /* query 0 sees nothing (position 0, first key at >= 1): zeros */
            bool zeros = true;
            for (int d = 0; d < hdv; d++) zeros &= outs[0][d] == 0.0f;
            T_CHECKF(zeros, "%s: a query that sees no key has a non-zero output", names[f]);
            /* alone == in the tile, and future keys change nothing, bit for bit */
            for (int i = 1; i < 16; i += 4) {
                attn_queries q1 = q;
                q1.n_q = 1;
                q1.q[0] = qs[i], q1.qpos[0] = q.qpos[i], q1.out[0] = one;
                impl[f](&q1, runs, 3, g_scratch);
                T_CHECKF(!memcmp(one, outs[i], sizeof(float) * (size_t)hdv), "%s: query %d alone != in a tile",
                         names[f], i);
            }
            /* the wrong causal rule is noticed */
            if (n > 30) {
                double bad = 0.0;
                for (int i = 1; i < 15; i++) {
                    reference(&ks, qs[i], q.qpos[i], q.scale, 1, ref);
                    for (int d = 0; d < hdv; d++) bad = fmax(bad, fabs(outs[i][d] - ref[d]));
                }
                T_CHECKF(bad / mag > 1e-3, "%s: seeing one future key went unnoticed (%.3g)", names[f], bad / mag);
            }
        }
        free_keys(&ks);
    }
    /* decode's view (the keys so far) and a batch's (with later keys) agree bit for bit */
    for (int f = 0; f < n_impl; f++) {
        keyset ks;
        make_keys(&ks, 100, QT_F16, 64, 64, 0);
        for (int i = 0; i < 100; i++) ks.pos[i] = i; /* in order, no gaps */
        float qv[64], a[64], b[64];
        for (int d = 0; d < 64; d++) qv[d] = (float)rng_gauss(&R);
        int mismatches = 0;
        for (int upto = 1; upto <= 100; upto += 7) {
            attn_queries q = {.hd = 64, .hdv = 64, .scale = 0.125f, .n_q = 1, .q = {qv}, .qpos = {upto - 1}};
            attn_keys full = as_run(&ks, 0, 100), part = as_run(&ks, 0, upto);
            q.out[0] = a;
            impl[f](&q, &full, 1, g_scratch);
            q.out[0] = b;
            impl[f](&q, &part, 1, g_scratch);
            mismatches += memcmp(a, b, sizeof a) != 0;
        }
        T_CHECKF(mismatches == 0, "%s: %d of 15 queries change when later keys are in the view", names[f], mismatches);
        free_keys(&ks);
    }
    for (int f = 0; f < n_impl; f++) tree_batch(impl[f], names[f]);
    for (int f = 0; f < n_impl; f++) printf("%-9s worst relative error vs double: %.3g\n", names[f], worst[f]);
    T_DONE();
}
