/*
 * ngram — see ngram.h. Open addressing over (n, hash of the n tokens); a slot
 * holds the position right after the n-gram's latest occurrence; a lookup
 * compares the tokens, so a hash collision is never taken for a match.
 */
#include "ngram.h"

#include <stdlib.h>
#include <string.h>

struct spec_ngram {
    int32_t *tok;  /* the context */
    int n, cap;
    int32_t *slot; /* position after the n-gram, -1 empty */
    uint32_t mask;
};

static uint32_t hash(const int32_t *t, int n) {
    uint32_t h = 2166136261u ^ (uint32_t)n;
    for (int i = 0; i < n; i++) h = (h ^ (uint32_t)t[i]) * 16777619u;
    return h;
}

err_code ngram_new(int capacity, spec_ngram **out, err_t *err) {
    *out = NULL;
    spec_ngram *g = calloc(1, sizeof *g);
    if (!g) return err_set(err, ERR_NOMEM, "out of memory");
    uint32_t slots = 1024;
    while (slots < (uint32_t)capacity * NGRAM_MAX_N * 2u && slots < (1u << 26)) slots <<= 1;
    g->cap = capacity > 0 ? capacity : 1;
    g->tok = malloc(sizeof(int32_t) * (size_t)g->cap);
    g->slot = malloc(sizeof(int32_t) * slots);
    if (!g->tok || !g->slot) {
        ngram_free(g);
        return err_set(err, ERR_NOMEM, "out of memory for the n-gram table");
    }
    memset(g->slot, 0xFF, sizeof(int32_t) * slots);
    g->mask = slots - 1;
    *out = g;
    return ERR_OK;
}

void ngram_free(spec_ngram *g) {
    if (!g) return;
    free(g->tok);
    free(g->slot);
    free(g);
}

/* the slot for the n-gram ending before position `end` (tokens [end - n, end)) */
static uint32_t find(const spec_ngram *g, const int32_t *t, int n) {
    uint32_t i = hash(t, n) & g->mask;
    for (uint32_t probe = 0; probe <= g->mask; probe++, i = (i + 1) & g->mask) {
        const int32_t p = g->slot[i];
        if (p < 0) return i;
        if (p >= n && p <= g->n && !memcmp(g->tok + p - n, t, sizeof(int32_t) * (size_t)n)) return i;
        /* a stale or colliding entry: keep probing (stale ones are overwritten by insert below) */
    }
    return i;
}

err_code ngram_push(spec_ngram *g, const int32_t *tokens, int n, err_t *err) {
    for (int k = 0; k < n; k++) {
        if (g->n == g->cap) return err_set(err, ERR_CONTEXT_FULL, "the n-gram context is full");
        g->tok[g->n++] = tokens[k];
        /* index the n-grams that end just before the new token: they are now followed by it */
        for (int len = 1; len <= NGRAM_MAX_N && len < g->n; len++) {
            const int32_t *t = g->tok + g->n - 1 - len;
            const uint32_t i = find(g, t, len);
            g->slot[i] = g->n - 1; /* the position that followed */
        }
    }
    return ERR_OK;
}

int ngram_propose(const spec_ngram *g, int max_k, int32_t *out) {
    for (int len = NGRAM_MAX_N; len >= 1; len--) {
        if (len > g->n) continue;
        const int32_t *suffix = g->tok + g->n - len;
        const uint32_t i = find(g, suffix, len);
        const int32_t p = g->slot[i];
        /* a match other than the suffix itself, with a continuation */
        if (p < 0 || p >= g->n || p < len || memcmp(g->tok + p - len, suffix, sizeof(int32_t) * (size_t)len)) continue;
        int k = 0;
        while (k < max_k && p + k < g->n) {
            out[k] = g->tok[p + k];
            k++;
        }
        return k;
    }
    return 0;
}
