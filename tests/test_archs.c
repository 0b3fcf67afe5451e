/*
 * test_archs — the architectures beyond llama/qwen2 (qwen2moe, olmoe,
 * granitemoe, phi3, gemma2, deepseek2) through everything else the runtime
 * does, on a synthetic Q8_0 model of each (model/synth.c):
 *
 *   - speculation is lossless: greedy n-gram and lookahead decoding (and the
 *     self-draft on the dense ones) give exactly plain decoding's ids, with
 *     drafts accepted somewhere;
 *   - the MoE ones through a budgeted expert cache (a quarter of the experts,
 *     read-ahead on): plain decoding's ids (deepseek2's dense first layer
 *     has no experts to cache);
 *   - the tiered KV cache (default configuration) against a plain F16 one
 *     over 700 tokens: mean KL divergence and top-1 agreement, bounded;
 *   - a sliding window (gemma2) drops the blocks no query sees:
 *     token-by-token decoding (commits, so drops) equals one batch (no drops)
 *     bit for bit, the windowed layers hold window + one block at most, and
 *     a rewind below what a window dropped computes the lost entries again;
 *   - latent attention (deepseek2) caches one row of kv_lora_rank + n_rot per
 *     token and layer;
 *   - a file missing a tensor or key of its architecture, or with one
 *     mis-shaped, is refused with a message naming it.
 */
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/gguf.h"
#include "core/quant.h"
#include "model/model.h"
#include "model/synth.h"
#include "octo.h"
#include "runtime/session.h"
#include "t.h"
#include "util.h"

#define N_KV_TOKENS 700
#define WINDOW 40

typedef struct {
    const char *arch;
    int experts;
    int window;
} arch_case;

static const arch_case CASES[] = {
    {"qwen2moe", 4, 0}, {"olmoe", 4, 0},       {"granitemoe", 4, 0},
    {"phi3", 0, 0},     {"gemma2", 0, WINDOW}, {"deepseek2", 4, 0},
};

static void synth(const arch_case *ac, const char *path) {
    synth_opts o = synth_defaults();
    o.arch = ac->arch;
    o.type = QT_Q8_0;
    o.n_embd = 128, o.n_head = 4, o.n_head_kv = 2, o.n_ff = 128, o.n_vocab = 320, o.n_ctx = 1024, o.seed = 5;
    o.n_layer = 3;
    o.n_expert = ac->experts, o.n_expert_used = ac->experts ? 2 : 0;
    o.swa_window = ac->window;
    err_t err = {0};
    T_CHECKF(synth_write(&o, path, &err) == ERR_OK, "[%s] %s", ac->arch, err.msg);
}

/* ---- speculation ---- */

static int generate(octo_model *m, const char *prompt, octo_spec_mode spec, int32_t *ids, int max, octo_stats *st) {
    octo_generate_params p = octo_generate_params_defaults();
    p.temperature = 0.0f;
    p.max_tokens = max;
    p.spec = spec;
    octo_stream *s = octo_generate(m, prompt, &p);
    if (!s) {
        T_CHECKF(0, "generate: %s", octo_model_error(m));
        return 0;
    }
    while (octo_stream_next(s)) {
    }
    T_CHECKF(octo_stream_status(s) == OCTO_OK, "stream: %s", octo_stream_error(s));
    const int32_t *got;
    const int n = octo_stream_tokens(s, &got);
    memcpy(ids, got, sizeof(int32_t) * (size_t)n);
    octo_stream_free(s);
    *st = octo_model_stats(m);
    return n;
}

static long lookahead_accepted; /* over every architecture: a random model seldom repeats a window's guess */

static void test_speculation(const arch_case *ac, const char *path) {
    static const char *prompts[] = {"hello hello hello", "the cat sat on the mat and the cat", "a b c d a b c d a b"};
    octo_client *c = octo_client_new(NULL);
    octo_model_options mo = octo_model_options_defaults();
    mo.auto_draft = ac->experts == 0 ? OCTO_DRAFT_SELF : OCTO_DRAFT_NONE;
    octo_model *m = octo_load_model(c, path, &mo);
    T_CHECKF(m != NULL, "[%s] load: %s", ac->arch, octo_last_error(c));
    if (!m) {
        octo_client_free(c);
        return;
    }
    const octo_spec_mode modes[] = {OCTO_SPEC_NGRAM, OCTO_SPEC_LOOKAHEAD, OCTO_SPEC_SELF};
    const int n_modes = ac->experts == 0 ? 3 : 2;
    for (int k = 0; k < n_modes; k++) {
        int differ = 0;
        long accepted = 0;
        for (size_t i = 0; i < sizeof prompts / sizeof *prompts; i++) {
            int32_t ref[64], got[64];
            octo_stats st;
            const int nr = generate(m, prompts[i], OCTO_SPEC_NONE, ref, 48, &st);
            const int ng = generate(m, prompts[i], modes[k], got, 48, &st);
            differ += nr != ng || memcmp(ref, got, sizeof(int32_t) * (size_t)nr);
            accepted += st.spec_accepted;
        }
        printf("[%s] %s: %d of 3 greedy generations differ from plain decoding, %ld drafts accepted\n", ac->arch,
               k == 0 ? "n-gram" : k == 1 ? "lookahead" : "self-draft", differ, accepted);
        T_EQ_INT(differ, 0);
        if (modes[k] == OCTO_SPEC_LOOKAHEAD) lookahead_accepted += accepted;
        else T_CHECKF(accepted > 0, "[%s] mode %d: no draft accepted, the comparison proves nothing", ac->arch, k);
    }
    octo_model_free(m);
    octo_client_free(c);
}

/* A budgeted expert cache (a quarter of the experts, read-ahead on) gives
 * plain decoding's ids, and has to read experts again to do so. */
static void test_expert_cache(const arch_case *ac, const char *path) {
    static const char *prompts[] = {"hello hello hello", "the cat sat on the mat and the cat"};
    octo_client *c = octo_client_new(NULL);
    octo_model_options mo = octo_model_options_defaults();
    mo.auto_draft = OCTO_DRAFT_NONE;
    octo_model *all = octo_load_model(c, path, &mo);
    mo.moe.cache_share = 0.25;
    mo.moe.prefetch = OCTO_MOE_PREFETCH_ON;
    octo_model *quarter = octo_load_model(c, path, &mo);
    T_CHECKF(all && quarter, "[%s] load: %s", ac->arch, octo_last_error(c));
    int differ = 0;
    octo_stats st = {0};
    for (size_t i = 0; all && quarter && i < sizeof prompts / sizeof *prompts; i++) {
        int32_t a[64], b[64];
        const int na = generate(all, prompts[i], OCTO_SPEC_NONE, a, 40, &st);
        const int nb = generate(quarter, prompts[i], OCTO_SPEC_NONE, b, 40, &st);
        differ += na != nb || memcmp(a, b, sizeof(int32_t) * (size_t)na);
    }
    printf("[%s] expert cache at 25 %%: %d of 2 generations differ, hit rate %.2f, %.1f KiB read\n", ac->arch, differ,
           st.expert_cache_hit_rate, st.expert_bytes_read / 1024.0);
    T_EQ_INT(differ, 0);
    T_CHECKF(st.expert_cache_hit_rate >= 0 && st.expert_cache_hit_rate < 1, "[%s] hit rate %g", ac->arch,
             st.expert_cache_hit_rate);
    octo_model_free(all), octo_model_free(quarter);
    /* 2-bit copies: the sidecar made at load holds records for the MoE layers only */
    mo.moe.int2 = OCTO_MOE_INT2_ALL;
    octo_model *copies = octo_load_model(c, path, &mo);
    T_CHECKF(copies != NULL, "[%s] load with 2-bit copies: %s", ac->arch, octo_last_error(c));
    if (copies) {
        int32_t ids[64];
        const int n = generate(copies, prompts[1], OCTO_SPEC_NONE, ids, 24, &st);
        printf("[%s] every low-weight miss served by its 2-bit copy: %d tokens, %llu copies read, %llu errors\n",
               ac->arch, n, (unsigned long long)st.expert_int2_loads, (unsigned long long)st.expert_int2_errors);
        T_EQ_INT(n, 24);
        T_CHECK(st.expert_int2_loads > 0 && st.expert_int2_errors == 0);
        octo_model_free(copies);
    }
    char side[700];
    snprintf(side, sizeof side, "%s.int2", path);
    remove(side);
    octo_client_free(c);
}

/* ---- the KV cache ---- */

static void fill_tokens(int32_t *t, int n, int V) {
    uint64_t s = 0x9e3779b97f4a7c15ull;
    t[0] = 1;
    for (int i = 1; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        t[i] = 3 + (int32_t)((s >> 33) % (uint64_t)(V - 3));
    }
}

static void softmax(const float *x, int n, double *p) {
    double mx = x[0], sum = 0;
    for (int i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    for (int i = 0; i < n; i++) sum += p[i] = exp(x[i] - mx);
    for (int i = 0; i < n; i++) p[i] /= sum;
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++) b = x[i] > x[b] ? i : b;
    return b;
}

/* The default tiered cache against a plain F16 one, token by token. */
static void test_kv_tiers(const arch_case *ac, const model *m, const int32_t *tok) {
    const int V = m->hp.n_vocab;
    session *plain = NULL, *tiered = NULL;
    err_t err = {0};
    const kv_config def = kv_config_default();
    T_EQ_INT(session_new(m, N_KV_TOKENS, QT_F16, 0, &plain, &err), ERR_OK);
    T_EQ_INT(session_new_kv(m, N_KV_TOKENS, &def, 0, &tiered, &err), ERR_OK);
    float *a = malloc(sizeof(float) * (size_t)V), *b = malloc(sizeof(float) * (size_t)V);
    double *pa = malloc(sizeof(double) * (size_t)V), *pb = malloc(sizeof(double) * (size_t)V);
    double kld = 0;
    int agree = 0, rows = 0;
    for (int t = 0; plain && tiered && t < N_KV_TOKENS; t++) {
        if (session_eval(plain, tok + t, 1, false, a, &err) || session_eval(tiered, tok + t, 1, false, b, &err)) {
            T_CHECKF(0, "[%s] eval: %s", ac->arch, err.msg);
            break;
        }
        softmax(a, V, pa), softmax(b, V, pb);
        for (int i = 0; i < V; i++) kld += pa[i] * (log(pa[i] + 1e-30) - log(pb[i] + 1e-30));
        agree += argmax(a, V) == argmax(b, V);
        rows++;
    }
    const kv_stats ks = tiered ? kv_cache_stats(tiered->kv) : (kv_stats){0};
    printf("[%s] tiered KV cache vs plain F16 over %d tokens: mean KLD %.3g nats, top-1 agreement %.1f %%, "
           "%.1f KiB vs %.1f KiB (%lld blocks re-quantized)\n",
           ac->arch, rows, kld / rows, 100.0 * agree / rows, ks.bytes / 1024.0,
           plain ? kv_cache_stats(plain->kv).bytes / 1024.0 : 0.0, (long long)ks.requantized);
    T_EQ_INT(rows, N_KV_TOKENS);
    T_CHECKF(ks.requantized > 0, "[%s] no block aged into a colder tier: the comparison shows nothing", ac->arch);
    T_CHECKF(kld / rows > 0 && kld / rows < 0.05, "[%s] mean KLD %.4g", ac->arch, kld / rows);
    T_CHECKF(agree >= rows * 9 / 10, "[%s] top-1 agreement %d of %d", ac->arch, agree, rows);
    session_free(plain), session_free(tiered);
    free(a), free(b), free(pa), free(pb);
}

/* Sliding-window layers: decoding token by token (commits drop the blocks no
 * query sees) equals one batch (nothing dropped before the pass), bit for
 * bit; a rewind below the dropped blocks computes them again. */
static void test_window(const arch_case *ac, const model *m, const int32_t *tok) {
    const int V = m->hp.n_vocab, N = 200, R = 100;
    session *one = NULL, *batch = NULL;
    err_t err = {0};
    T_EQ_INT(session_new(m, N, QT_F32, 0, &one, &err), ERR_OK);
    T_EQ_INT(session_new(m, N, QT_F32, 0, &batch, &err), ERR_OK);
    if (!one || !batch) return;
    float *rows = malloc(sizeof(float) * (size_t)N * V), *row = malloc(sizeof(float) * (size_t)V);
    T_EQ_INT(session_eval(batch, tok, N, true, rows, &err), ERR_OK);
    int differ = 0;
    for (int t = 0; t < N; t++) {
        T_EQ_INT(session_eval(one, tok + t, 1, false, row, &err), ERR_OK);
        differ += memcmp(row, rows + (size_t)t * V, sizeof(float) * (size_t)V) != 0;
    }
    const kv_stats ks = kv_cache_stats(one->kv);
    int windowed = 0;
    for (int l = 0; l < m->hp.n_layer; l++) windowed += model_layer_swa(&m->hp, l);
    printf("[%s] window %d on %d of %d layers: %d of %d rows differ between token by token and one batch; "
           "%lld entries dropped by windows\n",
           ac->arch, ac->window, windowed, m->hp.n_layer, differ, N, (long long)ks.tokens_windowed);
    T_EQ_INT(differ, 0);
    /* a windowed layer holds at most window + two blocks: the rest of N is dropped */
    T_CHECKF(ks.tokens_windowed >= (int64_t)windowed * (N - ac->window - 2 * KV_BLOCK), "[%s] dropped %lld", ac->arch,
             (long long)ks.tokens_windowed);
    /* the plan counts a windowed layer at window + two blocks, not the whole context */
    const kv_shape sh = {.n_layer = 3, .n_head = 4, .n_head_kv = 2, .head_dim = 32, .head_dim_v = 32, .window = 40,
                         .window_period = 2};
    T_EQ_INT((long long)kv_context_bytes(sh, QT_F16, 1000),
             (long long)(kv_token_bytes(sh, QT_F16) / 3 * (1000 + 2 * (40 + 2 * KV_BLOCK))));
    T_EQ_INT((long long)kv_context_bytes(sh, QT_F16, 100), (long long)(kv_token_bytes(sh, QT_F16) * 100));
    /* taking back a block's worth never loses what the window needs */
    T_CHECK(!kv_cache_window_lost(one->kv, N - KV_BLOCK));
    /* back to R tokens (below the dropped blocks), then on again: rows as before */
    const int kept = session_reusable(one, R);
    T_CHECKF(kept < R, "[%s] a rewind below the window's drops must compute again (reusable %d)", ac->arch, kept);
    T_EQ_INT(session_rewind(one, R, &err), ERR_OK);
    differ = 0;
    for (int t = R; t < R + 20; t++) {
        T_EQ_INT(session_eval(one, tok + t, 1, false, row, &err), ERR_OK);
        differ += memcmp(row, rows + (size_t)t * V, sizeof(float) * (size_t)V) != 0;
    }
    printf("[%s] rewound to %d (%d reusable): %d of 20 rows differ\n", ac->arch, R, kept, differ);
    T_EQ_INT(differ, 0);
    /* on to N again (the window drops), then a plain truncation deeper than
     * its slack keeps nothing (never a window with a hole) and computes again */
    for (int t = R + 20; t < N; t++) T_EQ_INT(session_eval(one, tok + t, 1, false, row, &err), ERR_OK);
    T_CHECK(kv_cache_window_lost(one->kv, 30));
    session_truncate(one, 30);
    T_EQ_INT(one->n_past, 0);
    T_EQ_INT(session_eval(one, tok, 30, false, row, &err), ERR_OK);
    T_CHECK(!memcmp(row, rows + (size_t)29 * V, sizeof(float) * (size_t)V));
    session_free(one), session_free(batch);
    free(rows), free(row);
}

/* Under a budget, the windowed layers' unused share goes to the others: a
 * 3-layer cache whose layers 0 and 2 are windowed keeps more of layer 1 than
 * the same cache without windows, and both stay within the budget. */
static void test_window_budget(void) {
    int64_t kept[2] = {0, 0};
    for (int w = 0; w < 2; w++) {
        const kv_shape sh = {.n_layer = 3, .n_head = 4, .n_head_kv = 2, .head_dim = 32, .head_dim_v = 32,
                             .window = w ? 40 : 0, .window_period = 2};
        kv_config cfg = kv_config_default();
        cfg.budget_bytes = kv_budget_floor(sh, &cfg) * 2;
        kv_cache *c = NULL;
        err_t err = {0};
        T_EQ_INT(kv_cache_new(sh, &cfg, &c, &err), ERR_OK);
        if (!c) return;
        const kv_iface kv = kv_cache_iface(c);
        float k[64], v[64];
        for (int i = 0; i < 64; i++) k[i] = (float)(i % 7) * 0.1f, v[i] = (float)(i % 5) * 0.2f;
        uint64_t worst = 0;
        for (int32_t p = 0; p < 1000; p++) {
            for (int l = 0; l < 3; l++) T_EQ_INT(kv.append(kv.self, l, 1, &p, k, v, &err), ERR_OK);
            T_EQ_INT(kv_cache_commit(c, 1, &err), ERR_OK);
            const uint64_t b = kv_cache_stats(c).bytes;
            worst = b > worst ? b : worst;
        }
        kept[w] = kv_cache_stats(c).tokens;
        T_CHECKF(worst <= cfg.budget_bytes, "window %d: %llu bytes over a budget of %llu", w, (unsigned long long)worst,
                 (unsigned long long)cfg.budget_bytes);
        kv_cache_free(c);
    }
    printf("KV budget with windowed layers: the full layer keeps %lld entries (%lld without windows)\n",
           (long long)kept[1], (long long)kept[0]);
    T_CHECK(kept[1] > kept[0]);
}

static void test_mla_cache(const model *m) {
    session *s = NULL;
    err_t err = {0};
    T_EQ_INT(session_new(m, 64, QT_F32, 0, &s, &err), ERR_OK);
    if (!s) return;
    int32_t tok[10];
    fill_tokens(tok, 10, m->hp.n_vocab);
    float *row = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
    T_EQ_INT(session_eval(s, tok, 10, false, row, &err), ERR_OK);
    const kv_stats ks = kv_cache_stats(s->kv);
    const model_hparams *hp = &m->hp;
    const uint64_t latent = (uint64_t)(hp->kv_lora_rank + hp->n_rot) * 4; /* [latent | k_pe]; values: the latent in it */
    const uint64_t expanded = (uint64_t)hp->n_head * (hp->head_dim + hp->head_dim_v) * 4;
    printf("[deepseek2] KV cache: %llu bytes for 10 tokens x %d layers: %llu a token and layer (the heads expanded: %llu)\n",
           (unsigned long long)ks.entry_bytes, hp->n_layer, (unsigned long long)(ks.entry_bytes / 10 / hp->n_layer),
           (unsigned long long)expanded);
    T_EQ_INT((long long)ks.entry_bytes, (long long)(latent * 10 * (uint64_t)hp->n_layer));
    T_CHECK(latent < expanded);
    free(row);
    session_free(s);
}

/* LongRoPE (phi3): the short factors up to the original context, the long
 * ones past it; the two give other logits, and both differ from no factors. */
static void test_longrope(void) {
    synth_opts o = synth_defaults();
    o.arch = "phi3", o.type = QT_F32, o.n_embd = 128, o.n_head = 4, o.n_head_kv = 2, o.n_ff = 128, o.n_ctx = 512;
    o.n_vocab = 320, o.seed = 9, o.longrope = true;
    char path[600];
    tu_tmp_path(path, sizeof path, "archs-longrope.gguf");
    err_t err = {0};
    model *m = NULL;
    T_CHECKF(synth_write(&o, path, &err) == ERR_OK && model_load(path, &m, &err) == ERR_OK, "%s", err.msg);
    if (!m) return;
    T_EQ_INT(m->hp.rope_ctx_orig, 256);
    T_CHECK(fabsf(m->hp.rope_attn_factor - 1.19f) < 1e-6f);
    T_CHECK(m->rope_freqs.data == m->rope_short.data);
    int32_t tok[40];
    fill_tokens(tok, 40, m->hp.n_vocab);
    float *a = malloc(sizeof(float) * 320), *b = malloc(sizeof(float) * 320), *c = malloc(sizeof(float) * 320);
    float *rows[3] = {a, b, c};
    for (int k = 0; k < 3; k++) {
        model_set_context(m, k == 0 ? 256 : 512);
        if (k == 2) m->rope_freqs.data = NULL; /* no factors at all */
        T_CHECK(k != 1 || m->rope_freqs.data == m->rope_long.data);
        session *s = NULL;
        T_EQ_INT(session_new(m, 64, QT_F32, 0, &s, &err), ERR_OK);
        if (s) T_EQ_INT(session_eval(s, tok, 40, false, rows[k], &err), ERR_OK);
        session_free(s);
    }
    printf("[phi3] LongRoPE: short vs long factors %s, short vs none %s\n", memcmp(a, b, 320 * 4) ? "differ" : "EQUAL",
           memcmp(a, c, 320 * 4) ? "differ" : "EQUAL");
    T_CHECK(memcmp(a, b, 320 * 4) != 0 && memcmp(a, c, 320 * 4) != 0);
    free(a), free(b), free(c);
    model_free(m);
    remove(path);
}

/* YaRN (ggml's formulas): the blend's bounds and the magnitude, for a
 * llama and for deepseek2 (whose magnitude goes into the attention scale);
 * both decode. With n_rot 32, base 1e4, an original context of 256: the
 * bounds are floor(32 ln(256 / (32 * 2 pi)) / (2 ln 1e4)) = 0 and
 * ceil(32 ln(256 / (2 pi)) / (2 ln 1e4)) = 7. */
static void test_yarn(void) {
    const char *arch[] = {"llama", "deepseek2"};
    for (int k = 0; k < 2; k++) {
        synth_opts o = synth_defaults();
        o.arch = arch[k], o.type = QT_F32, o.n_embd = 128, o.n_head = 4, o.n_head_kv = 2, o.n_ff = 128;
        o.n_ctx = 1024, o.n_vocab = 320, o.seed = 3, o.rope_yarn = 4.0f, o.n_expert = 4 * k, o.n_expert_used = 2 * k;
        char path[600];
        tu_tmp_path(path, sizeof path, "archs-yarn.gguf");
        err_t err = {0};
        model *m = NULL;
        T_CHECKF(synth_write(&o, path, &err) == ERR_OK && model_load(path, &m, &err) == ERR_OK, "%s", err.msg);
        if (!m) continue;
        const model_hparams *hp = &m->hp;
        printf("[%s] YaRN x4 over 256: blend from pair %g to %g, rope magnitude %.5f, attention scale %.6f\n", arch[k],
               (double)hp->yarn_corr[0], (double)hp->yarn_corr[1], (double)hp->rope_attn_factor, (double)hp->attn_scale);
        T_CHECK(hp->rope_yarn && hp->n_rot == 32 && hp->rope_ctx_orig == 256);
        T_CHECK(hp->yarn_corr[0] == 0.0f && hp->yarn_corr[1] == 7.0f);
        T_CHECK(fabsf(hp->rope_freq_scale - 0.25f) < 1e-7f);
        if (k == 0) T_CHECK(fabsf(hp->rope_attn_factor - (1.0f + 0.1f * logf(4.0f))) < 1e-6f);
        else T_CHECK(hp->rope_attn_factor == 1.0f && fabsf(hp->attn_scale - 0.150704f) < 2e-6f);
        session *s = NULL;
        int32_t tok[40];
        fill_tokens(tok, 40, hp->n_vocab);
        float *row = malloc(sizeof(float) * (size_t)hp->n_vocab);
        T_EQ_INT(session_new(m, 64, QT_F32, 0, &s, &err), ERR_OK);
        if (s) T_EQ_INT(session_eval(s, tok, 40, false, row, &err), ERR_OK);
        session_free(s);
        free(row);
        model_free(m);
        remove(path);
    }
}

/* The latent rows under a budget: eviction, and spill to a file and back,
 * run on rows whose values are read from the keys. */
static void test_mla_budget(const model *m, const int32_t *tok) {
    for (int spill = 0; spill < 2; spill++) {
        kv_config cfg = kv_config_default();
        cfg.hot_tokens = 64, cfg.warm_tokens = 128; /* blocks turn cold (spill takes cold blocks) early */
        const kv_shape sh = {.n_layer = m->hp.n_layer, .n_head = m->hp.n_head, .n_head_kv = 1,
                             .head_dim = m->hp.kv_lora_rank + m->hp.n_rot, .head_dim_v = m->hp.kv_lora_rank,
                             .values_in_keys = true};
        cfg.budget_bytes = kv_budget_floor(sh, &cfg) + kv_token_bytes(sh, QT_F16) * 64;
        char dir[600];
        tu_tmp_path(dir, sizeof dir, "archs-spill");
        if (spill) {
            mkdir(dir, 0700);
            cfg.spill_dir = dir;
        }
        session *s = NULL;
        err_t err = {0};
        T_EQ_INT(session_new_kv(m, N_KV_TOKENS, &cfg, 0, &s, &err), ERR_OK);
        float *row = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
        int t = 0, finite = 1;
        for (; s && t < N_KV_TOKENS && !session_eval(s, tok + t, 1, false, row, &err); t++)
            for (int i = 0; i < m->hp.n_vocab; i++) finite &= isfinite(row[i]) != 0;
        const kv_stats ks = s ? kv_cache_stats(s->kv) : (kv_stats){0};
        printf("[deepseek2] latent rows under a budget of %llu bytes%s: %d tokens, %lld evicted a layer, %lld spilled, "
               "%lld read back, %lld errors\n",
               (unsigned long long)cfg.budget_bytes, spill ? " with spill" : "", t, (long long)ks.tokens_evicted,
               (long long)ks.spill_writes, (long long)ks.spill_reads, (long long)ks.spill_errors);
        T_EQ_INT(t, N_KV_TOKENS);
        T_CHECK(finite && ks.bytes <= cfg.budget_bytes && ks.spill_errors == 0);
        T_CHECK(spill ? ks.spill_writes > 0 && ks.spill_reads > 0 : ks.tokens_evicted > 0);
        session_free(s);
        free(row);
        if (spill) rmdir(dir);
    }
}

/* ---- bad files ---- */

static err_code zero_fill(void *user, uint64_t index, void *buf, uint64_t n_bytes, err_t *err) {
    (void)user, (void)index, (void)err;
    memset(buf, 0, n_bytes);
    return ERR_OK;
}

/* Load a copy of src without tensor `what` (or with it mis-shaped), or
 * without key `key`; the weights are zeros: only the load is judged. */
static err_code load_altered(const char *src, const char *tmp, const char *what, bool reshape, const char *key,
                             err_t *err) {
    gguf_ctx *g = NULL;
    err_code rc = gguf_open(src, &g, err);
    if (rc) return rc;
    gguf_writer *w = gguf_writer_new();
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (!key || strcmp(g->kv[i].key, key)) gguf_writer_set_value(w, g->kv[i].key, &g->kv[i].value);
    for (uint64_t i = 0; i < g->n_tensors && !rc; i++) {
        const gguf_tensor *t = &g->tensors[i];
        const bool hit = what && !strcmp(t->name, what);
        if (hit && !reshape) continue;
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        if (hit) ne[0] += quant_traits_of(t->type)->block_size; /* rows one block too long */
        rc = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, ne, NULL, err);
    }
    if (!rc) rc = gguf_writer_write(w, tmp, zero_fill, NULL, err);
    gguf_writer_free(w);
    gguf_close(g);
    if (rc) return rc;
    model *m = NULL;
    rc = model_load(tmp, &m, err);
    model_free(m);
    return rc;
}

typedef struct {
    const char *arch, *what;
    bool reshape;
    const char *key;
    err_code want;
} bad_case;

static void test_bad_files(void) {
    static const bad_case cases[] = {
        {"qwen2moe", "blk.1.ffn_gate_inp_shexp.weight", false, NULL, ERR_MISSING_TENSOR},
        {"qwen2moe", "blk.0.attn_q.bias", true, NULL, ERR_BAD_SHAPE},
        {"olmoe", "blk.0.attn_k_norm.weight", false, NULL, ERR_MISSING_TENSOR},
        {"granitemoe", NULL, false, "granitemoe.residual_scale", ERR_MISSING_KEY},
        {"granitemoe", NULL, false, "granitemoe.logit_scale", ERR_MISSING_KEY},
        {"phi3", "blk.1.attn_qkv.weight", true, NULL, ERR_BAD_SHAPE},
        {"phi3", NULL, false, "phi3.attention.sliding_window", ERR_MISSING_KEY},
        {"gemma2", "blk.2.post_ffw_norm.weight", false, NULL, ERR_MISSING_TENSOR},
        {"deepseek2", "blk.1.attn_kv_b.weight", true, NULL, ERR_BAD_SHAPE},
        {"deepseek2", "blk.0.attn_kv_a_norm.weight", false, NULL, ERR_MISSING_TENSOR},
        {"deepseek2", NULL, false, "deepseek2.attention.kv_lora_rank", ERR_MISSING_KEY},
        {"deepseek2", NULL, false, "deepseek2.leading_dense_block_count", ERR_MISSING_KEY},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const bad_case *bc = &cases[i];
        char src[600], tmp[600], name[64];
        snprintf(name, sizeof name, "archs-%s.gguf", bc->arch);
        tu_tmp_path(src, sizeof src, name);
        tu_tmp_path(tmp, sizeof tmp, "archs-bad.gguf");
        err_t err = {0};
        const err_code rc = load_altered(src, tmp, bc->what, bc->reshape, bc->key, &err);
        const char *named = bc->what ? bc->what : bc->key;
        printf("[%s] %s %s: %s\n", bc->arch, named, bc->key ? "absent" : bc->reshape ? "mis-shaped" : "absent", err.msg);
        T_CHECKF(rc == bc->want, "[%s] %s: code %d, want %d (%s)", bc->arch, named, rc, bc->want, err.msg);
        T_CHECKF(strstr(err.msg, named) != NULL, "[%s] the message does not name %s: %s", bc->arch, named, err.msg);
        remove(tmp);
    }
}

int main(void) {
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        const arch_case *ac = &CASES[i];
        char path[600], name[64];
        snprintf(name, sizeof name, "archs-%s.gguf", ac->arch);
        tu_tmp_path(path, sizeof path, name);
        synth(ac, path);
        model *m = NULL;
        err_t err = {0};
        T_CHECKF(model_load(path, &m, &err) == ERR_OK, "[%s] %s", ac->arch, err.msg);
        if (!m) continue;
        T_CHECKF(!strcmp(m->hp.arch_name, ac->arch), "[%s] loaded as %s", ac->arch, m->hp.arch_name);
        int32_t tok[N_KV_TOKENS];
        fill_tokens(tok, N_KV_TOKENS, m->hp.n_vocab);
        test_speculation(ac, path);
        if (ac->experts) test_expert_cache(ac, path);
        if (!tu_quick() || i % 2 == 0) test_kv_tiers(ac, m, tok);
        if (ac->window) test_window(ac, m, tok);
        if (m->hp.kv_lora_rank) test_mla_cache(m);
        if (m->hp.kv_lora_rank) test_mla_budget(m, tok);
        model_free(m);
    }
    T_CHECKF(lookahead_accepted > 0, "lookahead: no draft accepted on any architecture");
    test_longrope();
    test_window_budget();
    test_yarn();
    test_bad_files();
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        char path[600], name[64];
        snprintf(name, sizeof name, "archs-%s.gguf", CASES[i].arch);
        tu_tmp_path(path, sizeof path, name);
        remove(path);
    }
    T_DONE();
}
