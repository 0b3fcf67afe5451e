/*
 * int2 — the 2-bit copies of a model's experts, in a sidecar file beside it
 * (MODEL.int2), and how a copy becomes something the kernels run.
 *
 * A miss on a low-weight expert reads its 2-bit copy (HOBBIT): 10 bytes per
 * 32 weights (an fp16 step s and 32 two-bit codes c, weight = (2c - 3) s),
 * 56 % of a Q4_0 expert's bytes and 29 % of a Q8_0 one's. Read into a slot,
 * a copy is spelt out as Q4_0 blocks (step s, nibbles 2c + 5: the same
 * values exactly), so the Q4_0 kernels compute it; a promotion reads the
 * expert from the model file as always.
 *
 * Why not the bit-sliced layout (the 2-bit copy being the top planes of the
 * 4-bit codes): it serves only Q4_0 experts, and truncated codes are a worse
 * 2-bit quantization than one with its own step. A sidecar costs flash
 * (+56 % of Q4_0 experts); the model file stays as it is.
 *
 * The file: a header (magic, version, the model's shape and size, a hash of
 * every expert matrix's bytes, which is what the copies were made from, the
 * model file's identity and times when that hash was taken, the measured
 * quality cost, a hash of the header), then one record per (layer, expert) in order: gate, up,
 * down, and an 8-byte hash of the record. A header that does not match the
 * model is stale: a load checks the shape and size, then the file's identity
 * and times (cheap), and only when those changed hashes the experts again (a
 * copied file whose experts are the same keeps its sidecar; a change to one
 * byte of an expert makes it stale); a record whose hash fails is corrupt (the expert is then
 * read whole from the model file: never a wrong token).
 */
#ifndef OCTO_MOE_INT2_H
#define OCTO_MOE_INT2_H

#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"
#include "model/experts_iface.h"

#define MOE_INT2_BLOCK_BYTES 10 /* per 32 weights */
#define MOE_INT2_KLD_AUTO 0.01  /* auto uses the copies when their measured cost is at most this (nats) */

typedef struct moe_int2 moe_int2;

/* Why a model can have no 2-bit copies (a row not a multiple of 32, or
 * experts already smaller than their copies spelt out as Q4_0), into why;
 * true when it can. */
bool moe_int2_applicable(const model *m, char *why, int n);
/* sidecar path for the model file path (path + ".int2"). */
void moe_int2_path(const char *model_path, char *out, int n);
/* Write the sidecar for the model (read through its mapping; its quality
 * cost unmeasured until moe_int2_set_kld). */
err_code moe_int2_build(const model *m, const char *model_path, err_t *err);
/* Open and check the header: ERR_NOT_FOUND (none), ERR_CORRUPT (a bad
 * header), ERR_BAD_VALUE (stale: another model's, or this one changed). */
err_code moe_int2_open(const model *m, const char *model_path, moe_int2 **out, err_t *err);
void moe_int2_close(moe_int2 *s);
/* The quality cost written by moe_int2_set_kld (< 0: never measured). */
double moe_int2_kld(const moe_int2 *s);
/* Record the measured cost (mean KL divergence, nats) over tokens positions. */
err_code moe_int2_set_kld(const char *model_path, double kld, uint32_t tokens, err_t *err);
/* The bytes of one record (the 2-bit copy of an expert of the layer, hash included). */
uint64_t moe_int2_record_bytes(const model *m, int layer);
/* Read (layer, expert)'s copy into buf (buffer_bytes of expert_read.h) and
 * spell it out as Q4_0; mats point into buf. ERR_CORRUPT when its hash
 * fails, ERR_IO / ERR_TRUNCATED when the file does. Thread-safe. */
err_code moe_int2_read(moe_int2 *s, const model *m, int layer, int expert, uint8_t *buf, uint64_t buf_bytes,
                       model_mat mats[3], err_t *err);

/* The 2-bit quantization of n floats (n % 32 == 0) into n / 32 blocks. */
void moe_int2_quantize(const float *x, int64_t n, uint8_t *dst);
/* Blocks spelt out as Q4_0 (n / 32 blocks of 18 bytes); dst may overlap
 * src when dst + 8 * blocks <= src (blocks are spelt out front to back). */
void moe_int2_to_q4_0(const uint8_t *src, int64_t n, uint8_t *dst);

#endif
