/*
 * quantize — a GGUF model rewritten with its weight matrices in another
 * type (`octo quantize`; docs/quantize.md has the rules and measurements).
 *
 * Every tensor is read as floats (any type octo reads) and written again:
 *
 *   plain types (q8_0, q4_0, q4_1, q5_0, q5_1, q2_k ... q6_k, f16, bf16,
 *     f32): every weight matrix in that type, the output and the embedding
 *     included;
 *   mixes (q3_k_m, q4_k_s, q4_k_m, q5_k_s, q5_k_m): the K-quant of the name
 *     for most matrices, more bits where llama.cpp's mixes put them (the
 *     output, and attn_v / ffn_down in the layers that matter most:
 *     quantize.c: mix_type says which);
 *
 * --types-from REF (types_from): each tensor takes the type REF gives the
 *   tensor of that name (the same model quantized by another tool), so two
 *   quantizers can be compared matrix for matrix;
 *
 * in all, a matrix whose rows the type cannot hold (a K-quant's 256-value
 * blocks on a row of 96) takes the nearest type that can (q4_k -> q5_0,
 * q5_k -> q5_1, q6_k -> q8_0, q2_k / q3_k -> q4_0, a 32-block type -> f16),
 * and the report names how many. One-dimensional tensors (norms, biases,
 * RoPE factors) and MoE routers stay as they are. Metadata is copied, with
 * general.file_type set to the type's llama.cpp number. The output is
 * written to a temporary name and renamed (core/atomic_write.h): a failure
 * leaves no file and any old one whole.
 *
 * With a calibration text (calib_text, `-f TEXT`), the input model first
 * reads it (convert/imatrix.h) and every matrix whose input it saw is
 * rounded to minimise its importance-weighted error (Q4_0, Q4_1, Q5_0,
 * Q5_1 and the K-quants; Q8_0 and the float types are unaffected).
 */
#ifndef OCTO_CONVERT_QUANTIZE_H
#define OCTO_CONVERT_QUANTIZE_H

#include <stdint.h>

#include "core/err.h"

typedef struct {
    const char *input, *output;
    const char *type; /* a type or mix name, as above */
    int n_threads;    /* 0: the machine's cores */
    /* Optional: called before each tensor is written (index from 0). */
    void (*progress)(void *ctx, int index, int count, const char *name, uint32_t from, uint32_t to);
    void *progress_ctx;
    const char *calib_text; /* NULL: no importance matrix */
    size_t calib_len;
    int calib_tokens;       /* its first N tokens; 0: QUANTIZE_CALIB_TOKENS */
    const char *types_from; /* NULL, or a GGUF whose per-tensor types to take */
} quantize_opts;

#define QUANTIZE_CALIB_TOKENS 8192

typedef struct {
    int n_tensors;   /* in the file */
    int n_converted; /* written in another type than they came in */
    int n_fallback;  /* matrices whose rows the asked type cannot hold, written in the nearest one that can */
    char fallback[160]; /* "" or the first such matrix and what it became */
    int n_weighted;  /* matrices rounded with the importance matrix */
    int calib_tokens; /* tokens of calibration text read */
    uint64_t bytes_in, bytes_out; /* tensor data */
} quantize_report;

/* A type or mix name's base type (the K-quant of a mix); -1 when unknown. */
int quantize_type_of(const char *name);
err_code quantize_run(const quantize_opts *o, quantize_report *rep, err_t *err);

#endif
