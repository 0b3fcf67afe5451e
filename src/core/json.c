/*
 * json — see json.h. A recursive-descent reader: each value's children are
 * gathered in a growing array, then moved into the parent. Depth is bounded
 * (JSON_MAX_DEPTH), so the recursion is too.
 */
#include "core/json.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *s;
    size_t len, pos;
    err_t *err;
    err_code rc;
    long values, max_values; /* read so far, and the bound (0: none) */
} reader;

static bool fail(reader *r, const char *what) {
    if (r->rc == ERR_OK) r->rc = err_set(r->err, ERR_BAD_VALUE, "JSON: %s at byte %zu", what, r->pos);
    return false;
}

static void skip_ws(reader *r) {
    while (r->pos < r->len && strchr(" \t\r\n", r->s[r->pos]) && r->s[r->pos]) r->pos++;
}

static bool literal(reader *r, const char *word) {
    const size_t n = strlen(word);
    if (r->len - r->pos < n || memcmp(r->s + r->pos, word, n) != 0) return fail(r, "unexpected text");
    r->pos += n;
    return true;
}

/* ---------------------------------------------------------------- strings */

static int hex4(const char *p) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        const char c = p[i];
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static size_t put_utf8(char *o, uint32_t cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | (cp >> 6 & 63)), o[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | (cp >> 12 & 63));
    o[2] = (char)(0x80 | (cp >> 6 & 63)), o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

/* The length of the valid UTF-8 character at s[0..n), 0 if none. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    const unsigned c = s[0];
    size_t k;
    uint32_t cp;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) k = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) k = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) k = 4, cp = c & 0x07;
    else return 0;
    if (n < k) return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if ((k == 3 && cp < 0x800) || (k == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return k;
}

/* An escape after the backslash at r->pos; the bytes go to o, their count returned (0: error). */
static size_t escape(reader *r, char *o) {
    const char c = r->s[r->pos++];
    const char *simple = "\"\\/bfnrt", *value = "\"\\/\b\f\n\r\t";
    const char *at = c ? strchr(simple, c) : NULL;
    if (at) { *o = value[at - simple]; return 1; }
    if (c != 'u' || r->len - r->pos < 4) return fail(r, "bad escape"), 0;
    int hi = hex4(r->s + r->pos);
    if (hi < 0) return fail(r, "bad \\u escape"), 0;
    r->pos += 4;
    uint32_t cp = (uint32_t)hi;
    if (hi >= 0xDC00 && hi <= 0xDFFF) return fail(r, "lone low surrogate"), 0;
    if (hi >= 0xD800 && hi <= 0xDBFF) {
        const int lo = r->len - r->pos >= 6 && r->s[r->pos] == '\\' && r->s[r->pos + 1] == 'u'
                     ? hex4(r->s + r->pos + 2) : -1;
        if (lo < 0xDC00 || lo > 0xDFFF) return fail(r, "lone high surrogate"), 0;
        r->pos += 6;
        cp = 0x10000 + ((uint32_t)(hi - 0xD800) << 10) + (uint32_t)(lo - 0xDC00);
    }
    return put_utf8(o, cp);
}

/* A string at r->pos (its opening quote), decoded into a new buffer. */
static char *read_string(reader *r, size_t *n_out) {
    r->pos++;
    size_t end = r->pos; /* the closing quote, or the end: decoding never lengthens the text before it */
    while (end < r->len && r->s[end] != '"') end += r->s[end] == '\\' ? 2 : 1;
    char *o = malloc((end < r->len ? end : r->len) - r->pos + 1); /* not the rest of the document: a string each */
    size_t n = 0;
    if (!o) return r->rc = err_set(r->err, ERR_NOMEM, "JSON: out of memory"), NULL;
    while (r->pos < r->len && r->s[r->pos] != '"') {
        const unsigned char c = (unsigned char)r->s[r->pos];
        size_t k = 0;
        if (c < 0x20) fail(r, "control character in a string");
        else if (c == '\\') r->pos++, k = r->pos < r->len ? escape(r, o + n) : (fail(r, "unfinished escape"), 0);
        else if ((k = utf8_len((const unsigned char *)r->s + r->pos, r->len - r->pos)) == 0) fail(r, "invalid UTF-8");
        else memcpy(o + n, r->s + r->pos, k), r->pos += k;
        if (k == 0) { free(o); return NULL; }
        n += k;
    }
    if (r->pos >= r->len) { free(o); fail(r, "unterminated string"); return NULL; }
    r->pos++;
    o[n] = '\0';
    *n_out = n;
    return o;
}

/* ---------------------------------------------------------------- values */

static bool read_value(reader *r, json_value *v, int depth);

static bool read_number(reader *r, json_value *v) {
    const char *s = r->s;
    size_t p = r->pos;
    if (p < r->len && s[p] == '-') p++;
    if (p < r->len && s[p] == '0') p++;
    else if (p < r->len && s[p] >= '1' && s[p] <= '9') while (p < r->len && s[p] >= '0' && s[p] <= '9') p++;
    else return fail(r, "bad number");
    if (p < r->len && s[p] == '.') {
        if (++p >= r->len || s[p] < '0' || s[p] > '9') return r->pos = p, fail(r, "bad fraction");
        while (p < r->len && s[p] >= '0' && s[p] <= '9') p++;
    }
    if (p < r->len && (s[p] == 'e' || s[p] == 'E')) {
        if (++p < r->len && (s[p] == '+' || s[p] == '-')) p++;
        if (p >= r->len || s[p] < '0' || s[p] > '9') return r->pos = p, fail(r, "bad exponent");
        while (p < r->len && s[p] >= '0' && s[p] <= '9') p++;
    }
    char small[64], *buf = p - r->pos < sizeof small ? small : malloc(p - r->pos + 1); /* strtod needs a NUL */
    if (!buf) return r->rc = err_set(r->err, ERR_NOMEM, "JSON: out of memory"), false;
    memcpy(buf, s + r->pos, p - r->pos);
    buf[p - r->pos] = '\0';
    v->kind = JSON_NUMBER;
    v->number = strtod(buf, NULL);
    if (buf != small) free(buf);
    r->pos = p;
    return true;
}

/* The items of an array or the members of an object, into v. */
static bool read_list(reader *r, json_value *v, int depth, bool object) {
    const char close = object ? '}' : ']';
    int cap = 0;
    r->pos++;
    skip_ws(r);
    if (r->pos < r->len && r->s[r->pos] == close) return r->pos++, true;
    for (;;) {
        if (v->n == cap) {
            cap = cap ? 2 * cap : 4;
            json_value *items = realloc(v->items, sizeof *items * (size_t)cap);
            char **keys = object ? realloc(v->keys, sizeof *keys * (size_t)cap) : NULL;
            if (items) v->items = items;
            if (keys) v->keys = keys;
            if (!items || (object && !keys)) return r->rc = err_set(r->err, ERR_NOMEM, "JSON: out of memory"), false;
        }
        json_value *item = &v->items[v->n];
        memset(item, 0, sizeof *item);
        if (object) {
            size_t kn;
            skip_ws(r);
            if (r->pos >= r->len || r->s[r->pos] != '"') return fail(r, "expected a member name");
            if (!(v->keys[v->n] = read_string(r, &kn))) return false;
            skip_ws(r);
            if (r->pos >= r->len || r->s[r->pos] != ':') return free(v->keys[v->n]), fail(r, "expected ':'");
            r->pos++;
        }
        v->n++;
        if (!read_value(r, item, depth + 1)) return false;
        skip_ws(r);
        if (r->pos < r->len && r->s[r->pos] == ',') { r->pos++; continue; }
        if (r->pos < r->len && r->s[r->pos] == close) return r->pos++, true;
        return fail(r, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static bool read_value(reader *r, json_value *v, int depth) {
    if (depth > JSON_MAX_DEPTH) return fail(r, "nested too deep");
    if (r->max_values && ++r->values > r->max_values) {
        if (r->rc == ERR_OK)
            r->rc = err_set(r->err, ERR_UNSUPPORTED, "JSON: more than %ld values (at byte %zu)", r->max_values, r->pos);
        return false;
    }
    skip_ws(r);
    if (r->pos >= r->len) return fail(r, "expected a value");
    const size_t start = r->pos;
    bool ok;
    switch (r->s[r->pos]) {
    case '{': v->kind = JSON_OBJECT; ok = read_list(r, v, depth, true); break;
    case '[': v->kind = JSON_ARRAY; ok = read_list(r, v, depth, false); break;
    case '"': v->kind = JSON_STRING; ok = (v->str = read_string(r, &v->str_len)) != NULL; break;
    case 't': v->kind = JSON_BOOL; v->boolean = true; ok = literal(r, "true"); break;
    case 'f': v->kind = JSON_BOOL; ok = literal(r, "false"); break;
    case 'n': v->kind = JSON_NULL; ok = literal(r, "null"); break;
    default: ok = read_number(r, v);
    }
    v->src = r->s + start;
    v->src_len = r->pos - start;
    return ok;
}

static void free_children(json_value *v) {
    for (int i = 0; i < v->n; i++) {
        free_children(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
}

err_code json_parse(const char *text, size_t len, json_value **out, err_t *err) {
    return json_parse_max(text, len, 0, out, err);
}

err_code json_parse_max(const char *text, size_t len, long max_values, json_value **out, err_t *err) {
    if (!out) return err_set(err, ERR_INVALID_ARG, "JSON: no output pointer");
    *out = NULL;
    if (!text) return err_set(err, ERR_INVALID_ARG, "JSON: no text");
    json_value *v = calloc(1, sizeof *v);
    if (!v) return err_set(err, ERR_NOMEM, "JSON: out of memory");
    reader r = {text, len, 0, err, ERR_OK, 0, max_values};
    if (read_value(&r, v, 0)) {
        skip_ws(&r);
        if (r.pos < r.len) fail(&r, "text after the value");
    }
    if (r.rc != ERR_OK) {
        json_free(v);
        return r.rc;
    }
    *out = v;
    return ERR_OK;
}

void json_free(json_value *v) {
    if (!v) return;
    free_children(v);
    free(v);
}

const json_value *json_get(const json_value *obj, const char *key) {
    if (!obj || obj->kind != JSON_OBJECT) return NULL;
    for (int i = obj->n - 1; i >= 0; i--)
        if (strcmp(obj->keys[i], key) == 0) return &obj->items[i];
    return NULL;
}

const char *json_get_str(const json_value *obj, const char *key) {
    const json_value *v = json_get(obj, key);
    return v && v->kind == JSON_STRING ? v->str : NULL;
}
