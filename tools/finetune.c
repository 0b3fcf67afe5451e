/*
 * finetune — `octo finetune -m MODEL -f DATA -o OUT.gguf [...]`: a LoRA
 * adapter, or every weight of a small model (a draft, distilled from its
 * target with --distill), trained on the device (octo.h: octo_finetune), its progress on
 * stderr. Ctrl-C stops after the step under way, with a checkpoint the same
 * command resumes from.
 */
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "options.h"

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

typedef struct {
    int quiet;
    double last_print;
} progress_out;

static void clock_text(double s, char *buf, size_t n) {
    if (!isfinite(s)) snprintf(buf, n, "?");
    else if (s < 60) snprintf(buf, n, "%.0fs", s);
    else if (s < 3600) snprintf(buf, n, "%dm%02ds", (int)s / 60, (int)s % 60);
    else snprintf(buf, n, "%dh%02dm", (int)s / 3600, (int)s % 3600 / 60);
}

/* A line per second at most (and the last step's), unless quiet; non-zero once Ctrl-C came. */
static int on_progress(void *user, const octo_finetune_progress *p) {
    progress_out *o = user;
    if (!o->quiet && (p->elapsed_s - o->last_print >= 1.0 || p->step == p->steps || interrupted)) {
        char eta[32];
        clock_text(p->eta_s, eta, sizeof eta);
        fprintf(stderr, "step %lld/%lld  loss %.4f  lr %.2e  |g| %.3f  %.0f tok/s  ETA %s\n", (long long)p->step,
                (long long)p->steps, p->loss, p->lr, p->grad_norm, p->tokens_per_s, eta);
        o->last_print = p->elapsed_s;
    }
    return interrupted;
}

static void report(const char *out, const octo_finetune_result *r, const octo_finetune_params *p) {
    const bool distill = p->distill != NULL, clipped = p->fl_clip > 0;
    const double delta = p->fl_delta > 0 ? p->fl_delta : 1e-5;
    const int round = p->fl_round;
    if (r->resumed_at) fprintf(stderr, "resumed from the checkpoint at step %lld\n", (long long)r->resumed_at);
    fprintf(stderr, "%s: %d %s, %llu values; %lld sequences (%lld tokens, %lld learnt from)", out, r->n_matrices,
            r->full ? "tensors (the whole model)" : "matrices", (unsigned long long)r->adapter_values, (long long)r->sequences, (long long)r->tokens, (long long)r->counted);
    if (r->conversations) fprintf(stderr, ", %d conversations (%d cut)", r->conversations, r->conversations_cut);
    if (r->fl_groups)
        fprintf(stderr, "\nupdate: %d of %d groups sent, %.1f KiB of values (a dense update: %.1f KiB, %.1f %%)",
                r->fl_groups_sent, r->fl_groups, r->fl_bytes / 1024.0, r->fl_dense_bytes / 1024.0,
                100.0 * (double)r->fl_bytes / (double)r->fl_dense_bytes);
    if (r->fl_groups && isfinite(r->fl_epsilon))
        fprintf(stderr, "\nprivacy: norm %.4g clipped, noised: (epsilon %.3g, delta %g) this round, epsilon %.3g over "
                "the %d rounds", r->fl_norm, r->fl_epsilon, delta, r->fl_epsilon_rounds, round);
    else if (r->fl_groups && clipped)
        fprintf(stderr, "\nprivacy: norm %.4g clipped, no noise (no guarantee)", r->fl_norm);
    if (r->experts)
        fprintf(stderr, "\nexperts: %d of %d reached by training tokens (the others unchanged; tokens per expert in "
                "training.expert_tokens)", r->experts_reached, r->experts);
    fprintf(stderr, "\nactivations: %.1f MiB a sequence%s", r->activation_bytes / 1048576.0,
            r->recompute ? ", each layer computed again in the backward" : "");
    if (r->memory_budget) fprintf(stderr, " (budget %.0f MiB)", r->memory_budget / 1048576.0);
    if (r->pressed) fprintf(stderr, "; %lld sequences computed again under memory pressure", (long long)r->pressed);
    if (r->thread_changes)
        fprintf(stderr, "; %d threads at the end (changed %d times for the CPU there was)", r->threads, r->thread_changes);
    fprintf(stderr, "\ntraining loss %.4f -> %.4f over %lld steps in %.1f s\n", r->first_loss, r->last_loss,
            (long long)r->steps_run, r->seconds);
    if (distill && !isnan(r->valid_after))
        fprintf(stderr, "held-out KL divergence from the target %.4f -> %.4f nats per token\n", r->valid_before,
                r->valid_after);
    else if (!isnan(r->valid_after) && !isnan(r->valid_before))
        fprintf(stderr, "held-out loss %.4f -> %.4f (perplexity %.3f -> %.3f)\n", r->valid_before, r->valid_after,
                exp(r->valid_before), exp(r->valid_after));
    else if (!isnan(r->valid_after)) /* resumed: the loss before the first step was not measured again */
        fprintf(stderr, "held-out loss %.4f (perplexity %.3f)\n", r->valid_after, exp(r->valid_after));
}

int cmd_finetune(int argc, char **argv) {
    cli_args a = cli_defaults();
    const int bad = cli_parse(CMD_FINETUNE, argc, argv, &a);
    if (bad) return bad;
    if (!a.model || !a.file || !a.out) return usage_error("finetune needs -m MODEL, -f DATA and -o OUT.gguf");
    octo_finetune_params p = a.ft;
    p.data = a.file, p.output = a.out, p.type = a.type;
    progress_out po = {.quiet = a.quiet, .last_print = -1.0};
    p.on_progress = on_progress, p.user = &po;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    octo_client *c = octo_client_new(NULL);
    if (!c) return fail("out of memory");
    octo_finetune_result r;
    const octo_status st = octo_finetune(c, a.model, &p, &r);
    int rc = 0;
    if (st == OCTO_ERR_CANCELLED) {
        fail("%s: run the same command to go on", octo_last_error(c));
        rc = 130; /* as a shell reports a command Ctrl-C stopped */
    } else if (st)
        rc = fail("%s", octo_last_error(c));
    else report(a.out, &r, &p);
    octo_client_free(c);
    return rc;
}
