/*
 * test_int2 — the experts' 2-bit copies (moe/int2.h):
 *
 *   - a block's copy spelt out as Q4_0 gives exactly (2c - 3) s, and the
 *     step search beats the plain amax / 3 step; spelt out in place (the
 *     copy at the end of its buffer) it equals the copy spelt out apart;
 *   - the sidecar holds, for every expert, the copy of its weights: each
 *     read equals quantizing the expert's rows here;
 *   - a stale sidecar (the model rewritten), a damaged header, a cut file
 *     are refused at open; a damaged record fails its check when read;
 *   - the sidecar's identity is the experts' bytes: a copied model keeps
 *     it, 16 KiB changed in the middle of an expert make it stale;
 *   - through the forward pass, with the smallest cache: INT2 statuses in
 *     the trace, copies read, served and promoted (with and without the I/O
 *     threads); with a damaged copy the run falls back to whole experts and
 *     the logits are the exact ones; `off` and `auto` without a measured
 *     sidecar are exact; auto follows the recorded cost.
 */
#include <math.h>
#include <time.h>
#include <string.h>

#include "core/kernels/matmul.h"
#include "core/quant.h"
#include "model/model.h"
#include "model/synth.h"
#include "moe/expert_cache.h"
#include "moe/expert_read.h"
#include "moe/experts.h"
#include "moe/int2.h"
#include "runtime/session.h"
#include "t.h"
#include "util.h"

#define N_LAYER 3
#define N_EXPERT 6

static double gauss(rng_t *r) { return rng_gauss(r); }

static void test_blocks(void) {
    rng_t r = {5};
    enum { N = 32 * 64 };
    float x[N], y[N];
    uint8_t c[N / 32 * MOE_INT2_BLOCK_BYTES], q[N / 32 * 18];
    for (int i = 0; i < N; i++) x[i] = (float)gauss(&r);
    moe_int2_quantize(x, N, c);
    moe_int2_to_q4_0(c, N, q);
    quant_dequantize_row(QT_Q4_0, q, y, N);
    int exact = 1;
    double err = 0.0, naive = 0.0, pow = 0.0;
    for (int b = 0; b < N / 32; b++) {
        fp16_t h;
        memcpy(&h, c + b * MOE_INT2_BLOCK_BYTES, 2);
        const float s = fp16_to_fp32(h);
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * b + j]));
        for (int j = 0; j < 32; j++) {
            const int code = (c[b * MOE_INT2_BLOCK_BYTES + 2 + j / 4] >> (2 * (j % 4))) & 3;
            exact &= y[32 * b + j] == (float)(2 * code - 3) * s;
            const float v = x[32 * b + j], sn = amax / 3.0f;
            int qn = (int)lrintf((v / sn + 3.0f) / 2.0f);
            qn = qn < 0 ? 0 : qn > 3 ? 3 : qn;
            err += (v - y[32 * b + j]) * (v - y[32 * b + j]);
            naive += (v - (2 * qn - 3) * sn) * (v - (2 * qn - 3) * sn);
            pow += v * v;
        }
    }
    printf("2-bit copy of Gaussian weights: relative squared error %.4f (step amax/3: %.4f)\n", err / pow, naive / pow);
    T_CHECK(exact);
    T_CHECKF(err / pow < 0.14 && err / pow > 0.05, "%.4f", err / pow); /* 4 uniform levels: ~0.12 at best */
    T_CHECK(err < 0.8 * naive);
    /* in place: the copy at the end of a buffer of 18 bytes a block + 8 */
    uint8_t *buf = malloc(sizeof q + 8);
    memcpy(buf + sizeof q + 8 - sizeof c, c, sizeof c);
    moe_int2_to_q4_0(buf + sizeof q + 8 - sizeof c, N, buf);
    T_CHECK(!memcmp(buf, q, sizeof q));
    free(buf);
}

static int write_model(const char *path, uint32_t type, uint64_t seed) {
    synth_opts o = synth_defaults();
    o.type = type;
    o.embd_type = o.output_type = QT_F32;
    o.n_embd = 64, o.n_ff = 96, o.n_head = 4, o.n_head_kv = 2, o.n_layer = N_LAYER;
    o.n_expert = N_EXPERT, o.n_expert_used = 2;
    o.seed = seed;
    err_t err = {0};
    const err_code rc = synth_write(&o, path, &err);
    T_CHECKF(rc == ERR_OK, "%s", err.msg);
    return rc == ERR_OK;
}

/* Every record read back equals the copy made here from the mapping. */
static void test_sidecar(const char *path) {
    model *m = NULL;
    err_t err = {0};
    T_EQ_INT(model_load(path, &m, &err), ERR_OK);
    if (!m) return;
    char why[160];
    T_CHECK(moe_int2_applicable(m, why, sizeof why));
    T_EQ_INT(moe_int2_build(m, path, &err), ERR_OK);
    moe_int2 *s = NULL;
    T_EQ_INT(moe_int2_open(m, path, &s, &err), ERR_OK);
    T_CHECK(s && moe_int2_kld(s) < 0.0);
    const uint64_t bb = moe_reader_buffer_bytes(m);
    uint8_t *buf = malloc(bb), *want = malloc(bb);
    float *row = malloc(sizeof(float) * 96);
    int same = 0;
    for (int l = 0; s && l < N_LAYER; l++)
        for (int e = 0; e < N_EXPERT; e++) {
            model_mat got[3], orig[3];
            T_EQ_INT(moe_int2_read(s, m, l, e, buf, bb, got, &err), ERR_OK);
            model_expert_mats(m, l, e, orig);
            int ok = 1;
            for (int i = 0; i < 3; i++) {
                ok &= got[i].type == QT_Q4_0 && got[i].n_in == orig[i].n_in && got[i].n_out == orig[i].n_out;
                for (int64_t rr = 0; rr < orig[i].n_out; rr++) {
                    uint8_t blocks[96 / 32 * MOE_INT2_BLOCK_BYTES];
                    quant_dequantize_row(orig[i].type, (const uint8_t *)orig[i].data + rr * orig[i].row_bytes, row,
                                         orig[i].n_in);
                    moe_int2_quantize(row, orig[i].n_in, blocks);
                    moe_int2_to_q4_0(blocks, orig[i].n_in, want);
                    ok &= !memcmp(want, (const uint8_t *)got[i].data + rr * got[i].row_bytes, got[i].row_bytes);
                }
            }
            same += ok;
        }
    T_EQ_INT(same, N_LAYER * N_EXPERT);
    /* the kernels compute the copy as its values: the down matrix of the last expert read, times a vector */
    model_mat got[3];
    if (s) T_EQ_INT(moe_int2_read(s, m, 1, 4, buf, bb, got, &err), ERR_OK);
    matmul_ctx *mm = matmul_ctx_new(NULL);
    float x[96], y[64], w[96];
    rng_t r = {9};
    for (int i = 0; i < 96; i++) x[i] = (float)rng_gauss(&r);
    const matmul_weight mw = {got[2].data, got[2].type, got[2].n_in, got[2].n_out, got[2].row_bytes, false};
    T_EQ_INT(matmul(mm, &mw, x, 1, y, &err), ERR_OK);
    double worst = 0.0, norm = 0.0;
    for (int o = 0; o < 64; o++) {
        quant_dequantize_row(QT_Q4_0, (const uint8_t *)got[2].data + o * got[2].row_bytes, w, 96);
        double d = 0.0;
        for (int i = 0; i < 96; i++) d += (double)w[i] * x[i];
        worst = fmax(worst, fabs(d - y[o]));
        norm = fmax(norm, fabs(d));
    }
    T_CHECKF(worst < 0.02 * norm, "the kernel's product is %g off (of %g)", worst, norm); /* Q8 activations */
    matmul_ctx_free(mm);
    moe_int2_close(s);
    T_EQ_INT(moe_int2_set_kld(path, 0.25, 100, &err), ERR_OK);
    T_EQ_INT(moe_int2_open(m, path, &s, &err), ERR_OK);
    T_CHECK(s && moe_int2_kld(s) == 0.25);
    moe_int2_close(s);
    free(buf), free(want), free(row);
    model_free(m);
}

/* A sidecar's faults: each refused at open, or (a damaged record) at its read. */
static void test_faults(const char *path, const char *other) {
    char side[600];
    moe_int2_path(path, side, sizeof side);
    size_t n = 0;
    unsigned char *good = tu_read_file(side, &n);
    model *m = NULL;
    err_t err = {0};
    T_EQ_INT(model_load(path, &m, &err), ERR_OK);
    if (!good || !m) return;
    moe_int2 *s = NULL;
    good[3] ^= 1; /* the magic */
    T_CHECK(tu_write_file(side, good, n));
    T_EQ_INT(moe_int2_open(m, path, &s, &err), ERR_CORRUPT);
    good[3] ^= 1, good[60] ^= 1; /* inside the hashed header */
    T_CHECK(tu_write_file(side, good, n));
    T_EQ_INT(moe_int2_open(m, path, &s, &err), ERR_CORRUPT);
    good[60] ^= 1;
    T_CHECK(tu_write_file(side, good, n - 7)); /* cut */
    T_EQ_INT(moe_int2_open(m, path, &s, &err), ERR_CORRUPT);
    T_CHECKF(strstr(err.msg, "bytes, not") != NULL, "%s", err.msg);
    good[n - 100] ^= 0x10; /* inside the last record */
    T_CHECK(tu_write_file(side, good, n));
    T_EQ_INT(moe_int2_open(m, path, &s, &err), ERR_OK);
    const uint64_t bb = moe_reader_buffer_bytes(m);
    uint8_t *buf = malloc(bb);
    model_mat mats[3];
    if (s) T_EQ_INT(moe_int2_read(s, m, N_LAYER - 1, N_EXPERT - 1, buf, bb, mats, &err), ERR_CORRUPT);
    T_CHECKF(strstr(err.msg, "fails its check") != NULL, "%s", err.msg);
    if (s) T_EQ_INT(moe_int2_read(s, m, 0, 0, buf, bb, mats, &err), ERR_OK);
    moe_int2_close(s);
    good[n - 100] ^= 0x10;
    T_CHECK(tu_write_file(side, good, n));
    /* stale: another model at the same path (same shape, other weights) */
    model *m2 = NULL;
    T_EQ_INT(model_load(other, &m2, &err), ERR_OK);
    char side2[600];
    moe_int2_path(other, side2, sizeof side2);
    T_CHECK(tu_write_file(side2, good, n));
    if (m2) T_EQ_INT(moe_int2_open(m2, other, &s, &err), ERR_BAD_VALUE);
    T_CHECKF(strstr(err.msg, "stale") != NULL, "%s", err.msg);
    remove(side2);
    model_free(m2), model_free(m);
    free(buf), free(good);
}

/* The sidecar's identity is the experts' bytes: a copy of the model (another
 * inode, the same experts) keeps its sidecar, whose header then takes the new
 * file's identity; 16 KiB changed in the middle of an expert of a model larger
 * than 2 MiB (outside the first and last MiB the old fingerprint hashed) make
 * it stale. */
static void test_identity(void) {
    char path[512], copy[512], side[600], side_copy[600];
    tu_tmp_path(path, sizeof path, "int2-id.gguf");
    tu_tmp_path(copy, sizeof copy, "int2-id-copy.gguf");
    moe_int2_path(path, side, sizeof side);
    moe_int2_path(copy, side_copy, sizeof side_copy);
    synth_opts o = synth_defaults();
    o.type = QT_Q8_0, o.embd_type = o.output_type = QT_F32;
    o.n_embd = 256, o.n_ff = 512, o.n_head = 4, o.n_head_kv = 2, o.n_layer = N_LAYER;
    o.n_expert = N_EXPERT, o.n_expert_used = 2, o.seed = 11;
    err_t err = {0};
    model *m = NULL;
    moe_int2 *s = NULL;
    T_EQ_INT(synth_write(&o, path, &err), ERR_OK);
    T_EQ_INT(model_load(path, &m, &err), ERR_OK);
    if (!m) return;
    T_EQ_INT(moe_int2_build(m, path, &err), ERR_OK);
    model_mat x[3];
    model_expert_mats(m, 1, N_EXPERT / 2, x); /* the middle of the experts */
    const size_t at = (size_t)((const uint8_t *)x[1].data - m->gguf->base), file_bytes = (size_t)m->gguf->size;
    model_free(m);
    m = NULL;
    size_t n = 0, ns = 0;
    unsigned char *bytes = tu_read_file(path, &n), *sc = tu_read_file(side, &ns);
    T_CHECKF(file_bytes > (4u << 20) && at > (1u << 20) && at + (16u << 10) < file_bytes - (1u << 20),
             "%zu bytes, the change at %zu", file_bytes, at);
    /* a copy: the same experts, so the sidecar copied beside it is used; its header is refreshed once */
    T_CHECK(bytes && sc && tu_write_file(copy, bytes, n) && tu_write_file(side_copy, sc, ns));
    T_EQ_INT(model_load(copy, &m, &err), ERR_OK);
    if (m) T_CHECKF(moe_int2_open(m, copy, &s, &err) == ERR_OK, "%s", err.msg);
    moe_int2_close(s), s = NULL;
    size_t nr = 0;
    unsigned char *refreshed = tu_read_file(side_copy, &nr);
    T_CHECK(refreshed && nr == ns && memcmp(refreshed, sc, 128) && !memcmp(refreshed + 128, sc + 128, ns - 128));
    if (m) T_EQ_INT(moe_int2_open(m, copy, &s, &err), ERR_OK);
    moe_int2_close(s), s = NULL;
    model_free(m);
    m = NULL;
    /* 16 KiB of an expert changed in place: stale */
    for (size_t i = 0; bytes && i < (16u << 10); i++) bytes[at + i] ^= 0x21;
    T_CHECK(bytes && tu_write_file(copy, bytes, n));
    T_EQ_INT(model_load(copy, &m, &err), ERR_OK);
    if (m) T_EQ_INT(moe_int2_open(m, copy, &s, &err), ERR_BAD_VALUE);
    T_CHECKF(strstr(err.msg, "experts changed") != NULL, "%s", err.msg);
    model_free(m);
    free(bytes), free(sc), free(refreshed);
    remove(path), remove(copy), remove(side), remove(side_copy);
}

enum { T = 24 };

/* A prompt of 8 then one token at a time through the store of config cfg;
 * its logits into out (T x V) and what it did into st; false on failure. */
static bool run_fwd(model *m, const char *path, moe_cache_config cfg, float *out, experts_stats *st, char *why) {
    const int V = m->hp.n_vocab;
    int32_t tok[T];
    for (int t = 0; t < T; t++) tok[t] = 1 + (t * 37 + 5) % (V - 1);
    session *s = NULL;
    moe_experts *x = NULL;
    err_t err = {0};
    err_code rc = session_new(m, 64, QT_F32, 2, &s, &err);
    if (!rc) rc = moe_experts_new(m, path, &cfg, &x, &err);
    if (!rc) {
        s->experts = moe_experts_iface(x);
        rc = session_eval(s, tok, 8, true, out, &err);
        for (int t = 8; t < T && !rc; t++) rc = session_eval(s, tok + t, 1, true, out + (size_t)t * V, &err);
    }
    T_CHECKF(rc == ERR_OK, "%s", err.msg);
    memset(st, 0, sizeof *st);
    if (x) moe_experts_iface(x)->stats(x, st);
    if (why) snprintf(why, 160, "%s", st->int2_why);
    moe_experts_free(x);
    session_free(s);
    return rc == ERR_OK;
}

static moe_cache_config cfg(uint64_t budget, moe_int2_mode int2, bool prefetch) {
    moe_cache_config c = moe_cache_config_default();
    c.budget_bytes = budget, c.int2 = int2;
    c.prefetch = prefetch ? MOE_PREFETCH_ON : MOE_PREFETCH_OFF;
    return c;
}

static bool same_logits(const float *a, const float *b, int V) {
    return !memcmp(a + 7 * (size_t)V, b + 7 * (size_t)V, sizeof(float) * (size_t)(T - 7) * V);
}

static bool finite_all(const float *a, int V) {
    for (size_t i = 7 * (size_t)V; i < (size_t)T * V; i++)
        if (!isfinite(a[i])) return false;
    return true;
}

/* Flip a byte of every record: the first copy read fails its check. */
static void damage_records(const model *m, const char *path) {
    char side[600];
    moe_int2_path(path, side, sizeof side);
    size_t n = 0;
    unsigned char *b = tu_read_file(side, &n);
    T_CHECK(b != NULL);
    if (!b) return;
    uint64_t at = 128;
    for (int l = 0; l < N_LAYER; l++)
        for (int e = 0; e < N_EXPERT; e++, at += moe_int2_record_bytes(m, l)) b[at + 5] ^= 0x40;
    T_CHECK(at == n && tu_write_file(side, b, n));
    free(b);
}

static void test_forward(const char *path) {
    model *m = NULL;
    err_t err = {0};
    T_EQ_INT(model_load(path, &m, &err), ERR_OK);
    if (!m) return;
    const int V = m->hp.n_vocab;
    const uint64_t one = moe_expert_bytes_max(m), rec = moe_int2_record_bytes(m, 0);
    float *ref = malloc(sizeof(float) * T * V), *got = malloc(sizeof(float) * T * V);
    experts_stats st;
    char why[160];
    run_fwd(m, path, cfg(0, MOE_INT2_OFF, false), ref, &st, NULL);
    /* off, and auto with the sidecar's recorded cost of 0.25 nats: exact */
    run_fwd(m, path, cfg(1, MOE_INT2_OFF, false), got, &st, why);
    T_CHECK(same_logits(ref, got, V) && st.int2_loads == 0 && strstr(why, "asked"));
    run_fwd(m, path, cfg(1, MOE_INT2_AUTO, false), got, &st, why);
    T_CHECKF(same_logits(ref, got, V) && st.int2_loads == 0 && strstr(why, "0.2500 nats"), "%s", why);
    /* auto with a cost under 0.01 nats, and the smallest cache: copies read, served, promoted at once */
    T_EQ_INT(moe_int2_set_kld(path, 0.005, 100, &err), ERR_OK);
    run_fwd(m, path, cfg(1, MOE_INT2_AUTO, false), got, &st, why);
    printf("auto, smallest cache: %llu copies read, %llu lookups served by one, %llu promoted (%s)\n",
           (unsigned long long)st.int2_loads, (unsigned long long)st.int2_served,
           (unsigned long long)st.int2_promotions, why);
    T_CHECKF(st.int2_loads > 0 && st.int2_served >= st.int2_loads && strstr(why, "on: 0.0050"), "%s", why);
    T_CHECK(!same_logits(ref, got, V) && finite_all(got, V));
    T_CHECK(st.bytes_read >= st.int2_loads * rec && (st.bytes_read - st.int2_loads * rec) % one == 0);
    /* every expert fits: auto leaves them off */
    run_fwd(m, path, cfg(0, MOE_INT2_AUTO, false), got, &st, why);
    T_CHECKF(same_logits(ref, got, V) && strstr(why, "every expert fits"), "%s", why);
    /* half the experts, no I/O thread: a copy used again is promoted at once */
    const uint64_t half = moe_cache_slot_bytes(m) * (N_LAYER * N_EXPERT / 2);
    run_fwd(m, path, cfg(half, MOE_INT2_ON, false), got, &st, why);
    printf("on, half, no I/O thread: %llu read, %llu served, %llu promoted\n", (unsigned long long)st.int2_loads,
           (unsigned long long)st.int2_served, (unsigned long long)st.int2_promotions);
    T_CHECK(st.int2_loads > 0 && st.int2_promotions > 0 && finite_all(got, V));
    /* ... with the I/O threads: promoted in the background after the layer */
    run_fwd(m, path, cfg(half, MOE_INT2_ON, true), got, &st, why);
    printf("on, half, I/O threads: %llu read, %llu served, %llu promoted\n", (unsigned long long)st.int2_loads,
           (unsigned long long)st.int2_served, (unsigned long long)st.int2_promotions);
    T_CHECK(st.int2_loads > 0 && st.int2_served > 0 && finite_all(got, V)); /* promotions: test_promotion */
    /* all: every low lookup by its copy, never promoted */
    run_fwd(m, path, cfg(half, MOE_INT2_ALL, false), got, &st, why);
    T_CHECK(st.int2_served > 0 && st.int2_promotions == 0 && !same_logits(ref, got, V));
    /* damaged copies: the first fails its check, whole experts from then on: exact */
    damage_records(m, path);
    run_fwd(m, path, cfg(1, MOE_INT2_ON, false), got, &st, why);
    T_CHECKF(st.int2_errors == 1 && st.int2_loads == 0 && strstr(why, "fails its check"), "%s", why);
    T_CHECK(same_logits(ref, got, V));
    /* a stale sidecar under on: made again at load */
    char side[600];
    moe_int2_path(path, side, sizeof side);
    T_CHECK(tu_write_file(side, "OCTOINT2 but not really a header", 32));
    run_fwd(m, path, cfg(1, MOE_INT2_AUTO, false), got, &st, why);
    T_CHECKF(strstr(why, "off: ") && same_logits(ref, got, V), "%s", why);
    run_fwd(m, path, cfg(1, MOE_INT2_ON, false), got, &st, why);
    T_CHECKF(strstr(why, "made at load") && st.int2_loads > 0, "%s", why);
    free(ref), free(got);
    model_free(m);
}

/* A copy looked up again is promoted by an I/O thread once the forward
 * pass is past its layer, then serves whole: step by step on the cache. */
static void test_promotion(const char *path) {
    model *m = NULL;
    err_t err = {0};
    T_EQ_INT(model_load(path, &m, &err), ERR_OK);
    moe_cache *c = NULL;
    const moe_cache_config cc = cfg(4 * (m ? moe_cache_slot_bytes(m) : 0), MOE_INT2_ON, true);
    if (m) T_EQ_INT(moe_cache_new(m, path, &cc, &c, &err), ERR_OK);
    model_mat mats[3];
    moe_status st = MOE_HIT;
    if (c) {
        moe_cache_new_layer(c, 1);
        T_EQ_INT(moe_cache_get(c, 1, 2, true, mats, &st, &err), ERR_OK);
        T_CHECK(st == MOE_INT2 && mats[0].type == QT_Q4_0); /* a miss, low: its copy */
        T_EQ_INT(moe_cache_get(c, 1, 2, true, mats, &st, &err), ERR_OK);
        T_CHECK(st == MOE_INT2); /* used again: served, and marked */
        T_EQ_INT(moe_cache_get(c, 1, 3, false, mats, &st, &err), ERR_OK);
        T_CHECK(st == MOE_MISS && mats[0].type == QT_Q8_0); /* a first choice: whole */
        moe_cache_new_layer(c, 2); /* past layer 1: the promotion is queued */
        moe_cache_stats cs = {0};
        for (int i = 0; i < 5000 && cs.int2_promotions == 0; i++) {
            moe_cache_stats_get(c, &cs);
            if (!cs.int2_promotions) nanosleep(&(struct timespec){0, 1000000}, NULL);
        }
        T_EQ_INT(cs.int2_promotions, 1);
        T_EQ_INT(moe_cache_get(c, 1, 2, true, mats, &st, &err), ERR_OK);
        T_CHECK(st == MOE_HIT && mats[0].type == QT_Q8_0);
        moe_cache_stats_get(c, &cs);
        T_CHECK(cs.int2_loads == 1 && cs.int2_served == 2 && cs.hits == 2); /* the copy used again: a hit */
    }
    moe_cache_free(c);
    model_free(m);
}

/* The trace marks the lookups the copies served. */
static void test_trace(const char *path) {
    model *m = NULL;
    err_t err = {0};
    T_EQ_INT(model_load(path, &m, &err), ERR_OK);
    if (!m) return;
    char tr[512];
    tu_tmp_path(tr, sizeof tr, "int2-trace.txt");
    moe_cache_config c = cfg(1, MOE_INT2_ON, false);
    c.trace = tr;
    float *out = malloc(sizeof(float) * T * m->hp.n_vocab);
    experts_stats st;
    run_fwd(m, path, c, out, &st, NULL);
    size_t n = 0;
    char *text = (char *)tu_read_file(tr, &n);
    int int2 = 0;
    for (char *p = text; p && (p = strstr(p, " INT2")); p++) int2++;
    printf("trace: %d INT2 statuses, %llu lookups served by a copy\n", int2, (unsigned long long)st.int2_served);
    T_CHECK(text && strstr(text, "(HIT MISS INT2)") && int2 > 0);
    free(text), free(out);
    remove(tr);
    model_free(m);
}

int main(void) {
    test_blocks();
    char path[512], other[512], side[600];
    tu_tmp_path(path, sizeof path, "int2.gguf");
    tu_tmp_path(other, sizeof other, "int2-other.gguf");
    if (write_model(path, QT_Q8_0, 3) && write_model(other, QT_Q8_0, 4)) {
        test_sidecar(path);
        test_faults(path, other);
        test_promotion(path);
        test_forward(path);
        test_trace(path);
    }
    test_identity();
    /* no copies where they would not be smaller: a Q4_K model's rows of 64 are fine, Q4_0 is the floor */
    model *m = NULL;
    err_t err = {0};
    char why[160];
    if (write_model(other, QT_Q4_0, 5) && model_load(other, &m, &err) == ERR_OK) {
        T_CHECK(moe_int2_applicable(m, why, sizeof why));
        model_free(m);
    }
    moe_int2_path(path, side, sizeof side);
    remove(side);
    remove(path), remove(other);
    T_DONE();
}
