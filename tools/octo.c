/*
 * octo — the command line.
 *
 *   octo inspect -m MODEL [--kv-tokens N]     what a model is and what it costs
 *   octo logits  -m MODEL --tokens "1 2 3" --out FILE.f32
 *   octo synth   -o FILE [shape and type options]
 *
 * Every failure is one line on stderr ("octo: ...") and a non-zero exit:
 * 1 for an error of the operation, 2 for a usage error.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "octo.h"
#include "model/synth.h" /* internal: synthetic model writer, used by `octo synth` */
#include "core/quant.h"  /* internal: type names for `octo synth --type` */

static int usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("octo: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (see 'octo help')\n", stderr);
    va_end(ap);
    return 2;
}

static int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("octo: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

static void help(FILE *f) {
    fputs("usage: octo <command> [options]\n"
          "\n"
          "  inspect -m MODEL [--kv-tokens N]\n"
          "      architecture, hyperparameters, tensors, parameter count, file bytes,\n"
          "      memory for weights and for a KV cache of N tokens (default: trained context)\n"
          "  logits -m MODEL --tokens \"1 2 3\" --out FILE.f32 [--ctx N]\n"
          "      logits of every position as little-endian float32, n_tokens x n_vocab;\n"
          "      row i = logits after consuming tokens 0..i\n"
          "  synth -o FILE [--arch llama|qwen2] [--type T] [--embd-type T] [--output-type T]\n"
          "        [--vocab N] [--embd N] [--layers N] [--heads N] [--kv-heads N] [--ff N]\n"
          "        [--head-dim N] [--ctx N] [--experts N --experts-used K] [--tied] [--seed S]\n"
          "        [--std X] [--rope-base X] [--rope-scale X] [--gguf-version 2|3]\n"
          "      write a synthetic model with seeded random weights; T is one of\n"
          "      f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k\n",
          f);
}

/* Strict integer / float parsing: the whole string must be a number in range. */
static int parse_long(const char *s, long min, long max, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) return 0;
    *out = v;
    return 1;
}

static int parse_float(const char *s, float *out) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end) return 0;
    *out = v;
    return 1;
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

/* ---------------------------------------------------------------- inspect */

static int cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    long kv_tokens = -1;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) path = argv[++i];
        else if (!strcmp(argv[i], "--kv-tokens") && i + 1 < argc) {
            if (!parse_long(argv[++i], 1, 1L << 24, &kv_tokens)) return usage_error("--kv-tokens takes a positive count");
        } else return usage_error("inspect: unknown option '%s'", argv[i]);
    }
    if (!path) return usage_error("inspect needs -m MODEL");
    octo_memory before = octo_memory_usage();
    octo_client *c = octo_client_new(NULL);
    octo_model_options mo = octo_model_options_defaults();
    mo.n_ctx = 1; /* inspect does not need a cache */
    octo_model *m = c ? octo_load_model(c, path, &mo) : NULL;
    if (!m) {
        int rc = fail("%s", c ? octo_last_error(c) : "out of memory");
        octo_client_free(c);
        return rc;
    }
    octo_memory after = octo_memory_usage();
    octo_model_info in = octo_model_info_get(m);
    if (kv_tokens < 0) kv_tokens = in.n_ctx_train;
    printf("model:          %s\n", path);
    printf("architecture:   %s%s\n", in.arch, in.n_expert ? " (mixture of experts)" : "");
    printf("vocabulary:     %d tokens\n", in.n_vocab);
    printf("context:        %d tokens (trained)\n", in.n_ctx_train);
    printf("layers:         %d\n", in.n_layer);
    printf("embedding:      %d\n", in.n_embd);
    printf("heads:          %d query, %d key/value, head size %d\n", in.n_head, in.n_head_kv, in.head_dim);
    printf("feed-forward:   %d\n", in.n_ff);
    if (in.n_expert) printf("experts:        %d, %d used per token\n", in.n_expert, in.n_expert_used);
    printf("rope:           base %g, scale %g\n", in.rope_freq_base, in.rope_freq_scale);
    printf("rms epsilon:    %g\n", in.rms_eps);
    printf("output:         %s\n", in.output_tied ? "tied to token embedding" : "separate matrix");
    printf("tensors:        %llu (%s)\n", (unsigned long long)in.n_tensors, in.tensor_types);
    printf("parameters:     %llu (%.2f M)\n", (unsigned long long)in.n_params, in.n_params / 1e6);
    printf("file:           %llu bytes (%.2f MiB)\n", (unsigned long long)in.file_bytes, mib(in.file_bytes));
    printf("weights:        %llu bytes (%.2f MiB) mapped, read-only\n", (unsigned long long)in.weight_bytes,
           mib(in.weight_bytes));
    printf("kv cache:       %llu bytes (%.2f MiB) for %ld tokens at f32, %.2f MiB at f16\n",
           (unsigned long long)(in.kv_bytes_per_token * (uint64_t)kv_tokens),
           mib(in.kv_bytes_per_token * (uint64_t)kv_tokens), kv_tokens,
           mib(in.kv_bytes_per_token * (uint64_t)kv_tokens / 2));
    printf("resident:       %.2f MiB after load (+%.2f MiB for this model; weights are paged in when used)\n",
           mib(after.rss_bytes), mib(after.rss_bytes > before.rss_bytes ? after.rss_bytes - before.rss_bytes : 0));
    octo_model_free(m);
    octo_client_free(c);
    return 0;
}

/* ---------------------------------------------------------------- logits */

static int parse_tokens(const char *s, int32_t **out, int *n_out) {
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

static int cmd_logits(int argc, char **argv) {
    const char *path = NULL, *tokens_arg = NULL, *out_path = NULL;
    long n_ctx = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) path = argv[++i];
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) tokens_arg = argv[++i];
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
        else if (!strcmp(argv[i], "--ctx") && i + 1 < argc) {
            if (!parse_long(argv[++i], 1, 1L << 24, &n_ctx)) return usage_error("--ctx takes a positive count");
        } else if (!strcmp(argv[i], "--prompt")) return fail("--prompt needs the tokenizer, which is not built yet; use --tokens");
        else return usage_error("logits: unknown option '%s'", argv[i]);
    }
    if (!path || !tokens_arg || !out_path) return usage_error("logits needs -m MODEL, --tokens \"IDS\" and --out FILE");
    int32_t *tokens;
    int n;
    if (!parse_tokens(tokens_arg, &tokens, &n)) return usage_error("--tokens takes space-separated non-negative ids");
    if (n == 0) {
        free(tokens);
        return usage_error("--tokens is empty");
    }
    octo_client *c = octo_client_new(NULL);
    octo_model_options mo = octo_model_options_defaults();
    mo.n_ctx = (int)n_ctx;
    octo_model *m = c ? octo_load_model(c, path, &mo) : NULL;
    int rc = 0;
    float *logits = NULL;
    if (!m) rc = fail("%s", c ? octo_last_error(c) : "out of memory");
    if (!rc) {
        octo_model_info in = octo_model_info_get(m);
        logits = malloc(sizeof(float) * (size_t)n * (size_t)in.n_vocab);
        if (!logits) rc = fail("out of memory for %d x %d logits", n, in.n_vocab);
        else if (octo_eval(m, tokens, n, logits, OCTO_LOGITS_ALL) != OCTO_OK) rc = fail("%s", octo_model_error(m));
        if (!rc) {
            FILE *f = fopen(out_path, "wb");
            size_t count = (size_t)n * (size_t)in.n_vocab;
            if (!f) rc = fail("%s: %s", out_path, strerror(errno));
            else {
                /* float32 little-endian: the host order on every target octo builds for */
                size_t w = fwrite(logits, sizeof(float), count, f);
                if (fclose(f) != 0 || w != count) rc = fail("%s: write failed", out_path);
            }
        }
    }
    free(logits);
    free(tokens);
    octo_model_free(m);
    octo_client_free(c);
    return rc;
}

/* ---------------------------------------------------------------- synth */

static int cmd_synth(int argc, char **argv) {
    synth_opts o = synth_defaults();
    const char *out = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        struct { const char *flag; int *dst; long min, max; } ints[] = {
            {"--vocab", &o.n_vocab, 259, 1 << 22}, {"--embd", &o.n_embd, 1, 1 << 16},
            {"--layers", &o.n_layer, 1, 1024}, {"--heads", &o.n_head, 1, 1024},
            {"--kv-heads", &o.n_head_kv, 1, 1024}, {"--ff", &o.n_ff, 1, 1 << 20},
            {"--head-dim", &o.head_dim, 2, 1 << 14}, {"--ctx", &o.n_ctx, 1, 1 << 24},
            {"--experts", &o.n_expert, 0, 1024}, {"--experts-used", &o.n_expert_used, 0, 1024},
        };
        int matched = 0;
        for (size_t k = 0; k < sizeof ints / sizeof *ints; k++)
            if (!strcmp(a, ints[k].flag)) {
                if (!v || !parse_long(v, ints[k].min, ints[k].max, &n))
                    return usage_error("%s takes a whole number from %ld to %ld", a, ints[k].min, ints[k].max);
                *ints[k].dst = (int)n;
                matched = 1;
                i++;
            }
        if (matched) continue;
        if (!strcmp(a, "-o") && v) { out = v; i++; }
        else if (!strcmp(a, "--arch") && v) { o.arch = v; i++; }
        else if ((!strcmp(a, "--type") || !strcmp(a, "--embd-type") || !strcmp(a, "--output-type")) && v) {
            int t = quant_type_from_name(v);
            if (t < 0 || !quant_type_supported((uint32_t)t) || t == QT_Q8_K) return usage_error("unknown tensor type '%s'", v);
            if (!strcmp(a, "--type")) o.type = (uint32_t)t;
            else if (!strcmp(a, "--embd-type")) o.embd_type = (uint32_t)t;
            else o.output_type = (uint32_t)t;
            i++;
        } else if (!strcmp(a, "--tied")) o.tied_output = true;
        else if (!strcmp(a, "--seed") && v) {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (errno || end == v || *end) return usage_error("--seed takes a whole number");
            o.seed = s;
            i++;
        } else if (!strcmp(a, "--std") && v) { if (!parse_float(v, &o.weight_std) || o.weight_std < 0) return usage_error("--std takes a number >= 0"); i++; }
        else if (!strcmp(a, "--rope-base") && v) { if (!parse_float(v, &o.rope_freq_base) || o.rope_freq_base <= 0) return usage_error("--rope-base takes a positive number"); i++; }
        else if (!strcmp(a, "--rope-scale") && v) { if (!parse_float(v, &o.rope_scale_linear) || o.rope_scale_linear < 0) return usage_error("--rope-scale takes a number >= 0"); i++; }
        else if (!strcmp(a, "--gguf-version") && v) {
            if (!parse_long(v, 2, 3, &n)) return usage_error("--gguf-version is 2 or 3");
            o.gguf_version = (uint32_t)n;
            i++;
        } else return usage_error("synth: unknown option '%s'", a);
    }
    if (!out) return usage_error("synth needs -o FILE");
    err_t err = {0};
    if (synth_write(&o, out, &err)) return fail("%s", err.msg);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        help(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "inspect")) return cmd_inspect(argc - 2, argv + 2);
    if (!strcmp(cmd, "logits")) return cmd_logits(argc - 2, argv + 2);
    if (!strcmp(cmd, "synth")) return cmd_synth(argc - 2, argv + 2);
    return usage_error("unknown command '%s'", cmd);
}
