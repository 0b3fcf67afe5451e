/*
 * run — `octo run`: a continuation streamed to stdout (its --chat is
 * chat.c), the --stats table, and what a stream that stopped short exits with.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "octo.h"
#include "cli.h"
#include "notes.h"
#include "options.h"
#include "run.h"
#include "stats.h"

/* The stream Ctrl-C cancels: file-scope, as a signal handler gets no argument
 * to find it through (it is the only mutable one the commands outside serve have). */
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
    fputs(", \"notes\": ", stderr); /* what was said once on stderr (notes.h) */
    notes_print_json(stderr);
    fputs("}\n", stderr);
}

/* Memory pressure (docs/adaptation.md): one line always (the watcher's
 * state), a second only once memory was given back. */
static void print_pressure(const octo_stats *s) {
    static const char *const level[] = {"none", "low", "moderate", "critical"};
    const int l = s->mem_level >= 0 && s->mem_level <= 3 ? s->mem_level : 0;
    fprintf(stderr, "pressure     level %s, %d trims, %d regrows; weights %.1f MiB packed; %s\n", level[l], s->mem_trims,
            s->mem_regrows, mib(s->weights_packed_bytes), s->mem_watch);
    if (s->mem_trims)
        fprintf(stderr, "pressure     given back: weights %.1f MiB, draft %.1f MiB, experts %.1f MiB, KV %.1f MiB, "
                "adapters %.1f MiB; %s\n", mib(s->mem_released_weights_bytes), mib(s->mem_released_draft_bytes),
                mib(s->mem_released_experts_bytes), mib(s->mem_released_kv_bytes), mib(s->mem_released_adapter_bytes),
                s->mem_note);
    if (s->adapter_bytes) /* docs/adapters.md: beside the weights, never merged (a merged F16 copy was 3x slower) */
        fprintf(stderr, "adapters     %.1f MiB, applied beside the base's weights at every token (not merged)\n",
                mib(s->adapter_bytes));
}

/* Token latency (OCTO_STATS, octo.h: each token's wait for the decode work before it). */
static void print_latency(const octo_stats *s) {
    if (s->decode_latency_tokens <= 0) {
        fprintf(stderr, "latency      unknown (%s)\n", s->decode_tokens < 2 ? "fewer than 2 tokens" : "no memory for it");
        return;
    }
    fprintf(stderr, "latency      p50 %.2f ms, p90 %.2f, p95 %.2f, p99 %.2f, max %.2f; spread %.2f (sd/mean) over %d tokens\n",
            s->decode_latency_p50_ms, s->decode_latency_p90_ms, s->decode_latency_p95_ms, s->decode_latency_p99_ms,
            s->decode_latency_max_ms, s->decode_latency_cv, s->decode_latency_tokens);
}

void print_stats(const octo_stats *s) {
    fprintf(stderr, "prompt       %6d tokens (%d evaluated) in %8.1f ms  %9.1f tokens/s\n", s->prompt_tokens,
            s->prefill_tokens, s->prefill_ms, s->prefill_tokens_per_s);
    fprintf(stderr, "generation   %6d tokens in %8.1f ms  %9.1f tokens/s\n", s->decode_tokens, s->decode_ms,
            s->decode_tokens_per_s);
    fprintf(stderr, "first token  %8.1f ms\n", s->time_to_first_token_ms);
    print_latency(s);
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
    print_pressure(s);
    fprintf(stderr, "cpu          %s; %d changes while running, %d probes, idle workers spin %d rounds, %d tokens paced\n",
            s->cpu_note, s->cpu_changes, s->cpu_probes, s->cpu_spin, s->cpu_paced);
    fprintf(stderr, "kernels      %s\n", s->cpu_kernels);
    if (s->warning[0]) fprintf(stderr, "warning      %s\n", s->warning);
}

/* A stream that ended short of what was asked is not a success: Ctrl-C
 * exits 130 as a shell expects, a full context 1 (unless -n -1 asked for
 * that); each with one line. */
static int stop_status(octo_stream *st, int until_full) {
    switch (octo_stream_stop_reason(st)) {
    case OCTO_STOP_CANCELLED:
        fail("interrupted");
        return 130;
    case OCTO_STOP_CONTEXT_FULL:
        if (until_full) return 0;
        return fail("stopped after %d tokens: the context is full (a larger --ctx holds more)",
                    octo_stream_token_count(st));
    default: return 0;
    }
}

/* Drain a stream to stdout (text, or ids on one line). Returns 0 or 1 after printing the error. */
int drain(octo_stream *st, int ids, int until_full, char **reply, size_t *reply_len) {
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
    return stop_status(st, until_full);
}

/* A prompt from a file, or from stdin for "-"; NULL after printing why not. */
static char *read_prompt(const char *file) {
    char *text = NULL;
    size_t len = 0;
    if (read_text_file(!strcmp(file, "-") ? "/dev/stdin" : file, &text, &len)) return NULL;
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r')) text[--len] = '\0'; /* a file's last newline */
    return text;
}

/* run's options (the table's rows for it): a model (the embedded one when
 * none is given, said on stderr), and a prompt unless --chat. */
static int parse_run(int argc, char **argv, cli_args *a) {
    const int rc = cli_parse(CMD_RUN, argc, argv, a);
    if (rc) return rc;
    if (!a->model && cli_default_model(&a->model, "run")) return 2;
    if (a->prompt && a->file) return usage_error("run: a prompt (-p) or a prompt file (-f), not both");
    if (!a->chat && !a->prompt && !a->file) return usage_error("run needs a prompt: -p PROMPT, -f FILE, - (stdin) or --chat");
    return 0;
}

/* llama.cpp's -1s, once the context is known: -n -1 runs until the context
 * is full (a chat's reply, until half of it), --repeat-last-n -1 looks at all of it. */
static void until_context(octo_model *m, int chat, octo_generate_params *gp) {
    const int n_ctx = octo_model_info_get(m).n_ctx;
    if (gp->max_tokens < 0) gp->max_tokens = chat ? n_ctx / 2 : n_ctx;
    if (gp->repeat_last_n < 0) gp->repeat_last_n = n_ctx < OCTO_MAX_REPEAT_LAST_N ? n_ctx : OCTO_MAX_REPEAT_LAST_N;
}

/* Options given that cannot take effect, each said once (notes.h). (A
 * --draft with --spec none still scores long prompts: not one of them.) */
static void note_unused(const cli_args *r) {
    static const char *const sampling[] = {"--top-k", "--top-p", "--min-p", "--seed"};
    if (r->gp.temperature == 0.0f)
        for (size_t i = 0; i < sizeof sampling / sizeof *sampling; i++)
            if (cli_given(r, CMD_RUN, sampling[i]))
                note("%s has no effect at --temp 0: greedy decoding takes the most likely token", sampling[i]);
    if (r->spec == OCTO_SPEC_NONE)
        for (const char *const *o = (const char *const[]){"--spec-k", "--spec-tree", "--lookahead", "-td", NULL}; *o; o++)
            if (cli_given(r, CMD_RUN, *o)) note("%s has no effect with --spec none", *o);
}

int cmd_run(int argc, char **argv) {
    cli_args r = cli_defaults();
    int rc = parse_run(argc, argv, &r);
    if (rc) return rc;
    note_unused(&r);
    char *file_prompt = r.file ? read_prompt(r.file) : NULL;
    if (r.file && !file_prompt) return 1;
    const char *prompt = file_prompt ? file_prompt : r.prompt;
    const int chat = r.chat, ids = r.print_ids;
    octo_generate_params gp = r.gp;
    char *constraint = NULL;
    if (read_constraint(r.grammar_file, r.schema_file, &gp, &constraint)) return free(file_prompt), 1;
    if (r.spec >= 0) gp.spec = (octo_spec_mode)r.spec;
    /* sampling without --seed: a new text each run (a fixed seed repeats one) */
    if (!r.seeded) gp.seed = (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)getpid();
    if (isatty(STDERR_FILENO)) gp.on_prefill = show_prefill; /* progress only where a person reads stderr */
    const model_request req = {
        .path = r.model, .draft = r.draft, .cache_dir = r.cache_dir, .device = r.device, .n_ctx = (int)r.n_ctx,
        .auto_draft = gp.spec == OCTO_SPEC_SELF ? OCTO_DRAFT_SELF
                      : gp.spec == OCTO_SPEC_NONE || gp.spec == OCTO_SPEC_LOOKAHEAD ? OCTO_DRAFT_NONE
                                                                                   : OCTO_DRAFT_AUTO,
        .threads = (int)r.threads, .draft_threads = (int)r.draft_threads, .moe = r.mo.moe};
    octo_client *c = NULL;
    octo_model *m = open_model(&req, &c);
    if (!m || cli_apply_adapters(m, r.lora.path, r.lora.scale, r.lora.n)) {
        octo_model_free(m);
        free(file_prompt);
        free(constraint);
        octo_client_free(c);
        return 1;
    }
    until_context(m, chat, &gp);
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
            rc = drain(st, ids, r.gp.max_tokens < 0, NULL, NULL);
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
    free(constraint);
    if (!rc && started && r.mo.moe.trace && octo_model_stats(m).expert_trace_failed)
        rc = fail("could not write the whole expert trace to %s", r.mo.moe.trace);
    octo_model_free(m);
    octo_client_free(c);
    return rc;
}
