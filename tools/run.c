/*
 * run — `octo run`: a continuation streamed to stdout (its --chat is
 * chat.c), the --stats table, and what a stream that stopped short exits with.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "octo.h"
#include "cli.h"
#include "run.h"
#include "stats.h"

/* The stream Ctrl-C cancels: the one file-scope variable of the commands, as
 * a signal handler gets no argument to find it through. */
static octo_stream *volatile g_running;

static void on_sigint(int sig) {
    (void)sig;
    octo_stream *st = g_running;
    if (st) octo_stream_cancel(st); /* an atomic store: async-signal-safe */
}

static void show_prefill(void *user, int done, int total) {
    (void)user;
    if (total < 256) return; /* short prompts need no progress line */
    fprintf(stderr, "\rprompt: %d/%d tokens", done, total);
    if (done == total) fputs("\r\033[K", stderr);
    fflush(stderr);
}

/* --stats --json: the figures as one JSON object on stderr (the list's run
 * column, OCTO_STATS in octo.h). */
static void print_stats_json(const octo_stats *s) {
    fputc('{', stderr);
    stats_print_json(stderr, s, STATS_RUN, 1, 99, 0);
    fputs("}\n", stderr);
}

void print_stats(const octo_stats *s) {
    fprintf(stderr, "prompt       %6d tokens (%d evaluated) in %8.1f ms  %9.1f tokens/s\n", s->prompt_tokens,
            s->prefill_tokens, s->prefill_ms, s->prefill_tokens_per_s);
    fprintf(stderr, "generation   %6d tokens in %8.1f ms  %9.1f tokens/s\n", s->decode_tokens, s->decode_ms,
            s->decode_tokens_per_s);
    fprintf(stderr, "first token  %8.1f ms\n", s->time_to_first_token_ms);
    fprintf(stderr, "context      %6d / %d tokens, KV cache %.2f MiB (%.0f%% of %.2f MiB)", s->context_tokens,
            s->context_size, mib(s->kv_bytes), 100.0 * s->kv_cache_utilization, mib(s->kv_budget_bytes));
    if (s->kv_draft_bytes) fprintf(stderr, ", the draft's %.2f MiB of it", mib(s->kv_draft_bytes));
    fputc('\n', stderr);
    if (s->speculative_acceptance_rate >= 0 && s->spec_tree_passes)
        fprintf(stderr,
                "speculation  %s: %d of %d tree nodes accepted in %d verify passes (%.2f tokens a pass, %d off "
                "the first line), last tree %d nodes; %.0f ms proposing, %.0f ms verifying\n",
                s->spec_proposer, s->spec_accepted, s->spec_proposed, s->spec_steps,
                s->spec_steps ? 1.0 + (double)s->spec_accepted / s->spec_steps : 0.0, s->spec_off_line, s->spec_k,
                s->spec_draft_ms, s->spec_ms - s->spec_draft_ms);
    else if (s->speculative_acceptance_rate >= 0)
        fprintf(stderr,
                "speculation  %s: %d of %d drafted tokens accepted (%.1f%%) in %d verify passes, k now %d; "
                "%.0f ms proposing, %.0f ms verifying\n",
                s->spec_proposer, s->spec_accepted, s->spec_proposed, 100.0 * s->speculative_acceptance_rate,
                s->spec_steps, s->spec_k, s->spec_draft_ms, s->spec_ms - s->spec_draft_ms);
    if (s->lookahead_ngrams)
        fprintf(stderr, "lookahead    the window made %d n-grams, %d of them new to the pool; %d of %d drafts from the pool accepted\n",
                s->lookahead_ngrams, s->lookahead_new, s->lookahead_pool_accepted, s->lookahead_pool_proposed);
    if (s->spec_ahead_used + s->spec_ahead_dropped)
        fprintf(stderr, "beside       %d draft steps run while the model verified: %d used by the next pass, %d dropped\n",
                s->spec_ahead_used + s->spec_ahead_dropped, s->spec_ahead_used, s->spec_ahead_dropped);
    if (s->spec_note[0]) fprintf(stderr, "speculation  %s\n", s->spec_note);
    if (s->prefill_lookahead_tokens || s->prompt_tokens_dropped)
        fprintf(stderr, "prompt       the draft read it and wrote %d tokens ahead in %.1f ms%s; %d prompt tokens dropped\n",
                s->prefill_lookahead_tokens, s->prefill_draft_ms,
                s->prefill_speckv ? ", its lookahead chose the entries kept" : "", s->prompt_tokens_dropped);
    if (s->expert_cache_hit_rate >= 0)
        fprintf(stderr,
                "experts      %.1f%% cache hits; %.2f MiB read from the file and %.2f ms waited on it per token; "
                "cache %.2f of %.2f MiB (experts: %.2f MiB)\n",
                100.0 * s->expert_cache_hit_rate, mib((uint64_t)s->expert_bytes_read_per_token),
                s->expert_stall_ms_per_token, mib(s->expert_cache_bytes), mib(s->expert_cache_capacity),
                mib(s->expert_bytes));
    if (s->expert_int2_loads || s->expert_int2_errors)
        fprintf(stderr, "experts      %llu 2-bit copies read, %llu lookups served by one, %llu promoted, %llu failed\n",
                (unsigned long long)s->expert_int2_loads, (unsigned long long)s->expert_int2_served,
                (unsigned long long)s->expert_int2_promotions, (unsigned long long)s->expert_int2_errors);
    if (s->expert_prefetch_recall >= 0)
        fprintf(stderr,
                "experts      %llu predicted ones read ahead (in %.0f%% of the decode passes); reads ahead served "
                "%.1f%% of the lookups that needed the file in time\n",
                (unsigned long long)s->expert_prefetched, 100.0 * (s->expert_readahead_share > 0 ? s->expert_readahead_share : 0),
                100.0 * s->expert_prefetch_recall);
    if (s->expert_lookups)
        fprintf(stderr,
                "experts      %llu fetched; the next-layer prediction named %.1f%% of the routed experts "
                "(%.1f%% of what it named was routed)\n",
                (unsigned long long)s->expert_lookups, 100.0 * s->expert_prediction_rate,
                100.0 * s->expert_prediction_precision);
    if (s->expert_batch_saved_bytes_per_token >= 0)
        fprintf(stderr, "experts      a token fed in a batch (prompt, verification) saved %.2f MiB of expert reads: "
                "its batch fetched each expert once\n", mib((uint64_t)s->expert_batch_saved_bytes_per_token));
    if (s->kv_spill_on)
        fprintf(stderr, "KV spill     %lld blocks on file, %lld written, %lld read back (%.0f%% hits, %.1f us each)%s%s\n",
                (long long)s->kv_blocks_spilled, (long long)s->kv_spill_writes, (long long)s->kv_spill_reads,
                100.0 * s->kv_spill_hit_rate, s->kv_spill_read_us, s->kv_spill_note[0] ? "; " : "", s->kv_spill_note);
    fprintf(stderr, "memory       %.1f MiB resident (PSS %.1f MiB), %.1f MiB peak\n", mib(s->rss_bytes),
            mib(octo_memory_usage().pss_bytes), mib(s->peak_rss_bytes));
    if (s->warning[0]) fprintf(stderr, "warning      %s\n", s->warning);
}

/* A stream that ended short of what was asked is not a success: Ctrl-C
 * exits 130 as a shell expects, a full context 1; each with one line. */
static int stop_status(octo_stream *st) {
    switch (octo_stream_stop_reason(st)) {
    case OCTO_STOP_CANCELLED:
        fail("interrupted");
        return 130;
    case OCTO_STOP_CONTEXT_FULL:
        return fail("stopped after %d tokens: the context is full (a larger --ctx holds more)",
                    octo_stream_token_count(st));
    default: return 0;
    }
}

/* Drain a stream to stdout (text, or ids on one line). Returns 0 or 1 after printing the error. */
int drain(octo_stream *st, int ids, char **reply, size_t *reply_len) {
    g_running = st;
    int printed = 0; /* ids printed so far */
    for (const char *piece; (piece = octo_stream_next(st));) {
        if (ids) {
            const int32_t *all;
            int n = octo_stream_tokens(st, &all);
            for (; printed < n; printed++) printf(printed ? " %d" : "%d", all[printed]);
        } else {
            fwrite(piece, 1, (size_t)octo_stream_piece_size(st), stdout);
        }
        fflush(stdout);
        if (reply) {
            size_t n = strlen(piece);
            char *more = realloc(*reply, *reply_len + n + 1);
            if (more) {
                memcpy(more + *reply_len, piece, n + 1);
                *reply = more;
                *reply_len += n;
            }
        }
    }
    g_running = NULL;
    if (ids) {
        const int32_t *all;
        int n = octo_stream_tokens(st, &all);
        for (; printed < n; printed++) printf(printed ? " %d" : "%d", all[printed]);
        putchar('\n');
    }
    fflush(stdout);
    if (octo_stream_status(st) != OCTO_OK) return fail("%s", octo_stream_error(st));
    return stop_status(st);
}

static int parse_sampling(const char *a, const char *v, octo_generate_params *gp, int *consumed) {
    long n;
    *consumed = 1;
    if (!strcmp(a, "-n")) { if (!v || !parse_long(v, 1, 1L << 24, &n)) return usage_error("-n takes a positive count"); gp->max_tokens = (int)n; }
    else if (!strcmp(a, "--temp")) { if (!v || !parse_float(v, &gp->temperature)) return usage_error("--temp takes a number"); }
    else if (!strcmp(a, "--top-k")) { if (!v || !parse_long(v, 0, 1L << 24, &n)) return usage_error("--top-k takes a count >= 0"); gp->top_k = (int)n; }
    else if (!strcmp(a, "--top-p")) { if (!v || !parse_float(v, &gp->top_p)) return usage_error("--top-p takes a number"); }
    else if (!strcmp(a, "--min-p")) { if (!v || !parse_float(v, &gp->min_p)) return usage_error("--min-p takes a number"); }
    else if (!strcmp(a, "--repeat-penalty")) { if (!v || !parse_float(v, &gp->repeat_penalty)) return usage_error("--repeat-penalty takes a number"); }
    else if (!strcmp(a, "--seed")) {
        char *end;
        errno = 0;
        unsigned long long s = v ? strtoull(v, &end, 10) : 0;
        if (!v || errno || end == v || *end) return usage_error("--seed takes a whole number");
        gp->seed = s;
    } else {
        *consumed = 0;
        return 0;
    }
    return 0;
}

/* A prompt from a file, or from stdin for "-"; NULL after printing why not. */
static char *read_prompt(const char *file) {
    char *text = NULL;
    size_t len = 0;
    if (read_text_file(!strcmp(file, "-") ? "/dev/stdin" : file, &text, &len)) return NULL;
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r')) text[--len] = '\0'; /* a file's last newline */
    return text;
}

/* run's options; positional MODEL and PROMPT as well as -m / -p. */
typedef struct {
    const char *path, *prompt, *prompt_file, *draft, *cache_dir, *device;
    int chat, ids, stats, json, seeded, draft_threads;
    long n_ctx, threads;
    octo_moe_options moe; /* --moe-cache, --moe-policy, ... (zero: the defaults) */
} run_args;

static int parse_run(int argc, char **argv, run_args *r, octo_generate_params *gp) {
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int used, rc = parse_sampling(a, v, gp, &used);
        if (!rc && !used) rc = parse_moe(a, v, &r->moe, &used);
        if (rc) return rc;
        if (used) {
            r->seeded |= !strcmp(a, "--seed");
            i++;
            continue;
        }
        if (!strcmp(a, "-m") && v) { r->path = v; i++; }
        else if (!strcmp(a, "-p") && v) { r->prompt = v; i++; }
        else if (!strcmp(a, "-f") && v) { r->prompt_file = v; i++; }
        else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && v) {
            if (!parse_long(v, 1, OCTO_MAX_THREADS, &r->threads)) return usage_error("-t takes 1..%d", OCTO_MAX_THREADS);
            i++;
        }
        else if (!strcmp(a, "--json")) r->json = 1;
        else if (a[0] != '-' || !strcmp(a, "-")) { /* positional: the model, then the prompt ("-": stdin) */
            if (!r->path) r->path = a;
            else if (!r->prompt && !r->prompt_file) *(strcmp(a, "-") ? &r->prompt : &r->prompt_file) = a;
            else return usage_error("run: one model and one prompt, not also '%s'", a);
        }
        else if (!strcmp(a, "--ctx") && v) { if (!parse_long(v, 1, 1L << 24, &r->n_ctx)) return usage_error("--ctx takes a positive count"); i++; }
        else if (!strcmp(a, "--chat")) r->chat = 1;
        else if (!strcmp(a, "--ids")) r->ids = 1;
        else if (!strcmp(a, "--stats")) r->stats = 1;
        else if (!strcmp(a, "--spec") && v) {
            int mode;
            if (!parse_spec_mode(v, &mode)) return usage_error("--spec is one of %s", spec_mode_names());
            gp->spec = (octo_spec_mode)mode;
            i++;
        }
        else if (!strcmp(a, "--lookahead") && v) {
            if (!parse_lookahead(v, &gp->lookahead_w, &gp->lookahead_n, &gp->lookahead_g))
                return usage_error("--lookahead takes W,N,G (e.g. 5,3,4)");
            i++;
        }
        else if (!strcmp(a, "--draft") && v) { r->draft = v; i++; }
        else if (!strcmp(a, "--cache-dir") && v) { r->cache_dir = v; i++; }
        else if (!strcmp(a, "--device") && v) { r->device = v; i++; }
        else if (!strcmp(a, "--spec-tree") && v) {
            if (!parse_spec_tree(v, &gp->spec_tree)) return usage_error("--spec-tree takes auto, off or 1..31 nodes");
            i++;
        }
        else if (!strcmp(a, "--spec-ahead") && v) {
            if (!parse_on_off(v, &gp->spec_ahead)) return usage_error("--spec-ahead takes on or off");
            i++;
        }
        else if ((!strcmp(a, "-td") || !strcmp(a, "--threads-draft")) && v) {
            long t;
            if (!parse_long(v, 1, OCTO_MAX_THREADS, &t)) return usage_error("-td takes 1..%d", OCTO_MAX_THREADS);
            r->draft_threads = (int)t;
            i++;
        }
        else if (!strcmp(a, "--spec-k") && v) {
            long k;
            if (!parse_long(v, 1, 10, &k)) return usage_error("--spec-k takes 1..10");
            gp->spec_k = (int)k;
            i++;
        }
        else if (!strcmp(a, "--prompt-compress") && v) {
            if (!parse_float(v, &gp->prompt_compress) || !(gp->prompt_compress > 0.0f && gp->prompt_compress <= 1.0f))
                return usage_error("--prompt-compress takes the share of the prompt to keep, in (0, 1], not '%s'", v);
            i++;
        }
        else return unknown_option("run", a);
    }
    if (!r->path) return usage_error("run needs a model: octo run MODEL \"PROMPT\" (or -m MODEL -p PROMPT)");
    if (r->prompt && r->prompt_file) return usage_error("run: a prompt (-p) or a prompt file (-f), not both");
    if (!r->chat && !r->prompt && !r->prompt_file) return usage_error("run needs a prompt: -p PROMPT, -f FILE, - (stdin) or --chat");
    return 0;
}

int cmd_run(int argc, char **argv) {
    run_args r = {0};
    octo_generate_params gp = octo_generate_params_defaults();
    int rc = parse_run(argc, argv, &r, &gp);
    if (rc) return rc;
    char *file_prompt = r.prompt_file ? read_prompt(r.prompt_file) : NULL;
    if (r.prompt_file && !file_prompt) return 1;
    const char *prompt = file_prompt ? file_prompt : r.prompt;
    const int chat = r.chat, ids = r.ids;
    /* sampling without --seed: a new text each run (a fixed seed repeats one) */
    if (!r.seeded) gp.seed = (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)getpid();
    if (isatty(STDERR_FILENO)) gp.on_prefill = show_prefill; /* progress only where a person reads stderr */
    const model_request req = {
        .path = r.path, .draft = r.draft, .cache_dir = r.cache_dir, .device = r.device, .n_ctx = (int)r.n_ctx,
        .auto_draft = gp.spec == OCTO_SPEC_SELF ? OCTO_DRAFT_SELF
                      : gp.spec == OCTO_SPEC_NONE || gp.spec == OCTO_SPEC_LOOKAHEAD ? OCTO_DRAFT_NONE
                                                                                   : OCTO_DRAFT_AUTO,
        .threads = (int)r.threads, .draft_threads = r.draft_threads, .moe = r.moe};
    octo_client *c = NULL;
    octo_model *m = open_model(&req, &c);
    if (!m) {
        free(file_prompt);
        octo_client_free(c);
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    int started = 0; /* streams that ran: without one there are no stats to show */
    if (!chat) {
        octo_stream *st = octo_generate(m, prompt, &gp);
        if (!st) rc = fail("%s", octo_model_error(m));
        else {
            started++;
            rc = drain(st, ids, NULL, NULL);
            octo_stream_free(st);
        }
        if (!ids) putchar('\n');
    } else {
        rc = chat_session(m, prompt, ids, &gp, &started);
    }
    if (r.stats && started) {
        fflush(stdout);
        octo_stats s = octo_model_stats(m);
        if (r.json) print_stats_json(&s);
        else print_stats(&s);
    }
    free(file_prompt);
    if (!rc && started && r.moe.trace && octo_model_stats(m).expert_trace_failed)
        rc = fail("could not write the whole expert trace to %s", r.moe.trace);
    octo_model_free(m);
    octo_client_free(c);
    return rc;
}
