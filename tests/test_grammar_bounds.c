/*
 * test_grammar_bounds — the work a client's grammar or JSON schema can ask
 * of the compilers and the matcher is bounded (grammar.h, json_schema.h;
 * docs/limits.md): each input is compiled or refused, and each token's mask
 * computed or the matcher stopped with an error naming the bound, in time
 * and memory that do not depend on how the input was built.
 *
 * First the inputs the attacks of issues 54, 58 and 59 found (each took
 * seconds to hours, or a thread's stack, before), then a property test:
 * thousands of random grammars and schemas, many of them built to be
 * hostile (huge repetition counts, long runs of optional items, nested
 * repetitions, ambiguous patterns), each compiled and then driven for a
 * few dozen tokens on stories260K's vocabulary by the mask; the text the
 * mask let through must be taken by a fresh matcher fed it as text.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "core/gguf.h"
#include "model/grammar.h"
#include "model/json_schema.h"
#include "model/json_schema_internal.h" /* sbuf */
#include "model/tokenizer.h"
#include "t.h"
#include "util.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Sanitizers and qemu run the same work several times slower. */
static double slack(void) { return tu_quick() ? 10.0 : 1.0; }

static tokenizer *tok;
static grammar_vocab *gv;
static int n_vocab;

/* ---------------------------------------------------------------- driving a grammar */

typedef struct {
    bool compiled, stopped; /* stopped: the matcher ended with an error (a bound) */
    double seconds, worst_token_s;
    size_t memory;          /* the matcher's, at its largest */
    int tokens;
    char msg[320];          /* the compiler's or the matcher's error */
} outcome;

static uint64_t rng_state;
static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return n ? (uint32_t)(rng_state % n) : 0;
}

/* The mask's allowed tokens, one drawn at random, up to max_tokens or end-of-generation; then the text
 * those tokens spell must be taken by a fresh matcher (the mask and the text path agree). */
static void drive(const grammar *g, int max_tokens, outcome *o) {
    grammar_match *m = NULL;
    err_t err = {0};
    if (grammar_match_new(g, gv, &m, &err)) {
        o->stopped = true;
        snprintf(o->msg, sizeof o->msg, "%s", err.msg);
        return;
    }
    float *logits = malloc(sizeof *logits * (size_t)n_vocab);
    int32_t *ok = malloc(sizeof *ok * (size_t)n_vocab);
    char text[4096];
    size_t len = 0;
    bool ended = false;
    for (int k = 0; k < max_tokens && !ended && !o->stopped; k++) {
        const double t0 = now_s();
        for (int t = 0; t < n_vocab; t++) logits[t] = 0.0f;
        grammar_match_mask(m, logits);
        const double dt = now_s() - t0;
        if (dt > o->worst_token_s) o->worst_token_s = dt;
        if (grammar_match_error(m, &err)) {
            o->stopped = true;
            snprintf(o->msg, sizeof o->msg, "%s", err.msg);
            break;
        }
        int n_ok = 0;
        for (int t = 0; t < n_vocab; t++)
            if (logits[t] == 0.0f) ok[n_ok++] = t;
        T_CHECKF(n_ok > 0, "the mask allowed nothing (not even end-of-generation)");
        if (n_ok == 0) break;
        const int32_t t = ok[rnd((uint32_t)n_ok)];
        if (tokenizer_is_eog(tok, t)) {
            ended = true;
            break;
        }
        char piece[64];
        const int n = tokenizer_piece(tok, t, false, piece, sizeof piece);
        if (n > 0 && len + (size_t)n < sizeof text) memcpy(text + len, piece, (size_t)n), len += (size_t)n;
        grammar_match_accept(m, t);
        o->tokens++;
        const size_t mem = grammar_match_memory(m);
        if (mem > o->memory) o->memory = mem;
    }
    if (!o->stopped && grammar_match_error(m, &err)) o->stopped = true, snprintf(o->msg, sizeof o->msg, "%s", err.msg);
    grammar_match_free(m);
    if (!o->stopped && len < sizeof text - 64) { /* the same text, fed as text */
        grammar_match *f = NULL;
        T_EQ_INT(grammar_match_new(g, NULL, &f, &err), ERR_OK);
        const bool took = f && (len == 0 || grammar_match_text(f, text, len));
        const bool stopped = f && grammar_match_error(f, &err) != ERR_OK; /* the text path hit a bound */
        T_CHECKF(took || stopped, "the mask let through text the grammar refuses: '%.*s'", (int)len, text);
        if (f && ended && !stopped) T_CHECKF(grammar_match_complete(f), "end-of-generation allowed mid-sentence");
        grammar_match_free(f);
    }
    free(logits);
    free(ok);
}

/* Compile gbnf (or refuse it), then drive it; the whole timed. */
static outcome run_gbnf(const char *gbnf, int max_tokens) {
    outcome o = {0};
    const double t0 = now_s();
    grammar *g = NULL;
    err_t err = {0};
    if (grammar_parse(gbnf, strlen(gbnf), &g, &err) == ERR_OK) {
        o.compiled = true;
        drive(g, max_tokens, &o);
        grammar_free(g);
    } else {
        snprintf(o.msg, sizeof o.msg, "%s", err.msg);
    }
    o.seconds = now_s() - t0;
    return o;
}

static outcome run_schema(const char *schema, int max_tokens) {
    const double t0 = now_s();
    char *gbnf = NULL;
    err_t err = {0};
    outcome o = {0};
    if (json_schema_to_gbnf(schema, strlen(schema), &gbnf, &err) == ERR_OK) o = run_gbnf(gbnf, max_tokens);
    else snprintf(o.msg, sizeof o.msg, "%s", err.msg);
    free(gbnf);
    o.seconds = now_s() - t0;
    return o;
}

/* ---------------------------------------------------------------- the attacks' inputs */

static char *repeat_text(const char *head, const char *unit, int n, const char *tail) {
    sbuf b = {0};
    sb_str(&b, head);
    for (int i = 0; i < n; i++) sb_str(&b, unit);
    sb_str(&b, tail);
    return b.p;
}

/* Issue 58 (1): 90 `X{0,10000}` make 900,000 rules (seconds, 230 MB): refused at the rule bound; and
 * references to named rules after 6,000 rules are lookups, not scans of every rule (3.4 KB took 10-40 s). */
static void test_repetition_rules(void) {
    char *g = repeat_text("root ::= ", "\"a\"{0,10000} ", 90, "\n");
    outcome o = run_gbnf(g, 4);
    T_CHECKF(!o.compiled && strstr(o.msg, "more than 65536 rules"), "%s", o.msg);
    T_CHECKF(o.seconds < 0.5 * slack(), "refused in %.3f s", o.seconds);
    printf("90 x \"a\"{0,10000} (%zu bytes): refused in %.3f s: %s\n", strlen(g), o.seconds, o.msg);
    free(g);

    sbuf b = {0};
    sb_str(&b, "root ::= r0\nbig ::= \"a\"{0,6000}\n");
    for (int i = 0; i < 600; i++) sb_printf(&b, "r%d ::= big \"b\" r%d | big r%d | \"c\"\n", i, i + 1, i + 2);
    sb_str(&b, "r600 ::= \"d\"\nr601 ::= \"e\"\n");
    o = run_gbnf(b.p, 4);
    T_CHECKF(o.compiled && o.seconds < 0.5 * slack(), "%zu bytes: %s in %.3f s", strlen(b.p), o.msg, o.seconds);
    printf("1,800 references after 6,000 rules (%zu bytes): compiled and driven in %.3f s\n", strlen(b.p), o.seconds);
    free(b.p);
}

/* Issue 58 (2): `c? c? ... c? "!"` (1,990 items) expanded 2,000 levels deep: ~330 KB of stack, a
 * SIGSEGV on a 128 KiB thread (musl's default, a JVM thread at -Xss256k). Run on such a thread. */
static void *optional_run(void *arg) {
    outcome *o = arg;
    char *g = repeat_text("root ::= ", "c? ", 1990, "\"!\"\nc ::= \"c\"\n");
    *o = run_gbnf(g, 8);
    free(g);
    return NULL;
}

static void test_optional_run(void) {
    pthread_attr_t a;
    pthread_attr_init(&a);
    T_EQ_INT(pthread_attr_setstacksize(&a, tu_quick() ? 1 << 20 : 128 << 10), 0); /* ASan's frames are larger */
    pthread_t th;
    outcome o = {0};
    T_EQ_INT(pthread_create(&th, &a, optional_run, &o), 0);
    pthread_join(th, NULL);
    pthread_attr_destroy(&a);
    /* compiled; then either driven, or stopped by the work bound (each of its states has ~2,000 stacks
     * with ~2,000 successors each) with the error naming it and the rule */
    T_CHECKF(o.compiled && (!o.stopped || (strstr(o.msg, "too ambiguous near rule '") &&
                                           strstr(o.msg, "8388608"))), "%s", o.msg);
    T_CHECKF(o.seconds < 1.0 * slack() && o.worst_token_s < 0.5 * slack(), "%.3f s, worst token %.3f s", o.seconds,
             o.worst_token_s);
    T_CHECKF(o.memory <= (size_t)GRAMMAR_MAX_BYTES + (8u << 20), "%zu bytes", o.memory);
    printf("1,990 optional items on a 128 KiB thread: %s after %d tokens, %.3f s (worst token %.3f s), %.1f MiB\n",
           o.stopped ? "stopped" : "ran", o.tokens, o.seconds, o.worst_token_s, (double)o.memory / (1 << 20));
    if (o.stopped) printf("  %s\n", o.msg);
}

/* Issue 58 (3) and 59 (4): ambiguity that grows per token. A schema pattern `(\w|\w|\w)?` repeated, and
 * `.{0,10000}` three times (O(k^2) stacks after k characters): every token bounded, over 40 tokens. */
static void test_ambiguous(void) {
    char *p = repeat_text("{\"type\":\"string\",\"pattern\":\"^", "(\\\\w|\\\\w|\\\\w)?", 300, "$\"}");
    const char *dots = "{\"type\":\"string\",\"pattern\":\"^.{0,10000}.{0,10000}.{0,10000}$\"}";
    const char *const schemas[] = {p, dots};
    for (int i = 0; i < 2; i++) {
        rng_state = 0x9E3779B97F4A7C15ull;
        outcome o = run_schema(schemas[i], 40);
        T_CHECKF(o.compiled, "%s", o.msg);
        T_CHECKF(!o.stopped || strstr(o.msg, "too ambiguous") || strstr(o.msg, "parse states"), "%s", o.msg);
        T_CHECKF(o.worst_token_s < 0.5 * slack() && o.seconds < 4.0 * slack(), "%.3f s, worst token %.3f s",
                 o.seconds, o.worst_token_s);
        printf("%s (%zu bytes): %s after %d tokens in %.3f s (worst token %.3f s, %.1f MiB)%s%s\n",
               i ? "pattern .{0,10000} x3" : "pattern (\\w|\\w|\\w)? x300", strlen(schemas[i]),
               o.stopped ? "stopped" : "ran", o.tokens, o.seconds, o.worst_token_s, (double)o.memory / (1 << 20),
               o.stopped ? ": " : "", o.stopped ? o.msg : "");
    }
    free(p);
}

/* Issue 58 (4): rule names made unique by a scan per try, O(N^3): an object of 1,100 members took ~5 s,
 * ~12 s under a 64-character $defs name. Issue 59 (3): 99 `a{0,10000}` in one pattern, 1M rules. */
static void test_schema_names(void) {
    sbuf f = {0};
    sb_str(&f, "{\"type\":\"object\",\"properties\":{");
    for (int i = 0; i < 1100; i++) sb_printf(&f, "%s\"m%d\":{\"type\":\"integer\"}", i ? "," : "", i);
    sb_str(&f, "}}");
    outcome o = run_schema(f.p, 4);
    T_CHECKF(o.compiled && o.seconds < 1.0 * slack(), "%.3f s: %s", o.seconds, o.msg);
    printf("an object of 1,100 members (%zu bytes): compiled and driven in %.3f s\n", strlen(f.p), o.seconds);
    free(f.p);
    sbuf b = {0};
    const char *def = "a-definition-whose-name-is-sixty-four-characters-long-0123456789";
    sb_printf(&b, "{\"$ref\":\"#/$defs/%s\",\"$defs\":{\"%s\":{\"type\":\"object\",\"properties\":{", def, def);
    for (int i = 0; i < 1100; i++) sb_printf(&b, "%s\"m%d\":{\"type\":\"array\",\"items\":{\"enum\":[%d]}}", i ? "," : "", i, i);
    sb_str(&b, "}}}}");
    o = run_schema(b.p, 4);
    T_CHECKF(o.seconds < 1.0 * slack(), "%.3f s: %s", o.seconds, o.msg);
    printf("1,100 members under a 64-character $defs name (%zu bytes): %s in %.3f s%s%s\n", strlen(b.p),
           o.compiled ? "compiled and driven" : "refused", o.seconds, o.compiled ? "" : ": ", o.compiled ? "" : o.msg);
    free(b.p);

    char *p = repeat_text("{\"type\":\"string\",\"pattern\":\"^", "a{0,10000}", 99, "$\"}");
    o = run_schema(p, 4);
    T_CHECKF(!o.compiled && strstr(o.msg, "more than 65536 rules") && o.seconds < 1.0 * slack(), "%.3f s: %s",
             o.seconds, o.msg);
    printf("a pattern of 99 a{0,10000} (%zu bytes): refused in %.3f s: %s\n", strlen(p), o.seconds, o.msg);
    free(p);
}

/* Issue 59, 2: a schema's size was paid twice over before any bound: the
 * JSON reader gave each string a buffer the size of the rest of the
 * document (an mmap and munmap each), and an object's names were checked
 * against each other in quadratic loops (20,000 required members, 780 KB:
 * 6.1 s to refuse; allOf of 200 objects of 100 members, 620 KB: 2.1 s).
 * Now each string gets its own size and an object has at most 2,048 members
 * (each makes two of the 4,096 rules a schema may make): refused at once. */
static void test_schema_size(void) {
    sbuf a = {0}, b = {0}, e = {0};
    sb_str(&a, "{\"type\":\"object\",\"properties\":{");
    for (int i = 0; i < 20000; i++) sb_printf(&a, "%s\"k%d\":{\"type\":\"integer\"}", i ? "," : "", i);
    sb_str(&a, "},\"required\":[");
    for (int i = 0; i < 20000; i++) sb_printf(&a, "%s\"k%d\"", i ? "," : "", i);
    sb_str(&a, "]}");
    sb_str(&b, "{\"allOf\":[");
    for (int i = 0; i < 200; i++) {
        sb_printf(&b, "%s{\"type\":\"object\",\"properties\":{", i ? "," : "");
        for (int j = 0; j < 100; j++) sb_printf(&b, "%s\"k%d_%d\":{\"type\":\"integer\"}", j ? "," : "", i, j);
        sb_str(&b, "}}");
    }
    sb_str(&b, "]}");
    sb_str(&e, "{\"enum\":["); /* 50,000 strings that convert: the reader's cost alone */
    for (int i = 0; i < 50000; i++) sb_printf(&e, "%s\"v%d\"", i ? "," : "", i);
    sb_str(&e, "]}");
    const char *what[] = {"20,000 required members", "allOf of 200 objects of 100 members", "an enum of 50,000 strings"};
    const char *text[] = {a.p, b.p, e.p};
    for (int i = 0; i < 3; i++) {
        char *gbnf = NULL;
        err_t err = {0};
        const double t0 = now_s();
        const err_code rc = json_schema_to_gbnf(text[i], strlen(text[i]), &gbnf, &err);
        const double dt = now_s() - t0;
        T_CHECKF(i == 2 ? rc == ERR_OK : rc == ERR_UNSUPPORTED && strstr(err.msg, "more than 2048 members"),
                 "[%s] rc %d: %s", what[i], (int)rc, err.msg);
        T_CHECKF(dt < 0.2 * slack(), "[%s] %.3f s", what[i], dt);
        printf("%s (%zu bytes): %s in %.3f s%s%s\n", what[i], strlen(text[i]), rc ? "refused" : "converted", dt,
               rc ? ": " : "", rc ? err.msg : "");
        free(gbnf);
    }
    free(a.p), free(b.p), free(e.p);
}

/* ---------------------------------------------------------------- random grammars */

static const char *const lits[] = {"a", "b", "ab", "{", "}", "\\\"", " ", "0", "xyz", "\\n", "é", ""};

static void gen_element(sbuf *b, int n_rules, int self, int depth);

static void gen_operator(sbuf *b, bool unbounded_ok) {
    switch (rnd(12)) {
    case 0: if (unbounded_ok || rnd(4) == 0) sb_str(b, "*"); break;
    case 1: if (unbounded_ok || rnd(4) == 0) sb_str(b, "+"); break;
    case 2: case 3: sb_str(b, "?"); break;
    case 4: sb_printf(b, "{%u}", rnd(4)); break;
    case 5: if (unbounded_ok || rnd(4) == 0) sb_printf(b, "{%u,}", rnd(3)); break;
    case 6: sb_printf(b, "{%u,%u}", rnd(3), 3 + rnd(5)); break;
    case 7: if (rnd(8) == 0) sb_printf(b, "{0,%u}", 100 + rnd(9901)); break; /* hostile: a long chain of rules */
    default: break;
    }
}

static void gen_sequence(sbuf *b, int n_rules, int self, int depth) {
    if (rnd(200) == 0) { /* hostile: a long run of optional items */
        const uint32_t n = 50 + rnd(1000);
        for (uint32_t i = 0; i < n; i++) sb_str(b, "\"c\"? ");
        return;
    }
    const uint32_t n = rnd(5);
    if (n == 0) sb_str(b, "\"\""); /* an empty alternative written out: after `|` GBNF reads on to the next line */
    for (uint32_t i = 0; i < n; i++) {
        const size_t at = b->n;
        gen_element(b, n_rules, self, depth);
        gen_operator(b, b->p[at] == '"' || b->p[at] == '[' || b->p[at] == '.'); /* a group or a rule may match nothing */
        sb_str(b, " ");
    }
}

static void gen_alternates(sbuf *b, int n_rules, int self, int depth) {
    if (depth == 0 && rnd(60) == 0) { /* hostile: repetitions enough to pass the rule bound */
        for (int i = 0; i < 8; i++) sb_str(b, "\"a\"{0,9000} ");
        return;
    }
    const uint32_t n = 1 + rnd(3);
    for (uint32_t i = 0; i < n; i++) {
        if (i) sb_str(b, " | ");
        gen_sequence(b, n_rules, self, depth);
    }
}

/* A reference to a rule at or before this one is guarded by a character most of the time, so that most
 * grammars are not left-recursive (an unguarded one, refused, is still generated now and then). */
static void gen_element(sbuf *b, int n_rules, int self, int depth) {
    switch (rnd(depth < 3 ? 7 : 5)) {
    case 0: case 1: sb_printf(b, "\"%s\"", lits[rnd(sizeof lits / sizeof *lits)]); break;
    case 2: sb_str(b, rnd(2) ? "[a-c]" : rnd(2) ? "[^a\\n]" : "[0-9x]"); break;
    case 3: sb_str(b, "."); break;
    case 4: {
        const uint32_t r = rnd((uint32_t)n_rules);
        sb_printf(b, (int)r <= self && rnd(8) ? "(\"(\" r%u)" : "r%u", r);
        break;
    }
    default:
        sb_str(b, "(");
        gen_alternates(b, n_rules, self, depth + 1);
        sb_str(b, ")");
    }
}

static char *gen_grammar(void) {
    sbuf b = {0};
    const int n = 1 + (int)rnd(6);
    sb_str(&b, "root ::= r0\n");
    for (int r = 0; r < n; r++) {
        sb_printf(&b, "r%d ::= ", r);
        gen_alternates(&b, n, r, 0);
        sb_str(&b, "\n");
    }
    return b.p;
}

/* ---------------------------------------------------------------- random schemas */

static void gen_schema(sbuf *b, int depth, int n_defs);

static void gen_pattern(sbuf *b) {
    static const char *const atoms[] = {"a", "\\\\d", "\\\\w", ".", "[a-c]", "(x|y)", "(\\\\w|\\\\w)", "[^z]"};
    sb_str(b, "\"^");
    const uint32_t n = 1 + rnd(6);
    for (uint32_t i = 0; i < n; i++) {
        sb_str(b, atoms[rnd(sizeof atoms / sizeof *atoms)]);
        switch (rnd(8)) {
        case 0: sb_str(b, "?"); break;
        case 1: sb_str(b, "*"); break;
        case 2: sb_str(b, "+"); break;
        case 3: sb_printf(b, "{%u,%u}", rnd(3), 3 + rnd(4)); break;
        case 4: if (rnd(6) == 0) sb_printf(b, "{0,%u}", 100 + rnd(9901)); break; /* hostile */
        default: break;
        }
    }
    sb_str(b, "$\"");
}

static void gen_object(sbuf *b, int depth, int n_defs) {
    const uint32_t n = rnd(5);
    static unsigned serial; /* names unique across an allOf's objects (a name declared twice is refused) */
    const unsigned first = serial;
    serial += n;
    sb_str(b, "{\"type\":\"object\",\"properties\":{");
    for (uint32_t i = 0; i < n; i++) {
        sb_printf(b, "%s\"p%u\":", i ? "," : "", first + i);
        gen_schema(b, depth + 1, n_defs);
    }
    sb_str(b, "}");
    if (n && rnd(2)) sb_printf(b, ",\"required\":[\"p%u\"]", first + rnd(n + 1)); /* now and then undeclared: refused */
    if (rnd(3) == 0) sb_str(b, ",\"additionalProperties\":false");
    sb_str(b, "}");
}

static void gen_schema(sbuf *b, int depth, int n_defs) {
    switch (rnd(depth < 4 ? 12 : 6)) {
    case 0: sb_str(b, "{\"type\":\"string\""); if (rnd(2)) sb_str(b, ",\"pattern\":"), gen_pattern(b); sb_str(b, "}"); break;
    case 1: sb_printf(b, "{\"type\":\"string\",\"minLength\":%u,\"maxLength\":%u}", rnd(3), 3 + (rnd(6) ? rnd(8) : rnd(5000))); break;
    case 2: sb_printf(b, "{\"type\":\"integer\",\"minimum\":%d,\"maximum\":%d}", (int)rnd(200) - 100, 100 + (int)rnd(100000)); break;
    case 3: sb_str(b, rnd(2) ? "{\"type\":\"number\"}" : "{\"type\":\"boolean\"}"); break;
    case 4: sb_printf(b, "{\"enum\":[\"x\",%u,null]}", rnd(100)); break;
    case 5: if (n_defs) { sb_printf(b, "{\"$ref\":\"#/$defs/d%u\"}", rnd((uint32_t)n_defs)); break; } /* fall through */
    case 6: case 7: gen_object(b, depth, n_defs); break;
    case 8:
        sb_printf(b, "{\"type\":\"array\",\"minItems\":%u,\"maxItems\":%u,\"items\":", rnd(2), 2 + (rnd(5) ? rnd(4) : rnd(2000)));
        gen_schema(b, depth + 1, n_defs);
        sb_str(b, "}");
        break;
    default: {
        static const char *const kw[] = {"anyOf", "oneOf", "allOf"};
        const uint32_t k = rnd(3), n = 1 + rnd(3);
        sb_printf(b, "{\"%s\":[", kw[k]);
        for (uint32_t i = 0; i < n; i++) { /* allOf: of objects (their members merged), as the converter takes */
            if (i) sb_str(b, ",");
            if (k == 2) gen_object(b, depth + 1, n_defs);
            else gen_schema(b, depth + 1, n_defs);
        }
        sb_str(b, "]}");
    }
    }
}

static char *gen_schema_doc(void) {
    sbuf b = {0};
    const int n_defs = (int)rnd(4);
    gen_schema(&b, 0, n_defs);
    b.n--; /* its closing brace: the definitions go beside it */
    sb_str(&b, ",\"$defs\":{");
    for (int d = 0; d < n_defs; d++) {
        sb_printf(&b, "%s\"d%d\":", d ? "," : "", d);
        gen_schema(&b, 1, n_defs);
    }
    sb_str(&b, "}}");
    return b.p;
}

/* ---------------------------------------------------------------- the property */

typedef struct {
    int runs, compiled, refused, stopped, bound_refusals;
    double worst_s, worst_token_s;
    size_t worst_memory, biggest_input;
} tally;

static void count(tally *t, const outcome *o, const char *input) {
    t->runs++;
    t->compiled += o->compiled;
    t->refused += !o->compiled;
    t->stopped += o->stopped;
    if (!o->compiled && (strstr(o->msg, "more than") || strstr(o->msg, "at most") || strstr(o->msg, "deeper than")))
        t->bound_refusals++;
    if (o->seconds > t->worst_s) t->worst_s = o->seconds;
    if (o->worst_token_s > t->worst_token_s) t->worst_token_s = o->worst_token_s;
    if (o->memory > t->worst_memory) t->worst_memory = o->memory;
    if (strlen(input) > t->biggest_input) t->biggest_input = strlen(input);
    T_CHECKF(o->seconds < 1.0 * slack() && o->worst_token_s < 0.5 * slack(), "%.3f s (token %.3f s): %.300s",
             o->seconds, o->worst_token_s, input);
    T_CHECKF(o->memory <= (size_t)GRAMMAR_MAX_BYTES + (8u << 20), "%zu bytes: %.300s", o->memory, input);
    T_CHECKF(o->compiled || o->msg[0], "refused without a message: %.300s", input);
}

static void report(const char *what, const tally *t) {
    printf("%d random %s: %d compiled (%d stopped by a matcher bound), %d refused (%d at a size or work bound); "
           "the slowest %.3f s (a token %.4f s), the most matcher memory %.1f MiB, the largest input %zu bytes\n",
           t->runs, what, t->compiled, t->stopped, t->refused, t->bound_refusals, t->worst_s, t->worst_token_s,
           (double)t->worst_memory / (1 << 20), t->biggest_input);
}

static void test_property(void) {
    const int n = tu_quick() ? 600 : 5000; /* each kind: 10,000 in all on the test command's run */
    tally tg = {0}, ts = {0};
    const double t0 = now_s();
    rng_state = 0x2545F4914F6CDD1Dull;
    for (int i = 0; i < n; i++) {
        char *g = gen_grammar();
        const outcome o = run_gbnf(g, 16);
        count(&tg, &o, g);
        free(g);
    }
    report("grammars", &tg);
    const double t1 = now_s();
    for (int i = 0; i < n; i++) {
        char *s = gen_schema_doc();
        const outcome o = run_schema(s, 16);
        count(&ts, &o, s);
        free(s);
    }
    report("schemas", &ts);
    printf("the property test: %.1f s for the grammars, %.1f s for the schemas\n", t1 - t0, now_s() - t1);
    /* the generators reach every kind of outcome: a property test that only ever compiles proves little */
    T_CHECK(tg.compiled > n / 4 && tg.refused > n / 20 && tg.bound_refusals > 0 && tg.stopped > 0);
    T_CHECK(ts.compiled > n / 2 && ts.bound_refusals + ts.stopped > 0);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("peak resident memory: %ld MiB\n", ru.ru_maxrss >> 10);
    if (!tu_quick()) T_CHECKF(ru.ru_maxrss >> 10 < 400, "%ld MiB", ru.ru_maxrss >> 10);
}

int main(void) {
    char path[512];
    tu_repo_model(path, sizeof path);
    gguf_ctx *gg = NULL;
    err_t err = {0};
    T_EQ_INT(gguf_open(path, &gg, &err), ERR_OK);
    T_EQ_INT(gg ? tokenizer_load(gg, &tok, &err) : ERR_IO, ERR_OK);
    T_EQ_INT(tok ? grammar_vocab_new(tok, &gv, &err) : ERR_IO, ERR_OK);
    if (!gv) T_DONE();
    n_vocab = tokenizer_n_vocab(tok);
    test_repetition_rules();
    test_optional_run();
    test_ambiguous();
    test_schema_names();
    test_schema_size();
    test_property();
    grammar_vocab_free(gv);
    tokenizer_free(tok);
    gguf_close(gg);
    T_DONE();
}
