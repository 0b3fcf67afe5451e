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
#include "octo.h"
#include "stats.h"

#define MAX_REPS 64
#define MAX_BATCHES 16

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

/* Everything `octo bench` was asked. */
typedef struct {
    const char *path, *draft, *prompt, *prompt_file;
    long p, n, threads, reps;
    int json, roofline_only, with_roofline, kv_plain, spec;
    int versus;  /* --versus-lines K: -1 none, 0 adaptive lines, else lines of K; VERSUS_SERIAL: --versus-serial */
    long draft_threads; /* -td: cores of the draft's own */
    octo_generate_params gp;
    int batches[MAX_BATCHES], n_batches;
    octo_moe_options moe;
} bench_args;
#define VERSUS_SERIAL 100 /* the third arm drafts only between passes (spec_ahead -1) */

typedef struct {
    double tps;            /* decode tokens/s */
    int tokens, proposed, accepted, steps, k, tree_passes, off_line, ahead_used, ahead_dropped;
    double spec_ms, draft_ms, decode_ms;
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
    snprintf(out->proposer, sizeof out->proposer, "%s", st.spec_proposer);
    snprintf(out->note, sizeof out->note, "%s", st.spec_note);
    return rc;
}

/* `octo bench --spec`: plain and speculative generation, alternated. */
/* --versus-lines: the same generation with lines of drafts, alternated with
 * the other two arms, as one more figure beside theirs; --versus-serial:
 * with the draft drafting only between passes, not beside them. */
typedef struct {
    double tps[MAX_REPS], over[MAX_REPS]; /* tokens/s; the speculative arm's tokens/s over it */
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

static int run_spec_bench(const bench_args *ba, const char *prompt) {
    const char *path = ba->path;
    octo_generate_params gp = ba->gp;
    const long n = ba->n, reps = ba->reps;
    const int json = ba->json, versus = ba->versus;
    octo_client_options co = octo_client_options_defaults();
    co.n_threads = (int)ba->threads;
    octo_client *c = octo_client_new(&co);
    octo_model_options mo = octo_model_options_defaults();
    mo.draft_model = ba->draft;
    mo.draft_threads = (int)ba->draft_threads;
    mo.auto_draft = gp.spec == OCTO_SPEC_SELF ? OCTO_DRAFT_SELF
                    : gp.spec == OCTO_SPEC_NGRAM || gp.spec == OCTO_SPEC_LOOKAHEAD ? OCTO_DRAFT_NONE
                                                                                   : OCTO_DRAFT_AUTO;
    octo_model *m = c ? octo_load_model(c, path, &mo) : NULL;
    if (!m) {
        int rc = fail("%s", c ? octo_last_error(c) : "out of memory");
        octo_client_free(c);
        return rc;
    }
    gp.max_tokens = (int)n;
    octo_generate_params plain = gp;
    plain.spec = OCTO_SPEC_NONE;
    double a_tps[MAX_REPS], b_tps[MAX_REPS], ratio[MAX_REPS];
    long proposed = 0, accepted = 0, steps = 0, tree_passes = 0, off_line = 0, ahead_used = 0, ahead_dropped = 0;
    double spec_ms = 0, draft_ms = 0, plain_ms_tok = 0;
    gen_run a = {0}, b = {0}, l = {0};
    octo_generate_params lines = gp;
    if (versus == VERSUS_SERIAL) lines.spec_ahead = -1;
    else lines.spec_tree = -1, lines.spec_k = versus > 0 ? versus : 0;
    versus_arm va = {0};
    int rc = 0;
    /* a warm-up pair pages the weights in */
    for (long r = -1; r < reps && !rc; r++) {
        if ((rc = generate_once(m, prompt, &plain, &a)) || (rc = generate_once(m, prompt, &gp, &b))) break;
        if (versus >= 0 && (rc = generate_once(m, prompt, &lines, &l))) break;
        if (r < 0) continue;
        if (versus >= 0) {
            va.tps[r] = l.tps, va.over[r] = l.tps > 0 ? b.tps / l.tps : 0;
            va.proposed += l.proposed, va.accepted += l.accepted, va.steps += l.steps, va.spec_ms += l.spec_ms;
        }
        a_tps[r] = a.tps, b_tps[r] = b.tps, ratio[r] = a.tps > 0 ? b.tps / a.tps : 0;
        proposed += b.proposed, accepted += b.accepted, steps += b.steps, spec_ms += b.spec_ms, draft_ms += b.draft_ms;
        tree_passes += b.tree_passes, off_line += b.off_line;
        ahead_used += b.ahead_used, ahead_dropped += b.ahead_dropped;
        plain_ms_tok += a.decode_ms / (a.tokens > 1 ? a.tokens - 1 : 1);
    }
    if (!rc) {
        const spread sa = summarize(a_tps, (int)reps), sb = summarize(b_tps, (int)reps), sr = summarize(ratio, (int)reps);
        const double alpha = proposed ? (double)accepted / proposed : 0.0, k = steps ? (double)proposed / steps : 0.0;
        const double per_pass = steps ? (double)(accepted + steps) / steps : 0.0;
        const double pass_cost = steps && plain_ms_tok > 0 ? (spec_ms / steps) / (plain_ms_tok / reps) : 0.0;
        const double cost_c = k > 0 ? (pass_cost - 1.0) / k : 0.0;
        const double draft_cost = spec_ms > 0 ? pass_cost * draft_ms / spec_ms : 0.0; /* of pass_cost */
        const double formula = alpha < 1.0 && k > 0 ? (1.0 - pow(alpha, k + 1.0)) / ((1.0 - alpha) * (1.0 + k * cost_c)) : 0.0;
        if (json)
            printf("{\"model\": \"%s\", \"spec\": \"%s\", \"tokens\": %ld, \"reps\": %ld, "
                   "\"plain_tokens_per_s\": {\"median\": %.2f, \"min\": %.2f, \"max\": %.2f}, "
                   "\"spec_tokens_per_s\": {\"median\": %.2f, \"min\": %.2f, \"max\": %.2f}, "
                   "\"speedup\": {\"median\": %.3f, \"min\": %.3f, \"max\": %.3f}, \"acceptance\": %.4f, "
                   "\"mean_k\": %.2f, \"tokens_per_pass\": %.3f, \"pass_cost\": %.3f, \"c\": %.3f, "
                   "\"pass_cost_proposing\": %.3f, \"formula_speedup\": %.3f, \"k_at_end\": %d, \"tree_passes\": %ld, "
                   "\"off_line\": %ld, \"ahead_used\": %ld, \"ahead_dropped\": %ld, \"note\": \"%s\"}\n",
                   path, b.proposer, n, reps, sa.median, sa.min, sa.max, sb.median, sb.min, sb.max, sr.median, sr.min,
                   sr.max, alpha, k, per_pass, pass_cost, cost_c, draft_cost, formula, b.k, tree_passes, off_line, ahead_used,
                   ahead_dropped, b.note);
        else {
            printf("model        %s, %ld tokens, %ld alternated repetitions (median, min..max)\n", path, n, reps);
            printf("plain        %9.2f tokens/s  (%.2f..%.2f)\n", sa.median, sa.min, sa.max);
            printf("%-12s %9.2f tokens/s  (%.2f..%.2f)\n", b.proposer, sb.median, sb.min, sb.max);
            printf("speedup      %.2fx  (%.2f..%.2f, per pair)\n", sr.median, sr.min, sr.max);
            if (tree_passes)
                printf("speculation  trees in %ld of %ld verify passes, %.2f nodes and %.2f tokens a pass, %ld paths kept "
                       "off a tree's first line, %d nodes at the end\n", tree_passes, steps, k, per_pass, off_line, b.k);
            else
                printf("speculation  %.1f%% of %ld drafts accepted, %.2f drafts and %.2f tokens per verify pass, k at end %d\n",
                       100.0 * alpha, proposed, k, per_pass, b.k);
            printf("formula      (1 - a^(k+1)) / ((1 - a)(1 + k c)) = %.2fx at a = %.3f, k = %.2f, c = %.3f "
                   "(a pass costs %.2f plain tokens: %.2f proposing, %.2f verifying)\n", formula, alpha, k, cost_c,
                   pass_cost, draft_cost, pass_cost - draft_cost);
            if (ahead_used + ahead_dropped)
                printf("beside       %ld draft steps run while the model verified: %ld used by the next pass, %ld dropped\n",
                       ahead_used + ahead_dropped, ahead_used, ahead_dropped);
            if (b.note[0]) printf("note         %s (last run)\n", b.note);
        }
        if (versus >= 0) print_versus(&va, reps, plain_ms_tok, json, versus == VERSUS_SERIAL ? "serial" : "lines");
    }
    octo_model_free(m);
    octo_client_free(c);
    return rc;
}


/* --batch 1,3,5: the batch sizes to time; 0 on a usage error (reported). */
static int parse_batches(const char *v, bench_args *a) {
    int32_t *b;
    int nb;
    if (!parse_tokens(v, &b, &nb) || nb == 0 || nb > MAX_BATCHES) {
        usage_error("--batch takes up to %d sizes", MAX_BATCHES);
        return 0;
    }
    for (int k = 0; k < nb; k++) {
        if (b[k] < 1 || b[k] > 4096) {
            free(b);
            usage_error("--batch sizes are 1..4096");
            return 0;
        }
        a->batches[k] = b[k];
    }
    a->n_batches = nb;
    free(b);
    return 1;
}

/* The options into a; -1 when they parse, else the exit code of the usage error. */
static int parse_bench_args(int argc, char **argv, bench_args *a) {
    *a = (bench_args){.p = 512, .n = 128, .reps = 5, .with_roofline = 1, .spec = -1, .versus = -1,
                      .gp = octo_generate_params_defaults(), .batches = {1, 2, 4, 8, 16}, .n_batches = 5};
    a->gp.temperature = 0.0f;
    octo_generate_params *gp = &a->gp;
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int used, rc = parse_moe(o, v, &a->moe, &used);
        if (rc) return rc;
        if (used) { i++; continue; }
        if (!strcmp(o, "-m") && v) { a->path = v; i++; }
        else if (!strcmp(o, "-p") && v) { if (!parse_long(v, 0, 1 << 20, &a->p)) return usage_error("-p takes a count >= 0"); i++; }
        else if (!strcmp(o, "-n") && v) { if (!parse_long(v, 0, 1 << 20, &a->n)) return usage_error("-n takes a count >= 0"); i++; }
        else if (!strcmp(o, "-t") && v) { if (!parse_long(v, 1, 1024, &a->threads)) return usage_error("-t takes a thread count"); i++; }
        else if (!strcmp(o, "-r") && v) { if (!parse_long(v, 1, MAX_REPS, &a->reps)) return usage_error("-r takes 1..%d", MAX_REPS); i++; }
        else if (!strcmp(o, "--json")) a->json = 1;
        else if (!strcmp(o, "--roofline")) a->roofline_only = 1;
        else if (!strcmp(o, "--no-roofline")) a->with_roofline = 0;
        else if (!strcmp(o, "--kv-plain")) a->kv_plain = 1;
        else if (!strcmp(o, "--spec") && v) { if (!parse_spec_mode(v, &a->spec)) return usage_error("--spec is one of %s", spec_mode_names()); i++; }
        else if (!strcmp(o, "--draft") && v) { a->draft = v; i++; }
        else if (!strcmp(o, "--prompt") && v) { a->prompt = v; i++; }
        else if (!strcmp(o, "--prompt-file") && v) { a->prompt_file = v; i++; }
        else if (!strcmp(o, "--temp") && v) { if (!parse_float(v, &gp->temperature)) return usage_error("--temp takes a number"); i++; }
        else if (!strcmp(o, "--seed") && v) { long s; if (!parse_long(v, 0, 1L << 62, &s)) return usage_error("--seed takes a count"); gp->seed = (uint64_t)s; i++; }
        else if (!strcmp(o, "--versus-lines") && v) { long k; if (!parse_long(v, 0, 10, &k)) return usage_error("--versus-lines takes 0 (adaptive) or 1..10"); a->versus = (int)k; i++; }
        else if (!strcmp(o, "--spec-tree") && v) { if (!parse_spec_tree(v, &gp->spec_tree)) return usage_error("--spec-tree takes auto, off or 1..31 nodes"); i++; }
        else if (!strcmp(o, "--versus-serial")) a->versus = VERSUS_SERIAL;
        else if (!strcmp(o, "--spec-ahead") && v) { if (!parse_on_off(v, &gp->spec_ahead)) return usage_error("--spec-ahead takes on or off"); i++; }
        else if ((!strcmp(o, "-td") || !strcmp(o, "--threads-draft")) && v) { if (!parse_long(v, 1, 1024, &a->draft_threads)) return usage_error("-td takes a thread count"); i++; }
        else if (!strcmp(o, "--spec-k") && v) { long k; if (!parse_long(v, 1, 10, &k)) return usage_error("--spec-k takes 1..10"); gp->spec_k = (int)k; i++; }
        else if (!strcmp(o, "--lookahead") && v) {
            if (!parse_lookahead(v, &gp->lookahead_w, &gp->lookahead_n, &gp->lookahead_g)) return usage_error("--lookahead takes W,N,G (e.g. 5,3,4)");
            i++;
        }
        else if (!strcmp(o, "--batch") && v) { if (!parse_batches(v, a)) return 2; i++; }
        else return unknown_option("bench", o);
    }
    return -1;
}

/* bench --spec: the mode against plain decoding on one prompt. */
static int spec_bench(bench_args *a) {
    if (a->spec == OCTO_SPEC_NONE) return usage_error("bench --spec compares a mode with none: give another mode");
    if (a->prompt && a->prompt_file) return usage_error("give --prompt or --prompt-file, not both");
    if (a->n == 0) return usage_error("bench --spec needs -n > 0");
    char *text = NULL;
    size_t len;
    if (a->prompt_file && read_text_file(a->prompt_file, &text, &len)) return 1;
    a->gp.spec = (octo_spec_mode)a->spec;
    const int rc = run_spec_bench(a, text ? text : a->prompt ? a->prompt : "Once upon a time");
    free(text);
    return rc;
}

/* What one plain bench run measured, a row per repetition. */
typedef struct {
    double *pp, *tg;                  /* prompt and generation tokens/s */
    double bt[MAX_BATCHES][MAX_REPS]; /* seconds for each batch size */
    double probe[2 * MAX_REPS];       /* read bandwidth beside each decode */
    int n_probe;
} bench_runs;

#define BENCH_PREFIX 64 /* the batch table is measured after this much context */

/* The repetitions: prefill p tokens, decode n one by one (the bandwidth probed
 * just before and after: on a shared host it moves within seconds, here 33 to
 * 68 GB/s, faster than a decode run lasts, so each decode is judged against
 * the probes' median), then each batch size after a fixed prefix. */
static int bench_measure(octo_model *m, const bench_args *a, const octo_model_info *in, int32_t *tok, float *logits,
                         bench_runs *r) {
    const long p = a->p, n = a->n;
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
            if (a->with_roofline) r->probe[r->n_probe++] = measure_bandwidth(in->n_threads);
            double t0 = now_s();
            for (long i = 0; i < n && !rc; i++)
                if (octo_eval(m, tok + 1 + i, 1, logits, OCTO_LOGITS_LAST)) rc = fail("%s", octo_model_error(m));
            r->tg[k] = (double)n / (now_s() - t0);
            if (a->with_roofline) r->probe[r->n_probe++] = measure_bandwidth(in->n_threads);
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
    double gbps, base, bsec[MAX_BATCHES];
    uint64_t kv;
    octo_memory mem;
    octo_stats st; /* after every repetition: the expert figures are over the whole bench */
} bench_summary;

static bench_summary summarize_runs(const bench_args *a, const octo_model_info *in, bench_runs *r, long need) {
    bench_summary s = {.pp = a->p > 0 ? summarize(r->pp, (int)a->reps) : (spread){0, 0, 0},
                       .tg = a->n > 0 ? summarize(r->tg, (int)a->reps) : (spread){0, 0, 0}};
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

static void print_bench_json(const bench_args *a, const octo_model_info *in, const bench_summary *s) {
    const double bw = s->bw.median;
    printf("{\"model\": \"%s\", \"arch\": \"%s\", \"tensor_types\": \"%s\", \"n_params\": %llu, "
           "\"weight_bytes_per_token\": %llu, \"threads\": %d, \"cpu_path\": \"%s\", \"reps\": %ld, "
           "\"prompt_tokens\": %ld, \"prompt_tokens_per_s\": {\"median\": %.2f, \"min\": %.2f, \"max\": %.2f}, "
           "\"gen_tokens\": %ld, \"gen_tokens_per_s\": {\"median\": %.2f, \"min\": %.2f, \"max\": %.2f}, "
           "\"achieved_gbps\": %.2f, \"read_bandwidth_gbps\": %.2f, \"read_bandwidth_min_gbps\": %.2f, "
           "\"read_bandwidth_max_gbps\": %.2f, \"roofline_pct\": %.1f, "
           "\"batch_cost\": {",
           a->path, in->arch, in->tensor_types, (unsigned long long)in->n_params,
           (unsigned long long)in->weight_bytes_per_token, in->n_threads, in->cpu_path, a->reps, a->p, s->pp.median,
           s->pp.min, s->pp.max, a->n, s->tg.median, s->tg.min, s->tg.max, s->gbps, bw, s->bw.min, s->bw.max,
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

static void print_bench_text(const bench_args *a, const octo_model_info *in, const bench_summary *s) {
    const double bw = s->bw.median;
    printf("model       %s (%s, %s, %.2f M parameters)\n", a->path, in->arch, in->tensor_types, in->n_params / 1e6);
    printf("threads     %d, kernels %s, %ld repetitions (median, min..max)\n", in->n_threads, in->cpu_path, a->reps);
    if (a->p > 0) printf("prompt      %5ld tokens   %9.1f tokens/s  (%.1f..%.1f)\n", a->p, s->pp.median, s->pp.min, s->pp.max);
    if (a->n > 0) {
        printf("generation  %5ld tokens   %9.2f tokens/s  (%.2f..%.2f)\n", a->n, s->tg.median, s->tg.min, s->tg.max);
        printf("weights     %.1f MiB read per token -> %.2f GB/s", mib(in->weight_bytes_per_token), s->gbps);
        if (bw > 0)
            printf(" = %.1f%% of the read bandwidth measured beside the repetitions (median %.2f GB/s, %.2f..%.2f)",
                   100.0 * s->gbps / bw, bw, s->bw.min, s->bw.max);
        putchar('\n');
    }
    if (a->p > 0 && a->n > 0)
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
    const octo_stats *x = &s->st;
    if (x->expert_cache_hit_rate >= 0)
        printf("experts     over the whole bench: %.1f%% cache hits, %.1f%% of the reads brought ahead in time, "
               "%.2f MiB read and %.2f ms waited per token, cache %.1f MiB\n",
               100.0 * x->expert_cache_hit_rate, 100.0 * x->expert_prefetch_recall,
               mib((uint64_t)x->expert_bytes_read_per_token), x->expert_stall_ms_per_token, mib(x->expert_cache_bytes));
}

/* The plain bench: load without a draft, measure, report. */
static int plain_bench(const bench_args *a) {
    int max_batch = 0;
    for (int k = 0; k < a->n_batches; k++) max_batch = a->batches[k] > max_batch ? a->batches[k] : max_batch;
    long need = a->p > a->n + 1 ? a->p : a->n + 1;
    if (need < BENCH_PREFIX + max_batch) need = BENCH_PREFIX + max_batch;
    octo_client_options co = octo_client_options_defaults();
    co.n_threads = (int)a->threads;
    octo_client *c = octo_client_new(&co);
    octo_model_options mo = octo_model_options_defaults();
    mo.n_ctx = (int)need;
    mo.moe = a->moe;
    if (a->kv_plain) mo.kv.compress = 0; /* every entry kept at F16: the baseline for the tiered cache */
    mo.auto_draft = OCTO_DRAFT_NONE; /* bench does not speculate */
    octo_model *m = c ? octo_load_model(c, a->path, &mo) : NULL;
    if (!m) {
        int rc = fail("%s", c ? octo_last_error(c) : "out of memory");
        octo_client_free(c);
        return rc;
    }
    const octo_model_info in = octo_model_info_get(m);
    int32_t *tok = malloc(sizeof *tok * (size_t)need);
    float *logits = malloc(sizeof(float) * (size_t)in.n_vocab);
    bench_runs *r = calloc(1, sizeof *r);
    if (r) r->pp = malloc(sizeof(double) * (size_t)a->reps), r->tg = malloc(sizeof(double) * (size_t)a->reps);
    int rc = !tok || !logits || !r || !r->pp || !r->tg ? fail("out of memory") : 0;
    if (!rc) {
        fill_tokens(tok, (int)need, in.n_vocab, 1234u);
        rc = bench_measure(m, a, &in, tok, logits, r);
    }
    if (!rc) {
        bench_summary s = summarize_runs(a, &in, r, need);
        s.st = octo_model_stats(m);
        if (a->moe.trace && s.st.expert_trace_failed) rc = fail("could not write the whole expert trace to %s", a->moe.trace);
        if (!rc && a->json) print_bench_json(a, &in, &s);
        else if (!rc) print_bench_text(a, &in, &s);
    }
    if (r) free(r->pp), free(r->tg);
    free(r), free(tok), free(logits);
    octo_model_free(m);
    octo_client_free(c);
    return rc;
}

int cmd_bench(int argc, char **argv) {
    bench_args a;
    const int bad = parse_bench_args(argc, argv, &a);
    if (bad >= 0) return bad;
    if (a.roofline_only) return run_roofline((int)a.threads, a.json);
    if (!a.path) return usage_error("bench needs -m MODEL (or --roofline)");
    if ((a.prompt || a.prompt_file || a.draft) && a.spec < 0)
        return usage_error("--prompt, --prompt-file and --draft go with --spec");
    if (a.p == 0 && a.n == 0 && a.spec < 0) return usage_error("nothing to measure: -p and -n are both 0");
    const int tty = isatty(STDERR_FILENO); /* a bench runs for seconds before its table: say so */
    if (tty) fprintf(stderr, "bench: measuring %s, the table follows when it is done\n", a.path);
    return a.spec >= 0 ? spec_bench(&a) : plain_bench(&a);
}
