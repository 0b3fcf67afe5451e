/*
 * test_quantize — octo quantize (convert/quantize.h):
 *
 *   - every plain type: each weight matrix written in it (norms F32, the
 *     MoE router F32), the model loads, and its logits stay within a bound
 *     of the F32 model's (mean KL divergence over 48 tokens, per type);
 *   - a matrix whose rows the type cannot hold takes the nearest that can,
 *     and the report says so;
 *   - the q4_k_m mix puts Q6_K where its rule says (output; attn_v and
 *     ffn_down in llama.cpp's "more bits" layers);
 *   - a quantized input converts too; two runs give byte-identical files;
 *   - importance: with unit weights a K-quant's weighted rounding is the
 *     plain one, byte for byte; with random weights every type's weighted
 *     error is at most the plain rounding's and lower on the whole; on the
 *     trained stories260K (when the data folder is there) a calibration text
 *     lowers Q4_0's and Q4_1's KL divergence on held-out text;
 *   - --types-from takes each tensor's type from another file;
 *   - bad input: unknown type, missing input, an output that cannot be
 *     written (nothing left behind), an empty calibration text.
 */
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "convert/quantize.h"
#include "core/gguf.h"
#include "core/quant.h"
#include "model/model.h"
#include "model/synth.h"
#include "runtime/session.h"
#include "t.h"
#include "util.h"

#define N_TOK 48

static void synth(const char *path, int n_ff, int experts, uint32_t type) {
    synth_opts o = synth_defaults();
    o.type = type, o.n_embd = 256, o.n_head = 4, o.n_head_kv = 2, o.n_ff = n_ff, o.n_vocab = 320, o.n_layer = 2;
    o.n_ctx = 128, o.seed = 21, o.n_expert = experts, o.n_expert_used = experts ? 2 : 0;
    err_t err = {0};
    T_CHECKF(synth_write(&o, path, &err) == ERR_OK, "%s", err.msg);
}

static err_code quantize(const char *in, const char *out, const char *type, quantize_report *rep, err_t *err) {
    const quantize_opts o = {.input = in, .output = out, .type = type, .n_threads = 2};
    return quantize_run(&o, rep, err);
}

/* Logits of N_TOK fixed tokens, every row. */
static float *logits_of(const char *path) {
    model *m = NULL;
    err_t err = {0};
    if (model_load(path, &m, &err)) {
        T_CHECKF(0, "%s", err.msg);
        return NULL;
    }
    int32_t tok[N_TOK];
    for (int i = 0; i < N_TOK; i++) tok[i] = 1 + (i * 37 + 5) % (m->hp.n_vocab - 1);
    float *rows = malloc(sizeof(float) * N_TOK * (size_t)m->hp.n_vocab);
    session *s = NULL;
    T_EQ_INT(session_new(m, N_TOK, QT_F32, 0, &s, &err), ERR_OK);
    if (s) T_EQ_INT(session_eval(s, tok, N_TOK, true, rows, &err), ERR_OK);
    session_free(s);
    model_free(m);
    return rows;
}

static double mean_kld(const float *p, const float *q, int V) {
    double total = 0;
    for (int r = 0; r < N_TOK; r++) {
        const float *a = p + (size_t)r * V, *b = q + (size_t)r * V;
        double ma = a[0], mb = b[0], za = 0, zb = 0, k = 0;
        for (int i = 1; i < V; i++) ma = a[i] > ma ? a[i] : ma, mb = b[i] > mb ? b[i] : mb;
        for (int i = 0; i < V; i++) za += exp(a[i] - ma), zb += exp(b[i] - mb);
        for (int i = 0; i < V; i++) {
            const double la = a[i] - ma - log(za), lb = b[i] - mb - log(zb);
            k += exp(la) * (la - lb);
        }
        total += k;
    }
    return total / N_TOK;
}

static uint32_t type_in(const char *path, const char *tensor) {
    gguf_ctx *g = NULL;
    err_t err = {0};
    if (gguf_open(path, &g, &err)) return 0xFFFF;
    const gguf_tensor *t = gguf_find_tensor(g, tensor);
    const uint32_t ty = t ? t->type : 0xFFFF;
    gguf_close(g);
    return ty;
}

static void test_plain_types(const char *f32, const char *out) {
    static const struct {
        const char *name;
        uint32_t type;
        double max_kld;
    } types[] = {
        /* bounds: 1.5x what this model measured (deterministic: seeded weights, reference quantizers) */
        {"f16", QT_F16, 1e-6},    {"bf16", QT_BF16, 3e-5},  {"q8_0", QT_Q8_0, 4.5e-4}, {"q6_k", QT_Q6_K, 3e-3},
        {"q5_1", QT_Q5_1, 1.4e-2}, {"q5_0", QT_Q5_0, 1.6e-2}, {"q5_k", QT_Q5_K, 1.1e-2}, {"q4_1", QT_Q4_1, 5e-2},
        {"q4_0", QT_Q4_0, 7e-2},  {"q4_k", QT_Q4_K, 4.2e-2}, {"q3_k", QT_Q3_K, 0.14},   {"q2_k", QT_Q2_K, 0.42},
    };
    float *ref = logits_of(f32);
    double kld_of[sizeof types / sizeof *types] = {0};
    for (size_t i = 0; ref && i < sizeof types / sizeof *types; i++) {
        quantize_report rep;
        err_t err = {0};
        T_CHECKF(quantize(f32, out, types[i].name, &rep, &err) == ERR_OK, "%s: %s", types[i].name, err.msg);
        T_EQ_INT(type_in(out, "blk.1.ffn_down.weight"), types[i].type);
        T_EQ_INT(type_in(out, "output.weight"), types[i].type);
        T_EQ_INT(type_in(out, "token_embd.weight"), types[i].type);
        T_EQ_INT(type_in(out, "blk.0.attn_norm.weight"), QT_F32);
        T_EQ_INT(rep.n_fallback, 0);
        float *got = logits_of(out);
        const double kld = got ? mean_kld(ref, got, 320) : INFINITY;
        printf("%-5s %6.2f MiB -> %6.2f MiB, mean KLD against F32 %.3g nats (bound %.3g)\n", types[i].name,
               rep.bytes_in / 1048576.0, rep.bytes_out / 1048576.0, kld, types[i].max_kld);
        T_CHECKF(kld < types[i].max_kld && kld >= 0, "%s: KLD %.4g", types[i].name, kld);
        kld_of[i] = kld;
        free(got);
    }
    /* fewer bits cost more; a K-quant beats the plain type of its size */
    T_CHECK(kld_of[0] < kld_of[2] && kld_of[2] < kld_of[3] && kld_of[3] < kld_of[6] && kld_of[6] < kld_of[9] &&
            kld_of[9] < kld_of[10] && kld_of[10] < kld_of[11]);
    T_CHECK(kld_of[6] < kld_of[5] && kld_of[9] < kld_of[8] && kld_of[4] < kld_of[5] && kld_of[7] < kld_of[8]);
    free(ref);
}

/* Weighted squared error of a row's round trip through type t. */
static double wsse(uint32_t t, const float *x, const float *w, int n, bool weighted) {
    uint8_t q[4096];
    float y[1024];
    if (weighted) quant_traits_of(t)->quantize_imp(x, q, n, w);
    else quant_quantize_row(t, x, q, n);
    quant_dequantize_row(t, q, y, n);
    double e = 0.0;
    for (int i = 0; i < n; i++) e += w[i] * (double)(x[i] - y[i]) * (x[i] - y[i]);
    return e;
}

static void test_importance_rounding(void) {
    const uint32_t types[] = {QT_Q4_0, QT_Q4_1, QT_Q5_0, QT_Q5_1, QT_Q2_K, QT_Q3_K, QT_Q4_K, QT_Q5_K, QT_Q6_K};
    enum { N = 512 };
    float x[N], w[N], ones[N];
    uint32_t seed = 5;
    for (int i = 0; i < N; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = ((float)(seed >> 8) / 16777216.0f - 0.5f) * (i % 61 == 0 ? 8.0f : 1.0f); /* a few outliers */
        seed = seed * 1664525u + 1013904223u;
        const float u = (float)(seed >> 8) / 16777216.0f;
        w[i] = u * u * u * 10.0f; /* most columns matter little, some a lot */
        ones[i] = 1.0f;
    }
    for (size_t k = 0; k < sizeof types / sizeof *types; k++) {
        const uint32_t t = types[k];
        const quant_traits *tr = quant_traits_of(t);
        T_CHECKF(tr->quantize_imp != NULL, "%s has no weighted rounding", tr->name);
        if (!tr->quantize_imp) continue;
        if (tr->block_size == 256) {
            uint8_t a[4096], b[4096];
            tr->quantize(x, a, N);
            tr->quantize_imp(x, b, N, ones);
            T_CHECKF(!memcmp(a, b, quant_row_bytes(t, N)), "%s: unit weights change the rounding", tr->name);
        }
        double plain = 0, weighted = 0;
        for (int r = 0; r < 8; r++) { /* eight rows: the same values, rotated */
            float xr[N];
            for (int i = 0; i < N; i++) xr[i] = x[(i + 67 * r) % N];
            const double p = wsse(t, xr, w, N, false), q = wsse(t, xr, w, N, true);
            T_CHECKF(q <= p * (1 + 1e-9) || tr->block_size == 256, "%s row %d: weighted %.6g > plain %.6g", tr->name, r, q, p);
            plain += p, weighted += q;
        }
        printf("importance %-5s weighted error %.4g of the plain rounding's\n", tr->name, weighted / plain);
        T_CHECKF(weighted < plain * 0.97, "%s: weighted %.6g, plain %.6g", tr->name, weighted, plain);
    }
}

/* stories260K: a calibration text from the end of the text, KLD on its start. */
static void test_importance_trained(const char *out) {
    const char *data = tu_data_dir();
    char model[600], text_path[600];
    if (!data) {
        printf("importance on stories260K: skipped (no data folder)\n");
        return;
    }
    snprintf(model, sizeof model, "%s/models/stories260K.gguf", data);
    snprintf(text_path, sizeof text_path, "%s/text/tinystories-valid-head.txt", data);
    size_t n = 0;
    char *text = (char *)tu_read_file(text_path, &n);
    T_CHECK(text && n > 200000);
    if (!text || n <= 200000) return;
    float *ref = logits_of(model);
    const char *types[] = {"q4_0", "q4_1"};
    for (int k = 0; k < 2; k++) {
        double kld[2];
        for (int with = 0; with < 2; with++) {
            quantize_opts o = {.input = model, .output = out, .type = types[k], .n_threads = 2};
            if (with) o.calib_text = text + n - 120000, o.calib_len = 120000, o.calib_tokens = 4096;
            quantize_report rep;
            err_t err = {0};
            T_EQ_INT(quantize_run(&o, &rep, &err), ERR_OK);
            if (with) T_CHECKF(rep.n_weighted >= 25 && rep.calib_tokens == 4096, "%d weighted, %d tokens", rep.n_weighted, rep.calib_tokens);
            float *l = logits_of(out);
            kld[with] = l && ref ? mean_kld(ref, l, 512) : 1e9;
            free(l);
        }
        printf("stories260K %s: KLD %.4f plain, %.4f with the importance matrix\n", types[k], kld[0], kld[1]);
        T_CHECKF(kld[1] < kld[0] * 0.9, "%s: %.4f with, %.4f without", types[k], kld[1], kld[0]);
    }
    free(ref);
    free(text);
}

int main(void) {
    char f32[512], out[512], out2[512], q8[512], moe[512];
    tu_tmp_path(f32, sizeof f32, "quant-f32.gguf");
    tu_tmp_path(out, sizeof out, "quant-out.gguf");
    tu_tmp_path(out2, sizeof out2, "quant-out2.gguf");
    tu_tmp_path(q8, sizeof q8, "quant-q8.gguf");
    tu_tmp_path(moe, sizeof moe, "quant-moe.gguf");
    synth(f32, 512, 0, QT_F32);
    test_plain_types(f32, out);

    quantize_report rep;
    err_t err = {0};
    /* q4_k_m: output Q6_K; attn_v and ffn_down Q6_K in layer 1 of 2 (7/8 of the layers on), Q4_K in layer 0 */
    T_EQ_INT(quantize(f32, out, "q4_k_m", &rep, &err), ERR_OK);
    T_EQ_INT(type_in(out, "output.weight"), QT_Q6_K);
    T_EQ_INT(type_in(out, "blk.0.attn_v.weight"), QT_Q4_K);
    T_EQ_INT(type_in(out, "blk.1.attn_v.weight"), QT_Q6_K);
    T_EQ_INT(type_in(out, "blk.1.ffn_down.weight"), QT_Q6_K);
    T_EQ_INT(type_in(out, "blk.1.attn_q.weight"), QT_Q4_K);
    /* the same input twice: the same bytes */
    T_EQ_INT(quantize(f32, out2, "q4_k_m", &rep, &err), ERR_OK);
    size_t na, nb;
    unsigned char *a = tu_read_file(out, &na), *b = tu_read_file(out2, &nb);
    T_CHECK(a && b && na == nb && !memcmp(a, b, na));
    free(a), free(b);

    /* rows of 96 cannot hold Q4_K's 256: those matrices (ffn_down) become Q5_0, and the report says so */
    synth(f32, 96, 0, QT_F32);
    T_EQ_INT(quantize(f32, out, "q4_k", &rep, &err), ERR_OK);
    printf("fallback: %d matrices, first: %s\n", rep.n_fallback, rep.fallback);
    T_EQ_INT(rep.n_fallback, 2);
    T_CHECK(strstr(rep.fallback, "ffn_down") && strstr(rep.fallback, "q5_0"));
    T_EQ_INT(type_in(out, "blk.0.ffn_down.weight"), QT_Q5_0);
    T_EQ_INT(type_in(out, "blk.0.ffn_up.weight"), QT_Q4_K);

    /* a quantized input, an MoE model: experts converted, the router kept F32 */
    synth(moe, 256, 4, QT_Q8_0);
    T_EQ_INT(quantize(moe, out, "q4_0", &rep, &err), ERR_OK);
    T_EQ_INT(type_in(out, "blk.0.ffn_gate_inp.weight"), QT_F32);
    T_EQ_INT(type_in(out, "blk.0.ffn_up_exps.weight"), QT_Q4_0);
    float *l = logits_of(out);
    T_CHECK(l != NULL);
    free(l);

    test_importance_rounding();
    test_importance_trained(out);
    /* --types-from: each tensor as the q4_k_m file has it */
    synth(f32, 512, 0, QT_F32);
    T_EQ_INT(quantize(f32, out2, "q4_k_m", &rep, &err), ERR_OK);
    quantize_opts to = {.input = f32, .output = out, .type = "q8_0", .types_from = out2, .n_threads = 2};
    T_EQ_INT(quantize_run(&to, &rep, &err), ERR_OK);
    T_EQ_INT(type_in(out, "output.weight"), QT_Q6_K);
    T_EQ_INT(type_in(out, "blk.1.attn_v.weight"), QT_Q6_K);
    T_EQ_INT(type_in(out, "blk.0.attn_q.weight"), QT_Q4_K);
    to.types_from = "/nonexistent/ref.gguf";
    T_EQ_INT(quantize_run(&to, &rep, &err), ERR_NOT_FOUND);
    quantize_opts empty = {.input = f32, .output = out, .type = "q4_0", .calib_text = "", .calib_len = 0};
    T_CHECKF(quantize_run(&empty, &rep, &err) == ERR_INVALID_ARG && strstr(err.msg, "no tokens"), "%s", err.msg);

    /* bad input */
    T_EQ_INT(quantize(f32, out, "q9_9", &rep, &err), ERR_INVALID_ARG);
    T_CHECKF(strstr(err.msg, "q9_9") && strstr(err.msg, "q4_k_m"), "%s", err.msg);
    T_EQ_INT(quantize("/nonexistent/model.gguf", out, "q4_0", &rep, &err), ERR_NOT_FOUND);
    char bad[600];
    snprintf(bad, sizeof bad, "%s.missing-dir/x.gguf", out);
    T_CHECK(quantize(f32, bad, "q4_0", &rep, &err) != ERR_OK);
    struct stat st;
    T_CHECK(stat(bad, &st) != 0);
    remove(f32), remove(out), remove(out2), remove(q8), remove(moe);
    T_DONE();
}
