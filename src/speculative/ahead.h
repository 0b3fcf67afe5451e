/*
 * ahead — the draft drafting beside verification: while the target verifies
 * a pass, a thread of the proposer's own, on the draft's cores, keeps
 * drafting the pass's line past its end, as if the target will keep all of
 * it. Step 0 evaluates the line's last draft and picks the token the target
 * would add after it; each later step evaluates the previous pick.
 *
 * The target then settles it (spec_ahead_settle): when it kept the whole
 * line and chose the same token after it, the steps are the next
 * proposal's first ones (their entries are in the draft's cache already,
 * their logits or distributions saved here); otherwise they are dropped,
 * and the next proposal truncates the draft's cache as usual. Either way
 * the thread stops after the step it is on, except that a sampled
 * generation's kept steps are all waited for (below). Nothing
 * else touches the draft while the thread runs: it runs only between a
 * proposal and its settling (or spec_ahead_halt).
 *
 * It draws with a sampler of its own: the target's transforms and penalty
 * window, copied at the start with the line accepted, and its own random
 * stream (the target's is verifying). Greedy, its picks are the target
 * sampler's. Sampled, they are draws from the draft's distribution given
 * the tokens before them, which is all verification asks of a draft
 * (verify.h); each job draws from a stream seeded for it, and which steps
 * are kept depends only on what the target chose, so a seeded generation
 * stays reproducible.
 *
 * Only for a draft with cores of its own (spec_lm.own_cores): on shared
 * cores the thread would take them from the target's pass. Even on its own
 * cores it competes with the target for memory bandwidth, so it drafts
 * beside a pass only while the steps are kept often enough
 * (SPEC_AHEAD_MIN_KEEP of the passes it drafted beside, measured as it
 * goes, starting from even odds), and otherwise beside one pass in
 * SPEC_AHEAD_PROBE, to keep measuring.
 */
#ifndef OCTO_SPEC_AHEAD_H
#define OCTO_SPEC_AHEAD_H

#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"
#include "model/sampler.h"
#include "speculative/proposer.h"

#define SPEC_AHEAD_MAX (SPEC_MAX_K + 1) /* steps one settling can keep: a proposal's deepest line, and step 0 */
#define SPEC_AHEAD_MIN_KEEP 0.25
#define SPEC_AHEAD_PROBE 8

typedef struct spec_ahead spec_ahead;

/* The thread starts, pinned to the draft's cores (lm->pin), and waits. */
err_code spec_ahead_new(const spec_lm *lm, const sampler_params *sp, int n_vocab, spec_ahead **out, err_t *err);
/* Stops and joins the thread. */
void spec_ahead_free(spec_ahead *a);

/* Draft `steps` steps beside the target's pass, from `from`, the line's last
 * draft, at position pos of the draft's cache (its entries end just
 * before); hist: the target's sampler with the line accepted. Does
 * nothing while the odds do not pay (above). */
void spec_ahead_start(spec_ahead *a, const sampler *hist, int32_t from, int pos, int steps);
/* The target verified the pass: whole, it kept the line through `from`;
 * next, the token it chose after. Returns once the thread is idle. */
void spec_ahead_settle(spec_ahead *a, bool whole, int32_t next);
/* Sampled: the guess at the token after the line (step 0's pick and the
 * distribution it was drawn from), once step 0 is done; false: none (no
 * job, greedy, or the step failed). Waits for step 0, so that whether a
 * pass has a guess never depends on timing. */
bool spec_ahead_guess(spec_ahead *a, spec_guess *out);
/* A pass abandoned (an error): stop, and keep nothing. */
void spec_ahead_halt(spec_ahead *a);

/* For a proposal at n_past from `last`: the depths whose steps were kept
 * (0: none), taken once; the proposal then says how many of them it used
 * (spec_ahead_count; 0: none, its cache did not hold them). Depth d's pick,
 * and its logits (greedy) or the distribution it was drawn from (sampled). */
int spec_ahead_take(spec_ahead *a, int n_past, int32_t last);
void spec_ahead_count(spec_ahead *a, int used);
int32_t spec_ahead_pick(const spec_ahead *a, int d);
const float *spec_ahead_row(const spec_ahead *a, int d);

/* Steps used by proposals (a kept job's step 0, the guess, with the depths
 * used), and steps computed and dropped. */
void spec_ahead_counts(const spec_ahead *a, int *used, int *dropped);

#endif
