/*
 * inputs — see inputs.h.
 */
#include "inputs.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    dev_t dev;
    ino_t ino;
    int count; /* 0: a free entry */
} held_file;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static held_file *g_held;
static int g_n, g_cap;

err_code input_open(const char *path, int *fd, struct stat *st, err_t *err) {
    *fd = -1;
    const int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (f < 0) {
        const int e = errno;
        if (e == ENOENT) return err_set(err, ERR_NOT_FOUND, "%s: no such file", path);
        return err_set(err, ERR_IO, "%s: %s", path, strerror(e));
    }
    err_code rc = ERR_OK;
    if (fstat(f, st) != 0) rc = err_set(err, ERR_IO, "%s: %s", path, strerror(errno));
    else if (S_ISDIR(st->st_mode)) rc = err_set(err, ERR_IS_DIR, "%s is a directory, not a file", path);
    else if (!S_ISREG(st->st_mode)) /* a FIFO, socket or device: octo reads only regular files */
        rc = err_set(err, ERR_IO, "%s is not a regular file", path);
    else if (fcntl(f, F_SETFL, fcntl(f, F_GETFL) & ~O_NONBLOCK) != 0)
        rc = err_set(err, ERR_IO, "%s: %s", path, strerror(errno));
    if (rc) {
        close(f);
        return rc;
    }
    *fd = f;
    return ERR_OK;
}

static held_file *find(const struct stat *st) {
    for (int i = 0; i < g_n; i++)
        if (g_held[i].count && g_held[i].dev == st->st_dev && g_held[i].ino == st->st_ino) return &g_held[i];
    return NULL;
}

/* A free entry, the table grown when full; NULL when memory is out (the file
 * then goes unprotected, which is no worse than before it was opened). */
static held_file *free_entry(void) {
    for (int i = 0; i < g_n; i++)
        if (!g_held[i].count) return &g_held[i];
    if (g_n == g_cap) {
        const int cap = g_cap ? g_cap * 2 : 8;
        held_file *h = realloc(g_held, sizeof *h * (size_t)cap);
        if (!h) return NULL;
        g_held = h, g_cap = cap;
    }
    return &g_held[g_n++];
}

void input_hold(const struct stat *st) {
    pthread_mutex_lock(&g_mu);
    held_file *h = find(st);
    if (!h && (h = free_entry())) *h = (held_file){.dev = st->st_dev, .ino = st->st_ino, .count = 0};
    if (h) h->count++;
    pthread_mutex_unlock(&g_mu);
}

void input_release(const struct stat *st) {
    pthread_mutex_lock(&g_mu);
    held_file *h = find(st);
    if (h) h->count--;
    while (g_n && !g_held[g_n - 1].count) g_n--;
    if (!g_n) { /* nothing held: give the table back (a leak checker sees none) */
        free(g_held);
        g_held = NULL, g_cap = 0;
    }
    pthread_mutex_unlock(&g_mu);
}

bool input_held(const struct stat *st) {
    pthread_mutex_lock(&g_mu);
    const bool held = find(st) != NULL;
    pthread_mutex_unlock(&g_mu);
    return held;
}
