/*
 * test_upcycle — octo upcycle (src/convert/):
 *
 *   - the splits are partitions: every neuron in exactly one expert, at most
 *     m per expert, the rest padding; contiguous keeps runs, random is
 *     seeded; cluster finds three planted groups of co-firing neurons that a
 *     random split would scatter;
 *   - the router's least squares recover a linear map, and its spread is
 *     the largest RMS score difference measured directly;
 *   - exactness: with the uniform router and K = E the upcycled model's
 *     logits equal the dense model's within 1e-4 (synthetic F32, E not
 *     dividing n_ff, with and without a shared expert, and stories260K); a
 *     Q8_0 qwen2 model within its re-quantization of the down rows;
 *   - the file: Mixtral layout, the experts' types (a Q4_K down of 128-value
 *     rows becomes Q5_0, gate/up keep Q4_K), the metadata;
 *   - bad input: an MoE model, K > E, E > n_ff, no, empty or too short
 *     text, an architecture octo does not run;
 *   - quality on stories260K: the default (cluster) split's KLD is at least
 *     5 % below the random and contiguous splits' at E 8, K 4.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "convert/upcycle.h"
#include "convert/upcycle_internal.h"
#include "core/gguf.h"
#include "core/quant.h"
#include "model/model.h"
#include "model/synth.h"
#include "runtime/session.h"
#include "t.h"
#include "util.h"

static bool is_partition(const int32_t *slot, int n_ff, int E, int m) {
    int *seen = calloc((size_t)n_ff, sizeof(int)), pads = 0;
    bool ok = true;
    for (int e = 0; e < E; e++)
        for (int j = 0; j < m; j++) {
            const int32_t i = slot[(size_t)e * m + j];
            if (i < 0) pads++;
            else if (i >= n_ff || seen[i]++) ok = false;
        }
    for (int i = 0; i < n_ff; i++) ok &= seen[i] == 1;
    free(seen);
    return ok && pads == E * m - n_ff;
}

static void test_splits(void) {
    enum { N = 97, E = 8, M = 13 };
    int32_t slot[E * M], again[E * M];
    err_t err = {0};
    T_EQ_INT(upcycle_split_layer(UPCYCLE_SPLIT_CONTIGUOUS, NULL, 0, N, E, M, 1, slot, &err), ERR_OK);
    T_CHECK(is_partition(slot, N, E, M));
    bool runs = true;
    for (int e = 0; e < E; e++)
        for (int j = 1; j < M && slot[e * M + j] >= 0; j++) runs &= slot[e * M + j] == slot[e * M + j - 1] + 1;
    T_CHECK(runs);
    T_EQ_INT(slot[M - 1], -1); /* 7 zero neurons over 8 experts: the first is one short */
    T_EQ_INT(upcycle_split_layer(UPCYCLE_SPLIT_RANDOM, NULL, 0, N, E, M, 7, slot, &err), ERR_OK);
    T_CHECK(is_partition(slot, N, E, M));
    T_EQ_INT(upcycle_split_layer(UPCYCLE_SPLIT_RANDOM, NULL, 0, N, E, M, 7, again, &err), ERR_OK);
    T_CHECK(!memcmp(slot, again, sizeof slot));
    T_EQ_INT(upcycle_split_layer(UPCYCLE_SPLIT_RANDOM, NULL, 0, N, E, M, 8, again, &err), ERR_OK);
    T_CHECK(memcmp(slot, again, sizeof slot) != 0);
    T_EQ_INT(upcycle_split_layer(UPCYCLE_SPLIT_CLUSTER, NULL, 0, N, E, M, 1, slot, &err), ERR_INVALID_ARG);
    T_EQ_INT(upcycle_split_layer(UPCYCLE_SPLIT_CONTIGUOUS, NULL, 0, N, E, 12, 1, slot, &err), ERR_INVALID_ARG);
}

/* 30 neurons in three groups (neuron i in group i % 3, so runs would mix
 * them); group g fires on tokens t % 3 == g only. */
static void test_cluster_finds_groups(void) {
    enum { N = 30, S = 60, E = 3, M = 10 };
    float feat[S * N];
    rng_t r = {42};
    for (int s = 0; s < S; s++)
        for (int i = 0; i < N; i++)
            feat[s * N + i] = (s % 3 == i % 3 ? 1.0f : 0.0f) + 0.05f * (float)rng_uniform(&r);
    int32_t slot[E * M];
    err_t err = {0};
    T_EQ_INT(upcycle_split_layer(UPCYCLE_SPLIT_CLUSTER, feat, S, N, E, M, 3, slot, &err), ERR_OK);
    T_CHECK(is_partition(slot, N, E, M));
    bool pure = true;
    for (int e = 0; e < E; e++)
        for (int j = 1; j < M; j++) pure &= slot[e * M + j] % 3 == slot[e * M] % 3;
    T_CHECK(pure);
    T_EQ_INT(upcycle_split_layer(UPCYCLE_SPLIT_RANDOM, NULL, 0, N, E, M, 3, slot, &err), ERR_OK);
    pure = true;
    for (int e = 0; e < E; e++)
        for (int j = 1; j < M; j++) pure &= slot[e * M + j] % 3 == slot[e * M] % 3;
    T_CHECK(!pure);
}

static void test_lsq(void) {
    enum { NI = 5, NO = 3, T = 400 };
    float W[NO * NI], got[NO * NI], x[NI], y[NO];
    rng_t r = {9};
    for (int i = 0; i < NO * NI; i++) W[i] = (float)rng_gauss(&r);
    upcycle_lsq *q = upcycle_lsq_new(NI, NO);
    double worst = 0.0, sq[NO][NO] = {{0}};
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < NI; i++) x[i] = (float)rng_gauss(&r);
        for (int e = 0; e < NO; e++) {
            y[e] = 0.0f;
            for (int i = 0; i < NI; i++) y[e] += W[e * NI + i] * x[i];
        }
        for (int e = 0; e < NO; e++)
            for (int f = 0; f < NO; f++) sq[e][f] += (double)(y[e] - y[f]) * (y[e] - y[f]);
        upcycle_lsq_add(q, x, y, 1);
    }
    err_t err = {0};
    T_EQ_INT(upcycle_lsq_solve(q, got, &err), ERR_OK);
    double max_err = 0.0;
    for (int i = 0; i < NO * NI; i++) max_err = fmax(max_err, fabs(got[i] - W[i]));
    T_CHECKF(max_err < 5e-3, "fit off by %g", max_err); /* the ridge's bias only */
    for (int e = 0; e < NO; e++)
        for (int f = 0; f < NO; f++) worst = fmax(worst, sqrt(sq[e][f] / T));
    T_NEAR(upcycle_lsq_spread(q, W), worst, 1e-4 * worst);
    upcycle_lsq_free(q);
    upcycle_lsq *empty = upcycle_lsq_new(NI, NO);
    T_EQ_INT(upcycle_lsq_solve(empty, got, &err), ERR_BAD_VALUE);
    upcycle_lsq_free(empty);
}

/* max |logit difference| of two models over the same tokens */
static double logit_gap(const char *a, const char *b, const int32_t *tok, int n) {
    model *ma = NULL, *mb = NULL;
    session *sa = NULL, *sb = NULL;
    err_t err = {0};
    double gap = INFINITY;
    if (model_load(a, &ma, &err) || model_load(b, &mb, &err) || session_new(ma, n, QT_F32, 1, &sa, &err) ||
        session_new(mb, n, QT_F32, 1, &sb, &err)) {
        T_CHECKF(0, "%s", err.msg);
    } else {
        const int V = ma->hp.n_vocab;
        float *la = malloc(sizeof(float) * (size_t)n * V), *lb = malloc(sizeof(float) * (size_t)n * V);
        if (!session_eval(sa, tok, n, true, la, &err) && !session_eval(sb, tok, n, true, lb, &err)) {
            gap = 0.0;
            for (size_t i = 0; i < (size_t)n * V; i++) gap = fmax(gap, fabs(la[i] - lb[i]));
        }
        free(la), free(lb);
    }
    session_free(sa), session_free(sb);
    model_free(ma), model_free(mb);
    return gap;
}

static upcycle_opts exact_opts(const char *in, const char *out, int E) {
    upcycle_opts o = upcycle_defaults();
    o.input = in;
    o.output = out;
    o.n_expert = o.n_expert_used = E;
    o.split = UPCYCLE_SPLIT_RANDOM;
    o.router = UPCYCLE_ROUTER_UNIFORM;
    o.n_threads = 1;
    return o;
}

/* qwen2 (attention biases, NeoX RoPE) upcycles exactly too */
static void test_exact_qwen2(void) {
    char dense[512], moe[512];
    tu_tmp_path(dense, sizeof dense, "upcycle_qwen2.gguf");
    tu_tmp_path(moe, sizeof moe, "upcycle_qwen2_moe.gguf");
    synth_opts s = synth_defaults();
    s.arch = "qwen2";
    s.type = QT_Q8_0; /* m = 32 below: the Q8_0 down rows are quantized again */
    s.n_ff = 128;
    err_t err = {0};
    T_EQ_INT(synth_write(&s, dense, &err), ERR_OK);
    upcycle_opts o = exact_opts(dense, moe, 4);
    upcycle_report rep;
    T_EQ_INT(upcycle_run(&o, &rep, &err), ERR_OK);
    T_EQ_INT(rep.down_type_out, QT_Q8_0);
    const int32_t tok[] = {1, 40, 77, 3, 290, 15, 15, 100};
    const double gap = logit_gap(dense, moe, tok, 8);
    /* not 1e-4: the down rows x 4 are rounded to Q8_0 again in new blocks */
    T_CHECKF(gap < 2e-2, "qwen2 Q8_0, uniform router, K = E: logits differ by %g", gap);
    printf("qwen2 Q8_0 upcycled with K = E: logits within %.2g of the dense model's\n", gap);
}

static void test_exact_synthetic(void) {
    char dense[512], moe[512];
    tu_tmp_path(dense, sizeof dense, "upcycle_dense.gguf");
    tu_tmp_path(moe, sizeof moe, "upcycle_moe.gguf");
    synth_opts s = synth_defaults(); /* FFN 96: 5 experts of 20, 4 of them zero */
    s.seed = 5;
    err_t err = {0};
    T_EQ_INT(synth_write(&s, dense, &err), ERR_OK);
    upcycle_opts o = exact_opts(dense, moe, 5);
    upcycle_report rep;
    T_EQ_INT(upcycle_run(&o, &rep, &err), ERR_OK);
    T_EQ_INT(rep.n_ff_expert, 20);
    T_EQ_INT(rep.n_pad, 4);
    T_EQ_INT(rep.heldout_tokens, 0);
    const int32_t tok[] = {1, 40, 77, 3, 290, 15, 15, 100, 260, 7, 8, 9};
    const double gap = logit_gap(dense, moe, tok, 12);
    T_CHECKF(gap < 1e-4, "uniform router, K = E: logits differ by %g", gap);
    o.n_expert_used = 2; /* K < E drops neurons: not the same function */
    T_EQ_INT(upcycle_run(&o, &rep, &err), ERR_OK);
    T_CHECK(logit_gap(dense, moe, tok, 12) > 1e-2);
    /* a shared expert of the 16 most active neurons (patterns from a text), the other 80 in 5 experts of 16 */
    static char text[6000];
    for (size_t i = 0; i + 1 < sizeof text; i++) text[i] = (char)('a' + (i * 7 + i / 13) % 26);
    o.text = text;
    o.text_len = sizeof text - 1;
    o.n_expert_used = 5;
    o.n_shared = 16;
    T_EQ_INT(upcycle_run(&o, &rep, &err), ERR_OK);
    T_EQ_INT(rep.n_shared, 16);
    T_EQ_INT(rep.n_ff_expert, 16);
    T_EQ_INT(rep.n_pad, 0);
    T_CHECK(rep.heldout_tokens > 0 && rep.kld_mean < 1e-6);
    const double gap_sh = logit_gap(dense, moe, tok, 12);
    T_CHECKF(gap_sh < 1e-4, "shared expert, uniform router, K = E: logits differ by %g", gap_sh);
    model *mm = NULL;
    T_EQ_INT(model_load(moe, &mm, &err), ERR_OK);
    if (mm) T_EQ_INT(mm->hp.n_ff_shexp, 16);
    model_free(mm);
    o.n_shared = 92; /* leaves 4 neurons for 5 experts */
    T_EQ_INT(upcycle_run(&o, &rep, &err), ERR_INVALID_ARG);
    T_CHECKF(strstr(err.msg, "--shared 92") != NULL, "%s", err.msg);
}

static void test_file(void) {
    char dense[512], moe[512];
    tu_tmp_path(dense, sizeof dense, "upcycle_q4k.gguf");
    tu_tmp_path(moe, sizeof moe, "upcycle_q4k_moe.gguf");
    synth_opts s = synth_defaults();
    s.n_embd = 256;
    s.n_ff = 512;
    s.type = QT_Q4_K;
    s.embd_type = s.output_type = QT_F32;
    err_t err = {0};
    T_EQ_INT(synth_write(&s, dense, &err), ERR_OK);
    upcycle_opts o = exact_opts(dense, moe, 4); /* m = 128: Q4_K's 256 do not fit */
    o.n_expert_used = 2;
    o.split = UPCYCLE_SPLIT_CONTIGUOUS;
    upcycle_report rep;
    T_EQ_INT(upcycle_run(&o, &rep, &err), ERR_OK);
    T_EQ_INT(rep.down_type_out, QT_Q5_0);
    T_EQ_INT(rep.n_retyped, 2);
    gguf_ctx *g = NULL;
    T_EQ_INT(gguf_open(moe, &g, &err), ERR_OK);
    if (!g) return;
    const gguf_tensor *gate = gguf_find_tensor(g, "blk.1.ffn_gate_exps.weight");
    const gguf_tensor *down = gguf_find_tensor(g, "blk.1.ffn_down_exps.weight");
    const gguf_tensor *router = gguf_find_tensor(g, "blk.1.ffn_gate_inp.weight");
    T_CHECK(gate && down && router && !gguf_find_tensor(g, "blk.1.ffn_gate.weight"));
    if (gate && down && router) {
        T_EQ_INT(gate->type, QT_Q4_K);
        T_CHECK(gate->ne[0] == 256 && gate->ne[1] == 128 && gate->ne[2] == 4);
        T_EQ_INT(down->type, QT_Q5_0);
        T_CHECK(down->ne[0] == 128 && down->ne[1] == 256 && down->ne[2] == 4);
        T_EQ_INT(router->type, QT_F32);
    }
    uint32_t v = 0;
    gguf_str str;
    T_CHECK(gguf_get_u32(g, "llama.expert_count", &v) && v == 4);
    T_CHECK(gguf_get_u32(g, "llama.expert_used_count", &v) && v == 2);
    T_CHECK(gguf_get_u32(g, "llama.feed_forward_length", &v) && v == 128);
    T_CHECK(gguf_get_str(g, "octo.upcycle.split", &str) && gguf_str_eq(str, "contiguous"));
    T_CHECK(gguf_get_str(g, "octo.upcycle.router", &str) && gguf_str_eq(str, "uniform"));
    T_CHECK(gguf_get_str(g, "octo.upcycle.combine", &str) && gguf_str_eq(str, "sum"));
    T_CHECK(gguf_get_str(g, "octo.upcycle.source", &str) && gguf_str_eq(str, "octo synthetic"));
    T_CHECK(gguf_get_str(g, "tokenizer.ggml.model", &str) && gguf_str_eq(str, "llama"));
    gguf_close(g);
    /* the upcycled model is MoE now: upcycling it again is refused */
    o.input = moe;
    o.output = dense;
    T_EQ_INT(upcycle_run(&o, &rep, &err), ERR_INVALID_ARG);
    T_CHECKF(strstr(err.msg, "already a Mixture-of-Experts") != NULL, "%s", err.msg);
}

static void test_bad_input(void) {
    char dense[512], moe[512];
    tu_tmp_path(dense, sizeof dense, "upcycle_bad.gguf");
    tu_tmp_path(moe, sizeof moe, "upcycle_bad_moe.gguf");
    synth_opts s = synth_defaults();
    err_t err = {0};
    T_EQ_INT(synth_write(&s, dense, &err), ERR_OK);
    upcycle_report rep;
    upcycle_opts o = exact_opts(dense, moe, 4);
    o.n_expert_used = 5;
    T_EQ_INT(upcycle_run(&o, &rep, &err), ERR_INVALID_ARG); /* K > E */
    T_CHECKF(strstr(err.msg, "--experts-used 5") != NULL, "%s", err.msg);
    o = exact_opts(dense, moe, 97); /* FFN 96 */
    T_EQ_INT(upcycle_run(&o, &rep, &err), ERR_INVALID_ARG);
    T_CHECKF(strstr(err.msg, "96 FFN neurons") != NULL, "%s", err.msg);
    o = exact_opts(dense, moe, 4);
    o.split = UPCYCLE_SPLIT_CLUSTER; /* no text */
    T_EQ_INT(upcycle_run(&o, &rep, &err), ERR_INVALID_ARG);
    T_CHECKF(strstr(err.msg, "the cluster split learns from a calibration text and none was given") != NULL, "%s", err.msg);
    o.text = "a short story.";
    o.text_len = strlen(o.text);
    T_EQ_INT(upcycle_run(&o, &rep, &err), ERR_INVALID_ARG);
    T_CHECKF(strstr(err.msg, "too short") != NULL, "%s", err.msg);
    o.text = "";
    o.text_len = 0;
    T_EQ_INT(upcycle_run(&o, &rep, &err), ERR_INVALID_ARG);
    T_CHECKF(strstr(err.msg, "gives 0 tokens") != NULL, "%s", err.msg);
    /* an architecture octo does not run */
    gguf_writer *w = gguf_writer_new();
    gguf_writer_set_str(w, "general.architecture", "mamba");
    T_EQ_INT(gguf_writer_write(w, dense, NULL, NULL, &err), ERR_OK);
    gguf_writer_free(w);
    o = exact_opts(dense, moe, 4);
    T_EQ_INT(upcycle_run(&o, &rep, &err), ERR_UNSUPPORTED_ARCH);
    T_CHECKF(strstr(err.msg, "mamba") != NULL, "%s", err.msg);
    /* one octo runs but upcycle does not split (GeGLU, post-norms) */
    const char *data = tu_data_dir();
    char g2[600];
    if (data) {
        snprintf(g2, sizeof g2, "%s/golden-archs/models/synth-gemma2-f32.gguf", data);
        o = exact_opts(g2, moe, 4);
        T_EQ_INT(upcycle_run(&o, &rep, &err), ERR_UNSUPPORTED_ARCH);
        T_CHECKF(strstr(err.msg, "not 'gemma2'") != NULL, "%s", err.msg);
    }
    o = exact_opts("/nonexistent.gguf", moe, 4);
    T_CHECK(upcycle_run(&o, &rep, &err) != ERR_OK);
}

static char *read_text(const char *path, size_t *len) { return (char *)tu_read_file(path, len); }

/* stories260K (the clone's own model): exact with K = E; with ../shared's text, the splits' KLD. */
static void test_stories(const char *dir) {
    char model_path[512], text_path[512], moe[512];
    tu_repo_model(model_path, sizeof model_path);
    snprintf(text_path, sizeof text_path, "%s/text/tinystories-valid-head.txt", dir ? dir : ".");
    tu_tmp_path(moe, sizeof moe, "upcycle_stories.gguf");
    upcycle_opts o = exact_opts(model_path, moe, 8);
    upcycle_report rep;
    err_t err = {0};
    T_EQ_INT(upcycle_run(&o, &rep, &err), ERR_OK);
    const int32_t tok[] = {1, 403, 407, 261, 378, 436, 297, 9, 5, 443, 283, 296, 264, 300, 11, 290};
    const double gap = logit_gap(model_path, moe, tok, 16);
    T_CHECKF(gap < 1e-4, "stories260K, uniform router, K = E: logits differ by %g", gap);
    size_t len = 0;
    char *text = dir ? read_text(text_path, &len) : NULL;
    if (!text) {
        printf("note: no ../shared TinyStories text: the splits' KLD on stories260K was not measured\n");
        remove(moe);
        return;
    }
    double kld[3];
    for (int s = 0; s < 3; s++) {
        o = upcycle_defaults();
        o.input = model_path;
        o.output = moe;
        o.n_expert = 8;
        o.n_expert_used = 4;
        o.split = (upcycle_split)s;
        o.text = text;
        o.text_len = len;
        o.calib_tokens = 16384;
        o.heldout_tokens = 2048;
        T_EQ_INT(upcycle_run(&o, &rep, &err), ERR_OK);
        T_EQ_INT(rep.heldout_tokens, 2048);
        kld[s] = rep.kld_mean;
    }
    printf("stories260K E 8 K 4 KLD: cluster %.4f, random %.4f, contiguous %.4f\n", kld[0], kld[1], kld[2]);
    T_CHECK(kld[0] > 0.0 && kld[0] < 0.95 * kld[1] && kld[0] < 0.95 * kld[2]);
    free(text);
}

int main(void) {
    test_splits();
    test_cluster_finds_groups();
    test_lsq();
    test_exact_synthetic();
    test_exact_qwen2();
    test_file();
    test_bad_input();
    test_stories(tu_data_dir());
    T_DONE();
}
