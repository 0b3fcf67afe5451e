/*
 * options — the table of every command's options and the parser that reads
 * a command line with it (options.h says how a row reads).
 */
#include "options.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "help.h"
#include "notes.h"
#include "core/quant.h" /* internal: tensor type names for synth --type */

static const char *const command_names[CMD_COUNT] = {
    "run", "tokenize", "detokenize", "inspect", "bench", "eval", "logits",
    "synth", "upcycle", "moe-prep", "quantize", "merge", "finetune", "fedavg", "plan", "deploy", "serve", "pull", "list", "rm",
};

const char *cli_command_name(cli_command cmd) { return (unsigned)cmd < CMD_COUNT ? command_names[cmd] : NULL; }

cli_args cli_defaults(void) {
    return (cli_args){.gp = octo_generate_params_defaults(), .mo = octo_model_options_defaults(), .spec = -1,
                      .lora_rank = 16, .lora_alpha = -1.0f, .ft = octo_finetune_params_defaults()};
}

/* ---------------------------------------------------------------- setters: the values a kind cannot read */

/* o->bad with {arg}, {value}, {min} and {max} filled in, as a usage error. */
static int bad_value(const cli_option *o, const char *arg, const char *value) {
    char *msg = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&msg, &len);
    if (!f) return usage_error("%s", o->bad);
    for (const char *p = o->bad; *p; p++) {
        if (!strncmp(p, "{arg}", 5)) fputs(arg, f), p += 4;
        else if (!strncmp(p, "{value}", 7)) fputs(value, f), p += 6;
        else if (!strncmp(p, "{min}", 5)) fprintf(f, "%ld", o->min), p += 4;
        else if (!strncmp(p, "{max}", 5)) fprintf(f, "%ld", o->max), p += 4;
        else fputc(*p, f);
    }
    if (o->kind == OPT_NUM && !strstr(o->bad, "{max}")) fprintf(f, " (%ld to %ld)", o->min, o->max); /* the limits, always */
    const int rc = fclose(f) == 0 && msg ? usage_error("%s", msg) : usage_error("%s", o->bad);
    free(msg);
    return rc;
}

static void *field(cli_args *a, const cli_option *o) { return (char *)a + o->at; }

/* --seed: what strtoull reads whole ("-1" too: 2^64 - 1). */
static int set_seed(const cli_option *o, const char *arg, const char *v, cli_args *a) {
    char *end;
    errno = 0;
    const uint64_t s = strtoull(v, &end, 10);
    if (errno || end == v || *end) return bad_value(o, arg, v);
    memcpy(field(a, o), &s, sizeof s);
    a->seeded = 1;
    return 0;
}

/* run -n: a count, or -1 (llama.cpp's): until the context is full or the model ends the text. */
static int set_n_predict(const cli_option *o, const char *arg, const char *v, cli_args *a) {
    long n;
    if (!parse_long(v, -1, 1L << 24, &n)) return bad_value(o, arg, v);
    a->gp.max_tokens = (int)n; /* 0: read the prompt, generate nothing (as llama.cpp) */
    return 0;
}

/* --temp: a number; below 0 is greedy, as llama.cpp reads it (0 here). */
static int set_temp(const cli_option *o, const char *arg, const char *v, cli_args *a) {
    char *end;
    const float t = strtof(v, &end);
    if (end == v || *end || !isfinite(t)) return bad_value(o, arg, v);
    a->gp.temperature = t < 0.0f ? 0.0f : t;
    return 0;
}

/* run --repeat-last-n: 0..OCTO_MAX_REPEAT_LAST_N, or -1 (llama.cpp's): the whole context. */
static int set_repeat_last_n(const cli_option *o, const char *arg, const char *v, cli_args *a) {
    long n;
    if (!parse_long(v, -1, OCTO_MAX_REPEAT_LAST_N, &n)) return bad_value(o, arg, v);
    a->gp.repeat_last_n = (int)n;
    return 0;
}

/* upcycle --seed: the same without a minus sign. */
static int set_seed_unsigned(const cli_option *o, const char *arg, const char *v, cli_args *a) {
    return *v == '-' ? bad_value(o, arg, v) : set_seed(o, arg, v, a);
}

static int set_spec(const cli_option *o, const char *arg, const char *v, cli_args *a) {
    (void)o, (void)arg;
    return parse_spec_mode(v, &a->spec) ? 0 : usage_error("--spec is one of %s", spec_mode_names());
}

static int set_spec_tree(const cli_option *o, const char *arg, const char *v, cli_args *a) {
    return parse_spec_tree(v, &a->gp.spec_tree) ? 0 : bad_value(o, arg, v);
}

static int set_lookahead(const cli_option *o, const char *arg, const char *v, cli_args *a) {
    octo_generate_params *gp = &a->gp;
    return parse_lookahead(v, &gp->lookahead_w, &gp->lookahead_n, &gp->lookahead_g) ? 0 : bad_value(o, arg, v);
}

/* A size in bytes, K/M/G the binary multiples (buf's suffix is cut off), above 0: false when it is not one. */
static bool parse_bytes(char *buf, uint64_t *out) {
    const size_t n = strlen(buf);
    uint64_t mul = 1;
    switch (n ? buf[n - 1] : 0) {
    case 'K': case 'k': mul = 1ull << 10; buf[n - 1] = '\0'; break;
    case 'M': case 'm': mul = 1ull << 20; buf[n - 1] = '\0'; break;
    case 'G': case 'g': mul = 1ull << 30; buf[n - 1] = '\0'; break;
    default: break;
    }
    float x;
    if (!parse_float(buf, &x) || x <= 0.0f || (double)x * (double)mul >= 1.8e19) return false;
    *out = (uint64_t)((double)x * (double)mul);
    return true;
}

/* --moe-cache BYTES|PCT% (K/M/G: binary multiples). */
static int set_moe_cache(const cli_option *o, const char *arg, const char *v, cli_args *a) {
    (void)o, (void)arg;
    octo_moe_options *m = &a->mo.moe;
    const size_t n = strlen(v);
    char buf[64];
    if (!n || n >= sizeof buf) return usage_error("--moe-cache takes bytes (K/M/G suffixes) or a percentage");
    memcpy(buf, v, n + 1);
    float x;
    if (buf[n - 1] == '%') {
        buf[n - 1] = '\0';
        if (!parse_float(buf, &x) || x <= 0.0f || x > 100.0f)
            return usage_error("--moe-cache %s: a percentage of the experts' bytes, above 0 and at most 100", v);
        m->cache_share = x / 100.0;
        m->cache_bytes = 0;
        return 0;
    }
    if (!parse_bytes(buf, &m->cache_bytes))
        return usage_error("--moe-cache %s: give bytes (K/M/G suffixes) or a percentage, e.g. 512M or 25%%", v);
    m->cache_share = 0.0;
    return 0;
}

/* --memory-budget BYTES (K/M/G). */
static int set_bytes(const cli_option *o, const char *arg, const char *v, cli_args *a) {
    char buf[64];
    if (strlen(v) >= sizeof buf) return bad_value(o, arg, v);
    strcpy(buf, v);
    return parse_bytes(buf, (uint64_t *)field(a, o)) ? 0 : bad_value(o, arg, v);
}

static int set_moe_policy(const cli_option *o, const char *arg, const char *v, cli_args *a) {
    const int p = octo_moe_policy_from_name(v);
    if (p < 0) return bad_value(o, arg, v);
    a->mo.moe.policy = (octo_moe_policy)p;
    return 0;
}

static int set_moe_trace(const cli_option *o, const char *arg, const char *v, cli_args *a) {
    if (!*v) return bad_value(o, arg, v);
    a->mo.moe.trace = v;
    return 0;
}

static int set_moe_margin(const cli_option *o, const char *arg, const char *v, cli_args *a) {
    float x;
    if (!parse_float(v, &x) || x > 100.0f) return bad_value(o, arg, v);
    a->mo.moe.predict_margin = x == 0.0f ? -1.0 : x; /* 0 here means no margin, not the default */
    return 0;
}

/* bench --batch 1,3,5: the batch sizes to time. */
static int set_batches(const cli_option *o, const char *arg, const char *v, cli_args *a) {
    (void)o, (void)arg;
    int32_t *b;
    int nb;
    const int read = parse_tokens(v, &b, &nb);
    if (!read || nb == 0 || nb > BENCH_MAX_BATCHES) {
        if (read) free(b);
        return usage_error("--batch takes up to %d sizes", BENCH_MAX_BATCHES);
    }
    for (int k = 0; k < nb; k++) {
        if (b[k] < 1 || b[k] > 4096) {
            free(b);
            return usage_error("--batch sizes are 1..4096");
        }
        a->batches[k] = b[k];
    }
    a->n_batches = nb;
    free(b);
    return 0;
}

/* eval --kv-policy NAME, any of the library's (octo_kv_policy_name). */
static int set_kv_policy(const cli_option *o, const char *arg, const char *v, cli_args *a) {
    (void)o, (void)arg;
    const int p = octo_kv_policy_from_name(v);
    if (p < 0) {
        char names[256];
        return usage_error("eval: --kv-policy is one of %s, not '%s'",
                           kv_policy_names(OCTO_KV_POLICY_DEFAULT, " ", names, sizeof names), v);
    }
    a->mo.kv.policy = (octo_kv_policy)p;
    return 0;
}

/* "PCT%" with 0 < PCT <= 100 into *pct: 1; not a percentage: 0; a bad one: -1. */
static int parse_percent(const char *v, double *pct) {
    const size_t len = strlen(v);
    char buf[32];
    float f;
    if (!len || len >= sizeof buf || v[len - 1] != '%') return 0;
    memcpy(buf, v, len - 1);
    buf[len - 1] = 0;
    if (!parse_float(buf, &f) || f <= 0 || f > 100) return -1;
    *pct = f;
    return 1;
}

/* eval --kv-budget BYTES or PCT%. */
static int set_kv_budget(const cli_option *o, const char *arg, const char *v, cli_args *a) {
    (void)o, (void)arg;
    long x;
    const int pct = parse_percent(v, &a->budget_pct);
    if (pct < 0) return usage_error("eval: bad --kv-budget '%s'", v);
    if (!pct && parse_long(v, 1, 0x7fffffffffffffffL, &x)) a->mo.kv.budget_bytes = (uint64_t)x;
    else if (!pct) return usage_error("eval: bad --kv-budget '%s' (bytes, or a percentage of the full F16 cache)", v);
    return 0;
}

/* eval --kv-keep N or PCT%. */
static int set_kv_keep(const cli_option *o, const char *arg, const char *v, cli_args *a) {
    (void)o, (void)arg;
    long x;
    const int pct = parse_percent(v, &a->keep_pct);
    if (pct < 0) return usage_error("eval: bad --kv-keep '%s'", v);
    if (!pct && parse_long(v, 1, 1 << 20, &x)) a->mo.kv.budget_tokens = (int)x;
    else if (!pct) return usage_error("eval: bad --kv-keep '%s' (entries per layer, or a percentage of the prompt's)", v);
    return 0;
}

/* eval --kv-cold: the cold tier's type (q8_0 and f16 leave the symmetry as it was). */
static int set_kv_cold(const cli_option *o, const char *arg, const char *v, cli_args *a) {
    octo_kv_options *k = &a->mo.kv;
    if (!strcmp(v, "q4_1")) k->cold_bits = 4, k->cold_symmetric = 0;
    else if (!strcmp(v, "q4_0")) k->cold_bits = 4, k->cold_symmetric = 1;
    else if (!strcmp(v, "q8_0")) k->cold_bits = 8;
    else if (!strcmp(v, "f16")) k->cold_bits = 16;
    else return bad_value(o, arg, v);
    return 0;
}

/* synth --type, --embd-type, --output-type: a tensor type synth can write. */
static int set_tensor_type(const cli_option *o, const char *arg, const char *v, cli_args *a) {
    const int t = quant_type_from_name(v);
    if (t < 0 || !quant_type_supported((uint32_t)t) || t == QT_Q8_K) return bad_value(o, arg, v);
    const uint32_t type = (uint32_t)t;
    memcpy(field(a, o), &type, sizeof type);
    return 0;
}

static int set_split(const cli_option *o, const char *arg, const char *v, cli_args *a) {
    const int k = upcycle_split_from_name(v);
    return k < 0 ? bad_value(o, arg, v) : (a->upcycle.split = (upcycle_split)k, 0);
}

static int set_router(const cli_option *o, const char *arg, const char *v, cli_args *a) {
    const int k = upcycle_router_from_name(v);
    return k < 0 ? bad_value(o, arg, v) : (a->upcycle.router = (upcycle_router)k, 0);
}

static int set_combine(const cli_option *o, const char *arg, const char *v, cli_args *a) {
    const int k = upcycle_combine_from_name(v);
    return k < 0 ? bad_value(o, arg, v) : (a->upcycle.combine = (upcycle_combine)k, 0);
}

/* deploy --device a,b,c: appended to the names of an earlier --device. v is
 * argv's own string: its commas become NULs. */
static int set_devices(const cli_option *o, const char *arg, const char *v, cli_args *a) {
    (void)o, (void)arg;
    for (char *t = strtok((char *)v, ","); t; t = strtok(NULL, ",")) {
        if (a->n_devices == DEPLOY_MAX_DEVICES) return usage_error("--device: at most %d devices", DEPLOY_MAX_DEVICES);
        a->devices[a->n_devices++] = t;
    }
    return a->n_devices ? 0 : usage_error("--device needs a name");
}

/* --lora FILE (scale 1) and --lora-scaled FILE SCALE: one more adapter. */
static int add_lora(const char *arg, const char *path, const char *scale, cli_args *a) {
    float x = 1.0f;
    if (a->lora.n == OCTO_MAX_ADAPTERS) return usage_error("%s: at most %d adapters", arg, OCTO_MAX_ADAPTERS);
    if (scale && !parse_float(scale, &x)) return usage_error("%s FILE SCALE: the scale must be a number, not '%s'", arg, scale);
    a->lora.path[a->lora.n] = path;
    a->lora.scale[a->lora.n++] = x;
    return 0;
}

static int set_lora(const cli_option *o, const char *arg, const char *v, cli_args *a) {
    (void)o;
    return add_lora(arg, v, NULL, a);
}

/* ---------------------------------------------------------------- the table */

#define RUN (1u << CMD_RUN)
#define TOKENIZE (1u << CMD_TOKENIZE)
#define DETOKENIZE (1u << CMD_DETOKENIZE)
#define INSPECT (1u << CMD_INSPECT)
#define BENCH (1u << CMD_BENCH)
#define EVAL (1u << CMD_EVAL)
#define LOGITS (1u << CMD_LOGITS)
#define SYNTH (1u << CMD_SYNTH)
#define UPCYCLE (1u << CMD_UPCYCLE)
#define MOE_PREP (1u << CMD_MOE_PREP)
#define QUANTIZE (1u << CMD_QUANTIZE)
#define MERGE (1u << CMD_MERGE)
#define FINETUNE (1u << CMD_FINETUNE)
#define FEDAVG (1u << CMD_FEDAVG)
#define PLAN (1u << CMD_PLAN)
#define DEPLOY (1u << CMD_DEPLOY)
#define SERVE (1u << CMD_SERVE)
#define PULL (1u << CMD_PULL)
#define LIST (1u << CMD_LIST)
#define RM (1u << CMD_RM)
#define ALL ((1u << CMD_COUNT) - 1)
#define RUNS_MODEL (RUN | BENCH | EVAL | INSPECT | LOGITS | SERVE) /* the expert cache's options */

#define FIELD(f) .at = offsetof(cli_args, f), .size = sizeof(((cli_args *)0)->f)
#define FLAG(f) .kind = OPT_FLAG, FIELD(f), .min = 1
#define STR(f) .kind = OPT_STR, FIELD(f)
#define NUM(f, lo_, hi_) .kind = OPT_NUM, FIELD(f), .min = (lo_), .max = (hi_)
#define FLT(f, lo_, hi_) .kind = OPT_FLOAT, FIELD(f), .lo = (lo_), .hi = (hi_)
#define CHOICE(f, ...) .kind = OPT_CHOICE, FIELD(f), .choices = (const cli_choice[]){__VA_ARGS__, {NULL, 0}}
#define CALL(fn, f) .kind = OPT_CALL, FIELD(f), .set = fn
#define ABOVE_ZERO 0x1p-149f /* the least float above 0: the bound of "> 0" */

#define SYNTH_COUNT "{arg} takes a whole number from {min} to {max}"
#define SERVE_COUNT "{arg} takes a number from {min} to {max}"
#define UPCYCLE_COUNT "{arg} takes a whole number from {min} to {max}"
#define FT_COUNT "{arg} takes a whole number from {min} to {max}"

const cli_option cli_options[] = {
    /* what to read and where to write */
    {"-m", "--model -hf --hf-repo", ALL & ~(SYNTH | PULL | LIST | RM), STR(model)},
    {"-p", "--prompt", RUN, STR(prompt)},
    {"-f", "--file", RUN | TOKENIZE | EVAL | UPCYCLE | QUANTIZE | MOE_PREP | FINETUNE, STR(file)},
    {"-o", NULL, SYNTH | UPCYCLE | QUANTIZE | DEPLOY | MERGE | FINETUNE | FEDAVG, STR(out)},
    {"--out", NULL, LOGITS, STR(out)},
    {"--prompt", NULL, BENCH | LOGITS, STR(prompt)},
    {"--prompt-file", NULL, BENCH, STR(prompt_file)},
    {"--grammar", "--grammar-file", RUN | BENCH, STR(grammar_file)},
    {"--json-schema", "-j -jf --json-schema-file", RUN | BENCH, STR(schema_file)},
    {"--text", NULL, TOKENIZE, STR(text)},
    {"--ids", NULL, DETOKENIZE, STR(ids)},
    {"--tokens", NULL, LOGITS, STR(tokens)},
    {"--ref", NULL, EVAL, STR(ref)},
    {"--draft", "-md --model-draft", RUN | BENCH | EVAL | PLAN | DEPLOY, STR(draft)},
    {"--device", NULL, RUN | EVAL | INSPECT | PLAN, STR(device)},
    {"--device", NULL, DEPLOY, CALL(set_devices, devices)},
    {"--cache-dir", NULL, RUN | EVAL | PLAN, STR(cache_dir)},
    {"--lora", NULL, RUN | BENCH | EVAL | LOGITS | SERVE | MERGE, CALL(set_lora, lora)},
    {"--lora-scaled", NULL, RUN | BENCH | EVAL | LOGITS | SERVE | MERGE, .kind = OPT_PAIR, FIELD(lora),
     .set_pair = add_lora},
    {"--lora-for", NULL, SYNTH, STR(lora_for)},
    {"--rank", NULL, SYNTH, NUM(lora_rank, 1, 65536), .bad = SYNTH_COUNT},
    {"--alpha", NULL, SYNTH, FLT(lora_alpha, 0.0f, INFINITY), .bad = "--alpha takes a number >= 0"},
    {"--type", NULL, QUANTIZE | DEPLOY | FINETUNE, STR(type)},
    {"--types-from", NULL, QUANTIZE, STR(types_from)},
    {"--json", NULL, RUN | BENCH | EVAL | INSPECT | PLAN, FLAG(json)},
    {"--quiet", "-q", QUANTIZE | DEPLOY | FINETUNE, FLAG(quiet)},

    /* threads and context */
    {"-t", "--threads", RUN, NUM(threads, 1, OCTO_MAX_THREADS), .bad = "-t takes 1..{max}"},
    {"-t", "--threads", BENCH, NUM(threads, 1, 1024), .bad = "{arg} takes a thread count"},
    {"-t", "--threads", QUANTIZE | DEPLOY, NUM(threads, 1, 1024), .bad = "{arg} takes a whole number from {min} to {max}"},
    {"--threads", NULL, UPCYCLE, NUM(upcycle.n_threads, 0, 1 << 24), .bad = UPCYCLE_COUNT},
    {"-td", "--threads-draft", RUN, NUM(draft_threads, 1, OCTO_MAX_THREADS), .bad = "-td takes 1..{max}"},
    {"-td", "--threads-draft", BENCH, NUM(draft_threads, 1, 1024), .bad = "-td takes a thread count"},
    {"--ctx", "-c --ctx-size", RUN | LOGITS | PLAN, NUM(n_ctx, 1, 1L << 24), .bad = "{arg} takes a context size in tokens"},
    {"--ctx", "-c --ctx-size", EVAL, NUM(n_ctx, 2, 1 << 20), .bad = "eval: bad {arg} '{value}'"},
    {"--ctx", "-c --ctx-size", MOE_PREP, NUM(n_ctx, 2, 1 << 20), .bad = "moe-prep: {arg} takes 2 to {max} tokens"},
    {"--ctx", NULL, SYNTH, NUM(synth.n_ctx, 1, 1 << 24), .bad = SYNTH_COUNT},
    {"--ctx", "-c --ctx-size", SERVE, NUM(n_ctx, 0, 1L << 30), .bad = SERVE_COUNT},

    /* run: generation and sampling */
    {"-n", "--n-predict", RUN, CALL(set_n_predict, gp.max_tokens),
     .bad = "{arg} takes a count of tokens from 0 to 16777216, or -1 (until the context is full or the text ends)"},
    {"--temp", NULL, RUN | BENCH, CALL(set_temp, gp.temperature), .bad = "--temp takes a number (0 or below: greedy)"},
    {"--top-k", NULL, RUN, NUM(gp.top_k, 0, 1L << 24), .bad = "--top-k takes a count >= 0"},
    {"--top-p", NULL, RUN, FLT(gp.top_p, -INFINITY, INFINITY), .bad = "--top-p takes a number"},
    {"--min-p", NULL, RUN, FLT(gp.min_p, -INFINITY, INFINITY), .bad = "--min-p takes a number"},
    {"--repeat-penalty", NULL, RUN, FLT(gp.repeat_penalty, -INFINITY, INFINITY), .bad = "--repeat-penalty takes a number"},
    {"--repeat-last-n", NULL, RUN, CALL(set_repeat_last_n, gp.repeat_last_n),
     .bad = "{arg} takes a count of tokens from 0 to 1048576, or -1 (the whole context)"},
    {"--presence-penalty", NULL, RUN, FLT(gp.presence_penalty, -INFINITY, INFINITY), .bad = "--presence-penalty takes a number"},
    {"--frequency-penalty", NULL, RUN, FLT(gp.frequency_penalty, -INFINITY, INFINITY), .bad = "--frequency-penalty takes a number"},
    {"--seed", "-s", RUN, CALL(set_seed, gp.seed), .bad = "{arg} takes a whole number"},
    {"--seed", "-s", BENCH, NUM(gp.seed, 0, 1L << 62), .bad = "{arg} takes a count"},
    {"--chat", "-cnv --conversation", RUN, FLAG(chat)},
    {"--ids", NULL, RUN, FLAG(print_ids)},
    {"--stats", NULL, RUN, FLAG(stats)},

    /* speculative decoding */
    {"--spec", NULL, RUN | BENCH, CALL(set_spec, spec)},
    {"--spec-k", "--draft-max", RUN | BENCH, NUM(gp.spec_k, 1, 10), .bad = "{arg} takes 1..10"},
    {"--spec-tree", NULL, RUN | BENCH, CALL(set_spec_tree, gp.spec_tree), .bad = "--spec-tree takes auto, off or 1..31 nodes"},
    {"--spec-ahead", NULL, RUN | BENCH, CHOICE(gp.spec_ahead, {"on", 0}, {"off", -1}), .bad = "--spec-ahead takes on or off"},
    {"--lookahead", NULL, RUN | BENCH, CALL(set_lookahead, gp.lookahead_w), .bad = "--lookahead takes W,N,G (e.g. 5,3,4)"},
    {"--prompt-compress", NULL, RUN, FLT(gp.prompt_compress, ABOVE_ZERO, 1.0f),
     .bad = "--prompt-compress takes the share of the prompt to keep, in (0, 1], not '{value}'"},

    /* the expert cache (Mixture-of-Experts models) */
    {"--moe-cache", NULL, RUNS_MODEL, CALL(set_moe_cache, mo.moe.cache_bytes)},
    {"--moe-policy", NULL, RUNS_MODEL, CALL(set_moe_policy, mo.moe.policy), .bad = "--moe-policy is one of lhu lru lfu, not '{value}'"},
    {"--moe-prefetch", NULL, RUNS_MODEL,
     CHOICE(mo.moe.prefetch, {"auto", OCTO_MOE_PREFETCH_AUTO}, {"on", OCTO_MOE_PREFETCH_ON}, {"off", OCTO_MOE_PREFETCH_OFF}),
     .bad = "--moe-prefetch is auto, on or off, not '{value}'"},
    {"--moe-trace", NULL, RUNS_MODEL, CALL(set_moe_trace, mo.moe.trace), .bad = "--moe-trace needs a file name"},
    {"--moe-predict-margin", NULL, RUNS_MODEL, CALL(set_moe_margin, mo.moe.predict_margin),
     .bad = "--moe-predict-margin takes standard deviations (at most 100; negative: the top k only)"},
    {"--moe-int2", NULL, RUNS_MODEL,
     CHOICE(mo.moe.int2, {"auto", OCTO_MOE_INT2_AUTO}, {"on", OCTO_MOE_INT2_ON}, {"off", OCTO_MOE_INT2_OFF},
            {"all", OCTO_MOE_INT2_ALL}),
     .bad = "--moe-int2 is auto, on, off or all, not '{value}'"},

    /* llama.cpp's options that octo has no use for: said, never a misleading "did you mean" */
    {"-ngl", "--n-gpu-layers --gpu-layers -ngld --n-gpu-layers-draft", RUNS_MODEL, .kind = OPT_IGNORE, .min = 1,
     .bad = "octo runs on the CPU: {arg} is ignored"},
    {"--mlock", NULL, RUNS_MODEL, .kind = OPT_IGNORE, .min = 0,
     .bad = "{arg} is ignored: octo maps the file read-only and sizes what it keeps resident to the device's memory"},
    {"--no-mmap", NULL, RUNS_MODEL, .kind = OPT_IGNORE, .min = 0, .bad = "{arg} is ignored: octo always maps the file read-only"},
    {"-b", "--batch-size -ub --ubatch-size", RUN | SERVE, .kind = OPT_IGNORE, .min = 1,
     .bad = "{arg} is ignored: octo sizes its prompt batches itself"},
    {"-ctk", "--cache-type-k -ctv --cache-type-v", RUN | SERVE, .kind = OPT_IGNORE, .min = 1,
     .bad = "{arg} is ignored: octo chooses the KV cache's types and tiers by itself (docs/kv-cache.md)"},
    {"-no-cnv", "--no-conversation", RUN, .kind = OPT_IGNORE, .min = 0, .bad = "{arg} is ignored: octo run converses only with --chat"},
    {"-fa", "--flash-attn", RUN | BENCH | SERVE, .kind = OPT_IGNORE, .min = 2,
     .bad = "{arg} is ignored: octo's attention always runs as one fused pass on the CPU"},
    {"-i", "--interactive -sys --system-prompt", RUN, .kind = OPT_REFUSE,
     .bad = "{arg}: a conversation is octo run --chat, with -p as its system prompt"},

    /* bench */
    {"-p", "--n-prompt", BENCH, NUM(prompt_tokens, 0, 1 << 20), .bad = "{arg} takes a count of tokens"},
    {"-n", "--n-gen", BENCH, NUM(gen_tokens, 0, 1 << 20), .bad = "{arg} takes a count of tokens"},
    {"-r", "--repetitions", BENCH, NUM(reps, 1, BENCH_MAX_REPS), .bad = "{arg} takes 1..{max}"},
    {"--batch", NULL, BENCH, CALL(set_batches, batches)},
    {"--kv-plain", NULL, BENCH | EVAL, FLAG(kv_plain)},
    {"--roofline", NULL, BENCH, FLAG(roofline_only)},
    {"--mask-only", NULL, BENCH, FLAG(mask_only)},
    {"--no-roofline", NULL, BENCH, FLAG(no_roofline)},
    {"--versus-lines", NULL, BENCH, NUM(versus, 0, 10), .bad = "--versus-lines takes 0 (adaptive) or 1..10"},
    {"--versus-serial", NULL, BENCH, .kind = OPT_FLAG, FIELD(versus), .min = BENCH_VERSUS_SERIAL},

    /* eval: the text, the prompt, the KV cache under test */
    {"--batch", NULL, EVAL, NUM(batch, 1, 4096), .bad = "eval: bad --batch '{value}'"},
    {"--prompt", NULL, EVAL, NUM(prompt_tokens, 1, 1 << 20), .bad = "eval: bad --prompt '{value}'"},
    {"--prompt-compress", NULL, EVAL, FLT(gp.prompt_compress, ABOVE_ZERO, 1.0f),
     .bad = "eval: --prompt-compress takes the share of the prompt to keep, in (0, 1], not '{value}'"},
    {"--prompt-lookahead", NULL, EVAL, NUM(gp.prompt_lookahead, -1, 256), .bad = "eval: --prompt-lookahead takes -1..256, not '{value}'"},
    {"--prompt-random", NULL, EVAL, NUM(prompt_random, 1, LONG_MAX), .bad = "eval: bad --prompt-random '{value}' (a seed > 0)"},
    {"--kv-policy", NULL, EVAL, CALL(set_kv_policy, mo.kv.policy)},
    {"--kv-budget", NULL, EVAL, CALL(set_kv_budget, mo.kv.budget_bytes)},
    {"--kv-keep", NULL, EVAL, CALL(set_kv_keep, mo.kv.budget_tokens)},
    {"--kv-hot", NULL, EVAL, NUM(mo.kv.hot_tokens, 0, 1 << 20), .bad = "eval: bad {arg} '{value}'"},
    {"--kv-warm", NULL, EVAL, NUM(mo.kv.warm_tokens, 0, 1 << 20), .bad = "eval: bad {arg} '{value}'"},
    {"--kv-anchors", NULL, EVAL, NUM(mo.kv.anchor_tokens, 0, 1 << 20), .bad = "eval: bad {arg} '{value}'"},
    {"--kv-recent", NULL, EVAL, NUM(mo.kv.recent_tokens, 0, 1 << 20), .bad = "eval: bad {arg} '{value}'"},
    {"--kv-cold", NULL, EVAL, CALL(set_kv_cold, mo.kv.cold_bits), .bad = "eval: --kv-cold is one of q4_1 q4_0 q8_0 f16, not '{value}'"},
    {"--kv-keys", NULL, EVAL, CHOICE(mo.kv.per_token_keys, {"channel", 0}, {"token", 1}),
     .bad = "eval: --kv-keys is channel or token, not '{value}'"},
    {"--kv-spill", NULL, EVAL, CHOICE(mo.kv.spill, {"auto", 0}, {"on", 1}, {"off", -1}),
     .bad = "eval: --kv-spill is auto, on or off, not '{value}'"},
    {"--kv-spill-max", NULL, EVAL, NUM(mo.kv.spill_max_bytes, 1, LONG_MAX), .bad = "eval: bad --kv-spill-max '{value}' (bytes)"},

    /* inspect, tokenize, quantize */
    {"--kv-tokens", NULL, INSPECT, NUM(kv_tokens, 1, 1L << 24), .bad = "--kv-tokens takes a positive count"},
    {"--no-bos", NULL, TOKENIZE, FLAG(no_bos)},
    {"--special", NULL, TOKENIZE, FLAG(special)},
    {"--calib-tokens", NULL, QUANTIZE, NUM(calib_tokens, 1, 1L << 24), .bad = "--calib-tokens takes a positive count"},

    /* synth: the model's shape and types */
    {"--arch", NULL, SYNTH, STR(synth.arch)},
    {"--type", NULL, SYNTH, CALL(set_tensor_type, synth.type), .bad = "unknown tensor type '{value}'"},
    {"--embd-type", NULL, SYNTH, CALL(set_tensor_type, synth.embd_type), .bad = "unknown tensor type '{value}'"},
    {"--output-type", NULL, SYNTH, CALL(set_tensor_type, synth.output_type), .bad = "unknown tensor type '{value}'"},
    {"--vocab", NULL, SYNTH, NUM(synth.n_vocab, 259, 1 << 22), .bad = SYNTH_COUNT},
    {"--embd", NULL, SYNTH, NUM(synth.n_embd, 1, 1 << 16), .bad = SYNTH_COUNT},
    {"--layers", NULL, SYNTH, NUM(synth.n_layer, 1, 1024), .bad = SYNTH_COUNT},
    {"--heads", NULL, SYNTH, NUM(synth.n_head, 1, 1024), .bad = SYNTH_COUNT},
    {"--kv-heads", NULL, SYNTH, NUM(synth.n_head_kv, 1, 1024), .bad = SYNTH_COUNT},
    {"--ff", NULL, SYNTH, NUM(synth.n_ff, 1, 1 << 20), .bad = SYNTH_COUNT},
    {"--head-dim", NULL, SYNTH, NUM(synth.head_dim, 2, 1 << 14), .bad = SYNTH_COUNT},
    {"--experts", NULL, SYNTH, NUM(synth.n_expert, 0, 1024), .bad = SYNTH_COUNT},
    {"--experts-used", NULL, SYNTH, NUM(synth.n_expert_used, 0, 1024), .bad = SYNTH_COUNT},
    {"--window", NULL, SYNTH, NUM(synth.swa_window, 0, 1 << 24), .bad = SYNTH_COUNT},
    {"--tied", NULL, SYNTH, FLAG(synth.tied_output)},
    {"--seed", NULL, SYNTH, CALL(set_seed, synth.seed), .bad = "--seed takes a whole number"},
    {"--std", NULL, SYNTH, FLT(synth.weight_std, 0.0f, INFINITY), .bad = "--std takes a number >= 0"},
    {"--rope-base", NULL, SYNTH, FLT(synth.rope_freq_base, ABOVE_ZERO, INFINITY), .bad = "--rope-base takes a positive number"},
    {"--rope-scale", NULL, SYNTH, FLT(synth.rope_scale_linear, 0.0f, INFINITY), .bad = "--rope-scale takes a number >= 0"},
    {"--rope-yarn", NULL, SYNTH, FLT(synth.rope_yarn, 0.0f, INFINITY), .bad = "--rope-yarn takes a number >= 0"},
    {"--gguf-version", NULL, SYNTH, NUM(synth.gguf_version, 2, 3), .bad = "--gguf-version is 2 or 3"},

    /* upcycle */
    {"--experts", NULL, UPCYCLE, NUM(upcycle.n_expert, 1, 1 << 24), .bad = UPCYCLE_COUNT},
    {"--experts-used", NULL, UPCYCLE, NUM(upcycle.n_expert_used, 1, 1 << 24), .bad = UPCYCLE_COUNT},
    {"--tokens", NULL, UPCYCLE, NUM(upcycle.calib_tokens, 1, 1 << 24), .bad = UPCYCLE_COUNT},
    {"--heldout", NULL, UPCYCLE, NUM(upcycle.heldout_tokens, 1, 1 << 24), .bad = UPCYCLE_COUNT},
    {"--shared", NULL, UPCYCLE, NUM(upcycle.n_shared, 0, 1 << 24), .bad = UPCYCLE_COUNT},
    {"--split", NULL, UPCYCLE, CALL(set_split, upcycle.split), .bad = "{arg} takes one of cluster random contiguous, not '{value}'"},
    {"--router", NULL, UPCYCLE, CALL(set_router, upcycle.router), .bad = "{arg} takes one of fit uniform, not '{value}'"},
    {"--combine", NULL, UPCYCLE, CALL(set_combine, upcycle.combine), .bad = "{arg} takes one of sum weighted, not '{value}'"},
    {"--seed", NULL, UPCYCLE, CALL(set_seed_unsigned, upcycle.seed), .bad = "--seed takes a whole number"},
    {"--measure", NULL, UPCYCLE, STR(measure)},

    /* finetune (tools/finetune.c: octo_finetune_params) */
    {"--valid", NULL, FINETUNE, STR(ft.valid)},
    {"--checkpoint", NULL, FINETUNE, STR(ft.checkpoint)},
    {"--targets", NULL, FINETUNE, STR(ft.targets)},
    {"--steps", NULL, FINETUNE, NUM(ft.steps, 1, 1 << 30), .bad = FT_COUNT},
    {"--batch", NULL, FINETUNE, NUM(ft.batch, 1, 1 << 16), .bad = FT_COUNT},
    {"--seq-len", NULL, FINETUNE, NUM(ft.seq_len, 2, 1 << 20), .bad = FT_COUNT},
    {"--rank", NULL, FINETUNE, NUM(ft.rank, 1, 4096), .bad = FT_COUNT},
    {"--alpha", NULL, FINETUNE, FLT(ft.alpha, 0.0f, INFINITY), .bad = "--alpha takes a number >= 0"},
    {"--lr", NULL, FINETUNE, FLT(ft.lr, ABOVE_ZERO, 10.0f), .bad = "--lr takes a number above 0, at most 10"},
    {"--lr-min", NULL, FINETUNE, FLT(ft.lr_min, 0.0f, 10.0f), .bad = "--lr-min takes a number from 0 to 10"},
    {"--warmup", NULL, FINETUNE, NUM(ft.warmup, 0, 1 << 30), .bad = FT_COUNT}, /* not given: the API's -1 */
    {"--clip", NULL, FINETUNE, FLT(ft.clip, 0.0f, INFINITY), .bad = "--clip takes a number >= 0 (0: none)"},
    {"--weight-decay", NULL, FINETUNE, FLT(ft.weight_decay, 0.0f, 10.0f), .bad = "{arg} takes a number from 0 to 10"},
    {"--seed", NULL, FINETUNE, CALL(set_seed_unsigned, ft.seed), .bad = "--seed takes a whole number"},
    {"--checkpoint-every", NULL, FINETUNE, NUM(ft.checkpoint_every, 1, 1 << 30), .bad = FT_COUNT},
    {"--restart", NULL, FINETUNE, FLAG(ft.restart)},
    {"--distill", NULL, FINETUNE, STR(ft.distill)},
    {"--full", NULL, FINETUNE, FLAG(ft.full)},
    {"--adapter", NULL, FINETUNE, .kind = OPT_FLAG, FIELD(ft.full), .min = -1},
    {"--fl-round", NULL, FINETUNE, NUM(ft.fl_round, 1, 1 << 30), .bad = FT_COUNT},
    {"--from", NULL, FINETUNE | FEDAVG, STR(ft.fl_from)},
    {"--fl-device", NULL, FINETUNE, STR(ft.fl_device)},
    {"--fl-clip", NULL, FINETUNE, FLT(ft.fl_clip, ABOVE_ZERO, INFINITY), .bad = "--fl-clip takes a norm above 0"},
    {"--fl-noise", NULL, FINETUNE, FLT(ft.fl_noise, 0.0f, INFINITY), .bad = "--fl-noise takes a multiplier >= 0"},
    {"--fl-delta", NULL, FINETUNE, FLT(ft.fl_delta, ABOVE_ZERO, 0.5f), .bad = "--fl-delta takes a number above 0, at most 0.5"},
    {"--partial", NULL, FEDAVG, FLAG(fl_partial)},
    {"--memory-budget", NULL, FINETUNE, CALL(set_bytes, ft.memory_budget), .bad = "{arg} takes bytes with K/M/G, e.g. 512M, not '{value}'"},

    /* serve */
    {"--host", NULL, SERVE, STR(serve.host)},
    {"--port", NULL, SERVE, NUM(serve.port, 0, 65535), .bad = SERVE_COUNT},
    {"--api-key", NULL, SERVE, STR(serve.api_key)},
    {"--api-key-file", NULL, SERVE, STR(serve.api_key_file)},
    {"--parallel", "-np", SERVE, NUM(serve.parallel, 1, OCTO_MAX_SESSIONS), .bad = SERVE_COUNT},
    {"--max-queue", NULL, SERVE, NUM(serve.max_queue, 0, 1 << 16), .bad = SERVE_COUNT},
    {"--max-body", NULL, SERVE, NUM(serve.max_body, 1, 1L << 30), .bad = SERVE_COUNT},
    {"--max-prompt", NULL, SERVE, NUM(serve.max_prompt, 1, 1L << 30), .bad = SERVE_COUNT},
    {"--max-json-nodes", NULL, SERVE, NUM(serve.max_json_nodes, 1, 1L << 24), .bad = SERVE_COUNT},
    {"--max-json-depth", NULL, SERVE, NUM(serve.max_json_depth, 1, 1000), .bad = SERVE_COUNT}, /* cJSON's own limit */
    {"--max-connections", NULL, SERVE, NUM(serve.max_connections, 1, 1 << 16), .bad = SERVE_COUNT},
    {"--max-connections-per-ip", NULL, SERVE, NUM(serve.max_per_ip, 1, 1 << 16), .bad = SERVE_COUNT},
    {"--idle-timeout", NULL, SERVE, NUM(serve.idle_timeout_s, 1, 86400), .bad = SERVE_COUNT},
    {"--request-timeout", NULL, SERVE, NUM(serve.request_timeout_s, 1, 86400), .bad = SERVE_COUNT},
};

const size_t cli_option_count = sizeof cli_options / sizeof *cli_options;

/* ---------------------------------------------------------------- the parser */

void cli_each_spelling(const cli_option *o, void (*fn)(const char *spelling, void *user), void *user) {
    fn(o->name, user);
    for (const char *p = o->alias; p && *p;) {
        const size_t n = strcspn(p, " ");
        char word[64];
        if (n && n < sizeof word) {
            memcpy(word, p, n);
            word[n] = '\0';
            fn(word, user);
        }
        p += n + (p[n] == ' ');
    }
}

bool cli_spelled(const cli_option *o, const char *s) {
    if (!strcmp(s, o->name)) return true;
    const size_t n = strlen(s);
    for (const char *p = o->alias; p && *p;) {
        const size_t w = strcspn(p, " ");
        if (w == n && !strncmp(p, s, n)) return true;
        p += w + (p[w] == ' ');
    }
    return false;
}

const cli_option *cli_find(cli_command cmd, const char *arg) {
    const cli_option *found = NULL;
    for (size_t i = 0; i < cli_option_count; i++) {
        const cli_option *o = &cli_options[i];
        if (!(o->commands & (1u << cmd)) || !cli_spelled(o, arg)) continue;
        assert(!found && "two rows of one command with one name");
        found = o;
    }
    return found;
}

bool cli_given(const cli_args *a, cli_command cmd, const char *name) {
    const cli_option *o = cli_find(cmd, name);
    const size_t i = o ? (size_t)(o - cli_options) : 0;
    return o && (a->given[i / 64] >> (i % 64) & 1);
}

/* A whole number of the field's size (bool, 32 or 64 bits). */
static void store_int(void *at, size_t size, long v) {
    if (size == sizeof(bool)) {
        const bool b = v != 0;
        memcpy(at, &b, size);
    } else if (size == sizeof(int32_t)) {
        const int32_t x = (int32_t)v;
        memcpy(at, &x, size);
    } else {
        assert(size == sizeof(int64_t));
        const int64_t x = v;
        memcpy(at, &x, size);
    }
}

/* An ignored option's note (its row's bad, {arg} filled in), said once. */
static void note_option(const cli_option *o, const char *arg) {
    const char *at = strstr(o->bad, "{arg}");
    if (!at) note("%s", o->bad);
    else note("%.*s%s%s", (int)(at - o->bad), o->bad, arg, at + 5); /* the rows name {arg} at most once */
}

/* The value v of option o (given as arg) into a; 0 or a usage error's exit code. */
static int set_value(const cli_option *o, const char *arg, const char *v, cli_args *a) {
    long n;
    float x;
    switch (o->kind) {
    case OPT_STR: memcpy(field(a, o), &v, sizeof v); return 0;
    case OPT_NUM:
        if (!parse_long(v, o->min, o->max, &n)) return bad_value(o, arg, v);
        store_int(field(a, o), o->size, n);
        return 0;
    case OPT_FLOAT:
        assert(o->size == sizeof x);
        if (!parse_float(v, &x) || x < o->lo || x > o->hi) return bad_value(o, arg, v);
        memcpy(field(a, o), &x, sizeof x);
        return 0;
    case OPT_CHOICE:
        for (const cli_choice *c = o->choices; c->word; c++)
            if (!strcmp(v, c->word)) return store_int(field(a, o), o->size, c->value), 0;
        return bad_value(o, arg, v);
    case OPT_CALL: return o->set(o, arg, v, a);
    case OPT_IGNORE: note_option(o, arg); return 0;
    case OPT_FLAG:
    case OPT_PAIR:
    case OPT_REFUSE: break;
    }
    assert(!"a flag takes no value");
    return 2;
}

/* quantize IN OUT TYPE [THREADS], as llama-quantize takes them. */
static int quantize_word(const char *arg, cli_args *a) {
    long n;
    const char **field = a->words == 0 ? &a->model : a->words == 1 ? &a->out : a->words == 2 ? &a->type : NULL;
    if (field && *field) return usage_error("quantize: IN OUT TYPE or -m IN -o OUT --type TYPE, not both ('%s')", arg);
    switch (a->words++) {
    case 0: a->model = arg; return 0;
    case 1: a->out = arg; return 0;
    case 2: a->type = arg; return 0;
    case 3:
        if (!parse_long(arg, 1, 1024, &n)) return usage_error("quantize: THREADS after the type is a count from 1 to 1024, not '%s'", arg);
        a->threads = n;
        return 0;
    default: return usage_error("quantize takes IN OUT TYPE [THREADS], not also '%s'", arg);
    }
}

/* fedavg's UPDATE...: every word that is not an option. */
static int fedavg_word(const char *arg, cli_args *a) {
    const char **u = realloc(a->updates, sizeof(char *) * ((size_t)a->n_updates + 1));
    if (!u) return usage_error("out of memory");
    a->updates = u;
    u[a->n_updates++] = arg;
    return 0;
}

/* A first word of run that is the prompt, not the model: no such file, and a space in it
 * (octo run "Once upon a time" runs the embedded model). */
static bool prompt_not_model(const char *arg) {
    if (access(arg, F_OK) == 0) return false;
    for (const char *p = arg; *p; p++)
        if (isspace((unsigned char)*p)) return true;
    return false;
}

/* Words that are not options: run's MODEL and PROMPT ("-": stdin), quantize's
 * IN OUT TYPE [THREADS], fedavg's UPDATE..., and the MODEL of every other command that reads one
 * (octo inspect MODEL, as -m MODEL). -1 when cmd takes no such word (an unknown option). */
static int positional(cli_command cmd, const char *arg, cli_args *a) {
    if (cmd == CMD_QUANTIZE && arg[0] != '-') return quantize_word(arg, a);
    if (cmd == CMD_FEDAVG && arg[0] != '-') return fedavg_word(arg, a);
    if (cmd != CMD_RUN) {
        if (arg[0] == '-' || !cli_find(cmd, "-m")) return -1;
        if (a->model) return usage_error("%s takes one model, not also '%s'", cli_command_name(cmd), arg);
        return a->model = arg, 0;
    }
    if (arg[0] == '-' && arg[1]) return -1;
    if (!a->model && !a->prompt && !a->file && prompt_not_model(arg)) a->prompt = arg;
    else if (!a->model) a->model = arg;
    else if (!a->prompt && !a->file) *(strcmp(arg, "-") ? &a->prompt : &a->file) = arg;
    else return usage_error("run: one model and one prompt, not also '%s'", arg);
    return 0;
}

/* A switch's value after an option that may be a flag: on, off, auto (llama.cpp's -fa). */
static bool switch_word(const char *w) {
    static const char *const words[] = {"on", "off", "auto", "1", "0", "true", "false"};
    for (size_t k = 0; k < sizeof words / sizeof *words; k++)
        if (!strcmp(w, words[k])) return true;
    return false;
}

/* One option (row o, given as argv[*i]), its value argv[*i + 1] if it takes
 * one; 0 or a usage error's exit code. */
static int take_option(cli_command cmd, const cli_option *o, int argc, char **argv, int *i, cli_args *a) {
    const char *arg = argv[*i];
    const size_t row = (size_t)(o - cli_options);
    assert(row < 64 * sizeof a->given / sizeof *a->given);
    a->given[row / 64] |= 1ull << (row % 64);
    if (o->kind == OPT_REFUSE) return bad_value(o, arg, "");
    if (o->kind == OPT_FLAG) return store_int(field(a, o), o->size, o->min), 0;
    if (o->kind == OPT_IGNORE && o->min == 0) return note_option(o, arg), 0;
    if (o->kind == OPT_IGNORE && o->min == 2) { /* a flag or a switch: -fa, -fa on (llama.cpp has had both) */
        if (*i + 1 < argc && switch_word(argv[*i + 1])) ++*i;
        return note_option(o, arg), 0;
    }
    if (*i + 1 == argc) return usage_error("%s: %s needs a value", cli_command_name(cmd), arg);
    if (o->kind == OPT_PAIR) {
        if (*i + 2 == argc) return usage_error("%s: %s needs two values", cli_command_name(cmd), arg);
        *i += 2;
        return o->set_pair(arg, argv[*i - 1], argv[*i], a);
    }
    return set_value(o, arg, argv[++*i], a);
}

/* The model and the draft as files (cli_resolve_model: a reference pulled,
 * before serve blocks its signals or any command loads); 0, 1 or 130. */
static int resolve_models(cli_args *a) {
    static char model[4096], draft[4096];
    int rc = 0;
    if (!cli_resolve_model) return 0;
    if (a->model) rc = cli_resolve_model(a->model, &a->model, model, sizeof model);
    if (!rc && a->draft) rc = cli_resolve_model(a->draft, &a->draft, draft, sizeof draft);
    return rc;
}

int cli_parse(cli_command cmd, int argc, char **argv, cli_args *a) {
    for (int i = 0; i < argc; i++) {
        const cli_option *o = cli_find(cmd, argv[i]);
        int rc = 0;
        if (o) rc = take_option(cmd, o, argc, argv, &i, a);
        else if ((rc = positional(cmd, argv[i], a)) < 0) rc = unknown_option(cmd, argv[i]);
        if (rc) return rc;
    }
    return resolve_models(a);
}
