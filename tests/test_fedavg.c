/*
 * test_fedavg — federated averaging (train/fed.h, train/fedavg.h, octo_finetune's fl_round, octo_fedavg)
 * on a synthetic Mixtral-gated MoE (8 experts, 2 a token) and three devices, each training on one repeated
 * word (so each reaches its own few experts):
 *
 * - an update holds a group per matrix and per expert reached, an expert's weight the tokens routed to it
 *   (each layer's experts sum to 2 x the positions trained on), unreached experts absent (their count in
 *   fl.expert_tokens 0);
 * - the global equals the dense weighted average where an absent expert counts with weight 0 (to 1e-6),
 *   groups no device sent stay as they were, bit for bit; it loads as an adapter;
 * - associativity: aggregates of halves, averaged, give the global of all updates at once (to 1e-6);
 * - round 2 trains from round 1's global and averages into it; rounds and starts are checked (an update
 *   trained from another global of the same round is refused);
 * - hostile updates (a corpus of 19 mutations of a good one): each refused with its reason, nothing written;
 * - why A is frozen: two adapters trained with A free, averaged factor by factor, are not their average;
 * - privacy: a clipped update's norm is the clip; noised, every group is sent at one weight, and the noise's
 *   deviation is noise x clip (measured over its values); epsilon matches an independent scan of the
 *   mu-GDP curve.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "octo.h"
#include "core/gguf.h"
#include "core/quant.h"
#include "model/lora.h"
#include "model/model.h"
#include "model/synth.h"
#include "t.h"
#include "train/fed.h"
#include "util.h"

static model *base;
static char base_path[512];

static void tmp(char *buf, const char *name) { tu_tmp_path(buf, 512, name); }

static bool exists(const char *p) { return access(p, F_OK) == 0; }

/* One device's round: `word` repeated as its data. */
static float dp_clip, dp_noise; /* the next device's privacy */

static octo_status device(const char *out, const char *word, int round, const char *from, const char *id,
                          bool frozen, octo_client *c) {
    char data[512], text[4096] = "";
    snprintf(data, sizeof data, "%s.txt", out);
    for (int i = 0; i < 60; i++) strcat(strcat(text, word), " ");
    if (!tu_write_file(data, text, strlen(text))) return OCTO_ERR_IO;
    octo_finetune_params p = octo_finetune_params_defaults();
    p.data = data, p.output = out, p.steps = 4, p.batch = 1, p.seq_len = 16, p.rank = 2, p.lr = 1e-2f;
    p.targets = "q,v,gate,up,down,router", p.restart = 1;
    p.fl_round = frozen ? round : 0, p.fl_from = from, p.fl_device = id, p.fl_clip = dp_clip, p.fl_noise = dp_noise;
    const octo_status st = octo_finetune(c, base_path, &p, NULL);
    remove(data);
    return st;
}

static octo_status fedavg(const char *out, const char *from, const char *const *u, int n, bool partial,
                          octo_client *c) {
    const octo_fedavg_params p = {.from = from, .updates = u, .n_updates = n, .output = out, .partial = partial};
    return octo_fedavg(c, base_path, &p, NULL);
}

/* The B values of every group of the adapter at path (fed_group_b's layout, groups end to end). */
static float *adapter_b(const char *path, size_t *n) {
    lora_adapter *a = NULL;
    err_t err = {0};
    fed_group *g = NULL;
    int ng = 0;
    float *v = NULL;
    *n = 0;
    if (lora_open(base, path, &a, &err) || fed_groups(base, a, &g, &ng, &err)) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        lora_free(a);
        return NULL;
    }
    for (int i = 0; i < ng; i++) *n += (size_t)g[i].t->rank * (size_t)g[i].rows;
    v = malloc(sizeof(float) * *n);
    for (size_t i = 0, at = 0; v && i < (size_t)ng; at += (size_t)g[i].t->rank * (size_t)g[i].rows, i++)
        fed_group_b(a, &g[i], NULL, v + at);
    free(g);
    lora_free(a);
    return v;
}

/* The dense weighted average of the updates: every group, an update without it at weight 0 (groups in
 * fed_groups' order, end to end); *sent: the groups some update held. */
static double *dense_average(const char *const *paths, int n_upd, size_t n, const double *start, int *sent) {
    lora_adapter *a = NULL;
    fed_group *g = NULL;
    int ng = 0;
    double *sum = calloc(n, sizeof(double));
    err_t err = {0};
    gguf_ctx *first = NULL;
    fed_meta meta = {0};
    T_CHECKF(gguf_open(paths[0], &first, &err) == 0 && fed_meta_read(first, &meta, &err) == 0, "%s", err.msg);
    gguf_close(first);
    T_CHECKF(lora_create(base, &meta.layout, &a, &err) == 0 && fed_groups(base, a, &g, &ng, &err) == 0, "%s", err.msg);
    *sent = 0;
    for (size_t i = 0, at = 0; sum && i < (size_t)ng; at += (size_t)g[i].t->rank * (size_t)g[i].rows, i++) {
        double w = 0;
        const size_t k = (size_t)g[i].t->rank * (size_t)g[i].rows;
        for (int u = 0; u < n_upd; u++) {
            gguf_ctx *x = NULL;
            if (gguf_open(paths[u], &x, NULL)) continue;
            const gguf_tensor *t = gguf_find_tensor(x, g[i].name);
            const double wu = t ? (double)gguf_arr_i64(gguf_get_arr(x, "fl.weights"), (uint64_t)(t - x->tensors)) : 0;
            for (size_t j = 0; t && j < k; j++) sum[at + j] += wu * fed_value(t, j);
            w += wu;
            gguf_close(x);
        }
        *sent += w > 0;
        for (size_t j = 0; j < k; j++) sum[at + j] = (w > 0 ? sum[at + j] / w : 0) + (start ? start[at + j] : 0);
    }
    free(g);
    lora_free(a);
    return sum;
}

static double max_diff(const float *a, const double *b, size_t n, double *scale) {
    double d = 0;
    *scale = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        *scale = fmax(*scale, fabs(b[i]));
    }
    return d;
}

/* Each layer's experts' weights (of ffn_up_exps) sum to 2 x the positions; returns the experts absent. */
static int check_expert_weights(const char *path) {
    gguf_ctx *g = NULL;
    T_CHECK(gguf_open(path, &g, NULL) == ERR_OK);
    if (!g) return 0;
    uint64_t tokens = 0;
    gguf_get_u64(g, "fl.tokens", &tokens);
    const gguf_value *w = gguf_get_arr(g, "fl.weights"), *counts = gguf_get_arr(g, "fl.expert_tokens");
    int absent = 0, agree = 1;
    T_CHECK(counts && counts->v.arr.n == (uint64_t)(base->hp.n_layer * base->hp.n_expert));
    for (int l = 0; counts && l < base->hp.n_layer; l++) {
        uint64_t sum = 0;
        for (int e = 0; e < base->hp.n_expert; e++) {
            char name[128];
            snprintf(name, sizeof name, "blk.%d.ffn_up_exps.weight.lora_b.%d", l, e);
            const gguf_tensor *t = gguf_find_tensor(g, name);
            const int64_t n = t ? gguf_arr_i64(w, (uint64_t)(t - g->tensors)) : 0;
            sum += (uint64_t)n, absent += !t;
            agree &= gguf_arr_i64(counts, (uint64_t)(l * base->hp.n_expert + e)) == n; /* 0 for the absent */
        }
        T_EQ_INT(sum, 2 * tokens);
    }
    T_CHECK(agree);
    T_CHECK(tokens > 0);
    gguf_close(g);
    return absent;
}

static void check_equal(const char *got_path, const double *want, size_t n, const char *what) {
    size_t m = 0;
    float *got = adapter_b(got_path, &m);
    double scale = 0;
    T_CHECK(got && m == n);
    const double d = got && m == n ? max_diff(got, want, n, &scale) : INFINITY;
    T_CHECKF(d <= 1e-6 * fmax(scale, 1e-3), "%s: max |diff| %.3g (values up to %.3g)", what, d, scale);
    printf("%s: max |diff| %.2g over %zu values (up to %.3g)\n", what, d, n, scale);
    free(got);
}

static void test_round_one(octo_client *c, char u[3][512], char *global) {
    const char *words[3] = {"cat", "moon", "river"}, *ids[3] = {"dev-a", "dev-b", "dev-c"};
    int absent = 0;
    for (int i = 0; i < 3; i++) {
        T_CHECKF(device(u[i], words[i], 1, NULL, ids[i], true, c) == OCTO_OK, "%s", octo_last_error(c));
        absent += check_expert_weights(u[i]);
    }
    printf("experts absent from the three updates: %d of %d\n", absent, 3 * base->hp.n_layer * base->hp.n_expert);
    T_CHECK(absent > 0);
    const char *const all[3] = {u[0], u[1], u[2]};
    T_CHECKF(fedavg(global, NULL, all, 3, false, c) == OCTO_OK, "%s", octo_last_error(c));
    size_t n = 0;
    float *b = adapter_b(global, &n);
    int sent = 0;
    double *want = dense_average(all, 3, n, NULL, &sent);
    check_equal(global, want, n, "global vs the dense weighted average");
    int zero_groups_ok = 1; /* groups nobody sent: B = 0 as at the start, exactly */
    for (size_t i = 0; b && want && i < n; i++)
        if (want[i] == 0.0 && b[i] != 0.0f) zero_groups_ok = 0;
    T_CHECK(zero_groups_ok);
    free(b), free(want);
    /* associativity: (u0 + u1) then u2; and u2 alone as an aggregate */
    char p1[512], p2[512], g2[512];
    tmp(p1, "fl-p1.gguf"), tmp(p2, "fl-p2.gguf"), tmp(g2, "fl-g2.gguf");
    T_CHECK(fedavg(p1, NULL, all, 2, true, c) == OCTO_OK && fedavg(p2, NULL, all + 2, 1, true, c) == OCTO_OK);
    const char *const halves[2] = {p1, p2};
    T_CHECKF(fedavg(g2, NULL, halves, 2, false, c) == OCTO_OK, "%s", octo_last_error(c));
    size_t n2 = 0;
    float *x = adapter_b(global, &n), *y = adapter_b(g2, &n2);
    double d = 0;
    for (size_t i = 0; x && y && n == n2 && i < n; i++) d = fmax(d, fabs((double)x[i] - y[i]));
    T_CHECKF(x && y && n == n2 && d <= 1e-6, "halves then together vs all at once: %.3g", d);
    printf("aggregates of halves vs all at once: max |diff| %.2g\n", d);
    free(x), free(y);
    const char *const dup[2] = {p1, u[1]}; /* u[1]'s device is in p1 already */
    T_CHECK(fedavg(g2, NULL, dup, 2, false, c) != OCTO_OK && strstr(octo_last_error(c), "device 'dev-b' sent both"));
    remove(p1), remove(p2), remove(g2);
}

/* A round-2 update trained from another round-1 global (of u0 alone) is refused by the round's global. */
static void test_stale(octo_client *c, const char *u0, const char *global) {
    char other[512], u[512], g[512];
    tmp(other, "fl-other1.gguf"), tmp(u, "fl-stale.gguf"), tmp(g, "fl-stale-g.gguf");
    const char *const one[1] = {u0}, *const up[1] = {u};
    T_CHECKF(fedavg(other, NULL, one, 1, false, c) == OCTO_OK && device(u, "moon", 2, other, "late", true, c) == OCTO_OK,
             "%s", octo_last_error(c));
    T_CHECK(fedavg(g, global, up, 1, false, c) != OCTO_OK && strstr(octo_last_error(c), "started from another global") &&
            !exists(g));
    remove(other), remove(u);
}

static void test_round_two(octo_client *c, const char *global) {
    char u[512], g[512];
    tmp(u, "fl-r2.gguf"), tmp(g, "fl-global2.gguf");
    T_CHECK(device(u, "cat", 2, NULL, "dev-a", true, c) != OCTO_OK && strstr(octo_last_error(c), "--from"));
    T_CHECK(device(u, "cat", 3, global, "dev-a", true, c) != OCTO_OK && strstr(octo_last_error(c), "of round 1"));
    T_CHECKF(device(u, "cat", 2, global, "dev-a", true, c) == OCTO_OK, "%s", octo_last_error(c));
    const char *const one[1] = {u};
    T_CHECK(fedavg(g, NULL, one, 1, false, c) != OCTO_OK && strstr(octo_last_error(c), "--from") && !exists(g));
    char p[512]; /* an aggregate of round 2 needs no global; averaged into the global, the same as the update */
    tmp(p, "fl-r2-partial.gguf");
    const char *const agg[1] = {p};
    T_CHECKF(fedavg(p, NULL, one, 1, true, c) == OCTO_OK && fedavg(g, global, agg, 1, false, c) == OCTO_OK, "%s",
             octo_last_error(c));
    size_t n_agg = 0;
    float *via_agg = adapter_b(g, &n_agg);
    remove(g), remove(p);
    T_CHECKF(fedavg(g, global, one, 1, false, c) == OCTO_OK, "%s", octo_last_error(c));
    size_t n = 0;
    float *prev = adapter_b(global, &n);
    double *start = malloc(sizeof(double) * (n ? n : 1));
    for (size_t i = 0; prev && start && i < n; i++) start[i] = prev[i];
    int sent = 0;
    double *want = dense_average(one, 1, n, start, &sent);
    check_equal(g, want, n, "round 2: the global plus the update");
    float *direct = adapter_b(g, &n);
    T_CHECK(via_agg && direct && n_agg == n && !memcmp(via_agg, direct, sizeof(float) * n));
    free(via_agg), free(direct);
    octo_model *m = octo_load_model(c, base_path, NULL);
    octo_adapter *ad = m ? octo_adapter_load(m, g) : NULL;
    T_CHECKF(ad != NULL, "the global loads as an adapter");
    octo_adapter_free(ad);
    octo_model_free(m);
    free(prev), free(start), free(want);
    remove(u), remove(g);
}

/* ---------------------------------------------------------------- hostile updates */

typedef enum {
    M_ROUND, M_BASE, M_ROWS, M_NAN, M_INF, M_W0, M_W_BIG, M_TOKENS, M_NAME, M_NOT_GROUP, M_TYPE, M_NO_KEY, M_A_HASH,
    M_RANK, M_WEIGHTS_LEN, M_F16, M_DEVICE, M_HUGE, M_START, M_COUNT
} mutation;

static const char *const expected[M_COUNT] = {
    "round 2, not 1", "another base model", "rows, the group", "not finite", "not finite", "a token count of 0",
    "more than the", "more than any federation", "no group of the adapter", "no group's change",
    "not a federated update", "fl.a_hash is missing", "another adapter layout", "F32 [3, rows] expected",
    "one u64 per tensor", "F32 [2, rows] expected", "printable", "beyond", "started from another global"};

/* A key of src copied to w, or changed by the mutation. */
static void copy_key(gguf_writer *w, const gguf_kv *kv, mutation m, uint64_t n_tensors) {
    const char *k = kv->key;
    gguf_value v = kv->value;
    uint64_t big[4096];
    if ((m == M_NO_KEY && !strcmp(k, "fl.a_hash"))) return;
    if (m == M_ROUND && !strcmp(k, "fl.round")) v.v.u64 = 2;
    if (m == M_BASE && !strcmp(k, "fl.base_hash")) v.v.u64 ^= 1;
    if (m == M_A_HASH && !strcmp(k, "fl.a_hash")) v.v.u64 ^= 1;
    if (m == M_START && !strcmp(k, "fl.start_hash")) v.v.u64 ^= 1;
    if (m == M_RANK && !strcmp(k, "fl.rank")) v.v.u64 = 3;
    if (m == M_TOKENS && !strcmp(k, "fl.tokens")) v.v.u64 = 1ull << 60;
    if (m == M_TYPE && !strcmp(k, "general.type")) v.v.str = (gguf_str){7, "adapter"};
    if (m == M_DEVICE && !strcmp(k, "fl.devices")) v.v.arr.strs[0] = (gguf_str){5, "a b c"};
    if (!strcmp(k, "fl.weights") && n_tensors <= 4096) {
        memcpy(big, v.v.arr.raw, 8 * n_tensors);
        if (m == M_W0) big[1] = 0;
        if (m == M_W_BIG) big[1] = 1ull << 40;
        if (m == M_WEIGHTS_LEN) v.v.arr.n--;
        v.v.arr.raw = big;
    }
    gguf_writer_set_value(w, k, &v);
}

/* src rewritten to dst with one mutation. */
static bool mutate(const char *src, const char *dst, mutation m) {
    gguf_ctx *g = NULL;
    if (gguf_open(src, &g, NULL)) return false;
    gguf_writer *w = gguf_writer_new();
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (strcmp(g->kv[i].key, "general.alignment")) copy_key(w, &g->kv[i], m, g->n_tensors);
    bool ok = true;
    for (uint64_t i = 0; ok && i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        float *v = malloc(t->n_bytes + 64);
        memcpy(v, t->data, t->n_bytes);
        int64_t ne[2] = {t->ne[0], t->ne[1]};
        char name[300];
        snprintf(name, sizeof name, "%s", t->name);
        uint32_t type = t->type;
        if (i == 1) {
            if (m == M_NAN) v[3] = NAN;
            if (m == M_INF) v[0] = -INFINITY;
            if (m == M_HUGE) v[1] = 1e30f;
            if (m == M_ROWS) ne[1] = t->ne[1] / 2;
            if (m == M_NAME) snprintf(name, sizeof name, "blk.0.ffn_up_exps.weight.lora_b.9");
            if (m == M_NOT_GROUP) snprintf(name, sizeof name, "blk.0.attn_q.weight");
            if (m == M_F16) type = QT_F16;
        }
        ok = gguf_writer_add_tensor(w, name, type, 2, ne, v, NULL) == ERR_OK;
        free(v);
    }
    ok = ok && gguf_writer_write(w, dst, NULL, NULL, NULL) == ERR_OK;
    gguf_writer_free(w);
    gguf_close(g);
    return ok;
}

static void test_hostile(octo_client *c, const char *good, const char *other, const char *global) {
    char bad[512], out[512];
    tmp(bad, "fl-bad.gguf"), tmp(out, "fl-out.gguf");
    for (int m = 0; m < M_COUNT; m++) {
        T_CHECKF(mutate(good, bad, (mutation)m), "mutation %d written", m);
        const char *const u[2] = {other, bad};
        const octo_status st = fedavg(out, NULL, u, 2, m % 2 == 0, c);
        T_CHECKF(st != OCTO_OK && strstr(octo_last_error(c), expected[m]) && strstr(octo_last_error(c), bad),
                 "mutation %d: '%s' (wanted '%s')", m, st ? octo_last_error(c) : "accepted", expected[m]);
        T_CHECKF(!exists(out), "mutation %d: nothing written", m);
        remove(out);
    }
    const char *const twice[2] = {good, good};
    T_CHECK(fedavg(out, NULL, twice, 2, false, c) != OCTO_OK && strstr(octo_last_error(c), "sent both") && !exists(out));
    const char *const g[1] = {global}; /* a global is no update */
    T_CHECK(fedavg(out, NULL, g, 1, false, c) != OCTO_OK && strstr(octo_last_error(c), "not a federated update"));
    const char *const u[1] = {good}; /* round 1's updates into round 1's global */
    T_CHECK(fedavg(out, global, u, 1, false, c) != OCTO_OK && strstr(octo_last_error(c), "global of round 1"));
    T_CHECK(!exists(out));
    remove(bad);
}

/* OCTO_FED_SEED=UPDATE OCTO_FED_CORPUS=DIR: the corpus's mutations of UPDATE written into DIR (how
 * fuzz/corpus/fedavg/ got its malformed seeds, from the good one there). */
static void write_corpus(void) {
    const char *seed = getenv("OCTO_FED_SEED"), *dir = getenv("OCTO_FED_CORPUS");
    for (int m = 0; seed && dir && m < M_COUNT; m++) {
        char path[512];
        snprintf(path, sizeof path, "%s/mutation-%02d", dir, m);
        T_CHECKF(mutate(seed, path, (mutation)m), "%s", path);
    }
}

/* ---------------------------------------------------------------- why A is frozen */

/* Two adapters trained with A free, from the same start, on different words: averaging A and B factor by
 * factor gives mean(B)·mean(A), not mean(B·A); the relative error of one matrix (layer 0's q). */
static void test_naive_factors(octo_client *c) {
    char a1[512], a2[512];
    tmp(a1, "fl-free1.gguf"), tmp(a2, "fl-free2.gguf");
    T_CHECKF(device(a1, "cat", 1, NULL, NULL, false, c) == OCTO_OK && device(a2, "moon", 1, NULL, NULL, false, c) == OCTO_OK,
             "%s", octo_last_error(c));
    lora_adapter *x = NULL, *y = NULL;
    T_CHECK(lora_open(base, a1, &x, NULL) == ERR_OK && lora_open(base, a2, &y, NULL) == ERR_OK);
    const lora_tensor *p = lora_find(x, 0, LORA_Q), *q = lora_find(y, 0, LORA_Q);
    double err2 = 0, ref2 = 0;
    for (int64_t o = 0; p && q && o < p->n_out; o++)
        for (int64_t i = 0; i < p->n_in; i++) {
            double exact = 0, bm = 0, am = 0, naive = 0;
            for (int k = 0; k < p->rank; k++) {
                const double b1 = p->bt[(size_t)k * p->bt_stride + (size_t)o], b2 = q->bt[(size_t)k * q->bt_stride + (size_t)o];
                const double x1 = p->a[(size_t)k * (size_t)p->n_in + (size_t)i], x2 = q->a[(size_t)k * (size_t)q->n_in + (size_t)i];
                exact += 0.5 * (b1 * x1 + b2 * x2);
                bm = 0.5 * (b1 + b2), am = 0.5 * (x1 + x2);
                naive += bm * am;
            }
            err2 += (naive - exact) * (naive - exact), ref2 += exact * exact;
        }
    const double rel = ref2 > 0 ? sqrt(err2 / ref2) : 0;
    printf("A free, factors averaged apart: relative error of the average delta %.3g (A frozen: exact)\n", rel);
    T_CHECKF(rel > 1e-3, "the factors' average differs from the products' average (%.3g)", rel);
    lora_free(x), lora_free(y);
    remove(a1), remove(a2);
}

/* ---------------------------------------------------------------- privacy */

/* Every value of an update, tensors end to end; *n_t: its tensors; *w_all: every weight is its fl.tokens. */
static float *update_values(const char *path, size_t *n, uint64_t *n_t, bool *w_all) {
    gguf_ctx *g = NULL;
    *n = 0, *n_t = 0, *w_all = true;
    if (gguf_open(path, &g, NULL)) return NULL;
    uint64_t tokens = 0;
    gguf_get_u64(g, "fl.tokens", &tokens);
    for (uint64_t i = 0; i < g->n_tensors; i++) *n += g->tensors[i].n_elements;
    float *v = malloc(sizeof(float) * (*n ? *n : 1));
    for (uint64_t i = 0, at = 0; v && i < g->n_tensors; at += g->tensors[i].n_elements, i++) {
        for (uint64_t k = 0; k < g->tensors[i].n_elements; k++) v[at + k] = fed_value(&g->tensors[i], k);
        *w_all = *w_all && (uint64_t)gguf_arr_i64(gguf_get_arr(g, "fl.weights"), i) == tokens;
    }
    *n_t = g->n_tensors;
    gguf_close(g);
    return v;
}

static void test_privacy(octo_client *c) {
    const double want[4][3] = {{1, 1, 9.9973}, {2, 1, 4.3772}, {4, 5, 4.9834}, {8, 1, 0.9264}}; /* a grid scan */
    for (int i = 0; i < 4; i++) T_NEAR(fed_dp_epsilon(want[i][0], (int)want[i][1], 1e-5), want[i][2], 2e-4);
    T_CHECK(isinf(fed_dp_epsilon(0, 1, 1e-5)));
    char a[512], b[512];
    tmp(a, "fl-clip.gguf"), tmp(b, "fl-noise.gguf");
    dp_clip = 1e-3f;
    T_CHECKF(device(a, "river", 1, NULL, "dp", true, c) == OCTO_OK, "%s", octo_last_error(c));
    dp_noise = 2.0f;
    T_CHECKF(device(b, "river", 1, NULL, "dp", true, c) == OCTO_OK, "%s", octo_last_error(c));
    dp_clip = dp_noise = 0;
    size_t na = 0, nb = 0;
    uint64_t ta = 0, tb = 0;
    bool wa = false, wb = false;
    float *x = update_values(a, &na, &ta, &wa), *y = update_values(b, &nb, &tb, &wb);
    double norm = 0, dev = 0;
    for (size_t k = 0; x && k < na; k++) norm += (double)x[k] * x[k];
    T_NEAR(sqrt(norm), 1e-3, 1e-9);
    int n_groups = 0;
    fed_group *g = NULL;
    lora_adapter *ad = NULL;
    gguf_ctx *gg = NULL;
    fed_meta meta;
    T_CHECK(gguf_open(b, &gg, NULL) == ERR_OK && fed_meta_read(gg, &meta, NULL) == ERR_OK &&
            lora_create(base, &meta.layout, &ad, NULL) == ERR_OK && fed_groups(base, ad, &g, &n_groups, NULL) == ERR_OK);
    T_CHECKF(tb == (uint64_t)n_groups && ta < tb && wb, "noised: every group (%llu of %d), one weight",
             (unsigned long long)tb, n_groups);
    /* the clipped values are the same in both (one training); the noise is what differs: its deviation */
    gguf_ctx *ga = NULL;
    T_CHECK(gguf_open(a, &ga, NULL) == ERR_OK);
    size_t m = 0;
    for (uint64_t i = 0, at = 0; ga && gg && y && i < gg->n_tensors; at += gg->tensors[i].n_elements, i++) {
        const gguf_tensor *t = gguf_find_tensor(ga, gg->tensors[i].name);
        for (uint64_t k = 0; k < gg->tensors[i].n_elements; k++, m++) {
            const double d = y[at + k] - (t ? fed_value(t, k) : 0.0);
            dev += d * d;
        }
    }
    dev = m ? sqrt(dev / (double)m) : 0;
    printf("noise: deviation %.4g measured over %zu values (noise x clip = %.4g)\n", dev, m, 2e-3);
    T_NEAR(dev, 2e-3, 2e-3 * 0.05);
    gguf_close(ga), gguf_close(gg);
    free(x), free(y), free(g);
    lora_free(ad);
    remove(a), remove(b);
}

int main(void) {
    synth_opts so = synth_defaults();
    so.n_expert = 8, so.n_expert_used = 2;
    err_t err = {0};
    tmp(base_path, "fl-base.gguf");
    T_CHECKF(synth_write(&so, base_path, &err) == ERR_OK && model_open(base_path, &base, &err) == ERR_OK, "%s",
             err.msg);
    if (!base) T_DONE();
    octo_client *c = octo_client_new(NULL);
    char u[3][512], global[512];
    tmp(u[0], "fl-u0.gguf"), tmp(u[1], "fl-u1.gguf"), tmp(u[2], "fl-u2.gguf"), tmp(global, "fl-global.gguf");
    test_round_one(c, u, global);
    test_round_two(c, global);
    test_stale(c, u[0], global);
    test_hostile(c, u[0], u[1], global);
    test_naive_factors(c);
    test_privacy(c);
    write_corpus();
    for (int i = 0; i < 3; i++) remove(u[i]);
    remove(global), remove(base_path);
    octo_client_free(c);
    model_free(base);
    T_DONE();
}
