/*
 * test_moe — the expert seam (model/experts_iface.h, src/moe/experts.c):
 *
 *   - the store's bookkeeping: lookups, and the next-layer prediction scored
 *     against the routing that follows, to the count;
 *   - the forward pass through the store gives the logits it gives without
 *     one, bit for bit, and fetches each routed expert once per batch;
 *   - the prediction is the next layer's router on this layer's FFN input:
 *     with layer 2's router made of layer 1's rows in a permuted order, every
 *     token's prediction for layer 2 is exactly its layer-1 routing, permuted
 *     (using this layer's router, or the residual instead of the normed
 *     input, would not give that);
 *   - the public stats: an MoE model reports its lookups and prediction
 *     rate, a dense one none, and no expert cache hit rate while there is no
 *     cache.
 */
#include <string.h>

#include "core/quant.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/synth.h"
#include "moe/experts.h"
#include "octo.h"
#include "runtime/session.h"
#include "t.h"
#include "util.h"

#define N_EXPERT 6
#define N_USED 2
#define N_LAYER 3
#define T_BATCH 9

static void test_scoring(const model *m) {
    moe_experts *x = NULL;
    err_t err = {0};
    T_EQ_INT(moe_experts_new(m, &x, &err), ERR_OK);
    if (!x) return;
    const experts_iface *ex = moe_experts_iface(x);
    /* three tokens predicted for layer 2: {0,1} {2,3} {4,5} */
    const int32_t pred[] = {0, 1, 2, 3, 4, 5};
    ex->hint_next(ex->self, 2, pred, 3, 2);
    /* routed: {1,0} (2 right), {3,5} (1 right), {0,1} (0 right) */
    const int32_t r0[] = {1, 0}, r1[] = {3, 5}, r2[] = {0, 1};
    ex->hint(ex->self, 2, r0, 2);
    ex->hint(ex->self, 2, r1, 2);
    ex->hint(ex->self, 2, r2, 2);
    ex->hint(ex->self, 2, r2, 2); /* a fourth token had no prediction: not scored */
    ex->hint(ex->self, 1, r2, 2); /* another layer: not scored */
    model_mat mats[3];
    T_EQ_INT(ex->get(ex->self, 1, 3, mats, &err), ERR_OK);
    T_CHECK(mats[0].data != NULL && mats[2].data != NULL);
    T_EQ_INT(ex->get(ex->self, 1, N_EXPERT, mats, &err), ERR_INVALID_ARG);
    T_EQ_INT(ex->get(ex->self, N_LAYER, 0, mats, &err), ERR_INVALID_ARG);
    experts_stats st;
    ex->stats(ex->self, &st);
    T_EQ_INT(st.lookups, 1);
    T_EQ_INT(st.predicted, 6);
    T_EQ_INT(st.predicted_right, 3);
    T_CHECK(!st.cached);
    moe_experts_free(x);
}

/* Records each layer's routing and each next-layer prediction; fetches from the mapping. */
typedef struct {
    const model *m;
    int32_t routed[N_LAYER][T_BATCH][N_USED], predicted[N_LAYER][T_BATCH][N_USED];
    int n_routed[N_LAYER], n_pred_calls[N_LAYER], gets[N_LAYER];
} recorder;

static err_code rec_get(void *self, int layer, int expert, model_mat mats[3], err_t *err) {
    (void)err;
    recorder *r = self;
    r->gets[layer]++;
    model_expert_mats(r->m, layer, expert, mats);
    return ERR_OK;
}

static void rec_hint(void *self, int layer, const int32_t *e, int n) {
    recorder *r = self;
    if (r->n_routed[layer] < T_BATCH && n == N_USED) memcpy(r->routed[layer][r->n_routed[layer]++], e, sizeof(int32_t) * N_USED);
}

static void rec_hint_next(void *self, int next, const int32_t *e, int n_tokens, int k) {
    recorder *r = self;
    r->n_pred_calls[next]++;
    if (n_tokens == T_BATCH && k == N_USED) memcpy(r->predicted[next], e, sizeof r->predicted[next]);
}

/* Layer 2's router: layer 1's rows, row e moved to perm[e]. */
static const int perm[N_EXPERT] = {3, 0, 5, 1, 4, 2};
static uint8_t *permuted_router(model *m) {
    const model_mat *src = &m->layers[1].gate_inp;
    uint8_t *rows = malloc(src->row_bytes * N_EXPERT);
    for (int e = 0; rows && e < N_EXPERT; e++)
        memcpy(rows + (size_t)perm[e] * src->row_bytes, (const uint8_t *)src->data + (size_t)e * src->row_bytes,
               src->row_bytes);
    if (rows) m->layers[2].gate_inp.data = rows;
    return rows;
}

static void test_forward_seam(model *m) {
    const int V = m->hp.n_vocab;
    int32_t tok[T_BATCH];
    for (int t = 0; t < T_BATCH; t++) tok[t] = 1 + (t * 53 + 7) % (V - 1);
    float *with = malloc(sizeof(float) * T_BATCH * V), *without = malloc(sizeof(float) * T_BATCH * V);
    err_t err = {0};
    session *a = NULL, *b = NULL, *c = NULL;
    moe_experts *x = NULL;
    recorder rec = {.m = m};
    experts_iface rif = {.self = &rec, .get = rec_get, .hint = rec_hint, .hint_next = rec_hint_next};
    err_code rc = session_new(m, 64, QT_F32, 2, &a, &err);
    if (!rc) rc = session_new(m, 64, QT_F32, 2, &b, &err);
    if (!rc) rc = session_new(m, 64, QT_F32, 2, &c, &err);
    if (!rc) rc = moe_experts_new(m, &x, &err);
    if (!rc) {
        a->experts = moe_experts_iface(x);
        c->experts = &rif;
        rc = session_eval(a, tok, T_BATCH, true, with, &err);
    }
    if (!rc) rc = session_eval(b, tok, T_BATCH, true, without, &err);
    if (!rc) rc = session_eval(c, tok, T_BATCH, false, without + (size_t)(T_BATCH - 1) * V, &err);
    T_CHECKF(rc == ERR_OK, "%s", err.msg);
    T_CHECKF(!rc && !memcmp(with, without, sizeof(float) * T_BATCH * V), "logits through the store differ");
    /* one fetch per distinct routed expert per layer */
    experts_stats st = {0};
    if (x) moe_experts_iface(x)->stats(x, &st);
    int distinct = 0;
    for (int l = 0; l < N_LAYER; l++) {
        bool seen[N_EXPERT] = {false};
        for (int t = 0; t < rec.n_routed[l]; t++)
            for (int j = 0; j < N_USED; j++) seen[rec.routed[l][t][j]] = true;
        int nl = 0;
        for (int e = 0; e < N_EXPERT; e++) nl += seen[e];
        T_EQ_INT(rec.gets[l], nl);
        distinct += nl;
    }
    T_EQ_INT(st.lookups, distinct);
    T_EQ_INT(st.predicted, (N_LAYER - 1) * T_BATCH * N_USED); /* layers 1 and 2 were predicted */
    /* layer 2's prediction is layer 1's routing through the permutation */
    T_EQ_INT(rec.n_pred_calls[0], 0);
    T_EQ_INT(rec.n_pred_calls[1], 1);
    T_EQ_INT(rec.n_pred_calls[2], 1);
    int same = 0;
    for (int t = 0; t < T_BATCH; t++)
        for (int j = 0; j < N_USED; j++) same += rec.predicted[2][t][j] == perm[rec.routed[1][t][j]];
    T_EQ_INT(same, T_BATCH * N_USED);
    moe_experts_free(x);
    session_free(a), session_free(b), session_free(c);
    free(with), free(without);
}

static void test_public_stats(const char *moe_path, const char *dense_path) {
    octo_client *c = octo_client_new(NULL);
    const char *paths[] = {moe_path, dense_path};
    for (int k = 0; k < 2; k++) {
        octo_model *m = octo_load_model(c, paths[k], NULL);
        T_CHECKF(m != NULL, "%s", octo_last_error(c));
        if (!m) continue;
        octo_generate_params gp = octo_generate_params_defaults();
        gp.max_tokens = 8;
        gp.spec = OCTO_SPEC_NONE;
        octo_stream *st = octo_generate(m, "ab ab", &gp);
        while (st && octo_stream_next(st)) {
        }
        octo_stream_free(st);
        const octo_stats s = octo_model_stats(m);
        T_CHECK(s.expert_cache_hit_rate == -1.0);
        if (k == 0) {
            printf("MoE: %llu experts fetched, prediction named %.1f%% of the routed ones\n",
                   (unsigned long long)s.expert_lookups, 100.0 * s.expert_prediction_rate);
            T_CHECK(s.expert_lookups >= (uint64_t)N_LAYER * 8);
            T_CHECK(s.expert_prediction_rate >= 0.0 && s.expert_prediction_rate <= 1.0);
        } else {
            T_EQ_INT(s.expert_lookups, 0);
            T_CHECK(s.expert_prediction_rate == -1.0);
        }
        octo_model_free(m);
    }
    octo_client_free(c);
}

int main(void) {
    char path[512], dense[512];
    tu_tmp_path(path, sizeof path, "moe.gguf");
    tu_tmp_path(dense, sizeof dense, "moe-dense.gguf");
    synth_opts o = synth_defaults();
    o.type = QT_F32;
    o.n_embd = 64, o.n_ff = 96, o.n_head = 4, o.n_head_kv = 2, o.n_layer = N_LAYER;
    o.n_expert = N_EXPERT, o.n_expert_used = N_USED;
    o.seed = 11;
    err_t err = {0};
    model *m = NULL;
    if (synth_write(&o, path, &err) || model_load(path, &m, &err)) {
        T_CHECKF(0, "%s", err.msg);
        T_DONE();
    }
    o.n_expert = o.n_expert_used = 0;
    T_CHECKF(synth_write(&o, dense, &err) == ERR_OK, "%s", err.msg);
    test_scoring(m);
    uint8_t *rows = permuted_router(m);
    T_CHECK(rows != NULL);
    test_forward_seam(m);
    model_free(m);
    free(rows);
    test_public_stats(path, dense);
    remove(path);
    remove(dense);
    T_DONE();
}
