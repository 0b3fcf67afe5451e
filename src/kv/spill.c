/*
 * spill — see spill.h.
 *
 * Slot i lives at offset i * slot_bytes: a 32-byte header, then the payload.
 * Free slots are a stack; the file only grows to the most slots ever used.
 */
#define _GNU_SOURCE
#include "spill.h"
#include "core/clock.h"
#include "platform/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SPILL_MAGIC 0x4c4c5053u /* "SPLL" */

typedef struct {
    uint32_t magic, slot;
    uint64_t len, checksum, reserved;
} record_header;

struct spill_store {
    int fd;
    size_t slot_bytes;
    uint64_t max_bytes;
    int n_slots;           /* slots ever used: the file's extent */
    int *free_slots, n_free, cap_free;
    spill_stats st;
};

static uint64_t fnv1a(const void *p, size_t n, uint64_t h) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t checksum(uint32_t slot, const void *payload, size_t len) {
    uint64_t h = fnv1a(&slot, sizeof slot, 0xcbf29ce484222325ull);
    h = fnv1a(&len, sizeof len, h);
    return fnv1a(payload, len, h);
}

err_code spill_open(const char *dir, size_t payload_bytes, uint64_t max_bytes, spill_store **out, err_t *err) {
    *out = NULL;
    if (!dir || !*dir) return err_set(err, ERR_INVALID_ARG, "no directory for the KV spill file");
    char path[4096];
    if (snprintf(path, sizeof path, "%s/octo-kv-XXXXXX", dir) >= (int)sizeof path)
        return err_set(err, ERR_INVALID_ARG, "spill directory path too long");
    const int fd = mkstemp(path);
    if (fd < 0) return err_set(err, ERR_IO, "cannot create a spill file in %s: %s", dir, strerror(errno));
    unlink(path); /* the open descriptor keeps it; nothing is left behind */
    spill_store *s = calloc(1, sizeof *s);
    if (!s) {
        close(fd);
        return err_set(err, ERR_NOMEM, "out of memory");
    }
    s->fd = fd;
    s->slot_bytes = (sizeof(record_header) + payload_bytes + 4095) / 4096 * 4096;
    s->max_bytes = max_bytes;
    *out = s;
    return ERR_OK;
}

void spill_close(spill_store *s) {
    if (!s) return;
    close(s->fd);
    free(s->free_slots);
    free(s);
}

static err_code write_all(int fd, const void *p, size_t n, off_t off, err_t *err) {
    const uint8_t *b = p;
    while (n) {
        const ssize_t w = pwrite(fd, b, n, off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            const int e = w < 0 ? errno : ENOSPC;
            return err_set(err, e == ENOSPC || e == EDQUOT || e == EFBIG ? ERR_NO_SPACE : ERR_IO,
                           "writing the KV spill file: %s", strerror(e));
        }
        b += w, n -= (size_t)w, off += w;
    }
    return ERR_OK;
}

err_code spill_put(spill_store *s, const void *payload, size_t len, int *slot, err_t *err) {
    if (len + sizeof(record_header) > s->slot_bytes)
        return err_set(err, ERR_INVALID_ARG, "a spill record of %zu bytes does not fit its slot", len);
    int i;
    if (s->n_free) i = s->free_slots[s->n_free - 1];
    else {
        if (s->max_bytes && (uint64_t)(s->n_slots + 1) * s->slot_bytes > s->max_bytes) {
            s->st.write_errors++;
            return err_set(err, ERR_NO_SPACE, "the KV spill file reached its limit of %llu bytes",
                           (unsigned long long)s->max_bytes);
        }
        i = s->n_slots;
    }
    record_header h = {.magic = SPILL_MAGIC, .slot = (uint32_t)i, .len = len, .checksum = checksum((uint32_t)i, payload, len)};
    const off_t off = (off_t)i * (off_t)s->slot_bytes;
    err_code rc = write_all(s->fd, &h, sizeof h, off, err);
    if (!rc) rc = write_all(s->fd, payload, len, off + (off_t)sizeof h, err);
    if (rc) {
        s->st.write_errors++;
        return rc;
    }
    if (s->n_free) s->n_free--;
    else s->n_slots++;
    s->st.writes++;
    s->st.slots_used++;
    *slot = i;
    return ERR_OK;
}

static err_code read_all(int fd, void *p, size_t n, off_t off, err_t *err) {
    uint8_t *b = p;
    while (n) {
        const ssize_t r = pread(fd, b, n, off);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return err_set(err, ERR_IO, "reading the KV spill file: %s", strerror(errno));
        if (r == 0) return err_set(err, ERR_CORRUPT, "the KV spill file ends inside a record (truncated)");
        b += r, n -= (size_t)r, off += r;
    }
    return ERR_OK;
}

err_code spill_get(spill_store *s, int slot, void *dst, size_t len, err_t *err) {
    const uint64_t t0 = clock_ns();
    err_code rc = ERR_OK;
    if (slot < 0 || slot >= s->n_slots) rc = err_set(err, ERR_INVALID_ARG, "no spill slot %d", slot);
    record_header h;
    const off_t off = (off_t)slot * (off_t)s->slot_bytes;
    if (!rc) rc = read_all(s->fd, &h, sizeof h, off, err);
    if (!rc && (h.magic != SPILL_MAGIC || h.slot != (uint32_t)slot || h.len != len))
        rc = err_set(err, ERR_CORRUPT, "KV spill record %d has a bad header", slot);
    if (!rc) rc = read_all(s->fd, dst, len, off + (off_t)sizeof h, err);
    if (!rc && checksum((uint32_t)slot, dst, len) != h.checksum)
        rc = err_set(err, ERR_CORRUPT, "KV spill record %d fails its checksum", slot);
    if (rc) {
        s->st.read_errors++;
        return rc;
    }
    s->st.reads++;
    s->st.read_ns += clock_ns() - t0;
    return ERR_OK;
}

void spill_prefetch(spill_store *s, int slot) {
    if (slot < 0 || slot >= s->n_slots) return;
    plat_advise_file(s->fd, (uint64_t)slot * s->slot_bytes, s->slot_bytes, PLAT_ADVICE_WILLNEED);
    s->st.prefetches++;
}

void spill_release(spill_store *s, int slot) {
    if (slot < 0 || slot >= s->n_slots) return;
    if (s->n_free == s->cap_free) {
        const int cap = s->cap_free ? 2 * s->cap_free : 16;
        int *p = realloc(s->free_slots, sizeof *p * (size_t)cap);
        if (!p) return; /* the slot is only lost to reuse: the file grows instead */
        s->free_slots = p;
        s->cap_free = cap;
    }
    s->free_slots[s->n_free++] = slot;
    s->st.slots_used--;
}

spill_stats spill_get_stats(const spill_store *s) {
    spill_stats st = s->st;
    st.file_bytes = (uint64_t)s->n_slots * s->slot_bytes;
    return st;
}

int spill_fd(const spill_store *s) { return s->fd; }
