/*
 * grammar — constrained sampling: a GBNF grammar (llama.cpp's format, so its
 * users' files work) and the tokens it allows next.
 *
 * The format: rules `name ::= alternatives`, a rule per line (a line may
 * continue after `::=`, after `|` and inside parentheses); "literals" and
 * [character classes] ([^...] negated, ranges a-z) with the escapes \n \r \t
 * \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH; `.` any character; ( groups ); the
 * postfix operators * + ? {m} {m,} {m,n}; `#` comments; the start rule is
 * `root`. Characters are Unicode code points; the text is UTF-8.
 *
 * How it runs: a grammar is compiled once into rules of elements. A parse
 * position is a stack of elements still to match (a pushdown automaton, as
 * in llama.cpp), and the state is the set of stacks that agree with the text
 * so far. Stacks are persistent linked frames, hash-consed: two equal stacks
 * are one pointer, so sets are deduplicated by pointer and each frame
 * memoizes what it expands to (which characters it can take next, and where
 * each leads) — work is done once per distinct frame, not once per token.
 *
 * The mask walks a trie of the vocabulary's token bytes (grammar_vocab,
 * built once per tokenizer) from the current state, and prunes a subtree as
 * soon as its prefix leaves the grammar: the cost is the allowed tokens'
 * bytes, not the vocabulary's. An end-of-generation token is allowed only
 * where the text is a complete sentence of the grammar, and is the only one
 * allowed once nothing can follow. Tokens may end inside a UTF-8 character;
 * such a token is allowed when some character the grammar accepts starts so.
 *
 * Left recursion (a rule that can reach itself before consuming anything) is
 * refused when the grammar is compiled, as llama.cpp does: the automaton
 * would not terminate on it.
 */
#ifndef OCTO_MODEL_GRAMMAR_H
#define OCTO_MODEL_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "model/tokenizer.h"

typedef struct grammar grammar;

/* The bounds on the work a client's grammar can ask for (docs/limits.md,
 * docs/structured-output.md). Past any of them the compiler or the matcher
 * stops with ERR_UNSUPPORTED and a message naming the bound: compiling
 * costs time linear in the elements, so any grammar is compiled or refused
 * in well under a second, and the matcher's cost per token is bounded by
 * GRAMMAR_MAX_WORK whatever the grammar's ambiguity. */
#define GRAMMAR_MAX_ELEMS (1 << 20) /* compiled elements: a repetition X{m,n} holds n copies of X */
#define GRAMMAR_MAX_RULES (1 << 16) /* rules: named, groups, and one per optional copy of X{m,n} */
#define GRAMMAR_MAX_REPEAT 10000    /* n in X{m,n} */
#define GRAMMAR_MAX_DEPTH 64        /* groups inside groups */
#define GRAMMAR_MAX_FRAMES (1 << 20) /* the matcher's distinct parse-stack frames */
#define GRAMMAR_MAX_SET 4096         /* parse stacks alive at once (the grammar's ambiguity) */
#define GRAMMAR_MAX_WORK (1 << 23)   /* frames visited for one token: its mask, or taking it */
#define GRAMMAR_MAX_BYTES (64 << 20) /* the matcher's memory for frames and what they expand to */

/* Compile GBNF text; ERR_BAD_VALUE with the line and what is wrong. */
err_code grammar_parse(const char *text, size_t len, grammar **out, err_t *err);
void grammar_free(grammar *g);

/* The vocabulary as the grammar sees it: every token's bytes, in a trie. */
typedef struct grammar_vocab grammar_vocab;
err_code grammar_vocab_new(const tokenizer *tok, grammar_vocab **out, err_t *err);
void grammar_vocab_free(grammar_vocab *v);

/* Where one generation is in a grammar. Not thread-safe: one per stream. */
typedef struct grammar_match grammar_match;
/* v may be NULL for a matcher fed only text (grammar_match_text). */
err_code grammar_match_new(const grammar *g, const grammar_vocab *v, grammar_match **out, err_t *err);
void grammar_match_free(grammar_match *m);

/* logits[t] = -inf for every token the grammar does not allow next. */
void grammar_match_mask(grammar_match *m, float *logits);
/* Would token t be allowed next? (One token's walk: cheaper than a mask.) */
bool grammar_match_allows(grammar_match *m, int32_t t);
/* t is taken; a token the grammar does not allow leaves a state where only
 * end-of-generation is allowed (it cannot happen through the mask). */
void grammar_match_accept(grammar_match *m, int32_t t);
/* Undo the latest n accepts (n <= GRAMMAR_REWIND_MAX). */
#define GRAMMAR_REWIND_MAX 16
void grammar_match_rewind(grammar_match *m, int n);
/* Feed text directly; false when the grammar cannot continue with it. */
bool grammar_match_text(grammar_match *m, const char *text, size_t len);
/* The text so far is a whole sentence of the grammar. */
bool grammar_match_complete(const grammar_match *m);
/* The matcher's memory in bytes: its frames, what they expand to, its
 * states and kept masks (bounded: GRAMMAR_MAX_BYTES for the frames). */
size_t grammar_match_memory(const grammar_match *m);
/* ERR_OK, or why the matcher stopped (the grammar's parse states outgrew
 * their bound, or memory ran out): it then allows only end-of-generation. */
err_code grammar_match_error(const grammar_match *m, err_t *err);

#endif
