/*
 * session — one model, one KV cache, one sequence.
 *
 * The session owns the cache the forward pass writes through and the count
 * of tokens consumed so far; eval() continues the sequence. A failed eval
 * leaves the sequence as it was before the call (its cache entries are
 * rolled back; entries a budget evicted meanwhile stay evicted), so a caller
 * can report the error and go on.
 */
#ifndef OCTO_RUNTIME_SESSION_H
#define OCTO_RUNTIME_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"
#include "kv/kv_cache.h"
#include "model/experts_iface.h"
#include "model/forward.h"
#include "model/lora.h"
#include "model/model.h"

typedef struct {
    const model *m;
    tpool *pool;      /* the model's threads */
    bool owns_pool;   /* false: another session's pool, borrowed (it must outlive this one) */
    kv_cache *kv;
    fwd_state *fwd;
    const experts_iface *experts; /* NULL: experts straight from the mapping */
    int n_ctx;
    int n_past;
    int32_t *tokens; /* [n_ctx] the tokens whose entries the cache holds, in order */
    /* The arbiter (runtime/plan.h): the KV cache and the expert cache share
     * shared_bytes; before each pass the experts get what the KV cache holds
     * not, less room for the pass's entries (token_bytes each, a block's
     * worth more). 0: no sharing. */
    uint64_t shared_bytes, token_bytes;
    /* The live budget (runtime/adapt.h): the KV budget the plan gave
     * (kv_planned, 0: none) is lowered to kv_cap when memory pressure set
     * one (0: none), and to what the shared bytes leave after a token's
     * experts (experts_least): expert pressure demotes the KV cache as the
     * KV cache's growth demotes experts. */
    uint64_t kv_planned, kv_cap, experts_least;
    bool readahead_paused;
    lora_set lora;    /* the adapters its passes run with (model/lora.h); n 0: none */
} session;

/* n_ctx 0 = the model's trained context; kv_type QT_F32 or QT_F16 (a plain
 * cache: every entry kept at that type); n_threads 0 = tpool_default_threads(). */
err_code session_new(const model *m, int n_ctx, uint32_t kv_type, int n_threads, session **out, err_t *err);
/* The same with a KV cache configuration (tiers, policy, budget). */
err_code session_new_kv(const model *m, int n_ctx, const kv_config *kv, int n_threads, session **out, err_t *err);
/* A session that computes on a pool it does not own (it must outlive the
 * session): a model's session and its draft's share one, since a draft runs
 * between its target's passes, never beside them, and threads of its own
 * would only spin against the target's. */
err_code session_new_shared(const model *m, int n_ctx, const kv_config *kv, tpool *pool, session **out, err_t *err);
void session_free(session *s);

/* The adapters (and scales) of the next passes; the adapters must outlive
 * them. ERR_INVALID_ARG for more than LORA_MAX_STACK or a scale that is not finite. */
err_code session_set_lora(session *s, const lora_set *set, err_t *err);

/* The live budget applied now, room kept for n more entries: the KV cache
 * to its budget (see kv_planned above), the experts to what it leaves. */
void session_rebalance(session *s, int n);

/* Consume n tokens; logits gets n rows when all_rows, else the last row only. */
err_code session_eval(session *s, const int32_t *tokens, int n, bool all_rows, float *logits, err_t *err);
/* One session's share of a batched pass (session_eval_batch). */
typedef struct {
    session *s;
    const int32_t *tokens;
    int n;          /* 1 .. SESSION_BATCH_ROWS */
    float *logits;  /* [n_vocab]: the last row's logits, or NULL for none; tentative: [n_out][n_vocab] */
    /* A verify pass (session_eval_tree's): its entries left tentative for
     * session_accept / session_accept_path, the logits of out_rows (NULL
     * with n_out = n: every row), anc a tree's ancestry or NULL. */
    bool tentative;
    const uint64_t *anc;
    const int32_t *out_rows;
    int n_out;
} session_part;
#define SESSION_BATCH_ROWS 512 /* the most rows of one session in one pass */
/* Every part's tokens consumed in one forward pass (model/forward.h:
 * forward_batch, which reads the weights once for all of them): each
 * session ends as session_eval(s, tokens, n, false, logits) leaves it, bit
 * for bit but for forward_batch's exceptions (a tentative part as
 * session_eval_tree leaves it). The sessions are distinct, of
 * one model, with one pool and one experts_iface; the pass runs on the
 * first's state. On failure every session is as it was before the call,
 * but for what a budget evicted when a session before the one whose commit
 * failed was committed (as session_eval leaves what its budget evicted). */
err_code session_eval_batch(const session_part *parts, int n, err_t *err);
/* Does the cache come out the same however a prompt is cut into passes? A
 * plain one does (no tiers to age into, no budget to evict by, so nothing
 * depends on when each pass's entries are committed); a tiered or budgeted
 * one needs the cuts of the prompt read alone. */
bool session_chunks_freely(const session *s);
/* Rows a verify pass may hold and stay exactly what decoding one token at a
 * time computes (kv_cache_exact_rows): its rows all see the cache as it is
 * now, and a commit can re-lay a block at a colder tier. INT_MAX when the
 * session chunks freely. */
int session_exact_rows(const session *s);

/* session_eval (last row of logits, when logits is not NULL), adding to
 * votes[l * n_votes + p] (p < n_votes) the attention the batch's last `last`
 * queries give the entry at position p in layer l, summed over heads. tentative: the
 * tokens only vote (n <= 512; their entries are dropped after, the sequence
 * stays as it was); else they are consumed. With kv_cache_hold this scores
 * a prompt by queries that come after it (runtime/prefill.h). */
err_code session_eval_voting(session *s, const int32_t *tokens, int n, bool tentative, int last, float *votes,
                             int n_votes, float *logits, err_t *err);
void session_reset(session *s);
/* Speculative verification: evaluate n tokens (all rows of logits) with
 * their cache entries left tentative, then keep the first n_keep of them
 * (session_accept: the rest are rolled back, the cache as if they had never
 * been evaluated). Nothing else may run between the two calls. */
err_code session_eval_tentative(session *s, const int32_t *tokens, int n, float *logits, err_t *err);
/* The same for a tree batch (model/forward.h: forward_tree): the logits of
 * out_rows only; session_accept may then keep a leading run of the trunk. */
err_code session_eval_tree(session *s, const int32_t *tokens, int n, const uint64_t *anc, const int32_t *out_rows,
                           int n_out, float *logits, err_t *err);
/* The attention kernels sum a block's keys in tiles of *tile: bit p is set
 * when the next entry of some layer would be its tile's p-th
 * (speculative/tree.h: which tree nodes compute what plain decoding would). */
uint32_t session_tile_phases(const session *s, int *tile);
err_code session_accept(session *s, const int32_t *tokens, int n, int n_keep, err_t *err);
/* The same for a tree batch whose kept tokens are the batch positions
 * path[0] < .. < path[n_keep - 1], one line of the tree (each the parent of
 * the next): their entries move into place (kv_cache_keep_tentative). */
err_code session_accept_path(session *s, const int32_t *tokens, int n, const int *path, int n_keep, err_t *err);
/* Forget everything after the first n tokens (n <= n_past). Entries the
 * forgotten tokens aged into a colder tier stay there: see session_rewind.
 * When a sliding-window layer already dropped an entry the next token needs,
 * everything goes (n_past 0): the sequence must be computed again. */
void session_truncate(session *s, int n);
/* Of the first n tokens, how many a truncation keeps exactly as a session
 * that never saw the rest would hold them: n, or 0 when the rest aged a
 * block into a colder tier (kv_cache_stale_from). */
int session_reusable(const session *s, int n);
/* Keep the first n tokens as if the rest had never been seen: truncate,
 * then compute again the entries the forgotten tokens had aged. On failure
 * the session holds the first session_reusable(s, n) tokens. */
err_code session_rewind(session *s, int n, err_t *err);
/* Tokens at the start of ids[0..n) that the cache already holds. */
int session_common_prefix(const session *s, const int32_t *ids, int n);

#endif
