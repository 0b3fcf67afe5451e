/*
 * err — see err.h. Messages are formatted into a fixed buffer inside err_t so
 * that reporting an error never allocates (an out-of-memory error must still
 * be reportable).
 */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

err_code err_set(err_t *e, err_code code, const char *fmt, ...) {
    if (!e) return code;
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return code;
}

err_code err_prefix(err_t *e, const char *fmt, ...) {
    if (!e) return ERR_OK;
    char head[160], old[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
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
