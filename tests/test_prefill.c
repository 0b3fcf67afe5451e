/*
 * test_prefill — a budget of entries, a prompt scored by votes cast after it
 * (kv_cache_hold / kv_cache_release), and the draft's reading of a prompt
 * (runtime/prefill.h: SpecKV, SpecPC) end to end on stories260K:
 *   - the cache keeps exactly the best-voted entries, the anchors and the
 *     recent window, layer by layer, within budget_tokens;
 *   - speckv with no lookahead is SnapKV exactly (same logits, bit for bit);
 *   - with the draft's lookahead the figures the stats give are the ones
 *     the budget and the context imply; SpecPC reads ceil(ratio x n) tokens;
 *   - greedy text with speculation equals plain decoding for the same
 *     compressed prompt;
 *   - bad input is a clear error; a prompt too short to compress is kept whole.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/quant.h"
#include "kv/kv_cache.h"
#include "octo.h"
#include "t.h"
#include "util.h"

static void append_all(kv_cache *c, int n_layer, int dim, int n) {
    kv_iface k = kv_cache_iface(c);
    float *rows = malloc(sizeof(float) * (size_t)n * dim);
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)n);
    for (int i = 0; i < n * dim; i++) rows[i] = (float)((i * 7919) % 101) / 50.0f - 1.0f;
    for (int i = 0; i < n; i++) pos[i] = i;
    for (int l = 0; l < n_layer; l++) {
        err_t err = {0};
        T_CHECK(k.append(k.self, l, n, pos, rows, rows, &err) == ERR_OK);
    }
    free(rows), free(pos);
}

/* positions layer l holds, ascending, into out; their count */
static int held_positions(kv_cache *c, int l, int32_t *out) {
    kv_iface k = kv_cache_iface(c);
    const kv_span *sp;
    const int ns = k.view(k.self, l, &sp);
    int n = 0;
    for (int i = 0; i < ns; i++)
        for (int j = 0; j < sp[i].n_tokens; j++) out[n++] = sp[i].pos[j];
    return n;
}

/* 100 entries held, then votes that favour other positions in each layer. */
static void test_hold_release(void) {
    const kv_shape shape = {.n_layer = 2, .n_head = 4, .n_head_kv = 2, .head_dim = 16, .head_dim_v = 16};
    kv_config cfg = kv_config_plain(QT_F32);
    cfg.policy = KV_POLICY_SPECKV;
    cfg.anchor_tokens = 4, cfg.recent_tokens = 8, cfg.budget_tokens = 20;
    kv_cache *c = NULL;
    err_t err = {0};
    T_CHECK(kv_cache_new(shape, &cfg, &c, &err) == ERR_OK);
    if (!c) return;
    kv_cache_hold(c);
    append_all(c, 2, 32, 100);
    T_CHECK(kv_cache_commit(c, 100, &err) == ERR_OK);
    T_EQ_INT(kv_cache_stats(c).tokens, 100); /* held: nothing evicted yet */
    float votes[2 * 100] = {0};
    for (int p = 0; p < 100; p++) {
        votes[p] = p % 10 == 5 ? 1.0f + p : 0.01f;        /* layer 0: 15, 25, ..., 85 (8 of them) */
        votes[100 + p] = p >= 40 && p < 48 ? 2.0f : 0.0f; /* layer 1: 40..47 */
    }
    T_CHECK(kv_cache_release(c, votes, 100, 1, &err) == ERR_OK);
    int32_t pos[100];
    const int n0 = held_positions(c, 0, pos);
    T_EQ_INT(n0, 20);
    int want0[20] = {0, 1, 2, 3, 15, 25, 35, 45, 55, 65, 75, 85, 92, 93, 94, 95, 96, 97, 98, 99};
    /* 5 was voted too, but 4 anchors + 8 recent + 8 voted fill the 20: the 8 best are 15..85 */
    for (int i = 0; i < 20 && n0 == 20; i++) T_EQ_INT(pos[i], want0[i]);
    const int n1 = held_positions(c, 1, pos);
    T_EQ_INT(n1, 20);
    for (int i = 0; i < 8 && n1 == 20; i++) T_EQ_INT(pos[4 + i], 40 + i);
    /* a budget of entries below the anchors and recent window is refused */
    kv_cache_free(c);
    cfg.budget_tokens = 12;
    T_CHECK(kv_cache_new(shape, &cfg, &c, &err) == ERR_INVALID_ARG && strstr(err.msg, "entries"));
    printf("too small: %s\n", err.msg);
}

static octo_model *load(octo_client *c, const char *path, int policy, int keep, int self_draft) {
    octo_model_options mo = octo_model_options_defaults();
    mo.n_ctx = 512;
    mo.kv.policy = (octo_kv_policy)policy;
    mo.kv.budget_tokens = keep;
    mo.kv.hot_tokens = 32, mo.kv.warm_tokens = 128, mo.kv.anchor_tokens = 4, mo.kv.recent_tokens = 32;
    mo.auto_draft = self_draft ? OCTO_DRAFT_SELF : OCTO_DRAFT_NONE;
    mo.kv.compress = policy != OCTO_KV_POLICY_NONE; /* none: a plain cache, whose prefix a second prompt reuses */
    octo_model *m = octo_load_model(c, path, &mo);
    T_CHECKF(m != NULL, "%s", octo_last_error(c));
    return m;
}

/* prompt, then `more` tokens decoded one by one; the last logits into out */
static void read_and_decode(octo_model *m, const int32_t *tok, int n, int more, int lookahead, float compress,
                            float *out) {
    octo_generate_params gp = octo_generate_params_defaults();
    gp.prompt_lookahead = lookahead;
    gp.prompt_compress = compress;
    T_CHECKF(octo_eval_prompt(m, tok, n, &gp, out) == OCTO_OK, "%s", octo_model_error(m));
    for (int i = 0; i < more; i++) T_CHECK(octo_eval(m, tok + n + i, 1, out, OCTO_LOGITS_LAST) == OCTO_OK);
}

static void test_speckv(octo_client *c, const char *model, const int32_t *tok, int V) {
    float *a = malloc(sizeof(float) * V), *b = malloc(sizeof(float) * V);
    /* without a lookahead, speckv's votes are SnapKV's: the same cache, the same logits */
    octo_model *snap = load(c, model, OCTO_KV_POLICY_SNAPKV, 112, 0), *spec = load(c, model, OCTO_KV_POLICY_SPECKV, 112, 1);
    if (snap && spec) {
        read_and_decode(snap, tok, 448, 8, -1, 0.0f, a);
        read_and_decode(spec, tok, 448, 8, -1, 0.0f, b);
        T_CHECK(memcmp(a, b, sizeof(float) * V) == 0);
        T_EQ_INT(octo_model_stats(spec).kv_tokens_retained, 112);
        /* with it: the draft (the self-draft) writes what the context leaves room for: 64 */
        octo_reset(spec);
        read_and_decode(spec, tok, 448, 0, 0, 0.0f, b);
        const octo_stats s = octo_model_stats(spec);
        T_EQ_INT(s.prefill_speckv, 1);
        T_EQ_INT(s.prefill_lookahead_tokens, 64);
        T_EQ_INT(s.kv_tokens_retained, 112);
        T_EQ_INT(s.kv_tokens_kept_by_score, 112 - 4 - 32);
        T_CHECK(memcmp(a, b, sizeof(float) * V) != 0); /* other entries kept */
        /* SpecPC: the model reads ceil(0.3 x 448) = 135 tokens */
        octo_reset(spec);
        read_and_decode(spec, tok, 448, 0, 0, 0.3f, b);
        T_EQ_INT(octo_model_stats(spec).prompt_tokens_dropped, 448 - 135);
        T_EQ_INT(octo_n_past(spec), 135);
        /* a prompt of 20 tokens: its first 4 and last 32 are kept anyway, nothing is dropped */
        octo_reset(spec);
        read_and_decode(spec, tok, 20, 0, 0, 0.3f, b);
        T_EQ_INT(octo_model_stats(spec).prompt_tokens_dropped, 0);
        T_EQ_INT(octo_n_past(spec), 20);
    }
    octo_model_free(snap), octo_model_free(spec);
    free(a), free(b);
}

/* greedy text of prompt with SpecKV-PC, speculating or not */
static char *greedy(octo_model *m, const char *prompt, int spec, octo_stats *st) {
    octo_generate_params gp = octo_generate_params_defaults();
    gp.temperature = 0.0f, gp.max_tokens = 40, gp.spec = (octo_spec_mode)spec, gp.prompt_compress = 0.6f;
    octo_stream *s = octo_generate(m, prompt, &gp);
    T_CHECKF(s != NULL, "%s", octo_model_error(m));
    char *out = calloc(1, 4096);
    const char *p;
    while (s && (p = octo_stream_next(s))) strncat(out, p, 4095 - strlen(out));
    *st = octo_model_stats(m);
    octo_stream_free(s);
    return out;
}

/* SpecPC leaves a shorter prompt in a cache that then evicts nothing: speculation gives plain
 * decoding's text. (Under a budget that also evicts while decoding, plain decoding evicts after
 * each token and speculation after each pass, so the caches part: docs/kv-cache.md.) */
static void test_lossless(octo_client *c, const char *model, const char *text) {
    octo_model *m = load(c, model, OCTO_KV_POLICY_NONE, 0, 1);
    if (!m) return;
    octo_stats a, b;
    char *plain = greedy(m, text, OCTO_SPEC_NONE, &a), *fast = greedy(m, text, OCTO_SPEC_SELF, &b);
    T_CHECKF(!strcmp(plain, fast), "plain '%s' against speculative '%s'", plain, fast);
    T_CHECK(a.prompt_tokens_dropped > 0 && a.prompt_tokens_dropped == b.prompt_tokens_dropped);
    T_CHECK(b.spec_accepted > 0);
    /* the cache holds the compressed prompt and every generated token but the last, as plain decoding leaves it */
    T_EQ_INT(a.context_tokens, a.prompt_tokens - a.prompt_tokens_dropped + a.decode_tokens - 1);
    T_EQ_INT(b.context_tokens, b.prompt_tokens - b.prompt_tokens_dropped + b.decode_tokens - 1);
    printf("SpecPC, greedy: %d prompt tokens dropped, %d drafts accepted; the same %zu bytes of text\n",
           b.prompt_tokens_dropped, b.spec_accepted, strlen(plain));
    free(plain), free(fast);
    octo_model_free(m);
    /* SpecKV-PC with speculation: the prompt compressed, then scored, the cache within its budget */
    m = load(c, model, OCTO_KV_POLICY_SPECKV, 112, 1);
    if (!m) return;
    free(greedy(m, text, OCTO_SPEC_SELF, &b));
    T_CHECK(b.prefill_speckv && b.prompt_tokens_dropped > 0 && b.spec_accepted > 0 && b.kv_tokens_retained == 112);
    /* bad input */
    octo_generate_params gp = octo_generate_params_defaults();
    gp.prompt_compress = 1.5f;
    T_CHECK(octo_generate(m, "Once", &gp) == NULL && strstr(octo_model_error(m), "(0, 1]"));
    printf("ratio 1.5: %s\n", octo_model_error(m));
    gp.prompt_compress = 0.5f, gp.prompt_lookahead = 300;
    T_CHECK(octo_generate(m, "Once", &gp) == NULL && strstr(octo_model_error(m), "lookahead"));
    octo_model_free(m);
    octo_model *nod = load(c, model, OCTO_KV_POLICY_DEFAULT, 0, 0);
    gp = octo_generate_params_defaults();
    gp.prompt_compress = 0.5f;
    T_CHECK(nod && octo_generate(nod, "Once", &gp) == NULL && strstr(octo_model_error(nod), "draft"));
    printf("no draft: %s\n", nod ? octo_model_error(nod) : "?");
    octo_model_free(nod);
}

int main(void) {
    test_hold_release();
    const char *data = tu_data_dir();
    if (!data) {
        printf("note: no shared data folder; the stories260K checks were not run\n");
        T_DONE();
    }
    char model[1024], textp[1024];
    snprintf(model, sizeof model, "%s/models/stories260K.gguf", data);
    snprintf(textp, sizeof textp, "%s/text/tinystories-valid-head.txt", data);
    size_t len = 0;
    char *text = (char *)tu_read_file(textp, &len);
    octo_client *c = octo_client_new(NULL);
    octo_model *m = text ? load(c, model, OCTO_KV_POLICY_NONE, 0, 0) : NULL;
    T_CHECK(m != NULL);
    int32_t *tok = malloc(sizeof(int32_t) * 600);
    const int n = m ? octo_tokenize(m, text, 4000, 1, 0, tok, 600) : 0;
    const int V = m ? octo_model_info_get(m).n_vocab : 0;
    octo_model_free(m);
    T_CHECK(n >= 460);
    if (n >= 460) {
        test_speckv(c, model, tok, V);
        text[840] = '\0'; /* about 430 tokens: a prompt longer than the 112 entries kept, 40 more generated */
        test_lossless(c, model, text);
    }
    free(tok), free(text);
    octo_client_free(c);
    T_DONE();
}
