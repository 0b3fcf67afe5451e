/*
 * lookahead — draft-free speculation by Jacobi iteration with an n-gram pool
 * (Fu et al. 2024, "Break the Sequential Dependency of LLM Inference Using
 * Lookahead Decoding").
 *
 * A window of W columns and N - 1 levels of guessed tokens rides along with
 * every pass of the target, in the same batch, as branches of a tree
 * (model/forward.h: forward_tree). The pass's layout:
 *
 *   [0]            the root: the last emitted token (its row gives the next
 *                  token, as in plain decoding)
 *   [1 .. m]       the verification branch: one candidate continuation of
 *                  the root, in a line (the trunk; only it can be kept)
 *   [1 + m ..]     the window, level by level: level l, column i guesses the
 *                  token i + 1 + l places after the root. It attends to the
 *                  root, level 0's columns 0..i (a Jacobi sequence) and its
 *                  own column's levels 1..l (a diagonal): an n-gram in the
 *                  making.
 *
 * After the pass, the argmax of each last-level token's row is the next
 * token of its column: the column's N tokens (levels 0 .. N-2 and the new
 * one) are a fresh n-gram for the pool, keyed by its first token, and the
 * levels move down by one with the new tokens on top. While the window is
 * warming up (fewer than N - 1 levels), the new tokens are simply a new level.
 *
 * The pool keeps, per first token, the G latest distinct n-grams; the
 * candidate for a root is its latest one. Only one candidate is verified
 * per pass (the paper verifies up to G): a second one would sit at batch
 * slots other than its depth, so its rows would be summed in another order
 * than plain decoding sums them, and greedy output would no longer be
 * byte-identical. The caller may also take its candidate from elsewhere
 * (prompt lookup first, generate.c), the window running all the same.
 */
#ifndef OCTO_SPEC_LOOKAHEAD_H
#define OCTO_SPEC_LOOKAHEAD_H

#include <stdint.h>

#include "core/err.h"

#define LOOKAHEAD_MAX_BATCH 63 /* below the prefill kernel's 64 (core/kernels/packed.h) and the tree limit */
#define LOOKAHEAD_MAX_W 16
#define LOOKAHEAD_MAX_N 6
#define LOOKAHEAD_MAX_G 16

typedef struct {
    int w, n, g; /* window columns, n-gram size (levels + 1), candidates kept per first token */
} lookahead_params;

/* W 5, N 3, G 4: a pass of 11 tokens plus the candidate (on 2 cores no setting tried paid: docs/speculative.md) */
lookahead_params lookahead_params_default(void);

typedef struct spec_lookahead spec_lookahead;

/* ctx: the prompt, whose tokens seed the window's first level. */
err_code lookahead_new(const lookahead_params *p, int n_vocab, const int32_t *ctx, int n_ctx, spec_lookahead **out,
                       err_t *err);
void lookahead_free(spec_lookahead *la);

/* The pool's candidate after root: up to max_k tokens; returns the count. */
int lookahead_candidate(const spec_lookahead *la, int32_t root, int max_k, int32_t *out);

/* Tokens the window adds to a pass. */
int lookahead_window_tokens(const spec_lookahead *la);

/* Lay out a pass: root, the m candidate tokens, the window. tokens and anc
 * get n = 1 + m + lookahead_window_tokens() entries (returned); rows gets the
 * logit rows to ask for: 0 .. m, then the window's last level (n_rows). */
int lookahead_layout(const spec_lookahead *la, int32_t root, const int32_t *cand, int m, int32_t *tokens,
                     uint64_t *anc, int32_t *rows, int *n_rows);

/* After the pass: win_logits holds the rows of the window's last level (the
 * rows after the first m + 1), n_vocab each. Advances the window and feeds
 * the pool. */
void lookahead_update(spec_lookahead *la, const float *win_logits, int n_vocab);

/* n-grams the window has produced, and how many were new to the pool. */
void lookahead_counts(const spec_lookahead *la, int *made, int *kept);

#endif
