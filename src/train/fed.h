/*
 * fed — federated learning's files: a device's update and the global adapter
 * (docs/federated.md; train/fedavg.h averages updates).
 *
 * Every device of a federation trains the same adapter of the same base: the
 * one lora_create makes from the layout (rank, alpha, targets, seed), its A
 * matrices frozen (finetune_opts' freeze_a). A device's change is then a
 * change of B alone, and the average of the devices' products B_i·A is the
 * product of their averaged B: averaging B averages the adapters exactly.
 *
 * An update is a GGUF of general.type "fl_update" holding, per group (a
 * matrix, or one expert of a stack), the change of its B: "<base
 * tensor>.lora_b", or "<base tensor>.lora_b.<expert>", F32 of shape [rank,
 * rows], and the tokens behind it in fl.weights (u64, one per tensor in
 * order: the positions trained on; an expert's, those routed to it). A group
 * no token reached is absent. Keys beside: fl.round, fl.base_hash (every
 * tensor of the base), fl.a_hash (the shared A's values), the layout
 * (fl.rank, fl.alpha, fl.targets, fl.seed), fl.tokens (positions trained on)
 * and fl.devices (the ids of the devices behind it: one, or an aggregate's). A
 * device's update of an MoE also says how many tokens reached each expert,
 * 0 for those absent (fl.expert_tokens, i64 [n_layer][n_expert]; for the
 * reader's information: the weights are fl.weights').
 *
 * The global of round R is an adapter (general.type "adapter": it loads as
 * any adapter does) with the same fl.* keys, fl.round = R.
 *
 * Updates are untrusted: fed_update_read checks one against itself (keys,
 * ranges, shapes, values finite); fedavg checks them against the base, the
 * global and each other.
 */
#ifndef OCTO_TRAIN_FED_H
#define OCTO_TRAIN_FED_H

#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"
#include "core/gguf.h"
#include "model/lora.h"
#include "model/model.h"

#define FED_MAX_TOKENS (1ull << 50) /* more training tokens behind one file is not a device's */
#define FED_MAX_DEVICE 64           /* a device id's characters (printable, no spaces) */
#define FED_MAX_DEVICES (1 << 20)   /* devices behind one aggregate */
#define FED_MAX_VALUE 1e4           /* a change of B beyond it is no training's (a round moves B by ~0.1) */

typedef struct {
    uint32_t round;
    uint64_t base_hash, a_hash;
    lora_init_opts layout; /* what lora_create made A from */
    uint64_t tokens;
    /* An update's: the B it started from (fed_b_hash of its global); a global's: its own B (what an update
     * trained from it starts from). So an update is of one global, not only of one round. */
    uint64_t start_hash;
} fed_meta;

/* The base's identity: every tensor's name, type, shape and bytes. */
uint64_t fed_base_hash(const model *m);
/* The hash of a's A values, pair by pair in m's tensor order. */
uint64_t fed_a_hash(const model *m, const lora_adapter *a);
/* The hash of a's B values, group by group (fed_groups' order and layout); 0 when out of memory. */
uint64_t fed_b_hash(const model *m, const lora_adapter *a);
/* a's ranks are all the layout's (a global made elsewhere could say one rank and hold another). */
bool fed_ranks_are(const lora_adapter *a, int rank);

/* The fl.* keys of a global adapter (ERR_MISSING_KEY naming one absent: not a federation's global). */
err_code fed_meta_read(const gguf_ctx *g, fed_meta *meta, err_t *err);
/* a as round meta->round's global at path. */
err_code fed_global_write(const model *m, const lora_adapter *a, const fed_meta *meta, const char *path, err_t *err);

/* One group of an adapter: a matrix (e = -1), or expert e of a stack. */
typedef struct {
    char name[272];          /* its update tensor's */
    const lora_tensor *t;
    int64_t rows;            /* B's rows (every part's of a fused tensor) */
    int layer, e;
} fed_group;

/* a's groups, in m's tensor order (free them). */
err_code fed_groups(const model *m, const lora_adapter *a, fed_group **out, int *n, err_t *err);
/* Group g's values of B: v[o * rank + k] = B[o][k] (its change: minus start's, NULL: none). */
void fed_group_b(const lora_adapter *a, const fed_group *g, const float *start, float *v);
/* Adds d (as fed_group_b lays it out) to group g's B. */
void fed_group_add(lora_adapter *a, const fed_group *g, const double *d);

typedef struct {
    int groups, sent;          /* the adapter's groups; those in the update */
    uint64_t bytes, dense_bytes; /* the update's values; every group's (a dense update) */
    double norm;               /* the L2 norm of its values before any clipping */
} fed_sizes;

/* Differential privacy of an update (off by default: zeros). clip > 0 bounds the L2 norm of all its values
 * (scaled down when over); noise > 0 (with clip) adds N(0, (noise * clip)^2) to each value, drawn from the
 * system's generator, and then every group is sent, at weight meta->tokens: which experts a device reached,
 * and how often, is data too. The guarantee is local (the aggregator sees each update): any two datasets of
 * a device give clipped updates at most 2 * clip apart, so a round is mu-GDP with mu = 2 / noise, and r
 * rounds with mu = 2 sqrt(r) / noise (Gaussian differential privacy: Dong, Roth and Su). */
typedef struct {
    float clip, noise;
} fed_dp;

/* The epsilon of (epsilon, delta)-DP that r rounds of noise multiplier noise give (the curve of mu-GDP,
 * which is the analytic Gaussian mechanism's); INFINITY for noise 0. */
double fed_dp_epsilon(double noise, int rounds, double delta);

/* A device's update of a, trained from start (lora_values' layout at the start): a group is sent when
 * tokens reached it (expert_tokens [n_layer][n_expert], NULL: every group; the others, meta->tokens);
 * dp: its privacy (NULL: none). */
err_code fed_update_write(const model *m, const lora_adapter *a, const float *start, const int64_t *expert_tokens,
                          const fed_meta *meta, const fed_dp *dp, const char *device, const char *path,
                          fed_sizes *sizes, err_t *err);

typedef struct {
    gguf_ctx *g;
    fed_meta meta;
    const gguf_value *devices, *weights; /* strings; u64 per tensor */
} fed_update;

/* Checks an update against itself (takes g: closed on failure too). */
err_code fed_update_read(gguf_ctx *g, fed_update *u, err_t *err);
void fed_update_close(fed_update *u);
uint64_t fed_update_weight(const fed_update *u, uint64_t tensor);
/* Done with bytes [p, p + n) of g for now: a mapping's pages of them leave the process (read again from the
 * file when touched; the kernel may keep a few neighbours mapped), so reading many updates holds about one
 * tensor's pages of each at a time, not the files. */
void fed_release(const gguf_ctx *g, const void *p, uint64_t n);
/* Value k of an F32 tensor of a file. */
float fed_value(const gguf_tensor *t, uint64_t k);

/* Writes the fl.* keys of meta. */
err_code fed_put_meta(gguf_writer *w, const fed_meta *meta);
/* An update's keys: its type, meta's, the devices behind it and its tensors' weights. */
err_code fed_update_keys(gguf_writer *w, const fed_meta *meta, const char *const *devices, uint64_t n_devices,
                         const uint64_t *weights, uint64_t n);

#endif
