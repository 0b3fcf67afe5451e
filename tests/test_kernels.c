/*
 * test_kernels — the matrix-vector kernels of every CPU path this machine runs.
 *
 * Three layers of checks, on random rows of many lengths (1..16 blocks and
 * 4096 values), with outliers, all-zero blocks, blocks too small for an fp16
 * scale, and exact rounding ties:
 *
 *   1. the activation quantizers of the scalar path keep their error bound
 *      (Q8_0/Q8_1: |x - q*fp16(d)| <= d/2 + 127*|fp16(d) - d|; Q8_K: |d|/2)
 *      and Q8_K equals quant.c's reference quantizer byte for byte;
 *   2. each scalar integer dot equals sum_i dequant(w)_i * dequant(a)_i
 *      (quant.c's dequantizers, summed in double) to 1e-5 of sum_i |w_i a_i|:
 *      this ties the fast reference to the format specification;
 *   3. every other path quantizes activations to the same bytes as scalar and
 *      its dots agree with scalar to 1e-5 of sum_i |w_i a_i|;
 *   4. where a path has dot4, its 4 outputs equal that path's dot on each of
 *      the 4 activation rows to 1e-6 of sum_i |w_i a_i| (rows contiguous and
 *      at a larger stride).
 *
 * Paths with an int8-dot variant (AVX-512 VNNI, ARM dotprod) are also tested
 * with the variant switched off, by filling a table directly. The test fails
 * if the active path (kernels_path()) was not among those tested.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "core/kernels/kernels.h"
#include "core/quant.h"
#include "t.h"

#define REL_TOL 1e-5

/* ---------------------------------------------------------------------------
 * Random data
 * ------------------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float rng_unit(uint64_t *s) { return (float)(rng_next(s) >> 40) * 0x1p-24f; } /* [0,1) */

static float rng_normal(uint64_t *s) {
    return rng_unit(s) + rng_unit(s) + rng_unit(s) + rng_unit(s) - 2.0f;
}

enum { X_PLAIN, X_OUTLIERS, X_ZERO_BLOCKS, X_TINY_BLOCKS, X_TIES, X_INTS, X_MODES };

/* n activations in mode `mode`; `blk` is the activation block size. */
static void make_x(float *x, int64_t n, int mode, int blk, uint64_t *s) {
    const float scale = 0.1f + 4.0f * rng_unit(s);
    for (int64_t i = 0; i < n; i++) x[i] = scale * rng_normal(s);
    if (mode == X_OUTLIERS)
        for (int64_t i = 0; i < n; i += 1 + (int64_t)(rng_next(s) % 37)) x[i] *= 60.0f;
    if (mode == X_ZERO_BLOCKS || mode == X_TINY_BLOCKS)
        for (int64_t b = 0; b < n / blk; b++)
            if (b % 2 == 0 || rng_next(s) % 3 == 0)
                for (int j = 0; j < blk; j++)
                    /* tiny: an fp16 scale of zero (1e-7) or subnormal (1e-3) */
                    x[b * blk + j] = mode == X_ZERO_BLOCKS ? 0.0f : x[b * blk + j] * (b % 4 ? 1e-3f : 1e-7f);
    /* amax 127 (Q8_0: id = 1) or m = -127 (Q8_K: iscale = 1), so q = round(x):
     * X_TIES puts every other value on a tie, X_INTS makes q = x, small */
    if (mode == X_TIES || mode == X_INTS)
        for (int64_t i = 0; i < n; i++)
            x[i] = i % blk == 0       ? (blk == QK_K ? -127.0f : 127.0f)
                   : mode == X_INTS ? (float)((int)(rng_next(s) % 7) - 3)
                                    : (float)((int)(rng_next(s) % 200) - 100) + 0.5f;
}

static fp16_t rand_scale(uint64_t *s, float mag) {
    return fp32_to_fp16(mag * (rng_unit(s) * 2.0f - 0.5f));
}

/* Random bytes, with the fp16 scales made finite (or all 1.0 with unit, so
 * that every product is an integer). Every other bit pattern is a valid
 * block, so this reaches scale values the quantizer rarely produces. */
static void make_w_random(uint32_t type, void *w, int64_t n, uint64_t *s, bool unit) {
    const size_t bytes = quant_row_bytes(type, n);
    uint8_t *p = w;
    for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)rng_next(s);
    const int64_t nb = n / quant_traits_of(type)->block_size;
    if (unit) {
        /* the scales (and Q4_1/Q5_1's m, K-quants' dmin) are the leading fp16s,
         * except in Q2_K, Q3_K and Q6_K, where d (and dmin) end the block */
        const fp16_t one = fp32_to_fp16(1.0f);
        const size_t ts = quant_traits_of(type)->type_size;
        for (int64_t i = 0; i < nb; i++) {
            uint8_t *b = p + i * ts;
            if (type == QT_F32 || type == QT_F16 || type == QT_BF16) break;
            if (type == QT_Q2_K) memcpy(b + ts - 4, (fp16_t[2]){one, one}, 4);
            else if (type == QT_Q3_K || type == QT_Q6_K) memcpy(b + ts - 2, &one, 2);
            else if (type == QT_Q4_0 || type == QT_Q5_0 || type == QT_Q8_0) memcpy(b, &one, 2);
            else memcpy(b, (fp16_t[2]){one, one}, 4);
        }
        if (type == QT_F32 || type == QT_F16 || type == QT_BF16)
            for (int64_t i = 0; i < n; i++) {
                const float v = (float)((int)(rng_next(s) % 9) - 4);
                if (type == QT_F32) memcpy(p + 4 * i, &v, 4);
                else if (type == QT_F16) ((fp16_t *)w)[i] = fp32_to_fp16(v);
                else ((bf16_t *)w)[i] = fp32_to_bf16(v);
            }
        return;
    }
    for (int64_t i = 0; i < nb; i++) {
        switch (type) {
        case QT_Q4_0: ((block_q4_0 *)w)[i].d = rand_scale(s, 0.05f); break;
        case QT_Q5_0: ((block_q5_0 *)w)[i].d = rand_scale(s, 0.05f); break;
        case QT_Q8_0: ((block_q8_0 *)w)[i].d = rand_scale(s, 0.01f); break;
        case QT_Q4_1:
            ((block_q4_1 *)w)[i].d = rand_scale(s, 0.05f);
            ((block_q4_1 *)w)[i].m = rand_scale(s, 0.3f);
            break;
        case QT_Q5_1:
            ((block_q5_1 *)w)[i].d = rand_scale(s, 0.05f);
            ((block_q5_1 *)w)[i].m = rand_scale(s, 0.3f);
            break;
        case QT_Q2_K:
            ((block_q2_K *)w)[i].d = rand_scale(s, 0.05f);
            ((block_q2_K *)w)[i].dmin = rand_scale(s, 0.05f);
            break;
        case QT_Q3_K: ((block_q3_K *)w)[i].d = rand_scale(s, 0.05f); break;
        case QT_Q4_K:
            ((block_q4_K *)w)[i].d = rand_scale(s, 0.01f);
            ((block_q4_K *)w)[i].dmin = rand_scale(s, 0.01f);
            break;
        case QT_Q5_K:
            ((block_q5_K *)w)[i].d = rand_scale(s, 0.01f);
            ((block_q5_K *)w)[i].dmin = rand_scale(s, 0.01f);
            break;
        case QT_Q6_K: ((block_q6_K *)w)[i].d = rand_scale(s, 0.002f); break;
        default: break;
        }
    }
}

/* Weights quantized from random floats (with an outlier now and then). */
static void make_w_quantized(uint32_t type, void *w, int64_t n, uint64_t *s, float *tmp) {
    for (int64_t i = 0; i < n; i++) {
        tmp[i] = 0.05f * rng_normal(s);
        if (rng_next(s) % 97 == 0) tmp[i] *= 20.0f;
    }
    if (rng_next(s) % 4 == 0) /* a zero block */
        memset(tmp, 0, (size_t)quant_traits_of(type)->block_size * sizeof(float));
    quant_quantize_row(type, tmp, w, n);
}

/* ---------------------------------------------------------------------------
 * Activation formats
 * ------------------------------------------------------------------------- */

/* Dequantize an activation row (quant.c has no Q8_1 dequantizer). */
static void act_dequantize(uint32_t act_type, const void *a, float *y, int64_t n) {
    if (act_type == QT_F32) {
        memcpy(y, a, (size_t)n * sizeof(float));
    } else if (act_type == QT_Q8_1) {
        const block_q8_1 *b = a;
        for (int64_t i = 0; i < n / QK8_0; i++)
            for (int j = 0; j < QK8_0; j++) y[i * QK8_0 + j] = fp16_to_fp32(b[i].d) * b[i].qs[j];
    } else {
        quant_dequantize_row(act_type, a, y, n);
    }
}

/* Q4_1/Q5_1 x Q8_1 take the min term as m * s with s = fp16(d * sum(q)), as
 * ggml does, instead of m * sum(fp16(d) * q): the difference, per row. */
static double q8_1_min_term_error(uint32_t type, const void *w, const void *a, int64_t n) {
    const block_q8_1 *b = a;
    double diff = 0.0;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const fp16_t m16 = type == QT_Q4_1 ? ((const block_q4_1 *)w)[i].m : ((const block_q5_1 *)w)[i].m;
        int sumq = 0;
        for (int j = 0; j < QK8_0; j++) sumq += b[i].qs[j];
        const double m = fp16_to_fp32(m16);
        diff += m * fp16_to_fp32(b[i].s) - m * ((double)fp16_to_fp32(b[i].d) * sumq);
    }
    return diff;
}

/* Layer 1: error bounds of the scalar activation quantizers. (Written as
 * counts of bad values rather than max-reductions: gcc 12's aarch64
 * vectorizer crashes on the latter here.) */
static void check_act_bounds(uint32_t act_type, const float *x, const void *a, int64_t n) {
    if (act_type == QT_Q8_0 || act_type == QT_Q8_1) {
        for (int64_t i = 0; i < n / QK8_0; i++) {
            const float *xb = x + i * QK8_0;
            const int8_t *qs = act_type == QT_Q8_0 ? ((const block_q8_0 *)a)[i].qs
                                                   : ((const block_q8_1 *)a)[i].qs;
            const fp16_t d16 = act_type == QT_Q8_0 ? ((const block_q8_0 *)a)[i].d
                                                   : ((const block_q8_1 *)a)[i].d;
            float amax = 0.0f;
            for (int j = 0; j < QK8_0; j++)
                if (fabsf(xb[j]) > amax) amax = fabsf(xb[j]);
            const double d = amax / 127.0f, ds = fp16_to_fp32(d16);
            T_EQ_INT(d16, fp32_to_fp16((float)d));
            const double bound = ds != 0.0 ? 0.5 * d + 127.0 * fabs(ds - d) + 1e-6 * d : amax;
            int bad = 0, sumq = 0, nonzero = 0;
            for (int j = 0; j < QK8_0; j++) {
                bad += fabs(xb[j] - ds * qs[j]) > bound || qs[j] < -127;
                sumq += qs[j];
                nonzero += qs[j] != 0;
            }
            T_CHECKF(bad == 0, "q8 block %lld: %d values off by more than %g", (long long)i, bad, bound);
            if (ds == 0.0) T_EQ_INT(nonzero, 0);
            if (act_type == QT_Q8_1)
                T_EQ_INT(((const block_q8_1 *)a)[i].s, fp32_to_fp16((float)d * (float)sumq));
        }
    } else if (act_type == QT_Q8_K) {
        const block_q8_K *b = a;
        for (int64_t i = 0; i < n / QK_K; i++) {
            const float *xb = x + i * QK_K;
            const double d = fabs(b[i].d);
            float amax = 0.0f;
            for (int j = 0; j < QK_K; j++)
                if (fabsf(xb[j]) > amax) amax = fabsf(xb[j]);
            const double bound = d != 0.0 ? d * (0.5 + 1e-5) : amax;
            int bad = 0;
            for (int j = 0; j < QK_K; j++) bad += fabs(xb[j] - (double)b[i].d * b[i].qs[j]) > bound;
            T_CHECKF(bad == 0, "q8_K block %lld: %d values off by more than %g", (long long)i, bad, bound);
            for (int g = 0; g < QK_K / 16; g++) {
                int sum = 0;
                for (int l = 0; l < 16; l++) sum += b[i].qs[16 * g + l];
                T_EQ_INT(b[i].bsums[g], sum);
            }
        }
        /* the activation quantizer is ggml's, which is also quant.c's Q8_K */
        void *ref = malloc(quant_row_bytes(QT_Q8_K, n));
        quant_quantize_row(QT_Q8_K, x, ref, n);
        T_CHECK(memcmp(ref, a, quant_row_bytes(QT_Q8_K, n)) == 0);
        free(ref);
    }
}

/* ---------------------------------------------------------------------------
 * Paths under test
 * ------------------------------------------------------------------------- */

typedef struct {
    char name[32];
    cpu_path path;
    kernel_entry table[QT_COUNT]; /* missing entries copied from scalar */
    int n_native;                 /* entries not borrowed from scalar */
} tested_path;

static void finish_table(tested_path *tp) {
    tp->n_native = 0;
    for (int t = 0; t < QT_COUNT; t++) {
        const kernel_entry *sc = kernel_get_path(CPU_SCALAR, (uint32_t)t);
        if (!tp->table[t].dot && sc) tp->table[t] = *sc;
        else if (tp->table[t].dot && sc && tp->table[t].dot != sc->dot) tp->n_native++;
    }
}

static int collect_paths(tested_path *out) {
    int n = 0;
    for (int p = CPU_SCALAR; p <= CPU_NEON; p++) {
        if (!cpu_path_compiled((cpu_path)p) || !cpu_path_supported((cpu_path)p)) continue;
        tested_path *tp = &out[n++];
        memset(tp, 0, sizeof *tp);
        snprintf(tp->name, sizeof tp->name, "%s", cpu_path_name((cpu_path)p));
        tp->path = (cpu_path)p;
        for (int t = 0; t < QT_COUNT; t++) {
            const kernel_entry *e = kernel_get_path((cpu_path)p, (uint32_t)t);
            if (e) tp->table[t] = *e;
        }
        finish_table(tp);
        /* the same path with its int8-dot variant off, when the CPU has it on */
        if (cpu_has_int8_dot() && (p == CPU_AVX512 || p == CPU_NEON)) {
            tested_path *tv = &out[n++];
            memset(tv, 0, sizeof *tv);
            snprintf(tv->name, sizeof tv->name, "%s-noint8dot", cpu_path_name((cpu_path)p));
            tv->path = (cpu_path)p;
#if defined(__x86_64__)
            if (p == CPU_AVX512) kernels_fill_avx512(tv->table, QT_COUNT, false, true); /* prefetch: results do not depend on it */
#endif
#if defined(__aarch64__)
            if (p == CPU_NEON) kernels_fill_neon(tv->table, QT_COUNT, false);
#endif
            finish_table(tv);
        }
    }
    return n;
}

/* ---------------------------------------------------------------------------
 * One weight type on one row length
 * ------------------------------------------------------------------------- */

static double worst_rel[QT_COUNT]; /* largest |path - scalar| / sum|w a| seen, any path */
static double worst_rel4[QT_COUNT]; /* largest |dot4 - dot| / sum|w a| seen, any path */
static long n_dot4_checks[QT_COUNT], n_dot4_exact[QT_COUNT];

#define DOT4_REL_TOL 1e-6

/* A tile's outputs (tile_rows distinct weight rows at an odd stride: w, w2, then w turned by a block or more,
 * x 1..tokens of the 4 activation rows
 * in buf): dot's to the bit (exact) or within DOT4_REL_TOL of it, and never depending on the call's width. */
static long n_tile_checks[QT_COUNT], n_tile_exact[QT_COUNT], n_prefill_checks[QT_COUNT];

static void check_tile(const kernel_tile *tl, bool exact, const kernel_entry *e, uint32_t type, const void *w,
                       const void *w2, const uint8_t *buf, size_t stride, int64_t n, const char *path) {
    if (!tl->fn) return;
    const size_t wb = quant_row_bytes(type, n), wst = wb + 6;
    const int R = tl->rows;
    uint8_t *wbuf = malloc(wst * (size_t)(R - 1) + wb);
    memset(wbuf, 0x5A, wst * (size_t)(R - 1) + wb);
    const size_t blk = quant_row_bytes(type, quant_traits_of(type)->block_size), nblk = wb / blk;
    for (int q = 0; q < R; q++) {
        const size_t turn = q < 2 ? 0 : (size_t)(q - 1) % nblk * blk; /* row q >= 2: w, starting q - 1 blocks in */
        const uint8_t *src = q == 1 ? w2 : w;
        memcpy(wbuf + q * wst, src + turn, wb - turn);
        memcpy(wbuf + q * wst + wb - turn, src, turn);
    }
    /* mag[q][r]: sum |w_q a_r| of weight row q and activation row r, the tolerance's scale */
    double mag[KERNEL_TILE_MAX_ROWS][4];
    float *wd = malloc((size_t)n * sizeof(float)), *ad = malloc((size_t)n * sizeof(float));
    for (int q = 0; q < R; q++) {
        quant_dequantize_row(type, wbuf + q * wst, wd, n);
        for (int r = 0; r < 4; r++) {
            act_dequantize(e->act_type, buf + r * stride, ad, n);
            mag[q][r] = 0.0;
            for (int64_t i = 0; i < n; i++) mag[q][r] += fabs((double)wd[i] * ad[i]);
        }
    }
    free(wd);
    free(ad);
    float first[KERNEL_TILE_MAX_ROWS][KERNEL_TILE_MAX_TOKENS];
    for (int na = 1; na <= tl->tokens; na++) {
        float o[KERNEL_TILE_MAX_ROWS * KERNEL_TILE_MAX_TOKENS];
        tl->fn(wbuf, wst, buf, stride, n, na, o);
        for (int wr = 0; wr < R; wr++)
            for (int r = 0; r < na; r++) {
                const float got = o[wr * na + r], d = e->dot(wbuf + wr * wst, buf + r * stride, n);
                if (r == na - 1) first[wr][r] = got;
                if (exact) {
                    n_tile_checks[type]++;
                    n_tile_exact[type] += got == d;
                    T_CHECKF(got == d, "%s %s n=%lld stride %zu na %d weight row %d row %d: tile %.9g vs dot %.9g",
                             path, quant_traits_of(type)->name, (long long)n, stride, na, wr, r, got, d);
                } else {
                    n_prefill_checks[type]++;
                    T_CHECKF(fabs((double)got - d) <= DOT4_REL_TOL * mag[wr][r] + 1e-30 && got == first[wr][r],
                             "%s %s n=%lld stride %zu na %d weight row %d row %d: prefill tile %.9g vs dot %.9g, "
                             "vs itself in a call of %d: %.9g",
                             path, quant_traits_of(type)->name, (long long)n, stride, na, wr, r, got, d, r + 1,
                             first[wr][r]);
                }
            }
    }
    free(wbuf);
}

/* Layer 4: dot4 on 4 activation rows (a0 and three more of the same mode)
 * equals dot on each row, on every path that has one, with the rows
 * contiguous and at a larger stride (the buffer ends right after the last
 * row, so ASan sees any read past it). */

static void check_dot4(uint32_t type, const void *w, const void *w2, const float *wd, const void *a0, int64_t n,
                       int mode, const tested_path *paths, int n_paths, uint64_t *s) {
    const kernel_entry *sc = &paths[0].table[type];
    const uint32_t at = sc->act_type;
    const int ablk = at == QT_Q8_K ? QK_K : at == QT_F32 ? 1 : QK8_0;
    const size_t abytes = kernel_act_row_bytes(at, n);
    float *x = malloc((size_t)n * sizeof(float)), *ad = malloc((size_t)n * sizeof(float));
    void *rows = malloc(4 * abytes);
    double mag[4];
    memcpy(rows, a0, abytes);
    for (int r = 1; r < 4; r++) {
        make_x(x, n, mode, ablk == 1 ? 32 : ablk, s);
        void *ar = (uint8_t *)rows + r * abytes;
        if (at == QT_F32) memcpy(ar, x, abytes);
        else sc->quantize(x, ar, n);
    }
    for (int r = 0; r < 4; r++) {
        act_dequantize(at, (const uint8_t *)rows + r * abytes, ad, n);
        mag[r] = 0.0;
        for (int64_t i = 0; i < n; i++) mag[r] += fabs((double)wd[i] * ad[i]);
    }
    /* 36: keeps the 4-byte alignment of Q8_K's d and of F32, breaks any larger one */
    const size_t strides[2] = {abytes, abytes + 36};
    for (int k = 0; k < 2; k++) {
        const size_t stride = strides[k];
        uint8_t *buf = malloc(3 * stride + abytes);
        memset(buf, 0xA5, 3 * stride + abytes);
        for (int r = 0; r < 4; r++) memcpy(buf + r * stride, (const uint8_t *)rows + r * abytes, abytes);
        for (int p = 0; p < n_paths; p++) {
            const kernel_entry *e = &paths[p].table[type];
            check_tile(&e->tile, true, e, type, w, w2, buf, stride, n, paths[p].name);
            check_tile(&e->prefill, false, e, type, w, w2, buf, stride, n, paths[p].name);
            if (!e->dot4) continue;
            float out[4] = {-1.0f, -1.0f, -1.0f, -1.0f};
            e->dot4(w, buf, stride, n, out);
            for (int r = 0; r < 4; r++) {
                const float d = e->dot(w, buf + r * stride, n);
                const double diff = fabs((double)out[r] - d);
                const double rel = diff / (mag[r] > 0.0 ? mag[r] : 1.0);
                if (rel > worst_rel4[type]) worst_rel4[type] = rel;
                n_dot4_checks[type]++;
                n_dot4_exact[type] += out[r] == d;
                T_CHECKF(diff <= DOT4_REL_TOL * mag[r] + 1e-30,
                         "%s %s n=%lld mode %d stride %zu row %d: dot4 %.9g vs dot %.9g (sum|wa| %.3g)",
                         paths[p].name, quant_traits_of(type)->name, (long long)n, mode, stride, r,
                         out[r], d, mag[r]);
            }
        }
        free(buf);
    }
    free(x);
    free(ad);
    free(rows);
}

static void check_type(uint32_t type, int64_t n, const tested_path *paths, int n_paths,
                       uint64_t *s) {
    const kernel_entry *sc = &paths[0].table[type];
    const uint32_t at = sc->act_type;
    const int ablk = at == QT_Q8_K ? QK_K : at == QT_F32 ? 1 : QK8_0;
    const size_t wbytes = quant_row_bytes(type, n), abytes = kernel_act_row_bytes(at, n);
    float *x = malloc((size_t)n * sizeof(float)), *wd = malloc((size_t)n * sizeof(float));
    float *ad = malloc((size_t)n * sizeof(float));
    void *ws[3] = {malloc(wbytes), malloc(wbytes), malloc(wbytes)}, *a = malloc(abytes), *a2 = malloc(abytes);
    /* quantized and random weight rows, used with every kind of activation
     * row; and one with unit scales for the integer activations */
    make_w_quantized(type, ws[0], n, s, wd);
    if (type == QT_F32 || type == QT_F16 || type == QT_BF16) make_w_quantized(type, ws[1], n, s, wd);
    else make_w_random(type, ws[1], n, s, false);
    make_w_random(type, ws[2], n, s, true);

    for (int mode = 0; mode < X_MODES; mode++) {
        if (mode == X_TIES && at == QT_F32) continue;
        for (int wsrc = 0; wsrc < 3; wsrc++) {
            if ((mode == X_INTS) != (wsrc == 2)) continue;
            const void *w = ws[wsrc];
            /* every product an integer and every partial sum below 2^24: the
             * float sums are exact, so all paths must agree to the bit */
            const bool exact = mode == X_INTS;
            make_x(x, n, mode, ablk == 1 ? 32 : ablk, s);

            /* layer 1 */
            if (at == QT_F32) memcpy(a, x, abytes);
            else sc->quantize(x, a, n);
            check_act_bounds(at, x, a, n);

            /* layer 2: scalar dot vs the dequantized product */
            quant_dequantize_row(type, w, wd, n);
            act_dequantize(at, a, ad, n);
            double ref = 0.0, mag = 0.0;
            for (int64_t i = 0; i < n; i++) {
                ref += (double)wd[i] * ad[i];
                mag += fabs((double)wd[i] * ad[i]);
            }
            if (at == QT_Q8_1) ref += q8_1_min_term_error(type, w, a, n);
            const double got = sc->dot(w, a, n);
            if (exact) T_CHECKF(got == ref && mag < 0x1p24, "%s n=%lld: scalar %.9g ref %.9g (sum|wa| %.3g)",
                                quant_traits_of(type)->name, (long long)n, got, ref, mag);
            T_CHECKF(fabs(got - ref) <= REL_TOL * mag + 1e-30,
                     "%s n=%lld mode %d src %d: scalar %.9g ref %.9g (sum|wa| %.3g)",
                     quant_traits_of(type)->name, (long long)n, mode, wsrc, got, ref, mag);

            /* layer 3: every other path vs scalar */
            for (int p = 1; p < n_paths; p++) {
                const kernel_entry *e = &paths[p].table[type];
                T_EQ_INT(e->act_type, at);
                if (at != QT_F32) {
                    memset(a2, 0xA5, abytes);
                    e->quantize(x, a2, n);
                    T_CHECKF(memcmp(a, a2, abytes) == 0, "%s %s n=%lld mode %d: act bytes differ",
                             paths[p].name, quant_traits_of(type)->name, (long long)n, mode);
                }
                const double pd = e->dot(w, a, n);
                if (exact) T_CHECKF(pd == got, "%s %s n=%lld: integer rows: %.9g vs scalar %.9g",
                                    paths[p].name, quant_traits_of(type)->name, (long long)n, pd, got);
                const double rel = fabs(pd - got) / (mag > 0.0 ? mag : 1.0);
                if (rel > worst_rel[type]) worst_rel[type] = rel;
                T_CHECKF(fabs(pd - got) <= REL_TOL * mag + 1e-30,
                         "%s %s n=%lld mode %d src %d: %.9g vs scalar %.9g (sum|wa| %.3g)",
                         paths[p].name, quant_traits_of(type)->name, (long long)n, mode, wsrc, pd,
                         got, mag);
            }

            /* layer 4 (wd still holds w dequantized) */
            check_dot4(type, w, ws[wsrc == 0 ? 1 : 0], wd, a, n, mode, paths, n_paths, s);
        }
    }
    free(x);
    free(wd);
    free(ad);
    for (int k = 0; k < 3; k++) free(ws[k]);
    free(a);
    free(a2);
}

/* Rounding ties on the exact half: Q8_0 and Q8_K round half to even. */
static void check_ties(const tested_path *paths, int n_paths) {
    float x[QK_K];
    for (int j = 0; j < QK_K; j++) x[j] = (float)(j % 9) - 4.5f; /* -4.5 .. 3.5 */
    x[0] = 127.0f;
    block_q8_0 q[QK_K / QK8_0];
    for (int p = 0; p < n_paths; p++) {
        paths[p].table[QT_Q8_0].quantize(x, q, QK_K);
        T_EQ_INT(fp16_to_fp32(q[0].d), 1.0f);
        T_EQ_INT(q[0].qs[1], -4); /* -3.5 -> -4 */
        T_EQ_INT(q[0].qs[2], -2); /* -2.5 -> -2 */
        T_EQ_INT(q[0].qs[3], -2); /* -1.5 -> -2 */
        T_EQ_INT(q[0].qs[4], 0);  /* -0.5 -> 0 */
        T_EQ_INT(q[0].qs[5], 0);  /* 0.5 -> 0 */
        T_EQ_INT(q[0].qs[6], 2);  /* 1.5 -> 2 */
        T_EQ_INT(q[0].qs[7], 2);  /* 2.5 -> 2 */
        T_EQ_INT(q[0].qs[8], 4);  /* 3.5 -> 4 */
    }
    x[0] = -127.0f;
    block_q8_K k;
    for (int p = 0; p < n_paths; p++) {
        paths[p].table[QT_Q4_K].quantize(x, &k, QK_K);
        T_EQ_INT(k.d, 1.0f);
        T_EQ_INT(k.qs[0], -127);
        T_EQ_INT(k.qs[1], -4);
        T_EQ_INT(k.qs[2], -2);
        T_EQ_INT(k.qs[5], 0);
        T_EQ_INT(k.qs[7], 2);
    }
}

/* The exact gated activations in double precision, and the relative error
 * a float kernel may make at x. SwiGLU: 4e-7 (exp's polynomial is within
 * 2e-7, the divide and the product add a rounding each). GeGLU, GELU's tanh
 * form 0.5 x (1 + tanh z) written as x / (1 + e^-2z) (double's tanh cancels
 * to 0 below z = -19): 5e-7 + 2.4e-7 |2z|, the float argument's rounding
 * amplified by the exponential. */
static double swiglu_ref(double x, double *allowed) {
    *allowed = 4e-7;
    return x / (1.0 + exp(-x));
}
static double geglu_ref(double x, double *allowed) {
    const double z2 = 1.5957691216057308 * (x + 0.044715 * x * x * x);
    *allowed = 5e-7 + 2.4e-7 * fabs(z2);
    return x / (1.0 + exp(-z2));
}

/* A gated activation on every compiled path the machine runs, against
 * double precision, over values from -120 to 120, zeros, signed zeros and
 * every length 1..40 (vector tails): within the allowed relative error (or
 * 1e-30 absolute where it vanishes), the same at any split. */
static void check_glu(const char *name, swiglu_fn (*on_path)(cpu_path), double (*ref)(double, double *), uint64_t seed) {
    enum { N = 4096 };
    static float g0[N], u[N], g[N], h[N];
    uint64_t r = seed;
    for (int i = 0; i < N; i++) {
        g0[i] = i % 5 == 0 ? (rng_unit(&r) - 0.5f) * 240.0f : (rng_unit(&r) - 0.5f) * 16.0f;
        u[i] = rng_unit(&r) - 0.5f;
    }
    g0[7] = 0.0f, g0[8] = -0.0f, g0[9] = 88.0f, g0[10] = -88.0f, g0[11] = 1e-30f;
    for (int p = 0; p < CPU_PATH_COUNT; p++) {
        const swiglu_fn f = on_path((cpu_path)p);
        if (!f || !cpu_path_supported((cpu_path)p)) continue;
        double worst = 0.0;
        memcpy(g, g0, sizeof g);
        f(g, u, N);
        for (int i = 0; i < N; i++) {
            double allowed;
            const double want = ref(g0[i], &allowed) * u[i];
            const double e = fabs(g[i] - want) / (fabs(want) > 1e-30 ? fabs(want) : 1e-30) / allowed;
            if (e > worst && fabs(g[i] - want) > 1e-30) worst = e;
        }
        int split_ok = 1;
        for (int n = 1; n <= 40; n++) { /* lengths 1..40 at an odd offset, against the one call */
            memcpy(h, g0, sizeof h);
            f(h + 3, u + 3, (size_t)n);
            for (int i = 0; i < n; i++) split_ok &= !memcmp(&h[3 + i], &g[3 + i], sizeof(float));
        }
        printf("%s %s: worst error %.2g of the allowed relative error\n", name, cpu_path_name((cpu_path)p), worst);
        T_CHECKF(worst <= 1.0, "%s %s: %.3g of the allowed error", name, cpu_path_name((cpu_path)p), worst);
        T_CHECKF(split_ok, "%s %s: a short call differs from the long one", name, cpu_path_name((cpu_path)p));
    }
}

/* The low-rank kernel of every path the CPU runs: the scalar one's results bit for bit (a fused
 * multiply-add per k and element, in k's order), for any length and any split. */
static void check_lowrank(void) {
    enum { R = 33, S = 301 };
    static float u[R], bt[R * S], want[S], got[S];
    uint64_t r = 0x10AA;
    for (int i = 0; i < R; i++) u[i] = (rng_unit(&r) - 0.5f) * 4.0f;
    for (int i = 0; i < R * S; i++) bt[i] = rng_unit(&r) - 0.5f;
    for (int p = 0; p < CPU_PATH_COUNT; p++) {
        const lowrank_fn f = kernel_lowrank_path((cpu_path)p);
        if (!f || !cpu_path_supported((cpu_path)p)) continue;
        int same = 1;
        for (int rank = 1; rank <= R; rank += 8)
            for (int n = 1; n <= S; n += n < 70 ? 1 : 37) {
                lowrank_scalar(u, rank, bt, S, (size_t)n, want);
                f(u, rank, bt, S, (size_t)n, got);
                same &= !memcmp(want, got, sizeof(float) * (size_t)n);
                const int cut = n / 3; /* two calls, the second at an odd offset */
                f(u, rank, bt, S, (size_t)cut, got);
                f(u, rank, bt + cut, S, (size_t)(n - cut), got + cut);
                same &= !memcmp(want, got, sizeof(float) * (size_t)n);
            }
        T_CHECKF(same, "lowrank %s differs from the scalar kernel", cpu_path_name((cpu_path)p));
    }
    float one = 0.0f;
    lowrank_scalar((const float[]){3.0f, -1.0f}, 2, (const float[]){2.0f, 5.0f}, 1, 1, &one);
    T_CHECK(one == 1.0f); /* 3*2 + (-1)*5 */
}

/* The four-row low-rank kernel of every path: each row the scalar one's sum, bit for bit, for 1 to 4 rows,
 * any length, rows of u and acc apart. */
static void check_lowrank4(void) {
    enum { R = 70, S = 150, US = 75 };
    static float u[4 * US], bt[R * S], want[S], got[4 * S];
    uint64_t r = 0x4AA4;
    for (int i = 0; i < 4 * US; i++) u[i] = (rng_unit(&r) - 0.5f) * 4.0f;
    for (int i = 0; i < R * S; i++) bt[i] = rng_unit(&r) - 0.5f;
    for (int p = 0; p < CPU_PATH_COUNT; p++) {
        const lowrank4_fn f = kernel_lowrank4_path((cpu_path)p);
        if (!f || !cpu_path_supported((cpu_path)p)) continue;
        int same = 1;
        for (int T = 1; T <= 4; T++)
            for (int rank = 1; rank <= R; rank += 23)
                for (int n = 1; n <= S; n += n < 40 ? 1 : 29) {
                    f(u, US, T, rank, bt, S, (size_t)n, got, S);
                    for (int t = 0; t < T; t++) {
                        lowrank_scalar(u + t * US, rank, bt, S, (size_t)n, want);
                        same &= !memcmp(want, got + t * S, sizeof(float) * (size_t)n);
                    }
                }
        T_CHECKF(same, "lowrank4 %s differs from the scalar kernel", cpu_path_name((cpu_path)p));
    }
}

int main(void) {
    check_lowrank();
    check_lowrank4();
    for (double x = -5.0; x <= 5.0; x += 0.25) { /* GeGLU's identity, where tanh does not cancel */
        const double z = 0.7978845608028654 * (x + 0.044715 * x * x * x);
        T_CHECK(fabs(0.5 * x * (1.0 + tanh(z)) - x / (1.0 + exp(-2.0 * z))) < 1e-12);
    }
    check_glu("swiglu", kernel_swiglu_path, swiglu_ref, 0x51C0);
    check_glu("geglu", kernel_geglu_path, geglu_ref, 0x6E1);
    tested_path paths[2 * CPU_PATH_COUNT];
    const int n_paths = collect_paths(paths);
    printf("paths:");
    bool active_tested = false;
    for (int p = 0; p < n_paths; p++) {
        printf(" %s(%d native)", paths[p].name, paths[p].n_native);
        if (paths[p].path == kernels_path()) active_tested = true;
    }
    printf("; active: %s\n", cpu_path_name(kernels_path()));
    T_CHECK(n_paths >= 1 && paths[0].path == CPU_SCALAR);
    T_CHECKF(active_tested, "active path %s not tested", cpu_path_name(kernels_path()));

    static const uint32_t types[] = {QT_F32,  QT_F16,  QT_BF16, QT_Q4_0, QT_Q4_1, QT_Q5_0, QT_Q5_1,
                                     QT_Q8_0, QT_Q2_K, QT_Q3_K, QT_Q4_K, QT_Q5_K, QT_Q6_K};
    uint64_t seed = 0x5EED0C70ull;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const uint32_t type = types[t];
        T_CHECKF(kernel_get_path(CPU_SCALAR, type) != NULL, "no scalar kernel for %s",
                 quant_traits_of(type)->name);
        if (!kernel_get_path(CPU_SCALAR, type)) continue;
        const int bs = quant_traits_of(type)->block_size;
        if (bs == 1) { /* float weights: any length, SIMD tails included */
            for (int64_t n = 1; n <= 80; n++) check_type(type, n, paths, n_paths, &seed);
            check_type(type, 4096, paths, n_paths, &seed);
            check_type(type, 4095, paths, n_paths, &seed);
        } else {
            for (int64_t nb = 1; nb <= 16; nb++) check_type(type, nb * bs, paths, n_paths, &seed);
            if (bs < 4096 / 16) check_type(type, 4096, paths, n_paths, &seed);
        }
    }
    check_ties(paths, n_paths);

    printf("max |path - scalar| / sum|w a|:");
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        printf(" %s %.1e", quant_traits_of(types[t])->name, worst_rel[types[t]]);
    printf("\n");
    printf("dot4 (paths with one) max |dot4 - dot| / sum|w a|, exact/checked:");
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        if (n_dot4_checks[types[t]])
            printf(" %s %.1e %ld/%ld", quant_traits_of(types[t])->name, worst_rel4[types[t]],
                   n_dot4_exact[types[t]], n_dot4_checks[types[t]]);
    printf("\n");
    long n_tiles = 0;
    printf("tiles (paths with one) equal to dot, exact/checked:");
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        if (n_tile_checks[types[t]]) {
            printf(" %s %ld/%ld", quant_traits_of(types[t])->name, n_tile_exact[types[t]], n_tile_checks[types[t]]);
            n_tiles += n_tile_checks[types[t]];
        }
    printf("\n");
    long n_prefill = 0;
    printf("prefill tiles (paths with one) within %.0e of dot, checked:", DOT4_REL_TOL);
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        if (n_prefill_checks[types[t]]) {
            printf(" %s %ld", quant_traits_of(types[t])->name, n_prefill_checks[types[t]]);
            n_prefill += n_prefill_checks[types[t]];
        }
    printf("\n");
#if defined(__x86_64__)
    if (cpu_path_supported(CPU_AVX2)) T_CHECKF(n_tiles > 0, "the x86 paths' tiles were never checked");
    if (cpu_path_supported(CPU_AVX2)) T_CHECKF(n_prefill > 0, "the AVX2 path's prefill tiles were never checked");
#elif defined(__aarch64__)
    T_CHECKF(n_tiles > 0 && n_prefill > 0, "the NEON path's tiles (%ld checks) and prefill tiles (%ld) were not checked",
             n_tiles, n_prefill);
#endif
    T_DONE();
}
