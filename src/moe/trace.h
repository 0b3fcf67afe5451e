/*
 * trace — the expert trace (`--moe-trace FILE`): one line per token and MoE
 * layer, `TOKEN LAYER S1 .. Sk E1 .. Ek`, the k experts the token was routed
 * to (best first) and, in the same order, what the lookup of each found:
 * HIT (in the cache, a prefetch that finished in time included), MISS (read
 * from the file while the forward pass waited) or INT2 (served by its 2-bit
 * copy, moe/int2.h). A batch looks an expert up once for all its tokens,
 * so they share that status. Lines starting with '#' are comments; the
 * first ones give the shape and the cache's slots, which is what an offline
 * replay (bench/moe_belady.py) needs.
 */
#ifndef OCTO_MOE_TRACE_H
#define OCTO_MOE_TRACE_H

#include <stdint.h>

#include "core/err.h"
#include "expert_cache.h"

typedef struct moe_trace moe_trace;

/* slots: the cache's; policy: its name. */
err_code moe_trace_open(const char *path, int n_layer, int n_expert, int k, int slots, const char *policy,
                        moe_trace **out, err_t *err);
/* A token of the layer at hand was routed to experts[0..k). A new layer
 * writes the last one's lines first. */
void moe_trace_route(moe_trace *t, int layer, const int32_t *experts, int k);
/* The layer's lookup of expert found status. */
void moe_trace_status(moe_trace *t, int expert, moe_status status);
/* Write what is buffered; false when any write so far failed. */
bool moe_trace_flush(moe_trace *t);
/* Flushes and closes; false when anything failed to be written. */
bool moe_trace_close(moe_trace *t);

#endif
