/*
 * test_latency — the latency recorder (core/latency.h) against known
 * sequences: nearest-rank percentiles, the coefficient of variation, ties,
 * unsorted input, 0 and 1 samples, a lost sample (figures unknown), and a
 * long random run against a sorted copy.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/latency.h"
#include "t.h"

static lat_summary summary_of(const double *ms, int n, int limit) {
    lat_rec r;
    lat_init(&r, limit);
    for (int i = 0; i < n; i++) lat_add(&r, ms[i]);
    const lat_summary s = lat_summarize(&r);
    lat_free(&r);
    return s;
}

static bool unknown(lat_summary s) {
    return s.n == 0 && s.p50_ms == -1 && s.p90_ms == -1 && s.p95_ms == -1 && s.p99_ms == -1 && s.max_ms == -1 &&
           s.cv == -1;
}

/* 1..20 ms in a shuffled order: ranks ceil(p n / 100) = 10, 18, 19, 20. */
static void test_known(void) {
    const double ms[20] = {7, 19, 3, 12, 20, 1, 16, 9, 14, 5, 18, 2, 11, 6, 15, 10, 4, 17, 8, 13};
    const lat_summary s = summary_of(ms, 20, 0);
    T_EQ_INT(s.n, 20);
    T_CHECK(s.p50_ms == 10 && s.p90_ms == 18 && s.p95_ms == 19 && s.p99_ms == 20 && s.max_ms == 20);
    T_NEAR(s.cv, sqrt(399.0 / 12.0) / 10.5, 1e-12); /* the variance of 1..n is (n^2 - 1) / 12 */
    /* 3 samples: p50 is the 2nd (ceil 1.5), p90 and up the 3rd */
    const lat_summary t = summary_of((const double[]){30, 10, 20}, 3, 0);
    T_CHECK(t.p50_ms == 20 && t.p90_ms == 30 && t.p95_ms == 30 && t.p99_ms == 30);
    T_NEAR(t.cv, sqrt(200.0 / 3.0) / 20.0, 1e-12);
    /* 101 samples 0..100 in reverse: p is the sample of rank ceil(1.01 p) */
    double r[101];
    for (int i = 0; i < 101; i++) r[i] = 100 - i;
    const lat_summary u = summary_of(r, 101, 0);
    T_CHECK(u.p50_ms == 50 && u.p90_ms == 90 && u.p95_ms == 95 && u.p99_ms == 99 && u.max_ms == 100);
    T_CHECK(lat_percentile((const double[]){1, 2, 3, 4}, 4, 1) == 1 && lat_percentile((const double[]){1, 2, 3, 4}, 4, 25) == 1 &&
            lat_percentile((const double[]){1, 2, 3, 4}, 4, 26) == 2 && lat_percentile((const double[]){1, 2, 3, 4}, 4, 100) == 4);
}

/* Ties, a burst of zeros (speculation's accepted drafts), one sample, none. */
static void test_edges(void) {
    const lat_summary t = summary_of((const double[]){5, 1, 5, 5}, 4, 0);
    T_CHECK(t.p50_ms == 5 && t.p90_ms == 5 && t.max_ms == 5);
    /* a verify pass of 8 ms that delivered 3 tokens, twice: 8 0 0 8 0 0 */
    const lat_summary b = summary_of((const double[]){8, 0, 0, 8, 0, 0}, 6, 0);
    T_CHECK(b.p50_ms == 0 && b.p90_ms == 8 && b.p99_ms == 8);
    T_NEAR(b.cv, sqrt(2.0), 1e-12); /* mean 8/3, deviations 16/3 and 8/3: variance 128/9 */
    const lat_summary one = summary_of((const double[]){12.5}, 1, 0);
    T_CHECK(one.n == 1 && one.p50_ms == 12.5 && one.p99_ms == 12.5 && one.max_ms == 12.5 && one.cv == 0);
    T_CHECK(unknown(summary_of(NULL, 0, 0)));
    const lat_summary z = summary_of((const double[]){0, 0}, 2, 0); /* no time at all: no spread to speak of */
    T_CHECK(z.n == 2 && z.p50_ms == 0 && z.cv == -1);
    const lat_summary neg = summary_of((const double[]){-1e-9, 2}, 2, 0); /* a rounding below 0 is 0 */
    T_CHECK(neg.p50_ms == 0 && neg.max_ms == 2);
}

/* A sample that cannot be kept makes the figures unknown, never wrong; clear starts again. */
static void test_lost(void) {
    T_CHECK(unknown(summary_of((const double[]){1, 2, 3}, 3, 2)));
    lat_rec r;
    lat_init(&r, 2);
    lat_add(&r, 1);
    lat_add(&r, 2);
    T_EQ_INT(lat_summarize(&r).n, 2);
    lat_add(&r, 3);
    T_CHECK(r.lost && unknown(lat_summarize(&r)));
    lat_clear(&r);
    lat_add(&r, 4);
    T_CHECK(lat_summarize(&r).n == 1 && lat_summarize(&r).p50_ms == 4);
    lat_free(&r);
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* 5000 random samples (the array grows several times): kept in order, the figures those of a sorted copy. */
static void test_random(void) {
    enum { N = 5000 };
    static double x[N];
    unsigned seed = 7;
    lat_rec r;
    lat_init(&r, 0);
    for (int i = 0; i < N; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = (double)((seed >> 8) % 1000) / 10.0;
        lat_add(&r, x[i]);
    }
    qsort(x, N, sizeof *x, cmp_double);
    T_CHECK(r.n == N && !memcmp(r.ms, x, sizeof x));
    const lat_summary s = lat_summarize(&r);
    T_CHECK(s.p50_ms == x[2499] && s.p90_ms == x[4499] && s.p95_ms == x[4749] && s.p99_ms == x[4949]);
    lat_free(&r);
}

/* The middle of a few samples: the upper one of an even count; the input unchanged. */
static void test_middle(void) {
    const double one[1] = {7}, odd[3] = {3, 1, 2}, even[4] = {4, 1, 3, 2};
    double same[6] = {5, 5, 1, 9, 5, 0};
    T_NEAR(lat_middle(one, 1), 7, 0);
    T_NEAR(lat_middle(odd, 3), 2, 0);
    T_NEAR(lat_middle(even, 4), 3, 0);
    T_NEAR(lat_middle(same, 6), 5, 0);
    T_CHECK(same[0] == 5 && same[2] == 1 && same[3] == 9 && same[5] == 0);
}

int main(void) {
    test_middle();
    test_known();
    test_edges();
    test_lost();
    test_random();
    T_DONE();
}
