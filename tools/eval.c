/*
 * octo eval — perplexity over a text, and what a compressed KV cache costs in
 * quality: the KL divergence of each position's next-token distribution from
 * the one an uncompressed (F16, nothing evicted) cache gives, top-1 agreement,
 * and the KV bytes used. The way reference runtimes report KV quantization.
 *
 * The text's first --ctx tokens are fed --batch tokens per step (default 1,
 * as in decoding: each step's entries are committed, re-quantized and
 * possibly evicted before the next step attends to them). The reference run
 * goes first and keeps its log-probabilities; the cache under test runs
 * second. Only the public API is used.
 */
#include <math.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "octo.h"

typedef struct {
    double nll, kld, kld_max, top1;
    int n;
    uint64_t kv_bytes_end, kv_bytes_peak, kv_budget;
    double kv_bytes_mean;
    int64_t evicted;
    uint64_t hot, warm, cold;
} eval_result;

/* log-softmax of n logits into out */
static void log_softmax(const float *x, int n, float *out) {
    float m = x[0];
    for (int i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    double s = 0.0;
    for (int i = 0; i < n; i++) s += exp((double)x[i] - m);
    const float lse = m + (float)log(s);
    for (int i = 0; i < n; i++) out[i] = x[i] - lse;
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* Feed tokens[0..n) in steps of batch; ref NULL: store log-probs into store,
 * else compare against ref. */
static int run(octo_model *m, const int32_t *tok, int n, int batch, int V, float *store, const float *ref,
               eval_result *r) {
    float *logits = malloc(sizeof(float) * (size_t)batch * V), *lp = malloc(sizeof(float) * (size_t)V);
    if (!logits || !lp) {
        free(logits), free(lp);
        return fail("out of memory");
    }
    memset(r, 0, sizeof *r);
    double kv_sum = 0.0;
    int steps = 0;
    for (int t0 = 0; t0 < n - 1; t0 += batch) {
        const int nb = n - 1 - t0 < batch ? n - 1 - t0 : batch;
        const octo_status st = octo_eval(m, tok + t0, nb, logits, OCTO_LOGITS_ALL);
        if (st != OCTO_OK) {
            free(logits), free(lp);
            return fail("%s", octo_model_error(m));
        }
        for (int i = 0; i < nb; i++) {
            const int t = t0 + i; /* row predicts token t + 1 */
            log_softmax(logits + (size_t)i * V, V, lp);
            r->nll -= lp[tok[t + 1]];
            if (store) memcpy(store + (size_t)t * V, lp, sizeof(float) * (size_t)V);
            if (ref) {
                const float *q = ref + (size_t)t * V;
                double k = 0.0;
                for (int v = 0; v < V; v++) k += exp((double)q[v]) * ((double)q[v] - lp[v]);
                r->kld += k;
                if (k > r->kld_max) r->kld_max = k;
                r->top1 += argmax(q, V) == argmax(lp, V);
            }
            r->n++;
        }
        const octo_stats s = octo_model_stats(m);
        kv_sum += (double)s.kv_bytes;
        steps++;
        if (s.kv_bytes > r->kv_bytes_peak) r->kv_bytes_peak = s.kv_bytes;
        r->kv_bytes_end = s.kv_bytes;
        r->kv_budget = s.kv_budget_bytes;
        r->evicted = s.kv_tokens_evicted;
        r->hot = s.kv_bytes_hot, r->warm = s.kv_bytes_warm, r->cold = s.kv_bytes_cold;
    }
    r->kv_bytes_mean = steps ? kv_sum / steps : 0.0;
    free(logits), free(lp);
    return 0;
}

/* --kv-policy NAME, any of the library's (octo_kv_policy_name); 0 or a usage error's exit code. */
static int parse_policy(const char *s, octo_kv_policy *out) {
    const int p = octo_kv_policy_from_name(s);
    if (p < 0) {
        char names[256];
        return usage_error("eval: --kv-policy is one of %s, not '%s'",
                           kv_policy_names(OCTO_KV_POLICY_DEFAULT, " ", names, sizeof names), s);
    }
    *out = (octo_kv_policy)p;
    return 0;
}

int cmd_eval(int argc, char **argv) {
    const char *path = NULL, *file = NULL, *cache_dir = NULL, *device = NULL;
    long n_ctx = 0, batch = 1;
    int json = 0, plain = 0;
    octo_model_options mo = octo_model_options_defaults();
    double budget_pct = 0.0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x;
#define NEED_VALUE                                                     \
    if (!v) return usage_error("eval: %s needs a value", a);           \
    i++
        if (!strcmp(a, "-m")) { NEED_VALUE; path = v; }
        else if (!strcmp(a, "-f")) { NEED_VALUE; file = v; }
        else if (!strcmp(a, "--ctx")) { NEED_VALUE; if (!parse_long(v, 2, 1 << 20, &n_ctx)) return usage_error("eval: bad --ctx '%s'", v); }
        else if (!strcmp(a, "--batch")) { NEED_VALUE; if (!parse_long(v, 1, 4096, &batch)) return usage_error("eval: bad --batch '%s'", v); }
        else if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--kv-plain")) plain = 1;
        else if (!strcmp(a, "--kv-policy")) { NEED_VALUE; if (parse_policy(v, &mo.kv.policy)) return 2; }
        else if (!strcmp(a, "--kv-budget")) {
            NEED_VALUE;
            size_t len = strlen(v);
            float pct;
            char buf[32];
            if (len && len < sizeof buf && v[len - 1] == '%') {
                memcpy(buf, v, len - 1);
                buf[len - 1] = 0;
                if (!parse_float(buf, &pct) || pct <= 0 || pct > 100) return usage_error("eval: bad --kv-budget '%s'", v);
                budget_pct = pct;
            } else if (parse_long(v, 1, 0x7fffffffffffffffL, &x)) mo.kv.budget_bytes = (uint64_t)x;
            else return usage_error("eval: bad --kv-budget '%s' (bytes, or a percentage of the full F16 cache)", v);
        }
        else if (!strcmp(a, "--kv-hot") || !strcmp(a, "--kv-warm") || !strcmp(a, "--kv-anchors") || !strcmp(a, "--kv-recent")) {
            NEED_VALUE;
            if (!parse_long(v, 0, 1 << 20, &x)) return usage_error("eval: bad %s '%s'", a, v);
            if (!strcmp(a, "--kv-hot")) mo.kv.hot_tokens = (int)x;
            else if (!strcmp(a, "--kv-warm")) mo.kv.warm_tokens = (int)x;
            else if (!strcmp(a, "--kv-anchors")) mo.kv.anchor_tokens = (int)x;
            else mo.kv.recent_tokens = (int)x;
        }
        else if (!strcmp(a, "--kv-keys")) {
            NEED_VALUE;
            if (!strcmp(v, "channel")) mo.kv.per_token_keys = 0;
            else if (!strcmp(v, "token")) mo.kv.per_token_keys = 1;
            else return usage_error("eval: --kv-keys is channel or token, not '%s'", v);
        }
        else if (!strcmp(a, "--cache-dir")) { NEED_VALUE; cache_dir = v; }
        else if (!strcmp(a, "--device")) { NEED_VALUE; device = v; }
        else if (!strcmp(a, "--kv-spill")) {
            NEED_VALUE;
            if (!strcmp(v, "auto")) mo.kv.spill = 0;
            else if (!strcmp(v, "on")) mo.kv.spill = 1;
            else if (!strcmp(v, "off")) mo.kv.spill = -1;
            else return usage_error("eval: --kv-spill is auto, on or off, not '%s'", v);
        }
        else if (!strcmp(a, "--kv-spill-max")) {
            NEED_VALUE;
            if (!parse_long(v, 1, LONG_MAX, &x)) return usage_error("eval: bad --kv-spill-max '%s' (bytes)", v);
            mo.kv.spill_max_bytes = (uint64_t)x;
        }
        else if (!strcmp(a, "--kv-cold")) {
            NEED_VALUE;
            if (!strcmp(v, "q4_1")) mo.kv.cold_bits = 4, mo.kv.cold_symmetric = 0;
            else if (!strcmp(v, "q4_0")) mo.kv.cold_bits = 4, mo.kv.cold_symmetric = 1;
            else if (!strcmp(v, "q8_0")) mo.kv.cold_bits = 8;
            else if (!strcmp(v, "f16")) mo.kv.cold_bits = 16;
            else return usage_error("eval: --kv-cold is one of q4_1 q4_0 q8_0 f16, not '%s'", v);
        }
        else return usage_error("eval: unknown option '%s'", a);
#undef NEED_VALUE
    }
    if (!path || !file) return usage_error("eval needs -m MODEL and -f TEXT");
    if (plain) mo.kv.compress = 0;
    char *text;
    size_t len;
    if (read_text_file(file, &text, &len)) return 1;

    octo_client_options co = octo_client_options_defaults();
    co.cache_dir = cache_dir;
    co.device = device;
    octo_client *c = octo_client_new(&co);
    /* the reference: F16 entries, all kept */
    octo_model_options ro = octo_model_options_defaults();
    ro.kv.compress = 0;
    ro.n_ctx = (int)n_ctx;
    ro.auto_draft = OCTO_DRAFT_NONE;
    octo_model *m = c ? octo_load_model(c, path, &ro) : NULL;
    if (!m) {
        free(text);
        int rc = fail("%s", c ? octo_last_error(c) : "out of memory");
        octo_client_free(c);
        return rc;
    }
    const octo_model_info in = octo_model_info_get(m);
    int n = octo_tokenize(m, text, (int)len, 1, 0, NULL, 0);
    int32_t *tok = n > 0 ? malloc(sizeof(int32_t) * (size_t)n) : NULL;
    if (n <= 0 || !tok || octo_tokenize(m, text, (int)len, 1, 0, tok, n) != n) {
        free(text), free(tok);
        octo_model_free(m), octo_client_free(c);
        return fail("%s: cannot tokenize (%s)", file, n < 0 ? octo_status_name((octo_status)-n) : "empty");
    }
    free(text);
    if (n > in.n_ctx) n = in.n_ctx;
    if (n < 2) {
        free(tok), octo_model_free(m), octo_client_free(c);
        return fail("%s: fewer than 2 tokens", file);
    }
    const int V = in.n_vocab;
    if ((double)n * V * 4 > (double)(1u << 30)) {
        free(tok), octo_model_free(m), octo_client_free(c);
        return fail("%d positions x %d logits do not fit in 1 GiB of reference log-probabilities: lower --ctx", n, V);
    }
    float *ref = malloc(sizeof(float) * (size_t)n * V);
    eval_result rr, rt;
    int rc = ref ? run(m, tok, n, (int)batch, V, ref, NULL, &rr) : fail("out of memory");
    octo_model_free(m);
    const uint64_t full_f16 = in.kv_bytes_per_token * (uint64_t)n; /* reference entries are F16 */
    if (budget_pct > 0) mo.kv.budget_bytes = (uint64_t)(budget_pct / 100.0 * (double)full_f16);
    if (!rc && budget_pct > 0 && mo.kv.budget_bytes == 0) /* 0 would mean "no budget": the opposite of what was asked */
        rc = fail("--kv-budget %g%% of %llu bytes rounds to 0 bytes", budget_pct, (unsigned long long)full_f16);
    mo.n_ctx = (int)n_ctx;
    mo.auto_draft = OCTO_DRAFT_NONE;
    if (!rc && !(m = octo_load_model(c, path, &mo))) rc = fail("%s", octo_last_error(c));
    if (!rc) {
        rc = run(m, tok, n, (int)batch, V, NULL, ref, &rt);
        octo_stats s = octo_model_stats(m);
        const double ppl_ref = exp(rr.nll / rr.n), ppl = exp(rt.nll / rt.n);
        const double kld = rt.kld / rt.n, top1 = rt.top1 / rt.n;
        const double frac_end = (double)rt.kv_bytes_end / (double)full_f16;
        if (!rc && json)
            printf("{\"tokens\": %d, \"batch\": %ld, \"ppl_ref\": %.6f, \"ppl\": %.6f, \"kld_mean\": %.6g, \"kld_max\": %.6g, "
                   "\"top1_agreement\": %.6f, \"kv_bytes_end\": %llu, \"kv_bytes_peak\": %llu, \"kv_bytes_mean\": %.0f, "
                   "\"kv_bytes_f16\": %llu, \"kv_fraction_of_f16\": %.4f, \"kv_budget\": %llu, \"kv_policy\": \"%s\", "
                   "\"kv_bytes_hot\": %llu, \"kv_bytes_warm\": %llu, \"kv_bytes_cold\": %llu, \"tokens_evicted\": %lld, "
                   "\"spill\": %d, \"blocks_spilled\": %lld, \"spill_writes\": %lld, \"spill_reads\": %lld, "
                   "\"spill_hit_rate\": %.4f, \"spill_read_us\": %.2f, \"spill_errors\": %lld}\n",
                   n, batch, ppl_ref, ppl, kld, rt.kld_max, top1, (unsigned long long)rt.kv_bytes_end,
                   (unsigned long long)rt.kv_bytes_peak, rt.kv_bytes_mean, (unsigned long long)full_f16, frac_end,
                   (unsigned long long)rt.kv_budget, mo.kv.compress ? s.kv_policy : "plain",
                   (unsigned long long)rt.hot, (unsigned long long)rt.warm, (unsigned long long)rt.cold,
                   (long long)rt.evicted, s.kv_spill_on, (long long)s.kv_blocks_spilled, (long long)s.kv_spill_writes,
                   (long long)s.kv_spill_reads, s.kv_spill_hit_rate, s.kv_spill_read_us, (long long)s.kv_spill_errors);
        else if (!rc) {
            printf("tokens          %d (fed %ld per step)\n", n, batch);
            printf("perplexity      %.4f (uncompressed F16 cache: %.4f)\n", ppl, ppl_ref);
            printf("KL divergence   mean %.6f, max %.6f (against the uncompressed cache)\n", kld, rt.kld_max);
            printf("top-1 agreement %.2f %%\n", 100.0 * top1);
            printf("KV bytes        %llu at the end = %.1f %% of F16 (%llu); peak %llu, budget %llu\n",
                   (unsigned long long)rt.kv_bytes_end, 100.0 * frac_end, (unsigned long long)full_f16,
                   (unsigned long long)rt.kv_bytes_peak, (unsigned long long)rt.kv_budget);
            printf("tiers           hot %llu, warm %llu, cold %llu bytes; %lld entries evicted per layer (%s)\n",
                   (unsigned long long)rt.hot, (unsigned long long)rt.warm, (unsigned long long)rt.cold,
                   (long long)rt.evicted, mo.kv.compress ? s.kv_policy : "plain");
            const octo_model_info mi = octo_model_info_get(m);
            printf("spill           %s\n", mi.kv_spill);
            if (s.kv_spill_on)
                printf("                %lld blocks on file at the end, %lld written, %lld re-spilled without a write, "
                       "%lld read back (%.0f %% hits, %.1f us each, %lld read ahead), %lld errors%s%s\n",
                       (long long)s.kv_blocks_spilled, (long long)s.kv_spill_writes, (long long)s.kv_spill_clean,
                       (long long)s.kv_spill_reads, 100.0 * s.kv_spill_hit_rate, s.kv_spill_read_us,
                       (long long)s.kv_spill_prefetched, (long long)s.kv_spill_errors, s.kv_spill_note[0] ? ": " : "", s.kv_spill_note);
        }
        octo_model_free(m);
    }
    free(ref), free(tok);
    octo_client_free(c);
    return rc;
}
