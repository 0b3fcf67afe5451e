/*
 * test_options — the command line's option table (tools/options.c): each
 * command's names once, each row whole for its kind; the table and the
 * help agree (each option a command takes is in its entry of `octo help`,
 * each option an entry shows the command takes); values land in the fields
 * their rows name, and a bad line is a usage error (2).
 */
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "help.h"
#include "options.h"
#include "t.h"

#define ALL_COMMANDS ((1u << CMD_COUNT) - 1)

typedef struct {
    const cli_option *o;
    size_t i;
} row_at;

/* A spelling of row r->i: a dash first, and no earlier row of one of its commands spelled so. */
static void check_spelling(const char *s, void *user) {
    const row_at *r = user;
    T_CHECKF(s[0] == '-' && s[1] && !strchr(s, ' '), "%s: '%s'", r->o->name, s);
    for (size_t j = 0; j < r->i; j++) {
        const cli_option *p = &cli_options[j];
        T_CHECKF(!(r->o->commands & p->commands) || !cli_spelled(p, s), "%s: two rows of one command", s);
    }
}

/* No two rows of one command share a spelling; each row is whole for its kind. */
static void test_rows(void) {
    for (size_t i = 0; i < cli_option_count; i++) {
        const cli_option *o = &cli_options[i];
        T_CHECKF(o->commands && !(o->commands & ~ALL_COMMANDS), "%s: commands %#x", o->name, o->commands);
        T_CHECKF(o->at + o->size <= sizeof(cli_args), "%s: outside cli_args", o->name);
        cli_each_spelling(o, check_spelling, &(row_at){o, i});
        switch (o->kind) {
        case OPT_FLAG: T_CHECKF(o->size == sizeof(bool) || o->size == sizeof(int), "%s", o->name); break;
        case OPT_STR: T_CHECKF(o->size == sizeof(const char *), "%s", o->name); break;
        case OPT_NUM: T_CHECKF(o->min <= o->max && (o->size == 4 || o->size == 8) && o->bad, "%s", o->name); break;
        case OPT_FLOAT: T_CHECKF(o->lo <= o->hi && o->size == sizeof(float) && o->bad, "%s", o->name); break;
        case OPT_CHOICE: T_CHECKF(o->choices && o->choices[0].word && o->size == sizeof(int) && o->bad, "%s", o->name); break;
        case OPT_CALL: T_CHECKF(o->set != NULL, "%s", o->name); break;
        case OPT_PAIR: T_CHECKF(o->set_pair != NULL, "%s", o->name); break;
        case OPT_IGNORE: T_CHECKF(o->min >= 0 && o->min <= 2 && o->bad, "%s", o->name); break;
        case OPT_REFUSE: T_CHECKF(o->bad != NULL, "%s", o->name); break;
        }
        for (int c = 0; c < CMD_COUNT; c++)
            if (o->commands & (1u << c)) T_CHECKF(cli_find((cli_command)c, o->name) == o, "%s", o->name);
    }
    T_CHECK(cli_command_name(CMD_MOE_PREP) && !strcmp(cli_command_name(CMD_MOE_PREP), "moe-prep"));
    T_CHECK(cli_command_name(CMD_COUNT) == NULL);
}

/* Options the help shows where the table has none, or the reverse, each for a reason. */
static const struct {
    cli_command cmd;
    const char *flag;
} unlisted[] = {
    {CMD_BENCH, "--no-roofline"},  /* taken, never documented: the decode runs without the bandwidth probes */
    {CMD_MOE_PREP, "--moe-int2"},  /* moe-prep's entry names run's option that reads what it measures */
};

static bool is_unlisted(cli_command cmd, const char *flag) {
    for (size_t i = 0; i < sizeof unlisted / sizeof *unlisted; i++)
        if (unlisted[i].cmd == cmd && !strcmp(unlisted[i].flag, flag)) return true;
    return false;
}

/* The next -x / --word of an entry after *p (a '-' after a space, '[' or '(', a letter after the dashes), into
 * flag; false at the end. */
static bool next_flag(const char **p, char *flag, size_t cap) {
    for (const char *s = *p; *s; s++) {
        if (*s != '-' || (s[-1] != ' ' && s[-1] != '[' && s[-1] != '(')) continue;
        size_t k = 0;
        while ((s[k] == '-' || (s[k] >= 'a' && s[k] <= 'z') || (s[k] >= '0' && s[k] <= '9')) && k + 1 < cap) k++;
        *p = s + (k ? k : 1);
        const char *letter = s + strspn(s, "-");
        if (k < 2 || !(*letter >= 'a' && *letter <= 'z')) continue; /* "-1" is a value (run -n -1), not a flag */
        memcpy(flag, s, k);
        flag[k] = '\0';
        return true;
    }
    return false;
}

static bool shows(const char *entry, const char *name) {
    char flag[48];
    for (const char *p = entry + 1; next_flag(&p, flag, sizeof flag);)
        if (!strcmp(flag, name)) return true;
    return false;
}

static void test_help(void) {
    for (int c = 0; c < CMD_COUNT; c++) {
        const cli_command cmd = (cli_command)c;
        char *e = help_entry(cmd), flag[48];
        T_CHECKF(e && *e, "%s: no help", cli_command_name(cmd));
        if (!e) continue;
        for (const char *p = e + 1; next_flag(&p, flag, sizeof flag);) /* every command takes -h (main.c) */
            T_CHECKF(!strcmp(flag, "-h") || cli_find(cmd, flag) || is_unlisted(cmd, flag),
                     "%s's help shows %s, which it does not take", cli_command_name(cmd), flag);
        for (size_t i = 0; i < cli_option_count; i++) {
            const cli_option *o = &cli_options[i];
            const bool llama_only = o->kind == OPT_IGNORE || o->kind == OPT_REFUSE; /* the README's table shows them */
            if ((o->commands & (1u << c)) && !llama_only)
                T_CHECKF(shows(e, o->name) || is_unlisted(cmd, o->name), "%s takes %s, which its help does not show",
                         cli_command_name(cmd), o->name);
        }
        free(e);
    }
}

/* cli_parse on the words of line (split at spaces), stderr silenced: an error is one line there. */
static int parse(cli_command cmd, cli_args *a, const char *line) {
    static char buf[1024];
    char *argv[64];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", line);
    for (char *t = strtok(buf, " "); t && argc < 64; t = strtok(NULL, " ")) argv[argc++] = t;
    fflush(stderr);
    const int saved = dup(STDERR_FILENO), null = open("/dev/null", O_WRONLY);
    dup2(null, STDERR_FILENO);
    const int rc = cli_parse(cmd, argc, argv, a);
    dup2(saved, STDERR_FILENO);
    close(null), close(saved);
    return rc;
}

static void test_run(void) {
    cli_args a = cli_defaults();
    T_EQ_INT(parse(CMD_RUN, &a, "m.gguf hello -n 5 --temp 0.5 --threads 2 --seed -1 --spec ngram --moe-int2 all "
                                "--spec-ahead off --ids --moe-cache 25%"), 0);
    T_CHECK(a.model && !strcmp(a.model, "m.gguf") && a.prompt && !strcmp(a.prompt, "hello") && !a.file);
    T_EQ_INT(a.gp.max_tokens, 5);
    T_NEAR(a.gp.temperature, 0.5, 0);
    T_EQ_INT(a.threads, 2);
    T_CHECK(a.gp.seed == UINT64_MAX && a.seeded); /* strtoull's "-1" */
    T_EQ_INT(a.spec, OCTO_SPEC_NGRAM);
    T_EQ_INT(a.mo.moe.int2, OCTO_MOE_INT2_ALL);
    T_EQ_INT(a.gp.spec_ahead, -1);
    T_EQ_INT(a.print_ids, 1);
    T_NEAR(a.mo.moe.cache_share, 0.25, 1e-9);
    a = cli_defaults();
    T_EQ_INT(parse(CMD_RUN, &a, "m.gguf - --spec-tree off --lookahead 5,3,4"), 0);
    T_CHECK(a.file && !strcmp(a.file, "-") && !a.prompt && a.spec == -1);
    T_CHECK(a.gp.spec_tree == -1 && a.gp.lookahead_w == 5 && a.gp.lookahead_n == 3 && a.gp.lookahead_g == 4);
    a = cli_defaults();
    T_EQ_INT(parse(CMD_RUN, &a, "m.gguf hi --lora a.gguf --lora-scaled b.gguf -0.5 -n 3"), 0);
    T_CHECK(a.lora.n == 2 && !strcmp(a.lora.path[0], "a.gguf") && !strcmp(a.lora.path[1], "b.gguf"));
    T_CHECK(a.lora.scale[0] == 1.0f && a.lora.scale[1] == -0.5f && a.gp.max_tokens == 3 && !strcmp(a.prompt, "hi"));
    const char *bad[] = {"m hello --lora-scaled a.gguf", "m hello --lora-scaled a.gguf x", "m hello --lora",
                         "m hello --lora a --lora a --lora a --lora a --lora a --lora a --lora a --lora a --lora a",
                         "m hello extra", "m hello -n", "m hello -n -3", "m hello --temp nan", "m hello --top-k -1",
                         "m hello --spec sideways", "m hello --prompt-compress 0", "m hello --prompt-compress 1.5",
                         "m hello --batch 4", "m hello --temprature 1", "m hello --moe-trace", "m hello -t 1025"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        a = cli_defaults();
        T_CHECKF(parse(CMD_RUN, &a, bad[i]) == 2, "run %s", bad[i]);
    }
}

/* llama.cpp's spellings land where octo's do; its options octo has no use
 * for are taken (said as notes) or refused; -1 counts; quantize's words. */
static void test_llama_spellings(void) {
    /* parse() keeps the words in one buffer: each line's strings are checked before the next is parsed */
    cli_args a = cli_defaults(), b = cli_defaults();
    T_EQ_INT(parse(CMD_RUN, &b, "-m m.gguf -p hi -n 7 --ctx 99 --seed 3 --draft d.gguf -t 2 --chat --grammar g --spec-k 4"), 0);
    T_CHECK(!strcmp(b.model, "m.gguf") && !strcmp(b.prompt, "hi") && !strcmp(b.draft, "d.gguf") && !strcmp(b.grammar_file, "g"));
    T_EQ_INT(parse(CMD_RUN, &a, "--model m.gguf --prompt hi --n-predict 7 -c 99 -s 3 -md d.gguf --threads 2 -cnv "
                                "--grammar-file g --repeat-last-n -1 -ngl 99 --mlock -ctk q8_0 --draft-max 4"), 0);
    T_CHECK(!strcmp(a.model, "m.gguf") && !strcmp(a.prompt, "hi") && !strcmp(a.draft, "d.gguf") && !strcmp(a.grammar_file, "g"));
    T_CHECK(a.chat == b.chat && a.threads == b.threads && a.gp.spec_k == b.gp.spec_k);
    T_CHECK(a.gp.max_tokens == b.gp.max_tokens && a.n_ctx == b.n_ctx && a.gp.seed == b.gp.seed && a.seeded);
    T_CHECK(a.gp.spec_k == 4 && a.gp.repeat_last_n == -1 && a.chat);
    T_CHECK(cli_given(&a, CMD_RUN, "-ngl") && cli_given(&a, CMD_RUN, "--seed") && !cli_given(&a, CMD_RUN, "--top-k"));
    a = cli_defaults();
    T_EQ_INT(parse(CMD_RUN, &a, "m hi -n -1"), 0);
    T_EQ_INT(a.gp.max_tokens, -1);
    /* llama.cpp's -n 0 (the prompt only), --temp below 0 (greedy), -fa as a flag or a switch */
    a = cli_defaults();
    T_EQ_INT(parse(CMD_RUN, &a, "m hi -n 0 --temp -1 -fa on"), 0);
    T_CHECK(a.gp.max_tokens == 0 && a.gp.temperature == 0.0f && !strcmp(a.prompt, "hi"));
    a = cli_defaults();
    T_EQ_INT(parse(CMD_RUN, &a, "m -fa hi"), 0); /* "hi" is no switch's value: the prompt */
    T_CHECK(a.prompt && !strcmp(a.prompt, "hi"));
    /* the model as the first word of any command that reads one; a spaced first word of run is its prompt */
    a = cli_defaults();
    T_EQ_INT(parse(CMD_INSPECT, &a, "m.gguf"), 0);
    T_CHECK(a.model && !strcmp(a.model, "m.gguf"));
    a = cli_defaults();
    T_EQ_INT(parse(CMD_INSPECT, &a, "m.gguf other.gguf"), 2);
    a = cli_defaults();
    T_EQ_INT(parse(CMD_SYNTH, &a, "m.gguf"), 2); /* synth reads no model */
    const char *bad[] = {"m hi -n -2", "m hi -sys you", "m hi -c 99999999", "m hi -x", "m hi --repeat-last-n -2",
                         "m hi -ngl"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        a = cli_defaults();
        T_CHECKF(parse(CMD_RUN, &a, bad[i]) == 2, "run %s", bad[i]);
    }
    a = cli_defaults();
    T_EQ_INT(parse(CMD_QUANTIZE, &a, "in.gguf out.gguf Q4_K_M 3"), 0);
    T_CHECK(!strcmp(a.model, "in.gguf") && !strcmp(a.out, "out.gguf") && !strcmp(a.type, "Q4_K_M") && a.threads == 3);
    a = cli_defaults();
    T_EQ_INT(parse(CMD_QUANTIZE, &a, "in out q4_0 0"), 2);
    a = cli_defaults();
    T_EQ_INT(parse(CMD_QUANTIZE, &a, "in out q4_0 2 more"), 2);
    a = cli_defaults();
    T_EQ_INT(parse(CMD_BENCH, &a, "-m m --n-prompt 5 --n-gen 6 --repetitions 2 -s 1 -ngl 99"), 0);
    T_CHECK(a.prompt_tokens == 5 && a.gen_tokens == 6 && a.reps == 2 && a.gp.seed == 1);
}

static void test_others(void) {
    cli_args a = cli_defaults();
    T_EQ_INT(parse(CMD_BENCH, &a, "-m m -p 0 --seed 5 --versus-serial --batch 1,3 -td 2 --no-roofline"), 0);
    T_CHECK(a.prompt_tokens == 0 && a.gp.seed == 5 && a.versus == BENCH_VERSUS_SERIAL && a.n_batches == 2);
    T_CHECK(a.batches[1] == 3 && a.draft_threads == 2 && a.no_roofline);
    T_EQ_INT(parse(CMD_BENCH, &a, "--seed -1"), 2);
    T_EQ_INT(parse(CMD_BENCH, &a, "--batch 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17"), 2);
    a = cli_defaults();
    T_EQ_INT(parse(CMD_EVAL, &a, "-m m -f t --kv-budget 50% --kv-keep 64 --kv-cold q4_0 --kv-spill off "
                                 "--prompt-random 9 --prompt 8 --kv-hot 3"), 0);
    T_CHECK(a.budget_pct == 50 && a.mo.kv.budget_tokens == 64 && a.mo.kv.cold_bits == 4 && a.mo.kv.cold_symmetric == 1);
    T_CHECK(a.mo.kv.spill == -1 && a.prompt_random == 9 && a.prompt_tokens == 8 && a.mo.kv.hot_tokens == 3);
    T_EQ_INT(parse(CMD_EVAL, &a, "--ctx 1"), 2);
    a = cli_defaults();
    a.synth = synth_defaults();
    T_EQ_INT(parse(CMD_SYNTH, &a, "-o x --tied --gguf-version 2 --vocab 300 --std 0 --seed 4 --type q8_0"), 0);
    T_CHECK(a.synth.tied_output && a.synth.gguf_version == 2 && a.synth.n_vocab == 300 && a.synth.seed == 4);
    T_CHECK(a.synth.weight_std == 0.0f && a.synth.type != synth_defaults().type);
    const char *synth_bad[] = {"--rope-base 0", "--std -1", "--type q9_9", "--vocab 258", "--gguf-version 4", "-m x"};
    for (size_t i = 0; i < sizeof synth_bad / sizeof *synth_bad; i++)
        T_CHECKF(parse(CMD_SYNTH, &a, synth_bad[i]) == 2, "synth %s", synth_bad[i]);
    a = cli_defaults();
    T_EQ_INT(parse(CMD_UPCYCLE, &a, "--seed 5 --split random --threads 0"), 0);
    T_CHECK(a.upcycle.seed == 5 && a.upcycle.split == UPCYCLE_SPLIT_RANDOM && a.upcycle.n_threads == 0);
    T_EQ_INT(parse(CMD_UPCYCLE, &a, "--seed -1"), 2); /* upcycle's seed has no sign */
    a = cli_defaults();
    T_EQ_INT(parse(CMD_DEPLOY, &a, "-m m --device a,b --device c -o d -q"), 0);
    T_CHECK(a.n_devices == 3 && !strcmp(a.devices[2], "c") && a.quiet);
    a = cli_defaults();
    T_EQ_INT(parse(CMD_SERVE, &a, "m.gguf --port 0 --max-json-depth 1000"), 0);
    T_CHECK(a.model && !strcmp(a.model, "m.gguf") && a.serve.port == 0 && a.serve.max_json_depth == 1000);
    T_EQ_INT(parse(CMD_SERVE, &a, "other.gguf"), 2); /* one model */
    T_EQ_INT(parse(CMD_TOKENIZE, &a, "tokenize-takes-no-word"), 2);
}

int main(void) {
    test_rows();
    test_help();
    test_run();
    test_others();
    test_llama_spellings();
    T_DONE();
}
