/*
 * bench — `octo bench`: how fast a model runs here, against the roofline.
 *
 *   octo bench -m MODEL [-p 512] [-n 128] [-t N] [-r REPS] [--batch 1,2,4,8,16] [--kv-plain] [--json]
 *   octo bench --roofline [-t N] [--json]
 *
 * Prompt processing: -p tokens evaluated as one batch from an empty cache.
 * Generation: -n tokens decoded one at a time from an empty cache. Each is
 * repeated -r times and reported as the median with the min..max spread.
 * Decode reads every weight once per token, so bytes-per-token times tokens/s
 * is the bandwidth it achieves; the machine's read bandwidth is measured in
 * the same run (before and after, the better kept) and decode is given as a
 * percentage of it. The batch table is what speculative decoding lives on:
 * the time to forward T tokens at once, as a multiple of one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "octo.h"

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

int cmd_bench(int argc, char **argv) {
    const char *path = NULL;
    long p = 512, n = 128, threads = 0, reps = 5;
    int json = 0, roofline_only = 0, with_roofline = 1, kv_plain = 0;
    int batches[MAX_BATCHES] = {1, 2, 4, 8, 16}, n_batches = 5;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-m") && v) { path = v; i++; }
        else if (!strcmp(a, "-p") && v) { if (!parse_long(v, 0, 1 << 20, &p)) return usage_error("-p takes a count >= 0"); i++; }
        else if (!strcmp(a, "-n") && v) { if (!parse_long(v, 0, 1 << 20, &n)) return usage_error("-n takes a count >= 0"); i++; }
        else if (!strcmp(a, "-t") && v) { if (!parse_long(v, 1, 1024, &threads)) return usage_error("-t takes a thread count"); i++; }
        else if (!strcmp(a, "-r") && v) { if (!parse_long(v, 1, MAX_REPS, &reps)) return usage_error("-r takes 1..%d", MAX_REPS); i++; }
        else if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--roofline")) roofline_only = 1;
        else if (!strcmp(a, "--no-roofline")) with_roofline = 0;
        else if (!strcmp(a, "--kv-plain")) kv_plain = 1;
        else if (!strcmp(a, "--batch") && v) {
            int32_t *b;
            int nb;
            if (!parse_tokens(v, &b, &nb) || nb == 0 || nb > MAX_BATCHES) return usage_error("--batch takes up to %d sizes", MAX_BATCHES);
            for (int k = 0; k < nb; k++) {
                if (b[k] < 1 || b[k] > 4096) { free(b); return usage_error("--batch sizes are 1..4096"); }
                batches[k] = b[k];
            }
            n_batches = nb;
            free(b);
            i++;
        } else return usage_error("bench: unknown option '%s'", a);
    }
    if (roofline_only) return run_roofline((int)threads, json);
    if (!path) return usage_error("bench needs -m MODEL (or --roofline)");
    if (p == 0 && n == 0) return usage_error("nothing to measure: -p and -n are both 0");

    int max_batch = 0;
    for (int k = 0; k < n_batches; k++) max_batch = batches[k] > max_batch ? batches[k] : max_batch;
    const int prefix = 64; /* the batch table is measured after this much context */
    long need = p > n + 1 ? p : n + 1;
    if (need < prefix + max_batch) need = prefix + max_batch;

    octo_client_options co = octo_client_options_defaults();
    co.n_threads = (int)threads;
    octo_client *c = octo_client_new(&co);
    octo_model_options mo = octo_model_options_defaults();
    mo.n_ctx = (int)need;
    if (kv_plain) mo.kv.compress = 0; /* every entry kept at F16: the baseline for the tiered cache */
    mo.auto_draft = OCTO_DRAFT_NONE; /* bench does not speculate */
    octo_model *m = c ? octo_load_model(c, path, &mo) : NULL;
    if (!m) {
        int rc = fail("%s", c ? octo_last_error(c) : "out of memory");
        octo_client_free(c);
        return rc;
    }
    octo_model_info in = octo_model_info_get(m);
    int32_t *tok = malloc(sizeof *tok * (size_t)need);
    float *logits = malloc(sizeof(float) * (size_t)in.n_vocab);
    double *pp = malloc(sizeof(double) * (size_t)reps), *tg = malloc(sizeof(double) * (size_t)reps);
    double bt[MAX_BATCHES][MAX_REPS];
    int rc = 0;
    if (!tok || !logits || !pp || !tg) rc = fail("out of memory");
    double bw_before = !rc && with_roofline ? measure_bandwidth(in.n_threads) : 0.0;

    if (!rc) {
        fill_tokens(tok, (int)need, in.n_vocab, 1234u);
        /* warm up: page the weights in, size the buffers */
        octo_reset(m);
        if (octo_eval(m, tok, p > 0 ? (int)(p < 32 ? p : 32) : 1, logits, OCTO_LOGITS_LAST)) rc = fail("%s", octo_model_error(m));
    }
    for (int r = 0; r < reps && !rc; r++) {
        if (p > 0) {
            octo_reset(m);
            double t0 = now_s();
            if (octo_eval(m, tok, (int)p, logits, OCTO_LOGITS_LAST)) { rc = fail("%s", octo_model_error(m)); break; }
            pp[r] = (double)p / (now_s() - t0);
        }
        if (n > 0) {
            octo_reset(m);
            if (octo_eval(m, tok, 1, logits, OCTO_LOGITS_LAST)) { rc = fail("%s", octo_model_error(m)); break; }
            double t0 = now_s();
            for (long i = 0; i < n && !rc; i++)
                if (octo_eval(m, tok + 1 + i, 1, logits, OCTO_LOGITS_LAST)) rc = fail("%s", octo_model_error(m));
            tg[r] = (double)n / (now_s() - t0);
        }
        /* batch cost: T tokens at once after a fixed prefix, rewound each time */
        octo_reset(m);
        if (!rc && octo_eval(m, tok, prefix, logits, OCTO_LOGITS_LAST)) rc = fail("%s", octo_model_error(m));
        for (int k = 0; k < n_batches && !rc; k++) {
            double t0 = now_s();
            if (octo_eval(m, tok + prefix, batches[k], logits, OCTO_LOGITS_LAST)) { rc = fail("%s", octo_model_error(m)); break; }
            bt[k][r] = now_s() - t0;
            octo_truncate(m, prefix);
        }
    }
    double bw_after = !rc && with_roofline ? measure_bandwidth(in.n_threads) : 0.0;
    if (!rc) {
        spread spp = p > 0 ? summarize(pp, (int)reps) : (spread){0, 0, 0};
        spread stg = n > 0 ? summarize(tg, (int)reps) : (spread){0, 0, 0};
        double bw = bw_before > bw_after ? bw_before : bw_after;
        double gbps = stg.median * (double)in.weight_bytes_per_token / 1e9;
        double base = 0;
        double ratio[MAX_BATCHES];
        for (int k = 0; k < n_batches; k++) {
            spread s = summarize(bt[k], (int)reps);
            ratio[k] = s.median;
            if (batches[k] == 1) base = s.median;
        }
        octo_memory mem = octo_memory_usage();
        uint64_t kv = in.kv_bytes_per_token * (uint64_t)need;
        if (json) {
            printf("{\"model\": \"%s\", \"arch\": \"%s\", \"tensor_types\": \"%s\", \"n_params\": %llu, "
                   "\"weight_bytes_per_token\": %llu, \"threads\": %d, \"cpu_path\": \"%s\", \"reps\": %ld, "
                   "\"prompt_tokens\": %ld, \"prompt_tokens_per_s\": {\"median\": %.2f, \"min\": %.2f, \"max\": %.2f}, "
                   "\"gen_tokens\": %ld, \"gen_tokens_per_s\": {\"median\": %.2f, \"min\": %.2f, \"max\": %.2f}, "
                   "\"achieved_gbps\": %.2f, \"read_bandwidth_gbps\": %.2f, \"roofline_pct\": %.1f, "
                   "\"batch_cost\": {",
                   path, in.arch, in.tensor_types, (unsigned long long)in.n_params,
                   (unsigned long long)in.weight_bytes_per_token, in.n_threads, in.cpu_path, reps, p, spp.median,
                   spp.min, spp.max, n, stg.median, stg.min, stg.max, gbps, bw, bw > 0 ? 100.0 * gbps / bw : 0.0);
            for (int k = 0; k < n_batches; k++)
                printf("%s\"%d\": %.3f", k ? ", " : "", batches[k], base > 0 ? ratio[k] / base : 0.0);
            printf("}, \"peak_rss_bytes\": %llu, \"kv_bytes\": %llu}\n", (unsigned long long)mem.peak_rss_bytes,
                   (unsigned long long)kv);
        } else {
            printf("model       %s (%s, %s, %.2f M parameters)\n", path, in.arch, in.tensor_types, in.n_params / 1e6);
            printf("threads     %d, kernels %s, %ld repetitions (median, min..max)\n", in.n_threads, in.cpu_path, reps);
            if (p > 0) printf("prompt      %5ld tokens   %9.1f tokens/s  (%.1f..%.1f)\n", p, spp.median, spp.min, spp.max);
            if (n > 0) {
                printf("generation  %5ld tokens   %9.2f tokens/s  (%.2f..%.2f)\n", n, stg.median, stg.min, stg.max);
                printf("weights     %.1f MiB read per token -> %.2f GB/s", mib(in.weight_bytes_per_token), gbps);
                if (bw > 0) printf(" = %.1f%% of the measured %.2f GB/s read bandwidth", 100.0 * gbps / bw, bw);
                putchar('\n');
            }
            if (p > 0 && n > 0)
                printf("prefill     %.1fx faster per token than decode\n", spp.median / (stg.median > 0 ? stg.median : 1));
            printf("batch cost  ");
            for (int k = 0; k < n_batches; k++)
                printf("%s%d: %.2fx", k ? "  " : "", batches[k], base > 0 ? ratio[k] / base : 0.0);
            printf("  (time to forward T tokens / time for 1, after %d tokens of context)\n", prefix);
            printf("memory      peak RSS %.1f MiB = weights %.1f MiB + KV %.1f MiB + other %.1f MiB\n",
                   mib(mem.peak_rss_bytes), mib(in.weight_bytes), mib(kv),
                   mib(mem.peak_rss_bytes > in.weight_bytes + kv ? mem.peak_rss_bytes - in.weight_bytes - kv : 0));
        }
    }
    free(tok);
    free(logits);
    free(pp);
    free(tg);
    octo_model_free(m);
    octo_client_free(c);
    return rc;
}
