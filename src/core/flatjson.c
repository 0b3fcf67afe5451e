/*
 * flatjson — see flatjson.h.
 */
#include "flatjson.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void put(flatjson_out *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const size_t room = o->len < o->cap ? o->cap - o->len : 0;
    const int w = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (w > 0) o->len += (size_t)w;
}

void flatjson_begin(flatjson_out *o, char *buf, size_t cap) {
    *o = (flatjson_out){.buf = buf, .cap = cap};
    if (cap) buf[0] = '\0';
    put(o, "{");
}

static void key(flatjson_out *o, const char *k) { put(o, "%s\n  \"%s\": ", o->n++ ? "," : "", k); }

void flatjson_str(flatjson_out *o, const char *k, const char *v) {
    key(o, k);
    put(o, "\"");
    for (const unsigned char *p = (const unsigned char *)(v ? v : ""); *p; p++) {
        if (*p == '"' || *p == '\\') put(o, "\\%c", *p);
        else if (*p == '\n') put(o, "\\n");
        else if (*p < 0x20) put(o, "\\u%04x", *p);
        else put(o, "%c", *p);
    }
    put(o, "\"");
}

void flatjson_u64(flatjson_out *o, const char *k, uint64_t v) {
    key(o, k);
    put(o, "%llu", (unsigned long long)v);
}

void flatjson_bool(flatjson_out *o, const char *k, bool v) {
    key(o, k);
    put(o, "%s", v ? "true" : "false");
}

size_t flatjson_end(flatjson_out *o) {
    put(o, "\n}\n");
    return o->len;
}

/* ---- reading ---- */

typedef struct {
    const char *s;
    size_t n, i;
} cursor;

static void ws(cursor *c) {
    while (c->i < c->n && (c->s[c->i] == ' ' || c->s[c->i] == '\n' || c->s[c->i] == '\t' || c->s[c->i] == '\r'))
        c->i++;
}

static bool in_set(char ch, const char *set) { return ch != '\0' && strchr(set, ch) != NULL; }

static bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }

/* Past a string starting at c->i ('"'); false when unterminated or badly escaped. */
static bool skip_str(cursor *c) {
    if (c->i >= c->n || c->s[c->i] != '"') return false;
    for (c->i++; c->i < c->n; c->i++) {
        const unsigned char ch = (unsigned char)c->s[c->i];
        if (ch == '"') {
            c->i++;
            return true;
        }
        if (ch < 0x20) return false;
        if (ch == '\\') {
            if (++c->i >= c->n || !in_set(c->s[c->i], "\"\\/bfnrtu")) return false;
            if (c->s[c->i] == 'u') {
                for (int k = 0; k < 4; k++)
                    if (++c->i >= c->n || !in_set(c->s[c->i], "0123456789abcdefABCDEF")) return false;
            }
        }
    }
    return false;
}

static bool skip_value(cursor *c) {
    if (c->i < c->n && c->s[c->i] == '"') return skip_str(c);
    static const char *const words[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++) {
        const size_t l = strlen(words[k]);
        if (c->n - c->i >= l && !memcmp(c->s + c->i, words[k], l)) {
            c->i += l;
            return true;
        }
    }
    /* a JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
    const char *s = c->s;
    size_t i = c->i;
    if (i < c->n && s[i] == '-') i++;
    if (i >= c->n || !is_digit(s[i])) return false;
    if (s[i] == '0') i++;
    else
        while (i < c->n && is_digit(s[i])) i++;
    if (i < c->n && s[i] == '.') {
        if (++i >= c->n || !is_digit(s[i])) return false;
        while (i < c->n && is_digit(s[i])) i++;
    }
    if (i < c->n && (s[i] == 'e' || s[i] == 'E')) {
        if (++i < c->n && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= c->n || !is_digit(s[i])) return false;
        while (i < c->n && is_digit(s[i])) i++;
    }
    c->i = i;
    return true;
}

/* Walk the object; with want set, stop at that key's value (c->i there). */
static bool walk(cursor *c, const char *want, err_t *err) {
    ws(c);
    if (c->i >= c->n || c->s[c->i++] != '{') {
        if (err) err_set(err, ERR_BAD_VALUE, "offset %zu: not an object", c->i);
        return false;
    }
    ws(c);
    if (c->i < c->n && c->s[c->i] == '}') { /* {} and nothing after it */
        c->i++;
        ws(c);
        if (c->i == c->n) return !want;
        if (err) err_set(err, ERR_BAD_VALUE, "offset %zu: text after the object", c->i);
        return false;
    }
    for (;;) {
        ws(c);
        const size_t k0 = c->i;
        if (!skip_str(c)) break;
        const size_t k1 = c->i;
        ws(c);
        if (c->i >= c->n || c->s[c->i++] != ':') break;
        ws(c);
        if (want && k1 - k0 - 2 == strlen(want) && !memcmp(c->s + k0 + 1, want, k1 - k0 - 2)) return true;
        if (!skip_value(c)) break;
        ws(c);
        if (c->i < c->n && c->s[c->i] == ',') {
            c->i++;
            continue;
        }
        if (c->i < c->n && c->s[c->i] == '}') {
            c->i++;
            ws(c);
            if (c->i == c->n) return !want;
            break;
        }
        break;
    }
    if (err) err_set(err, ERR_BAD_VALUE, "offset %zu: not a flat JSON object", c->i);
    return false;
}

err_code flatjson_check(const char *text, size_t len, err_t *err) {
    cursor c = {text, len, 0};
    return walk(&c, NULL, err) ? ERR_OK : (err->code ? err->code : err_set(err, ERR_BAD_VALUE, "not a JSON object"));
}

bool flatjson_get_u64(const char *text, size_t len, const char *k, uint64_t *out) {
    cursor c = {text, len, 0};
    if (!walk(&c, k, NULL)) return false;
    uint64_t v = 0;
    size_t i = c.i;
    if (i < len && text[i] == '0' && i + 1 < len && is_digit(text[i + 1])) return false;
    for (; i < len && is_digit(text[i]); i++) {
        const uint64_t d = (uint64_t)(text[i] - '0');
        if (v > UINT64_MAX / 10 || (v == UINT64_MAX / 10 && d > UINT64_MAX % 10)) return false;
        v = v * 10 + d;
    }
    if (i == c.i || (i < len && !in_set(text[i], " \t\r\n,}"))) return false; /* a fraction, an exponent: not a count */
    *out = v;
    return true;
}

bool flatjson_get_bool(const char *text, size_t len, const char *k, bool *out) {
    cursor c = {text, len, 0};
    if (!walk(&c, k, NULL)) return false;
    if (len - c.i >= 4 && !memcmp(text + c.i, "true", 4)) return *out = true, true;
    if (len - c.i >= 5 && !memcmp(text + c.i, "false", 5)) return *out = false, true;
    return false;
}

bool flatjson_get_str(const char *text, size_t len, const char *k, char *out, size_t cap) {
    cursor c = {text, len, 0};
    if (!cap || !walk(&c, k, NULL) || c.i >= len || text[c.i] != '"') return false;
    size_t o = 0;
    for (size_t i = c.i + 1; i < len && text[i] != '"'; i++) {
        char ch = text[i];
        if (ch == '\\' && i + 1 < len) {
            const char e = text[++i];
            ch = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e == 'b' ? '\b' : e == 'f' ? '\f' : e;
            if (e == 'u') { /* octo writes \u only for control bytes; others read as '?' */
                unsigned v = 0;
                if (i + 4 >= len) return false;
                for (int k = 1; k <= 4; k++) {
                    const char h = text[i + k];
                    v = v * 16 + (unsigned)(is_digit(h) ? h - '0' : (h | 0x20) - 'a' + 10);
                }
                ch = v < 0x80 ? (char)v : '?';
                i += 4;
            }
        }
        if (o + 1 < cap) out[o++] = ch;
    }
    out[o] = '\0';
    return true;
}
