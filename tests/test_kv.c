/*
 * test_kv — the KV cache (src/kv/kv_cache.h):
 *
 *   - each tier's round trip stays within its format's bound (Q8_0: half a
 *     step of max/127; Q4_0 / Q4_1: half a step of their 4-bit grid, plus the
 *     fp16 rounding of the scales);
 *   - attention over a cache of mixed tiers equals attention over the same
 *     rows dequantized, to 1e-5;
 *   - each policy keeps exactly what its definition says on hand-made
 *     attention patterns;
 *   - rollback restores the cache bit for bit (rows, positions, scores);
 *   - committed bytes never exceed the budget, checked at every commit.
 */
#include <string.h>
#include <unistd.h>

#include "core/kernels/attn.h"
#include "core/quant.h"
#include "kv/kv_cache.h"
#include "kv/spill.h"
#include "model/model.h"
#include "octo.h"
#include "runtime/plan.h"
#include "runtime/session.h"
#include "t.h"
#include "util.h"

/* the kernels' working memory (attn.h): the caller's, as the forward gives each thread its own */
static _Alignas(ATTN_SCRATCH_ALIGN) unsigned char g_scratch[ATTN_SCRATCH_BYTES];

static rng_t R = {0x6b76636163686521ULL};

static kv_shape shape_of(int n_layer, int n_head_kv, int head_dim) {
    return (kv_shape){.n_layer = n_layer, .n_head = n_head_kv * 2, .n_head_kv = n_head_kv, .head_dim = head_dim,
                      .head_dim_v = head_dim};
}

/* Append n tokens at positions p0.. with rows from gen (all layers), then commit. */
static void feed(kv_cache *c, const kv_shape *shape, int32_t p0, int n, float *rows_k, float *rows_v, bool commit) {
    kv_iface k = kv_cache_iface(c);
    const int dim = shape->n_head_kv * shape->head_dim;
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)n);
    for (int i = 0; i < n; i++) pos[i] = p0 + i;
    for (int l = 0; l < shape->n_layer; l++) {
        err_t err = {0};
        T_CHECK(k.append(k.self, l, n, pos, rows_k + (size_t)p0 * dim, rows_v + (size_t)p0 * dim, &err) == ERR_OK);
    }
    if (commit) {
        err_t err = {0};
        T_CHECK(kv_cache_commit(c, n, &err) == ERR_OK);
    }
    free(pos);
}

static float *random_rows(int n, int dim) {
    float *x = malloc(sizeof(float) * (size_t)n * dim);
    for (size_t i = 0; i < (size_t)n * dim; i++) x[i] = (float)rng_gauss(&R) * (i % 13 == 0 ? 4.0f : 1.0f);
    return x;
}

/* every committed entry of layer 0 as (pos -> K row, V row) in F32 */
static int read_back(kv_cache *c, const kv_shape *shape, int32_t *pos, float *k, float *v, uint32_t *ktype,
                     uint32_t *vtype) {
    kv_iface ki = kv_cache_iface(c);
    const kv_span *sp;
    const int ns = ki.view(ki.self, 0, &sp), dim = shape->n_head_kv * shape->head_dim;
    int n = 0;
    for (int s = 0; s < ns; s++)
        for (int j = 0; j < sp[s].n_tokens; j++, n++) {
            pos[n] = sp[s].pos[j];
            if (ktype) ktype[n] = sp[s].k_type;
            if (vtype) vtype[n] = sp[s].v_type;
            if (sp[s].k_type == ATTN_KC8 || sp[s].k_type == ATTN_KC4)
                for (int d = 0; d < dim; d++)
                    k[(size_t)n * dim + d] = attn_kc_value(sp[s].k_type, sp[s].k, sp[s].k_row_bytes, d, j);
            else
                attn_widen(sp[s].k_type, (const uint8_t *)sp[s].k + (size_t)j * sp[s].k_row_bytes, 0, dim, k + (size_t)n * dim);
            attn_widen(sp[s].v_type, (const uint8_t *)sp[s].v + (size_t)j * sp[s].v_row_bytes, 0, dim, v + (size_t)n * dim);
        }
    return n;
}

/* worst |x - x'| / bound for keys by channel: per channel, half a step of (max - min) / levels */
static double worst_channels(uint32_t type, const float *K, const float *k, const int32_t *pos, int n, int dim) {
    double worst = 0.0;
    const double levels = type == ATTN_KC8 ? 255 : 15;
    for (int b0 = 0; b0 < n; b0 += 64) /* the cache's blocks hold 64 entries in order here */
        for (int d = 0; d < dim; d++) {
            double mn = INFINITY, mx = -INFINITY;
            for (int j = b0; j < b0 + 64 && j < n; j++) {
                const double x = K[(size_t)pos[j] * dim + d];
                mn = fmin(mn, x), mx = fmax(mx, x);
            }
            /* half a step, the fp16 rounding of the step times the largest quant, and of the minimum */
            const double bound = (mx - mn) / levels * (0.5 + levels * 0x1p-11) + fabs(mn) * 0x1p-11 + 1e-6;
            for (int j = b0; j < b0 + 64 && j < n; j++)
                worst = fmax(worst, fabs(K[(size_t)pos[j] * dim + d] - k[(size_t)j * dim + d]) / bound);
        }
    return worst;
}

/* worst |x - x'| / bound over rows of 32-blocks */
static double worst_vs_bound(uint32_t type, const float *x, const float *y, int n) {
    double worst = 0.0;
    for (int b = 0; b < n / 32; b++) {
        float mn = INFINITY, mx = -INFINITY;
        for (int i = 0; i < 32; i++) mn = fminf(mn, x[32 * b + i]), mx = fmaxf(mx, x[32 * b + i]);
        const double amax = fmax(fabs(mn), fabs(mx));
        double bound;
        /* half a step, plus the step's fp16 rounding times the largest quant */
        if (type == QT_Q8_0) bound = amax / 127 * (0.5 + 127 * 0x1p-11) + 1e-7;
        else if (type == QT_Q4_0) bound = amax / 8 * (1 + 8 * 0x1p-11) + 1e-7; /* d = max/-8: the far end is a whole step off */
        else if (type == QT_Q4_1) bound = (mx - mn) / 15 * 0.5 * 1.01 + 1e-3 * fabs(mn) + 1e-7;
        else bound = amax * 0x1p-11 + 1e-7; /* F16 */
        for (int i = 0; i < 32; i++) worst = fmax(worst, fabs(x[32 * b + i] - y[32 * b + i]) / bound);
    }
    return worst;
}

static void test_tiers(void) {
    const kv_shape shape = shape_of(2, 2, 64);
    const int dim = 128, N = 320; /* five full blocks: a partly filled newest block stays hot until full */
    const uint32_t types[] = {QT_F16, QT_Q8_0, QT_Q4_0, QT_Q4_1, QT_Q8_0, QT_Q4_1};
    float *K = random_rows(N, dim), *V = random_rows(N, dim);
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        const int channels = t >= 4; /* the last two: keys by channel */
        kv_config cfg = kv_config_plain(QT_F16);
        cfg.warm_type = cfg.cold_type = types[t];
        cfg.key_channels = channels;
        cfg.hot_tokens = cfg.warm_tokens = 0; /* everything committed goes to the tier at once */
        kv_cache *c;
        err_t err = {0};
        T_CHECK(kv_cache_new(shape, &cfg, &c, &err) == ERR_OK);
        feed(c, &shape, 0, N, K, V, true);
        int32_t pos[320];
        uint32_t kty[320], vty[320];
        float *k = malloc(sizeof(float) * N * dim), *v = malloc(sizeof(float) * N * dim);
        const int n = read_back(c, &shape, pos, k, v, kty, vty);
        T_EQ_INT(n, N);
        const uint32_t want_k = !channels ? types[t] : types[t] == QT_Q8_0 ? ATTN_KC8 : ATTN_KC4;
        double worst = 0.0;
        int wrong_type = 0;
        for (int i = 0; i < n; i++) {
            wrong_type += kty[i] != want_k || vty[i] != types[t];
            if (!channels) worst = fmax(worst, worst_vs_bound(types[t], K + (size_t)pos[i] * dim, k + (size_t)i * dim, dim));
            worst = fmax(worst, worst_vs_bound(types[t], V + (size_t)pos[i] * dim, v + (size_t)i * dim, dim));
        }
        if (channels) worst = fmax(worst, worst_channels(want_k, K, k, pos, n, dim));
        printf("tier %-5s%s round trip: worst error %.3f of the bound\n", quant_traits_of(types[t])->name,
               channels ? " (keys by channel)" : "", worst);
        T_CHECKF(worst <= 1.0, "tier %u: error %.3f x the bound", types[t], worst);
        T_EQ_INT(wrong_type, 0);
        const kv_stats st = kv_cache_stats(c);
        const uint64_t kbytes = channels ? (uint64_t)(N / 64) * dim * (4 + (want_k == ATTN_KC8 ? 64 : 32))
                                         : (uint64_t)N * quant_row_bytes(types[t], dim);
        T_EQ_INT(st.entry_bytes, shape.n_layer * (kbytes + (uint64_t)N * quant_row_bytes(types[t], dim)));
        T_CHECK(st.bytes > st.mapped_bytes && st.bytes < st.mapped_bytes + 5 * shape.n_layer * 1024); /* + bookkeeping */
        free(k), free(v);
        kv_cache_free(c);
    }
    free(K), free(V);
}

/* attention over the cache's own spans vs a double softmax over the dequantized rows */
static void test_mixed_attention(void) {
    const kv_shape shape = shape_of(1, 2, 64);
    const int dim = 128, N = 400;
    kv_config cfg = kv_config_default();
    cfg.hot_tokens = 64, cfg.warm_tokens = 192, cfg.anchor_tokens = 4, cfg.policy = KV_POLICY_NONE;
    kv_cache *c;
    err_t err = {0};
    T_CHECK(kv_cache_new(shape, &cfg, &c, &err) == ERR_OK);
    float *K = random_rows(N, dim), *V = random_rows(N, dim);
    for (int p = 0; p < N; p += 50) feed(c, &shape, p, 50, K, V, true);
    const kv_stats st = kv_cache_stats(c);
    printf("mixed tiers: %llu hot, %llu warm, %llu cold bytes\n", (unsigned long long)st.bytes_hot,
           (unsigned long long)st.bytes_warm, (unsigned long long)st.bytes_cold);
    T_CHECK(st.bytes_hot > 0 && st.bytes_warm > 0 && st.bytes_cold > 0);
    int32_t pos[400];
    float *k = malloc(sizeof(float) * N * dim), *v = malloc(sizeof(float) * N * dim);
    const int n = read_back(c, &shape, pos, k, v, NULL, NULL);
    kv_iface ki = kv_cache_iface(c);
    const kv_span *sp;
    const int ns = ki.view(ki.self, 0, &sp);
    attn_keys runs[64];
    double worst = 0.0;
    attn_fn fns[2] = {attn_portable, attn_avx512()};
    for (int f = 0; f < 2 && fns[f]; f++)
        for (int h = 0; h < 2; h++) {
            for (int s = 0; s < ns; s++)
                runs[s] = (attn_keys){.k_type = sp[s].k_type, .v_type = sp[s].v_type, .k = sp[s].k, .v = sp[s].v, .k_off = h * 64, .v_off = h * 64,
                                      .k_stride = sp[s].k_row_bytes, .v_stride = sp[s].v_row_bytes, .pos = sp[s].pos,
                                      .n = sp[s].n_tokens};
            float q[64], out[64];
            for (int d = 0; d < 64; d++) q[d] = (float)rng_gauss(&R) * 0.3f;
            attn_queries aq = {.hd = 64, .hdv = 64, .scale = 0.125f, .n_q = 1, .q = {q}, .qpos = {N}, .out = {out}};
            fns[f](&aq, runs, ns, g_scratch);
            /* reference */
            double m = -INFINITY, sum = 0, ref[64] = {0};
            double *sc = malloc(sizeof(double) * n);
            for (int j = 0; j < n; j++) {
                double a = 0;
                for (int d = 0; d < 64; d++) a += (double)q[d] * k[(size_t)j * dim + h * 64 + d];
                sc[j] = a * 0.125;
                m = fmax(m, sc[j]);
            }
            for (int j = 0; j < n; j++) {
                const double p = exp(sc[j] - m);
                sum += p;
                for (int d = 0; d < 64; d++) ref[d] += p * v[(size_t)j * dim + h * 64 + d];
            }
            double mag = 0;
            for (int d = 0; d < 64; d++) mag = fmax(mag, fabs(ref[d] / sum));
            for (int d = 0; d < 64; d++) worst = fmax(worst, fabs(out[d] - ref[d] / sum) / mag);
            free(sc);
        }
    printf("attention over mixed tiers vs the dequantized cache: %.3g relative\n", worst);
    T_CHECKF(worst < 1e-5, "attention over mixed tiers off by %.3g", worst);
    free(k), free(v), free(K), free(V);
    kv_cache_free(c);
}

/* ---- policies on hand-made patterns: 1 layer, tiny rows, F32 tiers */

/* The budget is counted in mapped blocks of 64 entries (16 KiB each here):
 * the smallest, 3 blocks (kv_budget_floor), holds the anchors' block, the
 * recent window's and the block being filled: 129 to 192 entries. */
static kv_cache *policy_cache(const kv_shape *shape, kv_policy_id p, int anchors, int recent) {
    kv_config cfg = kv_config_plain(QT_F32);
    cfg.policy = p;
    cfg.anchor_tokens = anchors;
    cfg.recent_tokens = recent;
    cfg.snap_window = 4;
    cfg.budget_bytes = kv_budget_floor(*shape, &cfg);
    kv_cache *c = NULL;
    err_t err = {0};
    if (kv_cache_new(*shape, &cfg, &c, &err)) {
        T_CHECKF(0, "kv_cache_new: %s", err.msg);
        return NULL;
    }
    return c;
}

/* the positions the cache holds (layer 0), sorted */
static int held(kv_cache *c, int32_t *pos) {
    kv_iface ki = kv_cache_iface(c);
    const kv_span *sp;
    const int ns = ki.view(ki.self, 0, &sp);
    int n = 0;
    for (int s = 0; s < ns; s++)
        for (int j = 0; j < sp[s].n_tokens; j++) pos[n++] = sp[s].pos[j];
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && pos[j - 1] > pos[j]; j--) {
            int32_t t = pos[j];
            pos[j] = pos[j - 1];
            pos[j - 1] = t;
        }
    return n;
}

/* One step of decoding: append position p (tentative), observe weights w
 * over the view (w_of(pos) for each entry), commit. */
static void step(kv_cache *c, const kv_shape *shape, int32_t p, float (*w_of)(int32_t pos, int32_t now)) {
    float kr[32] = {0}, vr[32] = {0};
    kr[0] = (float)p;
    kv_iface k = kv_cache_iface(c);
    err_t err = {0};
    T_CHECK(k.append(k.self, 0, 1, &p, kr, vr, &err) == ERR_OK);
    if (k.observe) {
        const kv_span *sp;
        const int ns = k.view(k.self, 0, &sp);
        float w[4096];
        int n = 0;
        for (int s = 0; s < ns; s++)
            for (int j = 0; j < sp[s].n_tokens; j++) w[n++] = w_of(sp[s].pos[j], p);
        k.observe(k.self, 0, 1, n, w);
    }
    T_CHECK(kv_cache_commit(c, 1, &err) == ERR_OK);
    (void)shape;
}

/* positions divisible by 10 are attended to heavily by every query */
static float heavy10(int32_t pos, int32_t now) {
    (void)now;
    return pos % 10 == 0 ? 1.0f : 0.01f;
}
/* until step 200 queries look at pos 5..194; after, at pos 200..389 (less strongly) */
static float shifting(int32_t pos, int32_t now) {
    if (now < 200) return pos >= 5 && pos < 195 ? 1.0f : 0.0f;
    return pos >= 200 && pos < 390 ? 0.2f : 0.0f;
}
static float flat(int32_t pos, int32_t now) {
    (void)pos, (void)now;
    return 0.01f;
}

static void test_policies(void) {
    const kv_shape shape = shape_of(1, 1, 32);
    int32_t pos[4096];
    /* 4 anchors, 16 recent, a budget of 3 blocks: 129..192 entries held (policy_cache) */
    const int lo = 129, hi = 192;

    /* none: everything, whatever the budget says */
    kv_cache *c = policy_cache(&shape, KV_POLICY_NONE, 4, 16);
    for (int p = 0; p < 200; p++) step(c, &shape, p, flat);
    T_EQ_INT(held(c, pos), 200);
    kv_cache_free(c);

    /* window: anchors 0..3 and a run of the newest entries */
    c = policy_cache(&shape, KV_POLICY_WINDOW, 4, 16);
    for (int p = 0; p < 300; p++) step(c, &shape, p, flat);
    int n = held(c, pos);
    T_CHECKF(n >= lo && n <= hi, "window holds %d", n);
    bool ok = n >= lo;
    for (int i = 0; ok && i < 4; i++) ok = pos[i] == i;
    for (int i = 4; ok && i < n; i++) ok = pos[i] == 300 - (n - 4) + (i - 4);
    T_CHECKF(ok, "window keeps anchors and the newest entries (first kept after anchors: %d)", n > 4 ? pos[4] : -1);
    kv_cache_free(c);

    /* h2o: the heavy hitters (multiples of 10) survive; among the rest only the newest */
    c = policy_cache(&shape, KV_POLICY_H2O, 4, 16);
    for (int p = 0; p < 600; p++) step(c, &shape, p, heavy10);
    n = held(c, pos);
    T_CHECKF(n >= lo && n <= hi, "h2o holds %d", n);
    int heavy_kept = 0, light_old = 0;
    for (int i = 0; i < n; i++) {
        heavy_kept += pos[i] % 10 == 0;
        light_old += pos[i] % 10 != 0 && pos[i] >= 4 && pos[i] < 600 - 64;
    }
    /* 60 heavy hitters all fit in the 109+ evictable slots: all kept */
    T_EQ_INT(heavy_kept, 60);
    printf("h2o: %d of 60 heavy hitters kept, %d light old entries kept, %d held\n", heavy_kept, light_old, n);
    kv_cache_free(c);

    /* morphkv vs h2o on a pattern that shifts: early queries look at 5..194
     * (a lot), later ones at 200..389 (less); the slots hold one group at most.
     * morphkv follows the recent queries; h2o's totals still favour the
     * early group (200 x 1.0 against at most 500 x 0.2). */
    int kept_recent[2] = {0, 0}, kept_early[2] = {0, 0}, held_n[2] = {0, 0};
    const kv_policy_id pol[2] = {KV_POLICY_H2O, KV_POLICY_MORPHKV};
    for (int k = 0; k < 2; k++) {
        c = policy_cache(&shape, pol[k], 4, 16);
        for (int p = 0; p < 700; p++) step(c, &shape, p, shifting);
        n = held_n[k] = held(c, pos);
        for (int i = 0; i < n; i++) {
            kept_early[k] += pos[i] >= 5 && pos[i] < 195;
            kept_recent[k] += pos[i] >= 200 && pos[i] < 390;
        }
        kv_cache_free(c);
    }
    printf("shifting attention: h2o keeps %d early / %d recent-focus entries of %d, morphkv %d / %d of %d\n",
           kept_early[0], kept_recent[0], held_n[0], kept_early[1], kept_recent[1], held_n[1]);
    /* h2o: the slots to the early group. morphkv: the early scores fade by
     * (15/16) per query, so the later group takes them (109 / 0 and 0 / 109 here) */
    T_EQ_INT(kept_recent[0], 0);
    T_CHECKF(kept_early[0] >= 100, "h2o kept %d early of %d", kept_early[0], held_n[0]);
    T_CHECKF(kept_recent[1] >= 100 && kept_early[1] <= 10, "morphkv kept %d later / %d early", kept_recent[1],
             kept_early[1]);

    /* snapkv: the prefill's last 4 queries vote once; voted entries stay, later ones do not change it */
    c = policy_cache(&shape, KV_POLICY_SNAPKV, 4, 16);
    {
        kv_iface k = kv_cache_iface(c);
        T_CHECK(k.observe != NULL && k.observe_last == 4);
        float *kr = calloc(400 * 32, sizeof(float)), *vr = calloc(400 * 32, sizeof(float));
        int32_t pp[400];
        for (int i = 0; i < 400; i++) pp[i] = i;
        err_t err = {0};
        T_CHECK(k.append(k.self, 0, 400, pp, kr, vr, &err) == ERR_OK);
        float w[400];
        for (int i = 0; i < 400; i++) w[i] = i % 7 == 0 ? 0.5f : 0.001f; /* votes for multiples of 7 */
        k.observe(k.self, 0, 4, 400, w);
        T_CHECK(kv_cache_commit(c, 400, &err) == ERR_OK);
        T_CHECK(kv_cache_iface(c).observe == NULL); /* one vote only */
        n = held(c, pos);
        int sevens = 0, others_old = 0;
        for (int i = 0; i < n; i++) {
            sevens += pos[i] % 7 == 0 && pos[i] >= 4 && pos[i] < 384;
            others_old += pos[i] % 7 != 0 && pos[i] >= 4 && pos[i] < 384;
        }
        printf("snapkv: kept %d voted and %d unvoted old prompt entries of %d\n", sevens, others_old, n);
        T_CHECKF(n >= lo && n <= hi, "snapkv holds %d", n);
        T_EQ_INT(sevens, 54); /* 7, 14, ..., 378 */
        free(kr), free(vr);
    }
    kv_cache_free(c);
}

/* ---- rollback and budget */

typedef struct {
    int n;
    int32_t pos[2048];
    uint8_t *bytes;
    size_t len;
} snapshot;

static void snap(kv_cache *c, const kv_shape *shape, snapshot *s) {
    s->n = 0;
    s->len = 0;
    free(s->bytes);
    s->bytes = NULL;
    kv_iface ki = kv_cache_iface(c);
    for (int l = 0; l < shape->n_layer; l++) {
        const kv_span *sp;
        const int ns = ki.view(ki.self, l, &sp);
        for (int i = 0; i < ns; i++) {
            const size_t add = (size_t)sp[i].n_tokens * (sp[i].k_row_bytes + sp[i].v_row_bytes) + 4 * (size_t)sp[i].n_tokens + 4;
            s->bytes = realloc(s->bytes, s->len + add);
            memcpy(s->bytes + s->len, sp[i].k, (size_t)sp[i].n_tokens * sp[i].k_row_bytes);
            s->len += (size_t)sp[i].n_tokens * sp[i].k_row_bytes;
            memcpy(s->bytes + s->len, sp[i].v, (size_t)sp[i].n_tokens * sp[i].v_row_bytes);
            s->len += (size_t)sp[i].n_tokens * sp[i].v_row_bytes;
            memcpy(s->bytes + s->len, sp[i].pos, 4 * (size_t)sp[i].n_tokens);
            s->len += 4 * (size_t)sp[i].n_tokens;
            memcpy(s->bytes + s->len, &sp[i].k_type, 4);
            s->len += 4;
            if (l == 0) s->n += sp[i].n_tokens;
        }
    }
}

static void test_rollback_and_budget(void) {
    const kv_shape shape = shape_of(3, 2, 32);
    const int dim = 64, N = 1200;
    float *K = random_rows(N + 64, dim), *V = random_rows(N + 64, dim);
    kv_config cfg = kv_config_default();
    cfg.hot_tokens = 32, cfg.warm_tokens = 128, cfg.anchor_tokens = 8, cfg.recent_tokens = 32;
    cfg.budget_bytes = kv_budget_floor(shape, &cfg) * 3 / 2; /* 4.5 blocks a layer (the floor: 3) */
    kv_cache *c;
    err_t err = {0};
    T_CHECK(kv_cache_new(shape, &cfg, &c, &err) == ERR_OK);
    snapshot a = {0}, b = {0};
    int over = 0, rollbacks_equal = 0, rollbacks = 0;
    uint64_t max_bytes = 0;
    int32_t p = 0;
    while (p < N) {
        /* a verify batch of 1 + k tentative entries, then accept some of them */
        const int k = 1 + (int)(rng_next(&R) % 6), accept = 1 + (int)(rng_next(&R) % (unsigned)k);
        snap(c, &shape, &a);
        feed(c, &shape, p, k, K, V, false);
        T_EQ_INT(kv_cache_stats(c).tentative, k);
        kv_cache_rollback(c, k);
        snap(c, &shape, &b);
        rollbacks++;
        rollbacks_equal += a.len == b.len && (a.len == 0 || !memcmp(a.bytes, b.bytes, a.len));
        feed(c, &shape, p, k, K, V, false);
        kv_cache_rollback(c, k - accept);
        T_CHECK(kv_cache_commit(c, accept, &err) == ERR_OK);
        p += accept;
        const kv_stats st = kv_cache_stats(c);
        over += st.bytes > cfg.budget_bytes;
        if (st.bytes > max_bytes) max_bytes = st.bytes;
    }
    const kv_stats st = kv_cache_stats(c);
    printf("budget %llu bytes: max committed %llu over %d tokens (%lld evicted per layer, %lld blocks re-quantized), "
           "%d/%d rollbacks bit-exact\n",
           (unsigned long long)cfg.budget_bytes, (unsigned long long)max_bytes, N, (long long)st.tokens_evicted,
           (long long)st.requantized, rollbacks_equal, rollbacks);
    T_EQ_INT(over, 0);
    T_EQ_INT(rollbacks_equal, rollbacks);
    T_CHECK(st.tokens_evicted > 0);
    T_CHECK(st.bytes_cold > 0);
    /* the anchors are still there */
    int32_t pos[2048];
    const int n = held(c, pos);
    T_CHECK(n > 8 && pos[0] == 0 && pos[7] == 7);
    /* truncate drops everything from a position on */
    kv_cache_truncate(c, 100);
    T_CHECK(held(c, pos) <= 100 && kv_cache_stats(c).tentative == 0);
    free(a.bytes), free(b.bytes), free(K), free(V);
    kv_cache_free(c);
    /* a budget too small for anchors + recent is refused */
    cfg.budget_bytes = 10 * kv_token_bytes(shape, QT_F16);
    T_EQ_INT(kv_cache_new(shape, &cfg, &c, &err), ERR_INVALID_ARG);
    printf("refused: %s\n", err.msg);
    /* so is a shape no model has (the cache divides by layers and head groups) */
    T_EQ_INT(kv_cache_new((kv_shape){0}, NULL, &c, &err), ERR_INVALID_ARG);
    T_EQ_INT(kv_cache_new(shape_of(1, 3, 32), NULL, &c, &err), ERR_OK); /* 6 query heads on 3: fine */
    kv_cache_free(c);
    kv_shape odd = shape_of(1, 4, 32);
    odd.n_head = 6; /* not a multiple of the key/value heads */
    T_EQ_INT(kv_cache_new(odd, NULL, &c, &err), ERR_INVALID_ARG);
    T_CHECK(c == NULL);
}

/* A small synthetic model (2 layers, 4 heads / 2 KV heads, 4096 context) written to path and
 * loaded; NULL (the failure recorded) when either fails. */
static model *small_model(uint64_t seed, const char *name, char *path, size_t path_size) {
    synth_opts o = synth_defaults();
    o.n_embd = 64, o.n_head = 4, o.n_head_kv = 2, o.n_ff = 96, o.n_layer = 2, o.n_ctx = 4096, o.seed = seed;
    tu_tmp_path(path, path_size, name);
    err_t err = {0};
    model *m = NULL;
    if (synth_write(&o, path, &err) || model_load(path, &m, &err)) {
        T_CHECKF(0, "%s", err.msg);
        remove(path);
        return NULL;
    }
    return m;
}

/* Generation over a 4096-token context with the default cache and a small
 * budget: committed bytes stay within it after every token, through the
 * real forward pass (attention over mixed tiers, observed weights). */
static void generation_budget(const char *spill_dir) {
    char path[512];
    err_t err = {0};
    model *m = small_model(5, "kvgen.gguf", path, sizeof path);
    if (!m) return;
    kv_config cfg = kv_config_default();
    /* ~10 % of the context at F16; with spill, room for the hot and warm windows' blocks */
    cfg.budget_bytes = (spill_dir ? 800 : 400) * kv_token_bytes(plan_kv_shape(&m->hp), QT_F16);
    cfg.spill_dir = spill_dir;
    session *s = NULL;
    T_CHECK(session_new_kv(m, 4096, &cfg, 1, &s, &err) == ERR_OK);
    float *logits = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
    int32_t tok = 1;
    int over = 0, steps = 0;
    uint64_t peak = 0;
    /* a 300-token prompt in one batch, then one token at a time */
    int32_t prompt[300];
    for (int i = 0; i < 300; i++) prompt[i] = 1 + (i * 7) % (m->hp.n_vocab - 1);
    err_code rc = session_eval(s, prompt, 300, false, logits, &err);
    while (!rc && s->n_past < 4096) {
        int best = 0;
        for (int v = 1; v < m->hp.n_vocab; v++)
            if (logits[v] > logits[best]) best = v;
        tok = (int32_t)(best == 2 ? 3 : best); /* stay off EOS: the context must fill */
        rc = session_eval(s, &tok, 1, false, logits, &err);
        const kv_stats st = kv_cache_stats(s->kv);
        over += st.bytes > cfg.budget_bytes;
        if (st.bytes > peak) peak = st.bytes;
        steps++;
    }
    T_CHECKF(rc == ERR_OK, "%s", err.msg);
    const kv_stats st = kv_cache_stats(s->kv);
    printf("4096-token generation%s, budget %llu bytes: peak %llu after %d steps, %lld entries held, %lld evicted, "
           "%lld blocks on file, %lld read back (%lld hits)\n",
           spill_dir ? " with spill" : "", (unsigned long long)cfg.budget_bytes, (unsigned long long)peak, steps,
           (long long)st.tokens, (long long)st.tokens_evicted, (long long)st.blocks_spilled, (long long)st.spill_reads,
           (long long)st.spill_hits);
    T_EQ_INT(over, 0);
    T_EQ_INT(s->n_past, 4096);
    if (!spill_dir) T_CHECK(st.tokens_evicted > 3000);
    else {
        /* through the forward's queries: blocks go out and come back, and the
         * budget still holds. Only warm entries over budget are evicted (the
         * default 512-token warm window nearly fills it): every cold block is
         * kept, in memory or on file */
        T_CHECK(st.spill_on && st.blocks_spilled > 0 && st.spill_reads > 0 && st.spill_errors == 0);
        /* (tokens: layer 0's; tokens_evicted: the mean over layers, which can differ by a block's trade) */
        T_CHECKF(llabs(st.tokens + st.tokens_evicted - 4096) < m->hp.n_layer, "%lld held + %lld evicted",
                 (long long)st.tokens, (long long)st.tokens_evicted);
        T_CHECKF(st.tokens_evicted < 1000, "%lld entries evicted with spill on", (long long)st.tokens_evicted);
    }
    free(logits);
    session_free(s);
    model_free(m);
    remove(path);
}

/* The plan's spill decision by device profile and storage. */
/* A tree pass keeps a path off its first line: the kept entries' rows move
 * into the first slots (across a block boundary here), at those slots'
 * positions, the rest go; the phases say where the next entry sits in its tile. */
static void test_keep_tentative(void) {
    const kv_shape shape = shape_of(2, 2, 16);
    const int dim = 32, P = 60, T = 10;
    float *K = random_rows(P + T, dim), *V = random_rows(P + T, dim);
    kv_config cfg = kv_config_plain(QT_F32);
    kv_cache *c;
    err_t err = {0};
    T_CHECK(kv_cache_new(shape, &cfg, &c, &err) == ERR_OK);
    feed(c, &shape, 0, P, K, V, true);
    T_EQ_INT((int)kv_cache_append_phases(c, 16), 1 << (P % 16));
    feed(c, &shape, P, T, K, V, false); /* slots 0..9 at positions 60..69: 4 in this block, 6 in the next */
    const int slots[3] = {0, 5, 8};
    kv_cache_keep_tentative(c, slots, 3);
    T_CHECK(kv_cache_commit(c, 3, &err) == ERR_OK);
    int32_t pos[128];
    float *k = malloc(sizeof(float) * 128 * dim), *v = malloc(sizeof(float) * 128 * dim);
    const int n = read_back(c, &shape, pos, k, v, NULL, NULL);
    int wrong = n != P + 3;
    for (int i = 0; i < n && !wrong; i++) {
        const int from = pos[i] < P ? pos[i] : P + slots[pos[i] - P];
        wrong += pos[i] != i || memcmp(k + (size_t)i * dim, K + (size_t)from * dim, sizeof(float) * dim) ||
                 memcmp(v + (size_t)i * dim, V + (size_t)from * dim, sizeof(float) * dim);
    }
    printf("keep tentative: slots 0, 5, 8 of 10 kept at positions 60..62, %d entries held, %s\n", n,
           wrong ? "WRONG" : "rows moved bit for bit");
    T_EQ_INT(wrong, 0);
    T_EQ_INT(kv_cache_stats(c).tentative, 0);
    T_EQ_INT((int)kv_cache_append_phases(c, 16), 1 << ((P + 3) % 16));
    free(k), free(v), free(K), free(V);
    kv_cache_free(c);
}

static void test_plan_spill(void) {
    char path[512];
    err_t err = {0};
    model *m = small_model(9, "plan.gguf", path, sizeof path);
    if (!m) return;
    kv_config cfg = kv_config_default();
    cfg.budget_bytes = 400 * kv_token_bytes(plan_kv_shape(&m->hp), QT_F16);
    const struct {
        const char *device, *dir;
        plan_spill mode;
        bool on;
    } cases[] = {
        {"pixel-8", "/tmp", PLAN_SPILL_AUTO, true},           /* UFS */
        {"iphone-15-pro", "/tmp", PLAN_SPILL_AUTO, true},     /* NVMe */
        {"android-4gb-emmc", "/tmp", PLAN_SPILL_AUTO, false}, /* eMMC: hard eviction */
        {"android-4gb-emmc", "/tmp", PLAN_SPILL_ON, true},    /* unless asked */
        {"pixel-8", NULL, PLAN_SPILL_AUTO, false},            /* no cache directory */
        {"pixel-8", "/tmp", PLAN_SPILL_OFF, false},
        {NULL, "/dev/shm", PLAN_SPILL_AUTO, false},           /* tmpfs is memory */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        plan_device d;
        T_CHECK(plan_device_of(cases[i].device, cases[i].dir, cases[i].mode, &d, &err) == ERR_OK);
        const plan p = plan_make(m, NULL, 4096, &cfg, &d);
        printf("plan: %-16s %-9s -> spill %s\n", cases[i].device ? cases[i].device : "host", cases[i].dir ? cases[i].dir : "-",
               p.spill_reason);
        T_CHECKF((p.kv.spill_dir != NULL) == cases[i].on, "case %zu: %s", i, p.spill_reason);
    }
    /* a profile's memory sets the budget: 4 GiB for the app on an 8 GB phone */
    plan_device d;
    T_CHECK(plan_device_of("pixel-8", NULL, PLAN_SPILL_AUTO, &d, &err) == ERR_OK);
    T_CHECK(d.mem_available == 4ull << 30 && d.storage == PLAT_STORAGE_UFS);
    T_EQ_INT(plan_device_of("nokia-3310", NULL, PLAN_SPILL_AUTO, &d, &err), ERR_INVALID_ARG);
    printf("unknown device: %s\n", err.msg);
    model_free(m);
    remove(path);
}

/* With a draft model the derived budget reserves its weights too and is
 * shared in whole tokens, in proportion to each model's bytes per token;
 * a given budget is shared the same way; the draft's cache never spills. */
static void test_plan_draft(void) {
    char path[512], dpath[512];
    err_t err = {0};
    model *m = small_model(9, "plan-t.gguf", path, sizeof path), *d = NULL;
    synth_opts o = synth_defaults();
    o.n_embd = 32, o.n_head = 2, o.n_head_kv = 1, o.n_ff = 48, o.n_layer = 1, o.n_ctx = 4096, o.seed = 3;
    tu_tmp_path(dpath, sizeof dpath, "plan-d.gguf");
    T_CHECKF(synth_write(&o, dpath, &err) == ERR_OK && model_load(dpath, &d, &err) == ERR_OK, "%s", err.msg);
    if (!m || !d) goto out;
    const uint64_t tb = kv_token_bytes(plan_kv_shape(&m->hp), QT_F16), db = kv_token_bytes(plan_kv_shape(&d->hp), QT_F16);
    T_CHECK(tb != db); /* unequal shares, so a split by halves would fail below */
    kv_config cfg = kv_config_default();
    plan_device dev = {.mem_available = 0, .storage = PLAT_STORAGE_NVME, .cache_dir = "/tmp", .spill = PLAN_SPILL_ON};
    /* free memory that leaves 0.6 x 1000 tokens of both caches after the weights and the margin */
    const uint64_t extra = 1000 * (tb + db) * 10 / 6 + 77;
    dev.mem_available = m->weight_bytes + d->weight_bytes + PLAN_SAFETY_MARGIN + extra;
    const uint64_t b = extra / 10 * 6;
    plan p = plan_make(m, d, 4096, &cfg, &dev);
    printf("plan with a draft: %s\n", p.kv_reason);
    T_CHECK(p.kv.budget_bytes + p.draft_kv.budget_bytes == b);
    T_EQ_INT((int)(p.kv.budget_bytes % tb), 0);
    T_EQ_INT((int)(p.kv.budget_bytes / tb), (int)(b / (tb + db)));
    T_CHECK(p.draft_kv.budget_bytes >= b / (tb + db) * db && p.draft_kv.budget_bytes < (b / (tb + db) + 1) * db + tb);
    T_CHECK(p.kv.spill_dir != NULL && p.draft_kv.spill_dir == NULL && p.draft_kv.policy == p.kv.policy);
    T_CHECK(strstr(p.kv_reason, "shared with the draft") != NULL);
    /* without the draft, its weights and its share go to the model's cache */
    const plan alone = plan_make(m, NULL, 4096, &cfg, &dev);
    T_CHECK(alone.kv.budget_bytes == (extra + d->weight_bytes) / 10 * 6 && alone.draft_kv.budget_bytes == 0);
    /* a given budget is the two caches' together */
    cfg.budget_bytes = 300 * (tb + db) + 5;
    p = plan_make(m, d, 4096, &cfg, &dev);
    T_CHECK(p.kv.budget_bytes == 300 * tb && p.draft_kv.budget_bytes == 300 * db + 5);
    /* memory for the whole context of both: no budget for either */
    cfg.budget_bytes = 0;
    dev.mem_available = 1ull << 34;
    p = plan_make(m, d, 4096, &cfg, &dev);
    T_CHECK(p.kv.budget_bytes == 0 && p.draft_kv.budget_bytes == 0);
out:
    model_free(m), model_free(d);
    remove(path), remove(dpath);
}

static void test_generation_budget(void) {
    generation_budget(NULL);
    generation_budget(getenv("OCTO_TMP") && *getenv("OCTO_TMP") ? getenv("OCTO_TMP") : "/tmp");
}

/* ---- spill */

/* Feed N tokens one commit at a time (batches of 1..6), handing the cache a
 * query row per layer before each batch as the forward does; check the
 * budget after every commit. Returns the number of commits over budget. */
static int feed_queries(kv_cache *c, const kv_shape *shape, int32_t p0, int N, float *K, float *V, const float *Q) {
    kv_iface ki = kv_cache_iface(c);
    const int qd = shape->n_head * shape->head_dim;
    int over = 0;
    for (int32_t p = p0; p < p0 + N;) {
        int k = 1 + (int)(rng_next(&R) % 6);
        if (k > p0 + N - p) k = p0 + N - p;
        for (int l = 0; l < shape->n_layer; l++)
            if (ki.queries) ki.queries(ki.self, l, 1, Q + (size_t)p * qd);
        feed(c, shape, p, k, K, V, true);
        p += k;
        const kv_stats st = kv_cache_stats(c);
        over += st.budget && st.bytes > st.budget;
    }
    return over;
}

/* entry j of span sp as F32 key and value rows */
static void span_entry(const kv_span *sp, int j, int dim, float *k, float *v) {
    if (sp->k_type == ATTN_KC8 || sp->k_type == ATTN_KC4)
        for (int d = 0; d < dim; d++) k[d] = attn_kc_value(sp->k_type, sp->k, sp->k_row_bytes, d, j);
    else attn_widen(sp->k_type, (const uint8_t *)sp->k + (size_t)j * sp->k_row_bytes, 0, dim, k);
    attn_widen(sp->v_type, (const uint8_t *)sp->v + (size_t)j * sp->v_row_bytes, 0, dim, v);
}

/* Entries of c's view that differ from the entry at the same position in
 * ref's (or that ref lacks): their stored values, bit for bit, every layer. */
static int entries_differing(kv_cache *c, kv_cache *ref, const kv_shape *shape) {
    kv_iface a = kv_cache_iface(c), b = kv_cache_iface(ref);
    const int dim = shape->n_head_kv * shape->head_dim;
    float *rk = malloc(sizeof(float) * 4096 * dim), *rv = malloc(sizeof(float) * 4096 * dim), k[256], v[256];
    bool *have = calloc(4096, 1);
    int bad = 0;
    for (int l = 0; l < shape->n_layer; l++) {
        const kv_span *sa, *sb;
        memset(have, 0, 4096);
        const int nb = b.view(b.self, l, &sb);
        for (int i = 0; i < nb; i++)
            for (int j = 0; j < sb[i].n_tokens; j++) {
                const int32_t p = sb[i].pos[j];
                span_entry(&sb[i], j, dim, rk + (size_t)p * dim, rv + (size_t)p * dim);
                have[p] = true;
            }
        const int na = a.view(a.self, l, &sa);
        for (int i = 0; i < na; i++)
            for (int j = 0; j < sa[i].n_tokens; j++) {
                const int32_t p = sa[i].pos[j];
                span_entry(&sa[i], j, dim, k, v);
                bad += !have[p] || memcmp(k, rk + (size_t)p * dim, sizeof(float) * dim) ||
                       memcmp(v, rv + (size_t)p * dim, sizeof(float) * dim);
            }
    }
    free(rk), free(rv), free(have);
    return bad;
}

static kv_config spill_config(const kv_shape *shape, const char *dir) {
    kv_config cfg = kv_config_default();
    cfg.hot_tokens = 32, cfg.warm_tokens = 128, cfg.anchor_tokens = 8, cfg.recent_tokens = 32;
    cfg.budget_bytes = 2 * kv_budget_floor(*shape, &cfg); /* hot + warm + 24 cold blocks' bounds fit */
    cfg.spill_dir = dir;
    return cfg;
}

/* The store alone: records read back bit for bit, slots reused, damage reported. */
static void test_spill_store(void) {
    const char *dir = getenv("OCTO_TMP") && *getenv("OCTO_TMP") ? getenv("OCTO_TMP") : "/tmp";
    spill_store *s;
    err_t err = {0};
    T_CHECK(spill_open(dir, 10000, 0, &s, &err) == ERR_OK);
    uint8_t *rec[8], *back = malloc(10000);
    int slot[8], same = 0;
    for (int i = 0; i < 8; i++) {
        rec[i] = malloc(10000);
        for (int j = 0; j < 10000; j++) rec[i][j] = (uint8_t)rng_next(&R);
        T_CHECK(spill_put(s, rec[i], 10000 - i, &slot[i], &err) == ERR_OK);
    }
    for (int i = 7; i >= 0; i--) {
        T_CHECK(spill_get(s, slot[i], back, 10000 - i, &err) == ERR_OK);
        same += !memcmp(back, rec[i], 10000 - i);
    }
    T_EQ_INT(same, 8);
    T_EQ_INT(spill_get(s, slot[3], back, 100, &err), ERR_CORRUPT); /* not the length written */
    spill_release(s, slot[2]);
    int again;
    T_CHECK(spill_put(s, rec[7], 500, &again, &err) == ERR_OK);
    T_EQ_INT(again, slot[2]);
    /* one flipped bit in a payload */
    uint8_t byte;
    const off_t off = (off_t)(spill_get_stats(s).file_bytes / 8) * slot[5] + 4000;
    T_CHECK(pread(spill_fd(s), &byte, 1, off) == 1);
    byte ^= 4;
    T_CHECK(pwrite(spill_fd(s), &byte, 1, off) == 1);
    T_EQ_INT(spill_get(s, slot[5], back, 10000 - 5, &err), ERR_CORRUPT);
    printf("spill store: 8 records back bit for bit, a flipped bit caught: %s\n", err.msg);
    spill_close(s);
    for (int i = 0; i < 8; i++) free(rec[i]);
    free(back);
}

static void test_spill(void) {
    const kv_shape shape = shape_of(2, 2, 32);
    const int dim = 64, N = 1500, qd = shape.n_head * shape.head_dim;
    float *K = random_rows(N + 64, dim), *V = random_rows(N + 64, dim), *Q = random_rows(N + 64, qd);
    const char *dir = getenv("OCTO_TMP") && *getenv("OCTO_TMP") ? getenv("OCTO_TMP") : "/tmp";
    err_t err = {0};
    /* the reference: the same tiers, no budget (nothing leaves) */
    kv_config rc = spill_config(&shape, NULL);
    rc.budget_bytes = 0;
    kv_cache *ref, *c;
    T_CHECK(kv_cache_new(shape, &rc, &ref, &err) == ERR_OK);
    feed_queries(ref, &shape, 0, N, K, V, Q);
    {
        kv_config cfg = spill_config(&shape, dir);
        T_CHECK(kv_cache_new(shape, &cfg, &c, &err) == ERR_OK);
        const int over = feed_queries(c, &shape, 0, N, K, V, Q);
        const kv_stats st = kv_cache_stats(c);
        printf("spill: budget %llu, %d commits over it; %lld blocks on file, %lld written, %lld re-spilled without a "
               "write, %lld read back (%lld hits, %.1f us each), %lld entries evicted, file %llu bytes\n",
               (unsigned long long)st.budget, over, (long long)st.blocks_spilled, (long long)st.spill_writes,
               (long long)st.spill_clean, (long long)st.spill_reads, (long long)st.spill_hits,
               st.spill_reads ? st.spill_read_ns / 1e3 / st.spill_reads : 0.0, (long long)st.tokens_evicted,
               (unsigned long long)st.spill_file_bytes);
        T_EQ_INT(over, 0);
        T_CHECK(st.spill_on && st.blocks_spilled > 0 && st.spill_writes > 0);
        T_CHECKF(st.spill_reads > 0, "no block was read back in %d tokens", N);
        T_EQ_INT(st.tokens_evicted, 0); /* with room on disk nothing is lost */
        T_EQ_INT(st.spill_errors, 0);
        /* resident entries, including every block read back, equal the reference's bit for bit */
        T_EQ_INT(entries_differing(c, ref, &shape), 0);
        /* committed entries: in memory or on file, all of them */
        T_EQ_INT((int)st.tokens, N);
        /* truncating inside the spilled range reads back what it must keep */
        int32_t pos[2048];
        kv_cache_truncate(c, 700);
        kv_cache_truncate(ref, 700);
        const kv_stats s2 = kv_cache_stats(c);
        T_CHECK(held(c, pos) <= 700 && s2.spill_errors == 0);
        T_EQ_INT(entries_differing(c, ref, &shape), 0);
        kv_cache_free(c);
    }
    /* faults: each degrades to eviction, is counted, and the budget holds. The
     * unwritable directory is a file where a directory is expected: no file can
     * be made in it on any system, as root too. */
    char not_dir[512];
    tu_tmp_path(not_dir, sizeof not_dir, "kv-not-a-dir");
    FILE *nf = fopen(not_dir, "w");
    T_CHECK(nf && fclose(nf) == 0);
    for (int fault = 0; fault < 4; fault++) {
        static const char *name[] = {"unwritable directory", "disk full (file limit)", "corrupted file", "truncated file"};
        kv_config cfg = spill_config(&shape, fault == 0 ? not_dir : dir);
        if (fault == 1) cfg.spill_max_bytes = 3 * 20480;
        T_CHECK(kv_cache_new(shape, &cfg, &c, &err) == ERR_OK);
        int over = feed_queries(c, &shape, 0, 900, K, V, Q);
        kv_stats st = kv_cache_stats(c);
        if (fault >= 2) {
            /* damage every slot, then need them: reads fail, blocks drop, values never go wrong */
            const int fd = kv_cache_spill_fd(c);
            T_CHECK(fd >= 0 && st.blocks_spilled > 0);
            if (fault == 2)
                for (uint64_t o = 100; o < st.spill_file_bytes; o += 4096) {
                    const uint8_t junk = 0x5a;
                    T_CHECK(pwrite(fd, &junk, 1, (off_t)o) == 1);
                }
            else T_CHECK(ftruncate(fd, 40) == 0);
            over += feed_queries(c, &shape, 900, 600, K, V, Q);
            kv_cache_truncate(c, 500); /* reads back (or drops) the spilled blocks that straddle it */
            st = kv_cache_stats(c);
            T_CHECKF(st.spill_dropped > 0 && st.spill_errors >= st.spill_dropped,
                     "[%s] %lld dropped, %lld errors", name[fault], (long long)st.spill_dropped,
                     (long long)st.spill_errors);
            kv_cache_truncate(ref, 500);
            T_EQ_INT(entries_differing(c, ref, &shape), 0);
            feed_queries(ref, &shape, 500, 1000, K, V, Q); /* (ref back to full for the next case) */
        } else {
            T_CHECKF(st.spill_errors >= 1 && st.tokens_evicted > 0, "[%s] errors %lld, evicted %lld", name[fault],
                     (long long)st.spill_errors, (long long)st.tokens_evicted);
            T_CHECK(fault == 0 ? !st.spill_on
                               : st.spill_on && st.spill_writes > 0 && st.spill_file_bytes <= cfg.spill_max_bytes);
        }
        printf("spill fault, %s: %d commits over budget, %lld errors, %lld blocks dropped, %lld entries evicted: %s\n",
               name[fault], over, (long long)st.spill_errors, (long long)st.spill_dropped, (long long)st.tokens_evicted,
               st.spill_note);
        T_EQ_INT(over, 0);
        T_CHECK(st.spill_note[0] != 0);
        kv_cache_free(c);
    }
    remove(not_dir);
    kv_cache_free(ref);
    free(K), free(V), free(Q);
}

/* One table of policies (kv/policy_table.c): its rows follow the public
 * enum, every name maps back to its number through the API, and every
 * number the table holds loads (one past it does not). */
static void test_policy_table(void) {
    static const struct {
        const char *name;
        int octo, kv;
    } named[] = {{"default", OCTO_KV_POLICY_DEFAULT, -1},      {"none", OCTO_KV_POLICY_NONE, KV_POLICY_NONE},
                 {"window", OCTO_KV_POLICY_WINDOW, KV_POLICY_WINDOW}, {"h2o", OCTO_KV_POLICY_H2O, KV_POLICY_H2O},
                 {"snapkv", OCTO_KV_POLICY_SNAPKV, KV_POLICY_SNAPKV}, {"morphkv", OCTO_KV_POLICY_MORPHKV, KV_POLICY_MORPHKV}};
    for (size_t i = 0; i < sizeof named / sizeof *named; i++) {
        T_EQ_INT(octo_kv_policy_from_name(named[i].name), named[i].octo);
        T_CHECK(!strcmp(octo_kv_policy_name((octo_kv_policy)named[i].octo), named[i].name));
        T_EQ_INT(kv_policy_from_name(named[i].name), named[i].kv);
    }
    T_EQ_INT(octo_kv_policy_from_name("bogus"), -1);
    T_EQ_INT(octo_kv_policy_from_name("H2O"), -1);
    T_EQ_INT(octo_kv_policy_from_name(""), -1);
    T_EQ_INT(octo_kv_policy_from_name(NULL), -1);
    T_CHECK(octo_kv_policy_name((octo_kv_policy)-1) == NULL);
    const int n = kv_policy_count();
    T_CHECK(n >= OCTO_KV_POLICY_MORPHKV);
    T_CHECK(octo_kv_policy_name((octo_kv_policy)(n + 1)) == NULL);
    char path[512];
    model *m = small_model(11, "policies.gguf", path, sizeof path);
    if (!m) return;
    model_free(m);
    octo_client *c = octo_client_new(NULL);
    for (int p = 0; p <= n + 1; p++) {
        const char *name = octo_kv_policy_name((octo_kv_policy)p);
        if (name) T_EQ_INT(octo_kv_policy_from_name(name), p);
        T_CHECKF(!name || strlen(name) < sizeof ((octo_stats *)0)->kv_policy, "%s", name);
        octo_model_options mo = octo_model_options_defaults();
        mo.auto_draft = OCTO_DRAFT_NONE;
        mo.kv.policy = (octo_kv_policy)p;
        octo_model *om = octo_load_model(c, path, &mo);
        if (p > n) { /* past the table */
            T_CHECK(!om && octo_last_status(c) == OCTO_ERR_INVALID_ARG);
            continue;
        }
        T_CHECKF(om, "policy %d: %s", p, octo_last_error(c));
        if (!om) continue;
        T_CHECK(!strcmp(octo_model_stats(om).kv_policy, p ? name : "morphkv"));
        octo_model_free(om);
    }
    octo_client_free(c);
    remove(path);
}

int main(void) {
    test_policy_table();
    test_plan_spill();
    test_plan_draft();
    test_spill_store();
    test_spill();
    test_generation_budget();
    test_tiers();
    test_mixed_attention();
    test_policies();
    test_rollback_and_budget();
    test_keep_tentative();
    T_DONE();
}
