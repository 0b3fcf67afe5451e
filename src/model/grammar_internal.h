/*
 * grammar_internal — the compiled form shared by grammar.c (the GBNF
 * compiler) and grammar_match.c (the automaton and the mask).
 *
 * A rule's alternatives lie one after another in el[], each a sequence of
 * GE_SET (one character from a set) and GE_REF (another rule) elements,
 * closed by GE_ALT when another alternative follows and by GE_END after the
 * last. An empty alternative is just its closing element.
 */
#ifndef OCTO_MODEL_GRAMMAR_INTERNAL_H
#define OCTO_MODEL_GRAMMAR_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "model/grammar.h"

enum { GE_END, GE_ALT, GE_REF, GE_SET };

typedef struct {
    uint8_t kind;
    int32_t arg; /* GE_REF: the rule; GE_SET: the character set */
} gelem;

typedef struct {
    uint32_t lo, hi; /* code points, inclusive */
} grange;

typedef struct {
    int32_t first, n; /* ranges[first .. first + n) */
    bool negated;     /* the set is every character but those */
} gcharset;

struct grammar {
    gelem *el;
    int32_t n_el;
    int32_t *rule_start; /* (n_rules) a rule's first alternative in el */
    char **names;        /* (n_rules) a named rule's name; NULL for a group or a repetition's rule */
    int32_t *owner;      /* (n_rules) the named rule whose definition made it (itself when named) */
    int32_t n_rules, root;
    grange *ranges;
    int32_t n_ranges;
    gcharset *sets;
    int32_t n_sets;
};

static inline bool grammar_ends_seq(const grammar *g, int32_t pos) {
    return g->el[pos].kind == GE_END || g->el[pos].kind == GE_ALT;
}

/* The rule element pos belongs to. */
int32_t grammar_rule_of(const grammar *g, int32_t pos);
/* Rule r's name, or for a group or a repetition the name of the rule it is in. */
const char *grammar_rule_name(const grammar *g, int32_t r);

/* Does set s hold a character in [lo, hi]? */
bool grammar_set_meets(const grammar *g, int32_t s, uint32_t lo, uint32_t hi);

#endif
