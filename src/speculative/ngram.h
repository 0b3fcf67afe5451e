/*
 * ngram — the draft-free proposer (prompt lookup): the last n tokens of the
 * context (n = 4 down to 1) are looked up among the earlier tokens of the
 * prompt and the generated text, and what followed their latest occurrence
 * is proposed. A hash table from each n-gram to the position after its
 * latest occurrence makes a lookup O(1); every new token adds 4 entries.
 */
#ifndef OCTO_SPEC_NGRAM_H
#define OCTO_SPEC_NGRAM_H

#include <stdint.h>

#include "core/err.h"

#define NGRAM_MAX_N 4

typedef struct spec_ngram spec_ngram;

err_code ngram_new(int capacity, spec_ngram **out, err_t *err);
void ngram_free(spec_ngram *g);
/* Append tokens to the context (the table indexes them). */
err_code ngram_push(spec_ngram *g, const int32_t *tokens, int n, err_t *err);
/* Up to max_k tokens that followed the longest suffix match; returns the count (0: no match). */
int ngram_propose(const spec_ngram *g, int max_k, int32_t *out);

#endif
