/*
 * latency — a run's durations and their percentiles, exactly.
 *
 * A recorder keeps every sample (a duration in ms) it is given, in sorted
 * order: each one is inserted in its place (a binary search, then a move of
 * the larger ones), so the figures are read without sorting and without
 * allocating, from any const view. A generation's samples are at most its
 * context length, a few hundred KB at 32k tokens; the move costs
 * microseconds where a token costs milliseconds, so no sampling or reservoir
 * is needed and the percentiles are exact.
 *
 * Percentiles are nearest-rank: the p-th percentile of n samples is the
 * smallest sample such that at least p % of the samples are at most it,
 * i.e. the sample of rank ceil(p n / 100) in ascending order (rank 1 the
 * smallest), computed in integers. Of 20 samples, p50 is the 10th, p95 the
 * 19th and p99 the 20th (the largest); of one sample, every percentile is it.
 *
 * The spread is the coefficient of variation: the population standard
 * deviation (divided by n, not n - 1) over the mean; 0 when every sample is
 * the same, unknown when the mean is 0.
 *
 * A sample that cannot be kept (memory, or the recorder's limit) is never an
 * error: the recorder marks itself lost and its figures become unknown (n 0,
 * -1 for each) until it is cleared; the caller goes on. Nothing here prints
 * or aborts.
 */
#ifndef OCTO_CORE_LATENCY_H
#define OCTO_CORE_LATENCY_H

#include <stdbool.h>

typedef struct {
    double *ms;  /* [cap] the samples, ascending */
    int n, cap;
    int limit;   /* the most samples it keeps (0: no limit); one more makes it lost */
    bool lost;   /* a sample could not be kept: the figures are unknown */
} lat_rec;

/* The figures of a recorder; n 0 and every other figure -1 when unknown
 * (no sample, or one lost). */
typedef struct {
    int n;                               /* samples */
    double p50_ms, p90_ms, p95_ms, p99_ms; /* nearest-rank percentiles */
    double max_ms;
    double cv;                           /* standard deviation / mean */
} lat_summary;

/* An empty recorder (nothing allocated until the first sample). */
void lat_init(lat_rec *r, int limit);
/* Keep a sample (a negative one counts as 0: clocks do not run backwards,
 * differences of them can by rounding). */
void lat_add(lat_rec *r, double ms);
/* Forget every sample and the loss; the memory is kept for the next run. */
void lat_clear(lat_rec *r);
void lat_free(lat_rec *r);
lat_summary lat_summarize(const lat_rec *r);
/* The nearest-rank p-th percentile (1..100) of n > 0 ascending samples. */
double lat_percentile(const double *sorted, int n, int p);
/* The middle of a few samples: the value at n / 2 of x sorted (the upper
 * middle when n is even); x is not changed. n is 1..LAT_FEW. */
#define LAT_FEW 16
double lat_middle(const double *x, int n);

#endif
