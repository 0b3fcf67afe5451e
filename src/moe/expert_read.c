/*
 * expert_read — see expert_read.h.
 */
#define _GNU_SOURCE
#include "expert_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/inputs.h"
#include "platform/file.h"

struct moe_reader {
    const model *m;
    int fd;              /* buffered */
    int dfd;             /* O_DIRECT, -1: none */
    atomic_bool direct;  /* reads go through dfd */
};

static uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

err_code moe_reader_open(const model *m, const char *path, bool try_direct, moe_reader **out, err_t *err) {
    *out = NULL;
    moe_reader *r = calloc(1, sizeof *r);
    if (!r) return err_set(err, ERR_NOMEM, "out of memory");
    r->m = m;
    struct stat st;
    if (input_open(path, &r->fd, &st, err)) { /* a regular file only: a FIFO would block */
        free(r);
        return err_prefix(err, "cannot open the experts' file"), ERR_IO;
    }
    r->dfd = try_direct ? plat_open_direct(path) : -1;
    atomic_init(&r->direct, r->dfd >= 0);
    *out = r;
    return ERR_OK;
}

void moe_reader_close(moe_reader *r) {
    if (!r) return;
    close(r->fd);
    if (r->dfd >= 0) close(r->dfd);
    free(r);
}

bool moe_reader_direct(const moe_reader *r) { return atomic_load(&r->direct); }

uint64_t moe_reader_buffer_bytes(const model *m) {
    uint64_t most = 0;
    for (int l = 0; l < m->hp.n_layer; l++) {
        expert_extent x;
        model_expert_extent(m, l, 0, &x);
        uint64_t b = 0;
        for (int i = 0; i < 3; i++) b += round_up(x.bytes[i], MOE_READ_ALIGN) + MOE_READ_ALIGN;
        most = b > most ? b : most;
    }
    return most;
}

/* n bytes at off into dst; a read that ends before need bytes is a
 * truncated file. EINVAL is returned as is (direct I/O refused). */
static err_code read_at(int fd, uint8_t *dst, size_t n, size_t need, uint64_t off, err_t *err) {
    size_t done = 0;
    while (done < need) {
        const ssize_t k = pread(fd, dst + done, n - done, (off_t)(off + done));
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && errno == EINVAL && done == 0) return ERR_INVALID_ARG; /* direct I/O refused */
        if (k < 0 && errno == EINVAL) /* a direct read resumed off a block: the file ended mid-block */
            return err_set(err, ERR_TRUNCATED, "the model file ends inside an expert (byte %llu of %zu read)",
                           (unsigned long long)done, need);
        if (k < 0) return err_set(err, ERR_IO, "reading an expert from the model file failed: %s", strerror(errno));
        if (k == 0)
            return err_set(err, ERR_TRUNCATED, "the model file ends inside an expert (byte %llu of %zu read)",
                           (unsigned long long)done, need);
        done += (size_t)k;
    }
    return ERR_OK;
}

/* One matrix of n bytes at file offset off into dst (room for it and the
 * blocks around it); *data: where it starts. */
static err_code read_matrix(moe_reader *r, uint8_t *dst, uint64_t off, size_t n, uint8_t **data, err_t *err) {
    if (atomic_load(&r->direct)) {
        const uint64_t start = off / MOE_READ_ALIGN * MOE_READ_ALIGN;
        const size_t len = (size_t)(round_up(off + n, MOE_READ_ALIGN) - start), need = (size_t)(off + n - start);
        const err_code rc = read_at(r->dfd, dst, len, need, start, err);
        if (rc != ERR_INVALID_ARG) {
            *data = dst + (off - start);
            return rc;
        }
        atomic_store(&r->direct, false); /* refused here: through the page cache from now on */
    }
    const err_code rc = read_at(r->fd, dst, n, n, off, err);
    if (rc == ERR_INVALID_ARG) return err_set(err, ERR_IO, "reading an expert from the model file failed: %s", strerror(EINVAL));
    plat_advise_file(r->fd, off, n, PLAT_ADVICE_DONTNEED); /* the buffer holds it now */
    *data = dst;
    return rc;
}

err_code moe_reader_read(moe_reader *r, int layer, int expert, uint8_t *buf, uint8_t *tmp, model_mat mats[3],
                         err_t *err) {
    expert_extent x;
    model_expert_extent(r->m, layer, expert, &x);
    model_expert_mats(r->m, layer, expert, mats);
    size_t at = 0;
    for (int i = 0; i < 3; i++) {
        uint8_t *data = NULL;
        const err_code rc = read_matrix(r, buf + at, x.offset[i], x.bytes[i], &data, err);
        if (rc) return rc;
        mats[i].data = data;
        at += round_up(x.bytes[i], MOE_READ_ALIGN) + MOE_READ_ALIGN;
    }
    model_expert_pack(r->m, layer, mats, tmp);
    return ERR_OK;
}
