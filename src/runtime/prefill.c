/*
 * prefill — see prefill.h.
 */
#include "prefill.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/threadpool.h"

static double ms_since(uint64_t t0) { return (double)(clock_ns() - t0) / 1e6; }

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static int window_of(const session *s) { return kv_cache_config(s->kv)->snap_window; }

/* SpecKV for these n tokens: the speckv policy, or the default one when they do not fit;
 * never when holding them all would take more than PREFILL_HOLD_MAX x the byte budget. */
static bool policy_scores_lookahead(const session *s, int n, const prefill_params *p) {
    const kv_config *k = kv_cache_config(s->kv);
    if (k->budget_bytes && kv_cache_bytes_with(s->kv, n) > PREFILL_HOLD_MAX * k->budget_bytes) return false;
    if (k->policy == KV_POLICY_SPECKV) return true;
    return p->auto_policy && (k->budget_bytes || k->budget_tokens) && !kv_cache_fits(s->kv, n);
}

bool prefill_uses_draft(const session *s, const session *draft, int n, const prefill_params *p) {
    if (!draft || draft->m->hp.n_vocab != s->m->hp.n_vocab) return false;
    return (p->compress > 0.0f && p->compress < 1.0f) || policy_scores_lookahead(s, n, p);
}

err_code prefill_check(const session *s, const session *draft, const prefill_params *p, err_t *err) {
    if (!(p->compress >= 0.0f && p->compress <= 1.0f))
        return err_set(err, ERR_INVALID_ARG, "prompt compression keeps a share of the prompt in (0, 1], not %g",
                       (double)p->compress);
    if (p->lookahead < -1 || p->lookahead > PREFILL_LOOKAHEAD_MAX)
        return err_set(err, ERR_INVALID_ARG, "a lookahead of %d tokens is outside -1..%d", p->lookahead,
                       PREFILL_LOOKAHEAD_MAX);
    if (p->compress > 0.0f && p->compress < 1.0f && !draft)
        return err_set(err, ERR_INVALID_ARG, "prompt compression needs a draft model (none is loaded)");
    if (draft && draft->m->hp.n_vocab != s->m->hp.n_vocab)
        return err_set(err, ERR_INVALID_ARG, "the draft model has %d tokens in its vocabulary, the model %d",
                       draft->m->hp.n_vocab, s->m->hp.n_vocab);
    return ERR_OK;
}

/* Each vote becomes the largest within r positions of it, so an entry's
 * neighbours are kept with it (SnapKV's pooling). */
static err_code pool_votes(float *v, int n, int r, err_t *err) {
    if (r <= 0) return ERR_OK;
    float *c = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (!c) return err_set(err, ERR_NOMEM, "out of memory");
    memcpy(c, v, sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++) {
        float m = c[i];
        for (int j = i - r; j <= i + r; j++)
            if (j >= 0 && j < n && c[j] > m) m = c[j];
        v[i] = m;
    }
    free(c);
    return ERR_OK;
}

/* What the draft read and wrote: its votes for each position (NULL: not asked
 * for), and its lookahead. */
typedef struct {
    float *votes;
    int32_t *la;
    int n_la;
} draft_look;

/* The draft reads seq[0..n) (reusing what it holds) voting with its last
 * `window` queries into look->votes, then writes look->n_la greedy tokens,
 * each voting too; its cache is then cut back to seq. */
static err_code draft_lookahead(session *d, const int32_t *seq, int n, int window, draft_look *look, err_t *err) {
    int keep = session_common_prefix(d, seq, n);
    if (keep > n - window) keep = n - window > 0 ? n - window : 0; /* the window must vote */
    if (keep >= n) keep = n - 1;                                   /* and the last row gives the lookahead */
    keep = session_reusable(d, keep);
    session_truncate(d, keep);
    const int V = d->m->hp.n_vocab;
    float *logits = malloc(sizeof(float) * (size_t)V);
    if (!logits) return err_set(err, ERR_NOMEM, "out of memory");
    const int w = look->votes ? window : 0;
    err_code rc = session_eval_voting(d, seq + keep, n - keep, false, w, look->votes, n, logits, err);
    int made = 0;
    while (!rc && made < look->n_la) {
        look->la[made++] = argmax(logits, V);
        if (made < look->n_la && d->n_past < d->n_ctx - 1)
            rc = session_eval_voting(d, &look->la[made - 1], 1, false, look->votes ? 1 : 0, look->votes, n, logits, err);
        else break;
    }
    look->n_la = made;
    free(logits);
    session_truncate(d, n);
    return rc;
}

typedef struct {
    float vote;
    int i;
} ranked;

static int by_vote_desc(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    return x->vote > y->vote ? -1 : x->vote < y->vote ? 1 : x->i - y->i;
}

/* SpecPC: of prompt[0..n) (at positions base..), the tokens to keep, in
 * order, into kept (the first PREFILL_KEEP_FIRST and last `window` always,
 * then the best-voted, each with its PREFILL_PC_NEIGHBOURS neighbours on
 * either side, until ratio x n); returns their count. */
static int compress_prompt(const float *votes, int base, const int32_t *prompt, int n, float ratio, int window,
                           int32_t *kept) {
    const int want = (int)ceilf(ratio * (float)n);
    ranked *r = malloc(sizeof(ranked) * (size_t)n);
    unsigned char *keep = calloc((size_t)n, 1);
    if (!r || !keep) { /* keep everything: compression is an optimization */
        free(r), free(keep);
        memcpy(kept, prompt, sizeof(int32_t) * (size_t)n);
        return n;
    }
    int held = 0, nr = 0;
    for (int i = 0; i < n; i++) {
        if (i < PREFILL_KEEP_FIRST || i >= n - window) keep[i] = 1, held++;
        else r[nr++] = (ranked){votes[base + i], i};
    }
    qsort(r, (size_t)nr, sizeof *r, by_vote_desc);
    for (int a = 0; a < nr && held < want; a++) /* each in turn with its neighbours, nearest first */
        for (int d = 0; d <= PREFILL_PC_NEIGHBOURS && held < want; d++)
            for (int sgn = -1; sgn <= 1 && held < want; sgn += 2) {
                const int i = r[a].i + sgn * d;
                if ((d || sgn > 0) && i >= 0 && i < n && !keep[i]) keep[i] = 1, held++;
            }
    int m = 0;
    for (int i = 0; i < n; i++)
        if (keep[i]) kept[m++] = prompt[i];
    free(r), free(keep);
    return m;
}

/* SpecKV on the model: prefill seq[0..n) with the budget held, run the
 * lookahead tentatively, both voting, then release the cache by the votes. */
static err_code speckv_prefill(session *s, const int32_t *seq, int n, const draft_look *look, float *logits,
                               prefill_stats *st, err_t *err) {
    const int window = window_of(s), n_votes = s->n_past + n, n_layer = s->m->hp.n_layer;
    float *votes = calloc((size_t)n_layer * (size_t)n_votes, sizeof(float)); /* by layer: each keeps its own */
    if (!votes) return err_set(err, ERR_NOMEM, "out of memory");
    kv_cache_hold(s->kv);
    err_code rc = session_eval_voting(s, seq, n, false, window, votes, n_votes, logits, err);
    const uint64_t t0 = clock_ns();
    const int n_la = look->n_la < s->n_ctx - s->n_past ? look->n_la : s->n_ctx - s->n_past;
    if (!rc && n_la > 0) rc = session_eval_voting(s, look->la, n_la, true, n_la, votes, n_votes, NULL, err);
    st->vote_ms = ms_since(t0);
    for (int l = 0; !rc && l < n_layer; l++) rc = pool_votes(votes + (size_t)l * n_votes, n_votes, PREFILL_KV_POOL, err);
    const int voters = (n < window ? n : window) + n_la;
    err_code rc2 = kv_cache_release(s->kv, rc ? NULL : votes, n_votes, voters, err);
    free(votes);
    if (rc) return rc;
    if (rc2) return rc2;
    const kv_config *k = kv_cache_config(s->kv);
    const int64_t protect = (int64_t)k->anchor_tokens + k->recent_tokens, held = kv_cache_stats(s->kv).tokens;
    st->speckv = true;
    st->kept_by_score = held > protect ? held - protect : 0;
    return ERR_OK;
}

/* The draft's part: read seq, write the lookahead, and with SpecPC choose
 * the prompt's tokens (prompt = seq's last n) into kept. */
static err_code draft_part(session *s, session *draft, const int32_t *seq, int n_seq, int n, const prefill_params *p,
                           draft_look *look, int32_t *kept, int *n_kept, prefill_stats *st, err_t *err) {
    const bool pc = p->compress > 0.0f && p->compress < 1.0f;
    const int window = window_of(s);
    look->n_la = p->lookahead < 0 ? 0 : p->lookahead ? p->lookahead : PREFILL_LOOKAHEAD;
    const int n_layer = draft->m->hp.n_layer;
    if (pc && !(look->votes = calloc((size_t)n_layer * (size_t)n_seq, sizeof(float))))
        return err_set(err, ERR_NOMEM, "out of memory");
    if (!(look->la = malloc(sizeof(int32_t) * (size_t)(look->n_la ? look->n_la : 1))))
        return err_set(err, ERR_NOMEM, "out of memory");
    const uint64_t t0 = clock_ns();
    tpool_affinity prev; /* on cores of different capacity the draft computes on its own (runtime/plan.h) */
    tpool_pin_caller(draft->pool, &prev);
    err_code rc = pc || look->n_la ? draft_lookahead(draft, seq, n_seq, window, look, err) : ERR_OK;
    tpool_unpin_caller(&prev);
    for (int l = 1; !rc && pc && l < n_layer; l++) /* a token's vote: its largest in any layer (measured above the sum) */
        for (int i = 0; i < n_seq; i++) look->votes[i] = fmaxf(look->votes[i], look->votes[(size_t)l * n_seq + i]);
    if (!rc && pc) rc = pool_votes(look->votes, n_seq, PREFILL_PC_POOL, err);
    st->draft_ms = ms_since(t0);
    st->lookahead_tokens = look->n_la;
    if (rc) return rc;
    *n_kept = pc ? compress_prompt(look->votes, n_seq - n, seq + (n_seq - n), n, p->compress, window, kept) : n;
    if (!pc) memcpy(kept, seq + (n_seq - n), sizeof(int32_t) * (size_t)n);
    st->prompt_dropped = n - *n_kept;
    return ERR_OK;
}

err_code prefill_run(session *s, session *draft, const int32_t *prompt, int n, const prefill_params *p,
                     float *logits, prefill_stats *st, err_t *err) {
    *st = (prefill_stats){0};
    err_code rc = prefill_check(s, draft, p, err);
    if (rc) return rc;
    if (n <= 0 || n > s->n_ctx - s->n_past)
        return err_set(err, n <= 0 ? ERR_INVALID_ARG : ERR_CONTEXT_FULL,
                       "%d tokens do not fit: %d of %d context positions are used", n, s->n_past, s->n_ctx);
    if (!prefill_uses_draft(s, draft, n, p)) {
        const uint64_t t0 = clock_ns();
        rc = session_eval(s, prompt, n, false, logits, err);
        st->prefill_ms = ms_since(t0);
        return rc;
    }
    /* the draft reads what the model will hold: its sequence so far, then the prompt */
    const int n_seq = s->n_past + n, n_past0 = s->n_past;
    int32_t *seq = malloc(sizeof(int32_t) * (size_t)n_seq), *mine = malloc(sizeof(int32_t) * (size_t)n);
    draft_look look = {0};
    int n_kept = n;
    rc = seq && mine ? ERR_OK : err_set(err, ERR_NOMEM, "out of memory");
    if (!rc) {
        memcpy(seq, s->tokens, sizeof(int32_t) * (size_t)s->n_past);
        memcpy(seq + s->n_past, prompt, sizeof(int32_t) * (size_t)n);
        rc = draft_part(s, draft, seq, n_seq, n, p, &look, mine, &n_kept, st, err);
    }
    if (!rc) {
        const uint64_t t0 = clock_ns();
        rc = policy_scores_lookahead(s, n_kept, p) ? speckv_prefill(s, mine, n_kept, &look, logits, st, err)
                                                   : session_eval(s, mine, n_kept, false, logits, err);
        st->prefill_ms = ms_since(t0);
        if (st->prompt_dropped && n_kept)
            st->saved_ms = (st->prefill_ms - st->vote_ms) / n_kept * st->prompt_dropped - st->draft_ms;
    }
    if (rc) session_truncate(s, n_past0); /* the sequence as it was (entries evicted meanwhile stay evicted) */
    free(seq), free(mine), free(look.votes), free(look.la);
    return rc;
}
