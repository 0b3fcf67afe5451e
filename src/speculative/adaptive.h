/*
 * adaptive — the two policies that tune speculation while it runs:
 *
 *   draft length  it starts at 4; over the last SPEC_WINDOW draft tokens,
 *                 acceptance above 80 % lengthens it by one and below 50 %
 *                 shortens it by one, within SPEC_MIN_K..SPEC_MAX_K. A fixed
 *                 length never changes.
 *   paying        speculation must beat plain decoding on this machine and
 *                 this text. Until two plain passes are timed, every third
 *                 pass is a plain one. Three verify passes with drafts and not
 *                 one draft accepted switch speculation off at once; after
 *                 that, once the proposer's min_passes verify passes and two
 *                 plain ones are timed, so does a token that costs more by
 *                 verification than by a plain pass. It stays off for the
 *                 rest of the generation. A fixed draft length is an
 *                 experiment and is never switched off.
 *   tree budget   how many of a draft tree's nodes (tree.h) a pass verifies:
 *                 of the prefixes of the tree in the order its nodes were
 *                 chosen, the one with the most expected tokens (1 + the
 *                 nodes' values) per millisecond of verification, the time
 *                 of a pass of each size measured as the generation goes
 *                 (a moving average; a size not yet measured is costed from
 *                 the sizes that are, a little optimistically, so that it
 *                 gets tried: past the largest one, at the slope of the
 *                 last two measured, or +2 % a token if that is less). The
 *                 draft drafts deeper while its line's
 *                 value pays for a draft step at the rate the passes have
 *                 measured, at most 2 levels past the last choice's depth.
 *                 A fixed budget verifies that many nodes, and drafts as
 *                 deep as they may need.
 *   trees or lines  a proposer that can draft trees drafts them when greedy;
 *                 sampled, its siblings can be valued by rank only (tree.h),
 *                 and trees measured 0.91-0.98x of lines in the same runs, so
 *                 sampling drafts lines unless a tree size is asked for.
 */
#ifndef OCTO_SPEC_ADAPTIVE_H
#define OCTO_SPEC_ADAPTIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "speculative/tree.h"
#include "speculative/verify.h"

#define SPEC_MIN_K 2
#define SPEC_WINDOW 32

typedef struct {
    int k;                      /* the next draft's length */
    int fixed;                  /* non-zero: k never changes */
    uint8_t hist[SPEC_WINDOW];  /* recent draft tokens: 1 accepted, 0 rejected */
    int n_hist;
} spec_length;

/* fixed_k 0 = adaptive */
void spec_length_init(spec_length *l, int fixed_k);
void spec_length_update(spec_length *l, int proposed, int accepted);

/* A generation's timings so far. */
typedef struct {
    int verify_passes;          /* speculative passes */
    int proposing_passes;       /* of those, with at least one draft */
    int accepted;               /* drafts accepted */
    double spec_ms;             /* time in speculative passes, proposing included */
    int plain_passes;
    double plain_ms;
} spec_timing;

/* The next decode pass should be a plain one, to time the baseline
 * (passes: decode passes so far, this one not counted). */
bool spec_probe_plain(const spec_timing *t, int passes);

/* Speculation should stop (the caller keeps it off): *spec_ms_per_token and
 * *plain_ms_per_token get the figures that decided it. */
bool spec_stop(const spec_timing *t, int min_passes, double *spec_ms_per_token, double *plain_ms_per_token);

typedef struct {
    int fixed;                        /* > 0: every pass verifies this many nodes */
    double ms[SPEC_TREE_MAX + 1];     /* a verify pass's time by its tokens (moving average) */
    bool seen[SPEC_TREE_MAX + 1];
    double step_ms;                   /* one draft step (moving average) */
    double rate;                      /* tokens per ms of speculative passes (moving average) */
    int depth;                        /* the deepest node of the last choice */
} spec_budget;

void spec_budget_init(spec_budget *b, int fixed);
/* Draft trees? spec_tree: 0 automatic, -1 lines, N > 0 trees of N nodes;
 * spec_k > 0 asks for lines of k. */
bool spec_trees_pay(int spec_tree, int spec_k, bool sampled);
/* How deep the draft goes, and whether a line whose newest node has this
 * value is worth another draft step. */
int spec_budget_depth(const spec_budget *b);
bool spec_budget_deeper(const spec_budget *b, float value);
/* The nodes of t (root excluded, in the order spec_tree_select chose them)
 * to verify: a prefix, chosen as above. Remembers its depth. */
int spec_budget_choose(spec_budget *b, const spec_tree *t);
/* A pass of n tokens was verified in verify_ms after draft_steps draft steps
 * taking draft_ms, waited wait_ms for the draft's steps beside it (ahead.h),
 * and gave `tokens` (n 1: a plain pass, no draft). */
void spec_budget_measured(spec_budget *b, int n, double verify_ms, int draft_steps, double draft_ms, double wait_ms,
                          int tokens);

#endif
