/*
 * generate — see generate.h.
 *
 * The loop, per call of gen_next():
 *   prefill (first call only) -> logits of the last prompt token
 *   repeat: [decode the previous token -> logits] sample -> end of turn? stop
 *           append the token's bytes to the pending buffer
 *           return the complete characters, if any
 * Decoding the previous token happens at the start of the next call, so a
 * piece is returned as soon as it is sampled and cancel takes effect before
 * any further model work.
 */
#include "generate.h"

#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "speculative/adaptive.h"
#include "speculative/proposer.h"
#include "speculative/verify.h"

#define PREFILL_CHUNK 256
/* the most rows a verify pass returns: a line and lookahead's window, or a tree */
#define VERIFY_ROWS (SPEC_TREE_MAX > SPEC_MAX_K + 1 + LOOKAHEAD_MAX_W ? SPEC_TREE_MAX : SPEC_MAX_K + 1 + LOOKAHEAD_MAX_W)
#define PENDING_MAX 512 /* the pending buffer's first size */

/* The draft model as a proposer sees it (speculative/proposer.h: spec_lm):
 * its session; with threads of its own (the efficiency cores of a CPU with
 * two classes, or cores set aside by draft_threads: runtime/plan.h,
 * bundle.c) it computes there, where the calling thread moves for a
 * proposal and the proposer's own thread stays (own_cores, pin). */
typedef struct {
    spec_lm lm;
    session *s;
    tpool_affinity prev;
} draft_lm;

static int lm_common_prefix(void *c, const int32_t *t, int n) { return session_common_prefix(((draft_lm *)c)->s, t, n); }
static void lm_truncate(void *c, int n) { session_truncate(((draft_lm *)c)->s, n); }
static err_code lm_eval(void *c, const int32_t *t, int n, float *logits, err_t *err) {
    return session_eval(((draft_lm *)c)->s, t, n, false, logits, err);
}
static void lm_enter(void *c) { tpool_pin_caller(((draft_lm *)c)->s->pool, &((draft_lm *)c)->prev); }
static void lm_leave(void *c) { tpool_unpin_caller(&((draft_lm *)c)->prev); }
static void lm_pin(void *c) {
    tpool_affinity for_good;
    tpool_pin_caller(((draft_lm *)c)->s->pool, &for_good);
}

/* own_cores: the draft's threads are not the target's (runtime/plan.h). */
static void draft_lm_init(draft_lm *d, session *s, const session *target) {
    d->s = s;
    d->lm = (spec_lm){.ctx = d, .n_ctx = s->n_ctx, .common_prefix = lm_common_prefix, .truncate = lm_truncate,
                      .eval = lm_eval, .enter = lm_enter, .leave = lm_leave, .own_cores = s->pool != target->pool,
                      .pin = lm_pin};
}

/* When a speculative step's parts ended: it began at t0, its proposal was
 * ready at t1, its verification done at t2 (the accepted entries kept, the
 * proposer told), of which `wait` waiting for the draft's steps beside it
 * (speculative/ahead.h: drafting, not verifying). */
typedef struct {
    double t0, t1, t2, wait;
} step_times;

struct generation {
    session *s;
    const tokenizer *tok;
    sampler *smp;
    grammar_match *gm;      /* the grammar's state (NULL: free text); the sampler's constraint */
    gen_token_lp *lp;       /* [max_tokens] p.logprobs > 0: each generated token's log-probabilities */
    gen_params p;
    int32_t *prompt;
    int n_prompt;
    int prompt_end;         /* positions the prompt took in the cache (fewer than n_prompt after SpecPC) */
    float *logits;          /* [n_vocab] logits for the next sample */
    bool prefilled;
    int prefill_at;         /* the prompt's next token to evaluate (-1: the prompt not begun) */
    int prefill_keep;       /* tokens of it the cache already held */
    bool prefill_draft;     /* the prompt goes with the draft, in one call (runtime/prefill.h) */
    bool need_decode;       /* last sampled token not yet fed to the model */
    int32_t last;
    int n_generated;
    atomic_int n_published; /* n_generated, readable from any thread */
    int32_t *out_ids;       /* [max_tokens] generated ids */
    gen_stop stop;
    bool flushed;
    atomic_bool cancel;
    err_t err;
    char *pending;          /* [pending_cap] bytes not yet returned */
    int n_pending, pending_cap;
    char *piece;            /* [pending_cap + 1] */
    int piece_size;
    double t_start, t_prefill_end, t_decode_total;
    gen_stats stats;
    /* token latency (gen_stats.latency): the decode work since the last token
     * delivered, and each delivered token's share of it */
    double since_token_ms;
    lat_rec lat;
    /* speculative decoding */
    bool spec_on;             /* a proposer was made (g->p.proposer): speculating */
    void *prop;               /* its state (NULL for one that keeps none) */
    spec_pass pass;           /* the pass it laid out */
    draft_lm lm;              /* the draft model, for a proposer that needs one */
    int proposing_steps;      /* verify passes that had a draft */
    float *vlogits;           /* [VERIFY_ROWS * n_vocab] a verify pass's logits */
    int32_t queue[SPEC_MAX_K + 1]; /* tokens of a verify pass not yet returned: the accepted drafts
                                      (their entries are cached), then the token after them (not yet) */
    int q_head, q_n;
    spec_length len;          /* the draft length (speculative/adaptive.h) */
    bool trees;               /* the proposer drafts trees (their size is its own: adaptive.h, spec_budget) */
    float *scratch;           /* [3 * n_vocab] for verification */
    int decode_passes;        /* plain and verify passes so far */
    double plain_ms;          /* time of the plain passes (the baseline speculation must beat) */
    bool spec_off;            /* switched off: slower than plain decoding here */
    /* verify passes in shared steps (runtime/batch.h): their times are a
     * batch's, so the judge of speculation alone (timing_of) leaves them out */
    step_times shared_t;      /* the pass proposed for the step under way */
    int shared_steps, shared_accepted, shared_proposing;
    double shared_ms;
    /* a shared step runs on another stream's thread: what it finds is kept
     * here for the generation's own gen_next to act on, since its error and
     * stop reason are read without the model's lock, and its progress
     * callback is its caller's */
    err_t shared_err;
    bool shared_failed;
    int prefill_reported;     /* prompt tokens on_prefill has been told of */
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The proposer and the buffers a verify pass needs. */
static err_code spec_start(generation *g, const int32_t *prompt, int n_prompt, err_t *err) {
    const gen_params *p = &g->p;
    const int n_vocab = g->s->m->hp.n_vocab;
    if (p->spec_k < 0 || p->spec_k > SPEC_MAX_K)
        return err_set(err, ERR_INVALID_ARG, "draft length %d is outside 0..%d", p->spec_k, SPEC_MAX_K);
    if (p->spec_tree < -1 || p->spec_tree >= SPEC_TREE_MAX)
        return err_set(err, ERR_INVALID_ARG, "tree size %d is outside -1..%d", p->spec_tree, SPEC_TREE_MAX - 1);
    if (p->spec_ahead < -1 || p->spec_ahead > 0)
        return err_set(err, ERR_INVALID_ARG, "spec_ahead %d is neither 0 (on) nor -1 (off)", p->spec_ahead);
    if (p->proposer->needs_lm && (!p->draft || p->draft->m->hp.n_vocab != n_vocab))
        return err_set(err, ERR_INVALID_ARG, "draft speculation needs a draft model with the same vocabulary");
    if (!(g->vlogits = malloc(sizeof(float) * (size_t)VERIFY_ROWS * n_vocab)) ||
        !(g->scratch = malloc(sizeof(float) * 3 * (size_t)n_vocab)))
        return err_set(err, ERR_NOMEM, "out of memory");
    if (p->proposer->needs_lm) draft_lm_init(&g->lm, p->draft, g->s);
    g->trees = p->proposer->trees && spec_trees_pay(p->spec_tree, p->spec_k, p->sampling.temperature != 0.0f);
    const spec_setup su = {.n_vocab = n_vocab, .n_ctx = g->s->n_ctx, .prompt = prompt, .n_prompt = n_prompt,
                           .smp = g->smp, .sampled = p->sampling.temperature != 0.0f,
                           .lm = p->proposer->needs_lm ? &g->lm.lm : NULL, .lookahead = p->lookahead,
                           .trees = g->trees, .tree_nodes = p->spec_tree > 0 ? p->spec_tree : 0,
                           .ahead = p->spec_ahead >= 0};
    err_code rc = p->proposer->create(&su, &g->prop, err);
    if (rc) return rc;
    g->spec_on = true;
    spec_length_init(&g->len, p->spec_k);
    g->stats.spec_k = g->len.k;
    g->stats.spec_proposer = p->proposer->name;
    return ERR_OK;
}

static void gm_mask(void *m, float *logits) { grammar_match_mask(m, logits); }
static bool gm_allows(void *m, int32_t t) { return grammar_match_allows(m, t); }
static void gm_accept(void *m, int32_t t) { grammar_match_accept(m, t); }
static void gm_rewind(void *m, int n) { grammar_match_rewind(m, n); }

/* The grammar's state; it becomes the sampler's constraint once the prompt
 * is in the sampler's penalty window (prefilled): the prompt is not text the
 * grammar reads. */
static err_code grammar_start(generation *g, err_t *err) {
    if (!g->p.grammar) return ERR_OK;
    if (!g->p.grammar_vocab) return err_set(err, ERR_INVALID_ARG, "a grammar without its vocabulary");
    return grammar_match_new(g->p.grammar, g->p.grammar_vocab, &g->gm, err);
}

static void constrain(generation *g) {
    if (g->gm) sampler_constrain(g->smp, &(sampler_constraint){g->gm, gm_mask, gm_allows, gm_accept, gm_rewind});
}

err_code gen_start(session *s, const tokenizer *tok, const int32_t *prompt, int n_prompt, const gen_params *p,
                   generation **out, err_t *err) {
    *out = NULL;
    if (n_prompt <= 0) return err_set(err, ERR_INVALID_ARG, "the prompt is empty");
    if (p->max_tokens < 0) return err_set(err, ERR_INVALID_ARG, "max_tokens must be 0 or more, not %d", p->max_tokens);
    if (n_prompt >= s->n_ctx)
        return err_set(err, ERR_CONTEXT_FULL, "the prompt has %d tokens; the context holds %d (one is needed to reply)",
                       n_prompt, s->n_ctx);
    const int n_vocab = s->m->hp.n_vocab;
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= n_vocab)
            return err_set(err, ERR_INVALID_ARG, "prompt token %d is %d, outside the vocabulary of %d", i, prompt[i],
                           n_vocab);
    generation *g = calloc(1, sizeof *g);
    if (!g) return err_set(err, ERR_NOMEM, "out of memory");
    g->s = s;
    g->tok = tok;
    g->p = *p;
    g->n_prompt = n_prompt;
    g->last = -1;
    g->prefill_at = -1;
    atomic_init(&g->cancel, false);
    atomic_init(&g->n_published, 0);
    g->prompt = malloc(sizeof(int32_t) * (size_t)n_prompt);
    g->logits = malloc(sizeof(float) * (size_t)n_vocab);
    int max_out = p->max_tokens < s->n_ctx ? p->max_tokens : s->n_ctx;
    if (max_out < 1) max_out = 1; /* max_tokens 0: the prompt is read, nothing generated */
    g->out_ids = malloc(sizeof(int32_t) * (size_t)max_out);
    lat_init(&g->lat, max_out); /* grows as tokens come; without memory its figures are unknown */
    g->pending_cap = PENDING_MAX; /* grown for a longer piece (grow_pending) */
    g->pending = malloc(PENDING_MAX);
    g->piece = malloc(PENDING_MAX + 1);
    err_code rc = !g->prompt || !g->logits || !g->out_ids || !g->pending || !g->piece
                      ? err_set(err, ERR_NOMEM, "out of memory")
                      : ERR_OK;
    if (!rc) rc = prefill_check(s, p->draft, &p->prefill, err);
    if (!rc) rc = sampler_new(&p->sampling, n_vocab, &g->smp, err);
    if (!rc && p->logprobs > 0 && (p->proposer || p->logprobs > GEN_MAX_TOP + 1))
        rc = err_set(err, ERR_INVALID_ARG, "log-probabilities are kept without speculation, with at most %d alternatives",
                     GEN_MAX_TOP);
    if (!rc && p->logprobs > 0 && !(g->lp = malloc(sizeof *g->lp * (size_t)max_out)))
        rc = err_set(err, ERR_NOMEM, "out of memory");
    if (!rc) rc = grammar_start(g, err);
    if (!rc && p->proposer) rc = spec_start(g, prompt, n_prompt, err);
    if (rc) {
        gen_free(g);
        return rc;
    }
    memcpy(g->prompt, prompt, sizeof(int32_t) * (size_t)n_prompt);
    g->stats.prompt_tokens = n_prompt;
    g->t_start = now_ms();
    *out = g;
    return ERR_OK;
}

void gen_free(generation *g) {
    if (!g) return;
    if (g->spec_on) g->p.proposer->free(g->prop);
    sampler_free(g->smp);
    grammar_match_free(g->gm);
    free(g->lp);
    free(g->vlogits);
    free(g->scratch);
    free(g->prompt);
    free(g->logits);
    free(g->out_ids);
    free(g->pending);
    free(g->piece);
    lat_free(&g->lat);
    free(g);
}

void gen_cancel(generation *g) {
    if (g) atomic_store(&g->cancel, true);
}

gen_stop gen_stop_reason(const generation *g) { return g->stop; }
const err_t *gen_error(const generation *g) { return &g->err; }
gen_stats gen_get_stats(const generation *g) {
    gen_stats st = g->stats;
    if (g->spec_on) g->p.proposer->stats(g->prop, &st.proposer);
    st.latency = lat_summarize(&g->lat);
    return st;
}
int32_t gen_last_token(const generation *g) { return g->last; }
void gen_add_wait(generation *g, double ms) {
    if (!g || g->n_generated == 0 || !(ms > 0)) return;
    g->t_decode_total += ms;
    g->since_token_ms += ms;
    g->stats.decode_ms = g->t_decode_total;
}

int gen_piece_size(const generation *g) { return g->piece_size; }

int gen_token_count(generation *g) { return atomic_load_explicit(&g->n_published, memory_order_acquire); }

/* The log-probabilities of tok under logits (their log-softmax) and the k likeliest tokens. */
static void logprob_of(const float *logits, int n_vocab, int32_t tok, int k, gen_token_lp *out) {
    float mx = -INFINITY;
    for (int i = 0; i < n_vocab; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0.0;
    for (int i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - mx);
    const float lse = mx + (float)log(sum);
    *out = (gen_token_lp){.token = tok, .logprob = logits[tok] - lse, .n_top = 0};
    for (int32_t i = 0; i < n_vocab && k > 0; i++) { /* insertion into the best k, ties to the lower id */
        if (out->n_top == k && !(logits[i] > out->top_logprob[k - 1])) continue;
        int j = out->n_top < k ? out->n_top++ : k - 1;
        for (; j > 0 && logits[i] > out->top_logprob[j - 1]; j--)
            out->top_logprob[j] = out->top_logprob[j - 1], out->top_token[j] = out->top_token[j - 1];
        out->top_logprob[j] = logits[i], out->top_token[j] = i;
    }
    for (int j = 0; j < out->n_top; j++) out->top_logprob[j] -= lse;
}

bool gen_logprob(const generation *g, int i, gen_token_lp *out) {
    if (!g->lp || i < 0 || i >= g->n_generated) return false;
    *out = g->lp[i];
    return true;
}

const int32_t *gen_tokens(const generation *g, int *n) {
    *n = g->n_generated;
    return g->out_ids;
}

static void fail(generation *g, gen_stop why) {
    g->stop = why;
    if (why == GEN_STOP_ERROR && g->err.code == ERR_OK) g->err.code = ERR_UNSUPPORTED;
}

/* A draft that may be drafting beside the target's pass (speculative/ahead.h). */
static bool draft_beside(const generation *g) { return g->p.proposer->needs_lm && g->lm.lm.own_cores; }

/* The pass's entries are kept (at t->t2): tell the proposer what it came to
 * and cost. Its time in verified() is the step's too; with a draft beside,
 * drafting's (it waits for the draft's steps). */
static void tell_proposer(generation *g, const spec_pass *pass, int a, const int *path, int32_t next, step_times *t) {
    const spec_outcome o = {.logits = g->vlogits, .n_vocab = g->s->m->hp.n_vocab, .accepted = a, .path = path,
                            .next = next, .draft_ms = t->t1 - t->t0, .verify_ms = t->t2 - t->t1 - t->wait,
                            .wait_ms = t->wait};
    g->p.proposer->verified(g->prop, pass, &o);
    const double done = now_ms();
    if (draft_beside(g)) t->wait += done - t->t2;
    t->t2 = done;
}

/* A verify pass is done: queue the a accepted drafts and the token after
 * them, and count. */
static void verified(generation *g, const spec_pass *pass, const int32_t *drafts, int a, int32_t next,
                     const int *path, step_times t, bool shared) {
    memcpy(g->queue, drafts, sizeof(int32_t) * (size_t)a);
    g->queue[a] = next;
    g->q_head = 0;
    g->q_n = a + 1;
    const double dt = t.t2 - t.t0;
    g->t_decode_total += dt;
    g->since_token_ms += dt;
    g->stats.decode_ms = g->t_decode_total;
    g->stats.spec_ms += dt;
    g->stats.spec_draft_ms += t.t1 - t.t0 + t.wait;
    g->stats.spec_steps++;
    if (g->p.on_step && !shared) g->p.on_step(g->p.step_user, dt, a + 1); /* a batch's time is not one token's */
    g->stats.spec_proposed += pass->k;
    g->stats.spec_accepted += a;
    if (pass->k > 0) g->proposing_steps++;
    if (shared) {
        g->shared_steps++;
        g->shared_accepted += a;
        g->shared_proposing += pass->k > 0;
        g->shared_ms += dt;
    }
    if (pass->draft_tree) {
        g->stats.spec_tree_passes++;
        g->stats.spec_off_line += a > 0 && path[a] != a;
        g->stats.spec_k = pass->k;
        return;
    }
    spec_length_update(&g->len, pass->k, a);
    g->stats.spec_k = g->len.k;
}

/* Verify the pass the target has run: the drafts accepted into drafts[],
 * the batch positions kept into path[0..a] (the pass's first, then a line
 * of the tree, or the first a + 1 of a line), the token after into *next
 * (sampled, after a line: coupled to the proposer's guess, if it has one);
 * *wait: the time spent waiting on the proposer (its draft beside). */
static int verify_pass(generation *g, const spec_pass *pass, int32_t *drafts, int *path, int32_t *next, double *wait) {
    const int V = g->s->m->hp.n_vocab;
    int a;
    const double t = now_ms();
    *wait = 0.0;
    if (pass->draft_tree) {
        a = spec_verify_tree(g->smp, g->vlogits, V, &pass->dt, g->scratch, path, next);
        for (int i = 0; i < a; i++) drafts[i] = pass->tokens[path[i + 1]];
    } else {
        spec_guess guess;
        const bool guessed = pass->q && g->p.proposer->guess && g->p.proposer->guess(g->prop, &guess);
        if (draft_beside(g)) *wait = now_ms() - t;
        a = spec_verify_guess(g->smp, g->vlogits, V, pass->tokens + 1, pass->q, pass->k, guessed ? &guess : NULL,
                              g->scratch, next);
        memcpy(drafts, pass->tokens + 1, sizeof(int32_t) * (size_t)a);
        for (int i = 0; i <= a; i++) path[i] = i;
    }
    return a;
}

/* The proposer lays out the step's pass (the last token, its drafts, any
 * branches, or a draft tree): its tokens, 0 when it has nothing, -1 when it
 * failed (g->err). t gets its start and the proposal's end. */
static int propose_pass(generation *g, int k, step_times *t, err_t *err) {
    session *s = g->s;
    spec_pass *pass = &g->pass;
    /* A pass's rows all see the cache as committed before it. They end before the commit that
     * would re-lay a block at a colder tier (session_exact_rows), and so does what the pass
     * commits: entries taken back after it (past a stop) never aged the cache meanwhile. */
    int rows = s->n_ctx - s->n_past;
    const int exact = session_exact_rows(s);
    if (exact != INT_MAX && exact - 1 < rows) rows = exact - 1;
    if (rows < 2) return 0; /* no room for a draft: the step decodes one token */
    spec_view v = {.tokens = s->tokens, .n_past = s->n_past, .last = g->last, .n_ctx = s->n_past + rows};
    if (g->trees) v.tile_phases = session_tile_phases(s, &v.tile); /* only a tree needs them */
    pass->draft_tree = false;
    pass->draft_steps = 0;
    *t = (step_times){.t0 = now_ms()}; /* drafting counts as speculation's cost */
    const int n = g->p.proposer->propose(g->prop, &v, g->trees ? 0 : k, pass, err);
    t->t1 = now_ms();
    return n;
}

/* The target ran the pass with its entries tentative: the drafts it agrees
 * with are kept and the rest of the entries rolled back
 * (session_accept_path: the one place the tentative region is repaired),
 * and the proposer hears what the pass came to and cost. false: failed. */
static bool settle(generation *g, int n, step_times *t, bool shared, err_t *err) {
    const spec_pass *pass = &g->pass;
    int32_t next, drafts[SPEC_MAX_K + 1];
    int path[SPEC_TREE_MAX > SPEC_MAX_K + 1 ? SPEC_TREE_MAX : SPEC_MAX_K + 1];
    const int a = verify_pass(g, pass, drafts, path, &next, &t->wait);
    if (session_accept_path(g->s, pass->tokens, n, path, a + 1, err)) {
        if (g->p.proposer->halt) g->p.proposer->halt(g->prop);
        return false;
    }
    t->t2 = now_ms();
    tell_proposer(g, pass, a, path, next, t);
    verified(g, pass, drafts, a, next, path, *t, shared);
    return true;
}

/* One speculative step: propose, run the pass, settle. Returns false when
 * the proposer has nothing this step (decode one token instead). */
static bool speculate(generation *g, bool *ok) {
    spec_pass *pass = &g->pass;
    step_times t;
    const int n = propose_pass(g, g->len.k, &t, &g->err);
    if (n < 0) { /* the draft model failed: an error like any other */
        *ok = false;
        return true;
    }
    if (n == 0) return false;
    *ok = false;
    if (pass->tree ? session_eval_tree(g->s, pass->tokens, n, pass->anc, pass->rows, pass->n_rows, g->vlogits, &g->err)
                   : session_eval_tentative(g->s, pass->tokens, n, g->vlogits, &g->err)) {
        if (g->p.proposer->halt) g->p.proposer->halt(g->prop); /* nothing may run on once the pass is abandoned */
        return true;
    }
    *ok = settle(g, n, &t, false, &g->err);
    return true;
}

/* The timings speculation is judged by (speculative/adaptive.h). */
static spec_timing timing_of(const generation *g) {
    return (spec_timing){.verify_passes = g->stats.spec_steps - g->shared_steps,
                         .proposing_passes = g->proposing_steps - g->shared_proposing,
                         .accepted = g->stats.spec_accepted - g->shared_accepted,
                         .spec_ms = g->stats.spec_ms - g->shared_ms, .plain_passes = g->stats.decode_evals,
                         .plain_ms = g->plain_ms};
}

/* Speculation must pay (speculative/adaptive.h); once off it stays off, and
 * the stats say why. A fixed draft length is an experiment: it runs as asked. */
static void check_speed(generation *g) {
    if (g->spec_off || g->p.spec_k || g->p.spec_tree > 0) return;
    const spec_timing t = timing_of(g);
    if (spec_stop(&t, g->p.proposer->min_passes, &g->stats.spec_ms_per_token, &g->stats.plain_ms_per_token)) {
        g->spec_off = true;
        g->stats.spec_off = 1;
    }
}

static void prefilled(generation *g, int evaluated) {
    g->prompt_end = g->s->n_past;
    for (int i = 0; i < g->n_prompt; i++) sampler_accept(g->smp, g->prompt[i]);
    constrain(g); /* from here on, a draft drafts under it too (it shares the sampler) */
    g->t_prefill_end = now_ms();
    g->stats.prefill_tokens = evaluated;
    g->stats.prefill_ms = g->t_prefill_end - g->t_start;
}

/* The prompt's new part with the draft model reading it first (SpecKV,
 * SpecPC: runtime/prefill.h), in one call: cancel is honoured before it. */
static bool prefill_with_draft(generation *g, int keep) {
    if (atomic_load(&g->cancel)) {
        fail(g, GEN_STOP_CANCELLED);
        return false;
    }
    const int n = g->n_prompt - keep;
    if (prefill_run(g->s, g->p.draft, g->prompt + keep, n, &g->p.prefill, g->logits, &g->stats.pre, &g->err)) {
        fail(g, GEN_STOP_ERROR);
        return false;
    }
    if (g->p.on_prefill) g->p.on_prefill(g->p.user, n, n);
    prefilled(g, n - g->stats.pre.prompt_dropped);
    return true;
}

/* The prompt begins: the prefix the cache already holds is kept. */
static void prefill_begin(generation *g) {
    session *s = g->s;
    int keep = session_common_prefix(s, g->prompt, g->n_prompt);
    if (keep == g->n_prompt) keep--; /* the last token must run again to give logits */
    keep = session_reusable(s, keep); /* entries the last generation aged are computed again */
    /* a compressed prompt is chosen whole: part of an older one, kept, would compress the rest alone */
    if (g->p.prefill.compress > 0.0f && g->p.prefill.compress < 1.0f && keep < s->n_past) keep = 0;
    session_truncate(s, keep);
    g->prefill_at = g->prefill_keep = keep;
    g->prefill_draft = prefill_uses_draft(s, g->p.draft, g->n_prompt - keep, &g->p.prefill);
}

/* The prompt's progress to on_prefill, on the generation's own thread. */
static void report_prefill(generation *g) {
    const int done = g->prefill_at - g->prefill_keep;
    if (!g->p.on_prefill || g->prefill_at < 0 || done <= g->prefill_reported || g->prefill_draft) return;
    g->prefill_reported = done;
    g->p.on_prefill(g->p.user, done, g->n_prompt - g->prefill_keep);
}

/* n more tokens of the prompt are in the cache (their last's logits in g->logits). */
static void prefill_advanced(generation *g, int n) {
    g->prefill_at += n;
    const int keep = g->prefill_keep;
    if (g->prefill_at < g->n_prompt) return;
    prefilled(g, g->n_prompt - keep);
    g->prefilled = true;
}

/* The prompt's next chunk (PREFILL_CHUNK tokens, as a shared step also cuts it); false when the generation
 * stopped (cancelled, or failed: g->err). */
static bool prefill_chunk(generation *g) {
    if (atomic_load(&g->cancel)) {
        fail(g, GEN_STOP_CANCELLED);
        return false;
    }
    const int i = g->prefill_at, n = g->n_prompt - i < PREFILL_CHUNK ? g->n_prompt - i : PREFILL_CHUNK;
    if (session_eval(g->s, g->prompt + i, n, false, g->logits, &g->err)) {
        fail(g, GEN_STOP_ERROR);
        return false;
    }
    prefill_advanced(g, n);
    report_prefill(g);
    return true;
}

/* Evaluate the rest of the prompt (a shared step may have done some of it: gen_want_rows). */
static bool prefill(generation *g) {
    if (g->prefill_at < 0) prefill_begin(g);
    if (g->prefill_draft) {
        if (!prefill_with_draft(g, g->prefill_keep)) return false;
        g->prefilled = true;
        return true;
    }
    while (g->prefill_at < g->n_prompt)
        if (!prefill_chunk(g)) return false;
    return true;
}

bool gen_prefill_step(generation *g) {
    if (g->prefilled || g->stop != GEN_RUNNING) return false;
    if (g->prefill_at < 0) prefill_begin(g);
    if (g->prefill_draft || g->prefill_at >= g->n_prompt) return false; /* the draft reads it whole, in gen_next */
    tpool_affinity prev;
    tpool_pin_caller(g->s->pool, &prev);
    const bool ok = prefill_chunk(g);
    tpool_unpin_caller(&prev);
    return ok && g->prefill_at < g->n_prompt;
}

/* The drafts a verify pass of at most `rows` rows may hold (0: none):
 * a line's, cut to fit; a tree's or lookahead's window, whole or not at all. */
static int verify_drafts(const generation *g, int rows) {
    if (g->trees) return SPEC_TREE_MAX <= rows ? SPEC_TREE_MAX - 1 : 0;
    if (g->p.proposer == &proposer_lookahead) return SPEC_MAX_PASS <= rows ? g->len.k : 0;
    return g->len.k < rows - 1 ? g->len.k : rows - 1;
}

/* Speculation may go into a shared step: it is on, its draft does not
 * draft beside verification (that takes the draft's cores, one pass at a
 * time), and its pass fits. */
static bool can_verify(const generation *g, int rows) {
    return g->spec_on && !g->spec_off && !draft_beside(g) && verify_drafts(g, rows) > 0;
}

bool gen_spec_outlook(const generation *g, int verify_rows, double *accepted, int *k) {
    if (!can_verify(g, verify_rows)) return false;
    *accepted = (double)(g->stats.spec_accepted + 1) / (double)(g->stats.spec_steps + 1);
    *k = g->trees ? (g->stats.spec_k > 0 ? g->stats.spec_k : SPEC_TREE_MAX - 1) : verify_drafts(g, verify_rows);
    return true;
}

/* A verify pass of at most `rows` rows for the step, into r; false when the
 * proposer has nothing (or failed: then g stopped). */
static bool want_verify(generation *g, int rows, gen_rows *r) {
    const int n = propose_pass(g, verify_drafts(g, rows), &g->shared_t, &g->shared_err);
    g->shared_failed = n < 0; /* gen_next stops it */
    if (n <= 0) return false;
    const spec_pass *pass = &g->pass;
    *r = (gen_rows){.tokens = pass->tokens, .n = n, .logits = g->vlogits, .verify = true,
                    .anc = pass->tree ? pass->anc : NULL, .out_rows = pass->tree ? pass->rows : NULL,
                    .n_out = pass->tree ? pass->n_rows : n};
    return true;
}

/* The prompt's next chunk within max rows (0: none): as many as max on a
 * cache that comes out the same however the prompt is cut, else the chunk
 * the prompt read alone would take, whole or not at all. */
static int prompt_chunk(const generation *g, int max) {
    const int left = g->n_prompt - g->prefill_at, alone = left < PREFILL_CHUNK ? left : PREFILL_CHUNK;
    if (session_chunks_freely(g->s)) return left < max ? left : max;
    return alone <= max ? alone : 0;
}

bool gen_prompt_waits(generation *g) {
    if (g->stop != GEN_RUNNING || g->shared_failed || atomic_load(&g->cancel) || g->prefilled) return false;
    if (g->prefill_at < 0) prefill_begin(g);
    return !g->prefill_draft;
}

bool gen_want_rows(generation *g, int max_prompt, int verify_rows, gen_rows *r) {
    if (g->stop != GEN_RUNNING || g->shared_failed || atomic_load(&g->cancel)) return false;
    if (!g->prefilled) {
        if (g->prefill_at < 0) prefill_begin(g);
        const int n = g->prefill_draft ? 0 : prompt_chunk(g, max_prompt);
        if (n <= 0) return false;
        *r = (gen_rows){.tokens = g->prompt + g->prefill_at, .n = n, .logits = g->logits, .prompt = true};
        return true;
    }
    if (!g->need_decode || g->q_n > 0 || g->s->n_past >= g->s->n_ctx) return false;
    if (verify_rows > 0 && can_verify(g, verify_rows) && want_verify(g, verify_rows, r)) return true;
    if (g->shared_failed) return false;
    *r = (gen_rows){.tokens = &g->last, .n = 1, .logits = g->logits, .prompt = false};
    return true;
}

void gen_rows_done(generation *g, const gen_rows *r, const err_t *err, double ms, int peers) {
    if (err && err->code) {
        if (r->verify && g->p.proposer->halt) g->p.proposer->halt(g->prop); /* the pass is abandoned */
        g->shared_err = *err;
        g->shared_failed = true; /* gen_next stops it */
        return;
    }
    g->stats.batch_steps++;
    g->stats.batch_peers += peers;
    if (r->verify) {
        (void)ms; /* settle() times the whole step, proposing included */
        g->shared_failed = !settle(g, r->n, &g->shared_t, true, &g->shared_err);
        g->need_decode = false; /* the pass fed the last token; its tokens are queued */
        return;
    }
    if (r->prompt) {
        prefill_advanced(g, r->n);
        return;
    }
    g->t_decode_total += ms;
    g->since_token_ms += ms;
    g->stats.decode_ms = g->t_decode_total;
    g->stats.batch_decodes++;
    g->need_decode = false;
}

bool gen_ready(generation *g) {
    return g->stop != GEN_RUNNING || g->shared_failed || atomic_load(&g->cancel) || g->q_n > 0 ||
           (g->prefilled && (!g->need_decode || g->s->n_past >= g->s->n_ctx));
}

session *gen_session(const generation *g) { return g->s; }

bool gen_unsampled(generation *g) {
    return g->stop == GEN_RUNNING && g->prefilled && !g->need_decode && g->q_n == 0 && !atomic_load(&g->cancel);
}

int utf8_complete_prefix(const char *buf, int n) {
    int i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)buf[i];
        int len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
        int j = 1;
        while (j < len && i + j < n && ((unsigned char)buf[i + j] & 0xC0) == 0x80) j++;
        if (j == len) i += len;                 /* a whole character */
        else if (i + j == n) return i;          /* a character still arriving: hold it back */
        else i += 1;                            /* a broken sequence: pass its first byte through */
    }
    return n;
}

/* Move the complete characters of the pending buffer into piece; true if any. */
static bool take_complete(generation *g, bool all) {
    int n = all ? g->n_pending : utf8_complete_prefix(g->pending, g->n_pending);
    if (n == 0) return false;
    memcpy(g->piece, g->pending, (size_t)n);
    g->piece[n] = '\0';
    g->piece_size = n;
    memmove(g->pending, g->pending + n, (size_t)(g->n_pending - n));
    g->n_pending -= n;
    return true;
}

/* Room for at least need pending bytes (a token's piece may be long). */
static bool grow_pending(generation *g, int need) {
    if (need <= g->pending_cap) return true;
    const int cap = need > INT32_MAX / 2 ? need : 2 * need;
    char *p = realloc(g->pending, (size_t)cap), *q = p ? realloc(g->piece, (size_t)cap + 1) : NULL;
    if (p) g->pending = p;
    if (!q) return false;
    g->piece = q;
    g->pending_cap = cap;
    return true;
}

/* Append the bytes of tok to the pending buffer, however long its piece. */
static err_code append_piece(generation *g, int32_t tok) {
    int room = g->pending_cap - g->n_pending;
    int n = tokenizer_piece(g->tok, tok, false, g->pending + g->n_pending, room);
    if (n > room) {
        if (!grow_pending(g, g->n_pending + n)) return err_set(&g->err, ERR_NOMEM, "out of memory for a token's text");
        n = tokenizer_piece(g->tok, tok, false, g->pending + g->n_pending, n);
    }
    if (n > 0) g->n_pending += n;
    return ERR_OK;
}

/* A token is delivered: it waited for the decode work since the one before
 * (gen_stats.latency). The first is time_to_first_token_ms's, not counted. */
static void token_latency(generation *g) {
    if (g->n_generated > 0) lat_add(&g->lat, g->since_token_ms);
    g->since_token_ms = 0.0;
}

static const char *next_piece(generation *g);

/* The calling thread computes on the model's cores while it is here. */
const char *gen_next(generation *g) {
    tpool_affinity prev;
    tpool_pin_caller(g->s->pool, &prev);
    const char *piece = next_piece(g);
    tpool_unpin_caller(&prev);
    return piece;
}

/* The generation stopped: speculation may have cached accepted drafts past
 * the stop (or the end-of-turn token). The cache is left as plain decoding
 * leaves it, with every generated token but the last (and the last too when
 * the end-of-turn token came after it: decoding read it to choose that
 * token). (A shared step may have decoded the last token ahead of a cancel:
 * its entry is right, and the next prompt reuses it or cuts it.) */
static void cache_as_plain(generation *g) {
    const int keep = g->prompt_end + g->n_generated - (g->stop == GEN_STOP_EOG ? 0 : 1);
    if (g->spec_on && g->prefilled && g->n_generated > 0 && g->s->n_past > keep) session_truncate(g->s, keep);
}

/* The end of text was drawn: the generation ends, or fails when a grammar
 * does not allow the end here. Its mask lets the end through at a dead end
 * (no token continues the text) rather than draw from nothing; the text is
 * then not a sentence of the grammar, and the caller must hear it. */
static void end_of_text(generation *g, int32_t tok) {
    if (!g->gm || grammar_match_allows(g->gm, tok)) {
        g->stop = GEN_STOP_EOG;
        return;
    }
    err_set(&g->err, ERR_INVALID_ARG, "grammar: the text cannot be completed: no token of the vocabulary continues it, "
                                      "and it is not a whole sentence of the grammar");
    fail(g, GEN_STOP_ERROR);
}

static const char *next_piece(generation *g) {
    if (g->shared_failed) { /* a shared step's failure, acted on here, on the generation's own thread */
        g->shared_failed = false;
        g->err = g->shared_err;
        fail(g, GEN_STOP_ERROR);
    }
    report_prefill(g);
    for (;;) {
        if (g->stop != GEN_RUNNING) {
            cache_as_plain(g);
            /* whatever is still pending goes out once, even if incomplete */
            if (!g->flushed && take_complete(g, true)) return g->piece;
            g->flushed = true;
            return NULL;
        }
        if (atomic_load(&g->cancel)) {
            fail(g, GEN_STOP_CANCELLED);
            continue;
        }
        if (!g->prefilled && !prefill(g)) continue;
        if (g->p.max_tokens == 0) { /* the prompt only (llama.cpp's -n 0) */
            g->stop = GEN_STOP_MAX_TOKENS;
            continue;
        }
        if (g->need_decode) {
            if (g->s->n_past >= g->s->n_ctx) {
                g->stop = GEN_STOP_CONTEXT_FULL;
                continue;
            }
            bool ok = true;
            const spec_timing t = timing_of(g);
            const bool probe = spec_probe_plain(&t, g->decode_passes); /* time the baseline */
            g->decode_passes++;
            if (g->spec_on && !g->spec_off && !probe && speculate(g, &ok)) {
                if (!ok) {
                    fail(g, GEN_STOP_ERROR);
                    continue;
                }
                check_speed(g);
            } else {
                double t0 = now_ms();
                if (session_eval(g->s, &g->last, 1, false, g->logits, &g->err)) {
                    fail(g, GEN_STOP_ERROR);
                    continue;
                }
                const double dt = now_ms() - t0;
                if (g->spec_on && g->p.proposer->plain) g->p.proposer->plain(g->prop, dt); /* the baseline it weighs */
                g->t_decode_total += dt;
                g->since_token_ms += dt;
                g->plain_ms += dt;
                g->stats.decode_ms = g->t_decode_total;
                g->stats.decode_evals++;
                if (g->p.on_step) g->p.on_step(g->p.step_user, dt, 1);
            }
            g->need_decode = false;
        }
        /* a token of the last verify pass, else a sample */
        const bool queued = g->q_n > 0;
        int32_t tok = queued ? g->queue[g->q_head] : sampler_sample(g->smp, g->logits);
        if (queued) g->q_head++, g->q_n--;
        if (g->gm && grammar_match_error(g->gm, &g->err)) { /* the grammar could not go on */
            fail(g, GEN_STOP_ERROR);
            continue;
        }
        if (g->n_generated == 0) g->stats.time_to_first_token_ms = now_ms() - g->t_start;
        if (tokenizer_is_eog(g->tok, tok)) {
            end_of_text(g, tok);
            continue;
        }
        if (g->lp) logprob_of(g->logits, g->s->m->hp.n_vocab, tok, g->p.logprobs - 1, &g->lp[g->n_generated]);
        sampler_accept(g->smp, tok);
        g->last = tok;
        token_latency(g);
        g->out_ids[g->n_generated++] = tok;
        atomic_store_explicit(&g->n_published, g->n_generated, memory_order_release);
        g->stats.decode_tokens = g->n_generated;
        g->need_decode = g->q_n == 0; /* an accepted draft is in the cache; the pass's last token is not */
        if (g->spec_on && g->p.proposer->push(g->prop, &tok, 1, &g->err)) {
            fail(g, GEN_STOP_ERROR);
            continue;
        }
        if (g->n_generated >= g->p.max_tokens) g->stop = GEN_STOP_MAX_TOKENS;
        if (append_piece(g, tok)) {
            fail(g, GEN_STOP_ERROR);
            continue;
        }
        if (g->stop == GEN_RUNNING && take_complete(g, false)) return g->piece;
    }
}
