/*
 * tempfiles — see tempfiles.h.
 */
#include "tempfiles.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "platform/file.h"

#define TEMPFILES_PATH 4096
#define TREE_DEPTH 8 /* octo's temporary folders are one level deep; deeper is refused (ELOOP) */

enum { SLOT_FREE, SLOT_FILLING, SLOT_USED };

static struct {
    atomic_int state;
    char path[TEMPFILES_PATH];
} g_slots[TEMPFILES_MAX];

int tempfiles_add(const char *path) {
    const size_t n = strlen(path);
    if (n >= TEMPFILES_PATH) return -1;
    for (int i = 0; i < TEMPFILES_MAX; i++) {
        int expect = SLOT_FREE;
        if (!atomic_compare_exchange_strong(&g_slots[i].state, &expect, SLOT_FILLING)) continue;
        memcpy(g_slots[i].path, path, n + 1);
        atomic_store(&g_slots[i].state, SLOT_USED); /* a handler sees the whole path or nothing */
        return i;
    }
    return -1;
}

void tempfiles_forget(int slot) {
    if (slot >= 0 && slot < TEMPFILES_MAX) atomic_store(&g_slots[slot].state, SLOT_FREE);
}

void tempfiles_remove_all(void) {
    for (int i = 0; i < TEMPFILES_MAX; i++)
        if (atomic_load(&g_slots[i].state) == SLOT_USED) tempfiles_remove_tree(g_slots[i].path);
}

static int remove_at(int dirfd, const char *name, int depth);

typedef struct {
    int fd, depth, removed, first; /* the folder; what a pass removed; the first errno kept */
} pass;

static int remove_entry(void *ctx, const char *name) {
    pass *p = ctx;
    const int e = remove_at(p->fd, name, p->depth - 1);
    if (!e) p->removed = 1;
    else if (!p->first) p->first = e;
    return 0;
}

/* Remove every entry of the open folder fd; passes repeat while one removes
 * something, since removing entries while reading a folder may skip some. */
static int empty_folder(int fd, int depth) {
    pass p = {.fd = fd, .depth = depth, .removed = 1};
    while (p.removed) {
        p.removed = 0;
        const int e = plat_dir_each(fd, remove_entry, &p);
        if (e) return e;
    } /* the passes end when one removes nothing: only what cannot be removed is left */
    return p.first;
}

/* Remove dirfd/name: a file or link by unlinkat, a folder by emptying it
 * through a descriptor opened without following links. */
static int remove_at(int dirfd, const char *name, int depth) {
    if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT) return 0;
    if (errno != EISDIR && errno != EPERM) return errno;
    if (depth <= 0) return ELOOP;
    const int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return errno;
    int e = empty_folder(fd, depth);
    close(fd);
    if (unlinkat(dirfd, name, AT_REMOVEDIR) != 0 && !e) e = errno;
    return e;
}

int tempfiles_remove_tree(const char *path) { return remove_at(AT_FDCWD, path, TREE_DEPTH); }
