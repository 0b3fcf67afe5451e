/*
 * forward_mla — multi-head latent attention (DeepSeek-V2), computed in the
 * latent space so that the cache holds one compressed row per token.
 *
 * Per token:  c = attn_kv_a_mqa · h = [latent (r) | k_pe (n_rot)]
 *             ĉ = rmsnorm(latent, attn_kv_a_norm)
 *             q = attn_q_b · rmsnorm(attn_q_a · h) (or attn_q · h), per head [q_nope | q_pe]
 * attn_kv_b maps ĉ to each head's [k_nope | v]: k_nope_h = K_h ĉ, v_h = V_h ĉ.
 * So q_nope_h · k_nope_h = (K_hᵀ q_nope_h) · ĉ, and sum_s p_s v_h(s) =
 * V_h (sum_s p_s ĉ_s): every head attends over the same cached rows
 * [ĉ | RoPE(k_pe)] with the query [K_hᵀ q_nope_h | RoPE(q_pe_h)] and takes
 * ĉ, the first r values of the same row, as its value; V_h is applied once to
 * the result. The cache holds that one row (the values read from it: kv_shape
 * values_in_keys), r + n_rot values a token per layer instead of
 * n_head * (head_dim + head_dim_v).
 */
#include "forward_internal.h"

#include <string.h>

#include "core/quant.h"

/* Each head's query absorbed into the latent space: qa[t][h] = [K_hᵀ q_nope | q_pe]. */
typedef struct {
    fwd_state *st;
    const model_mat *kv_b;
    int T;
} absorb_job;

static void absorb_work(void *ctx, int ith, int nth) {
    const absorb_job *j = ctx;
    const model_hparams *hp = &j->st->m->hp;
    const int r = hp->kv_lora_rank, nope = hp->head_dim - hp->n_rot, row = r + hp->n_rot;
    const int per_head = nope + hp->head_dim_v;
    float w[ATTN_MAX_HEAD_DIM];
    for (int h = hp->n_head * ith / nth; h < hp->n_head * (ith + 1) / nth; h++) {
        for (int t = 0; t < j->T; t++) {
            float *qa = j->st->qa + ((size_t)t * hp->n_head + h) * row;
            const float *q = j->st->q + ((size_t)t * hp->n_head + h) * hp->head_dim;
            memset(qa, 0, sizeof(float) * (size_t)r);
            memcpy(qa + r, q + nope, sizeof(float) * (size_t)hp->n_rot);
        }
        for (int i = 0; i < nope; i++) { /* row i of K_h, times each token's q_nope[i] */
            const uint8_t *src = (const uint8_t *)j->kv_b->data + (size_t)(h * per_head + i) * j->kv_b->row_bytes;
            quant_dequantize_row(j->kv_b->type, src, w, r);
            for (int t = 0; t < j->T; t++) {
                float *qa = j->st->qa + ((size_t)t * hp->n_head + h) * row;
                const float qi = j->st->q[((size_t)t * hp->n_head + h) * hp->head_dim + i];
                for (int c = 0; c < r; c++) qa[c] += qi * w[c];
            }
        }
    }
}

/* q (per head [q_nope | q_pe]) into st->q; the cache rows into st->k (the
 * values, their first r elements, also into st->v for a cache that stores them apart). */
static err_code project(fwd_state *st, int layer, int T, err_t *err) {
    const model_layer *L = &st->m->layers[layer];
    const model_hparams *hp = &st->m->hp;
    const int r = hp->kv_lora_rank, row = r + hp->n_rot;
    err_code rc;
    if (hp->q_lora_rank > 0) {
        if ((rc = fwd_mat_mul(st, &L->wq_a, st->xn, T, st->low, err)) ||
            (rc = fwd_lora(st, layer, LORA_Q_A, 0, st->xn, T, NULL, st->low, err)))
            return rc;
        fwd_norm_rows(st, st->low, st->low, L->q_a_norm.data, hp->q_lora_rank, T, hp->rms_eps);
        rc = fwd_mat_mul(st, &L->wq, st->low, T, st->q, err);
        if (!rc) rc = fwd_lora(st, layer, LORA_Q, 0, st->low, T, NULL, st->q, err);
    } else {
        rc = fwd_mat_mul(st, &L->wq, st->xn, T, st->q, err);
        if (!rc) rc = fwd_lora(st, layer, LORA_Q, 0, st->xn, T, NULL, st->q, err);
    }
    if (rc || (rc = fwd_mat_mul(st, &L->wkv_a, st->xn, T, st->k, err)) ||
        (rc = fwd_lora(st, layer, LORA_KV_A, 0, st->xn, T, NULL, st->k, err)))
        return rc;
    for (int t = 0; t < T; t++) {
        float *c = st->k + (size_t)t * row;
        fwd_rmsnorm(c, c, L->kv_a_norm.data, r, hp->rms_eps);
        memcpy(st->v + (size_t)t * r, c, sizeof(float) * (size_t)r);
        const float *cs = st->rope_cs + (size_t)t * hp->n_rot;
        fwd_rope_apply(st->q + (size_t)t * hp->n_head * hp->head_dim + (hp->head_dim - hp->n_rot), hp->n_head,
                       hp->head_dim, hp->n_rot, hp->rope_neox, cs);
        fwd_rope_apply(c + r, 1, hp->n_rot, hp->n_rot, hp->rope_neox, cs);
    }
    return ERR_OK;
}

/* att[t][h] = V_h · lat[t][h], head by head (V_h: rows of attn_kv_b, never packed). */
static err_code values_out(fwd_state *st, const model_layer *L, int T, err_t *err) {
    const model_hparams *hp = &st->m->hp;
    const int r = hp->kv_lora_rank, nope = hp->head_dim - hp->n_rot, hdv = hp->head_dim_v;
    for (int h = 0; h < hp->n_head; h++) {
        model_mat vh = L->wkv_b;
        vh.data = (const uint8_t *)vh.data + (size_t)(h * (nope + hdv) + nope) * vh.row_bytes;
        vh.n_out = hdv;
        for (int t = 0; t < T; t++)
            memcpy(st->low + (size_t)t * r, st->lat + ((size_t)t * hp->n_head + h) * r, sizeof(float) * (size_t)r);
        err_code rc = fwd_mat_mul(st, &vh, st->low, T, st->oh, err);
        if (rc) return rc;
        for (int t = 0; t < T; t++)
            memcpy(st->att + ((size_t)t * hp->n_head + h) * hdv, st->oh + (size_t)t * hdv, sizeof(float) * (size_t)hdv);
    }
    return ERR_OK;
}

err_code fwd_attn_mla(fwd_state *st, const fwd_rows *rows, int layer, err_t *err) {
    const model_hparams *hp = &st->m->hp;
    const kv_iface *kv = rows->part[0].kv;
    const int T = rows->n;
    const model_layer *L = &st->m->layers[layer];
    const int r = hp->kv_lora_rank;
    const size_t nq = (size_t)T * hp->n_head * hp->head_dim, nk = (size_t)T * (r + hp->n_rot);
    err_code rc = project(st, layer, T, err);
    if (rc || (rc = fwd_check_qk(st->q, nq, st->k, nk, layer, rows->pos[0], err)) ||
        (rc = kv->append(kv->self, layer, T, rows->pos, st->k, st->v, err)))
        return rc;
    absorb_job j = {st, &L->wkv_b, T};
    const int64_t macs = (int64_t)T * hp->n_head * (hp->head_dim - hp->n_rot) * r;
    if (macs < MIN_PARALLEL_MACS) absorb_work(&j, 0, 1);
    else tpool_run(st->pool, absorb_work, &j);
    /* the queries in the latent space: attn_kv_b's key rows */
    if ((rc = fwd_check_qk(st->qa, (size_t)T * hp->n_head * (r + hp->n_rot), NULL, 0, layer, rows->pos[0], err)))
        return rc;
    if (kv->queries) kv->queries(kv->self, layer, T, st->qa);
    const fwd_attn_shape sh = {.n_head = hp->n_head, .n_head_kv = 1, .hd = r + hp->n_rot, .hdv = r, .q = st->qa,
                               .out = st->lat, .scale = hp->attn_scale, .softcap = hp->attn_softcap,
                               .window = model_layer_swa(hp, layer) ? hp->swa_window : 0};
    if ((rc = fwd_attend(st, rows, layer, &sh, err))) return rc;
    if ((rc = values_out(st, L, T, err)) || (rc = fwd_mat_mul(st, &L->wo, st->att, T, st->ffn_out, err))) return rc;
    return fwd_lora(st, layer, LORA_O, 0, st->att, T, NULL, st->ffn_out, err);
}
