/*
 * readahead — whether reading the next layer's predicted experts ahead
 * pays, measured while the model runs.
 *
 * A read ahead overlaps the flash with compute when the prediction is
 * right, and spends the flash's bandwidth on an expert nobody uses when it
 * is wrong. Which wins depends on the model (how well its routing can be
 * predicted), the device (flash against compute) and the cache (what is
 * already resident), so under `auto` it is measured, as speculative
 * decoding's pay-or-stop is: decode passes alternate between windows of
 * MOE_RA_WINDOW single-token passes with and without reading ahead, the
 * mean time per token of each is compared, and the faster one runs for the
 * next MOE_RA_HOLD passes before the two are measured again. `on` and
 * `off` fix it. The routed experts of the layer at hand are read on the
 * I/O thread in every mode but `off` (that read is never wasted).
 */
#ifndef OCTO_MOE_READAHEAD_H
#define OCTO_MOE_READAHEAD_H

#include <stdbool.h>
#include <stdint.h>

#define MOE_RA_WINDOW 8
#define MOE_RA_HOLD 120

typedef enum { MOE_PREFETCH_AUTO = 0, MOE_PREFETCH_ON, MOE_PREFETCH_OFF } moe_prefetch;

typedef struct {
    moe_prefetch mode;
    bool on;               /* read the predicted experts ahead in this pass */
    int phase;             /* auto: passes left in the current window or hold */
    bool probing;          /* auto: in the two measuring windows */
    uint64_t ns[2];        /* auto: time of this probe's single-token passes, without [0] and with [1] */
    int n[2];
    uint64_t passes_on, passes;  /* single-token passes, and those that read ahead */
} moe_readahead;

void moe_readahead_init(moe_readahead *r, moe_prefetch mode);
/* A forward pass of `tokens` tokens took ns (from its first MoE layer to the next pass's). */
void moe_readahead_pass(moe_readahead *r, uint64_t ns, int tokens);

#endif
