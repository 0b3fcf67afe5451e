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
 *
 * Asked for trees (spec_setup.trees) it drafts a tree (tree.h) instead: the
 * same line of picks, and at each of its steps the next SPEC_TREE_RANKS - 1
 * candidates as the pick's siblings (the most probable when greedy, drawn
 * without replacement from the same distribution when sampled), each valued
 * by the acceptance measured so far (spec_calib); its budget (adaptive.h)
 * says how deep the line goes and how many nodes the pass verifies, from
 * the passes' times the generation loop reports (verified, plain). The
 * tree's entries in the draft's cache are the line's: the next proposal
 * keeps what of it the target accepted.
 *
 * With cores of its own (spec_setup.ahead), the draft goes on drafting the
 * pass's line while the target verifies it (ahead.h); when the target keeps
 * the whole line and picks the token the draft guessed after it, the next
 * proposal starts from those steps instead of running them.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "speculative/ahead.h"
#include "speculative/proposer.h"

typedef struct {
    spec_lm lm;
    sampler *smp;
    int n_vocab;
    float *logits;  /* [n_vocab] the draft's last logits */
    float *q;       /* [SPEC_MAX_K * n_vocab] sampled: the distributions drawn from */
    bool trees;          /* drafts trees (else a line of k) */
    spec_budget budget;  /* trees: how big (adaptive.h) */
    spec_calib calib;    /* trees: the acceptance measured by rank and draft probability */
    float *probs;        /* [n_vocab] trees: a step's distribution, or what is left of it */
    spec_ahead *ahead;   /* drafting beside verification, or NULL */
} draft_state;

static void draft_destroy(void *state) {
    draft_state *s = state;
    if (!s) return;
    spec_ahead_free(s->ahead); /* its thread first: it uses the rest */
    free(s->logits);
    free(s->q);
    free(s->probs);
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
    s->trees = su->trees;
    spec_budget_init(&s->budget, su->tree_nodes);
    if (s->trees) s->probs = malloc(sizeof(float) * (size_t)su->n_vocab);
    if (!s->logits || (su->sampled && !s->q) || (s->trees && !s->probs)) {
        draft_destroy(s);
        return err_set(err, ERR_NOMEM, "out of memory");
    }
    err_t aerr = {0}; /* without its thread (no memory, no thread) it drafts between passes */
    if (su->ahead && su->lm->own_cores)
        spec_ahead_new(su->lm, sampler_params_of(su->smp), su->n_vocab, &s->ahead, &aerr);
    *state = s;
    return ERR_OK;
}

/* The draft's cache brought to the target's sequence: what they share is
 * kept, a long gap (the prompt) goes first on its own, and the last few
 * tokens the draft lacks (the token the target chose itself, a draft it
 * never ran) are left in first[0..*n_first) with `last`, for the first step
 * to run in one batch, which costs a memory-bound draft about one step.
 * Returns -1 on an error. */
static int catch_up(draft_state *s, const spec_view *v, int32_t *first, int *n_first, err_t *err) {
    int keep = s->lm.common_prefix(s->lm.ctx, v->tokens, v->n_past);
    s->lm.truncate(s->lm.ctx, keep);
    keep = s->lm.common_prefix(s->lm.ctx, v->tokens, keep); /* a windowed draft may have had to start over */
    if (v->n_past - keep > SPEC_MAX_K) {
        if (s->lm.eval(s->lm.ctx, v->tokens + keep, v->n_past - SPEC_MAX_K - keep, s->logits, err)) return -1;
        keep = v->n_past - SPEC_MAX_K;
    }
    *n_first = v->n_past - keep + 1;
    memcpy(first, v->tokens + keep, sizeof(int32_t) * (size_t)(*n_first - 1));
    first[*n_first - 1] = v->last;
    return 0;
}

/* The draft at the target's sequence: the steps drafted beside the last
 * pass when they continue it (their entries are in the draft's cache:
 * nothing to truncate; *reused of them), else catch_up. */
static int begin(draft_state *s, const spec_view *v, int32_t *first, int *n_first, int *reused, err_t *err) {
    *reused = spec_ahead_take(s->ahead, v->n_past, v->last);
    if (*reused && s->lm.common_prefix(s->lm.ctx, v->tokens, v->n_past) == v->n_past) return 0;
    if (*reused) spec_ahead_count(s->ahead, 0);
    *reused = 0;
    return catch_up(s, v, first, n_first, err);
}

/* Step i of the draft's line: its logits after the first batch or cur, or
 * (i < reused) the step drafted beside the last pass: its logits (greedy)
 * or distribution (sampled, into q's row i), and *kept its pick. */
static err_code line_step(draft_state *s, int i, int reused, const int32_t *first, int n_first, int32_t cur,
                          int32_t *kept, err_t *err) {
    *kept = -1;
    if (i < reused) {
        const size_t V = (size_t)s->n_vocab;
        memcpy(s->q ? s->q + i * V : s->logits, spec_ahead_row(s->ahead, i), sizeof(float) * V);
        *kept = spec_ahead_pick(s->ahead, i);
        return ERR_OK;
    }
    return i == 0 ? s->lm.eval(s->lm.ctx, first, n_first, s->logits, err) : s->lm.eval(s->lm.ctx, &cur, 1, s->logits, err);
}

/* Draft beside the target's pass, from the line's last draft `from` at
 * position pos (ahead.h): as many steps as this proposal's line and one,
 * for the token after it. The draft's cache is cut back to end before pos
 * (a proposal shorter than the steps it reused). */
static void launch(draft_state *s, int32_t from, int pos, int depth) {
    if (!s->ahead) return;
    s->lm.truncate(s->lm.ctx, pos);
    spec_ahead_start(s->ahead, s->smp, from, pos, depth + 1);
}

/* k steps of the draft, one line from the target's last token. */
static int draft_steps(draft_state *s, const spec_view *v, int k, spec_pass *pass, err_t *err) {
    int32_t first[SPEC_MAX_K + 1];
    int n_first = 0, reused;
    if (begin(s, v, first, &n_first, &reused, err)) return -1;
    if (k > s->lm.n_ctx - v->n_past) k = s->lm.n_ctx - v->n_past; /* the steps take n_past .. n_past + k - 1 */
    if (k <= 0) return 0; /* no room in the draft's context: decode plainly */
    const size_t V = (size_t)s->n_vocab;
    int32_t cur = v->last, kept;
    int i = 0;
    for (; i < k; i++) {
        if (line_step(s, i, reused, first, n_first, cur, &kept, err)) break;
        if (s->q) {
            if (kept < 0) sampler_distribution(s->smp, s->logits, s->q + i * V);
            cur = kept >= 0 ? kept : sampler_draw(s->smp, s->q + i * V);
        } else {
            cur = kept >= 0 ? kept : sampler_sample(s->smp, s->logits); /* kept: the token its entry holds */
        }
        pass->tokens[1 + i] = cur;
        sampler_accept(s->smp, cur);
    }
    if (reused) spec_ahead_count(s->ahead, i < reused ? i : reused);
    if (i == k) launch(s, cur, v->n_past + k, k);
    sampler_rewind(s->smp, i);
    pass->draft_steps = i > reused ? i - reused : 0;
    return i < k ? -1 : k;
}

/* ---------------------------------------------------------------- trees */

/* Add to c a child of node `parent`, valued by the measured acceptance. */
static void add_candidate(draft_state *s, spec_candidates *c, int parent, int rank, int32_t tok, float prob,
                          const float *q) {
    const int i = c->n++;
    c->token[i] = tok;
    c->parent[i] = (int8_t)parent;
    c->rank[i] = (int8_t)rank;
    c->depth[i] = (int8_t)(c->depth[parent] + 1);
    c->prob[i] = prob;
    c->value[i] = c->value[parent] * spec_calib_estimate(&s->calib, rank, s->q ? -1.0f : prob); /* tree.h */
    c->q[i] = q;
}

/* The most probable token of p other than those zeroed, or -1. */
static int32_t top_of(const float *p, int n) {
    int32_t best = -1;
    for (int j = 0; j < n; j++)
        if (p[j] > 0.0f && (best < 0 || p[j] > p[best])) best = j;
    return best;
}

/* The children of node `parent` from the draft's logits at depth d: the
 * pick (rank 0, returned), then the next candidates. Greedy: the pick is
 * the sampler's, the others the most probable under the draft's softmax.
 * Sampled: all drawn without replacement from the sampler's distribution.
 * kept >= 0: the pick was made beside the last pass (the token its cache
 * entry holds), from these logits or, sampled, from q's row d. */
static int32_t expand(draft_state *s, spec_candidates *c, int parent, int d, int32_t kept) {
    const int V = s->n_vocab;
    float *p = s->probs;
    const float *q = NULL;
    int32_t pick;
    if (s->q) {
        float *qd = s->q + (size_t)d * V;
        if (kept < 0) sampler_distribution(s->smp, s->logits, qd);
        memcpy(p, qd, sizeof(float) * (size_t)V);
        pick = kept >= 0 ? kept : sampler_draw(s->smp, qd);
        q = qd;
    } else {
        pick = kept >= 0 ? kept : sampler_sample(s->smp, s->logits);
        float mx = s->logits[0];
        for (int j = 1; j < V; j++) mx = s->logits[j] > mx ? s->logits[j] : mx;
        double sum = 0.0;
        for (int j = 0; j < V; j++) sum += p[j] = expf(s->logits[j] - mx);
        for (int j = 0; j < V; j++) p[j] = (float)(p[j] / sum);
    }
    add_candidate(s, c, parent, 0, pick, p[pick], q);
    p[pick] = 0.0f;
    for (int r = 1; r < SPEC_TREE_RANKS; r++) {
        const int32_t x = q ? sampler_draw(s->smp, p) : top_of(p, V);
        if (x < 0) break;
        add_candidate(s, c, parent, r, x, q ? q[x] : p[x], q);
        p[x] = 0.0f;
    }
    return pick;
}

/* Draft the line with its candidates into c, up to depth: *steps taken,
 * *reused of them drafted beside the last pass (accepted into the sampler:
 * the caller rewinds them). */
static err_code draft_line(draft_state *s, const spec_view *v, int depth, spec_candidates *c, int *steps, int *reused,
                           err_t *err) {
    int32_t first[SPEC_MAX_K + 1], kept;
    int n_first = 0, line = 0;
    *steps = 0;
    if (begin(s, v, first, &n_first, reused, err)) return err->code ? err->code : ERR_UNSUPPORTED;
    err_code rc = ERR_OK;
    int32_t cur = v->last;
    for (int d = 0; d < depth && c->n + SPEC_TREE_RANKS <= SPEC_TREE_MAX; d++) {
        if ((rc = line_step(s, d, *reused, first, n_first, cur, &kept, err))) break;
        const int at = c->n;
        cur = expand(s, c, line, d, kept);
        line = at;
        sampler_accept(s->smp, cur);
        *steps = d + 1;
        if (d + 1 >= *reused && !spec_budget_deeper(&s->budget, c->value[line])) break;
    }
    return rc;
}

/* Draft a line with its candidates, then choose the tree the budget pays
 * for, and draft beside its verification from the end of its line. */
static int draft_tree(draft_state *s, const spec_view *v, int room, spec_pass *pass, err_t *err) {
    int depth = spec_budget_depth(&s->budget);
    if (depth > s->lm.n_ctx - v->n_past) depth = s->lm.n_ctx - v->n_past;
    if (depth > room) depth = room;
    if (depth <= 0) return 0;
    spec_candidates c = {.n = 1, .token = {v->last}, .parent = {-1}, .prob = {1.0f}, .value = {1.0f}};
    int d, reused;
    const err_code rc = draft_line(s, v, depth, &c, &d, &reused, err);
    if (reused) spec_ahead_count(s->ahead, d < reused ? d : reused);
    pass->draft_steps = d > reused ? d - reused : 0;
    if (rc) {
        sampler_rewind(s->smp, d);
        return -1;
    }
    spec_tree chosen;
    spec_tree_select(&c, SPEC_TREE_MAX - 1, &chosen);
    int n = spec_budget_choose(&s->budget, &chosen);
    spec_tree_truncate(&chosen, (n < room ? n : room) + 1);
    spec_tree_layout(&chosen, &pass->dt, pass->anc);
    const int line = spec_tree_line(&pass->dt); /* the budget may have cut the line short of d */
    sampler_rewind(s->smp, d - line);          /* the window with the line accepted, as verified */
    if (line > 0) launch(s, pass->dt.token[line], v->n_past + line, line);
    sampler_rewind(s->smp, line);
    return spec_tree_keep_exact(&pass->dt, pass->anc, v->tile_phases, v->tile);
}

static int propose_tree(draft_state *s, const spec_view *v, int room, spec_pass *pass, err_t *err) {
    s->lm.enter(s->lm.ctx);
    const int n = draft_tree(s, v, room, pass, err);
    s->lm.leave(s->lm.ctx);
    if (n <= 1) return n < 0 ? -1 : 0;
    memcpy(pass->tokens, pass->dt.token, sizeof(int32_t) * (size_t)n);
    for (int i = 0; i < n; i++) pass->rows[i] = i;
    pass->n = pass->n_rows = n;
    pass->k = n - 1;
    pass->q = NULL;
    pass->tree = pass->draft_tree = true;
    return n;
}

static int draft_propose(void *state, const spec_view *v, int k, spec_pass *pass, err_t *err) {
    draft_state *s = state;
    const int room = v->n_ctx - v->n_past - 1; /* the last token takes one position */
    if (s->trees) return propose_tree(s, v, room, pass, err);
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

/* A tree's verification is what its values are measured by. The steps
 * drafted beside it are kept when the target kept the whole line (a tree's
 * is its first nodes) and chose the token the draft guessed after it. The
 * budget measures the pass with the time spent here: with cores of its own,
 * the draft's (waiting for its steps beside the pass), else verification's
 * bookkeeping. */
static void draft_verified(void *state, const spec_pass *pass, const spec_outcome *o) {
    draft_state *s = state;
    const uint64_t t0 = clock_ns();
    if (pass->draft_tree) spec_calib_update(&s->calib, &pass->dt, o->path, o->accepted, !s->q);
    if (s->ahead) {
        const int line = pass->draft_tree ? spec_tree_line(&pass->dt) : pass->k;
        spec_ahead_settle(s->ahead, o->accepted == line && o->path[o->accepted] == o->accepted, o->next);
    }
    if (!pass->draft_tree) return; /* a line's length is the generation loop's (adaptive.h: spec_length) */
    const double here = (double)(clock_ns() - t0) / 1e6;
    const bool beside = s->lm.own_cores;
    spec_budget_measured(&s->budget, pass->n, o->verify_ms + (beside ? 0.0 : here), pass->draft_steps, o->draft_ms,
                         o->wait_ms + (beside ? here : 0.0), o->accepted + 1);
}

/* A plain pass: the cost of one token, that a tree's must beat. */
static void draft_plain(void *state, double ms) {
    draft_state *s = state;
    if (s->trees) spec_budget_measured(&s->budget, 1, ms, 0, 0.0, 0.0, 1);
}

static void draft_halt(void *state) { spec_ahead_halt(((draft_state *)state)->ahead); }
static bool draft_guess(void *state, spec_guess *out) { return spec_ahead_guess(((draft_state *)state)->ahead, out); }

/* The draft reads the target's tokens at each proposal: nothing to keep. */
static err_code draft_push(void *state, const int32_t *tokens, int n, err_t *err) {
    (void)state, (void)tokens, (void)n, (void)err;
    return ERR_OK;
}

static void draft_stats(const void *state, spec_proposer_stats *out) {
    *out = (spec_proposer_stats){0};
    spec_ahead_counts(((const draft_state *)state)->ahead, &out->ahead_used, &out->ahead_dropped);
}

const proposer_ops proposer_draft = {
    .name = "draft", .needs_lm = true, .trees = true, .min_passes = 6,
    .create = draft_create, .propose = draft_propose, .verified = draft_verified, .plain = draft_plain,
    .halt = draft_halt,
    .guess = draft_guess,
    .push = draft_push, .stats = draft_stats, .free = draft_destroy,
};

const proposer_ops proposer_self = {
    .name = "self", .needs_lm = true, .trees = true, .min_passes = 6,
    .create = draft_create, .propose = draft_propose, .verified = draft_verified, .plain = draft_plain,
    .halt = draft_halt,
    .guess = draft_guess,
    .push = draft_push, .stats = draft_stats, .free = draft_destroy,
};
