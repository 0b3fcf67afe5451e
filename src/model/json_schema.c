/*
 * json_schema — see json_schema.h for what is covered.
 *
 * A schema becomes rules, one per schema node, named after where it is
 * (root, root-name, root-tags-item, ...), with the JSON primitives (space,
 * string, number, value, ...) defined once at the end when used. A rule body
 * already made is reused by name, so repeated subschemas cost nothing. A
 * $ref gets its rule's name before its body is made, so a schema may refer
 * to itself (trees, linked lists).
 *
 * Objects: members come in the schema's order, each optional one may be
 * left out, and commas must fall right. With members 0..n-1, first_i is
 * "members i.. with nothing written yet" and rest_i "with something written
 * (so each starts with a comma)":
 *     rest_i  = "," kv_i rest_{i+1}          (required)
 *             | ("," kv_i)? rest_{i+1}       (optional)
 *     first_i = kv_i rest_{i+1}              (required)
 *             | kv_i rest_{i+1} | first_{i+1} (optional)
 * which is linear in n and never ambiguous.
 *
 * Integer ranges: a range of numbers with the same count of digits is
 * written digit by digit (lo's first digit then the rest up to 9..9, the
 * full digits between, hi's first digit then 0..0 up to the rest), and a
 * range over several lengths is a range per length.
 */
#include "model/json_schema.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/strmap.h"
#include "model/json_schema_internal.h"

#define MAX_DIGITS 16          /* an integer's digits at most (as llama.cpp's converter) */
#define MAX_SCHEMA_DEPTH 64
#define MAX_RULES 4096 /* a bound on the grammar's size (naming and reuse are lookups by hash) */
/* An object's members (allOf's merged): each makes two rules, so more could never fit in MAX_RULES; and the
 * checks of names against names below are quadratic, so they are bounded before they run (20,000 required
 * members took 6 s to refuse) */
#define MAX_MEMBERS (MAX_RULES / 2)

/* bytes as a GBNF literal "..." */
static void sb_literal(sbuf *b, const char *s, size_t n) {
    sb_str(b, "\"");
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') sb_printf(b, "\\%c", c);
        else if (c < 0x20 || c == 0x7F) sb_printf(b, "\\x%02X", c);
        else sb_add(b, (const char *)&c, 1);
    }
    sb_str(b, "\"");
}

/* A string's JSON text (quotes, escapes), minimal. */
static void sb_json_string(sbuf *b, const char *s, size_t n) {
    sb_str(b, "\"");
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\t' ? "\\t"
                        : c == '\r' ? "\\r" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        if (esc) sb_str(b, esc);
        else if (c < 0x20) sb_printf(b, "\\u%04x", c);
        else sb_add(b, (const char *)&c, 1);
    }
    sb_str(b, "\"");
}

/* A value as compact JSON (for enum and const). */
static void sb_json(sbuf *b, const json_value *v) {
    switch (v->kind) {
    case JSON_STRING: sb_json_string(b, v->str, v->str_len); return;
    case JSON_ARRAY:
    case JSON_OBJECT:
        sb_str(b, v->kind == JSON_ARRAY ? "[" : "{");
        for (int i = 0; i < v->n; i++) {
            if (i) sb_str(b, ",");
            if (v->kind == JSON_OBJECT) sb_json_string(b, v->keys[i], strlen(v->keys[i])), sb_str(b, ":");
            sb_json(b, &v->items[i]);
        }
        sb_str(b, v->kind == JSON_ARRAY ? "]" : "}");
        return;
    default: sb_add(b, v->src, v->src_len); /* null, true, false, a number as written */
    }
}

/* ---------------------------------------------------------------- rules */

typedef struct {
    char *name, *body;
} rule;

typedef struct {
    char *ref, *name;
} ref_rule;

typedef struct {
    const json_value *doc;
    rule *rules;
    int n_rules, cap_rules;
    strmap names;  /* a rule's index by its name */
    strmap bodies; /* a rule's index by its body */
    strmap bases;  /* a name's base -> the next suffix to try (NAME, NAME1, NAME2...) */
    strmap ref_of; /* a $ref's text -> its index in refs */
    ref_rule *refs;
    int n_refs, cap_refs;
    unsigned used;         /* the primitives used (PRIM_*) */
    const json_value *mixed; /* a schema with a list of types: each type ignores the others' keywords */
    int depth;
    long steps;               /* schema nodes converted (a node met again costs a lookup, not a step) */
    const json_value **seen;  /* open addressing, by address: a node converted, and its rule (done[i]) */
    const char **done;
    size_t cap_seen, n_seen;
    err_t *err;
    err_code rc;
} conv;

enum { P_SPACE = 1, P_STRING = 2, P_NUMBER = 4, P_INTEGER = 8, P_BOOL = 16, P_NULL = 32, P_VALUE = 64, P_CHAR = 128 };

static const char *fail(conv *c, err_code rc, const char *fmt, ...) {
    if (c->rc == ERR_OK) {
        char msg[200];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        c->rc = err_set(c->err, rc, "json schema: %s", msg);
    }
    return NULL;
}

static bool grow(conv *c, void **v, int *cap, int need, size_t size) {
    if (need <= *cap) return true;
    const int cap2 = need < 16 ? 16 : 2 * need;
    void *p = realloc(*v, size * (size_t)cap2);
    if (!p) return fail(c, ERR_NOMEM, "out of memory"), false;
    *v = p;
    *cap = cap2;
    return true;
}

/* Names the primitives (write_primitives) and the server's tool grammar use. */
static bool reserved(const char *name) {
    static const char *const names[] = {"value", "object", "array", "string", "char", "integral-part", "number",
                                        "integer", "boolean", "null", "space", "free-text", NULL};
    for (int i = 0; names[i]; i++)
        if (!strcmp(name, names[i])) return true;
    return false;
}

/* A rule name from a hint: letters, digits and '-' only, made unique. */
static char *new_name(conv *c, const char *hint) {
    char base[64];
    size_t n = 0;
    for (const char *s = hint; *s && n < sizeof base - 1; s++)
        base[n++] = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ? *s : '-';
    base[n] = '\0';
    char *name = malloc(n + 16);
    if (!name) return (char *)fail(c, ERR_NOMEM, "out of memory");
    for (int k = strmap_get(&c->bases, base, n) > 0 ? strmap_get(&c->bases, base, n) : 0;; k++) {
        if (k == 0) strcpy(name, base);
        else snprintf(name, n + 16, "%s%d", base, k);
        if (reserved(name) || strmap_get(&c->names, name, strlen(name)) >= 0) continue;
        if (!strmap_put(&c->bases, base, n, k + 1)) return free(name), (char *)fail(c, ERR_NOMEM, "out of memory");
        return name;
    }
}

/* A rule slot named after hint, its body still NULL; the index, or -1. */
static int reserve(conv *c, const char *hint) {
    if (c->n_rules >= MAX_RULES) return fail(c, ERR_UNSUPPORTED, "the schema makes more than %d rules", MAX_RULES), -1;
    char *name = new_name(c, hint);
    if (!name || !grow(c, (void **)&c->rules, &c->cap_rules, c->n_rules + 1, sizeof *c->rules)) return free(name), -1;
    if (!strmap_put(&c->names, name, strlen(name), c->n_rules))
        return free(name), fail(c, ERR_NOMEM, "out of memory"), -1;
    c->rules[c->n_rules] = (rule){name, NULL};
    return c->n_rules++;
}

/* The rule whose body is b (taken over): an existing one with that body, or a new one. */
static const char *add_rule(conv *c, const char *hint, sbuf *b) {
    if (b->oom) {
        free(b->p);
        *b = (sbuf){0};
        return fail(c, ERR_NOMEM, "out of memory");
    }
    if (!b->p || !*b->p) sb_str(b, "\"\""); /* an empty body: GBNF reads on to the next line */
    if (b->oom) return add_rule(c, hint, b);
    const int same = strmap_get(&c->bodies, b->p, strlen(b->p));
    if (same >= 0) {
        free(b->p);
        *b = (sbuf){0};
        return c->rules[same].name;
    }
    const int r = reserve(c, hint);
    if (r >= 0 && !strmap_put(&c->bodies, b->p, strlen(b->p), r)) fail(c, ERR_NOMEM, "out of memory");
    if (r < 0 || c->rc != ERR_OK) {
        free(b->p);
        *b = (sbuf){0};
        return NULL;
    }
    c->rules[r].body = b->p;
    *b = (sbuf){0};
    return c->rules[r].name;
}

/* ---------------------------------------------------------------- primitives */

static const char *prim(conv *c, unsigned p) {
    c->used |= p | (p & (P_STRING | P_VALUE) ? P_CHAR : 0) | P_SPACE;
    switch (p) {
    case P_STRING: return "string";
    case P_NUMBER: return "number";
    case P_INTEGER: return "integer";
    case P_BOOL: return "boolean";
    case P_NULL: return "null";
    case P_VALUE: return "value";
    default: return "space";
    }
}

static void write_primitives(const conv *c, sbuf *o) {
    unsigned u = c->used;
    if (u & P_VALUE) u |= P_STRING | P_NUMBER | P_BOOL | P_NULL | P_CHAR;
    if (u & P_VALUE)
        sb_str(o, "value ::= object | array | string | number | boolean | null\n"
                  "object ::= \"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" space\n"
                  "array ::= \"[\" space ( value (\",\" space value)* )? \"]\" space\n");
    if (u & P_STRING) sb_str(o, "string ::= \"\\\"\" char* \"\\\"\" space\n");
    if (u & P_CHAR) sb_str(o, "char ::= [^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n");
    if (u & (P_NUMBER | P_INTEGER)) sb_str(o, "integral-part ::= [0] | [1-9] [0-9]{0,15}\n");
    if (u & P_NUMBER)
        sb_str(o, "number ::= (\"-\"? integral-part) (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})? space\n");
    if (u & P_INTEGER) sb_str(o, "integer ::= (\"-\"? integral-part) space\n");
    if (u & P_BOOL) sb_str(o, "boolean ::= (\"true\" | \"false\") space\n");
    if (u & P_NULL) sb_str(o, "null ::= \"null\" space\n");
    if (u & P_SPACE) sb_str(o, "space ::= | \" \" | \"\\n\" [ \\t]{0,20}\n");
}

const char *json_any_gbnf(void) {
    return "root ::= object\n"
           "value ::= object | array | string | number | boolean | null\n"
           "object ::= \"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" space\n"
           "array ::= \"[\" space ( value (\",\" space value)* )? \"]\" space\n"
           "string ::= \"\\\"\" char* \"\\\"\" space\n"
           "char ::= [^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n"
           "integral-part ::= [0] | [1-9] [0-9]{0,15}\n"
           "number ::= (\"-\"? integral-part) (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})? space\n"
           "boolean ::= (\"true\" | \"false\") space\n"
           "null ::= \"null\" space\n"
           "space ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";
}


/* ---------------------------------------------------------------- schemas */

static const char *visit(conv *c, const json_value *s, const char *hint);

/* hint + "-" + suffix, in buf */
static const char *sub_hint(char *buf, size_t n, const char *hint, const char *suffix) {
    snprintf(buf, n, "%s-%s", hint, suffix);
    return buf;
}

static bool is_annotation(const char *k) {
    static const char *const names[] = {"title", "description", "default", "examples", "$schema", "$id", "$comment",
                                        "deprecated", "readOnly", "writeOnly", "$defs", "definitions", "strict", NULL};
    for (int i = 0; names[i]; i++)
        if (strcmp(k, names[i]) == 0) return true;
    return false;
}

/* Every keyword of s is an annotation or one of known (NULL-terminated). */
static bool keywords_known(conv *c, const json_value *s, const char *const *known) {
    if (s == c->mixed) return true; /* visit_types checked them */
    for (int i = 0; i < s->n; i++) {
        bool ok = is_annotation(s->keys[i]);
        for (int k = 0; known[k] && !ok; k++) ok = strcmp(s->keys[i], known[k]) == 0;
        if (!ok) return fail(c, ERR_UNSUPPORTED, "keyword '%s' is not supported", s->keys[i]), false;
    }
    return true;
}

/* The alternatives of a list of schemas (anyOf, oneOf, a list of types). */
static const char *visit_alternatives(conv *c, const json_value *list, const char *hint) {
    if (list->kind != JSON_ARRAY || list->n == 0) return fail(c, ERR_BAD_VALUE, "anyOf/oneOf needs a non-empty list");
    sbuf b = {0};
    for (int i = 0; i < list->n; i++) {
        char h[96], k[16];
        snprintf(k, sizeof k, "%d", i);
        const char *r = visit(c, &list->items[i], sub_hint(h, sizeof h, hint, k));
        if (!r) return free(b.p), NULL;
        if (i) sb_str(&b, " | ");
        sb_str(&b, r);
    }
    return add_rule(c, hint, &b);
}

static const char *visit_enum(conv *c, const json_value *list, const char *hint) {
    if (list->kind != JSON_ARRAY || list->n == 0) return fail(c, ERR_BAD_VALUE, "enum needs a non-empty list");
    sbuf b = {0}, text = {0};
    sb_str(&b, "(");
    for (int i = 0; i < list->n; i++) {
        text.n = 0;
        sb_json(&text, &list->items[i]);
        if (i) sb_str(&b, " | ");
        sb_literal(&b, text.p ? text.p : "", text.n);
    }
    sb_printf(&b, ") %s", prim(c, P_SPACE));
    free(text.p);
    return add_rule(c, hint, &b);
}

static const char *visit_const(conv *c, const json_value *v, const char *hint) {
    sbuf b = {0}, text = {0};
    sb_json(&text, v);
    sb_literal(&b, text.p ? text.p : "", text.n);
    sb_printf(&b, " %s", prim(c, P_SPACE));
    free(text.p);
    return add_rule(c, hint, &b);
}

/* ---------------------------------------------------------------- $ref */

/* The schema a local reference names: "#", "#/$defs/x", "#/definitions/x". */
static const json_value *resolve(conv *c, const char *ref) {
    if (strcmp(ref, "#") == 0) return c->doc;
    const char *prefixes[] = {"#/$defs/", "#/definitions/"};
    for (int i = 0; i < 2; i++) {
        const size_t n = strlen(prefixes[i]);
        if (strncmp(ref, prefixes[i], n) != 0) continue;
        const json_value *defs = json_get(c->doc, i == 0 ? "$defs" : "definitions");
        const json_value *s = json_get(defs, ref + n);
        if (s) return s;
    }
    return fail(c, ERR_BAD_VALUE, "$ref '%s' does not name a schema in this document (only local refs: #/$defs/...)",
                ref), NULL;
}

static const char *visit_ref(conv *c, const char *ref) {
    const int known = strmap_get(&c->ref_of, ref, strlen(ref));
    if (known >= 0) return c->refs[known].name;
    const json_value *target = resolve(c, ref);
    if (!target) return NULL;
    const char *last = strrchr(ref, '/');
    const int r = reserve(c, last && last[1] ? last + 1 : "root");
    if (r < 0 || !grow(c, (void **)&c->refs, &c->cap_refs, c->n_refs + 1, sizeof *c->refs)) return NULL;
    c->refs[c->n_refs++] = (ref_rule){strdup(ref), c->rules[r].name};
    if (!c->refs[c->n_refs - 1].ref || !strmap_put(&c->ref_of, ref, strlen(ref), c->n_refs - 1))
        return fail(c, ERR_NOMEM, "out of memory");
    const char *body = visit(c, target, c->rules[r].name);
    if (!body) return NULL;
    c->rules[r].body = strdup(body); /* the ref's rule stands for the target's, and is reused as any other */
    if (!c->rules[r].body || !strmap_put(&c->bodies, body, strlen(body), r)) return fail(c, ERR_NOMEM, "out of memory");
    return c->rules[r].name;
}

/* ---------------------------------------------------------------- numbers */

/* A whole number of the schema (a count or a bound); false if v is not one. */
static bool whole(const json_value *v, int64_t lo, int64_t hi, int64_t *out) {
    if (!v || v->kind != JSON_NUMBER || v->number != floor(v->number) || v->number < (double)lo ||
        v->number > (double)hi)
        return false;
    *out = (int64_t)v->number;
    return true;
}

static bool all_of(const char *s, size_t n, char d) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != d) return false;
    return true;
}

/* The numbers lo..hi written with n digits each (lo, hi: digit strings). */
static void same_length(sbuf *b, const char *lo, const char *hi, size_t n) {
    if (n == 0) return;
    if (memcmp(lo, hi, n) == 0) { sb_literal(b, lo, n); return; }
    if (n == 1) { sb_printf(b, "[%c-%c]", lo[0], hi[0]); return; }
    if (lo[0] == hi[0]) {
        sb_printf(b, "\"%c\" (", lo[0]);
        same_length(b, lo + 1, hi + 1, n - 1);
        sb_str(b, ")");
        return;
    }
    char nines[MAX_DIGITS + 2], zeros[MAX_DIGITS + 2];
    memset(nines, '9', n), memset(zeros, '0', n);
    const bool lo_full = all_of(lo + 1, n - 1, '0'), hi_full = all_of(hi + 1, n - 1, '9');
    const char first = lo_full ? lo[0] : (char)(lo[0] + 1), last = hi_full ? hi[0] : (char)(hi[0] - 1);
    bool any = false;
    sb_str(b, "(");
    if (!lo_full) {
        sb_printf(b, "\"%c\" (", lo[0]);
        same_length(b, lo + 1, nines, n - 1);
        sb_str(b, ")");
        any = true;
    }
    if (first <= last) sb_printf(b, "%s[%c-%c] [0-9]{%zu}", any ? " | " : "", first, last, n - 1), any = true;
    if (!hi_full) {
        sb_printf(b, "%s\"%c\" (", any ? " | " : "", hi[0]);
        same_length(b, zeros, hi + 1, n - 1);
        sb_str(b, ")");
    }
    sb_str(b, ")");
}

/* The numbers a..b, 0 <= a <= b, as alternatives, one per length. */
static void range_nonneg(sbuf *b, int64_t a, int64_t bmax) {
    char lo[32], hi[32];
    int64_t p = 1;
    bool any = false;
    sb_str(b, "(");
    for (int d = 1; d <= MAX_DIGITS + 1 && p <= bmax; d++, p *= 10) {
        const int64_t from = a > (d == 1 ? 0 : p) ? a : (d == 1 ? 0 : p), to = bmax < p * 10 - 1 ? bmax : p * 10 - 1;
        if (from > to) continue;
        snprintf(lo, sizeof lo, "%0*" PRId64, d, from);
        snprintf(hi, sizeof hi, "%0*" PRId64, d, to);
        if (any) sb_str(b, " | ");
        same_length(b, lo, hi, (size_t)d);
        any = true;
    }
    if (!any) sb_str(b, "\"0\""); /* a == b == 0 */
    sb_str(b, ")");
}

static const int64_t BIG = 9999999999999999; /* 16 digits: the unbounded side */

static void int_range(sbuf *b, int64_t lo, int64_t hi) {
    const bool neg = lo < 0, pos = hi >= 0;
    sb_str(b, "(");
    if (neg) {
        sb_str(b, "\"-\" ");
        range_nonneg(b, hi < 0 ? -hi : 1, -lo);
    }
    if (neg && pos) sb_str(b, " | ");
    if (pos) range_nonneg(b, lo > 0 ? lo : 0, hi);
    sb_str(b, ")");
}

/* The bounds of an integer schema, exclusive ones moved in; false on a bad one. */
static bool int_bounds(conv *c, const json_value *s, int64_t *lo, int64_t *hi) {
    const char *names[] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    *lo = -BIG, *hi = BIG;
    for (int i = 0; i < 4; i++) {
        const json_value *v = json_get(s, names[i]);
        if (!v) continue;
        if (v->kind != JSON_NUMBER) return fail(c, ERR_BAD_VALUE, "%s must be a number", names[i]), false;
        const double x = i < 2 ? (i == 0 ? ceil(v->number) : floor(v->number) + 1)
                               : (i == 2 ? floor(v->number) : ceil(v->number) - 1);
        if (fabs(x) > (double)BIG) return fail(c, ERR_UNSUPPORTED, "%s beyond 16 digits", names[i]), false;
        if (i < 2 && (int64_t)x > *lo) *lo = (int64_t)x;
        if (i >= 2 && (int64_t)x < *hi) *hi = (int64_t)x;
    }
    if (*lo > *hi) return fail(c, ERR_BAD_VALUE, "no integer lies between the bounds"), false;
    return true;
}

static const char *visit_integer(conv *c, const json_value *s, const char *hint) {
    static const char *const known[] = {"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", NULL};
    int64_t lo, hi;
    if (!keywords_known(c, s, known) || !int_bounds(c, s, &lo, &hi)) return NULL;
    if (lo == -BIG && hi == BIG) return prim(c, P_INTEGER);
    sbuf b = {0};
    int_range(&b, lo, hi);
    sb_printf(&b, " %s", prim(c, P_SPACE));
    return add_rule(c, hint, &b);
}

/* A number in [lo, hi] when both are whole and lo >= 0: a whole part in
 * [lo, hi - 1] with any fraction, or hi with a fraction of zeros. */
static const char *visit_number(conv *c, const json_value *s, const char *hint) {
    static const char *const known[] = {"type", "minimum", "maximum", NULL};
    if (!keywords_known(c, s, known)) return NULL;
    const json_value *mn = json_get(s, "minimum"), *mx = json_get(s, "maximum");
    if (!mn && !mx) return prim(c, P_NUMBER);
    int64_t lo = 0, hi = BIG;
    if ((mn && !whole(mn, 0, BIG, &lo)) || (mx && !whole(mx, 0, BIG, &hi)) || lo > hi)
        return fail(c, ERR_UNSUPPORTED, "a number's minimum and maximum must be whole numbers, 0 <= minimum <= maximum");
    sbuf b = {0};
    sb_str(&b, "(");
    if (lo < hi) {
        int_range(&b, lo, hi - 1);
        sb_str(&b, " (\".\" [0-9]{1,16})? | ");
    }
    int_range(&b, hi, hi);
    sb_printf(&b, " (\".\" \"0\"{1,16})?) %s", prim(c, P_SPACE));
    return add_rule(c, hint, &b);
}

/* ---------------------------------------------------------------- strings */

static const char *format_body(const char *f) {
    /* a calendar date: years 0001-9999, each month's days, February 29 in leap years only */
    static const char *const date =
        "([1-9] [0-9]{3} | \"0\" ([1-9] [0-9]{2} | \"0\" ([1-9] [0-9] | \"0\" [1-9]))) \"-\" "
        "((\"0\" [13578] | \"1\" [02]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01]) | "
        "(\"0\" [469] | \"11\") \"-\" (\"0\" [1-9] | [12] [0-9] | \"30\") | "
        "\"02-\" (\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8])) | "
        "([0-9] [0-9] (\"0\" [48] | [2468] [048] | [13579] [26]) | (\"0\" [48] | [2468] [048] | [13579] [26]) \"00\") "
        "\"-02-29\"";
    static const char *const time = "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? "
                                    "(\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])";
    if (strcmp(f, "date") == 0) return date;
    if (strcmp(f, "time") == 0) return time;
    if (strcmp(f, "uuid") == 0)
        return "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12}";
    return NULL; /* date-time: below; others are annotations */
}

static const char *visit_string(conv *c, const json_value *s, const char *hint) {
    static const char *const known[] = {"type", "minLength", "maxLength", "pattern", "format", NULL};
    if (!keywords_known(c, s, known)) return NULL;
    const char *pattern = json_get_str(s, "pattern"), *format = json_get_str(s, "format");
    const json_value *mn = json_get(s, "minLength"), *mx = json_get(s, "maxLength");
    int64_t lo = 0, hi = -1;
    if ((mn && !whole(mn, 0, 10000, &lo)) || (mx && !whole(mx, 0, 10000, &hi)) || (mx && hi < lo))
        return fail(c, ERR_BAD_VALUE, "minLength/maxLength must be whole numbers, minLength <= maxLength, at most 10000");
    if (pattern && (mn || mx)) return fail(c, ERR_UNSUPPORTED, "pattern together with minLength/maxLength");
    if (format && format_body(format) && (mn || mx || pattern))
        return fail(c, ERR_UNSUPPORTED, "format %s together with minLength, maxLength or pattern", format);
    if (format && !strcmp(format, "date-time") && (mn || mx || pattern))
        return fail(c, ERR_UNSUPPORTED, "format date-time together with minLength, maxLength or pattern");
    sbuf b = {0};
    sb_str(&b, "\"\\\"\" ");
    if (pattern) {
        char why[160];
        if (!schema_regex_gbnf(pattern, strlen(pattern), &b, why, sizeof why))
            return free(b.p), fail(c, ERR_UNSUPPORTED, "pattern '%s': %s", pattern, why);
    } else if (format && strcmp(format, "date-time") == 0) {
        sb_printf(&b, "(%s) \"T\" (%s)", format_body("date"), format_body("time"));
    } else if (format && format_body(format)) {
        sb_printf(&b, "(%s)", format_body(format));
    } else if (!mn && !mx) {
        sb_str(&b, "char*");
    } else if (hi < 0) {
        sb_printf(&b, "char{%" PRId64 ",}", lo);
    } else {
        sb_printf(&b, "char{%" PRId64 ",%" PRId64 "}", lo, hi);
    }
    sb_printf(&b, " \"\\\"\" %s", prim(c, P_SPACE));
    c->used |= P_CHAR;
    return add_rule(c, hint, &b);
}

/* ---------------------------------------------------------------- arrays */

static const char *visit_array(conv *c, const json_value *s, const char *hint) {
    static const char *const known[] = {"type", "items", "prefixItems", "minItems", "maxItems", NULL};
    if (!keywords_known(c, s, known)) return NULL;
    const json_value *items = json_get(s, "items"), *prefix = json_get(s, "prefixItems");
    const json_value *mn = json_get(s, "minItems"), *mx = json_get(s, "maxItems");
    int64_t lo = 0, hi = -1;
    if ((mn && !whole(mn, 0, 1000, &lo)) || (mx && !whole(mx, 0, 1000, &hi)) || (mx && hi < lo))
        return fail(c, ERR_BAD_VALUE, "minItems/maxItems must be whole numbers, minItems <= maxItems, at most 1000");
    char h[96];
    sbuf b = {0};
    sb_printf(&b, "\"[\" %s ", prim(c, P_SPACE));
    if (prefix) { /* a tuple: exactly these, in order */
        if (prefix->kind != JSON_ARRAY || (items && !(items->kind == JSON_BOOL && !items->boolean)) || mn || mx)
            return free(b.p), fail(c, ERR_UNSUPPORTED, "prefixItems with items, minItems or maxItems");
        for (int i = 0; i < prefix->n; i++) {
            char k[24];
            snprintf(k, sizeof k, "%d", i);
            const char *r = visit(c, &prefix->items[i], sub_hint(h, sizeof h, hint, k));
            if (!r) return free(b.p), NULL;
            sb_printf(&b, "%s%s ", i ? "\",\" space " : "", r);
        }
    } else {
        const char *item = items ? visit(c, items, sub_hint(h, sizeof h, hint, "item")) : prim(c, P_VALUE);
        if (!item) return free(b.p), NULL;
        if (lo > 0) sb_printf(&b, "%s (\",\" %s %s){%" PRId64 ",", item, prim(c, P_SPACE), item, lo - 1);
        else if (hi != 0) sb_printf(&b, "(%s (\",\" %s %s){0,", item, prim(c, P_SPACE), item);
        if (lo > 0 || hi != 0) {
            if (hi >= 0) sb_printf(&b, "%" PRId64, hi - 1);
            sb_str(&b, lo > 0 ? "} " : "})? ");
        }
    }
    sb_printf(&b, "\"]\" %s", prim(c, P_SPACE));
    return add_rule(c, hint, &b);
}

/* ---------------------------------------------------------------- objects */

typedef struct {
    const char *key;
    const json_value *schema;
    bool required;
} member;

typedef struct {
    member *m;
    int n, cap;
    const json_value *extra; /* additionalProperties: NULL = none; else its schema (true: any value) */
    const json_value *names; /* propertyNames: the schema of the other members' names (NULL: any string) */
    int64_t min, max;        /* minProperties, maxProperties (-1: none): maps only, without properties */
} members;

static bool in_required(const json_value *req, const char *key) {
    for (int i = 0; req && req->kind == JSON_ARRAY && i < req->n; i++)
        if (req->items[i].kind == JSON_STRING && strcmp(req->items[i].str, key) == 0) return true;
    return false;
}

/* An object schema's members, added to ms (allOf merges several). */
static bool gather_members(conv *c, const json_value *s, members *ms) {
    static const char *const known[] = {"type", "properties", "required", "additionalProperties", "propertyNames",
                                        "minProperties", "maxProperties", NULL};
    if (!keywords_known(c, s, known)) return false;
    const json_value *names = json_get(s, "propertyNames");
    const char *nt = json_get_str(names, "type");
    if (names && (names->kind != JSON_OBJECT || (nt && strcmp(nt, "string") != 0)))
        return fail(c, ERR_UNSUPPORTED, "propertyNames other than a string schema"), false;
    if (names) ms->names = names;
    const json_value *mn = json_get(s, "minProperties"), *mx = json_get(s, "maxProperties");
    if ((mn && !whole(mn, 0, 1000, &ms->min)) || (mx && !whole(mx, 0, 1000, &ms->max)) ||
        (mn && mx && ms->max < ms->min))
        return fail(c, ERR_BAD_VALUE, "minProperties/maxProperties: whole numbers, min <= max, at most 1000"), false;
    const json_value *props = json_get(s, "properties"), *req = json_get(s, "required");
    const json_value *extra = json_get(s, "additionalProperties");
    if (props && props->kind != JSON_OBJECT) return fail(c, ERR_BAD_VALUE, "properties must be an object"), false;
    if ((props ? props->n : 0) + ms->n > MAX_MEMBERS || (req && req->n > MAX_MEMBERS))
        return fail(c, ERR_UNSUPPORTED, "an object of more than %d members", MAX_MEMBERS), false;
    for (int i = 0; req && i < req->n; i++)
        if (req->kind != JSON_ARRAY || req->items[i].kind != JSON_STRING || !json_get(props, req->items[i].str))
            return fail(c, ERR_UNSUPPORTED, "required names a member without a schema in properties"), false;
    for (int i = 0; props && i < props->n; i++) {
        for (int k = 0; k < ms->n; k++)
            if (!strcmp(ms->m[k].key, props->keys[i]))
                return fail(c, ERR_UNSUPPORTED, "property '%s' is declared twice (allOf)", props->keys[i]), false;
        if (!grow(c, (void **)&ms->m, &ms->cap, ms->n + 1, sizeof *ms->m)) return false;
        ms->m[ms->n++] = (member){props->keys[i], &props->items[i], in_required(req, props->keys[i])};
    }
    if (extra && !(extra->kind == JSON_BOOL && !extra->boolean)) ms->extra = extra;
    return true;
}

/* One member: its key, a colon, its value. */
static bool member_kv(conv *c, const member *m, const char *hint, sbuf *out) {
    char h[96];
    const char *r = visit(c, m->schema, sub_hint(h, sizeof h, hint, m->key));
    if (!r) return false;
    sbuf key = {0};
    sb_json_string(&key, m->key, strlen(m->key));
    sb_literal(out, key.p ? key.p : "", key.n);
    sb_printf(out, " %s \":\" %s %s", prim(c, P_SPACE), prim(c, P_SPACE), r);
    free(key.p);
    return true;
}

/* The rules first_i and rest_i (the file's header) for i = n down to 0;
 * kv[i] is member i's text. Returns first_0's name. */
static const char *member_chain(conv *c, const members *ms, char **kv, const char *extra_kv, const char *hint) {
    char h[96];
    const char *first = NULL, *rest = NULL;
    sbuf b = {0};
    if (extra_kv) sb_printf(&b, "(\",\" %s %s)*", prim(c, P_SPACE), extra_kv);
    rest = add_rule(c, sub_hint(h, sizeof h, hint, "rest"), &b);
    if (extra_kv) sb_printf(&b, "(%s %s)?", extra_kv, rest);
    first = rest ? add_rule(c, sub_hint(h, sizeof h, hint, "first"), &b) : NULL;
    for (int i = ms->n - 1; i >= 0 && first; i--) {
        const char *sp = prim(c, P_SPACE);
        if (ms->m[i].required) sb_printf(&b, "\",\" %s %s %s", sp, kv[i], rest);
        else sb_printf(&b, "(\",\" %s %s)? %s", sp, kv[i], rest);
        const char *rest_i = add_rule(c, sub_hint(h, sizeof h, hint, "rest"), &b);
        if (ms->m[i].required) sb_printf(&b, "%s %s", kv[i], rest);
        else sb_printf(&b, "%s %s | %s", kv[i], rest, first);
        first = rest_i ? add_rule(c, sub_hint(h, sizeof h, hint, "first"), &b) : NULL;
        rest = rest_i;
    }
    return first;
}

/* A map's members: min..max of kv, comma-separated. */
static const char *map_members(conv *c, const members *ms, const char *kv, const char *hint) {
    char h[96];
    sbuf b = {0};
    const char *sp = prim(c, P_SPACE);
    if (ms->max == 0) return add_rule(c, sub_hint(h, sizeof h, hint, "members"), &b);
    sb_printf(&b, "%s%s (\",\" %s %s){%" PRId64 ",", ms->min > 0 ? "" : "(", kv, sp, kv,
              ms->min > 0 ? ms->min - 1 : 0);
    if (ms->max > 0) sb_printf(&b, "%" PRId64, ms->max - 1);
    sb_str(&b, ms->min > 0 ? "}" : "})?");
    return add_rule(c, sub_hint(h, sizeof h, hint, "members"), &b);
}

static const char *object_rule(conv *c, const members *ms, const char *hint) {
    char **kv = calloc((size_t)ms->n + 1, sizeof *kv);
    const char *extra_kv = NULL, *first = NULL;
    bool ok = kv != NULL;
    for (int i = 0; ok && i < ms->n; i++) {
        sbuf b = {0};
        ok = member_kv(c, &ms->m[i], hint, &b) && !b.oom;
        kv[i] = b.p;
    }
    if (ok && ms->extra) {
        char h[96];
        const bool any = ms->extra->kind == JSON_BOOL;
        const char *v = any ? prim(c, P_VALUE) : visit(c, ms->extra, sub_hint(h, sizeof h, hint, "additional"));
        const char *key = prim(c, P_STRING);
        if (ms->names) key = visit_string(c, ms->names, sub_hint(h, sizeof h, hint, "name"));
        sbuf b = {0};
        if (v && key) sb_printf(&b, "%s \":\" %s %s", key, prim(c, P_SPACE), v);
        ok = v && key && (extra_kv = add_rule(c, sub_hint(h, sizeof h, hint, "additional-kv"), &b)) != NULL;
    }
    const bool counted = ms->min > 0 || ms->max >= 0;
    if (ok && counted && (ms->n > 0 || !extra_kv)) {
        fail(c, ERR_UNSUPPORTED, "minProperties/maxProperties with properties (a map's bounds only)");
        ok = false;
    }
    if (ok && counted) first = map_members(c, ms, extra_kv, hint);
    else if (ok) first = member_chain(c, ms, kv, extra_kv, hint);
    for (int i = 0; kv && i < ms->n; i++) free(kv[i]);
    free(kv);
    if (!first) return c->rc == ERR_OK ? fail(c, ERR_NOMEM, "out of memory") : NULL;
    sbuf b = {0};
    sb_printf(&b, "\"{\" %s %s \"}\" %s", prim(c, P_SPACE), first, prim(c, P_SPACE));
    return add_rule(c, hint, &b);
}

static const char *visit_object(conv *c, const json_value *s, const char *hint) {
    members ms = {.max = -1};
    const char *r = gather_members(c, s, &ms) ? object_rule(c, &ms, hint) : NULL;
    free(ms.m);
    return r;
}

/* allOf of object schemas (or refs to them): one object with every member. */
static const char *visit_all_of(conv *c, const json_value *list, const char *hint) {
    if (list->kind != JSON_ARRAY || list->n == 0) return fail(c, ERR_BAD_VALUE, "allOf needs a non-empty list");
    members ms = {.max = -1};
    bool ok = true;
    for (int i = 0; ok && i < list->n; i++) {
        const json_value *s = &list->items[i];
        const char *ref = json_get_str(s, "$ref");
        if (ref && !(s = resolve(c, ref))) ok = false;
        const char *type = ok ? json_get_str(s, "type") : NULL;
        if (ok && (!type || strcmp(type, "object") != 0) && !json_get(s, "properties")) {
            fail(c, ERR_UNSUPPORTED, "allOf of anything but object schemas");
            ok = false;
        }
        ok = ok && gather_members(c, s, &ms);
    }
    const char *r = ok ? object_rule(c, &ms, hint) : NULL;
    free(ms.m);
    return r;
}

/* ---------------------------------------------------------------- dispatch */

static const char *visit_type(conv *c, const json_value *s, const char *type, const char *hint) {
    if (strcmp(type, "object") == 0) return visit_object(c, s, hint);
    if (strcmp(type, "array") == 0) return visit_array(c, s, hint);
    if (strcmp(type, "string") == 0) return visit_string(c, s, hint);
    if (strcmp(type, "integer") == 0) return visit_integer(c, s, hint);
    if (strcmp(type, "number") == 0) return visit_number(c, s, hint);
    static const char *const plain[] = {"type", NULL};
    if (!keywords_known(c, s, plain)) return NULL;
    if (strcmp(type, "boolean") == 0) return prim(c, P_BOOL);
    if (strcmp(type, "null") == 0) return prim(c, P_NULL);
    return fail(c, ERR_BAD_VALUE, "unknown type '%s'", type);
}

/* A list of types: each type's schema (s with that type) as an alternative;
 * a keyword must belong to one of them, and applies to its own type only. */
static const char *visit_types(conv *c, const json_value *s, const json_value *types, const char *hint) {
    static const char *const any_type[] = {"type", "properties", "required", "additionalProperties", "items",
                                           "prefixItems", "minItems", "maxItems", "minLength", "maxLength",
                                           "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
                                           "exclusiveMaximum", NULL};
    if (!keywords_known(c, s, any_type)) return NULL;
    if (types->n == 0) return fail(c, ERR_BAD_VALUE, "an empty list of types");
    const json_value *outer = c->mixed;
    c->mixed = s;
    sbuf b = {0};
    for (int i = 0; i < types->n && c->rc == ERR_OK; i++) {
        char h[96];
        const json_value *t = &types->items[i];
        const char *r = t->kind == JSON_STRING ? visit_type(c, s, t->str, sub_hint(h, sizeof h, hint, t->str))
                                               : fail(c, ERR_BAD_VALUE, "type lists hold names");
        if (r) sb_printf(&b, "%s%s", i ? " | " : "", r);
    }
    c->mixed = outer;
    if (c->rc != ERR_OK) return free(b.p), NULL;
    return add_rule(c, hint, &b);
}

/* A keyword that replaces the schema's type, with no sibling but annotations. */
static const char *visit_combinator(conv *c, const json_value *s, const char *hint) {
    const char *const names[] = {"$ref", "anyOf", "oneOf", "allOf", "enum", "const"};
    for (int i = 0; i < 6; i++) {
        const json_value *v = json_get(s, names[i]);
        if (!v) continue;
        const char *const known[] = {names[i], "type", NULL}; /* a type beside them restates it */
        if (!keywords_known(c, s, known)) return NULL;
        switch (i) {
        case 0: return v->kind == JSON_STRING ? visit_ref(c, v->str) : fail(c, ERR_BAD_VALUE, "$ref must be a string");
        case 1: case 2: return visit_alternatives(c, v, hint);
        case 3: return visit_all_of(c, v, hint);
        case 4: return visit_enum(c, v, hint);
        default: return visit_const(c, v, hint);
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------- one conversion per node */

/* A node's rule depends on the node alone (the document is fixed), so a node
 * met again (a $def reached through several refs, an allOf member shared by
 * objects) reuses it: a chain of objects whose members each refer to the next
 * converts in steps linear in its size, not doubling per level. */
static size_t seen_slot(const conv *c, const json_value *s) {
    size_t h = ((uintptr_t)s >> 4) * 0x9E3779B97F4A7C15ull;
    for (h &= c->cap_seen - 1; c->seen[h] && c->seen[h] != s; h = (h + 1) & (c->cap_seen - 1)) {}
    return h;
}

static const char *seen_rule(const conv *c, const json_value *s) {
    if (!c->cap_seen) return NULL;
    const size_t h = seen_slot(c, s);
    return c->seen[h] ? c->done[h] : NULL;
}

static void remember(conv *c, const json_value *s, const char *rule_name) {
    if (2 * (c->n_seen + 1) > c->cap_seen) { /* keep it at most half full */
        const size_t cap = c->cap_seen ? 2 * c->cap_seen : 256;
        const json_value **ks = calloc(cap, sizeof *ks);
        const char **vs = calloc(cap, sizeof *vs);
        if (!ks || !vs) return free(ks), free(vs); /* not remembered: converted again if met again */
        const conv grown = {.seen = ks, .done = vs, .cap_seen = cap};
        for (size_t i = 0; i < c->cap_seen; i++)
            if (c->seen[i]) {
                const size_t h = seen_slot(&grown, c->seen[i]);
                ks[h] = c->seen[i], vs[h] = c->done[i];
            }
        free(c->seen), free(c->done);
        c->seen = ks, c->done = vs, c->cap_seen = cap;
    }
    const size_t h = seen_slot(c, s);
    if (!c->seen[h]) c->seen[h] = s, c->done[h] = rule_name, c->n_seen++;
}

static const char *visit_node(conv *c, const json_value *s, const char *hint);

static const char *visit(conv *c, const json_value *s, const char *hint) {
    if (c->rc != ERR_OK) return NULL;
    const bool shared = !c->mixed && s->kind == JSON_OBJECT; /* a list of types reads its node in parts */
    const char *r = shared ? seen_rule(c, s) : NULL;
    if (r) return r;
    if (++c->steps > JSON_SCHEMA_MAX_STEPS)
        return fail(c, ERR_UNSUPPORTED, "the schema takes more than %d steps to convert (at %s)", JSON_SCHEMA_MAX_STEPS,
                    hint);
    r = visit_node(c, s, hint);
    if (r && shared) remember(c, s, r);
    return r;
}

static const char *visit_node(conv *c, const json_value *s, const char *hint) {
    if (s->kind == JSON_BOOL) return s->boolean ? prim(c, P_VALUE) : fail(c, ERR_UNSUPPORTED, "the schema false");
    if (s->kind != JSON_OBJECT) return fail(c, ERR_BAD_VALUE, "a schema must be an object or a boolean");
    if (++c->depth > MAX_SCHEMA_DEPTH) return fail(c, ERR_UNSUPPORTED, "schemas nested deeper than %d", MAX_SCHEMA_DEPTH);
    const char *r = visit_combinator(c, s, hint);
    if (!r && c->rc == ERR_OK) {
        const json_value *type = json_get(s, "type");
        if (type && type->kind == JSON_ARRAY) r = visit_types(c, s, type, hint);
        else if (type && type->kind == JSON_STRING) r = visit_type(c, s, type->str, hint);
        else if (type) r = fail(c, ERR_BAD_VALUE, "type must be a name or a list of names");
        else if (json_get(s, "properties") || json_get(s, "additionalProperties")) r = visit_object(c, s, hint);
        else if (json_get(s, "items") || json_get(s, "prefixItems")) r = visit_array(c, s, hint);
        else {
            static const char *const none[] = {NULL};
            r = keywords_known(c, s, none) ? prim(c, P_VALUE) : NULL;
        }
    }
    c->depth--;
    return r;
}

static void conv_free(conv *c) {
    for (int i = 0; i < c->n_rules; i++) free(c->rules[i].name), free(c->rules[i].body);
    for (int i = 0; i < c->n_refs; i++) free(c->refs[i].ref);
    free(c->rules);
    strmap_free(&c->names);
    strmap_free(&c->bodies);
    strmap_free(&c->bases);
    strmap_free(&c->ref_of);
    free(c->refs);
    free(c->seen);
    free(c->done);
}

err_code json_schema_to_gbnf(const char *schema, size_t len, char **gbnf, err_t *err) {
    if (!gbnf) return err_set(err, ERR_INVALID_ARG, "json schema: no output pointer");
    *gbnf = NULL;
    json_value *doc = NULL;
    err_code rc = json_parse(schema, len, &doc, err);
    if (rc != ERR_OK) return rc;
    conv c = {.doc = doc, .err = err};
    const int root = reserve(&c, "root"); /* first, so it keeps the name */
    const char *top = root == 0 ? visit(&c, doc, "root") : NULL;
    sbuf o = {0};
    if (top && (c.rules[0].body = strdup(top)) != NULL) {
        for (int i = 0; i < c.n_rules; i++) sb_printf(&o, "%s ::= %s\n", c.rules[i].name, c.rules[i].body);
        write_primitives(&c, &o);
    } else if (top) {
        fail(&c, ERR_NOMEM, "out of memory");
    }
    rc = c.rc != ERR_OK ? c.rc : o.oom ? err_set(err, ERR_NOMEM, "json schema: out of memory") : ERR_OK;
    conv_free(&c);
    json_free(doc);
    if (rc != ERR_OK) {
        free(o.p);
        return rc;
    }
    *gbnf = o.p;
    return ERR_OK;
}
