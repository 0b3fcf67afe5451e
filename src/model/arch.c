/*
 * arch — what each architecture reads from the metadata: the common
 * hyperparameters, then its own features as data (model_hparams: scales,
 * soft-caps, norms, the gating of experts, latent attention). The forward
 * pass never asks which architecture it runs; it reads these fields.
 *
 * Keys are "<arch>.<name>". A required key missing or out of range is an
 * error naming it; an optional one takes llama.cpp's default. Adding an
 * architecture: a row in ARCHS and, when it has features of its own, a
 * reader below.
 */
#include "arch.h"

#include "core/kernels/attn.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define BIG (1 << 24)

/* ---------------------------------------------------------------- keys */

static const gguf_kv *find(const gguf_ctx *g, const char *arch, const char *name, char *key, size_t n) {
    snprintf(key, n, "%s.%s", arch, name);
    return gguf_find_kv(g, key);
}

/* "<arch>.<name>" as an integer in [min, max] (a uniform per-layer array
 * counts as its value, a bool as 0/1); absent: def, or ERR_MISSING_KEY. */
static err_code arch_get_int(const gguf_ctx *g, const char *arch, const char *name, bool required, int def, int min, int max,
                             int *out, err_t *err) {
    char key[128];
    const gguf_kv *kv = find(g, arch, name, key, sizeof key);
    if (!kv) {
        if (required) return err_set(err, ERR_MISSING_KEY, "metadata key '%s' is missing", key);
        *out = def;
        return ERR_OK;
    }
    int64_t v;
    if (kv->value.type == GGUF_ARRAY) {
        /* Per-layer arrays (e.g. feed_forward_length): we run uniform layers only. */
        const gguf_value *a = &kv->value;
        if (a->v.arr.raw == NULL || a->v.arr.n == 0 || a->v.arr.elem_type == GGUF_FLOAT32 ||
            a->v.arr.elem_type == GGUF_FLOAT64 || a->v.arr.elem_type == GGUF_BOOL)
            return err_set(err, ERR_BAD_VALUE, "metadata key '%s' is not an integer array", key);
        v = gguf_arr_i64(a, 0);
        for (uint64_t i = 1; i < a->v.arr.n; i++)
            if (gguf_arr_i64(a, i) != v)
                return err_set(err, ERR_UNSUPPORTED, "metadata key '%s' varies per layer, which is not supported", key);
    } else if (kv->value.type == GGUF_BOOL) {
        bool b = false;
        gguf_get_bool(g, key, &b);
        v = b;
    } else if (!gguf_get_i64(g, key, &v)) {
        return err_set(err, ERR_BAD_VALUE, "metadata key '%s' must be an integer, not %s", key,
                       gguf_type_name(kv->value.type));
    }
    if (v < min || v > max)
        return err_set(err, ERR_BAD_VALUE, "metadata key '%s' is %lld (allowed %d..%d)", key, (long long)v, min, max);
    *out = (int)v;
    return ERR_OK;
}

/* A finite float >= 0 (> 0 when positive); absent: def, or an error when required. */
static err_code get_float_req(const gguf_ctx *g, const char *arch, const char *name, bool required, bool positive,
                              float def, float *out, err_t *err) {
    char key[128];
    const gguf_kv *kv = find(g, arch, name, key, sizeof key);
    if (!kv) {
        if (required) return err_set(err, ERR_MISSING_KEY, "metadata key '%s' is missing", key);
        *out = def;
        return ERR_OK;
    }
    if (!gguf_get_f32(g, key, out))
        return err_set(err, ERR_BAD_VALUE, "metadata key '%s' must be a float, not %s", key,
                       gguf_type_name(kv->value.type));
    if (!isfinite(*out) || *out < 0.0f || (positive && *out == 0.0f)) /* inf or NaN would only give garbage logits */
        return err_set(err, ERR_BAD_VALUE, "metadata key '%s' is %g", key, (double)*out);
    return ERR_OK;
}

/* "<arch>.<name>" as a finite float >= 0; absent: def. */
static err_code arch_get_float(const gguf_ctx *g, const char *arch, const char *name, float def, float *out, err_t *err) {
    return get_float_req(g, arch, name, false, false, def, out, err);
}

static err_code get_bool(const gguf_ctx *g, const char *arch, const char *name, bool def, bool *out, err_t *err) {
    int v;
    err_code rc = arch_get_int(g, arch, name, false, def, 0, 1, &v, err);
    *out = v != 0;
    return rc;
}

/* ---------------------------------------------------------------- per architecture */

typedef err_code (*arch_reader)(const gguf_ctx *g, model_hparams *hp, err_t *err);

static err_code read_none(const gguf_ctx *g, model_hparams *hp, err_t *err) {
    (void)g, (void)hp, (void)err;
    return ERR_OK;
}

/* Experts' weights as the probabilities themselves (no renormalisation). */
static err_code read_qwen2moe(const gguf_ctx *g, model_hparams *hp, err_t *err) {
    const char *a = hp->arch_name;
    const int n_ff = hp->n_ff;
    err_code rc;
    if (hp->n_expert == 0) return err_set(err, ERR_MISSING_KEY, "metadata key '%s.expert_count' is missing", a);
    if ((rc = arch_get_int(g, a, "expert_feed_forward_length", false, n_ff / hp->n_expert_used, 1, BIG, &hp->n_ff, err)))
        return rc;
    if ((rc = arch_get_int(g, a, "expert_shared_feed_forward_length", false, n_ff, 1, BIG, &hp->n_ff_shexp, err)))
        return rc;
    hp->shexp_gated = true;
    hp->gating.norm = false;
    return ERR_OK;
}

static err_code read_olmoe(const gguf_ctx *g, model_hparams *hp, err_t *err) {
    (void)g;
    if (hp->n_expert == 0)
        return err_set(err, ERR_MISSING_KEY, "metadata key '%s.expert_count' is missing", hp->arch_name);
    hp->qk_norm = true;
    hp->gating.norm = false;
    return ERR_OK;
}

/* Granite's four multipliers are required keys (llama.cpp refuses a file without them). */
static err_code read_granite(const gguf_ctx *g, model_hparams *hp, err_t *err) {
    const char *a = hp->arch_name;
    float logit;
    err_code rc;
    if ((rc = get_float_req(g, a, "embedding_scale", true, true, 1.0f, &hp->embd_scale, err))) return rc;
    if ((rc = get_float_req(g, a, "residual_scale", true, true, 1.0f, &hp->residual_scale, err))) return rc;
    if ((rc = get_float_req(g, a, "attention.scale", true, true, 1.0f, &hp->attn_scale, err))) return rc;
    if ((rc = get_float_req(g, a, "logit_scale", true, true, 1.0f, &logit, err))) return rc;
    hp->logit_scale = 1.0f / logit;
    return ERR_OK;
}

/* Fused q/k/v and gate/up tensors; LongRoPE's context and magnitude factor.
 * The sliding window key is required (as llama.cpp requires it) but not
 * applied: llama.cpp stopped applying it to the Phi family (which layers
 * use it is not in the configs), and octo computes what llama.cpp does. */
static err_code read_phi3(const gguf_ctx *g, model_hparams *hp, err_t *err) {
    const char *a = hp->arch_name;
    int window;
    err_code rc = arch_get_int(g, a, "attention.sliding_window", true, 0, 0, INT32_MAX, &window, err);
    if (rc) return rc;
    hp->fused_qkv = hp->fused_gate_up = true;
    const int orig = hp->rope_ctx_orig ? hp->rope_ctx_orig : hp->n_ctx_train; /* YaRN may have read it */
    if ((rc = arch_get_int(g, a, "rope.scaling.original_context_length", false, orig, 1, BIG, &hp->rope_ctx_orig, err)))
        return rc;
    float factor; /* LongRoPE's magnitude, on top of YaRN's where a file asks for both */
    if ((rc = get_float_req(g, a, "rope.scaling.attn_factor", false, true, 1.0f, &factor, err))) return rc;
    hp->rope_attn_factor *= factor;
    return ERR_OK;
}

static err_code read_gemma2(const gguf_ctx *g, model_hparams *hp, err_t *err) {
    const char *a = hp->arch_name;
    err_code rc;
    hp->embd_scale = sqrtf((float)hp->n_embd);
    hp->post_norms = true;
    hp->act = ACT_GELU;
    hp->swa_period = 2;
    if ((rc = arch_get_int(g, a, "attention.sliding_window", false, 4096, 0, BIG, &hp->swa_window, err))) return rc;
    if ((rc = arch_get_float(g, a, "attn_logit_softcapping", 50.0f, &hp->attn_softcap, err))) return rc;
    if ((rc = arch_get_float(g, a, "final_logit_softcapping", 30.0f, &hp->final_softcap, err))) return rc;
    /* the query scale follows the model size in llama.cpp: the 27B (46 layers) uses n_embd / n_head */
    hp->attn_scale = 1.0f / sqrtf((float)(hp->n_layer == 46 ? hp->n_embd / hp->n_head : hp->head_dim));
    return ERR_OK;
}

/* Latent attention, leading dense layers, shared experts, scaled gating. */
static err_code read_deepseek2(const gguf_ctx *g, model_hparams *hp, err_t *err) {
    const char *a = hp->arch_name;
    err_code rc;
    int n_shared = 0, func = 1;
    if (hp->n_expert == 0) return err_set(err, ERR_MISSING_KEY, "metadata key '%s.expert_count' is missing", a);
    hp->n_ff_dense = hp->n_ff;
    if ((rc = arch_get_int(g, a, "attention.q_lora_rank", false, 0, 0, BIG, &hp->q_lora_rank, err))) return rc;
    if ((rc = arch_get_int(g, a, "attention.kv_lora_rank", true, 0, 1, BIG, &hp->kv_lora_rank, err))) return rc;
    if ((rc = arch_get_int(g, a, "leading_dense_block_count", true, 0, 0, hp->n_layer - 1, &hp->n_layer_dense_lead,
                           err)))
        return rc;
    if ((rc = arch_get_int(g, a, "expert_feed_forward_length", true, 0, 1, BIG, &hp->n_ff, err))) return rc;
    if ((rc = arch_get_int(g, a, "expert_shared_count", false, 0, 0, 64, &n_shared, err))) return rc;
    hp->n_ff_shexp = hp->n_ff * n_shared;
    if ((rc = get_float_req(g, a, "expert_weights_scale", false, true, 1.0f, &hp->gating.scale, err))) return rc;
    if ((rc = get_bool(g, a, "expert_weights_norm", false, &hp->gating.norm, err))) return rc;
    if ((rc = arch_get_int(g, a, "expert_gating_func", false, 1, 1, 2, &func, err))) return rc;
    hp->gating.func = func == 2 ? GATE_SIGMOID : GATE_SOFTMAX;
    if ((rc = arch_get_int(g, a, "expert_group_count", false, 0, 0, hp->n_expert, &hp->gating.n_group, err))) return rc;
    if ((rc = arch_get_int(g, a, "expert_group_used_count", false, 0, 0, hp->gating.n_group, &hp->gating.n_group_used,
                           err)))
        return rc;
    if (hp->gating.n_group > 1 &&
        (hp->n_expert % hp->gating.n_group || hp->gating.n_group_used == 0 ||
         hp->gating.n_group_used * (hp->n_expert / hp->gating.n_group) < hp->n_expert_used))
        return err_set(err, ERR_BAD_VALUE, "%s: %d experts in %d groups of which %d are eligible cannot give %d a token", a,
                       hp->n_expert, hp->gating.n_group, hp->gating.n_group_used, hp->n_expert_used);
    if (hp->head_dim <= hp->n_rot)
        return err_set(err, ERR_BAD_VALUE, "%s.attention.key_length %d must exceed rope.dimension_count %d", a,
                       hp->head_dim, hp->n_rot);
    if (hp->rope_yarn) { /* DeepSeek's YaRN: the magnitude goes into the attention scale, not into cos/sin */
        float log_mul;
        if ((rc = arch_get_float(g, a, "rope.scaling.yarn_log_multiplier", 0.0f, &log_mul, err))) return rc;
        const float mscale = 1.0f + log_mul * logf(1.0f / hp->rope_freq_scale);
        hp->attn_scale = mscale * mscale / sqrtf((float)hp->head_dim);
        hp->rope_attn_factor = 1.0f;
    }
    /* the latent row is one "head" of the attention kernel */
    if (hp->kv_lora_rank + hp->n_rot > ATTN_MAX_HEAD_DIM)
        return err_set(err, ERR_UNSUPPORTED, "%s: kv_lora_rank %d + %d RoPE dims exceed the %d the attention kernel takes",
                       a, hp->kv_lora_rank, hp->n_rot, ATTN_MAX_HEAD_DIM);
    if (hp->gating.n_group > 256)
        return err_set(err, ERR_UNSUPPORTED, "%s: %d expert groups (256 at most)", a, hp->gating.n_group);
    return ERR_OK;
}

typedef struct {
    const char *name;
    model_arch arch;
    bool neox;
    arch_reader read;
} arch_row;

static const arch_row ARCHS[] = {
    {"llama", ARCH_LLAMA, false, read_none},
    {"qwen2", ARCH_QWEN2, true, read_none},
    {"qwen2moe", ARCH_QWEN2MOE, true, read_qwen2moe},
    {"olmoe", ARCH_OLMOE, true, read_olmoe},
    {"granitemoe", ARCH_GRANITEMOE, false, read_granite},
    {"phi3", ARCH_PHI3, true, read_phi3},
    {"gemma2", ARCH_GEMMA2, true, read_gemma2},
    {"deepseek2", ARCH_DEEPSEEK2, false, read_deepseek2},
};
#define N_ARCHS (int)(sizeof ARCHS / sizeof *ARCHS)

/* "llama, qwen2, ...": the names of ARCHS' rows, in order, into buf. */
static const char *arch_supported_list(char *buf, size_t n) {
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < N_ARCHS && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%s", i ? ", " : "", ARCHS[i].name);
    return buf;
}

/* ---------------------------------------------------------------- common */

/* YaRN (ggml's rope_yarn): each rotated pair i blends the interpolated angle
 * (positions divided by the factor) with the original one, fully original
 * below yarn_corr[0], fully interpolated above yarn_corr[1] (the dims whose
 * wavelength fits beta_fast = 32 / beta_slow = 1 times in the original
 * context), and cos/sin grow by 1 + 0.1 ln(factor). */
static err_code read_yarn(const gguf_ctx *g, model_hparams *hp, float factor, err_t *err) {
    err_code rc = arch_get_int(g, hp->arch_name, "rope.scaling.original_context_length", false, hp->n_ctx_train, 1, BIG,
                               &hp->rope_ctx_orig, err);
    if (rc) return rc;
    if (factor <= 0.0f) return err_set(err, ERR_MISSING_KEY, "metadata key '%s.rope.scaling.factor' is missing", hp->arch_name);
    if (!isfinite(1.0f / factor) || !isfinite(logf(factor)))
        return err_set(err, ERR_BAD_VALUE, "%s.rope.scaling.factor %g is out of range", hp->arch_name, (double)factor);
    hp->rope_yarn = true;
    hp->rope_freq_scale = 1.0f / factor;
    hp->rope_attn_factor = 1.0f + 0.1f * logf(factor);
    const float beta[2] = {32.0f, 1.0f};
    for (int k = 0; k < 2; k++) {
        const float d = (float)hp->n_rot * logf((float)hp->rope_ctx_orig / (beta[k] * 2.0f * (float)M_PI)) /
                        (2.0f * logf(hp->rope_freq_base));
        hp->yarn_corr[k] = k == 0 ? fmaxf(0.0f, floorf(d)) : fminf((float)(hp->n_rot - 1), ceilf(d));
    }
    return ERR_OK;
}

/* RoPE scaling: "linear" divides positions by the factor; "yarn" as above.
 * Others are refused rather than silently computed wrong. */
static err_code read_rope_scaling(const gguf_ctx *g, model_hparams *hp, err_t *err) {
    const char *a = hp->arch_name;
    float factor = 0.0f;
    char key[128];
    gguf_str st;
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    bool has_type = gguf_get_str(g, key, &st);
    err_code rc = arch_get_float(g, a, "rope.scaling.factor", 0.0f, &factor, err);
    if (rc) return rc;
    if (factor == 0.0f && (rc = arch_get_float(g, a, "rope.scale_linear", 0.0f, &factor, err))) return rc;
    hp->rope_freq_scale = 1.0f;
    if (has_type && gguf_str_eq(st, "yarn")) return read_yarn(g, hp, factor, err);
    if (has_type && !gguf_str_eq(st, "none") && !gguf_str_eq(st, "linear"))
        return err_set(err, ERR_UNSUPPORTED, "RoPE scaling type '%.*s' is not supported (none, linear, yarn)",
                       (int)(st.len > 32 ? 32 : st.len), st.ptr);
    if (factor > 0.0f && !(has_type && gguf_str_eq(st, "none"))) hp->rope_freq_scale = 1.0f / factor;
    if (!isfinite(hp->rope_freq_scale))
        return err_set(err, ERR_BAD_VALUE, "%s.rope scaling factor %g is too small", a, (double)factor);
    return ERR_OK;
}

static err_code read_common(const gguf_ctx *g, model_hparams *hp, err_t *err) {
    const char *a = hp->arch_name;
    err_code rc;
    if ((rc = arch_get_int(g, a, "context_length", true, 0, 1, BIG, &hp->n_ctx_train, err))) return rc;
    if ((rc = arch_get_int(g, a, "embedding_length", true, 0, 1, BIG, &hp->n_embd, err))) return rc;
    if ((rc = arch_get_int(g, a, "block_count", true, 0, 1, 4096, &hp->n_layer, err))) return rc;
    if ((rc = arch_get_int(g, a, "feed_forward_length", true, 0, 1, BIG, &hp->n_ff, err))) return rc;
    if ((rc = arch_get_int(g, a, "attention.head_count", true, 0, 1, 4096, &hp->n_head, err))) return rc;
    if ((rc = arch_get_int(g, a, "attention.head_count_kv", false, hp->n_head, 1, hp->n_head, &hp->n_head_kv, err)))
        return rc;
    if (hp->n_head % hp->n_head_kv)
        return err_set(err, ERR_BAD_VALUE, "head_count %d is not a multiple of head_count_kv %d", hp->n_head,
                       hp->n_head_kv);
    int def_hd = hp->n_embd / hp->n_head;
    if ((rc = arch_get_int(g, a, "attention.key_length", false, def_hd, 1, BIG, &hp->head_dim, err))) return rc;
    if ((rc = arch_get_int(g, a, "attention.value_length", false, hp->head_dim, 1, BIG, &hp->head_dim_v, err)))
        return rc;
    if ((rc = arch_get_int(g, a, "rope.dimension_count", false, hp->head_dim, 0, hp->head_dim, &hp->n_rot, err)))
        return rc;
    if (hp->n_rot % 2) return err_set(err, ERR_BAD_VALUE, "rope.dimension_count %d is odd", hp->n_rot);
    if ((rc = arch_get_int(g, a, "expert_count", false, 0, 0, 4096, &hp->n_expert, err))) return rc;
    if ((rc = arch_get_int(g, a, "expert_used_count", false, 0, 0, hp->n_expert, &hp->n_expert_used, err))) return rc;
    if (hp->n_expert > 0 && hp->n_expert_used == 0)
        return err_set(err, ERR_BAD_VALUE, "%s.expert_count is %d but expert_used_count is 0", a, hp->n_expert);
    if ((rc = arch_get_int(g, a, "expert_shared_feed_forward_length", false, 0, 0, BIG, &hp->n_ff_shexp, err)))
        return rc;
    if (hp->n_ff_shexp > 0 && hp->n_expert == 0)
        return err_set(err, ERR_BAD_VALUE, "%s.expert_shared_feed_forward_length is %d in a model without experts", a,
                       hp->n_ff_shexp);
    if ((rc = arch_get_float(g, a, "rope.freq_base", 10000.0f, &hp->rope_freq_base, err))) return rc;
    if ((rc = arch_get_float(g, a, "attention.layer_norm_rms_epsilon", 1e-5f, &hp->rms_eps, err))) return rc;
    if (hp->rope_freq_base <= 0.0f) return err_set(err, ERR_BAD_VALUE, "%s.rope.freq_base must be positive", a);
    return read_rope_scaling(g, hp, err);
}

err_code arch_read_hparams(const gguf_ctx *g, model_hparams *hp, err_t *err) {
    gguf_str name;
    memset(hp, 0, sizeof *hp);
    if (!gguf_get_str(g, "general.architecture", &name))
        return err_set(err, ERR_MISSING_KEY, "metadata key 'general.architecture' is missing");
    const arch_row *row = NULL;
    for (int i = 0; i < N_ARCHS && !row; i++)
        if (gguf_str_eq(name, ARCHS[i].name)) row = &ARCHS[i];
    char names[256];
    if (!row)
        return err_set(err, ERR_UNSUPPORTED_ARCH, "architecture '%.*s' is not supported (supported: %s)",
                       (int)(name.len > 64 ? 64 : name.len), name.ptr, arch_supported_list(names, sizeof names));
    hp->arch = row->arch;
    hp->rope_neox = row->neox;
    snprintf(hp->arch_name, sizeof hp->arch_name, "%s", row->name);
    hp->rope_attn_factor = 1.0f;
    err_code rc = read_common(g, hp, err);
    if (rc) return rc;
    hp->gating = (moe_gating){.func = GATE_SOFTMAX, .norm = true, .scale = 1.0f};
    hp->act = ACT_SILU;
    hp->embd_scale = hp->residual_scale = hp->logit_scale = 1.0f;
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    hp->swa_period = 1;
    hp->n_ff_dense = hp->n_ff;
    if ((rc = row->read(g, hp, err))) return rc;
    const model_kv_row r = model_kv_row_of(hp);
    if (r.head_dim > ATTN_MAX_HEAD_DIM || r.head_dim_v > ATTN_MAX_HEAD_DIM)
        return err_set(err, ERR_UNSUPPORTED, "%s: attention heads of %d/%d values (the kernel takes %d at most)",
                       hp->arch_name, r.head_dim, r.head_dim_v, ATTN_MAX_HEAD_DIM);
    return ERR_OK;
}

model_kv_row model_kv_row_of(const model_hparams *hp) {
    if (hp->kv_lora_rank > 0) return (model_kv_row){1, hp->kv_lora_rank + hp->n_rot, hp->kv_lora_rank, true};
    return (model_kv_row){hp->n_head_kv, hp->head_dim, hp->head_dim_v, false};
}

bool model_layer_swa(const model_hparams *hp, int il) {
    return hp->swa_window > 0 && il % (hp->swa_period > 0 ? hp->swa_period : 1) == 0;
}

bool model_layer_moe(const model_hparams *hp, int il) { return hp->n_expert > 0 && il >= hp->n_layer_dense_lead; }

int model_moe_layers(const model_hparams *hp) { return hp->n_expert > 0 ? hp->n_layer - hp->n_layer_dense_lead : 0; }

/* ---------------------------------------------------------------- description */

/* Append "; " and a formatted phrase to buf (n bytes, *used of them taken). */
static void add(char *buf, size_t n, size_t *used, const char *fmt, ...) {
    if (*used + 3 >= n) return;
    if (*used) *used += (size_t)snprintf(buf + *used, n - *used, "; ");
    va_list ap;
    va_start(ap, fmt);
    const int w = vsnprintf(buf + *used, n - *used, fmt, ap);
    va_end(ap);
    if (w > 0) *used = *used + (size_t)w < n ? *used + (size_t)w : n - 1;
}

static void moe_features(const model_hparams *hp, char *buf, size_t n, size_t *u) {
    const moe_gating *g = &hp->gating;
    add(buf, n, u, "gating: %s, top-%d weights %s", g->func == GATE_SIGMOID ? "sigmoid" : "softmax", hp->n_expert_used,
        g->norm ? "renormalised" : "not renormalised");
    if (g->scale != 1.0f) add(buf, n, u, "expert weights x%g", (double)g->scale);
    if (g->n_group > 1) add(buf, n, u, "%d expert groups, the best %d eligible", g->n_group, g->n_group_used);
    if (hp->n_layer_dense_lead) add(buf, n, u, "%d leading dense layers (FFN %d)", hp->n_layer_dense_lead, hp->n_ff_dense);
    if (hp->n_ff_shexp) add(buf, n, u, "shared expert %d wide%s", hp->n_ff_shexp, hp->shexp_gated ? ", sigmoid-gated" : "");
}

void model_features(const model_hparams *hp, char *buf, size_t n) {
    size_t u = 0;
    if (!n) return;
    buf[0] = '\0';
    if (hp->n_expert > 0) moe_features(hp, buf, n, &u);
    if (hp->kv_lora_rank)
        add(buf, n, &u, "latent attention: q rank %d, kv rank %d, %d RoPE dims (cached: %d values a token and layer)",
            hp->q_lora_rank, hp->kv_lora_rank, hp->n_rot, hp->kv_lora_rank + hp->n_rot);
    if (hp->qk_norm) add(buf, n, &u, "q/k RMS norms");
    if (hp->fused_qkv) add(buf, n, &u, "fused q/k/v and gate/up tensors");
    if (hp->post_norms) add(buf, n, &u, "post-attention and post-FFN norms");
    if (hp->act == ACT_GELU) add(buf, n, &u, "GeGLU");
    if (hp->embd_scale != 1.0f) add(buf, n, &u, "embedding x%g", (double)hp->embd_scale);
    if (hp->residual_scale != 1.0f) add(buf, n, &u, "residual x%g", (double)hp->residual_scale);
    if (fabsf(hp->attn_scale * sqrtf((float)hp->head_dim) - 1.0f) > 1e-6f)
        add(buf, n, &u, "attention scale %g", (double)hp->attn_scale);
    if (hp->logit_scale != 1.0f) add(buf, n, &u, "logits x%g", (double)hp->logit_scale);
    if (hp->attn_softcap > 0.0f) add(buf, n, &u, "attention soft-cap %g", (double)hp->attn_softcap);
    if (hp->final_softcap > 0.0f) add(buf, n, &u, "final soft-cap %g", (double)hp->final_softcap);
    if (hp->swa_window > 0 && hp->swa_period > 1)
        add(buf, n, &u, "sliding window of %d on every %d layers from layer 0 (they cache %d tokens at most)",
            hp->swa_window, hp->swa_period, hp->swa_window + 64);
    else if (hp->swa_window > 0)
        add(buf, n, &u, "sliding window of %d on every layer (they cache %d tokens at most)", hp->swa_window,
            hp->swa_window + 64);
    if (!u) snprintf(buf, n, "none beyond llama's");
}
