/*
 * deploy — a model made ready for each target device (`octo deploy`;
 * runtime/bundle_dir.h has the folder's format, docs/deploy.md the
 * measurements).
 *
 * For every device, in DIR/NAME:
 *   1. weights.octo: the model (quantized once to --type first, if given) in
 *      the layout that device's kernels read: on an x86 host with the
 *      AVX-512 packed kernels, the 16-row groups of core/kernels/packed.h, so a load
 *      maps the file read-only and re-lays nothing; elsewhere (the phone
 *      profiles are AArch64, whose NEON kernels read the GGUF layout) the
 *      GGUF layout;
 *   2. draft.octo when the device's plan runs a draft: the one given, the
 *      one found beside the model (NAME.draft.gguf), or, where the plan
 *      finds a self-draft pays, the model quantized to Q4_0 once here
 *      instead of at every load;
 *   3. weights.octo.int2 for an MoE model whose experts can have 2-bit
 *      copies (the source's measured cost carried over when it has one);
 *   4. plan.json: the plan for that device, made with the draft in place;
 *   5. manifest, last.
 * Each folder is written under a temporary name and renamed into place (an
 * old bundle of the same name is exchanged with it in one step where the
 * file system allows, then removed; a folder there that is no bundle is an
 * error, never removed): a failure leaves no half-written folder. Everything is checked before anything is written:
 * device names, the type, the draft, the model itself.
 */
#ifndef OCTO_CONVERT_DEPLOY_H
#define OCTO_CONVERT_DEPLOY_H

#include "core/err.h"

#define DEPLOY_MAX_DEVICES 16

typedef struct {
    const char *input;      /* the GGUF model */
    const char *output_dir; /* created if missing (its parent must exist) */
    const char *devices[DEPLOY_MAX_DEVICES]; /* profile names or "host" */
    int n_devices;
    const char *type;       /* NULL: the model's own types */
    const char *draft;      /* NULL: found beside the model, or the plan's self-draft */
    int n_threads;          /* 0: the machine's cores */
    void (*progress)(void *ctx, const char *msg); /* optional: a line per step */
    void *progress_ctx;
} deploy_opts;

err_code deploy_run(const deploy_opts *o, err_t *err);

#endif
