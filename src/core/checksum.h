/*
 * checksum — a 64-bit content hash of a file, for a deploy bundle's manifest
 * (is every file the one that was written?). Not cryptographic: it detects
 * damage and edits, not an adversary. The file is hashed in 4 MiB chunks on
 * up to 8 threads (each chunk's hash, then the hash of those in order), so
 * the result does not depend on the thread count, and hashing runs near the
 * speed of reading the file (docs/deploy.md has the figure).
 */
#ifndef OCTO_CORE_CHECKSUM_H
#define OCTO_CORE_CHECKSUM_H

#include <stdint.h>

#include "err.h"

/* The hash of n bytes (one chunk's function, exposed for tests). */
uint64_t checksum_bytes(const void *p, uint64_t n, uint64_t seed);
/* The hash of the whole file and its size. */
err_code checksum_file(const char *path, uint64_t *hash, uint64_t *size, err_t *err);

#endif
