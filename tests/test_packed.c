/*
 * test_packed — the packed Q4_0 layout and its GEMM (core/kernels/packed.h), and
 * batch invariance of the whole forward pass.
 *
 *   - pack then unpack gives the GGUF bytes back, for many shapes;
 *   - every implementation this machine runs (reference, AVX2, AVX-512, VNNI,
 *     AMX; NEON with and without SDOT)
 *     quantizes activations to the same bytes and computes bit-identical
 *     outputs, for 1..40 tokens and row lengths 32 .. 5632 + 32;
 *   - the reference equals a double-precision dot product of the dequantized
 *     weights with the dequantized activations (so the layout means what the
 *     header says, not merely something self-consistent), and a deliberately
 *     mis-laid group is caught by that check;
 *   - a token's outputs do not depend on the other tokens of its batch;
 *   - the AMX bf16 prefill kernel stays within its rounding bound of the
 *     exact dot (with F32 activations), is exact across token counts and
 *     groupings, and catches a mis-laid group;
 *   - forward: logits of T tokens in one batch equal those of T one-token
 *     steps bit for bit, for packed Q4_0 and for the GGUF-layout types
 *     (what lets speculative verification reproduce plain decoding exactly),
 *     for every batch below PACKED_BF16_MIN_TOKENS; a prefill batch of 80
 *     on the bf16 kernel stays close (bounds at the check).
 */
#include <math.h>
#include <string.h>

#include "core/kernels/gemm_bf16.h"
#include "core/kernels/packed.h"
#include "core/quant.h"
#include "model/forward.h"
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
    const packed_entry *impl[12];
    const int n_impl = packed_all(TYPE, impl, 12);
    printf("packed implementations on this machine:");
    for (int i = 0; i < n_impl; i++) printf(" %s", impl[i]->name);
    printf("\n");
    T_CHECK(n_impl >= 1 && !strcmp(impl[0]->name, "reference"));
#if defined(__x86_64__)
    /* where AVX-512 has VNNI, AVX2's vpdpbusd kernels run here in the instruction's EVEX form */
    if (TYPE != QT_Q4_K && cpu_path_supported(CPU_AVX512) && cpu_has_int8_dot()) {
        bool twin = false;
        for (int i = 0; i < n_impl; i++) twin = twin || !strcmp(impl[i]->name, "avx2-vnni-evex");
        T_CHECKF(twin, "AVX2's vpdpbusd kernel is not among those tested");
    }
#endif
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

/* The prefill kernel (AMX bf16, packed_amx_bf16): its products are rounded
 * to bf16 (8 significant bits: weights and activations each within 2^-8
 * relative), so against the exact dot of the dequantized weights with the
 * F32 activations a row is off by at most 2^-7 of sum |w * a| plus the F32
 * sums' rounding: the check uses 2^-7 + 1e-5. Everything else is exact: the same outputs for any token
 * count (a token alone equals the token in a batch, tails padded or not) and
 * for any grouping of the row groups (gemm_groups over 1, 2 or 3 groups). A
 * group mis-laid as test_gemm's is caught by the same bound. */
static void test_gemm_bf16(void) {
    const packed_entry *e = packed_amx_bf16(TYPE);
    if (!e) {
        /* there is one for Q4_0 and Q8_0 (the packed int8 types), none for Q4_K */
        T_CHECKF(TYPE == QT_Q4_K, "AMX runs the Q4_0 bf16 kernel but has none for %s", quant_traits_of(TYPE)->name);
        return;
    }
    const double bound = 1.0 / 128 + 1e-5;
    const int64_t ns[] = {32, 96, 2048, 5632 + 32};
    const int64_t rows = 48; /* three groups: a pair and one alone */
    double worst_all = 0.0, worst_bad = -1.0, worst_q8 = 0.0;
    for (size_t s = 0; s < sizeof ns / sizeof *ns; s++) {
        const int64_t n = ns[s];
        const int n_tok = 100; /* six full tiles and a tail of 4 */
        const size_t rb = quant_row_bytes(TYPE, n), bytes = rb * (size_t)rows, gb = (size_t)PACK_ROWS * rb;
        uint8_t *w = random_matrix(rows, n), *gguf = malloc(bytes), *tmp = malloc(bytes);
        memcpy(gguf, w, bytes);
        packed_pack(TYPE, w, rows, n, tmp);
        float *x = random_acts(n_tok, n);
        const size_t as = packed_act_row_bytes(e, n);
        uint8_t *act = malloc(as * n_tok);
        for (int t = 0; t < n_tok; t++) e->quantize(x + (size_t)t * n, act + (size_t)t * as, n);
        float *y = malloc(sizeof(float) * rows * n_tok), *y2 = malloc(sizeof(float) * rows * n_tok);
        void *sc = aligned_alloc(64, (e->scratch_bytes + 63) & ~(size_t)63); /* the kernel's working memory */
        e->gemm_groups(w, gb, (int)(rows / PACK_ROWS), n, act, as, n_tok, y, (size_t)rows, sc);
        /* against the exact dot with the F32 activations */
        float *wr = malloc(sizeof(float) * (size_t)n);
        /* for scale: the int8 kernels' error against the same (their
         * activations are rounded to Q8_0 instead) */
        const packed_entry *ref = packed_ref(TYPE);
        const size_t as8 = packed_act_row_bytes(ref, n);
        uint8_t *act8 = malloc(as8 * n_tok);
        float *y8 = malloc(sizeof(float) * rows * n_tok);
        for (int t = 0; t < n_tok; t++) ref->quantize(x + (size_t)t * n, act8 + (size_t)t * as8, n);
        for (int64_t g = 0; g < rows / PACK_ROWS; g++)
            ref->gemm(w + g * gb, n, act8, as8, n_tok, y8 + g * PACK_ROWS, (size_t)rows);
        double worst = 0.0;
        for (int64_t r = 0; r < rows; r++) {
            quant_dequantize_row(TYPE, gguf + (size_t)r * rb, wr, n);
            for (int t = 0; t < n_tok; t++) {
                double exact = 0.0, mag = 0.0;
                for (int64_t i = 0; i < n; i++) {
                    exact += (double)wr[i] * x[(size_t)t * n + i];
                    mag += fabs((double)wr[i] * x[(size_t)t * n + i]);
                }
                const double err = fabs(y[(size_t)t * rows + r] - exact) / (mag > 0 ? mag : 1.0);
                const double err8 = fabs(y8[(size_t)t * rows + r] - exact) / (mag > 0 ? mag : 1.0);
                if (err > worst) worst = err;
                if (err8 > worst_q8) worst_q8 = err8;
            }
        }
        free(act8), free(y8);
        if (worst > worst_all) worst_all = worst;
        T_CHECKF(worst < bound, "bf16 n=%lld: off the exact dot by %.3g of sum|w*a| (bound %.3g)", (long long)n, worst,
                 bound);
        /* grouping: each group alone, through gemm and through gemm_groups */
        for (int64_t g = 0; g < rows / PACK_ROWS; g++)
            e->gemm(w + g * gb, n, act, as, n_tok, y2 + g * PACK_ROWS, (size_t)rows);
        T_CHECKF(!memcmp(y, y2, sizeof(float) * rows * n_tok), "bf16 n=%lld: groups alone differ from the pair",
                 (long long)n);
        /* token counts: the first nt tokens alone equal their rows of the batch */
        const int counts[] = {1, 5, 16, 17, 31, 32, 33, 64, 99};
        for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
            e->gemm_groups(w, gb, (int)(rows / PACK_ROWS), n, act, as, counts[c], y2, (size_t)rows, sc);
            T_CHECKF(!memcmp(y, y2, sizeof(float) * rows * (size_t)counts[c]),
                     "bf16 n=%lld: %d tokens differ from the same tokens in a batch of %d", (long long)n, counts[c],
                     n_tok);
        }
        e->gemm_groups(w, gb, (int)(rows / PACK_ROWS), n, act + 57 * as, as, 1, y2, (size_t)rows, sc);
        T_CHECKF(!memcmp(y + 57 * rows, y2, sizeof(float) * rows), "bf16 n=%lld: token 57 alone differs",
                 (long long)n);
        /* a mis-laid group (rows 0 and 1 swapped in quant vector 0) is caught */
        if (n == 2048 && TYPE == QT_Q4_0) {
            for (int64_t b = 0; b < n / 32; b++) {
                uint8_t t4[4], *q = w + (size_t)b * 288 + 32;
                memcpy(t4, q, 4);
                memcpy(q, q + 4, 4);
                memcpy(q + 4, t4, 4);
            }
            e->gemm(w, n, act, as, n_tok, y2, (size_t)rows);
            worst_bad = 0.0;
            quant_dequantize_row(TYPE, gguf, wr, n);
            for (int t = 0; t < n_tok; t++) {
                double exact = 0.0, mag = 0.0;
                for (int64_t i = 0; i < n; i++) {
                    exact += (double)wr[i] * x[(size_t)t * n + i];
                    mag += fabs((double)wr[i] * x[(size_t)t * n + i]);
                }
                const double err = fabs(y2[(size_t)t * rows] - exact) / (mag > 0 ? mag : 1.0);
                if (err > worst_bad) worst_bad = err;
            }
            T_CHECKF(worst_bad > bound, "bf16: a mis-laid group went unnoticed (%.3g)", worst_bad);
        }
        free(wr), free(w), free(gguf), free(tmp), free(x), free(act), free(y), free(y2), free(sc);
    }
    printf("amx-bf16 vs exact dot with F32 activations: worst %.3g of sum|w*a| (bound %.3g; int8 kernels with Q8_0 "
           "activations: %.3g)\n", worst_all, bound, worst_q8);
    if (worst_bad >= 0) printf("amx-bf16, a mis-laid group: %.3g\n", worst_bad);
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
        /* expert stacks stay in the GGUF layout at load: the expert store packs each expert it reads */
        if (packed_get(cases[c].type))
            T_CHECKF(m->packed_bytes > 0 && m->layers[0].wq.packed && (cases[c].n_expert || m->layers[1].w_down.packed),
                     "[%s] the active path packs Q4_0 but the model was not packed", cases[c].name);
        const int V = m->hp.n_vocab;
        /* 23 tokens: below PACKED_BF16_MIN_TOKENS, bit for bit; 80: a
         * prefill batch, which the bf16 kernel may take (close, not equal) */
        for (int T = 23; T <= 80; T += 57) {
            int32_t tok[80];
            for (int t = 0; t < T; t++) tok[t] = (int32_t)(1 + (t * 37 + 11) % (V - 1));
            float *batch = malloc(sizeof(float) * T * V), *steps = malloc(sizeof(float) * T * V);
            session *a = NULL, *b = NULL;
            err_code rc = session_new(m, 128, QT_F32, 2, &a, &err);
            if (!rc) rc = session_new(m, 128, QT_F32, 2, &b, &err);
            if (!rc) rc = session_eval(a, tok, T, true, batch, &err);
            for (int t = 0; t < T && !rc; t++) rc = session_eval(b, tok + t, 1, true, steps + (size_t)t * V, &err);
            T_CHECKF(rc == ERR_OK, "[%s] %s", cases[c].name, err.msg);
            int differing = 0, argmax_diff = 0, clear_flips = 0, rows_far = 0;
            double max_d = 0.0, max_l = 0.0;
            for (int t = 0; t < T; t++) {
                int ia = 0, ib = 0;
                double row_d = 0.0;
                for (int i = 0; i < V; i++) {
                    const float x = batch[(size_t)t * V + i], y = steps[(size_t)t * V + i];
                    differing += memcmp(&x, &y, sizeof x) != 0;
                    if (fabs(x - y) > row_d) row_d = fabs(x - y);
                    if (fabs(y) > max_l) max_l = fabs(y);
                    if (x > batch[(size_t)t * V + ia]) ia = i;
                    if (y > steps[(size_t)t * V + ib]) ib = i;
                }
                float second = -INFINITY; /* the steps' margin between first and second */
                for (int i = 0; i < V; i++)
                    if (i != ib && steps[(size_t)t * V + i] > second) second = steps[(size_t)t * V + i];
                argmax_diff += ia != ib;
                clear_flips += ia != ib && steps[(size_t)t * V + ib] - second > 0.25f;
                rows_far += row_d > 0.05 * 3.0; /* logits here are within +-4 */
                if (row_d > max_d) max_d = row_d;
            }
            const bool bf16 = T >= PACKED_BF16_MIN_TOKENS && !forward_batch_invariant(m);
            printf("[%s] T=%d: %d of %d logits differ between one batch and %d steps (max |d| %.3g of max |logit| %.3g, "
                   "%d rows off by > 0.15, argmax differs on %d rows, %d of them with a margin > 0.25)%s%s\n",
                   cases[c].name, T, differing, T * V, T, max_d, max_l, rows_far, argmax_diff, clear_flips,
                   m->packed_bytes ? " (packed weights)" : "", bf16 ? " (a prefill kernel of its own)" : "");
            if (!bf16)
                T_CHECKF(!rc && differing == 0, "[%s] T=%d: batch and one-by-one logits differ in %d places",
                         cases[c].name, T, differing);
            else /* the steps' own error (Q8_0 activations) is the larger one:
                  * test_gemm_bf16. A dense model stays within 0.15 everywhere
                  * and flips no clear winner; in an MoE a few tokens may
                  * route to another expert (a discontinuity any rounding
                  * change can cross), so there most rows must agree and a
                  * clear winner may change only on such a row. */
                T_CHECKF(!rc && (cases[c].n_expert ? rows_far <= T / 8 && clear_flips <= rows_far
                                                   : rows_far == 0 && clear_flips == 0),
                         "[%s] T=%d: bf16 prefill off by %.3g, %d rows off by > 0.15, %d clear winners flipped",
                         cases[c].name, T, max_d, rows_far, clear_flips);
            session_free(a);
            session_free(b);
            free(batch);
            free(steps);
        }
        model_free(m);
        remove(path);
    }
}

/* "test_packed amx" (its own CTest entry, test_packed_amx): the AMX kernels'
 * checks, reported as skipped on a CPU without AMX. */
int main(int argc, char **argv) {
    const uint32_t types[] = {QT_Q4_0, QT_Q8_0, QT_Q4_K};
    const bool amx = argc > 1 && !strcmp(argv[1], "amx");
    if (amx && !packed_amx_bf16(QT_Q4_0)) T_SKIP("no AMX on this machine (the AMX bf16 prefill kernel)");
    for (int t = 0; t < 3; t++) {
        TYPE = types[t];
        printf("-- %s\n", quant_traits_of(TYPE)->name);
        if (amx) {
            test_gemm_bf16();
            continue;
        }
        test_round_trip();
        test_gemm();
    }
    if (!amx) test_forward_batch_invariance();
    T_DONE();
}
