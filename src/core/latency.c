/*
 * latency — see latency.h.
 */
#include "latency.h"

#include <assert.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void lat_init(lat_rec *r, int limit) {
    memset(r, 0, sizeof *r);
    r->limit = limit > 0 ? limit : 0;
}

/* Room for one more sample; false (and lost) when there is none. */
static bool lat_room(lat_rec *r) {
    if (r->limit && r->n >= r->limit) return false;
    if (r->n < r->cap) return true;
    const int cap = r->cap == 0 ? 256 : r->cap > INT_MAX / 2 ? INT_MAX : 2 * r->cap;
    if (cap <= r->n) return false;
    double *ms = realloc(r->ms, sizeof *ms * (size_t)cap);
    if (!ms) return false;
    r->ms = ms;
    r->cap = cap;
    return true;
}

void lat_add(lat_rec *r, double ms) {
    if (r->lost) return;
    if (!lat_room(r)) {
        r->lost = true;
        return;
    }
    if (!(ms > 0.0)) ms = 0.0; /* negative or NaN */
    int lo = 0, hi = r->n; /* the first sample larger than ms: equal ones stay before it */
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (r->ms[mid] <= ms) lo = mid + 1;
        else hi = mid;
    }
    memmove(r->ms + lo + 1, r->ms + lo, sizeof *r->ms * (size_t)(r->n - lo));
    r->ms[lo] = ms;
    r->n++;
}

void lat_clear(lat_rec *r) {
    r->n = 0;
    r->lost = false;
}

void lat_free(lat_rec *r) {
    free(r->ms);
    lat_init(r, r->limit);
}

double lat_percentile(const double *sorted, int n, int p) {
    assert(n > 0 && p >= 1 && p <= 100);
    const long long rank = ((long long)p * n + 99) / 100; /* ceil(p n / 100), at least 1 */
    return sorted[rank - 1];
}

/* Population standard deviation over the mean; -1 when the mean is 0. */
static double lat_cv(const double *x, int n) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += x[i];
    const double mean = sum / n;
    if (!(mean > 0.0)) return -1.0;
    double ss = 0.0;
    for (int i = 0; i < n; i++) ss += (x[i] - mean) * (x[i] - mean);
    return sqrt(ss / n) / mean;
}

lat_summary lat_summarize(const lat_rec *r) {
    if (r->lost || r->n == 0) return (lat_summary){0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0};
    const double *x = r->ms;
    const int n = r->n;
    return (lat_summary){.n = n, .p50_ms = lat_percentile(x, n, 50), .p90_ms = lat_percentile(x, n, 90),
                         .p95_ms = lat_percentile(x, n, 95), .p99_ms = lat_percentile(x, n, 99),
                         .max_ms = x[n - 1], .cv = lat_cv(x, n)};
}

double lat_middle(const double *x, int n) {
    assert(n >= 1 && n <= LAT_FEW);
    double v[LAT_FEW];
    for (int i = 0; i < n; i++) { /* insertion: a few values */
        int j = i;
        for (; j > 0 && v[j - 1] > x[i]; j--) v[j] = v[j - 1];
        v[j] = x[i];
    }
    return v[n / 2];
}
