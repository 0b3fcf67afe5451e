/*
 * proposer_draft — a draft model proposes (proposer.h): a smaller model with
 * the same vocabulary ("draft"), or the target's own low-precision copy made
 * at load ("self", runtime/bundle.c). The two differ only in the model the
 * runtime hands over (spec_setup.lm); the proposing is the same.
 *
 * Each proposal first brings the draft's cache to the target's sequence
 * (whatever prefix they share is kept), then takes k steps from the target's
 * last token, each drawn with the target's sampler (its transforms and
 * penalties; the drafts so far accepted into it tentatively and rewound
 * after). Sampled, the distributions drawn from are kept for verification
 * (pass->q). The draft's entries for the proposal stay: the next proposal
 * keeps what the target accepted.
 */
#include <stdlib.h>
#include <string.h>

#include "speculative/proposer.h"

typedef struct {
    spec_lm lm;
    sampler *smp;
    int n_vocab;
    float *logits;  /* [n_vocab] the draft's last logits */
    float *q;       /* [SPEC_MAX_K * n_vocab] sampled: the distributions drawn from */
} draft_state;

static void draft_destroy(void *state) {
    draft_state *s = state;
    if (!s) return;
    free(s->logits);
    free(s->q);
    free(s);
}

static err_code draft_create(const spec_setup *su, void **state, err_t *err) {
    *state = NULL;
    if (!su->lm) return err_set(err, ERR_INVALID_ARG, "draft speculation needs a draft model with the same vocabulary");
    draft_state *s = calloc(1, sizeof *s);
    if (!s) return err_set(err, ERR_NOMEM, "out of memory");
    s->lm = *su->lm;
    s->smp = su->smp;
    s->n_vocab = su->n_vocab;
    s->logits = malloc(sizeof(float) * (size_t)su->n_vocab);
    if (su->sampled) s->q = malloc(sizeof(float) * (size_t)SPEC_MAX_K * (size_t)su->n_vocab);
    if (!s->logits || (su->sampled && !s->q)) {
        draft_destroy(s);
        return err_set(err, ERR_NOMEM, "out of memory");
    }
    *state = s;
    return ERR_OK;
}

/* k steps of the draft: the target's last few tokens the draft lacks (the
 * token the target chose itself, a draft it never ran) go into one batch
 * with `last`, the first step, which costs a memory-bound draft about one
 * step; a long gap (the prompt) goes first, on its own. */
static int draft_steps(draft_state *s, const spec_view *v, int k, spec_pass *pass, err_t *err) {
    int keep = s->lm.common_prefix(s->lm.ctx, v->tokens, v->n_past);
    s->lm.truncate(s->lm.ctx, keep);
    keep = s->lm.common_prefix(s->lm.ctx, v->tokens, keep); /* a windowed draft may have had to start over */
    if (v->n_past - keep > SPEC_MAX_K) {
        if (s->lm.eval(s->lm.ctx, v->tokens + keep, v->n_past - SPEC_MAX_K - keep, s->logits, err)) return -1;
        keep = v->n_past - SPEC_MAX_K;
    }
    if (k > s->lm.n_ctx - v->n_past) k = s->lm.n_ctx - v->n_past; /* the steps take n_past .. n_past + k - 1 */
    if (k <= 0) return 0; /* no room in the draft's context: decode plainly */
    const size_t V = (size_t)s->n_vocab;
    int32_t first[SPEC_MAX_K + 1];
    const int n_first = v->n_past - keep + 1;
    memcpy(first, v->tokens + keep, sizeof(int32_t) * (size_t)(n_first - 1));
    first[n_first - 1] = v->last;
    int32_t cur = v->last;
    int i = 0;
    for (; i < k; i++) {
        if (i == 0 ? s->lm.eval(s->lm.ctx, first, n_first, s->logits, err)
                   : s->lm.eval(s->lm.ctx, &cur, 1, s->logits, err))
            break;
        if (s->q) {
            sampler_distribution(s->smp, s->logits, s->q + i * V);
            cur = sampler_draw(s->smp, s->q + i * V);
        } else {
            cur = sampler_sample(s->smp, s->logits);
        }
        pass->tokens[1 + i] = cur;
        sampler_accept(s->smp, cur);
    }
    sampler_rewind(s->smp, i);
    return i < k ? -1 : k;
}

static int draft_propose(void *state, const spec_view *v, int k, spec_pass *pass, err_t *err) {
    draft_state *s = state;
    const int room = v->n_ctx - v->n_past - 1; /* the last token takes one position */
    if (k > room) k = room;
    s->lm.enter(s->lm.ctx);
    const int got = draft_steps(s, v, k, pass, err);
    s->lm.leave(s->lm.ctx);
    if (got <= 0) return got;
    pass->tokens[0] = v->last;
    pass->k = got;
    pass->n = got + 1;
    pass->q = s->q;
    pass->tree = false;
    return pass->n;
}

static void draft_verified(void *state, const spec_pass *pass, const float *logits, int n_vocab, int accepted) {
    (void)state, (void)pass, (void)logits, (void)n_vocab, (void)accepted;
}

/* The draft reads the target's tokens at each proposal: nothing to keep. */
static err_code draft_push(void *state, const int32_t *tokens, int n, err_t *err) {
    (void)state, (void)tokens, (void)n, (void)err;
    return ERR_OK;
}

static void draft_stats(const void *state, spec_proposer_stats *out) {
    (void)state;
    *out = (spec_proposer_stats){0};
}

const proposer_ops proposer_draft = {
    .name = "draft", .needs_lm = true, .min_passes = 6,
    .create = draft_create, .propose = draft_propose, .verified = draft_verified,
    .push = draft_push, .stats = draft_stats, .free = draft_destroy,
};

const proposer_ops proposer_self = {
    .name = "self", .needs_lm = true, .min_passes = 6,
    .create = draft_create, .propose = draft_propose, .verified = draft_verified,
    .push = draft_push, .stats = draft_stats, .free = draft_destroy,
};
