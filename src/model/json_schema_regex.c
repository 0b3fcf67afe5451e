/*
 * json_schema_regex — a schema's "pattern" as GBNF over a JSON string's
 * content.
 *
 * The subset (ECMA-262 syntax): literals, `.`, classes [...] and [^...]
 * with ranges and \d \w \s inside, \d \w \s \D \W \S, groups ( ) and (?: ),
 * alternation |, the quantifiers * + ? {m} {m,} {m,n} (lazy `?` after one is
 * the same set of strings), ^ at the start and $ at the end. Anything else
 * (lookaround, backreferences, \b, anchors inside) is refused, never
 * approximated.
 *
 * The text generated matches the pattern whole (so it also matches it
 * unanchored, as JSON Schema's validators search), and it is valid JSON
 * string content: no character is produced that would need an escape
 * (control characters, '"', '\'), except a literal one in the pattern, which
 * is written as its JSON escape. `.` and negated classes leave those
 * characters out: the strings are a subset of the pattern's, never more.
 */
#include <stdint.h>

#include "model/json_schema_internal.h"

#define MAX_RANGES 128
#define MAX_REPEAT 10000 /* a repetition's bound in a grammar (grammar.c) */
#define MAX_DEPTH 32     /* groups inside groups */

typedef struct {
    const char *s;
    size_t n, pos;
    sbuf *o;
    char *why;
    size_t why_n;
    bool ok;
    int depth; /* groups open: bounded, so the recursion is */
} rx;

typedef struct {
    uint32_t lo, hi;
} crange;

static bool rfail(rx *r, const char *what) {
    if (r->ok) snprintf(r->why, r->why_n, "%s at character %zu", what, r->pos);
    r->ok = false;
    return false;
}

static char peek(const rx *r) { return r->pos < r->n ? r->s[r->pos] : '\0'; }

/* One UTF-8 character of the pattern. */
static uint32_t take_char(rx *r) {
    const unsigned char c = (unsigned char)r->s[r->pos++];
    const int k = c < 0x80 ? 0 : c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : -1;
    if (k < 0) return rfail(r, "invalid UTF-8"), 0;
    uint32_t v = k == 0 ? c : c & (0x3F >> k);
    for (int i = 0; i < k; i++) {
        if (r->pos >= r->n || ((unsigned char)r->s[r->pos] & 0xC0) != 0x80) return rfail(r, "invalid UTF-8"), 0;
        v = v << 6 | ((unsigned char)r->s[r->pos++] & 0x3F);
    }
    return v;
}

/* A character of the content as a GBNF literal: JSON's escape for those that need one. */
static void emit_char(sbuf *o, uint32_t c) {
    if (c == '"') sb_str(o, "\"\\\\\\\"\"");
    else if (c == '\\') sb_str(o, "\"\\\\\\\\\"");
    else if (c == '\n') sb_str(o, "\"\\\\n\"");
    else if (c == '\t') sb_str(o, "\"\\\\t\"");
    else if (c == '\r') sb_str(o, "\"\\\\r\"");
    else if (c < 0x20 || c == 0x7F) sb_printf(o, "\"\\\\u%04X\"", c);
    else sb_printf(o, c > 0xFFFF ? "\"\\U%08X\"" : "\"\\u%04X\"", c);
}

/* ---------------------------------------------------------------- classes */

/* The characters JSON content cannot hold unescaped: never produced by a class. */
static const crange json_excluded[] = {{0x00, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0x7F, 0x7F}};

static bool add(rx *r, crange *v, int *n, uint32_t lo, uint32_t hi) {
    if (*n >= MAX_RANGES) return rfail(r, "a class with too many ranges");
    if (hi < lo) return rfail(r, "a range that runs backwards");
    v[(*n)++] = (crange){lo, hi};
    return true;
}

/* \d \w \s as ranges; false when c is not one of them. */
static bool shorthand(rx *r, char c, crange *v, int *n) {
    switch (c) {
    case 'd': return add(r, v, n, '0', '9');
    case 'w': return add(r, v, n, '0', '9') && add(r, v, n, 'A', 'Z') && add(r, v, n, '_', '_') && add(r, v, n, 'a', 'z');
    case 's': /* ECMA-262's white space and line terminators (those JSON escapes are left out later) */
        return add(r, v, n, '\t', '\r') && add(r, v, n, ' ', ' ') && add(r, v, n, 0xA0, 0xA0) &&
               add(r, v, n, 0x1680, 0x1680) && add(r, v, n, 0x2000, 0x200A) && add(r, v, n, 0x2028, 0x2029) &&
               add(r, v, n, 0x202F, 0x202F) && add(r, v, n, 0x205F, 0x205F) && add(r, v, n, 0x3000, 0x3000) &&
               add(r, v, n, 0xFEFF, 0xFEFF);
    default: return false;
    }
}

/* An escaped character (after the backslash) that stands for itself. */
static bool escaped_char(rx *r, uint32_t *c) {
    const char e = peek(r);
    if (e == 'n' || e == 't' || e == 'r') { r->pos++; *c = e == 'n' ? '\n' : e == 't' ? '\t' : '\r'; return true; }
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9') || e == '\0')
        return rfail(r, "an escape that is not covered");
    *c = take_char(r);
    return r->ok;
}

static void emit_class(sbuf *o, const crange *v, int n, bool negated) {
    sb_str(o, negated ? "[^" : "[");
    for (int i = 0; i < n; i++) {
        sb_printf(o, v[i].lo > 0xFFFF ? "\\U%08X" : "\\u%04X", v[i].lo);
        if (v[i].hi != v[i].lo) sb_printf(o, v[i].hi > 0xFFFF ? "-\\U%08X" : "-\\u%04X", v[i].hi);
    }
    if (negated)
        for (int i = 0; i < 4; i++) sb_printf(o, "\\u%04X-\\u%04X", json_excluded[i].lo, json_excluded[i].hi);
    sb_str(o, "]");
}

/* v minus what JSON content cannot hold unescaped, into w. */
static int json_safe(const crange *v, int n, crange *w) {
    int m = 0;
    for (int i = 0; i < n; i++) {
        uint32_t lo = v[i].lo;
        for (int k = 0; k < 4 && lo <= v[i].hi; k++) {
            const crange x = json_excluded[k];
            if (x.hi < lo || x.lo > v[i].hi) continue;
            if (x.lo > lo && m < MAX_RANGES * 2) w[m++] = (crange){lo, x.lo - 1};
            lo = x.hi + 1;
        }
        if (lo <= v[i].hi && m < MAX_RANGES * 2) w[m++] = (crange){lo, v[i].hi};
    }
    return m;
}

/* [...] after its '['. */
static bool read_class(rx *r) {
    crange v[MAX_RANGES], w[MAX_RANGES * 2];
    int n = 0;
    const bool negated = peek(r) == '^';
    if (negated) r->pos++;
    while (r->ok && peek(r) != ']') {
        if (r->pos >= r->n) return rfail(r, "an unterminated class");
        uint32_t lo;
        if (peek(r) == '\\') {
            r->pos++;
            if (shorthand(r, peek(r), v, &n)) { r->pos++; continue; }
            if (!r->ok || !escaped_char(r, &lo)) return false;
        } else {
            lo = take_char(r);
        }
        uint32_t hi = lo;
        if (peek(r) == '-' && r->pos + 1 < r->n && r->s[r->pos + 1] != ']') {
            r->pos++;
            if (peek(r) == '\\') r->pos++, escaped_char(r, &hi);
            else hi = take_char(r);
        }
        if (!r->ok || !add(r, v, &n, lo, hi)) return false;
    }
    r->pos++;
    if (negated) emit_class(r->o, v, n, true);
    else {
        const int m = json_safe(v, n, w);
        if (m == 0) return rfail(r, "a class with no character JSON can hold unescaped");
        emit_class(r->o, w, m, false);
    }
    return r->ok;
}

/* ---------------------------------------------------------------- the rest */

static bool read_alt(rx *r);

static bool read_atom(rx *r) {
    const char c = peek(r);
    if (c == '(') {
        r->pos++;
        if (peek(r) == '?') {
            if (r->pos + 1 >= r->n || r->s[r->pos + 1] != ':') return rfail(r, "lookaround or a named group");
            r->pos += 2;
        }
        if (++r->depth > MAX_DEPTH) return rfail(r, "groups nested too deep");
        sb_str(r->o, "(");
        if (!read_alt(r)) return false;
        if (peek(r) != ')') return rfail(r, "expected ')'");
        r->pos++;
        r->depth--;
        sb_str(r->o, ")");
        return true;
    }
    if (c == '[') return r->pos++, read_class(r);
    if (c == '.') { /* any character but the line terminators */
        static const crange terminators[] = {{0x2028, 0x2029}};
        r->pos++;
        emit_class(r->o, terminators, 1, true);
        return true;
    }
    if (c == '\\') {
        r->pos++;
        crange v[16];
        int n = 0;
        const char e = peek(r);
        if (e == 'D' || e == 'W' || e == 'S') {
            shorthand(r, (char)(e + 32), v, &n);
            r->pos++;
            emit_class(r->o, v, n, true);
            return r->ok;
        }
        if (shorthand(r, e, v, &n)) {
            r->pos++;
            emit_class(r->o, v, n, false);
            return true;
        }
        uint32_t ch;
        if (!escaped_char(r, &ch)) return false;
        emit_char(r->o, ch);
        return true;
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') return rfail(r, "a quantifier with nothing to repeat");
    if (c == '^' || c == '$') return rfail(r, "an anchor inside the pattern");
    emit_char(r->o, take_char(r));
    return r->ok;
}

/* A count of digits, at most MAX_REPEAT (the grammar's bound); false when none or above it. */
static bool read_count(rx *r, long *out) {
    long v = 0;
    const size_t start = r->pos;
    while (r->pos < r->n && r->s[r->pos] >= '0' && r->s[r->pos] <= '9') {
        if (v <= MAX_REPEAT) v = v * 10 + (r->s[r->pos] - '0');
        r->pos++;
    }
    *out = v;
    return r->pos > start && v <= MAX_REPEAT;
}

/* A quantifier after an atom, if any, written after it. */
static bool read_quantifier(rx *r) {
    const char c = peek(r);
    if (c == '*' || c == '+' || c == '?') {
        r->pos++;
        sb_printf(r->o, "%c", c);
    } else if (c == '{') {
        long m, n;
        r->pos++;
        if (!read_count(r, &m)) return rfail(r, "a bad {m,n}");
        n = m;
        if (peek(r) == ',') {
            r->pos++;
            n = -1;
            if (peek(r) != '}' && (!read_count(r, &n) || n < m)) return rfail(r, "a bad {m,n}");
        }
        if (peek(r) != '}') return rfail(r, "a bad {m,n}");
        r->pos++;
        if (n < 0) sb_printf(r->o, "{%ld,}", m);
        else sb_printf(r->o, "{%ld,%ld}", m, n);    } else {
        return true;
    }
    if (peek(r) == '?') r->pos++; /* lazy: the same strings */
    if (peek(r) == '*' || peek(r) == '+' || peek(r) == '{') return rfail(r, "a quantifier after a quantifier");
    return true;
}

static bool at_final_dollar(const rx *r) { return peek(r) == '$' && r->pos + 1 == r->n; }

static bool read_seq(rx *r) {
    bool any = false;
    while (r->ok && r->pos < r->n && peek(r) != '|' && peek(r) != ')' && !at_final_dollar(r)) {
        sb_str(r->o, any ? " (" : "(");
        if (!read_atom(r)) return false;
        sb_str(r->o, ")");
        if (!read_quantifier(r)) return false;
        any = true;
    }
    if (!any) sb_str(r->o, "\"\"");
    return r->ok;
}

static bool read_alt(rx *r) {
    if (!read_seq(r)) return false;
    while (peek(r) == '|') {
        r->pos++;
        sb_str(r->o, " | ");
        if (!read_seq(r)) return false;
    }
    return true;
}

bool schema_regex_gbnf(const char *pattern, size_t len, sbuf *out, char *why, size_t why_n) {
    rx r = {pattern, len, 0, out, why, why_n, true, 0};
    if (peek(&r) == '^') r.pos++;
    sb_str(out, "(");
    read_alt(&r);
    if (r.ok && at_final_dollar(&r)) r.pos++;
    if (r.ok && r.pos < r.n) rfail(&r, peek(&r) == ')' ? "an unmatched ')'" : "unexpected text");
    sb_str(out, ")");
    return r.ok;
}
