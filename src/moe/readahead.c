/*
 * readahead — see readahead.h.
 */
#include "readahead.h"

void moe_readahead_init(moe_readahead *r, moe_prefetch mode) {
    /* a first window with, unmeasured: the cache is cold and every pass misses */
    *r = (moe_readahead){.mode = mode, .on = mode != MOE_PREFETCH_OFF, .phase = MOE_RA_WINDOW};
}

/* The end of a window or of a hold: what comes next. */
static void next_phase(moe_readahead *r) {
    if (r->probing && r->on) { /* measured with; now without */
        r->on = false;
        r->phase = MOE_RA_WINDOW;
        return;
    }
    if (r->probing) { /* both measured: the faster per token holds */
        const double with = (double)r->ns[1] / r->n[1], without = (double)r->ns[0] / r->n[0];
        r->on = with < without;
        r->probing = false;
        r->phase = MOE_RA_HOLD;
        return;
    }
    r->probing = true, r->on = true; /* measure again: the cache, the text and the device change */
    r->ns[0] = r->ns[1] = 0;
    r->n[0] = r->n[1] = 0;
    r->phase = MOE_RA_WINDOW;
}

void moe_readahead_pass(moe_readahead *r, uint64_t ns, int tokens) {
    if (tokens != 1) return; /* a batch costs differently: decode passes alone are compared */
    r->passes++;
    r->passes_on += r->on;
    if (r->mode != MOE_PREFETCH_AUTO) return;
    if (r->probing) r->ns[r->on] += ns, r->n[r->on]++;
    if (--r->phase == 0) next_phase(r);
}
