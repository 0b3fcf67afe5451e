/*
 * model — hyperparameters and tensor binding. See model.h.
 *
 * The hyperparameters come from model/arch.c. Every tensor the architecture's
 * features call for is checked for presence, computable type and exact shape
 * here, once, so the forward pass never checks anything.
 */
#include "model.h"
#include "arch.h"
#include "experts_iface.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/kernels/packed.h"
#include "platform/file.h"
#include "core/quant.h"
#include "core/threadpool.h"

/* ---------------------------------------------------------------- tensors */

typedef struct {
    const gguf_ctx *g;
    err_t *err;
    uint64_t n_params, bytes;
} binder;

/* Bind name with shape (ne0, ne1, ne2); ne2 = 0 means a 2-D (or 1-D when
 * ne1 = 0) tensor. Optional tensors that are absent leave m->data NULL. */
static err_code bind(binder *b, model_mat *m, const char *name, int64_t ne0, int64_t ne1, int64_t ne2, bool required,
                     bool f32_only) {
    memset(m, 0, sizeof *m);
    const gguf_tensor *t = gguf_find_tensor(b->g, name);
    if (!t) {
        if (!required) return ERR_OK;
        return err_set(b->err, ERR_MISSING_TENSOR, "tensor '%s' is missing", name);
    }
    int64_t want[3] = {ne0, ne1 ? ne1 : 1, ne2 ? ne2 : 1};
    uint32_t want_dims = ne2 ? 3 : ne1 ? 2 : 1;
    bool ok = t->ne[0] == want[0] && t->ne[1] == want[1] && t->ne[2] == want[2] && t->ne[3] == 1 &&
              t->n_dims <= (want_dims > 1 ? want_dims : 2);
    if (!ok)
        return err_set(b->err, ERR_BAD_SHAPE,
                       "tensor '%s' has shape [%lld,%lld,%lld,%lld], expected [%lld,%lld,%lld]", name,
                       (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                       (long long)want[0], (long long)want[1], (long long)want[2]);
    if (!quant_type_supported(t->type))
        return err_set(b->err, ERR_UNSUPPORTED, "tensor '%s' has type %s, which octo cannot compute with", name,
                       quant_traits_of(t->type)->name);
    if (f32_only && t->type != QT_F32)
        return err_set(b->err, ERR_UNSUPPORTED, "tensor '%s' must be F32, not %s", name, quant_traits_of(t->type)->name);
    m->data = t->data;
    m->type = t->type;
    m->n_in = want[0];
    m->n_out = want[1];
    m->n_mat = want[2];
    m->row_bytes = quant_row_bytes(t->type, want[0]);
    m->shared = t->shares_bytes;
    b->n_params += t->n_elements;
    b->bytes += t->n_bytes;
    return ERR_OK;
}

/* Rows [r0, r0 + n) of each part of a fused tensor of shape (ne0, total rows):
 * phi3's attn_qkv and ffn_up. Its parameters count once. */
static err_code bind_parts(binder *b, const char *name, int64_t ne0, int n_parts, const int64_t *rows,
                           model_mat **parts) {
    int64_t total = 0;
    for (int i = 0; i < n_parts; i++) total += rows[i];
    model_mat whole;
    err_code rc = bind(b, &whole, name, ne0, total, 0, true, false);
    if (rc) return rc;
    int64_t r0 = 0;
    for (int i = 0; i < n_parts; i++) {
        *parts[i] = whole;
        parts[i]->data = (const uint8_t *)whole.data + (size_t)r0 * whole.row_bytes;
        parts[i]->n_out = rows[i];
        r0 += rows[i];
    }
    return ERR_OK;
}

/* A norm over a whole projected row (n values) or per head (hd values). */
static err_code bind_qk_norm(binder *b, model_mat *m, const char *name, int64_t n, int64_t hd) {
    const gguf_tensor *t = gguf_find_tensor(b->g, name);
    return bind(b, m, name, t && t->ne[0] == hd ? hd : n, 0, 0, true, true);
}

#define BIND(field, suffix, a0, a1, a2, req, f32)                                      \
    do {                                                                              \
        snprintf(n, sizeof n, "blk.%d.%s", il, suffix);                               \
        if ((rc = bind(b, &L->field, n, a0, a1, a2, req, f32))) return rc;            \
    } while (0)

/* Multi-head latent attention's projections (deepseek2). */
static err_code bind_mla(binder *b, const model_hparams *hp, int il, model_layer *L) {
    char n[96];
    err_code rc;
    const int64_t E = hp->n_embd, q_dim = (int64_t)hp->n_head * hp->head_dim;
    const int64_t kv_b = (int64_t)hp->n_head * (hp->head_dim - hp->n_rot + hp->head_dim_v);
    if (hp->q_lora_rank > 0) {
        BIND(wq_a, "attn_q_a.weight", E, hp->q_lora_rank, 0, true, false);
        BIND(q_a_norm, "attn_q_a_norm.weight", hp->q_lora_rank, 0, 0, true, true);
        BIND(wq, "attn_q_b.weight", hp->q_lora_rank, q_dim, 0, true, false);
    } else {
        BIND(wq, "attn_q.weight", E, q_dim, 0, true, false);
    }
    BIND(wkv_a, "attn_kv_a_mqa.weight", E, hp->kv_lora_rank + hp->n_rot, 0, true, false);
    BIND(kv_a_norm, "attn_kv_a_norm.weight", hp->kv_lora_rank, 0, 0, true, true);
    BIND(wkv_b, "attn_kv_b.weight", hp->kv_lora_rank, kv_b, 0, true, false);
    return ERR_OK;
}

static err_code bind_attn(binder *b, const model_hparams *hp, int il, model_layer *L) {
    char n[96];
    err_code rc;
    const int64_t E = hp->n_embd, q_dim = (int64_t)hp->n_head * hp->head_dim;
    const int64_t k_dim = (int64_t)hp->n_head_kv * hp->head_dim, v_dim = (int64_t)hp->n_head_kv * hp->head_dim_v;
    const int64_t o_dim = (int64_t)hp->n_head * hp->head_dim_v;
    BIND(attn_norm, "attn_norm.weight", E, 0, 0, true, false);
    if (hp->kv_lora_rank > 0) {
        if ((rc = bind_mla(b, hp, il, L))) return rc;
    } else if (hp->fused_qkv) {
        snprintf(n, sizeof n, "blk.%d.attn_qkv.weight", il);
        if ((rc = bind_parts(b, n, E, 3, (int64_t[]){q_dim, k_dim, v_dim}, (model_mat *[]){&L->wq, &L->wk, &L->wv})))
            return rc;
    } else {
        BIND(wq, "attn_q.weight", E, q_dim, 0, true, false);
        BIND(wk, "attn_k.weight", E, k_dim, 0, true, false);
        BIND(wv, "attn_v.weight", E, v_dim, 0, true, false);
    }
    BIND(wo, "attn_output.weight", o_dim, E, 0, true, false);
    const bool qwen = hp->arch == ARCH_QWEN2 || hp->arch == ARCH_QWEN2MOE;
    BIND(bq, "attn_q.bias", q_dim, 0, 0, qwen, true);
    BIND(bk, "attn_k.bias", k_dim, 0, 0, qwen, true);
    BIND(bv, "attn_v.bias", v_dim, 0, 0, qwen, true);
    if (hp->qk_norm) {
        snprintf(n, sizeof n, "blk.%d.attn_q_norm.weight", il);
        if ((rc = bind_qk_norm(b, &L->q_norm, n, q_dim, hp->head_dim))) return rc;
        snprintf(n, sizeof n, "blk.%d.attn_k_norm.weight", il);
        if ((rc = bind_qk_norm(b, &L->k_norm, n, k_dim, hp->head_dim))) return rc;
    }
    if (hp->post_norms) BIND(post_attn_norm, "post_attention_norm.weight", E, 0, 0, true, true);
    return ERR_OK;
}

static err_code bind_ffn(binder *b, const model_hparams *hp, int il, model_layer *L) {
    char n[96];
    err_code rc;
    const int64_t E = hp->n_embd;
    BIND(ffn_norm, "ffn_norm.weight", E, 0, 0, true, false);
    if (hp->post_norms) BIND(post_ffn_norm, "post_ffw_norm.weight", E, 0, 0, true, true);
    if (!model_layer_moe(hp, il)) {
        const int64_t ff = hp->n_ff_dense;
        if (hp->fused_gate_up) {
            snprintf(n, sizeof n, "blk.%d.ffn_up.weight", il);
            if ((rc = bind_parts(b, n, E, 2, (int64_t[]){ff, ff}, (model_mat *[]){&L->w_gate, &L->w_up}))) return rc;
        } else {
            BIND(w_gate, "ffn_gate.weight", E, ff, 0, true, false);
            BIND(w_up, "ffn_up.weight", E, ff, 0, true, false);
        }
        BIND(w_down, "ffn_down.weight", ff, E, 0, true, false);
        return ERR_OK;
    }
    BIND(gate_inp, "ffn_gate_inp.weight", E, hp->n_expert, 0, true, false);
    BIND(expert_bias, "exp_probs_b.bias", hp->n_expert, 0, 0, false, true);
    BIND(w_gate, "ffn_gate_exps.weight", E, hp->n_ff, hp->n_expert, true, false);
    BIND(w_up, "ffn_up_exps.weight", E, hp->n_ff, hp->n_expert, true, false);
    BIND(w_down, "ffn_down_exps.weight", hp->n_ff, E, hp->n_expert, true, false);
    const bool sh = hp->n_ff_shexp > 0;
    BIND(w_gate_sh, "ffn_gate_shexp.weight", E, hp->n_ff_shexp, 0, sh, false);
    BIND(w_up_sh, "ffn_up_shexp.weight", E, hp->n_ff_shexp, 0, sh, false);
    BIND(w_down_sh, "ffn_down_shexp.weight", hp->n_ff_shexp, E, 0, sh, false);
    if (hp->shexp_gated) BIND(gate_inp_sh, "ffn_gate_inp_shexp.weight", E, 0, 0, true, true);
    return ERR_OK;
}
#undef BIND

static err_code bind_layer(binder *b, const model_hparams *hp, int il, model_layer *L) {
    err_code rc = bind_attn(b, hp, il, L);
    if (!rc) rc = bind_ffn(b, hp, il, L);
    if (rc) return rc;
    if (L->attn_norm.type != QT_F32 || L->ffn_norm.type != QT_F32)
        return err_set(b->err, ERR_UNSUPPORTED, "blk.%d norm weights must be F32", il);
    return ERR_OK;
}

uint64_t model_kv_bytes(const model_hparams *hp, uint64_t n_tokens, uint32_t type) {
    uint64_t el = type == QT_F16 ? 2 : 4;
    const model_kv_row r = model_kv_row_of(hp);
    return n_tokens * (uint64_t)hp->n_layer * (uint64_t)r.n_head_kv * (uint64_t)(r.head_dim + (r.values_in_keys ? 0 : r.head_dim_v)) * el;
}

/* The active path has packed kernels for w (core/kernels/packed.h) and its rows
 * fill whole groups (for an expert stack: each expert's). */
static bool packable(const model_mat *w) {
    return packed_get(w->type) && w->n_out % PACK_ROWS == 0 && packed_supported(w->type, w->n_out * w->n_mat, w->n_in);
}

void model_expert_extent(const model *m, int layer, int expert, expert_extent *out) {
    const model_layer *L = &m->layers[layer];
    if (!L->gate_inp.data) { /* a dense layer of an MoE model: no experts */
        memset(out, 0, sizeof *out);
        return;
    }
    const model_mat *src[3] = {&L->w_gate, &L->w_up, &L->w_down};
    for (int i = 0; i < 3; i++) {
        out->bytes[i] = (size_t)src[i]->n_out * src[i]->row_bytes;
        out->offset[i] = (uint64_t)((const uint8_t *)src[i]->data - m->gguf->base) + (uint64_t)expert * out->bytes[i];
        out->pack[i] = !src[i]->shared && packable(src[i]);
    }
}

void model_expert_pack(const model *m, int layer, model_mat mats[3], void *tmp) {
    expert_extent x;
    model_expert_extent(m, layer, 0, &x);
    for (int i = 0; i < 3; i++) {
        mats[i].packed = x.pack[i];
        if (x.pack[i]) packed_pack(mats[i].type, (void *)mats[i].data, mats[i].n_out, mats[i].n_in, tmp);
    }
}

/* Re-lay every matrix the active path has packed kernels for (core/kernels/packed.h),
 * in place in the private mapping: the same bytes, so memory does not grow;
 * the touched pages become this process's own. The embedding table keeps its
 * layout (rows are looked up one by one), so a tied output does too. Expert
 * stacks stay as they are, untouched: the expert store (src/moe/) reads
 * each expert when it is first used and packs its own copy
 * (model_expert_pack), so a load never pulls every expert in. When the
 * mapping cannot be made writable the model simply keeps the GGUF layout.
 * relay false: the file already holds this layout (a deploy bundle's
 * weights): the same matrices are only marked, the mapping stays read-only. */
/* The matrices of layer l (-1: the output) that the active path packs; n returned. */
/* The matrices of layer l (-1: the output) a packed path may re-lay. */
static int pack_candidates(model *m, int l, model_mat **cand) {
    int n = 0;
    if (l < 0) {
        if (!m->output_tied) cand[n++] = &m->output;
        return n;
    }
    model_layer *L = &m->layers[l];
    model_mat *ls[] = {&L->wq,   &L->wk,     &L->wv,        &L->wo,      &L->w_gate, &L->w_up,
                       &L->w_down, &L->w_gate_sh, &L->w_up_sh, &L->w_down_sh, &L->wq_a, &L->wkv_a};
    for (size_t i = 0; i < sizeof ls / sizeof *ls; i++) cand[n++] = ls[i];
    return n;
}

int model_matrices(const model *m, int l, const model_mat **out) {
    model_mat *cand[12];
    const int n = pack_candidates((model *)m, l, cand); /* only read */
    for (int i = 0; i < n; i++) out[i] = cand[i];
    return n;
}

static int packable_mats(model *m, int l, model_mat **out) {
    model_mat *cand[12];
    const int n = pack_candidates(m, l, cand);
    int k = 0;
    const uint8_t *own = m->owned;
    for (int i = 0; i < n; i++) {
        model_mat *w = cand[i];
        if (!w->data || w->packed || w->shared || w->n_mat > 1 || !packable(w)) continue;
        if (own && ((const uint8_t *)w->data < own || (const uint8_t *)w->data >= own + m->owned_bytes))
            continue; /* a copy's shared matrix: its source's to lay out */
        out[k++] = w;
    }
    return k;
}

uint64_t model_packable_bytes(const model *m) {
    if (m->prepacked) return m->packed_bytes;
    uint64_t bytes = 0;
    model_mat *mats[12];
    for (int l = -1; l < m->hp.n_layer; l++) {
        const int n = packable_mats((model *)m, l, mats); /* only read */
        for (int i = 0; i < n; i++) bytes += (uint64_t)(mats[i]->n_out * mats[i]->n_mat) * mats[i]->row_bytes;
    }
    return bytes;
}

static void pack_weights(model *m, bool relay) {
    model_mat *mats[12];
    size_t tmp_bytes = 0;
    uint8_t *tmp = NULL;
    bool writable = !relay;
    for (int l = -1; l < m->hp.n_layer; l++) {
        const int n = packable_mats(m, l, mats);
        for (int i = 0; i < n; i++) {
            model_mat *w = mats[i];
            const int64_t rows = w->n_out * w->n_mat;
            if (!writable && !(writable = m->owned || gguf_writable_data(m->gguf) != NULL)) return;
            const size_t need = (size_t)PACK_ROWS * w->row_bytes;
            if (relay && need > tmp_bytes) {
                uint8_t *t = realloc(tmp, need);
                if (!t) break;
                tmp = t;
                tmp_bytes = need;
            }
            if (relay) packed_pack(w->type, (void *)w->data, rows, w->n_in, tmp);
            w->packed = true;
            m->packed_bytes += (uint64_t)rows * w->row_bytes;
        }
    }
    free(tmp);
}

void model_pack(model *m) {
    if (!m->prepacked) pack_weights(m, true);
}

uint64_t model_unpack(model *m) {
    if (m->prepacked || m->owned || !m->gguf || !m->packed_bytes) return 0;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uint64_t bytes = 0;
    for (int l = -1; l < m->hp.n_layer; l++) {
        model_mat *cand[12];
        const int n = pack_candidates(m, l, cand);
        for (int i = 0; i < n; i++) {
            model_mat *w = cand[i];
            if (!w->packed) continue;
            const uint64_t len = (uint64_t)(w->n_out * w->n_mat) * w->row_bytes;
            /* whole pages: a page it shares with a neighbour goes back to the
             * file too, which is that neighbour's own layout unless it was
             * packed, and then it is reverted in this same loop */
            const uintptr_t a = (uintptr_t)w->data & ~(page - 1), e = ((uintptr_t)w->data + len + page - 1) & ~(page - 1);
            if (plat_mem_revert((void *)a, e - a)) return bytes; /* the first, or none: nothing is half done */
            w->packed = false;
            bytes += len;
        }
    }
    m->packed_bytes = 0;
    return bytes;
}

void model_sync_shared(model *copy, const model *src) {
    for (int l = -1; l < src->hp.n_layer && l < copy->hp.n_layer; l++) {
        model_mat *a[12], *b[12];
        const int n = pack_candidates(copy, l, a);
        pack_candidates((model *)src, l, b); /* only read */
        for (int i = 0; i < n; i++)
            if (a[i]->data && a[i]->data == b[i]->data) a[i]->packed = b[i]->packed;
    }
}

/* A file written in the packed layout (model.h: MODEL_LAYOUT_KEY) is read
 * only by a path with the same packed kernels, and its matrices are exactly
 * those this build packs: anything else would compute garbage. */
static err_code check_layout(model *m, err_t *err) {
    gguf_str layout = {0, NULL};
    if (!gguf_get_str(m->gguf, MODEL_LAYOUT_KEY, &layout)) return ERR_OK;
    if (!gguf_str_eq(layout, MODEL_LAYOUT_PACKED))
        return err_set(err, ERR_UNSUPPORTED, "weights laid out as '%.*s', which this build of octo does not read",
                       (int)layout.len, layout.ptr);
    const gguf_value *types = gguf_get_arr(m->gguf, MODEL_LAYOUT_KEY ".types");
    for (uint64_t i = 0; types && i < types->v.arr.n; i++) {
        const uint32_t t = (uint32_t)gguf_arr_i64(types, i);
        if (t >= QT_COUNT || !packed_get(t))
            return err_set(err, ERR_UNSUPPORTED,
                           "the weights are laid out for packed %s kernels, which this CPU's %s path "
                           "does not have: deploy for this device, or load the GGUF model",
                           t < QT_COUNT ? quant_traits_of(t)->name : "?", cpu_path_name(kernels_path()));
    }
    uint64_t want = 0;
    gguf_get_u64(m->gguf, MODEL_LAYOUT_KEY ".bytes", &want);
    pack_weights(m, false);
    m->prepacked = true;
    if (m->packed_bytes != want)
        return err_set(err, ERR_BAD_VALUE, "the packed layout covers %llu bytes, this build would pack %llu",
                       (unsigned long long)want, (unsigned long long)m->packed_bytes);
    return ERR_OK;
}

err_code model_from_gguf(gguf_ctx *g, model **out, err_t *err) {
    *out = NULL;
    model *m = calloc(1, sizeof *m);
    if (!m) {
        gguf_close(g);
        return err_set(err, ERR_NOMEM, "out of memory");
    }
    m->gguf = g;
    err_code rc = arch_read_hparams(g, &m->hp, err);
    model_hparams *hp = &m->hp;
    binder b = {g, err, 0, 0};
    if (!rc) {
        const gguf_tensor *te = gguf_find_tensor(g, "token_embd.weight");
        if (!te) rc = err_set(err, ERR_MISSING_TENSOR, "tensor 'token_embd.weight' is missing");
        else if (te->ne[1] < 1 || te->ne[1] > (1 << 24))
            rc = err_set(err, ERR_BAD_SHAPE, "token_embd.weight has %lld rows", (long long)te->ne[1]);
        else hp->n_vocab = (int)te->ne[1];
    }
    if (!rc) rc = bind(&b, &m->tok_embd, "token_embd.weight", hp->n_embd, hp->n_vocab, 0, true, false);
    if (!rc) rc = bind(&b, &m->output_norm, "output_norm.weight", hp->n_embd, 0, 0, true, true);
    if (!rc) rc = bind(&b, &m->output, "output.weight", hp->n_embd, hp->n_vocab, 0, false, false);
    if (!rc && !m->output.data) {
        m->output = m->tok_embd;
        m->output_tied = true;
    }
    if (!rc) rc = bind(&b, &m->rope_freqs, "rope_freqs.weight", hp->n_rot / 2, 0, 0, false, true);
    if (!rc) rc = bind(&b, &m->rope_long, "rope_factors_long.weight", hp->n_rot / 2, 0, 0, false, true);
    if (!rc) rc = bind(&b, &m->rope_short, "rope_factors_short.weight", hp->n_rot / 2, 0, 0, false, true);
    if (!rc && (!m->rope_long.data) != (!m->rope_short.data))
        rc = err_set(err, ERR_MISSING_TENSOR, "tensor '%s' is missing (LongRoPE needs both sets of factors)",
                     m->rope_long.data ? "rope_factors_short.weight" : "rope_factors_long.weight");
    if (!rc && m->rope_short.data) m->rope_freqs = m->rope_short; /* until model_set_context says otherwise */
    if (!rc && !(m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers)))
        rc = err_set(err, ERR_NOMEM, "out of memory");
    for (int il = 0; !rc && il < hp->n_layer; il++) rc = bind_layer(&b, hp, il, &m->layers[il]);
    if (rc) {
        model_free(m);
        return rc;
    }
    m->n_params = b.n_params;
    m->weight_bytes = b.bytes;
    /* decode reads all of it but the embedding table (one row) and the unused experts */
    uint64_t per_token = b.bytes - (m->output_tied ? 0 : (uint64_t)m->tok_embd.row_bytes * (uint64_t)(hp->n_vocab - 1));
    for (int il = 0; il < hp->n_layer; il++) {
        const model_layer *L = &m->layers[il];
        if (!L->gate_inp.data) continue;
        uint64_t experts = (uint64_t)(L->w_gate.row_bytes * L->w_gate.n_out + L->w_up.row_bytes * L->w_up.n_out +
                                      L->w_down.row_bytes * L->w_down.n_out);
        per_token -= experts * (uint64_t)(hp->n_expert - hp->n_expert_used);
    }
    m->weight_bytes_per_token = per_token;
    if ((rc = check_layout(m, err))) {
        model_free(m);
        return rc;
    }
    *out = m;
    return ERR_OK;
}

void model_set_context(model *m, int n_ctx) {
    if (m->rope_long.data) m->rope_freqs = n_ctx > m->hp.rope_ctx_orig ? m->rope_long : m->rope_short;
}

err_code model_open(const char *path, model **out, err_t *err) {
    gguf_ctx *g;
    *out = NULL;
    err_code rc = gguf_open(path, &g, err);
    if (rc) return rc;
    rc = model_from_gguf(g, out, err);
    if (rc) err_prefix(err, "%s", path);
    return rc;
}

err_code model_load(const char *path, model **out, err_t *err) {
    err_code rc = model_open(path, out, err);
    if (!rc) model_pack(*out);
    return rc;
}

/* ---- a low-precision copy (self-draft) ---- */

/* The matrices a copy converts: every layer's, and the output. */
static int copy_mats(model *m, int l, model_mat **out) {
    int n = 0;
    if (l < 0) {
        out[n++] = &m->output;
        return n;
    }
    model_layer *L = &m->layers[l];
    model_mat *ls[] = {&L->wq,   &L->wk,     &L->wv,        &L->wo,      &L->w_gate,
                       &L->w_up, &L->w_down, &L->w_gate_sh, &L->w_up_sh, &L->w_down_sh};
    for (size_t i = 0; i < sizeof ls / sizeof *ls; i++) out[n++] = ls[i];
    return n;
}

/* Worth converting: a type we can read, more bytes per row than the target type. */
static bool converts(const model_mat *w, uint32_t type) {
    const quant_traits *qt = quant_traits_of(w->type), *tt = quant_traits_of(type);
    return w->data && qt && qt->dequantize && tt && w->n_in % tt->block_size == 0 &&
           quant_row_bytes(type, w->n_in) < w->row_bytes;
}

uint64_t model_requantized_bytes(const model *src, uint32_t type) {
    if (src->hp.n_expert > 0) return 0; /* experts stay on flash: a copy in memory would defeat that */
    uint64_t bytes = 0;
    for (int l = -1; l < src->hp.n_layer; l++) {
        model_mat *mats[10];
        const int n = copy_mats((model *)src, l, mats); /* only read */
        for (int i = 0; i < n; i++)
            if (converts(mats[i], type))
                bytes += (uint64_t)quant_row_bytes(type, mats[i]->n_in) * (uint64_t)(mats[i]->n_out * mats[i]->n_mat);
    }
    return bytes;
}

uint64_t model_requantized_token_bytes(const model *src, uint32_t type) {
    uint64_t bytes = src->weight_bytes_per_token;
    for (int l = -1; l < src->hp.n_layer; l++) {
        model_mat *mats[10];
        const int n = copy_mats((model *)src, l, mats); /* only read */
        for (int i = 0; i < n; i++) {
            const uint64_t rows = (uint64_t)(mats[i]->n_out * mats[i]->n_mat);
            if (converts(mats[i], type)) bytes -= rows * (mats[i]->row_bytes - quant_row_bytes(type, mats[i]->n_in));
        }
    }
    return bytes;
}

/* Rows [r0, r0 + n) of w as F32, whatever its layout (a packed group is
 * unpacked into tmp first; r0 is then a multiple of PACK_ROWS). */
static void read_rows(const model_mat *w, int64_t r0, int n, float *dst, uint8_t *tmp, uint8_t *tmp2) {
    const uint8_t *base = (const uint8_t *)w->data + (size_t)r0 * w->row_bytes;
    if (w->packed) {
        memcpy(tmp, base, (size_t)n * w->row_bytes);
        packed_unpack(w->type, tmp, n, w->n_in, tmp2);
        base = tmp;
    }
    for (int r = 0; r < n; r++) quant_dequantize_row(w->type, base + (size_t)r * w->row_bytes, dst + r * w->n_in, w->n_in);
}

/* One matrix's conversion, split by 16-row groups across the pool. */
typedef struct {
    const model_mat *w;
    uint32_t type;
    uint8_t *dst;
    size_t rb;
    float **f;
    uint8_t **tmp, **tmp2;
} requant_job;

static void requant_work(void *ctx, int ith, int nth) {
    const requant_job *j = ctx;
    const model_mat *w = j->w;
    const int64_t rows = w->n_out * w->n_mat, groups = (rows + PACK_ROWS - 1) / PACK_ROWS;
    for (int64_t g = groups * ith / nth; g < groups * (ith + 1) / nth; g++) {
        const int64_t r = g * PACK_ROWS;
        const int nr = rows - r < PACK_ROWS ? (int)(rows - r) : PACK_ROWS;
        read_rows(w, r, nr, j->f[ith], j->tmp[ith], j->tmp2[ith]);
        for (int i = 0; i < nr; i++)
            quant_quantize_row(j->type, j->f[ith] + i * w->n_in, j->dst + (size_t)(r + i) * j->rb, w->n_in);
    }
}

#define REQUANT_MAX_THREADS 64

err_code model_requantize(const model *src, uint32_t type, tpool *pool, model **out, err_t *err) {
    *out = NULL;
    const uint64_t bytes = model_requantized_bytes(src, type);
    if (bytes == 0)
        return err_set(err, ERR_UNSUPPORTED, src->hp.n_expert > 0 ? "no low-precision copy of a mixture of experts"
                                                                  : "no matrix of this model gets smaller as %s",
                       quant_traits_of(type) ? quant_traits_of(type)->name : "that type");
    model *m = calloc(1, sizeof *m);
    if (!m) return err_set(err, ERR_NOMEM, "out of memory");
    *m = *src;
    m->gguf = NULL;
    m->packed_bytes = 0;
    m->layers = malloc(sizeof *m->layers * (size_t)src->hp.n_layer);
    m->owned_bytes = (bytes + 63) & ~(uint64_t)63;
    m->owned = aligned_alloc(64, m->owned_bytes);
    int64_t max_n = 0;
    size_t max_row = 0;
    for (int l = -1; l < src->hp.n_layer; l++) {
        model_mat *mats[10];
        const int n = copy_mats((model *)src, l, mats); /* only read */
        for (int i = 0; i < n; i++) {
            if (mats[i]->row_bytes > max_row) max_row = mats[i]->row_bytes;
            if (mats[i]->n_in > max_n) max_n = mats[i]->n_in;
        }
    }
    int nth = pool ? tpool_size(pool) : 1;
    if (nth > REQUANT_MAX_THREADS) nth = REQUANT_MAX_THREADS;
    float *f[REQUANT_MAX_THREADS] = {0};
    uint8_t *tmp[REQUANT_MAX_THREADS] = {0}, *tmp2[REQUANT_MAX_THREADS] = {0};
    bool ok = m->layers && m->owned;
    for (int t = 0; t < nth; t++) {
        f[t] = malloc(sizeof(float) * PACK_ROWS * (size_t)max_n);
        tmp[t] = malloc(PACK_ROWS * max_row);
        tmp2[t] = malloc(PACK_ROWS * max_row);
        ok = ok && f[t] && tmp[t] && tmp2[t];
    }
    if (ok) {
        memcpy(m->layers, src->layers, sizeof *m->layers * (size_t)src->hp.n_layer);
        m->output_tied = false; /* the output gets its own low-precision copy; the embedding stays */
        uint8_t *dst = m->owned;
        for (int l = -1; l < m->hp.n_layer; l++) {
            model_mat *mats[10];
            const int n = copy_mats(m, l, mats);
            for (int i = 0; i < n; i++) {
                model_mat *w = mats[i];
                if (!converts(w, type)) continue;
                const model_mat from = *w;
                requant_job j = {&from, type, dst, quant_row_bytes(type, w->n_in), f, tmp, tmp2};
                tpool_run(nth > 1 ? pool : NULL, requant_work, &j);
                w->data = dst;
                w->type = type;
                w->row_bytes = j.rb;
                w->packed = false;
                dst += (size_t)(w->n_out * w->n_mat) * j.rb;
            }
        }
    }
    for (int t = 0; t < nth; t++) free(f[t]), free(tmp[t]), free(tmp2[t]);
    if (!ok) {
        model_free(m);
        return err_set(err, ERR_NOMEM, "out of memory for a %s copy of %.0f MiB", quant_traits_of(type)->name,
                       (double)bytes / (1 << 20));
    }
    /* all but one embedding row is idle in decode (the copy's output is its own) */
    m->weight_bytes = m->tok_embd.row_bytes * (uint64_t)m->hp.n_vocab + m->output_norm.row_bytes;
    for (int l = -1; l < m->hp.n_layer; l++) {
        model_mat *mats[10];
        const int n = copy_mats(m, l, mats);
        for (int i = 0; i < n; i++) m->weight_bytes += (uint64_t)mats[i]->row_bytes * (uint64_t)(mats[i]->n_out * mats[i]->n_mat);
        if (l >= 0) m->weight_bytes += m->layers[l].attn_norm.row_bytes + m->layers[l].ffn_norm.row_bytes;
    }
    m->weight_bytes_per_token = m->weight_bytes - m->tok_embd.row_bytes * (uint64_t)(m->hp.n_vocab - 1);
    pack_weights(m, true);
    *out = m;
    return ERR_OK;
}

void model_free(model *m) {
    if (!m) return;
    free(m->owned);
    free(m->layers);
    gguf_close(m->gguf);
    free(m);
}

/* ---------------------------------------------------------------- what the file says of itself */

/* The octo.upcycle.* keys `octo upcycle` writes, as one line (empty when absent). */
void model_describe_origin(const model *m, char *out, size_t n) {
    const gguf_ctx *g = m->gguf;
    gguf_str src, split, router, combine;
    uint32_t E = 0, K = 0, calib = 0, shared = 0;
    out[0] = '\0';
    if (!gguf_get_str(g, "octo.upcycle.source", &src)) return;
    const bool all = gguf_get_str(g, "octo.upcycle.split", &split) && gguf_get_str(g, "octo.upcycle.router", &router) &&
                     gguf_get_str(g, "octo.upcycle.combine", &combine) && gguf_get_u32(g, "octo.upcycle.experts", &E) &&
                     gguf_get_u32(g, "octo.upcycle.experts_used", &K);
    gguf_get_u32(g, "octo.upcycle.calibration_tokens", &calib);
    gguf_get_u32(g, "octo.upcycle.shared", &shared);
    if (!all) {
        snprintf(out, n, "upcycled from %.*s", (int)src.len, src.ptr);
        return;
    }
    snprintf(out, n, "upcycled from %.*s by octo: %u experts, %u used, split %.*s, router %.*s, combine %.*s, "
             "%u calibration tokens; %s", (int)src.len, src.ptr, E, K, (int)split.len, split.ptr, (int)router.len,
             router.ptr, (int)combine.len, combine.ptr, calib,
             shared ? "a shared expert: octo runs it, llama.cpp's llama architecture does not"
                    : "Mixtral layout: other runtimes compute it the same way");
}

/* "F32=9 Q4_0=29 Q6_K=1": the file's tensors by type, in type-id order. */
void model_type_histogram(const gguf_ctx *g, char *out, size_t cap) {
    uint64_t count[QT_COUNT] = {0};
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].type < QT_COUNT) count[g->tensors[i].type]++;
    size_t off = 0;
    out[0] = '\0';
    for (uint32_t t = 0; t < QT_COUNT; t++) {
        if (!count[t]) continue;
        char name[16];
        const char *n = quant_traits_of(t)->name;
        size_t i = 0;
        for (; n[i] && i + 1 < sizeof name; i++) name[i] = (char)(n[i] >= 'a' && n[i] <= 'z' ? n[i] - 32 : n[i]);
        name[i] = '\0';
        int w = snprintf(out + off, cap - off, "%s%s=%llu", off ? " " : "", name, (unsigned long long)count[t]);
        if (w < 0 || (size_t)w >= cap - off) break;
        off += (size_t)w;
    }
}
