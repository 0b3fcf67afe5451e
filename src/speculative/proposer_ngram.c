/*
 * proposer_ngram — prompt lookup (proposer.h): what followed the latest
 * earlier occurrence of the context's last 4..1 tokens (ngram.c's table) is
 * the draft. Deterministic, so verification treats it as one-hot (q NULL).
 */
#include <stdlib.h>

#include "speculative/ngram.h"
#include "speculative/proposer.h"

static err_code ngram_create(const spec_setup *s, void **state, err_t *err) {
    spec_ngram *ng = NULL;
    err_code rc = ngram_new(s->n_ctx + 1, &ng, err);
    if (!rc) rc = ngram_push(ng, s->prompt, s->n_prompt, err);
    if (rc) ngram_free(ng);
    *state = rc ? NULL : ng;
    return rc;
}

/* A chain: last, then up to k looked-up tokens (the last takes one position). */
static int ngram_propose_pass(void *state, const spec_view *v, int k, spec_pass *pass, err_t *err) {
    (void)err;
    const int room = v->n_ctx - v->n_past - 1;
    const int m = ngram_propose(state, k < room ? k : room, pass->tokens + 1);
    pass->tokens[0] = v->last;
    pass->k = m;
    pass->n = m ? m + 1 : 0;
    pass->q = NULL;
    pass->tree = false;
    return pass->n;
}

static void ngram_verified(void *state, const spec_pass *pass, const spec_outcome *o) {
    (void)state, (void)pass, (void)o;
}

static err_code ngram_push_tokens(void *state, const int32_t *tokens, int n, err_t *err) {
    return ngram_push(state, tokens, n, err);
}

static void ngram_stats(const void *state, spec_proposer_stats *out) {
    (void)state;
    *out = (spec_proposer_stats){0};
}

static void ngram_destroy(void *state) { ngram_free(state); }

const proposer_ops proposer_ngram = {
    .name = "ngram", .needs_lm = false, .min_passes = 6,
    .create = ngram_create, .propose = ngram_propose_pass, .verified = ngram_verified,
    .push = ngram_push_tokens, .stats = ngram_stats, .free = ngram_destroy,
};
