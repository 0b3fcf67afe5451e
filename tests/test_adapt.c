/*
 * test_adapt — memory given back under pressure and taken again
 * (runtime/adapt.h), through the public call octo_model_trim, and the
 * plan's fallbacks (runtime/plan.h: one floor, never a refusal of what can
 * run):
 *   - LOW gives the packed weights back to the file's pages: the logits then
 *     equal, bit for bit, those of the same file loaded unpacked
 *     (OCTO_PACK=0), and the greedy text those of before; NONE packs them
 *     again and the logits are the packed ones again, bit for bit;
 *   - MODERATE halves an MoE model's expert cache and stops read-ahead,
 *     text unchanged; CRITICAL takes the KV caches to their floor, which is
 *     lossy: the KL divergence of the next token's distribution against the
 *     untrimmed run is measured, finite and above 0;
 *   - the plan over synthetic device sizes: never a KV budget under the
 *     cache's floor (with a draft in whole tokens too), packing only with
 *     the floor beside the weights, ERR_NOMEM only under the least memory,
 *     naming it; a cache that never evicts gets a smaller context.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/kernels/packed.h"
#include "core/quant.h"
#include "model/synth.h"
#include "octo.h"
#include "platform/platform.h"
#include "runtime/plan.h"
#include "t.h"
#include "util.h"

#define N_PROMPT 24

static int prompt_ids(int32_t *ids, int n) {
    for (int i = 0; i < n; i++) ids[i] = 3 + (i * 37) % 250;
    return n;
}

static bool write_model(const char *path, int n_expert, int n_ctx) {
    synth_opts o = synth_defaults();
    o.type = QT_Q4_0;
    o.n_embd = 256, o.n_ff = 512, o.n_layer = 3, o.n_head = 8, o.n_head_kv = 2, o.n_ctx = n_ctx, o.seed = 11;
    o.n_expert = n_expert, o.n_expert_used = n_expert ? 2 : 0;
    o.weight_std = 0.08f;
    err_t err = {0};
    T_CHECKF(synth_write(&o, path, &err) == ERR_OK, "%s", err.msg);
    return err.code == ERR_OK;
}

static octo_model *load(octo_client *c, const char *path, int n_ctx) {
    octo_model_options mo = octo_model_options_defaults();
    mo.n_ctx = n_ctx;
    mo.memory_watch = -1; /* only the app's signal here */
    mo.auto_draft = OCTO_DRAFT_NONE;
    octo_model *m = octo_load_model(c, path, &mo);
    T_CHECKF(m != NULL, "load %s: %s", path, octo_last_error(c));
    return m;
}

/* The logits after the prompt, the cache reset first. */
static void logits_of(octo_model *m, float *out) {
    int32_t ids[N_PROMPT];
    octo_reset(m);
    T_EQ_INT(octo_eval(m, ids, prompt_ids(ids, N_PROMPT), out, OCTO_LOGITS_LAST), OCTO_OK);
}

/* n greedy tokens after the prompt, written to out as ids. */
static void greedy(octo_model *m, int n, int32_t *out, float *logits, int n_vocab) {
    int32_t ids[N_PROMPT];
    octo_reset(m);
    T_EQ_INT(octo_eval(m, ids, prompt_ids(ids, N_PROMPT), logits, OCTO_LOGITS_LAST), OCTO_OK);
    for (int t = 0; t < n; t++) {
        int best = 0;
        for (int v = 1; v < n_vocab; v++) best = logits[v] > logits[best] ? v : best;
        out[t] = best;
        T_EQ_INT(octo_eval(m, &out[t], 1, logits, OCTO_LOGITS_LAST), OCTO_OK);
    }
}

static void test_weights(octo_client *c, const char *path) {
    octo_model *m = load(c, path, 256);
    if (!m) return;
    const int nv = octo_model_info_get(m).n_vocab;
    float *packed = malloc(sizeof(float) * (size_t)nv * 4), *trimmed = packed + nv, *mapped = trimmed + nv, *again = mapped + nv;
    int32_t text0[16], text1[16];
    const octo_stats s0 = octo_model_stats(m);
    if (!packed_get(QT_Q4_0)) printf("weights: this CPU's path packs no Q4_0: LOW gives nothing back\n");
    else T_CHECKF(s0.weights_packed_bytes > 0, "packed %llu", (unsigned long long)s0.weights_packed_bytes);
    logits_of(m, packed);
    greedy(m, 16, text0, again, nv);
    T_EQ_INT(octo_model_trim(m, OCTO_TRIM_LOW), OCTO_OK);
    const octo_stats s1 = octo_model_stats(m);
    T_EQ_INT(s1.mem_level, 1);
    T_EQ_INT(s1.mem_trims, 1);
    if (strcmp(plat_name(), "linux")) { /* the POSIX fallback cannot revert pages to the file (plat_mem_revert) */
        printf("weights: %s cannot give packed pages back to the file: they stay packed\n", plat_name());
        T_CHECK(s1.weights_packed_bytes == s0.weights_packed_bytes && s1.mem_released_weights_bytes == 0);
        logits_of(m, trimmed);
        T_CHECK(!memcmp(packed, trimmed, sizeof(float) * (size_t)nv));
        free(packed);
        octo_model_free(m);
        return;
    }
    T_CHECK(s1.weights_packed_bytes == 0);
    T_CHECKF(s1.mem_released_weights_bytes == s0.weights_packed_bytes, "released %llu of %llu",
             (unsigned long long)s1.mem_released_weights_bytes, (unsigned long long)s0.weights_packed_bytes);
    printf("LOW: %llu bytes of packed weights given back; note: %s\n", (unsigned long long)s1.mem_released_weights_bytes,
           s1.mem_note);
    logits_of(m, trimmed);
    greedy(m, 16, text1, again, nv);
    T_CHECK(!memcmp(text0, text1, sizeof text0));
    /* the mapped path's logits, from the same file never packed */
    setenv("OCTO_PACK", "0", 1);
    octo_model *u = load(c, path, 256);
    if (u) {
        T_CHECK(octo_model_stats(u).weights_packed_bytes == 0);
        logits_of(u, mapped);
        T_CHECKF(!memcmp(trimmed, mapped, sizeof(float) * (size_t)nv), "trimmed logit 0 %.9g, mapped %.9g", trimmed[0],
                 mapped[0]);
        octo_model_free(u);
    }
    unsetenv("OCTO_PACK");
    T_EQ_INT(octo_model_trim(m, OCTO_TRIM_NONE), OCTO_OK);
    const octo_stats s2 = octo_model_stats(m);
    T_EQ_INT(s2.mem_level, 0);
    T_EQ_INT(s2.mem_regrows, 1);
    T_CHECKF(s2.weights_packed_bytes == s0.weights_packed_bytes, "packed again %llu of %llu (%s)",
             (unsigned long long)s2.weights_packed_bytes, (unsigned long long)s0.weights_packed_bytes, s2.mem_note);
    logits_of(m, again);
    T_CHECK(!memcmp(packed, again, sizeof(float) * (size_t)nv));
    /* bad levels are errors, not crashes */
    T_EQ_INT(octo_model_trim(m, (octo_trim_level)4), OCTO_ERR_INVALID_ARG);
    T_EQ_INT(octo_model_trim(m, (octo_trim_level)-1), OCTO_ERR_INVALID_ARG);
    T_EQ_INT(octo_model_trim(NULL, OCTO_TRIM_LOW), OCTO_ERR_INVALID_ARG);
    free(packed);
    octo_model_free(m);
}

/* KL(p || q) of two rows of logits. */
static double kld(const float *p, const float *q, int n) {
    double mp = -INFINITY, mq = -INFINITY, zp = 0, zq = 0, k = 0;
    for (int i = 0; i < n; i++) mp = fmax(mp, p[i]), mq = fmax(mq, q[i]);
    for (int i = 0; i < n; i++) zp += exp(p[i] - mp), zq += exp(q[i] - mq);
    for (int i = 0; i < n; i++) {
        const double lp = p[i] - mp - log(zp), lq = q[i] - mq - log(zq);
        k += exp(lp) * (lp - lq);
    }
    return k;
}

/* A long context, then each level in turn: what each gives back, and what
 * the next token's distribution loses when the KV cache goes to its floor. */
static void test_levels(octo_client *c, const char *path) {
    const int n_ctx = 4096, n = 3600;
    octo_model *m = load(c, path, n_ctx), *ref = load(c, path, n_ctx);
    if (!m || !ref) goto out;
    const int nv = octo_model_info_get(m).n_vocab;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
    float *a = malloc(sizeof(float) * (size_t)nv * 2), *b = a + nv;
    for (int i = 0; i < n; i++) ids[i] = 3 + (i * 7919) % 290;
    T_EQ_INT(octo_eval(m, ids, n - 1, a, OCTO_LOGITS_LAST), OCTO_OK);
    T_EQ_INT(octo_eval(ref, ids, n - 1, b, OCTO_LOGITS_LAST), OCTO_OK);
    const octo_stats s0 = octo_model_stats(m);
    T_EQ_INT(octo_model_trim(m, OCTO_TRIM_MODERATE), OCTO_OK);
    const octo_stats s2 = octo_model_stats(m);
    printf("MODERATE: experts %llu -> %llu bytes (given back %llu), note: %s\n", (unsigned long long)s0.expert_cache_bytes,
           (unsigned long long)s2.expert_cache_bytes, (unsigned long long)s2.mem_released_experts_bytes, s2.mem_note);
    T_EQ_INT(s2.mem_level, 2);
    T_CHECK(s0.expert_cache_bytes > 0 && s2.expert_cache_bytes < s0.expert_cache_bytes);
    T_CHECK(s2.mem_released_experts_bytes == s0.expert_cache_bytes - s2.expert_cache_bytes);
    T_CHECK(s2.kv_bytes == s0.kv_bytes); /* nothing evicted yet */
    T_EQ_INT(octo_eval(m, &ids[n - 1], 1, a, OCTO_LOGITS_LAST), OCTO_OK);
    T_EQ_INT(octo_eval(ref, &ids[n - 1], 1, b, OCTO_LOGITS_LAST), OCTO_OK);
    T_CHECKF(!memcmp(a, b, sizeof(float) * (size_t)nv), "MODERATE changed the logits: %.9g against %.9g", a[0], b[0]);
    T_EQ_INT(octo_model_trim(m, OCTO_TRIM_CRITICAL), OCTO_OK);
    const octo_stats s3 = octo_model_stats(m);
    printf("CRITICAL: KV %llu -> %llu bytes (budget %llu, given back %llu)\n", (unsigned long long)s2.kv_bytes,
           (unsigned long long)s3.kv_bytes, (unsigned long long)s3.kv_budget_bytes,
           (unsigned long long)s3.mem_released_kv_bytes);
    T_EQ_INT(s3.mem_level, 3);
    T_CHECK(s3.kv_bytes < s2.kv_bytes && s3.kv_bytes <= s3.kv_budget_bytes);
    T_CHECK(s3.mem_released_kv_bytes == s2.kv_bytes - s3.kv_bytes);
    T_CHECK(s3.kv_tokens_evicted > 0);
    /* colder tiers came first: no warm entry is left, the old ones are cold */
    printf("CRITICAL: warm %llu -> %llu bytes, cold %llu -> %llu bytes, %lld entries kept\n",
           (unsigned long long)s2.kv_bytes_warm, (unsigned long long)s3.kv_bytes_warm,
           (unsigned long long)s2.kv_bytes_cold, (unsigned long long)s3.kv_bytes_cold, (long long)s3.kv_tokens_retained);
    T_CHECK(s2.kv_bytes_warm > 0 && s3.kv_bytes_warm == 0 && s3.kv_bytes_cold > 0);
    int32_t next = 5;
    T_EQ_INT(octo_eval(m, &next, 1, a, OCTO_LOGITS_LAST), OCTO_OK);
    T_EQ_INT(octo_eval(ref, &next, 1, b, OCTO_LOGITS_LAST), OCTO_OK);
    const double k = kld(b, a, nv);
    printf("CRITICAL: KL divergence of the next token against the untrimmed cache: %.3g nats (lossy, measured)\n", k);
    T_CHECK(isfinite(k) && k > 0);
    T_EQ_INT(octo_model_trim(m, OCTO_TRIM_NONE), OCTO_OK);
    const octo_stats s4 = octo_model_stats(m);
    T_EQ_INT(s4.mem_level, 0);
    T_EQ_INT(s4.mem_trims, 2);
    T_EQ_INT(s4.mem_regrows, 1);
    T_CHECK(s4.kv_budget_bytes > s3.kv_budget_bytes);
    free(ids);
    free(a);
out:
    octo_model_free(m);
    octo_model_free(ref);
}

/* plan_make and plan_fit over device sizes from 16 MiB to 2 GiB. */
static void test_plan_sizes(const char *path) {
    model *m = NULL;
    err_t err = {0};
    T_CHECKF(model_open(path, &m, &err) == ERR_OK, "%s", err.msg);
    if (!m) return;
    const kv_config cfg = kv_config_default();
    const uint64_t floor = kv_budget_floor(plan_kv_shape(&m->hp), &cfg), least = plan_least_bytes(m, &cfg, 4096);
    T_CHECK(plan_kv_least(m, &cfg, 4096) == floor);
    bool packed_before = false;
    int refusals = 0;
    for (uint64_t mib = 1; mib <= 2048; mib += mib < 128 ? 1 : 64) {
        plan_device dev = {.mem_available = mib << 20};
        int n_ctx = 4096;
        char why[192];
        err_t e = {0};
        const err_code rc = plan_fit(m, &cfg, &dev, &n_ctx, why, sizeof why, &e);
        T_CHECKF((rc == ERR_NOMEM) == (dev.mem_available < least), "%llu MiB: rc %d, least %llu", (unsigned long long)mib,
                 (int)rc, (unsigned long long)least);
        if (rc) {
            refusals++;
            T_CHECK(strstr(e.msg, "needs at least") != NULL);
            continue;
        }
        const plan p = plan_make(m, NULL, n_ctx, &cfg, &dev);
        T_CHECKF(!p.kv.budget_bytes || p.kv.budget_bytes >= floor, "%llu MiB: budget %llu under the floor %llu",
                 (unsigned long long)mib, (unsigned long long)p.kv.budget_bytes, (unsigned long long)floor);
        const bool packs = plan_pack_weights(m, &dev, plan_kv_least(m, &cfg, n_ctx), why, sizeof why);
        T_CHECK(!packed_before || packs); /* more memory never unpacks */
        T_CHECK(!packs || dev.mem_available >= plan_resident_weights(m) + PLAN_SAFETY_MARGIN + floor);
        packed_before = packs;
    }
    T_CHECK(refusals > 0 && (packed_before || !model_packable_bytes(m))); /* a path that packs nothing never packs */
    printf("plan: refused under %.1f MiB (the least: KV floor, a layer, buffers), packs from %.0f MiB\n",
           (double)least / 1048576, (double)(plan_resident_weights(m) + PLAN_SAFETY_MARGIN + floor) / 1048576);
    /* a cache that never evicts gets a smaller context where its whole one does not fit */
    kv_config none = kv_config_plain(QT_F16);
    plan_device dev = {.mem_available = plan_least_bytes(m, &none, 512) + (1 << 20)};
    int n_ctx = 4096;
    char why[192];
    T_EQ_INT(plan_fit(m, &none, &dev, &n_ctx, why, sizeof why, &err), ERR_OK);
    T_CHECKF(n_ctx >= 512 && n_ctx < 4096 && n_ctx % 64 == 0, "context %d: %s", n_ctx, why);
    T_CHECK(strstr(why, "context") != NULL);
    model_free(m);
}

/* With a draft, the budget shared in whole tokens never leaves either cache under its floor. */
static void test_plan_draft_floor(const char *path, const char *dpath) {
    model *m = NULL, *d = NULL;
    err_t err = {0};
    T_CHECK(model_open(path, &m, &err) == ERR_OK && model_open(dpath, &d, &err) == ERR_OK);
    if (m && d) {
        const kv_config cfg = kv_config_default();
        const uint64_t tf = kv_budget_floor(plan_kv_shape(&m->hp), &cfg), df = kv_budget_floor(plan_kv_shape(&d->hp), &cfg);
        for (uint64_t extra = 0; extra < (8u << 20); extra += 65537) {
            plan_device dev = {.mem_available = m->weight_bytes + d->weight_bytes + PLAN_SAFETY_MARGIN + extra};
            const plan p = plan_make(m, d, 4096, &cfg, &dev);
            if (!p.kv.budget_bytes) continue;
            T_CHECKF(p.kv.budget_bytes >= tf && p.draft_kv.budget_bytes >= df, "extra %llu: %llu/%llu, %llu/%llu",
                     (unsigned long long)extra, (unsigned long long)p.kv.budget_bytes, (unsigned long long)tf,
                     (unsigned long long)p.draft_kv.budget_bytes, (unsigned long long)df);
        }
    }
    model_free(m);
    model_free(d);
}

int main(void) {
    char dense[512], moe[512], draft[512];
    tu_tmp_path(dense, sizeof dense, "adapt-dense.gguf");
    tu_tmp_path(moe, sizeof moe, "adapt-moe.gguf");
    tu_tmp_path(draft, sizeof draft, "adapt-draft.gguf");
    synth_opts o = synth_defaults();
    o.seed = 5;
    err_t err = {0};
    if (!write_model(dense, 0, 256) || !write_model(moe, 4, 4096) || synth_write(&o, draft, &err)) return 1;
    octo_client *c = octo_client_new(NULL);
    test_weights(c, dense);
    test_levels(c, moe);
    test_plan_sizes(dense);
    test_plan_draft_floor(dense, draft);
    octo_client_free(c);
    remove(dense), remove(moe), remove(draft);
    T_DONE();
}
