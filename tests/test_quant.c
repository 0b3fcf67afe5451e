/*
 * test_quant — the block formats, their reference kernels and conversions.
 *
 *   1. quantize -> dequantize error, per type, against the bound in
 *      `bounds[]` (each row says where its number comes from), on seeded
 *      random rows of 1..8 blocks in several distributions;
 *   2. dot(w, x) against dequantize-then-dot in double;
 *   3. layout: hand-built blocks with exact expected values, and random
 *      blocks against a second, loop-shaped transcription of ggml's
 *      dequantize_row_* (bit-exact, so float operation order is checked too);
 *   4. fp16 / bf16 conversions, exhaustively where possible;
 *   5. traits: sizes, names, unknown ids.
 *
 * Set T_VERBOSE=1 to print the measured worst errors per type.
 */
#include "core/quant.h"
#include "t.h"
#include "util.h"

#include <float.h>
#include <stdint.h>
#include <string.h>

typedef enum {
    D_GAUSS,    /* N(0, 0.05^2): the scale of real weights */
    D_UNIFORM,  /* U(-2, 2) */
    D_ZERO,     /* all zero */
    D_CONST_P,  /* all 1.3 */
    D_CONST_N,  /* all -0.37 */
    D_OUTLIERS, /* N(0, 1) with 1 value in 40 multiplied by 30 */
    D_NEGATIVE, /* -(0.25 + |N(0, 0.5^2)|): negative only */
    D_COUNT
} dist;

static const char *const dist_names[D_COUNT] = {
    "gauss", "uniform", "zero", "const+", "const-", "outliers", "negative",
};

static void fill(float *x, int n, dist d, rng_t *r) {
    for (int i = 0; i < n; i++) {
        switch (d) {
        case D_GAUSS: x[i] = (float)(0.05 * rng_gauss(r)); break;
        case D_UNIFORM: x[i] = (float)(4.0 * rng_uniform(r) - 2.0); break;
        case D_ZERO: x[i] = 0.0f; break;
        case D_CONST_P: x[i] = 1.3f; break;
        case D_CONST_N: x[i] = -0.37f; break;
        case D_OUTLIERS:
            x[i] = (float)rng_gauss(r);
            if (rng_next(r) % 40 == 0) x[i] *= 30.0f;
            break;
        case D_NEGATIVE: x[i] = (float)(-0.25 - fabs(0.5 * rng_gauss(r))); break;
        default: x[i] = 0.0f; break;
        }
    }
}

/* ---------------------------------------------------------------------------
 * 1. Error bounds
 *
 * BK_SYM (a scale d per group of `group` values, levels -qneg..qpos): the
 * quantizer maps the value of largest magnitude to -qneg, so with
 * step = amax/qneg, and d = step rounded to fp16 (off by at most
 * slack(step) = 2^-11*step + 2^-25, half an fp16 ulp or subnormal unit),
 * a value inside the grid is off by at most d/2, and one outside it (the
 * opposite extreme, which clamps at +qpos) by |x| - qpos*d.
 *
 * BK_AFFINE (scale d and min m per group, levels 0..qpos): m = fp16(min),
 * d = fp16((max - m)/qpos); inside the grid the error is at most d/2; at
 * the ends at most the fp16 rounding of m (below) or qpos times that of d
 * (above).
 *
 * BK_RMS (K-quants, whose sub-block scales are themselves quantized and
 * fitted by least squares, so a per-value formula would be loose):
 * rms(err) <= rms * rms(x) over the row, and |err| <= amax_frac * amax of
 * the 256-value super-block. Uniform quantization with step D has rms error
 * D/sqrt(12); the numbers are the worst measured over these distributions
 * (T_VERBOSE=1 prints them) with about 20% headroom, far below what a wrong
 * bit layout gives (an rms ratio of 1 or more).
 * ------------------------------------------------------------------------- */

typedef enum { BK_EXACT, BK_FLOAT, BK_SYM, BK_AFFINE, BK_RMS } bound_kind;

typedef struct {
    quant_type type;
    bound_kind kind;
    int group, qneg, qpos; /* BK_SYM / BK_AFFINE: values per scale, levels */
    double rel, abs;       /* BK_FLOAT: |err| <= rel*|x| + abs */
    double rms, rms_out;   /* BK_RMS: rms(err)/rms(x), on D_OUTLIERS rows */
    double amax_frac;      /* BK_RMS: |err| <= amax_frac * amax(super-block) */
} bound_row;

static const bound_row bounds[] = {
    /* F32 is a copy. */
    { .type = QT_F32, .kind = BK_EXACT },
    /* Half an fp16 ulp (2^-11 relative) or half a subnormal unit (2^-25). */
    { .type = QT_F16, .kind = BK_FLOAT, .rel = 0x1p-11, .abs = 0x1p-25 },
    /* Half a bf16 ulp: 8 significant bits, float's exponent range. */
    { .type = QT_BF16, .kind = BK_FLOAT, .rel = 0x1p-8 },
    /* d = amax/-8 per 32 values, levels -8..7. */
    { .type = QT_Q4_0, .kind = BK_SYM, .group = QK4_0, .qneg = 8, .qpos = 7 },
    /* d = amax/-16 per 32 values, levels -16..15. */
    { .type = QT_Q5_0, .kind = BK_SYM, .group = QK5_0, .qneg = 16, .qpos = 15 },
    /* d = amax/127 per 32 values, levels -127..127. */
    { .type = QT_Q8_0, .kind = BK_SYM, .group = QK8_0, .qneg = 127, .qpos = 127 },
    /* As ggml: iscale = -127/max per 256 values, float d (the fp16 slack in
     * the formula only loosens this bound by 2^-11). */
    { .type = QT_Q8_K, .kind = BK_SYM, .group = QK_K, .qneg = 127, .qpos = 127 },
    /* min/max per 32 values, 16 and 32 levels. */
    { .type = QT_Q4_1, .kind = BK_AFFINE, .group = QK4_1, .qpos = 15 },
    { .type = QT_Q5_1, .kind = BK_AFFINE, .group = QK5_1, .qpos = 31 },
    /* K-quants. Worst measured by this test: rms ratio, rms ratio on the
     * outlier rows, |err|/amax; bounds are those plus ~20%.
     *   Q2_K  0.273  0.304  0.463   4 levels per 16 values: the step is about
     *                               range/3, and D/sqrt(12) over a gaussian's
     *                               spread comes to ~0.3
     *   Q3_K  0.154  0.146  0.231   8 levels per 16 (the +side clamps at +3)
     *   Q4_K  0.076  0.109  0.107   16 levels per 32
     *   Q5_K  0.036  0.055  0.052   32 levels per 32
     *   Q6_K  0.018  0.033  0.024   64 levels per 16
     * Each extra bit about halves the error, as it should. Outliers stretch
     * the super-block scale, so the quantized sub-block scales of the quiet
     * sub-blocks get coarse; those rows get a bound of their own. Values can
     * be off by more than half a step (the sub-block fit trades a clipped
     * extreme for a finer step when that lowers the squared error), hence
     * |err|/amax above step/2. */
    { .type = QT_Q2_K, .kind = BK_RMS, .rms = 0.33, .rms_out = 0.37, .amax_frac = 0.55 },
    { .type = QT_Q3_K, .kind = BK_RMS, .rms = 0.19, .rms_out = 0.18, .amax_frac = 0.28 },
    { .type = QT_Q4_K, .kind = BK_RMS, .rms = 0.092, .rms_out = 0.13, .amax_frac = 0.13 },
    { .type = QT_Q5_K, .kind = BK_RMS, .rms = 0.044, .rms_out = 0.066, .amax_frac = 0.063 },
    { .type = QT_Q6_K, .kind = BK_RMS, .rms = 0.022, .rms_out = 0.040, .amax_frac = 0.030 },
};

#define N_BOUNDS ((int)(sizeof bounds / sizeof bounds[0]))
#define MAX_BLOCKS 8
#define MAX_N (MAX_BLOCKS * QK_K)

static const int block_counts[] = { 1, 2, 3, 5, 8 };

/* fp16 rounding error of a value near v (half ulp, or half a subnormal unit). */
static double slack16(double v) {
    return fabs(v) * 0x1p-11 + 0x1p-25;
}

static double amax_of(const float *x, int n) {
    double m = 0.0;
    for (int i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}

/* Bound on |err| for every value of a group under BK_SYM / BK_AFFINE. */
static void group_bounds(const bound_row *b, const float *x, double *bound) {
    const int n = b->group;
    const double amax = amax_of(x, n), fl = 1e-6 * amax; /* float arithmetic */
    if (b->kind == BK_SYM) {
        const double step = amax / b->qneg, s = slack16(step);
        for (int i = 0; i < n; i++) {
            double e = (step + s) / 2.0;
            e = fmax(e, fabs(x[i]) - b->qpos * (step - s));
            e = fmax(e, b->qneg * s);
            bound[i] = e + fl;
        }
    } else {
        double lo = x[0], hi = x[0];
        for (int i = 0; i < n; i++) {
            lo = fmin(lo, x[i]);
            hi = fmax(hi, x[i]);
        }
        const double step = (hi - lo + slack16(lo)) / b->qpos, s = slack16(step);
        const double e = fmax((step + s) / 2.0, fmax(slack16(lo), b->qpos * s));
        for (int i = 0; i < n; i++) bound[i] = e + fl;
    }
}

typedef struct {
    double worst_ratio; /* BK_SYM/AFFINE/FLOAT: max err/bound; BK_RMS: max rms ratio */
    double worst_out;   /* BK_RMS: max rms ratio on D_OUTLIERS */
    double worst_abs;   /* BK_RMS: max |err|/amax */
    double worst_dot;   /* max |dot - ref| / sum|w x| */
} measured;

static void test_roundtrip_row(const bound_row *b, const float *x, int n, dist d,
                               measured *m) {
    const quant_traits *t = quant_traits_of(b->type);
    static uint8_t q[MAX_BLOCKS * sizeof(block_q8_K)];
    float y[MAX_N];
    T_CHECK(quant_row_bytes(b->type, n) <= sizeof q);
    memset(q, 0xA5, sizeof q); /* garbage, so unwritten bytes show */
    t->quantize(x, q, n);
    t->dequantize(q, y, n);

    int finite = 1, zero_exact = 1;
    for (int i = 0; i < n; i++) {
        if (!isfinite(y[i])) finite = 0;
        if (d == D_ZERO && y[i] != 0.0f) zero_exact = 0;
    }
    T_CHECKF(finite, "%s %s n=%d: non-finite output", t->name, dist_names[d], n);
    T_CHECKF(zero_exact, "%s %s n=%d: zeros do not stay zero", t->name, dist_names[d], n);

    int bad = -1;
    double worst = 0.0, bound_at_bad = 0.0;
    switch (b->kind) {
    case BK_EXACT:
        for (int i = 0; i < n; i++)
            if (y[i] != x[i] && bad < 0) bad = i;
        break;
    case BK_FLOAT:
        for (int i = 0; i < n; i++) {
            const double e = fabs((double)y[i] - x[i]), bd = b->rel * fabs(x[i]) + b->abs;
            if (bd > 0) worst = fmax(worst, e / bd);
            if (e > bd && bad < 0) { bad = i; bound_at_bad = bd; }
        }
        break;
    case BK_SYM:
    case BK_AFFINE:
        for (int g = 0; g < n; g += b->group) {
            double bd[QK_K];
            group_bounds(b, x + g, bd);
            for (int i = 0; i < b->group; i++) {
                const double e = fabs((double)y[g + i] - x[g + i]);
                if (bd[i] > 0) worst = fmax(worst, e / bd[i]);
                if (e > bd[i] && bad < 0) { bad = g + i; bound_at_bad = bd[i]; }
            }
        }
        break;
    case BK_RMS: {
        double se = 0, sx = 0;
        for (int g = 0; g < n; g += QK_K) {
            const double amax = amax_of(x + g, QK_K);
            for (int i = g; i < g + QK_K; i++) {
                const double e = fabs((double)y[i] - x[i]);
                se += e * e;
                sx += (double)x[i] * x[i];
                if (amax > 0) m->worst_abs = fmax(m->worst_abs, e / amax);
                if (e > b->amax_frac * amax && bad < 0) {
                    bad = i;
                    bound_at_bad = b->amax_frac * amax;
                }
            }
        }
        if (sx > 0) {
            const double ratio = sqrt(se / sx), limit = d == D_OUTLIERS ? b->rms_out : b->rms;
            if (d == D_OUTLIERS) m->worst_out = fmax(m->worst_out, ratio);
            else worst = ratio;
            T_CHECKF(ratio <= limit, "%s %s n=%d: rms(err)/rms(x) = %.4f > %.4f", t->name,
                     dist_names[d], n, ratio, limit);
        }
        break;
    }
    }
    m->worst_ratio = fmax(m->worst_ratio, worst);
    const int at = bad < 0 ? 0 : bad;
    T_CHECKF(bad < 0, "%s %s n=%d: x[%d] = %.9g -> %.9g, |err| > bound %.3g", t->name,
             dist_names[d], n, bad, x[at], y[at], bound_at_bad);

    /* 2. The dot product equals dequantize-then-dot (in double) up to float
     * summation order: relative to sum |w_i x_i| so near-zero dots are fair. */
    rng_t act_rng = { 0x5EED0000u + (uint64_t)n };
    float a[MAX_N];
    for (int i = 0; i < n; i++) a[i] = (float)rng_gauss(&act_rng);
    double ref = 0, mag = 0;
    for (int i = 0; i < n; i++) {
        ref += (double)y[i] * a[i];
        mag += fabs((double)y[i] * a[i]);
    }
    const double dot = t->dot(q, a, n);
    const double via_row = quant_dot_row(b->type, q, a, n);
    T_CHECKF(fabs(dot - ref) <= 1e-5 * mag, "%s %s n=%d: dot %.9g, reference %.9g (sum|wx| %.3g)",
             t->name, dist_names[d], n, dot, ref, mag);
    T_CHECK(dot == via_row);
    if (mag > 0) m->worst_dot = fmax(m->worst_dot, fabs(dot - ref) / mag);
}

static void test_roundtrip(int verbose) {
    rng_t r = { 12345 };
    static float x[MAX_N];
    for (int bi = 0; bi < N_BOUNDS; bi++) {
        const bound_row *b = &bounds[bi];
        const quant_traits *t = quant_traits_of(b->type);
        T_CHECK(t != NULL && quant_type_supported(b->type));
        if (!t) continue;
        measured m = { 0, 0, 0, 0 };
        for (int d = 0; d < D_COUNT; d++) {
            for (size_t k = 0; k < sizeof block_counts / sizeof block_counts[0]; k++) {
                /* 1..8 blocks (F32/F16/BF16: 1..8 groups of 32 values) */
                const int n = block_counts[k] * (t->block_size >= 32 ? t->block_size : 32);
                fill(x, n, (dist)d, &r);
                test_roundtrip_row(b, x, n, (dist)d, &m);
            }
        }
        if (verbose && b->kind == BK_RMS)
            printf("  %-5s rms(err)/rms(x) %.4f (outliers %.4f), |err|/amax %.4f, "
                   "dot err %.2e of sum|wx|\n",
                   t->name, m.worst_ratio, m.worst_out, m.worst_abs, m.worst_dot);
        else if (verbose)
            printf("  %-5s |err|/bound %.4f, dot err %.2e of sum|wx|\n", t->name, m.worst_ratio,
                   m.worst_dot);
    }
}

/* ---------------------------------------------------------------------------
 * 3a. Hand-built blocks: every expected value below is worked out by hand
 * from the format description, independent of the library.
 * ------------------------------------------------------------------------- */

#define H_1 0x3C00      /* fp16 1.0 */
#define H_HALF 0x3800   /* 0.5 */
#define H_QUART 0x3400  /* 0.25 */
#define H_2 0x4000      /* 2.0 */
#define H_M1 0xBC00     /* -1.0 */

static void test_layout_q4_0(void) {
    block_q4_0 b;
    float y[QK4_0];
    b.d = H_1;
    memset(b.qs, 0x88, sizeof b.qs);
    b.qs[0] = 0x21;
    b.qs[15] = 0xF0;
    quant_dequantize_row(QT_Q4_0, &b, y, QK4_0);
    T_EQ_INT(y[0], -7);  /* low nibble of byte 0 */
    T_EQ_INT(y[16], -6); /* high nibble of byte 0 */
    T_EQ_INT(y[15], -8);
    T_EQ_INT(y[31], 7);
    T_EQ_INT(y[1], 0);
    T_EQ_INT(y[17], 0);
}

static void test_layout_q4_1(void) {
    block_q4_1 b;
    float y[QK4_1];
    b.d = H_HALF;
    b.m = H_M1;
    memset(b.qs, 0, sizeof b.qs);
    b.qs[3] = 0x5A;
    quant_dequantize_row(QT_Q4_1, &b, y, QK4_1);
    T_CHECK(y[3] == 4.0f);   /* 10*0.5 - 1 */
    T_CHECK(y[19] == 1.5f);  /* 5*0.5 - 1 */
    T_CHECK(y[0] == -1.0f);
}

static void test_layout_q5_0(void) {
    block_q5_0 b;
    float y[QK5_0];
    b.d = H_1;
    /* qh as a little-endian uint32 with bits 0, 15, 17, 31 set */
    b.qh[0] = 0x01;
    b.qh[1] = 0x80;
    b.qh[2] = 0x02;
    b.qh[3] = 0x80;
    memset(b.qs, 0, sizeof b.qs);
    b.qs[0] = 0x03;
    b.qs[1] = 0x40;
    b.qs[15] = 0xF7;
    quant_dequantize_row(QT_Q5_0, &b, y, QK5_0);
    T_EQ_INT(y[0], 3);   /* (3|16) - 16 */
    T_EQ_INT(y[16], -16);
    T_EQ_INT(y[1], -16);
    T_EQ_INT(y[17], 4);  /* (4|16) - 16, bit 17 */
    T_EQ_INT(y[15], 7);  /* (7|16) - 16, bit 15 */
    T_EQ_INT(y[31], 15); /* (15|16) - 16, bit 31 */
    T_EQ_INT(y[2], -16);
}

static void test_layout_q5_1(void) {
    block_q5_1 b;
    float y[QK5_1];
    b.d = H_2;
    b.m = H_HALF;
    memset(b.qh, 0, sizeof b.qh);
    b.qh[0] = 0x20; /* bit 5 */
    b.qh[3] = 0x04; /* bit 26 */
    memset(b.qs, 0, sizeof b.qs);
    b.qs[5] = 0x3C;
    b.qs[10] = 0x9E;
    quant_dequantize_row(QT_Q5_1, &b, y, QK5_1);
    T_CHECK(y[5] == 56.5f);  /* (12|16)*2 + 0.5 */
    T_CHECK(y[21] == 6.5f);  /* 3*2 + 0.5 */
    T_CHECK(y[10] == 28.5f); /* 14*2 + 0.5 */
    T_CHECK(y[26] == 50.5f); /* (9|16)*2 + 0.5 */
    T_CHECK(y[0] == 0.5f);
}

static void test_layout_q8_0(void) {
    block_q8_0 b;
    float y[QK8_0];
    b.d = H_QUART;
    memset(b.qs, 0, sizeof b.qs);
    b.qs[7] = -100;
    b.qs[31] = 127;
    quant_dequantize_row(QT_Q8_0, &b, y, QK8_0);
    T_CHECK(y[7] == -25.0f);
    T_CHECK(y[31] == 31.75f);
    T_CHECK(y[0] == 0.0f);
}

static void test_layout_q2_K(void) {
    block_q2_K b;
    float y[QK_K];
    memset(&b, 0, sizeof b);
    b.d = H_1;
    b.dmin = H_HALF;
    b.scales[5] = 0x23;  /* sub-block 5 (values 80..95): scale 3, min 2 */
    b.qs[19] = 0x30;     /* value 83 = 64 + 16 + 3: bits 4..5 of qs[16 + 3] */
    b.scales[14] = 0x1F; /* sub-block 14 (224..239): scale 15, min 1 */
    b.qs[39] = 0x80;     /* value 231 = 128 + 96 + 7: bits 6..7 of qs[32 + 7] */
    b.scales[1] = 0x02;  /* sub-block 1 (16..31): scale 2, min 0 */
    b.qs[18] = 0x03;     /* value 18: bits 0..1 of qs[18] */
    quant_dequantize_row(QT_Q2_K, &b, y, QK_K);
    T_CHECK(y[83] == 8.0f);    /* 1*3*3 - 0.5*2 */
    T_CHECK(y[80] == -1.0f);   /* 0 - 0.5*2 */
    T_CHECK(y[82] == -1.0f);   /* qs[18] bits 4..5 are 0 */
    T_CHECK(y[231] == 29.5f);  /* 15*2 - 0.5 */
    T_CHECK(y[224] == -0.5f);
    T_CHECK(y[18] == 6.0f);    /* 2*3 */
    T_CHECK(y[0] == 0.0f);
    T_CHECK(y[255] == 0.0f);
}

static void test_layout_q3_K(void) {
    block_q3_K b;
    float y[QK_K];
    memset(&b, 0, sizeof b);
    b.d = H_1;
    /* every scale stored as 32 (= 0): low nibbles 0, high pairs 0b10 */
    memset(b.scales + 8, 0xAA, 4);
    /* scale 13 = -5 (stored 27 = 0b01'1011): high nibble of scales[5],
     * bits 6..7 of scales[9];  scale 9 = -1 (stored 31 = 0b01'1111): high
     * nibble of scales[1], bits 4..5 of scales[9];  scale 2 = +7 (stored
     * 39 = 0b10'0111): low nibble of scales[2], bits 0..1 of scales[10]. */
    b.scales[5] = 0xB0;
    b.scales[1] = 0xF0;
    b.scales[2] = 0x07;
    b.scales[9] = 0x5A; /* 01 01 10 10 */
    /* sub-block 13 = values 208..223 (second half, shift 4, hmask bit 6) */
    b.qs[50] = 0x20;     /* value 210: low bits 2 */
    b.hmask[18] = 0x40;  /* ... high bit set: q = 2 */
    b.qs[51] = 0x10;     /* value 211: low bits 1, high bit clear: q = -3 */
    /* sub-block 2 = values 32..47 (first half, shift 2, hmask bit 1) */
    b.qs[5] = 0x0C;      /* value 37: low bits 3 */
    b.hmask[5] = 0x02;   /* high bit set: q = 3 */
    /* sub-block 9 = values 144..159 (second half, shift 0, hmask bit 4) */
    b.qs[52] = 0x01;     /* value 148: low bits 1 */
    b.hmask[20] = 0x10;  /* high bit set: q = 1 */
    quant_dequantize_row(QT_Q3_K, &b, y, QK_K);
    T_CHECK(y[210] == -10.0f); /* -5 * 2 */
    T_CHECK(y[211] == 15.0f);  /* -5 * -3 */
    T_CHECK(y[208] == 20.0f);  /* -5 * -4 */
    T_CHECK(y[212] == 20.0f);  /* qs[52] bits 4..5 and hmask[20] bit 6 clear */
    T_CHECK(y[37] == 21.0f);   /* 7 * 3 */
    T_CHECK(y[32] == -28.0f);  /* 7 * -4 */
    T_CHECK(y[148] == -1.0f);  /* -1 * 1 */
    T_CHECK(y[144] == 4.0f);   /* -1 * -4 */
    T_CHECK(y[0] == 0.0f);
    T_CHECK(y[255] == 0.0f);
}

/* Scales shared by the Q4_K and Q5_K checks:
 *   sub-block 1: sc = scales[1] = 5, m = scales[5] = 3
 *   sub-block 4: sc = (scales[8] & 15) | (scales[0] >> 6) << 4 = 10 | 16 = 26
 *                m  = (scales[8] >> 4) | (scales[4] >> 6) << 4 = 5 | 48 = 53
 *   sub-block 6: sc = (scales[10] & 15) | (scales[2] >> 6) << 4 = 1 | 32 = 33
 *                m  = (scales[10] >> 4) | (scales[6] >> 6) << 4 = 2 | 16 = 18
 * and every other scale and min is 0 (the top-bit bytes leave the low six
 * bits of scales[0], [2], [4], [6] at zero). */
static void k4_test_scales(uint8_t s[12]) {
    memset(s, 0, 12);
    s[1] = 5;
    s[5] = 3;
    s[8] = 0x5A;
    s[0] = 0x40;
    s[4] = 0xC0;
    s[10] = 0x21;
    s[2] = 0x80;
    s[6] = 0x40;
}

static void test_layout_q4_K(void) {
    block_q4_K b;
    float y[QK_K];
    memset(&b, 0, sizeof b);
    b.d = H_1;
    b.dmin = H_HALF;
    k4_test_scales(b.scales);
    b.qs[4] = 0x90;   /* value 36: sub-block 1 = high nibbles of qs[0..31] */
    b.qs[70] = 0x03;  /* value 134: sub-block 4 = low nibbles of qs[64..95] */
    b.qs[106] = 0x07; /* value 202: sub-block 6 = low nibbles of qs[96..127] */
    quant_dequantize_row(QT_Q4_K, &b, y, QK_K);
    T_CHECK(y[36] == 43.5f);  /* 5*9 - 0.5*3 */
    T_CHECK(y[32] == -1.5f);
    T_CHECK(y[4] == 0.0f);    /* sub-block 0 */
    T_CHECK(y[134] == 51.5f); /* 26*3 - 0.5*53 */
    T_CHECK(y[128] == -26.5f);
    T_CHECK(y[166] == 0.0f);  /* sub-block 5, high nibble of qs[70] */
    T_CHECK(y[202] == 222.0f); /* 33*7 - 0.5*18 */
    T_CHECK(y[192] == -9.0f);
    T_CHECK(y[234] == 0.0f);
}

static void test_layout_q5_K(void) {
    block_q5_K b;
    float y[QK_K];
    memset(&b, 0, sizeof b);
    b.d = H_1;
    b.dmin = H_HALF;
    k4_test_scales(b.scales);
    b.qs[4] = 0x90;
    b.qs[70] = 0x03;
    b.qs[106] = 0x07;
    b.qh[4] = 0x02;  /* value 36 = 32*1 + 4: bit 1 of qh[4] */
    b.qh[6] = 0x10;  /* value 134 = 32*4 + 6: bit 4 of qh[6] */
    b.qh[10] = 0x40; /* value 202 = 32*6 + 10: bit 6 of qh[10] */
    quant_dequantize_row(QT_Q5_K, &b, y, QK_K);
    T_CHECK(y[36] == 123.5f);  /* 5*(9+16) - 1.5 */
    T_CHECK(y[4] == 0.0f);     /* bit 0 of qh[4] is clear, scale 0 anyway */
    T_CHECK(y[134] == 467.5f); /* 26*(3+16) - 26.5 */
    T_CHECK(y[202] == 750.0f); /* 33*(7+16) - 9 */
    T_CHECK(y[192] == -9.0f);
    T_CHECK(y[32] == -1.5f);
}

static void test_layout_q6_K(void) {
    block_q6_K b;
    float y[QK_K];
    memset(&b, 0, sizeof b);
    b.d = H_HALF;
    b.scales[12] = -3;
    b.scales[3] = 7;
    b.scales[14] = 2;
    b.scales[0] = -1;
    /* value 200 = 128 + 64 + 8: high nibble of ql[64 + 8], bits 4..5 of qh[32 + 8] */
    b.ql[72] = 0x50;
    b.qh[40] = 0x20;
    /* value 57 = 32 + 25: low nibble of ql[32 + 25], bits 2..3 of qh[25] */
    b.ql[57] = 0x0A;
    b.qh[25] = 0x04;
    /* value 229 = 128 + 96 + 5: high nibble of ql[64 + 32 + 5], bits 6..7 of qh[32 + 5] */
    b.ql[101] = 0xF0;
    b.qh[37] = 0xC0;
    /* value 3: low nibble of ql[3], bits 0..1 of qh[3] */
    b.ql[3] = 0x01;
    b.qh[3] = 0x02;
    quant_dequantize_row(QT_Q6_K, &b, y, QK_K);
    T_CHECK(y[200] == -7.5f);  /* 0.5 * -3 * ((5 | 2<<4) - 32) */
    T_CHECK(y[192] == 48.0f);  /* 0.5 * -3 * -32 */
    T_CHECK(y[57] == -21.0f);  /* 0.5 * 7 * ((10 | 1<<4) - 32) */
    T_CHECK(y[48] == -112.0f); /* 0.5 * 7 * -32 */
    T_CHECK(y[229] == 31.0f);  /* 0.5 * 2 * 31 */
    T_CHECK(y[3] == -0.5f);    /* 0.5 * -1 * ((1 | 2<<4) - 32) */
    T_CHECK(y[136] == 0.0f);   /* low nibble of ql[72], sub-block 8 (scale 0) */
}

static void test_layout_q8_K(void) {
    block_q8_K b;
    float y[QK_K];
    memset(&b, 0, sizeof b);
    b.d = 0.5f;
    b.qs[100] = -7;
    b.qs[255] = 127;
    quant_dequantize_row(QT_Q8_K, &b, y, QK_K);
    T_CHECK(y[100] == -3.5f);
    T_CHECK(y[255] == 63.5f);
    T_CHECK(y[0] == 0.0f);
}

/* ---------------------------------------------------------------------------
 * 3b. Random blocks against a loop-shaped transcription of ggml's
 * dequantize_row_* (walking pointers the way ggml does, where the library
 * unpacks by index), compared bit for bit.
 * ------------------------------------------------------------------------- */

static void ref_q4_0(const block_q4_0 *x, float *y) {
    const float d = fp16_to_fp32(x->d);
    for (int j = 0; j < 16; j++) {
        y[j] = ((x->qs[j] & 0xF) - 8) * d;
        y[j + 16] = ((x->qs[j] >> 4) - 8) * d;
    }
}

static void ref_q4_1(const block_q4_1 *x, float *y) {
    const float d = fp16_to_fp32(x->d), m = fp16_to_fp32(x->m);
    for (int j = 0; j < 16; j++) {
        y[j] = (x->qs[j] & 0xF) * d + m;
        y[j + 16] = (x->qs[j] >> 4) * d + m;
    }
}

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void ref_q5_0(const block_q5_0 *x, float *y) {
    const float d = fp16_to_fp32(x->d);
    const uint32_t qh = le32(x->qh);
    for (int j = 0; j < 16; j++) {
        const int xh0 = (int)((qh >> j) << 4) & 0x10, xh1 = (int)(qh >> (j + 12)) & 0x10;
        y[j] = (((x->qs[j] & 0xF) | xh0) - 16) * d;
        y[j + 16] = (((x->qs[j] >> 4) | xh1) - 16) * d;
    }
}

static void ref_q5_1(const block_q5_1 *x, float *y) {
    const float d = fp16_to_fp32(x->d), m = fp16_to_fp32(x->m);
    const uint32_t qh = le32(x->qh);
    for (int j = 0; j < 16; j++) {
        const int xh0 = (int)((qh >> j) << 4) & 0x10, xh1 = (int)(qh >> (j + 12)) & 0x10;
        y[j] = ((x->qs[j] & 0xF) | xh0) * d + m;
        y[j + 16] = ((x->qs[j] >> 4) | xh1) * d + m;
    }
}

static void ref_q8_0(const block_q8_0 *x, float *y) {
    const float d = fp16_to_fp32(x->d);
    for (int j = 0; j < 32; j++) y[j] = x->qs[j] * d;
}

static void ref_q2_K(const block_q2_K *x, float *y) {
    const float d = fp16_to_fp32(x->d), dmin = fp16_to_fp32(x->dmin);
    const uint8_t *q = x->qs;
    int is = 0;
    for (int n = 0; n < QK_K; n += 128) {
        for (int shift = 0; shift < 8; shift += 2) {
            for (int half = 0; half < 2; half++) {
                const uint8_t sc = x->scales[is++];
                const float dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
                for (int l = 0; l < 16; l++) *y++ = dl * ((q[l + 16 * half] >> shift) & 3) - ml;
            }
        }
        q += 32;
    }
}

static void ref_q3_K(const block_q3_K *x, float *y) {
    /* the kmask trick: four little-endian words, rebuilt into 16 bytes */
    const uint32_t kmask1 = 0x03030303u, kmask2 = 0x0f0f0f0fu;
    uint32_t aux[4];
    for (int k = 0; k < 3; k++) aux[k] = le32(x->scales + 4 * k);
    const uint32_t tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
    aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
    aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
    aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
    int8_t scales[16];
    for (int k = 0; k < 16; k++) scales[k] = (int8_t)((aux[k / 4] >> (8 * (k % 4))) & 0xFF);

    const float d_all = fp16_to_fp32(x->d);
    const uint8_t *q = x->qs, *hm = x->hmask;
    uint8_t m = 1;
    int is = 0;
    for (int n = 0; n < QK_K; n += 128) {
        for (int shift = 0; shift < 8; shift += 2) {
            for (int half = 0; half < 2; half++) {
                const float dl = d_all * (scales[is++] - 32);
                for (int l = 16 * half; l < 16 * half + 16; l++)
                    *y++ = dl * (((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
            }
            m = (uint8_t)(m << 1);
        }
        q += 32;
    }
}

static void ref_scale_min_k4(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

static void ref_q4_K(const block_q4_K *x, float *y) {
    const float d = fp16_to_fp32(x->d), dmin = fp16_to_fp32(x->dmin);
    const uint8_t *q = x->qs;
    for (int j = 0, is = 0; j < QK_K; j += 64, is += 2, q += 32) {
        int sc, m;
        ref_scale_min_k4(is, x->scales, &sc, &m);
        const float d1 = d * sc, m1 = dmin * m;
        ref_scale_min_k4(is + 1, x->scales, &sc, &m);
        const float d2 = d * sc, m2 = dmin * m;
        for (int l = 0; l < 32; l++) *y++ = d1 * (q[l] & 0xF) - m1;
        for (int l = 0; l < 32; l++) *y++ = d2 * (q[l] >> 4) - m2;
    }
}

static void ref_q5_K(const block_q5_K *x, float *y) {
    const float d = fp16_to_fp32(x->d), dmin = fp16_to_fp32(x->dmin);
    const uint8_t *ql = x->qs, *qh = x->qh;
    unsigned u1 = 1, u2 = 2;
    for (int j = 0, is = 0; j < QK_K; j += 64, is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
        int sc, m;
        ref_scale_min_k4(is, x->scales, &sc, &m);
        const float d1 = d * sc, m1 = dmin * m;
        ref_scale_min_k4(is + 1, x->scales, &sc, &m);
        const float d2 = d * sc, m2 = dmin * m;
        for (int l = 0; l < 32; l++) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
        for (int l = 0; l < 32; l++) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    }
}

static void ref_q6_K(const block_q6_K *x, float *y) {
    const float d = fp16_to_fp32(x->d);
    const uint8_t *ql = x->ql, *qh = x->qh;
    const int8_t *sc = x->scales;
    for (int n = 0; n < QK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
        for (int l = 0; l < 32; l++) {
            const int is = l / 16;
            const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = d * sc[is + 0] * q1;
            y[l + 32] = d * sc[is + 2] * q2;
            y[l + 64] = d * sc[is + 4] * q3;
            y[l + 96] = d * sc[is + 6] * q4;
        }
    }
}

static void ref_q8_K(const block_q8_K *x, float *y) {
    for (int j = 0; j < QK_K; j++) y[j] = x->d * x->qs[j];
}

/* A random finite fp16 scale in about [-2, 2], never zero. */
static fp16_t random_scale16(rng_t *r) {
    const float v = (float)(0.01 + 2.0 * rng_uniform(r)) * ((rng_next(r) & 1) ? -1.0f : 1.0f);
    return fp32_to_fp16(v);
}

#define REF_CASE(T, blk, fn, setup)                                                  \
    do {                                                                             \
        blk b;                                                                       \
        float got[QK_K], want[QK_K];                                                 \
        const int n = quant_traits_of(T)->block_size;                                \
        for (size_t k = 0; k < sizeof b; k++) ((uint8_t *)&b)[k] = (uint8_t)rng_next(&r); \
        setup;                                                                       \
        quant_dequantize_row(T, &b, got, n);                                         \
        fn(&b, want);                                                                \
        int same = 1;                                                                \
        for (int i = 0; i < n; i++)                                                  \
            if (memcmp(&got[i], &want[i], sizeof(float)) != 0) same = 0;             \
        T_CHECKF(same, "%s: random block %d differs from ggml's loop", #blk, it);    \
        /* and the dot of a random block is dequantize-then-dot */                   \
        float a[QK_K];                                                               \
        double ref = 0, mag = 0;                                                     \
        for (int i = 0; i < n; i++) {                                                \
            a[i] = (float)rng_gauss(&r);                                             \
            ref += (double)want[i] * a[i];                                           \
            mag += fabs((double)want[i] * a[i]);                                     \
        }                                                                            \
        const double dot = quant_dot_row(T, &b, a, n);                               \
        T_CHECKF(fabs(dot - ref) <= 1e-5 * mag, "%s: random block %d dot %.9g vs %.9g", \
                 #blk, it, dot, ref);                                                \
    } while (0)

static void test_layout_random(void) {
    rng_t r = { 4242 };
    for (int it = 0; it < 50; it++) {
        REF_CASE(QT_Q4_0, block_q4_0, ref_q4_0, b.d = random_scale16(&r));
        REF_CASE(QT_Q4_1, block_q4_1, ref_q4_1,
                 (b.d = random_scale16(&r), b.m = random_scale16(&r)));
        REF_CASE(QT_Q5_0, block_q5_0, ref_q5_0, b.d = random_scale16(&r));
        REF_CASE(QT_Q5_1, block_q5_1, ref_q5_1,
                 (b.d = random_scale16(&r), b.m = random_scale16(&r)));
        REF_CASE(QT_Q8_0, block_q8_0, ref_q8_0, b.d = random_scale16(&r));
        REF_CASE(QT_Q2_K, block_q2_K, ref_q2_K,
                 (b.d = random_scale16(&r), b.dmin = random_scale16(&r)));
        REF_CASE(QT_Q3_K, block_q3_K, ref_q3_K, b.d = random_scale16(&r));
        REF_CASE(QT_Q4_K, block_q4_K, ref_q4_K,
                 (b.d = random_scale16(&r), b.dmin = random_scale16(&r)));
        REF_CASE(QT_Q5_K, block_q5_K, ref_q5_K,
                 (b.d = random_scale16(&r), b.dmin = random_scale16(&r)));
        REF_CASE(QT_Q6_K, block_q6_K, ref_q6_K, b.d = random_scale16(&r));
        REF_CASE(QT_Q8_K, block_q8_K, ref_q8_K, b.d = fp16_to_fp32(random_scale16(&r)));
    }
}

/* Q8_K's quantizer is specified exactly (ggml's): check it on one block. */
static void test_q8_K_quantize(void) {
    rng_t r = { 99 };
    float x[QK_K];
    block_q8_K b;
    fill(x, QK_K, D_UNIFORM, &r);
    x[17] = 3.0f; /* the value of largest magnitude, positive: d comes out negative */
    quant_quantize_row(QT_Q8_K, x, &b, QK_K);
    const float iscale = -127.0f / 3.0f;
    T_CHECK(b.d == 1.0f / iscale);
    T_EQ_INT(b.qs[17], -127);
    int ok = 1, sums_ok = 1;
    for (int j = 0; j < QK_K; j++) {
        long v = lrintf(iscale * x[j]);
        if (v > 127) v = 127;
        if (b.qs[j] != v) ok = 0;
    }
    for (int g = 0; g < QK_K / 16; g++) {
        int s = 0;
        for (int l = 0; l < 16; l++) s += b.qs[16 * g + l];
        if (b.bsums[g] != s) sums_ok = 0;
    }
    T_CHECK(ok);
    T_CHECK(sums_ok);
    memset(x, 0, sizeof x);
    quant_quantize_row(QT_Q8_K, x, &b, QK_K);
    T_CHECK(b.d == 0.0f && b.qs[0] == 0 && b.bsums[0] == 0);
}

/* Quantizing must not give inf/NaN for finite input, even at the edges of
 * float's range (scales saturate at the fp16 maximum). */
static void test_extremes(void) {
    static const float cases[] = { 3e38f, -3e38f, 1e-30f, -1e-40f, 65504.0f * 200.0f };
    float x[QK_K], y[QK_K];
    static uint8_t q[QK_K * sizeof(float)]; /* F32 is the widest row */
    for (int bi = 0; bi < N_BOUNDS; bi++) {
        const quant_type ty = bounds[bi].type;
        if (ty == QT_F16 || ty == QT_BF16) continue; /* these overflow to inf by design */
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            for (int i = 0; i < QK_K; i++) x[i] = (i % 3 == 0) ? cases[c] : cases[c] * -0.25f;
            quant_quantize_row(ty, x, q, QK_K);
            quant_dequantize_row(ty, q, y, QK_K);
            int finite = 1;
            for (int i = 0; i < QK_K; i++)
                if (!isfinite(y[i])) finite = 0;
            T_CHECKF(finite, "%s: non-finite output for input %g", quant_traits_of(ty)->name,
                     cases[c]);
        }
    }
}

/* ---------------------------------------------------------------------------
 * 4. fp16 / bf16
 * ------------------------------------------------------------------------- */

static float bits_f(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static int is_nan16(fp16_t h) {
    return (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0;
}

static void test_fp16(void) {
    /* every pattern: the value is right, and it converts back to itself */
    int value_ok = 1, trip_ok = 1, nan_ok = 1;
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = fp16_to_fp32((fp16_t)h);
        const int exp = (h >> 10) & 31, mant = h & 0x3FF;
        const double sign = (h & 0x8000) ? -1.0 : 1.0;
        if (exp == 31) {
            if (mant ? !isnan(f) : f != (float)(sign * INFINITY)) value_ok = 0;
        } else {
            const double v = exp == 0 ? ldexp(mant, -24) : ldexp(1024 + mant, exp - 25);
            if ((double)f != sign * v || !!signbit(f) != !!(h & 0x8000)) value_ok = 0;
        }
        const fp16_t back = fp32_to_fp16(f);
        if (is_nan16((fp16_t)h)) {
            if (!is_nan16(back) || (back & 0x8000) != (h & 0x8000)) nan_ok = 0;
        } else if (back != h) {
            trip_ok = 0;
        }
    }
    T_CHECK(value_ok);
    T_CHECK(trip_ok);
    T_CHECK(nan_ok);

    /* rounding between every pair of neighbours: the midpoint (exact in float)
     * goes to the even one, a float ulp either side to the nearer one */
    int mid_ok = 1;
    for (uint32_t h = 0; h < 0x7C00; h++) {
        const fp16_t up = (fp16_t)(h + 1); /* 0x7C00 is inf: 65520 rounds to it */
        const float a = fp16_to_fp32((fp16_t)h);
        const float b = up == 0x7C00 ? 65536.0f : fp16_to_fp32(up);
        const float mid = (float)(((double)a + b) / 2.0);
        const fp16_t even = (h & 1) ? up : (fp16_t)h;
        if (fp32_to_fp16(mid) != even) mid_ok = 0;
        if (fp32_to_fp16(nextafterf(mid, 0.0f)) != h) mid_ok = 0;
        if (fp32_to_fp16(nextafterf(mid, INFINITY)) != up) mid_ok = 0;
        if (fp32_to_fp16(-mid) != (fp16_t)(even | 0x8000)) mid_ok = 0;
    }
    T_CHECK(mid_ok);

    T_EQ_INT(fp32_to_fp16(1.0f), 0x3C00);
    T_EQ_INT(fp32_to_fp16(-2.0f), 0xC000);
    T_EQ_INT(fp32_to_fp16(65504.0f), 0x7BFF);
    T_EQ_INT(fp32_to_fp16(65519.0f), 0x7BFF);
    T_EQ_INT(fp32_to_fp16(65520.0f), 0x7C00); /* tie with 2^16 goes up to inf */
    T_EQ_INT(fp32_to_fp16(1e10f), 0x7C00);
    T_EQ_INT(fp32_to_fp16(-INFINITY), 0xFC00);
    T_EQ_INT(fp32_to_fp16(0x1p-24f), 0x0001);   /* smallest subnormal */
    T_EQ_INT(fp32_to_fp16(0x1p-14f), 0x0400);   /* smallest normal */
    T_EQ_INT(fp32_to_fp16(0x1p-25f), 0x0000);   /* half the smallest subnormal: ties to 0 */
    T_EQ_INT(fp32_to_fp16(0x1.8p-24f), 0x0002); /* 1.5 units: ties to 2 */
    T_EQ_INT(fp32_to_fp16(0x1.000002p-25f), 0x0001);
    T_EQ_INT(fp32_to_fp16(1e-8f), 0x0000);
    T_EQ_INT(fp32_to_fp16(-0.0f), 0x8000);
    T_EQ_INT(fp32_to_fp16(0.1f), 0x2E66);
    T_EQ_INT(fp32_to_fp16(1.0f + 0x1p-11f), 0x3C00);     /* tie, 0x3C00 even */
    T_EQ_INT(fp32_to_fp16(1.0f + 0x3p-11f), 0x3C02);     /* tie, 0x3C01 odd */
    T_EQ_INT(fp32_to_fp16(bits_f(0x3F801001u)), 0x3C01);  /* just above that tie */
    T_EQ_INT(fp32_to_fp16(0x1.ff8p-15f), 0x03FF);         /* largest subnormal */
    T_EQ_INT(fp32_to_fp16(0x1.ffcp-15f), 0x0400);         /* tie: up into the normals */
    T_CHECK(is_nan16(fp32_to_fp16(NAN)));
    T_CHECK(is_nan16(fp32_to_fp16(bits_f(0x7F800001u)))); /* payload only in low bits */
    T_CHECK(fp16_to_fp32(0x3C00) == 1.0f);
    T_CHECK(fp16_to_fp32(0x0001) == 0x1p-24f);
    T_CHECK(fp16_to_fp32(0x7BFF) == 65504.0f);
    T_CHECK(isnan(fp16_to_fp32(0x7E00)));
}

static int is_nan_bf16(bf16_t h) {
    return (h & 0x7F80) == 0x7F80 && (h & 0x7F) != 0;
}

static void test_bf16(void) {
    int trip_ok = 1;
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = bf16_to_fp32((bf16_t)h);
        const bf16_t back = fp32_to_bf16(f);
        if (is_nan_bf16((bf16_t)h) ? !is_nan_bf16(back) : back != h) trip_ok = 0;
    }
    T_CHECK(trip_ok);
    T_EQ_INT(fp32_to_bf16(1.0f), 0x3F80);
    T_EQ_INT(fp32_to_bf16(bits_f(0x3F808000u)), 0x3F80); /* tie, 0x3F80 even */
    T_EQ_INT(fp32_to_bf16(bits_f(0x3F818000u)), 0x3F82); /* tie, 0x3F81 odd */
    T_EQ_INT(fp32_to_bf16(bits_f(0x3F808001u)), 0x3F81);
    T_EQ_INT(fp32_to_bf16(bits_f(0x3F807FFFu)), 0x3F80);
    T_EQ_INT(fp32_to_bf16(-2.0f), 0xC000);
    T_EQ_INT(fp32_to_bf16(INFINITY), 0x7F80);
    T_EQ_INT(fp32_to_bf16(FLT_MAX), 0x7F80); /* above the largest bf16's midpoint */
    T_CHECK(is_nan_bf16(fp32_to_bf16(NAN)));
    T_CHECK(is_nan_bf16(fp32_to_bf16(bits_f(0x7F800001u)))); /* would truncate to inf */
    T_CHECK(is_nan_bf16(fp32_to_bf16(bits_f(0xFF800001u))));
    T_CHECK(bf16_to_fp32(0x3F80) == 1.0f);
    T_CHECK(bf16_to_fp32(0xC0A0) == -5.0f);
}

/* ---------------------------------------------------------------------------
 * 5. Traits
 * ------------------------------------------------------------------------- */

static void test_traits(void) {
    static const struct {
        uint32_t id;
        const char *name;
        int block_size;
        size_t type_size;
    } want[] = {
        { QT_F32, "f32", 1, 4 },        { QT_F16, "f16", 1, 2 },
        { QT_BF16, "bf16", 1, 2 },      { QT_Q4_0, "q4_0", 32, 18 },
        { QT_Q4_1, "q4_1", 32, 20 },    { QT_Q5_0, "q5_0", 32, 22 },
        { QT_Q5_1, "q5_1", 32, 24 },    { QT_Q8_0, "q8_0", 32, 34 },
        { QT_Q8_1, "q8_1", 32, 36 },    { QT_Q2_K, "q2_K", 256, 84 },
        { QT_Q3_K, "q3_K", 256, 110 },  { QT_Q4_K, "q4_K", 256, 144 },
        { QT_Q5_K, "q5_K", 256, 176 },  { QT_Q6_K, "q6_K", 256, 210 },
        { QT_Q8_K, "q8_K", 256, 292 },
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        const quant_traits *t = quant_traits_of(want[k].id);
        T_CHECKF(t != NULL, "type %u unknown", (unsigned)want[k].id);
        if (!t) continue;
        T_CHECKF(strcmp(t->name, want[k].name) == 0, "type %u is named %s", (unsigned)want[k].id,
                 t->name);
        T_EQ_INT(t->block_size, want[k].block_size);
        T_EQ_INT(t->type_size, want[k].type_size);
        T_EQ_INT(quant_type_from_name(want[k].name), want[k].id);
        T_EQ_INT(quant_row_bytes(want[k].id, 4 * t->block_size), 4 * want[k].type_size);
        const bool supported = want[k].id != QT_Q8_1;
        T_EQ_INT(quant_type_supported(want[k].id), supported);
        T_EQ_INT(t->dequantize != NULL, supported);
        T_EQ_INT(t->quantize != NULL, supported);
        T_EQ_INT(t->dot != NULL, supported);
    }

    static const uint32_t unknown[] = { 4, 5, 16, 17, 20, 29, 31, 35, 39, 40, 41, 1000,
                                        0x7FFFFFFFu, 0xFFFFFFFFu };
    for (size_t k = 0; k < sizeof unknown / sizeof unknown[0]; k++) {
        T_CHECKF(quant_traits_of(unknown[k]) == NULL, "type %u should be unknown",
                 (unsigned)unknown[k]);
        T_CHECK(!quant_type_supported(unknown[k]));
    }

    T_EQ_INT(quant_type_from_name("Q4_K"), QT_Q4_K);
    T_EQ_INT(quant_type_from_name("q4_k"), QT_Q4_K);
    T_EQ_INT(quant_type_from_name("Q8_0"), QT_Q8_0);
    T_EQ_INT(quant_type_from_name("BF16"), QT_BF16);
    T_EQ_INT(quant_type_from_name("F32"), QT_F32);
    T_EQ_INT(quant_type_from_name("q6_K"), QT_Q6_K);
    T_EQ_INT(quant_type_from_name("q4"), -1);
    T_EQ_INT(quant_type_from_name("q4_k "), -1);
    T_EQ_INT(quant_type_from_name("q4_kk"), -1);
    T_EQ_INT(quant_type_from_name(""), -1);
    T_EQ_INT(quant_type_from_name("iq4_nl"), -1);
    T_EQ_INT(quant_type_from_name(NULL), -1);

    T_EQ_INT(quant_row_bytes(QT_Q4_K, 4096), 16 * 144);
    T_EQ_INT(quant_row_bytes(QT_F16, 3), 6);
    T_EQ_INT(quant_row_bytes(QT_Q8_0, 0), 0);
}

int main(void) {
    const int verbose = getenv("T_VERBOSE") != NULL;
    test_traits();
    test_fp16();
    test_bf16();
    test_layout_q4_0();
    test_layout_q4_1();
    test_layout_q5_0();
    test_layout_q5_1();
    test_layout_q8_0();
    test_layout_q2_K();
    test_layout_q3_K();
    test_layout_q4_K();
    test_layout_q5_K();
    test_layout_q6_K();
    test_layout_q8_K();
    test_layout_random();
    test_q8_K_quantize();
    test_extremes();
    test_roundtrip(verbose);
    T_DONE();
}
