/*
 * verify — see verify.h.
 */
#include "verify.h"

#include <string.h>

int spec_accept_greedy(sampler *smp, const float *rows, int n_vocab, const int32_t *draft, int k) {
    int a = 0;
    while (a < k && sampler_sample(smp, rows + (size_t)a * n_vocab) == draft[a]) a++;
    return a;
}

void spec_length_init(spec_length *l, int fixed_k) {
    memset(l, 0, sizeof *l);
    l->fixed = fixed_k;
    l->k = fixed_k ? fixed_k : 4;
}

void spec_length_update(spec_length *l, int proposed, int accepted) {
    for (int i = 0; i < proposed; i++) {
        memmove(l->hist, l->hist + 1, SPEC_WINDOW - 1);
        l->hist[SPEC_WINDOW - 1] = i < accepted;
        if (l->n_hist < SPEC_WINDOW) l->n_hist++;
    }
    if (l->fixed || l->n_hist < SPEC_WINDOW) return;
    int acc = 0;
    for (int i = 0; i < SPEC_WINDOW; i++) acc += l->hist[i];
    if (acc * 10 > SPEC_WINDOW * 8 && l->k < SPEC_MAX_K) l->k++, l->n_hist = 0;
    else if (acc * 2 < SPEC_WINDOW && l->k > SPEC_MIN_K) l->k--, l->n_hist = 0;
}
