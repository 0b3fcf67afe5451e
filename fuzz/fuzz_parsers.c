/*
 * fuzz_parsers — libFuzzer target: the chat-template detector and
 * formatter, the command line's number, id-list, lookahead and mode
 * parsers, a deploy bundle's plan.json reader (flat JSON applied to a
 * load's options) and its manifest reader, the JSON reader, the GBNF
 * compiler (then the grammar is run over the text after the first NUL) and
 * the JSON-schema converter (whose grammar must then compile), and octo
 * pull's references (a path made of one must stay under the cache's root),
 * on arbitrary bytes.
 *
 * First byte: which parser (250 and above: a pull reference; below, its
 * value modulo 10, as it always was, so the corpus keeps its meaning). Chat: the rest is a template to detect, then
 * NUL-separated role/content pairs to format with every family. The CLI
 * parsers get the rest as one NUL-terminated argument. Each must accept or
 * refuse it; never crash or read past it.
 */
#include <stdlib.h>
#include <string.h>

#include "../tools/cli.h"
#include "../tools/pull.h"
#include "core/flatjson.h"
#include "core/json.h"
#include "model/grammar.h"
#include "model/json_schema.h"
#include "model/chat_template.h"
#include "runtime/bundle.h"
#include "runtime/bundle_dir.h"

static void chat(const char *p, size_t n) {
    const size_t tl = strnlen(p, n);
    (void)chat_detect(p, tl);
    chat_message msgs[8];
    int nm = 0;
    for (size_t at = tl + 1; at < n && nm < 8;) {
        const char *role = p + at;
        at += strnlen(role, n - at) + 1;
        if (at >= n) break;
        const char *content = p + at;
        at += strnlen(content, n - at) + 1;
        if (at > n) break; /* the last content must end inside the input (its NUL) */
        msgs[nm++] = (chat_message){role, content};
    }
    for (int f = CHAT_PLAIN; f <= CHAT_TULU; f++) {
        char *out = NULL;
        if (chat_format((chat_family)f, msgs, nm, &out, NULL) == ERR_OK && !out) __builtin_trap();
        free(out);
    }
}

/* A plan.json: checked, its values read, applied to default options. */
static void plan_json(const char *p, size_t n) {
    err_t err = {0};
    bundle_options o = {0};
    bool want = false;
    char str[64];
    uint64_t v;
    if (flatjson_check(p, n, &err) == ERR_OK) {
        (void)flatjson_get_str(p, n, "draft", str, sizeof str);
        (void)flatjson_get_u64(p, n, "kv_budget_bytes", &v);
    }
    (void)bundle_plan_apply(p, n, &o, &want, &err);
}

/* A manifest: parsed, and what it yields is within its bounds. */
static void manifest(const char *p, size_t n) {
    bundle_manifest m;
    err_t err = {0};
    if (bundle_manifest_parse(p, n, &m, &err) != ERR_OK) return;
    if (m.n_files < 0 || m.n_files > BUNDLE_MAX_FILES) __builtin_trap();
    for (int i = 0; i < m.n_files; i++)
        if (strnlen(m.files[i].name, sizeof m.files[i].name) == sizeof m.files[i].name || strchr(m.files[i].name, '/'))
            __builtin_trap();
}

/* A grammar compiled from the text before the first NUL, fed what follows. */
static void gbnf(const char *p, size_t n) {
    const size_t gl = strnlen(p, n);
    grammar *g = NULL;
    grammar_match *m = NULL;
    if (grammar_parse(p, gl, &g, NULL) != ERR_OK) return;
    if (grammar_match_new(g, NULL, &m, NULL) == ERR_OK) {
        if (gl < n) (void)grammar_match_text(m, p + gl + 1, n - gl - 1);
        (void)grammar_match_complete(m);
        grammar_match_rewind(m, 1);
        grammar_match_free(m);
    }
    grammar_free(g);
}

/* A schema's grammar: when the converter succeeds, the grammar compiles. */
static void schema(const char *p, size_t n) {
    json_value *v = NULL;
    if (json_parse(p, n, &v, NULL) == ERR_OK) json_free(v);
    char *text = NULL;
    grammar *g = NULL;
    if (json_schema_to_gbnf(p, n, &text, NULL) != ERR_OK) return;
    err_t err = {0};
    const err_code rc = grammar_parse(text, strlen(text), &g, &err);
    /* a schema that is only a reference to itself is a left-recursive grammar, refused as such */
    if (rc != ERR_OK && rc != ERR_UNSUPPORTED && !strstr(err.msg, "left-recursive")) __builtin_trap();
    grammar_free(g);
    free(text);
}

/* A reference parsed, then made into the cache's paths and a URL: every path under "/c/", no ".." part. */
static void pull_reference(const char *s) {
    pull_ref r;
    char why[600], out[4096];
    if (pull_ref_parse(s, &r, why, sizeof why)) return;
    (void)pull_ref_like(s);
    pull_ref_text(&r, out, sizeof out);
    (void)pull_file_url(&r, out, sizeof out);
    const int rc = r.kind == PULL_HF_REPO ? pull_alias_path("/c", &r, out, sizeof out) : pull_file_path("/c", &r, out, sizeof out);
    if (!rc && (strncmp(out, "/c/", 3) || strstr(out, "/../") || strstr(out, "//"))) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char *s = malloc(size); /* the rest, NUL-terminated (the chat parser reads its own NULs) */
    if (!s) return 0;
    memcpy(s, data + 1, size - 1);
    s[size - 1] = '\0';
    long l;
    float f;
    int32_t *ids = NULL;
    int n, a, b, c;
    if (data[0] >= 250) {
        pull_reference(s);
        free(s);
        return 0;
    }
    switch (data[0] % 10) {
    case 0: chat(s, size); break;
    case 1: (void)parse_long(s, -5, 1L << 40, &l); break;
    case 2: (void)parse_float(s, &f); break;
    case 3:
        if (parse_tokens(s, &ids, &n)) free(ids);
        break;
    case 4: (void)parse_lookahead(s, &a, &b, &c); break;
    case 5: manifest((const char *)data + 1, size - 1); break; /* raw: a NUL in it must be refused */
    case 6: plan_json(s, size - 1); break;
    case 8: gbnf((const char *)data + 1, size - 1); break;
    case 9: schema((const char *)data + 1, size - 1); break;
    default: (void)parse_spec_mode(s, &a); break;
    }
    free(s);
    return 0;
}
