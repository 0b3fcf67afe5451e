/*
 * test_matmul — the matmul scheduler (core/kernels/matmul.h) on every weight type of
 * the active path: each output equals the path's own dot product of that row
 * and token, bit for bit, whatever the batch size and the number of threads;
 * packed matrices give the same outputs one token at a time as in a batch,
 * and in a set as alone; a type with no kernel is an error, not a crash.
 * Prefill batches on a tile with an order of its own (AVX2's and NEON's F16 and BF16):
 * near the dot's, the same on 1 and 2 threads.
 * F16 and BF16 prefill batches on a bf16 instruction (AVX512-BF16's vdpbf16ps, ARM's
 * BFMMLA: core/kernels/gemm_bf16.h): each output equals that instruction's bf16 reference bit for bit, whatever the batch, the
 * token's place in it and the threads, and is near the F32 product.
 */
#include <math.h>
#include <string.h>

#include "core/kernels/gemm_bf16.h"
#include "core/kernels/kernels.h"
#include "core/kernels/matmul.h"
#include "core/kernels/packed.h"
#include "core/quant.h"
#include "t.h"

#define N_IN 512
#define N_OUT 48 /* three groups of PACK_ROWS */
#define T_MAX 70 /* past two tiles of MM_TOKEN_TILE, and PACKED_BF16_MIN_TOKENS */

static uint32_t rng = 12345;
static float frand(void) {
    rng = rng * 1664525u + 1013904223u;
    return (float)(rng >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

static float xs[T_MAX * N_IN];

/* A random N_OUT x N_IN matrix of the type (malloc'd bytes). */
static matmul_weight make_weight(uint32_t type) {
    const size_t rb = quant_row_bytes(type, N_IN);
    uint8_t *w = malloc(rb * N_OUT);
    float row[N_IN];
    for (int r = 0; r < N_OUT; r++) {
        for (int i = 0; i < N_IN; i++) row[i] = frand() * (1.0f + (float)(r % 5));
        quant_quantize_row(type, row, w + (size_t)r * rb, N_IN);
    }
    return (matmul_weight){.data = w, .type = type, .n_in = N_IN, .n_out = N_OUT, .row_bytes = rb};
}

/* y[t][r] by the path's dot product, one row and one token at a time */
static void reference(const matmul_weight *w, int T, float *y) {
    const kernel_entry *k = kernel_get(w->type);
    const size_t ab = kernel_act_row_bytes(k->act_type, N_IN);
    uint8_t *act = malloc(ab);
    for (int t = 0; t < T; t++) {
        const void *a = xs + (size_t)t * N_IN;
        if (k->quantize) {
            k->quantize(xs + (size_t)t * N_IN, act, N_IN);
            a = act;
        }
        for (int r = 0; r < N_OUT; r++)
            y[(size_t)t * N_OUT + r] = k->dot((const uint8_t *)w->data + (size_t)r * w->row_bytes, a, N_IN);
    }
    free(act);
}

static const int batches[] = {1, 2, 3, 4, 5, 7, 33, T_MAX};
#define N_BATCHES (int)(sizeof batches / sizeof batches[0])

/* A prefill batch on a tile with its own order (kernels.h: kernel_entry.prefill): each output within 1e-6 of
 * sum |w x| of the dot's, and the same bits on 1 and 2 threads (the first call's kept in y_first). */
static float y_first[T_MAX * N_OUT];
static int n_prefill_checked;

static void check_prefill(const matmul_weight *w, int T, const float *y, const float *ref, int call) {
    float *wd = malloc(sizeof(float) * N_IN);
    int far = 0;
    for (int r = 0; r < N_OUT; r++) {
        quant_dequantize_row(w->type, (const uint8_t *)w->data + (size_t)r * w->row_bytes, wd, N_IN);
        for (int t = 0; t < T; t++) {
            double mag = 0.0;
            for (int i = 0; i < N_IN; i++) mag += fabs((double)wd[i] * xs[(size_t)t * N_IN + i]);
            far += fabs((double)y[(size_t)t * N_OUT + r] - ref[(size_t)t * N_OUT + r]) > 1e-6 * mag;
        }
    }
    free(wd);
    T_CHECKF(far == 0, "%s, %d tokens: %d prefill outputs off the dot's", quant_traits_of(w->type)->name, T, far);
    if (call == 0) memcpy(y_first, y, sizeof(float) * (size_t)T * N_OUT);
    else T_CHECKF(!memcmp(y, y_first, sizeof(float) * (size_t)T * N_OUT), "%s, %d tokens: prefill differs on 2 threads",
                  quant_traits_of(w->type)->name, T);
    n_prefill_checked++;
}

/* A prefill tile's rows never depend on the threads: 47 rows (not a whole number of tiles, cut between
 * tiles by an even split) and 65 tokens (a lone last token) give the same bits on 1 and 2 threads. */
static void check_prefill_split(matmul_ctx *const ctx[2], const matmul_weight *w48) {
    const kernel_entry *k = kernel_get(w48->type);
    if (!k->prefill.fn || gemm_bf16_supported(w48->type)) return;
    matmul_weight w = *w48;
    w.n_out = 47;
    const int T = 65;
    float *y[2] = {calloc((size_t)T * 47, sizeof(float)), calloc((size_t)T * 47, sizeof(float))};
    err_t err = {0};
    for (int c = 0; c < 2; c++) T_EQ_INT(matmul(ctx[c], &w, xs, T, y[c], &err), ERR_OK);
    T_CHECKF(!memcmp(y[0], y[1], sizeof(float) * (size_t)T * 47), "%s: 47 rows x 65 tokens differ on 1 and 2 threads",
             quant_traits_of(w.type)->name);
    free(y[0]);
    free(y[1]);
}

static void test_type(matmul_ctx *const ctx[2], uint32_t type) {
    matmul_weight w = make_weight(type);
    float *ref = malloc(sizeof(float) * T_MAX * N_OUT), *y = malloc(sizeof(float) * T_MAX * N_OUT);
    reference(&w, T_MAX, ref);
    check_prefill_split(ctx, &w);
    for (int c = 0; c < 2; c++)
        for (int b = 0; b < N_BATCHES; b++) {
            if (batches[b] >= PACKED_BF16_MIN_TOKENS && gemm_bf16_supported(type)) continue; /* test_bf16 */
            err_t err = {0};
            memset(y, 0, sizeof(float) * T_MAX * N_OUT);
            T_EQ_INT(matmul(ctx[c], &w, xs, batches[b], y, &err), ERR_OK);
            if (batches[b] >= PACKED_BF16_MIN_TOKENS && !matmul_batch_invariant(&w)) {
                check_prefill(&w, batches[b], y, ref, c);
                continue;
            }
            T_CHECKF(!memcmp(y, ref, sizeof(float) * (size_t)batches[b] * N_OUT), "%s, %d tokens, %d threads",
                     quant_traits_of(type)->name, batches[b], c + 1);
        }
    free(ref);
    free(y);
    free((void *)w.data);
}

/* Packed: the batch's rows equal one token's; a set of three equals each alone. */
static void test_packed(matmul_ctx *const ctx[2], uint32_t type) {
    if (!packed_get(type) || !packed_supported(type, N_OUT, N_IN)) return;
    matmul_weight ws[3];
    uint8_t *tmp = malloc(PACK_ROWS * quant_row_bytes(type, N_IN));
    for (int i = 0; i < 3; i++) {
        ws[i] = make_weight(type);
        packed_pack(type, (void *)ws[i].data, N_OUT, N_IN, tmp);
        ws[i].packed = true;
    }
    float *one = malloc(sizeof(float) * T_MAX * N_OUT), *y[3];
    for (int i = 0; i < 3; i++) y[i] = malloc(sizeof(float) * T_MAX * N_OUT);
    err_t err = {0};
    for (int t = 0; t < T_MAX; t++)
        T_EQ_INT(matmul(ctx[0], &ws[0], xs + (size_t)t * N_IN, 1, one + (size_t)t * N_OUT, &err), ERR_OK);
    for (int c = 0; c < 2; c++)
        for (int b = 0; b < N_BATCHES; b++) {
            T_EQ_INT(matmul_set(ctx[c], ws, 3, xs, batches[b], y, &err), ERR_OK);
            T_CHECKF(!memcmp(y[0], one, sizeof(float) * (size_t)batches[b] * N_OUT), "packed %s, %d tokens, %d threads",
                     quant_traits_of(type)->name, batches[b], c + 1);
            float *alone = malloc(sizeof(float) * T_MAX * N_OUT);
            for (int i = 1; i < 3; i++) {
                T_EQ_INT(matmul(ctx[c], &ws[i], xs, batches[b], alone, &err), ERR_OK);
                T_CHECK(!memcmp(y[i], alone, sizeof(float) * (size_t)batches[b] * N_OUT));
            }
            free(alone);
        }
    for (int i = 0; i < 3; i++) {
        free(y[i]);
        free((void *)ws[i].data);
    }
    free(one);
    free(tmp);
}

/* A set that cannot be one packed job (mixed layouts) runs one by one, the same. */
static void test_mixed_set(matmul_ctx *ctx) {
    matmul_weight ws[2] = {make_weight(QT_Q8_0), make_weight(QT_F16)};
    float *y[2] = {malloc(sizeof(float) * 5 * N_OUT), malloc(sizeof(float) * 5 * N_OUT)};
    float *alone = malloc(sizeof(float) * 5 * N_OUT);
    err_t err = {0};
    T_EQ_INT(matmul_set(ctx, ws, 2, xs, 5, y, &err), ERR_OK);
    for (int i = 0; i < 2; i++) {
        T_EQ_INT(matmul(ctx, &ws[i], xs, 5, alone, &err), ERR_OK);
        T_CHECK(!memcmp(y[i], alone, sizeof(float) * 5 * N_OUT));
        free(y[i]);
        free((void *)ws[i].data);
    }
    free(alone);
}

static void test_errors(matmul_ctx *ctx) {
    static uint8_t bytes[N_OUT * 64];
    float y[N_OUT];
    err_t err = {0};
    /* Q8_1 is a known type with no kernel */
    const matmul_weight w = {.data = bytes, .type = QT_Q8_1, .n_in = 32, .n_out = N_OUT, .row_bytes = 36};
    T_EQ_INT(matmul(ctx, &w, xs, 1, y, &err), ERR_UNSUPPORTED);
    T_CHECK(err.msg[0] != '\0');
    /* "packed" with a type that has no packed layout */
    const matmul_weight p = {.data = bytes, .type = QT_F32, .n_in = 8, .n_out = N_OUT, .row_bytes = 32, .packed = true};
    err = (err_t){0};
    T_EQ_INT(matmul(ctx, &p, xs, 1, y, &err), ERR_UNSUPPORTED);
    T_EQ_INT(matmul_set(ctx, &p, 1, xs, 1, (float *[]){y}, &err), ERR_UNSUPPORTED);
    T_EQ_INT(matmul_set(ctx, &p, 0, xs, 1, NULL, &err), ERR_OK); /* nothing to do */
}

#define BF_T 130

/* A random rows x n matrix of type (F16 or BF16) and its values as bf16, the kernel's rounding. */
static matmul_weight bf_weight(uint32_t type, int rows, int n, uint16_t *wb) {
    const size_t rb = quant_row_bytes(type, n);
    uint8_t *w = malloc(rb * (size_t)rows);
    float *row = malloc(sizeof(float) * (size_t)n), *back = malloc(sizeof(float) * (size_t)n);
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < n; i++) row[i] = frand() * (1.0f + (float)(r % 3));
        quant_quantize_row(type, row, w + (size_t)r * rb, n);
        quant_dequantize_row(type, w + (size_t)r * rb, back, n);
        for (int i = 0; i < gemm_bf16_row_len(n); i++) wb[(size_t)r * gemm_bf16_row_len(n) + i] = i < n ? gemm_bf16_round(back[i]) : 0;
    }
    free(row), free(back);
    return (matmul_weight){.data = w, .type = type, .n_in = n, .n_out = rows, .row_bytes = rb};
}

static void test_bf16_shape(matmul_ctx *const ctx[2], uint32_t type, int rows, int n, const float *x) {
    const int64_t len = gemm_bf16_row_len(n);
    uint16_t *wb = malloc(sizeof(uint16_t) * (size_t)(rows * len)), *xb = malloc(sizeof(uint16_t) * (size_t)(BF_T * len));
    matmul_weight w = bf_weight(type, rows, n, wb);
    float *ref = malloc(sizeof(float) * BF_T * (size_t)rows), *y = malloc(sizeof(float) * BF_T * (size_t)rows);
    double err2 = 0, norm2 = 0;
    for (int t = 0; t < BF_T; t++) {
        for (int i = 0; i < len; i++) xb[(size_t)t * len + i] = i < n ? gemm_bf16_round(x[(size_t)t * n + i]) : 0;
        for (int r = 0; r < rows; r++) {
            ref[(size_t)t * rows + r] = gemm_bf16_ref_dot(wb + (size_t)r * len, xb + (size_t)t * len, len / 2);
            double exact = 0;
            float back[1024];
            quant_dequantize_row(type, (const uint8_t *)w.data + (size_t)r * w.row_bytes, back, n);
            for (int i = 0; i < n; i++) exact += (double)back[i] * x[(size_t)t * n + i];
            err2 += (ref[(size_t)t * rows + r] - exact) * (ref[(size_t)t * rows + r] - exact), norm2 += exact * exact;
        }
    }
    T_CHECKF(sqrt(err2 / norm2) < 1e-2, "bf16 against the exact product: relative error %.2e", sqrt(err2 / norm2));
    /* whole batches from token 0, and a batch of the last 64 (each token elsewhere in it) */
    const int starts[] = {0, 0, 0, BF_T - 64}, counts[] = {64, 77, BF_T, 64};
    for (int c = 0; c < 2; c++)
        for (int k = 0; k < 4; k++) {
            err_t e = {0};
            T_EQ_INT(matmul(ctx[c], &w, x + (size_t)starts[k] * n, counts[k], y, &e), ERR_OK);
            T_CHECKF(!memcmp(y, ref + (size_t)starts[k] * rows, sizeof(float) * (size_t)counts[k] * rows),
                     "%s %dx%d, tokens %d..%d, %d threads", quant_traits_of(type)->name, rows, n, starts[k],
                     starts[k] + counts[k], c + 1);
        }
    free(wb), free(xb), free(ref), free(y), free((void *)w.data);
}

/* Values where the instructions' rounding shows: sums that overflow, products and sums below F32's normal
 * range (flushed to zero by BFMMLA, kept by vdpbf16ps), cancellation, and values with one significant bit. */
static void test_bf16_edges(matmul_ctx *ctx) {
    enum { ROWS = 9, N = 12, T = 64 };
    /* rows and tokens of three kinds: ordinary values; tiny ones (sums near and below F32's least normal,
     * 1.18e-38, where cancellation lands); huge ones (sums that overflow) */
    static const float wk[3][4] = {{0.5f, 1.0f, 3.0f, 255.0f}, {1.5e-38f, 1.25e-38f, 2e-38f, 2.5e-38f}, {1.0f, 2e38f, 1e19f, 7e-3f}};
    static const float xk[3][4] = {{0.5f, 1.0f, 3.0f, 255.0f}, {1.0f, 0.5f, 0.625f, 0.75f}, {1.0f, 2e38f, 1e19f, 7e-3f}};
    float w[ROWS * N], x[T * N], y[T * ROWS];
    uint16_t wb[ROWS * N], xb[T * N];
    for (int i = 0; i < ROWS * N; i++) w[i] = wk[(i / N) % 3][rand() % 4] * (rand() & 1 ? -1.0f : 1.0f);
    for (int i = 0; i < T * N; i++)
        x[i] = xk[(i / N) % 3][rand() % 4] * (rand() & 1 ? -1.0f : 1.0f) * (1.0f + (float)(rand() % 8) / 8);
    for (int i = 0; i < ROWS * N; i++) wb[i] = gemm_bf16_round(w[i]);
    for (int i = 0; i < T * N; i++) xb[i] = gemm_bf16_round(x[i]);
    const matmul_weight mw = {.data = wb, .type = QT_BF16, .n_in = N, .n_out = ROWS, .row_bytes = N * 2};
    err_t err = {0};
    T_EQ_INT(matmul(ctx, &mw, x, T, y, &err), ERR_OK);
    int same = 0, inf = 0, tiny = 0, shown = 0;
    for (int t = 0; t < T; t++)
        for (int r = 0; r < ROWS; r++) {
            const float ref = gemm_bf16_ref_dot(wb + r * N, xb + t * N, N / 2), got = y[t * ROWS + r];
            const bool eq = isnan(ref) ? isnan(got) : !memcmp(&ref, &got, 4);
            if (!eq && shown++ < 3) {
                printf("t %d r %d: got %a, reference %a:", t, r, got, ref);
                for (int i = 0; i < N; i++) printf(" %04x*%04x", wb[r * N + i], xb[t * N + i]);
                printf("\n");
            }
            same += eq;
            inf += isinf(ref) || isnan(ref);
            tiny += ref == 0.0f || fabsf(ref) < 1e-30f;
        }
    printf("bf16 edge values: %d of %d outputs equal the reference (%d infinite or NaN, %d zero or below 1e-30)\n",
           same, T * ROWS, inf, tiny);
    T_CHECKF(same == T * ROWS && inf > 20 && tiny > 20, "bf16 edge values: %d of %d equal (%d infinite, %d tiny)", same,
             T * ROWS, inf, tiny);
}

static void test_bf16(matmul_ctx *const ctx[2]) {
    if (!gemm_bf16_supported(QT_F16)) {
        printf("note: no bf16 instruction here (AVX512-BF16, ARM BF16); the bf16 prefill kernel was not run\n");
        return;
    }
    printf("bf16 prefill kernel: %s\n", gemm_bf16_name());
    float *x = malloc(sizeof(float) * BF_T * 1024);
    for (int i = 0; i < BF_T * 1024; i++) x[i] = frand() * 3.0f;
    const uint32_t types[] = {QT_F16, QT_BF16};
    for (int i = 0; i < 2; i++) {
        test_bf16_shape(ctx, types[i], 48, 512, x); /* a chunk of 32 rows and one of 16 */
        test_bf16_shape(ctx, types[i], 33, 73, x);  /* odd: a row past a chunk, a value past the pairs, half a group of 4 */
        test_bf16_shape(ctx, types[i], 64, 1024, x);
    }
    test_bf16_edges(ctx[1]);
    free(x);
}

int main(void) {
    for (size_t i = 0; i < sizeof xs / sizeof *xs; i++) xs[i] = frand() * 3.0f;
    tpool *pool = NULL;
    err_t err = {0};
    if (tpool_new(2, &pool, &err) != ERR_OK) {
        fprintf(stderr, "tpool_new: %s\n", err.msg);
        return 1;
    }
    matmul_ctx *ctx[2] = {matmul_ctx_new(NULL), matmul_ctx_new(pool)};
    T_CHECK(ctx[0] && ctx[1]);
    if (!ctx[0] || !ctx[1]) T_DONE();
    printf("path: %s\n", cpu_path_name(kernels_path()));
    for (uint32_t t = 0; t < QT_COUNT; t++) {
        if (!kernel_get(t) || !quant_type_supported(t)) continue;
        test_type(ctx, t);
        test_packed(ctx, t);
    }
    printf("prefill batches on their own tiles, checked: %d\n", n_prefill_checked);
    if (kernels_path() == CPU_AVX2 || kernels_path() == CPU_NEON) /* NEON's tiles yield to BFMMLA where it runs */
        T_CHECKF(n_prefill_checked == (gemm_bf16_supported(QT_F16) ? 0 : 4), "the F16 and BF16 prefill tiles: %d checks",
                 n_prefill_checked);
    test_mixed_set(ctx[1]);
    test_errors(ctx[1]);
    test_bf16(ctx);
    matmul_ctx_free(ctx[0]);
    matmul_ctx_free(ctx[1]);
    tpool_free(pool);
    T_DONE();
}
