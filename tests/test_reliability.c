/*
 * test_reliability — what a hostile file and a careless caller did to the
 * public API, one test per finding (issue 17), each failing on the code
 * before its fix: sizes out of range, a client freed before its model, a
 * client shared by threads, stats read during a stream, two tensors on one
 * range of bytes, non-finite weights and hyperparameters, the size query of
 * octo_tokenize, long vocabulary pieces, escaped error text; NaN
 * quantization scales that generated <unk> with success (issue 35); and a
 * long prompt read alone that kept a newcomer waiting for all of it (58).
 *
 * Needs no ../shared: every model is made here (model/synth.h).
 */
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "core/err.h"
#include "core/gguf.h"
#include "core/quant.h"
#include "octo.h"
#include "t.h"
#include "util.h"

static char g_model[512]; /* the plain synthetic model most tests load */

static int write_model(const char *path, synth_opts o) {
    err_t e = {0};
    const err_code rc = synth_write(&o, path, &e);
    if (rc) fprintf(stderr, "synth: %s\n", e.msg);
    return rc == ERR_OK;
}

static octo_model *load(octo_client *c, const char *path) {
    octo_model_options mo = octo_model_options_defaults();
    mo.auto_draft = OCTO_DRAFT_NONE;
    return octo_load_model(c, path, &mo);
}

/* The plain model with room for n sessions (a failed check when it does not load). */
static octo_model *load_sessions(octo_client *c, int n) {
    octo_model_options mo = octo_model_options_defaults();
    mo.auto_draft = OCTO_DRAFT_NONE;
    mo.max_sessions = n;
    octo_model *m = octo_load_model(c, g_model, &mo);
    T_CHECKF(m != NULL, "%s", octo_last_error(c));
    return m;
}

/* Tokens a stream makes before it ends; -1 if it could not start. */
static int drain(octo_model *m, const char *prompt, const octo_generate_params *gp, octo_status *status) {
    octo_stream *st = octo_generate(m, prompt, gp);
    if (!st) return -1;
    while (octo_stream_next(st)) {
    }
    const int n = octo_stream_token_count(st);
    *status = octo_stream_status(st);
    octo_stream_free(st);
    return n;
}

/* 1: repeat_last_n near INT_MAX overflowed the history ring's size. */
static void test_size_bounds(void) {
    octo_client *c = octo_client_new(NULL);
    octo_model *m = load(c, g_model);
    T_CHECK(m != NULL);
    if (!m) return;
    const int bad[] = {INT_MAX - 15, INT_MAX, OCTO_MAX_REPEAT_LAST_N + 1, -1};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        octo_generate_params gp = octo_generate_params_defaults();
        gp.repeat_last_n = bad[i];
        gp.max_tokens = 4;
        T_CHECK(octo_generate(m, "ab", &gp) == NULL);
        T_EQ_INT(octo_model_status(m), OCTO_ERR_INVALID_ARG);
        T_CHECK(strstr(octo_model_error(m), "repeat_last_n") != NULL);
    }
    octo_generate_params gp = octo_generate_params_defaults();
    gp.repeat_last_n = OCTO_MAX_REPEAT_LAST_N; /* the largest allowed works */
    gp.repeat_penalty = 1.1f;
    gp.max_tokens = 6;
    octo_status st = OCTO_ERR_IO;
    T_EQ_INT(drain(m, "ab", &gp, &st), 6);
    T_EQ_INT(st, OCTO_OK);
    octo_model_free(m);

    /* n_ctx, threads and KV windows past their bounds fail the load with a message */
    octo_model_options mo = octo_model_options_defaults();
    mo.n_ctx = INT_MAX;
    T_CHECK(octo_load_model(c, g_model, &mo) == NULL);
    T_EQ_INT(octo_last_status(c), OCTO_ERR_INVALID_ARG);
    mo = octo_model_options_defaults();
    mo.kv.warm_tokens = INT_MAX;
    mo.kv.recent_tokens = INT_MAX;
    T_CHECK(octo_load_model(c, g_model, &mo) == NULL);
    T_EQ_INT(octo_last_status(c), OCTO_ERR_INVALID_ARG);
    octo_client_free(c);
    octo_client_options co = octo_client_options_defaults();
    co.n_threads = OCTO_MAX_THREADS + 1;
    c = octo_client_new(&co);
    T_CHECK(load(c, g_model) == NULL);
    T_EQ_INT(octo_last_status(c), OCTO_ERR_INVALID_ARG);
    octo_client_free(c);
}

static void count_log(void *user, octo_log_level level, const char *msg) {
    (void)level, (void)msg;
    (*(int *)user)++;
}

/* 6: the model logs through its client; freeing the client first was a use after free. */
static void test_client_lifetime(void) {
    int logs = 0;
    octo_client_options co = octo_client_options_defaults();
    co.log = count_log;
    co.log_user = &logs;
    octo_client *c = octo_client_new(&co);
    octo_model *m = load(c, g_model);
    T_CHECK(m != NULL);
    octo_client_free(c); /* before the model: the model keeps it */
    if (!m) return;
    const octo_message msg = {"user", "ab"};
    octo_generate_params gp = octo_generate_params_defaults();
    gp.max_tokens = 2;
    octo_stream *st = octo_chat(m, &msg, 1, &gp); /* no chat template: a warning through the client's log */
    T_CHECK(st != NULL);
    while (st && octo_stream_next(st)) {
    }
    octo_stream_free(st);
    T_EQ_INT(logs, 1);
    octo_model_free(m); /* releases the client too (ASan and valgrind see no leak) */
}

typedef struct {
    octo_client *c;
    int fail_loads; /* this thread loads a missing file; else a real one */
    int wrong;      /* answers that belonged to another thread */
} loader;

static void *load_loop(void *arg) {
    loader *l = arg;
    for (int i = 0; i < 40; i++) {
        octo_model *m = load(l->c, l->fail_loads ? "/nonexistent/octo-model.gguf" : g_model);
        const octo_status s = octo_last_status(l->c);
        const char *msg = octo_last_error(l->c);
        if (l->fail_loads) l->wrong += m != NULL || s != OCTO_ERR_NOT_FOUND || !strstr(msg, "no such file");
        else l->wrong += m == NULL || s != OCTO_OK || msg[0] != '\0';
        octo_model_free(m);
    }
    return NULL;
}

/* 7: threads sharing a client read each other's errors (68 of 300 failures read "" and OK). */
static void test_shared_client(void) {
    octo_client_options co = octo_client_options_defaults();
    co.n_threads = 1;
    octo_client *c = octo_client_new(&co);
    loader l[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        l[i] = (loader){c, i % 2, 0};
        pthread_create(&th[i], NULL, load_loop, &l[i]);
    }
    int wrong = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        wrong += l[i].wrong;
    }
    T_EQ_INT(wrong, 0);
    octo_client_free(c);
}

typedef struct {
    octo_model *m;
    atomic_int stop, snapshots;
    int bad;
} watcher;

static void *watch_stats(void *arg) {
    watcher *w = arg;
    int last = 0;
    while (!atomic_load(&w->stop)) {
        const octo_stats s = octo_model_stats(w->m);
        w->bad += s.context_tokens < last || s.kv_tokens_retained > s.context_tokens ||
                  s.context_tokens > s.context_size;
        last = s.context_tokens;
        atomic_fetch_add(&w->snapshots, 1);
    }
    return NULL;
}

static void stats_in_callback(void *user, int done, int total) {
    (void)done, (void)total;
    const octo_stats s = octo_model_stats(user); /* inside octo_stream_next: must not wait for itself */
    (void)s;
}

/* 13: octo_model_stats during a stream raced with the cache (48 TSan reports). */
static void test_stats_during_stream(void) {
    octo_client *c = octo_client_new(NULL);
    octo_model *m = load(c, g_model);
    T_CHECK(m != NULL);
    if (!m) return;
    watcher w = {.m = m};
    pthread_t th;
    pthread_create(&th, NULL, watch_stats, &w);
    octo_generate_params gp = octo_generate_params_defaults();
    gp.max_tokens = 200;
    gp.on_prefill = stats_in_callback;
    gp.user = m;
    octo_stream *st = octo_generate(m, "ab", &gp);
    T_CHECK(st != NULL);
    int during = 0; /* tokens after which the watcher took a snapshot before the next one began */
    while (st && octo_stream_next(st)) {
        const int seen = atomic_load(&w.snapshots);
        for (int spin = 0; spin < 100000 && atomic_load(&w.snapshots) == seen; spin++) sched_yield();
        during += atomic_load(&w.snapshots) > seen;
    }
    T_CHECK(octo_stream_token_count(st) > 8);
    octo_stream_free(st);
    atomic_store(&w.stop, 1);
    pthread_join(th, NULL);
    T_CHECKF(during > 8, "snapshots between %d tokens", during);
    T_EQ_INT(w.bad, 0);
    octo_model_free(m);
    octo_client_free(c);
}

typedef struct {
    octo_model *m;
    atomic_int stop, trims;
    int top; /* the highest level it cycles through */
    int bad; /* calls that failed */
} trimmer;

static void *trim_loop(void *arg) {
    trimmer *t = arg;
    for (int i = 0; !atomic_load(&t->stop); i++) {
        t->bad += octo_model_trim(t->m, (octo_trim_level)(i % (t->top + 1))) != OCTO_OK;
        const octo_memory mu = octo_memory_usage();
        (void)mu;
        atomic_fetch_add(&t->trims, 1);
    }
    t->bad += octo_model_trim(t->m, OCTO_TRIM_NONE) != OCTO_OK;
    return NULL;
}

/* 200 greedy tokens while another thread calls octo_model_trim (cycling its levels) and octo_memory_usage
 * as fast as it can. LOW and MODERATE change no output: the text is the text without trims. CRITICAL
 * may (it evicts): the stream still ends whole. Under TSan: no race (issue 54's red team). */
static char *trimmed_text(octo_model *m, int top, int *trims, int *bad) {
    trimmer t = {.m = m, .top = top};
    pthread_t th;
    if (top >= 0) pthread_create(&th, NULL, trim_loop, &t);
    octo_generate_params gp = octo_generate_params_defaults();
    gp.max_tokens = 200;
    gp.temperature = 0;
    octo_stream *st = octo_generate(m, "ab", &gp);
    size_t n = 0;
    char *text = calloc(1, 1 << 16);
    int during = 0; /* trims that completed between two tokens of the stream */
    for (const char *piece; st && text && (piece = octo_stream_next(st)) != NULL;) {
        const size_t k = strlen(piece);
        if (n + k < (1 << 16) - 1) memcpy(text + n, piece, k), n += k;
        const int seen = atomic_load(&t.trims); /* let the trimmer in before the next token */
        for (int spin = 0; top >= 0 && spin < 100000 && atomic_load(&t.trims) == seen; spin++) sched_yield();
        during = atomic_load(&t.trims);
    }
    T_EQ_INT(st ? octo_stream_token_count(st) : -1, 200);
    octo_stream_free(st);
    if (top >= 0) {
        atomic_store(&t.stop, 1);
        pthread_join(th, NULL);
    }
    *trims = during, *bad = t.bad;
    return text;
}

/* On the plain model, and on a MoE whose experts sit behind a cache of half their bytes (what
 * MODERATE halves again, with its I/O thread reading ahead). */
static void test_trim_during_stream(bool moe) {
    char path[512];
    tu_tmp_path(path, sizeof path, "reliability-moe.gguf");
    synth_opts o = synth_defaults();
    o.n_ctx = 256, o.n_expert = 8, o.n_expert_used = 2;
    if (moe && !write_model(path, o)) return;
    octo_client *c = octo_client_new(NULL);
    octo_model_options mo = octo_model_options_defaults();
    mo.auto_draft = OCTO_DRAFT_NONE;
    mo.moe.cache_share = moe ? 0.5 : 0.0;
    octo_model *m = octo_load_model(c, moe ? path : g_model, &mo);
    T_CHECK(m != NULL);
    if (!m) return octo_client_free(c), (void)(moe && remove(path));
    int trims, bad;
    char *alone = trimmed_text(m, -1, &trims, &bad);
    T_CHECK(moe == (octo_model_stats(m).expert_cache_bytes > 0));
    char *lossless = trimmed_text(m, OCTO_TRIM_MODERATE, &trims, &bad);
    T_CHECKF(alone && lossless && !strcmp(alone, lossless), "LOW/MODERATE trims during the stream changed its text");
    T_CHECKF(trims > 50 && bad == 0, "%d trims during the stream, %d failed", trims, bad);
    char *lossy = trimmed_text(m, OCTO_TRIM_CRITICAL, &trims, &bad);
    T_CHECKF(trims > 50 && bad == 0, "%d trims to CRITICAL and back during the stream, %d failed", trims, bad);
    printf("trims during a 200-token stream (%s): the text unchanged by LOW/MODERATE; %d trims through CRITICAL\n",
           moe ? "MoE, an expert cache of half its experts" : "dense", trims);
    free(alone), free(lossless), free(lossy);
    octo_model_free(m);
    octo_client_free(c);
    if (moe) remove(path);
}

/* Byte offset of tensor name's data offset field in the header, or 0. */
static size_t offset_field(const unsigned char *file, size_t size, const char *name) {
    const size_t n = strlen(name);
    for (size_t i = 8; i + n + 8 < size; i++)
        if (!memcmp(file + i, name, n) && file[i + n] == 2 && !memcmp(file + i - 8, &(uint64_t){n}, 8))
            return i + n + 4 + 2 * 8 + 4; /* name, n_dims = 2, ne[0..1], type */
    return 0;
}

/* max |a - b| over n floats (NaN counts as infinitely different) */
static double max_diff(const float *a, const float *b, size_t n) {
    double d = 0;
    for (size_t i = 0; i < n; i++) {
        const double x = fabs((double)a[i] - (double)b[i]);
        d = x > d || x != x ? (x != x ? INFINITY : x) : d;
    }
    return d;
}

static int eval_all(const char *path, const int32_t *toks, int n, float *logits) {
    octo_client *c = octo_client_new(NULL);
    octo_model *m = load(c, path);
    const int ok = m && octo_eval(m, toks, n, logits, OCTO_LOGITS_ALL) == OCTO_OK;
    octo_model_free(m);
    octo_client_free(c);
    return ok;
}

/* 5: output.weight at token_embd.weight's offset was packed twice: token 0 forever. */
static void test_shared_tensor_bytes(void) {
    char path[512];
    tu_tmp_path(path, sizeof path, "shared.gguf");
    synth_opts o = synth_defaults();
    o.n_vocab = 320; /* a multiple of the 16-row groups packing takes */
    o.type = QT_Q8_0;
    o.embd_type = o.output_type = QT_Q4_0;
    T_CHECK(write_model(path, o));
    size_t size = 0;
    unsigned char *file = tu_read_file(path, &size);
    const size_t out_at = file ? offset_field(file, size, "output.weight") : 0;
    const size_t emb_at = file ? offset_field(file, size, "token_embd.weight") : 0;
    T_CHECK(out_at && emb_at);
    if (!out_at || !emb_at) return free(file);
    memcpy(file + out_at, file + emb_at, 8); /* the output reads the embedding's bytes */
    T_CHECK(tu_write_file(path, file, size));
    gguf_ctx *g = NULL;
    T_EQ_INT(gguf_open_buffer(file, size, &g, NULL), ERR_OK);
    const gguf_tensor *t = g ? gguf_find_tensor(g, "output.weight") : NULL;
    T_CHECK(t && t->shares_bytes && gguf_find_tensor(g, "token_embd.weight")->shares_bytes);
    T_CHECK(g && !gguf_find_tensor(g, "output_norm.weight")->shares_bytes);
    gguf_close(g);

    enum { N = 12 };
    const int32_t toks[N] = {1, 260, 261, 262, 263, 5, 100, 270, 280, 290, 299, 7};
    static float packed[N * 320], plain[N * 320];
    T_CHECK(eval_all(path, toks, N, packed));
    setenv("OCTO_PACK", "0", 1); /* the GGUF layout throughout: the reference */
    T_CHECK(eval_all(path, toks, N, plain));
    unsetenv("OCTO_PACK");
    const double d = max_diff(packed, plain, (size_t)N * 320);
    T_CHECKF(d <= 1e-4, "max |packed - plain| = %g", d);
    free(file);
    remove(path);
}

/* A Q8_0 model with F32 embedding and output whose element 3 of row `row`
 * of `tensor` is v, loaded. */
static octo_model *corrupt_model(octo_client *c, const char *path, const char *tensor, int row, float v) {
    synth_opts o = synth_defaults();
    o.type = QT_Q8_0;
    o.embd_type = o.output_type = QT_F32;
    if (!write_model(path, o)) return NULL;
    size_t size = 0;
    unsigned char *file = tu_read_file(path, &size);
    gguf_ctx *g = NULL;
    int ok = file && gguf_open_buffer(file, size, &g, NULL) == ERR_OK;
    if (ok) {
        const gguf_tensor *t = gguf_find_tensor(g, tensor);
        const size_t at = (size_t)((const unsigned char *)t->data - file) + sizeof(float) * (size_t)o.n_embd * (size_t)row;
        memcpy(file + at + 4 * 3, &v, 4);
        ok = tu_write_file(path, file, size);
    }
    gguf_close(g);
    free(file);
    return ok ? load(c, path) : NULL;
}

/* 10: inf / NaN hyperparameters and weights gave token 0 forever with exit 0. */
static void test_non_finite(void) {
    char path[512];
    tu_tmp_path(path, sizeof path, "nonfinite.gguf");
    octo_client *c = octo_client_new(NULL);
    const float bad[] = {INFINITY, NAN};
    for (int i = 0; i < 2; i++) {
        synth_opts o = synth_defaults();
        o.rms_eps = bad[i];
        T_CHECK(write_model(path, o));
        T_CHECK(load(c, path) == NULL);
        T_EQ_INT(octo_last_status(c), OCTO_ERR_BAD_VALUE);
        o = synth_defaults();
        o.rope_freq_base = bad[i];
        T_CHECK(write_model(path, o));
        T_CHECK(load(c, path) == NULL);
        T_EQ_INT(octo_last_status(c), OCTO_ERR_BAD_VALUE);
    }
    /* a NaN / Inf in the embedding row of the last token, then in the output
     * matrix, with packed Q8_0 layers between (their quantizer must not overflow) */
    for (int i = 0; i < 4; i++) {
        const char *tensor = i < 2 ? "token_embd.weight" : "output.weight";
        octo_model *m = corrupt_model(c, path, tensor, i < 2 ? 260 : 5, bad[i % 2]);
        T_CHECK(m != NULL);
        if (!m) continue;
        static float logits[300];
        const int32_t toks[2] = {1, 260};
        T_CHECKF(octo_eval(m, toks, 2, logits, OCTO_LOGITS_LAST) == OCTO_ERR_BAD_VALUE, "%s: %g", tensor,
                 (double)bad[i % 2]);
        T_CHECK(strstr(octo_model_error(m), "non-finite") != NULL);
        T_EQ_INT(octo_n_past(m), 0); /* a failed call leaves the sequence as it was */
        if (i >= 2) { /* every logit row reads the output matrix: generation stops with the error */
            octo_generate_params gp = octo_generate_params_defaults();
            gp.max_tokens = 5;
            octo_stream *st = octo_generate(m, "ab", &gp);
            T_CHECK(st != NULL);
            T_CHECK(st && octo_stream_next(st) == NULL);
            T_EQ_INT(octo_stream_status(st), OCTO_ERR_BAD_VALUE);
            T_EQ_INT(octo_stream_stop_reason(st), OCTO_STOP_ERROR);
            octo_stream_free(st);
        }
        octo_model_free(m);
    }
    octo_client_free(c);
    remove(path);
}

/* Issue 35, 4: a Q4_0 model whose last blocks have NaN fp16 steps (scales)
 * generated <unk> eight times with exit 0 on the scalar path: the activation
 * quantizer zeroes a non-finite block, so the NaN never reached the logits.
 * Caught where it arises, at the layer's output, on every kernel path this
 * CPU runs (octo run under OCTO_CPU) and through the API on the default one. */
/* A Q4_0 model (mla: deepseek2's latent attention) whose tensor name has fp16 NaN scales in four blocks
 * (first: its first four, else its last four); false when it could not be made. */
static bool nan_scaled_model(const char *path, const char *name, bool mla, bool first) {
    synth_opts o = synth_defaults();
    o.type = o.output_type = QT_Q4_0; /* a quantized output matrix: its activations are quantized too */
    o.embd_type = QT_F32;
    if (mla) o.arch = "deepseek2", o.n_embd = 64, o.n_layer = 2, o.n_expert = 4, o.n_expert_used = 2;
    T_CHECK(write_model(path, o));
    size_t size = 0;
    unsigned char *file = tu_read_file(path, &size);
    gguf_ctx *g = NULL;
    if (!file || gguf_open_buffer(file, size, &g, NULL) != ERR_OK) {
        T_CHECK(0);
        free(file);
        return false;
    }
    const gguf_tensor *t = gguf_find_tensor(g, name);
    T_CHECKF(t != NULL && t->type == QT_Q4_0, "no Q4_0 tensor %s", name);
    if (t && t->type != QT_Q4_0) t = NULL; /* its blocks are not 18 bytes */
    const size_t at = t ? (size_t)((const unsigned char *)t->data - file) : 0, blocks = t ? (size_t)t->n_bytes / 18 : 0;
    for (size_t b = first ? 0 : blocks - 4; t && b < (first ? 4 : blocks); b++) file[at + 18 * b] = 0x00, file[at + 18 * b + 1] = 0x7e;
    T_CHECK(tu_write_file(path, file, size));
    gguf_close(g);
    free(file);
    return t != NULL;
}

/* NaN scales stop the model with the non-finite error, wherever they are: in ffn_down (the residual
 * check), and in attn_q or attn_k (issue 58: their NaN scores were dropped by the softmax, the layer's
 * output stayed finite, and a q4_0 model generated other text with success; now the queries and keys
 * are checked as they are made). */
static void test_nan_scales(void) {
    char path[512], cmd[1400], down[64];
    tu_tmp_path(path, sizeof path, "nanscale.gguf");
    snprintf(down, sizeof down, "blk.%d.ffn_down.weight", synth_defaults().n_layer - 1);
    /* the last three: deepseek2's latent attention (its key's rotary part, its queries' and attn_kv_b's
     * key rows, which make the latent queries), which had no such check */
    const char *names[] = {down, "blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_kv_a_mqa.weight",
                           "blk.0.attn_q_b.weight", "blk.0.attn_kv_b.weight"};
    for (int k = 0; k < 6; k++) {
        if (!nan_scaled_model(path, names[k], k >= 3, k == 5)) continue;
        octo_client *c = octo_client_new(NULL);
        octo_model *m = load(c, path);
        static float logits[512];
        const int32_t toks[2] = {1, 2};
        T_CHECKF(m && octo_eval(m, toks, 2, logits, OCTO_LOGITS_LAST) == OCTO_ERR_BAD_VALUE, "NaN scales in %s", names[k]);
        T_CHECKF(m && strstr(octo_model_error(m), "non-finite"), "%s: %s", names[k], m ? octo_model_error(m) : "");
        if (m) printf("NaN scales in %s: %s\n", names[k], octo_model_error(m));
        octo_model_free(m);
        octo_client_free(c);
        const char *bin = getenv("OCTO_BIN"), *paths[] = {"scalar", "avx2", "avx512", "neon"};
        for (int i = 0; bin && i < 4; i++) {
            snprintf(cmd, sizeof cmd, "OCTO_CPU=%s '%s' inspect -m '%s' 2>/dev/null | grep -q '^compute: *%s '", paths[i],
                     bin, path, paths[i]);
            if (system(cmd) != 0) continue; /* a path this CPU does not run */
            snprintf(cmd, sizeof cmd, "OCTO_CPU=%s '%s' run -m '%s' -p ab -n 8 --temp 0 2>&1 >/dev/null | grep -q non-finite",
                     paths[i], bin, path);
            const int stopped = system(cmd) == 0;
            T_CHECKF(stopped, "octo run on the %s path did not stop with the non-finite error (%s)", paths[i], names[k]);
        }
        remove(path);
    }
}

/* 12: the documented size query (NULL, 0) was memcpy(NULL, ..., 0); 13: octo_stream_tokens(st, NULL). */
static void test_size_query(void) {
    octo_client *c = octo_client_new(NULL);
    octo_model *m = load(c, g_model);
    T_CHECK(m != NULL);
    if (!m) return;
    const char text[] = " \xc3 \xc3 \xc3 hello"; /* byte fallback: more ids than bytes */
    const int n = octo_tokenize(m, text, (int)strlen(text), 1, 0, NULL, 0);
    int32_t ids[64];
    T_CHECK(n > (int)strlen(text) / 2);
    T_EQ_INT(octo_tokenize(m, text, (int)strlen(text), 1, 0, ids, 64), n);
    T_EQ_INT(octo_tokenize(m, text, (int)strlen(text), 1, 0, ids, 2), n); /* the total, whatever the cap */
    octo_generate_params gp = octo_generate_params_defaults();
    gp.max_tokens = 3;
    octo_stream *st = octo_generate(m, "ab", &gp);
    while (st && octo_stream_next(st)) {
    }
    T_EQ_INT(octo_stream_tokens(st, NULL), 3);
    octo_stream_free(st);
    octo_model_free(m);
    octo_client_free(c);
}

/* 13: stream pieces over 256 bytes were cut (a 605-byte token printed 256). */
static void test_long_pieces(void) {
    char path[512];
    tu_tmp_path(path, sizeof path, "long.gguf");
    synth_opts o = synth_defaults();
    o.n_vocab = 1000; /* most of it ordinary pieces, each 605 bytes */
    o.piece_bytes = 605;
    T_CHECK(write_model(path, o));
    octo_client *c = octo_client_new(NULL);
    octo_model *m = load(c, path);
    T_CHECK(m != NULL);
    octo_generate_params gp = octo_generate_params_defaults();
    gp.max_tokens = 24;
    gp.seed = 5;
    octo_stream *st = m ? octo_generate(m, "ab", &gp) : NULL;
    /* the pieces, one after another, are the tokens' bytes: a byte that ends a token inside a
     * character goes out with the next piece, so pieces are compared in all, not one by one */
    static char got[24 * 1024], want[24 * 1024];
    size_t n_got = 0, n_want = 0;
    int long_pieces = 0;
    for (const char *p; st && (p = octo_stream_next(st));) {
        const size_t n = (size_t)octo_stream_piece_size(st);
        if (n_got + n <= sizeof got) memcpy(got + n_got, p, n);
        n_got += n;
        long_pieces += n > 256;
    }
    const int32_t *ids = NULL;
    const int n_ids = st ? octo_stream_tokens(st, &ids) : 0;
    for (int i = 0; i < n_ids; i++) {
        const int w = octo_token_piece(m, ids[i], want + n_want, (int)(sizeof want - n_want));
        n_want += w > 0 ? (size_t)w : 0;
    }
    T_CHECK(long_pieces > 0);
    T_CHECKF(n_got == n_want && n_got <= sizeof got && !memcmp(got, want, n_got), "the pieces' %zu bytes against the "
             "tokens' %zu", n_got, n_want);
    octo_stream_free(st);
    octo_model_free(m);
    octo_client_free(c);
    remove(path);
}

/* 13: bytes from a file reached messages as they were (terminal and log injection). */
static void test_escaped_errors(void) {
    err_t e = {0};
    err_set(&e, ERR_BAD_VALUE, "key '%s'", "a\033[2Jb\nc\xff\xc3\xa9");
    T_CHECKF(!strcmp(e.msg, "key 'a\\x1B[2Jb\\x0Ac\\xFF\xc3\xa9'"), "%s", e.msg);
    char path[512];
    tu_tmp_path(path, sizeof path, "arch.gguf");
    T_CHECK(write_model(path, synth_defaults()));
    size_t size = 0;
    unsigned char *file = tu_read_file(path, &size);
    unsigned char *at = NULL;
    for (size_t i = 0; file && !at && i + 20 <= size; i++)
        if (!memcmp(file + i, "general.architecture", 20)) at = file + i;
    T_CHECK(at != NULL);
    if (at) {
        memcpy(at + 20 + 4 + 8, "l\033[2J", 5); /* the value "llama", same length */
        T_CHECK(tu_write_file(path, file, size));
        octo_client *c = octo_client_new(NULL);
        T_CHECK(load(c, path) == NULL);
        T_EQ_INT(octo_last_status(c), OCTO_ERR_UNSUPPORTED_ARCH);
        T_CHECKF(strstr(octo_last_error(c), "'l\\x1B[2J'") && !strchr(octo_last_error(c), '\033'), "%s",
                 octo_last_error(c));
        octo_client_free(c);
    }
    free(file);
    remove(path);
}

static octo_model *load_tiered(octo_client *c) {
    octo_model_options mo = octo_model_options_defaults();
    mo.auto_draft = OCTO_DRAFT_NONE;
    mo.kv.hot_tokens = 8; /* tiers that age within a short test */
    mo.kv.warm_tokens = 24;
    return octo_load_model(c, g_model, &mo);
}

/* 9: after octo_truncate (or prefix reuse), kept entries stayed at the tier
 * the discarded tokens had aged them into (max logit difference 0.67). */
static void test_truncate_as_never_seen(void) {
    enum { N = 200, KEEP = 100, MORE = 10, V = 300 };
    int32_t toks[N];
    rng_t r = {11};
    for (int i = 0; i < N; i++) toks[i] = 3 + (int32_t)(rng_next(&r) % (V - 3));
    static float seen[MORE * V], fresh[MORE * V], last[V];
    octo_client *c = octo_client_new(NULL);
    octo_model *a = load_tiered(c), *b = load_tiered(c);
    T_CHECK(a && b);
    if (!a || !b) return;
    T_EQ_INT(octo_eval(a, toks, 120, last, OCTO_LOGITS_LAST), OCTO_OK);
    T_EQ_INT(octo_eval(a, toks + 120, N - 120, last, OCTO_LOGITS_LAST), OCTO_OK);
    T_EQ_INT(octo_truncate(a, KEEP), OCTO_OK);
    T_EQ_INT(octo_n_past(a), KEEP);
    T_EQ_INT(octo_eval(a, toks + KEEP, MORE, seen, OCTO_LOGITS_ALL), OCTO_OK);
    T_EQ_INT(octo_eval(b, toks, KEEP, last, OCTO_LOGITS_LAST), OCTO_OK);
    T_EQ_INT(octo_eval(b, toks + KEEP, MORE, fresh, OCTO_LOGITS_ALL), OCTO_OK);
    const double d = max_diff(seen, fresh, (size_t)MORE * V);
    T_CHECKF(d == 0, "truncated vs fresh: max |diff| %g", d);
    octo_model_free(b);

    /* a second generation on the same model object: the text of a fresh one */
    char prompt[600] = "";
    for (int i = 0; i < 40; i++) strcat(prompt, i % 3 ? "ab " : "ee ta ");
    char text[2][2048]; /* a fresh cache, then the same prompt again: its prefix reused, aged by the first reply */
    octo_reset(a);
    for (int run = 0; run < 2; run++) {
        octo_generate_params gp = octo_generate_params_defaults();
        gp.temperature = 0;
        gp.max_tokens = 60;
        gp.spec = OCTO_SPEC_NONE;
        text[run][0] = '\0';
        octo_stream *st = octo_generate(a, prompt, &gp);
        for (const char *p; st && (p = octo_stream_next(st));) strncat(text[run], p, sizeof text[run] - strlen(text[run]) - 1);
        octo_stream_free(st);
    }
    T_CHECKF(!strcmp(text[0], text[1]) && text[0][0], "fresh '%s' / reused '%s'", text[0], text[1]);
    octo_model_free(a);
    octo_client_free(c);
}

/* Sessions: several conversations on one model, from several threads at once. */
typedef struct {
    octo_session *ss;   /* NULL: the model's own conversation */
    octo_model *m;
    const char *prompt;
    float temperature;  /* 0: greedy */
    uint64_t seed;
    int spec;           /* 0: none, else an octo_spec_mode */
    pthread_barrier_t *start; /* NULL, or every job's stream exists before any is read */
    char text[2048];
    int tokens;
} session_job;

static void *session_run(void *arg) {
    session_job *j = arg;
    octo_generate_params gp = octo_generate_params_defaults();
    gp.temperature = j->temperature;
    gp.seed = j->seed;
    gp.max_tokens = 40;
    gp.spec = j->spec ? (octo_spec_mode)j->spec : OCTO_SPEC_NONE;
    octo_stream *st = j->ss ? octo_session_generate(j->ss, j->prompt, &gp) : octo_generate(j->m, j->prompt, &gp);
    if (j->start) pthread_barrier_wait(j->start);
    j->text[0] = '\0';
    for (const char *p; st && (p = octo_stream_next(st));) strncat(j->text, p, sizeof j->text - strlen(j->text) - 1);
    j->tokens = st ? octo_stream_token_count(st) : -1;
    octo_stream_free(st);
    return NULL;
}

static void test_sessions(void) {
    octo_client *c = octo_client_new(NULL);
    octo_model_options mo = octo_model_options_defaults();
    mo.auto_draft = OCTO_DRAFT_NONE;
    mo.max_sessions = 3;
    mo.kv.budget_bytes = 3u << 20; /* shared by the three */
    octo_model *m = octo_load_model(c, g_model, &mo);
    T_CHECKF(m != NULL, "%s", octo_last_error(c));
    if (!m) return;
    const char *prompts[3] = {"Once upon a time", "The cat sat", "A long way from home"};
    session_job alone[3], together[3];
    octo_session *ss[2] = {octo_session_new(m), octo_session_new(m)};
    T_CHECKF(ss[0] && ss[1], "%s", octo_model_error(m));
    T_CHECK(octo_session_new(m) == NULL && strstr(octo_model_error(m), "all 3 sessions"));
    for (int i = 0; i < 3; i++) { /* each prompt alone, in the model's own conversation */
        alone[i] = (session_job){.m = m, .prompt = prompts[i]};
        octo_reset(m);
        session_run(&alone[i]);
    }
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        together[i] = (session_job){.ss = i ? ss[i - 1] : NULL, .m = m, .prompt = prompts[i]};
        pthread_create(&th[i], NULL, session_run, &together[i]);
    }
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 3; i++)
        T_CHECKF(together[i].tokens == 40 && !strcmp(alone[i].text, together[i].text), "[%d] '%s' vs '%s'", i,
                 together[i].text, alone[i].text);
    const octo_stats s1 = octo_session_stats(ss[0]);
    T_CHECKF(s1.decode_tokens == 40 && s1.context_tokens > 40 && s1.kv_budget_bytes <= (1u << 20) + (1u << 16),
             "session stats: %d tokens, context %d, budget %llu", s1.decode_tokens, s1.context_tokens,
             (unsigned long long)s1.kv_budget_bytes);
    octo_stream *busy = octo_session_generate(ss[0], "x", NULL);
    T_CHECK(busy && !octo_session_generate(ss[0], "y", NULL) && strstr(octo_session_error(ss[0]), "already serving"));
    T_EQ_INT(octo_session_status(ss[0]), OCTO_ERR_BUSY);
    octo_session *other = ss[1];
    octo_stream *free_one = octo_session_generate(other, "z", NULL); /* another session is not busy */
    T_CHECK(free_one != NULL);
    octo_stream_free(free_one);
    octo_session_free(ss[1]);
    T_CHECK((ss[1] = octo_session_new(m)) != NULL); /* a freed slot is reused */
    octo_model_free(m); /* with two sessions and a stream still open: they report errors, never crash */
    T_CHECK(octo_stream_next(busy) == NULL && octo_session_generate(ss[0], "x", NULL) == NULL);
    octo_stream_free(busy);
    octo_session_free(ss[0]);
    octo_session_free(ss[1]);
    octo_client_free(c);
}

/* K sessions (the model's own and ss[1..K-1]) stream at once, their prompts
 * read together (the first step is shared); each text must equal alone[i]'s. */
static void run_together(octo_model *m, octo_session **ss, const session_job *alone, int K, int spec,
                         const char *what) {
    static session_job together[8];
    pthread_t th[8];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)K);
    octo_reset(m);
    for (int i = 0; i < K; i++) {
        if (ss[i]) octo_session_reset(ss[i]);
        together[i] = alone[i]; /* greedy speculation is lossless: plain greedy's text */
        together[i].spec = spec;
        together[i].ss = ss[i];
        together[i].start = &start;
        pthread_create(&th[i], NULL, session_run, &together[i]);
    }
    for (int i = 0; i < K; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    for (int i = 0; i < K; i++)
        T_CHECKF(together[i].tokens == alone[i].tokens && !strcmp(alone[i].text, together[i].text),
                 "[%s, 1 + %d, session %d] '%s' vs alone '%s'", what, K - 1, i, together[i].text, alone[i].text);
}

/* Continuous batching (runtime/batch.h): 1 + 1, 1 + 3 and 1 + 7 sessions
 * streaming at once step together, and each one's text, greedy, sampled
 * with its own seed, or greedy with n-gram drafts verified in the batch, is
 * the text it makes alone. A 170-token prompt is read beside the others'
 * decoding: on the default tiered cache (128 entries at F16, then older ones
 * aged) in the cuts it has alone, on a plain one (compress 0) in chunks
 * sized by the step's time budget. */
static void test_batched_sessions(int compress) {
    octo_client *c = octo_client_new(NULL);
    octo_model_options mo = octo_model_options_defaults();
    mo.auto_draft = OCTO_DRAFT_NONE;
    mo.max_sessions = 8;
    mo.kv.compress = compress;
    octo_model *m = octo_load_model(c, g_model, &mo);
    T_CHECKF(m != NULL, "%s", octo_last_error(c));
    const char *prompts[8] = {"Once upon a time", "The cat sat", "A long way from home", "Tom",
                              "She said that the dog", "In the morning the sun", "x y z", NULL};
    char long_prompt[200] = "";
    for (int i = 0; i < 10; i++) strcat(long_prompt, "the big red ball ");
    prompts[7] = long_prompt;
    octo_session *ss[8] = {NULL};
    for (int i = 1; m && i < 8; i++) T_CHECKF((ss[i] = octo_session_new(m)) != NULL, "%s", octo_model_error(m));
    static session_job alone[2][8];
    for (int mode = 0; m && mode < 2; mode++)
        for (int i = 0; i < 8; i++) { /* alone, in the model's own conversation */
            alone[mode][i] = (session_job){.m = m, .prompt = prompts[i], .temperature = mode ? 0.8f : 0.0f,
                                           .seed = (uint64_t)i + 1};
            octo_reset(m);
            session_run(&alone[mode][i]);
        }
    const int ngram = octo_spec_mode_from_name("ngram");
    for (int K = 2; m && K <= 8; K *= 2) {
        run_together(m, ss, alone[0], K, 0, compress ? "greedy" : "greedy, plain cache");
        run_together(m, ss, alone[1], K, 0, compress ? "sampled" : "sampled, plain cache");
        run_together(m, ss, alone[0], K, ngram, compress ? "greedy, n-gram" : "greedy, n-gram, plain cache");
    }
    T_CHECK(!m || strcmp(alone[0][0].text, alone[1][0].text) != 0); /* sampling is not greedy */
    const octo_stats st = octo_model_stats(m);
    T_CHECKF(st.batch_model_steps >= 9 && st.batch_model_max >= 2 && st.batch_model_mean >= 2.0,
             "shared steps %lld, largest %d, mean %.2f", (long long)st.batch_model_steps, st.batch_model_max,
             st.batch_model_mean);
    printf("batched sessions (%s cache): %lld shared steps, mean %.2f sessions, largest %d, %lld prompt tokens in "
           "them, %lld verify passes\n",
           compress ? "tiered" : "plain", (long long)st.batch_model_steps, st.batch_model_mean, st.batch_model_max,
           (long long)st.batch_model_prompt_rows, (long long)st.batch_model_verify);
    for (int i = 1; i < 8; i++) octo_session_free(ss[i]);
    octo_model_free(m);
    octo_client_free(c);
}

/* A long greedy generation on the trained model (the clone's stories260K) in
 * the default tiered cache, its text and the logits after it from what it
 * left in the cache (octo_eval of its last token, 0 on failure). */
typedef struct {
    octo_session *ss; /* NULL: the model's own conversation */
    octo_model *m;
    int spec, spec_k, n;
    pthread_barrier_t *start;
    char *text;
    float *next; /* [V] or NULL */
} long_job;

static void *long_run(void *arg) {
    long_job *j = arg;
    octo_generate_params gp = octo_generate_params_defaults();
    gp.temperature = 0.0f;
    gp.max_tokens = j->n;
    gp.spec = j->spec ? (octo_spec_mode)j->spec : OCTO_SPEC_NONE;
    gp.spec_k = j->spec_k;
    const char *prompt = "One day, a big bear";
    octo_stream *st = j->ss ? octo_session_generate(j->ss, prompt, &gp) : octo_generate(j->m, prompt, &gp);
    if (j->start) pthread_barrier_wait(j->start);
    size_t len = 0;
    for (const char *p; st && (p = octo_stream_next(st));) {
        const size_t pn = (size_t)octo_stream_piece_size(st);
        if (len + pn < (size_t)j->n * 64) memcpy(j->text + len, p, pn), len += pn;
    }
    j->text[len] = '\0';
    const int32_t last = st ? octo_stream_last_token(st) : -1;
    octo_stream_free(st);
    if (j->next && (last < 0 || octo_eval(j->m, &last, 1, j->next, OCTO_LOGITS_LAST) != OCTO_OK)) j->next[0] = 0.0f;
    return NULL;
}

/* Issue 59, 1: a verify pass's rows all see the cache as committed before
 * it, but each commit of plain decoding ages the tiered cache (a block
 * re-laid at INT8 at 192, 256, ... tokens, at INT4 from 576): rows past such
 * a commit saw the block still at F16, and the entries they left carried it
 * on. Alone, speculation usually switched itself off before the first such
 * commit; in shared steps it ran on, and 1,500-token texts turned (char 1552,
 * "too fast." for "too high."). Now a pass ends before the cache would change
 * (kv_cache_exact_rows): n-gram drafts of fixed lengths leave the cache bit
 * for bit as plain decoding does, and four sessions speculating together
 * write the text alone. */
static void test_long_speculation_exact(void) {
    char path[512];
    tu_repo_model(path, sizeof path);
    octo_client *c = octo_client_new(NULL);
    octo_model_options mo = octo_model_options_defaults();
    mo.auto_draft = OCTO_DRAFT_NONE;
    mo.max_sessions = 4;
    mo.n_ctx = 2048;
    octo_model *m = octo_load_model(c, path, &mo);
    T_CHECKF(m != NULL, "%s", octo_last_error(c));
    /* the text ends (the end-of-text token) after 1,492 tokens: a 1,500-token run ends there, a 1,400 one at its
     * length; each leaves the cache as plain decoding does (every token read but the last, or all before the end) */
    const int n = tu_quick() || tu_emulated() ? 700 : 1500, V = m ? octo_model_info_get(m).n_vocab : 1;
    const int ngram = octo_spec_mode_from_name("ngram");
    float *plain_next = calloc((size_t)V, sizeof(float)), *next = calloc((size_t)V, sizeof(float));
    char *plain = calloc((size_t)n * 64 + 1, 1);
    const struct { int n, k; } runs[] = {{n - 100, 0}, {n - 100, 4}, {n, 0}, {n, 1}, {n, 7}};
    for (int r = 0; m && plain && next && plain_next && r < 5; r++) { /* a fixed length never switches itself off */
        const int k = runs[r].k, len = runs[r].n;
        char *text = k ? calloc((size_t)n * 64 + 1, 1) : plain;
        long_job j = {.m = m, .n = len, .spec = k ? ngram : 0, .spec_k = k, .text = text, .next = k ? next : plain_next};
        octo_reset(m);
        if (text) long_run(&j);
        if (!k) {
            T_CHECKF(strlen(plain) > (size_t)len && plain_next[0] != 0.0f, "the plain text: %zu bytes", strlen(plain));
            continue;
        }
        T_CHECKF(text && !strcmp(text, plain), "[n-gram k %d, %d tokens] the text is not plain decoding's", k, len);
        T_CHECKF(!memcmp(next, plain_next, sizeof(float) * (size_t)V),
                 "[n-gram k %d, %d tokens] the cache left is not plain decoding's (next logits differ)", k, len);
        free(text);
    }
    octo_session *ss[4] = {NULL};
    for (int i = 1; m && i < 4; i++) T_CHECKF((ss[i] = octo_session_new(m)) != NULL, "%s", octo_model_error(m));
    long_job together[4];
    pthread_t th[4];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 4);
    octo_reset(m);
    for (int i = 0; m && i < 4; i++) {
        together[i] = (long_job){.ss = ss[i], .m = m, .n = n, .spec = ngram, .start = &start,
                                 .text = calloc((size_t)n * 64 + 1, 1)};
        pthread_create(&th[i], NULL, long_run, &together[i]);
    }
    for (int i = 0; m && i < 4; i++) {
        pthread_join(th[i], NULL);
        T_CHECKF(together[i].text && !strcmp(together[i].text, plain),
                 "[4 sessions, n-gram, %d tokens] session %d's text is not its text alone", n, i);
        free(together[i].text);
    }
    pthread_barrier_destroy(&start);
    const octo_stats st = m ? octo_model_stats(m) : (octo_stats){0};
    printf("%d greedy tokens, 4 sessions speculating together (%lld shared verify passes): each the text alone; "
           "n-gram k 4 (%d tokens), 1 and 7 (%d) alone: the cache bit for bit plain decoding's\n",
           n, (long long)st.batch_model_verify, n - 100, n);
    /* how many depends on the measured cost of a row (verify_pays): 413-585 here, 24 on the POSIX fallback */
    T_CHECKF(st.batch_model_verify > 0, "no verify pass in shared steps: batching and speculation never met");
    for (int i = 1; i < 4; i++) octo_session_free(ss[i]);
    octo_model_free(m);
    /* other tiers: INT8 from the first entry (--kv-hot 0) and an INT8 cold tier (two tiers of one type,
     * which is no change): speculation still runs (the bound once read a re-lay at every commit there,
     * and no pass had room) and leaves plain decoding's cache */
    mo.kv.hot_tokens = 0;
    mo.kv.cold_bits = 8;
    m = octo_load_model(c, path, &mo);
    T_CHECKF(m != NULL, "%s", octo_last_error(c));
    long_job j = {.m = m, .n = n - 100, .text = plain, .next = plain_next};
    if (m) long_run(&j);
    char *text = calloc((size_t)n * 64 + 1, 1);
    j = (long_job){.m = m, .n = n - 100, .spec = ngram, .spec_k = 4, .text = text, .next = next};
    octo_reset(m);
    if (m && text) long_run(&j);
    const octo_stats s2 = m ? octo_model_stats(m) : (octo_stats){0};
    T_CHECKF(text && !strcmp(text, plain) && !memcmp(next, plain_next, sizeof(float) * (size_t)V) &&
                 s2.spec_accepted > (n - 100) / 10,
             "[hot 0, cold 8, n-gram k 4] text %s, cache %s, %d drafts accepted", text && !strcmp(text, plain) ? "equal" : "differs",
             !memcmp(next, plain_next, sizeof(float) * (size_t)V) ? "equal" : "differs", (int)s2.spec_accepted);
    printf("hot 0, cold 8: n-gram k 4, %d tokens, %d drafts accepted: plain decoding's text and cache\n", n - 100,
           (int)s2.spec_accepted);
    free(text), free(plain), free(next), free(plain_next);
    octo_model_free(m);
    octo_client_free(c);
}

/* Issue 59, 10: a grammar no text can complete (after "a", only a class of
 * surrogates, which no UTF-8 text holds) gave "a" and a stop at the end of
 * text, rc 0: the caller could not tell it from a sentence. The mask lets
 * the end through at such a dead end rather than draw from nothing; taking
 * it is now an error naming the grammar, and a grammar that is completed
 * still ends as before. */
static void test_unsatisfiable_grammar(void) {
    char path[512];
    tu_repo_model(path, sizeof path);
    octo_client *c = octo_client_new(NULL);
    octo_model *m = octo_load_model(c, path, NULL);
    T_CHECKF(m != NULL, "%s", octo_last_error(c));
    const char *grammars[] = {"root ::= \"a\" [\\uD800-\\uDFFF]", "root ::= \"a\" [b-d]"};
    for (int i = 0; m && i < 4; i++) {
        octo_generate_params gp = octo_generate_params_defaults();
        gp.grammar = grammars[i % 2];
        gp.max_tokens = 16;
        gp.temperature = 0.0f;
        gp.spec = i < 2 ? OCTO_SPEC_NONE : OCTO_SPEC_NGRAM;
        octo_stream *st = octo_generate(m, "Once", &gp);
        char text[256] = "";
        for (const char *p; st && (p = octo_stream_next(st));) strncat(text, p, sizeof text - strlen(text) - 1);
        const octo_stop_reason why = st ? octo_stream_stop_reason(st) : OCTO_STOP_ERROR;
        if (i % 2 == 0)
            T_CHECKF(why == OCTO_STOP_ERROR && octo_stream_status(st) == OCTO_ERR_INVALID_ARG &&
                         strstr(octo_stream_error(st), "cannot be completed") && !strcmp(text, "a"),
                     "[dead end, %s] stop %d, status %d '%s', text '%s'", i < 2 ? "plain" : "n-gram", (int)why,
                     st ? (int)octo_stream_status(st) : -1, st ? octo_stream_error(st) : "", text);
        else
            T_CHECKF(why == OCTO_STOP_END_OF_TURN && octo_stream_status(st) == OCTO_OK && strlen(text) == 2 && text[0] == 'a',
                     "[a sentence, %s] stop %d, text '%s'", i < 2 ? "plain" : "n-gram", (int)why, text);
        if (i == 0) printf("a grammar no text completes: '%s', then %s\n", text, octo_stream_error(st));
        octo_stream_free(st);
    }
    octo_model_free(m);
    octo_client_free(c);
}

/* octo_eval on the model's own conversation while another session streams:
 * the two share one pool, which runs one caller's jobs at a time, so every
 * eval's logits are those of the eval alone and the stream's text is its own. */
static void test_eval_beside_stream(void) {
    octo_client *c = octo_client_new(NULL);
    octo_model *m = load_sessions(c, 2);
    octo_session *ss = m ? octo_session_new(m) : NULL;
    const int V = m ? octo_model_info_get(m).n_vocab : 1;
    float *ref = malloc(sizeof(float) * (size_t)V), *got = malloc(sizeof(float) * (size_t)V);
    const int32_t ids[6] = {1, 5, 6, 7, 8, 9};
    const int n = 6;
    if (ss && ref && got && n > 0 && octo_eval(m, ids, n, ref, OCTO_LOGITS_LAST) == OCTO_OK) {
        session_job alone = {.m = m, .prompt = "The cat sat"}, beside = {.ss = ss, .m = m, .prompt = "The cat sat"};
        octo_reset(m);
        session_run(&alone);
        octo_reset(m);
        pthread_t th;
        pthread_create(&th, NULL, session_run, &beside);
        int same = 0, runs = 0;
        for (; runs < 12; runs++) {
            octo_reset(m);
            if (octo_eval(m, ids, n, got, OCTO_LOGITS_LAST) != OCTO_OK) break;
            same += !memcmp(ref, got, sizeof(float) * (size_t)V);
        }
        pthread_join(th, NULL);
        T_CHECKF(runs == 12 && same == 12 && beside.tokens == 40 && !strcmp(beside.text, alone.text),
                 "%d of %d evals exact, stream %d tokens: '%s' vs '%s'", same, runs, beside.tokens, beside.text,
                 alone.text);
    } else {
        T_CHECKF(0, "setup: %s", m ? octo_model_error(m) : octo_last_error(c));
    }
    free(ref), free(got);
    octo_session_free(ss);
    octo_model_free(m);
    octo_client_free(c);
}

/* vocab_only: tokenize without the model; evaluation refused with a reason. */
static void test_vocab_only(void) {
    octo_client *c = octo_client_new(NULL);
    octo_model_options mo = octo_model_options_defaults();
    mo.vocab_only = 1;
    octo_model *v = octo_load_model(c, g_model, &mo), *m = load(c, g_model);
    T_CHECKF(v && m, "%s", octo_last_error(c));
    if (v && m) {
        int32_t a[16], b[16];
        const int na = octo_tokenize(v, "hello world", 11, 1, 0, a, 16), nb = octo_tokenize(m, "hello world", 11, 1, 0, b, 16);
        T_CHECK(na > 1 && na == nb && !memcmp(a, b, sizeof(int32_t) * (size_t)na));
        const octo_model_info in = octo_model_info_get(v);
        T_CHECK(!strcmp(in.arch, "llama") && in.n_vocab == octo_model_info_get(m).n_vocab && in.n_layer == 0);
        float l[8];
        T_EQ_INT(octo_eval(v, a, 1, l, OCTO_LOGITS_LAST), OCTO_ERR_INVALID_ARG);
        T_CHECK(strstr(octo_model_error(v), "vocabulary only") && !octo_generate(v, "hi", NULL));
        T_CHECK(octo_model_plan_json(v, NULL, 0) == -1);
    }
    octo_model_free(v);
    octo_model_free(m);
    octo_client_free(c);
}

/* Issue 58, 10: a long prompt read alone held the model's lock for all of it, so a request that came
 * meanwhile waited for the whole prompt. Now the lone prompt lets it in between its chunks: the newcomer's
 * first token comes after a chunk or two, not after the rest of the prompt (under a third of the prompt's
 * time alone, measured in the same run); both texts are the ones each gives alone. */
typedef struct {
    octo_model *m;
    octo_session *ss;     /* NULL: the model's own conversation */
    const char *prompt;
    atomic_int chunks;    /* the prompt's progress reports so far */
    double seconds;       /* the call and the first piece */
    char text[256];
} lone_job;

static void count_chunk(void *user, int done, int total) {
    (void)done, (void)total;
    atomic_fetch_add((atomic_int *)user, 1);
}

static void *lone_run(void *arg) {
    lone_job *j = arg;
    octo_generate_params gp = octo_generate_params_defaults();
    gp.temperature = 0, gp.max_tokens = 6, gp.spec = OCTO_SPEC_NONE, gp.on_prefill = count_chunk, gp.user = &j->chunks;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    octo_stream *st = j->ss ? octo_session_generate(j->ss, j->prompt, &gp) : octo_generate(j->m, j->prompt, &gp);
    const char *p = st ? octo_stream_next(st) : NULL;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    j->seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    snprintf(j->text, sizeof j->text, "%s", p ? p : "");
    while (p && (p = octo_stream_next(st))) strncat(j->text, p, sizeof j->text - strlen(j->text) - 1);
    octo_stream_free(st);
    return NULL;
}

static void test_lone_prompt_yields(void) {
    char path[512];
    tu_tmp_path(path, sizeof path, "long-prompt.gguf");
    synth_opts o = synth_defaults();
    o.n_ctx = 4096, o.n_embd = 256, o.n_ff = 512, o.n_head = 4, o.n_head_kv = 4, o.n_layer = 4;
    octo_client *c = octo_client_new(NULL);
    octo_model_options mo = octo_model_options_defaults();
    mo.auto_draft = OCTO_DRAFT_NONE, mo.max_sessions = 2, mo.n_ctx = 4096;
    octo_model *m = write_model(path, o) ? octo_load_model(c, path, &mo) : NULL;
    octo_session *ss = m ? octo_session_new(m) : NULL;
    T_CHECKF(m && ss, "%s", m ? octo_model_error(m) : octo_last_error(c));
    static char long_prompt[3001];
    for (int i = 0; i < 3000; i++) long_prompt[i] = (char)('a' + (i * 7 + i / 13) % 26);
    lone_job a_alone = {.m = m, .prompt = long_prompt}, b_alone = {.m = m, .ss = ss, .prompt = "Once upon"};
    lone_job a = a_alone, b = b_alone;
    if (m && ss) {
        lone_run(&a_alone);
        lone_run(&b_alone);
        octo_reset(m), octo_session_reset(ss);
        pthread_t th;
        pthread_create(&th, NULL, lone_run, &a);
        while (atomic_load(&a.chunks) < 1) sched_yield(); /* the long prompt is being read */
        lone_run(&b);
        pthread_join(th, NULL);
    }
    printf("a 3000-token prompt alone: %.3f s; a request arriving during it: first token in %.3f s\n",
           a_alone.seconds, b.seconds);
    T_CHECKF(b.seconds < a_alone.seconds / 3, "the newcomer waited %.3f s behind a prompt of %.3f s", b.seconds,
             a_alone.seconds);
    T_CHECKF(!strcmp(a.text, a_alone.text) && !strcmp(b.text, b_alone.text), "'%s' / '%s' vs '%s' / '%s'", a.text,
             b.text, a_alone.text, b_alone.text);
    octo_session_free(ss);
    octo_model_free(m);
    octo_client_free(c);
    remove(path);
}

int main(void) {
    tu_tmp_path(g_model, sizeof g_model, "reliability.gguf");
    synth_opts o = synth_defaults();
    o.n_ctx = 256;
    if (!write_model(g_model, o)) return 1;
    test_size_bounds();
    test_client_lifetime();
    test_shared_client();
    test_stats_during_stream();
    test_trim_during_stream(false);
    test_trim_during_stream(true);
    test_shared_tensor_bytes();
    test_non_finite();
    test_nan_scales();
    test_size_query();
    test_long_pieces();
    test_escaped_errors();
    test_truncate_as_never_seen();
    test_sessions();
    test_batched_sessions(1);
    test_batched_sessions(0);
    test_long_speculation_exact();
    test_unsatisfiable_grammar();
    test_eval_beside_stream();
    test_vocab_only();
    test_lone_prompt_yields();
    remove(g_model);
    T_DONE();
}
