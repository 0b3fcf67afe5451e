/*
 * verify — what speculation decides, apart from running the models: which
 * drafts the target accepts, and how long the next draft should be.
 *
 * Greedy verification: row i of a verify pass holds the target's logits
 * after the last token and drafts 0..i-1; draft i is accepted while it is
 * the token the target's sampler picks from that row.
 *
 * Draft length: it starts at 4; over the last SPEC_WINDOW draft tokens,
 * acceptance above 80 % lengthens it by one and below 50 % shortens it by
 * one, within SPEC_MIN_K..SPEC_MAX_K. A fixed length never changes.
 */
#ifndef OCTO_SPEC_VERIFY_H
#define OCTO_SPEC_VERIFY_H

#include <stdint.h>

#include "model/sampler.h"

#define SPEC_MIN_K 2
#define SPEC_MAX_K 10
#define SPEC_WINDOW 32

/* Drafts accepted: rows are k + 1 consecutive logit rows of n_vocab. */
int spec_accept_greedy(sampler *smp, const float *rows, int n_vocab, const int32_t *draft, int k);

typedef struct {
    int k;                      /* the next draft's length */
    int fixed;                  /* non-zero: k never changes */
    uint8_t hist[SPEC_WINDOW];  /* recent draft tokens: 1 accepted, 0 rejected */
    int n_hist;
} spec_length;

/* fixed_k 0 = adaptive */
void spec_length_init(spec_length *l, int fixed_k);
void spec_length_update(spec_length *l, int proposed, int accepted);

#endif
