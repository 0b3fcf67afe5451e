/*
 * sha256 — SHA-256 (FIPS 180-4), streaming, for what must match a digest
 * published elsewhere: a model pulled from the Hugging Face hub is checked
 * against the SHA-256 the hub gives for it (tools/pull.c). checksum.h is the
 * fast non-cryptographic hash of octo's own bundles.
 */
#ifndef OCTO_CORE_SHA256_H
#define OCTO_CORE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct {
    uint32_t h[8];
    uint64_t bytes;     /* fed so far */
    uint8_t block[64];  /* the partial block */
} sha256_ctx;

void sha256_init(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *data, size_t n);
/* The digest as 64 lowercase hex digits and a NUL; c is spent. */
void sha256_hex(sha256_ctx *c, char out[65]);
/* The digest of the file at path (read through in 1 MiB pieces). */
err_code sha256_file(const char *path, char out[65], err_t *err);

#endif
