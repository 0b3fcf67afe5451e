/*
 * expert_read — one expert's gate, up and down from the model file into a
 * buffer of the caller's, laid out for the kernels.
 *
 * Direct I/O (O_DIRECT) where the file system allows it: the bytes go from
 * the device into the buffer without a copy and without the page cache,
 * which a memory cgroup would charge to the process and which would keep
 * the file resident behind the budget's back. Direct reads must start and
 * end on the device's blocks, so each matrix is read whole blocks around it
 * into its part of the buffer and the matrix points inside. Where direct
 * I/O is refused (at open or at the first read) it reads through the page
 * cache and drops what it read (POSIX_FADV_DONTNEED). Safe to call from
 * several threads at once.
 */
#ifndef OCTO_MOE_EXPERT_READ_H
#define OCTO_MOE_EXPERT_READ_H

#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"
#include "model/experts_iface.h"

#define MOE_READ_ALIGN 4096 /* a buffer's alignment and the block direct reads are rounded to */

typedef struct moe_reader moe_reader;

/* try_direct: use direct I/O where the file system takes it (false: the page cache, always). */
err_code moe_reader_open(const model *m, const char *path, bool try_direct, moe_reader **out, err_t *err);
void moe_reader_close(moe_reader *r);
/* The bytes a buffer needs to hold any expert of the model (the blocks
 * around each matrix included). */
uint64_t moe_reader_buffer_bytes(const model *m);
/* Read (layer, expert) into buf (MOE_READ_ALIGN-aligned, buffer_bytes long)
 * and pack it (tmp: PACK_ROWS rows of scratch); mats point into buf.
 * ERR_IO or ERR_TRUNCATED with a message when the file fails or ends. */
err_code moe_reader_read(moe_reader *r, int layer, int expert, uint8_t *buf, uint8_t *tmp, model_mat mats[3],
                         err_t *err);
/* Whether reads go around the page cache. */
bool moe_reader_direct(const moe_reader *r);

#endif
