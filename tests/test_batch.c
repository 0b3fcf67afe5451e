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
#include "runtime/session.h"
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
        parts[i] = (session_part){t->a[i], toks[i], n, t->la[i]};
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
        session_part parts[3] = {{t.a[0], &one, 1, t.la[0]}, {t.a[1], &bad, 1, t.la[1]}, {t.a[2], &one, 1, t.la[2]}};
        T_EQ_INT(session_eval_batch(parts, 3, &err), ERR_INVALID_ARG);
        parts[1] = (session_part){t.a[0], &one, 1, t.la[1]};
        T_EQ_INT(session_eval_batch(parts, 3, &err), ERR_INVALID_ARG); /* a session twice */
        T_CHECK(strstr(err.msg, "twice") != NULL);
        T_EQ_INT(session_eval_batch(parts, 0, &err), ERR_INVALID_ARG);
        /* the third's context is full: nobody moves */
        int32_t fill[256];
        for (int i = 0; i < 256; i++) fill[i] = 3;
        parts[1] = (session_part){t.a[1], &one, 1, t.la[1]};
        parts[2] = (session_part){t.a[2], fill, 256 - past[2] + 1, NULL};
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
        session_part parts[2] = {{t.a[0], &one, 1, t.la[0]}, {t.a[1], &one, 1, t.la[1]}};
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
    test_failure();
    test_mla();
    T_DONE();
}
