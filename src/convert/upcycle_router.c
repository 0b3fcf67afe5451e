/*
 * upcycle_router — the router, fitted without training: a linear map from
 * the FFN input to each expert's contribution on that token, by ridge least
 * squares over the calibration text (normal equations in double, solved by
 * Cholesky). The top K of its scores are then the experts that would carry
 * most of the dense FFN's output. The ridge is 1e-3 of the mean diagonal:
 * enough to keep directions the text never excites at zero, too little to
 * bend the fit elsewhere.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "convert/upcycle_internal.h"

#define RIDGE 1e-3
#define LSQ_BATCH 256 /* tokens per accumulation step */

struct upcycle_lsq {
    int n_in, n_out;
    int64_t rows;
    double *xx; /* [n_in][n_in], upper triangle filled */
    double *xy; /* [n_in][n_out] */
    float *xt, *yt; /* a batch's columns: [n_in][LSQ_BATCH], [n_out][LSQ_BATCH] */
};

upcycle_lsq *upcycle_lsq_new(int n_in, int n_out) {
    upcycle_lsq *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->n_in = n_in;
    q->n_out = n_out;
    q->xx = calloc((size_t)n_in * n_in, sizeof(double));
    q->xy = calloc((size_t)n_in * n_out, sizeof(double));
    q->xt = malloc(sizeof(float) * (size_t)n_in * LSQ_BATCH);
    q->yt = malloc(sizeof(float) * (size_t)n_out * LSQ_BATCH);
    if (!q->xx || !q->xy || !q->xt || !q->yt) {
        upcycle_lsq_free(q);
        return NULL;
    }
    return q;
}

void upcycle_lsq_free(upcycle_lsq *q) {
    if (!q) return;
    free(q->xx);
    free(q->xy);
    free(q->xt);
    free(q->yt);
    free(q);
}

/* Sixteen independent partial sums, so that the compiler may keep them in
 * one vector register (a single running sum is an ordered reduction it must
 * not vectorize). */
static float dot_f32(const float *a, const float *b, int n) {
    float acc[16] = {0};
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) acc[l] += a[i + l] * b[i + l];
    float s = 0.0f;
    for (; i < n; i++) s += a[i] * b[i];
    for (int l = 0; l < 16; l++) s += acc[l];
    return s;
}

/* rows x [T][n] -> columns out [n][T] */
static void transpose(const float *x, int T, int n, float *out) {
    for (int t = 0; t < T; t++)
        for (int i = 0; i < n; i++) out[(size_t)i * T + t] = x[(size_t)t * n + i];
}

/* A batch at a time: X^T X and X^T Y as dot products of the batch's
 * columns (contiguous, in cache), so the n x n accumulator is read and
 * written once per batch, not once per token; each dot in float over at
 * most LSQ_BATCH terms, added to the double sums. */
void upcycle_lsq_add(upcycle_lsq *q, const float *x, const float *y, int T) {
    const int n = q->n_in, k = q->n_out;
    for (int t0 = 0; t0 < T; t0 += LSQ_BATCH) {
        const int b = T - t0 < LSQ_BATCH ? T - t0 : LSQ_BATCH;
        transpose(x + (size_t)t0 * n, b, n, q->xt);
        transpose(y + (size_t)t0 * k, b, k, q->yt);
        for (int i = 0; i < n; i++) {
            const float *xi = q->xt + (size_t)i * b;
            double *row = q->xx + (size_t)i * n;
            for (int j = i; j < n; j++) row[j] += dot_f32(xi, q->xt + (size_t)j * b, b);
            double *out = q->xy + (size_t)i * k;
            for (int e = 0; e < k; e++) out[e] += dot_f32(xi, q->yt + (size_t)e * b, b);
        }
    }
    q->rows += T;
}

/* the same in double, eight partial sums */
static double dot_f64(const double *a, const double *b, int n) {
    double acc[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) acc[l] += a[i + l] * b[i + l];
    double s = 0.0;
    for (; i < n; i++) s += a[i] * b[i];
    for (int l = 0; l < 8; l++) s += acc[l];
    return s;
}

/* In-place Cholesky A = L L^T of a symmetric positive definite n x n
 * (lower triangle read and written); false when it is not. */
static bool cholesky(double *a, int n) {
    for (int j = 0; j < n; j++) {
        double d = a[(size_t)j * n + j] - dot_f64(a + (size_t)j * n, a + (size_t)j * n, j);
        if (!(d > 0.0)) return false;
        d = sqrt(d);
        a[(size_t)j * n + j] = d;
        for (int i = j + 1; i < n; i++) {
            a[(size_t)i * n + j] = (a[(size_t)i * n + j] - dot_f64(a + (size_t)i * n, a + (size_t)j * n, j)) / d;
        }
    }
    return true;
}

/* Solve L L^T w = b in place. */
static void chol_solve(const double *l, int n, double *b) {
    for (int i = 0; i < n; i++) {
        double s = b[i];
        for (int p = 0; p < i; p++) s -= l[(size_t)i * n + p] * b[p];
        b[i] = s / l[(size_t)i * n + i];
    }
    for (int i = n - 1; i >= 0; i--) {
        double s = b[i];
        for (int p = i + 1; p < n; p++) s -= l[(size_t)p * n + i] * b[p];
        b[i] = s / l[(size_t)i * n + i];
    }
}

err_code upcycle_lsq_solve(const upcycle_lsq *q, float *W, err_t *err) {
    const int n = q->n_in, k = q->n_out;
    if (q->rows == 0) return err_set(err, ERR_BAD_VALUE, "the router fit saw no calibration tokens");
    double *a = malloc(sizeof(double) * (size_t)n * n), *b = malloc(sizeof(double) * (size_t)n);
    if (!a || !b) {
        free(a), free(b);
        return err_set(err, ERR_NOMEM, "out of memory");
    }
    double diag = 0.0;
    for (int i = 0; i < n; i++) diag += q->xx[(size_t)i * n + i];
    const double ridge = RIDGE * (diag > 0.0 ? diag / n : 1.0);
    for (int i = 0; i < n; i++)
        for (int j = 0; j <= i; j++) a[(size_t)i * n + j] = q->xx[(size_t)j * n + i] + (i == j ? ridge : 0.0);
    err_code rc = cholesky(a, n) ? ERR_OK : err_set(err, ERR_BAD_VALUE, "the router's normal equations are singular");
    for (int e = 0; !rc && e < k; e++) {
        for (int i = 0; i < n; i++) b[i] = q->xy[(size_t)i * k + e];
        chol_solve(a, n, b);
        for (int i = 0; i < n; i++) W[(size_t)e * n + i] = (float)b[i];
    }
    free(a), free(b);
    return rc;
}

double upcycle_lsq_spread(const upcycle_lsq *q, const float *W) {
    const int n = q->n_in, k = q->n_out;
    if (q->rows == 0) return 0.0;
    double *aw = malloc(sizeof(double) * (size_t)k * n), *c = malloc(sizeof(double) * (size_t)k * k);
    double worst = 0.0;
    if (aw && c) {
        for (int e = 0; e < k; e++) /* aw[e] = A w_e (A symmetric, upper triangle stored) */
            for (int i = 0; i < n; i++) {
                double s = 0.0;
                for (int j = 0; j < n; j++)
                    s += q->xx[i <= j ? (size_t)i * n + j : (size_t)j * n + i] * W[(size_t)e * n + j];
                aw[(size_t)e * n + i] = s;
            }
        for (int e = 0; e < k; e++) /* c = W A W^T / rows: the scores' second moments */
            for (int f = 0; f < k; f++) {
                double s = 0.0;
                for (int i = 0; i < n; i++) s += W[(size_t)f * n + i] * aw[(size_t)e * n + i];
                c[(size_t)e * k + f] = s / (double)q->rows;
            }
        for (int e = 0; e < k; e++)
            for (int f = e + 1; f < k; f++) {
                const double ms = c[(size_t)e * k + e] + c[(size_t)f * k + f] - 2.0 * c[(size_t)e * k + f];
                if (ms > worst) worst = ms;
            }
    }
    free(aw), free(c);
    return sqrt(worst);
}
