/*
 * predict — see predict.h.
 */
#include "predict.h"

#include <math.h>
#include <stdbool.h>


/* The n largest logits' experts, largest first (the lower index on a tie). */
static void top_n(const float *logits, int n_expert, int n, int32_t *out) {
    for (int j = 0; j < n; j++) {
        int best = -1;
        for (int e = 0; e < n_expert; e++) {
            bool taken = false;
            for (int i = 0; i < j && !taken; i++) taken = out[i] == e;
            if (!taken && (best < 0 || logits[e] > logits[best])) best = e;
        }
        out[j] = best;
    }
}

int moe_predict(const float *logits, int n_expert, int k, double margin, int32_t *out) {
    int n = k + MOE_PREDICT_EXTRA < n_expert ? k + MOE_PREDICT_EXTRA : n_expert;
    if (k > n) k = n;
    top_n(logits, n_expert, n, out);
    if (n == k) return n;
    double mean = 0.0, var = 0.0;
    for (int e = 0; e < n_expert; e++) mean += logits[e];
    mean /= n_expert;
    for (int e = 0; e < n_expert; e++) var += (logits[e] - mean) * (logits[e] - mean);
    const double sd = sqrt(var / n_expert);
    const double kth = logits[out[k - 1]];
    int named = k;
    while (named < n && sd > 0.0 && kth - logits[out[named]] <= margin * sd) named++;
    return named;
}
