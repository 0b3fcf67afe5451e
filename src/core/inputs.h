/*
 * inputs — the files octo reads, and the rule that protects them: a file this
 * process is reading is never written over or removed by octo.
 *
 * Opening: input_open opens a path for reading only when it is a regular
 * file. It opens with O_NONBLOCK, so a FIFO put in the file's place cannot
 * block the open, then checks the opened file itself (fstat): a FIFO, socket,
 * device or directory is refused before a byte is read.
 *
 * Holding: while a file is mapped or open as an input (a model, its draft,
 * quantize's or upcycle's source), its identity (device and inode) is held.
 * atomic_write refuses a target that is held, and deploy does not remove a
 * held file, so `logits --out MODEL`, `quantize -o INPUT` or `--moe-trace
 * MODEL` cannot replace or truncate the model being read. The identity, not
 * the path: a hard link or another spelling of the same file is caught too.
 *
 * The held set is process-wide, the one piece of global mutable state besides
 * the CPU-feature table: a model loaded by one caller is an input to every
 * writer in the process. A mutex guards it; the set is small (one entry per
 * file held, with a count).
 */
#ifndef OCTO_CORE_INPUTS_H
#define OCTO_CORE_INPUTS_H

#include <stdbool.h>
#include <sys/stat.h>

#include "err.h"

/* path opened read-only (close-on-exec, blocking reads) into *fd with its
 * stat; ERR_NOT_FOUND, ERR_IS_DIR, or ERR_IO for anything not a regular file. */
err_code input_open(const char *path, int *fd, struct stat *st, err_t *err);

/* The file st describes is being read until the matching release (counted). */
void input_hold(const struct stat *st);
void input_release(const struct stat *st);

/* Is the file with this identity held by anyone in the process? */
bool input_held(const struct stat *st);

#endif
