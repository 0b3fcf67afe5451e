/*
 * experts — see experts.h.
 *
 * The prediction is scored as the tokens arrive: hint_next() keeps each
 * token's predicted set for the next layer (moe/predict.h), and that layer's
 * hint() calls (one per token, in batch order) count how many of the
 * token's routed experts were in it.
 */
#define _GNU_SOURCE /* clock_gettime under a strict -std */
#include "experts.h"
#include "core/clock.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>

#include "policy.h"
#include "predict.h"
#include "readahead.h"
#include "trace.h"

enum { PRED_MAX = 64 + MOE_PREDICT_EXTRA }; /* the most one prediction names: k + extras */

struct moe_experts {
    experts_iface iface;
    const model *m;
    moe_cache *cache;    /* NULL: the mapping */
    moe_trace *trace;    /* NULL: none */
    double margin;       /* moe/predict.h */
    moe_readahead ra;    /* whether the predicted experts are read ahead */
    bool ra_paused;      /* memory pressure: no read-ahead for now (runtime/adapt.h) */
    uint64_t pass_t0;    /* when the current forward pass reached its first MoE layer, 0: none yet */
    uint64_t pass_end;   /* its last expert lookup: a pass is timed to there, not to the next one (which
                            may come after the user's think time) */
    int pass_tokens;     /* its tokens */
    uint64_t pass_routed, pass_fetched; /* its (token, expert) pairs' bytes, and its lookups' */
    experts_stats st;
    int layer;           /* the layer whose hints came last, -1: none */
    int first_layer;     /* the first MoE layer seen: its tokens are counted */
    uint8_t *first;      /* [n_expert] 1: a token of the layer's batch chose it first (its lookup is not low) */
    int32_t *pred;       /* [pred_tokens][pred_w] the predicted experts of pred_layer, -1 padded */
    size_t pred_cap;     /* entries pred holds */
    int pred_layer, pred_tokens, pred_w;
    int pred_seen;       /* tokens of pred_layer scored so far */
};

static err_code get(void *self, int layer, int expert, model_mat mats[3], err_t *err) {
    moe_experts *x = self;
    if (layer < 0 || layer >= x->m->hp.n_layer || expert < 0 || expert >= x->m->hp.n_expert)
        return err_set(err, ERR_INVALID_ARG, "expert %d of layer %d does not exist", expert, layer);
    x->st.lookups++;
    x->pass_fetched += moe_expert_bytes(x->m, layer);
    if (!x->cache) {
        model_expert_mats(x->m, layer, expert, mats);
        return ERR_OK;
    }
    moe_status status = MOE_MISS;
    const bool low = layer == x->layer && !x->first[expert]; /* no token's first choice: a 2-bit copy may serve */
    const err_code rc = moe_cache_get(x->cache, layer, expert, low, mats, &status, err);
    if (x->trace && !rc) moe_trace_status(x->trace, expert, status);
    x->pass_end = clock_ns();
    return rc;
}

/* How many of a token's routed experts its prediction named. */
static void score(moe_experts *x, const int32_t *experts, int n) {
    const int32_t *p = x->pred + (size_t)x->pred_seen++ * (size_t)x->pred_w;
    for (int i = 0; i < n; i++) {
        x->st.predicted++;
        for (int j = 0; j < x->pred_w && p[j] >= 0; j++)
            if (p[j] == experts[i]) {
                x->st.predicted_right++;
                break;
            }
    }
}

/* A pass of several tokens fetched each expert once for all of them. */
static void count_batch(const moe_experts *x, experts_stats *st) {
    if (x->pass_tokens <= 1) return;
    st->batch_tokens += (uint64_t)x->pass_tokens;
    st->batch_saved_bytes += x->pass_routed - x->pass_fetched;
}

/* A forward pass reaches its first MoE layer: the last one is over. */
static void new_pass(moe_experts *x) {
    count_batch(x, &x->st);
    x->pass_routed = x->pass_fetched = 0;
    if (x->pass_t0 && x->pass_end > x->pass_t0) moe_readahead_pass(&x->ra, x->pass_end - x->pass_t0, x->pass_tokens);
    x->pass_t0 = clock_ns();
    x->pass_end = 0;
    x->pass_tokens = 0;
    x->pred_layer = -1; /* a pass that failed midway leaves no prediction behind */
}

static void hint(void *self, int layer, const int32_t *experts, int n) {
    moe_experts *x = self;
    if (layer != x->layer) {
        x->layer = layer;
        if (x->first_layer < 0) x->first_layer = layer;
        if (layer == x->first_layer) new_pass(x);
        if (x->cache) moe_cache_new_layer(x->cache, layer);
        memset(x->first, 0, (size_t)x->m->hp.n_expert);
    }
    if (n > 0 && experts[0] >= 0 && experts[0] < x->m->hp.n_expert) x->first[experts[0]] = 1;
    if (layer == x->first_layer) x->st.tokens++, x->pass_tokens++;
    x->pass_routed += (uint64_t)n * moe_expert_bytes(x->m, layer);
    if (x->trace) moe_trace_route(x->trace, layer, experts, n);
    if (x->cache) moe_cache_fetch(x->cache, layer, experts, n, false);
    if (layer == x->pred_layer && x->pred_seen < x->pred_tokens) score(x, experts, n);
}

/* A token's prediction: the experts named, appended to its set p (width w,
 * -1 padded) where they are not in it yet, and read ahead. */
static void predict_token(moe_experts *x, int next_layer, const float *scores, int n_expert, int32_t *p, int w) {
    int32_t named[PRED_MAX];
    const int n = moe_predict(scores, n_expert, x->m->hp.n_expert_used, x->margin, named);
    int have = 0;
    while (have < w && p[have] >= 0) have++;
    for (int i = 0; i < n; i++) {
        bool dup = false;
        for (int j = 0; j < have && !dup; j++) dup = p[j] == named[i];
        if (!dup && have < w) p[have++] = named[i], x->st.predicted_named++;
    }
    if (x->cache && x->ra.on && !x->ra_paused) moe_cache_fetch(x->cache, next_layer, named, n, true);
}

/* The first call for a layer starts its tokens' sets, the second adds to
 * them. Out of memory for the batch's predictions: that batch goes
 * unscored and nothing is read ahead for it. */
static void hint_next(void *self, int next_layer, const float *scores, int n_tokens, int n_expert) {
    moe_experts *x = self;
    const int k = x->m->hp.n_expert_used, w = 2 * k + MOE_PREDICT_EXTRA;
    const bool again = next_layer == x->pred_layer && n_tokens == x->pred_tokens && x->pred_seen == 0;
    if (!again) {
        const size_t need = (size_t)n_tokens * (size_t)w;
        x->pred_layer = -1;
        if (need > x->pred_cap) {
            int32_t *p = realloc(x->pred, sizeof(int32_t) * need);
            if (!p) return;
            x->pred = p;
            x->pred_cap = need;
        }
        for (size_t i = 0; i < need; i++) x->pred[i] = -1;
    }
    for (int t = 0; t < n_tokens; t++)
        predict_token(x, next_layer, scores + (size_t)t * n_expert, n_expert, x->pred + (size_t)t * w, w);
    x->pred_layer = next_layer;
    x->pred_tokens = n_tokens;
    x->pred_w = w;
    x->pred_seen = 0;
}

static void set_budget(void *self, uint64_t bytes) {
    moe_experts *x = self;
    if (x->cache) moe_cache_set_budget(x->cache, bytes);
}

static void pause_readahead(void *self, bool paused) { ((moe_experts *)self)->ra_paused = paused; }

/* Also writes out the trace so far (fflush), so a caller reading stats at
 * the end of a run learns whether the trace was written whole. */
static void stats(const void *self, experts_stats *out) {
    const moe_experts *x = self;
    *out = x->st;
    count_batch(x, out); /* the pass under way */
    if (x->trace) out->trace_failed = !moe_trace_flush(x->trace);
    out->expert_bytes = moe_expert_bytes_all(x->m);
    if (!x->cache) return;
    moe_cache_stats c;
    moe_cache_stats_get(x->cache, &c);
    out->cached = true;
    out->hits = c.hits;
    out->bytes_read = c.bytes_read;
    out->stall_ns = c.stall_ns;
    out->cache_bytes = (uint64_t)c.slots_used * c.slot_bytes;
    out->cache_capacity = (uint64_t)c.slots * c.slot_bytes;
    out->prefetched = c.prefetched;
    out->prefetch_bytes = c.prefetch_bytes;
    out->prefetch_used = c.prefetch_used;
    out->prefetch_in_time = c.prefetch_in_time;
    out->prefetch_late = c.prefetch_late;
    out->prefetching = c.prefetching;
    out->readahead_passes = x->ra.passes;
    out->readahead_passes_on = x->ra.passes_on;
    out->int2_loads = c.int2_loads;
    out->int2_served = c.int2_served;
    out->int2_promotions = c.int2_promotions;
    out->int2_errors = c.int2_errors;
    snprintf(out->int2_why, sizeof out->int2_why, "%s", c.int2_why);
}

err_code moe_experts_new(const model *m, const char *path, const moe_cache_config *c, moe_experts **out, err_t *err) {
    *out = NULL;
    if (m->hp.n_expert <= 0) return err_set(err, ERR_INVALID_ARG, "the model has no experts");
    if (m->hp.n_expert_used + MOE_PREDICT_EXTRA > PRED_MAX)
        return err_set(err, ERR_UNSUPPORTED, "%d experts per token are more than the store handles (%d)",
                       m->hp.n_expert_used, PRED_MAX - MOE_PREDICT_EXTRA);
    const moe_cache_config def = moe_cache_config_default();
    if (!c) c = &def;
    moe_experts *x = calloc(1, sizeof *x);
    if (!x) return err_set(err, ERR_NOMEM, "out of memory");
    x->m = m;
    if (!(x->first = calloc((size_t)m->hp.n_expert, 1))) {
        free(x);
        return err_set(err, ERR_NOMEM, "out of memory");
    }
    x->layer = x->first_layer = x->pred_layer = -1;
    x->margin = c->predict_margin;
    moe_readahead_init(&x->ra, c->prefetch);
    err_code rc = path ? moe_cache_new(m, path, c, &x->cache, err) : ERR_OK;
    if (!rc && path && c->trace) {
        moe_cache_stats cs;
        moe_cache_stats_get(x->cache, &cs);
        const char *policy = moe_policy_get(c->policy)->name;
        rc = moe_trace_open(c->trace, m->hp.n_layer, m->hp.n_expert, m->hp.n_expert_used, cs.slots, policy,
                            &x->trace, err);
    }
    if (rc) {
        moe_experts_free(x);
        return rc;
    }
    x->iface = (experts_iface){.self = x, .get = get, .hint = hint, .hint_next = hint_next, .set_budget = set_budget,
                            .pause_readahead = pause_readahead, .stats = stats};
    *out = x;
    return ERR_OK;
}

void moe_experts_free(moe_experts *x) {
    if (!x) return;
    moe_trace_close(x->trace);
    moe_cache_free(x->cache);
    free(x->pred), free(x->first);
    free(x);
}

const experts_iface *moe_experts_iface(moe_experts *x) { return &x->iface; }
