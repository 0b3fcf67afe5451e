/*
 * batch — continuous batching: the step several generations share.
 *
 * A model serving several sessions (octo_session_new) steps their
 * generations together: one forward pass (model/forward.h: forward_batch)
 * evaluates the decode row of every generation that is due one and chunks
 * of the prompts that are still being read, so the weights are read once for
 * all of them. Sessions join and leave between steps; each attends to its own
 * cache with its own policy and budget and samples with its own parameters
 * (in its own gen_next), so its text is the one it would have alone.
 *
 * The policy, all of it here:
 * - a step runs when at least two generations want rows; alone, a
 *   generation does its own work in gen_next, speculation included, and
 *   reads a prompt a chunk at a time (gen_prefill_step), letting a request
 *   that waits for the model meanwhile (octo.c's model_lock) in between its
 *   chunks: that one starts, and the rest of the prompt goes into steps
 *   with it, so a long prompt alone does not hold the others back either;
 * - in a step, a generation that speculates verifies its drafts as one more
 *   span of the pass when that pays: its k drafts add k rows every one of
 *   the K decoding sessions waits for, so only when a * T0 > K * k * r, with
 *   a its drafts accepted per pass, T0 the measured decode step and r the
 *   measured cost of a row beyond a session's first; else it decodes a row;
 * - a prompt is read in the chunks it would be read in alone (256
 *   tokens, committed one by one) unless its cache comes out the same
 *   however it is cut (session_chunks_freely: no tiers, no budget); then
 *   beside decode rows its chunks are sized by a time budget: a step may
 *   take BATCH_STEP_MS or twice a decode step, whichever is longer, at the
 *   measured cost of a prompt row. A chunk larger than the budget has the
 *   next step: decode steps and its chunks take turns, so a long prompt
 *   does not stall the others, nor they it. With no decode rows, prompts
 *   go in chunks of up to 256;
 * - weights whose kernel changes at PACKED_BF16_MIN_TOKENS rows (a
 *   prefill kernel: core/kernels/matmul.h, matmul_batch_invariant) keep a step
 *   with decode or verify rows under that many rows, and a prompt's chunk
 *   in a pass of its own, so every row is computed as it would be alone;
 * - latent attention (one sequence per pass) is not batched;
 * - a pass that fails is run again one session at a time, so only the
 *   session at fault gets the error;
 * - before a step, the scheduler waits (at most BATCH_GATHER_MS) for the
 *   generations whose logits are computed but not yet sampled while their
 *   callers are already asking for the next piece: they join this step
 *   rather than the next.
 */
#ifndef OCTO_RUNTIME_BATCH_H
#define OCTO_RUNTIME_BATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/generate.h"

#define BATCH_STEP_MS 100.0  /* a step with a prompt chunk may take this long, at least */
#define BATCH_GATHER_MS 3.0  /* the longest wait for a caller about to join */

typedef struct {
    int64_t steps;        /* shared steps run */
    int64_t sessions;     /* sessions in them, in all (sessions / steps: the mean batch) */
    int64_t prompt_rows;  /* of those, prompt tokens */
    int64_t retried;      /* steps whose pass failed and ran again one session at a time */
    int64_t verify_passes; /* speculative verify passes that went into shared steps */
    int max_sessions;     /* the largest batch */
    bool prompt_turn;     /* a prompt left out of the last step has the next */
    int last_sessions;    /* the last step's */
    double row_ms;        /* the measured cost of a prompt row in a step (0: not yet) */
    double decode_ms;     /* the last step's time without prompt rows */
} batch_state;

void batch_init(batch_state *b);
/* One shared step over the model's active generations g[0..n): returns the
 * sessions it ran, 0 when it ran nothing (fewer than two want rows, or a
 * model whose passes take one sequence); *served: caller's generation was
 * one of them. The generations share one model, pool and experts (a
 * bundle's sessions). */
int batch_step(batch_state *b, generation *const *g, int n, const generation *caller, bool *served);
/* Should the scheduler wait before a step? True when some g[i] has logits
 * not yet sampled while its caller is asking for its next piece (asking[i]). */
bool batch_gather(generation *const *g, const bool *asking, int n);

#endif
