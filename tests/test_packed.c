/*
 * test_packed — the packed Q4_0 layout and its GEMM (core/packed.h), and
 * batch invariance of the whole forward pass.
 *
 *   - pack then unpack gives the GGUF bytes back, for many shapes;
 *   - every implementation this machine runs (reference, AVX-512, VNNI, AMX)
 *     quantizes activations to the same bytes and computes bit-identical
 *     outputs, for 1..40 tokens and row lengths 32 .. 5632 + 32;
 *   - the reference equals a double-precision dot product of the dequantized
 *     weights with the dequantized activations (so the layout means what the
 *     header says, not merely something self-consistent), and a deliberately
 *     mis-laid group is caught by that check;
 *   - a token's outputs do not depend on the other tokens of its batch;
 *   - forward: logits of T tokens in one batch equal those of T one-token
 *     steps bit for bit, for packed Q4_0 and for the GGUF-layout types
 *     (what lets speculative verification reproduce plain decoding exactly).
 */
#include <string.h>

#include "core/packed.h"
#include "core/quant.h"
#include "model/model.h"
#include "runtime/session.h"
#include "t.h"
#include "util.h"

static rng_t R = {0x9e3779b97f4a7c15ULL};

/* a random Q4_0 / Q8_0 / Q4_K matrix (rows x n) from Gaussian rows, with a few odd blocks */
static uint32_t TYPE = QT_Q4_0;
static uint8_t *random_matrix(int64_t rows, int64_t n) {
    const size_t rb = quant_row_bytes(TYPE, n);
    uint8_t *w = malloc(rb * (size_t)rows);
    float *x = malloc(sizeof(float) * (size_t)n);
    for (int64_t r = 0; r < rows; r++) {
        const double scale = 0.01 + rng_uniform(&R);
        for (int64_t i = 0; i < n; i++) x[i] = (float)(rng_gauss(&R) * scale);
        if (r % 7 == 3) memset(x, 0, sizeof(float) * 32); /* an all-zero block */
        quant_quantize_row(TYPE, x, w + (size_t)r * rb, n);
    }
    free(x);
    return w;
}

static float *random_acts(int n_tok, int64_t n) {
    float *x = malloc(sizeof(float) * (size_t)n_tok * (size_t)n);
    for (size_t i = 0; i < (size_t)n_tok * (size_t)n; i++) x[i] = (float)rng_gauss(&R) * (i % 97 == 5 ? 40.0f : 1.0f);
    if (n >= 64) memset(x + 32, 0, sizeof(float) * 32); /* a zero activation block */
    return x;
}

/* the value of activation i of a row in the entry's format */
static double act_value(const packed_entry *e, const void *act, int64_t i) {
    if (e->act_block == 32) {
        const block_q8p *a = (const block_q8p *)act + i / 32;
        return (double)a->d * a->qs[i % 32];
    }
    const block_q8kp *a = (const block_q8kp *)act + i / 256;
    return (double)a->d * a->qs[i % 256];
}

static void test_round_trip(void) {
    const int64_t shapes[][2] = {{16, 32}, {16, 64}, {32, 96}, {48, 2048}, {16, 5632}, {64, 160}};
    const int64_t shapes_k[][2] = {{16, 256}, {32, 512}, {48, 2048}, {16, 5632}, {64, 768}};
    const bool k = TYPE == QT_Q4_K;
    for (size_t s = 0; s < (k ? sizeof shapes_k : sizeof shapes) / sizeof *shapes; s++) {
        const int64_t rows = k ? shapes_k[s][0] : shapes[s][0], n = k ? shapes_k[s][1] : shapes[s][1];
        const size_t bytes = quant_row_bytes(TYPE, n) * (size_t)rows;
        uint8_t *w = random_matrix(rows, n), *orig = malloc(bytes), *tmp = malloc(bytes);
        memcpy(orig, w, bytes);
        T_CHECK(packed_supported(TYPE, rows, n));
        packed_pack(TYPE, w, rows, n, tmp);
        T_CHECKF(memcmp(w, orig, bytes) != 0, "packing %lldx%lld changed nothing", (long long)rows, (long long)n);
        packed_unpack(TYPE, w, rows, n, tmp);
        T_CHECKF(memcmp(w, orig, bytes) == 0, "pack + unpack of %lldx%lld is not the identity", (long long)rows,
                 (long long)n);
        free(w);
        free(orig);
        free(tmp);
    }
    T_CHECK(!packed_supported(TYPE, 8, 64));
    T_CHECK(!packed_supported(TYPE, 24, 64));
    T_CHECK(!packed_supported(TYPE, 16, k ? 128 + 256 : 48));
    T_CHECK(!packed_supported(QT_Q8_K, 16, 256));
    T_CHECK(!packed_supported(QT_Q5_K, 16, 256));
}

/* max over rows/tokens of |y - exact| / (sum |w||a| of the row): the exact
 * value from the dequantized weights and the dequantized Q8P activations */
static double worst_vs_exact(const packed_entry *e, const uint8_t *gguf_w, int64_t rows, int64_t n, const void *act,
                             size_t as, int n_tok, const float *y) {
    float *wr = malloc(sizeof(float) * (size_t)n);
    const size_t rb = quant_row_bytes(TYPE, n);
    double worst = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        quant_dequantize_row(TYPE, gguf_w + (size_t)r * rb, wr, n);
        for (int t = 0; t < n_tok; t++) {
            const uint8_t *a = (const uint8_t *)act + (size_t)t * as;
            double exact = 0.0, mag = 0.0;
            for (int64_t i = 0; i < n; i++) {
                const double av = act_value(e, a, i);
                exact += (double)wr[i] * av;
                mag += fabs((double)wr[i] * av);
            }
            const double e = fabs(y[(size_t)t * rows + r] - exact) / (mag > 0 ? mag : 1.0);
            if (e > worst) worst = e;
        }
    }
    free(wr);
    return worst;
}

static void test_gemm(void) {
    const packed_entry *impl[4];
    const int n_impl = packed_all(TYPE, impl, 4);
    printf("packed implementations on this machine:");
    for (int i = 0; i < n_impl; i++) printf(" %s", impl[i]->name);
    printf("\n");
    T_CHECK(n_impl >= 1 && !strcmp(impl[0]->name, "reference"));
    const int64_t ns[] = {32, 64, 96, 160, 2048, 5632 + 32}, ns_k[] = {256, 512, 768, 2048, 5632};
    const bool k = TYPE == QT_Q4_K;
    const int64_t rows = 32;
    double worst_all = 0.0;
    for (size_t s = 0; s < (k ? sizeof ns_k : sizeof ns) / sizeof *ns; s++) {
        const int64_t n = k ? ns_k[s] : ns[s];
        const int n_tok = 40; /* AMX: two tiles of 16 and a VNNI tail */
        const size_t bytes = quant_row_bytes(TYPE, n) * (size_t)rows;
        uint8_t *w = random_matrix(rows, n), *gguf = malloc(bytes), *tmp = malloc(bytes);
        memcpy(gguf, w, bytes);
        packed_pack(TYPE, w, rows, n, tmp);
        float *x = random_acts(n_tok, n);
        const size_t as = packed_act_row_bytes(impl[0], n);
        uint8_t *act_ref = malloc(as * n_tok), *act = malloc(as * n_tok);
        float *y_ref = malloc(sizeof(float) * rows * n_tok), *y = malloc(sizeof(float) * rows * n_tok);
        for (int t = 0; t < n_tok; t++) impl[0]->quantize(x + (size_t)t * n, act_ref + (size_t)t * as, n);
        const size_t gb = (size_t)PACK_ROWS * quant_row_bytes(TYPE, n);
        for (int64_t g = 0; g < rows / PACK_ROWS; g++)
            impl[0]->gemm(w + g * gb, n, act_ref, as, n_tok, y_ref + g * PACK_ROWS, (size_t)rows);
        const double worst = worst_vs_exact(impl[0], gguf, rows, n, act_ref, as, n_tok, y_ref);
        if (worst > worst_all) worst_all = worst;
        T_CHECKF(worst < 1e-5, "n=%lld: reference off the exact dot by %.3g of sum|w*a|", (long long)n, worst);
        for (int i = 1; i < n_impl; i++) {
            for (int t = 0; t < n_tok; t++) impl[i]->quantize(x + (size_t)t * n, act + (size_t)t * as, n);
            T_CHECKF(memcmp(act, act_ref, as * n_tok) == 0, "%s: activation bytes differ (n=%lld)", impl[i]->name,
                     (long long)n);
            /* every token count 1..n_tok, each against the reference's rows */
            for (int nt = 1; nt <= n_tok; nt++) {
                for (int64_t g = 0; g < rows / PACK_ROWS; g++)
                    impl[i]->gemm(w + g * gb, n, act_ref, as, nt, y + g * PACK_ROWS, (size_t)rows);
                T_CHECKF(memcmp(y, y_ref, sizeof(float) * rows * nt) == 0, "%s: %d tokens, n=%lld differ from reference",
                         impl[i]->name, nt, (long long)n);
            }
        }
        /* batch invariance: token 13 alone equals token 13 of the batch */
        for (int i = 0; i < n_impl; i++) {
            float one[PACK_ROWS];
            impl[i]->gemm(w, n, act_ref + 13 * as, as, 1, one, PACK_ROWS);
            T_CHECKF(memcmp(one, y_ref + 13 * rows, sizeof one) == 0, "%s: a token alone differs from in a batch",
                     impl[i]->name);
        }
        /* a mis-laid group (rows 0 and 1 swapped in quant vector 0) is caught */
        if (n == 2048 && TYPE == QT_Q4_0) {
            uint8_t *bad = malloc(bytes);
            memcpy(bad, w, bytes);
            for (int64_t b = 0; b < n / 32; b++) {
                uint8_t t4[4], *q = bad + (size_t)b * 288 + 32;
                memcpy(t4, q, 4);
                memcpy(q, q + 4, 4);
                memcpy(q + 4, t4, 4);
            }
            for (int64_t g = 0; g < rows / PACK_ROWS; g++)
                impl[0]->gemm(bad + g * gb, n, act_ref, as, n_tok, y + g * PACK_ROWS, (size_t)rows);
            const double e = worst_vs_exact(impl[0], gguf, rows, n, act_ref, as, n_tok, y);
            printf("mis-laid group: worst relative error %.3g (correct layout %.3g)\n", e, worst);
            T_CHECKF(e > 1e-3, "a mis-laid group went unnoticed (%.3g)", e);
            free(bad);
        }
        free(w), free(gguf), free(tmp), free(x), free(act_ref), free(act), free(y_ref), free(y);
    }
    printf("reference vs exact dot: worst %.3g of sum|w*a|\n", worst_all);
}

/* Logits of T tokens fed at once and one by one: equal bit for bit. */
static void test_forward_batch_invariance(void) {
    const struct {
        const char *name;
        uint32_t type;
        int n_expert;
    } cases[] = {
        {"Q4_0 (packed)", QT_Q4_0, 0}, {"Q4_0 MoE (packed)", QT_Q4_0, 4}, {"Q8_0 (packed)", QT_Q8_0, 0},
        {"Q4_K", QT_Q4_K, 0},          {"F16", QT_F16, 0},                {"F32", QT_F32, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        synth_opts o = synth_defaults();
        o.type = cases[c].type;
        o.embd_type = QT_F32;
        o.n_embd = 256;
        o.n_ff = 512;
        o.n_head = 4;
        o.n_head_kv = 2;
        o.n_vocab = 320;
        o.n_expert = cases[c].n_expert;
        o.n_expert_used = cases[c].n_expert ? 2 : 0;
        o.seed = 77 + c;
        char path[512];
        tu_tmp_path(path, sizeof path, "packed.gguf");
        err_t err = {0};
        model *m = NULL;
        if (synth_write(&o, path, &err) || model_load(path, &m, &err)) {
            T_CHECKF(0, "[%s] %s", cases[c].name, err.msg);
            remove(path);
            continue;
        }
        if (packed_get(cases[c].type))
            T_CHECKF(m->packed_bytes > 0 && m->layers[0].wq.packed && m->layers[1].w_down.packed,
                     "[%s] the active path packs Q4_0 but the model was not packed", cases[c].name);
        const int T = 23, V = m->hp.n_vocab;
        int32_t tok[23];
        for (int t = 0; t < T; t++) tok[t] = (int32_t)(1 + (t * 37 + 11) % (V - 1));
        float *batch = malloc(sizeof(float) * T * V), *steps = malloc(sizeof(float) * T * V);
        session *a = NULL, *b = NULL;
        err_code rc = session_new(m, 64, QT_F32, 2, &a, &err);
        if (!rc) rc = session_new(m, 64, QT_F32, 2, &b, &err);
        if (!rc) rc = session_eval(a, tok, T, true, batch, &err);
        for (int t = 0; t < T && !rc; t++) rc = session_eval(b, tok + t, 1, true, steps + (size_t)t * V, &err);
        T_CHECKF(rc == ERR_OK, "[%s] %s", cases[c].name, err.msg);
        int differing = 0;
        for (int i = 0; i < T * V; i++) differing += memcmp(&batch[i], &steps[i], sizeof(float)) != 0;
        printf("[%s] %d of %d logits differ between one batch and %d steps%s\n", cases[c].name, differing, T * V, T,
               m->packed_bytes ? " (packed weights)" : "");
        T_CHECKF(!rc && differing == 0, "[%s] batch and one-by-one logits differ in %d places", cases[c].name,
                 differing);
        session_free(a);
        session_free(b);
        free(batch);
        free(steps);
        model_free(m);
        remove(path);
    }
}

int main(void) {
    const uint32_t types[] = {QT_Q4_0, QT_Q8_0, QT_Q4_K};
    for (int t = 0; t < 3; t++) {
        TYPE = types[t];
        printf("-- %s\n", quant_traits_of(TYPE)->name);
        test_round_trip();
        test_gemm();
    }
    test_forward_batch_invariance();
    T_DONE();
}
