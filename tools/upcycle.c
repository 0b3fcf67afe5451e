/*
 * octo upcycle — a dense model into a Mixture-of-Experts model
 * (convert/upcycle.h has the method, docs/upcycling.md the measurements).
 * Progress on stderr; at the end, what the new model measured on held-out
 * text, and its routing statistics per layer, on stdout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <unistd.h>

#include "cli.h"
#include "options.h"
#include "convert/upcycle.h" /* internal: the conversion itself */
#include "core/quant.h"      /* internal: type names for the report */

/* On a terminal one line per step, redrawn; elsewhere (a log) the step's last count only. */
static void show_progress(void *ctx, const char *what, int done, int total) {
    (void)ctx;
    const int tty = isatty(STDERR_FILENO);
    if (!tty && done < total) return;
    fprintf(stderr, "%supcycle: %s %d/%d%s", tty ? "\r" : "", what, done, total, done >= total ? "\n" : "");
    fflush(stderr);
}

static const char *type_name(uint32_t t) {
    const quant_traits *tr = quant_traits_of(t);
    return tr ? tr->name : "?";
}

/* What the MoE measured against the dense model on the held-out text, and its routing per layer. */
static void print_quality(const upcycle_report *r) {
    printf("held-out:   %d tokens\n", r->heldout_tokens);
    printf("perplexity: dense %.4f, upcycled %.4f (nll %.4f -> %.4f nats/token)\n", exp(r->dense_nll),
           exp(r->moe_nll), r->dense_nll, r->moe_nll);
    printf("kld:        %.4f nats/token (mean KL(dense || upcycled)); greedy agreement %.1f%%\n", r->kld_mean,
           100.0 * r->top1);
    printf("near-ties:  %.3f%% of routed tokens\n", 100.0 * r->tie_flips);
    printf("layer  load-max  load-cv  repeat  recall(ffn-in)  recall(residual)\n");
    for (int l = 0; l < r->n_layer; l++) {
        printf("%5d  %8.2f  %7.3f  %5.1f%%", l, r->layer[l].load_max, r->layer[l].load_cv, 100.0 * r->layer[l].repeat);
        if (l == 0) printf("  %14s  %16s\n", "-", "-");
        else printf("  %13.1f%%  %15.1f%%\n", 100.0 * r->layer[l].recall_ffn, 100.0 * r->layer[l].recall_resid);
    }
}

static void print_report(const upcycle_opts *o, const upcycle_report *r) {
    printf("upcycled:   %s -> %s: %d experts of %d neurons (%d zero), %d used per token", o->input, o->output,
           o->n_expert, r->n_ff_expert, r->n_pad, o->n_expert_used);
    if (r->n_shared) printf(", and a shared expert of %d", r->n_shared);
    printf("; %d of %d neurons active per token\n", r->n_shared + o->n_expert_used * r->n_ff_expert, r->n_ff);
    printf("method:     split %s, router %s, combine %s, %d calibration tokens\n", upcycle_split_name(o->split),
           upcycle_router_name(o->router), upcycle_combine_name(o->combine), r->calib_tokens);
    if (r->n_retyped)
        printf("types:      experts' down rows of %d values cannot hold %s blocks: written as %s (%d of %d layers)\n",
               r->n_ff_expert, type_name(r->down_type_in), type_name(r->down_type_out), r->n_retyped, r->n_layer);
    if (!r->heldout_tokens) {
        printf("quality:    not measured (no held-out text: give -f TEXT)\n");
        return;
    }
    print_quality(r);
}

/* The options into a (upcycle's own in a->upcycle); 0 or a usage error's exit code. */
static int parse_args(int argc, char **argv, cli_args *a) {
    *a = cli_defaults();
    a->upcycle = upcycle_defaults();
    a->upcycle.n_expert = a->upcycle.n_expert_used = 0;
    const int rc = cli_parse(CMD_UPCYCLE, argc, argv, a);
    if (rc) return rc;
    a->upcycle.input = a->model;
    if (a->measure && (a->out || a->upcycle.n_expert || a->upcycle.n_expert_used))
        return usage_error("upcycle --measure writes nothing and builds nothing: no -o, --experts or --experts-used");
    if (a->measure) return a->model && a->file ? 0 : usage_error("upcycle --measure MOE.gguf needs -m DENSE.gguf and -f TEXT");
    if (!a->model || !a->out) return usage_error("upcycle needs -m DENSE.gguf and -o MOE.gguf");
    if (!a->upcycle.n_expert) return usage_error("upcycle needs --experts E and --experts-used K");
    if (!a->upcycle.n_expert_used) return usage_error("upcycle needs --experts-used K");
    a->upcycle.output = a->out;
    return 0;
}

int cmd_upcycle(int argc, char **argv) {
    cli_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc;
    upcycle_opts o = a.upcycle;
    const char *text_path = a.file;
    char *text = NULL;
    size_t len = 0;
    if (text_path && read_text_file(text_path, &text, &len)) return 1;
    o.text = text;
    o.text_len = len;
    o.progress = show_progress;
    upcycle_report *r = calloc(1, sizeof *r);
    err_t err = {0};
    if (!r) rc = fail("out of memory");
    else if (a.measure && upcycle_measure_file(&o, a.measure, r, &err))
        rc = fail("upcycle --measure: %s", err.msg);
    else if (a.measure) print_quality(r);
    else if (upcycle_run(&o, r, &err))
        rc = fail("upcycle: %s%s", err.msg, text_path ? "" : " (-f TEXT gives one; --split, --router choose)");
    else print_report(&o, r);
    free(r);
    free(text);
    return rc;
}
