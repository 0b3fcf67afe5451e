/*
 * logits — `octo logits`: the logits of every position of a token list or a
 * prompt, as little-endian float32, for comparison with a reference.
 */
#include <stdlib.h>
#include <string.h>

#include "octo.h"
#include "cli.h"
#include "options.h"
#include "core/atomic_write.h" /* internal: the output file written whole or not at all */

int cmd_logits(int argc, char **argv) {
    cli_args a = cli_defaults();
    const int bad = cli_parse(CMD_LOGITS, argc, argv, &a);
    if (bad) return bad;
    const char *path = a.model, *tokens_arg = a.tokens, *out_path = a.out, *prompt = a.prompt;
    if (!path || (!tokens_arg && !prompt) || (tokens_arg && prompt) || !out_path)
        return usage_error("logits needs -m MODEL, one of --tokens \"IDS\" or --prompt TEXT, and --out FILE");
    int32_t *tokens = NULL;
    int n = 0;
    if (tokens_arg) {
        if (!parse_tokens(tokens_arg, &tokens, &n)) return usage_error("--tokens takes space-separated non-negative ids");
        if (n == 0) {
            free(tokens);
            return usage_error("--tokens is empty");
        }
    }
    octo_client *c = octo_client_new(NULL);
    octo_model_options mo = octo_model_options_defaults();
    mo.n_ctx = (int)a.n_ctx;
    mo.moe = a.mo.moe;
    mo.kv_type = OCTO_KV_F32; /* logits for comparison with a reference: an exact cache */
    mo.kv.compress = 0;
    mo.auto_draft = OCTO_DRAFT_NONE;
    octo_model *m = c ? octo_load_model(c, path, &mo) : NULL;
    int rc = 0;
    float *logits = NULL;
    if (!m) rc = fail("%s", c ? octo_last_error(c) : "out of memory");
    if (!rc) rc = cli_apply_adapters(m, a.lora.path, a.lora.scale, a.lora.n);
    err_t check = {0};
    if (!rc && atomic_file_check(out_path, &check)) rc = fail("%s", check.msg); /* before the work */
    if (!rc && prompt && tokenize_all(m, prompt, strlen(prompt), 1, 0, &tokens, &n)) rc = 1;
    if (!rc) {
        octo_model_info in = octo_model_info_get(m);
        logits = malloc(sizeof(float) * (size_t)n * (size_t)in.n_vocab);
        if (!logits) rc = fail("out of memory for %d x %d logits", n, in.n_vocab);
        else if (octo_eval(m, tokens, n, logits, OCTO_LOGITS_ALL) != OCTO_OK) rc = fail("%s", octo_model_error(m));
        if (!rc) {
            /* float32 little-endian: the host order on every target octo builds for */
            atomic_file f;
            err_t err = {0};
            if (atomic_file_open(&f, out_path, &err) ||
                atomic_file_write(&f, logits, sizeof(float) * (size_t)n * (size_t)in.n_vocab, &err) ||
                atomic_file_commit(&f, &err)) {
                atomic_file_abort(&f);
                rc = fail("%s", err.msg);
            }
        }
    }
    free(logits);
    free(tokens);
    octo_model_free(m);
    octo_client_free(c);
    return rc;
}
