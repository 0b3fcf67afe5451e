/*
 * plan — see plan.h.
 */
#include "plan.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kv/policy.h"
#include "platform/mem.h"

err_code plan_device_of(const char *name, const char *cache_dir, plan_spill spill, plan_device *out, err_t *err) {
    *out = (plan_device){.cache_dir = cache_dir && *cache_dir ? cache_dir : NULL, .spill = spill};
    struct stat st;
    if (out->cache_dir && stat(out->cache_dir, &st) != 0)
        return err_set(err, errno == ENOENT ? ERR_NOT_FOUND : ERR_IO, "cache directory %s: %s", out->cache_dir,
                       errno == ENOENT ? "no such directory" : strerror(errno));
    if (out->cache_dir && !S_ISDIR(st.st_mode))
        return err_set(err, ERR_INVALID_ARG, "cache directory %s is not a directory", out->cache_dir);
    if (out->cache_dir && access(out->cache_dir, W_OK | X_OK) != 0)
        return err_set(err, ERR_IO, "cache directory %s is not writable: %s", out->cache_dir, strerror(errno));
    if (name && strcmp(name, "host")) {
        const device_profile *d = device_find(name);
        if (!d) return err_set(err, ERR_INVALID_ARG, "unknown device '%s' (known: host, %s)", name, device_names());
        out->device = d->name;
        out->mem_available = d->ram_bytes - d->os_reserve_bytes;
        out->storage = d->storage;
        out->n_perf = d->n_perf, out->n_eff = d->n_eff;
        return ERR_OK;
    }
    out->mem_available = plat_mem_available();
    out->storage = out->cache_dir ? plat_storage_probe(out->cache_dir) : PLAT_STORAGE_UNKNOWN;
    return ERR_OK;
}

static void plan_spill_for(plan *p, const plan_device *dev) {
    kv_config *k = &p->kv;
    k->spill_dir = NULL;
    const char *why;
    if (dev->spill == PLAN_SPILL_OFF) why = "off (asked)";
    else if (!dev->cache_dir) why = "off: no cache directory";
    else if (!k->budget_bytes) why = "off: no KV budget to keep";
    else if (dev->spill == PLAN_SPILL_ON) k->spill_dir = dev->cache_dir, why = "on (asked)";
    else if (storage_fast(dev->storage)) k->spill_dir = dev->cache_dir, why = "on: fast storage";
    else why = "off: storage is not fast enough";
    snprintf(p->spill_reason, sizeof p->spill_reason, "%s (%s%s%s)", why, storage_name(dev->storage),
             dev->device ? ", device " : "", dev->device ? dev->device : "");
}

/* The budget b shared between the caches in whole tokens: the target's
 * share holds as many tokens as the draft's. Writes the split to why. */
static void plan_share(plan *p, uint64_t b, uint64_t tb, uint64_t db, uint64_t tfloor, uint64_t dfloor, char *why,
                       size_t n) {
    const uint64_t tokens = b / (tb + db);
    p->kv.budget_bytes = tokens * tb;
    p->draft_kv.budget_bytes = b - tokens * tb;
    if (b && (p->kv.budget_bytes < tfloor || p->draft_kv.budget_bytes < dfloor)) { /* whole tokens never undercut */
        uint64_t t = p->kv.budget_bytes > tfloor ? p->kv.budget_bytes : tfloor;   /* what a cache needs to work */
        const uint64_t d = b > t + dfloor ? b - t : dfloor;
        if (t + d > b) t = b > d + tfloor ? b - d : tfloor;
        p->kv.budget_bytes = t;
        p->draft_kv.budget_bytes = d;
    }
    if (b) snprintf(why, n, "; shared with the draft: %llu tokens, %llu + %llu bytes", (unsigned long long)tokens,
                    (unsigned long long)p->kv.budget_bytes, (unsigned long long)p->draft_kv.budget_bytes);
    else snprintf(why, n, "; the draft's cache unbounded too");
}

kv_shape plan_kv_shape(const model_hparams *hp) {
    const model_kv_row r = model_kv_row_of(hp);
    return (kv_shape){.n_layer = hp->n_layer, .n_head = hp->n_head, .n_head_kv = r.n_head_kv,
                      .head_dim = r.head_dim, .head_dim_v = r.head_dim_v, .window = hp->swa_window,
                      .window_period = hp->swa_period, .values_in_keys = r.values_in_keys};
}

plan plan_make(const model *m, const model *draft, int n_ctx, const kv_config *cfg, const plan_device *dev) {
    plan p = {.kv = *cfg};
    const uint64_t mem_available = dev->mem_available;
    kv_config *k = &p.kv;
    const kv_shape ms = plan_kv_shape(&m->hp), ds = draft ? plan_kv_shape(&draft->hp) : ms;
    const uint64_t tb = kv_token_bytes(ms, k->hot_type), db = draft ? kv_token_bytes(ds, k->hot_type) : 0;
    const uint64_t full = kv_context_bytes(ms, k->hot_type, n_ctx) + (draft ? kv_context_bytes(ds, k->hot_type, n_ctx) : 0);
    const uint64_t tfloor = kv_budget_floor(ms, k), dfloor = draft ? kv_budget_floor(ds, k) : 0;
    const uint64_t floor = tfloor + dfloor;
    const uint64_t weights = plan_resident_weights(m) + (draft ? draft->weight_bytes : 0);
    char share[96] = "";
    uint64_t b = k->budget_bytes;
    if (k->policy == KV_POLICY_NONE) {
        b = 0;
        snprintf(p.kv_reason, sizeof p.kv_reason, "policy none: every entry kept (%llu bytes at full context)",
                 (unsigned long long)full);
    } else if (b) {
        snprintf(p.kv_reason, sizeof p.kv_reason, "budget given: %llu bytes", (unsigned long long)b);
    } else {
        const uint64_t reserved = weights + PLAN_SAFETY_MARGIN;
        const uint64_t avail = mem_available > reserved ? mem_available - reserved : 0;
        b = avail / 10 * 6;
        const char *why = "0.6 x (free memory - weights - 256 MiB)";
        if (!mem_available) b = full, why = "free memory unknown: the full context";
        if (b >= full) b = 0, why = "0.6 x free memory holds the whole context: no budget needed";
        else if (b < floor) b = floor, why = "free memory is short: the anchors and recent window only";
        snprintf(p.kv_reason, sizeof p.kv_reason, "%s (free %llu MiB, weights %llu MiB, full context %llu MiB)", why,
                 (unsigned long long)(mem_available >> 20), (unsigned long long)(weights >> 20),
                 (unsigned long long)(full >> 20));
    }
    k->budget_bytes = b;
    if (draft) {
        p.draft_kv = *k;
        p.draft_kv.spill_dir = NULL;
        p.draft_kv.budget_tokens = 0; /* an entry count is the model's: the draft is under the shared bytes */
        plan_share(&p, b, tb, db, tfloor, dfloor, share, sizeof share);
        const size_t len = strlen(p.kv_reason);
        snprintf(p.kv_reason + len, sizeof p.kv_reason - len, "%s", share);
    }
    plan_spill_for(&p, dev);
    return p;
}

uint64_t plan_resident_weights(const model *m) {
    const uint64_t experts = m->hp.n_expert > 0 ? moe_expert_bytes_all(m) : 0;
    return m->weight_bytes > experts ? m->weight_bytes - experts : 0;
}

uint64_t plan_kv_least(const model *m, const kv_config *k, int n_ctx) {
    const kv_policy *pol = kv_policy_get(k->policy);
    const kv_shape shape = plan_kv_shape(&m->hp);
    const uint64_t whole = kv_context_bytes(shape, k->hot_type, n_ctx);
    if (!pol || !pol->evicts) return whole;
    const uint64_t floor = kv_budget_floor(shape, k);
    return floor < whole ? floor : whole;
}

/* The resident weights of the largest layer (the output matrix counts as one). */
static uint64_t largest_layer(const model *m) {
    uint64_t most = (uint64_t)(m->output.n_out * m->output.n_mat) * m->output.row_bytes;
    const uint64_t per_layer = m->hp.n_layer ? plan_resident_weights(m) / (uint64_t)m->hp.n_layer : 0;
    return per_layer > most ? per_layer : most;
}

static uint64_t least_buffers(const model *m) {
    const model_hparams *hp = &m->hp;
    const uint64_t ff = (uint64_t)(hp->n_ff > hp->n_ff_shexp ? hp->n_ff : hp->n_ff_shexp);
    const uint64_t per_token = 4 * (uint64_t)hp->n_embd + 3 * (uint64_t)hp->n_head * (uint64_t)hp->head_dim + 2 * ff;
    return sizeof(float) * (PLAN_LEAST_BATCH * per_token + 2 * (uint64_t)hp->n_vocab) + (1u << 20);
}

uint64_t plan_least_bytes(const model *m, const kv_config *k, int n_ctx) {
    return plan_kv_least(m, k, n_ctx) + largest_layer(m) + least_buffers(m);
}

err_code plan_fit(const model *m, const kv_config *k, const plan_device *dev, int *n_ctx, char *why, size_t n,
                  err_t *err) {
    const double mib = 1.0 / (1 << 20);
    const uint64_t free_mem = dev->mem_available, least = plan_least_bytes(m, k, *n_ctx);
    if (why && n) why[0] = 0;
    if (!free_mem || least <= free_mem) return ERR_OK;
    const kv_policy *pol = kv_policy_get(k->policy);
    const uint64_t rest = least - plan_kv_least(m, k, *n_ctx), tb = kv_token_bytes(plan_kv_shape(&m->hp), k->hot_type);
    if (pol && !pol->evicts && rest < free_mem && tb) {
        const int fit = (int)((free_mem - rest) / tb / 64 * 64);
        if (fit >= 64) {
            snprintf(why, n, "context %d of %d tokens: a cache that keeps every entry (%s) and the rest (%.0f MiB) "
                     "must fit in %.0f MiB free", fit, *n_ctx, pol->name, rest * mib, free_mem * mib);
            *n_ctx = fit;
            return ERR_OK;
        }
    }
    return err_set(err, ERR_NOMEM,
                   "%.0f MiB free, and the model needs at least %.0f MiB with its weights read from the file: "
                   "%.1f MiB of KV cache, %.1f MiB for its largest layer, %.1f MiB of buffers",
                   free_mem * mib, least * mib, plan_kv_least(m, k, *n_ctx) * mib, largest_layer(m) * mib,
                   least_buffers(m) * mib);
}

bool plan_pack_weights(const model *m, const plan_device *dev, uint64_t kv_least, char *why, size_t n) {
    const double mib = 1.0 / (1 << 20);
    const uint64_t w = plan_resident_weights(m), need = w + PLAN_SAFETY_MARGIN + kv_least;
    if (m->prepacked) {
        snprintf(why, n, "packed in the file (%.0f MiB), mapped read-only", (double)m->packed_bytes * mib);
        return false;
    }
    if (!model_packable_bytes(m)) {
        snprintf(why, n, "mapped read-only: no matrix in a type this CPU's kernels pack");
        return false;
    }
    if (dev->mem_available && dev->mem_available < need) {
        snprintf(why, n,
                 "mapped read-only in the file's layout: %.0f MiB of weights, a %.0f MiB margin and the KV cache's "
                 "least %.1f MiB exceed %.0f MiB free, so pages are read from the file as needed instead of packed "
                 "into private memory",
                 (double)w * mib, (double)PLAN_SAFETY_MARGIN * mib, (double)kv_least * mib,
                 (double)dev->mem_available * mib);
        return false;
    }
    snprintf(why, n, "%.0f MiB packed at load for %s%s kernels (%.0f MiB of weights fit in %.0f MiB free)",
             (double)model_packable_bytes(m) * mib, dev->device ? dev->device : "this CPU", dev->device ? "'s NEON" : "'s",
             (double)w * mib, (double)dev->mem_available * mib);
    return true;
}

void plan_experts(plan *p, const model *m, const model *draft, int n_ctx, const moe_cache_config *given,
                  const plan_device *dev) {
    p->moe = *given;
    p->moe_shared = 0;
    if (m->hp.n_expert <= 0) return;
    const double mib = 1.0 / (1 << 20);
    const uint64_t slot = moe_cache_slot_bytes(m), least = slot * (uint64_t)m->hp.n_expert_used;
    const uint64_t all = slot * (uint64_t)model_moe_layers(&m->hp) * (uint64_t)m->hp.n_expert; /* every expert in its slot */
    if (given->budget_bytes || given->share > 0.0) {
        snprintf(p->moe_reason, sizeof p->moe_reason, "expert cache given: %.0f MiB of %.0f MiB of expert slots",
                 (given->budget_bytes ? (double)given->budget_bytes : given->share * (double)all) * mib, all * mib);
        return;
    }
    const uint64_t kv = p->kv.budget_bytes ? p->kv.budget_bytes : kv_context_bytes(plan_kv_shape(&m->hp), p->kv.hot_type, n_ctx);
    /* a draft's weights and its whole cache are set aside: the pool is the target's */
    const uint64_t draft_bytes =
        draft ? draft->weight_bytes + (p->draft_kv.budget_bytes ? p->draft_kv.budget_bytes
                                                                : kv_context_bytes(plan_kv_shape(&draft->hp), p->kv.hot_type, n_ctx))
              : 0;
    const uint64_t free_mem = dev->mem_available;
    const uint64_t margin = free_mem / 4 < PLAN_SAFETY_MARGIN ? free_mem / 4 : PLAN_SAFETY_MARGIN;
    const uint64_t reserved = plan_resident_weights(m) + draft_bytes + margin;
    const uint64_t pool = free_mem > reserved ? free_mem - reserved : 0;
    if (!free_mem || pool >= all + kv) {
        snprintf(p->moe_reason, sizeof p->moe_reason, "every expert (%.0f MiB in slots): %s", all * mib,
                 free_mem ? "free memory holds them beside the other weights and the KV cache" : "free memory unknown");
        return;
    }
    p->moe_shared = pool;
    p->moe.budget_bytes = pool < all ? (pool > least ? pool : least) : all;
    snprintf(p->moe_reason, sizeof p->moe_reason,
             "shares %.0f MiB with the KV cache (free %.0f - other weights %.0f%s - margin %.0f MiB): holds what the KV "
             "cache (up to %.1f MiB) leaves, at most %.0f MiB of %.0f MiB of expert slots, at least a token's%s",
             pool * mib, free_mem * mib, plan_resident_weights(m) * mib, draft ? " - the draft and its cache" : "",
             margin * mib, kv * mib, p->moe.budget_bytes * mib, all * mib, pool < least ? " (more than the pool)" : "");
}

bool plan_self_draft(const model *m, uint64_t copy_bytes, uint64_t copy_token_bytes, const plan *p,
                     const plan_device *dev, char *why, size_t n) {
    const double mib = 1.0 / (1 << 20);
    const uint64_t per_token = m->weight_bytes_per_token;
    const double c = per_token ? (double)copy_token_bytes / (double)per_token : 1.0;
    if (!copy_bytes) {
        snprintf(why, n, "no self-draft: %s", m->hp.n_expert ? "a mixture of experts keeps its experts on flash"
                                                             : "the weights are already low-precision");
        return false;
    }
    if (per_token < PLAN_SELF_MIN_BYTES) {
        snprintf(why, n, "no self-draft: %.1f MiB per token is too little to be memory-bound (%.0f needed)",
                 (double)per_token * mib, (double)PLAN_SELF_MIN_BYTES * mib);
        return false;
    }
    if (c > PLAN_SELF_MAX_COST) {
        snprintf(why, n, "no self-draft: the copy would read %.2f of the model's bytes per token (at most %.2f pays)", c,
                 PLAN_SELF_MAX_COST);
        return false;
    }
    const uint64_t need = m->weight_bytes + copy_bytes + p->kv.budget_bytes + PLAN_SAFETY_MARGIN;
    if (!dev->mem_available || dev->mem_available < need) {
        snprintf(why, n, "no self-draft: free memory %.0f MiB, %.0f MiB needed (weights, a %.0f MiB copy, KV budget)",
                 (double)dev->mem_available * mib, (double)need * mib, (double)copy_bytes * mib);
        return false;
    }
    snprintf(why, n, "self-draft: a Q4_0 copy made at load (%.0f MiB, %.2f of the model's bytes per token)",
             (double)copy_bytes * mib, c);
    return true;
}

plan_cores plan_place(const cpu_classes *cc, int threads_asked, bool has_draft) {
    plan_cores c = {.threads = threads_asked ? threads_asked : cpu_classes_threads(cc)};
    if (!cc->n_eff || !cc->n_perf) {
        snprintf(c.reason, sizeof c.reason, "%d threads; one class of cores%s", c.threads,
                 has_draft ? ", the draft computes on the same threads" : "");
        return c;
    }
    if (c.threads > cc->n_perf) {
        snprintf(c.reason, sizeof c.reason, "%d threads asked, more than the %d performance cores: not placed%s",
                 c.threads, cc->n_perf, has_draft ? "; the draft computes on the same threads" : "");
        return c;
    }
    c.on_perf = true;
    c.draft_threads = has_draft ? cc->n_eff : 0;
    char perf[32] = "", eff[32] = ""; /* a profile's classes come without the kernel's capacities */
    if (cc->perf_capacity) snprintf(perf, sizeof perf, " (capacity %d+)", cc->perf_capacity);
    if (cc->eff_capacity) snprintf(eff, sizeof eff, " (capacity %d+)", cc->eff_capacity);
    const size_t len = (size_t)snprintf(c.reason, sizeof c.reason, "%d threads on the %d performance cores%s", c.threads,
                                        cc->n_perf, perf);
    if (has_draft && len < sizeof c.reason)
        snprintf(c.reason + len, sizeof c.reason - len, "; the draft on the %d efficiency cores%s", cc->n_eff, eff);
    return c;
}
