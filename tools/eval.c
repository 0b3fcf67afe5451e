/*
 * octo eval — perplexity over a text, and what a compressed KV cache costs in
 * quality: the KL divergence of each position's next-token distribution from
 * the one an uncompressed (F16, nothing evicted) cache gives, top-1 agreement,
 * and the KV bytes used. The way reference runtimes report KV quantization.
 *
 * With --ref OTHER the reference is another model of the same vocabulary
 * (the unquantized one, to measure a quantization: octo quantize).
 *
 * The text's first --ctx tokens are fed --batch tokens per step (default 1,
 * as in decoding: each step's entries are committed, re-quantized and
 * possibly evicted before the next step attends to them). With --prompt N
 * the first N go in one step (a prompt's prefill: the cache then compressed
 * as its policy decides, a --kv-budget percentage being of the prompt's
 * cache) and only the continuation is scored. The reference run
 * goes first and keeps its log-probabilities; the cache under test runs
 * second. Only the public API is used.
 */
#include <math.h>
#include <stdio.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "options.h"
#include "octo.h"
#include "stats.h"

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

/* Score row i of a step's logits (predicting token t + 1): its NLL, and its
 * KLD and top-1 against ref or its log-probs into store. */
static void score(const float *logits, const int32_t *tok, int t, int V, float *lp, float *store, const float *ref,
                  eval_result *r) {
    log_softmax(logits, V, lp);
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

/* How run() feeds the text: batch tokens a step; with prompt > 0 its first
 * prompt tokens in one step, read as a prompt is (eval_prompt). */
typedef struct {
    int batch, prompt;
    float compress;       /* --prompt-compress: the share of the prompt the model reads (SpecPC); 0: all */
    int lookahead;        /* --prompt-lookahead N */
    uint64_t random_seed; /* --prompt-random SEED: the baseline prompt compression is judged against; 0: none */
} eval_feed;

/* The prompt, compressed: by the library (the draft's votes), or with
 * --prompt-random by keeping a random share of it (its first 4 and last 32
 * tokens always, as the library's selection does). */
static octo_status eval_prompt(octo_model *m, const int32_t *tok, int n, const eval_feed *f, float *logits) {
    const float compress = f->compress;
    octo_generate_params gp = octo_generate_params_defaults();
    gp.prompt_compress = compress;
    gp.prompt_lookahead = f->lookahead;
    if (!f->random_seed || compress <= 0.0f || compress >= 1.0f) return octo_eval_prompt(m, tok, n, &gp, logits);
    int32_t *kept = malloc(sizeof(int32_t) * (size_t)n);
    if (!kept) return OCTO_ERR_NOMEM;
    const int mid = n - 4 - 32 > 0 ? n - 4 - 32 : 0;
    int want = (int)ceil(compress * n) - (n - mid), k = 0;
    uint64_t x = f->random_seed;
    for (int i = 0; i < n; i++) {
        const bool always = i < 4 || i >= n - 32;
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        /* selection sampling: of the mid - (i - 4) still to see, keep want of them */
        const int left = mid - (i - 4);
        const bool take = !always && want > 0 && (double)(x >> 11) / 9007199254740992.0 * left < want;
        if (take) want--;
        if (always || take) kept[k++] = tok[i];
    }
    gp.prompt_compress = 0.0f;
    const octo_status st = octo_eval_prompt(m, kept, k, &gp, logits);
    free(kept);
    return st;
}

/* Feed tokens[0..n) in steps of f->batch (with f->prompt > 0: its first
 * prompt tokens as one step, and only the rows from the prompt's last on are
 * scored: the continuation); ref NULL: store log-probs into store, else
 * compare against ref. */
static int run(octo_model *m, const int32_t *tok, int n, const eval_feed *f, int V, float *store, const float *ref,
               eval_result *r) {
    const int batch = f->batch, prompt = f->prompt;
    const int widest = prompt > batch ? prompt : batch;
    float *logits = malloc(sizeof(float) * (size_t)widest * V), *lp = malloc(sizeof(float) * (size_t)V);
    if (!logits || !lp) {
        free(logits), free(lp);
        return fail("out of memory");
    }
    memset(r, 0, sizeof *r);
    double kv_sum = 0.0;
    int steps = 0;
    for (int t0 = 0, nb; t0 < n - 1; t0 += nb) {
        const int step = t0 == 0 && prompt > 0 ? prompt : batch;
        nb = n - 1 - t0 < step ? n - 1 - t0 : step;
        /* the prompt as generation reads it (the draft's lookahead and compression, when asked for): its last row */
        const bool as_prompt = t0 == 0 && prompt > 0;
        const octo_status st = as_prompt ? eval_prompt(m, tok, nb, f, logits)
                                         : octo_eval(m, tok + t0, nb, logits, OCTO_LOGITS_ALL);
        if (st != OCTO_OK) {
            free(logits), free(lp);
            return fail("%s", octo_model_error(m));
        }
        if (as_prompt) score(logits, tok, nb - 1, V, lp, store, ref, r);
        for (int i = 0; i < nb && !as_prompt; i++) /* row i predicts token t0 + i + 1 */
            if (t0 + i + 1 >= prompt) score(logits + (size_t)i * V, tok, t0 + i, V, lp, store, ref, r);
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

/* The feed of the run under test (compress: its --prompt-compress) or of the reference (0). */
static eval_feed feed_of(const cli_args *e, float compress) {
    return (eval_feed){.batch = (int)e->batch, .prompt = (int)e->prompt_tokens, .compress = compress,
                       .lookahead = e->gp.prompt_lookahead, .random_seed = (uint64_t)e->prompt_random};
}

/* eval's options (the table's rows for it) into e, and what they must include; 0 or a usage error's exit code. */
static int parse_eval_args(int argc, char **argv, cli_args *e) {
    *e = cli_defaults();
    e->batch = 1;
    const int rc = cli_parse(CMD_EVAL, argc, argv, e);
    if (rc) return rc;
    if (!e->model || !e->file) return usage_error("eval needs -m MODEL and -f TEXT");
    e->mo.draft_model = e->draft;
    if (e->kv_plain) e->mo.kv.compress = 0;
    const float compress = e->gp.prompt_compress;
    if (compress > 0.0f && !e->prompt_tokens) return usage_error("eval: --prompt-compress needs --prompt N");
    if (compress > 0.0f && !e->draft && !e->prompt_random)
        return usage_error("eval: --prompt-compress needs --draft MODEL (or --prompt-random SEED)");
    return 0;
}

/* The reference: the text's tokens and their log-probabilities under an uncompressed F16 cache. */
typedef struct {
    int32_t *tok;
    int n, V;
    uint64_t kv_bytes_per_token; /* of that cache */
    float *logprobs;             /* n x V */
    eval_result r;
} eval_reference;

/* The text's tokens, at most the model's context, into ref; 0 or 1 (printed). */
static int tokenize_text(octo_model *m, const char *file, const char *text, size_t len, eval_reference *ref) {
    const octo_model_info in = octo_model_info_get(m);
    int n = octo_tokenize(m, text, (int)len, 1, 0, NULL, 0);
    int32_t *tok = n > 0 ? malloc(sizeof(int32_t) * (size_t)n) : NULL;
    if (n <= 0 || !tok || octo_tokenize(m, text, (int)len, 1, 0, tok, n) != n) {
        free(tok);
        return fail("%s: cannot tokenize (%s)", file, n < 0 ? octo_status_name((octo_status)-n) : "empty");
    }
    if (n > in.n_ctx) n = in.n_ctx;
    ref->tok = tok;
    ref->n = n;
    ref->V = in.n_vocab;
    ref->kv_bytes_per_token = in.kv_bytes_per_token;
    if (n < 2) return fail("%s: fewer than 2 tokens", file);
    if ((double)n * ref->V * 4 > (double)(1u << 30))
        return fail("%d positions x %d logits do not fit in 1 GiB of reference log-probabilities: lower --ctx", n,
                    ref->V);
    return 0;
}

/* Load the model with an uncompressed cache, tokenize text (freed here) and
 * keep every position's log-probabilities; 0 or 1 (printed). */
static int run_reference(octo_client *c, const cli_args *e, char *text, size_t len, eval_reference *ref) {
    octo_model_options ro = octo_model_options_defaults();
    ro.kv.compress = 0;
    ro.moe.int2 = OCTO_MOE_INT2_OFF; /* every expert whole: exact */
    ro.n_ctx = (int)e->n_ctx;
    ro.auto_draft = OCTO_DRAFT_NONE;
    octo_model *m = c ? octo_load_model(c, e->ref ? e->ref : e->model, &ro) : NULL;
    if (!m || cli_apply_adapters(m, e->lora.path, e->lora.scale, e->lora.n)) { /* the reference runs them too */
        free(text);
        octo_model_free(m);
        return m ? 1 : fail("%s", c ? octo_last_error(c) : "out of memory");
    }
    int rc = tokenize_text(m, e->file, text, len, ref);
    free(text);
    if (!rc) {
        ref->logprobs = malloc(sizeof(float) * (size_t)ref->n * ref->V);
        const eval_feed f = feed_of(e, 0.0f);
        rc = ref->logprobs ? run(m, ref->tok, ref->n, &f, ref->V, ref->logprobs, NULL, &ref->r) : fail("out of memory");
    }
    octo_model_free(m);
    return rc;
}

/* What the reports say of the cache under test against the reference. */
typedef struct {
    int n;
    double ppl_ref, ppl, kld, top1, frac_end;
    uint64_t full_f16;  /* the reference cache's bytes at the end */
    const char *policy; /* "plain" for an uncompressed cache under test */
    int kv_keep;        /* the entries per layer the cache under test kept at most (0: no limit) */
} eval_figures;

static void print_json(const cli_args *e, const eval_figures *f, const eval_result *rt, const octo_stats *s) {
    printf("{\"tokens\": %d, \"prompt\": %ld, \"scored\": %d, \"batch\": %ld, \"ppl_ref\": %.6f, \"ppl\": %.6f, \"kld_mean\": %.6g, \"kld_max\": %.6g, "
           "\"top1_agreement\": %.6f, \"kv_bytes_end\": %llu, \"kv_bytes_peak\": %llu, \"kv_bytes_mean\": %.0f, "
           "\"kv_bytes_f16\": %llu, \"kv_fraction_of_f16\": %.4f, \"kv_budget\": %llu, \"kv_policy\": \"%s\", "
           "\"kv_bytes_hot\": %llu, \"kv_bytes_warm\": %llu, \"kv_bytes_cold\": %llu, \"tokens_evicted\": %lld",
           f->n, e->prompt_tokens, rt->n, e->batch, f->ppl_ref, f->ppl, f->kld, rt->kld_max, f->top1, (unsigned long long)rt->kv_bytes_end,
           (unsigned long long)rt->kv_bytes_peak, rt->kv_bytes_mean, (unsigned long long)f->full_f16, f->frac_end,
           (unsigned long long)rt->kv_budget, f->policy, (unsigned long long)rt->hot, (unsigned long long)rt->warm,
           (unsigned long long)rt->cold, (long long)rt->evicted);
    /* the list's eval column (OCTO_STATS, octo.h) in two runs, its own figures between */
    stats_print_json(stdout, s, STATS_EVAL, 1, 99, 1);
    printf(", \"kv_keep\": %d, \"prompt_compress\": %g", f->kv_keep, (double)e->gp.prompt_compress);
    stats_print_json(stdout, s, STATS_EVAL, 100, 199, 1);
    printf("}\n");
}

/* The prompt's reading with the draft model, when it took place. */
static void print_prefill(const octo_stats *s) {
    if (!s->prefill_lookahead_tokens) return;
    printf("prompt          %d tokens read in %.1f ms; the draft wrote %d ahead in %.1f ms", s->prefill_tokens,
           s->prefill_ms, s->prefill_lookahead_tokens, s->prefill_draft_ms);
    if (s->prefill_speckv) printf("; %lld entries per layer kept by their votes (SpecKV)", (long long)s->kv_tokens_kept_by_score);
    if (s->prompt_tokens_dropped)
        printf("; %d dropped first (SpecPC, %.1f ms saved, estimated)", s->prompt_tokens_dropped, s->prefill_ms_saved);
    printf("\n");
}

static void print_text(octo_model *m, const cli_args *e, const eval_figures *f, const eval_result *rt,
                       const octo_stats *s) {
    if (e->prompt_tokens)
        printf("tokens          %d: a prompt of %ld in one step, then %d scored, fed %ld per step\n", f->n, e->prompt_tokens,
               rt->n, e->batch);
    else printf("tokens          %d (fed %ld per step)\n", f->n, e->batch);
    if (e->ref) {
        printf("perplexity      %.4f (reference %s, uncompressed F16 cache: %.4f)\n", f->ppl, e->ref, f->ppl_ref);
        printf("KL divergence   mean %.6f, max %.6f (against the reference)\n", f->kld, rt->kld_max);
    } else {
        printf("perplexity      %.4f (uncompressed F16 cache: %.4f)\n", f->ppl, f->ppl_ref);
        printf("KL divergence   mean %.6f, max %.6f (against the uncompressed cache)\n", f->kld, rt->kld_max);
    }
    printf("top-1 agreement %.2f %%\n", 100.0 * f->top1);
    print_prefill(s);
    printf("KV bytes        %llu at the end = %.1f %% of F16 (%llu); peak %llu, budget %llu\n",
           (unsigned long long)rt->kv_bytes_end, 100.0 * f->frac_end, (unsigned long long)f->full_f16,
           (unsigned long long)rt->kv_bytes_peak, (unsigned long long)rt->kv_budget);
    printf("tiers           hot %llu, warm %llu, cold %llu bytes; %lld entries evicted per layer (%s)\n",
           (unsigned long long)rt->hot, (unsigned long long)rt->warm, (unsigned long long)rt->cold,
           (long long)rt->evicted, f->policy);
    const octo_model_info mi = octo_model_info_get(m);
    printf("spill           %s\n", mi.kv_spill);
    if (s->expert_cache_hit_rate >= 0)
        printf("experts         %.2f %% cache hits, %.0f bytes read and %.3f ms waited per token; cache %llu of %llu "
               "bytes (all experts: %llu)\n",
               100.0 * s->expert_cache_hit_rate, s->expert_bytes_read_per_token, s->expert_stall_ms_per_token,
               (unsigned long long)s->expert_cache_bytes, (unsigned long long)s->expert_cache_capacity,
               (unsigned long long)s->expert_bytes);
    if (s->kv_spill_on)
        printf("                %lld blocks on file at the end, %lld written, %lld re-spilled without a write, "
               "%lld read back (%.0f %% hits, %.1f us each, %lld read ahead), %lld errors%s%s\n",
               (long long)s->kv_blocks_spilled, (long long)s->kv_spill_writes, (long long)s->kv_spill_clean,
               (long long)s->kv_spill_reads, 100.0 * s->kv_spill_hit_rate, s->kv_spill_read_us,
               (long long)s->kv_spill_prefetched, (long long)s->kv_spill_errors, s->kv_spill_note[0] ? ": " : "",
               s->kv_spill_note);
}

/* Load the model with the cache under test, feed it the reference's tokens
 * and report; 0 or 1 (printed). */
static int run_under_test(octo_client *c, const cli_args *e, const eval_reference *ref) {
    octo_model_options mo = e->mo;
    if (e->prompt_tokens && e->prompt_tokens >= ref->n)
        return fail("--prompt %ld leaves nothing to score: the text has %d tokens", e->prompt_tokens, ref->n);
    /* reference entries are F16; with --prompt a budget is a share of the prompt's cache */
    const uint64_t full_f16 = ref->kv_bytes_per_token * (uint64_t)(e->prompt_tokens ? e->prompt_tokens : ref->n);
    if (e->budget_pct > 0) mo.kv.budget_bytes = (uint64_t)(e->budget_pct / 100.0 * (double)full_f16);
    if (e->budget_pct > 0 && mo.kv.budget_bytes == 0) /* 0 would mean "no budget": the opposite of what was asked */
        return fail("--kv-budget %g%% of %llu bytes rounds to 0 bytes", e->budget_pct, (unsigned long long)full_f16);
    if (e->keep_pct > 0) mo.kv.budget_tokens = (int)ceil(e->keep_pct / 100.0 * (double)(e->prompt_tokens ? e->prompt_tokens : ref->n));
    mo.n_ctx = (int)e->n_ctx;
    mo.auto_draft = OCTO_DRAFT_NONE;
    octo_model *m = octo_load_model(c, e->model, &mo);
    if (!m) return fail("%s", octo_last_error(c));
    if (cli_apply_adapters(m, e->lora.path, e->lora.scale, e->lora.n)) return octo_model_free(m), 1;
    if (octo_model_info_get(m).n_vocab != ref->V) {
        const int v = octo_model_info_get(m).n_vocab;
        octo_model_free(m);
        return fail("%s has %d tokens in its vocabulary, the reference %d: they cannot be compared", e->model, v, ref->V);
    }
    eval_result rt;
    const eval_feed feed = feed_of(e, e->gp.prompt_compress);
    const int rc = run(m, ref->tok, ref->n, &feed, ref->V, NULL, ref->logprobs, &rt);
    const octo_stats s = octo_model_stats(m);
    if (!rc && e->mo.moe.trace && s.expert_trace_failed) {
        octo_model_free(m);
        return fail("could not write the whole expert trace to %s", e->mo.moe.trace);
    }
    if (!rc) {
        const eval_figures f = {
            .n = ref->n, .ppl_ref = exp(ref->r.nll / ref->r.n), .ppl = exp(rt.nll / rt.n), .kld = rt.kld / rt.n,
            .top1 = rt.top1 / rt.n, .frac_end = (double)rt.kv_bytes_end / (double)full_f16, .full_f16 = full_f16,
            .policy = mo.kv.compress ? s.kv_policy : "plain", .kv_keep = mo.kv.budget_tokens};
        if (e->json) print_json(e, &f, &rt, &s);
        else print_text(m, e, &f, &rt, &s);
    }
    octo_model_free(m);
    return rc;
}

int cmd_eval(int argc, char **argv) {
    cli_args e;
    int rc = parse_eval_args(argc, argv, &e);
    if (rc) return rc;
    char *text;
    size_t len;
    if (read_text_file(e.file, &text, &len)) return 1;
    octo_client_options co = octo_client_options_defaults();
    co.cache_dir = e.cache_dir;
    co.device = e.device;
    octo_client *c = octo_client_new(&co);
    eval_reference ref = {0};
    rc = run_reference(c, &e, text, len, &ref);
    if (!rc) rc = run_under_test(c, &e, &ref);
    free(ref.logprobs), free(ref.tok);
    octo_client_free(c);
    return rc;
}

int eval_int2_kld(const char *path, const char *file, long n_ctx, double *kld, int *n_positions) {
    char *text;
    size_t len;
    if (read_text_file(file, &text, &len)) return 1;
    cli_args e = cli_defaults();
    e.model = path, e.file = file, e.n_ctx = n_ctx, e.batch = 1;
    octo_client *c = octo_client_new(NULL);
    eval_reference ref = {0};
    int rc = run_reference(c, &e, text, len, &ref);
    octo_model *m = NULL;
    if (!rc) {
        e.mo.n_ctx = (int)n_ctx;
        e.mo.auto_draft = OCTO_DRAFT_NONE;
        e.mo.moe.int2 = OCTO_MOE_INT2_ALL;
        e.mo.kv.compress = 0; /* as the reference: the copies' cost alone */
        if (!(m = octo_load_model(c, path, &e.mo))) rc = fail("%s", octo_last_error(c));
        else rc = cli_apply_adapters(m, e.lora.path, e.lora.scale, e.lora.n);
    }
    eval_result rt;
    const eval_feed feed = feed_of(&e, 0.0f);
    if (!rc) rc = run(m, ref.tok, ref.n, &feed, ref.V, NULL, ref.logprobs, &rt);
    if (!rc && octo_model_stats(m).expert_int2_served == 0) rc = fail("no lookup was served by a 2-bit copy");
    if (!rc) *kld = rt.kld / rt.n, *n_positions = rt.n;
    octo_model_free(m);
    free(ref.logprobs), free(ref.tok);
    octo_client_free(c);
    return rc;
}
