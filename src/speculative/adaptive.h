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
 */
#ifndef OCTO_SPEC_ADAPTIVE_H
#define OCTO_SPEC_ADAPTIVE_H

#include <stdbool.h>
#include <stdint.h>

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

#endif
