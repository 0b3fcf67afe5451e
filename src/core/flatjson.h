/*
 * flatjson — one flat JSON object: keys whose values are strings, numbers,
 * booleans or null (no nesting). Enough for the files octo writes for
 * itself (a deploy bundle's plan.json) and reads back; not a JSON library.
 *
 * Writing appends to a caller's buffer with snprintf's contract: the length
 * the whole text needs is tracked even when it does not fit.
 * Reading validates the whole text first (flatjson_check): a file that is
 * not one flat object is an error with the offset, never half-read.
 */
#ifndef OCTO_CORE_FLATJSON_H
#define OCTO_CORE_FLATJSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct {
    char *buf;
    size_t cap, len; /* len: what the text needs, maybe more than cap */
    int n;           /* keys written */
} flatjson_out;

void flatjson_begin(flatjson_out *o, char *buf, size_t cap);
void flatjson_str(flatjson_out *o, const char *key, const char *v);
void flatjson_u64(flatjson_out *o, const char *key, uint64_t v);
void flatjson_bool(flatjson_out *o, const char *key, bool v);
/* Closes the object; returns the length the text needs (excluding the NUL). */
size_t flatjson_end(flatjson_out *o);

/* Is text (len bytes) one flat object? ERR_BAD_VALUE with where it is not. */
err_code flatjson_check(const char *text, size_t len, err_t *err);
/* A key's value in checked text. false when absent or of another kind. */
bool flatjson_get_u64(const char *text, size_t len, const char *key, uint64_t *out);
bool flatjson_get_bool(const char *text, size_t len, const char *key, bool *out);
/* The string unescaped into out (cap bytes, NUL-terminated, truncated). */
bool flatjson_get_str(const char *text, size_t len, const char *key, char *out, size_t cap);

#endif
