/*
 * experts — see experts.h.
 *
 * The prediction is scored as the tokens arrive: hint_next() keeps the
 * batch's predicted sets for the next layer, and that layer's hint() calls
 * (one per token, in batch order) count how many of each token's routed
 * experts were in its predicted set.
 */
#include "experts.h"

#include <stdlib.h>
#include <string.h>

struct moe_experts {
    experts_iface iface;
    const model *m;
    moe_cache *cache;    /* NULL: the mapping */
    experts_stats st;
    int32_t *pred;       /* [pred_tokens][pred_k] the predicted experts of pred_layer */
    size_t pred_cap;     /* entries pred holds */
    int pred_layer, pred_tokens, pred_k;
    int pred_seen;       /* tokens of pred_layer scored so far */
};

static err_code get(void *self, int layer, int expert, model_mat mats[3], err_t *err) {
    moe_experts *x = self;
    if (layer < 0 || layer >= x->m->hp.n_layer || expert < 0 || expert >= x->m->hp.n_expert)
        return err_set(err, ERR_INVALID_ARG, "expert %d of layer %d does not exist", expert, layer);
    x->st.lookups++;
    if (!x->cache) {
        model_expert_mats(x->m, layer, expert, mats);
        return ERR_OK;
    }
    bool hit = false;
    return moe_cache_get(x->cache, layer, expert, mats, &hit, err);
}

static void hint(void *self, int layer, const int32_t *experts, int n) {
    moe_experts *x = self;
    if (layer != x->pred_layer || x->pred_seen >= x->pred_tokens) return;
    const int32_t *p = x->pred + (size_t)x->pred_seen++ * (size_t)x->pred_k;
    for (int i = 0; i < n; i++) {
        x->st.predicted++;
        for (int j = 0; j < x->pred_k; j++)
            if (p[j] == experts[i]) {
                x->st.predicted_right++;
                break;
            }
    }
}

/* Out of memory for the batch's predictions: that batch goes unscored. */
static void hint_next(void *self, int next_layer, const int32_t *experts, int n_tokens, int k) {
    moe_experts *x = self;
    const size_t need = (size_t)n_tokens * (size_t)k;
    x->pred_layer = -1;
    if (need > x->pred_cap) {
        int32_t *p = realloc(x->pred, sizeof(int32_t) * need);
        if (!p) return;
        x->pred = p;
        x->pred_cap = need;
    }
    memcpy(x->pred, experts, sizeof(int32_t) * need);
    x->pred_layer = next_layer;
    x->pred_tokens = n_tokens;
    x->pred_k = k;
    x->pred_seen = 0;
}

static void stats(const void *self, experts_stats *out) {
    const moe_experts *x = self;
    *out = x->st;
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
}

err_code moe_experts_new(const model *m, const char *path, const moe_cache_config *c, moe_experts **out, err_t *err) {
    *out = NULL;
    if (m->hp.n_expert <= 0) return err_set(err, ERR_INVALID_ARG, "the model has no experts");
    moe_experts *x = calloc(1, sizeof *x);
    if (!x) return err_set(err, ERR_NOMEM, "out of memory");
    err_code rc = path ? moe_cache_new(m, path, c, &x->cache, err) : ERR_OK;
    if (rc) {
        free(x);
        return rc;
    }
    x->m = m;
    x->pred_layer = -1;
    x->iface = (experts_iface){.self = x, .get = get, .hint = hint, .hint_next = hint_next, .stats = stats};
    *out = x;
    return ERR_OK;
}

void moe_experts_free(moe_experts *x) {
    if (!x) return;
    moe_cache_free(x->cache);
    free(x->pred);
    free(x);
}

const experts_iface *moe_experts_iface(moe_experts *x) { return &x->iface; }
