/*
 * cli — what every octo command shares: one-line errors, strict number
 * parsing, id lists.
 */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("octo: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (see 'octo help')\n", stderr);
    va_end(ap);
    return 2;
}

int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("octo: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

/* Strict integer / float parsing: the whole string must be a number in range. */
int parse_long(const char *s, long min, long max, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) return 0;
    *out = v;
    return 1;
}

int parse_float(const char *s, float *out) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end) return 0;
    *out = v;
    return 1;
}

int parse_tokens(const char *s, int32_t **out, int *n_out) {
    int cap = 16, n = 0;
    int32_t *t = malloc(sizeof *t * (size_t)cap);
    if (!t) return 0;
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || (*end && *end != ' ' && *end != ',' && *end != '\t' && *end != '\n')) {
            free(t);
            return 0;
        }
        if (n == cap) {
            int32_t *q = realloc(t, sizeof *t * (size_t)(cap *= 2));
            if (!q) { free(t); return 0; }
            t = q;
        }
        t[n++] = (int32_t)v;
        p = end;
    }
    *out = t;
    *n_out = n;
    return 1;
}


double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }
