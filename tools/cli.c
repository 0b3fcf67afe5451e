/*
 * cli — what every octo command shares: one-line errors, strict number
 * parsing, id lists, loading a model and tokenizing a text.
 */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "octo.h"
#include "notes.h"
#include "platform/file.h" /* internal: where this binary is (its embedded model is installed beside it) */

int usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("octo: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (see 'octo help')\n", stderr);
    va_end(ap);
    return 2;
}

int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("octo: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

/* Strict integer / float parsing: the whole string must be a number in range. */
int parse_long(const char *s, long min, long max, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) return 0;
    *out = v;
    return 1;
}

int parse_spec_tree(const char *s, int *out) {
    long n;
    if (!strcmp(s, "off")) return *out = -1, 1;
    if (!strcmp(s, "auto")) return *out = 0, 1;
    if (!parse_long(s, 1, 31, &n)) return 0;
    *out = (int)n;
    return 1;
}

int parse_float(const char *s, float *out) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || !isfinite(v)) return 0; /* "nan", "inf": never a meaningful setting */
    *out = v;
    return 1;
}

int parse_tokens(const char *s, int32_t **out, int *n_out) {
    int cap = 16, n = 0;
    int32_t *t = malloc(sizeof *t * (size_t)cap);
    if (!t) return 0;
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || (*end && *end != ' ' && *end != ',' && *end != '\t' && *end != '\n')) {
            free(t);
            return 0;
        }
        if (n == cap) {
            int32_t *q = realloc(t, sizeof *t * (size_t)(cap *= 2));
            if (!q) { free(t); return 0; }
            t = q;
        }
        t[n++] = (int32_t)v;
        p = end;
    }
    *out = t;
    *n_out = n;
    return 1;
}


int read_constraint(const char *grammar_file, const char *schema_file, octo_generate_params *gp, char **text) {
    size_t len;
    *text = NULL;
    if (grammar_file && schema_file) return fail("give --grammar or --json-schema, not both");
    const char *path = grammar_file ? grammar_file : schema_file;
    if (!path) return 0;
    const char *inline_text = NULL; /* llama.cpp takes the text itself: a grammar with "::=", a schema's "{" */
    if (grammar_file && strstr(path, "::=")) inline_text = path;
    if (schema_file && path[strspn(path, " \t\n")] == '{') inline_text = path;
    if (inline_text && !(*text = strdup(inline_text))) return fail("out of memory");
    if (!inline_text && read_text_file(path, text, &len)) return 1;
    if (grammar_file) gp->grammar = *text;
    else gp->json_schema = *text;
    return 0;
}

double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

int read_text_file(const char *path, char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return fail("%s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    for (size_t r; buf && (r = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += r;
        if (n == cap && cap >= CLI_MAX_TEXT_BYTES) { /* /dev/zero, a runaway pipe: stop before memory runs out */
            free(buf);
            fclose(f);
            return fail("%s: longer than %d MiB, the most a text input may be", path, CLI_MAX_TEXT_BYTES >> 20);
        }
        if (n == cap) {
            char *more = realloc(buf, (cap *= 2) + 1);
            if (!more) free(buf);
            buf = more;
        }
    }
    const int bad = ferror(f);
    fclose(f);
    if (!buf) return fail("out of memory reading %s", path);
    if (bad) {
        free(buf);
        return fail("%s: read error", path);
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

int parse_spec_mode(const char *s, int *mode) {
    const int m = octo_spec_mode_from_name(s);
    if (m >= 0) *mode = m;
    return m >= 0;
}

const char *spec_mode_names(void) {
    static char names[256];
    size_t off = 0;
    names[0] = '\0';
    for (int m = 0; octo_spec_mode_name(m) && off < sizeof names; m++) {
        const int w = snprintf(names + off, sizeof names - off, "%s%s", m ? ", " : "", octo_spec_mode_name(m));
        if (w < 0) break;
        off += (size_t)w;
    }
    return names;
}

const char *kv_policy_names(int first, const char *sep, char *out, size_t n) {
    size_t len = 0;
    out[0] = 0;
    for (int p = first; octo_kv_policy_name((octo_kv_policy)p) && len < n; p++)
        len += (size_t)snprintf(out + len, n - len, "%s%s", p == first ? "" : sep, octo_kv_policy_name((octo_kv_policy)p));
    return out;
}

int parse_lookahead(const char *s, int *w, int *n, int *g) {
    char tail;
    return sscanf(s, "%d,%d,%d%c", w, n, g, &tail) == 3;
}

int finish_stdout(int rc) {
    /* a full disk or a closed pipe shows only here: stdio kept the error */
    errno = 0;
    const int flushed = fflush(stdout) == 0 && !ferror(stdout);
    const int e = errno;
    if (fclose(stdout) != 0 || !flushed) {
        const int why = e ? e : errno;
        if (!rc) rc = fail("cannot write the output: %s", why ? strerror(why) : "write error");
    }
    return rc;
}

/* Tokenize text into a malloc'd array (one line on stderr on failure). */
int tokenize_all(octo_model *m, const char *text, size_t len, int add_special, int parse_special, int32_t **out,
                 int *n_out) {
    if (len > (size_t)INT32_MAX) return fail("the text is too long (%zu bytes)", len);
    int cap = (int)len + 16;
    int32_t *ids = malloc(sizeof *ids * (size_t)cap);
    if (!ids) return fail("out of memory");
    int n = octo_tokenize(m, text, (int)len, add_special, parse_special, ids, cap);
    if (n > cap) { /* byte fallback can make more ids than bytes: ask again with room for all */
        int32_t *more = realloc(ids, sizeof *ids * (size_t)n);
        if (!more) { free(ids); return fail("out of memory"); }
        ids = more;
        cap = n;
        n = octo_tokenize(m, text, (int)len, add_special, parse_special, ids, cap);
        if (n > cap) n = -OCTO_ERR_INVALID_ARG; /* the library counted differently twice: never read past cap */
    }
    if (n < 0) {
        free(ids);
        return fail("%s", octo_model_error(m));
    }
    *out = ids;
    *n_out = n;
    return 0;
}

int (*cli_resolve_model)(const char *model, const char **path, char *buf, size_t n);

octo_model *open_model(const model_request *r, octo_client **client) {
    const char *path = r->path;
    octo_client_options co = octo_client_options_defaults();
    co.cache_dir = r->cache_dir;
    co.device = r->device;
    co.n_threads = r->threads;
    co.log = note_log; /* the library's warnings: said once on stderr (notes.h) */
    *client = octo_client_new(&co);
    if (!*client) {
        fail("out of memory");
        return NULL;
    }
    octo_model_options mo = octo_model_options_defaults();
    mo.n_ctx = r->n_ctx;
    mo.moe = r->moe;
    mo.draft_model = r->draft;
    mo.auto_draft = r->auto_draft;
    mo.draft_threads = r->draft_threads;
    mo.vocab_only = r->vocab_only;
    const int tty = isatty(STDERR_FILENO) && !r->vocab_only; /* a load may take seconds (a self-draft, a big file) */
    if (tty) {
        fprintf(stderr, "loading %s ...", path);
        fflush(stderr);
    }
    octo_model *m = octo_load_model(*client, path, &mo);
    if (tty) fputs("\r\033[K", stderr);
    if (!m) fail("%s", octo_last_error(*client));
    return m;
}

int cli_apply_adapters(octo_model *m, const char *const *paths, const float *scales, int n) {
    octo_adapter *h[OCTO_MAX_ADAPTERS] = {0};
    int rc = 0, k = 0;
    if (n > OCTO_MAX_ADAPTERS) return fail("at most %d adapters", OCTO_MAX_ADAPTERS);
    for (; k < n && !rc; k++)
        if (!(h[k] = octo_adapter_load(m, paths[k]))) rc = fail("%s", octo_model_error(m));
    if (!rc && n && octo_set_adapters(m, h, scales, n)) rc = fail("%s", octo_model_error(m));
    for (int i = 0; i < k; i++) octo_adapter_free(h[i]);
    return rc;
}

#ifndef OCTO_DEFAULT_MODEL_FROM_BIN
#define OCTO_DEFAULT_MODEL_FROM_BIN NULL
#endif
#ifndef OCTO_DEFAULT_MODEL_INSTALLED
#define OCTO_DEFAULT_MODEL_INSTALLED NULL
#endif
#ifndef OCTO_DEFAULT_MODEL_SOURCE
#define OCTO_DEFAULT_MODEL_SOURCE NULL
#endif

/* The embedded model: the copy installed beside this binary (wherever the prefix was moved or
 * installed to), else at the configured prefix, else the source tree's this binary was built
 * from; NULL when none is there. */
static const char *embedded_model(void) {
    static char beside[4096 + 256];
    char bin[4096];
    const char *rel = OCTO_DEFAULT_MODEL_FROM_BIN;
    const bool found = rel && plat_exe_dir(bin, sizeof bin) == 0;
    if (found) snprintf(beside, sizeof beside, "%.4095s/%.200s", bin, rel);
    const char *const where[] = {found ? beside : NULL, OCTO_DEFAULT_MODEL_INSTALLED, OCTO_DEFAULT_MODEL_SOURCE};
    for (size_t i = 0; i < sizeof where / sizeof *where; i++)
        if (where[i] && access(where[i], R_OK) == 0) return where[i];
    return NULL;
}

int cli_default_model(const char **model, const char *cmd) {
    if (!(*model = embedded_model()))
        return usage_error("%s needs a model: octo %s MODEL%s (or -m MODEL; octo pull gets one)", cmd, cmd,
                           strcmp(cmd, "run") ? "" : " \"PROMPT\"");
    fprintf(stderr, "octo: no model given (-m): %s the embedded stories260K, a 260K-parameter TinyStories model (%s); "
                    "'octo pull' gets a real one\n", !strcmp(cmd, "run") ? "running" : "using", *model);
    return 0;
}
