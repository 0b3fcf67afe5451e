/*
 * upcycle — turn a dense llama / qwen2 model into a Mixture-of-Experts model
 * without training (docs/upcycling.md has the method and its measurements).
 *
 * Each layer's FFN neurons (rows of gate and up, columns of down) are split
 * into E equal groups, padded with zero neurons where E does not divide n_ff;
 * a router scores the groups from the FFN input, and each token runs the K
 * best. The output is an ordinary Mixtral-layout GGUF (ffn_gate_inp,
 * ffn_{gate,up,down}_exps), so other runtimes compute it the same way:
 *
 *   sum (default): the router is scaled so small (its logits spread by about
 *     1e-4) that every renormalised gate is 1/K to ~1e-4 while the top-K
 *     order is kept, and each expert's down projection is multiplied by K:
 *     the chosen experts' outputs are summed, unweighted;
 *   weighted: the fitted router as it is (softmax, top-K, renormalised
 *     gates), down projections multiplied by K as well, so that equal gates
 *     give the sum.
 *
 * With the uniform router (all scores 0) and K = E the model computes the
 * dense FFN exactly (to float rounding). A shared expert (n_shared) takes
 * the neurons active on the most calibration tokens out of the split; every
 * token runs it, ungated (CMoE's shared experts). Everything learnt from the
 * calibration text comes from two passes of the dense model over it: one
 * collects the neurons' activation patterns for the split, one accumulates
 * the router's least-squares problem; neither keeps the activations of the
 * whole text.
 */
#ifndef OCTO_CONVERT_UPCYCLE_H
#define OCTO_CONVERT_UPCYCLE_H

#include <stdint.h>

#include "core/err.h"

typedef enum { UPCYCLE_SPLIT_CLUSTER, UPCYCLE_SPLIT_RANDOM, UPCYCLE_SPLIT_CONTIGUOUS } upcycle_split;
typedef enum { UPCYCLE_ROUTER_FIT, UPCYCLE_ROUTER_UNIFORM } upcycle_router;
typedef enum { UPCYCLE_COMBINE_SUM, UPCYCLE_COMBINE_WEIGHTED } upcycle_combine;

const char *upcycle_split_name(upcycle_split s);
const char *upcycle_router_name(upcycle_router r);
const char *upcycle_combine_name(upcycle_combine c);
/* -1 when the name is none of them */
int upcycle_split_from_name(const char *name);
int upcycle_router_from_name(const char *name);
int upcycle_combine_from_name(const char *name);

typedef struct {
    const char *input;       /* dense GGUF */
    const char *output;      /* the MoE GGUF to write (whole or not at all) */
    int n_expert, n_expert_used;
    const char *text;        /* calibration + held-out text (bytes, not NUL-terminated); NULL: none */
    size_t text_len;
    int calib_tokens;        /* at most this many calibration tokens (0: default 16384) */
    int heldout_tokens;      /* the text's last tokens, kept out of calibration (0: default 4096) */
    int n_shared;            /* neurons of an always-on shared expert, the most often active (0: none) */
    upcycle_split split;
    upcycle_router router;
    upcycle_combine combine;
    uint64_t seed;
    int n_threads;           /* 0: default */
    /* progress: a line of what is being done (no newline); NULL for none */
    void (*progress)(void *ctx, const char *what, int done, int total);
    void *progress_ctx;
} upcycle_opts;

upcycle_opts upcycle_defaults(void);

#define UPCYCLE_MAX_LAYERS 256

/* What the upcycled model measured on the held-out text (all 0 when there
 * was none), and how its routers behave there, per layer. */
typedef struct {
    int n_layer, n_ff, n_ff_expert, n_shared, n_pad; /* n_pad: zero neurons per layer */
    int calib_tokens, heldout_tokens;
    uint32_t gate_type, down_type_in, down_type_out; /* out != in: rows of m too short for the type */
    int n_retyped;              /* layers whose expert down rows take another type than the dense */
    double dense_nll, moe_nll;  /* nats per token */
    double kld_mean, top1;      /* KL(dense || moe) per token; greedy agreement */
    double tie_flips;           /* routed tokens whose experts a softmax near-tie changed (fraction) */
    struct {
        double load_max;        /* busiest expert's share of routed slots, x E (1 = balanced) */
        double load_cv;         /* coefficient of variation of the experts' loads */
        double repeat;          /* of a token's experts, the share the previous token also used */
        double recall_ffn;      /* of layer l's experts, the share l's router picks from l-1's FFN input */
        double recall_resid;    /* ... from l-1's output residual (after l's FFN norm) */
    } layer[UPCYCLE_MAX_LAYERS];
} upcycle_report;

/* Build, write and measure. ERR_INVALID_ARG for bad options (K > E, E > n_ff,
 * an MoE or unsupported model, a missing or too short text where one is
 * needed), with a message naming the cause. */
err_code upcycle_run(const upcycle_opts *o, upcycle_report *rep, err_t *err);

/* The held-out measurement alone, of an MoE already written (upcycled, or healed by training) against
 * o->input on o->text: the same held-out tokens, chunks and KL as upcycle_run's. rep's quality and
 * per-layer routing fields are set. ERR_INVALID_ARG when moe_path is not an MoE of the dense model's
 * vocabulary and depth, or the text too short to hold out any tokens. */
err_code upcycle_measure_file(const upcycle_opts *o, const char *moe_path, upcycle_report *rep, err_t *err);

#endif
