/*
 * test_gguf — the GGUF reader and writer.
 *
 * Round trips of every metadata value type (nested arrays included) in
 * versions 2 and 3 and with a non-default alignment; tensors of every type
 * read back byte for byte; a real file (stories260K from ../shared) rewritten
 * through the writer comes out byte-identical; and hostile inputs built by
 * hand are refused with the error that names them.
 */
#include <stdint.h>

#include "core/gguf.h"
#include "core/quant.h"
#include "t.h"
#include "util.h"

/* ---- a tiny byte builder for hand-made (possibly broken) files */
typedef struct { unsigned char *p; size_t n, cap; } buf;
static void put(buf *b, const void *s, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}
static void put_u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(buf *b, const char *s) { put_u64(b, strlen(s)); put(b, s, strlen(s)); }

static err_code open_buf(const buf *b, gguf_ctx **g, err_t *err) { return gguf_open_buffer(b->p, b->n, g, err); }

/* Read path, write every key and tensor back through the writer, compare bytes. */
static int rewrite_identical(const char *path) {
    gguf_ctx *g = NULL;
    err_t err = {0};
    if (gguf_open(path, &g, &err)) return 0;
    gguf_writer *w = gguf_writer_new();
    gguf_writer_set_version(w, g->version);
    for (uint64_t i = 0; i < g->n_kv; i++) gguf_writer_set_value(w, g->kv[i].key, &g->kv[i].value);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, &err);
    }
    char out[256];
    tu_tmp_path(out, sizeof out, "rewrite.gguf");
    int ok = gguf_writer_write(w, out, NULL, NULL, &err) == ERR_OK;
    gguf_writer_free(w);
    size_t na = 0, nb = 0;
    unsigned char *a = tu_read_file(path, &na), *b = tu_read_file(out, &nb);
    /* the writer pads the last tensor to the alignment; the original may not */
    ok = ok && a && b && nb >= na && !memcmp(a, b, na);
    for (size_t i = na; ok && i < nb; i++) ok = b[i] == 0;
    free(a);
    free(b);
    remove(out);
    gguf_close(g);
    return ok;
}

static void test_roundtrip(uint32_t version, uint32_t alignment) {
    char path[256];
    tu_tmp_path(path, sizeof path, "rt.gguf");
    gguf_writer *w = gguf_writer_new();
    gguf_writer_set_version(w, version);
    if (alignment) gguf_writer_set_alignment(w, alignment);
    gguf_writer_set_u32(w, "a.u32", 4000000000u);
    gguf_writer_set_i32(w, "a.i32", -7);
    gguf_writer_set_u64(w, "a.u64", 0x123456789abcdefull);
    gguf_writer_set_f32(w, "a.f32", 0.25f);
    gguf_writer_set_bool(w, "a.bool", true);
    gguf_writer_set_str(w, "a.str", "h\xc3\xa9llo");
    gguf_writer_set_str(w, "a.empty", "");
    const char *strs[] = {"x", "", "zz"};
    gguf_writer_set_arr_str(w, "a.arr_str", strs, 3);
    float fa[] = {1.5f, -2.0f};
    gguf_writer_set_arr_f32(w, "a.arr_f32", fa, 2);
    int32_t ia[] = {1, -2, 3};
    gguf_writer_set_arr_i32(w, "a.arr_i32", ia, 3);
    /* raw encodings of the remaining scalar types and a nested array [[1,2],[3]] of u8 */
    uint8_t u8 = 200; int8_t i8 = -100; uint16_t u16 = 60000; int16_t i16 = -30000; int64_t i64 = -5; double f64 = 1e300;
    gguf_writer_set_raw(w, "b.u8", GGUF_UINT8, &u8, 1);
    gguf_writer_set_raw(w, "b.i8", GGUF_INT8, &i8, 1);
    gguf_writer_set_raw(w, "b.u16", GGUF_UINT16, &u16, 2);
    gguf_writer_set_raw(w, "b.i16", GGUF_INT16, &i16, 2);
    gguf_writer_set_raw(w, "b.i64", GGUF_INT64, &i64, 8);
    gguf_writer_set_raw(w, "b.f64", GGUF_FLOAT64, &f64, 8);
    buf nested = {0};
    put_u32(&nested, GGUF_ARRAY); put_u64(&nested, 2);
    put_u32(&nested, GGUF_UINT8); put_u64(&nested, 2); put(&nested, "\x01\x02", 2);
    put_u32(&nested, GGUF_UINT8); put_u64(&nested, 1); put(&nested, "\x03", 1);
    gguf_writer_set_raw(w, "b.nested", GGUF_ARRAY, nested.p, nested.n);
    free(nested.p);
    gguf_writer_set_u32(w, "a.u32", 5u); /* replacing keeps one key */

    /* one tensor of every supported type, 2 rows of 256 values, plus a 3-D one */
    static const uint32_t types[] = {QT_F32, QT_F16, QT_BF16, QT_Q8_0, QT_Q4_0, QT_Q4_1, QT_Q5_0, QT_Q5_1,
                                     QT_Q2_K, QT_Q3_K, QT_Q4_K, QT_Q5_K, QT_Q6_K, QT_Q8_K};
    const int nt = (int)(sizeof types / sizeof *types);
    unsigned char *data[16];
    size_t nbytes[16];
    for (int i = 0; i < nt; i++) {
        int64_t ne[2] = {256, 2};
        nbytes[i] = quant_row_bytes(types[i], 256) * 2;
        data[i] = malloc(nbytes[i]);
        for (size_t j = 0; j < nbytes[i]; j++) data[i][j] = (unsigned char)(j * 31 + i * 7);
        char name[32];
        snprintf(name, sizeof name, "t.%s", quant_traits_of(types[i])->name);
        T_EQ_INT(gguf_writer_add_tensor(w, name, types[i], 2, ne, data[i], NULL), ERR_OK);
    }
    float cube[2 * 3 * 4];
    for (int i = 0; i < 24; i++) cube[i] = (float)i;
    int64_t ne3[3] = {2, 3, 4};
    T_EQ_INT(gguf_writer_add_tensor(w, "t.cube", QT_F32, 3, ne3, cube, NULL), ERR_OK);
    err_t err = {0};
    T_EQ_INT(gguf_writer_write(w, path, NULL, NULL, &err), ERR_OK);
    gguf_writer_free(w);

    gguf_ctx *g = NULL;
    T_EQ_INT(gguf_open(path, &g, &err), ERR_OK);
    if (!g) return;
    T_EQ_INT(g->version, version);
    T_EQ_INT(g->alignment, alignment ? alignment : 32);
    T_EQ_INT(g->n_kv, 17 + (alignment ? 1 : 0));
    uint32_t u32; uint64_t u64; int64_t sv; float f; bool bo; gguf_str s;
    T_CHECK(gguf_get_u32(g, "a.u32", &u32) && u32 == 5);
    T_CHECK(gguf_get_i64(g, "a.i32", &sv) && sv == -7);
    T_CHECK(!gguf_get_u32(g, "a.i32", &u32)); /* negative does not convert to unsigned */
    T_CHECK(gguf_get_u64(g, "a.u64", &u64) && u64 == 0x123456789abcdefull);
    T_CHECK(gguf_get_f32(g, "a.f32", &f) && f == 0.25f);
    T_CHECK(gguf_get_bool(g, "a.bool", &bo) && bo);
    T_CHECK(gguf_get_str(g, "a.str", &s) && gguf_str_eq(s, "h\xc3\xa9llo"));
    T_CHECK(gguf_get_str(g, "a.empty", &s) && s.len == 0);
    T_CHECK(!gguf_get_str(g, "a.missing", &s));
    const gguf_value *a = gguf_get_arr(g, "a.arr_str");
    T_CHECK(a && a->v.arr.n == 3 && gguf_str_eq(a->v.arr.strs[2], "zz") && a->v.arr.strs[1].len == 0);
    a = gguf_get_arr(g, "a.arr_f32");
    T_CHECK(a && a->v.arr.n == 2 && gguf_arr_f64(a, 1) == -2.0);
    a = gguf_get_arr(g, "a.arr_i32");
    T_CHECK(a && gguf_arr_i64(a, 1) == -2);
    T_CHECK(gguf_get_u64(g, "b.u8", &u64) && u64 == 200);
    T_CHECK(gguf_get_i64(g, "b.i8", &sv) && sv == -100);
    T_CHECK(gguf_get_u64(g, "b.u16", &u64) && u64 == 60000);
    T_CHECK(gguf_get_i64(g, "b.i16", &sv) && sv == -30000);
    T_CHECK(gguf_get_i64(g, "b.i64", &sv) && sv == -5);
    T_CHECK(gguf_find_kv(g, "b.f64") && gguf_find_kv(g, "b.f64")->value.v.f64 == 1e300);
    a = gguf_get_arr(g, "b.nested");
    T_CHECK(a && a->v.arr.elem_type == GGUF_ARRAY && a->v.arr.n == 2);
    if (a && a->v.arr.items) {
        T_CHECK(a->v.arr.items[0].v.arr.n == 2 && gguf_arr_i64(&a->v.arr.items[0], 1) == 2);
        T_CHECK(a->v.arr.items[1].v.arr.n == 1 && gguf_arr_i64(&a->v.arr.items[1], 0) == 3);
    }
    T_EQ_INT(g->n_tensors, nt + 1);
    for (int i = 0; i < nt; i++) {
        char name[32];
        snprintf(name, sizeof name, "t.%s", quant_traits_of(types[i])->name);
        const gguf_tensor *t = gguf_find_tensor(g, name);
        T_CHECKF(t && t->type == types[i] && t->n_bytes == nbytes[i] && !memcmp(t->data, data[i], nbytes[i]),
                 "tensor %s", name);
        T_CHECK(t && ((uintptr_t)t->data - (uintptr_t)g->base) % g->alignment == 0);
        free(data[i]);
    }
    const gguf_tensor *c = gguf_find_tensor(g, "t.cube");
    T_CHECK(c && c->n_dims == 3 && c->ne[2] == 4 && c->n_elements == 24 && !memcmp(c->data, cube, sizeof cube));

    gguf_close(g);
    /* and rewriting what was read reproduces the file byte for byte */
    T_CHECKF(rewrite_identical(path), "rewrite of a v%u file", version);
    remove(path);
}

/* A small valid file, with knobs to break it. */
typedef struct {
    uint32_t magic, version, kv_type, n_dims, ttype, align;
    uint64_t n_kv, n_tensors, str_len, ne0, ne1, offset;
    int dup_key, dup_tensor, nested_depth;
} spec;

static spec good(void) {
    return (spec){.magic = GGUF_MAGIC, .version = 3, .kv_type = GGUF_STRING, .n_dims = 2, .ttype = QT_F32,
                  .n_kv = 1, .n_tensors = 1, .str_len = 5, .ne0 = 32, .ne1 = 2, .offset = 0};
}

static buf build(spec s, size_t *end_of_infos) {
    buf b = {0};
    put_u32(&b, s.magic);
    put_u32(&b, s.version);
    put_u64(&b, s.n_tensors + (s.dup_tensor ? 1 : 0));
    put_u64(&b, s.n_kv + (s.dup_key ? 1 : 0) + (s.align ? 1 : 0) + (s.nested_depth ? 1 : 0));
    put_str(&b, "general.architecture");
    put_u32(&b, s.kv_type);
    put_u64(&b, s.str_len);
    put(&b, "llama", 5);
    if (s.dup_key) { put_str(&b, "general.architecture"); put_u32(&b, GGUF_UINT8); put(&b, "\x01", 1); }
    if (s.align) { put_str(&b, "general.alignment"); put_u32(&b, GGUF_UINT32); put_u32(&b, s.align); }
    if (s.nested_depth) {
        put_str(&b, "deep");
        put_u32(&b, GGUF_ARRAY);
        for (int d = 0; d < s.nested_depth; d++) { put_u32(&b, GGUF_ARRAY); put_u64(&b, 1); }
        put_u32(&b, GGUF_UINT8); put_u64(&b, 0);
    }
    for (int i = 0; i < 1 + s.dup_tensor; i++) {
        put_str(&b, "w");
        put_u32(&b, s.n_dims);
        put_u64(&b, s.ne0);
        for (uint32_t d = 1; d < s.n_dims && d < 8; d++) put_u64(&b, d == 1 ? s.ne1 : 1);
        put_u32(&b, s.ttype);
        put_u64(&b, s.offset + (uint64_t)i * 256);
    }
    if (end_of_infos) *end_of_infos = b.n;
    while (b.n % (s.align ? s.align : 32)) put(&b, "\0", 1);
    for (int i = 0; i < 64 * (1 + s.dup_tensor); i++) { float f = (float)i; put(&b, &f, 4); }
    return b;
}

static err_code try_spec(spec s) {
    buf b = build(s, NULL);
    gguf_ctx *g = NULL;
    err_t err = {0};
    err_code rc = open_buf(&b, &g, &err);
    T_CHECK((rc == ERR_OK) == (g != NULL));
    T_CHECK(rc == ERR_OK || err.msg[0] != '\0');
    gguf_close(g);
    free(b.p);
    return rc;
}

static void test_hostile(void) {
    T_EQ_INT(try_spec(good()), ERR_OK);
    spec s;
    s = good(); s.magic = 0x46554746; T_EQ_INT(try_spec(s), ERR_BAD_MAGIC);
    s = good(); s.version = 1; T_EQ_INT(try_spec(s), ERR_BAD_VERSION);
    s = good(); s.version = 4; T_EQ_INT(try_spec(s), ERR_BAD_VERSION);
    s = good(); s.version = 0x03000000; T_EQ_INT(try_spec(s), ERR_BAD_VERSION);
    s = good(); s.version = 2; T_EQ_INT(try_spec(s), ERR_OK);
    s = good(); s.ttype = 4; T_EQ_INT(try_spec(s), ERR_BAD_TENSOR_TYPE);
    s = good(); s.ttype = 0xFFFFFFFF; T_EQ_INT(try_spec(s), ERR_BAD_TENSOR_TYPE);
    s = good(); s.offset = 1u << 20; T_EQ_INT(try_spec(s), ERR_TENSOR_BOUNDS);
    s = good(); s.offset = UINT64_MAX - 31; T_EQ_INT(try_spec(s), ERR_TENSOR_BOUNDS);
    s = good(); s.offset = 4; T_EQ_INT(try_spec(s), ERR_BAD_VALUE);
    s = good(); s.ne1 = 3; T_EQ_INT(try_spec(s), ERR_TENSOR_BOUNDS); /* 384 bytes, 256 present */
    s = good(); s.ne0 = 1ull << 40; s.ne1 = 1ull << 40; T_EQ_INT(try_spec(s), ERR_OVERFLOW);
    s = good(); s.ne0 = 1ull << 63; T_EQ_INT(try_spec(s), ERR_OVERFLOW);
    s = good(); s.n_dims = 5; T_EQ_INT(try_spec(s), ERR_BAD_SHAPE);
    s = good(); s.n_dims = 0; T_EQ_INT(try_spec(s), ERR_BAD_SHAPE);
    s = good(); s.ttype = QT_Q4_0; s.ne0 = 16; T_EQ_INT(try_spec(s), ERR_BAD_SHAPE);
    s = good(); s.kv_type = 13; T_EQ_INT(try_spec(s), ERR_BAD_METADATA);
    s = good(); s.n_kv = 1ull << 60; T_EQ_INT(try_spec(s), ERR_TRUNCATED);
    s = good(); s.n_tensors = 1ull << 60; T_EQ_INT(try_spec(s), ERR_TRUNCATED);
    s = good(); s.str_len = UINT64_MAX; T_EQ_INT(try_spec(s), ERR_TRUNCATED);
    s = good(); s.dup_key = 1; T_EQ_INT(try_spec(s), ERR_BAD_METADATA);
    s = good(); s.dup_tensor = 1; T_EQ_INT(try_spec(s), ERR_BAD_METADATA);
    s = good(); s.align = 24; T_EQ_INT(try_spec(s), ERR_BAD_VALUE);
    s = good(); s.align = 64; T_EQ_INT(try_spec(s), ERR_OK);
    /* GGUF requires a multiple of 8: 1, 2 and 4 would make misaligned loads (SIGBUS on strict CPUs) */
    s = good(); s.align = 1; T_EQ_INT(try_spec(s), ERR_BAD_VALUE);
    s = good(); s.align = 2; T_EQ_INT(try_spec(s), ERR_BAD_VALUE);
    s = good(); s.align = 4; T_EQ_INT(try_spec(s), ERR_BAD_VALUE);
    s = good(); s.align = 8; T_EQ_INT(try_spec(s), ERR_OK);
    s = good(); s.nested_depth = 3; T_EQ_INT(try_spec(s), ERR_OK);
    s = good(); s.nested_depth = 100; T_EQ_INT(try_spec(s), ERR_BAD_METADATA);

    /* an array whose element count times size overflows, and one that claims more strings than fit */
    buf b = {0};
    put_u32(&b, GGUF_MAGIC); put_u32(&b, 3); put_u64(&b, 0); put_u64(&b, 1);
    put_str(&b, "k"); put_u32(&b, GGUF_ARRAY); put_u32(&b, GGUF_UINT64); put_u64(&b, 1ull << 62);
    gguf_ctx *g = NULL;
    err_t err = {0};
    T_EQ_INT(open_buf(&b, &g, &err), ERR_OVERFLOW);
    b.n -= 12; put_u32(&b, GGUF_STRING); put_u64(&b, 1ull << 40);
    T_EQ_INT(open_buf(&b, &g, &err), ERR_TRUNCATED);
    free(b.p);

    /* every proper prefix of a valid file is refused: inside the header and
     * infos as truncated, inside the data as a tensor out of bounds */
    size_t end_infos;
    buf full = build(good(), &end_infos);
    int wrong = 0;
    for (size_t n = 0; n < full.n; n++) {
        err_code rc = gguf_open_buffer(full.p, n, &g, &err);
        err_code want = n == 0 ? ERR_EMPTY_FILE : n < end_infos ? ERR_TRUNCATED : ERR_TENSOR_BOUNDS;
        if (rc != want) {
            if (!wrong) fprintf(stderr, "prefix %zu: got %d want %d (%s)\n", n, rc, want, err.msg);
            wrong++;
        }
        gguf_close(g);
    }
    T_EQ_INT(wrong, 0);
    T_EQ_INT(gguf_open_buffer(full.p, full.n, &g, &err), ERR_OK);
    T_CHECK(g && g->data_offset % 32 == 0 && g->tensors[0].data == full.p + g->data_offset);
    T_CHECK(g && ((const float *)g->tensors[0].data)[63] == 63.0f);
    gguf_close(g);
    free(full.p);

    /* files: missing, directory, empty */
    char path[256];
    T_EQ_INT(gguf_open("/nonexistent/octo.gguf", &g, &err), ERR_NOT_FOUND);
    T_EQ_INT(gguf_open("/", &g, &err), ERR_IS_DIR);
    tu_tmp_path(path, sizeof path, "empty.gguf");
    T_CHECK(tu_write_file(path, "", 0));
    T_EQ_INT(gguf_open(path, &g, &err), ERR_EMPTY_FILE);
    T_CHECK(strstr(err.msg, "empty") != NULL);
    remove(path);
}

int main(void) {
    test_roundtrip(3, 0);
    test_roundtrip(2, 0);
    test_roundtrip(3, 64);
    test_hostile();
    const char *data = tu_data_dir();
    if (data) {
        /* a file written by another GGUF writer (llama.cpp's converter) */
        char p[512];
        snprintf(p, sizeof p, "%s/models/stories260K.gguf", data);
        T_CHECKF(rewrite_identical(p), "%s rewritten byte for byte", p);
        snprintf(p, sizeof p, "%s/golden/models/synth-dense-q4_k.gguf", data);
        T_CHECKF(rewrite_identical(p), "%s rewritten byte for byte", p);
    } else {
        printf("note: no shared data folder; the real-file round trip was not run\n");
    }
    T_DONE();
}
