/*
 * gguf — reader and writer. See gguf.h for the contract.
 *
 * The reader is a bounds-checked cursor over the mapped bytes. Every read goes
 * through cur_need(), which fails with ERR_TRUNCATED instead of reading past
 * the end; every count that sizes an allocation is first bounded by what the
 * remaining bytes could possibly hold, so a hostile header cannot make us
 * allocate gigabytes; every product of sizes goes through mul_ok()/add_ok().
 * Nested arrays are bounded in depth so a crafted file cannot exhaust the
 * stack. The fuzz target in fuzz/ drives exactly this code.
 */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_write.h"
#include "inputs.h"
#include "quant.h"

#define GGUF_MAX_ARRAY_DEPTH 8

static bool mul_ok(uint64_t a, uint64_t b, uint64_t *out) {
    if (a != 0 && b > UINT64_MAX / a) return false;
    *out = a * b;
    return true;
}

static bool add_ok(uint64_t a, uint64_t b, uint64_t *out) {
    if (b > UINT64_MAX - a) return false;
    *out = a + b;
    return true;
}

/* ---------------------------------------------------------------- reader */

typedef struct {
    const uint8_t *base;
    uint64_t size, off;
    err_t *err;
} cursor;

static uint64_t cur_left(const cursor *c) { return c->size - c->off; }

static err_code cur_need(cursor *c, uint64_t n, const char *what) {
    if (n > cur_left(c))
        return err_set(c->err, ERR_TRUNCATED,
                       "truncated: the file ends at byte %llu while reading %s (%llu more bytes needed)",
                       (unsigned long long)c->size, what, (unsigned long long)(n - cur_left(c)));
    return ERR_OK;
}

static err_code cur_u32(cursor *c, uint32_t *v, const char *what) {
    err_code rc = cur_need(c, 4, what);
    if (rc) return rc;
    memcpy(v, c->base + c->off, 4);
    c->off += 4;
    return ERR_OK;
}

static err_code cur_u64(cursor *c, uint64_t *v, const char *what) {
    err_code rc = cur_need(c, 8, what);
    if (rc) return rc;
    memcpy(v, c->base + c->off, 8);
    c->off += 8;
    return ERR_OK;
}

static err_code cur_str(cursor *c, gguf_str *s, const char *what) {
    err_code rc = cur_u64(c, &s->len, what);
    if (rc) return rc;
    if ((rc = cur_need(c, s->len, what))) return rc;
    s->ptr = (const char *)c->base + c->off;
    c->off += s->len;
    return ERR_OK;
}

static char *str_dup(gguf_str s) {
    char *p = malloc(s.len + 1);
    if (!p) return NULL;
    memcpy(p, s.ptr, s.len);
    p[s.len] = '\0';
    return p;
}

static uint64_t scalar_size(gguf_type t) {
    switch (t) {
    case GGUF_UINT8: case GGUF_INT8: case GGUF_BOOL: return 1;
    case GGUF_UINT16: case GGUF_INT16: return 2;
    case GGUF_UINT32: case GGUF_INT32: case GGUF_FLOAT32: return 4;
    case GGUF_UINT64: case GGUF_INT64: case GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

const char *gguf_type_name(gguf_type t) {
    static const char *const names[GGUF_TYPE_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64"};
    return (unsigned)t < GGUF_TYPE_COUNT ? names[t] : "?";
}

/* Decode one fixed-size scalar at p into v. */
static void scalar_decode(gguf_type t, const uint8_t *p, gguf_value *v) {
    v->type = t;
    switch (t) {
    case GGUF_UINT8: v->v.u64 = p[0]; break;
    case GGUF_BOOL: v->v.u64 = p[0] != 0; break;
    case GGUF_INT8: v->v.i64 = (int8_t)p[0]; break;
    case GGUF_UINT16: { uint16_t x; memcpy(&x, p, 2); v->v.u64 = x; break; }
    case GGUF_INT16: { int16_t x; memcpy(&x, p, 2); v->v.i64 = x; break; }
    case GGUF_UINT32: { uint32_t x; memcpy(&x, p, 4); v->v.u64 = x; break; }
    case GGUF_INT32: { int32_t x; memcpy(&x, p, 4); v->v.i64 = x; break; }
    case GGUF_FLOAT32: { float x; memcpy(&x, p, 4); v->v.f64 = x; break; }
    case GGUF_UINT64: { uint64_t x; memcpy(&x, p, 8); v->v.u64 = x; break; }
    case GGUF_INT64: { int64_t x; memcpy(&x, p, 8); v->v.i64 = x; break; }
    case GGUF_FLOAT64: { double x; memcpy(&x, p, 8); v->v.f64 = x; break; }
    default: break;
    }
}

static void value_free(gguf_value *v) {
    if (v->type != GGUF_ARRAY) return;
    free(v->v.arr.strs);
    if (v->v.arr.items) {
        for (uint64_t i = 0; i < v->v.arr.n; i++) value_free(&v->v.arr.items[i]);
        free(v->v.arr.items);
    }
}

static err_code read_value(cursor *c, gguf_type type, gguf_value *v, int depth, const char *key);

static err_code read_array(cursor *c, gguf_value *v, int depth, const char *key) {
    uint32_t et;
    uint64_t n;
    err_code rc;
    if ((rc = cur_u32(c, &et, "array element type"))) return rc;
    if ((rc = cur_u64(c, &n, "array length"))) return rc;
    v->type = GGUF_ARRAY;
    v->v.arr.elem_type = (gguf_type)et;
    v->v.arr.n = n;
    if (et >= GGUF_TYPE_COUNT)
        return err_set(c->err, ERR_BAD_METADATA, "key '%s': array element type %u is not a GGUF type", key, et);
    if (et == GGUF_ARRAY && depth + 1 >= GGUF_MAX_ARRAY_DEPTH)
        return err_set(c->err, ERR_BAD_METADATA, "key '%s': arrays nested deeper than %d", key, GGUF_MAX_ARRAY_DEPTH);
    uint64_t es = scalar_size((gguf_type)et);
    if (es) {
        uint64_t bytes;
        if (!mul_ok(n, es, &bytes))
            return err_set(c->err, ERR_OVERFLOW, "key '%s': array of %llu elements overflows", key, (unsigned long long)n);
        if ((rc = cur_need(c, bytes, "array data"))) return rc;
        v->v.arr.raw = c->base + c->off;
        c->off += bytes;
        return ERR_OK;
    }
    /* Variable-size elements: each takes at least 8 (string) or 12 (array)
     * bytes, which bounds n by what is left before anything is allocated. */
    uint64_t min_each = et == GGUF_STRING ? 8 : 12;
    if (n > cur_left(c) / min_each)
        return err_set(c->err, ERR_TRUNCATED, "truncated: key '%s' has an array of %llu elements, which cannot fit in the %llu bytes left",
                       key, (unsigned long long)n, (unsigned long long)cur_left(c));
    if (et == GGUF_STRING) {
        v->v.arr.strs = malloc((n ? n : 1) * sizeof(gguf_str));
        if (!v->v.arr.strs) return err_set(c->err, ERR_NOMEM, "key '%s': out of memory", key);
        for (uint64_t i = 0; i < n; i++)
            if ((rc = cur_str(c, &v->v.arr.strs[i], "array string"))) return rc;
        return ERR_OK;
    }
    v->v.arr.items = calloc(n ? n : 1, sizeof(gguf_value));
    if (!v->v.arr.items) return err_set(c->err, ERR_NOMEM, "key '%s': out of memory", key);
    for (uint64_t i = 0; i < n; i++)
        if ((rc = read_value(c, GGUF_ARRAY, &v->v.arr.items[i], depth + 1, key))) {
            v->v.arr.n = i + 1; /* free only what was built */
            return rc;
        }
    return ERR_OK;
}

static err_code read_value(cursor *c, gguf_type type, gguf_value *v, int depth, const char *key) {
    memset(v, 0, sizeof *v);
    v->type = type;
    if (type == GGUF_STRING) return cur_str(c, &v->v.str, "string value");
    if (type == GGUF_ARRAY) return read_array(c, v, depth, key);
    uint64_t es = scalar_size(type);
    if (!es) return err_set(c->err, ERR_BAD_METADATA, "key '%s': value type %u is not a GGUF type", key, (unsigned)type);
    err_code rc = cur_need(c, es, "value");
    if (rc) return rc;
    scalar_decode(type, c->base + c->off, v);
    c->off += es;
    return ERR_OK;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Fails when two entries of names[] are equal. */
static err_code check_unique(char **names, uint64_t n, const char *what, err_t *err) {
    if (n < 2) return ERR_OK;
    char **sorted = malloc(n * sizeof *sorted);
    if (!sorted) return err_set(err, ERR_NOMEM, "out of memory");
    memcpy(sorted, names, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_names);
    err_code rc = ERR_OK;
    for (uint64_t i = 1; i < n; i++)
        if (!strcmp(sorted[i - 1], sorted[i])) {
            rc = err_set(err, ERR_BAD_METADATA, "duplicate %s '%s'", what, sorted[i]);
            break;
        }
    free(sorted);
    return rc;
}

static err_code read_tensor_info(cursor *c, gguf_tensor *t) {
    gguf_str name;
    err_code rc;
    if ((rc = cur_str(c, &name, "tensor name"))) return rc;
    if (!(t->name = str_dup(name))) return err_set(c->err, ERR_NOMEM, "out of memory");
    if ((rc = cur_u32(c, &t->n_dims, "tensor dimension count"))) return rc;
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return err_set(c->err, ERR_BAD_SHAPE, "tensor '%s' has %u dimensions (1..%d allowed)", t->name, t->n_dims,
                       GGUF_MAX_DIMS);
    uint64_t n_el = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t ne;
        if ((rc = cur_u64(c, &ne, "tensor dimension"))) return rc;
        if (ne > (uint64_t)INT64_MAX)
            return err_set(c->err, ERR_OVERFLOW, "tensor '%s' dimension %u is %llu", t->name, d, (unsigned long long)ne);
        t->ne[d] = (int64_t)ne;
        if (!mul_ok(n_el, ne, &n_el) || n_el > (uint64_t)INT64_MAX)
            return err_set(c->err, ERR_OVERFLOW, "tensor '%s': the product of its dimensions overflows", t->name);
    }
    t->n_elements = n_el;
    if ((rc = cur_u32(c, &t->type, "tensor type"))) return rc;
    const quant_traits *tr = quant_traits_of(t->type);
    if (!tr) return err_set(c->err, ERR_BAD_TENSOR_TYPE, "tensor '%s' has unknown type id %u", t->name, t->type);
    if (t->ne[0] % tr->block_size)
        return err_set(c->err, ERR_BAD_SHAPE, "tensor '%s': row length %lld is not a multiple of %s's block of %d",
                       t->name, (long long)t->ne[0], tr->name, tr->block_size);
    if (!mul_ok(n_el / tr->block_size, tr->type_size, &t->n_bytes))
        return err_set(c->err, ERR_OVERFLOW, "tensor '%s': byte size overflows", t->name);
    return cur_u64(c, &t->offset, "tensor offset");
}

/* Flag every tensor whose bytes overlap another's (two names for one range
 * are legal GGUF, but whoever rewrites a tensor in place must know). */
static int by_start(const void *a, const void *b) {
    const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
    return x->data < y->data ? -1 : x->data > y->data;
}

static err_code mark_shared(gguf_ctx *g, err_t *err) {
    if (g->n_tensors < 2) return ERR_OK;
    gguf_tensor **order = malloc(sizeof *order * g->n_tensors);
    if (!order) return err_set(err, ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < g->n_tensors; i++) order[i] = &g->tensors[i];
    qsort(order, g->n_tensors, sizeof *order, by_start);
    /* sweep: the tensor reaching furthest so far overlaps any that starts before its end */
    gguf_tensor *reach = order[0];
    for (uint64_t i = 1; i < g->n_tensors; i++) {
        gguf_tensor *t = order[i];
        if (t->n_bytes && reach->n_bytes && (const uint8_t *)t->data < (const uint8_t *)reach->data + reach->n_bytes)
            t->shares_bytes = reach->shares_bytes = true;
        if ((const uint8_t *)t->data + t->n_bytes > (const uint8_t *)reach->data + reach->n_bytes) reach = t;
    }
    free(order);
    return ERR_OK;
}

static err_code parse(gguf_ctx *g, err_t *err) {
    cursor c = {g->base, g->size, 0, err};
    uint32_t magic;
    err_code rc;
    if (g->size == 0) return err_set(err, ERR_EMPTY_FILE, "the file is empty (0 bytes)");
    if (g->size < 4) return err_set(err, ERR_TRUNCATED, "truncated: a file of %llu bytes is too short for a GGUF header",
                                    (unsigned long long)g->size);
    memcpy(&magic, g->base, 4);
    if (magic != GGUF_MAGIC)
        return err_set(err, ERR_BAD_MAGIC, "bad magic %02x %02x %02x %02x (expected 'GGUF')", g->base[0],
                       g->base[1], g->base[2], g->base[3]);
    c.off = 4;
    if ((rc = cur_u32(&c, &g->version, "version"))) return rc;
    if (g->version != 2 && g->version != 3) {
        if (g->version == 1) return err_set(err, ERR_BAD_VERSION, "GGUF version 1 is not supported (only 2 and 3)");
        if ((g->version & 0xFFFF) == 0)
            return err_set(err, ERR_BAD_VERSION, "GGUF version 0x%08x looks big-endian, which is not supported", g->version);
        return err_set(err, ERR_BAD_VERSION, "unknown GGUF version %u (2 and 3 are supported)", g->version);
    }
    if ((rc = cur_u64(&c, &g->n_tensors, "tensor count"))) return rc;
    if ((rc = cur_u64(&c, &g->n_kv, "metadata count"))) return rc;

    /* A key/value takes at least 8 (key length) + 4 (type) + 1 bytes; a tensor
     * info at least 8 + 4 + 8 + 4 + 8. Larger counts cannot be genuine. */
    if (g->n_kv > cur_left(&c) / 13)
        return err_set(err, ERR_TRUNCATED, "truncated: %llu metadata entries cannot fit in a file of %llu bytes",
                       (unsigned long long)g->n_kv, (unsigned long long)g->size);
    if (g->n_tensors > cur_left(&c) / 32)
        return err_set(err, ERR_TRUNCATED, "truncated: %llu tensor infos cannot fit in a file of %llu bytes",
                       (unsigned long long)g->n_tensors, (unsigned long long)g->size);

    g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors) return err_set(err, ERR_NOMEM, "out of memory");

    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        gguf_kv *kv = &g->kv[i];
        gguf_str key;
        uint32_t type;
        if ((rc = cur_str(&c, &key, "metadata key"))) return rc;
        if (!(kv->key = str_dup(key))) return err_set(err, ERR_NOMEM, "out of memory");
        if (strlen(kv->key) != key.len)
            return err_set(err, ERR_BAD_METADATA, "metadata key %llu contains a NUL byte", (unsigned long long)i);
        if ((rc = cur_u32(&c, &type, "metadata value type"))) return rc;
        if (type >= GGUF_TYPE_COUNT)
            return err_set(err, ERR_BAD_METADATA, "key '%s' has value type %u, which is not a GGUF type", kv->key, type);
        if ((rc = read_value(&c, (gguf_type)type, &kv->value, 0, kv->key))) return rc;
    }
    char **names = malloc((g->n_kv > g->n_tensors ? g->n_kv : g->n_tensors) * sizeof(char *) + 1);
    if (!names) return err_set(err, ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < g->n_kv; i++) names[i] = g->kv[i].key;
    rc = check_unique(names, g->n_kv, "metadata key", err);
    if (rc) { free(names); return rc; }

    const gguf_kv *al = gguf_find_kv(g, "general.alignment");
    if (al) {
        if (al->value.type != GGUF_UINT32)
            rc = err_set(err, ERR_BAD_VALUE, "general.alignment must be u32, not %s", gguf_type_name(al->value.type));
        else if (al->value.v.u64 < 8 || (al->value.v.u64 & (al->value.v.u64 - 1)))
            rc = err_set(err, ERR_BAD_VALUE, "general.alignment %llu is not a power of two of at least 8",
                         (unsigned long long)al->value.v.u64);
        else
            g->alignment = al->value.v.u64;
        if (rc) { free(names); return rc; }
    }

    for (uint64_t i = 0; i < g->n_tensors; i++)
        if ((rc = read_tensor_info(&c, &g->tensors[i]))) {
            free(names);
            return rc;
        }
    for (uint64_t i = 0; i < g->n_tensors; i++) names[i] = g->tensors[i].name;
    rc = check_unique(names, g->n_tensors, "tensor name", err);
    free(names);
    if (rc) return rc;

    /* Tensor data starts at the next multiple of the alignment. */
    uint64_t data = c.off + (g->alignment - c.off % g->alignment) % g->alignment;
    g->data_offset = data;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        gguf_tensor *t = &g->tensors[i];
        uint64_t start, end;
        if (t->offset % g->alignment)
            return err_set(err, ERR_BAD_VALUE, "tensor '%s' offset %llu is not a multiple of the alignment %llu", t->name,
                           (unsigned long long)t->offset, (unsigned long long)g->alignment);
        if (!add_ok(data, t->offset, &start) || !add_ok(start, t->n_bytes, &end) || end > g->size)
            return err_set(err, ERR_TENSOR_BOUNDS,
                           "tensor '%s' (%llu bytes at offset %llu) runs past the end of the %llu-byte file", t->name,
                           (unsigned long long)t->n_bytes, (unsigned long long)t->offset, (unsigned long long)g->size);
        t->data = g->base + start;
    }
    return mark_shared(g, err);
}

static err_code open_common(gguf_ctx *g, gguf_ctx **out, err_t *err) {
    err_code rc = parse(g, err);
    if (rc) {
        gguf_close(g);
        return rc;
    }
    *out = g;
    return ERR_OK;
}

err_code gguf_open_buffer(const void *buf, uint64_t size, gguf_ctx **out, err_t *err) {
    *out = NULL;
    gguf_ctx *g = calloc(1, sizeof *g);
    if (!g) return err_set(err, ERR_NOMEM, "out of memory");
    g->base = buf;
    g->size = size;
    return open_common(g, out, err);
}

err_code gguf_open(const char *path, gguf_ctx **out, err_t *err) {
    *out = NULL;
    struct stat st;
    int fd;
    err_code rc = input_open(path, &fd, &st, err); /* a regular file only: a FIFO would block */
    if (rc == ERR_IS_DIR) return err_set(err, ERR_IS_DIR, "%s is a directory, not a model file", path);
    if (rc) return rc;
    if (st.st_size == 0) {
        close(fd);
        return err_set(err, ERR_EMPTY_FILE, "%s is empty (0 bytes)", path);
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return err_set(err, ERR_IO, "%s: mmap failed: %s", path, strerror(errno));
    gguf_ctx *g = calloc(1, sizeof *g);
    if (!g) {
        munmap(map, (size_t)st.st_size);
        return err_set(err, ERR_NOMEM, "out of memory");
    }
    g->base = map;
    g->size = (uint64_t)st.st_size;
    g->mapped = 1;
    g->file = st;
    input_hold(&g->file); /* no writer in this process may replace it while it is mapped */
    rc = open_common(g, out, err);
    if (rc) err_prefix(err, "%s", path);
    return rc;
}

uint8_t *gguf_writable_data(gguf_ctx *g) {
    if (!g || !g->mapped) return NULL;
    if (mprotect((void *)g->base, (size_t)g->size, PROT_READ | PROT_WRITE) != 0) return NULL;
    return (uint8_t *)g->base;
}

void gguf_close(gguf_ctx *g) {
    if (!g) return;
    if (g->kv)
        for (uint64_t i = 0; i < g->n_kv; i++) {
            free(g->kv[i].key);
            value_free(&g->kv[i].value);
        }
    if (g->tensors)
        for (uint64_t i = 0; i < g->n_tensors; i++) free(g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    if (g->mapped) {
        munmap((void *)g->base, g->size);
        input_release(&g->file);
    }
    free(g);
}

const gguf_kv *gguf_find_kv(const gguf_ctx *g, const char *key) {
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (g->kv[i].key && !strcmp(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_ctx *g, const char *name) {
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (!strcmp(g->tensors[i].name, name)) return &g->tensors[i];
    return NULL;
}

static bool is_unsigned(gguf_type t) {
    return t == GGUF_UINT8 || t == GGUF_UINT16 || t == GGUF_UINT32 || t == GGUF_UINT64 || t == GGUF_BOOL;
}
static bool is_signed(gguf_type t) {
    return t == GGUF_INT8 || t == GGUF_INT16 || t == GGUF_INT32 || t == GGUF_INT64;
}

bool gguf_get_u64(const gguf_ctx *g, const char *key, uint64_t *out) {
    const gguf_kv *kv = gguf_find_kv(g, key);
    if (!kv) return false;
    if (is_unsigned(kv->value.type) && kv->value.type != GGUF_BOOL) { *out = kv->value.v.u64; return true; }
    if (is_signed(kv->value.type) && kv->value.v.i64 >= 0) { *out = (uint64_t)kv->value.v.i64; return true; }
    return false;
}

bool gguf_get_u32(const gguf_ctx *g, const char *key, uint32_t *out) {
    uint64_t v;
    if (!gguf_get_u64(g, key, &v) || v > UINT32_MAX) return false;
    *out = (uint32_t)v;
    return true;
}

bool gguf_get_i64(const gguf_ctx *g, const char *key, int64_t *out) {
    const gguf_kv *kv = gguf_find_kv(g, key);
    if (!kv) return false;
    if (is_signed(kv->value.type)) { *out = kv->value.v.i64; return true; }
    if (is_unsigned(kv->value.type) && kv->value.type != GGUF_BOOL && kv->value.v.u64 <= (uint64_t)INT64_MAX) {
        *out = (int64_t)kv->value.v.u64;
        return true;
    }
    return false;
}

bool gguf_get_f32(const gguf_ctx *g, const char *key, float *out) {
    const gguf_kv *kv = gguf_find_kv(g, key);
    if (!kv || (kv->value.type != GGUF_FLOAT32 && kv->value.type != GGUF_FLOAT64)) return false;
    *out = (float)kv->value.v.f64;
    return true;
}

bool gguf_get_bool(const gguf_ctx *g, const char *key, bool *out) {
    const gguf_kv *kv = gguf_find_kv(g, key);
    if (!kv || kv->value.type != GGUF_BOOL) return false;
    *out = kv->value.v.u64 != 0;
    return true;
}

bool gguf_get_str(const gguf_ctx *g, const char *key, gguf_str *out) {
    const gguf_kv *kv = gguf_find_kv(g, key);
    if (!kv || kv->value.type != GGUF_STRING) return false;
    *out = kv->value.v.str;
    return true;
}

const gguf_value *gguf_get_arr(const gguf_ctx *g, const char *key) {
    const gguf_kv *kv = gguf_find_kv(g, key);
    return kv && kv->value.type == GGUF_ARRAY ? &kv->value : NULL;
}

double gguf_arr_f64(const gguf_value *a, uint64_t i) {
    gguf_value v = {.type = GGUF_UINT8};
    uint64_t es = scalar_size(a->v.arr.elem_type);
    if (!es) return 0.0;
    scalar_decode(a->v.arr.elem_type, (const uint8_t *)a->v.arr.raw + i * es, &v);
    if (v.type == GGUF_FLOAT32 || v.type == GGUF_FLOAT64) return v.v.f64;
    return is_signed(v.type) ? (double)v.v.i64 : (double)v.v.u64;
}

int64_t gguf_arr_i64(const gguf_value *a, uint64_t i) {
    gguf_value v = {.type = GGUF_UINT8};
    uint64_t es = scalar_size(a->v.arr.elem_type);
    if (!es) return 0;
    scalar_decode(a->v.arr.elem_type, (const uint8_t *)a->v.arr.raw + i * es, &v);
    if (v.type == GGUF_FLOAT32 || v.type == GGUF_FLOAT64) { /* a float read as an integer: saturated, NaN 0 */
        const double f = v.v.f64;
        return !(f == f) ? 0 : f >= 9.2233720368547748e18 ? INT64_MAX : f <= -9.2233720368547758e18 ? INT64_MIN
                                                                                                    : (int64_t)f;
    }
    return is_signed(v.type) ? v.v.i64 : (int64_t)v.v.u64;
}

bool gguf_str_eq(gguf_str s, const char *cstr) {
    size_t n = strlen(cstr);
    return s.len == n && memcmp(s.ptr, cstr, n) == 0;
}

/* ---------------------------------------------------------------- writer */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} bytes;

static bool bytes_put(bytes *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) return false;
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
    return true;
}
static bool bytes_u32(bytes *b, uint32_t v) { return bytes_put(b, &v, 4); }
static bool bytes_u64(bytes *b, uint64_t v) { return bytes_put(b, &v, 8); }
static bool bytes_str(bytes *b, const char *s, uint64_t n) { return bytes_u64(b, n) && bytes_put(b, s, n); }

typedef struct {
    char *key;
    bytes enc; /* type tag + payload, as in the file */
} wkv;

typedef struct {
    char *name;
    uint32_t type, n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    uint64_t n_bytes;
    void *data; /* owned copy, or NULL for the fill callback */
} wtensor;

struct gguf_writer {
    uint32_t version;
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
};

gguf_writer *gguf_writer_new(void) {
    gguf_writer *w = calloc(1, sizeof *w);
    if (w) w->version = 3;
    return w;
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].enc.p);
    }
    for (size_t i = 0; i < w->n_t; i++) {
        free(w->t[i].name);
        free(w->t[i].data);
    }
    free(w->kv);
    free(w->t);
    free(w);
}

void gguf_writer_set_version(gguf_writer *w, uint32_t version) { w->version = version; }

/* The slot for key: the existing one (cleared) or a new one. */
static bytes *kv_slot(gguf_writer *w, const char *key) {
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key)) {
            w->kv[i].enc.n = 0;
            return &w->kv[i].enc;
        }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? 2 * w->cap_kv : 16;
        wkv *p = realloc(w->kv, cap * sizeof *p);
        if (!p) return NULL;
        w->kv = p;
        w->cap_kv = cap;
    }
    wkv *kv = &w->kv[w->n_kv];
    memset(kv, 0, sizeof *kv);
    if (!(kv->key = strdup(key))) return NULL;
    w->n_kv++;
    return &kv->enc;
}

static err_code set_scalar(gguf_writer *w, const char *key, gguf_type t, const void *v, size_t n) {
    bytes *b = kv_slot(w, key);
    return b && bytes_u32(b, t) && bytes_put(b, v, n) ? ERR_OK : ERR_NOMEM;
}

void gguf_writer_set_alignment(gguf_writer *w, uint32_t alignment) {
    set_scalar(w, "general.alignment", GGUF_UINT32, &alignment, 4);
}

/* The alignment the file will declare: general.alignment when set (by
 * gguf_writer_set_alignment or copied from another file), else the default. */
static uint32_t writer_alignment(const gguf_writer *w) {
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, "general.alignment") && w->kv[i].enc.n == 8) {
            uint32_t type, v;
            memcpy(&type, w->kv[i].enc.p, 4);
            memcpy(&v, w->kv[i].enc.p + 4, 4);
            if (type == GGUF_UINT32 && v && !(v & (v - 1))) return v;
        }
    return GGUF_DEFAULT_ALIGNMENT;
}

err_code gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v) { return set_scalar(w, key, GGUF_UINT32, &v, 4); }
err_code gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v) { return set_scalar(w, key, GGUF_INT32, &v, 4); }
err_code gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v) { return set_scalar(w, key, GGUF_UINT64, &v, 8); }
err_code gguf_writer_set_f32(gguf_writer *w, const char *key, float v) { return set_scalar(w, key, GGUF_FLOAT32, &v, 4); }
err_code gguf_writer_set_bool(gguf_writer *w, const char *key, bool v) {
    uint8_t b = v;
    return set_scalar(w, key, GGUF_BOOL, &b, 1);
}
err_code gguf_writer_set_str(gguf_writer *w, const char *key, const char *v) {
    bytes *b = kv_slot(w, key);
    return b && bytes_u32(b, GGUF_STRING) && bytes_str(b, v, strlen(v)) ? ERR_OK : ERR_NOMEM;
}
err_code gguf_writer_set_raw(gguf_writer *w, const char *key, gguf_type type, const void *raw, uint64_t n) {
    bytes *b = kv_slot(w, key);
    return b && bytes_u32(b, type) && bytes_put(b, raw, n) ? ERR_OK : ERR_NOMEM;
}
err_code gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *v, uint64_t n) {
    bytes *b = kv_slot(w, key);
    if (!b || !bytes_u32(b, GGUF_ARRAY) || !bytes_u32(b, GGUF_STRING) || !bytes_u64(b, n)) return ERR_NOMEM;
    for (uint64_t i = 0; i < n; i++)
        if (!bytes_str(b, v[i], strlen(v[i]))) return ERR_NOMEM;
    return ERR_OK;
}
static err_code set_arr_fixed(gguf_writer *w, const char *key, gguf_type et, const void *v, uint64_t n, size_t es) {
    bytes *b = kv_slot(w, key);
    return b && bytes_u32(b, GGUF_ARRAY) && bytes_u32(b, et) && bytes_u64(b, n) && bytes_put(b, v, n * es) ? ERR_OK
                                                                                                        : ERR_NOMEM;
}
err_code gguf_writer_set_arr_f32(gguf_writer *w, const char *key, const float *v, uint64_t n) {
    return set_arr_fixed(w, key, GGUF_FLOAT32, v, n, 4);
}
err_code gguf_writer_set_arr_i32(gguf_writer *w, const char *key, const int32_t *v, uint64_t n) {
    return set_arr_fixed(w, key, GGUF_INT32, v, n, 4);
}

/* Append the encoding of v (without its type tag) to b. */
static bool encode_value(bytes *b, const gguf_value *v) {
    switch (v->type) {
    case GGUF_STRING: return bytes_str(b, v->v.str.ptr, v->v.str.len);
    case GGUF_ARRAY: {
        gguf_type et = v->v.arr.elem_type;
        if (!bytes_u32(b, et) || !bytes_u64(b, v->v.arr.n)) return false;
        if (et == GGUF_STRING) {
            for (uint64_t i = 0; i < v->v.arr.n; i++)
                if (!bytes_str(b, v->v.arr.strs[i].ptr, v->v.arr.strs[i].len)) return false;
            return true;
        }
        if (et == GGUF_ARRAY) {
            for (uint64_t i = 0; i < v->v.arr.n; i++)
                if (!encode_value(b, &v->v.arr.items[i])) return false;
            return true;
        }
        return bytes_put(b, v->v.arr.raw, v->v.arr.n * scalar_size(et));
    }
    default: {
        uint8_t tmp[8];
        uint64_t es = scalar_size(v->type);
        switch (v->type) {
        case GGUF_FLOAT32: { float f = (float)v->v.f64; memcpy(tmp, &f, 4); break; }
        case GGUF_FLOAT64: memcpy(tmp, &v->v.f64, 8); break;
        default: {
            uint64_t u = is_signed(v->type) ? (uint64_t)v->v.i64 : v->v.u64;
            memcpy(tmp, &u, 8); /* little-endian: the low es bytes */
        }
        }
        return bytes_put(b, tmp, es);
    }
    }
}

err_code gguf_writer_set_value(gguf_writer *w, const char *key, const gguf_value *v) {
    bytes *b = kv_slot(w, key);
    return b && bytes_u32(b, v->type) && encode_value(b, v) ? ERR_OK : ERR_NOMEM;
}

err_code gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                                const void *data, err_t *err) {
    const quant_traits *tr = quant_traits_of(type);
    if (!tr) return err_set(err, ERR_BAD_TENSOR_TYPE, "tensor '%s': unknown type %u", name, type);
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS) return err_set(err, ERR_BAD_SHAPE, "tensor '%s': %u dims", name, n_dims);
    uint64_t n_el = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] < 0 || !mul_ok(n_el, (uint64_t)ne[d], &n_el))
            return err_set(err, ERR_OVERFLOW, "tensor '%s': bad dimensions", name);
    }
    if (ne[0] % tr->block_size)
        return err_set(err, ERR_BAD_SHAPE, "tensor '%s': row length %lld is not a multiple of %d", name,
                       (long long)ne[0], tr->block_size);
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? 2 * w->cap_t : 32;
        wtensor *p = realloc(w->t, cap * sizeof *p);
        if (!p) return err_set(err, ERR_NOMEM, "out of memory");
        w->t = p;
        w->cap_t = cap;
    }
    wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = d < (int)n_dims ? ne[d] : 1;
    t->n_bytes = n_el / tr->block_size * tr->type_size;
    if (!(t->name = strdup(name))) return err_set(err, ERR_NOMEM, "out of memory");
    if (data) {
        if (!(t->data = malloc(t->n_bytes ? t->n_bytes : 1))) {
            free(t->name);
            return err_set(err, ERR_NOMEM, "out of memory");
        }
        memcpy(t->data, data, t->n_bytes);
    }
    w->n_t++;
    return ERR_OK;
}

static uint64_t align_up(uint64_t x, uint64_t a) { return x + (a - x % a) % a; }

err_code gguf_writer_write(gguf_writer *w, const char *path, gguf_fill_fn fill, void *user, err_t *err) {
    bytes h = {0};
    uint64_t off = 0, max_fill = 0;
    const uint32_t alignment = writer_alignment(w);
    bool ok = bytes_u32(&h, GGUF_MAGIC) && bytes_u32(&h, w->version) && bytes_u64(&h, w->n_t) && bytes_u64(&h, w->n_kv);
    for (size_t i = 0; ok && i < w->n_kv; i++)
        ok = bytes_str(&h, w->kv[i].key, strlen(w->kv[i].key)) && bytes_put(&h, w->kv[i].enc.p, w->kv[i].enc.n);
    for (size_t i = 0; ok && i < w->n_t; i++) {
        wtensor *t = &w->t[i];
        ok = bytes_str(&h, t->name, strlen(t->name)) && bytes_u32(&h, t->n_dims);
        for (uint32_t d = 0; ok && d < t->n_dims; d++) ok = bytes_u64(&h, (uint64_t)t->ne[d]);
        ok = ok && bytes_u32(&h, t->type) && bytes_u64(&h, off);
        off = align_up(off + t->n_bytes, alignment);
        if (!t->data && t->n_bytes > max_fill) max_fill = t->n_bytes;
    }
    static const uint8_t zeros[256];
    while (ok && h.n % alignment) ok = bytes_put(&h, zeros, 1);
    if (!ok) {
        free(h.p);
        return err_set(err, ERR_NOMEM, "out of memory while encoding the GGUF header");
    }
    if (max_fill && !fill) {
        free(h.p);
        return err_set(err, ERR_INVALID_ARG, "tensors without data and no fill callback");
    }
    atomic_file f;
    err_code rc = atomic_file_open(&f, path, err);
    void *buf = NULL;
    if (!rc && max_fill && !(buf = malloc(max_fill)))
        rc = err_set(err, ERR_NOMEM, "out of memory for a %llu-byte tensor", (unsigned long long)max_fill);
    if (!rc) rc = atomic_file_write(&f, h.p, h.n, err);
    for (size_t i = 0; !rc && i < w->n_t; i++) {
        wtensor *t = &w->t[i];
        const void *src = t->data;
        if (!src) {
            rc = fill(user, i, buf, t->n_bytes, err);
            src = buf;
        }
        if (!rc) rc = atomic_file_write(&f, src, t->n_bytes, err);
        uint64_t pad = align_up(t->n_bytes, alignment) - t->n_bytes;
        while (!rc && pad) {
            uint64_t k = pad < sizeof zeros ? pad : sizeof zeros;
            rc = atomic_file_write(&f, zeros, k, err);
            pad -= k;
        }
    }
    if (!rc) rc = atomic_file_commit(&f, err); /* the target changes only here */
    else atomic_file_abort(&f);
    free(buf);
    free(h.p);
    return rc;
}
