/*
 * gguf — read and write GGUF files (versions 2 and 3).
 *
 * Reading maps the file MAP_PRIVATE and read-only, parses the header, every
 * metadata key/value (all value types, arrays of arrays included) and every
 * tensor info, and checks each count, string length, offset and dimension
 * product against the file size and for overflow before it is used. After
 * gguf_open succeeds, every tensor's data lies inside the mapping and every
 * pointer in the context is safe to read: the rest of octo never re-checks.
 *
 * Strings point into the mapping (they are not NUL-terminated, hence the
 * explicit length); keys and tensor names are copied out and terminated
 * because they are looked up by name.
 *
 * Writing collects metadata and tensor infos, then streams the file: tensor
 * data is either given up front or produced by a callback one tensor at a
 * time, so a multi-gigabyte synthetic model never has to sit in memory.
 */
#ifndef OCTO_CORE_GGUF_H
#define OCTO_CORE_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "err.h"

#define GGUF_MAGIC 0x46554747u /* "GGUF" little-endian */
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS 4

typedef enum {
    GGUF_UINT8 = 0,
    GGUF_INT8 = 1,
    GGUF_UINT16 = 2,
    GGUF_INT16 = 3,
    GGUF_UINT32 = 4,
    GGUF_INT32 = 5,
    GGUF_FLOAT32 = 6,
    GGUF_BOOL = 7,
    GGUF_STRING = 8,
    GGUF_ARRAY = 9,
    GGUF_UINT64 = 10,
    GGUF_INT64 = 11,
    GGUF_FLOAT64 = 12,
    GGUF_TYPE_COUNT
} gguf_type;

typedef struct {
    uint64_t len;
    const char *ptr; /* not NUL-terminated */
} gguf_str;

typedef struct gguf_value gguf_value;
struct gguf_value {
    gguf_type type;
    union {
        uint64_t u64; /* UINT8..UINT64, BOOL */
        int64_t i64;  /* INT8..INT64 */
        double f64;   /* FLOAT32, FLOAT64 */
        gguf_str str;
        struct {
            gguf_type elem_type;
            uint64_t n;
            const void *raw;     /* fixed-size elements, little-endian, unaligned */
            gguf_str *strs;      /* elem_type == GGUF_STRING */
            gguf_value *items;   /* elem_type == GGUF_ARRAY (nested arrays) */
        } arr;
    } v;
};

typedef struct {
    char *key;
    gguf_value value;
} gguf_kv;

typedef struct {
    char *name;
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS]; /* ne[0] is the row length; unused dims are 1 */
    uint32_t type;             /* quant_type id */
    uint64_t offset;           /* relative to the data section */
    uint64_t n_elements;
    uint64_t n_bytes;
    const void *data;          /* inside the mapping */
    bool shares_bytes;         /* its bytes overlap another tensor's: never rewrite them in place */
} gguf_tensor;

typedef struct {
    uint32_t version;
    uint64_t n_kv;
    gguf_kv *kv;
    uint64_t n_tensors;
    gguf_tensor *tensors;
    uint64_t alignment;
    uint64_t data_offset; /* file offset of the tensor data section */
    const uint8_t *base;  /* the mapping (or caller's buffer) */
    uint64_t size;        /* its size in bytes */
    int mapped;           /* 1 when base is our own mmap */
    struct stat file;     /* the mapped file's identity, held as an input while mapped (core/inputs.h) */
} gguf_ctx;

/* Open and validate a file. On failure *out is NULL and err says why. */
err_code gguf_open(const char *path, gguf_ctx **out, err_t *err);
/* The same over a caller-owned buffer (fuzzing, tests); buf must outlive ctx. */
err_code gguf_open_buffer(const void *buf, uint64_t size, gguf_ctx **out, err_t *err);
void gguf_close(gguf_ctx *ctx);
/* Make the tensor data of an opened file writable, privately: writes go to
 * copy-on-write pages of this process, never to the file. Returns the
 * writable base (the same address) or NULL when ctx is not a mapping of its
 * own or the system refuses. Used to re-lay weights in place at load. */
uint8_t *gguf_writable_data(gguf_ctx *ctx);

const gguf_kv *gguf_find_kv(const gguf_ctx *ctx, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_ctx *ctx, const char *name);

/* Typed getters. Integers convert between integer types when the value fits;
 * floats accept FLOAT32/FLOAT64. They return false when the key is absent or
 * of another kind (check gguf_find_kv to tell the two apart). */
bool gguf_get_u64(const gguf_ctx *ctx, const char *key, uint64_t *out);
bool gguf_get_u32(const gguf_ctx *ctx, const char *key, uint32_t *out);
bool gguf_get_i64(const gguf_ctx *ctx, const char *key, int64_t *out);
bool gguf_get_f32(const gguf_ctx *ctx, const char *key, float *out);
bool gguf_get_bool(const gguf_ctx *ctx, const char *key, bool *out);
bool gguf_get_str(const gguf_ctx *ctx, const char *key, gguf_str *out);
/* An array value of any element type, or NULL. */
const gguf_value *gguf_get_arr(const gguf_ctx *ctx, const char *key);
/* Element i of a numeric array as double / int64 (i < n checked by caller). */
double gguf_arr_f64(const gguf_value *arr, uint64_t i);
int64_t gguf_arr_i64(const gguf_value *arr, uint64_t i);
bool gguf_str_eq(gguf_str s, const char *cstr);

const char *gguf_type_name(gguf_type t);

/* ---- writer ---- */

typedef struct gguf_writer gguf_writer;
/* Fills buf (n_bytes of tensor index i); returns ERR_OK or an error. */
typedef err_code (*gguf_fill_fn)(void *user, uint64_t index, void *buf, uint64_t n_bytes, err_t *err);

gguf_writer *gguf_writer_new(void);
void gguf_writer_free(gguf_writer *w);
void gguf_writer_set_version(gguf_writer *w, uint32_t version); /* 2 or 3; default 3 */
void gguf_writer_set_alignment(gguf_writer *w, uint32_t alignment); /* also writes general.alignment */

/* Scalars and strings. Setting a key twice replaces the value. */
err_code gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v);
err_code gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v);
err_code gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v);
err_code gguf_writer_set_f32(gguf_writer *w, const char *key, float v);
err_code gguf_writer_set_bool(gguf_writer *w, const char *key, bool v);
err_code gguf_writer_set_str(gguf_writer *w, const char *key, const char *v);
/* A raw value of any type, including (nested) arrays: bytes already encoded
 * as they appear in the file after the type tag. Used for copying values. */
err_code gguf_writer_set_raw(gguf_writer *w, const char *key, gguf_type type, const void *bytes, uint64_t n_bytes);
err_code gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *v, uint64_t n);
err_code gguf_writer_set_arr_f32(gguf_writer *w, const char *key, const float *v, uint64_t n);
err_code gguf_writer_set_arr_i32(gguf_writer *w, const char *key, const int32_t *v, uint64_t n);
/* A named i32 array a writer of a whole file adds beside its own keys (key NULL: none). */
typedef struct {
    const char *key;
    const int32_t *v;
    uint64_t n;
} gguf_i32_array;
/* Copy one value (as read by gguf_open) under key. */
err_code gguf_writer_set_value(gguf_writer *w, const char *key, const gguf_value *v);

/* Add a tensor; data (n_bytes computed from type and shape) is copied when
 * non-NULL, else produced by the fill callback at write time. */
err_code gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                                const int64_t *ne, const void *data, err_t *err);
err_code gguf_writer_write(gguf_writer *w, const char *path, gguf_fill_fn fill, void *user, err_t *err);

#endif
