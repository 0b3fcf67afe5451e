/*
 * proposer_lookahead — lookahead decoding (proposer.h, lookahead.h): every
 * pass is a tree of the root, one candidate line (prompt lookup's, else the
 * pool's latest n-gram after the root) and the Jacobi window, whose last
 * level's logits move the window on after the pass. The window rides even
 * when there is no candidate (a pass of k = 0 drafts).
 */
#include <stdlib.h>

#include "speculative/lookahead.h"
#include "speculative/ngram.h"
#include "speculative/proposer.h"

typedef struct {
    spec_ngram *ng;
    spec_lookahead *la;
    bool pooled;                      /* the last pass's candidate came from the pool */
    int pool_proposed, pool_accepted;
} lookahead_state;

static void lookahead_destroy(void *state) {
    lookahead_state *s = state;
    if (!s) return;
    ngram_free(s->ng);
    lookahead_free(s->la);
    free(s);
}

static err_code lookahead_create(const spec_setup *su, void **state, err_t *err) {
    *state = NULL;
    lookahead_state *s = calloc(1, sizeof *s);
    if (!s) return err_set(err, ERR_NOMEM, "out of memory");
    const lookahead_params *lp = &su->lookahead, def = lookahead_params_default();
    err_code rc = ngram_new(su->n_ctx + 1, &s->ng, err);
    if (!rc) rc = ngram_push(s->ng, su->prompt, su->n_prompt, err);
    if (!rc) rc = lookahead_new(!lp->w && !lp->n && !lp->g ? &def : lp, su->n_vocab, su->prompt, su->n_prompt, &s->la, err);
    if (rc) lookahead_destroy(s);
    else *state = s;
    return rc;
}

/* Nothing (decode plainly) near the end of the context, where the window no longer fits. */
static int lookahead_propose(void *state, const spec_view *v, int k, spec_pass *pass, err_t *err) {
    (void)err;
    lookahead_state *s = state;
    const int win = lookahead_window_tokens(s->la);
    if (k > SPEC_MAX_PASS - 1 - win) k = SPEC_MAX_PASS - 1 - win;
    if (1 + k + win > v->n_ctx - v->n_past) return 0;
    int32_t cand[SPEC_MAX_PASS];
    int m = ngram_propose(s->ng, k, cand);
    s->pooled = m == 0;
    if (s->pooled) m = lookahead_candidate(s->la, v->last, k, cand);
    pass->n = lookahead_layout(s->la, v->last, cand, m, pass->tokens, pass->anc, pass->rows, &pass->n_rows);
    pass->k = m;
    pass->q = NULL;
    pass->tree = true;
    return pass->n;
}

static void lookahead_verified(void *state, const spec_pass *pass, const spec_outcome *o) {
    lookahead_state *s = state;
    lookahead_update(s->la, o->logits + (size_t)(pass->k + 1) * o->n_vocab, o->n_vocab);
    if (s->pooled) s->pool_proposed += pass->k, s->pool_accepted += o->accepted;
}

static err_code lookahead_push(void *state, const int32_t *tokens, int n, err_t *err) {
    return ngram_push(((lookahead_state *)state)->ng, tokens, n, err);
}

static void lookahead_stats(const void *state, spec_proposer_stats *out) {
    const lookahead_state *s = state;
    *out = (spec_proposer_stats){.pool_proposed = s->pool_proposed, .pool_accepted = s->pool_accepted};
    lookahead_counts(s->la, &out->ngrams, &out->ngrams_new);
}

/* Its pool fills as it goes: judged after 8 verify passes, not 6. */
const proposer_ops proposer_lookahead = {
    .name = "lookahead", .needs_lm = false, .min_passes = 8,
    .create = lookahead_create, .propose = lookahead_propose, .verified = lookahead_verified,
    .push = lookahead_push, .stats = lookahead_stats, .free = lookahead_destroy,
};
