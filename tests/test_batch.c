/*
 * test_batch — continuous batching: several sessions in one forward pass.
 *
 * Forward level (session_eval_batch over model/forward.h's forward_batch):
 * sessions at different positions, each with its own cache, step together;
 * every session's logits must equal, bit for bit, the same session stepped
 * alone (a twin fed the same tokens), on dense, biased, sliding-window,
 * soft-capped and MoE models, quantized and F32, with a plain cache and
 * with a compressed, evicting one, a prompt chunk beside decode rows
 * included. A failed batch leaves every session as it was, and the twins
 * still agree after it. Latent attention refuses batches of more than one.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/quant.h"
#include "model/model.h"
#include "model/synth.h"
#include "model/tokenizer.h"
#include "runtime/batch.h"
#include "runtime/generate.h"
#include "runtime/session.h"
#include "speculative/proposer.h"
#include "t.h"
#include "util.h"

#define MAX_K 8

/* A model of o, loaded (NULL with a failed check when it cannot be made). */
static model *make_model(const synth_opts *o, const char *name) {
    char path[512];
    tu_tmp_path(path, sizeof path, name);
    err_t err = {0};
    model *m = NULL;
    if (synth_write(o, path, &err) || model_load(path, &m, &err)) T_CHECKF(0, "%s: %s", name, err.msg);
    remove(path);
    return m;
}

/* Deterministic tokens of prompt i. */
static void prompt_of(int i, int32_t *tok, int n, int V) {
    uint32_t s = 2654435761u * (uint32_t)(i + 1);
    for (int t = 0; t < n; t++) {
        s = s * 1664525u + 1013904223u;
        tok[t] = (int32_t)((s >> 8) % (uint32_t)V);
    }
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

typedef struct {
    session *a[MAX_K], *b[MAX_K]; /* batched, and their twins stepped alone */
    float *la[MAX_K], *lb[MAX_K];
    int32_t next[MAX_K];
    int K, V;
} twins;

static void twins_free(twins *t) {
    for (int i = 0; i < t->K; i++) {
        free(t->la[i]);
        free(t->lb[i]);
    }
    for (int i = t->K - 1; i >= 0; i--) { /* the first owns the pool */
        session_free(t->a[i]);
        session_free(t->b[i]);
    }
}

/* K pairs of sessions on one pool, each pair prefilled with its own prompt
 * (3 + 9 i tokens: every session at a different position). */
static bool twins_new(twins *t, const model *m, const kv_config *kv, int K) {
    memset(t, 0, sizeof *t);
    t->K = K;
    t->V = m->hp.n_vocab;
    err_t err = {0};
    bool ok = session_new_kv(m, 256, kv, 2, &t->a[0], &err) == ERR_OK;
    for (int i = 0; ok && i < K; i++) {
        ok = (i == 0 || session_new_shared(m, 256, kv, t->a[0]->pool, &t->a[i], &err) == ERR_OK) &&
             session_new_shared(m, 256, kv, t->a[0]->pool, &t->b[i], &err) == ERR_OK;
        t->la[i] = malloc(sizeof(float) * (size_t)t->V);
        t->lb[i] = malloc(sizeof(float) * (size_t)t->V);
        ok = ok && t->la[i] && t->lb[i];
        int32_t p[96];
        const int n = 3 + 9 * i;
        prompt_of(i, p, n, t->V);
        ok = ok && session_eval(t->a[i], p, n, false, t->la[i], &err) == ERR_OK &&
             session_eval(t->b[i], p, n, false, t->lb[i], &err) == ERR_OK;
        if (ok) t->next[i] = argmax(t->lb[i], t->V);
    }
    T_CHECKF(ok, "twins: %s", err.msg);
    return ok;
}

/* One step: every pair's next token (session `chunk`'s with 4 more tokens
 * after it, a prompt chunk beside decode rows; -1: none), batched for a[],
 * alone for b[]; then the logits and the sessions must agree exactly. */
static bool step(twins *t, int chunk, const char *what, int s) {
    session_part parts[MAX_K];
    int32_t toks[MAX_K][5];
    err_t err = {0};
    for (int i = 0; i < t->K; i++) {
        toks[i][0] = t->next[i];
        const int n = i == chunk ? 5 : 1;
        for (int j = 1; j < n; j++) toks[i][j] = (t->next[i] + 17 * j) % t->V;
        parts[i] = (session_part){.s = t->a[i], .tokens = toks[i], .n = n, .logits = t->la[i]};
    }
    if (session_eval_batch(parts, t->K, &err)) {
        T_CHECKF(0, "[%s] step %d: session_eval_batch: %s", what, s, err.msg);
        return false;
    }
    bool same = true;
    for (int i = 0; i < t->K; i++) {
        if (session_eval(t->b[i], toks[i], parts[i].n, false, t->lb[i], &err)) {
            T_CHECKF(0, "[%s] step %d: session_eval: %s", what, s, err.msg);
            return false;
        }
        same = same && memcmp(t->la[i], t->lb[i], sizeof(float) * (size_t)t->V) == 0 &&
               t->a[i]->n_past == t->b[i]->n_past;
        t->next[i] = argmax(t->lb[i], t->V);
    }
    T_CHECKF(same, "[%s] step %d: a session's logits batched differ from alone", what, s);
    return same;
}

/* K sessions, 6 steps, a prompt chunk in the second; the logits of the
 * last step must differ between sessions (the comparison can fail). */
static void check_model(const model *m, const kv_config *kv, int K, const char *what) {
    twins t;
    if (!twins_new(&t, m, kv, K)) {
        twins_free(&t);
        return;
    }
    bool ok = true;
    for (int s = 0; s < 6 && ok; s++) ok = step(&t, s == 1 ? K - 1 : -1, what, s);
    if (ok && K > 1)
        T_CHECKF(memcmp(t.la[0], t.la[1], sizeof(float) * (size_t)t.V) != 0, "[%s] two sessions' logits are equal",
                 what);
    printf("[%s] %d sessions, positions %d .. %d: batched == alone over 6 steps\n", what, K, t.a[0]->n_past,
           t.a[K - 1]->n_past);
    twins_free(&t);
}

static synth_opts small(const char *arch, uint32_t type, uint64_t seed) {
    synth_opts o = synth_defaults();
    o.arch = arch;
    o.type = type;
    o.weight_std = 0.08f;
    o.seed = seed;
    o.n_ctx = 256;
    return o;
}

/* A small F32 llama and its tokenizer (NULL with a failed check when either cannot be made). */
static model *make_f32_with_tokenizer(uint64_t seed, const char *name, tokenizer **tok) {
    const synth_opts o = small("llama", QT_F32, seed);
    model *m = make_model(&o, name);
    err_t err = {0};
    if (m && tokenizer_load(m->gguf, tok, &err)) {
        T_CHECKF(0, "tokenizer: %s", err.msg);
        model_free(m);
        return NULL;
    }
    return m;
}

static void test_models(void) {
    const kv_config plain = kv_config_plain(QT_F32);
    struct {
        const char *name;
        synth_opts o;
        int K;
    } cases[5];
    cases[0].name = "llama Q4_0, GQA 4/2";
    cases[0].o = small("llama", QT_Q4_0, 11);
    cases[0].K = 8;
    cases[1].name = "qwen2 Q8_0, biases";
    cases[1].o = small("qwen2", QT_Q8_0, 12);
    cases[1].K = 4;
    cases[2].name = "gemma2 F32, window 8, soft-caps";
    cases[2].o = small("gemma2", QT_F32, 13);
    cases[2].o.swa_window = 8;
    cases[2].K = 4;
    cases[3].name = "mixtral-style MoE Q4_0, 4 experts, 2 used";
    cases[3].o = small("llama", QT_Q4_0, 14);
    cases[3].o.n_expert = 4;
    cases[3].o.n_expert_used = 2;
    cases[3].K = 4;
    cases[4].name = "llama F16";
    cases[4].o = small("llama", QT_F16, 15);
    cases[4].K = 2;
    for (int c = 0; c < 5; c++) {
        model *m = make_model(&cases[c].o, "batch.gguf");
        if (m) check_model(m, &plain, cases[c].K, cases[c].name);
        model_free(m);
    }
}

/* Each session keeps its own policy and budget: a compressed cache that
 * evicts (a budget of 24 entries per layer) batched with plain ones would
 * not equal alone if the batch mixed their views or their scores. */
static void test_compressed(void) {
    const synth_opts o = small("llama", QT_Q4_0, 21);
    model *m = make_model(&o, "batch-kv.gguf");
    if (!m) return;
    kv_config kv = kv_config_default();
    kv.hot_tokens = 16;
    kv.warm_tokens = 16;
    kv.anchor_tokens = 4;
    kv.recent_tokens = 8;
    kv.budget_tokens = 24;
    check_model(m, &kv, 4, "tiered cache, MorphKV, 24 entries a layer");
    twins t;
    if (twins_new(&t, m, &kv, 3)) {
        bool ok = true;
        for (int s = 0; s < 12 && ok; s++) ok = step(&t, -1, "evicting", s);
        T_CHECKF(kv_cache_stats(t.a[2]->kv).tokens_evicted > 0, "the budget evicted nothing");
    }
    twins_free(&t);
    model_free(m);
}

/* Verify passes in a batch: session 0 verifies a line of 4 tokens, session 1
 * a tree of 5 (two branches), both tentative, beside two decode rows; every
 * row's logits equal the same pass alone (session_eval_tentative,
 * session_eval_tree), and after each keeps a leading run, the next step still agrees. */
static void test_verify_in_batch(void) {
    const synth_opts o = small("llama", QT_Q4_0, 51);
    model *m = make_model(&o, "batch-verify.gguf");
    if (!m) return;
    const kv_config plain = kv_config_plain(QT_F32);
    twins t = {0};
    const int V = m->hp.n_vocab;
    float *va = malloc(sizeof(float) * 10 * (size_t)V), *vb = malloc(sizeof(float) * 10 * (size_t)V);
    if (va && vb && twins_new(&t, m, &plain, 4)) {
        err_t err = {0};
        int32_t line[4] = {t.next[0], 7, 9, 11}, tree[5] = {t.next[1], 20, 21, 22, 23};
        const uint64_t anc[5] = {1, 3, 7, 3 | 8, 1 | 16}; /* 0 -> 1 -> 2, 1 -> 3, 0 -> 4 */
        const int32_t rows[3] = {0, 1, 4};
        session_part parts[4] = {
            {.s = t.a[0], .tokens = line, .n = 4, .logits = va, .tentative = true, .n_out = 4},
            {.s = t.a[1], .tokens = tree, .n = 5, .logits = va + 4 * (size_t)V, .tentative = true, .anc = anc,
             .out_rows = rows, .n_out = 3},
            {.s = t.a[2], .tokens = &t.next[2], .n = 1, .logits = t.la[2]},
            {.s = t.a[3], .tokens = &t.next[3], .n = 1, .logits = t.la[3]}};
        T_EQ_INT(session_eval_batch(parts, 4, &err), ERR_OK);
        T_EQ_INT(t.a[0]->n_past, t.b[0]->n_past); /* tentative: nothing consumed yet */
        T_EQ_INT(session_eval_tentative(t.b[0], line, 4, vb, &err), ERR_OK);
        T_EQ_INT(session_eval_tree(t.b[1], tree, 5, anc, rows, 3, vb + 4 * (size_t)V, &err), ERR_OK);
        T_EQ_INT(session_eval(t.b[2], &t.next[2], 1, false, t.lb[2], &err), ERR_OK);
        T_EQ_INT(session_eval(t.b[3], &t.next[3], 1, false, t.lb[3], &err), ERR_OK);
        T_CHECK(memcmp(va, vb, sizeof(float) * 7 * (size_t)V) == 0);
        T_CHECK(memcmp(t.la[2], t.lb[2], sizeof(float) * (size_t)V) == 0 &&
                memcmp(t.la[3], t.lb[3], sizeof(float) * (size_t)V) == 0);
        const int path[2] = {0, 4}; /* session 1 keeps the branch off the line */
        T_EQ_INT(session_accept(t.a[0], line, 4, 3, &err), ERR_OK);
        T_EQ_INT(session_accept(t.b[0], line, 4, 3, &err), ERR_OK);
        T_EQ_INT(session_accept_path(t.a[1], tree, 5, path, 2, &err), ERR_OK);
        T_EQ_INT(session_accept_path(t.b[1], tree, 5, path, 2, &err), ERR_OK);
        for (int i = 0; i < 2; i++) t.next[i] = argmax(vb + (size_t)(i ? 6 : 2) * V, V);
        for (int i = 2; i < 4; i++) t.next[i] = argmax(t.lb[i], V);
        bool ok = true;
        for (int s = 0; s < 3 && ok; s++) ok = step(&t, -1, "after verify passes", s);
    }
    twins_free(&t);
    free(va);
    free(vb);
    model_free(m);
}

/* Each generation's tokens: 48 greedy ones after its prompt, alone (plain
 * decoding, its own pool) into ids[i], n[i]. */
static void generate_alone(const model *m, const tokenizer *tok, const kv_config *kv, int32_t (*prompts)[72],
                           const int *n_prompt, int32_t (*ids)[48], int *n) {
    for (int i = 0; i < 4; i++) {
        session *s = NULL;
        generation *g = NULL;
        err_t err = {0};
        gen_params gp = {.max_tokens = 48, .sampling = sampler_defaults()};
        gp.sampling.temperature = 0.0f;
        if (session_new_kv(m, 128, kv, 2, &s, &err) || gen_start(s, tok, prompts[i], n_prompt[i], &gp, &g, &err))
            T_CHECKF(0, "alone: %s", err.msg);
        while (g && gen_next(g)) {}
        const int32_t *t = g ? gen_tokens(g, &n[i]) : NULL;
        if (t) memcpy(ids[i], t, sizeof(int32_t) * (size_t)n[i]);
        gen_free(g);
        session_free(s);
    }
}

/* K generations stepped by the scheduler itself (batch_step, then gen_next
 * for those it made ready), greedy with the n-gram proposer, the step's
 * costs forgotten before each step so that every speculating generation
 * verifies its drafts in the batch; each one's tokens must equal alone's. */
static void generate_together(const model *m, const tokenizer *tok, const kv_config *kv, int32_t (*prompts)[72],
                              const int *n_prompt, int32_t (*alone)[48], const int *n_alone, int K,
                              const char *what) {
    session *s[4] = {NULL};
    generation *g[4] = {NULL};
    bool done[4] = {false};
    batch_state b;
    batch_init(&b);
    err_t err = {0};
    bool ok = true;
    gen_params gp = {.max_tokens = 48, .sampling = sampler_defaults(), .proposer = &proposer_ngram};
    gp.sampling.temperature = 0.0f;
    for (int i = 0; i < K && ok; i++) /* the last one joins once the others decode */
        ok = (i ? session_new_shared(m, 128, kv, s[0]->pool, &s[i], &err) : session_new_kv(m, 128, kv, 2, &s[i], &err)) ==
                 ERR_OK &&
             (i == K - 1 || gen_start(s[i], tok, prompts[i], n_prompt[i], &gp, &g[i], &err) == ERR_OK);
    T_CHECKF(ok, "together: %s", err.msg);
    for (int live = ok ? K : 0, step = 0; live > 0; step++) {
        if (step == 4 && gen_start(s[K - 1], tok, prompts[K - 1], n_prompt[K - 1], &gp, &g[K - 1], &err))
            T_CHECKF(0, "joining: %s", err.msg);
        const int n = g[K - 1] ? K : K - 1;
        b.decode_ms = b.row_ms = 0.0; /* costs unknown: a speculating generation verifies in the batch */
        bool served;
        const int ran = n > 1 ? batch_step(&b, g, n, NULL, &served) : 0;
        for (int i = 0; i < n; i++)
            if (!done[i] && (!ran || gen_ready(g[i])) && !gen_next(g[i])) done[i] = true, live--;
    }
    for (int i = 0; ok && i < K; i++) {
        int n = 0;
        const int32_t *ids = gen_tokens(g[i], &n);
        T_CHECKF(n == n_alone[i] && !memcmp(ids, alone[i], sizeof(int32_t) * (size_t)n),
                 "[%s] 1 + %d generations, the %d-th: %d tokens, %d alone", what, K - 1, i, n, n_alone[i]);
    }
    printf("[%s, %d generations stepped by batch_step] %lld shared steps, %lld prompt tokens in them, %lld verify "
           "passes\n",
           what, K, (long long)b.steps, (long long)b.prompt_rows, (long long)b.verify_passes);
    T_CHECK(b.steps > 0 && b.verify_passes > 0);
    for (int i = K - 1; i >= 0; i--) {
        gen_free(g[i]);
        session_free(s[i]);
    }
}

/* The cut of a prompt a shared step may take: on a plain cache any within
 * the budget; on a tiered one only the chunk it has alone (its entries age
 * as each chunk is committed), whole or not at all. */
static void test_prompt_cuts(void) {
    tokenizer *tok = NULL;
    model *m = make_f32_with_tokenizer(71, "batch-cuts.gguf", &tok);
    err_t err = {0};
    if (!m) return;
    int32_t prompt[300];
    for (int t = 0; t < 300; t++) prompt[t] = 1 + t % 200;
    const kv_config kvs[2] = {kv_config_plain(QT_F32), kv_config_default()};
    for (int c = 0; c < 2; c++) {
        session *s = NULL;
        generation *g = NULL;
        gen_params gp = {.max_tokens = 4, .sampling = sampler_defaults()};
        gen_rows r;
        if (session_new_kv(m, 512, &kvs[c], 1, &s, &err) || gen_start(s, tok, prompt, 300, &gp, &g, &err)) {
            T_CHECKF(0, "cuts: %s", err.msg);
        } else if (c == 0) { /* plain: the budget's cut */
            T_CHECK(gen_prompt_waits(g) && gen_want_rows(g, 16, 0, &r) && r.prompt && r.n == 16);
            T_CHECK(gen_want_rows(g, 1000, 0, &r) && r.n == 300);
        } else { /* tiered: 256, then the 44 left, never less */
            T_CHECK(gen_prompt_waits(g) && !gen_want_rows(g, 255, 0, &r));
            T_CHECK(gen_want_rows(g, 1000, 0, &r) && r.n == 256);
            gen_rows_done(g, &r, NULL, 1.0, 1); /* as if a step had run it (the rows are not in the cache) */
            T_CHECK(!gen_want_rows(g, 43, 0, &r) && gen_want_rows(g, 44, 0, &r) && r.n == 44);
        }
        gen_free(g);
        session_free(s);
    }
    tokenizer_free(tok);
    model_free(m);
}

/* A prompt's turn (b.prompt_turn) takes it once: a turn step whose budget
 * would also fit the same prompt must not put the session in the pass twice
 * (the pass fails, and run one session at a time it read the prompt twice:
 * a session joining while another decoded came out different from alone in
 * 1 run of 10 under musl). */
static void test_prompt_turn(void) {
    tokenizer *tok = NULL;
    model *m = make_f32_with_tokenizer(81, "batch-turn.gguf", &tok);
    err_t err = {0};
    if (!m) return;
    const kv_config kv = kv_config_default(); /* tiered: the prompt goes in the cut it has alone */
    int32_t pa[5] = {1, 40, 41, 42, 43}, pb[30];
    for (int t = 0; t < 30; t++) pb[t] = 1 + (t * 5) % 90;
    session *s[2] = {NULL, NULL}, *alone = NULL;
    generation *g[2] = {NULL, NULL}, *ga = NULL;
    gen_params gp = {.max_tokens = 8, .sampling = sampler_defaults()};
    gp.sampling.temperature = 0.0f;
    bool ok = session_new_kv(m, 128, &kv, 2, &s[0], &err) == ERR_OK &&
              session_new_shared(m, 128, &kv, s[0]->pool, &s[1], &err) == ERR_OK &&
              session_new_kv(m, 128, &kv, 2, &alone, &err) == ERR_OK &&
              gen_start(s[0], tok, pa, 5, &gp, &g[0], &err) == ERR_OK && gen_next(g[0]) != NULL &&
              gen_start(s[1], tok, pb, 30, &gp, &g[1], &err) == ERR_OK &&
              gen_start(alone, tok, pb, 30, &gp, &ga, &err) == ERR_OK;
    T_CHECKF(ok, "turn: %s", err.msg);
    if (ok) {
        batch_state b;
        batch_init(&b);
        b.prompt_turn = true; /* the prompt's turn, and a budget that would fit it again */
        b.decode_ms = 1.0;
        b.row_ms = 0.001;
        bool served;
        T_EQ_INT(batch_step(&b, g, 2, g[1], &served), 2);
        T_CHECK(served && b.retried == 0 && b.prompt_rows == 30);
        int n1 = 0, n2 = 0;
        while (gen_next(g[1])) {}
        while (gen_next(ga)) {}
        const int32_t *t1 = gen_tokens(g[1], &n1), *t2 = gen_tokens(ga, &n2);
        T_CHECK(n1 == n2 && n1 > 0 && !memcmp(t1, t2, sizeof(int32_t) * (size_t)n1));
    }
    gen_free(g[0]);
    gen_free(g[1]);
    gen_free(ga);
    session_free(s[1]);
    session_free(s[0]);
    session_free(alone);
    tokenizer_free(tok);
    model_free(m);
}

/* The scheduler with n-gram drafts verified in the batch; the last
 * generation joins after 4 steps, its 70-token prompt read beside the
 * others' decoding. On a plain cache it goes in budgeted chunks; on a tiered
 * one (8 entries at F16, then Q8_0, then Q4_1) in the cut it has alone,
 * taking turns with the decode steps. */
static void test_generations(void) {
    tokenizer *tok = NULL;
    model *m = make_f32_with_tokenizer(61, "batch-gen.gguf", &tok);
    if (!m) return;
    int32_t prompts[4][72] = {{1, 40, 41, 42, 43, 40, 41, 42, 43}, {1, 50, 51, 50, 51, 50, 51, 50, 51},
                              {1, 60, 61, 62, 60, 61, 62, 60, 61}, {1}};
    int n_prompt[4] = {9, 9, 9, 70};
    for (int t = 1; t < 70; t++) prompts[3][t] = 80 + (t * 7) % 23;
    kv_config kvs[2] = {kv_config_plain(QT_F32), kv_config_default()};
    kvs[1].hot_tokens = 8;
    kvs[1].warm_tokens = 16;
    kvs[1].anchor_tokens = 4;
    kvs[1].recent_tokens = 8;
    for (int c = 0; c < 2; c++) {
        int32_t alone[4][48];
        int n_alone[4];
        generate_alone(m, tok, &kvs[c], prompts, n_prompt, alone, n_alone);
        for (int K = 2; K <= 4; K += 2)
            generate_together(m, tok, &kvs[c], prompts, n_prompt, alone, n_alone, K, c ? "tiered" : "plain");
    }
    tokenizer_free(tok);
    model_free(m);
}

/* A batch that fails leaves every session as it was. */
static void test_failure(void) {
    const synth_opts o = small("llama", QT_Q4_0, 31);
    model *m = make_model(&o, "batch-fail.gguf");
    if (!m) return;
    const kv_config plain = kv_config_plain(QT_F32);
    twins t;
    if (twins_new(&t, m, &plain, 3)) {
        err_t err = {0};
        int past[3];
        for (int i = 0; i < 3; i++) past[i] = t.a[i]->n_past;
        int32_t one = 5, bad = t.V; /* outside the vocabulary */
        session_part parts[3] = {{.s = t.a[0], .tokens = &one, .n = 1, .logits = t.la[0]},
                                 {.s = t.a[1], .tokens = &bad, .n = 1, .logits = t.la[1]},
                                 {.s = t.a[2], .tokens = &one, .n = 1, .logits = t.la[2]}};
        T_EQ_INT(session_eval_batch(parts, 3, &err), ERR_INVALID_ARG);
        parts[1] = (session_part){.s = t.a[0], .tokens = &one, .n = 1, .logits = t.la[1]};
        T_EQ_INT(session_eval_batch(parts, 3, &err), ERR_INVALID_ARG); /* a session twice */
        T_CHECK(strstr(err.msg, "twice") != NULL);
        T_EQ_INT(session_eval_batch(parts, 0, &err), ERR_INVALID_ARG);
        /* the third's context is full: nobody moves */
        int32_t fill[256];
        for (int i = 0; i < 256; i++) fill[i] = 3;
        parts[1] = (session_part){.s = t.a[1], .tokens = &one, .n = 1, .logits = t.la[1]};
        parts[2] = (session_part){.s = t.a[2], .tokens = fill, .n = 256 - past[2] + 1, .logits = NULL};
        T_EQ_INT(session_eval_batch(parts, 3, &err), ERR_CONTEXT_FULL);
        for (int i = 0; i < 3; i++) T_EQ_INT(t.a[i]->n_past, past[i]);
        bool ok = true;
        for (int s = 0; s < 3 && ok; s++) ok = step(&t, -1, "after failures", s);
    }
    twins_free(&t);
    model_free(m);
}

/* Latent attention (deepseek2) runs one sequence per pass. */
static void test_mla(void) {
    synth_opts o = small("deepseek2", QT_F32, 41);
    o.n_expert = 4;
    o.n_expert_used = 2;
    model *m = make_model(&o, "batch-mla.gguf");
    if (!m) return;
    T_CHECK(!forward_batches(m));
    const kv_config plain = kv_config_plain(QT_F32);
    twins t;
    if (twins_new(&t, m, &plain, 2)) {
        err_t err = {0};
        int32_t one = 5;
        const int past = t.a[0]->n_past;
        session_part parts[2] = {{.s = t.a[0], .tokens = &one, .n = 1, .logits = t.la[0]},
                                 {.s = t.a[1], .tokens = &one, .n = 1, .logits = t.la[1]}};
        T_EQ_INT(session_eval_batch(parts, 2, &err), ERR_UNSUPPORTED);
        T_EQ_INT(t.a[0]->n_past, past);
        t.K = 1; /* one is a batch too */
        step(&t, -1, "deepseek2, one session", 0);
        t.K = 2;
    }
    twins_free(&t);
    model_free(m);
}

int main(void) {
    test_models();
    test_compressed();
    test_verify_in_batch();
    test_prompt_cuts();
    test_prompt_turn();
    test_generations();
    test_failure();
    test_mla();
    T_DONE();
}
