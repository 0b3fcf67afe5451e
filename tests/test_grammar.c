/*
 * test_grammar — GBNF grammars (model/grammar.h), the JSON reader
 * (core/json.h) and the JSON-schema converter (model/json_schema.h).
 *
 * The language of each grammar is checked on texts it must take and texts
 * it must refuse; every error names its line and cause; the token mask
 * agrees, token by token, with feeding each token's bytes (on the 512-token
 * SentencePiece vocabulary and on deepseek's 100k byte-level BPE one); a
 * rewind restores the state; schemas become grammars that take exactly
 * the documents their schema validates, for a set of documents per schema.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/gguf.h"
#include "core/json.h"
#include "model/grammar.h"
#include "model/json_schema.h"
#include "model/json_schema_internal.h" /* sbuf */
#include "model/tokenizer.h"
#include "t.h"
#include "util.h"

static grammar *compile(const char *text) {
    grammar *g = NULL;
    err_t err = {0};
    if (grammar_parse(text, strlen(text), &g, &err)) T_CHECKF(0, "%s: %s", text, err.msg);
    return g;
}

/* Does g take the whole of text? */
static bool takes(const grammar *g, const char *text) {
    grammar_match *m = NULL;
    err_t err = {0};
    if (grammar_match_new(g, NULL, &m, &err)) {
        T_CHECKF(0, "%s", err.msg);
        return false;
    }
    const bool ok = grammar_match_text(m, text, strlen(text)) || !*text;
    const bool whole = ok && grammar_match_complete(m);
    grammar_match_free(m);
    return whole;
}

static void test_language(void) {
    grammar *g = compile("root ::= \"a\" b* \"c\"{2,3}\nb ::= [x-z] | \"(\" root \")\"\n");
    T_CHECK(takes(g, "acc"));
    T_CHECK(takes(g, "axyzccc"));
    T_CHECK(takes(g, "ax(acc)zcc"));
    T_CHECK(!takes(g, "ac"));
    T_CHECK(!takes(g, "acccc"));
    T_CHECK(!takes(g, "awcc"));
    T_CHECK(!takes(g, "ax(acc"));
    T_CHECK(!takes(g, ""));
    grammar_free(g);

    /* groups across lines, comments, negated classes, escapes, any char */
    g = compile("# a comment\nroot ::= (\n  \"x\" |\n  [^a-c\\n] .  # two chars\n) \"\\u00e9\"? \n");
    T_CHECK(takes(g, "x"));
    T_CHECK(takes(g, "xé"));
    T_CHECK(takes(g, "d\xe2\x82\xac"));  /* d then the euro sign */
    T_CHECK(takes(g, "€€é"));
    T_CHECK(!takes(g, "b1"));
    T_CHECK(!takes(g, "\n1"));
    T_CHECK(!takes(g, "ae"));
    T_CHECK(takes(g, "xe")); /* [^a-c\n] then any character */
    grammar_free(g);

    /* an empty alternative, and nullable rules inside a repetition */
    g = compile("root ::= item (\",\" item)*\nitem ::= [0-9]+ | \n");
    T_CHECK(takes(g, ""));
    T_CHECK(takes(g, ",,1,22"));
    T_CHECK(!takes(g, "1,,a"));
    grammar_free(g);

    /* an empty literal repeated, and `.` before any class (fuzzing found both) */
    g = compile("root ::= \"\"* . \"a\"{2}");
    T_CHECK(takes(g, "xaa"));
    T_CHECK(!takes(g, "xa"));
    grammar_free(g);

    /* {m} {m,} */
    g = compile("root ::= \"ab\"{2} [0-9]{1,}");
    T_CHECK(takes(g, "abab7"));
    T_CHECK(takes(g, "abab0123456789"));
    T_CHECK(!takes(g, "ab7"));
    T_CHECK(!takes(g, "abab"));
    grammar_free(g);
}

static void expect_error(const char *text, const char *needle) {
    grammar *g = NULL;
    err_t err = {0};
    const err_code rc = grammar_parse(text, strlen(text), &g, &err);
    T_CHECKF(rc != ERR_OK && g == NULL, "%s was accepted", text);
    T_CHECKF(strstr(err.msg, needle) != NULL, "%s: '%s' lacks '%s'", text, err.msg, needle);
}

static void test_errors(void) {
    expect_error("root ::= a\n", "line 1: rule 'a' is used but never defined");
    expect_error("start ::= \"a\"\n", "no rule named 'root'");
    expect_error("root ::= \"a\"\n\nroot ::= \"b\"\n", "line 3: rule 'root' is defined twice (first on line 1)");
    expect_error("root ::= x \"a\"\nx ::= root \"b\" | \"c\"\n", "left-recursive");
    expect_error("root ::= y* root \"a\"\ny ::= \"b\"?\n", "left-recursive");
    expect_error("root ::= \"abc", "unterminated literal");
    expect_error("root ::= [ab", "unterminated character class");
    expect_error("root ::= [z-a]\n", "runs backwards");
    expect_error("root ::= * \"a\"\n", "follows nothing");
    expect_error("root ::= \"a\"{3,2}\n", "bad repetition bounds");
    expect_error("root ::= \"\\q\"\n", "unknown escape");
    expect_error("root ::= (\"a\"\n", "expected ')'");
    expect_error("root = \"a\"\n", "expected '::='");
    expect_error("root ::= \"a\" )\n", "unexpected character");
    expect_error("root ::= \"a\"{20000}\n", "bad repetition count");
}

/* ---------------------------------------------------------------- tokens */

/* A vocabulary by its place under ../shared; stories260K's is the clone's own model. */
static tokenizer *load_tok(const char *name, gguf_ctx **g) {
    const char *dir = tu_data_dir();
    char path[512];
    if (!strcmp(name, "models/stories260K.gguf")) tu_repo_model(path, sizeof path);
    else snprintf(path, sizeof path, "%s/%s", dir ? dir : ".", name);
    err_t err = {0};
    tokenizer *t = NULL;
    if ((!dir && strcmp(name, "models/stories260K.gguf")) || gguf_open(path, g, &err)) return NULL;
    if (tokenizer_load(*g, &t, &err)) {
        T_CHECKF(0, "%s: %s", path, err.msg);
        gguf_close(*g);
        return NULL;
    }
    return t;
}

/* The mask equals, token by token, what feeding each token allows. */
static int mask_agrees(grammar_match *m, int n_vocab, float *logits) {
    for (int t = 0; t < n_vocab; t++) logits[t] = 0.0f;
    grammar_match_mask(m, logits);
    int allowed = 0, wrong = 0;
    for (int t = 0; t < n_vocab; t++) {
        const bool in_mask = logits[t] == 0.0f;
        allowed += in_mask;
        wrong += in_mask != grammar_match_allows(m, t);
    }
    T_EQ_INT(wrong, 0);
    return allowed;
}

static const char *json_gbnf =
    "root ::= value\n"
    "value ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
    "array ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
    "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9]{1,3})? ws\n"
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

/* Walk a document token by token (greedy longest piece the grammar allows
 * that is a prefix of what is left), checking the mask at each step. */
static void walk_document(const grammar *g, const grammar_vocab *gv, const tokenizer *tok, const char *doc) {
    const int V = tokenizer_n_vocab(tok);
    float *logits = malloc(sizeof *logits * (size_t)V);
    grammar_match *m = NULL;
    err_t err = {0};
    T_CHECK(grammar_match_new(g, gv, &m, &err) == ERR_OK);
    size_t at = 0, n = strlen(doc);
    int steps = 0, eog_before_end = 0;
    char piece[512];
    while (at < n && m) {
        const int allowed = mask_agrees(m, V, logits);
        T_CHECK(allowed > 0);
        int best = -1, best_len = 0;
        for (int t = 0; t < V; t++) {
            const int k = tokenizer_piece(tok, t, false, piece, sizeof piece);
            if (k > best_len && (size_t)k <= n - at && memcmp(piece, doc + at, (size_t)k) == 0 && logits[t] == 0.0f)
                best = t, best_len = k;
        }
        T_CHECKF(best >= 0, "no allowed token continues %s at %zu", doc, at);
        if (best < 0) break;
        eog_before_end += grammar_match_allows(m, tokenizer_eos(tok));
        grammar_match_accept(m, best);
        at += (size_t)best_len;
        steps++;
    }
    T_EQ_INT(eog_before_end, 0);
    T_CHECK(grammar_match_complete(m));
    T_CHECK(grammar_match_allows(m, tokenizer_eos(tok)));
    /* rewinding every step gives the start back: the first mask again */
    if (steps <= GRAMMAR_REWIND_MAX) {
        grammar_match_rewind(m, steps);
        T_CHECK(!grammar_match_complete(m));
        T_CHECK(mask_agrees(m, V, logits) > 0);
    }
    T_EQ_INT(grammar_match_error(m, &err), ERR_OK);
    grammar_match_free(m);
    free(logits);
}

static void test_mask(const char *vocab, int expect_vocab) {
    gguf_ctx *gg = NULL;
    tokenizer *tok = load_tok(vocab, &gg);
    if (!tok) return;
    T_EQ_INT(tokenizer_n_vocab(tok), expect_vocab);
    grammar_vocab *gv = NULL;
    err_t err = {0};
    T_CHECK(grammar_vocab_new(tok, &gv, &err) == ERR_OK);
    grammar *g = compile(json_gbnf);
    walk_document(g, gv, tok, "{\"name\": \"Lily\", \"age\": 3,\n  \"toys\": [\"ball\", -1.5e3, true, null, {}]}");
    walk_document(g, gv, tok, "[\"caf\xc3\xa9 \\u00e9 \xe2\x82\xac\"]");
    grammar_free(g);
    /* a grammar that ends: once complete, only end-of-generation is allowed */
    g = compile("root ::= \"ok\"");
    grammar_match *m = NULL;
    T_CHECK(grammar_match_new(g, gv, &m, &err) == ERR_OK);
    T_CHECK(grammar_match_text(m, "ok", 2));
    float *logits = calloc((size_t)tokenizer_n_vocab(tok), sizeof *logits);
    grammar_match_mask(m, logits);
    int finite = 0, eog = 0;
    for (int t = 0; t < tokenizer_n_vocab(tok); t++) {
        finite += logits[t] == 0.0f;
        eog += tokenizer_is_eog(tok, t);
        if (logits[t] == 0.0f && !tokenizer_is_eog(tok, t)) T_CHECKF(0, "token %d is allowed after the end", t);
    }
    T_EQ_INT(finite, eog);
    T_CHECK(logits[tokenizer_eos(tok)] == 0.0f);
    free(logits);
    grammar_match_free(m);
    grammar_free(g);
    grammar_vocab_free(gv);
    tokenizer_free(tok);
    gguf_close(gg);
}

/* ---------------------------------------------------------------- schemas */

typedef struct {
    const char *schema;
    const char *valid[6], *invalid[6];
} schema_case;

static const schema_case schema_cases[] = {
    {"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"}},"
     "\"required\":[\"name\"]}",
     {"{\"name\":\"Ann\"}", "{ \"name\": \"A\\\"b\", \"age\": -3 }", "{\"name\":\"\",\"age\":0}"},
     {"{}", "{\"age\":3}", "{\"name\":\"x\",}", "{\"age\":1,\"name\":\"x\"}", "{\"name\":\"x\",\"other\":1}"}},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\"},\"b\":{\"type\":\"null\"},"
     "\"c\":{\"type\":\"number\"}}}",
     {"{}", "{\"b\":null}", "{\"a\":true,\"c\":1.5e3}", "{\"c\":-0.25}", "{\"a\":false,\"b\":null,\"c\":7}"},
     {"{,\"b\":null}", "{\"a\":true,}", "{\"c\":01}", "{\"b\":null,\"a\":true}"}},
    {"{\"type\":\"array\",\"items\":{\"enum\":[\"red\",\"green\",3,null]},\"minItems\":1,\"maxItems\":3}",
     {"[\"red\"]", "[3, null, \"green\"]"}, {"[]", "[\"blue\"]", "[3,3,3,3]", "[\"red\" 3]"}},
    {"{\"type\":\"integer\",\"minimum\":-12,\"exclusiveMaximum\":250}",
     {"-12", "-1", "0", "9", "99", "249"}, {"-13", "250", "1000", "-0", "007"}},
    {"{\"type\":\"integer\",\"minimum\":1987,\"maximum\":2031}",
     {"1987", "1999", "2000", "2031", "2010"}, {"1986", "2032", "2100", "19870"}},
    {"{\"type\":\"number\",\"minimum\":0,\"maximum\":100}",
     {"0", "99.99", "100", "100.000", "3"}, {"100.5", "-1", "101", "1e2"}},
    {"{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3}(x|yz)?$\"}",
     {"\"AB-123\"", "\"QQ-000yz\""}, {"\"ab-123\"", "\"AB-12\"", "\"AB-123y\""}},
    {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", {"\"ab\"", "\"\\n\\u00e9x\""},
     {"\"a\"", "\"abcd\""}},
    {"{\"type\":\"string\",\"format\":\"date-time\"}", {"\"2026-11-27T09:48:54Z\"", "\"1999-01-31T23:59:59.5+05:30\""},
     {"\"2026-13-01T00:00:00Z\"", "\"2026-11-27\"", "\"2026-11-31T00:00:00Z\""}},
    {"{\"type\":\"string\",\"format\":\"date\"}", {"\"2024-02-29\"", "\"2000-02-29\"", "\"0004-02-29\"", "\"2026-12-31\""},
     {"\"2026-02-29\"", "\"1900-02-29\"", "\"0000-01-01\"", "\"2026-04-31\"", "\"2026-02-30\""}},
    {"{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
     "\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},\"required\":[\"v\",\"next\"]}},"
     "\"$ref\":\"#/$defs/node\"}",
     {"{\"v\":1,\"next\":null}", "{\"v\":1,\"next\":{\"v\":2,\"next\":null}}"},
     {"{\"v\":1}", "{\"v\":1,\"next\":{\"v\":2}}"}},
    {"{\"type\":[\"string\",\"null\"]}", {"null", "\"x\""}, {"1", "nul"}},
    {"{\"const\":{\"k\":[1,\"two\"]}}", {"{\"k\":[1,\"two\"]}"}, {"{\"k\":[1,\"two\"] }x", "{\"k\":[1]}"}},
    {"{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},"
     "{\"properties\":{\"b\":{\"type\":\"string\"}}}]}",
     {"{\"a\":1}", "{\"a\":1,\"b\":\"x\"}"}, {"{\"b\":\"x\"}"}},
    {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}",
     {"{}", "{\"x\":1,\"y\":2}"}, {"{\"x\":\"1\"}"}},
    {"{\"type\":\"object\",\"propertyNames\":{\"maxLength\":2},\"additionalProperties\":true}",
     {"{}", "{\"ab\":[1,{}],\"c\":null}"}, {"{\"abc\":1}"}},
    {"{\"type\":\"object\",\"minProperties\":1,\"maxProperties\":2,\"additionalProperties\":{\"type\":\"null\"}}",
     {"{\"a\":null}", "{\"a\":null,\"b\":null}"}, {"{}", "{\"a\":null,\"b\":null,\"c\":null}"}},
    {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\",\"format\":\"uuid\"}]}",
     {"[4, \"123e4567-e89b-12d3-a456-426614174000\"]"}, {"[4]", "[4, \"123e4567\"]"}},
};

static void test_schemas(void) {
    for (size_t i = 0; i < sizeof schema_cases / sizeof *schema_cases; i++) {
        const schema_case *sc = &schema_cases[i];
        char *gbnf = NULL;
        err_t err = {0};
        if (json_schema_to_gbnf(sc->schema, strlen(sc->schema), &gbnf, &err)) {
            T_CHECKF(0, "schema %zu: %s", i, err.msg);
            continue;
        }
        grammar *g = NULL;
        if (grammar_parse(gbnf, strlen(gbnf), &g, &err)) {
            T_CHECKF(0, "schema %zu's grammar: %s\n%s", i, err.msg, gbnf);
            free(gbnf);
            continue;
        }
        for (int k = 0; k < 6 && sc->valid[k]; k++) T_CHECKF(takes(g, sc->valid[k]), "schema %zu refuses %s\n%s", i, sc->valid[k], gbnf);
        for (int k = 0; k < 6 && sc->invalid[k]; k++) T_CHECKF(!takes(g, sc->invalid[k]), "schema %zu takes %s\n%s", i, sc->invalid[k], gbnf);
        grammar_free(g);
        free(gbnf);
    }
}

static void schema_error(const char *schema, err_code want, const char *needle) {
    char *gbnf = NULL;
    err_t err = {0};
    T_EQ_INT(json_schema_to_gbnf(schema, strlen(schema), &gbnf, &err), want);
    T_CHECK(gbnf == NULL);
    T_CHECKF(strstr(err.msg, needle) != NULL, "%s: '%s' lacks '%s'", schema, err.msg, needle);
}

static void test_schema_errors(void) {
    schema_error("{\"type\":\"string\",\"not\":{}}", ERR_UNSUPPORTED, "keyword 'not' is not supported");
    schema_error("{\"type\":\"array\",\"uniqueItems\":true}", ERR_UNSUPPORTED, "'uniqueItems'");
    schema_error("{\"type\":\"integer\",\"multipleOf\":3}", ERR_UNSUPPORTED, "'multipleOf'");
    schema_error("{\"$ref\":\"#/$defs/none\"}", ERR_BAD_VALUE, "does not name a schema");
    schema_error("{\"$ref\":\"https://x/y.json\"}", ERR_BAD_VALUE, "only local refs");
    schema_error("{\"type\":\"strin\"}", ERR_BAD_VALUE, "unknown type 'strin'");
    schema_error("{\"type\":\"string\",\"pattern\":\"(?=a)b\"}", ERR_UNSUPPORTED, "lookaround");
    schema_error("{\"type\":\"string\",\"pattern\":\"a\\\\1\"}", ERR_UNSUPPORTED, "escape that is not covered");
    schema_error("{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", ERR_BAD_VALUE, "no integer lies between");
    schema_error("{\"type\":\"object\",\"required\":[\"a\"]}", ERR_UNSUPPORTED, "required names a member");
    schema_error("{\"type\":", ERR_BAD_VALUE, "JSON: expected a value at byte 8");
    schema_error("{\"type\":\"string\",\"format\":\"uuid\",\"maxLength\":10}", ERR_UNSUPPORTED, "format uuid together");
    schema_error("{\"allOf\":[{\"properties\":{\"id\":{}}},{\"properties\":{\"id\":{}}}]}", ERR_UNSUPPORTED,
                 "'id' is declared twice");
    schema_error("{\"type\":\"string\",\"pattern\":\"a{,5}\"}", ERR_UNSUPPORTED, "a bad {m,n}");
    schema_error("{\"type\":\"string\",\"maxLength\":20000}", ERR_BAD_VALUE, "at most 10000");
    /* found by the reviews: names the primitives use, and a $ref to a definition named like one */
    char *gbnf = NULL;
    err_t err = {0};
    const char *spaced = "{\"$ref\":\"#/$defs/space\",\"$defs\":{\"space\":{\"type\":\"integer\"}}}";
    T_EQ_INT(json_schema_to_gbnf(spaced, strlen(spaced), &gbnf, &err), ERR_OK);
    grammar *g = gbnf ? compile(gbnf) : NULL;
    T_CHECK(g && takes(g, "12") && !takes(g, "x"));
    grammar_free(g);
    free(gbnf);
    /* groups nested past the bound are refused, not a stack overflow */
    char deep[400] = "root ::= ";
    for (int i = 0; i < 70; i++) strcat(deep, "(");
    strcat(deep, "\"a\"");
    for (int i = 0; i < 70; i++) strcat(deep, ")");
    expect_error(deep, "groups nested deeper than 64");
}

/* The chain the issue found: each object's two members are allOf [$ref next], so a converter that
 * expands every reference anew doubles its work per level (40 levels: more than 17 minutes before).
 * Each node converted once, 40 levels take 40 objects' rules; a chain as long as a 1 MiB body
 * allows ends at the depth bound, an error and not an hour. */
static char *doubling_chain(int levels) {
    sbuf b = {0};
    sb_str(&b, "{\"$ref\":\"#/$defs/l0\",\"$defs\":{");
    for (int i = 0; i < levels; i++) {
        if (i + 1 < levels)
            sb_printf(&b, "%s\"l%d\":{\"type\":\"object\",\"properties\":{\"a\":{\"allOf\":[{\"$ref\":\"#/$defs/l%d\"}]},"
                          "\"b\":{\"allOf\":[{\"$ref\":\"#/$defs/l%d\"}]}},\"required\":[\"a\",\"b\"]}",
                      i ? "," : "", i, i + 1, i + 1);
        else
            sb_printf(&b, ",\"l%d\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"}}}", i);
    }
    sb_str(&b, "}}");
    return b.p;
}

static void test_schema_work(void) {
    const int levels[] = {24, 40};
    for (int k = 0; k < 2; k++) {
        char *schema = doubling_chain(levels[k]), *gbnf = NULL;
        err_t err = {0};
        T_EQ_INT(json_schema_to_gbnf(schema, strlen(schema), &gbnf, &err), ERR_OK);
        /* linear: each level adds its object's rules once (about 700 bytes of grammar), not twice the last */
        T_CHECKF(gbnf && strlen(gbnf) < (size_t)levels[k] * 1500, "%d levels: %zu bytes of grammar", levels[k],
                 gbnf ? strlen(gbnf) : 0);
        if (gbnf) printf("a %d-level doubling chain: %zu bytes of schema, %zu of grammar\n", levels[k], strlen(schema),
                         strlen(gbnf));
        grammar *g = gbnf ? compile(gbnf) : NULL; /* it compiles; a level without its required members is refused */
        T_CHECK(g && !takes(g, "{}") && !takes(g, "{\"a\": {}, \"b\": {}}"));
        grammar_free(g);
        free(schema);
        free(gbnf);
    }
    char *deep = doubling_chain(200);
    schema_error(deep, ERR_UNSUPPORTED, "nested deeper than 64");
    free(deep);
}

int main(void) {
    test_language();
    test_errors();
    test_schemas();
    test_schema_errors();
    test_schema_work();
    test_mask("models/stories260K.gguf", 512);
    if (!tu_data_dir()) T_SKIP("no ../shared: deepseek's 102400-token vocabulary (the rest ran)");
    test_mask("golden/tokenizer/ggml-vocab-deepseek-llm.gguf", 102400);
    T_DONE();
}
