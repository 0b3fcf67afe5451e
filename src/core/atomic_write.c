/*
 * atomic_write — see atomic_write.h.
 */
#include "atomic_write.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <stdio.h>
#include <unistd.h>

#include "inputs.h"
#include "platform/file.h"
#include "tempfiles.h"

static err_code io_error(err_t *err, const char *path, const char *what, int e) {
    return err_set(err, e == ENOSPC || e == EDQUOT ? ERR_NO_SPACE : ERR_IO, "%s: %s: %s", path, what, strerror(e));
}

/* The mode a new file would get from open(2) under this process's umask, or
 * the target's own mode when it exists. */
static mode_t target_mode(const struct stat *st, int exists) {
    if (exists) return st->st_mode & 07777;
    const mode_t mask = umask(022); /* read the mask: umask has no query */
    umask(mask);
    return 0666 & ~mask;
}

/* The refusals: a target that is not a regular file, or a file this process reads. */
static err_code check_target(const char *path, struct stat *st, int *exists, err_t *err) {
    if (!path || !*path) return err_set(err, ERR_INVALID_ARG, "no output path given");
    *exists = lstat(path, st) == 0;
    if (!*exists && errno != ENOENT) return io_error(err, path, "cannot check the target", errno);
    if (*exists && !S_ISREG(st->st_mode))
        return err_set(err, ERR_INVALID_ARG, "%s is %s, not a regular file: octo writes only regular files", path,
                       S_ISLNK(st->st_mode) ? "a symbolic link" : S_ISDIR(st->st_mode) ? "a directory" : "a special file");
    if (*exists && input_held(st))
        return err_set(err, ERR_INVALID_ARG, "%s is an input octo is reading: write the output to another file", path);
    return ERR_OK;
}

err_code atomic_file_check(const char *path, err_t *err) {
    struct stat st;
    int exists = 0;
    return check_target(path, &st, &exists, err);
}

err_code atomic_file_open(atomic_file *af, const char *path, err_t *err) {
    memset(af, 0, sizeof *af);
    af->temp_slot = -1;
    struct stat st;
    int exists = 0;
    err_code rc = check_target(path, &st, &exists, err);
    if (rc) return rc;
    char *copy = strdup(path);
    const size_t n = strlen(path) + 16;
    af->path = strdup(path);
    af->tmp = malloc(n + 1);
    if (!copy || !af->path || !af->tmp) {
        free(copy);
        atomic_file_abort(af);
        return err_set(err, ERR_NOMEM, "out of memory");
    }
    /* ".NAME.XXXXXX" in the target's directory, so rename never crosses a file system */
    const char *dir = dirname(copy);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    snprintf(af->tmp, n + 1, "%s/.%s.XXXXXX", dir, base);
    int fd = plat_open_unnamed(dir); /* no name until commit: a run killed before it leaves nothing */
    af->unnamed = fd >= 0;
    if (fd < 0 && (fd = mkstemp(af->tmp)) >= 0) /* named from the start: an interrupt removes it */
        af->temp_slot = tempfiles_add(af->tmp);
    free(copy);
    if (fd < 0) {
        const int e = errno;
        free(af->tmp);
        af->tmp = NULL; /* nothing was created */
        atomic_file_abort(af);
        return io_error(err, path, "cannot create a file beside it", e);
    }
    if (fchmod(fd, target_mode(&st, exists)) != 0 || !(af->f = fdopen(fd, "wb"))) {
        const int e = errno;
        close(fd);
        atomic_file_abort(af);
        return io_error(err, path, "cannot open the temporary file", e);
    }
    return ERR_OK;
}

err_code atomic_file_write(atomic_file *af, const void *p, size_t n, err_t *err) {
    if (!n) return ERR_OK;
    if (fwrite(p, 1, n, af->f) == n) return ERR_OK;
    return io_error(err, af->path, "write failed", errno);
}

/* An unnamed file gets its temporary name now (a fresh one beside the
 * target), for the rename; a named one has it already. */
static int give_name(atomic_file *af) {
    if (!af->unnamed) return 0;
    const size_t x = strlen(af->tmp) - 6; /* the XXXXXX */
    for (unsigned i = 0; i < 1000; i++) {
        snprintf(af->tmp + x, 7, "%06x", (unsigned)(getpid() * 7919u + i * 104729u) & 0xffffffu);
        if (plat_link_unnamed(fileno(af->f), af->tmp) == 0) {
            af->unnamed = 0; /* named: abort removes it from here on, an interrupt until the rename */
            af->temp_slot = tempfiles_add(af->tmp);
            return 0;
        }
        if (errno != EEXIST) return -1;
    }
    return -1;
}

err_code atomic_file_commit(atomic_file *af, err_t *err) {
    err_code rc = ERR_OK;
    if (fflush(af->f) != 0 || ferror(af->f)) rc = io_error(err, af->path, "write failed", errno);
    if (!rc && fsync(fileno(af->f)) != 0) rc = io_error(err, af->path, "sync failed", errno);
    if (!rc && give_name(af) != 0) rc = io_error(err, af->path, "cannot name the new file", errno);
    const int close_rc = fclose(af->f);
    af->f = NULL;
    if (!rc && close_rc != 0) rc = io_error(err, af->path, "close failed", errno);
    if (!rc && rename(af->tmp, af->path) != 0) rc = io_error(err, af->path, "rename failed", errno);
    if (!rc) { /* renamed: the temporary name is gone, nothing to remove */
        tempfiles_forget(af->temp_slot);
        af->temp_slot = -1;
        free(af->tmp);
        af->tmp = NULL;
    }
    atomic_file_abort(af);
    return rc;
}

void atomic_file_abort(atomic_file *af) {
    if (af->f) fclose(af->f);
    if (af->tmp && !af->unnamed) unlink(af->tmp); /* ours: mkstemp or give_name created it */
    if (af->tmp && af->temp_slot >= 0) tempfiles_forget(af->temp_slot);
    free(af->tmp);
    free(af->path);
    memset(af, 0, sizeof *af);
    af->temp_slot = -1; /* a second abort forgets nothing of anyone else's */
}
