/*
 * adaptive — see adaptive.h.
 */
#include "adaptive.h"

#include <string.h>

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

bool spec_probe_plain(const spec_timing *t, int passes) { return t->plain_passes < 2 && passes % 3 == 2; }

bool spec_stop(const spec_timing *t, int min_passes, double *spec_ms_per_token, double *plain_ms_per_token) {
    const bool barren = t->proposing_passes >= 3 && t->accepted == 0;
    if (!barren && (t->verify_passes < min_passes || t->plain_passes < 2)) return false;
    const double spec = t->spec_ms / (t->accepted + t->verify_passes);
    const double plain = t->plain_passes ? t->plain_ms / t->plain_passes : 0.0;
    if (!barren && spec <= plain) return false;
    *spec_ms_per_token = spec;
    *plain_ms_per_token = plain;
    return true;
}
