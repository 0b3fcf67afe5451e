/*
 * grammar — the GBNF compiler (grammar.h has the format; grammar_internal.h
 * the compiled form; grammar_match.c runs it).
 *
 * Recursive descent over the text. A group `( ... )` becomes a rule of its
 * own; a repeated element X becomes X copied min times, then either a rule
 * R ::= X R | (unbounded) or a chain R_k ::= X R_{k-1} | of k = max - min
 * optional copies, so the automaton only ever sees sequences, alternatives
 * and references. Every rule body is built in a local list and stored when
 * done (the rule table may move while a nested group adds rules).
 *
 * After parsing: every referenced rule must be defined, `root` must exist,
 * and no rule may be left-recursive (reach itself through a prefix that can
 * match nothing), found by a depth-first search over the rules each
 * alternative can start with.
 */
#include "model/grammar_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strmap.h"

typedef struct {
    gelem *v;
    int32_t n, cap;
} elist;

typedef struct {
    char *name;    /* NULL: a group or a repetition's rule (shown_name) */
    elist body;
    int line;      /* where it was defined, 0: only referenced so far */
    int32_t owner; /* the named rule whose definition made it (itself when named) */
    int ref_line;  /* where it was first referenced */
} prule;

typedef struct {
    const char *s;
    size_t len, pos;
    int line;
    prule *rules;
    int32_t n_rules, cap_rules;
    strmap names;  /* a named rule's index */
    int32_t cur_rule; /* the named rule being defined */
    grange *ranges;
    int32_t n_ranges, cap_ranges;
    gcharset *sets;
    int32_t n_sets, cap_sets;
    int64_t n_elems;
    int depth;     /* groups open: bounded, so the recursion is */
    err_t *err;
    err_code rc;
} parser;

static bool fail(parser *p, err_code code, const char *what) {
    if (p->rc == ERR_OK) p->rc = err_set(p->err, code, "grammar: line %d: %s", p->line, what);
    return false;
}

static bool grow(parser *p, void **v, int32_t *cap, int32_t need, size_t size) {
    if (need <= *cap) return true;
    const int32_t cap2 = need < 16 ? 16 : need * 2;
    void *n = realloc(*v, size * (size_t)cap2);
    if (!n) return fail(p, ERR_NOMEM, "out of memory");
    *v = n;
    *cap = cap2;
    return true;
}

static bool push(parser *p, elist *l, uint8_t kind, int32_t arg) {
    if (++p->n_elems > GRAMMAR_MAX_ELEMS) {
        char msg[160];
        snprintf(msg, sizeof msg, "the grammar expands to more than %d elements (a repetition X{m,n} copies X n "
                 "times)", GRAMMAR_MAX_ELEMS);
        return fail(p, ERR_UNSUPPORTED, msg);
    }
    if (!grow(p, (void **)&l->v, &l->cap, l->n + 1, sizeof *l->v)) return false;
    l->v[l->n++] = (gelem){kind, arg};
    return true;
}

static char cur(const parser *p) { return p->pos < p->len ? p->s[p->pos] : '\0'; }
static bool at_end(const parser *p) { return p->pos >= p->len; }

/* Spaces, tabs and comments; newlines too when newline_ok. */
static void skip_space(parser *p, bool newline_ok) {
    while (!at_end(p)) {
        const char c = cur(p);
        if (c == ' ' || c == '\t') p->pos++;
        else if (c == '#') while (!at_end(p) && cur(p) != '\n') p->pos++;
        else if (newline_ok && (c == '\n' || c == '\r')) p->line += c == '\n', p->pos++;
        else break;
    }
}

static bool is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* ---------------------------------------------------------------- rules */

/* Room for one more rule, within GRAMMAR_MAX_RULES. */
static bool rule_room(parser *p) {
    if (p->n_rules >= GRAMMAR_MAX_RULES) {
        char msg[160];
        snprintf(msg, sizeof msg, "the grammar makes more than %d rules (each group is one, and each optional copy "
                 "of a repetition X{m,n} another)", GRAMMAR_MAX_RULES);
        return fail(p, ERR_UNSUPPORTED, msg);
    }
    return grow(p, (void **)&p->rules, &p->cap_rules, p->n_rules + 1, sizeof *p->rules);
}

/* The rule named s[0..n), added (undefined) when new; -1 on failure. */
static int32_t rule_named(parser *p, const char *s, size_t n) {
    const int32_t known = strmap_get(&p->names, s, n);
    if (known >= 0) return known;
    if (!rule_room(p)) return -1;
    prule *r = &p->rules[p->n_rules];
    memset(r, 0, sizeof *r);
    if (!(r->name = malloc(n + 1)) || !strmap_put(&p->names, s, n, p->n_rules)) {
        free(r->name);
        return fail(p, ERR_NOMEM, "out of memory"), -1;
    }
    memcpy(r->name, s, n);
    r->name[n] = '\0';
    r->ref_line = p->line;
    r->owner = p->n_rules;
    return p->n_rules++;
}

/* A new rule holding body (taken over), for a group or a repetition: it has
 * no name and so needs no lookup (a repetition {0,10000} makes 10000 of
 * them). -1 on failure, body freed. */
static int32_t rule_made(parser *p, elist *body) {
    if (!rule_room(p)) {
        free(body->v);
        *body = (elist){0};
        return -1;
    }
    prule *r = &p->rules[p->n_rules];
    *r = (prule){.body = *body, .line = p->line, .ref_line = p->line, .owner = p->cur_rule};
    *body = (elist){0};
    return p->n_rules++;
}

/* ---------------------------------------------------------------- characters */

static int hex_digits(parser *p, int n, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < n; i++, p->pos++) {
        const char c = cur(p);
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0 || at_end(p)) return fail(p, ERR_BAD_VALUE, "bad hexadecimal escape");
        v = v * 16 + (uint32_t)d;
    }
    *out = v;
    return true;
}

/* One character of a literal or a class, escapes decoded. */
static bool read_char(parser *p, uint32_t *cp) {
    if (at_end(p)) return fail(p, ERR_BAD_VALUE, "unexpected end of the grammar");
    unsigned char c = (unsigned char)cur(p);
    if (c == '\\') {
        p->pos++;
        const char e = cur(p);
        p->pos++;
        switch (e) {
        case 'n': *cp = '\n'; return true;
        case 'r': *cp = '\r'; return true;
        case 't': *cp = '\t'; return true;
        case '\\': case '"': case '[': case ']': case '-': case '/': case '^': *cp = (uint32_t)e; return true;
        case 'x': return hex_digits(p, 2, cp);
        case 'u': return hex_digits(p, 4, cp);
        case 'U': return hex_digits(p, 8, cp) && (*cp <= 0x10FFFF || fail(p, ERR_BAD_VALUE, "escape beyond U+10FFFF"));
        default: return fail(p, ERR_BAD_VALUE, "unknown escape");
        }
    }
    const int k = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (k == 0 || p->len - p->pos < (size_t)k) return fail(p, ERR_BAD_VALUE, "invalid UTF-8");
    uint32_t v = k == 1 ? c : c & (0x7F >> k);
    for (int i = 1; i < k; i++) {
        const unsigned char b = (unsigned char)p->s[p->pos + (size_t)i];
        if ((b & 0xC0) != 0x80) return fail(p, ERR_BAD_VALUE, "invalid UTF-8");
        v = v << 6 | (b & 0x3F);
    }
    if (c == '\n') p->line++;
    p->pos += (size_t)k;
    *cp = v;
    return true;
}

static int cmp_range(const void *a, const void *b) {
    const grange *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Close the set whose ranges start at first: sorted and merged. */
static int32_t close_set(parser *p, int32_t first, bool negated) {
    int32_t n = p->n_ranges - first, m = 0;
    grange *r = n > 0 ? p->ranges + first : NULL; /* `.` may come before any range exists */
    if (n > 1) qsort(r, (size_t)n, sizeof *r, cmp_range);
    for (int32_t i = 0; i < n; i++) {
        if (m > 0 && r[i].lo <= r[m - 1].hi + 1) {
            if (r[i].hi > r[m - 1].hi) r[m - 1].hi = r[i].hi;
        } else {
            r[m++] = r[i];
        }
    }
    p->n_ranges = first + m;
    if (!grow(p, (void **)&p->sets, &p->cap_sets, p->n_sets + 1, sizeof *p->sets)) return -1;
    p->sets[p->n_sets] = (gcharset){first, m, negated};
    return p->n_sets++;
}

static bool add_range(parser *p, uint32_t lo, uint32_t hi) {
    if (hi < lo) return fail(p, ERR_BAD_VALUE, "a character range runs backwards");
    if (!grow(p, (void **)&p->ranges, &p->cap_ranges, p->n_ranges + 1, sizeof *p->ranges)) return false;
    p->ranges[p->n_ranges++] = (grange){lo, hi};
    return true;
}

/* [...] after its '[': a set id, or -1. */
static int32_t read_class(parser *p) {
    const int32_t first = p->n_ranges;
    const bool negated = cur(p) == '^';
    if (negated) p->pos++;
    while (cur(p) != ']') {
        uint32_t lo, hi;
        if (at_end(p)) return fail(p, ERR_BAD_VALUE, "unterminated character class"), -1;
        if (!read_char(p, &lo)) return -1;
        hi = lo;
        if (cur(p) == '-' && p->pos + 1 < p->len && p->s[p->pos + 1] != ']') {
            p->pos++;
            if (!read_char(p, &hi)) return -1;
        }
        if (!add_range(p, lo, hi)) return -1;
    }
    p->pos++;
    return close_set(p, first, negated);
}

static int32_t single_char_set(parser *p, uint32_t lo, uint32_t hi, bool negated) {
    const int32_t first = p->n_ranges;
    if (!negated && !add_range(p, lo, hi)) return -1;
    return close_set(p, first, negated);
}

/* ---------------------------------------------------------------- sequences */

static bool read_alternates(parser *p, elist *out, bool nested);

/* x[0..n) repeated min..max times (max -1: unbounded), appended to out. */
static bool repeat(parser *p, elist *out, const gelem *x, int32_t n, long min, long max) {
    for (long i = 0; i < min; i++)
        for (int32_t j = 0; j < n; j++)
            if (!push(p, out, x[j].kind, x[j].arg)) return false;
    if (max == min) return true;
    int32_t prev = -1; /* the chain's rule so far */
    const long k = max < 0 ? 1 : max - min;
    for (long i = 0; i < k; i++) {
        elist body = {0};
        bool ok = true;
        for (int32_t j = 0; j < n && ok; j++) ok = push(p, &body, x[j].kind, x[j].arg);
        const int32_t self = p->n_rules; /* what rule_made will number it */
        if (ok && max < 0) ok = push(p, &body, GE_REF, self);
        else if (ok && prev >= 0) ok = push(p, &body, GE_REF, prev);
        ok = ok && push(p, &body, GE_ALT, 0) && push(p, &body, GE_END, 0);
        if (!ok || (prev = rule_made(p, &body)) < 0) return free(body.v), false;
    }
    return push(p, out, GE_REF, prev);
}

/* A count of the text's digits (the text need not end in a NUL: no strtol); false when none. */
static bool read_count(parser *p, long *out) {
    long v = 0;
    const size_t start = p->pos;
    while (!at_end(p) && cur(p) >= '0' && cur(p) <= '9') {
        if (v <= GRAMMAR_MAX_REPEAT) v = v * 10 + (cur(p) - '0');
        p->pos++;
    }
    *out = v;
    return p->pos > start;
}

/* After '{': m}, m,} or m,n}. */
static bool read_bounds(parser *p, long *min, long *max) {
    skip_space(p, true);
    if (!read_count(p, min) || *min > GRAMMAR_MAX_REPEAT) return fail(p, ERR_BAD_VALUE, "bad repetition count");
    skip_space(p, true);
    *max = *min;
    if (cur(p) == ',') {
        p->pos++;
        skip_space(p, true);
        *max = -1;
        if (cur(p) != '}' && (!read_count(p, max) || *max < *min || *max > GRAMMAR_MAX_REPEAT))
            return fail(p, ERR_BAD_VALUE, "bad repetition bounds");
        skip_space(p, true);
    }
    if (cur(p) != '}') return fail(p, ERR_BAD_VALUE, "expected '}'");
    p->pos++;
    return true;
}

/* A postfix operator on out[last..): the element is taken out and repeated. */
static bool read_operator(parser *p, elist *out, int32_t last) {
    long min = 0, max = -1;
    const char c = cur(p);
    p->pos++;
    if (c == '+') min = 1;
    else if (c == '?') max = 1;
    else if (c == '{' && !read_bounds(p, &min, &max)) return false;
    const int32_t n = out->n - last;
    if (n == 0) return true; /* "" repeated is still nothing */
    gelem *x = malloc(sizeof *x * (size_t)n);
    if (!x) return fail(p, ERR_NOMEM, "out of memory");
    memcpy(x, out->v + last, sizeof *x * (size_t)n);
    out->n = last;
    p->n_elems -= n;
    const bool ok = repeat(p, out, x, n, min, max);
    free(x);
    return ok;
}

/* One element at p->pos into out; false at an error. *any: something was read. */
static bool read_element(parser *p, elist *out, bool *any) {
    const char c = cur(p);
    *any = true;
    if (c == '"') {
        p->pos++;
        while (cur(p) != '"') {
            uint32_t cp;
            if (at_end(p)) return fail(p, ERR_BAD_VALUE, "unterminated literal");
            if (!read_char(p, &cp)) return false;
            const int32_t s = single_char_set(p, cp, cp, false);
            if (s < 0 || !push(p, out, GE_SET, s)) return false;
        }
        p->pos++;
        return true;
    }
    if (c == '[' || c == '.') {
        p->pos++;
        const int32_t s = c == '[' ? read_class(p) : single_char_set(p, 0, 0, true);
        return s >= 0 && push(p, out, GE_SET, s);
    }
    if (is_word(c)) {
        const size_t start = p->pos;
        while (is_word(cur(p))) p->pos++;
        const int32_t r = rule_named(p, p->s + start, p->pos - start);
        return r >= 0 && push(p, out, GE_REF, r);
    }
    if (c == '(') {
        elist body = {0};
        if (++p->depth > GRAMMAR_MAX_DEPTH) return fail(p, ERR_UNSUPPORTED, "groups nested deeper than 64");
        p->pos++;
        skip_space(p, true);
        bool ok = read_alternates(p, &body, true);
        p->depth--;
        if (ok && cur(p) != ')') ok = fail(p, ERR_BAD_VALUE, "expected ')'");
        p->pos++;
        const int32_t r = ok ? rule_made(p, &body) : -1;
        if (!ok) free(body.v);
        return r >= 0 && push(p, out, GE_REF, r);
    }
    *any = false;
    return true;
}

static bool read_sequence(parser *p, elist *out, bool nested) {
    int32_t last = -1; /* where the latest element starts, -1: none to repeat */
    for (;;) {
        const char c = cur(p);
        if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (last < 0) return fail(p, ERR_BAD_VALUE, "a repetition operator follows nothing");
            if (!read_operator(p, out, last)) return false;
            last = -1;
        } else {
            bool any;
            const int32_t start = out->n;
            if (!read_element(p, out, &any)) return false;
            if (!any) return true;
            last = start;
        }
        skip_space(p, nested);
    }
}

static bool read_alternates(parser *p, elist *out, bool nested) {
    if (!read_sequence(p, out, nested)) return false;
    while (cur(p) == '|') {
        p->pos++;
        skip_space(p, true);
        if (!push(p, out, GE_ALT, 0) || !read_sequence(p, out, nested)) return false;
    }
    return push(p, out, GE_END, 0);
}

static bool read_rule(parser *p) {
    const size_t start = p->pos;
    while (is_word(cur(p))) p->pos++;
    if (p->pos == start) return fail(p, ERR_BAD_VALUE, "expected a rule name");
    const size_t name_len = p->pos - start;
    skip_space(p, false);
    if (p->len - p->pos < 3 || memcmp(p->s + p->pos, "::=", 3) != 0) return fail(p, ERR_BAD_VALUE, "expected '::='");
    p->pos += 3;
    skip_space(p, true);
    const int line = p->line;
    const int32_t r = rule_named(p, p->s + start, name_len);
    if (r < 0) return false;
    if (p->rules[r].line) {
        char msg[160];
        snprintf(msg, sizeof msg, "rule '%s' is defined twice (first on line %d)", p->rules[r].name, p->rules[r].line);
        return fail(p, ERR_BAD_VALUE, msg);
    }
    p->cur_rule = r;
    elist body = {0};
    if (!read_alternates(p, &body, false)) return free(body.v), false;
    p->rules[r].body = body;
    p->rules[r].line = line;
    if (!at_end(p) && cur(p) != '\n' && cur(p) != '\r') return fail(p, ERR_BAD_VALUE, "unexpected character");
    return true;
}

/* ---------------------------------------------------------------- checks */

static bool nullable_el(const grammar *g, const bool *nullable, int32_t pos) {
    return g->el[pos].kind == GE_REF && nullable[g->el[pos].arg];
}

/* nullable[r]: rule r can match the empty text. A worklist, linear in the
 * elements: each alternative counts the references it still waits on
 * (a character set: never nullable), and a rule found nullable releases the
 * alternatives that refer to it. (Passes until nothing changes would be
 * quadratic in a chain of rules each defined before the one it refers to.) */
static bool find_nullable(const grammar *g, bool *nullable) {
    const int32_t n_el = g->n_el, n_r = g->n_rules;
    int32_t *need = malloc(sizeof *need * (size_t)(n_el + 1));     /* per alternative, at its closing element */
    int32_t *alt_of = malloc(sizeof *alt_of * (size_t)(n_el + 1)); /* an element's closing element */
    int32_t *first = calloc((size_t)n_r + 1, sizeof *first);       /* rule -> its references, by csr */
    int32_t *refs = malloc(sizeof *refs * (size_t)(n_el + 1));     /* the closing element of each reference */
    int32_t *queue = malloc(sizeof *queue * (size_t)(n_r + 1));
    const bool ok = need && alt_of && first && refs && queue;
    int32_t qn = 0;
    for (int32_t pos = ok ? n_el - 1 : -1, close = -1; pos >= 0; pos--) { /* backwards: each element's close */
        if (grammar_ends_seq(g, pos)) close = pos, need[pos] = 0;
        alt_of[pos] = close;
        if (g->el[pos].kind == GE_SET) need[close] = n_el + 1;
        if (g->el[pos].kind == GE_REF) need[close]++, first[g->el[pos].arg + 1]++;
    }
    for (int32_t r = 0; ok && r < n_r; r++) first[r + 1] += first[r];
    for (int32_t pos = 0; ok && pos < n_el; pos++)
        if (g->el[pos].kind == GE_REF) refs[first[g->el[pos].arg]++] = alt_of[pos];
    for (int32_t r = n_r; ok && r > 0; r--) first[r] = first[r - 1]; /* the fill moved each start on */
    if (ok) first[0] = 0;
    for (int32_t r = 0; ok && r < n_r; r++)
        for (int32_t pos = g->rule_start[r]; !nullable[r]; pos++) {
            if (grammar_ends_seq(g, pos) && need[pos] == 0) nullable[r] = true, queue[qn++] = r;
            if (g->el[pos].kind == GE_END) break;
        }
    for (int32_t qi = 0; qi < qn; qi++)
        for (int32_t i = first[queue[qi]]; i < first[queue[qi] + 1]; i++) {
            const int32_t close = refs[i];
            if (--need[close] != 0) continue;
            const int32_t r = grammar_rule_of(g, close);
            if (!nullable[r]) nullable[r] = true, queue[qn++] = r;
        }
    free(need), free(alt_of), free(first), free(refs), free(queue);
    return ok;
}

/* Depth-first over "r can start with s" from rule r, with an explicit stack
 * (st: room for every rule) so that a long chain cannot exhaust the thread's
 * own: color 1 on the path, 2 done. A rule met on the path is left-recursive;
 * its id, or -1. */
typedef struct {
    int32_t r, pos;
    bool open; /* still in the alternative's nullable prefix */
} lc_frame;

static int32_t left_cycle(const grammar *g, const bool *nullable, uint8_t *color, int32_t r, lc_frame *st) {
    int32_t top = 0;
    st[0] = (lc_frame){r, g->rule_start[r], true};
    color[r] = 1;
    while (top >= 0) {
        lc_frame *f = &st[top];
        const gelem e = g->el[f->pos++];
        if (e.kind == GE_END) {
            color[f->r] = 2;
            top--;
        } else if (e.kind == GE_ALT) {
            f->open = true;
        } else if (f->open) {
            f->open = nullable_el(g, nullable, f->pos - 1);
            if (e.kind == GE_REF && color[e.arg] == 1) return e.arg;
            if (e.kind == GE_REF && color[e.arg] == 0) {
                color[e.arg] = 1;
                st[++top] = (lc_frame){e.arg, g->rule_start[e.arg], true};
            }
        }
    }
    return -1;
}


static bool check_left_recursion(parser *p, const grammar *g) {
    bool *nullable = calloc((size_t)g->n_rules, sizeof *nullable);
    uint8_t *color = calloc((size_t)g->n_rules, 1);
    lc_frame *st = malloc(sizeof *st * (size_t)g->n_rules);
    int32_t bad = -1;
    const bool ok = nullable && color && st && find_nullable(g, nullable);
    for (int32_t r = 0; ok && r < g->n_rules && bad < 0; r++)
        if (color[r] == 0) bad = left_cycle(g, nullable, color, r, st);
    free(nullable);
    free(color);
    free(st);
    if (!ok) return fail(p, ERR_NOMEM, "out of memory");
    if (bad < 0) return true;
    p->line = p->rules[bad].line;
    char msg[200];
    snprintf(msg, sizeof msg, "%s '%s' is left-recursive (it can reach itself before matching a character)",
             g->names[bad] ? "rule" : "a group or repetition in rule", grammar_rule_name(g, bad));
    return fail(p, ERR_BAD_VALUE, msg);
}

/* ---------------------------------------------------------------- compile */

static bool link_rules(parser *p, grammar *g) {
    int64_t n = 0;
    for (int32_t r = 0; r < p->n_rules; r++) {
        if (!p->rules[r].line) { /* only a named rule can be referenced before it is defined */
            char msg[160];
            p->line = p->rules[r].ref_line;
            snprintf(msg, sizeof msg, "rule '%s' is used but never defined", p->rules[r].name);
            return fail(p, ERR_BAD_VALUE, msg);
        }
        n += p->rules[r].body.n;
    }
    g->n_rules = p->n_rules;
    g->n_el = (int32_t)n;
    g->el = malloc(sizeof *g->el * (size_t)(n > 0 ? n : 1));
    g->rule_start = malloc(sizeof *g->rule_start * (size_t)(g->n_rules > 0 ? g->n_rules : 1));
    g->owner = malloc(sizeof *g->owner * (size_t)(g->n_rules > 0 ? g->n_rules : 1));
    g->names = calloc((size_t)(g->n_rules > 0 ? g->n_rules : 1), sizeof *g->names);
    if (!g->el || !g->rule_start || !g->owner || !g->names) return fail(p, ERR_NOMEM, "out of memory");
    int32_t at = 0;
    for (int32_t r = 0; r < p->n_rules; r++) {
        g->owner[r] = p->rules[r].owner;
        g->names[r] = p->rules[r].name; /* taken over */
        p->rules[r].name = NULL;
        g->rule_start[r] = at;
        if (p->rules[r].body.n > 0) memcpy(g->el + at, p->rules[r].body.v, sizeof *g->el * (size_t)p->rules[r].body.n);
        at += p->rules[r].body.n;
    }
    g->root = strmap_get(&p->names, "root", 4);
    if (g->root < 0) return p->line = 1, fail(p, ERR_BAD_VALUE, "no rule named 'root'");
    return true;
}

static void parser_free(parser *p) {
    for (int32_t r = 0; r < p->n_rules; r++) {
        free(p->rules[r].name);
        free(p->rules[r].body.v);
    }
    free(p->rules);
    strmap_free(&p->names);
    free(p->ranges);
    free(p->sets);
}

err_code grammar_parse(const char *text, size_t len, grammar **out, err_t *err) {
    if (!out) return err_set(err, ERR_INVALID_ARG, "grammar: no output pointer");
    *out = NULL;
    if (!text) return err_set(err, ERR_INVALID_ARG, "grammar: no text");
    parser p = {.s = text, .len = len, .line = 1, .err = err};
    grammar *g = calloc(1, sizeof *g);
    if (!g) return err_set(err, ERR_NOMEM, "grammar: out of memory");
    skip_space(&p, true);
    while (!at_end(&p) && read_rule(&p)) skip_space(&p, true);
    if (p.rc == ERR_OK && link_rules(&p, g)) check_left_recursion(&p, g);
    g->ranges = p.ranges, g->n_ranges = p.n_ranges, g->sets = p.sets, g->n_sets = p.n_sets;
    p.ranges = NULL, p.sets = NULL;
    const err_code rc = p.rc;
    parser_free(&p);
    if (rc != ERR_OK) {
        grammar_free(g);
        return rc;
    }
    *out = g;
    return ERR_OK;
}

void grammar_free(grammar *g) {
    if (!g) return;
    for (int32_t r = 0; g->names && r < g->n_rules; r++) free(g->names[r]);
    free(g->names);
    free(g->owner);
    free(g->el);
    free(g->rule_start);
    free(g->ranges);
    free(g->sets);
    free(g);
}

int32_t grammar_rule_of(const grammar *g, int32_t pos) {
    int32_t r = 0; /* the last rule starting at or before pos (each rule has an element: they increase) */
    for (int32_t lo = 0, hi = g->n_rules - 1; lo <= hi;) {
        const int32_t mid = lo + (hi - lo) / 2;
        if (g->rule_start[mid] <= pos) r = mid, lo = mid + 1;
        else hi = mid - 1;
    }
    return r;
}

const char *grammar_rule_name(const grammar *g, int32_t r) { return g->names[g->owner[r]]; }

bool grammar_set_meets(const grammar *g, int32_t s, uint32_t lo, uint32_t hi) {
    const gcharset *cs = &g->sets[s];
    const grange *r = cs->n > 0 ? g->ranges + cs->first : NULL; /* `.` alone: no ranges at all */
    if (!cs->negated) {
        for (int32_t i = 0; i < cs->n; i++)
            if (r[i].lo <= hi && r[i].hi >= lo) return true;
        return false;
    }
    /* some character of [lo, hi] is outside every range (sorted, merged) */
    uint32_t x = lo;
    for (int32_t i = 0; i < cs->n && r[i].lo <= x; i++) {
        if (r[i].hi >= x) {
            if (r[i].hi >= hi) return false;
            x = r[i].hi + 1;
        }
    }
    return true;
}
