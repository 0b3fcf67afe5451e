/*
 * session — see session.h.
 */
#include "session.h"

#include <math.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/kernels/attn.h"
#include "core/quant.h"
#include "runtime/plan.h"

#define SESSION_CHUNK 512 /* tokens per forward pass */

/* pool NULL: a pool of its own with n_threads threads */
static err_code create(const model *m, int n_ctx, const kv_config *kv, tpool *pool, int n_threads, session **out,
                       err_t *err) {
    *out = NULL;
    if (n_ctx < 0) return err_set(err, ERR_INVALID_ARG, "context of %d tokens", n_ctx);
    if (n_threads < 0) return err_set(err, ERR_INVALID_ARG, "%d threads", n_threads);
    if (n_threads == 0) n_threads = tpool_default_threads();
    if (n_ctx == 0) n_ctx = m->hp.n_ctx_train;
    session *s = calloc(1, sizeof *s);
    if (!s) return err_set(err, ERR_NOMEM, "out of memory");
    s->m = m;
    s->n_ctx = n_ctx;
    s->pool = pool;
    s->owns_pool = !pool;
    err_code rc = pool ? ERR_OK : tpool_new(n_threads, &s->pool, err);
    if (!rc) rc = kv_cache_new(plan_kv_shape(&m->hp), kv, &s->kv, err);
    if (!rc) s->kv_planned = kv_cache_config(s->kv)->budget_bytes;
    if (!rc && (!(s->fwd = fwd_state_new(m, s->pool)) || !(s->tokens = malloc(sizeof(int32_t) * (size_t)n_ctx))))
        rc = err_set(err, ERR_NOMEM, "out of memory");
    if (rc) {
        session_free(s);
        return rc;
    }
    fwd_set_lora(s->fwd, &s->lora);
    *out = s;
    return ERR_OK;
}

err_code session_new_kv(const model *m, int n_ctx, const kv_config *kv, int n_threads, session **out, err_t *err) {
    return create(m, n_ctx, kv, NULL, n_threads, out, err);
}

/* A plain cache: every entry kept at kv_type (F32 or F16). */
err_code session_new(const model *m, int n_ctx, uint32_t kv_type, int n_threads, session **out, err_t *err) {
    if (kv_type != QT_F32 && kv_type != QT_F16) return err_set(err, ERR_INVALID_ARG, "plain KV cache type must be f32 or f16");
    const kv_config kv = kv_config_plain(kv_type);
    return create(m, n_ctx, &kv, NULL, n_threads, out, err);
}

err_code session_new_shared(const model *m, int n_ctx, const kv_config *kv, tpool *pool, session **out, err_t *err) {
    if (!pool) return err_set(err, ERR_INVALID_ARG, "no thread pool to share");
    return create(m, n_ctx, kv, pool, 0, out, err);
}

err_code session_set_lora(session *s, const lora_set *set, err_t *err) {
    const int n = set ? set->n : 0;
    if (n < 0 || n > LORA_MAX_STACK)
        return err_set(err, ERR_INVALID_ARG, "%d adapters at once (%d at most)", n, LORA_MAX_STACK);
    for (int i = 0; i < n; i++)
        if (!set->a[i] || !isfinite(set->scale[i]))
            return err_set(err, ERR_INVALID_ARG, "adapter %d: %s", i, set->a[i] ? "its scale is not a finite number" : "none given");
    if (set) s->lora = *set;
    else s->lora.n = 0;
    return ERR_OK;
}

void session_free(session *s) {
    if (!s) return;
    kv_cache_free(s->kv);
    fwd_state_free(s->fwd);
    if (s->owns_pool) tpool_free(s->pool);
    free(s->tokens);
    free(s);
}

static err_code check_room(const session *s, int n, err_t *err) {
    if (n <= 0) return err_set(err, ERR_INVALID_ARG, "no tokens to evaluate");
    if (n > s->n_ctx - s->n_past)
        return err_set(err, ERR_CONTEXT_FULL, "%d tokens do not fit: %d of %d context positions are used", n, s->n_past,
                       s->n_ctx);
    return ERR_OK;
}

/* The KV budget in force: the plan's, under the pressure cap, under what
 * the shared bytes leave after a token's experts (session.h). */
static uint64_t kv_live_budget(const session *s, uint64_t room) {
    uint64_t b = s->kv_planned;
    if (s->kv_cap && (!b || s->kv_cap < b)) b = s->kv_cap;
    if (s->shared_bytes && s->experts) {
        const uint64_t left = s->shared_bytes > s->experts_least + room ? s->shared_bytes - s->experts_least - room : 1;
        const uint64_t whole = (uint64_t)s->n_ctx * s->token_bytes; /* an unbounded cache that fits stays so */
        if ((b || left < whole) && (!b || left < b)) b = left;
    }
    return b;
}

/* The expert cache gets what the KV cache leaves of the shared bytes: it
 * shrinks first as the context grows (see session.h), and the KV cache
 * gives way when the shared bytes cannot hold a token's experts beside it. */
void session_rebalance(session *s, int n) {
    const uint64_t room = (uint64_t)(n + 64) * s->token_bytes;
    const uint64_t want = kv_live_budget(s, room);
    if (want != kv_cache_config(s->kv)->budget_bytes) {
        err_t e = {0};
        kv_cache_set_budget(s->kv, want, &e); /* a spill that failed degrades to eviction; the stats say so */
    }
    if (!s->shared_bytes || !s->experts || !s->experts->set_budget) return;
    if (s->experts->pause_readahead) s->experts->pause_readahead(s->experts->self, s->readahead_paused);
    const uint64_t kv = kv_cache_stats(s->kv).bytes + room;
    s->experts->set_budget(s->experts->self, s->shared_bytes > kv ? s->shared_bytes - kv : 0);
}

/* Keep the first n tokens; when a sliding-window layer already dropped an
 * entry the next query needs (the cut goes back further than its slack),
 * keep none: the next eval computes the sequence again, never a window
 * with a hole in it. */
static void cut(session *s, int n) {
    kv_cache_truncate(s->kv, n);
    if (n > 0 && kv_cache_window_lost(s->kv, n)) {
        kv_cache_truncate(s->kv, 0);
        n = 0;
    }
    s->n_past = n;
}

err_code session_eval(session *s, const int32_t *tokens, int n, bool all_rows, float *logits, err_t *err) {
    err_code rc0 = check_room(s, n, err);
    if (rc0) return rc0;
    session_rebalance(s, n);
    /* In chunks: the forward pass's buffers grow with the batch (a 4000-token
     * prompt of a 1B model would take ~370 MiB), and each chunk's entries
     * are committed, so the cache stays within its budget during a long
     * prompt. Logits do not depend on the chunking (batch invariance), except
     * that chunks of PACKED_BF16_MIN_TOKENS or more may take a prefill kernel
     * of their own (core/kernels/matmul.h: matmul_batch_invariant). */
    err_code rc = ERR_OK;
    for (int t0 = 0; t0 < n && !rc; t0 += SESSION_CHUNK) {
        const int nc = n - t0 < SESSION_CHUNK ? n - t0 : SESSION_CHUNK;
        const bool last = t0 + nc == n;
        const int n_out = all_rows ? nc : last ? 1 : 0;
        float *out = all_rows ? logits + (size_t)t0 * s->m->hp.n_vocab : logits;
        kv_iface kv = kv_cache_iface(s->kv);
        rc = forward(s->fwd, &kv, s->experts, tokens + t0, nc, s->n_past + t0, NULL, n_out, out, err);
        if (!rc) rc = kv_cache_commit(s->kv, nc, err);
    }
    if (rc) { /* the entries of this call go; entries evicted meanwhile stay evicted */
        cut(s, s->n_past);
        return rc;
    }
    memcpy(s->tokens + s->n_past, tokens, sizeof(int32_t) * (size_t)n);
    s->n_past += n;
    return ERR_OK;
}

/* The parts of a batch belong together (session_eval_batch). */
static err_code check_batch(const session_part *parts, int n, err_t *err) {
    if (n <= 0) return err_set(err, ERR_INVALID_ARG, "a batch of %d sessions", n);
    const session *s0 = parts[0].s;
    for (int i = 0; i < n; i++) {
        const session *s = parts[i].s;
        if (s->m != s0->m || s->pool != s0->pool || s->experts != s0->experts)
            return err_set(err, ERR_INVALID_ARG, "a batch's sessions must share a model, threads and experts");
        if (parts[i].n > SESSION_BATCH_ROWS)
            return err_set(err, ERR_INVALID_ARG, "%d tokens of one session in a pass (%d at most)", parts[i].n,
                           SESSION_BATCH_ROWS);
        err_code rc = check_room(s, parts[i].n, err);
        if (rc) return rc;
        for (int j = 0; j < i; j++)
            if (parts[j].s == s) return err_set(err, ERR_INVALID_ARG, "a session twice in one batch");
    }
    return ERR_OK;
}

err_code session_eval_batch(const session_part *parts, int n, err_t *err) {
    err_code rc = check_batch(parts, n, err);
    if (rc) return rc;
    fwd_seq seq_buf[16], *seqs = n <= 16 ? seq_buf : malloc(sizeof *seqs * (size_t)n);
    kv_iface kv_buf[16], *kv = n <= 16 ? kv_buf : malloc(sizeof *kv * (size_t)n);
    if (!seqs || !kv) rc = err_set(err, ERR_NOMEM, "out of memory for a batch of %d sessions", n);
    for (int i = 0; i < n && !rc; i++) {
        session *s = parts[i].s;
        session_rebalance(s, parts[i].n);
        kv[i] = kv_cache_iface(s->kv);
        const session_part *p = &parts[i];
        seqs[i] = (fwd_seq){.kv = &kv[i], .tokens = p->tokens, .n = p->n, .pos0 = s->n_past,
                            .anc = p->tentative ? p->anc : NULL,
                            .out_rows = p->tentative ? p->out_rows : NULL,
                            .n_out = p->tentative ? p->n_out : p->logits ? 1 : 0, .logits = p->logits,
                            .lora = &s->lora};
    }
    if (!rc) rc = forward_batch(parts[0].s->fwd, parts[0].s->experts, seqs, n, err);
    for (int i = 0; i < n && !rc; i++)
        if (!parts[i].tentative) rc = kv_cache_commit(parts[i].s->kv, parts[i].n, err);
    for (int i = 0; i < n; i++) {
        session *s = parts[i].s;
        if (rc) cut(s, s->n_past); /* the entries of this call go, committed or not */
        else if (!parts[i].tentative) {
            memcpy(s->tokens + s->n_past, parts[i].tokens, sizeof(int32_t) * (size_t)parts[i].n);
            s->n_past += parts[i].n;
        }
    }
    if (seqs != seq_buf) free(seqs);
    if (kv != kv_buf) free(kv);
    return rc;
}

bool session_chunks_freely(const session *s) {
    const kv_config *c = kv_cache_config(s->kv);
    return !c->budget_bytes && !c->budget_tokens && !s->kv_planned && !s->kv_cap && !s->shared_bytes &&
           c->hot_type == c->warm_type && c->warm_type == c->cold_type;
}

int session_exact_rows(const session *s) { return session_chunks_freely(s) ? INT_MAX : kv_cache_exact_rows(s->kv); }

/* The cache's interface, with the attention weights the forward reports
 * added by layer and position into votes (see session_eval_voting). */
typedef struct {
    kv_iface inner;
    const kv_span *spans; /* the last view, which the weights follow */
    int n_spans;
    float *votes;
    int n_votes;
} vote_iface;

static err_code vote_append(void *self, int layer, int n, const int32_t *pos, const float *k, const float *v,
                            err_t *err) {
    vote_iface *w = self;
    return w->inner.append(w->inner.self, layer, n, pos, k, v, err);
}

static int vote_view(void *self, int layer, const kv_span **spans) {
    vote_iface *w = self;
    w->n_spans = w->inner.view(w->inner.self, layer, spans);
    w->spans = *spans;
    return w->n_spans;
}

static void vote_observe(void *self, int layer, int n_queries, int n_entries, const float *weights) {
    vote_iface *w = self;
    if (w->inner.observe) /* the cache's own policy sees these queries too */
        w->inner.observe(w->inner.self, layer, n_queries, n_entries, weights);
    float *votes = w->votes + (size_t)layer * (size_t)w->n_votes;
    int e = 0;
    for (int i = 0; i < w->n_spans && e < n_entries; i++)
        for (int j = 0; j < w->spans[i].n_tokens && e < n_entries; j++, e++) {
            const int32_t p = w->spans[i].pos[j];
            if (p >= 0 && p < w->n_votes) votes[p] += weights[e];
        }
}

static void vote_queries(void *self, int layer, int n, const float *q) {
    vote_iface *w = self;
    w->inner.queries(w->inner.self, layer, n, q);
}

/* The cache's interface, voting with the forward's last `last` queries (0: none). */
static kv_iface voting_iface(session *s, vote_iface *w, int last, float *votes, int n_votes) {
    *w = (vote_iface){.inner = kv_cache_iface(s->kv), .votes = votes, .n_votes = n_votes};
    if (last <= 0) return w->inner;
    return (kv_iface){.self = w, .append = vote_append, .view = vote_view, .observe = vote_observe,
                      .observe_last = last, .queries = w->inner.queries ? vote_queries : NULL};
}

err_code session_eval_voting(session *s, const int32_t *tokens, int n, bool tentative, int last, float *votes,
                             int n_votes, float *logits, err_t *err) {
    err_code rc = check_room(s, n, err);
    if (rc) return rc;
    if (tentative && n > SESSION_CHUNK) return err_set(err, ERR_INVALID_ARG, "a tentative batch of %d tokens", n);
    session_rebalance(s, n);
    for (int t0 = 0; t0 < n && !rc; t0 += SESSION_CHUNK) {
        const int nc = n - t0 < SESSION_CHUNK ? n - t0 : SESSION_CHUNK;
        const int from = n - last > t0 ? n - last : t0; /* the first voting query in this chunk */
        vote_iface w;
        const kv_iface kv = voting_iface(s, &w, t0 + nc - from, votes, n_votes);
        const bool out = !tentative && t0 + nc == n && logits;
        rc = forward(s->fwd, &kv, s->experts, tokens + t0, nc, s->n_past + t0, NULL, out ? 1 : 0, logits, err);
        if (!rc && !tentative) rc = kv_cache_commit(s->kv, nc, err);
    }
    if (rc || tentative) {
        cut(s, s->n_past); /* a tentative batch only votes: its entries go */
        return rc;
    }
    memcpy(s->tokens + s->n_past, tokens, sizeof(int32_t) * (size_t)n);
    s->n_past += n;
    return ERR_OK;
}

err_code session_eval_tentative(session *s, const int32_t *tokens, int n, float *logits, err_t *err) {
    if (n > SESSION_CHUNK) return err_set(err, ERR_INVALID_ARG, "a verify batch of %d tokens", n);
    return session_eval_tree(s, tokens, n, NULL, NULL, n, logits, err);
}

err_code session_eval_tree(session *s, const int32_t *tokens, int n, const uint64_t *anc, const int32_t *out_rows,
                           int n_out, float *logits, err_t *err) {
    err_code rc = check_room(s, n, err);
    if (rc) return rc;
    session_rebalance(s, n);
    kv_iface kv = kv_cache_iface(s->kv);
    rc = forward_tree(s->fwd, &kv, s->experts, tokens, n, s->n_past, anc, out_rows, n_out, logits, err);
    if (rc) cut(s, s->n_past);
    return rc;
}

err_code session_accept(session *s, const int32_t *tokens, int n, int n_keep, err_t *err) {
    kv_cache_rollback(s->kv, n - n_keep);
    err_code rc = kv_cache_commit(s->kv, n_keep, err);
    if (rc) {
        cut(s, s->n_past);
        return rc;
    }
    memcpy(s->tokens + s->n_past, tokens, sizeof(int32_t) * (size_t)n_keep);
    s->n_past += n_keep;
    return ERR_OK;
}

uint32_t session_tile_phases(const session *s, int *tile) {
    *tile = ATTN_LANES;
    return kv_cache_append_phases(s->kv, ATTN_LANES);
}

err_code session_accept_path(session *s, const int32_t *tokens, int n, const int *path, int n_keep, err_t *err) {
    int lead = 0;
    while (lead < n_keep && path[lead] == lead) lead++;
    if (lead == n_keep) return session_accept(s, tokens, n, n_keep, err);
    int32_t kept[64]; /* a tree batch's most (forward_tree) */
    if (n_keep > 64) return err_set(err, ERR_INVALID_ARG, "a path of %d tokens", n_keep);
    for (int j = 0; j < n_keep; j++) kept[j] = tokens[path[j]];
    kv_cache_keep_tentative(s->kv, path, n_keep);
    return session_accept(s, kept, n_keep, n_keep, err);
}

void session_reset(session *s) { session_truncate(s, 0); }

void session_truncate(session *s, int n) {
    if (n < 0) n = 0;
    if (n >= s->n_past) return;
    cut(s, n);
}

/* A stale block (kv_cache_stale_from) is not the only difference: every
 * entry computed after it attended to it at its fresher tier, so a cache
 * that never saw the rest is made only by computing everything again. The
 * rewinds that matter most (a chat turn's few unused tokens) rarely age a
 * block across a tier boundary, and then keep everything. */
int session_reusable(const session *s, int n) {
    if (n > s->n_past) n = s->n_past;
    return n <= 0 || kv_cache_stale_from(s->kv, n) < n ? 0 : n;
}

err_code session_rewind(session *s, int n, err_t *err) {
    const int keep = session_reusable(s, n);
    session_truncate(s, keep);
    if (keep >= n) return ERR_OK;
    /* the tokens to run again are the session's own: copied out, as session_eval copies them back in */
    int32_t *again = malloc(sizeof(int32_t) * (size_t)(n - keep));
    float *logits = malloc(sizeof(float) * (size_t)s->m->hp.n_vocab); /* the last row, unused */
    err_code rc = again && logits ? ERR_OK : err_set(err, ERR_NOMEM, "out of memory");
    if (!rc) {
        memcpy(again, s->tokens + keep, sizeof(int32_t) * (size_t)(n - keep));
        rc = session_eval(s, again, n - keep, false, logits, err);
    }
    free(again);
    free(logits);
    return rc;
}

int session_common_prefix(const session *s, const int32_t *ids, int n) {
    int i = 0;
    while (i < n && i < s->n_past && s->tokens[i] == ids[i]) i++;
    return i;
}
