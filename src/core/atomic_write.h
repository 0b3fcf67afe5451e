/*
 * atomic_write — the one way octo writes an output file (a model, logits, a
 * bundle): into a temporary file beside the target, flushed to the disk, then
 * renamed over it. A failure at any point (a full disk, a write error) leaves
 * the target as it was and removes only the temporary file octo created.
 *
 * The target must be absent or a regular file: a symbolic link, a device
 * node, a FIFO or a directory is refused before anything is written, so no
 * path given by a user can make octo unlink or truncate something else. A
 * target that is a file this process is reading (core/inputs.h: the same
 * device and inode as a model it has mapped) is refused too.
 *
 * Where the file system allows it, the temporary file has no name until the
 * commit (O_TMPFILE): a run interrupted or killed while writing leaves nothing
 * behind. Elsewhere it is named from the start (mkstemp) and removed on any
 * failure octo sees.
 */
#ifndef OCTO_CORE_ATOMIC_WRITE_H
#define OCTO_CORE_ATOMIC_WRITE_H

#include <stddef.h>
#include <stdio.h>

#include "err.h"

typedef struct {
    FILE *f;           /* write here (fwrite etc.) between open and commit */
    char *path;        /* the target */
    char *tmp;         /* the temporary file's name beside it */
    int unnamed;       /* 1 while the file has no name yet (platform/file.h: linked at commit) */
    int temp_slot;     /* its core/tempfiles.h slot while it has a temporary name, else -1 */
} atomic_file;

/* The target's refusals alone (not a regular file, an input of this
 * process), for a command to call before long work whose output goes there. */
err_code atomic_file_check(const char *path, err_t *err);

/* Create the temporary file for path. On failure nothing exists and err says why. */
err_code atomic_file_open(atomic_file *af, const char *path, err_t *err);

/* Write n bytes (a failed write is remembered and reported by commit too). */
err_code atomic_file_write(atomic_file *af, const void *p, size_t n, err_t *err);

/* Flush, sync and rename over the target. On failure the temporary file is
 * removed and the target is untouched. af is closed either way. */
err_code atomic_file_commit(atomic_file *af, err_t *err);

/* Give up: close and remove the temporary file (the target is untouched). */
void atomic_file_abort(atomic_file *af);

#endif
