/*
 * synth — see synth.h.
 *
 * The random numbers come from splitmix64 seeded by a hash of (seed, tensor
 * name), turned into normals by Box–Muller, so adding a tensor never changes
 * the values of another. Norm weights are 1 + N(0, 0.1^2) rather than exactly
 * 1 so that a forward pass that forgets to apply them is caught.
 */
#include "synth.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/gguf.h"
#include "core/quant.h"

synth_opts synth_defaults(void) {
    return (synth_opts){
        .arch = "llama", .n_vocab = 300, .n_embd = 64, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .n_ff = 96,
        .n_ctx = 256, .type = QT_F32, .embd_type = SYNTH_SAME_TYPE, .output_type = SYNTH_SAME_TYPE,
        .weight_std = 0.05f, .rope_freq_base = 10000.0f, .rms_eps = 1e-5f, .seed = 1, .gguf_version = 3,
    };
}

typedef enum { KIND_MATRIX, KIND_NORM, KIND_BIAS } tensor_kind;

typedef struct {
    char name[64];
    uint32_t type;
    uint32_t n_dims;
    int64_t ne[3];
    tensor_kind kind;
} tspec;

typedef struct {
    const synth_opts *o;
    tspec *t;
    int n;
} synth_ctx;

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double uniform01(uint64_t *s) { return ((splitmix64(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

static double normal(uint64_t *s) {
    double u1 = uniform01(s), u2 = uniform01(s);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static uint64_t name_seed(uint64_t seed, const char *name) {
    uint64_t h = 1469598103934665603ull ^ seed;
    for (const char *p = name; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
    return h;
}

static err_code fill_tensor(void *user, uint64_t index, void *buf, uint64_t n_bytes, err_t *err) {
    synth_ctx *c = user;
    const tspec *t = &c->t[index];
    uint64_t s = name_seed(c->o->seed, t->name);
    int64_t n_in = t->ne[0], n_rows = t->ne[1] * t->ne[2];
    size_t rb = quant_row_bytes(t->type, n_in);
    float *row = malloc(sizeof(float) * (size_t)n_in);
    if (!row) return err_set(err, ERR_NOMEM, "out of memory");
    for (int64_t r = 0; r < n_rows; r++) {
        for (int64_t i = 0; i < n_in; i++) {
            double g = normal(&s);
            row[i] = (float)(t->kind == KIND_NORM ? 1.0 + 0.1 * g : c->o->weight_std * g);
        }
        quant_quantize_row(t->type, row, (uint8_t *)buf + (size_t)r * rb, n_in);
    }
    free(row);
    (void)n_bytes;
    return ERR_OK;
}

static err_code add(synth_ctx *c, tspec *spec, const char *name, uint32_t type, tensor_kind kind, int64_t ne0,
                    int64_t ne1, int64_t ne2, err_t *err) {
    const quant_traits *tr = quant_traits_of(type);
    if (!tr || !quant_type_supported(type)) return err_set(err, ERR_INVALID_ARG, "synth: unsupported type %u", type);
    if (ne0 % tr->block_size)
        return err_set(err, ERR_INVALID_ARG, "synth: %s rows of %lld values are not a multiple of %s's block of %d",
                       name, (long long)ne0, tr->name, tr->block_size);
    tspec *t = &spec[c->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = type;
    t->kind = kind;
    t->ne[0] = ne0;
    t->ne[1] = ne1 ? ne1 : 1;
    t->ne[2] = ne2 ? ne2 : 1;
    t->n_dims = ne2 ? 3 : ne1 ? 2 : 1;
    return ERR_OK;
}

static err_code add_vocab(gguf_writer *w, int n_vocab, int piece_bytes, err_t *err) {
    char **tok = calloc((size_t)n_vocab, sizeof *tok);
    float *score = malloc(sizeof(float) * (size_t)n_vocab);
    int32_t *type = malloc(sizeof(int32_t) * (size_t)n_vocab);
    err_code rc = ERR_OK;
    if (!tok || !score || !type) rc = err_set(err, ERR_NOMEM, "out of memory");
    static const char letters[] = "etaoinshrdlucmfwypvbgkjqxz";
    for (int i = 0; !rc && i < n_vocab; i++) {
        char buf[32];
        int ty = 1; /* normal */
        if (i == 0) { snprintf(buf, sizeof buf, "<unk>"); ty = 2; }
        else if (i == 1) { snprintf(buf, sizeof buf, "<s>"); ty = 3; }
        else if (i == 2) { snprintf(buf, sizeof buf, "</s>"); ty = 3; }
        else if (i < 259) { snprintf(buf, sizeof buf, "<0x%02X>", i - 3); ty = 6; }
        else {
            /* ordinary pieces: "▁e", "▁t", ..., then "▁ee", "▁et", ... */
            int j = i - 259, n1 = 26;
            if (j < n1) snprintf(buf, sizeof buf, "\xe2\x96\x81%c", letters[j]);
            else if (j < n1 + n1 * n1) snprintf(buf, sizeof buf, "\xe2\x96\x81%c%c", letters[(j - n1) / n1], letters[(j - n1) % n1]);
            else snprintf(buf, sizeof buf, "<extra_%d>", j);
        }
        const size_t len = strlen(buf), pad = ty == 1 && (int)len < piece_bytes ? (size_t)piece_bytes - len : 0;
        if (!(tok[i] = malloc(len + pad + 1))) rc = err_set(err, ERR_NOMEM, "out of memory");
        else { /* long pieces: the last letter repeated */
            memcpy(tok[i], buf, len);
            memset(tok[i] + len, buf[len - 1], pad);
            tok[i][len + pad] = '\0';
        }
        score[i] = ty == 1 ? -(float)(i - 259) : 0.0f;
        type[i] = ty;
    }
    if (!rc && (gguf_writer_set_str(w, "tokenizer.ggml.model", "llama") ||
                gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tok, (uint64_t)n_vocab) ||
                gguf_writer_set_arr_f32(w, "tokenizer.ggml.scores", score, (uint64_t)n_vocab) ||
                gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", type, (uint64_t)n_vocab) ||
                gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0) ||
                gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1) ||
                gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2) ||
                gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true) ||
                gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", false)))
        rc = err_set(err, ERR_NOMEM, "out of memory");
    for (int i = 0; tok && i < n_vocab; i++) free(tok[i]);
    free(tok);
    free(score);
    free(type);
    return rc;
}

/* What each architecture's file holds beyond a plain llama (model/arch.c reads it). */
typedef struct {
    const char *name;
    bool biases;      /* q/k/v biases (qwen2, qwen2moe) */
    bool qk_norm;     /* attn_q_norm / attn_k_norm over the whole row (olmoe) */
    bool fused;       /* attn_qkv and a double-width ffn_up (phi3) */
    bool gemma;       /* post-norms, soft-caps, a sliding window, tied output, GeGLU (gemma2) */
    bool granite;     /* the four multipliers (granitemoe) */
    bool shexp_gated; /* a shared expert behind a sigmoid gate (qwen2moe) */
    bool mla;         /* latent attention, a leading dense layer, shared experts (deepseek2) */
    bool moe;         /* experts required */
} synth_arch;

static const synth_arch ARCHS[] = {
    {"llama", 0, 0, 0, 0, 0, 0, 0, 0},     {"qwen2", 1, 0, 0, 0, 0, 0, 0, 0},
    {"qwen2moe", 1, 0, 0, 0, 0, 1, 0, 1},  {"olmoe", 0, 1, 0, 0, 0, 0, 0, 1},
    {"granitemoe", 0, 0, 0, 0, 1, 0, 0, 1}, {"phi3", 0, 0, 1, 0, 0, 0, 0, 0},
    {"gemma2", 0, 0, 0, 1, 0, 0, 0, 0},    {"deepseek2", 0, 0, 0, 0, 0, 0, 1, 1},
};

static const char *synth_arch_list(void) { return "llama, qwen2, qwen2moe, olmoe, granitemoe, phi3, gemma2, deepseek2"; }

/* deepseek2's latent attention, derived from the shape: each head's key is
 * [hd values without RoPE | 32 with], its value hd; the latent kv_lora_rank
 * is n_embd / 4 rounded up to 32, so the cached row (latent + 32) fills whole
 * blocks of 32 and the quantized KV tiers apply; q_lora_rank is n_embd / 2. */
#define MLA_ROPE 32
#define MLA_KV_RANK(E) (((E) / 4 + 31) / 32 * 32)

static void write_keys(gguf_writer *w, const synth_opts *o, const synth_arch *ar, int hd) {
    char key[96];
    const char *arch = ar->name;
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", arch, suffix), key)
    gguf_writer_set_version(w, o->gguf_version ? o->gguf_version : 3);
    gguf_writer_set_str(w, "general.architecture", arch);
    gguf_writer_set_str(w, "general.name", "octo synthetic");
    gguf_writer_set_u32(w, "general.file_type", o->type);
    gguf_writer_set_u32(w, KEY("context_length"), (uint32_t)o->n_ctx);
    gguf_writer_set_u32(w, KEY("embedding_length"), (uint32_t)o->n_embd);
    gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)o->n_layer);
    gguf_writer_set_u32(w, KEY("feed_forward_length"), (uint32_t)(ar->mla ? 2 * o->n_ff : o->n_ff));
    gguf_writer_set_u32(w, KEY("attention.head_count"), (uint32_t)o->n_head);
    gguf_writer_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)(ar->mla ? o->n_head : o->n_head_kv));
    gguf_writer_set_u32(w, KEY("rope.dimension_count"), (uint32_t)(ar->mla ? MLA_ROPE : hd));
    if (hd != o->n_embd / o->n_head || ar->mla) {
        gguf_writer_set_u32(w, KEY("attention.key_length"), (uint32_t)(ar->mla ? hd + MLA_ROPE : hd));
        gguf_writer_set_u32(w, KEY("attention.value_length"), (uint32_t)hd);
    }
    gguf_writer_set_f32(w, KEY("rope.freq_base"), o->rope_freq_base);
    gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), o->rms_eps);
    if (o->rope_scale_linear > 0.0f) {
        gguf_writer_set_str(w, KEY("rope.scaling.type"), "linear");
        gguf_writer_set_f32(w, KEY("rope.scaling.factor"), o->rope_scale_linear);
    }
    if (o->rope_yarn > 0.0f) {
        gguf_writer_set_str(w, KEY("rope.scaling.type"), "yarn");
        gguf_writer_set_f32(w, KEY("rope.scaling.factor"), o->rope_yarn);
        gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), (uint32_t)(o->n_ctx / 4));
        if (ar->mla) gguf_writer_set_f32(w, KEY("rope.scaling.yarn_log_multiplier"), 0.0707f);
    }
    if (o->n_expert > 0) {
        gguf_writer_set_u32(w, KEY("expert_count"), (uint32_t)o->n_expert);
        gguf_writer_set_u32(w, KEY("expert_used_count"), (uint32_t)o->n_expert_used);
    }
    if (ar->shexp_gated) {
        gguf_writer_set_u32(w, KEY("expert_feed_forward_length"), (uint32_t)o->n_ff);
        gguf_writer_set_u32(w, KEY("expert_shared_feed_forward_length"), (uint32_t)(2 * o->n_ff));
    }
    if (ar->granite) { /* granite-3.1-1b-a400m's multipliers */
        gguf_writer_set_f32(w, KEY("embedding_scale"), 12.0f);
        gguf_writer_set_f32(w, KEY("residual_scale"), 0.22f);
        gguf_writer_set_f32(w, KEY("attention.scale"), 0.015625f);
        gguf_writer_set_f32(w, KEY("logit_scale"), 6.0f);
    }
    if (ar->fused) gguf_writer_set_u32(w, KEY("attention.sliding_window"), (uint32_t)o->swa_window);
    if (ar->fused && o->longrope) {
        gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), (uint32_t)(o->n_ctx / 2));
        gguf_writer_set_f32(w, KEY("rope.scaling.attn_factor"), 1.19f);
    }
    if (ar->gemma) {
        gguf_writer_set_u32(w, KEY("attention.sliding_window"), (uint32_t)(o->swa_window ? o->swa_window : 4096));
        gguf_writer_set_f32(w, KEY("attn_logit_softcapping"), 50.0f);
        gguf_writer_set_f32(w, KEY("final_logit_softcapping"), 30.0f);
    }
    if (ar->mla) {
        gguf_writer_set_u32(w, KEY("attention.q_lora_rank"), (uint32_t)o->n_embd / 2);
        gguf_writer_set_u32(w, KEY("attention.kv_lora_rank"), (uint32_t)MLA_KV_RANK(o->n_embd));
        gguf_writer_set_u32(w, KEY("leading_dense_block_count"), 1);
        gguf_writer_set_u32(w, KEY("expert_feed_forward_length"), (uint32_t)o->n_ff);
        gguf_writer_set_u32(w, KEY("expert_shared_count"), 1);
        gguf_writer_set_f32(w, KEY("expert_weights_scale"), 2.5f);
        gguf_writer_set_bool(w, KEY("expert_weights_norm"), false);
        gguf_writer_set_u32(w, KEY("expert_gating_func"), 1);
    }
    gguf_writer_set_u32(w, KEY("vocab_size"), (uint32_t)o->n_vocab);
#undef KEY
}

/* The tensors of layer l. */
static err_code add_layer(synth_ctx *c, const synth_arch *ar, int l, int hd, err_t *err) {
    const synth_opts *o = c->o;
    const int64_t E = o->n_embd, Q = (int64_t)o->n_head * hd, K = (int64_t)o->n_head_kv * hd;
    char name[64];
    err_code rc = ERR_OK;
#define ADD(suffix, type, kind, a, b, d)                                              \
    if (!rc) {                                                                      \
        snprintf(name, sizeof name, "blk.%d.%s", l, suffix);                        \
        rc = add(c, c->t, name, type, kind, a, b, d, err);                          \
    }
    ADD("attn_norm.weight", QT_F32, KIND_NORM, E, 0, 0);
    if (ar->mla) {
        const int64_t qr = E / 2, kvr = MLA_KV_RANK(E);
        ADD("attn_q_a.weight", o->type, KIND_MATRIX, E, qr, 0);
        ADD("attn_q_a_norm.weight", QT_F32, KIND_NORM, qr, 0, 0);
        ADD("attn_q_b.weight", o->type, KIND_MATRIX, qr, (int64_t)o->n_head * (hd + MLA_ROPE), 0);
        ADD("attn_kv_a_mqa.weight", o->type, KIND_MATRIX, E, kvr + MLA_ROPE, 0);
        ADD("attn_kv_a_norm.weight", QT_F32, KIND_NORM, kvr, 0, 0);
        ADD("attn_kv_b.weight", o->type, KIND_MATRIX, kvr, (int64_t)o->n_head * 2 * hd, 0);
        ADD("attn_output.weight", o->type, KIND_MATRIX, (int64_t)o->n_head * hd, E, 0);
    } else if (ar->fused) {
        ADD("attn_qkv.weight", o->type, KIND_MATRIX, E, Q + 2 * K, 0);
        ADD("attn_output.weight", o->type, KIND_MATRIX, Q, E, 0);
    } else {
        ADD("attn_q.weight", o->type, KIND_MATRIX, E, Q, 0);
        ADD("attn_k.weight", o->type, KIND_MATRIX, E, K, 0);
        ADD("attn_v.weight", o->type, KIND_MATRIX, E, K, 0);
        ADD("attn_output.weight", o->type, KIND_MATRIX, Q, E, 0);
    }
    if (ar->biases) {
        ADD("attn_q.bias", QT_F32, KIND_BIAS, Q, 0, 0);
        ADD("attn_k.bias", QT_F32, KIND_BIAS, K, 0, 0);
        ADD("attn_v.bias", QT_F32, KIND_BIAS, K, 0, 0);
    }
    if (ar->qk_norm) {
        ADD("attn_q_norm.weight", QT_F32, KIND_NORM, Q, 0, 0);
        ADD("attn_k_norm.weight", QT_F32, KIND_NORM, K, 0, 0);
    }
    if (ar->gemma) ADD("post_attention_norm.weight", QT_F32, KIND_NORM, E, 0, 0);
    ADD("ffn_norm.weight", QT_F32, KIND_NORM, E, 0, 0);
    if (ar->gemma) ADD("post_ffw_norm.weight", QT_F32, KIND_NORM, E, 0, 0);
    const bool dense = o->n_expert == 0 || (ar->mla && l == 0);
    const int64_t ff = ar->mla && dense ? 2 * o->n_ff : o->n_ff;
    if (dense && ar->fused) {
        ADD("ffn_up.weight", o->type, KIND_MATRIX, E, 2 * ff, 0);
        ADD("ffn_down.weight", o->type, KIND_MATRIX, ff, E, 0);
    } else if (dense) {
        ADD("ffn_gate.weight", o->type, KIND_MATRIX, E, ff, 0);
        ADD("ffn_up.weight", o->type, KIND_MATRIX, E, ff, 0);
        ADD("ffn_down.weight", o->type, KIND_MATRIX, ff, E, 0);
    } else {
        ADD("ffn_gate_inp.weight", QT_F32, KIND_MATRIX, E, o->n_expert, 0);
        ADD("ffn_gate_exps.weight", o->type, KIND_MATRIX, E, o->n_ff, o->n_expert);
        ADD("ffn_up_exps.weight", o->type, KIND_MATRIX, E, o->n_ff, o->n_expert);
        ADD("ffn_down_exps.weight", o->type, KIND_MATRIX, o->n_ff, E, o->n_expert);
        const int64_t sh = ar->shexp_gated ? 2 * o->n_ff : ar->mla ? o->n_ff : 0;
        if (sh) {
            ADD("ffn_gate_shexp.weight", o->type, KIND_MATRIX, E, sh, 0);
            ADD("ffn_up_shexp.weight", o->type, KIND_MATRIX, E, sh, 0);
            ADD("ffn_down_shexp.weight", o->type, KIND_MATRIX, sh, E, 0);
        }
        if (ar->shexp_gated) ADD("ffn_gate_inp_shexp.weight", QT_F32, KIND_MATRIX, E, 0, 0);
    }
#undef ADD
    return rc;
}

static err_code check_opts(const synth_opts *o, const synth_arch *ar, int hd, err_t *err) {
    if (o->n_vocab < 259 || o->n_embd <= 0 || o->n_layer <= 0 || o->n_head <= 0 || o->n_head_kv <= 0 ||
        o->n_ff <= 0 || o->n_ctx <= 0 || o->n_head % o->n_head_kv || o->n_expert < 0 ||
        (o->n_expert > 0 && (o->n_expert_used <= 0 || o->n_expert_used > o->n_expert)))
        return err_set(err, ERR_INVALID_ARG, "synth: inconsistent shape (vocab >= 259, heads divisible by kv heads, ...)");
    if (hd <= 0 || hd % 2) return err_set(err, ERR_INVALID_ARG, "synth: head size %d must be even and positive", hd);
    if (ar->moe && o->n_expert == 0)
        return err_set(err, ERR_INVALID_ARG, "synth: %s is a mixture of experts: give --experts N --experts-used K", ar->name);
    if (ar->mla && (o->n_layer < 2 || o->n_embd % 64))
        return err_set(err, ERR_INVALID_ARG, "synth: deepseek2 needs 2 layers or more and n_embd a multiple of 64");
    return ERR_OK;
}

err_code synth_write(const synth_opts *o, const char *path, err_t *err) {
    const char *name = o->arch ? o->arch : "llama";
    const synth_arch *ar = NULL;
    for (size_t i = 0; i < sizeof ARCHS / sizeof *ARCHS && !ar; i++)
        if (!strcmp(name, ARCHS[i].name)) ar = &ARCHS[i];
    if (!ar) return err_set(err, ERR_INVALID_ARG, "synth: architecture '%s' (%s)", name, synth_arch_list());
    const int hd = o->head_dim ? o->head_dim : o->n_embd / o->n_head;
    err_code rc = check_opts(o, ar, hd, err);
    if (rc) return rc;
    const uint32_t et = o->embd_type == SYNTH_SAME_TYPE ? o->type : o->embd_type;
    const uint32_t ot = o->output_type == SYNTH_SAME_TYPE ? o->type : o->output_type;
    const int64_t E = o->n_embd;
    synth_ctx c = {o, calloc((size_t)(4 + o->n_layer * 24), sizeof(tspec)), 0};
    gguf_writer *w = gguf_writer_new();
    if (!c.t || !w) rc = err_set(err, ERR_NOMEM, "out of memory");
    if (!rc) {
        write_keys(w, o, ar, hd);
        rc = add_vocab(w, o->n_vocab, o->piece_bytes, err);
    }
    if (!rc) rc = add(&c, c.t, "token_embd.weight", et, KIND_MATRIX, E, o->n_vocab, 0, err);
    if (!rc) rc = add(&c, c.t, "output_norm.weight", QT_F32, KIND_NORM, E, 0, 0, err);
    if (!rc && !o->tied_output && !ar->gemma) rc = add(&c, c.t, "output.weight", ot, KIND_MATRIX, E, o->n_vocab, 0, err);
    if (!rc && ar->fused && o->longrope) { /* divisors near 1 (norm-like values: 1 + N(0, 0.1^2)) */
        rc = add(&c, c.t, "rope_factors_long.weight", QT_F32, KIND_NORM, hd / 2, 0, 0, err);
        if (!rc) rc = add(&c, c.t, "rope_factors_short.weight", QT_F32, KIND_NORM, hd / 2, 0, 0, err);
    }
    for (int l = 0; !rc && l < o->n_layer; l++) rc = add_layer(&c, ar, l, hd, err);
    for (int i = 0; !rc && i < c.n; i++)
        rc = gguf_writer_add_tensor(w, c.t[i].name, c.t[i].type, c.t[i].n_dims, c.t[i].ne, NULL, err);
    if (!rc) rc = gguf_writer_write(w, path, fill_tensor, &c, err);
    gguf_writer_free(w);
    free(c.t);
    return rc;
}
