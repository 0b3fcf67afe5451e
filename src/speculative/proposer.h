/*
 * proposer — what every speculative proposer is: something that, given the
 * target's context, lays out one verify pass (the last token, up to k draft
 * tokens after it, and for lookahead extra branches), hears how many drafts
 * the target accepted, and sees every token that joins the sequence.
 *
 * One file per proposer, each exporting one proposer_ops:
 *   proposer_ngram.c      prompt lookup over the context (ngram.c's table)
 *   proposer_draft.c      a smaller model with the same vocabulary ("draft"),
 *                         or the target's own low-precision copy ("self")
 *   proposer_lookahead.c  Jacobi iteration with an n-gram pool (lookahead.c)
 * and one table (proposer_table.c) whose rows give their names; the API's
 * octo_spec_mode numbers after OCTO_SPEC_NONE are the table's rows in order,
 * and the CLI (`run`, `bench`) takes the same names. Adding a proposer: a new
 * file with its proposer_ops, and a row in the table (docs/architecture.md).
 *
 * A proposer never runs the target: the generation loop (runtime/generate.c)
 * runs the pass, verifies it (verify.h) and keeps the accepted entries. A
 * proposer that drafts with a model reaches it through spec_lm, which the
 * runtime implements over a session: this layer knows no sessions, caches
 * or memory budgets.
 */
#ifndef OCTO_SPEC_PROPOSER_H
#define OCTO_SPEC_PROPOSER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"
#include "model/sampler.h"
#include "speculative/adaptive.h"
#include "speculative/lookahead.h"
#include "speculative/tree.h"
#include "speculative/verify.h"

/* A pass is at most this many tokens: a chain of 1 + SPEC_MAX_K, or a
 * lookahead tree (below the prefill kernel's 64). */
#define SPEC_MAX_PASS LOOKAHEAD_MAX_BATCH

/* A model a proposer may run (the draft): the runtime's session behind it. */
typedef struct {
    void *ctx;
    int n_ctx;
    /* tokens at the start of its cache that equal tokens[0..n) */
    int (*common_prefix)(void *ctx, const int32_t *tokens, int n);
    void (*truncate)(void *ctx, int n);
    /* append tokens to its cache; logits of the last one */
    err_code (*eval)(void *ctx, const int32_t *tokens, int n, float *logits, err_t *err);
    /* around a proposal: the calling thread moves to the draft's cores and back */
    void (*enter)(void *ctx);
    void (*leave)(void *ctx);
    /* the draft computes on cores of its own, not the target's: a thread of
     * the proposer's may draft while the target verifies (ahead.h), moved
     * there for good by pin */
    bool own_cores;
    void (*pin)(void *ctx);
} spec_lm;

/* What a proposer is made with. */
typedef struct {
    int n_vocab;
    int n_ctx;                 /* the target's context */
    const int32_t *prompt;     /* the context so far (the proposer may index it) */
    int n_prompt;
    sampler *smp;              /* the target's sampler: a draft model draws with its transforms */
    bool sampled;              /* not greedy: a draft model keeps the distributions it drew from */
    const spec_lm *lm;         /* the model to draft with, for proposers whose needs_lm is set */
    lookahead_params lookahead; /* lookahead: W, N, G (all 0: lookahead_params_default()) */
    bool trees;                /* a proposer whose trees is set drafts trees, not lines (adaptive.h: spec_trees_pay) */
    int tree_nodes;            /* trees: > 0, every pass verifies that many nodes; 0, as many as pay for their
                                * measured cost (its spec_budget, measured by the passes verified() reports) */
    bool ahead;                /* a draft with cores of its own drafts beside verification (ahead.h) */
} spec_setup;

/* The target at a step. */
typedef struct {
    const int32_t *tokens;     /* its cached tokens */
    int n_past;
    int32_t last;              /* the newest token, not cached yet: the pass's first */
    int n_ctx;
    /* how the target's attention groups keys (runtime: session_tile_phases): a
     * draft tree keeps the nodes it computes as plain decoding would (tree.h) */
    uint32_t tile_phases;
    int tile;
} spec_view;

/* One verify pass as the proposer lays it out. */
typedef struct {
    int32_t tokens[SPEC_MAX_PASS]; /* last, the k drafts, then any branches */
    int n;                     /* tokens in the pass: 1 + k for a chain */
    int k;                     /* drafts: tokens[1 .. k], one line from `last` */
    const float *q;            /* k distributions the drafts were drawn from, or NULL (deterministic) */
    bool tree;                 /* branches after the drafts: anc and rows say how they attend */
    uint64_t anc[SPEC_MAX_PASS]; /* tree: token i attends to the tokens whose bits are set */
    int32_t rows[SPEC_MAX_PASS]; /* tree: the rows whose logits come back, the k + 1 chain rows first */
    int n_rows;
    /* A draft tree (tree.h) instead: tokens, anc and every row are its
     * nodes in batch order (tokens[i] = dt.token[i]), k its drafts (n - 1),
     * and verification walks it (spec_verify_tree). */
    bool draft_tree;
    spec_tree dt;
    int draft_steps;           /* the draft model's steps for this pass (its cost, for the budget) */
} spec_pass;

/* What a verify pass came to and what it cost, told to the proposer that
 * laid it out (verified). The times are the generation loop's clock: from
 * the proposal's start to its end (draft_ms), from there to the pass's
 * entries kept (verify_ms: the target's pass, verification and the cache's
 * repair, less wait_ms), of which wait_ms waiting on the proposer's guess
 * (its draft's step beside the pass: ahead.h). Whatever the proposer does
 * in verified() is its own to time. */
typedef struct {
    const float *logits;       /* the pass's rows' logits, n_vocab each */
    int n_vocab;
    int accepted;              /* of its k drafts kept (a draft tree: the nodes path[1..accepted]) */
    const int *path;           /* the batch positions kept: the pass's first, then the accepted */
    int32_t next;              /* the target's token after them */
    double draft_ms, verify_ms, wait_ms;
} spec_outcome;

/* Counters only some proposers have (0 otherwise). */
typedef struct {
    int ngrams, ngrams_new;    /* lookahead: n-grams the window made, and of those, new to the pool */
    int ahead_used, ahead_dropped; /* draft: steps drafted beside verification that proposals used, and dropped */
    int pool_proposed, pool_accepted; /* lookahead: drafts that came from the pool, and were accepted */
} spec_proposer_stats;

typedef struct {
    const char *name;
    bool needs_lm;             /* drafts with a model (spec_setup.lm) */
    bool trees;                /* drafts trees when asked (spec_setup.trees) */
    int min_passes;            /* verify passes timed before its speed is judged (generate.c) */
    /* *state may be NULL for a proposer that keeps none. */
    err_code (*create)(const spec_setup *s, void **state, err_t *err);
    /* Lay out a pass with up to k drafts: returns the tokens in the pass,
     * pass->n (1 + k for a chain; 0: nothing this step, decode plainly), or
     * -1 on an error (err says why). */
    int (*propose)(void *state, const spec_view *v, int k, spec_pass *pass, err_t *err);
    /* The pass ran, was verified and its accepted entries kept: what it
     * came to and cost (spec_outcome). */
    void (*verified)(void *state, const spec_pass *pass, const spec_outcome *o);
    /* A plain pass ran instead (the last token alone, no drafts), taking ms:
     * the baseline for a proposer that weighs what its passes cost. NULL:
     * it weighs nothing. */
    void (*plain)(void *state, double ms);
    /* The pass was abandoned (the target failed): stop anything the
     * proposer runs beside it. NULL: it runs nothing. */
    void (*halt)(void *state);
    /* Sampled, a line: the proposer's guess at the token after it, for
     * verification to couple the target's token to (verify.h:
     * spec_verify_guess); false: none. NULL: it never has one. */
    bool (*guess)(void *state, spec_guess *out);
    /* tokens joined the sequence (each emitted token, once) */
    err_code (*push)(void *state, const int32_t *tokens, int n, err_t *err);
    void (*stats)(const void *state, spec_proposer_stats *out);
    void (*free)(void *state);
} proposer_ops;

extern const proposer_ops proposer_ngram, proposer_draft, proposer_self, proposer_lookahead;

/* The table (proposer_table.c): row i is the public mode OCTO_SPEC_NONE + 1 + i. */
int spec_proposer_count(void);
const proposer_ops *spec_proposer_at(int i); /* NULL outside 0..count-1 */
int spec_proposer_index(const char *name);   /* -1: no such proposer */

#endif
