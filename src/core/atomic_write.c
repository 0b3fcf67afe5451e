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
#include <unistd.h>

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

err_code atomic_file_open(atomic_file *af, const char *path, err_t *err) {
    memset(af, 0, sizeof *af);
    if (!path || !*path) return err_set(err, ERR_INVALID_ARG, "no output path given");
    struct stat st;
    const int exists = lstat(path, &st) == 0;
    if (!exists && errno != ENOENT) return io_error(err, path, "cannot check the target", errno);
    if (exists && !S_ISREG(st.st_mode))
        return err_set(err, ERR_INVALID_ARG, "%s is %s, not a regular file: octo writes only regular files", path,
                       S_ISLNK(st.st_mode) ? "a symbolic link" : S_ISDIR(st.st_mode) ? "a directory" : "a special file");
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
    free(copy);
    const int fd = mkstemp(af->tmp);
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

err_code atomic_file_commit(atomic_file *af, err_t *err) {
    err_code rc = ERR_OK;
    if (fflush(af->f) != 0 || ferror(af->f)) rc = io_error(err, af->path, "write failed", errno);
    if (!rc && fsync(fileno(af->f)) != 0) rc = io_error(err, af->path, "sync failed", errno);
    const int close_rc = fclose(af->f);
    af->f = NULL;
    if (!rc && close_rc != 0) rc = io_error(err, af->path, "close failed", errno);
    if (!rc && rename(af->tmp, af->path) != 0) rc = io_error(err, af->path, "rename failed", errno);
    if (!rc) { /* renamed: the temporary name is gone, nothing to remove */
        free(af->tmp);
        af->tmp = NULL;
    }
    atomic_file_abort(af);
    return rc;
}

void atomic_file_abort(atomic_file *af) {
    if (af->f) fclose(af->f);
    if (af->tmp) unlink(af->tmp); /* ours: mkstemp created it */
    free(af->tmp);
    free(af->path);
    memset(af, 0, sizeof *af);
}
