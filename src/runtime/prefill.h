/*
 * prefill — how a prompt enters the model's cache when a draft model can
 * look ahead (Galim et al., 2025, "Draft-based Approximate Inference"):
 *
 * SpecKV. The draft reads the prompt and writes a lookahead of the answer
 * (greedy). The model prefills the prompt with its cache's budget held
 * (kv_cache_hold), then runs the lookahead tentatively. The attention that
 * the prompt's last snap_window queries and the lookahead's queries give
 * each prompt entry, summed over heads, is its vote in that layer (not
 * pooled: PREFILL_KV_POOL). The lookahead's entries go and the cache applies
 * its budget by the votes (kv_cache_release). Used for the speckv policy,
 * and for the default policy when a draft is loaded and the prompt does not
 * fit the budget (the votes are then the default policy's first scores).
 * Holding the whole prompt costs memory: when its entries would take more
 * than PREFILL_HOLD_MAX times the byte budget, the prompt is read as without
 * a draft (the policy's own votes).
 *
 * SpecPC. The draft's own attention while it reads the prompt and writes
 * the lookahead (its last snap_window prompt queries and every lookahead
 * query) votes the same way (each token's largest vote over the layers,
 * pooled over PREFILL_PC_POOL neighbours); the best-voted tokens are kept
 * with PREFILL_PC_NEIGHBOURS neighbours on either side and the rest dropped,
 * the first PREFILL_KEEP_FIRST and last snap_window always kept. The model
 * prefills what is kept, in order, at consecutive positions. Off unless
 * asked for (prefill_params.compress).
 *
 * SpecKV-PC: both; one lookahead serves the two.
 */
#ifndef OCTO_RUNTIME_PREFILL_H
#define OCTO_RUNTIME_PREFILL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"
#include "runtime/session.h"

#define PREFILL_LOOKAHEAD 64  /* lookahead tokens the draft writes by default (fewer when the context is short) */
#define PREFILL_LOOKAHEAD_MAX 256
/* Votes are max-pooled over +-POOL neighbours, so a token's neighbours are kept with it: for SpecPC
 * (kernel 7, as the paper and SnapKV), not for SpecKV (measured worse on the
 * small models: docs/kv-cache.md). */
#define PREFILL_PC_POOL 3
#define PREFILL_KV_POOL 0
/* SpecPC keeps a chosen token's neighbours with it, up to 3 on either side (as the paper, whose
 * chunk is its pooling kernel): measured better than pooling alone (docs/kv-cache.md). */
#define PREFILL_PC_NEIGHBOURS 3
#define PREFILL_KEEP_FIRST 4  /* SpecPC never drops the prompt's first tokens (attention sinks) */
#define PREFILL_HOLD_MAX 2    /* SpecKV holds a prompt of at most twice the byte budget */

typedef struct {
    float compress;      /* SpecPC: 0 = off; (0, 1]: the share of the prompt's tokens the model prefills */
    int lookahead;       /* tokens the draft writes; 0 = PREFILL_LOOKAHEAD; -1 = none (the window votes alone) */
    bool auto_policy;    /* the cache's policy was left to the default: SpecKV only when the prompt does not fit */
} prefill_params;

typedef struct {
    bool speckv;            /* the prompt's entries were scored with the draft's lookahead */
    int lookahead_tokens;   /* tokens the draft wrote */
    double draft_ms;        /* the draft's time: reading the prompt, writing the lookahead */
    double vote_ms;         /* the model's time running the lookahead */
    int64_t kept_by_score;  /* prompt entries per layer kept by their votes (not anchors or recent) */
    int prompt_dropped;     /* prompt tokens SpecPC dropped before the model's prefill */
    double prefill_ms;      /* the model's prefill (and, with SpecKV, its lookahead) */
    double saved_ms;        /* SpecPC: the model's prefill time per token x tokens dropped, less draft_ms (estimate) */
} prefill_stats;

/* Does this prompt of n tokens take the draft's path (SpecKV or SpecPC)? */
bool prefill_uses_draft(const session *s, const session *draft, int n, const prefill_params *p);

/* Check p: a ratio outside [0, 1], a lookahead outside -1..PREFILL_LOOKAHEAD_MAX, compression without
 * a draft of the same vocabulary. */
err_code prefill_check(const session *s, const session *draft, const prefill_params *p, err_t *err);

/* Prefill prompt[0..n) after what s holds, as the header says: the last row of logits into logits.
 * The model consumes n - st->prompt_dropped tokens. Without a draft path (prefill_uses_draft false)
 * a plain session_eval. */
err_code prefill_run(session *s, session *draft, const int32_t *prompt, int n, const prefill_params *p,
                     float *logits, prefill_stats *st, err_t *err);

#endif
