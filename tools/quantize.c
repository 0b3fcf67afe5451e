/*
 * octo quantize — a model's weights in another type (convert/quantize.h
 * has the rules). Progress on stderr, a line per tensor; at the end the
 * sizes on stdout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "options.h"
#include "convert/quantize.h" /* internal: the conversion itself */
#include "core/quant.h"       /* internal: type names for the progress lines */

static const char *type_name(uint32_t t) {
    const quant_traits *tr = quant_traits_of(t);
    return tr ? tr->name : "?";
}

static void show_progress(void *ctx, int index, int count, const char *name, uint32_t from, uint32_t to) {
    (void)ctx;
    fprintf(stderr, "quantize: [%d/%d] %-36s %s -> %s\n", index + 1, count, name, type_name(from), type_name(to));
}

int cmd_quantize(int argc, char **argv) {
    cli_args a = cli_defaults();
    const int bad = cli_parse(CMD_QUANTIZE, argc, argv, &a);
    if (bad) return bad;
    quantize_opts o = {.input = a.model, .output = a.out, .type = a.type, .n_threads = (int)a.threads,
                       .calib_tokens = (int)a.calib_tokens, .types_from = a.types_from,
                       .progress = a.quiet ? NULL : show_progress};
    const char *calib = a.file;
    if (!o.input || !o.output || !o.type) return usage_error("quantize needs -m IN.gguf -o OUT.gguf --type T");
    if (quantize_type_of(o.type) < 0) {
        err_t err = {0};
        quantize_report rep;
        quantize_run(&o, &rep, &err); /* only to name the types in the message */
        return usage_error("%s", err.msg);
    }
    quantize_report rep;
    err_t err = {0};
    char *text = NULL;
    if (calib && read_text_file(calib, &text, &o.calib_len)) return 1; /* it said why */
    o.calib_text = text;
    const int rc = quantize_run(&o, &rep, &err);
    free(text);
    if (rc) return fail("quantize: %s", err.msg);
    printf("quantized:  %s -> %s as %s: %d of %d tensors converted, %.2f MiB -> %.2f MiB of tensor data\n", o.input,
           o.output, o.type, rep.n_converted, rep.n_tensors, rep.bytes_in / 1048576.0, rep.bytes_out / 1048576.0);
    if (calib)
        printf("importance: %d matrices rounded by the importance of their inputs over %d tokens of %s\n",
               rep.n_weighted, rep.calib_tokens, calib);
    if (rep.n_fallback) printf("fallback:   %d matrices in a nearer type; first: %s\n", rep.n_fallback, rep.fallback);
    return 0;
}
