/*
 * int2 — see int2.h.
 */
#define _GNU_SOURCE
#include "int2.h"

#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomic_write.h"
#include "core/inputs.h"
#include "platform/file.h"
#include "core/quant.h"
#include "expert_read.h"

enum { HEADER = 128, VERSION = 2, HASH_OFF = HEADER - 8 }; /* version 2: the experts' hash, not a fingerprint */
static const char MAGIC[8] = {'O', 'C', 'T', 'O', 'I', 'N', 'T', '2'};

struct moe_int2 {
    int fd, dfd;         /* the sidecar, and opened for direct I/O (-1: refused) */
    atomic_bool direct;  /* reads go around the page cache (a memory cgroup would charge it) */
    int n_layer, n_expert;
    uint64_t *layer_off; /* [n_layer] the first record of each layer */
    double kld;
};

/* A 64-bit hash of n bytes, 8 at a time (multiply, xor, rotate): fast enough
 * to check every record as it is read. */
static uint64_t hash64(const uint8_t *p, size_t n, uint64_t h) {
    h ^= 0x9e3779b97f4a7c15ull * (n + 1);
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 29;
    }
    for (; n; p++, n--) h = (h ^ *p) * 0x100000001b3ull;
    return h ^ (h >> 32);
}

/* ---- the 2-bit blocks ---- */

/* Codes and error of block x under step s (levels -3s, -s, s, 3s). */
static double block_err(const float *x, float s, uint8_t c[32]) {
    double e = 0.0;
    for (int j = 0; j < 32; j++) {
        int q = s > 0.0f ? (int)lrintf((x[j] / s + 3.0f) * 0.5f) : 1;
        q = q < 0 ? 0 : q > 3 ? 3 : q;
        c[j] = (uint8_t)q;
        const float d = x[j] - (float)(2 * q - 3) * s;
        e += (double)d * d;
    }
    return e;
}

/* The step with the least squared error: a grid below the largest weight's
 * 3s, then a least-squares refit of the step to the grid's best codes. */
static void quantize_block(const float *x, uint8_t *dst) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    uint8_t c[32], best_c[32];
    float best_s = 0.0f;
    double best = block_err(x, 0.0f, best_c);
    for (int g = 0; g < 14 && amax > 0.0f; g++) {
        const float s = amax / 3.0f * (0.35f + 0.05f * (float)g);
        const double e = block_err(x, s, c);
        if (e < best) best = e, best_s = s, memcpy(best_c, c, 32);
    }
    double xl = 0.0, ll = 0.0;
    for (int j = 0; j < 32; j++) {
        const double l = 2.0 * best_c[j] - 3.0;
        xl += x[j] * l, ll += l * l;
    }
    if (ll > 0.0 && xl > 0.0) {
        const float s = (float)(xl / ll);
        if (block_err(x, s, c) < best) best_s = s, memcpy(best_c, c, 32);
    }
    const fp16_t h = fp32_to_fp16(best_s);
    memcpy(dst, &h, 2);
    memset(dst + 2, 0, 8);
    for (int j = 0; j < 32; j++) dst[2 + j / 4] |= (uint8_t)(best_c[j] << (2 * (j % 4)));
}

void moe_int2_quantize(const float *x, int64_t n, uint8_t *dst) {
    for (int64_t b = 0; b < n / 32; b++) quantize_block(x + 32 * b, dst + MOE_INT2_BLOCK_BYTES * b);
}

/* For a byte of four 2-bit codes, the four Q4_0 nibbles 2c + 5, one a byte
 * (little-endian): a block's 16 code bytes come out as 4 words of 4. */
static uint32_t nibbles_of[256];
static pthread_once_t nibbles_once = PTHREAD_ONCE_INIT;

static void make_nibbles(void) {
    for (int x = 0; x < 256; x++)
        for (int k = 0; k < 4; k++) nibbles_of[x] |= (uint32_t)(2 * ((x >> (2 * k)) & 3) + 5) << (8 * k);
}

void moe_int2_to_q4_0(const uint8_t *src, int64_t n, uint8_t *dst) {
    pthread_once(&nibbles_once, make_nibbles);
    for (int64_t b = 0; b < n / 32; b++) {
        uint8_t in[MOE_INT2_BLOCK_BYTES];
        memcpy(in, src + MOE_INT2_BLOCK_BYTES * b, sizeof in); /* before the output may cover it */
        uint8_t *o = dst + 18 * b;
        memcpy(o, in, 2); /* Q4_0's step: the same fp16 */
        for (int w = 0; w < 4; w++) { /* Q4_0 byte j: weight j low, weight j + 16 high */
            const uint32_t v = nibbles_of[in[2 + w]] | nibbles_of[in[6 + w]] << 4;
            memcpy(o + 2 + 4 * w, &v, 4);
        }
    }
}

/* ---- shapes ---- */

static uint64_t mat_blocks(const model_mat *x) { return (uint64_t)x->n_out * (uint64_t)(x->n_in / 32); }

uint64_t moe_int2_record_bytes(const model *m, int layer) {
    if (!model_layer_moe(&m->hp, layer)) return 0; /* a dense layer of an MoE model: no records */
    model_mat x[3];
    model_expert_mats(m, layer, 0, x);
    return (mat_blocks(&x[0]) + mat_blocks(&x[1]) + mat_blocks(&x[2])) * MOE_INT2_BLOCK_BYTES + 8;
}

bool moe_int2_applicable(const model *m, char *why, int n) {
    for (int l = 0; l < m->hp.n_layer; l++) {
        if (!model_layer_moe(&m->hp, l)) continue;
        model_mat x[3];
        model_expert_mats(m, l, 0, x);
        uint64_t full = 0, blocks = 0;
        for (int i = 0; i < 3; i++) {
            if (x[i].n_in % 32) {
                snprintf(why, (size_t)n, "rows of %lld weights are not whole blocks of 32", (long long)x[i].n_in);
                return false;
            }
            full += (uint64_t)x[i].n_out * x[i].row_bytes;
            blocks += mat_blocks(&x[i]);
        }
        if (full < 18 * blocks) { /* fewer than 4.5 bits a weight: the copy spelt out would not fit its slot */
            snprintf(why, (size_t)n, "the experts take %.2f bits a weight: no fewer for a 2-bit copy spelt out as Q4_0",
                     8.0 * (double)full / (32.0 * (double)blocks));
            return false;
        }
    }
    return true;
}

void moe_int2_path(const char *model_path, char *out, int n) { snprintf(out, (size_t)n, "%s.int2", model_path); }

/* ---- the header ---- */

typedef struct {
    uint32_t n_layer, n_expert, n_embd, n_ff, kld_tokens;
    uint64_t model_size;
    uint64_t experts_hash; /* of every expert matrix's bytes in the model: what the copies were made from */
    /* the model file when experts_hash was taken: while its identity and times
     * are these, the hash stands without reading the experts again */
    uint64_t dev, ino;
    int64_t mtime_ns, ctime_ns;
    double kld;
} header;

/* The hash of every expert matrix's bytes, in (layer, expert, gate/up/down) order. */
static uint64_t experts_hash(const model *m) {
    uint64_t h = 0;
    for (int l = 0; l < m->hp.n_layer; l++)
        for (int e = 0; e < m->hp.n_expert && model_layer_moe(&m->hp, l); e++) {
            model_mat x[3];
            model_expert_mats(m, l, e, x);
            for (int i = 0; i < 3; i++) h = hash64(x[i].data, (size_t)x[i].n_out * x[i].row_bytes, h);
        }
    return h;
}

/* The model file as it is now: its size, identity and times (from the mapping's
 * own stat when mapped, else from the path). */
static err_code file_identity(const model *m, const char *model_path, header *h, err_t *err) {
    struct stat st;
    if (m->gguf && m->gguf->mapped) st = m->gguf->file;
    else if (stat(model_path, &st) != 0) return err_set(err, ERR_IO, "cannot read %s: %s", model_path, strerror(errno));
    h->model_size = (uint64_t)st.st_size;
    h->dev = (uint64_t)st.st_dev, h->ino = (uint64_t)st.st_ino;
    h->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    h->ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
    return ERR_OK;
}

static void header_put(const header *h, uint8_t out[HEADER]) {
    memset(out, 0, HEADER);
    memcpy(out, MAGIC, 8);
    const uint32_t u[6] = {VERSION, h->n_layer, h->n_expert, h->n_embd, h->n_ff, h->kld_tokens};
    memcpy(out + 8, u, sizeof u);
    const uint64_t w[7] = {h->model_size, h->experts_hash, h->dev, h->ino, (uint64_t)h->mtime_ns,
                           (uint64_t)h->ctime_ns, 0};
    memcpy(out + 32, w, sizeof w);
    memcpy(out + 32 + sizeof w, &h->kld, 8);
    const uint64_t hh = hash64(out, HASH_OFF, 0);
    memcpy(out + HASH_OFF, &hh, 8);
}

static err_code header_get(const uint8_t in[HEADER], header *h, err_t *err) {
    uint64_t hh;
    memcpy(&hh, in + HASH_OFF, 8);
    if (memcmp(in, MAGIC, 8) || hh != hash64(in, HASH_OFF, 0)) return err_set(err, ERR_CORRUPT, "a damaged header");
    uint32_t u[6];
    memcpy(u, in + 8, sizeof u);
    if (u[0] != VERSION) return err_set(err, ERR_BAD_VALUE, "version %u, not %d", u[0], VERSION);
    *h = (header){.n_layer = u[1], .n_expert = u[2], .n_embd = u[3], .n_ff = u[4], .kld_tokens = u[5]};
    uint64_t w[7];
    memcpy(w, in + 32, sizeof w);
    h->model_size = w[0], h->experts_hash = w[1], h->dev = w[2], h->ino = w[3];
    h->mtime_ns = (int64_t)w[4], h->ctime_ns = (int64_t)w[5];
    memcpy(&h->kld, in + 32 + sizeof w, 8);
    return ERR_OK;
}

/* The header a sidecar made now would have (experts_hash: taken only when
 * with_hash, since it reads every expert). */
static err_code header_for(const model *m, const char *model_path, bool with_hash, header *h, err_t *err) {
    *h = (header){.n_layer = (uint32_t)m->hp.n_layer, .n_expert = (uint32_t)m->hp.n_expert,
                  .n_embd = (uint32_t)m->hp.n_embd, .n_ff = (uint32_t)m->hp.n_ff, .kld = -1.0};
    if (with_hash) h->experts_hash = experts_hash(m);
    return file_identity(m, model_path, h, err);
}

/* Rewrite the sidecar's header (its records stay). */
static err_code header_rewrite(const char *path, const header *h, err_t *err) {
    const int fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return err_set(err, errno == ENOENT ? ERR_NOT_FOUND : ERR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    uint8_t hb[HEADER];
    header_put(h, hb);
    err_code rc = ERR_OK;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) rc = err_set(err, ERR_IO, "%s is not a regular file", path);
    else if (pwrite(fd, hb, HEADER, 0) != HEADER || fsync(fd))
        rc = err_set(err, ERR_IO, "cannot write %s: %s", path, strerror(errno));
    close(fd);
    return rc;
}

/* ---- writing ---- */

/* One expert's record (its three matrices' blocks, then their hash) into rec. */
static void build_record(const model *m, int layer, int expert, float *row, uint8_t *rec, uint64_t rec_bytes) {
    model_mat x[3];
    model_expert_mats(m, layer, expert, x);
    uint8_t *o = rec;
    for (int i = 0; i < 3; i++)
        for (int64_t r = 0; r < x[i].n_out; r++) {
            quant_dequantize_row(x[i].type, (const uint8_t *)x[i].data + (size_t)r * x[i].row_bytes, row, x[i].n_in);
            moe_int2_quantize(row, x[i].n_in, o);
            o += (x[i].n_in / 32) * MOE_INT2_BLOCK_BYTES;
        }
    const uint64_t h = hash64(rec, rec_bytes - 8, 0);
    memcpy(rec + rec_bytes - 8, &h, 8);
}

err_code moe_int2_build(const model *m, const char *model_path, err_t *err) {
    char why[160], path[4096];
    if (!moe_int2_applicable(m, why, sizeof why)) return err_set(err, ERR_UNSUPPORTED, "no 2-bit copies: %s", why);
    header h;
    err_code rc = header_for(m, model_path, true, &h, err);
    if (rc) return rc;
    uint64_t rec_max = 0;
    for (int l = 0; l < m->hp.n_layer; l++)
        rec_max = moe_int2_record_bytes(m, l) > rec_max ? moe_int2_record_bytes(m, l) : rec_max;
    const int64_t row_max = m->hp.n_ff > m->hp.n_embd ? m->hp.n_ff : m->hp.n_embd;
    uint8_t *rec = malloc(rec_max), hb[HEADER];
    float *row = malloc(sizeof(float) * (size_t)row_max);
    moe_int2_path(model_path, path, sizeof path);
    atomic_file af = {0};
    if (!rec || !row) rc = err_set(err, ERR_NOMEM, "out of memory");
    if (!rc) rc = atomic_file_open(&af, path, err);
    header_put(&h, hb);
    if (!rc) rc = atomic_file_write(&af, hb, HEADER, err);
    for (int l = 0; l < m->hp.n_layer && !rc; l++)
        for (int e = 0; e < m->hp.n_expert && !rc && moe_int2_record_bytes(m, l); e++) {
            const uint64_t rb = moe_int2_record_bytes(m, l);
            build_record(m, l, e, row, rec, rb);
            rc = atomic_file_write(&af, rec, rb, err);
        }
    if (!rc) rc = atomic_file_commit(&af, err);
    else if (af.f) atomic_file_abort(&af);
    free(rec), free(row);
    return rc;
}

/* The header of the sidecar at path, read and checked. */
static err_code header_read(const char *path, header *h, err_t *err) {
    int fd;
    struct stat st;
    err_code rc = input_open(path, &fd, &st, err);
    if (rc) return rc;
    uint8_t hb[HEADER];
    rc = pread(fd, hb, HEADER, 0) == HEADER ? header_get(hb, h, err) : err_set(err, ERR_CORRUPT, "shorter than its header");
    close(fd);
    return rc;
}

err_code moe_int2_set_kld(const char *model_path, double kld, uint32_t tokens, err_t *err) {
    char path[4096];
    moe_int2_path(model_path, path, sizeof path);
    header h;
    err_code rc = header_read(path, &h, err);
    if (rc == ERR_CORRUPT || rc == ERR_BAD_VALUE) return err_set(err, rc, "%s: %s", path, err ? err->msg : "");
    if (rc) return rc;
    h.kld = kld, h.kld_tokens = tokens;
    return header_rewrite(path, &h, err);
}

/* Is the sidecar's header (got) this model's? The shape and size first; then
 * the file's identity and times, which stand for the experts' bytes while they
 * hold; else the experts are hashed again, and when their bytes are the same
 * (the file was copied, or changed elsewhere), the new identity is written
 * into the sidecar so the next load is cheap again. */
static err_code header_matches(const model *m, const char *model_path, const char *path, header *got, err_t *err) {
    header want;
    err_code rc = header_for(m, model_path, false, &want, err);
    if (rc) return rc;
    if (got->n_layer != want.n_layer || got->n_expert != want.n_expert || got->n_embd != want.n_embd ||
        got->n_ff != want.n_ff || got->model_size != want.model_size)
        return err_set(err, ERR_BAD_VALUE, "stale: made for another model");
    if (got->dev == want.dev && got->ino == want.ino && got->mtime_ns == want.mtime_ns && got->ctime_ns == want.ctime_ns)
        return ERR_OK;
    if (experts_hash(m) != got->experts_hash)
        return err_set(err, ERR_BAD_VALUE, "stale: the model's experts changed since it was made");
    got->dev = want.dev, got->ino = want.ino, got->mtime_ns = want.mtime_ns, got->ctime_ns = want.ctime_ns;
    err_t ignored = {0};
    header_rewrite(path, got, &ignored); /* a read-only sidecar stays valid, only dearer to check */
    return ERR_OK;
}

/* ---- reading ---- */

err_code moe_int2_open(const model *m, const char *model_path, moe_int2 **out, err_t *err) {
    *out = NULL;
    char path[4096];
    moe_int2_path(model_path, path, sizeof path);
    int fd;
    struct stat st;
    err_code rc = input_open(path, &fd, &st, err); /* a regular file only: a FIFO would block */
    if (rc) return rc;
    uint8_t hb[HEADER];
    header got;
    rc = pread(fd, hb, HEADER, 0) == HEADER ? header_get(hb, &got, err)
                                            : err_set(err, ERR_CORRUPT, "shorter than its header");
    if (!rc) rc = header_matches(m, model_path, path, &got, err);
    uint64_t end = HEADER;
    moe_int2 *s = rc ? NULL : calloc(1, sizeof *s);
    if (!rc && (!s || !(s->layer_off = malloc(sizeof(uint64_t) * (size_t)m->hp.n_layer))))
        rc = err_set(err, ERR_NOMEM, "out of memory");
    for (int l = 0; !rc && l < m->hp.n_layer; l++)
        s->layer_off[l] = end, end += moe_int2_record_bytes(m, l) * (uint64_t)m->hp.n_expert;
    if (!rc && (uint64_t)st.st_size != end)
        rc = err_set(err, ERR_CORRUPT, "%llu bytes, not %llu", (unsigned long long)st.st_size, (unsigned long long)end);
    if (rc) {
        close(fd);
        if (s) free(s->layer_off), free(s);
        return err_set(err, rc, "%s: %s", path, err ? err->msg : "");
    }
    s->fd = fd, s->n_layer = m->hp.n_layer, s->n_expert = m->hp.n_expert, s->kld = got.kld;
    s->dfd = plat_open_direct(path);
    atomic_init(&s->direct, s->dfd >= 0);
    *out = s;
    return ERR_OK;
}

void moe_int2_close(moe_int2 *s) {
    if (!s) return;
    close(s->fd);
    if (s->dfd >= 0) close(s->dfd);
    free(s->layer_off);
    free(s);
}

double moe_int2_kld(const moe_int2 *s) { return s->kld; }

/* len bytes at off into dst, at least need of them; EINVAL as ERR_INVALID_ARG (direct I/O refused). */
static err_code read_span(int fd, uint8_t *dst, uint64_t len, uint64_t need, uint64_t off, err_t *err) {
    uint64_t done = 0;
    while (done < need) {
        const ssize_t n = pread(fd, dst + done, len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EINVAL && done == 0) return ERR_INVALID_ARG;
        if (n < 0) return err_set(err, ERR_IO, "reading the 2-bit copies: %s", strerror(errno));
        if (n == 0) return err_set(err, ERR_TRUNCATED, "the 2-bit copies' file ends inside a record");
        done += (uint64_t)n;
    }
    return ERR_OK;
}

/* The record of rb bytes at off into *rec, near the end of buf and at
 * least min_at bytes into it (direct I/O: with the blocks around it, read
 * from an aligned place). */
static err_code read_record(moe_int2 *s, uint8_t *buf, uint64_t buf_bytes, uint64_t off, uint64_t rb, uint64_t min_at,
                            uint8_t **rec, err_t *err) {
    const uint64_t start = off / MOE_READ_ALIGN * MOE_READ_ALIGN;
    const uint64_t len = (off + rb + MOE_READ_ALIGN - 1) / MOE_READ_ALIGN * MOE_READ_ALIGN - start;
    uint8_t *dst = len <= buf_bytes ? buf + (buf_bytes - len) / MOE_READ_ALIGN * MOE_READ_ALIGN : NULL;
    if (dst && (uint64_t)(dst + (off - start) - buf) >= min_at && atomic_load(&s->direct)) {
        const err_code rc = read_span(s->dfd, dst, len, off + rb - start, start, err);
        *rec = dst + (off - start);
        if (rc != ERR_INVALID_ARG) return rc;
        atomic_store(&s->direct, false); /* refused here: through the page cache from now on */
    }
    if (buf_bytes < rb + min_at) /* the slot is smaller than moe_int2_applicable promised */
        return err_set(err, ERR_INVALID_ARG, "a buffer of %llu bytes is too small for a 2-bit copy",
                       (unsigned long long)buf_bytes);
    *rec = buf + buf_bytes - rb;
    const err_code rc = read_span(s->fd, *rec, rb, rb, off, err);
    plat_advise_file(s->fd, off, rb, PLAT_ADVICE_DONTNEED);
    return rc;
}

err_code moe_int2_read(moe_int2 *s, const model *m, int layer, int expert, uint8_t *buf, uint64_t buf_bytes,
                       model_mat mats[3], err_t *err) {
    const uint64_t rb = moe_int2_record_bytes(m, layer), off = s->layer_off[layer] + rb * (uint64_t)expert;
    const uint64_t blocks = (rb - 8) / MOE_INT2_BLOCK_BYTES;
    uint8_t *rec = NULL; /* spelt out front to back, the blocks never overtake it: 8 bytes a block ahead */
    const err_code rc = read_record(s, buf, buf_bytes, off, rb, 8 * blocks, &rec, err);
    if (rc) return rc;
    uint64_t h;
    memcpy(&h, rec + rb - 8, 8);
    if (h != hash64(rec, rb - 8, 0))
        return err_set(err, ERR_CORRUPT, "the 2-bit copy of expert %d of layer %d fails its check", expert, layer);
    model_expert_mats(m, layer, expert, mats);
    const uint8_t *src = rec;
    uint8_t *dst = buf;
    for (int i = 0; i < 3; i++) {
        const int64_t n = mats[i].n_out * mats[i].n_in;
        moe_int2_to_q4_0(src, n, dst);
        mats[i] = (model_mat){.data = dst, .type = QT_Q4_0, .n_in = mats[i].n_in, .n_out = mats[i].n_out, .n_mat = 1,
                              .row_bytes = (size_t)(mats[i].n_in / 32) * 18};
        src += (n / 32) * MOE_INT2_BLOCK_BYTES;
        dst += (n / 32) * 18;
    }
    return ERR_OK;
}
