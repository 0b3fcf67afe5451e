/*
 * plan_json — the plan a load made, as one flat JSON object (octo plan
 * --json, a deploy bundle's plan.json), and a plan.json applied to the
 * options of a load (bundle.h: bundle_plan_json, bundle_plan_apply).
 */
#include "bundle.h"
#include "adapt.h"

#include <stdio.h>
#include <string.h>

#include "core/flatjson.h"
#include "core/kernels/kernels.h"
#include "moe/experts.h"

#define PLAN_JSON_VERSION 1

static void json_kv(flatjson_out *o, const bundle *b) {
    const plan *p = &b->plan;
    const bool compress = p->kv.policy != KV_POLICY_NONE && (p->kv.warm_type != p->kv.hot_type ||
                                                            p->kv.cold_type != p->kv.hot_type);
    flatjson_bool(o, "kv_compress", compress);
    flatjson_str(o, "kv_policy", kv_policy_name(p->kv.policy));
    flatjson_u64(o, "kv_budget_bytes", p->kv.budget_bytes);
    flatjson_u64(o, "kv_full_bytes", kv_context_bytes(plan_kv_shape(&b->m->hp), p->kv.hot_type, b->n_ctx));
    flatjson_str(o, "kv_reason", p->kv_reason);
    flatjson_bool(o, "kv_spill", p->kv.spill_dir != NULL);
    flatjson_str(o, "kv_spill_reason", p->spill_reason);
}

static void json_draft(flatjson_out *o, const bundle *b) {
    const model *d = bundle_draft_shape(b);
    flatjson_str(o, "draft", !d ? "none" : b->draft_self ? "self" : "model");
    flatjson_u64(o, "draft_bytes", d ? d->weight_bytes : 0);
    flatjson_u64(o, "draft_kv_budget_bytes", b->plan.draft_kv.budget_bytes);
    flatjson_str(o, "draft_reason", b->plan.spec_reason);
    flatjson_bool(o, "lookahead", false);
    flatjson_str(o, "lookahead_reason", d ? "off: the draft model proposes (lookahead is asked for with --spec lookahead)"
                                          : "off: n-gram proposes without a draft (lookahead is asked for with --spec "
                                            "lookahead)");
}

static void json_moe(flatjson_out *o, const bundle *b) {
    const model *m = b->m;
    const bool moe = m->hp.n_expert > 0;
    const uint64_t all = moe ? moe_expert_bytes_all(m) : 0;
    flatjson_bool(o, "moe_offload", moe);
    flatjson_u64(o, "moe_expert_bytes", all);
    flatjson_u64(o, "moe_cache_bytes", moe ? (b->plan.moe.budget_bytes ? b->plan.moe.budget_bytes : all) : 0);
    flatjson_str(o, "moe_reason", moe ? b->plan.moe_reason : "dense model: no experts");
}

size_t bundle_plan_json(const bundle *b, const plan_device *dev, char *buf, size_t cap) {
    flatjson_out o;
    flatjson_begin(&o, buf, cap);
    flatjson_u64(&o, "octo_plan", PLAN_JSON_VERSION);
    flatjson_str(&o, "device", dev->device ? dev->device : "host");
    flatjson_str(&o, "cpu", dev->device ? "neon" : cpu_path_name(kernels_path())); /* the profiles are AArch64 */
    flatjson_u64(&o, "mem_available", dev->mem_available);
    flatjson_u64(&o, "n_ctx", (uint64_t)b->n_ctx);
    flatjson_u64(&o, "weights_bytes", plan_resident_weights(b->m));
    flatjson_bool(&o, "weights_packed", b->weights_packed || b->m->prepacked);
    flatjson_str(&o, "weights_reason", b->weights_reason);
    json_kv(&o, b);
    json_draft(&o, b);
    json_moe(&o, b);
    flatjson_u64(&o, "threads", (uint64_t)b->cores.threads);
    flatjson_str(&o, "cores_reason", b->cores.reason);
    static const char *const pressure[] = {"pressure_low", "pressure_moderate", "pressure_critical"};
    for (int level = 1; level <= 3; level++) {
        char what[256];
        adapt_describe(b, level, what, sizeof what);
        flatjson_str(&o, pressure[level - 1], what);
    }
    return flatjson_end(&o);
}

err_code bundle_plan_apply(const char *json, size_t len, bundle_options *o, bool *want_draft, err_t *err) {
    err_code rc = flatjson_check(json, len, err);
    uint64_t version = 0, v = 0;
    if (!rc && (!flatjson_get_u64(json, len, "octo_plan", &version) || version != PLAN_JSON_VERSION))
        rc = err_set(err, ERR_BAD_VALUE, "plan version %llu, this octo reads %d", (unsigned long long)version,
                     PLAN_JSON_VERSION);
    if (rc) return rc;
    if (!o->n_ctx && flatjson_get_u64(json, len, "n_ctx", &v) && v > 0 && v <= (1u << 24)) o->n_ctx = (int)v;
    uint64_t dkv = 0; /* the plan's budget is both caches' together, as kv_config's is */
    if (!o->kv.budget_bytes && o->kv.policy != KV_POLICY_NONE && flatjson_get_u64(json, len, "kv_budget_bytes", &v) && v) {
        flatjson_get_u64(json, len, "draft_kv_budget_bytes", &dkv);
        o->kv.budget_bytes = v + dkv;
    }
    if (!o->moe.budget_bytes && !(o->moe.share > 0) && flatjson_get_u64(json, len, "moe_cache_bytes", &v)) {
        uint64_t all = 0;
        flatjson_get_u64(json, len, "moe_expert_bytes", &all);
        if (v && v < all) o->moe.budget_bytes = v;
    }
    char draft[16] = "";
    flatjson_get_str(json, len, "draft", draft, sizeof draft);
    *want_draft = strcmp(draft, "none") != 0;
    return ERR_OK;
}
