/*
 * verify — which drafts the target accepts, and the token after them.
 *
 * Row i of a verify pass holds the target's logits after the last token
 * and drafts 0..i-1. Verification returns how many drafts are accepted and
 * the token that follows them, drawn so that the output has exactly the
 * distribution of plain decoding with the same sampler:
 *
 *   greedy   draft i is accepted while it is the token the sampler picks
 *            from row i; the next token is the pick from the first row not
 *            matched (row k if all were).
 *   sampled, a deterministic proposer (n-gram, lookahead; q NULL): at each
 *            row the target draws its own token from p_i with the random
 *            number plain decoding would use there, and draft i is accepted
 *            while it equals that draw; the first other draw is the next
 *            token. Draft x is so accepted with probability p_i(x), as
 *            rejection sampling with a one-hot q accepts it, and every token
 *            is plain decoding's own draw: a seed gives the same text with
 *            or without speculation, however the passes fall.
 *   sampled, a draft model: standard rejection sampling (Leviathan et al.
 *            2023; Chen et al. 2023). p_i is row i's distribution after every
 *            transform of the sampler, q_i the draft's (after the same
 *            transforms).
 *            Draft x_i is accepted with probability min(1, p_i(x)/q_i(x));
 *            the first rejection draws the next token from the normalised
 *            max(0, p_i - q_i) and ends the step; if all k are accepted the
 *            next token is drawn from p_k. Each emitted token is then
 *            distributed as p given everything before it, whatever q was.
 *
 * The sampler's penalties see each row's own context: accepted drafts are
 * accepted into the sampler tentatively while verifying and rewound before
 * returning, so the caller accepts every emitted token as usual.
 *
 * How long a draft is, and when speculation stops: adaptive.h.
 */
#ifndef OCTO_SPEC_VERIFY_H
#define OCTO_SPEC_VERIFY_H

#include <stdint.h>

#include "model/sampler.h"
#include "speculative/tree.h"

#define SPEC_MAX_K 10 /* the longest draft a pass verifies */

/* Drafts accepted (0..k); *next receives the token after them. rows: k + 1
 * consecutive logit rows of n_vocab. q: k distributions of n_vocab, the ones
 * the drafts were drawn from, or NULL for a deterministic proposer (ignored
 * when the sampler is greedy). scratch: 2 * n_vocab floats. */
int spec_verify(sampler *smp, const float *rows, int n_vocab, const int32_t *draft, const float *q, int k,
                float *scratch, int32_t *next);

/* The draft's guess at the token after a line, drawn from q (the draft
 * drafting beside verification: speculative/ahead.h). */
typedef struct {
    int32_t token;
    const float *q;
} spec_guess;

/* spec_verify, and when every draft is accepted, sampled, the token after
 * them coupled to the guess by the same rule (guess NULL: drawn as above):
 * the guess with probability min(1, p(g) / q(g)), else a draw from the
 * normalised max(0, p - q). It is distributed as p either way, and equals
 * the guess with probability sum min(p, q) instead of sum p q: the steps
 * the draft took from its guess are used that much more often. */
int spec_verify_guess(sampler *smp, const float *rows, int n_vocab, const int32_t *draft, const float *q, int k,
                      const spec_guess *guess, float *scratch, int32_t *next);

/*
 * A draft tree (tree.h), one logit row per node in node order: from the root,
 * each node's children are tried in rank order, and the walk goes on from
 * the child accepted, until a node has none accepted (or no children).
 *
 *   greedy   the child equal to the sampler's pick from the node's row.
 *   sampled  multi-candidate rejection sampling (recursive rejection
 *            sampling without replacement, as in SpecInfer and Jeon et al.
 *            2024): p is the node's row after the sampler's transforms and
 *            q the children's distribution (one-hot at the child when it was
 *            chosen deterministically). Child x is accepted with probability
 *            min(1, p(x) / q(x)); on rejection p becomes the normalised
 *            max(0, p - q), and q loses x and is normalised again (the next
 *            child was drawn from q without x). With every child rejected,
 *            the next token is drawn from what p has become. Each emitted
 *            token is distributed as plain decoding's.
 *
 * Returns the drafts accepted, a; path[0..a] gets the nodes walked (path[0] =
 * 0, the root) and *next the token after them. scratch: 3 * n_vocab floats.
 */
int spec_verify_tree(sampler *smp, const float *rows, int n_vocab, const spec_tree *t, float *scratch, int *path,
                     int32_t *next);

#endif
