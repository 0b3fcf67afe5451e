/*
 * spill — a file of fixed-size, checksummed slots where the KV cache puts
 * whole cold blocks it has no room for in memory, and reads them back.
 *
 * The file is created in a directory the caller names (the client's cache
 * directory) and unlinked at once: nothing is left behind, even after a
 * crash. Every slot holds one record: a header (magic, length, FNV-1a 64-bit
 * checksum of the payload) and the payload. A read checks the length and
 * the checksum, so a truncated or corrupted file is reported, never returned.
 *
 * Faults are errors, never aborts: an unwritable directory fails the open; a
 * full disk (ENOSPC or EDQUOT from the system, or the store's own byte quota,
 * max_bytes) fails the write with ERR_NO_SPACE; a short read, a bad magic or a
 * bad checksum fails the read with ERR_CORRUPT. The cache turns each into
 * eviction and counts it.
 */
#ifndef OCTO_KV_SPILL_H
#define OCTO_KV_SPILL_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

typedef struct spill_store spill_store;

typedef struct {
    int64_t writes, reads;          /* records written / read back (and verified) */
    int64_t prefetches;             /* background read-aheads asked for */
    int64_t write_errors, read_errors;
    uint64_t read_ns;               /* total time in reads */
    uint64_t file_bytes;            /* the file's size: slots ever used */
    int slots_used;
} spill_stats;

/* payload_bytes: the largest payload a slot holds; max_bytes: the file's
 * size limit (0 = none: the disk's). */
err_code spill_open(const char *dir, size_t payload_bytes, uint64_t max_bytes, spill_store **out, err_t *err);
void spill_close(spill_store *s);

/* Write a payload (len <= payload_bytes) to a free slot; *slot receives it. */
err_code spill_put(spill_store *s, const void *payload, size_t len, int *slot, err_t *err);
/* Read slot's payload (exactly len bytes, as written) into dst, verified. */
err_code spill_get(spill_store *s, int slot, void *dst, size_t len, err_t *err);
/* Ask the system to read slot into its page cache in the background (a
 * later spill_get then copies from memory). Advice only. */
void spill_prefetch(spill_store *s, int slot);
/* The slot may be reused. */
void spill_release(spill_store *s, int slot);

spill_stats spill_get_stats(const spill_store *s);
/* The open file (tests corrupt and truncate it). */
int spill_fd(const spill_store *s);

#endif
