/*
 * json — a JSON document read into a tree (RFC 8259), for the inputs that
 * nest: a JSON schema (model/json_schema.h) and what tests check against it.
 * flatjson.h stays the reader and writer of octo's own flat files.
 *
 * Every value keeps its source text (src, src_len): a number is written back
 * exactly as it was given (1.50 stays 1.50, 10000000000000000001 is not
 * rounded), and a schema's enum or const value goes into a grammar as the
 * very text that matches it. Parsing is strict: one value, no trailing
 * commas or comments, strings valid UTF-8 with their escapes decoded
 * (surrogate pairs joined; a lone surrogate is an error), nesting at most
 * JSON_MAX_DEPTH. Errors carry the byte offset.
 */
#ifndef OCTO_CORE_JSON_H
#define OCTO_CORE_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

#define JSON_MAX_DEPTH 128

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_kind;

typedef struct json_value json_value;
struct json_value {
    json_kind kind;
    bool boolean;        /* JSON_BOOL */
    double number;       /* JSON_NUMBER (strtod of its text) */
    char *str;           /* JSON_STRING: decoded, NUL-terminated */
    size_t str_len;      /* its bytes (a string may hold \u0000) */
    int n;               /* JSON_ARRAY: items; JSON_OBJECT: members */
    json_value *items;   /* (n) the items, or the members' values */
    char **keys;         /* (n) JSON_OBJECT: the members' names, decoded */
    const char *src;     /* the value's text in the parsed buffer (valid while it is) */
    size_t src_len;
};

/* The tree of text[0..len); *out is NULL on error. */
err_code json_parse(const char *text, size_t len, json_value **out, err_t *err);
/* The same, refused (ERR_UNSUPPORTED) past max_values values: the tree's memory (about 80 bytes a
 * value) bounded by what the caller expects, not by the text's length. 0: no bound. */
err_code json_parse_max(const char *text, size_t len, long max_values, json_value **out, err_t *err);
void json_free(json_value *v);

/* An object's member named key (the last one, as most readers do), or NULL. */
const json_value *json_get(const json_value *obj, const char *key);
/* json_get's value when it is a string, else NULL. */
const char *json_get_str(const json_value *obj, const char *key);

#endif
