/*
 * checkpoint — a training run's state, written whole or not at all (train/checkpoint.h).
 *
 * Layout (little-endian, as the machine writes it: a checkpoint resumes on
 * the machine that wrote it): "OCTOCKPT", u32 version, u32 identity count,
 * each identity entry (char[32] name, f64 value), i64 step, u64 n, the
 * values, m and v (n f32 each), u64 c, the tokens routed to each expert of
 * an MoE (c i64; 0 for a dense model), then a u64 checksum of everything
 * before it.
 */
#include "train/checkpoint.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/atomic_write.h"
#include "core/checksum.h"

#define MAGIC "OCTOCKPT"
#define VERSION 2u
#define NAME_BYTES 32

void ckpt_id_add(ckpt_identity *id, const char *name, double value) {
    if (id->n >= CKPT_MAX_IDS) return;
    id->name[id->n] = name;
    id->value[id->n++] = value;
}

/* The bytes of the header and identity. */
static size_t head_bytes(int n_ids) { return 8 + 4 + 4 + (size_t)n_ids * (NAME_BYTES + 8) + 8 + 8; }

static void put(uint8_t **p, const void *v, size_t n) {
    memcpy(*p, v, n);
    *p += n;
}

err_code ckpt_write(const char *path, const ckpt_identity *id, const ckpt_state *s, err_t *err) {
    const size_t body = 3 * s->n * sizeof(float) + 8 + s->n_counts * 8, head = head_bytes(id->n);
    uint8_t *buf = malloc(head + body + 8), *p = buf;
    if (!buf) return err_set(err, ERR_NOMEM, "out of memory for a checkpoint of %zu bytes", head + body);
    const uint32_t version = VERSION, n_ids = (uint32_t)id->n;
    const uint64_t n = s->n;
    put(&p, MAGIC, 8), put(&p, &version, 4), put(&p, &n_ids, 4);
    for (int i = 0; i < id->n; i++) {
        char name[NAME_BYTES] = {0};
        strncpy(name, id->name[i], NAME_BYTES - 1);
        put(&p, name, NAME_BYTES), put(&p, &id->value[i], 8);
    }
    put(&p, &s->step, 8), put(&p, &n, 8);
    put(&p, s->values, s->n * sizeof(float)), put(&p, s->m, s->n * sizeof(float)), put(&p, s->v, s->n * sizeof(float));
    const uint64_t nc = s->n_counts;
    put(&p, &nc, 8);
    if (nc) put(&p, s->counts, nc * 8);
    const uint64_t sum = checksum_bytes(buf, (uint64_t)(p - buf), 0);
    put(&p, &sum, 8);
    atomic_file af;
    err_code rc = atomic_file_open(&af, path, err);
    if (!rc && (rc = atomic_file_write(&af, buf, (size_t)(p - buf), err))) atomic_file_abort(&af);
    else if (!rc) rc = atomic_file_commit(&af, err);
    free(buf);
    return rc ? err_prefix(err, "checkpoint %s", path), rc : ERR_OK;
}

static err_code load(const char *path, uint8_t **buf, size_t *len, err_t *err) {
    FILE *f = fopen(path, "rb");
    if (!f && errno == ENOENT) return err_set(err, ERR_NOT_FOUND, "no checkpoint at %s", path);
    if (!f) return err_set(err, ERR_IO, "checkpoint %s: %s", path, strerror(errno));
    err_code rc = ERR_OK;
    long size = -1;
    if (fseek(f, 0, SEEK_END) || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET))
        rc = err_set(err, ERR_IO, "checkpoint %s: cannot read its size", path);
    else if (!(*buf = malloc((size_t)size + 1)))
        rc = err_set(err, ERR_NOMEM, "out of memory for checkpoint %s", path);
    else if (fread(*buf, 1, (size_t)size, f) != (size_t)size)
        rc = err_set(err, ERR_IO, "checkpoint %s: a read failed", path);
    fclose(f);
    *len = (size_t)size;
    return rc;
}

/* The identity in the file against id's: the first difference named. */
static err_code same_identity(const uint8_t *p, uint32_t n_ids, const ckpt_identity *id, const char *path,
                              err_t *err) {
    for (int i = 0; i < id->n; i++) {
        bool found = false;
        for (uint32_t j = 0; j < n_ids && !found; j++) {
            char name[NAME_BYTES];
            double v;
            memcpy(name, p + j * (NAME_BYTES + 8), NAME_BYTES);
            memcpy(&v, p + j * (NAME_BYTES + 8) + NAME_BYTES, 8);
            name[NAME_BYTES - 1] = '\0';
            if (strcmp(name, id->name[i])) continue;
            found = true;
            if (v != id->value[i] && !(isnan(v) && isnan(id->value[i])))
                return err_set(err, ERR_INVALID_ARG, "the checkpoint %s is of a run with %s %.10g, this one has %.10g",
                               path, id->name[i], v, id->value[i]);
        }
        if (!found && id->value[i] != 0.0) /* an entry added since: 0 is what runs before it did */
            return err_set(err, ERR_INVALID_ARG, "the checkpoint %s does not record %s (another version's?)", path,
                           id->name[i]);
    }
    return ERR_OK;
}

err_code ckpt_read(const char *path, const ckpt_identity *id, ckpt_state *s, err_t *err) {
    uint8_t *buf = NULL;
    size_t len = 0;
    err_code rc = load(path, &buf, &len, err);
    uint32_t version = 0, n_ids = 0;
    uint64_t n = 0, nc = 0, sum = 0;
    if (!rc && len >= 16) memcpy(&version, buf + 8, 4), memcpy(&n_ids, buf + 12, 4);
    if (!rc && (len < 16 + 8 || memcmp(buf, MAGIC, 8) || version != VERSION || n_ids > 1024 ||
                len < head_bytes((int)n_ids) + 8))
        rc = err_set(err, ERR_CORRUPT, "%s is not an octo checkpoint of version %u (another version's? --restart "
                     "starts over)", path, VERSION);
    const size_t head = rc ? 0 : head_bytes((int)n_ids);
    if (!rc) {
        memcpy(&s->step, buf + head - 16, 8), memcpy(&n, buf + head - 8, 8);
        memcpy(&sum, buf + len - 8, 8);
        const bool fits = n <= (len - head) / 12 && head + 3 * n * sizeof(float) + 8 <= len - 8;
        if (fits) memcpy(&nc, buf + head + 3 * n * sizeof(float), 8);
        if (!fits || nc > len / 8 || len != head + 3 * n * sizeof(float) + 8 + nc * 8 + 8 ||
            checksum_bytes(buf, len - 8, 0) != sum)
            rc = err_set(err, ERR_CORRUPT, "checkpoint %s is damaged: its checksum does not match", path);
    }
    if (!rc) rc = same_identity(buf + 16, n_ids, id, path, err);
    if (!rc && n != s->n)
        rc = err_set(err, ERR_INVALID_ARG, "the checkpoint %s holds an adapter of %llu values, this run's has %zu", path,
                     (unsigned long long)n, s->n);
    if (!rc && nc != s->n_counts)
        rc = err_set(err, ERR_CORRUPT, "the checkpoint %s counts %llu experts, this model has %zu", path,
                     (unsigned long long)nc, s->n_counts);
    if (!rc) {
        const uint8_t *p = buf + head;
        memcpy(s->values, p, n * sizeof(float)), p += n * sizeof(float);
        memcpy(s->m, p, n * sizeof(float)), p += n * sizeof(float);
        memcpy(s->v, p, n * sizeof(float)), p += n * sizeof(float) + 8;
        if (nc) memcpy(s->counts, p, nc * 8);
    }
    free(buf);
    return rc;
}
