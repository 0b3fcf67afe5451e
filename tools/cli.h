/*
 * cli.h — helpers shared by the octo commands in tools/.
 */
#ifndef OCTO_TOOLS_CLI_H
#define OCTO_TOOLS_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "octo.h"

/* "octo: <message> (see 'octo help')" on stderr; returns 2. */
int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "octo: <message>" on stderr; returns 1. */
int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The whole string must be a number in range; returns 1 on success. */
int parse_long(const char *s, long min, long max, long *out);
int parse_float(const char *s, float *out);
/* --spec-tree: "auto" (0), "off" (-1: lines of drafts) or a node count 1..31. */
int parse_spec_tree(const char *s, int *out);
/* Space- or comma-separated non-negative ids into a malloc'd array; returns 1 on success. */
int parse_tokens(const char *s, int32_t **out, int *n_out);
double mib(uint64_t bytes);
/* A whole file, NUL-terminated, into *out (malloc'd) and *len; 0 on
 * success, else the error is printed (fail) and 1 returned. */
int read_text_file(const char *path, char **out, size_t *len);
/* --grammar FILE / --json-schema FILE (either may be NULL) read into gp's
 * grammar / json_schema; *text holds what the caller frees after the run.
 * As llama.cpp's --grammar and -j take the text itself, a "FILE" with "::="
 * (a grammar) or starting with "{" (a schema) is the text.
 * 0 on success, else the error is printed and 1 returned. */
int read_constraint(const char *grammar_file, const char *schema_file, octo_generate_params *gp, char **text);
#define CLI_MAX_TEXT_BYTES (256 << 20) /* a larger text input is refused */
/* Flush and close stdout; a write error becomes the command's failure (one
 * line, exit 1) when rc was 0. Returns the exit code. */
int finish_stdout(int rc);
/* --spec NAME: a name of octo_spec_mode_name (auto none ngram draft self lookahead ...); 1 on success. */
int parse_spec_mode(const char *s, int *mode);
/* Every mode's name, comma-separated, for a usage error. */
const char *spec_mode_names(void);
/* --lookahead W,N,G; 1 on success. */
int parse_lookahead(const char *s, int *w, int *n, int *g);
/* The names of the KV policies from number first on (octo_kv_policy_name),
 * joined by sep, into out (n bytes, cut short if need be); returns out. */
const char *kv_policy_names(int first, const char *sep, char *out, size_t n);


/* What open_model loads: the client's options (threads, spill folder, device
 * profile) and the model's. */
typedef struct {
    const char *path, *draft, *cache_dir, *device;
    int n_ctx;
    int auto_draft;    /* OCTO_DRAFT_NONE for a command that never speculates */
    int threads;       /* -t: 0 = the performance cores */
    int draft_threads; /* -td: cores of the draft's own, 0 = automatic */
    int vocab_only;    /* tokenize, detokenize: the vocabulary alone */
    octo_moe_options moe;
} model_request;

/* A model's name as given (-m, --draft) to the file to load, in *path (buf
 * holds it when it is not model itself); 0, or after printing why 1 (130:
 * interrupted). main.c sets it to pull_model_path (pull.h: a hub reference or
 * URL, from the cache or pulled); cli_parse calls it on what it read. NULL
 * (tests that link the parser alone) keeps the names as they are. */
extern int (*cli_resolve_model)(const char *model, const char **path, char *buf, size_t n);

/* A client and the model r asks for, saying "loading" meanwhile when stderr
 * is a terminal; NULL after printing why (*client may then be set: free it). */
octo_model *open_model(const model_request *r, octo_client **client);
/* --lora / --lora-scaled: each adapter loaded against m and the set given
 * to m's own conversation (which keeps them: the handles are not needed
 * after). 0, or 1 after printing why. */
int cli_apply_adapters(octo_model *m, const char *const *paths, const float *scales, int n);
/* The embedded model (models/README.md) for a command given none: *model set to it, and a note on
 * stderr naming it; 0, or a usage error that says how to name one (cmd: the command's name). */
int cli_default_model(const char **model, const char *cmd);
/* The ids of text into a malloc'd array; 0, or 1 after printing why. */
int tokenize_all(octo_model *m, const char *text, size_t len, int add_special, int parse_special, int32_t **out,
                 int *n_out);

int cmd_run(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_upcycle(int argc, char **argv);
int cmd_moe_prep(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_fedavg(int argc, char **argv);
int cmd_finetune(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_deploy(int argc, char **argv);
int cmd_serve(int argc, char **argv);
/* The mean KL divergence (nats) of the next-token distributions over the
 * first n_ctx tokens of file, fed one at a time, with every expert no
 * token chose first served by its 2-bit copy (OCTO_MOE_INT2_ALL) against
 * every expert whole; 0 or 1 (printed). */
int eval_int2_kld(const char *path, const char *file, long n_ctx, double *kld, int *n_positions);

#endif
