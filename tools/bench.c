/*
 * bench — `octo bench`: how fast a model runs here, against the roofline.
 *
 *   octo bench -m MODEL [-p 512] [-n 128] [-t N] [-r REPS] [--batch 1,2,4,8,16] [--kv-plain] [--json]
 *   octo bench --roofline [-t N] [--json]
 *   octo bench -m MODEL --spec MODE [--draft MODEL] [--spec-k N] [--lookahead W,N,G]
 *              [--prompt TEXT | --prompt-file FILE] [-n 128] [-r REPS] [--temp T] [--json]
 *
 * Prompt processing: -p tokens evaluated as one batch from an empty cache.
 * Generation: -n tokens decoded one at a time from an empty cache. Each is
 * repeated -r times and reported as the median with the min..max spread.
 * Decode reads every weight once per token, so bytes-per-token times tokens/s
 * is the bandwidth it achieves; the machine's read bandwidth is measured in
 * the same run (before and after, the better kept) and decode is given as a
 * percentage of it. The batch table is what speculative decoding lives on:
 * the time to forward T tokens at once, as a multiple of one.
 *
 * With --spec, the bench is speculative decoding's instead: the same
 * generation (prompt, -n tokens, sampling) with --spec none and with MODE,
 * alternated rep by rep, their decode tokens/s (median), the ratio, and what
 * the speculation did: acceptance, tokens per verify pass, the cost of a pass
 * in plain tokens, and the speedup the formula (1 - a^(k+1)) / ((1 - a)(1 + k c))
 * expects at the measured acceptance a, mean draft length k and c, the cost
 * of one draft token in plain tokens (the pass's cost above one, over k).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "core/latency.h" /* internal: the token latencies of the decode runs, the library's percentiles */
#include "options.h"
#include "octo.h"
#include "stats.h"


static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    double median, min, max;
} spread;

static spread summarize(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    spread s = {n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]), v[0], v[n - 1]};
    return s;
}

/* Deterministic token ids that avoid the special ones at the start of the vocabulary. */
static void fill_tokens(int32_t *t, int n, int n_vocab, unsigned seed) {
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        t[i] = 3 + (int32_t)((seed >> 8) % (unsigned)(n_vocab > 4 ? n_vocab - 3 : 1));
    }
}

/* The probe streams 1 GiB: run it in a child so the model's peak RSS stays its own. */
static double measure_bandwidth(int n_threads) {
    int fd[2];
    if (pipe(fd) != 0) return 0.0;
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return 0.0;
    }
    if (pid == 0) {
        close(fd[0]);
        double g = octo_measure_read_bandwidth(n_threads, 0);
        ssize_t w = write(fd[1], &g, sizeof g);
        _exit(w == (ssize_t)sizeof g ? 0 : 1);
    }
    close(fd[1]);
    double g = 0.0;
    if (read(fd[0], &g, sizeof g) != (ssize_t)sizeof g) g = 0.0;
    close(fd[0]);
    waitpid(pid, NULL, 0);
    return g;
}

static int run_roofline(int n_threads, int json) {
    double gbps = measure_bandwidth(n_threads);
    if (gbps <= 0) return fail("the bandwidth probe could not run (out of memory?)");
    if (json) printf("{\"read_bandwidth_gbps\": %.2f, \"threads\": %d}\n", gbps, n_threads);
    else if (n_threads) printf("read bandwidth: %.2f GB/s (%d threads, 1 GiB streamed, best of 5)\n", gbps, n_threads);
    else printf("read bandwidth: %.2f GB/s (default threads, 1 GiB streamed, best of 5)\n", gbps);
    return 0;
}

typedef struct {
    double tps;            /* decode tokens/s */
    int tokens, proposed, accepted, steps, k, tree_passes, off_line, ahead_used, ahead_dropped;
    double spec_ms, draft_ms, decode_ms;
    double lat[6]; /* token latency: p50, p90, p95, p99, max (ms), cv; -1 unknown */
    char proposer[12], note[96];
} gen_run;

static int generate_once(octo_model *m, const char *prompt, const octo_generate_params *gp, gen_run *out) {
    octo_stream *s = octo_generate(m, prompt, gp);
    if (!s) return fail("%s", octo_model_error(m));
    while (octo_stream_next(s)) {
    }
    int rc = octo_stream_status(s) == OCTO_OK ? 0 : fail("%s", octo_stream_error(s));
    octo_stream_free(s);
    const octo_stats st = octo_model_stats(m);
    *out = (gen_run){.tps = st.decode_tokens_per_s, .tokens = st.decode_tokens, .proposed = st.spec_proposed,
                     .accepted = st.spec_accepted, .steps = st.spec_steps, .k = st.spec_k, .spec_ms = st.spec_ms,
                     .draft_ms = st.spec_draft_ms, .decode_ms = st.decode_ms, .tree_passes = st.spec_tree_passes,
                     .off_line = st.spec_off_line, .ahead_used = st.spec_ahead_used,
                     .ahead_dropped = st.spec_ahead_dropped};
    const double lat[6] = {st.decode_latency_p50_ms, st.decode_latency_p90_ms, st.decode_latency_p95_ms,
                           st.decode_latency_p99_ms, st.decode_latency_max_ms, st.decode_latency_cv};
    memcpy(out->lat, lat, sizeof lat);
    snprintf(out->proposer, sizeof out->proposer, "%s", st.spec_proposer);
    snprintf(out->note, sizeof out->note, "%s", st.spec_note);
    return rc;
}

/* `octo bench --spec`: plain and speculative generation, alternated. */
/* --versus-lines: the same generation with lines of drafts, alternated with
 * the other two arms, as one more figure beside theirs; --versus-serial:
 * with the draft drafting only between passes, not beside them. */
typedef struct {
    double tps[BENCH_MAX_REPS], over[BENCH_MAX_REPS]; /* tokens/s; the speculative arm's tokens/s over it */
    long proposed, accepted, steps;
    double spec_ms;
} versus_arm;

static void print_versus(versus_arm *v, long reps, double plain_ms_tok, int json, const char *name) {
    const spread s = summarize(v->tps, (int)reps), o = summarize(v->over, (int)reps); /* sorts them */
    const double per_pass = v->steps ? (double)(v->accepted + v->steps) / v->steps : 0.0;
    const double cost = v->steps && plain_ms_tok > 0 ? (v->spec_ms / v->steps) / (plain_ms_tok / reps) : 0.0;
    if (json)
        printf("{\"versus\": \"%s\", \"tokens_per_s\": {\"median\": %.2f, \"min\": %.2f, \"max\": %.2f}, "
               "\"spec_over_versus\": {\"median\": %.3f, \"min\": %.3f, \"max\": %.3f}, \"tokens_per_pass\": %.3f, "
               "\"pass_cost\": %.3f}\n", name, s.median, s.min, s.max, o.median, o.min, o.max, per_pass, cost);
    else
        printf("%-12s %9.2f tokens/s  (%.2f..%.2f), %.2f tokens a pass costing %.2f plain tokens; the mode "
               "against them %.2fx (%.2f..%.2f, per triple)\n", name, s.median, s.min, s.max, per_pass, cost, o.median, o.min,
               o.max);
}

/* What the alternated runs of bench --spec measured: a row per repetition,
 * sums over them, and the speculative arm's last run. */
typedef struct {
    double a_tps[BENCH_MAX_REPS], b_tps[BENCH_MAX_REPS], ratio[BENCH_MAX_REPS]; /* plain, speculative, their ratio */
    long proposed, accepted, steps, tree_passes, off_line, ahead_used, ahead_dropped;
    double spec_ms, draft_ms, plain_ms_tok;
    gen_run last, last_plain; /* the last repetition's speculative and plain runs */
    versus_arm va;
} spec_runs;

/* A warm-up round that pages the weights in, then ba->reps rounds of plain,
 * speculative (and with --versus-*, the third arm's) generation. */
static int spec_measure(octo_model *m, const cli_args *ba, const char *prompt, spec_runs *r) {
    const int versus = ba->versus;
    octo_generate_params gp = ba->gp, plain, lines;
    gp.max_tokens = (int)ba->gen_tokens;
    plain = gp, lines = gp;
    plain.spec = OCTO_SPEC_NONE;
    if (versus == BENCH_VERSUS_SERIAL) lines.spec_ahead = -1;
    else lines.spec_tree = -1, lines.spec_k = versus > 0 ? versus : 0;
    gen_run a = {0}, b = {0}, l = {0};
    int rc = 0;
    for (long k = -1; k < ba->reps && !rc; k++) {
        if ((rc = generate_once(m, prompt, &plain, &a)) || (rc = generate_once(m, prompt, &gp, &b))) break;
        if (versus >= 0 && (rc = generate_once(m, prompt, &lines, &l))) break;
        if (k < 0) continue;
        if (versus >= 0) {
            r->va.tps[k] = l.tps, r->va.over[k] = l.tps > 0 ? b.tps / l.tps : 0;
            r->va.proposed += l.proposed, r->va.accepted += l.accepted, r->va.steps += l.steps, r->va.spec_ms += l.spec_ms;
        }
        r->a_tps[k] = a.tps, r->b_tps[k] = b.tps, r->ratio[k] = a.tps > 0 ? b.tps / a.tps : 0;
        r->proposed += b.proposed, r->accepted += b.accepted, r->steps += b.steps, r->spec_ms += b.spec_ms;
        r->draft_ms += b.draft_ms, r->tree_passes += b.tree_passes, r->off_line += b.off_line;
        r->ahead_used += b.ahead_used, r->ahead_dropped += b.ahead_dropped;
        r->plain_ms_tok += a.decode_ms / (a.tokens > 1 ? a.tokens - 1 : 1);
    }
    r->last = b;
    r->last_plain = a;
    return rc;
}

/* The figures of bench --spec from what it measured (sorts r's rows). */
typedef struct {
    spread sa, sb, sr; /* plain and speculative tokens/s, the speedup */
    double alpha, k, per_pass, pass_cost, cost_c, draft_cost, formula;
} spec_figures;

static spec_figures spec_summary(spec_runs *r, long reps) {
    spec_figures f = {.sa = summarize(r->a_tps, (int)reps), .sb = summarize(r->b_tps, (int)reps),
                      .sr = summarize(r->ratio, (int)reps)};
    const long steps = r->steps;
    f.alpha = r->proposed ? (double)r->accepted / r->proposed : 0.0;
    f.k = steps ? (double)r->proposed / steps : 0.0;
    f.per_pass = steps ? (double)(r->accepted + steps) / steps : 0.0;
    f.pass_cost = steps && r->plain_ms_tok > 0 ? (r->spec_ms / steps) / (r->plain_ms_tok / reps) : 0.0;
    f.cost_c = f.k > 0 ? (f.pass_cost - 1.0) / f.k : 0.0;
    f.draft_cost = r->spec_ms > 0 ? f.pass_cost * r->draft_ms / r->spec_ms : 0.0; /* of pass_cost */
    f.formula = f.alpha < 1.0 && f.k > 0
                    ? (1.0 - pow(f.alpha, f.k + 1.0)) / ((1.0 - f.alpha) * (1.0 + f.k * f.cost_c)) : 0.0;
    return f;
}

/* A run's token latency as a JSON object (octo_stats' decode_latency_*). */
static void print_latency_json(const char *key, const gen_run *g) {
    printf(", \"%s\": {\"p50_ms\": %.3f, \"p90_ms\": %.3f, \"p95_ms\": %.3f, \"p99_ms\": %.3f, \"max_ms\": %.3f, "
           "\"cv\": %.4f}", key, g->lat[0], g->lat[1], g->lat[2], g->lat[3], g->lat[4], g->lat[5]);
}

static void print_spec_json(const cli_args *ba, const spec_runs *r, const spec_figures *f) {
    const gen_run *b = &r->last;
    printf("{\"model\": \"%s\", \"spec\": \"%s\", \"tokens\": %ld, \"reps\": %ld, "
           "\"plain_tokens_per_s\": {\"median\": %.2f, \"min\": %.2f, \"max\": %.2f}, "
           "\"spec_tokens_per_s\": {\"median\": %.2f, \"min\": %.2f, \"max\": %.2f}, "
           "\"speedup\": {\"median\": %.3f, \"min\": %.3f, \"max\": %.3f}, \"acceptance\": %.4f, "
           "\"mean_k\": %.2f, \"tokens_per_pass\": %.3f, \"pass_cost\": %.3f, \"c\": %.3f, "
           "\"pass_cost_proposing\": %.3f, \"formula_speedup\": %.3f, \"k_at_end\": %d, \"tree_passes\": %ld, "
           "\"off_line\": %ld, \"ahead_used\": %ld, \"ahead_dropped\": %ld, \"note\": \"%s\"",
           ba->model, b->proposer, ba->gen_tokens, ba->reps, f->sa.median, f->sa.min, f->sa.max, f->sb.median,
           f->sb.min, f->sb.max, f->sr.median, f->sr.min, f->sr.max, f->alpha, f->k, f->per_pass, f->pass_cost,
           f->cost_c, f->draft_cost, f->formula, b->k, r->tree_passes, r->off_line, r->ahead_used, r->ahead_dropped,
           b->note);
    print_latency_json("plain_latency_last", &r->last_plain); /* the last repetition's */
    print_latency_json("spec_latency_last", b);
    printf("}\n");
}

static void print_spec_text(const cli_args *ba, const spec_runs *r, const spec_figures *f) {
    const gen_run *b = &r->last;
    printf("model        %s, %ld tokens, %ld alternated repetitions (median, min..max)\n", ba->model, ba->gen_tokens,
           ba->reps);
    printf("plain        %9.2f tokens/s  (%.2f..%.2f)\n", f->sa.median, f->sa.min, f->sa.max);
    printf("%-12s %9.2f tokens/s  (%.2f..%.2f)\n", b->proposer, f->sb.median, f->sb.min, f->sb.max);
    printf("speedup      %.2fx  (%.2f..%.2f, per pair)\n", f->sr.median, f->sr.min, f->sr.max);
    if (r->tree_passes)
        printf("speculation  trees in %ld of %ld verify passes, %.2f nodes and %.2f tokens a pass, %ld paths kept "
               "off a tree's first line, %d nodes at the end\n", r->tree_passes, r->steps, f->k, f->per_pass,
               r->off_line, b->k);
    else
        printf("speculation  %.1f%% of %ld drafts accepted, %.2f drafts and %.2f tokens per verify pass, k at end %d\n",
               100.0 * f->alpha, r->proposed, f->k, f->per_pass, b->k);
    printf("formula      (1 - a^(k+1)) / ((1 - a)(1 + k c)) = %.2fx at a = %.3f, k = %.2f, c = %.3f "
           "(a pass costs %.2f plain tokens: %.2f proposing, %.2f verifying)\n", f->formula, f->alpha, f->k, f->cost_c,
           f->pass_cost, f->draft_cost, f->pass_cost - f->draft_cost);
    if (r->ahead_used + r->ahead_dropped)
        printf("beside       %ld draft steps run while the model verified: %ld used by the next pass, %ld dropped\n",
               r->ahead_used + r->ahead_dropped, r->ahead_used, r->ahead_dropped);
    for (int arm = 0; arm < 2; arm++) {
        const gen_run *g = arm ? b : &r->last_plain;
        printf("latency      %s: p50 %.2f ms, p90 %.2f, p95 %.2f, p99 %.2f, max %.2f; spread %.2f (last run)\n",
               arm ? b->proposer : "plain", g->lat[0], g->lat[1], g->lat[2], g->lat[3], g->lat[4], g->lat[5]);
    }
    if (b->note[0]) printf("note         %s (last run)\n", b->note);
}

/* Load with the draft the mode needs, measure, report. */
static int run_spec_bench(const cli_args *ba, const char *prompt) {
    const octo_spec_mode spec = ba->gp.spec;
    octo_client_options co = octo_client_options_defaults();
    co.n_threads = (int)ba->threads;
    octo_client *c = octo_client_new(&co);
    octo_model_options mo = octo_model_options_defaults();
    mo.draft_model = ba->draft;
    mo.draft_threads = (int)ba->draft_threads;
    mo.auto_draft = spec == OCTO_SPEC_SELF ? OCTO_DRAFT_SELF
                    : spec == OCTO_SPEC_NGRAM || spec == OCTO_SPEC_LOOKAHEAD ? OCTO_DRAFT_NONE
                                                                             : OCTO_DRAFT_AUTO;
    octo_model *m = c ? octo_load_model(c, ba->model, &mo) : NULL;
    spec_runs r = {0};
    int rc = m ? cli_apply_adapters(m, ba->lora.path, ba->lora.scale, ba->lora.n)
               : fail("%s", c ? octo_last_error(c) : "out of memory");
    if (!rc) rc = spec_measure(m, ba, prompt, &r);
    if (!rc) {
        const spec_figures f = spec_summary(&r, ba->reps);
        if (ba->json) print_spec_json(ba, &r, &f);
        else print_spec_text(ba, &r, &f);
        const int versus = ba->versus;
        if (versus >= 0)
            print_versus(&r.va, ba->reps, r.plain_ms_tok, ba->json, versus == BENCH_VERSUS_SERIAL ? "serial" : "lines");
    }
    octo_model_free(m);
    octo_client_free(c);
    return rc;
}

/* bench --spec: the mode against plain decoding on one prompt. */
static int spec_bench(cli_args *a) {
    if (a->spec == OCTO_SPEC_NONE) return usage_error("bench --spec compares a mode with none: give another mode");
    if (a->prompt && a->prompt_file) return usage_error("give --prompt or --prompt-file, not both");
    if (a->gen_tokens == 0) return usage_error("bench --spec needs -n > 0");
    char *text = NULL;
    size_t len;
    if (a->prompt_file && read_text_file(a->prompt_file, &text, &len)) return 1;
    a->gp.spec = (octo_spec_mode)a->spec;
    const int rc = run_spec_bench(a, text ? text : a->prompt ? a->prompt : "Once upon a time");
    free(text);
    return rc;
}

/* `octo bench --json-schema FILE | --grammar FILE`: generation with and
 * without the constraint, alternated, on one prompt, with the same sampling
 * (plain decoding unless --spec says otherwise). Tokens/s is wall-clock after
 * the prompt: decode_ms leaves sampling out, and the mask is sampling. The
 * arms take turns at going first. */
typedef struct {
    double tps[2][BENCH_MAX_REPS], ratio[BENCH_MAX_REPS];
    long tokens[2];
} constrain_runs;

static int timed_generate(octo_model *m, const char *prompt, const octo_generate_params *gp, double *tps, long *n) {
    const double t0 = now_s();
    octo_stream *s = octo_generate(m, prompt, gp);
    if (!s) return fail("%s", octo_model_error(m));
    while (octo_stream_next(s)) {
    }
    const double wall_ms = (now_s() - t0) * 1e3;
    int rc = octo_stream_status(s) == OCTO_OK ? 0 : fail("%s", octo_stream_error(s));
    octo_stream_free(s);
    const octo_stats st = octo_model_stats(m);
    *tps = st.decode_tokens / ((wall_ms - st.prefill_ms) * 1e-3);
    *n += st.decode_tokens;
    return rc;
}

int mask_bench(const cli_args *a); /* bench_mask.c */

static int constrain_bench(cli_args *a) {
    octo_generate_params with = a->gp, without;
    char *text = NULL;
    if (read_constraint(a->grammar_file, a->schema_file, &with, &text)) return 1;
    with.max_tokens = (int)a->gen_tokens;
    with.spec = a->spec >= 0 ? (octo_spec_mode)a->spec : OCTO_SPEC_NONE;
    without = with, without.grammar = without.json_schema = NULL;
    octo_client_options co = octo_client_options_defaults();
    co.n_threads = (int)a->threads;
    octo_client *c = octo_client_new(&co);
    octo_model *m = c ? octo_load_model(c, a->model, NULL) : NULL;
    const char *prompt = a->prompt ? a->prompt : "Once upon a time";
    constrain_runs r = {0};
    int rc = m ? 0 : fail("%s", c ? octo_last_error(c) : "out of memory");
    for (long k = -1; k < a->reps && !rc; k++) { /* k = -1: a warm-up pair */
        double t[2];
        long n[2] = {0, 0};
        const int first = k & 1; /* ABBA: neither arm always runs first */
        const octo_generate_params *arm[2] = {&without, &with};
        rc = timed_generate(m, prompt, arm[first], &t[first], &n[first]) ||
             timed_generate(m, prompt, arm[!first], &t[!first], &n[!first]);
        if (k < 0 || rc) continue;
        r.tps[0][k] = t[0], r.tps[1][k] = t[1], r.ratio[k] = t[1] / t[0];
        r.tokens[0] += n[0], r.tokens[1] += n[1];
    }
    if (!rc) {
        const spread u = summarize(r.tps[0], (int)a->reps), g = summarize(r.tps[1], (int)a->reps),
                     x = summarize(r.ratio, (int)a->reps);
        const char *what = a->schema_file ? "json-schema" : "grammar";
        if (a->json) { /* the names as JSON strings: a grammar or schema may be given as its text */
            fputs("{\"model\": ", stdout), stats_print_text(stdout, a->model);
            printf(", \"%s\": ", what), stats_print_text(stdout, a->schema_file ? a->schema_file : a->grammar_file);
            printf(", \"reps\": %ld, \"free_tokens_per_s\": %.2f, \"constrained_tokens_per_s\": %.2f, "
                   "\"ratio\": {\"median\": %.3f, \"min\": %.3f, \"max\": %.3f}, \"mean_tokens\": [%.1f, %.1f]}\n",
                   a->reps, u.median, g.median, x.median, x.min, x.max, (double)r.tokens[0] / a->reps,
                   (double)r.tokens[1] / a->reps);
        }
        else
            printf("model        %s, %ld alternated repetitions (median, min..max), wall-clock after the prompt\n"
                   "free text    %9.2f tokens/s  (%.2f..%.2f), %.1f tokens a run\n"
                   "%-12s %9.2f tokens/s  (%.2f..%.2f), %.1f tokens a run\n"
                   "ratio        %.3fx  (%.3f..%.3f, per pair)\n", a->model, a->reps, u.median, u.min, u.max,
                   (double)r.tokens[0] / a->reps, what, g.median, g.min, g.max, (double)r.tokens[1] / a->reps,
                   x.median, x.min, x.max);
    }
    octo_model_free(m);
    octo_client_free(c);
    free(text);
    return rc;
}

/* What one plain bench run measured, a row per repetition. */
typedef struct {
    double *pp, *tg;                  /* prompt and generation tokens/s */
    double bt[BENCH_MAX_BATCHES][BENCH_MAX_REPS]; /* seconds for each batch size */
    double probe[2 * BENCH_MAX_REPS];       /* read bandwidth beside each decode */
    int n_probe;
    lat_rec lat;                      /* every decode token's time, all repetitions */
} bench_runs;

#define BENCH_PREFIX 64 /* the batch table is measured after this much context */

/* The repetitions: prefill p tokens, decode n one by one (the bandwidth probed
 * just before and after: on a shared host it moves within seconds, here 33 to
 * 68 GB/s, faster than a decode run lasts, so each decode is judged against
 * the probes' median), then each batch size after a fixed prefix. */
static int bench_measure(octo_model *m, const cli_args *a, const octo_model_info *in, int32_t *tok, float *logits,
                         bench_runs *r) {
    const long p = a->prompt_tokens, n = a->gen_tokens;
    int rc = 0;
    octo_reset(m); /* warm up: page the weights in, size the buffers */
    if (octo_eval(m, tok, p > 0 ? (int)(p < 32 ? p : 32) : 1, logits, OCTO_LOGITS_LAST)) return fail("%s", octo_model_error(m));
    for (int k = 0; k < a->reps && !rc; k++) {
        if (p > 0) {
            octo_reset(m);
            double t0 = now_s();
            if (octo_eval(m, tok, (int)p, logits, OCTO_LOGITS_LAST)) return fail("%s", octo_model_error(m));
            r->pp[k] = (double)p / (now_s() - t0);
        }
        if (n > 0) {
            octo_reset(m);
            if (octo_eval(m, tok, 1, logits, OCTO_LOGITS_LAST)) return fail("%s", octo_model_error(m));
            if (!a->no_roofline) r->probe[r->n_probe++] = measure_bandwidth(in->n_threads);
            double t0 = now_s();
            for (long i = 0; i < n && !rc; i++) {
                const double t = now_s();
                if (octo_eval(m, tok + 1 + i, 1, logits, OCTO_LOGITS_LAST)) rc = fail("%s", octo_model_error(m));
                lat_add(&r->lat, (now_s() - t) * 1e3);
            }
            r->tg[k] = (double)n / (now_s() - t0);
            if (!a->no_roofline) r->probe[r->n_probe++] = measure_bandwidth(in->n_threads);
        }
        /* batch cost: T tokens at once after a fixed prefix, rewound each time */
        octo_reset(m);
        if (!rc && octo_eval(m, tok, BENCH_PREFIX, logits, OCTO_LOGITS_LAST)) rc = fail("%s", octo_model_error(m));
        for (int b = 0; b < a->n_batches && !rc; b++) {
            double t0 = now_s();
            if (octo_eval(m, tok + BENCH_PREFIX, a->batches[b], logits, OCTO_LOGITS_LAST)) return fail("%s", octo_model_error(m));
            r->bt[b][k] = now_s() - t0;
            octo_truncate(m, BENCH_PREFIX);
        }
    }
    return rc;
}

/* The medians a report shows. */
typedef struct {
    spread pp, tg, bw;
    double gbps, base, bsec[BENCH_MAX_BATCHES];
    uint64_t kv;
    octo_memory mem;
    octo_stats st; /* after every repetition: the expert figures are over the whole bench */
} bench_summary;

static bench_summary summarize_runs(const cli_args *a, const octo_model_info *in, bench_runs *r, long need) {
    bench_summary s = {.pp = a->prompt_tokens > 0 ? summarize(r->pp, (int)a->reps) : (spread){0, 0, 0},
                       .tg = a->gen_tokens > 0 ? summarize(r->tg, (int)a->reps) : (spread){0, 0, 0}};
    int n_ok = 0; /* probes that failed (0) are left out */
    for (int i = 0; i < r->n_probe; i++)
        if (r->probe[i] > 0) r->probe[n_ok++] = r->probe[i];
    s.bw = n_ok ? summarize(r->probe, n_ok) : (spread){0, 0, 0};
    s.gbps = s.tg.median * (double)in->weight_bytes_per_token / 1e9;
    for (int k = 0; k < a->n_batches; k++) {
        s.bsec[k] = summarize(r->bt[k], (int)a->reps).median;
        if (a->batches[k] == 1) s.base = s.bsec[k];
    }
    s.mem = octo_memory_usage();
    s.kv = in->kv_bytes_per_token * (uint64_t)need;
    return s;
}

/* The decode runs' token latencies as the octo_stats figures (-1: unknown),
 * so the list's bench column shows them: here every token is one pass. */
static void put_latency(octo_stats *st, const lat_rec *r) {
    const lat_summary l = lat_summarize(r);
    st->decode_latency_tokens = l.n;
    st->decode_latency_p50_ms = l.p50_ms, st->decode_latency_p90_ms = l.p90_ms;
    st->decode_latency_p95_ms = l.p95_ms, st->decode_latency_p99_ms = l.p99_ms;
    st->decode_latency_max_ms = l.max_ms, st->decode_latency_cv = l.cv;
}

static void print_bench_json(const cli_args *a, const octo_model_info *in, const bench_summary *s) {
    const double bw = s->bw.median;
    printf("{\"model\": \"%s\", \"arch\": \"%s\", \"tensor_types\": \"%s\", \"n_params\": %llu, "
           "\"weight_bytes_per_token\": %llu, \"threads\": %d, \"cpu_path\": \"%s\", \"reps\": %ld, "
           "\"prompt_tokens\": %ld, \"prompt_tokens_per_s\": {\"median\": %.2f, \"min\": %.2f, \"max\": %.2f}, "
           "\"gen_tokens\": %ld, \"gen_tokens_per_s\": {\"median\": %.2f, \"min\": %.2f, \"max\": %.2f}, "
           "\"achieved_gbps\": %.2f, \"read_bandwidth_gbps\": %.2f, \"read_bandwidth_min_gbps\": %.2f, "
           "\"read_bandwidth_max_gbps\": %.2f, \"roofline_pct\": %.1f, "
           "\"batch_cost\": {",
           a->model, in->arch, in->tensor_types, (unsigned long long)in->n_params,
           (unsigned long long)in->weight_bytes_per_token, in->n_threads, in->cpu_path, a->reps, a->prompt_tokens, s->pp.median,
           s->pp.min, s->pp.max, a->gen_tokens, s->tg.median, s->tg.min, s->tg.max, s->gbps, bw, s->bw.min, s->bw.max,
           bw > 0 ? 100.0 * s->gbps / bw : 0.0);
    for (int k = 0; k < a->n_batches; k++)
        printf("%s\"%d\": %.3f", k ? ", " : "", a->batches[k], s->base > 0 ? s->bsec[k] / s->base : 0.0);
    printf("}, \"batch_seconds\": {");
    for (int k = 0; k < a->n_batches; k++) printf("%s\"%d\": %.6f", k ? ", " : "", a->batches[k], s->bsec[k]);
    printf("}, \"peak_rss_bytes\": %llu, \"kv_bytes\": %llu", (unsigned long long)s->mem.peak_rss_bytes,
           (unsigned long long)s->kv);
    stats_print_json(stdout, &s->st, STATS_BENCH, 1, 99, 1); /* the list's bench column (OCTO_STATS, octo.h) */
    printf("}\n");
}

static void print_bench_text(const cli_args *a, const octo_model_info *in, const bench_summary *s) {
    const double bw = s->bw.median;
    printf("model       %s (%s, %s, %.2f M parameters)\n", a->model, in->arch, in->tensor_types, in->n_params / 1e6);
    printf("threads     %d, kernels %s, %ld repetitions (median, min..max)\n", in->n_threads, s->st.cpu_kernels, a->reps);
    if (a->prompt_tokens > 0) printf("prompt      %5ld tokens   %9.1f tokens/s  (%.1f..%.1f)\n", a->prompt_tokens, s->pp.median, s->pp.min, s->pp.max);
    if (a->gen_tokens > 0) {
        printf("generation  %5ld tokens   %9.2f tokens/s  (%.2f..%.2f)\n", a->gen_tokens, s->tg.median, s->tg.min, s->tg.max);
        printf("weights     %.1f MiB read per token -> %.2f GB/s", mib(in->weight_bytes_per_token), s->gbps);
        if (bw > 0)
            printf(" = %.1f%% of the read bandwidth measured beside the repetitions (median %.2f GB/s, %.2f..%.2f)",
                   100.0 * s->gbps / bw, bw, s->bw.min, s->bw.max);
        putchar('\n');
    }
    const octo_stats *x = &s->st;
    if (x->decode_latency_tokens > 0)
        printf("latency     p50 %.2f ms, p90 %.2f, p95 %.2f, p99 %.2f, max %.2f; spread %.3f (sd/mean) over the %d "
               "tokens of the repetitions\n", x->decode_latency_p50_ms, x->decode_latency_p90_ms, x->decode_latency_p95_ms,
               x->decode_latency_p99_ms, x->decode_latency_max_ms, x->decode_latency_cv, x->decode_latency_tokens);
    if (a->prompt_tokens > 0 && a->gen_tokens > 0)
        printf("prefill     %.1fx faster per token than decode\n", s->pp.median / (s->tg.median > 0 ? s->tg.median : 1));
    printf("batch cost  ");
    for (int k = 0; k < a->n_batches; k++)
        printf("%s%d: %.2fx", k ? "  " : "", a->batches[k], s->base > 0 ? s->bsec[k] / s->base : 0.0);
    printf("  (time to forward T tokens / time for 1, after %d tokens of context)\n", BENCH_PREFIX);
    printf("batch time  ");
    for (int k = 0; k < a->n_batches; k++) printf("%s%d: %.2f ms", k ? "  " : "", a->batches[k], 1e3 * s->bsec[k]);
    putchar('\n');
    const uint64_t w = in->weight_bytes, peak = s->mem.peak_rss_bytes;
    printf("memory      peak RSS %.1f MiB = weights %.1f MiB + KV %.1f MiB + other %.1f MiB\n", mib(peak), mib(w),
           mib(s->kv), mib(peak > w + s->kv ? peak - w - s->kv : 0));
    if (x->expert_cache_hit_rate >= 0)
        printf("experts     over the whole bench: %.1f%% cache hits, %.1f%% of the reads brought ahead in time, "
               "%.2f MiB read and %.2f ms waited per token, cache %.1f MiB\n",
               100.0 * x->expert_cache_hit_rate, 100.0 * x->expert_prefetch_recall,
               mib((uint64_t)x->expert_bytes_read_per_token), x->expert_stall_ms_per_token, mib(x->expert_cache_bytes));
}

/* The plain bench: load without a draft, measure, report. */
static int plain_bench(const cli_args *a) {
    int max_batch = 0;
    for (int k = 0; k < a->n_batches; k++) max_batch = a->batches[k] > max_batch ? a->batches[k] : max_batch;
    long need = a->prompt_tokens > a->gen_tokens + 1 ? a->prompt_tokens : a->gen_tokens + 1;
    if (need < BENCH_PREFIX + max_batch) need = BENCH_PREFIX + max_batch;
    octo_client_options co = octo_client_options_defaults();
    co.n_threads = (int)a->threads;
    octo_client *c = octo_client_new(&co);
    octo_model_options mo = octo_model_options_defaults();
    mo.n_ctx = (int)need;
    mo.moe = a->mo.moe;
    if (a->kv_plain) mo.kv.compress = 0; /* every entry kept at F16: the baseline for the tiered cache */
    mo.auto_draft = OCTO_DRAFT_NONE; /* bench does not speculate */
    octo_model *m = c ? octo_load_model(c, a->model, &mo) : NULL;
    if (!m || cli_apply_adapters(m, a->lora.path, a->lora.scale, a->lora.n)) {
        int rc = m ? 1 : fail("%s", c ? octo_last_error(c) : "out of memory");
        octo_model_free(m);
        octo_client_free(c);
        return rc;
    }
    const octo_model_info in = octo_model_info_get(m);
    int32_t *tok = malloc(sizeof *tok * (size_t)need);
    float *logits = malloc(sizeof(float) * (size_t)in.n_vocab);
    bench_runs *r = calloc(1, sizeof *r);
    if (r) lat_init(&r->lat, 0), r->pp = malloc(sizeof(double) * (size_t)a->reps), r->tg = malloc(sizeof(double) * (size_t)a->reps);
    int rc = !tok || !logits || !r || !r->pp || !r->tg ? fail("out of memory") : 0;
    if (!rc) {
        fill_tokens(tok, (int)need, in.n_vocab, 1234u);
        rc = bench_measure(m, a, &in, tok, logits, r);
    }
    if (!rc) {
        bench_summary s = summarize_runs(a, &in, r, need);
        s.st = octo_model_stats(m);
        put_latency(&s.st, &r->lat);
        if (a->mo.moe.trace && s.st.expert_trace_failed) rc = fail("could not write the whole expert trace to %s", a->mo.moe.trace);
        if (!rc && a->json) print_bench_json(a, &in, &s);
        else if (!rc) print_bench_text(a, &in, &s);
    }
    if (r) free(r->pp), free(r->tg), lat_free(&r->lat);
    free(r), free(tok), free(logits);
    octo_model_free(m);
    octo_client_free(c);
    return rc;
}

int cmd_bench(int argc, char **argv) {
    cli_args a = cli_defaults();
    a.prompt_tokens = 512, a.gen_tokens = 128, a.reps = 5, a.versus = -1;
    a.gp.temperature = 0.0f;
    const int batches[] = {1, 2, 4, 8, 16};
    memcpy(a.batches, batches, sizeof batches);
    a.n_batches = 5;
    const int bad = cli_parse(CMD_BENCH, argc, argv, &a);
    if (bad) return bad;
    if (a.roofline_only) return run_roofline((int)a.threads, a.json);
    if (!a.model && cli_default_model(&a.model, "bench")) return 2;
    const int constrained = a.grammar_file || a.schema_file;
    if ((a.prompt_file || a.draft || (a.prompt && !constrained)) && a.spec < 0)
        return usage_error("--prompt, --prompt-file and --draft go with --spec (--prompt also with --json-schema)");
    if (a.prompt_tokens == 0 && a.gen_tokens == 0 && a.spec < 0) return usage_error("nothing to measure: -p and -n are both 0");
    const int tty = isatty(STDERR_FILENO); /* a bench runs for seconds before its table: say so */
    if (tty) fprintf(stderr, "bench: measuring %s, the table follows when it is done\n", a.model);
    if (a.mask_only && !constrained) return usage_error("--mask-only measures a grammar: give --json-schema or --grammar");
    if (a.mask_only) return mask_bench(&a);
    if (constrained) return constrain_bench(&a);
    return a.spec >= 0 ? spec_bench(&a) : plain_bench(&a);
}
