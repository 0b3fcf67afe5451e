/*
 * options — the command line's options: one table (tools/options.c) of every
 * option of every command, and the parser the commands share.
 *
 * A row names an option (and its other spelling), the commands that take it,
 * how its value is read (a count in a range, a number, a word of a list, a
 * string, none) and where in cli_args it is kept. Where two commands read the
 * same name differently (-p: run's prompt, bench's prompt length) each has its
 * own row. A command fills in its defaults, then calls cli_parse: an option the
 * command does not take is answered with the nearest one it does (help.c), a
 * bad value with the row's message, a missing one with "CMD: OPT needs a value".
 */
#ifndef OCTO_TOOLS_OPTIONS_H
#define OCTO_TOOLS_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "octo.h"
#include "convert/deploy.h"  /* internal: DEPLOY_MAX_DEVICES, how many --device names deploy takes */
#include "convert/upcycle.h" /* internal: upcycle_opts, which upcycle's options fill */
#include "model/synth.h"     /* internal: synth_opts, which synth's options fill */

/* The commands, in the order `octo help` lists them. */
typedef enum {
    CMD_RUN,
    CMD_TOKENIZE,
    CMD_DETOKENIZE,
    CMD_INSPECT,
    CMD_BENCH,
    CMD_EVAL,
    CMD_LOGITS,
    CMD_SYNTH,
    CMD_UPCYCLE,
    CMD_MOE_PREP,
    CMD_QUANTIZE,
    CMD_MERGE,
    CMD_FINETUNE,
    CMD_FEDAVG,
    CMD_PLAN,
    CMD_DEPLOY,
    CMD_SERVE,
    CMD_PULL,
    CMD_LIST,
    CMD_RM,
    CMD_COUNT
} cli_command;

/* "run", "moe-prep", ...; NULL past the last. */
const char *cli_command_name(cli_command cmd);

#define BENCH_MAX_REPS 64    /* bench -r */
#define BENCH_MAX_BATCHES 16 /* bench --batch */
#define BENCH_VERSUS_SERIAL 100 /* bench --versus-serial: the third arm drafts only between passes */

/* --lora FILE / --lora-scaled FILE SCALE, in the order given (llama.cpp's spellings). */
typedef struct {
    const char *path[OCTO_MAX_ADAPTERS];
    float scale[OCTO_MAX_ADAPTERS];
    int n;
} cli_lora;

/* Everything the command line said, for any command: each command reads the
 * fields of the options it takes (the table says which); the rest keep the
 * defaults it set before cli_parse. */
typedef struct {
    /* files, texts and names */
    const char *model;        /* -m, or run's and serve's first word that is not an option */
    const char *file;         /* -f: the text (eval, tokenize, upcycle, moe-prep), quantize's calibration
                                 text, run's prompt file ("-", also run's second word: stdin) */
    const char *out;          /* -o, logits --out */
    const char *prompt;       /* run -p (or its second word), bench and logits --prompt */
    const char *prompt_file;  /* bench --prompt-file */
    const char *grammar_file; /* run and bench --grammar: GBNF */
    const char *schema_file;  /* run and bench --json-schema */
    const char *draft, *device, *cache_dir;
    const char *ref;          /* eval --ref */
    const char *measure;      /* upcycle --measure MOE: measure that file against -m instead of upcycling */
    const char *text;         /* tokenize --text */
    const char *ids;          /* detokenize --ids */
    const char *tokens;       /* logits --tokens */
    const char *type;         /* quantize and deploy --type */
    const char *types_from;   /* quantize --types-from */
    const char *devices[DEPLOY_MAX_DEVICES]; /* deploy --device a,b (given twice: both lists) */
    int n_devices;
    /* counts */
    long n_ctx;               /* --ctx */
    long threads;             /* -t */
    long draft_threads;       /* -td: cores of the draft's own */
    long prompt_tokens;       /* bench -p, eval --prompt */
    long gen_tokens;          /* bench -n */
    long reps;                /* bench -r */
    long batch;               /* eval --batch */
    long kv_tokens;           /* inspect --kv-tokens */
    long calib_tokens;        /* quantize --calib-tokens */
    long prompt_random;       /* eval --prompt-random: a seed, 0 for none */
    int batches[BENCH_MAX_BATCHES], n_batches; /* bench --batch */
    int spec;                 /* --spec: an octo_spec_mode, -1 when not given */
    int versus;               /* bench --versus-lines K (0: adaptive), BENCH_VERSUS_SERIAL, -1: none */
    double budget_pct;        /* eval --kv-budget PCT% (> 0), of the full F16 cache */
    double keep_pct;          /* eval --kv-keep PCT% (> 0), of the prompt's entries */
    /* switches */
    int json, chat, stats, quiet, no_bos, special, kv_plain, roofline_only, no_roofline;
    int mask_only;            /* bench --mask-only: a grammar's mask on -m's vocabulary, no model */
    int print_ids;            /* run --ids */
    int seeded;               /* a --seed was given */
    int words;                /* quantize: the words that are not options so far (IN OUT TYPE [THREADS]) */
    uint64_t given[4];        /* the rows given (bit i: cli_options[i]), for cli_given */
    /* what the library and the converters take, filled in place */
    octo_generate_params gp;  /* sampling and speculation (run, bench); eval's prompt compression, lookahead */
    octo_model_options mo;    /* .moe: every command that runs a model; .kv: eval */
    synth_opts synth;
    upcycle_opts upcycle;
    cli_lora lora;            /* --lora, --lora-scaled (run, bench, eval, logits, serve, merge) */
    const char *lora_for;     /* synth --lora-for MODEL: an adapter for it */
    octo_finetune_params ft;  /* finetune's options (its -f, -o and --type are file, out and type); fedavg's --from */
    const char **updates;     /* fedavg's words: its updates (the caller frees the array) */
    int n_updates;
    int fl_partial;           /* fedavg --partial */
    long lora_rank;           /* synth --rank */
    float lora_alpha;         /* synth --alpha (-1: the rank) */
    struct {
        const char *host, *api_key, *api_key_file;
        long port, parallel, max_body, max_prompt, max_queue, max_json_nodes, max_json_depth;
        long max_connections, max_per_ip, idle_timeout_s, request_timeout_s;
    } serve;
} cli_args;

/* How a row reads its value. */
typedef enum {
    OPT_FLAG,   /* no value: the field (int or bool) is set to min */
    OPT_STR,    /* the value itself (const char *) */
    OPT_NUM,    /* a whole number in min..max (an int, long or 64-bit field) */
    OPT_FLOAT,  /* a finite number in lo..hi (a float field) */
    OPT_CHOICE, /* one of the words of choices, its value stored (an int or enum field) */
    OPT_CALL,   /* set() reads it */
    OPT_PAIR,   /* set_pair() reads two values (--lora-scaled FILE SCALE) */
    OPT_IGNORE, /* llama.cpp's, with no meaning here: min values (0 or 1; 2: one if it is on/off/auto...)
                 * skipped, bad said once as a note */
    OPT_REFUSE, /* llama.cpp's, meaning something octo does otherwise: bad is the usage error */
} cli_kind;

typedef struct {
    const char *word;
    int value;
} cli_choice;

typedef struct cli_option cli_option;
struct cli_option {
    const char *name;     /* as `octo help` shows it: "--ctx", "-m" */
    const char *alias;    /* its other spellings, space-separated, or NULL: "--threads" for run's -t,
                             "-c --ctx-size" (llama.cpp's) for --ctx */
    unsigned commands;    /* the commands that take it: the or of 1u << cli_command */
    cli_kind kind;
    size_t at, size;      /* where in cli_args it is kept (offset and size of the field) */
    long min, max;        /* OPT_NUM: the range; OPT_FLAG: min is the value set */
    float lo, hi;         /* OPT_FLOAT: the range */
    const cli_choice *choices; /* OPT_CHOICE: the words, ending with {NULL} */
    /* OPT_CALL: arg the option as given; 0, or after printing a usage error 2 */
    int (*set)(const cli_option *o, const char *arg, const char *value, cli_args *a);
    int (*set_pair)(const char *arg, const char *v1, const char *v2, cli_args *a); /* OPT_PAIR */
    const char *bad;      /* the usage error for a bad value: {arg} is the option as given,
                             {value} the value, {min} and {max} the range */
};

extern const cli_option cli_options[];
extern const size_t cli_option_count;

/* The library's defaults (gp, mo), --spec not given; every other field zero. */
cli_args cli_defaults(void);

/* argv (the words after the command's name) into a; 0, or after printing a
 * usage error (one line) its exit code, 2. */
int cli_parse(cli_command cmd, int argc, char **argv, cli_args *a);

/* The row of cmd's named arg, or NULL. */
const cli_option *cli_find(cli_command cmd, const char *arg);
/* Whether s is o's name or one of its aliases. */
bool cli_spelled(const cli_option *o, const char *s);
/* Whether cmd's option named name (any spelling) was on the command line. */
bool cli_given(const cli_args *a, cli_command cmd, const char *name);
/* Call fn with each spelling of o (its name, then each alias). */
void cli_each_spelling(const cli_option *o, void (*fn)(const char *spelling, void *user), void *user);

#endif
