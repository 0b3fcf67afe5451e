/*
 * octo.h — the public interface of octo, an on-device LLM inference runtime.
 *
 * This is the only public header. Every function that can fail returns an
 * octo_status (or NULL) and leaves a message that names the problem in the
 * object it was called on (octo_model_error) or, when no object could be made,
 * in the client (octo_last_error). The library never prints, exits or aborts
 * on bad input.
 *
 * Thread safety: a client may be shared between threads for loading models;
 * a model serves one caller at a time.
 *
 *   octo_client *client = octo_client_new(NULL);
 *   octo_model  *model  = octo_load_model(client, "model.gguf", NULL);
 *   if (!model) { fprintf(stderr, "%s\n", octo_last_error(client)); ... }
 *   float *logits = malloc(sizeof(float) * octo_model_info_get(model).n_vocab);
 *   octo_eval(model, tokens, n_tokens, logits, OCTO_LOGITS_LAST);
 *   octo_model_free(model);
 *   octo_client_free(client);
 */
#ifndef OCTO_H
#define OCTO_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    OCTO_OK = 0,
    OCTO_ERR_INVALID_ARG = 1,
    OCTO_ERR_NOMEM = 2,
    OCTO_ERR_IO = 3,
    OCTO_ERR_NOT_FOUND = 4,
    OCTO_ERR_IS_DIR = 5,
    OCTO_ERR_EMPTY_FILE = 6,
    OCTO_ERR_TRUNCATED = 7,
    OCTO_ERR_BAD_MAGIC = 8,
    OCTO_ERR_BAD_VERSION = 9,
    OCTO_ERR_BAD_TENSOR_TYPE = 10,
    OCTO_ERR_BAD_METADATA = 11,
    OCTO_ERR_TENSOR_BOUNDS = 12,
    OCTO_ERR_OVERFLOW = 13,
    OCTO_ERR_MISSING_TENSOR = 14,
    OCTO_ERR_BAD_SHAPE = 15,
    OCTO_ERR_UNSUPPORTED_ARCH = 16,
    OCTO_ERR_MISSING_KEY = 17,
    OCTO_ERR_BAD_VALUE = 18,
    OCTO_ERR_UNSUPPORTED = 19,
    OCTO_ERR_CONTEXT_FULL = 20,
    OCTO_ERR_BUSY = 21,
    OCTO_ERR_CANCELLED = 22,
} octo_status;

/* A short stable name for a status ("truncated file", ...). */
const char *octo_status_name(octo_status status);

/* ---- client ---- */

typedef struct octo_client octo_client;

typedef struct {
    int n_threads; /* 0 = automatic (reserved: the engine is single-threaded for now) */
} octo_client_options;

octo_client_options octo_client_options_defaults(void);
/* opts NULL = defaults. Returns NULL only when out of memory. */
octo_client *octo_client_new(const octo_client_options *opts);
void octo_client_free(octo_client *client);
/* The message of the last failure of a call made on this client ("" if none). */
const char *octo_last_error(const octo_client *client);
octo_status octo_last_status(const octo_client *client);

/* ---- model ---- */

typedef struct octo_model octo_model;

typedef enum { OCTO_KV_F32 = 0, OCTO_KV_F16 = 1 } octo_kv_type;

typedef struct {
    int n_ctx;               /* context in tokens; 0 = the model's trained context */
    octo_kv_type kv_type;    /* element type of the uncompressed KV cache */
} octo_model_options;

octo_model_options octo_model_options_defaults(void);

/* Map the GGUF file at path and bind it. opts NULL = automatic. On failure
 * returns NULL; octo_last_error(client) says why. */
octo_model *octo_load_model(octo_client *client, const char *path, const octo_model_options *opts);
void octo_model_free(octo_model *model);
const char *octo_model_error(const octo_model *model);

typedef struct {
    char arch[32];            /* general.architecture */
    int n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
    int n_expert, n_expert_used; /* 0 for dense models */
    float rope_freq_base, rope_freq_scale, rms_eps;
    int output_tied;          /* 1 when logits reuse the token embedding */
    uint64_t n_tensors;
    char tensor_types[256];   /* e.g. "F32=9 Q4_0=29 Q6_K=1" */
    uint64_t n_params;
    uint64_t file_bytes;
    uint64_t weight_bytes;    /* bytes of tensor data the forward pass reads */
    uint64_t kv_bytes_per_token; /* at the model's KV element type */
    int n_ctx;                /* the context this model was opened with */
} octo_model_info;

octo_model_info octo_model_info_get(const octo_model *model);

/* ---- evaluation ---- */

typedef enum {
    OCTO_LOGITS_LAST = 0, /* logits of the last token only: n_vocab floats */
    OCTO_LOGITS_ALL = 1,  /* logits of every token: n_tokens * n_vocab floats */
} octo_logits_mode;

/* Continue the model's sequence with n_tokens tokens and write logits
 * (row i = distribution of the token after tokens 0..i). A failed call leaves
 * the sequence unchanged. */
octo_status octo_eval(octo_model *model, const int32_t *tokens, int n_tokens, float *logits, octo_logits_mode mode);
/* Tokens consumed so far. */
int octo_n_past(const octo_model *model);
/* Forget the sequence (the cache is kept allocated). */
void octo_reset(octo_model *model);

/* ---- process ---- */

typedef struct {
    uint64_t rss_bytes, peak_rss_bytes, pss_bytes; /* 0 where the system does not say */
} octo_memory;

octo_memory octo_memory_usage(void);

#ifdef __cplusplus
}
#endif

#endif
