/*
 * json_schema_internal — what json_schema.c shares with its regular
 * expression converter (json_schema_regex.c): a growing text buffer.
 */
#ifndef OCTO_MODEL_JSON_SCHEMA_INTERNAL_H
#define OCTO_MODEL_JSON_SCHEMA_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static inline void sb_add(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = true; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static inline void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static inline void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        sb_add(b, tmp, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb_add(b, big, (size_t)n);
    free(big);
}

/*
 * A pattern (JSON Schema's "pattern", ECMA-262 syntax) as GBNF matching the
 * characters of a JSON string's content that match it whole. false with
 * why filled in when it uses what is not covered (json_schema.h).
 */
bool schema_regex_gbnf(const char *pattern, size_t len, sbuf *out, char *why, size_t why_n);

#endif
