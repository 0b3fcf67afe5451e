/*
 * synth — synthetic models of any shape, tensor type and supported architecture.
 *
 * Every test makes the model it needs: dense or Mixtral-style MoE, any
 * architecture octo runs (model/arch.c), any mix of tensor types, with seeded random weights (each tensor
 * from its own stream keyed by seed and name, so the same options give a
 * byte-identical file) and a small byte-level SentencePiece vocabulary
 * (<unk>, <s>, </s>, the 256 byte tokens, then ordinary pieces). Tensors are
 * generated and quantized one row at a time while the file is written, so a
 * multi-gigabyte model needs little memory.
 */
#ifndef OCTO_MODEL_SYNTH_H
#define OCTO_MODEL_SYNTH_H

#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"

#define SYNTH_SAME_TYPE 0xFFFFFFFFu

typedef struct {
    const char *arch;     /* "llama" (default), or any of synth_arch_list(): each with its own
                             tensors and keys (MoE architectures need experts; deepseek2's
                             first layer is dense, its ranks follow n_embd) */
    int n_vocab;          /* >= 259 */
    int n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx;
    int head_dim;         /* 0 = n_embd / n_head */
    int n_expert, n_expert_used; /* 0 = dense */
    uint32_t type;        /* type of the weight matrices */
    uint32_t embd_type;   /* token_embd type, SYNTH_SAME_TYPE = type */
    uint32_t output_type; /* output.weight type, SYNTH_SAME_TYPE = type */
    bool tied_output;     /* no output.weight: logits use token_embd */
    float weight_std;     /* matrices ~ N(0, std^2) */
    float rope_freq_base;
    float rope_scale_linear; /* 0 = none */
    float rope_yarn;         /* 0 = none; else YaRN with this factor over an original context of n_ctx / 4
                                (deepseek2: with yarn_log_multiplier 0.0707, as DeepSeek-V2-Lite) */
    float rms_eps;
    uint64_t seed;
    uint32_t gguf_version;   /* 2 or 3 */
    int piece_bytes;         /* > 0: ordinary vocabulary pieces padded to this many bytes (long pieces) */
    int swa_window;          /* gemma2 (0: 4096): the sliding window; phi3 writes it (0), unapplied as in llama.cpp */
    bool longrope;           /* phi3: LongRoPE factors (rope_factors_long/short), original context n_ctx / 2,
                                magnitude factor 1.19 */
} synth_opts;

/* A small dense llama: 2 layers, 64 wide, 4/2 heads, FFN 96, vocab 300, F32. */
synth_opts synth_defaults(void);

err_code synth_write(const synth_opts *o, const char *path, err_t *err);

#endif
