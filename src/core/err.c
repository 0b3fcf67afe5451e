/*
 * err — see err.h. Messages are formatted into a fixed buffer inside err_t so
 * that reporting an error never allocates (an out-of-memory error must still
 * be reportable).
 */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Bytes of the valid UTF-8 character at p (n bytes left), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *p, size_t n) {
    const size_t len = p[0] < 0x80 ? 1 : (p[0] & 0xE0) == 0xC0 ? 2 : (p[0] & 0xF0) == 0xE0 ? 3 : (p[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (!len || len > n || (len == 2 && p[0] < 0xC2)) return 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    return len;
}

/* Copy src into dst (cap bytes, NUL-terminated) with control bytes and
 * invalid UTF-8 written as \xNN: names read from a file cannot move a
 * terminal's cursor or forge a log line. */
static void copy_escaped(char *dst, size_t cap, const char *src) {
    const unsigned char *p = (const unsigned char *)src;
    size_t n = strlen(src), o = 0;
    while (n && o + 1 < cap) {
        size_t len = utf8_len(p, n);
        if (len && !(len == 1 && (*p < 0x20 || *p == 0x7F))) {
            if (o + len >= cap) break;
            memcpy(dst + o, p, len);
        } else {
            if (o + 4 >= cap) break;
            snprintf(dst + o, 5, "\\x%02X", *p);
            len = 1;
            o += 3;
        }
        o += len;
        p += len;
        n -= len;
    }
    dst[o] = '\0';
}

err_code err_set(err_t *e, err_code code, const char *fmt, ...) {
    if (!e) return code;
    e->code = code;
    char raw[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    copy_escaped(e->msg, sizeof e->msg, raw);
    return code;
}

err_code err_prefix(err_t *e, const char *fmt, ...) {
    if (!e) return ERR_OK;
    char head[160], old[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    char raw[sizeof head];
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    copy_escaped(head, sizeof head, raw);
    memcpy(old, e->msg, sizeof old);
    /* head, ": ", then as much of the old message as fits */
    size_t n = strlen(head), cap = sizeof e->msg - 1;
    if (n > cap) n = cap;
    memcpy(e->msg, head, n);
    for (const char *p = ": "; *p && n < cap; p++) e->msg[n++] = *p;
    for (const char *p = old; *p && n < cap; p++) e->msg[n++] = *p;
    e->msg[n] = '\0';
    return e->code;
}

void err_clear(err_t *e) {
    if (!e) return;
    e->code = ERR_OK;
    e->msg[0] = '\0';
}

const char *err_code_name(err_code code) {
    static const char *const names[ERR_COUNT_] = {
        [ERR_OK] = "ok",
        [ERR_INVALID_ARG] = "invalid argument",
        [ERR_NOMEM] = "out of memory",
        [ERR_IO] = "i/o error",
        [ERR_NOT_FOUND] = "not found",
        [ERR_IS_DIR] = "is a directory",
        [ERR_EMPTY_FILE] = "empty file",
        [ERR_TRUNCATED] = "truncated file",
        [ERR_BAD_MAGIC] = "not a GGUF file",
        [ERR_BAD_VERSION] = "unsupported GGUF version",
        [ERR_BAD_TENSOR_TYPE] = "unknown tensor type",
        [ERR_BAD_METADATA] = "malformed metadata",
        [ERR_TENSOR_BOUNDS] = "tensor data out of bounds",
        [ERR_OVERFLOW] = "size overflow",
        [ERR_MISSING_TENSOR] = "missing tensor",
        [ERR_BAD_SHAPE] = "wrong tensor shape",
        [ERR_UNSUPPORTED_ARCH] = "unsupported architecture",
        [ERR_MISSING_KEY] = "missing metadata key",
        [ERR_BAD_VALUE] = "bad metadata value",
        [ERR_UNSUPPORTED] = "unsupported",
        [ERR_CONTEXT_FULL] = "context full",
        [ERR_BUSY] = "busy",
        [ERR_CANCELLED] = "cancelled",
        [ERR_NO_SPACE] = "no space left",
        [ERR_CORRUPT] = "corrupt data",
    };
    if ((int)code < 0 || code >= ERR_COUNT_ || !names[code]) return "unknown error";
    return names[code];
}
