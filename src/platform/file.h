/*
 * platform/file — what octo tells the system about its files and memory,
 * and the file operations only some systems have.
 *
 * Advice is advice: every call may do nothing, and none reports failure.
 * Linux (platform/linux/file.c) passes it to posix_fadvise and madvise
 * (MERGE offers anonymous pages to the kernel's same-page merging). The
 * POSIX fallback passes what POSIX names (posix_fadvise where the system
 * has it, posix_madvise) and drops MERGE.
 *
 * An unnamed file (Linux's O_TMPFILE) lives in a directory without a name
 * until it is linked, so a run killed while writing leaves nothing behind;
 * where there is none, plat_open_unnamed fails and the caller names its
 * file from the start (mkstemp). Direct I/O (O_DIRECT) bypasses the page
 * cache; where there is none, plat_open_direct fails the same way.
 */
#ifndef OCTO_PLATFORM_FILE_H
#define OCTO_PLATFORM_FILE_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    PLAT_ADVICE_SEQUENTIAL, /* read front to back: read ahead further */
    PLAT_ADVICE_WILLNEED,   /* read soon: start reading it in */
    PLAT_ADVICE_DONTNEED,   /* done with it: the cached pages may go */
    PLAT_ADVICE_MERGE,      /* memory only: pages other processes may share when equal */
} plat_advice;

/* Advice on bytes [off, off + len) of the open file fd. */
void plat_advise_file(int fd, uint64_t off, uint64_t len, plat_advice a);
/* Advice on a mapping's bytes [addr, addr + len) (addr page-aligned). */
void plat_advise_mem(void *addr, size_t len, plat_advice a);

/* Not advice: the pages of [addr, addr + len) (page-aligned) of a private
 * file mapping go back to the file's contents, and the private copies made
 * by writing to them are freed (Linux: MADV_DONTNEED, which on such a
 * mapping does exactly this). 0, or an errno value; ENOSYS in the POSIX
 * fallback, where posix_madvise's DONTNEED may leave them as they are. */
int plat_mem_revert(void *addr, size_t len);

/* The folder holding the running executable (its real path) into buf: 0, or an errno value
 * (ENOSYS where the system does not say; the POSIX fallback). */
int plat_exe_dir(char *buf, size_t n);

/* A new unnamed file in directory dir, open for writing (mode 0600,
 * close-on-exec), that plat_link_unnamed can give a name; -1 (errno set)
 * where the system or the file system cannot make one. */
int plat_open_unnamed(const char *dir);
/* Give the unnamed file fd the name path; 0, or -1 with errno (EEXIST:
 * path exists). */
int plat_link_unnamed(int fd, const char *path);

/* Swap the names a and b (both exist; one folder or file takes the
 * other's place at once, so b is never missing); 0, or -1 with errno
 * (ENOSYS, EINVAL: the system or the file system cannot, rename twice).
 * Linux's renameat2 with RENAME_EXCHANGE, by the system call (musl has no
 * wrapper); none in the POSIX fallback. */
int plat_rename_exchange(const char *a, const char *b);

/* Call fn(ctx, name) for each entry of the open folder fd but "." and "..",
 * from its start; stops early when fn returns non-zero. 0, or an errno
 * value. Linux reads the entries with the getdents64 system call, which is
 * async-signal-safe (core/tempfiles.c calls it from a signal handler); the
 * POSIX fallback reads them with fdopendir and readdir on a copy of fd,
 * which is not, so there an interrupted command's cleanup may be unsafe
 * while a folder is being removed. */
typedef int (*plat_dir_fn)(void *ctx, const char *name);
int plat_dir_each(int fd, plat_dir_fn fn, void *ctx);

/* path opened read-only for direct I/O (close-on-exec); -1 (errno set)
 * where the system or the file system refuses it. */
int plat_open_direct(const char *path);

#endif
