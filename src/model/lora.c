/*
 * lora — reading an adapter GGUF against its base (model/lora.h).
 */
#include "model/lora.h"
#include "model/lora_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/quant.h"

/* One pair of the file, before it is read. */
typedef struct {
    const gguf_tensor *a, *b;
    int layer;                /* -1: the output */
    lora_kind kind[3];        /* the base's matrices it feeds (a fused tensor: several) */
    int n_kind;
} lora_pair;

const lora_tensor *lora_find(const lora_adapter *a, int layer, lora_kind kind) {
    if (!a || layer < -1 || layer >= a->n_layer || kind < 0 || kind >= LORA_KINDS) return NULL;
    const lora_tensor *t = &a->t[lora_slot(layer, kind)];
    return t->a ? t : NULL;
}

float lora_scale(const lora_adapter *a, const lora_tensor *t, float user) {
    return a->alpha != 0.0f ? user * a->alpha / (float)t->rank : user;
}

float lora_alpha(const lora_adapter *a) { return a->alpha; }
uint64_t lora_bytes(const lora_adapter *a) { return a->bytes; }
int lora_n_matrices(const lora_adapter *a) { return a->n_matrices; }

float *lora_values(lora_adapter *a, size_t *n_values) {
    *n_values = (size_t)(a->bytes / sizeof(float));
    return a->mem;
}

size_t lora_index(const lora_adapter *a, const float *p) { return (size_t)(p - a->mem); }

void lora_ranks(const lora_adapter *a, int *min, int *max) {
    *min = *max = 0;
    const size_t n = (size_t)(a->n_layer + 1) * LORA_KINDS;
    for (size_t i = 0; i < n; i++) {
        const int r = a->t[i].a ? a->t[i].rank : 0;
        if (!r) continue;
        if (!*min || r < *min) *min = r;
        if (r > *max) *max = r;
    }
}

bool lora_set_active(const lora_set *s) {
    for (int i = 0; s && i < s->n; i++)
        if (s->a[i] && s->scale[i] != 0.0f) return true;
    return false;
}

void lora_free(lora_adapter *a) {
    if (!a) return;
    free(a->t);
    free(a->mem);
    free(a);
}

/* ---------------------------------------------------------------- names */

/* The matrix of a layer a kind names (data NULL when the layer has none). */
const model_mat *lora_mat_of(const model *m, int layer, lora_kind k) {
    if (layer < 0) return k == LORA_OUTPUT ? &m->output : NULL;
    const model_layer *L = &m->layers[layer];
    const model_mat *by_kind[LORA_KINDS] = {&L->wq,      &L->wk,    &L->wv,        &L->wo,        &L->w_gate,
                                            &L->w_up,    &L->w_down, &L->w_gate_sh, &L->w_up_sh, &L->w_down_sh,
                                            &L->gate_inp, &L->wq_a, &L->wkv_a,     NULL};
    return by_kind[k];
}

/* The kinds a layer's tensor suffix ("attn_q", "ffn_up_exps", ...) feeds: 0 when none. */
static int kinds_of(const model_hparams *hp, int il, const char *s, lora_kind *k) {
    static const struct {
        const char *name;
        lora_kind kind;
    } one[] = {{"attn_q", LORA_Q},          {"attn_q_b", LORA_Q},          {"attn_k", LORA_K},
               {"attn_v", LORA_V},          {"attn_output", LORA_O},       {"attn_q_a", LORA_Q_A},
               {"attn_kv_a_mqa", LORA_KV_A}, {"ffn_gate", LORA_GATE},      {"ffn_gate_exps", LORA_GATE},
               {"ffn_up", LORA_UP},         {"ffn_up_exps", LORA_UP},      {"ffn_down", LORA_DOWN},
               {"ffn_down_exps", LORA_DOWN}, {"ffn_gate_shexp", LORA_GATE_SH}, {"ffn_up_shexp", LORA_UP_SH},
               {"ffn_down_shexp", LORA_DOWN_SH}, {"ffn_gate_inp", LORA_ROUTER}};
    if (!strcmp(s, "attn_qkv") && hp->fused_qkv) {
        k[0] = LORA_Q, k[1] = LORA_K, k[2] = LORA_V;
        return 3;
    }
    if (!strcmp(s, "ffn_up") && hp->fused_gate_up && !model_layer_moe(hp, il)) {
        k[0] = LORA_GATE, k[1] = LORA_UP;
        return 2;
    }
    for (size_t i = 0; i < sizeof one / sizeof *one; i++)
        if (!strcmp(s, one[i].name)) {
            k[0] = one[i].kind;
            return 1;
        }
    return 0;
}

/* The base tensor name of an adapter tensor, and which of the pair it is. */
static err_code split_name(const char *name, char *base, size_t cap, bool *is_a, err_t *err) {
    const size_t n = strlen(name), sfx = strlen(".lora_a");
    if (n <= sfx || n - sfx >= cap || (strcmp(name + n - sfx, ".lora_a") && strcmp(name + n - sfx, ".lora_b")))
        return err_set(err, ERR_BAD_VALUE, "adapter tensor '%s' is not a LoRA tensor (.lora_a or .lora_b)", name);
    memcpy(base, name, n - sfx);
    base[n - sfx] = '\0';
    *is_a = name[n - 1] == 'a';
    return ERR_OK;
}

int lora_targets(const model *m, const char *name, int *layer, lora_kind kinds[3]) {
    const model_hparams *hp = &m->hp;
    char suffix[96];
    int il = -1, used = 0;
    const size_t len = strlen(name);
    if (!strcmp(name, "output.weight") && !m->output_tied) {
        *layer = -1, kinds[0] = LORA_OUTPUT;
        return 1;
    }
    if (sscanf(name, "blk.%d.%n", &il, &used) != 1 || used == 0 || il < 0 || il >= hp->n_layer ||
        len - (size_t)used >= sizeof suffix || len - (size_t)used < 8 || strcmp(name + len - 7, ".weight"))
        return 0;
    snprintf(suffix, sizeof suffix, "%.*s", (int)(len - (size_t)used - 7), name + used);
    *layer = il;
    int n = kinds_of(hp, il, suffix, kinds);
    for (int i = 0; i < n; i++)
        if (!lora_mat_of(m, il, kinds[i])->data) n = 0;
    return n;
}

/* Which base matrices "base" names: its layer and kinds. */
static err_code resolve(const model *m, const char *base, lora_pair *p, err_t *err) {
    if (m->gguf && !gguf_find_tensor(m->gguf, base))
        return err_set(err, ERR_MISSING_TENSOR, "adapter tensor '%s' adapts a matrix the base model does not have "
                       "(an adapter for another model?)", base);
    if (!(p->n_kind = lora_targets(m, base, &p->layer, p->kind)))
        return err_set(err, ERR_UNSUPPORTED, "adapter tensor '%s': octo cannot apply LoRA to this matrix of a %s model "
                       "(it adapts the layers' projections, experts, routers and the output)", base, m->hp.arch_name);
    return ERR_OK;
}

/* ---------------------------------------------------------------- checks */

static bool readable_type(uint32_t t) { return t == QT_F32 || t == QT_F16 || t == QT_BF16 || t == QT_Q8_0; }

/* The base's whole tensor (rows of every part, experts) against A [n_in, r, e] and B [r, rows, e]. */
static err_code check_shapes(const model *m, const char *base, const lora_pair *p, err_t *err) {
    const model_mat *w = lora_mat_of(m, p->layer, p->kind[0]);
    int64_t rows = 0;
    for (int i = 0; i < p->n_kind; i++) rows += lora_mat_of(m, p->layer, p->kind[i])->n_out;
    const gguf_tensor *a = p->a, *b = p->b;
    const int64_t r = a->ne[1];
    for (int i = 0; i < 2; i++) {
        const gguf_tensor *t = i ? b : a;
        if (!readable_type(t->type))
            return err_set(err, ERR_UNSUPPORTED, "adapter tensor '%s' has type %s (octo reads F32, F16, BF16 and Q8_0 "
                           "adapters)", t->name, quant_traits_of(t->type) ? quant_traits_of(t->type)->name : "unknown");
    }
    const bool ok = a->ne[0] == w->n_in && b->ne[1] == rows && a->ne[2] == w->n_mat && b->ne[2] == w->n_mat &&
                    a->ne[3] == 1 && b->ne[3] == 1;
    if (!ok)
        return err_set(err, ERR_BAD_SHAPE,
                       "adapter tensors of '%s' have shapes [%lld,%lld,%lld] and [%lld,%lld,%lld]; the base's matrix "
                       "is [%lld,%lld,%lld] (an adapter for another base shape?)",
                       base, (long long)a->ne[0], (long long)a->ne[1], (long long)a->ne[2], (long long)b->ne[0],
                       (long long)b->ne[1], (long long)b->ne[2], (long long)w->n_in, (long long)rows,
                       (long long)w->n_mat);
    if (r < 1 || b->ne[0] != r || r > 65536)
        return err_set(err, ERR_BAD_SHAPE, "adapter tensors of '%s': lora_a's rank %lld and lora_b's %lld differ (or "
                       "are out of 1..65536)", base, (long long)r, (long long)b->ne[0]);
    return ERR_OK;
}

/* The pairs of the file, each checked against the base. */
static err_code collect(const model *m, const gguf_ctx *g, lora_pair *pairs, int *n_pairs, err_t *err) {
    *n_pairs = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        char base[200], other[220];
        bool is_a = false;
        err_code rc = split_name(t->name, base, sizeof base, &is_a, err);
        if (rc) return rc;
        snprintf(other, sizeof other, "%s.lora_%c", base, is_a ? 'b' : 'a');
        const gguf_tensor *o = gguf_find_tensor(g, other);
        if (!o) return err_set(err, ERR_MISSING_TENSOR, "adapter tensor '%s' has no '%s' beside it", t->name, other);
        if (!is_a) continue; /* the pair is taken at its A */
        if (!strcmp(base, "token_embd.weight"))
            return err_set(err, ERR_UNSUPPORTED, "adapter tensor '%s': LoRA on the token embedding is not supported", t->name);
        lora_pair *p = &pairs[(*n_pairs)++];
        *p = (lora_pair){.a = t, .b = o};
        if ((rc = resolve(m, base, p, err)) || (rc = check_shapes(m, base, p, err))) return rc;
    }
    if (!*n_pairs) return err_set(err, ERR_BAD_VALUE, "the adapter holds no LoRA tensors");
    return ERR_OK;
}

static err_code check_meta(const model *m, const gguf_ctx *g, float *alpha, err_t *err) {
    gguf_str s;
    if (!gguf_get_str(g, "general.type", &s))
        return err_set(err, ERR_MISSING_KEY, "not an adapter: general.type is missing (it must be 'adapter')");
    if (!gguf_str_eq(s, "adapter"))
        return err_set(err, ERR_BAD_VALUE, "not an adapter: general.type is '%.*s', not 'adapter'", (int)(s.len > 64 ? 64 : s.len), s.ptr);
    if (!gguf_get_str(g, "adapter.type", &s) || !gguf_str_eq(s, "lora"))
        return err_set(err, ERR_UNSUPPORTED, "the adapter's adapter.type is not 'lora' (octo reads LoRA adapters)");
    if (!gguf_get_str(g, "general.architecture", &s))
        return err_set(err, ERR_MISSING_KEY, "the adapter has no general.architecture");
    if (!gguf_str_eq(s, m->hp.arch_name))
        return err_set(err, ERR_BAD_VALUE, "the adapter is for architecture '%.*s', the model is '%s'",
                       (int)(s.len > 64 ? 64 : s.len), s.ptr, m->hp.arch_name);
    *alpha = 0.0f;
    const gguf_kv *kv = gguf_find_kv(g, "adapter.lora.alpha");
    if (kv && !gguf_get_f32(g, "adapter.lora.alpha", alpha))
        return err_set(err, ERR_BAD_VALUE, "adapter.lora.alpha must be a float, not %s", gguf_type_name(kv->value.type));
    if (!isfinite(*alpha) || *alpha < 0.0f)
        return err_set(err, ERR_BAD_VALUE, "adapter.lora.alpha is %g", (double)*alpha);
    return ERR_OK;
}

/* ---------------------------------------------------------------- reading */

/* t's values as F32 into dst, every one finite. */
static err_code read_f32(const gguf_tensor *t, float *dst, err_t *err) {
    const int64_t n0 = t->ne[0], rows = (int64_t)(t->n_elements / (uint64_t)n0);
    const size_t rb = quant_row_bytes(t->type, n0);
    for (int64_t r = 0; r < rows; r++) quant_dequantize_row(t->type, (const uint8_t *)t->data + (size_t)r * rb, dst + r * n0, n0);
    for (uint64_t i = 0; i < t->n_elements; i++)
        if (!isfinite(dst[i]))
            return err_set(err, ERR_BAD_VALUE, "adapter tensor '%s' holds a value that is not a finite number (at %llu)",
                           t->name, (unsigned long long)i);
    return ERR_OK;
}

/* B [e][rows][r] (read into tmp) as B^T [e][r][rows] into bt. */
static void transpose_b(const float *tmp, int64_t rows, int r, int64_t mats, float *bt) {
    for (int64_t e = 0; e < mats; e++)
        for (int64_t i = 0; i < rows; i++)
            for (int k = 0; k < r; k++)
                bt[((size_t)e * (size_t)r + (size_t)k) * (size_t)rows + (size_t)i] =
                    tmp[((size_t)e * (size_t)rows + (size_t)i) * (size_t)r + (size_t)k];
}

/* Each pair read into the adapter's block (B transposed), its parts laid in their slots. */
static err_code read_pairs(lora_adapter *ad, const lora_pair *pairs, int n_pairs, const model *m, err_t *err) {
    uint64_t floats = 0, widest_b = 1;
    for (int i = 0; i < n_pairs; i++) {
        floats += pairs[i].a->n_elements + pairs[i].b->n_elements;
        if (pairs[i].b->n_elements > widest_b) widest_b = pairs[i].b->n_elements;
    }
    float *tmp = NULL;
    if (floats > SIZE_MAX / sizeof(float) || !(ad->mem = malloc((size_t)floats * sizeof(float))) ||
        !(tmp = malloc((size_t)widest_b * sizeof(float))))
        return err_set(err, ERR_NOMEM, "out of memory for the adapter's %llu values", (unsigned long long)floats);
    ad->bytes = floats * sizeof(float);
    float *at = ad->mem;
    err_code rc = ERR_OK;
    for (int i = 0; i < n_pairs && !rc; i++) {
        const lora_pair *p = &pairs[i];
        float *a = at, *bt = at + p->a->n_elements;
        at = bt + p->b->n_elements;
        if ((rc = read_f32(p->a, a, err)) || (rc = read_f32(p->b, tmp, err))) break;
        const int r = (int)p->a->ne[1];
        transpose_b(tmp, p->b->ne[1], r, p->b->ne[2], bt);
        lora_place(ad, m, p->layer, p->kind, p->n_kind, a, bt, r, p->b->ne[1]);
    }
    free(tmp);
    return rc;
}

void lora_place(lora_adapter *ad, const model *m, int layer, const lora_kind *kinds, int n_kind, float *a,
                float *bt, int rank, int64_t rows) {
    int64_t row0 = 0;
    for (int k = 0; k < n_kind; k++) {
        const model_mat *w = lora_mat_of(m, layer, kinds[k]);
        ad->t[lora_slot(layer, kinds[k])] = (lora_tensor){.a = a, .bt = bt + row0, .rank = rank, .n_in = w->n_in,
                                                         .n_out = w->n_out, .n_mat = w->n_mat,
                                                         .bt_stride = (size_t)rows};
        row0 += w->n_out;
        ad->n_matrices++;
    }
}

lora_adapter *lora_alloc(const model *m, float alpha) {
    lora_adapter *ad = calloc(1, sizeof *ad);
    if (!ad) return NULL;
    ad->alpha = alpha;
    ad->n_layer = m->hp.n_layer;
    if (!(ad->t = calloc((size_t)(ad->n_layer + 1) * LORA_KINDS, sizeof *ad->t))) {
        free(ad);
        return NULL;
    }
    return ad;
}

err_code lora_from_gguf(const model *m, gguf_ctx *g, lora_adapter **out, err_t *err) {
    *out = NULL;
    lora_adapter *ad = lora_alloc(m, 0.0f);
    lora_pair *pairs = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *pairs);
    int n_pairs = 0;
    err_code rc = ERR_OK;
    if (!ad || !pairs) rc = err_set(err, ERR_NOMEM, "out of memory for an adapter");
    if (!rc) rc = check_meta(m, g, &ad->alpha, err);
    if (!rc) rc = collect(m, g, pairs, &n_pairs, err);
    if (!rc) rc = read_pairs(ad, pairs, n_pairs, m, err);
    free(pairs);
    gguf_close(g);
    if (rc) {
        lora_free(ad);
        return rc;
    }
    *out = ad;
    return ERR_OK;
}

err_code lora_open(const model *m, const char *path, lora_adapter **out, err_t *err) {
    *out = NULL;
    gguf_ctx *g = NULL;
    err_code rc = gguf_open(path, &g, err);
    if (rc) return rc;
    return lora_from_gguf(m, g, out, err);
}
