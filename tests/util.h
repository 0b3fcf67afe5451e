/*
 * util.h — helpers shared by the tests: where the data folder and the
 * scratch folder are, reading whole files, and writing synthetic models.
 */
#ifndef OCTO_TESTS_UTIL_H
#define OCTO_TESTS_UTIL_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/synth.h"

/* ../shared (or $OCTO_TEST_DATA); NULL when it does not exist. */
static inline const char *tu_data_dir(void) {
    const char *d = getenv("OCTO_TEST_DATA");
    if (!d || !*d) d = "../shared";
    struct stat st;
    return stat(d, &st) == 0 && S_ISDIR(st.st_mode) ? d : NULL;
}

/* The model every clone carries (models/stories260K.gguf, the same file as ../shared's), under
 * $OCTO_SOURCE_DIR (set by ctest) or the working folder: its path in buf. */
static inline const char *tu_repo_model(char *buf, size_t n) {
    const char *src = getenv("OCTO_SOURCE_DIR");
    snprintf(buf, n, "%s/models/stories260K.gguf", src && *src ? src : ".");
    return buf;
}

/* OCTO_TEST_QUICK=1 (set by .ci/run for the sanitizer and qemu runs, where
 * code runs 10-30x slower): the slow tests cover fewer prompts and tokens.
 * The README's test command runs them whole, natively. */
static inline int tu_quick(void) {
    const char *q = getenv("OCTO_TEST_QUICK");
    return q && *q && strcmp(q, "0") != 0;
}

/* Running under an emulator (scripts/test-arm.sh sets OCTO_TEST_EMULATED): the statistical tests,
 * whose arithmetic is the same on every kernel path, are left to the native runs. */
static inline int tu_emulated(void) {
    const char *q = getenv("OCTO_TEST_EMULATED");
    return q && *q && strcmp(q, "0") != 0;
}

/* A unique path in the scratch folder ($OCTO_TMP or /tmp). */
static inline void tu_tmp_path(char *buf, size_t n, const char *name) {
    const char *d = getenv("OCTO_TMP");
    if (!d || !*d) d = "/tmp";
    snprintf(buf, n, "%s/octo-%ld-%s", d, (long)getpid(), name);
}

/* Whole file into a malloc'd buffer, with a '\0' after its size bytes (so
 * a text can be searched as a string); NULL on failure. */
static inline unsigned char *tu_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    if (p) p[n] = '\0';
    fclose(f);
    if (p) *size = (size_t)n;
    return p;
}

static inline int tu_write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    size_t w = fwrite(p, 1, n, f);
    return fclose(f) == 0 && w == n;
}

/* Deterministic random numbers for test data (splitmix64); the state is the caller's. */
typedef struct {
    uint64_t s;
} rng_t;

static inline uint64_t rng_next(rng_t *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline double rng_uniform(rng_t *r) { return (double)(rng_next(r) >> 11) * 0x1p-53; } /* [0, 1) */

static inline double rng_gauss(rng_t *r) {
    const double u1 = 1.0 - rng_uniform(r), u2 = rng_uniform(r); /* u1 in (0, 1] */
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* The tokenizer test vectors of ../shared/golden/tokenizer: VOCAB.inp holds the
 * texts, each followed by "\n__ggml_vocab_test__\n"; VOCAB.out one line of ids a
 * text. tu_vocab_next() yields them in order. */
typedef struct {
    char *inp, *out;          /* the two files (owned) */
    size_t n_inp, pos;
    char *line;               /* next .out line */
} tu_vocab_vectors;

static inline int tu_vocab_open(tu_vocab_vectors *v, const char *gguf_path) {
    char p[1024];
    size_t n_out = 0;
    memset(v, 0, sizeof *v);
    size_t n = strlen(gguf_path);
    if (n + 5 > sizeof p) return 0;
    memcpy(p, gguf_path, n);
    memcpy(p + n, ".inp", 5);
    v->inp = (char *)tu_read_file(p, &v->n_inp);
    memcpy(p + n, ".out", 5);
    v->out = (char *)tu_read_file(p, &n_out);
    if (!v->inp || !v->out) return 0;
    v->out = realloc(v->out, n_out + 1);
    v->out[n_out] = '\0';
    v->line = v->out;
    return 1;
}

/* The next text (*text, *len) and its expected ids line (*ids, NUL-terminated); 0 at the end. */
static inline int tu_vocab_next(tu_vocab_vectors *v, const char **text, size_t *len, const char **ids) {
    static const char sep[] = "\n__ggml_vocab_test__\n";
    const size_t sep_len = sizeof sep - 1;
    if (v->pos >= v->n_inp) return 0;
    size_t end = v->pos;
    while (end + sep_len <= v->n_inp && memcmp(v->inp + end, sep, sep_len)) end++;
    if (end + sep_len > v->n_inp) end = v->n_inp; /* no separator: the rest */
    char *nl = strchr(v->line, '\n');
    if (nl) *nl = '\0';
    *text = v->inp + v->pos;
    *len = end - v->pos;
    *ids = v->line;
    v->line = nl ? nl + 1 : v->line + strlen(v->line);
    v->pos = end + sep_len;
    return 1;
}

static inline void tu_vocab_close(tu_vocab_vectors *v) {
    free(v->inp);
    free(v->out);
}

/* ---- statistics for the sampling tests ---- */

/* ln Gamma via Lanczos (g = 7, n = 9), accurate to ~1e-15 for x > 0. */
static inline double tu_ln_gamma(double x) {
    static const double c[9] = {0.99999999999980993, 676.5203681218851, -1259.1392167224028,
                                771.32342877765313, -176.61502916214059, 12.507343278686905,
                                -0.13857109526572012, 9.9843695780195716e-6,
                                1.5056327351493116e-7};
    x -= 1.0;
    double a = c[0];
    const double t = x + 7.5;
    for (int i = 1; i < 9; i++) a += c[i] / (x + i);
    return 0.5 * log(2 * 3.141592653589793) + (x + 0.5) * log(t) - t + log(a);
}

/* Q(a, x) = Gamma(a, x) / Gamma(a): the series for x < a + 1, the continued
 * fraction (modified Lentz) otherwise (Numerical Recipes 6.2). */
static inline double tu_gamma_q(double a, double x) {
    if (x <= 0.0) return 1.0;
    const double lead = a * log(x) - x - tu_ln_gamma(a);
    if (x < a + 1.0) {
        double ap = a, del = 1.0 / a, sum = del;
        for (int n = 0; n < 1000 && fabs(del) > fabs(sum) * 1e-16; n++) {
            ap += 1.0;
            del *= x / ap;
            sum += del;
        }
        return 1.0 - sum * exp(lead);
    }
    double b = x + 1.0 - a, c = 1.0 / DBL_MIN, d = 1.0 / b, h = d;
    for (int i = 1; i < 1000; i++) {
        const double an = -i * (i - a);
        b += 2.0;
        d = an * d + b;
        if (fabs(d) < DBL_MIN) d = DBL_MIN;
        c = b + an / c;
        if (fabs(c) < DBL_MIN) c = DBL_MIN;
        d = 1.0 / d;
        const double del = d * c;
        h *= del;
        if (fabs(del - 1.0) < 1e-16) break;
    }
    return exp(lead) * h;
}

/* Upper tail of the chi-square distribution with df degrees of freedom. */
static inline double tu_chi2_sf(double x, int df) { return tu_gamma_q(0.5 * df, 0.5 * x); }

#endif
