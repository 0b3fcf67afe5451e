/*
 * test_spec — speculative decoding:
 *
 *   - the n-gram proposer proposes what followed the longest earlier match
 *     (hand-made sequences), and nothing without one;
 *   - lossless: with greedy sampling, n-gram speculation (adaptive draft
 *     length, and fixed k = 1, 3, 8) produces exactly the token ids of plain
 *     decoding, on stories260K for 60 prompts from the TinyStories text
 *     (half of them input-grounded: a story, then its own first words again),
 *     and on synthetic dense and MoE models; drafts must actually be
 *     accepted somewhere, or the test proves nothing;
 *   - the same with a draft model (a synthetic Q8_0 target, its Q4_0 copy as the draft);
 *   - sampling with an explicit request is refused with a clear error, and so
 *     are a draft with another vocabulary, one larger than the target, and a
 *     corrupt draft file.
 */
#include <string.h>

#include "octo.h"
#include "spec/ngram.h"
#include "t.h"
#include "util.h"

static void test_ngram(void) {
    spec_ngram *g;
    err_t err = {0};
    T_CHECK(ngram_new(64, &g, &err) == ERR_OK);
    const int32_t a[] = {5, 6, 7, 8, 9, 1, 2, 3, 5, 6, 7};
    T_CHECK(ngram_push(g, a, 11, &err) == ERR_OK);
    int32_t out[8];
    /* suffix 5 6 7 matched at the start: 8 9 1 2 follow */
    int k = ngram_propose(g, 4, out);
    T_EQ_INT(k, 4);
    T_CHECK(k == 4 && out[0] == 8 && out[1] == 9 && out[2] == 1 && out[3] == 2);
    /* the continuation stops at the end of the context */
    k = ngram_propose(g, 10, out);
    T_EQ_INT(k, 8); /* positions 3 .. 10: 8 9 1 2 3 5 6 7 */
    /* no earlier occurrence of the last token: nothing */
    const int32_t b[] = {42};
    T_CHECK(ngram_push(g, b, 1, &err) == ERR_OK);
    T_EQ_INT(ngram_propose(g, 4, out), 0);
    /* then 7: "42 7" never occurred, "7" last did at position 10, followed by 42 */
    const int32_t c7[] = {7};
    T_CHECK(ngram_push(g, c7, 1, &err) == ERR_OK);
    k = ngram_propose(g, 3, out);
    T_CHECK(k >= 1 && out[0] == 42);
    ngram_free(g);
}

typedef struct {
    int32_t *ids;
    int n;
} gen_out;

static gen_out generate(octo_model *m, const char *prompt, octo_spec_mode spec, int k, int n_tokens, octo_stats *st) {
    octo_generate_params p = octo_generate_params_defaults();
    p.temperature = 0.0f;
    p.max_tokens = n_tokens;
    p.spec = spec;
    p.spec_k = k;
    gen_out o = {NULL, 0};
    octo_stream *s = octo_generate(m, prompt, &p);
    if (!s) {
        T_CHECKF(0, "generate: %s", octo_model_error(m));
        return o;
    }
    while (octo_stream_next(s)) {
    }
    T_CHECKF(octo_stream_status(s) == OCTO_OK, "stream: %s", octo_stream_error(s));
    const int32_t *ids;
    o.n = octo_stream_tokens(s, &ids);
    o.ids = malloc(sizeof(int32_t) * (size_t)(o.n ? o.n : 1));
    memcpy(o.ids, ids, sizeof(int32_t) * (size_t)o.n);
    octo_stream_free(s);
    if (st) *st = octo_model_stats(m);
    return o;
}

/* Generate from each prompt with and without speculation; count mismatches.
 * draft: a draft model's path (speculation by draft) or NULL (n-gram). */
static void compare_on(const char *label, const char *path, const char *draft, char **prompts, int n_prompts,
                       int n_tokens) {
    octo_client *c = octo_client_new(NULL);
    octo_model_options mo = octo_model_options_defaults();
    mo.draft_model = draft;
    octo_model *m = octo_load_model(c, path, &mo);
    if (!m) {
        T_CHECKF(0, "[%s] load: %s", label, octo_last_error(c));
        octo_client_free(c);
        return;
    }
    const int ks[] = {0, 1, 3, 8};
    int differ = 0, runs = 0;
    long proposed = 0, accepted = 0, steps = 0, tokens = 0;
    for (int i = 0; i < n_prompts; i++) {
        gen_out ref = generate(m, prompts[i], OCTO_SPEC_NONE, 0, n_tokens, NULL);
        for (size_t kk = 0; kk < sizeof ks / sizeof *ks; kk++) {
            octo_stats st;
            gen_out o = generate(m, prompts[i], draft ? OCTO_SPEC_DRAFT : OCTO_SPEC_NGRAM, ks[kk], n_tokens, &st);
            T_CHECK(!strcmp(st.spec_proposer, draft ? "draft" : "ngram"));
            runs++;
            if (o.n != ref.n || memcmp(o.ids, ref.ids, sizeof(int32_t) * (size_t)o.n)) {
                differ++;
                if (differ <= 3) fprintf(stderr, "[%s] prompt %d, k %d: %d vs %d tokens differ\n", label, i, ks[kk], o.n, ref.n);
            }
            proposed += st.spec_proposed;
            accepted += st.spec_accepted;
            steps += st.spec_steps;
            tokens += o.n;
            free(o.ids);
        }
        free(ref.ids);
    }
    printf("[%s] %d prompts x 4 draft settings: %d of %d generations differ from plain decoding; "
           "%ld drafts proposed, %ld accepted (%.1f %%), %ld tokens in %ld verify passes\n",
           label, n_prompts, differ, runs, proposed, accepted, proposed ? 100.0 * accepted / proposed : 0.0, tokens, steps);
    T_EQ_INT(differ, 0);
    T_CHECKF(accepted > 0, "[%s] no draft was ever accepted: the comparison proves nothing", label);
    /* sampling with an explicit request is an error, not a silent change of output */
    octo_generate_params p = octo_generate_params_defaults();
    p.spec = draft ? OCTO_SPEC_DRAFT : OCTO_SPEC_NGRAM;
    octo_stream *s = octo_generate(m, prompts[0], &p);
    T_CHECK(s == NULL && strstr(octo_model_error(m), "greedy") != NULL);
    octo_stream_free(s);
    octo_model_free(m);
    octo_client_free(c);
}

/* 60 prompts from the TinyStories text: 30 story openings, and 30 input-grounded
 * ones (a whole story, then its first words again) */
static int make_prompts(const char *text_path, char **prompts, int max) {
    size_t len;
    unsigned char *text = tu_read_file(text_path, &len);
    if (!text) return 0;
    int n = 0;
    char *line = (char *)text, *end = (char *)text + len;
    while (n + 2 <= max && line < end) {
        char *nl = memchr(line, '\n', (size_t)(end - line));
        size_t l = nl ? (size_t)(nl - line) : (size_t)(end - line);
        if (l > 120 && l < 700) {
            prompts[n] = strndup(line, 40); /* an opening */
            char *g = malloc(l + 64);
            memcpy(g, line, l);
            memcpy(g + l, " ", 1);
            memcpy(g + l + 1, line, 30);
            g[l + 31] = 0;
            prompts[n + 1] = g; /* grounded: the story, then its start again */
            n += 2;
        }
        line = nl ? nl + 1 : end;
    }
    free(text);
    return n;
}

static void synth_model(const char *path, int experts, unsigned type) {
    synth_opts o = synth_defaults();
    o.type = type;
    o.n_embd = 128, o.n_head = 4, o.n_head_kv = 2, o.n_ff = 256, o.n_vocab = 320, o.n_ctx = 512, o.seed = 11;
    if (experts < 0) o.type = 2 /* Q4_0 */, experts = 0; /* a draft: the same weights at lower precision */
    if (experts > 100) o.n_vocab = 330, experts = 0; /* a draft with another vocabulary */
    o.n_expert = experts, o.n_expert_used = experts ? 2 : 0;
    err_t err = {0};
    T_CHECKF(synth_write(&o, path, &err) == ERR_OK, "%s", err.msg);
}

int main(void) {
    test_ngram();
    /* synthetic models: random weights repeat themselves a lot under greedy decoding */
    char path[512];
    char *sp[] = {"hello hello hello", "the cat sat on the mat and the cat", "a b c d a b c d a b", "xyz"};
    char dpath[512], bad[512];
    tu_tmp_path(path, sizeof path, "spec-dense.gguf");
    tu_tmp_path(dpath, sizeof dpath, "spec-draft.gguf");
    tu_tmp_path(bad, sizeof bad, "spec-badvocab.gguf");
    synth_model(path, 0, 8 /* Q8_0 */);
    synth_model(dpath, -1, 8);
    synth_model(bad, 1000, 8);
    compare_on("synthetic dense Q8_0, n-gram", path, NULL, sp, 4, 48);
    compare_on("synthetic dense Q8_0, Q4_0 draft", path, dpath, sp, 4, 48);
    /* bad drafts: another vocabulary, a draft larger than the target, a file that is not a model */
    {
        octo_client *c = octo_client_new(NULL);
        octo_model_options mo = octo_model_options_defaults();
        mo.draft_model = bad;
        T_CHECK(octo_load_model(c, path, &mo) == NULL && strstr(octo_last_error(c), "vocabulary"));
        printf("different vocabulary: %s\n", octo_last_error(c));
        mo.draft_model = path;
        T_CHECK(octo_load_model(c, dpath, &mo) == NULL && strstr(octo_last_error(c), "larger"));
        printf("draft larger than the model: %s\n", octo_last_error(c));
        char junk[512];
        tu_tmp_path(junk, sizeof junk, "spec-junk.gguf");
        T_CHECK(tu_write_file(junk, "GGUF\3\0\0\0garbage", 15));
        mo.draft_model = junk;
        T_CHECK(octo_load_model(c, path, &mo) == NULL);
        printf("corrupt draft: %s\n", octo_last_error(c));
        remove(junk);
        octo_client_free(c);
    }
    /* no draft given: NAME.draft.gguf beside NAME.gguf is found and used by
     * OCTO_SPEC_AUTO; one that cannot serve is passed over, with the reason */
    {
        char beside[512];
        tu_tmp_path(beside, sizeof beside, "spec-dense.draft.gguf");
        octo_client *c = octo_client_new(NULL);
        const char *cases[] = {"none", "a draft", "another vocabulary", "a corrupt file"};
        const char *want[] = {"n-gram: no draft given, none at", "(found beside the model)", "vocabulary",
                              "was not used"};
        for (int k = 0; k < 4; k++) {
            remove(beside);
            if (k == 1) synth_model(beside, -1, 8);
            if (k == 2) synth_model(beside, 1000, 8);
            if (k == 3) T_CHECK(tu_write_file(beside, "GGUF\3\0\0\0garbage", 15));
            octo_model *m = octo_load_model(c, path, NULL);
            T_CHECKF(m != NULL, "[%s beside] the load failed: %s", cases[k], octo_last_error(c));
            if (!m) continue;
            const octo_model_info in = octo_model_info_get(m);
            printf("%s beside the model: %s\n", cases[k], in.speculation);
            T_CHECKF(strstr(in.speculation, want[k]) != NULL, "[%s beside] '%s'", cases[k], in.speculation);
            octo_stats st;
            free(generate(m, sp[1], OCTO_SPEC_AUTO, 0, 24, &st).ids);
            T_CHECKF(!strcmp(st.spec_proposer, k == 1 ? "draft" : "ngram"), "[%s beside] AUTO used %s", cases[k],
                     st.spec_proposer);
            octo_model_free(m);
        }
        remove(beside);
        octo_client_free(c);
    }
    remove(path), remove(dpath), remove(bad);
    tu_tmp_path(path, sizeof path, "spec-moe.gguf");
    synth_model(path, 4, 8 /* Q8_0 */);
    compare_on("synthetic MoE Q8_0, n-gram", path, NULL, sp, 4, 48);
    remove(path);

    const char *d = tu_data_dir();
    if (!d) T_SKIP("no shared data folder: the trained-model half of the test needs it");
    char model[512], text[512];
    snprintf(model, sizeof model, "%s/models/stories260K.gguf", d);
    snprintf(text, sizeof text, "%s/text/tinystories-valid-head.txt", d);
    char *prompts[60];
    const int n = make_prompts(text, prompts, 60);
    T_CHECKF(n == 60, "only %d prompts from %s", n, text);
    compare_on("stories260K, n-gram", model, NULL, prompts, n, 64);
    for (int i = 0; i < n; i++) free(prompts[i]);
    T_DONE();
}
