/*
 * proposer_table — the one list of speculative proposers (proposer.h). Row i
 * is the public mode OCTO_SPEC_NONE + 1 + i (include/octo.h); the API, the
 * CLI's --spec and `octo eval` all take their names from here. A new
 * proposer is a file of its own and a row at the end.
 */
#include <string.h>

#include "speculative/proposer.h"

/* One row per proposer: X(foo) is proposer_foo, the proposer_ops of proposer_foo.c. */
#define PROPOSERS(X) \
    X(ngram)         \
    X(draft)         \
    X(self)          \
    X(lookahead)

#define DECLARE(name) extern const proposer_ops proposer_##name;
PROPOSERS(DECLARE)

#define ROW(name) &proposer_##name,
static const proposer_ops *const table[] = {PROPOSERS(ROW)};

int spec_proposer_count(void) { return (int)(sizeof table / sizeof *table); }

const proposer_ops *spec_proposer_at(int i) { return i >= 0 && i < spec_proposer_count() ? table[i] : NULL; }

int spec_proposer_index(const char *name) {
    for (int i = 0; name && i < spec_proposer_count(); i++)
        if (!strcmp(name, table[i]->name)) return i;
    return -1;
}
