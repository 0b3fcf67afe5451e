/*
 * platform/linux/file — see platform/file.h: posix_fadvise and madvise, and
 * O_TMPFILE files linked through their /proc/self/fd entry (linkat with
 * AT_SYMLINK_FOLLOW; AT_EMPTY_PATH would need CAP_DAC_READ_SEARCH). Without
 * /proc mounted (a chroot, a sandbox) no unnamed file is made, since none
 * could be linked. Folders are read with the getdents64 system call, and
 * swapped with renameat2's.
 */
#define _GNU_SOURCE /* O_TMPFILE, O_DIRECT, MADV_MERGEABLE */
#include "platform/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

void plat_advise_file(int fd, uint64_t off, uint64_t len, plat_advice a) {
    const int adv = a == PLAT_ADVICE_SEQUENTIAL ? POSIX_FADV_SEQUENTIAL
                    : a == PLAT_ADVICE_WILLNEED ? POSIX_FADV_WILLNEED
                    : a == PLAT_ADVICE_DONTNEED ? POSIX_FADV_DONTNEED
                                                : -1;
    if (adv >= 0) posix_fadvise(fd, (off_t)off, (off_t)len, adv);
}

void plat_advise_mem(void *addr, size_t len, plat_advice a) {
    const int adv = a == PLAT_ADVICE_SEQUENTIAL ? MADV_SEQUENTIAL
                    : a == PLAT_ADVICE_WILLNEED ? MADV_WILLNEED
                    : a == PLAT_ADVICE_DONTNEED ? MADV_DONTNEED
#ifdef MADV_MERGEABLE
                    : a == PLAT_ADVICE_MERGE ? MADV_MERGEABLE
#endif
                                             : -1;
    if (adv >= 0) madvise(addr, len, adv);
}

int plat_mem_revert(void *addr, size_t len) { return madvise(addr, len, MADV_DONTNEED) ? errno : 0; }

int plat_exe_dir(char *buf, size_t n) {
    if (n < 2) return ENAMETOOLONG;
    const ssize_t k = readlink("/proc/self/exe", buf, n - 1);
    if (k <= 0) return k < 0 ? errno : ENOENT;
    if ((size_t)k == n - 1) return ENAMETOOLONG; /* perhaps cut */
    buf[k] = '\0';
    char *slash = strrchr(buf, '/');
    if (!slash) return ENOENT;
    *slash = '\0';
    return 0;
}

static void fd_path(int fd, char *out, size_t n) { snprintf(out, n, "/proc/self/fd/%d", fd); }

int plat_open_unnamed(const char *dir) {
#ifdef O_TMPFILE
    const int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    char proc[64];
    fd_path(fd, proc, sizeof proc);
    if (access(proc, F_OK) == 0) return fd; /* plat_link_unnamed links it through /proc */
    close(fd);
    errno = ENOTSUP;
#else
    (void)dir;
    errno = ENOTSUP;
#endif
    return -1;
}

int plat_link_unnamed(int fd, const char *path) {
    char proc[64];
    fd_path(fd, proc, sizeof proc);
    return linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW);
}

/* The kernel's directory record (getdents64), declared here: glibc's only
 * with its own getdents64 wrapper, which is not on the signal-safe list. */
struct dirent_rec {
    uint64_t ino;
    int64_t off;
    unsigned short reclen;
    unsigned char type;
    char name[];
};

int plat_dir_each(int fd, plat_dir_fn fn, void *ctx) {
    char buf[4096] __attribute__((aligned(8)));
    if (lseek(fd, 0, SEEK_SET) != 0) return errno;
    for (long n; (n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0;)
        for (long off = 0; off < n;) {
            const struct dirent_rec *d = (const struct dirent_rec *)(buf + off);
            off += d->reclen;
            if (strcmp(d->name, ".") && strcmp(d->name, "..") && fn(ctx, d->name)) return 0;
        }
    return 0;
}

int plat_rename_exchange(const char *a, const char *b) {
#ifdef SYS_renameat2
    return (int)syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, 2u /* RENAME_EXCHANGE */);
#else
    (void)a, (void)b;
    errno = ENOSYS;
    return -1;
#endif
}

int plat_open_direct(const char *path) {
#ifdef O_DIRECT
    return open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
#else
    (void)path;
    errno = EINVAL;
    return -1;
#endif
}
